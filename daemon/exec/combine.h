/*
 * rudad's combine kernel (combine.comp): acc = acc op in, element by
 * element, for an all-reduce between logical devices of one physical device
 * (requests/collective_peer.c), which runs it once per other member in
 * member order so that the result is the host path's bit for bit. Made on
 * first use per device and torn down with it (a destroy listener), as the
 * clamp kernel of dynamic counts is (indirect.h).
 */
#ifndef RUDA_COMBINE_H
#define RUDA_COMBINE_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "device/device.h"
#include "exec/pipeline_build.h"

struct ruda_combine {
	struct ruda_pipeline_objects kernel; /* owned */
	/* bytes one dispatch covers: within maxStorageBufferRange and the
	 * workgroup count, a multiple of 4 KiB (so slices start aligned) */
	uint64_t slice;
	/* f32 subnormals kept (shaderDenormPreserveFloat32): f32 results are
	 * the host's bit for bit; without, sums, maxima and minima still are
	 * but a product may differ (a subnormal operand or result flushed) */
	bool keeps_subnormals;
	struct ruda_device_listener device_gone; /* tears it down with its device */
};

/* Whether the kernel reduces elements of `elem` with `op` (RUDA_ELEM_*,
 * RUDA_REDUCE_*): f32, i32, u32 with sum, prod, max, min; f16 and mean
 * stay on the host. */
bool ruda__combine_supports(uint32_t elem, uint32_t op);

/* The device's kernel, made on first use (compiled on the loop: a few
 * instructions, once per device); NULL when it cannot be, *why (static
 * text) saying why. */
struct ruda_combine *ruda__combine_get(struct ruda_device *device, const char **why);

/* Record acc[acc_offset, +bytes) = acc op in[in_offset, +bytes) into `cmd`
 * in slices (each offset a multiple of 4 KiB or of the device's
 * minStorageBufferOffsetAlignment; bytes a multiple of 4). No barrier is
 * recorded: the caller orders it after what wrote acc and in, and what
 * reads acc after it. */
void ruda__combine_record(struct ruda_device *device, struct ruda_combine *combine,
			  VkCommandBuffer cmd, VkBuffer acc, uint64_t acc_offset, VkBuffer in,
			  uint64_t in_offset, uint64_t bytes, uint32_t elem, uint32_t op);

#endif
