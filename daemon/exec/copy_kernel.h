/*
 * Copies between device-local buffers, by rudad's copy kernel
 * (copy_kernel.comp) or by vkCmdCopyBuffer: the one recorder every such
 * copy goes through (streams' ToClient and all-reduce copies, copy.c's
 * submissions, the all-reduce's write back). On the H200 vkCmdCopyBuffer
 * runs on a copy engine at 119 GB/s for 1 GiB, where a kernel copies
 * about 2 TB/s; on a GPU large aligned copies go to the kernel, on a CPU
 * device (a memcpy there) to vkCmdCopyBuffer. `RUDA_DEVICE_COPY=kernel`
 * or `command` in rudad's environment chooses one for every device. Read
 * once per device, on its first copy; the
 * kernel is made then and torn down with the device (a destroy listener),
 * as the combine kernel is (combine.h).
 */
#ifndef RUDA_COPY_KERNEL_H
#define RUDA_COPY_KERNEL_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "device/device.h"
#include "exec/pipeline_build.h"

/* Below this a copy stays on vkCmdCopyBuffer even with the kernel on: a
 * dispatch and its descriptors cost about what a small copy does, and the
 * copy engine's rate matters only for large ones (406 GB/s already at
 * 64 MiB on the H200). A first guess, to be measured. */
#define RUDA_COPY_KERNEL_MIN_BYTES (1ull << 20)

struct ruda_copy_kernel {
	/* the kernel wanted (a GPU, or RUDA_DEVICE_COPY=kernel) and made:
	 * eligible copies go by kernel; else every copy is a vkCmdCopyBuffer */
	bool on;
	struct ruda_pipeline_objects kernel; /* owned; none while off */
	/* bytes one dispatch binds: within maxStorageBufferRange, a multiple
	 * of 4 KiB and of `align` (so slices start where bindings may) */
	uint64_t slice;
	/* what src and dst offsets must be multiples of: 16 (a unit) and
	 * minStorageBufferOffsetAlignment */
	uint64_t align;
	uint32_t max_groups; /* groups a dispatch has at most (grid-stride) */
	struct ruda_device_listener device_gone; /* tears it down with its device */
};

/* The device's choice, made on first use (RUDA_DEVICE_COPY read, the
 * kernel compiled on the loop, the choice logged at debug level); NULL
 * when out of memory (copies then stay on vkCmdCopyBuffer). */
struct ruda_copy_kernel *ruda__copy_kernel_get(struct ruda_device *device);

/*
 * Record the copies `regions` (n, none overlapping) from src into dst into
 * `cmd`. Both must be device memory rudad made with RUDA_BUFFER_USAGE (its
 * buffers, shared windows), never host memory (the arena, host staging),
 * which stays on vkCmdCopyBuffer. With the kernel on, a region of
 * RUDA_COPY_KERNEL_MIN_BYTES or more whose offsets are multiples of the
 * kernel's `align` goes by kernel, in slices, for its whole 16-byte units,
 * and its last size % 16 bytes by vkCmdCopyBuffer; every other region by
 * vkCmdCopyBuffer. No barrier is recorded: what orders the copies after
 * earlier work and later work after them must cover compute-shader reads
 * and writes as well as transfers (ruda__record_barrier,
 * ruda__record_copy_barrier). Returns whether the kernel was bound: a
 * bind cache of `cmd` holds no more.
 */
bool ruda__device_copy_record(struct ruda_device *device, VkCommandBuffer cmd, VkBuffer src,
			      VkBuffer dst, const VkBufferCopy *regions, uint32_t n);

#endif
