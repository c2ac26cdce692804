#include "exec/copy.h"

#include <errno.h>

#include "device/device.h"
#include "exec/copy_kernel.h"
#include "exec/stream.h"

int ruda__copy_submit(struct ruda_device *d, const struct ruda_copy *c, struct ruda_waiter *waiter,
		      uint64_t *value)
{
	struct ruda_submission *sub = c->src != VK_NULL_HANDLE && c->dst != VK_NULL_HANDLE
					      ? ruda__submission_begin(d)
					      : NULL;
	if (!sub)
		return -EAGAIN;
	for (int i = 0; i < 2; i++)
		if (c->hold[i] && ruda__submission_hold(sub, c->hold[i]) < 0) {
			ruda__submission_discard(sub, RUDA_ERROR_OUT_OF_MEMORY);
			return -ENOMEM;
		}
	if (c->after_transfer)
		ruda__record_copy_barrier(sub->cmd);
	if (c->zero) {
		vkCmdFillBuffer(sub->cmd, c->dst, c->zero_from, VK_WHOLE_SIZE, 0);
		ruda__record_barrier(sub->cmd); /* covers a kernel copy after it */
	}
	/* the submission's closing barrier (all commands -> host) and the
	 * waits of later ones (all commands) cover a kernel copy as well */
	if (c->region.size && c->device_local)
		ruda__device_copy_record(d, sub->cmd, c->src, c->dst, &c->region, 1);
	else if (c->region.size)
		vkCmdCopyBuffer(sub->cmd, c->src, c->dst, 1, &c->region);
	ruda__submission_add_waiter(sub, waiter);
	if (ruda__submission_submit(sub) != 0)
		return -EIO;
	if (value)
		*value = sub->value;
	return 0;
}
