/* The buffer allocator (daemon/device/allocator.c) on its own: it needs a
 * VkDevice and what it is told of the device, not a ruda_device, so it is
 * given lavapipe's with a heap made small where the test needs one.
 * Sub-allocation and coalescing in shared pages, dedicated pages kept and
 * aged, the size limit, and a heap budget shared by two allocators. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "device/allocator.h"

static VkInstance instance;
static VkPhysicalDevice physical;
static VkDevice device;
static VkPhysicalDeviceMemoryProperties memory;
static VkPhysicalDeviceProperties props;
static VkMemoryRequirements req;
static struct ruda_deferred_free frees;

static void setup(void)
{
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
				 .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
				   .pApplicationInfo = &app};
	ck_assert_int_eq(vkCreateInstance(&ii, NULL, &instance), VK_SUCCESS);
	uint32_t n = 1;
	VkResult r = vkEnumeratePhysicalDevices(instance, &n, &physical);
	ck_assert(r == VK_SUCCESS || r == VK_INCOMPLETE);
	ck_assert_uint_ge(n, 1);
	vkGetPhysicalDeviceMemoryProperties(physical, &memory);
	vkGetPhysicalDeviceProperties(physical, &props);
	float priority = 1.0f;
	VkDeviceQueueCreateInfo q = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
				     .queueCount = 1, .pQueuePriorities = &priority};
	VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
				 .queueCreateInfoCount = 1, .pQueueCreateInfos = &q};
	ck_assert_int_eq(vkCreateDevice(physical, &di, NULL, &device), VK_SUCCESS);
	VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO, .size = 65536,
				 .usage = RUDA_BUFFER_USAGE,
				 .sharingMode = VK_SHARING_MODE_EXCLUSIVE};
	VkBuffer probe;
	ck_assert_int_eq(vkCreateBuffer(device, &bi, NULL, &probe), VK_SUCCESS);
	vkGetBufferMemoryRequirements(device, probe, &req);
	vkDestroyBuffer(device, probe, NULL);
	/* no loop: pages are freed at once rather than in a thread pool */
	ruda__deferred_free_init(&frees, NULL);
}

static void teardown(void)
{
	ruda__deferred_free_finish(&frees);
	vkDestroyDevice(device, NULL);
	vkDestroyInstance(instance, NULL);
}

/* An allocator on the device; `heap_bytes` (0: the real size) for the
 * heap of every memory type, `budgets` shared or NULL. */
static void init(struct ruda_memory *m, uint64_t heap_bytes, struct ruda_heap_budget *budgets)
{
	static VkPhysicalDeviceMemoryProperties shown;
	shown = memory;
	for (uint32_t i = 0; heap_bytes && i < shown.memoryHeapCount; i++)
		shown.memoryHeaps[i].size = heap_bytes;
	struct ruda_memory_device d = {
		.vk = device,
		.memory = &shown,
		.limits = &props.limits,
		.max_allocation_size = 1ull << 30,
		.frees = &frees,
		.heap_budgets = budgets,
	};
	ck_assert_int_eq(ruda__memory_init(m, &d, &req), 0);
}

START_TEST(small_buffers_share_a_page_and_coalesce)
{
	struct ruda_memory m;
	init(&m, 0, NULL);
	enum { N = 100 };
	struct ruda_allocation a[N];
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(ruda__memory_alloc_mode(&m, 1000, 0, RUDA_ALLOCATION_AUTO,
							 VK_NULL_HANDLE, &a[i]),
				 RUDA_OK);
		ck_assert(!ruda__memory_dedicated(&a[i]));
		ck_assert_uint_eq(a[i].offset % m.alignment, 0);
		ck_assert_uint_ge(a[i].size, 1000);
		for (int j = 0; j < i; j++) /* no two overlap */
			ck_assert(a[j].offset + a[j].size <= a[i].offset ||
				  a[i].offset + a[i].size <= a[j].offset);
	}
	ck_assert_uint_eq(m.stats.pages, 1);
	ck_assert_uint_eq(m.stats.allocations, N);
	/* freed out of order, every other first: the ranges merge back */
	for (int i = 0; i < N; i += 2)
		ruda__memory_free(&m, &a[i]);
	for (int i = N - 1; i > 0; i -= 2)
		ruda__memory_free(&m, &a[i]);
	ck_assert_uint_eq(m.stats.in_use, 0);
	ck_assert_uint_eq(m.stats.empty_pages, 1); /* kept for the next buffers */
	/* one free range again: the largest shared allocation fits at 0 */
	struct ruda_allocation big;
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, m.max_shared, 0, RUDA_ALLOCATION_AUTO,
						 VK_NULL_HANDLE, &big),
			 RUDA_OK);
	ck_assert_uint_eq(big.offset, 0);
	ck_assert_uint_eq(m.stats.pages, 1);
	ruda__memory_free(&m, &big);
	ck_assert_uint_eq(ruda__memory_cleanup(&m), m.page_size);
	ck_assert_uint_eq(m.stats.pages, 0);
	ck_assert_uint_eq(m.stats.reserved, 0);
	ruda__memory_finish(&m);
}
END_TEST

START_TEST(large_buffers_are_dedicated_kept_and_aged)
{
	struct ruda_memory m;
	init(&m, 0, NULL);
	uint64_t size = m.max_shared + 4096;
	struct ruda_allocation a;
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, size, 0, RUDA_ALLOCATION_AUTO,
						 VK_NULL_HANDLE, &a),
			 RUDA_OK);
	ck_assert(ruda__memory_dedicated(&a));
	ck_assert(!ruda__memory_exportable(&a));
	uint64_t reserved = a.size;
	ruda__memory_free(&m, &a);
	/* kept for the next buffer of its size, which gets the same memory */
	ck_assert_uint_eq(m.stats.kept_bytes, reserved);
	VkDeviceMemory kept = a.memory;
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, size, 0, RUDA_ALLOCATION_AUTO,
						 VK_NULL_HANDLE, &a),
			 RUDA_OK);
	ck_assert(a.memory == kept);
	ck_assert_uint_eq(m.stats.kept_bytes, 0);
	ruda__memory_free(&m, &a);
	/* not yet old enough, then old enough */
	ck_assert_uint_eq(ruda__memory_age(&m, uv_hrtime()), 0);
	ck_assert_uint_eq(ruda__memory_age(&m, uv_hrtime() + m.keep_for_ns + 1), reserved);
	ck_assert_uint_eq(m.stats.pages, 0);
	/* keeping nothing: a free gives the page back at once */
	ruda__memory_set_keep_for_ms(&m, 0);
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, size, 0, RUDA_ALLOCATION_AUTO,
						 VK_NULL_HANDLE, &a),
			 RUDA_OK);
	ruda__memory_free(&m, &a);
	ck_assert_uint_eq(m.stats.pages, 0);
	ck_assert_uint_eq(m.stats.kept_bytes, 0);
	ruda__memory_finish(&m);
}
END_TEST

START_TEST(limits_refuse)
{
	struct ruda_memory m;
	init(&m, 64ull << 20, NULL);
	struct ruda_allocation a, b;
	/* over maxMemoryAllocationSize as told */
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, (1ull << 30) + 1, 0, RUDA_ALLOCATION_AUTO,
						 VK_NULL_HANDLE, &a),
			 RUDA_ERROR_TOO_LARGE);
	/* over the heap: refused before the (lazy) driver would accept it */
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, 100ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &a),
			 RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, 40ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &a),
			 RUDA_OK);
	ck_assert_int_eq(ruda__memory_alloc_mode(&m, 40ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &b),
			 RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_eq(m.stats.pages, 1);
	ruda__memory_free(&m, &a);
	ruda__memory_cleanup(&m);
	ruda__memory_age(&m, UINT64_MAX);
	ruda__memory_finish(&m);
}
END_TEST

/* Two allocators on one heap (two logical devices of one physical
 * device): together within it, and one's kept page given up for the
 * other's buffer. */
START_TEST(heap_budget_is_shared)
{
	static struct ruda_heap_budget budgets[VK_MAX_MEMORY_HEAPS];
	memset(budgets, 0, sizeof(budgets));
	struct ruda_memory m1, m2;
	init(&m1, 512ull << 20, budgets);
	init(&m2, 512ull << 20, budgets);
	ck_assert_ptr_eq(m1.budget, m2.budget);
	/* a page of m1 small enough to be kept (an eighth of the heap at
	 * most), one of m2 that fits only without it */
	struct ruda_allocation a, b;
	ck_assert_int_eq(ruda__memory_alloc_mode(&m1, 60ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &a),
			 RUDA_OK);
	ck_assert_int_eq(ruda__memory_alloc_mode(&m2, 460ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &b),
			 RUDA_ERROR_OUT_OF_MEMORY);
	ruda__memory_free(&m1, &a);
	ck_assert_uint_eq(m1.stats.kept_bytes, a.size);
	/* wanted memory comes before kept memory, the other allocator's too */
	ck_assert_int_eq(ruda__memory_alloc_mode(&m2, 460ull << 20, 0, RUDA_ALLOCATION_DEDICATED,
						 VK_NULL_HANDLE, &b),
			 RUDA_OK);
	ck_assert_uint_eq(m1.stats.kept_bytes, 0);
	ck_assert_uint_eq(m1.stats.pages, 0);
	ruda__memory_set_keep_for_ms(&m2, 0);
	ruda__memory_free(&m2, &b);
	ck_assert_uint_eq(atomic_load(&budgets[m1.budget - budgets].held), 0);
	ruda__memory_finish(&m2);
	ruda__memory_finish(&m1);
	ck_assert_ptr_null(budgets[m1.budget - budgets].members);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("allocator");
	TCase *t = tcase_create("allocator");
	tcase_set_timeout(t, 60);
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, small_buffers_share_a_page_and_coalesce);
	tcase_add_test(t, large_buffers_are_dedicated_kept_and_aged);
	tcase_add_test(t, limits_refuse);
	tcase_add_test(t, heap_budget_is_shared);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
