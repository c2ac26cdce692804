#include "exec/indirect.h"

#include <stddef.h>
#include <stdlib.h>

#include "memory/buffer.h"
#include "device/device.h"
#include "common/log.h"

static const uint32_t clamp_spirv[] =
#include "indirect_clamp.spv.inc"
	;

static void indirect_destroy(struct ruda_device *d, struct ruda_indirect *in)
{
	if (!in)
		return;
	ruda__device_listener_remove(&in->device_gone);
	ruda__pipeline_objects_destroy(d->vk, &in->clamp);
	if (in->counts)
		ruda__buffer_put(in->counts);
	free(in);
}

static struct ruda_indirect *create(struct ruda_device *d)
{
	struct ruda_indirect *in = calloc(1, sizeof(*in));
	if (!in)
		return NULL;
	/* a slot per queue, each where a storage binding may start */
	uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
	in->slot = align > 16 ? align : 16;
	struct ruda_pipeline_source clamp = {
		.spirv = clamp_spirv,
		.spirv_size = sizeof(clamp_spirv),
		.entry_point = "main",
		.binding_count = 2,
		.push_constant_size = 16,
	};
	/* a one-instruction kernel, compiled once per device when it opens */
	if (ruda__pipeline_build(d->vk, d->pipeline_cache, &clamp, &in->clamp) != VK_SUCCESS) {
		log_error("device %u: cannot make the kernel that clamps dynamic counts",
			  d->index);
		indirect_destroy(d, in);
		return NULL;
	}
	return in;
}

/* Its device is going (idle): nothing runs that uses it. */
static void device_gone(struct ruda_device_listener *l, struct ruda_device *d)
{
	struct ruda_indirect *in = (struct ruda_indirect *)((char *)l -
		offsetof(struct ruda_indirect, device_gone));
	d->indirect = NULL;
	indirect_destroy(d, in);
}

struct ruda_indirect *ruda__indirect_build(struct ruda_device *d)
{
	if (!d->indirect) {
		d->indirect = create(d);
		if (d->indirect) {
			d->indirect->device_gone.notify = device_gone;
			ruda__device_listen_destroy(d, &d->indirect->device_gone);
		}
	}
	return d->indirect;
}

struct ruda_indirect *ruda__indirect_get(struct ruda_device *d)
{
	struct ruda_indirect *in = ruda__indirect_build(d);
	/* the slots' buffer waits for the first launch that needs it: made at
	 * open, it would hold a page and count as buffer bytes on an idle
	 * daemon; a few hundred bytes from a shared page cost microseconds */
	if (in && !in->counts &&
	    ruda__buffer_create(d, in->slot * d->nqueues, &in->counts) != RUDA_OK) {
		log_error("device %u: no memory for the clamped dynamic counts", d->index);
		return NULL;
	}
	return in;
}

uint64_t ruda__indirect_slot(const struct ruda_indirect *in, uint32_t queue)
{
	return in->slot * queue;
}

void ruda__indirect_record_clamp(struct ruda_device *d, struct ruda_indirect *in,
				 VkCommandBuffer cmd, struct ruda_buffer *src, uint64_t offset,
				 uint32_t queue)
{
	/* bound from an aligned offset: the words are found by index */
	uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
	uint64_t base = align ? offset - offset % align : offset;
	VkDescriptorBufferInfo infos[2] = {
		{.buffer = src->vk, .offset = base, .range = offset - base + 12},
		{.buffer = in->counts->vk, .offset = ruda__indirect_slot(in, queue), .range = 12},
	};
	const uint32_t *max = d->props.limits.maxComputeWorkGroupCount;
	uint32_t push[4] = {(uint32_t)((offset - base) / 4), max[0], max[1], max[2]};
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, in->clamp.pipeline);
	VkPipelineLayout layout = in->clamp.layout;
	ruda__push_storage_buffers(d->cmd_push_descriptor_set, cmd, layout, infos, 2);
	vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), push);
	vkCmdDispatch(cmd, 1, 1, 1);
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_INDIRECT_COMMAND_READ_BIT,
	};
	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
			     VK_PIPELINE_STAGE_DRAW_INDIRECT_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
}
