/*
 * Device memory for buffers: small and mid-sized buffers are sub-allocated
 * from large VkDeviceMemory pages (first fit, coalescing free lists), large
 * ones get memory of their own. docs/memory.md gives the policy and its
 * numbers.
 */
#ifndef RUDA_ALLOCATOR_H
#define RUDA_ALLOCATOR_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "device/deferred_free.h"

struct ruda_memory_page;
struct ruda_memory_job;

/* An allocation that needs new device memory of this many bytes or more
 * gets it in the thread pool (ruda__memory_prepare), not on the loop: a
 * 1 GiB vkAllocateMemory takes ~25 ms on the H200, and every client
 * waited for it. */
#define RUDA_MEMORY_OFF_LOOP_BYTES (16u << 20)

/* What every buffer rudad makes can be used for: the allocator's memory
 * type is chosen for buffers of this usage. */
#define RUDA_BUFFER_USAGE                                                                     \
	(VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |             \
	 VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_INDIRECT_BUFFER_BIT)

/* Where a buffer's bytes live. */
struct ruda_allocation {
	struct ruda_memory_page *page; /* borrowed */
	VkDeviceMemory memory;
	uint64_t offset, size; /* size: what was reserved (aligned) */
};

struct ruda_memory_stats {
	uint64_t pages;           /* pages held, shared and dedicated */
	uint64_t reserved;        /* bytes of device memory held */
	uint64_t in_use;          /* bytes handed to buffers */
	uint64_t allocations;     /* buffers living */
	uint64_t empty_pages;     /* shared pages with nothing in them */
	uint64_t kept_bytes;      /* freed dedicated pages kept for reuse */
};

/*
 * One heap of one physical device, shared by the allocators of every
 * logical device opened on it (--device 0,0): together they never reserve
 * more than the heap. Each allocated one ran up to the whole heap alone,
 * so two reserved 3.5 GiB of a 2 GiB heap; lazy (CPU) drivers accepted it
 * and failed later, page by page.
 */
struct ruda_heap_budget {
	/* bytes of pages its allocators hold, and of those still being freed
	 * in the thread pool (the driver still has them); raised on the loop
	 * only, lowered by the pool too */
	_Atomic uint64_t held;
	/* bytes the driver has given its allocators and not yet taken back
	 * (`held` counts a job's bytes before they are made): what the
	 * RUDA_TEST_DRIVER_HEAP_BYTES stand-in compares with */
	_Atomic uint64_t driver_bytes;
	/* bytes of pages its allocators have queued for vkFreeMemory: a pool
	 * job the driver refused waits for them, whichever allocator frees */
	_Atomic uint64_t freeing;
	struct ruda_memory *members; /* its allocators (loop thread) */
};

/* What the allocator needs of its device, given at init (it knows no
 * more of the device than this). */
struct ruda_memory_device {
	VkDevice vk;
	const VkPhysicalDeviceMemoryProperties *memory;
	const VkPhysicalDeviceLimits *limits;
	uint64_t max_allocation_size; /* maxMemoryAllocationSize */
	uint64_t max_buffer_size;     /* maxBufferSize, or 0 */
	struct ruda_deferred_free *frees; /* where pages are freed; outlives the allocator */
	/* VK_MAX_MEMORY_HEAPS budgets shared with the other logical devices on
	 * the same physical device, or NULL: the allocator counts alone */
	struct ruda_heap_budget *heap_budgets;
};

struct ruda_memory {
	VkDevice vk;                      /* borrowed */
	struct ruda_deferred_free *frees; /* borrowed */
	uint64_t max_allocation_size;
	uint64_t max_buffer_size;
	uint32_t type;              /* memory type of every page */
	uint64_t alignment;         /* of every allocation */
	uint64_t page_size;         /* of shared pages */
	uint64_t max_shared;        /* larger allocations get their own page */
	uint32_t keep_empty;        /* empty shared pages kept for reuse */
	uint64_t keep_dedicated;    /* bytes of freed dedicated pages kept */
	uint64_t keep_for_ns;       /* a kept page unused this long goes back (0: none kept) */
	uint64_t heap_size;         /* of the pages' heap: never reserve more */
	/* what every allocator on that heap holds: the device's (heap_budgets)
	 * or, without one, `own` */
	struct ruda_heap_budget *budget;
	struct ruda_memory *budget_next; /* the budget's next member */
	struct ruda_heap_budget own;
	struct ruda_memory_page *pages;
	struct ruda_memory_stats stats;
	_Atomic uint64_t freeing; /* bytes of pages queued for vkFreeMemory */
	struct ruda_memory_job *jobs; /* pages being allocated in the pool */
	/* a pool job of this many bytes (RUDA_MEMORY_OFF_LOOP_BYTES or more)
	 * was refused by the driver while the heap held `refused_held`: the
	 * loop does not ask for as much again until memory has been given
	 * back or the pool tries again (0: none) */
	uint64_t refused_bytes, refused_held;
	uint32_t slow_ms; /* RUDA_TEST_SLOW_ALLOCATION_MS: tests' stand-in for a slow driver */
	/* RUDA_TEST_DRIVER_HEAP_BYTES: tests' stand-in for a driver that
	 * refuses memory before the heap's size is reached (NVIDIA does) */
	uint64_t driver_heap_bytes;
};

/* Memory a layer above keeps for reuse on the heaps (the shared windows'
 * cache, memory/peer_window.c): an allocation that finds its heap full
 * asks it to give back what it keeps on `budget`'s heap before failing.
 * Loop thread; returns whether it gave any back. One, set before use
 * (NULL: none). */
typedef bool (*ruda_memory_reclaim_fn)(const struct ruda_heap_budget *budget);
void ruda__memory_set_reclaim(ruda_memory_reclaim_fn reclaim);

/* Index of a memory type among `memory`'s allowed by `type_bits` that has
 * every flag of `want`, one without `avoid` if there is; -ENOENT if none. */
int ruda__memory_type(const VkPhysicalDeviceMemoryProperties *memory, uint32_t type_bits,
		      VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid);

/* Set up for `device`, whose buffers need `requirements` (from a probe
 * buffer). Its pages count in device->heap_budgets[heap] when it has
 * those (one per heap, shared by the logical devices of its physical
 * device). */
int ruda__memory_init(struct ruda_memory *m, const struct ruda_memory_device *device,
		      const VkMemoryRequirements *requirements);
/* How long freed dedicated pages are kept for reuse (rudad.conf
 * freed_memory_keep_ms; 0: none are kept). */
void ruda__memory_set_keep_for_ms(struct ruda_memory *m, uint64_t ms);
/* Frees every page; all allocations must be gone. */
void ruda__memory_finish(struct ruda_memory *m);

/* Memory for a buffer of `size` bytes aligned to `alignment` (and the
 * allocator's own), placed as `mode` says (<ruda/common.h>; docs/memory.md):
 * RUDA_OK, RUDA_ERROR_OUT_OF_MEMORY or RUDA_ERROR_TOO_LARGE. In
 * dedicated mode, `export_for` (else VK_NULL_HANDLE) is the buffer the
 * memory is for: it is then allocated exportable as an opaque fd and
 * dedicated to that buffer (VkMemoryDedicatedAllocateInfo), exactly `size`
 * bytes (its memory requirements' size), as an importer must repeat it. */
ruda_status ruda__memory_alloc_mode(struct ruda_memory *m, uint64_t size, uint64_t alignment,
				    ruda_allocation_mode mode, VkBuffer export_for,
				    struct ruda_allocation *out);
/* Called on the loop when the memory a job made ahead is in place (or the
 * driver refused it); `job` is what ruda__memory_prepare returned. */
typedef void (*ruda_memory_ready_fn)(void *data, const struct ruda_memory_job *job);
/* Make ahead, in the thread pool, the device memory that
 * ruda__memory_alloc_mode(m, size, alignment, mode, VK_NULL_HANDLE, ...)
 * would allocate on the loop (at least RUDA_MEMORY_OFF_LOOP_BYTES of it, or
 * any size on a heap that is full until frees under way end): the job,
 * whose `ready(data, job)` comes once the memory waits, kept, for that
 * call. NULL when the call can go ahead now: it finds memory, needs little
 * and the heap has room, or the heap has no room even once freed (the
 * loop's path frees what it can, or answers). Loop thread.
 * In dedicated mode `export_for` (else VK_NULL_HANDLE), a buffer created
 * exportable with VkBufferCreateInfo::size `export_size`, has the memory
 * made exportable and dedicated to it, `size` its requirements' size: with
 * a job the allocator owns the buffer, and ruda__memory_take_exportable
 * hands both out; with NULL it stays the caller's. */
const struct ruda_memory_job *ruda__memory_prepare(struct ruda_memory *m, uint64_t size,
						   ruda_allocation_mode mode, VkBuffer export_for,
						   uint64_t export_size, ruda_memory_ready_fn ready,
						   void *data);
/* The exportable buffer of create size `buffer_size` whose memory a job
 * made ahead, with that memory in `out` (the buffer yet to be bound to
 * it); VK_NULL_HANDLE when none waits. */
VkBuffer ruda__memory_take_exportable(struct ruda_memory *m, uint64_t buffer_size,
				      struct ruda_allocation *out);
/* Whether ruda__memory_take_exportable(m, buffer_size, ...) finds one. */
bool ruda__memory_exportable_kept(const struct ruda_memory *m, uint64_t buffer_size);
/* A VkBuffer of `size` bytes as rudad makes them (RUDA_BUFFER_USAGE); an
 * exportable one says so at creation. VK_NULL_HANDLE when refused. */
VkBuffer ruda__memory_make_buffer(const struct ruda_memory *m, uint64_t size, bool exportable);
/* A buffer of create size `size` in *buffer with its memory in `out`, yet
 * to be bound: an exportable one made ahead (ruda__memory_take_exportable),
 * else made now, its memory allocated in `mode` (dedicated to it when
 * exportable). RUDA_OK, or the error with nothing left made. */
ruda_status ruda__memory_buffer(struct ruda_memory *m, uint64_t size, ruda_allocation_mode mode,
				bool exportable, VkBuffer *buffer, struct ruda_allocation *out);
/* Whether an allocation of about `size` bytes in `mode` would find room in
 * a shared page now (a hint, before ruda__memory_prepare's exact size). */
bool ruda__memory_at_hand(const struct ruda_memory *m, uint64_t size, ruda_allocation_mode mode);
/* Whether the allocation's memory is its own and exportable. */
bool ruda__memory_exportable(const struct ruda_allocation *a);
/* Whether the allocation has a page (VkDeviceMemory) of its own. */
bool ruda__memory_dedicated(const struct ruda_allocation *a);

void ruda__memory_free(struct ruda_memory *m, struct ruda_allocation *a);

/* Free every empty shared page; returns the bytes given back. */
uint64_t ruda__memory_cleanup(struct ruda_memory *m);

/* Give back the kept dedicated pages that have waited `keep_for_ns` by
 * `now_ns` (uv_hrtime()); returns the bytes. */
uint64_t ruda__memory_age(struct ruda_memory *m, uint64_t now_ns);

#endif
