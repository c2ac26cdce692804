/*
 * Dynamic counts (indirect dispatch): a launch whose workgroup counts are
 * three 32-bit words in a device buffer. The device never reads them
 * directly: rudad's own clamp kernel first copies them, each clamped to the
 * device's maxComputeWorkGroupCount, into a small indirect buffer the
 * daemon owns, and the launch dispatches from that. One slot of that
 * buffer per device queue is enough: every command on a queue begins with a
 * barrier that orders it after everything before it on that queue, and
 * queues run side by side, so each needs its own.
 */
#ifndef RUDA_INDIRECT_H
#define RUDA_INDIRECT_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/status.h>

#include "device/device.h"
#include "exec/pipeline_build.h"

struct ruda_buffer;

struct ruda_indirect {
	struct ruda_pipeline_objects clamp; /* owned: the clamp kernel */
	struct ruda_buffer *counts; /* owned: where the clamped counts go, a slot per queue */
	uint64_t slot;              /* bytes between slots (the binding alignment) */
	struct ruda_device_listener device_gone; /* tears it down with its device */
};

/* The device's clamp kernel, built once (rudad builds it when a GPU
 * opens); NULL when it cannot be made. It goes with the device (a destroy
 * listener). */
struct ruda_indirect *ruda__indirect_build(struct ruda_device *device);
/* The kernel and its counts buffer, the buffer made on first use; NULL when
 * either cannot be made. */
struct ruda_indirect *ruda__indirect_get(struct ruda_device *device);

/* Record the clamp of the counts at byte `offset` of `src` (validated: a
 * multiple of 4, 12 bytes inside it) and the barrier that makes them
 * readable as a dispatch's indirect arguments, in the slot of `queue`. The
 * dispatch itself is vkCmdDispatchIndirect(cmd, indirect->counts->vk,
 * ruda__indirect_slot(indirect, queue)). */
void ruda__indirect_record_clamp(struct ruda_device *device, struct ruda_indirect *indirect,
				 VkCommandBuffer cmd, struct ruda_buffer *src, uint64_t offset,
				 uint32_t queue);
/* Byte offset of `queue`'s slot in the counts buffer. */
uint64_t ruda__indirect_slot(const struct ruda_indirect *indirect, uint32_t queue);

#endif
