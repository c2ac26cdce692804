#include "exec/combine.h"

#include <stddef.h>
#include <stdlib.h>

#include <ruda/common.h>

#include "common/log.h"

static const uint32_t combine_spirv[] =
#include "combine.spv.inc"
	;
static const uint32_t combine_subnormals_spirv[] =
#include "combine_subnormals.spv.inc"
	;
static const uint32_t combine_flushing_spirv[] =
#include "combine_flushing.spv.inc"
	;

#define LOCAL_SIZE 256u
#define SLICE_ALIGN 4096ull

bool ruda__combine_supports(uint32_t elem, uint32_t op)
{
	return (elem == RUDA_ELEM_F32 || elem == RUDA_ELEM_I32 || elem == RUDA_ELEM_U32) &&
	       op <= RUDA_REDUCE_MIN;
}

static void combine_destroy(struct ruda_device *d, struct ruda_combine *c)
{
	ruda__device_listener_remove(&c->device_gone);
	ruda__pipeline_objects_destroy(d->vk, &c->kernel);
	free(c);
}

/* Its device is going (idle): nothing runs that uses it. */
static void device_gone(struct ruda_device_listener *l, struct ruda_device *d)
{
	struct ruda_combine *c =
		(struct ruda_combine *)((char *)l - offsetof(struct ruda_combine, device_gone));
	d->combine = NULL;
	combine_destroy(d, c);
}

static struct ruda_combine *create(struct ruda_device *d, const char **why)
{
	struct ruda_combine *c = calloc(1, sizeof(*c));
	if (!c) {
		*why = "out of memory";
		return NULL;
	}
	/* the host's loop keeps f32 subnormals: without, a product of them
	 * could differ (sums, maxima and minima are the host's either way) */
	c->keeps_subnormals = d->keeps_f32_subnormals;
	struct ruda_pipeline_source src = {
		.spirv = combine_spirv,
		.spirv_size = sizeof(combine_spirv),
		.entry_point = "main",
		.binding_count = 2,
		.push_constant_size = 12,
	};
	const char *subnormals = "maybe flushed";
	if (c->keeps_subnormals) {
		src.spirv = combine_subnormals_spirv;
		src.spirv_size = sizeof(combine_subnormals_spirv);
		subnormals = "kept";
	} else if (d->test_flushes_f32_subnormals) {
		src.spirv = combine_flushing_spirv;
		src.spirv_size = sizeof(combine_flushing_spirv);
		subnormals = "flushed (RUDA_TEST_FLUSH_SUBNORMALS)";
	}
	if (ruda__pipeline_build(d->vk, d->pipeline_cache, &src, &c->kernel) != VK_SUCCESS) {
		log_error("device %u: cannot make the all-reduce combine kernel", d->index);
		ruda__pipeline_objects_destroy(d->vk, &c->kernel);
		free(c);
		*why = "the combine kernel could not be made";
		return NULL;
	}
	uint64_t range = d->props.limits.maxStorageBufferRange;
	uint64_t groups = d->props.limits.maxComputeWorkGroupCount[0];
	uint64_t slice = groups * LOCAL_SIZE * 4 < range ? groups * LOCAL_SIZE * 4 : range;
	c->slice = slice - slice % SLICE_ALIGN;
	uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
	if (align > SLICE_ALIGN && c->slice % align)
		c->slice -= c->slice % align;
	c->device_gone.notify = device_gone;
	ruda__device_listen_destroy(d, &c->device_gone);
	log_debug("device %u: all-reduce combine kernel, %llu-byte slices, f32 subnormals %s",
		  d->index, (unsigned long long)c->slice, subnormals);
	return c;
}

struct ruda_combine *ruda__combine_get(struct ruda_device *d, const char **why)
{
	const char *no = NULL;
	if (!d->combine)
		d->combine = create(d, &no);
	if (why)
		*why = no;
	return d->combine;
}

void ruda__combine_record(struct ruda_device *d, struct ruda_combine *c, VkCommandBuffer cmd,
			  VkBuffer acc, uint64_t acc_offset, VkBuffer in, uint64_t in_offset,
			  uint64_t bytes, uint32_t elem, uint32_t op)
{
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, c->kernel.pipeline);
	for (uint64_t at = 0; at < bytes; at += c->slice) {
		uint64_t len = bytes - at < c->slice ? bytes - at : c->slice;
		VkDescriptorBufferInfo infos[2] = {
			{.buffer = acc, .offset = acc_offset + at, .range = len},
			{.buffer = in, .offset = in_offset + at, .range = len},
		};
		uint32_t count = (uint32_t)(len / 4);
		uint32_t push[3] = {count, op, elem};
		ruda__push_storage_buffers(d->cmd_push_descriptor_set, cmd, c->kernel.layout, infos,
					   2);
		vkCmdPushConstants(cmd, c->kernel.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(push), push);
		vkCmdDispatch(cmd, (count + LOCAL_SIZE - 1) / LOCAL_SIZE, 1, 1);
	}
}
