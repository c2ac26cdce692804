/*
 * A copy between daemon-owned buffers in a submission of its own on one
 * device's queue, outside every stream: how collectives and ToClient move
 * bytes through host staging imported into several devices, or through
 * shared windows between logical devices of one GPU. Every such command
 * is recorded here, as a stream's are in stream.c.
 */
#ifndef RUDA_COPY_H
#define RUDA_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

struct ruda_device;
struct ruda_ref;
struct ruda_waiter;

struct ruda_copy {
	VkBuffer src, dst;
	VkBufferCopy region;      /* nothing is copied when its size is 0 */
	struct ruda_ref *hold[2]; /* kept alive until the copy is done (NULL: none) */
	/* src was written by an earlier copy on this queue: wait for it */
	int after_transfer;
	/* src and dst are device memory (buffers, shared windows), not host
	 * memory: the copy may go by kernel (copy_kernel.h) */
	bool device_local;
	/* zero dst from `zero_from` to its end first (the word a copy does not
	 * reach may hold another client's bytes) */
	int zero;
	uint64_t zero_from;
};

/*
 * Record `c` into a submission of its own on `device` and submit it;
 * `waiter` runs once it is done or failed. Nothing is recorded, and the
 * waiter never runs, when it returns -EAGAIN (no submission could be begun,
 * or src or dst is missing) or -ENOMEM (out of memory). Otherwise it was
 * submitted: 0, *value (when not NULL) its timeline value; or -EIO, the
 * submission failed at once and the waiter has run already.
 */
int ruda__copy_submit(struct ruda_device *device, const struct ruda_copy *c,
		      struct ruda_waiter *waiter, uint64_t *value);

#endif
