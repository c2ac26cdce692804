#include "device/allocator.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "common/config.h"
#include "device/free_ranges.h"

struct ruda_memory_page {
	struct ruda_memory_page *next;
	VkDeviceMemory memory;
	uint64_t size;
	uint64_t used;
	int dedicated;
	int persistent; /* shared page for persistent-mode buffers */
	int exportable; /* dedicated, allocated for export */
	int kept;       /* dedicated, freed, kept for the next buffer of its size */
	/* exportable and made ahead (ruda__memory_prepare): the buffer its
	 * memory is dedicated to, owned here until taken with it, and that
	 * buffer's VkBufferCreateInfo::size */
	VkBuffer buffer;
	uint64_t buffer_size;
	uint64_t kept_at_ns; /* uv_hrtime() when it was kept */
	struct ruda_free_ranges free; /* shared pages' */
};

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int ruda__memory_type(const VkPhysicalDeviceMemoryProperties *memory, uint32_t type_bits,
		      VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < memory->memoryTypeCount; i++) {
			VkMemoryPropertyFlags f = memory->memoryTypes[i].propertyFlags;
			if (!(type_bits & (1u << i)) || (f & want) != want)
				continue;
			if (pass == 0 && (f & avoid))
				continue;
			return (int)i;
		}
	return -ENOENT;
}

int ruda__memory_init(struct ruda_memory *m, const struct ruda_memory_device *d,
		      const VkMemoryRequirements *req)
{
	memset(m, 0, sizeof(*m));
	m->vk = d->vk;
	m->frees = d->frees;
	m->max_allocation_size = d->max_allocation_size;
	/* 0: a device that does not say (maintenance4); one allocation then */
	m->max_buffer_size = d->max_buffer_size ? d->max_buffer_size : d->max_allocation_size;
	int type = ruda__memory_type(d->memory, req->memoryTypeBits,
				     VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
	if (type < 0)
		type = ruda__memory_type(d->memory, req->memoryTypeBits, 0, 0);
	if (type < 0)
		return -ENODEV;
	m->type = (uint32_t)type;
	uint32_t heap = d->memory->memoryTypes[type].heapIndex;
	m->heap_size = d->memory->memoryHeaps[heap].size;
	/* a binding can start at any allocation: respect both alignments */
	uint64_t align = d->limits->minStorageBufferOffsetAlignment;
	m->alignment = req->alignment > align ? req->alignment : align;
	if (m->alignment < 256)
		m->alignment = 256;
	/* pages of a quarter of the largest binding, 4 MiB to 256 MiB; shared
	 * up to a quarter page, so one page holds at least four buffers */
	uint64_t page = d->limits->maxStorageBufferRange / 4;
	if (page > (256u << 20))
		page = 256u << 20;
	if (page < (4u << 20))
		page = 4u << 20;
	if (page > d->max_allocation_size)
		page = d->max_allocation_size;
	m->page_size = page;
	m->max_shared = page / 4;
	m->keep_empty = 1;
	/* Freed dedicated pages are kept, up to an eighth of the heap (4 GiB at
	 * most), for the next buffer of the same size: on the H200 a 1 GiB
	 * vkAllocateMemory takes ~25 ms, and a 1 GiB free leaves the device
	 * busy for tens of ms, so a program that frees and creates big buffers
	 * in turn got 12-15 GB/s out of a 50 GB/s bus (docs/memory.md). */
	m->keep_dedicated = m->heap_size / 8;
	if (m->keep_dedicated > (4ull << 30))
		m->keep_dedicated = 4ull << 30;
	m->keep_for_ns = RUDA_FREED_MEMORY_KEEP_MS * 1000000ull;
	const char *slow = getenv("RUDA_TEST_SLOW_ALLOCATION_MS");
	m->slow_ms = slow ? (uint32_t)strtoul(slow, NULL, 10) : 0;
	const char *driver = getenv("RUDA_TEST_DRIVER_HEAP_BYTES");
	m->driver_heap_bytes = driver ? strtoull(driver, NULL, 10) : 0;
	m->budget = d->heap_budgets ? &d->heap_budgets[heap] : &m->own;
	m->budget_next = m->budget->members;
	m->budget->members = m;
	return 0;
}

void ruda__memory_set_keep_for_ms(struct ruda_memory *m, uint64_t ms)
{
	m->keep_for_ns = ms * 1000000u;
}

/* What the thread pool needs to give a page's memory back. */
struct page_release {
	struct ruda_memory *m; /* outlives it: the device waits for its frees */
	VkDeviceMemory memory;
	uint64_t size;
};

/* Loop or thread pool. */
static void free_memory(struct ruda_memory *m, VkDeviceMemory memory, uint64_t size)
{
	vkFreeMemory(m->vk, memory, NULL);
	atomic_fetch_sub(&m->budget->driver_bytes, size);
}

static void page_release(void *arg)
{
	struct page_release *r = arg;
	if (r->m->slow_ms && r->size >= RUDA_MEMORY_OFF_LOOP_BYTES)
		usleep(r->m->slow_ms * 1000u);
	free_memory(r->m, r->memory, r->size);
	atomic_fetch_sub(&r->m->budget->held, r->size);
	atomic_fetch_sub(&r->m->budget->freeing, r->size);
	atomic_fetch_sub(&r->m->freeing, r->size);
	free(r);
}

/* The page leaves the accounting now; its memory is freed in the thread
 * pool (vkFreeMemory of a large page takes long: docs/memory.md). */
static void page_free(struct ruda_memory *m, struct ruda_memory_page *p)
{
	ruda__free_ranges_finish(&p->free);
	if (p->buffer)
		vkDestroyBuffer(m->vk, p->buffer, NULL);
	struct page_release *r = malloc(sizeof(*r));
	if (r) {
		*r = (struct page_release){.m = m, .memory = p->memory, .size = p->size};
		atomic_fetch_add(&m->freeing, p->size);
		atomic_fetch_add(&m->budget->freeing, p->size);
		ruda__deferred_free_run(m->frees, page_release, r);
	} else {
		free_memory(m, p->memory, p->size);
		atomic_fetch_sub(&m->budget->held, p->size);
	}
	m->stats.pages--;
	m->stats.reserved -= p->size;
	free(p);
}

static void jobs_orphan(struct ruda_memory *m);

void ruda__memory_finish(struct ruda_memory *m)
{
	jobs_orphan(m);
	while (m->pages) {
		struct ruda_memory_page *p = m->pages;
		m->pages = p->next;
		page_free(m, p);
	}
	/* its frees in the pool still lower the budget (the device waits for
	 * them before it goes); it allocates no more */
	for (struct ruda_memory **link = m->budget ? &m->budget->members : NULL; link && *link;
	     link = &(*link)->budget_next)
		if (*link == m) {
			*link = m->budget_next;
			break;
		}
}

/* Give back the kept dedicated pages kept at `kept_by_ns` or before and,
 * when `empty_shared`, every empty shared page; the bytes. */
static uint64_t give_back_idle(struct ruda_memory *m, int empty_shared, uint64_t kept_by_ns)
{
	uint64_t freed = 0;
	struct ruda_memory_page **link = &m->pages;
	while (*link) {
		struct ruda_memory_page *p = *link;
		int shared_empty = !p->dedicated && p->used == 0;
		int old_kept = p->kept && p->kept_at_ns <= kept_by_ns;
		if (!old_kept && !(empty_shared && shared_empty)) {
			link = &p->next;
			continue;
		}
		*link = p->next;
		freed += p->size;
		if (p->kept)
			m->stats.kept_bytes -= p->size;
		else
			m->stats.empty_pages--;
		page_free(m, p);
	}
	return freed;
}

/* Give back the kept pages of every allocator on m's heap (the logical
 * devices of one physical device share it); the bytes. */
static uint64_t release_kept(struct ruda_memory *m)
{
	uint64_t freed = 0;
	for (struct ruda_memory *o = m->budget->members; o; o = o->budget_next)
		if (o->stats.kept_bytes)
			freed += give_back_idle(o, 0, UINT64_MAX);
	return freed;
}

static ruda_memory_reclaim_fn reclaim_above;

void ruda__memory_set_reclaim(ruda_memory_reclaim_fn reclaim)
{
	reclaim_above = reclaim;
}

/* What the layer above keeps on m's heap, given back: whether any was. */
static bool reclaim(struct ruda_memory *m)
{
	return reclaim_above && reclaim_above(m->budget);
}

static bool heap_has_kept(struct ruda_memory *m)
{
	for (struct ruda_memory *o = m->budget->members; o; o = o->budget_next)
		if (o->stats.kept_bytes)
			return true;
	return false;
}

/* Whether `size` more bytes fit in the heap beside the pages reserved and
 * those still being freed, by every allocator on it. */
static bool fits_beside(const struct ruda_memory *m, uint64_t held, uint64_t size)
{
	return !m->heap_size || (held < m->heap_size && size <= m->heap_size - held);
}

static bool heap_has_room(struct ruda_memory *m, uint64_t size)
{
	return fits_beside(m, atomic_load(&m->budget->held), size);
}

/* Whether `size` more bytes fit the heap once the frees under way, by
 * every allocator on it, have ended. */
static bool room_once_freed(struct ruda_memory *m, uint64_t size)
{
	uint64_t freeing = atomic_load(&m->budget->freeing);
	uint64_t held = atomic_load(&m->budget->held);
	return fits_beside(m, held > freeing ? held - freeing : 0, size);
}

/* The heap lacks `size` bytes: the layer above gives back what it keeps
 * (wanted memory comes before kept memory), then the kept pages go.
 * Whether there is room now (frees still under way may make more). */
static bool make_room(struct ruda_memory *m, uint64_t size)
{
	if (!heap_has_room(m, size))
		reclaim(m);
	if (!heap_has_room(m, size) && heap_has_kept(m))
		release_kept(m);
	return heap_has_room(m, size);
}

/* An allocation found the heap full while pages are still being freed in
 * the thread pool: wait for those frees (a client that released memory
 * and allocates again expects it back), those of the other logical
 * devices on the heap too. The loop waits only here, when the alternative
 * is an out-of-memory answer, and for no longer than it used to spend
 * freeing them itself. True if there were any. */
static bool wait_for_frees(struct ruda_memory *m)
{
	bool waited = false;
	for (struct ruda_memory *o = m->budget->members; o; o = o->budget_next)
		if (atomic_load(&o->freeing)) {
			/* the frees, not an allocation under way in the pool */
			ruda__deferred_free_wait_zero(o->frees, &o->freeing);
			waited = true;
		}
	return waited;
}

static VkResult allocate_memory(struct ruda_memory *m, const VkMemoryAllocateInfo *info,
				VkDeviceMemory *memory)
{
	if (m->slow_ms && info->allocationSize >= RUDA_MEMORY_OFF_LOOP_BYTES)
		usleep(m->slow_ms * 1000u);
	if (m->driver_heap_bytes && atomic_load(&m->budget->driver_bytes) +
					    info->allocationSize > m->driver_heap_bytes)
		return VK_ERROR_OUT_OF_DEVICE_MEMORY;
	VkResult res = vkAllocateMemory(m->vk, info, NULL, memory);
	if (res == VK_SUCCESS)
		atomic_fetch_add(&m->budget->driver_bytes, info->allocationSize);
	return res;
}

/* `size` bytes of m's memory type; with `export_for` (else
 * VK_NULL_HANDLE) exportable from the start (memory cannot become so
 * later) and dedicated to that buffer: importers get the same allocation.
 * Loop or thread pool. */
static VkResult allocate_for(struct ruda_memory *m, uint64_t size, VkBuffer export_for,
			     VkDeviceMemory *memory)
{
	VkMemoryDedicatedAllocateInfo for_buffer = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
		.buffer = export_for,
	};
	VkExportMemoryAllocateInfo export = {
		.sType = VK_STRUCTURE_TYPE_EXPORT_MEMORY_ALLOCATE_INFO,
		.pNext = &for_buffer,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	VkMemoryAllocateInfo info = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = export_for != VK_NULL_HANDLE ? &export : NULL,
		.allocationSize = size,
		.memoryTypeIndex = m->type,
	};
	return allocate_memory(m, &info, memory);
}

/* Put new page `p` (its memory, size and kind set) among m's pages; false
 * when out of memory (`p` is left to the caller, its ranges gone). */
static bool page_insert(struct ruda_memory *m, struct ruda_memory_page *p)
{
	if (!p->dedicated && !ruda__free_ranges_give(&p->free, 0, p->size)) {
		ruda__free_ranges_finish(&p->free);
		return false;
	}
	p->next = m->pages;
	m->pages = p;
	m->stats.pages++;
	m->stats.reserved += p->size;
	if (!p->dedicated)
		m->stats.empty_pages++;
	return true;
}

static struct ruda_memory_page *page_new(struct ruda_memory *m, uint64_t size, int dedicated,
					 VkBuffer export_for)
{
	struct ruda_memory_page *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* the pool has just been refused as much: asking again here would
	 * hold the loop for a driver call (and the frees it waits for) with
	 * nothing changed; the request that waited for the pool is answered */
	if (m->refused_bytes && size >= m->refused_bytes &&
	    atomic_load(&m->budget->held) >= m->refused_held) {
		free(p);
		return NULL;
	}
	/* drivers that allocate lazily (CPU devices) would accept more than the
	 * heap holds and fail later, page by page: refuse it now (pages still
	 * being freed in the thread pool are still the driver's); the loop
	 * waits for frees only where they make room */
	if (!make_room(m, size) &&
	    !(room_once_freed(m, size) && wait_for_frees(m) && heap_has_room(m, size))) {
		free(p);
		return NULL;
	}
	VkResult res = allocate_for(m, size, export_for, &p->memory);
	if (res != VK_SUCCESS && (reclaim(m) | (release_kept(m) != 0) | wait_for_frees(m)))
		res = allocate_for(m, size, export_for, &p->memory);
	if (res != VK_SUCCESS) {
		free(p);
		return NULL;
	}
	p->size = size;
	p->dedicated = dedicated;
	p->exportable = export_for != VK_NULL_HANDLE;
	if (!page_insert(m, p)) {
		free_memory(m, p->memory, size);
		free(p);
		return NULL;
	}
	/* only the loop raises it: nothing came between the check and here */
	atomic_fetch_add(&m->budget->held, size);
	return p;
}

/* A kept dedicated page of exactly `size` bytes, taken back into use
 * (not one made ahead for an exportable buffer: its memory is that
 * buffer's). */
static struct ruda_memory_page *find_kept(const struct ruda_memory *m, uint64_t size)
{
	for (struct ruda_memory_page *p = m->pages; p; p = p->next)
		if (p->kept && !p->exportable && p->size == size)
			return p;
	return NULL;
}

/* `reserved` bytes at `offset` of page `p` are the allocation's now. */
static void hand_out(struct ruda_memory *m, struct ruda_memory_page *p, uint64_t offset,
		     uint64_t reserved, struct ruda_allocation *out)
{
	p->used += reserved;
	m->stats.in_use += reserved;
	m->stats.allocations++;
	*out = (struct ruda_allocation){.page = p, .memory = p->memory, .offset = offset,
					.size = reserved};
}

static struct ruda_memory_page *take_kept(struct ruda_memory *m, uint64_t size)
{
	struct ruda_memory_page *p = find_kept(m, size);
	if (p) {
		p->kept = 0;
		m->stats.kept_bytes -= size;
	}
	return p;
}

bool ruda__memory_exportable(const struct ruda_allocation *a)
{
	return a->page && a->page->exportable;
}

bool ruda__memory_dedicated(const struct ruda_allocation *a)
{
	return a->page && a->page->dedicated;
}

ruda_status ruda__memory_alloc_mode(struct ruda_memory *m, uint64_t size, uint64_t alignment,
				    ruda_allocation_mode mode, VkBuffer export_for,
				    struct ruda_allocation *out)
{
	int persistent = mode == RUDA_ALLOCATION_PERSISTENT;
	/* past maxMemoryAllocationSize the driver may still accept it
	 * (buffer_limits.h); past maxBufferSize no buffer could use it */
	if (size > m->max_buffer_size)
		return RUDA_ERROR_TOO_LARGE;
	uint64_t align = alignment > m->alignment ? alignment : m->alignment;
	if (mode != RUDA_ALLOCATION_DEDICATED)
		export_for = VK_NULL_HANDLE;
	/* a dedicated allocation is exactly its buffer's size (Vulkan says so) */
	uint64_t reserved = export_for != VK_NULL_HANDLE ? size
							 : align_up(size ? size : 1, m->alignment);
	struct ruda_memory_page *p;
	uint64_t offset = 0;
	if (reserved > m->max_shared || mode == RUDA_ALLOCATION_DEDICATED) {
		p = export_for == VK_NULL_HANDLE ? take_kept(m, reserved) : NULL;
		if (!p)
			p = page_new(m, reserved, 1, export_for);
		if (!p) /* the driver's refusal of a size it need not accept */
			return reserved > m->max_allocation_size ? RUDA_ERROR_TOO_LARGE
									 : RUDA_ERROR_OUT_OF_MEMORY;
	} else {
		for (p = m->pages; p; p = p->next)
			if (!p->dedicated && p->persistent == persistent &&
			    p->size - p->used >= reserved &&
			    ruda__free_ranges_take(&p->free, reserved, align, &offset))
				break;
		if (!p) {
			p = page_new(m, m->page_size, 0, VK_NULL_HANDLE);
			if (!p || !ruda__free_ranges_take(&p->free, reserved, align, &offset))
				return RUDA_ERROR_OUT_OF_MEMORY;
			p->persistent = persistent;
		}
		if (p->used == 0)
			m->stats.empty_pages--;
	}
	hand_out(m, p, offset, reserved, out);
	return RUDA_OK;
}

/* A kept page made ahead for an exportable buffer of `buffer_size`. */
static struct ruda_memory_page *find_exportable(const struct ruda_memory *m,
						uint64_t buffer_size)
{
	for (struct ruda_memory_page *p = m->pages; p; p = p->next)
		if (p->kept && p->buffer && p->buffer_size == buffer_size)
			return p;
	return NULL;
}

bool ruda__memory_exportable_kept(const struct ruda_memory *m, uint64_t buffer_size)
{
	return find_exportable(m, buffer_size) != NULL;
}

VkBuffer ruda__memory_take_exportable(struct ruda_memory *m, uint64_t buffer_size,
				      struct ruda_allocation *out)
{
	struct ruda_memory_page *p = find_exportable(m, buffer_size);
	if (p) {
		VkBuffer buffer = p->buffer;
		p->buffer = VK_NULL_HANDLE;
		p->kept = 0;
		m->stats.kept_bytes -= p->size;
		hand_out(m, p, 0, p->size, out);
		return buffer;
	}
	return VK_NULL_HANDLE;
}

VkBuffer ruda__memory_make_buffer(const struct ruda_memory *m, uint64_t size, bool exportable)
{
	VkExternalMemoryBufferCreateInfo external = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = exportable ? &external : NULL,
		.size = size,
		.usage = RUDA_BUFFER_USAGE,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkBuffer buffer;
	return vkCreateBuffer(m->vk, &info, NULL, &buffer) == VK_SUCCESS ? buffer : VK_NULL_HANDLE;
}

ruda_status ruda__memory_buffer(struct ruda_memory *m, uint64_t size, ruda_allocation_mode mode,
				bool exportable, VkBuffer *buffer, struct ruda_allocation *out)
{
	*buffer = exportable ? ruda__memory_take_exportable(m, size, out) : VK_NULL_HANDLE;
	if (*buffer)
		return RUDA_OK;
	*buffer = ruda__memory_make_buffer(m, size, exportable);
	if (!*buffer)
		return RUDA_ERROR_OUT_OF_MEMORY;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(m->vk, *buffer, &req);
	ruda_status st = ruda__memory_alloc_mode(m, req.size, req.alignment, mode,
						 exportable ? *buffer : VK_NULL_HANDLE, out);
	if (st != RUDA_OK) {
		vkDestroyBuffer(m->vk, *buffer, NULL);
		*buffer = VK_NULL_HANDLE;
	}
	return st;
}

/* ---- memory made ahead in the thread pool --------------------------------- */

/* A page being allocated in the thread pool for an allocation to come. */
struct ruda_memory_job {
	struct ruda_memory *m; /* NULL once the allocator is gone */
	struct ruda_memory_job *next; /* in m->jobs */
	VkDeviceMemory memory; /* set in the pool; VK_NULL_HANDLE: refused */
	uint64_t size;
	int dedicated, persistent;
	/* exportable memory's buffer (owned) and its create size, or none */
	VkBuffer buffer;
	uint64_t buffer_size;
	/* its bytes fit the heap only once frees under way end: the pool
	 * waits for them first */
	bool after_frees;
	ruda_memory_ready_fn ready;
	void *data;
};

/* How long the pool waits for frees to make room before it gives up (the
 * loop's path then decides). */
#define JOB_FREES_WAIT_NS (10ull * 1000 * 1000 * 1000)

static void job_allocate(void *arg)
{
	struct ruda_memory_job *j = arg;
	/* its own bytes are counted already: room once `held` is back within
	 * the heap, as the frees lower it */
	uint64_t until = uv_hrtime() + JOB_FREES_WAIT_NS;
	while (j->after_frees && atomic_load(&j->m->budget->held) > j->m->heap_size) {
		if (uv_hrtime() > until) {
			j->memory = VK_NULL_HANDLE;
			return;
		}
		usleep(200);
	}
	/* nothing but the driver reads the buffer's handle meanwhile */
	VkResult res = allocate_for(j->m, j->size, j->buffer, &j->memory);
	/* a driver may refuse before rudad's count of the heap is reached
	 * (NVIDIA does), while frees under way on the heap, by any logical
	 * device, still hold memory: try again as they end, here, where the
	 * loop does not wait (those queued before this job run first; one
	 * queued after may wait behind it, hence the bound). */
	uint64_t freeing = atomic_load(&j->m->budget->freeing);
	while (res != VK_SUCCESS && freeing && uv_hrtime() < until) {
		usleep(200);
		uint64_t now = atomic_load(&j->m->budget->freeing);
		if (now < freeing)
			res = allocate_for(j->m, j->size, j->buffer, &j->memory);
		freeing = now;
	}
	if (res != VK_SUCCESS)
		j->memory = VK_NULL_HANDLE;
}

/* Back on the loop: the page joins the others, kept for the allocation
 * it was made for (a dedicated one) or empty (a shared one). */
static void job_done(void *arg)
{
	struct ruda_memory_job *j = arg;
	struct ruda_memory *m = j->m;
	if (!m) { /* the allocator went first and freed the memory */
		free(j);
		return;
	}
	struct ruda_memory_job **link = &m->jobs;
	while (*link != j)
		link = &(*link)->next;
	*link = j->next;
	struct ruda_memory_page *p = j->memory ? calloc(1, sizeof(*p)) : NULL;
	if (p) {
		p->memory = j->memory;
		p->size = j->size;
		p->dedicated = j->dedicated;
		p->persistent = j->persistent;
		p->exportable = j->buffer != VK_NULL_HANDLE;
		p->buffer = j->buffer;
		p->buffer_size = j->buffer_size;
	}
	if (p && page_insert(m, p)) {
		if (p->dedicated) {
			p->kept = 1;
			p->kept_at_ns = uv_hrtime();
			m->stats.kept_bytes += p->size;
		}
	} else {
		free(p);
		if (j->buffer)
			vkDestroyBuffer(m->vk, j->buffer, NULL);
		if (j->memory)
			free_memory(m, j->memory, j->size);
		atomic_fetch_sub(&m->budget->held, j->size);
		if (!j->memory && j->size >= RUDA_MEMORY_OFF_LOOP_BYTES) {
			m->refused_bytes = j->size;
			m->refused_held = atomic_load(&m->budget->held);
		}
	}
	j->ready(j->data, j);
	free(j);
}

/* The allocator goes: the jobs' allocations have run (or run now), their
 * memory is freed here, and their ends on the loop find no allocator. */
static void jobs_orphan(struct ruda_memory *m)
{
	if (!m->jobs)
		return;
	ruda__deferred_free_wait(m->frees);
	while (m->jobs) {
		struct ruda_memory_job *j = m->jobs;
		m->jobs = j->next;
		if (j->buffer)
			vkDestroyBuffer(m->vk, j->buffer, NULL);
		if (j->memory)
			free_memory(m, j->memory, j->size);
		atomic_fetch_sub(&m->budget->held, j->size);
		j->m = NULL;
	}
}

/* Whether a shared page of `persistent` kind has `reserved` bytes free (a
 * hint: they may not be in one range). */
static bool shared_room(const struct ruda_memory *m, uint64_t reserved, int persistent)
{
	for (const struct ruda_memory_page *p = m->pages; p; p = p->next)
		if (!p->dedicated && p->persistent == persistent && p->size - p->used >= reserved)
			return true;
	return false;
}

bool ruda__memory_at_hand(const struct ruda_memory *m, uint64_t size, ruda_allocation_mode mode)
{
	uint64_t reserved = align_up(size ? size : 1, m->alignment);
	return reserved <= m->max_shared && mode != RUDA_ALLOCATION_DEDICATED &&
	       shared_room(m, reserved, mode == RUDA_ALLOCATION_PERSISTENT);
}

const struct ruda_memory_job *ruda__memory_prepare(struct ruda_memory *m, uint64_t size,
						   ruda_allocation_mode mode, VkBuffer export_for,
						   uint64_t export_size, ruda_memory_ready_fn ready,
						   void *data)
{
	if (size > m->max_buffer_size)
		return NULL;
	if (mode != RUDA_ALLOCATION_DEDICATED)
		export_for = VK_NULL_HANDLE;
	int persistent = mode == RUDA_ALLOCATION_PERSISTENT;
	/* a dedicated allocation is exactly its buffer's size (Vulkan says so) */
	uint64_t reserved = export_for ? size : align_up(size ? size : 1, m->alignment);
	int dedicated = reserved > m->max_shared || mode == RUDA_ALLOCATION_DEDICATED;
	uint64_t bytes = dedicated ? reserved : m->page_size;
	/* little memory is made on the loop, unless the heap is full or
	 * frees are under way: a driver may refuse it until they end, and the
	 * loop must not wait for them */
	bool little = bytes < RUDA_MEMORY_OFF_LOOP_BYTES;
	bool freeing = atomic_load(&m->budget->freeing) != 0;
	if (little && !freeing && heap_has_room(m, bytes))
		return NULL;
	if (dedicated) {
		if (!export_for && find_kept(m, reserved))
			return NULL;
	} else {
		if (shared_room(m, reserved, persistent))
			return NULL;
		/* a shared page on its way serves every allocation waiting */
		for (const struct ruda_memory_job *j = m->jobs; j; j = j->next)
			if (!j->dedicated && j->persistent == persistent && j->ready == ready &&
			    j->data == data)
				return j;
	}
	/* a full heap: what is kept goes (wanted memory first), and where
	 * frees under way will make room, the pool waits for them rather than
	 * the loop */
	bool after_frees = !make_room(m, bytes);
	if ((little && !after_frees && !freeing) || (after_frees && !room_once_freed(m, bytes)))
		return NULL; /* the loop's path allocates, or answers */
	struct ruda_memory_job *j = malloc(sizeof(*j));
	if (!j)
		return NULL;
	m->refused_bytes = 0; /* the pool tries again */
	*j = (struct ruda_memory_job){.m = m, .size = bytes, .dedicated = dedicated,
				      .persistent = persistent, .buffer = export_for,
				      .buffer_size = export_size, .after_frees = after_frees,
				      .ready = ready, .data = data};
	/* its bytes count on the heap from now (past it while frees are
	 * under way: what they free is promised): only the loop raises `held` */
	atomic_fetch_add(&m->budget->held, bytes);
	if (ruda__deferred_run(m->frees, job_allocate, job_done, j) < 0) {
		atomic_fetch_sub(&m->budget->held, bytes);
		free(j);
		return NULL;
	}
	j->next = m->jobs;
	m->jobs = j;
	return j;
}

static void unlink_page(struct ruda_memory *m, struct ruda_memory_page *p)
{
	struct ruda_memory_page **link = &m->pages;
	while (*link != p)
		link = &(*link)->next;
	*link = p->next;
}

/* Give back the kept page allocated first (pages are added at the list's
 * head: it is the last kept one in the list). */
static void release_oldest_kept(struct ruda_memory *m)
{
	struct ruda_memory_page **oldest = NULL;
	for (struct ruda_memory_page **link = &m->pages; *link; link = &(*link)->next)
		if ((*link)->kept)
			oldest = link;
	struct ruda_memory_page *p = *oldest;
	*oldest = p->next;
	m->stats.kept_bytes -= p->size;
	page_free(m, p);
}

void ruda__memory_free(struct ruda_memory *m, struct ruda_allocation *a)
{
	struct ruda_memory_page *p = a->page;
	p->used -= a->size;
	m->stats.in_use -= a->size;
	m->stats.allocations--;
	if (p->dedicated) {
		/* kept while there is room (exportable ones never: an importer
		 * may still hold their memory), the oldest kept ones first out */
		if (!p->exportable && m->keep_for_ns && p->size <= m->keep_dedicated) {
			while (m->stats.kept_bytes + p->size > m->keep_dedicated)
				release_oldest_kept(m);
			p->kept = 1;
			p->kept_at_ns = uv_hrtime();
			m->stats.kept_bytes += p->size;
			return;
		}
		unlink_page(m, p);
		page_free(m, p);
		return;
	}
	(void)ruda__free_ranges_give(&p->free, a->offset, a->size);
	if (p->used)
		return;
	m->stats.empty_pages++;
	/* keep a few empty pages for the next buffers; give back the rest */
	if (m->stats.empty_pages > m->keep_empty) {
		m->stats.empty_pages--;
		unlink_page(m, p);
		page_free(m, p);
	}
}

uint64_t ruda__memory_cleanup(struct ruda_memory *m)
{
	return give_back_idle(m, 1, UINT64_MAX);
}

uint64_t ruda__memory_age(struct ruda_memory *m, uint64_t now_ns)
{
	if (!m->stats.kept_bytes || now_ns < m->keep_for_ns)
		return 0;
	return give_back_idle(m, 0, now_ns - m->keep_for_ns);
}
