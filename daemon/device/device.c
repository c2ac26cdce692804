/* A logical device: opened on a physical device with its queues, the
 * objects every submission needs and its allocator, and closed once idle.
 * Submissions (submission.c), their completion (completion.c) and
 * timestamps (timestamps.c) are the other parts of struct ruda_device. */
#include "device/device.h"
#include "device/device_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/status.h>

#include "common/log.h"

/* What the physical device offers, as opening it needs to know. */
struct device_caps {
	bool host_import; /* VK_EXT_external_memory_host, not turned off */
	bool memory_fd;   /* buffers exportable as opaque fds */
	VkBool32 robust_buffer_access;
	uint32_t queue_count;    /* of the compute family chosen */
	uint32_t timestamp_bits; /* its timestampValidBits */
};

/* How far ruda__device_create came: what unmake() undoes. */
enum made {
	MADE_NOTHING,
	MADE_DEVICE,        /* the VkDevice */
	MADE_QUEUE_OBJECTS, /* command pool, timelines, pipeline cache (those made) */
	MADE_TIMESTAMPS,
	MADE_FREES,         /* the deferred-free list */
	MADE_ALLOCATOR,
	MADE_COMPLETION,    /* the completion thread */
};

/* Whether buffers of rudad's usage can be exported as opaque fds and
 * imported back (what an importer on the same device does). */
static bool opaque_fd_buffers(VkPhysicalDevice physical)
{
	VkPhysicalDeviceExternalBufferInfo info = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_BUFFER_INFO,
		.usage = RUDA_BUFFER_USAGE,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	VkExternalBufferProperties props = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_BUFFER_PROPERTIES,
	};
	vkGetPhysicalDeviceExternalBufferProperties(physical, &info, &props);
	VkExternalMemoryFeatureFlags need = VK_EXTERNAL_MEMORY_FEATURE_EXPORTABLE_BIT |
					    VK_EXTERNAL_MEMORY_FEATURE_IMPORTABLE_BIT;
	return (props.externalMemoryProperties.externalMemoryFeatures & need) == need;
}

static bool has_extension(const VkExtensionProperties *exts, uint32_t n, const char *name)
{
	for (uint32_t i = 0; i < n; i++)
		if (strcmp(exts[i].extensionName, name) == 0)
			return true;
	return false;
}

/* Properties, features, extensions and the compute queue family of the
 * physical device: into d (what it keeps) and *caps (what opening it
 * needs). -ENOTSUP when the device lacks what rudad needs. */
static int query_physical(const struct ruda_vulkan *vk, struct ruda_device *d,
			  struct device_caps *caps)
{
	vkGetPhysicalDeviceProperties(d->physical, &d->props);
	vkGetPhysicalDeviceMemoryProperties(d->physical, &d->memory);

	uint32_t nexts = 0;
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, NULL);
	VkExtensionProperties *exts = calloc(nexts ? nexts : 1, sizeof(*exts));
	if (!exts)
		return -ENOMEM;
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, exts);
	bool push_descriptor = has_extension(exts, nexts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
	caps->host_import = has_extension(exts, nexts, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	/* optional: buffers exported as fds (get_resource) */
	caps->memory_fd = has_extension(exts, nexts, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
	free(exts);
	if (vk->no_export) {
		caps->memory_fd = false;
		d->export_off = "export_memory is off in rudad.conf";
	} else if (!caps->memory_fd) {
		d->export_off = "the device has no VK_KHR_external_memory_fd";
	} else if (!opaque_fd_buffers(d->physical)) {
		caps->memory_fd = false;
		d->export_off = "the device cannot export and import buffers as opaque fds";
	}
	/* without host import, transfers go through a bounce buffer in rudad
	 * (arena.c); RUDA_NO_HOST_IMPORT=1 forces that path, for its tests */
	const char *no_import = getenv("RUDA_NO_HOST_IMPORT");
	if (no_import && *no_import && strcmp(no_import, "0") != 0)
		caps->host_import = false;
	if (!push_descriptor || d->props.apiVersion < VK_API_VERSION_1_2) {
		log_error("device %s: needs Vulkan 1.2 and VK_KHR_push_descriptor",
			  d->props.deviceName);
		return -ENOTSUP;
	}

	VkPhysicalDevicePushDescriptorPropertiesKHR push_props = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PUSH_DESCRIPTOR_PROPERTIES_KHR,
	};
	VkPhysicalDeviceExternalMemoryHostPropertiesEXT host_props = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_EXTERNAL_MEMORY_HOST_PROPERTIES_EXT,
		.pNext = &push_props,
	};
	VkPhysicalDeviceMaintenance4Properties maint4 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES,
		.pNext = &host_props,
	};
	/* maxBufferSize is Vulkan 1.3's: asked only of devices that have it */
	int has_maint4 = d->props.apiVersion >= VK_API_VERSION_1_3;
	VkPhysicalDeviceMaintenance3Properties maint3 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_3_PROPERTIES,
		.pNext = has_maint4 ? (void *)&maint4 : (void *)&host_props,
	};
	VkPhysicalDeviceSubgroupProperties subgroup = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES,
		.pNext = &maint3,
	};
	VkPhysicalDeviceProperties2 props2 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
		.pNext = &subgroup,
	};
	vkGetPhysicalDeviceProperties2(d->physical, &props2);
	d->max_push_descriptors = push_props.maxPushDescriptors;
	d->subgroup_size = subgroup.subgroupSize;
	d->max_allocation_size = maint3.maxMemoryAllocationSize;
	d->max_buffer_size = has_maint4 && maint4.maxBufferSize > d->max_allocation_size
				     ? maint4.maxBufferSize
				     : d->max_allocation_size;
	d->import_alignment = caps->host_import ? host_props.minImportedHostPointerAlignment : 0;

	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
	};
	VkPhysicalDeviceVulkan11Features f11 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
		.pNext = &f12,
	};
	VkPhysicalDeviceFeatures2 feats = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
		.pNext = &f11,
	};
	vkGetPhysicalDeviceFeatures2(d->physical, &feats);
	if (!f12.timelineSemaphore) {
		log_error("device %s: no timeline semaphores", d->props.deviceName);
		return -ENOTSUP;
	}
	caps->robust_buffer_access = feats.features.robustBufferAccess;
	/* kernels may use what the device has; everything found is enabled */
	d->spirv_features = (struct ruda_spirv_features){
		.float64 = feats.features.shaderFloat64,
		.int64 = feats.features.shaderInt64,
		.int64_atomics = f12.shaderBufferInt64Atomics,
		.int16 = feats.features.shaderInt16,
		.float16 = f12.shaderFloat16,
		.int8 = f12.shaderInt8,
		.storage_buffer16 = f11.storageBuffer16BitAccess,
		.uniform_storage16 = f11.uniformAndStorageBuffer16BitAccess,
		.push_constant16 = f11.storagePushConstant16,
		.storage_buffer8 = f12.storageBuffer8BitAccess,
		.uniform_storage8 = f12.uniformAndStorageBuffer8BitAccess,
		.push_constant8 = f12.storagePushConstant8,
	};

	uint32_t nfamilies = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &nfamilies, NULL);
	VkQueueFamilyProperties families[32];
	if (nfamilies > 32)
		nfamilies = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(d->physical, &nfamilies, families);
	int family = -1;
	for (uint32_t i = 0; i < nfamilies; i++) {
		if (!(families[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
			continue;
		/* prefer a compute queue without graphics: it is the async one */
		if (family < 0 || !(families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT))
			family = (int)i;
	}
	/* RUDA_QUEUE_FAMILY=i in rudad's environment takes family i, to
	 * compare them: NVIDIA's driver of 2026-12 has 16 queues in its
	 * graphics family and 8 in the compute-only one */
	const char *forced = getenv("RUDA_QUEUE_FAMILY");
	if (forced && *forced) {
		uint32_t i = (uint32_t)strtoul(forced, NULL, 10);
		if (i < nfamilies && (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
			family = (int)i;
	}
	if (family < 0) {
		log_error("device %s: no compute queue", d->props.deviceName);
		return -ENOTSUP;
	}
	d->queue_family = (uint32_t)family;
	caps->queue_count = families[family].queueCount;
	caps->timestamp_bits = families[family].timestampValidBits;
	return 0;
}

/* The VkDevice with every feature found enabled, its queues and entry
 * points. */
static int open_device(const struct ruda_vulkan *vk, struct ruda_device *d,
		       const struct device_caps *caps)
{
	const struct ruda_spirv_features *sf = &d->spirv_features;
	VkPhysicalDeviceVulkan12Features enable12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.timelineSemaphore = VK_TRUE,
		.storageBuffer8BitAccess = sf->storage_buffer8,
		.uniformAndStorageBuffer8BitAccess = sf->uniform_storage8,
		.storagePushConstant8 = sf->push_constant8,
		.shaderBufferInt64Atomics = sf->int64_atomics,
		.shaderFloat16 = sf->float16,
		.shaderInt8 = sf->int8,
	};
	VkPhysicalDeviceVulkan11Features enable11 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
		.pNext = &enable12,
		.storageBuffer16BitAccess = sf->storage_buffer16,
		.uniformAndStorageBuffer16BitAccess = sf->uniform_storage16,
		.storagePushConstant16 = sf->push_constant16,
	};
	VkPhysicalDeviceFeatures2 enable = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
		.pNext = &enable11,
		.features = {
			/* every out-of-range access of a kernel stays inside the
			 * buffers bound to it */
			.robustBufferAccess = caps->robust_buffer_access,
			.shaderInt64 = sf->int64,
			.shaderFloat64 = sf->float64,
			.shaderInt16 = sf->int16,
		},
	};
	/* as many queues as the family has, up to RUDA_MAX_QUEUES or the
	 * configured number: streams are spread over them */
	d->nqueues = caps->queue_count;
	/* RUDA_TEST_QUEUES=N in rudad's environment: N queues on a device with
	 * fewer, several of them one VkQueue (all submitted from the loop
	 * thread), so the several-queue paths are tested on lavapipe */
	const char *test_queues = getenv("RUDA_TEST_QUEUES");
	int wanted = test_queues ? atoi(test_queues) : 0;
	if (wanted > 0)
		d->nqueues = (uint32_t)wanted;
	if (d->nqueues > RUDA_MAX_QUEUES)
		d->nqueues = RUDA_MAX_QUEUES;
	if (vk->max_queues && d->nqueues > vk->max_queues)
		d->nqueues = vk->max_queues;
	if (!d->nqueues)
		d->nqueues = 1;
	const char *stride_env = getenv("RUDA_QUEUE_STRIDE");
	uint32_t stride = stride_env ? (uint32_t)atoi(stride_env) : 1, placed = 0;
	if (stride < 1 || stride > d->nqueues)
		stride = 1;
	for (uint32_t first = 0; first < stride; first++)
		for (uint32_t q = first; q < d->nqueues; q += stride)
			d->queue_order[placed++] = (uint8_t)q;
	uint32_t real_queues = d->nqueues < caps->queue_count ? d->nqueues : caps->queue_count;
	if (!real_queues)
		real_queues = 1;
	d->lanes_on = vk->lanes == RUDA_LANES_ON || (vk->lanes == RUDA_LANES_AUTO && d->nqueues > 1);
	float priorities[RUDA_MAX_QUEUES];
	for (uint32_t i = 0; i < RUDA_MAX_QUEUES; i++)
		priorities[i] = 1.0f;
	VkDeviceQueueCreateInfo queue = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = d->queue_family,
		.queueCount = real_queues,
		.pQueuePriorities = priorities,
	};
	const char *enabled[3] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
	uint32_t nenabled = 1;
	if (caps->host_import)
		enabled[nenabled++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	if (caps->memory_fd)
		enabled[nenabled++] = VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME;
	VkDeviceCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = &enable,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &queue,
		.enabledExtensionCount = nenabled,
		.ppEnabledExtensionNames = enabled,
	};
	VkResult r = vkCreateDevice(d->physical, &info, NULL, &d->vk);
	if (r != VK_SUCCESS) {
		log_error("device %s: vkCreateDevice failed: %d", d->props.deviceName, r);
		d->vk = VK_NULL_HANDLE;
		return -ENODEV;
	}
	for (uint32_t i = 0; i < d->nqueues; i++)
		vkGetDeviceQueue(d->vk, d->queue_family, i % real_queues, &d->queues[i]);
	d->queue = d->queues[0];
	d->cmd_push_descriptor_set = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		d->vk, "vkCmdPushDescriptorSetKHR");
	d->get_memory_host_pointer_properties = (PFN_vkGetMemoryHostPointerPropertiesEXT)
		vkGetDeviceProcAddr(d->vk, "vkGetMemoryHostPointerPropertiesEXT");
	if (caps->memory_fd)
		d->get_memory_fd =
			(PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(d->vk, "vkGetMemoryFdKHR");
	{
		VkPhysicalDeviceFloatControlsProperties fc = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FLOAT_CONTROLS_PROPERTIES,
		};
		VkPhysicalDeviceIDProperties id = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
			.pNext = &fc,
		};
		VkPhysicalDeviceProperties2 id_query = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
			.pNext = &id,
		};
		vkGetPhysicalDeviceProperties2(d->physical, &id_query);
		memcpy(d->device_uuid, id.deviceUUID, VK_UUID_SIZE);
		memcpy(d->driver_uuid, id.driverUUID, VK_UUID_SIZE);
		d->test_flushes_f32_subnormals = vk->test_flush_subnormals;
		d->keeps_f32_subnormals =
			fc.shaderDenormPreserveFloat32 && !d->test_flushes_f32_subnormals;
	}
	return 0;
}

/* The command pool, the queues' timelines and the pipeline cache. */
static int make_queue_objects(struct ruda_device *d)
{
	VkCommandPoolCreateInfo pool = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = d->queue_family,
	};
	VkSemaphoreTypeCreateInfo sem_type = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo sem = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO,
		.pNext = &sem_type,
	};
	VkPipelineCacheCreateInfo cache = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
	if (vkCreateCommandPool(d->vk, &pool, NULL, &d->command_pool) != VK_SUCCESS ||
	    vkCreatePipelineCache(d->vk, &cache, NULL, &d->pipeline_cache) != VK_SUCCESS)
		goto fail;
	for (uint32_t i = 0; i < d->nqueues; i++)
		if (vkCreateSemaphore(d->vk, &sem, NULL, &d->timelines[i]) != VK_SUCCESS)
			goto fail;
	d->timeline = d->timelines[0];
	if (d->nqueues > 1 && vkCreateSemaphore(d->vk, &sem, NULL, &d->wake_timeline) != VK_SUCCESS)
		goto fail;
	return 0;
fail:
	log_error("device %s: cannot create queue objects", d->props.deviceName);
	return -ENODEV;
}

static void destroy_queue_objects(struct ruda_device *d)
{
	if (d->pipeline_cache)
		vkDestroyPipelineCache(d->vk, d->pipeline_cache, NULL);
	for (uint32_t i = 0; i < RUDA_MAX_QUEUES; i++)
		if (d->timelines[i])
			vkDestroySemaphore(d->vk, d->timelines[i], NULL);
	if (d->wake_timeline)
		vkDestroySemaphore(d->vk, d->wake_timeline, NULL);
	if (d->command_pool)
		vkDestroyCommandPool(d->vk, d->command_pool, NULL);
}

/* The allocator, for buffers of rudad's usage, and whether those can be
 * exported from its memory type (that check cannot fail: the allocator is
 * set up when this returns 0, and only then). */
static int init_allocator(struct ruda_device *d)
{
	/* every buffer rudad makes has the same usage: probe its needs once */
	VkBufferCreateInfo probe_info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = 65536,
		.usage = RUDA_BUFFER_USAGE,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkBuffer probe;
	VkMemoryRequirements req;
	if (vkCreateBuffer(d->vk, &probe_info, NULL, &probe) != VK_SUCCESS) {
		log_error("device %s: cannot create buffers", d->props.deviceName);
		return -ENODEV;
	}
	vkGetBufferMemoryRequirements(d->vk, probe, &req);
	vkDestroyBuffer(d->vk, probe, NULL);
	struct ruda_memory_device for_memory = {
		.vk = d->vk,
		.memory = &d->memory,
		.limits = &d->props.limits,
		.max_allocation_size = d->max_allocation_size,
		.max_buffer_size = d->max_buffer_size,
		.frees = &d->frees,
		.heap_budgets = d->heap_budgets,
	};
	if (ruda__memory_init(&d->allocator, &for_memory, &req) < 0) {
		log_error("device %s: no memory type for buffers", d->props.deviceName);
		return -ENODEV;
	}
	/* exported buffers take their memory from the same type as all others */
	if (d->get_memory_fd) {
		VkExternalMemoryBufferCreateInfo external = {
			.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
			.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
		};
		probe_info.pNext = &external;
		if (vkCreateBuffer(d->vk, &probe_info, NULL, &probe) != VK_SUCCESS) {
			req.memoryTypeBits = 0;
		} else {
			vkGetBufferMemoryRequirements(d->vk, probe, &req);
			vkDestroyBuffer(d->vk, probe, NULL);
		}
		if (!(req.memoryTypeBits & (1u << d->allocator.type))) {
			d->get_memory_fd = NULL;
			d->export_off = "exportable buffers cannot use the memory type of the others";
		}
	}
	if (d->export_off)
		log_info("device %s: buffers are not exportable: %s", d->props.deviceName,
			 d->export_off);
	return 0;
}

/* Undo, in reverse, what ruda__device_create made up to `made` (not the
 * loop's handles, nor the memory of d). */
static void unmake(struct ruda_device *d, enum made made)
{
	switch (made) {
	case MADE_COMPLETION:
		ruda__device_completion_stop(d);
		ruda__device_completion_finish(d);
		/* fall through */
	case MADE_ALLOCATOR:
		ruda__memory_finish(&d->allocator);
		/* fall through */
	case MADE_FREES:
		/* pages being freed in the thread pool go before the device */
		ruda__deferred_free_finish(&d->frees);
		/* fall through */
	case MADE_TIMESTAMPS:
		ruda__device_timestamps_finish(d);
		/* fall through */
	case MADE_QUEUE_OBJECTS:
		destroy_queue_objects(d);
		/* fall through */
	case MADE_DEVICE:
		vkDestroyDevice(d->vk, NULL);
		/* fall through */
	case MADE_NOTHING:
		break;
	}
}

static void free_after_close(uv_handle_t *handle)
{
	free(handle->data);
}

/* The watchdog is closed: close the async handle, whose callback frees the
 * device. One after the other, because libuv finishes closes in reverse
 * order and reads a handle after the callback of the one before it ran. */
static void close_async_after_watchdog(uv_handle_t *handle)
{
	struct ruda_device *d = handle->data;
	d->async.data = d;
	uv_close((uv_handle_t *)&d->async, free_after_close);
}

/* Close the loop's handles that are open; the last close frees d. */
static void close_handles(struct ruda_device *d, bool watchdog)
{
	if (watchdog) {
		uv_timer_stop(&d->watchdog);
		/* both handles' memory is the device: freed once the last is closed */
		d->watchdog.data = d;
		uv_close((uv_handle_t *)&d->watchdog, close_async_after_watchdog);
	} else {
		d->async.data = d;
		uv_close((uv_handle_t *)&d->async, free_after_close);
	}
}

int ruda__device_create(struct ruda_vulkan *vk, uint32_t physical_index, uint32_t index,
			uv_loop_t *loop, struct ruda_device **out)
{
	struct ruda_device *d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	d->index = index;
	d->physical = vk->physical[physical_index];
	if (vk->budgets)
		d->heap_budgets = &vk->budgets[(size_t)physical_index * VK_MAX_MEMORY_HEAPS];
	d->submission_timeout_ns = 60ull * 1000 * 1000 * 1000;

	struct device_caps caps = {0};
	enum made made = MADE_NOTHING;
	bool async_open = false, watchdog_open = false;
	int err = query_physical(vk, d, &caps);
	if (err < 0)
		goto fail;
	if ((err = open_device(vk, d, &caps)) < 0)
		goto fail;
	made = MADE_DEVICE;
	if ((err = make_queue_objects(d)) < 0)
		goto fail;
	made = MADE_QUEUE_OBJECTS;
	ruda__device_timestamps_init(d, caps.timestamp_bits);
	made = MADE_TIMESTAMPS;
	ruda__deferred_free_init(&d->frees, loop);
	made = MADE_FREES;
	if ((err = init_allocator(d)) < 0)
		goto fail;
	made = MADE_ALLOCATOR;
	if ((err = ruda__device_completion_start(d)) < 0)
		goto fail;
	made = MADE_COMPLETION;
	if ((err = uv_async_init(loop, &d->async, ruda__device_on_async)) < 0)
		goto fail;
	async_open = true;
	d->async.data = d;
	if ((err = uv_timer_init(loop, &d->watchdog)) < 0)
		goto fail;
	watchdog_open = true;
	d->watchdog.data = d;
	/* progress is measured from now: a device re-created while the loop
	 * has run for longer than the limit must not time out its first work */
	d->watch_since = uv_now(loop);
	if ((err = uv_timer_start(&d->watchdog, ruda__device_on_watchdog, RUDA_WATCHDOG_PERIOD_MS,
				  RUDA_WATCHDOG_PERIOD_MS)) < 0)
		goto fail;
	uv_unref((uv_handle_t *)&d->watchdog);
	*out = d;
	return 0;

fail:
	unmake(d, made);
	if (async_open)
		close_handles(d, watchdog_open); /* frees d once closed */
	else
		free(d);
	return err;
}

void ruda__device_listen_destroy(struct ruda_device *d, struct ruda_device_listener *l)
{
	struct ruda_device_listener **link = &d->destroy_listeners;
	while (*link)
		link = &(*link)->next;
	l->next = NULL;
	l->link = link;
	*link = l;
}

void ruda__device_listener_remove(struct ruda_device_listener *l)
{
	if (!l->link)
		return;
	*l->link = l->next;
	if (l->next)
		l->next->link = l->link;
	l->next = NULL;
	l->link = NULL;
}

/* Each listener leaves the list before it is told: it may free itself. */
static void notify_destroy(struct ruda_device *d)
{
	while (d->destroy_listeners) {
		struct ruda_device_listener *l = d->destroy_listeners;
		ruda__device_listener_remove(l);
		l->notify(l, d);
	}
}

void ruda__device_destroy(struct ruda_device *d)
{
	if (!d)
		return;
	vkDeviceWaitIdle(d->vk);
	ruda__device_completion_stop(d);
	ruda__device_process_completions(d);
	ruda__device_free_submissions(d);
	notify_destroy(d);
	unmake(d, MADE_COMPLETION);
	close_handles(d, true);
}
