/* Timestamp queries, in pairs around each submission: the device time it
 * took, for accounting. One pair per submission in flight. */
#include "device/device.h"
#include "device/device_internal.h"

#include <stdlib.h>

#include "common/log.h"

/* Timestamp query pairs: one per submission in flight. */
#define QUERY_PAIRS 4096u

void ruda__device_timestamps_init(struct ruda_device *d, uint32_t valid_bits)
{
	VkQueryPoolCreateInfo queries = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP,
		.queryCount = 2 * QUERY_PAIRS,
	};
	if (valid_bits && d->props.limits.timestampPeriod > 0 &&
	    (d->free_pairs = malloc(QUERY_PAIRS * sizeof(uint32_t))) &&
	    vkCreateQueryPool(d->vk, &queries, NULL, &d->timestamps) == VK_SUCCESS) {
		d->timestamp_period = d->props.limits.timestampPeriod;
		d->account_with_timestamps = d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
		d->timestamp_mask = valid_bits >= 64 ? UINT64_MAX : (1ull << valid_bits) - 1;
		for (uint32_t i = 0; i < QUERY_PAIRS; i++)
			d->free_pairs[d->nfree_pairs++] = QUERY_PAIRS - 1 - i;
	} else {
		d->timestamps = VK_NULL_HANDLE;
		log_warn("device %s: no timestamps; GPU time is not accounted",
			 d->props.deviceName);
	}
}

void ruda__device_timestamps_finish(struct ruda_device *d)
{
	if (d->timestamps)
		vkDestroyQueryPool(d->vk, d->timestamps, NULL);
	d->timestamps = VK_NULL_HANDLE;
	free(d->free_pairs);
	d->free_pairs = NULL;
	d->nfree_pairs = 0;
}

int32_t ruda__device_query_pair_get(struct ruda_device *d)
{
	if (!d->timestamps || !d->nfree_pairs)
		return -1;
	return (int32_t)d->free_pairs[--d->nfree_pairs];
}

void ruda__device_query_pair_put(struct ruda_device *d, int32_t pair)
{
	if (pair >= 0)
		d->free_pairs[d->nfree_pairs++] = (uint32_t)pair;
}

void ruda__device_query_pair_begin(struct ruda_device *d, VkCommandBuffer cmd, int32_t pair)
{
	if (pair < 0)
		return;
	vkCmdResetQueryPool(cmd, d->timestamps, 2 * (uint32_t)pair, 2);
	/* latched once all earlier commands on the queue are done (other
	 * sessions' submissions included), not when this one is first seen:
	 * the pair then holds this submission's time only */
	vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->timestamps,
			    2 * (uint32_t)pair);
}

void ruda__device_query_pair_end(struct ruda_device *d, VkCommandBuffer cmd, int32_t pair)
{
	if (pair >= 0)
		vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->timestamps,
				    2 * (uint32_t)pair + 1);
}

int ruda__device_query_pair_times(struct ruda_device *d, int32_t pair, uint64_t *begin_ns,
				  uint64_t *end_ns)
{
	uint64_t ticks[2];
	if (pair < 0 || vkGetQueryPoolResults(d->vk, d->timestamps, 2 * (uint32_t)pair, 2,
					      sizeof(ticks), ticks, sizeof(uint64_t),
					      VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
		return -1;
	uint64_t begin = ticks[0] & d->timestamp_mask, end = ticks[1] & d->timestamp_mask;
	if (end < begin)
		return -1; /* the counter wrapped between them */
	*begin_ns = (uint64_t)((double)begin * d->timestamp_period);
	*end_ns = (uint64_t)((double)end * d->timestamp_period);
	return 0;
}
