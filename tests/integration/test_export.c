/*
 * Buffers exported as opaque fds (get_resource), proven end to end: this
 * process is the importer, with a Vulkan instance and device of its own on
 * the physical device rudad uses. It imports the fd as Vulkan says
 * (VkImportMemoryFdInfoKHR, an identical buffer, the dedicated info), reads
 * what was written through rudad and writes what rudad then reads.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_export");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static void setup_no_export(void)
{
	const char *const args[] = {"--set", "export_memory=no", NULL};
	test_daemon_start(&daemon_, args);
	client = test_connect(&daemon_, "test_export");
}

/* ---- the importer: a Vulkan device of this process ------------------------ */

struct importer {
	VkInstance instance;
	VkPhysicalDevice physical;
	VkDevice device;
	VkQueue queue;
	VkCommandPool pool;
	VkPhysicalDeviceMemoryProperties memory;
};

/* An imported buffer: the exported memory bound to a buffer of our own. */
struct imported {
	VkBuffer buffer;
	VkDeviceMemory memory;
};

#define VK_OK(call) ck_assert_int_eq((call), VK_SUCCESS)

/* Open the physical device whose UUIDs the export names. */
static void importer_open(struct importer *im, const ruda_resource *r)
{
	memset(im, 0, sizeof(*im));
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "test_export importer",
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	/* one instance for the process, never destroyed: destroying it unloads
	 * the driver, and LeakSanitizer then reports what the driver's globals
	 * still pointed to (128 bytes from lavapipe's enumeration) */
	static VkInstance instance;
	if (!instance)
		VK_OK(vkCreateInstance(&info, NULL, &instance));
	im->instance = instance;
	VkPhysicalDevice physical[16];
	uint32_t n = 16;
	ck_assert_int_ge(vkEnumeratePhysicalDevices(im->instance, &n, physical), 0);
	for (uint32_t i = 0; i < n && !im->physical; i++) {
		VkPhysicalDeviceIDProperties id = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
		};
		VkPhysicalDeviceProperties2 props = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
			.pNext = &id,
		};
		vkGetPhysicalDeviceProperties2(physical[i], &props);
		if (memcmp(id.deviceUUID, r->device_uuid, VK_UUID_SIZE) == 0 &&
		    memcmp(id.driverUUID, r->driver_uuid, VK_UUID_SIZE) == 0)
			im->physical = physical[i];
	}
	ck_assert_msg(im->physical, "no physical device with the export's UUIDs");
	vkGetPhysicalDeviceMemoryProperties(im->physical, &im->memory);
	VkQueueFamilyProperties families[16];
	uint32_t nfamilies = 16;
	vkGetPhysicalDeviceQueueFamilyProperties(im->physical, &nfamilies, families);
	uint32_t family = UINT32_MAX;
	for (uint32_t i = 0; i < nfamilies && family == UINT32_MAX; i++)
		if (families[i].queueFlags & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_TRANSFER_BIT))
			family = i;
	ck_assert_uint_ne(family, UINT32_MAX);
	float priority = 1.0f;
	VkDeviceQueueCreateInfo queue = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = family,
		.queueCount = 1,
		.pQueuePriorities = &priority,
	};
	const char *extension = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
	VkDeviceCreateInfo device = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &queue,
		.enabledExtensionCount = 1,
		.ppEnabledExtensionNames = &extension,
	};
	VK_OK(vkCreateDevice(im->physical, &device, NULL, &im->device));
	vkGetDeviceQueue(im->device, family, 0, &im->queue);
	VkCommandPoolCreateInfo pool = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.queueFamilyIndex = family,
	};
	VK_OK(vkCreateCommandPool(im->device, &pool, NULL, &im->pool));
}

static void importer_close(struct importer *im)
{
	vkDestroyCommandPool(im->device, im->pool, NULL);
	vkDestroyDevice(im->device, NULL);
}

/* Import `r` as its reply says. The fd becomes the import's (Vulkan closes
 * it with the memory). */
static struct imported import_resource(struct importer *im, const ruda_resource *r)
{
	struct imported out;
	ck_assert_uint_eq(r->handle_type, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT);
	VkExternalMemoryBufferCreateInfo external = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = r->handle_type,
	};
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = &external,
		.size = r->buffer_size,
		.usage = r->buffer_usage,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VK_OK(vkCreateBuffer(im->device, &info, NULL, &out.buffer));
	/* the identical buffer needs exactly the exported allocation */
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(im->device, out.buffer, &req);
	ck_assert_uint_eq(req.size, r->memory_size);
	ck_assert(req.memoryTypeBits & (1u << r->memory_type_index));
	ck_assert_uint_eq(im->memory.memoryTypes[r->memory_type_index].propertyFlags,
			  r->memory_property_flags);
	VkMemoryDedicatedAllocateInfo dedicated = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
		.buffer = out.buffer,
	};
	VkImportMemoryFdInfoKHR import = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
		.pNext = r->dedicated ? &dedicated : NULL,
		.handleType = r->handle_type,
		.fd = r->fd,
	};
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &import,
		.allocationSize = r->memory_size,
		.memoryTypeIndex = r->memory_type_index,
	};
	VK_OK(vkAllocateMemory(im->device, &alloc, NULL, &out.memory));
	VK_OK(vkBindBufferMemory(im->device, out.buffer, out.memory, 0));
	return out;
}

static void imported_free(struct importer *im, struct imported *b)
{
	vkDestroyBuffer(im->device, b->buffer, NULL);
	vkFreeMemory(im->device, b->memory, NULL);
}

/* A host-visible, coherent buffer of the importer's, mapped. */
static struct imported host_buffer(struct importer *im, uint64_t size, void **map)
{
	struct imported out;
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = size,
		.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VK_OK(vkCreateBuffer(im->device, &info, NULL, &out.buffer));
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(im->device, out.buffer, &req);
	VkMemoryPropertyFlags want = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
				     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	uint32_t type = UINT32_MAX;
	for (uint32_t i = 0; i < im->memory.memoryTypeCount && type == UINT32_MAX; i++)
		if ((req.memoryTypeBits & (1u << i)) &&
		    (im->memory.memoryTypes[i].propertyFlags & want) == want)
			type = i;
	ck_assert_uint_ne(type, UINT32_MAX);
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = type,
	};
	VK_OK(vkAllocateMemory(im->device, &alloc, NULL, &out.memory));
	VK_OK(vkBindBufferMemory(im->device, out.buffer, out.memory, 0));
	VK_OK(vkMapMemory(im->device, out.memory, 0, VK_WHOLE_SIZE, 0, map));
	return out;
}

/* One copy on the importer's queue, waited for. */
static void copy_and_wait(struct importer *im, VkBuffer src, uint64_t src_offset, VkBuffer dst,
			  uint64_t dst_offset, uint64_t size)
{
	VkCommandBufferAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = im->pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkCommandBuffer cmd;
	VK_OK(vkAllocateCommandBuffers(im->device, &alloc, &cmd));
	VkCommandBufferBeginInfo begin = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	VK_OK(vkBeginCommandBuffer(cmd, &begin));
	VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
	vkCmdCopyBuffer(cmd, src, dst, 1, &region);
	VK_OK(vkEndCommandBuffer(cmd));
	VkFenceCreateInfo fence_info = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VkFence fence;
	VK_OK(vkCreateFence(im->device, &fence_info, NULL, &fence));
	VkSubmitInfo submit = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.commandBufferCount = 1,
		.pCommandBuffers = &cmd,
	};
	VK_OK(vkQueueSubmit(im->queue, 1, &submit, fence));
	VK_OK(vkWaitForFences(im->device, 1, &fence, VK_TRUE, 30ull * 1000 * 1000 * 1000));
	vkDestroyFence(im->device, fence, NULL);
	vkFreeCommandBuffers(im->device, im->pool, 1, &cmd);
}

/* The exported buffer's bytes, as the importer sees them through a copy. */
static void importer_read(struct importer *im, const ruda_resource *r,
			  const struct imported *b, void *out)
{
	void *map;
	struct imported host = host_buffer(im, r->size, &map);
	copy_and_wait(im, b->buffer, r->offset, host.buffer, 0, r->size);
	memcpy(out, map, r->size);
	vkUnmapMemory(im->device, host.memory);
	imported_free(im, &host);
}

/* Write `size` bytes at `offset` of the exported buffer through a copy. */
static void importer_write(struct importer *im, const ruda_resource *r,
			   const struct imported *b, uint64_t offset, const void *data,
			   uint64_t size)
{
	void *map;
	struct imported host = host_buffer(im, size, &map);
	memcpy(map, data, size);
	copy_and_wait(im, host.buffer, 0, b->buffer, r->offset + offset, size);
	vkUnmapMemory(im->device, host.memory);
	imported_free(im, &host);
}

/* ---- rudad's side ------------------------------------------------------------ */

struct dedicated_task {
	const void *data;
	size_t size;
	ruda_handle handle;
};

static void create_one(void *user)
{
	struct dedicated_task *t = user;
	ck_assert_int_eq(ruda_client_create(client, t->data, t->size, &t->handle), RUDA_OK);
}

/* A buffer made through rudad with `data`, in a dedicated window. */
static ruda_handle create_dedicated(const void *data, size_t size)
{
	struct dedicated_task t = {.data = data, .size = size};
	ck_assert_int_eq(ruda_client_allocation_window(client, RUDA_ALLOCATION_DEDICATED,
						       create_one, &t),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &t.handle, 1), RUDA_OK);
	return t.handle;
}

static ruda_resource export(ruda_handle h)
{
	ruda_resource r;
	memset(&r, 0xa5, sizeof(r));
	r.struct_size = sizeof(r);
	ck_assert_int_eq(ruda_client_get_resource(client, h, &r), RUDA_OK);
	ck_assert_int_ge(r.fd, 0);
	return r;
}

/* odd, and more than a page: offsets and rounding both show */
enum { SIZE = 3 * 65536 + 13 };

/* (a) what rudad wrote is what the importer reads, byte for byte; the
 * reply says everything the import needs. */
START_TEST(importer_reads_what_rudad_wrote)
{
	uint8_t *data = malloc(SIZE), *back = malloc(SIZE);
	test_fill_random(data, SIZE, 41);
	ruda_handle h = create_dedicated(data, SIZE);
	ruda_resource r = export(h);
	ck_assert_uint_eq(r.size, SIZE);
	ck_assert_uint_eq(r.offset, 0);
	ck_assert_int_eq(r.dedicated, 1);
	ck_assert_uint_eq(r.handle_type, VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT);
	ck_assert_uint_eq(r.buffer_size, (SIZE + 3) & ~3u); /* whole words */
	ck_assert(r.buffer_usage & VK_BUFFER_USAGE_TRANSFER_SRC_BIT);
	ck_assert(r.buffer_usage & VK_BUFFER_USAGE_TRANSFER_DST_BIT);
	ck_assert(r.buffer_usage & VK_BUFFER_USAGE_STORAGE_BUFFER_BIT);
	ck_assert_uint_ge(r.memory_size, r.buffer_size);
	struct importer im;
	importer_open(&im, &r);
	struct imported b = import_resource(&im, &r);
	memset(back, 0, SIZE);
	importer_read(&im, &r, &b, back);
	ck_assert_int_eq(memcmp(data, back, SIZE), 0);
	/* a host-visible memory type maps in the importer as well */
	if (r.memory_property_flags & VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT) {
		void *map;
		VK_OK(vkMapMemory(im.device, b.memory, 0, VK_WHOLE_SIZE, 0, &map));
		VkMappedMemoryRange range = {
			.sType = VK_STRUCTURE_TYPE_MAPPED_MEMORY_RANGE,
			.memory = b.memory,
			.size = VK_WHOLE_SIZE,
		};
		VK_OK(vkInvalidateMappedMemoryRanges(im.device, 1, &range));
		ck_assert_int_eq(memcmp((uint8_t *)map + r.offset, data, SIZE), 0);
		vkUnmapMemory(im.device, b.memory);
	}
	imported_free(&im, &b);
	importer_close(&im);
	ruda_client_release(client, h);
	free(data);
	free(back);
}
END_TEST

/* (b) what the importer writes, rudad reads back; and the other way round
 * again: both sides use the same memory, not copies of it. */
START_TEST(rudad_reads_what_importer_wrote)
{
	uint8_t *data = malloc(SIZE), *mine = malloc(SIZE), *back = malloc(SIZE);
	test_fill_random(data, SIZE, 42);
	test_fill_random(mine, SIZE, 43);
	ruda_handle h = create_dedicated(data, SIZE);
	ruda_resource r = export(h);
	struct importer im;
	importer_open(&im, &r);
	struct imported b = import_resource(&im, &r);
	importer_write(&im, &r, &b, 0, mine, SIZE);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(mine, back, SIZE), 0);
	/* part of it written through rudad shows in the import at once its
	 * write is done */
	ck_assert_int_eq(ruda_client_write(client, h, 4096, data, 5000), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &h, 1), RUDA_OK);
	memcpy(mine + 4096, data, 5000);
	importer_read(&im, &r, &b, back);
	ck_assert_int_eq(memcmp(mine, back, SIZE), 0);
	/* and a write of the importer's into the middle, read by rudad */
	importer_write(&im, &r, &b, SIZE - 1000, data + 77, 1000);
	memcpy(mine + SIZE - 1000, data + 77, 1000);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(mine, back, SIZE), 0);
	imported_free(&im, &b);
	importer_close(&im);
	ruda_client_release(client, h);
	free(data);
	free(mine);
	free(back);
}
END_TEST

/* The importer holds a reference: the fd, and the import made from it,
 * keep the memory after the client releases the buffer and rudad frees
 * its side (its accounting drops to zero at once). */
START_TEST(fd_outlives_released_buffer)
{
	uint8_t *data = malloc(SIZE), *back = malloc(SIZE);
	test_fill_random(data, SIZE, 44);
	ruda_handle h = create_dedicated(data, SIZE);
	ruda_resource imported_first = export(h);
	ruda_resource kept_fd = export(h);
	ck_assert_int_ne(kept_fd.fd, imported_first.fd);
	struct importer im;
	importer_open(&im, &imported_first);
	struct imported b = import_resource(&im, &imported_first);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_daemon_stats stats = test_wait_for_stats(client, 1, 0);
	ck_assert_uint_eq(stats.device_bytes, 0);
	/* the import made before the release still holds the bytes ... */
	importer_read(&im, &imported_first, &b, back);
	ck_assert_int_eq(memcmp(data, back, SIZE), 0);
	/* ... and so does a plain fd imported only now */
	struct imported late = import_resource(&im, &kept_fd);
	memset(back, 0, SIZE);
	importer_read(&im, &kept_fd, &late, back);
	ck_assert_int_eq(memcmp(data, back, SIZE), 0);
	imported_free(&im, &late);
	imported_free(&im, &b);
	importer_close(&im);
	/* rudad carries on: a new buffer, the same id space, reads right */
	ruda_handle again;
	ck_assert_int_eq(ruda_client_create(client, data, 1000, &again), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, again, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, 1000), 0);
	ck_assert(test_daemon_alive(&daemon_));
	ruda_client_release(client, again);
	free(data);
	free(back);
}
END_TEST

/* An fd never imported and closed frees nothing twice either. */
START_TEST(fd_closed_unimported)
{
	uint8_t data[256] = {1, 2, 3};
	ruda_handle h = create_dedicated(data, sizeof(data));
	ruda_resource r = export(h);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	test_wait_for_stats(client, 1, 0);
	ck_assert_int_eq(close(r.fd), 0);
	ck_assert(test_daemon_alive(&daemon_));
}
END_TEST

/* Every refusal, with its exact status and no fd. */
START_TEST(refusals)
{
	int fds_before = test_count_fds(0);
	ruda_resource r = RUDA_RESOURCE_INIT;
	ruda_handle ghost = {.id = 77, .size = 4};
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, &r), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, NULL),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_get_resource(NULL, ghost, &r), RUDA_ERROR_INVALID_ARGUMENT);
	/* a released buffer is no longer the client's */
	uint8_t data[64] = {9};
	ruda_handle gone = create_dedicated(data, sizeof(data));
	ruda_client_release(client, gone);
	ck_assert_int_eq(ruda_client_get_resource(client, gone, &r), RUDA_ERROR_INVALID_HANDLE);
	/* pooled memory holds other buffers: never exported */
	ruda_handle pooled;
	ck_assert_int_eq(ruda_client_create(client, data, sizeof(data), &pooled), RUDA_OK);
	ck_assert_int_eq(ruda_client_get_resource(client, pooled, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "dedicated"));
	/* a buffer alone in its memory but allocated pooled (large) neither */
	ruda_handle large;
	ck_assert_int_eq(ruda_client_empty(client, 64u << 20, &large), RUDA_OK);
	ck_assert_int_eq(ruda_client_get_resource(client, large, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_release(client, pooled);
	ruda_client_release(client, large);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(test_count_fds(0), fds_before);
}
END_TEST

/* rudad closes its copy of every fd it sends: many exports leave its fd
 * count where it was (and ours too, once we close them). */
START_TEST(no_fd_left_in_rudad)
{
	uint8_t data[4096];
	test_fill_random(data, sizeof(data), 45);
	ruda_handle h = create_dedicated(data, sizeof(data));
	ruda_resource first = export(h);
	close(first.fd);
	int rudad_before = test_settled_fds(daemon_.pid);
	int ours_before = test_count_fds(0);
	for (int i = 0; i < 300; i++) {
		ruda_resource r = export(h);
		ck_assert_int_eq(close(r.fd), 0);
	}
	/* refusals send no fd and keep none */
	ruda_handle ghost = {.id = 999, .size = 4};
	ruda_resource r = RUDA_RESOURCE_INIT;
	for (int i = 0; i < 50; i++)
		ck_assert_int_eq(ruda_client_get_resource(client, ghost, &r),
				 RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(test_count_fds(0), ours_before);
	ck_assert_int_eq(test_settled_fds(daemon_.pid), rudad_before);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* export_memory = no: devices open without the extension, dedicated
 * buffers still work, exports are UNSUPPORTED and say why. */
START_TEST(export_off_is_unsupported)
{
	int fds_before = test_count_fds(0);
	uint8_t data[1000], back[1000];
	test_fill_random(data, sizeof(data), 46);
	ruda_handle h = create_dedicated(data, sizeof(data));
	ruda_resource r = RUDA_RESOURCE_INIT;
	ck_assert_int_eq(ruda_client_get_resource(client, h, &r), RUDA_ERROR_UNSUPPORTED);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "export_memory"));
	/* a bad handle is still a bad handle first */
	ruda_handle ghost = {.id = 77, .size = 4};
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, &r), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	ck_assert_int_eq(test_count_fds(0), fds_before);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("export");
	TCase *tc = tcase_create("export");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, importer_reads_what_rudad_wrote);
	tcase_add_test(tc, rudad_reads_what_importer_wrote);
	tcase_add_test(tc, fd_outlives_released_buffer);
	tcase_add_test(tc, fd_closed_unimported);
	tcase_add_test(tc, refusals);
	tcase_add_test(tc, no_fd_left_in_rudad);
	suite_add_tcase(s, tc);
	TCase *off = tcase_create("export_off");
	tcase_add_checked_fixture(off, setup_no_export, teardown);
	tcase_set_timeout(off, 60);
	tcase_add_test(off, export_off_is_unsupported);
	suite_add_tcase(s, off);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
