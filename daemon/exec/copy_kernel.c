#include "exec/copy_kernel.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

static const uint32_t copy_kernel_spirv[] =
#include "copy_kernel.spv.inc"
	;

#define LOCAL_SIZE 256u
#define UNIT 16ull /* bytes an invocation copies at a time (uvec4) */
#define SLICE_ALIGN 4096ull
/* the copy_placement bench's grid: enough to fill the H200, and the
 * grid-stride loop covers the rest of a slice */
#define MAX_GROUPS 65535u

static void copy_kernel_destroy(struct ruda_device *d, struct ruda_copy_kernel *k)
{
	ruda__device_listener_remove(&k->device_gone);
	ruda__pipeline_objects_destroy(d->vk, &k->kernel);
	free(k);
}

/* Its device is going (idle): nothing runs that uses it. */
static void device_gone(struct ruda_device_listener *l, struct ruda_device *d)
{
	struct ruda_copy_kernel *k =
		(struct ruda_copy_kernel *)((char *)l - offsetof(struct ruda_copy_kernel, device_gone));
	d->copy_kernel = NULL;
	copy_kernel_destroy(d, k);
}

/* Make the kernel and its slicing into `k`; false when it cannot be. */
static bool make_kernel(struct ruda_device *d, struct ruda_copy_kernel *k)
{
	struct ruda_pipeline_source src = {
		.spirv = copy_kernel_spirv,
		.spirv_size = sizeof(copy_kernel_spirv),
		.entry_point = "main",
		.binding_count = 2,
		.push_constant_size = 4,
	};
	if (ruda__pipeline_build(d->vk, d->pipeline_cache, &src, &k->kernel) != VK_SUCCESS) {
		ruda__pipeline_objects_destroy(d->vk, &k->kernel);
		return false;
	}
	uint64_t align = d->props.limits.minStorageBufferOffsetAlignment;
	k->align = align > UNIT ? align : UNIT;
	k->slice = d->props.limits.maxStorageBufferRange;
	k->slice -= k->slice % SLICE_ALIGN;
	if (k->slice % k->align)
		k->slice -= k->slice % k->align;
	uint32_t groups = d->props.limits.maxComputeWorkGroupCount[0];
	k->max_groups = groups < MAX_GROUPS ? groups : MAX_GROUPS;
	return k->slice > 0 && k->max_groups > 0;
}

static struct ruda_copy_kernel *create(struct ruda_device *d)
{
	struct ruda_copy_kernel *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	const char *mode = getenv("RUDA_DEVICE_COPY");
	/* by default the kernel on a GPU (the H100's vkCmdCopyBuffer of 1 GiB:
	 * 4.1 ms, the kernel's 1.3 ms); on a CPU device vkCmdCopyBuffer is a
	 * memcpy, faster than a kernel's loop */
	bool wanted = d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
	if (mode && strcmp(mode, "kernel") == 0)
		wanted = true;
	else if (mode && strcmp(mode, "command") == 0)
		wanted = false;
	else if (mode)
		log_warn("RUDA_DEVICE_COPY=%s: neither kernel nor command; the default (%s)", mode,
			 wanted ? "kernel" : "command");
	if (wanted) {
		k->on = make_kernel(d, k);
		if (!k->on)
			log_error("device %u: cannot make the copy kernel: copies stay on "
				  "vkCmdCopyBuffer",
				  d->index);
	}
	k->device_gone.notify = device_gone;
	ruda__device_listen_destroy(d, &k->device_gone);
	if (k->on)
		log_debug("device %u: device-local copies of %llu B or more by the copy kernel "
			  "(RUDA_DEVICE_COPY=%s), %llu-byte slices, offsets aligned to %llu",
			  d->index, RUDA_COPY_KERNEL_MIN_BYTES, mode ? mode : "unset",
			  (unsigned long long)k->slice, (unsigned long long)k->align);
	else
		log_debug("device %u: device-local copies by vkCmdCopyBuffer (RUDA_DEVICE_COPY=%s)",
			  d->index, mode ? mode : "unset");
	return k;
}

struct ruda_copy_kernel *ruda__copy_kernel_get(struct ruda_device *d)
{
	if (!d->copy_kernel)
		d->copy_kernel = create(d);
	return d->copy_kernel;
}

/* The bytes of `r` the kernel copies: its whole units, where it may; 0:
 * all of it by vkCmdCopyBuffer. */
static uint64_t kernel_bytes(const struct ruda_copy_kernel *k, const VkBufferCopy *r)
{
	if (!k || !k->on || r->size < RUDA_COPY_KERNEL_MIN_BYTES || r->srcOffset % k->align ||
	    r->dstOffset % k->align)
		return 0;
	return r->size - r->size % UNIT;
}

/* dst[dst_offset, +bytes) = src[src_offset, +bytes) by kernel, a slice a
 * dispatch (bytes a multiple of UNIT, offsets of k->align); the number of
 * dispatches. */
static uint32_t record_kernel(struct ruda_device *d, struct ruda_copy_kernel *k,
			      VkCommandBuffer cmd, VkBuffer src, uint64_t src_offset, VkBuffer dst,
			      uint64_t dst_offset, uint64_t bytes)
{
	uint32_t dispatches = 0;
	for (uint64_t at = 0; at < bytes; at += k->slice, dispatches++) {
		uint64_t len = bytes - at < k->slice ? bytes - at : k->slice;
		VkDescriptorBufferInfo infos[2] = {
			{.buffer = src, .offset = src_offset + at, .range = len},
			{.buffer = dst, .offset = dst_offset + at, .range = len},
		};
		/* a slice is within maxStorageBufferRange (32 bits): its
		 * units fit */
		uint32_t units = (uint32_t)(len / UNIT);
		uint64_t groups = (units + LOCAL_SIZE - 1) / LOCAL_SIZE;
		ruda__push_storage_buffers(d->cmd_push_descriptor_set, cmd, k->kernel.layout, infos,
					   2);
		vkCmdPushConstants(cmd, k->kernel.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
				   sizeof(units), &units);
		vkCmdDispatch(cmd, groups < k->max_groups ? (uint32_t)groups : k->max_groups, 1, 1);
	}
	return dispatches;
}

bool ruda__device_copy_record(struct ruda_device *d, VkCommandBuffer cmd, VkBuffer src,
			      VkBuffer dst, const VkBufferCopy *regions, uint32_t n)
{
	struct ruda_copy_kernel *k = n ? ruda__copy_kernel_get(d) : NULL;
	uint32_t first = 0;
	while (first < n && !kernel_bytes(k, &regions[first]))
		first++;
	if (first == n) { /* the usual case: all on vkCmdCopyBuffer, as one command */
		if (n)
			vkCmdCopyBuffer(cmd, src, dst, n, regions);
		return false;
	}
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->kernel.pipeline);
	uint64_t total = 0, by_kernel = 0;
	for (uint32_t i = 0; i < n; i++)
		total += regions[i].size;
	uint32_t dispatches = 0;
	uint32_t run = 0; /* the first region of the run of vkCmdCopyBuffer ones */
	for (uint32_t i = first; i < n; i++) {
		const VkBufferCopy *r = &regions[i];
		uint64_t body = kernel_bytes(k, r);
		if (!body)
			continue;
		if (i > run)
			vkCmdCopyBuffer(cmd, src, dst, i - run, regions + run);
		run = i + 1;
		dispatches += record_kernel(d, k, cmd, src, r->srcOffset, dst, r->dstOffset, body);
		by_kernel += body;
		if (body < r->size) { /* the last bytes, less than a unit */
			VkBufferCopy tail = {.srcOffset = r->srcOffset + body,
					     .dstOffset = r->dstOffset + body,
					     .size = r->size - body};
			vkCmdCopyBuffer(cmd, src, dst, 1, &tail);
		}
	}
	if (n > run)
		vkCmdCopyBuffer(cmd, src, dst, n - run, regions + run);
	log_debug("device %u: copy kernel %llu B (slices %u), vkCmdCopyBuffer %llu B", d->index,
		  (unsigned long long)by_kernel, dispatches,
		  (unsigned long long)(total - by_kernel));
	return true;
}
