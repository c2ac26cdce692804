/*
 * A session's shared-memory arena: a memfd that rudad creates, sizes and
 * seals against shrinking and growing before the client sees it (or one the
 * client passes, client_arena.c), mapped here. Its device side is made on
 * first use, in the thread pool (ruda__arena_attach): imported into Vulkan
 * (VK_EXT_external_memory_host) so copies to and from device buffers are
 * one DMA from the client's pages, or paired with a bounce buffer. Until
 * then it pins nothing: idle clients cost the device no memory.
 */
#ifndef RUDA_ARENA_H
#define RUDA_ARENA_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include "../../proto/arena_header.h"
#include "common/ref.h"

struct ruda_device;
struct ruda_arena_pool;

enum ruda_arena_state {
	RUDA_ARENA_HOST,      /* mapped in rudad only: nothing pinned, no buffer */
	RUDA_ARENA_ATTACHING, /* its device side is being made in the thread pool */
	RUDA_ARENA_ATTACHED,  /* `buffer` is usable: imported, or the bounce buffer */
};

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
	enum ruda_arena_state state;
	int attach_error;  /* the last attach's failure (negative errno), until reported */
	int attach_result; /* written by the thread pool */
	uint64_t last_used_ms; /* uv_now() of the last transfer through it */
	uint64_t client;   /* nonzero: the memfd is the client's own (its size) */
	int fail_next_attach; /* tests (RUDA_TEST_FAULTS): the next attach fails, ENOMEM */
	struct ruda_arena_pool *pool; /* borrowed while attaching: counts it */
	void (*attached)(void *data); /* called on the loop once attaching ends */
	void *attached_data;
	uv_work_t work;
};

/*
 * Give the arena its device side (import it, or make its bounce buffer) if
 * it has none. 1: it has one, `buffer` is usable. 0: it is being made in
 * the thread pool; `done(data)` is called on the loop once that ends (then
 * call again). A negative errno: making it failed (reported once; the next
 * call tries again).
 */
int ruda__arena_attach(struct ruda_arena_pool *pool, struct ruda_arena *arena,
		       void (*done)(void *data), void *data);
/* The same on the calling thread, at once (the in-process baselines of
 * the bench): 0 or a negative errno. Not while it is attaching. */
int ruda__arena_attach_now(struct ruda_arena *arena);
/* Drop the device side (unpin) if the arena has one and nothing but its
 * owner holds it (no submission recorded or in flight); true if dropped. */
bool ruda__arena_detach(struct ruda_arena *arena);
/* The arena's owner goes away: nothing is called when attaching ends. */
void ruda__arena_forget_waiter(struct ruda_arena *arena);

static inline bool ruda__arena_attaching(const struct ruda_arena *arena)
{
	return arena && arena->state == RUDA_ARENA_ATTACHING;
}

/* Smallest and largest arena a client may pass (client_arena.c); the same
 * bounds as the arena_size setting. */
#define RUDA_ARENA_MIN_SIZE (1ull << 20)
#define RUDA_ARENA_MAX_SIZE (4ull << 30)

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

/* A fresh sealed memfd of `size` bytes (rounded up to the import
 * granularity), mapped, its header written; nothing imported yet. */
int ruda__arena_create(struct ruda_device *device, uint64_t size, struct ruda_arena **out);
/* Map `size` bytes of `fd` (not kept) as an arena and write its header; the
 * caller has checked the fd (client_arena.c). */
int ruda__arena_map_fd(struct ruda_device *device, int fd, uint64_t size,
		       struct ruda_arena **out);
/* Bytes granularity an arena's size must be a multiple of on `device`. */
uint64_t ruda__arena_granularity(const struct ruda_device *device);

static inline struct ruda_arena_header *ruda__arena_header(struct ruda_arena *arena)
{
	return (struct ruda_arena_header *)arena->map;
}

/*
 * A client's shared memory as an arena-like region (staging): map `size`
 * bytes of `fd` (not kept), nothing imported yet (ruda__arena_attach does
 * that, in the thread pool). `size` must be a multiple of the import
 * granularity and within the file. 0 or a negative errno.
 */
int ruda__arena_map_region(struct ruda_device *device, int fd, uint64_t size,
			   struct ruda_arena **out);

/* Whether [offset, offset + size) lies in the arena's data space. */
bool ruda__arena_contains(const struct ruda_arena *arena, uint64_t offset, uint64_t size);

/*
 * Arenas made ahead of time, in the thread pool (a memfd, mapped, its
 * header written: no import, which waits for the first transfer). An arena
 * is never reused: each session gets fresh memory. The pool also counts
 * the arenas of its device being attached in the thread pool.
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
	unsigned attaching; /* arenas of this device attaching in the thread pool */
};

void ruda__arena_pool_init(struct ruda_arena_pool *pool, uv_loop_t *loop,
			   struct ruda_device *device, uint64_t size);
/* An arena from the pool, or a new one made now; 0 or a negative errno. */
int ruda__arena_pool_take(struct ruda_arena_pool *pool, struct ruda_arena **out);
/* Make a spare in the thread pool if one is missing and the device has
 * nothing in flight (call when the loop is about to sleep). */
void ruda__arena_pool_refill_idle(struct ruda_arena_pool *pool);
/* Work of this pool's device in the thread pool (making a spare, attaching
 * an arena): the device must stay until it is done. */
static inline bool ruda__arena_pool_busy(const struct ruda_arena_pool *pool)
{
	return pool->making || pool->attaching;
}
/* Drop the spares (an arena still being made is dropped when done). */
void ruda__arena_pool_finish(struct ruda_arena_pool *pool);

/* Tell the client it may reuse arena bytes of requests up to `request`. */
void ruda__arena_publish(struct ruda_arena *arena, uint64_t request);

#endif
