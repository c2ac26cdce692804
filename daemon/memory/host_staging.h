/*
 * Daemon host memory that several devices copy to and from: one mapping,
 * imported into each device that uses it (VK_EXT_external_memory_host), so
 * a transfer between devices is one DMA out of the first device and one
 * into the second, with no copy in between. Reference counted: every
 * submission using it holds a reference; released ones are kept for reuse
 * (a few, up to 4 GiB) until ruda__host_staging_cache_clear.
 */
#ifndef RUDA_HOST_STAGING_H
#define RUDA_HOST_STAGING_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include "common/ref.h"
#include "device/device.h"

struct ruda_host_import {
	/* borrowed: NULL once the device went (it tells device_gone) */
	struct ruda_device *device;
	VkBuffer buffer;
	VkDeviceMemory memory;
	struct ruda_device_listener device_gone; /* frees the import with its device */
};

struct ruda_host_staging {
	struct ruda_ref ref;
	uint8_t *map;
	uint64_t size; /* usable bytes */
	uint64_t mapped;
	uint32_t nimports, max_imports;
	struct ruda_host_import imports[];
};

/* Whether ruda__host_staging_cached(size, devices, n) would find one. */
bool ruda__host_staging_kept(uint64_t size, struct ruda_device *const *devices, uint32_t n);
/* A kept staging of `size` bytes imported into each of `devices` already,
 * or NULL: the loop never waits for an import this way. */
struct ruda_host_staging *ruda__host_staging_cached(uint64_t size,
						    struct ruda_device *const *devices,
						    uint32_t n);
/* Make a staging of `size` bytes in the thread pool, imported there into
 * each of `devices` (an import pins the pages: milliseconds per hundred
 * MiB on a GPU); `done` runs on the loop with it (the caller's reference),
 * or NULL when that failed. 0 or a negative errno. */
int ruda__host_staging_make(uv_loop_t *loop, uint64_t size, struct ruda_device *const *devices,
			    uint32_t n, void (*done)(struct ruda_host_staging *st, void *data),
			    void *data);

/* The memory as a transfer buffer of `device`: imported already when the
 * staging came from _cached or _make for that device (else imported now);
 * VK_NULL_HANDLE when the import failed. */
VkBuffer ruda__host_staging_buffer(struct ruda_host_staging *staging, struct ruda_device *device);

/* Destroy the staging kept for reuse; later releases destroy at once
 * (at shutdown, before the devices go). */
void ruda__host_staging_cache_clear(void);

static inline void ruda__host_staging_put(struct ruda_host_staging *staging)
{
	ruda_ref_put(&staging->ref);
}

#endif
