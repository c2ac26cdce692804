/*
 * A session's shared-memory arena: a memfd that rudad creates, sizes and
 * seals against shrinking and growing before the client sees it, mapped
 * here and imported into Vulkan (VK_EXT_external_memory_host) so copies
 * to and from device buffers are one DMA from the client's pages.
 */
#ifndef RUDA_ARENA_H
#define RUDA_ARENA_H

#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include "../proto/arena_header.h"
#include "ref.h"

struct ruda_device;

struct ruda_arena {
	struct ruda_ref ref;
	struct ruda_device *device; /* borrowed */
	int fd;                     /* owned */
	uint8_t *map;
	uint64_t size;
	VkDeviceMemory memory;
	VkBuffer buffer; /* the whole arena, as a transfer source and target */
	/* Without host import: `buffer` is a host-visible bounce buffer of the
	 * arena's size, mapped here, that rudad copies the arena's bytes into
	 * (uploads) and out of (downloads) at the same offsets. NULL: `buffer`
	 * is the arena itself, imported. */
	uint8_t *bounce;
};

/* Uploads: copy arena bytes into the bounce buffer (no-op when imported). */
void ruda__arena_bounce_in(struct ruda_arena *arena, uint64_t offset, uint64_t size);
/* Downloads, once the device is done: bounce buffer bytes into the arena. */
void ruda__arena_bounce_out(struct ruda_arena *arena, uint64_t offset, uint64_t size);

/* Import `size` bytes of host memory at `map` (page-aligned, mapped) into
 * `d` as one transfer buffer bound to imported memory
 * (VK_EXT_external_memory_host): arenas, staging regions, rudad's host
 * staging. On failure, what was made is left in *buffer / *memory for the
 * caller to destroy. */
int ruda__host_import(struct ruda_device *d, void *map, uint64_t size, VkBuffer *buffer,
		      VkDeviceMemory *memory);

int ruda__arena_create(struct ruda_device *device, uint64_t size, struct ruda_arena **out);

static inline struct ruda_arena_header *ruda__arena_header(struct ruda_arena *arena)
{
	return (struct ruda_arena_header *)arena->map;
}

/*
 * A client's shared memory as an arena-like region (staging): map `size`
 * bytes of `fd` (not kept) and import them. `size` must be a multiple of the
 * import granularity and within the file. 0 or a negative errno.
 */
int ruda__arena_adopt(struct ruda_device *device, int fd, uint64_t size,
		      struct ruda_arena **out);

/* Whether [offset, offset + size) lies in the arena's data space. */
int ruda__arena_contains(const struct ruda_arena *arena, uint64_t offset, uint64_t size);

/*
 * Arenas made ahead of time, in the thread pool, so a connecting client
 * does not wait for the import (tens of ms for 64 MiB on a GPU). An arena
 * is never reused: each session gets fresh memory.
 */
struct ruda_arena_pool {
	struct ruda_device *device; /* borrowed */
	uv_loop_t *loop;
	uint64_t size;
	struct ruda_arena *spare[2];
	unsigned count;
	int making, closing;
	uv_work_t work;
	struct ruda_arena *made;
};

void ruda__arena_pool_init(struct ruda_arena_pool *pool, uv_loop_t *loop,
			   struct ruda_device *device, uint64_t size);
/* An arena from the pool, or a new one made now; 0 or a negative errno. */
int ruda__arena_pool_take(struct ruda_arena_pool *pool, struct ruda_arena **out);
/* Make a spare in the thread pool if one is missing and the device has
 * nothing in flight (call when the loop is about to sleep). */
void ruda__arena_pool_refill_idle(struct ruda_arena_pool *pool);
/* Drop the spares (an arena still being made is dropped when done). */
void ruda__arena_pool_finish(struct ruda_arena_pool *pool);

/* Tell the client it may reuse arena bytes of requests up to `request`. */
void ruda__arena_publish(struct ruda_arena *arena, uint64_t request);

#endif
