/*
 * Unit tests for daemon/device/allocator.c, the allocator that sub-allocates
 * VkDeviceMemory pages for buffers (first fit, coalescing free ranges;
 * large or dedicated buffers get a page of their own, kept a while after
 * they go). Each test opens a real device (lavapipe here) and an allocator
 * of its own on it, with small pages and a small heap so that every path
 * (new page, reuse, exhaustion, kept pages) is reached in a few calls; its
 * accounting is checked exactly after every operation.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "harness.h"

#include "device/device.h"
#include "common/log.h"
#include "device/allocator.h"

#define PAGE (1ull << 20)
#define MAX_LIVE 512

static uv_loop_t loop;
static struct ruda_vulkan vk;
static struct ruda_device *dev;
static struct ruda_memory mem;
static struct ruda_memory *m = &mem;
static uint64_t A; /* m->alignment */

static void setup(void)
{
	ruda__log_init(RUDA_LOG_ERROR - 1);
	ck_assert_int_eq(uv_loop_init(&loop), 0);
	ck_assert_int_eq(ruda__vulkan_init(&vk), 0);
	int physical = ruda__vulkan_select(&vk, NULL);
	ck_assert_int_ge(physical, 0);
	ck_assert_int_eq(ruda__device_create(&vk, (uint32_t)physical, 0, &loop, &dev), 0);
	/* an allocator alone on its heap (not the device's budget, which its
	 * own allocator shares), with 1 MiB pages */
	VkMemoryRequirements req = {.size = 65536, .alignment = 256,
				    .memoryTypeBits = 1u << dev->allocator.type};
	struct ruda_memory_device for_memory = {
		.vk = dev->vk,
		.memory = &dev->memory,
		.limits = &dev->props.limits,
		.max_allocation_size = dev->max_allocation_size,
		.frees = &dev->frees,
		.heap_budgets = NULL,
	};
	ck_assert_int_eq(ruda__memory_init(m, &for_memory, &req), 0);
	ck_assert_ptr_eq(m->budget, &m->own);
	m->page_size = PAGE;
	m->max_shared = PAGE / 4;
	m->heap_size = 64 * PAGE;
	m->keep_for_ns = 0; /* no kept dedicated pages unless a test wants them */
	A = m->alignment;
	ck_assert_uint_ge(A, 256);
	ck_assert_uint_eq(A & (A - 1), 0);
	ck_assert_uint_le(A, 65536);
}

static void teardown(void)
{
	ruda__memory_finish(m);
	ruda__deferred_free_wait(&dev->frees);
	ruda__device_destroy(dev);
	uv_run(&loop, UV_RUN_DEFAULT);
	ck_assert_int_eq(uv_loop_close(&loop), 0);
	ruda__vulkan_finish(&vk);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

/* ---- the accounting --------------------------------------------------------- */

struct expect {
	uint64_t pages, reserved, in_use, allocations, empty_pages, kept_bytes;
};

/* Every counter as expected, and the heap's budget holds exactly the pages
 * once the pool has given back what was freed. */
#define check_stats(...) check_stats_at(__LINE__, (struct expect){__VA_ARGS__})
static void check_stats_at(int line, struct expect e)
{
	ruda__deferred_free_wait(&dev->frees);
	uv_run(&loop, UV_RUN_NOWAIT);
	const struct ruda_memory_stats *s = &m->stats;
	ck_assert_msg(s->pages == e.pages && s->reserved == e.reserved && s->in_use == e.in_use &&
			      s->allocations == e.allocations && s->empty_pages == e.empty_pages &&
			      s->kept_bytes == e.kept_bytes,
		      "line %d: pages %llu reserved %llu in_use %llu allocations %llu empty %llu "
		      "kept %llu; expected %llu %llu %llu %llu %llu %llu",
		      line, (unsigned long long)s->pages, (unsigned long long)s->reserved,
		      (unsigned long long)s->in_use, (unsigned long long)s->allocations,
		      (unsigned long long)s->empty_pages, (unsigned long long)s->kept_bytes,
		      (unsigned long long)e.pages, (unsigned long long)e.reserved,
		      (unsigned long long)e.in_use, (unsigned long long)e.allocations,
		      (unsigned long long)e.empty_pages, (unsigned long long)e.kept_bytes);
	ck_assert_msg(atomic_load(&m->own.held) == e.reserved, "line %d: budget holds %llu, not %llu",
		      line, (unsigned long long)atomic_load(&m->own.held),
		      (unsigned long long)e.reserved);
	ck_assert_uint_eq(atomic_load(&m->freeing), 0);
}

static struct ruda_allocation alloc_ok(uint64_t size, uint64_t alignment, ruda_allocation_mode mode)
{
	struct ruda_allocation a;
	ruda_status st = ruda__memory_alloc_mode(m, size, alignment, mode, VK_NULL_HANDLE, &a);
	ck_assert_msg(st == RUDA_OK, "alloc %llu: %s", (unsigned long long)size, ruda_strerror(st));
	ck_assert_ptr_nonnull(a.page);
	ck_assert(a.memory != VK_NULL_HANDLE);
	uint64_t align = alignment > A ? alignment : A;
	ck_assert_msg(a.offset % align == 0, "offset %llu not aligned to %llu",
		      (unsigned long long)a.offset, (unsigned long long)align);
	ck_assert_uint_eq(a.size, align_up(size ? size : 1, A));
	int dedicated = a.size > m->max_shared || mode == RUDA_ALLOCATION_DEDICATED;
	ck_assert_int_eq(ruda__memory_dedicated(&a), dedicated);
	ck_assert_int_eq(ruda__memory_exportable(&a), 0);
	if (dedicated)
		ck_assert_uint_eq(a.offset, 0);
	else
		ck_assert_uint_le(a.offset + a.size, PAGE);
	return a;
}

/* A refused allocation changes nothing. */
static void alloc_fails(uint64_t size, ruda_allocation_mode mode, ruda_status want)
{
	struct ruda_memory_stats before = m->stats;
	uint64_t held = atomic_load(&m->own.held);
	struct ruda_allocation a = {0};
	ck_assert_int_eq(ruda__memory_alloc_mode(m, size, 0, mode, VK_NULL_HANDLE, &a), want);
	ck_assert_mem_eq(&m->stats, &before, sizeof(before));
	ck_assert_uint_eq(atomic_load(&m->own.held), held);
}

static int overlap(const struct ruda_allocation *a, const struct ruda_allocation *b)
{
	return a->memory == b->memory && a->offset < b->offset + b->size &&
	       b->offset < a->offset + a->size;
}

/* ---- deterministic cases ---------------------------------------------------- */

START_TEST(many_sizes)
{
	static const uint64_t sizes[] = {0, 1, 255, 256, 257, 1000, 4095, 4096, 4097, 65536,
					 65537, 100000, PAGE / 4 - 1, PAGE / 4, PAGE / 4 + 1,
					 PAGE / 2, PAGE, PAGE + 1, 3 * PAGE + 12345};
	enum { N = sizeof(sizes) / sizeof(sizes[0]) };
	struct ruda_allocation a[N];
	uint64_t in_use = 0, dedicated_bytes = 0, dedicated = 0;
	for (int i = 0; i < N; i++) {
		a[i] = alloc_ok(sizes[i], 0, RUDA_ALLOCATION_AUTO);
		in_use += a[i].size;
		if (ruda__memory_dedicated(&a[i])) {
			dedicated++;
			dedicated_bytes += a[i].size;
		}
		for (int j = 0; j < i; j++)
			ck_assert_msg(!overlap(&a[i], &a[j]), "sizes %llu and %llu overlap",
				      (unsigned long long)sizes[i], (unsigned long long)sizes[j]);
	}
	ck_assert_uint_eq(dedicated, 5); /* PAGE/4 + 1 and above */
	ck_assert_uint_eq(m->stats.in_use, in_use);
	ck_assert_uint_eq(m->stats.allocations, N);
	uint64_t shared_pages = m->stats.pages - dedicated;
	/* the shared ones (under 1 MiB together) share one page */
	ck_assert_uint_eq(shared_pages, 1);
	check_stats(.pages = m->stats.pages, .reserved = shared_pages * PAGE + dedicated_bytes,
		    .in_use = in_use, .allocations = N);
	/* free in reverse: dedicated pages go at once (none kept), one empty
	 * shared page stays for the next buffers */
	for (int i = N - 1; i >= 0; i--) {
		in_use -= a[i].size;
		ruda__memory_free(m, &a[i]);
		ck_assert_uint_eq(m->stats.in_use, in_use);
		ck_assert_uint_eq(m->stats.allocations, (uint64_t)i);
	}
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
	ck_assert_uint_eq(ruda__memory_cleanup(m), PAGE);
	check_stats(0);
}
END_TEST

START_TEST(alignment_honoured)
{
	struct ruda_allocation small = alloc_ok(100, 0, RUDA_ALLOCATION_AUTO);
	ck_assert_uint_eq(small.offset, 0);
	static const uint64_t aligns[] = {4096, 65536, 512, 131072, 1};
	struct ruda_allocation a[5];
	uint64_t in_use = small.size;
	for (int i = 0; i < 5; i++) {
		a[i] = alloc_ok(300 + (uint64_t)i, aligns[i], RUDA_ALLOCATION_AUTO);
		ck_assert_ptr_eq(a[i].page, small.page);
		ck_assert_uint_gt(a[i].offset, 0);
		in_use += a[i].size;
	}
	/* the 64 KiB one after the 4 KiB one: the first free offset past it */
	ck_assert_uint_eq(a[0].offset, 4096);
	ck_assert_uint_eq(a[1].offset, 65536);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = in_use, .allocations = 6);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < i; j++)
			ck_assert(!overlap(&a[i], &a[j]));
	for (int i = 0; i < 5; i++)
		ruda__memory_free(m, &a[i]);
	ruda__memory_free(m, &small);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
}
END_TEST

/* Freed neighbours merge: after any order of frees the page is one range
 * again, and a hole is found only where it is large enough. */
START_TEST(coalescing_and_reuse)
{
	m->max_shared = PAGE; /* a whole page may be one shared buffer */
	const uint64_t B = PAGE / 16;
	struct ruda_allocation b[16];
	for (int i = 0; i < 16; i++) {
		b[i] = alloc_ok(B, 0, RUDA_ALLOCATION_AUTO);
		ck_assert(b[i].memory == b[0].memory);
	}
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE, .allocations = 16);
	/* holes of one block each: a two-block buffer needs a new page */
	for (int i = 0; i < 16; i += 2)
		ruda__memory_free(m, &b[i]);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE / 2, .allocations = 8);
	struct ruda_allocation two = alloc_ok(2 * B, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(two.memory != b[1].memory);
	check_stats(.pages = 2, .reserved = 2 * PAGE, .in_use = PAGE / 2 + 2 * B,
		    .allocations = 9);
	/* the new page, once empty, is kept; cleanup gives it back */
	ruda__memory_free(m, &two);
	check_stats(.pages = 2, .reserved = 2 * PAGE, .in_use = PAGE / 2, .allocations = 8,
		    .empty_pages = 1);
	ck_assert_uint_eq(ruda__memory_cleanup(m), PAGE);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE / 2, .allocations = 8);
	/* freeing block 1 merges it with both free neighbours: 0..2 */
	ruda__memory_free(m, &b[1]);
	struct ruda_allocation three = alloc_ok(3 * B, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(three.memory == b[3].memory);
	ck_assert_uint_eq(three.offset, b[0].offset < b[2].offset ? b[0].offset : b[2].offset);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE / 2 - B + 3 * B,
		    .allocations = 8);
	/* a freed range next to its successor only (the block before is used) */
	ruda__memory_free(m, &three);
	b[0] = alloc_ok(B, 0, RUDA_ALLOCATION_AUTO); /* first fit: some free block */
	ruda__memory_free(m, &b[0]);
	/* free the rest in a scrambled order: every merge case */
	static const int order[] = {9, 15, 3, 13, 5, 11, 7};
	for (int i = 0; i < 7; i++)
		ruda__memory_free(m, &b[order[i]]);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
	/* all one range again: the whole page in one buffer, on that page */
	struct ruda_allocation whole = alloc_ok(PAGE, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(whole.memory == b[1].memory);
	ck_assert_uint_eq(whole.offset, 0);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE, .allocations = 1);
	ruda__memory_free(m, &whole);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
}
END_TEST

/* An aligned buffer carved from the middle of a free range leaves a head
 * and a tail; the tail must still merge with a buffer freed right after
 * it (the tail's end key was once refused as a duplicate of the range's). */
START_TEST(aligned_split_coalesces)
{
	m->max_shared = PAGE;
	const uint64_t K = 65536;
	struct ruda_allocation x = alloc_ok(A, 0, RUDA_ALLOCATION_AUTO);
	struct ruda_allocation f = alloc_ok(2 * K - A, 0, RUDA_ALLOCATION_AUTO);
	struct ruda_allocation c = alloc_ok(A, 0, RUDA_ALLOCATION_AUTO);
	ck_assert_uint_eq(x.offset, 0);
	ck_assert_uint_eq(f.offset, A);
	ck_assert_uint_eq(c.offset, 2 * K);
	ruda__memory_free(m, &f); /* free: [A, 2K) and [2K + A, PAGE) */
	struct ruda_allocation y = alloc_ok(A, K, RUDA_ALLOCATION_AUTO);
	ck_assert_uint_eq(y.offset, K); /* split: [A, K) and [K + A, 2K) */
	check_stats(.pages = 1, .reserved = PAGE, .in_use = 3 * A, .allocations = 3);
	ruda__memory_free(m, &c);
	ruda__memory_free(m, &y);
	ruda__memory_free(m, &x);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
	struct ruda_allocation whole = alloc_ok(PAGE, 0, RUDA_ALLOCATION_AUTO);
	ck_assert_msg(whole.memory == x.memory, "the page's free ranges did not merge into one");
	ck_assert_uint_eq(whole.offset, 0);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE, .allocations = 1);
	ruda__memory_free(m, &whole);
}
END_TEST

START_TEST(exhaustion)
{
	m->heap_size = 3 * PAGE;
	const uint64_t Q = PAGE / 4; /* the largest shared buffer: four a page */
	struct ruda_allocation q[12];
	for (int i = 0; i < 12; i++)
		q[i] = alloc_ok(Q, 0, RUDA_ALLOCATION_AUTO);
	check_stats(.pages = 3, .reserved = 3 * PAGE, .in_use = 3 * PAGE, .allocations = 12);
	/* the heap is full: refused, nothing changed, and again */
	alloc_fails(Q, RUDA_ALLOCATION_AUTO, RUDA_ERROR_OUT_OF_MEMORY);
	alloc_fails(A, RUDA_ALLOCATION_AUTO, RUDA_ERROR_OUT_OF_MEMORY);
	alloc_fails(PAGE / 2, RUDA_ALLOCATION_AUTO, RUDA_ERROR_OUT_OF_MEMORY);
	alloc_fails(A, RUDA_ALLOCATION_DEDICATED, RUDA_ERROR_OUT_OF_MEMORY);
	alloc_fails(Q, RUDA_ALLOCATION_PERSISTENT, RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_lt(dev->max_allocation_size, UINT64_MAX);
	alloc_fails(dev->max_allocation_size + 1, RUDA_ALLOCATION_AUTO, RUDA_ERROR_TOO_LARGE);
	alloc_fails(UINT64_MAX, RUDA_ALLOCATION_DEDICATED, RUDA_ERROR_TOO_LARGE);
	check_stats(.pages = 3, .reserved = 3 * PAGE, .in_use = 3 * PAGE, .allocations = 12);
	/* a freed slot is found again, at the same place */
	struct ruda_allocation old = q[5];
	ruda__memory_free(m, &q[5]);
	q[5] = alloc_ok(Q, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(q[5].memory == old.memory && q[5].offset == old.offset);
	check_stats(.pages = 3, .reserved = 3 * PAGE, .in_use = 3 * PAGE, .allocations = 12);
	/* freeing everything leaves one empty page; the other two go back (in
	 * the thread pool) and a buffer of two pages fits at once */
	for (int i = 0; i < 12; i++)
		ruda__memory_free(m, &q[i]);
	ck_assert_uint_eq(m->stats.pages, 1);
	struct ruda_allocation big = alloc_ok(2 * PAGE, 0, RUDA_ALLOCATION_AUTO);
	check_stats(.pages = 2, .reserved = 3 * PAGE, .in_use = 2 * PAGE, .allocations = 1,
		    .empty_pages = 1);
	alloc_fails(PAGE + 1, RUDA_ALLOCATION_AUTO, RUDA_ERROR_OUT_OF_MEMORY);
	/* the empty shared page serves what fits in it */
	struct ruda_allocation s = alloc_ok(Q, 0, RUDA_ALLOCATION_AUTO);
	check_stats(.pages = 2, .reserved = 3 * PAGE, .in_use = 2 * PAGE + Q, .allocations = 2);
	ruda__memory_free(m, &s);
	ruda__memory_free(m, &big);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
}
END_TEST

/* Freed dedicated pages are kept for the next buffer of their size, up to
 * keep_dedicated bytes (the oldest go first), until they age out or the
 * heap needs the room. */
START_TEST(kept_dedicated_pages)
{
	m->keep_for_ns = 1000000000ull;
	m->keep_dedicated = 3 * PAGE;
	struct ruda_allocation a = alloc_ok(PAGE, 0, RUDA_ALLOCATION_AUTO);
	VkDeviceMemory x = a.memory;
	ck_assert(ruda__memory_dedicated(&a));
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE, .allocations = 1);
	ruda__memory_free(m, &a);
	check_stats(.pages = 1, .reserved = PAGE, .kept_bytes = PAGE);
	a = alloc_ok(PAGE, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(a.memory == x);
	check_stats(.pages = 1, .reserved = PAGE, .in_use = PAGE, .allocations = 1);
	ruda__memory_free(m, &a);
	/* another size gets a page of its own */
	struct ruda_allocation b = alloc_ok(2 * PAGE, 0, RUDA_ALLOCATION_AUTO);
	ck_assert(b.memory != x);
	check_stats(.pages = 2, .reserved = 3 * PAGE, .in_use = 2 * PAGE, .allocations = 1,
		    .kept_bytes = PAGE);
	ruda__memory_free(m, &b);
	check_stats(.pages = 2, .reserved = 3 * PAGE, .kept_bytes = 3 * PAGE);
	/* a third kept page overflows the limit: the oldest go first (x, then b's) */
	struct ruda_allocation c = alloc_ok(PAGE + PAGE / 2, 0, RUDA_ALLOCATION_AUTO);
	check_stats(.pages = 3, .reserved = 4 * PAGE + PAGE / 2, .in_use = PAGE + PAGE / 2,
		    .allocations = 1, .kept_bytes = 3 * PAGE);
	ruda__memory_free(m, &c);
	check_stats(.pages = 1, .reserved = PAGE + PAGE / 2, .kept_bytes = PAGE + PAGE / 2);
	/* larger than the limit: never kept */
	struct ruda_allocation d = alloc_ok(4 * PAGE, 0, RUDA_ALLOCATION_AUTO);
	ruda__memory_free(m, &d);
	check_stats(.pages = 1, .reserved = PAGE + PAGE / 2, .kept_bytes = PAGE + PAGE / 2);
	/* not aged yet, then aged out */
	ck_assert_uint_eq(ruda__memory_age(m, uv_hrtime()), 0);
	check_stats(.pages = 1, .reserved = PAGE + PAGE / 2, .kept_bytes = PAGE + PAGE / 2);
	ck_assert_uint_eq(ruda__memory_age(m, uv_hrtime() + 2 * m->keep_for_ns), PAGE + PAGE / 2);
	check_stats(0);
	/* wanted memory comes before kept memory: a full heap gives its kept
	 * pages back for a buffer of another size */
	m->heap_size = 3 * PAGE;
	a = alloc_ok(2 * PAGE, 0, RUDA_ALLOCATION_AUTO);
	ruda__memory_free(m, &a);
	check_stats(.pages = 1, .reserved = 2 * PAGE, .kept_bytes = 2 * PAGE);
	b = alloc_ok(2 * PAGE + A, 0, RUDA_ALLOCATION_DEDICATED);
	check_stats(.pages = 1, .reserved = 2 * PAGE + A, .in_use = 2 * PAGE + A,
		    .allocations = 1);
	ruda__memory_free(m, &b);
	ck_assert_uint_eq(ruda__memory_cleanup(m), 2 * PAGE + A);
	check_stats(0);
}
END_TEST

/* Persistent buffers never share a page with the others. */
START_TEST(persistent_pages_apart)
{
	struct ruda_allocation a = alloc_ok(4096, 0, RUDA_ALLOCATION_AUTO);
	struct ruda_allocation p = alloc_ok(4096, 0, RUDA_ALLOCATION_PERSISTENT);
	struct ruda_allocation a2 = alloc_ok(4096, 0, RUDA_ALLOCATION_AUTO);
	struct ruda_allocation p2 = alloc_ok(4096, 0, RUDA_ALLOCATION_PERSISTENT);
	ck_assert(a.memory != p.memory);
	ck_assert(a2.memory == a.memory);
	ck_assert(p2.memory == p.memory);
	struct ruda_allocation d = alloc_ok(4096, 0, RUDA_ALLOCATION_DEDICATED);
	ck_assert(d.memory != a.memory && d.memory != p.memory);
	ck_assert_uint_eq(d.offset, 0);
	check_stats(.pages = 3, .reserved = 2 * PAGE + 4096, .in_use = 5 * 4096, .allocations = 5);
	ruda__memory_free(m, &d);
	ruda__memory_free(m, &a);
	ruda__memory_free(m, &a2);
	check_stats(.pages = 2, .reserved = 2 * PAGE, .in_use = 2 * 4096, .allocations = 2,
		    .empty_pages = 1);
	ruda__memory_free(m, &p);
	ruda__memory_free(m, &p2);
	check_stats(.pages = 1, .reserved = PAGE, .empty_pages = 1);
}
END_TEST

/* ---- a seeded random sequence against a model -------------------------------- */

struct model_page {
	VkDeviceMemory memory;
	uint64_t size, used;
	int dedicated, persistent;
};

struct model {
	struct ruda_allocation live[MAX_LIVE];
	int persistent[MAX_LIVE];
	int nlive;
	struct model_page pages[MAX_LIVE + 64];
	int npages;
	uint64_t empty;
};

static struct model_page *model_page(struct model *md, VkDeviceMemory memory)
{
	for (int i = 0; i < md->npages; i++)
		if (md->pages[i].memory == memory)
			return &md->pages[i];
	return NULL;
}

static int cmp_alloc(const void *a, const void *b)
{
	const struct ruda_allocation *x = a, *y = b;
	return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Whether a shared page of the model has a hole for `size` at `align`. */
static int model_fits(struct model *md, const struct model_page *pg, uint64_t size,
		      uint64_t align)
{
	struct ruda_allocation on[MAX_LIVE];
	int n = 0;
	for (int i = 0; i < md->nlive; i++)
		if (md->live[i].memory == pg->memory)
			on[n++] = md->live[i];
	qsort(on, (size_t)n, sizeof(on[0]), cmp_alloc);
	uint64_t start = 0;
	for (int i = 0; i <= n; i++) {
		uint64_t end = i < n ? on[i].offset : pg->size;
		if (align_up(start, align) + size <= end)
			return 1;
		if (i < n)
			start = on[i].offset + on[i].size;
	}
	return 0;
}

static void model_check(struct model *md, uint64_t step)
{
	struct expect e = {0};
	for (int i = 0; i < md->npages; i++)
		e.reserved += md->pages[i].size;
	for (int i = 0; i < md->nlive; i++)
		e.in_use += md->live[i].size;
	e.pages = (uint64_t)md->npages;
	e.allocations = (uint64_t)md->nlive;
	e.empty_pages = md->empty;
	ck_assert_msg(m->stats.pages == e.pages && m->stats.reserved == e.reserved &&
			      m->stats.in_use == e.in_use && m->stats.allocations == e.allocations &&
			      m->stats.empty_pages == e.empty_pages && m->stats.kept_bytes == 0,
		      "step %llu: pages %llu/%llu reserved %llu/%llu in_use %llu/%llu "
		      "allocations %llu/%llu empty %llu/%llu",
		      (unsigned long long)step, (unsigned long long)m->stats.pages,
		      (unsigned long long)e.pages, (unsigned long long)m->stats.reserved,
		      (unsigned long long)e.reserved, (unsigned long long)m->stats.in_use,
		      (unsigned long long)e.in_use, (unsigned long long)m->stats.allocations,
		      (unsigned long long)e.allocations, (unsigned long long)m->stats.empty_pages,
		      (unsigned long long)e.empty_pages);
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void model_alloc(struct model *md, uint64_t *seed, uint64_t step)
{
	uint64_t r = rng(seed), size;
	switch (r % 8) {
	case 0: size = r >> 40 & 0xff; break;                          /* tiny, 0 too */
	case 1: case 2: case 3: size = 1 + (r >> 20) % 16384; break;   /* small */
	case 4: case 5: size = 1 + (r >> 20) % (PAGE / 4); break;      /* mid, up to max_shared */
	case 6: size = PAGE / 4 + 1 + (r >> 20) % (2 * PAGE); break; /* its own page */
	default: size = 1 + (r >> 20) % 65536; break;
	}
	static const uint64_t aligns[] = {0, 0, 0, 1, 256, 1024, 4096, 65536};
	uint64_t alignment = aligns[(r >> 8) % 8];
	ruda_allocation_mode mode = (r >> 12) % 10 == 0   ? RUDA_ALLOCATION_PERSISTENT
				    : (r >> 12) % 10 == 1 ? RUDA_ALLOCATION_DEDICATED
							  : RUDA_ALLOCATION_AUTO;
	struct ruda_allocation a = alloc_ok(size, alignment, mode);
	for (int i = 0; i < md->nlive; i++)
		ck_assert_msg(!overlap(&a, &md->live[i]), "step %llu: overlaps a live buffer",
			      (unsigned long long)step);
	int persistent = mode == RUDA_ALLOCATION_PERSISTENT;
	struct model_page *pg = model_page(md, a.memory);
	if (ruda__memory_dedicated(&a)) {
		ck_assert_msg(!pg, "step %llu: a dedicated page shared", (unsigned long long)step);
		md->pages[md->npages++] = (struct model_page){
			.memory = a.memory, .size = a.size, .used = a.size, .dedicated = 1};
	} else {
		uint64_t align = alignment > A ? alignment : A;
		if (!pg) {
			/* first fit takes a new page only when no page of its kind
			 * has a hole large enough (holes coalesced) */
			for (int i = 0; i < md->npages; i++)
				ck_assert_msg(md->pages[i].dedicated ||
						      md->pages[i].persistent != persistent ||
						      !model_fits(md, &md->pages[i], a.size, align),
					      "step %llu: a new page for %llu bytes though page %d "
					      "has room",
					      (unsigned long long)step, (unsigned long long)a.size, i);
			pg = &md->pages[md->npages++];
			*pg = (struct model_page){.memory = a.memory, .size = PAGE,
						  .persistent = persistent};
		} else {
			ck_assert(!pg->dedicated && pg->persistent == persistent);
			if (pg->used == 0)
				md->empty--;
		}
		pg->used += a.size;
		ck_assert_uint_le(pg->used, PAGE);
	}
	md->persistent[md->nlive] = persistent;
	md->live[md->nlive++] = a;
}

static void model_free(struct model *md, int i)
{
	struct ruda_allocation a = md->live[i];
	md->live[i] = md->live[--md->nlive];
	md->persistent[i] = md->persistent[md->nlive];
	struct model_page *pg = model_page(md, a.memory);
	ck_assert_ptr_nonnull(pg);
	ruda__memory_free(m, &a);
	pg->used -= a.size;
	int gone = pg->dedicated; /* none kept: keep_for_ns is 0 */
	if (!pg->dedicated && pg->used == 0 && ++md->empty > m->keep_empty) {
		md->empty--;
		gone = 1;
	}
	if (gone)
		*pg = md->pages[--md->npages];
}

START_TEST(random_against_model)
{
	static struct model md;
	memset(&md, 0, sizeof(md));
	uint64_t seed = 0x9e3779b97f4a7c15ull ^ (uint64_t)_i;
	m->keep_empty = (uint32_t)_i % 3; /* 0, 1 or 2 empty pages kept */
	m->heap_size = 0;                 /* no limit: every allocation must succeed */
	for (uint64_t step = 0; step < 4000; step++) {
		uint64_t r = rng(&seed), x = r % 100;
		if (md.nlive > 0 && (md.nlive == MAX_LIVE || m->stats.in_use > 24 * PAGE || x < 45)) {
			model_free(&md, (int)((r >> 32) % (uint64_t)md.nlive));
		} else if (x < 98) {
			model_alloc(&md, &seed, step);
		} else {
			/* cleanup gives back every empty shared page */
			uint64_t freed = ruda__memory_cleanup(m);
			ck_assert_uint_eq(freed, md.empty * PAGE);
			for (int i = 0; i < md.npages;)
				if (!md.pages[i].dedicated && md.pages[i].used == 0)
					md.pages[i] = md.pages[--md.npages];
				else
					i++;
			md.empty = 0;
		}
		model_check(&md, step);
		if (step % 500 == 0) {
			ruda__deferred_free_wait(&dev->frees);
			ck_assert_uint_eq(atomic_load(&m->own.held), m->stats.reserved);
		}
	}
	while (md.nlive)
		model_free(&md, md.nlive - 1);
	model_check(&md, 4000);
	ck_assert_uint_le(md.empty, m->keep_empty);
	ck_assert_uint_eq(ruda__memory_cleanup(m), md.empty * PAGE);
	check_stats(0);
}
END_TEST

static Suite *allocator_suite(void)
{
	Suite *s = suite_create("allocator_model");
	TCase *t = tcase_create("allocator");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_set_timeout(t, 120);
	tcase_add_test(t, many_sizes);
	tcase_add_test(t, alignment_honoured);
	tcase_add_test(t, coalescing_and_reuse);
	tcase_add_test(t, aligned_split_coalesces);
	tcase_add_test(t, exhaustion);
	tcase_add_test(t, kept_dedicated_pages);
	tcase_add_test(t, persistent_pages_apart);
	tcase_add_loop_test(t, random_against_model, 0, 3);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(allocator_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
