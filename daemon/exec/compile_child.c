/*
 * The compile worker: rudad run again as `rudad --compile-worker PHYSICAL
 * UUID`, opening the device as rudad does and compiling one kernel at a
 * time for it (compile_worker.c keeps it within its bounds).
 */
#include "exec/compile_worker.h"

#include <errno.h>
#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/resource.h>

#include "common/log.h"
#include "device/device.h"
#include "exec/compile_wire.h"
#include "exec/pipeline_build.h"

struct worker_device {
	VkDevice vk;
	VkQueue queue;
	VkFence fence;
};

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static bool has_extension(VkPhysicalDevice physical, const char *name)
{
	uint32_t n = 0;
	vkEnumerateDeviceExtensionProperties(physical, NULL, &n, NULL);
	VkExtensionProperties *exts = calloc(n ? n : 1, sizeof(*exts));
	if (!exts)
		return false;
	vkEnumerateDeviceExtensionProperties(physical, NULL, &n, exts);
	bool found = false;
	for (uint32_t i = 0; i < n && !found; i++)
		found = strcmp(exts[i].extensionName, name) == 0;
	free(exts);
	return found;
}

/* The device as ruda__device_create opens it, as far as compiling goes:
 * the same features (they change the code the driver makes) and push
 * descriptors (the layouts use them). */
static int open_device(VkPhysicalDevice physical, struct worker_device *out)
{
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
	vkGetPhysicalDeviceFeatures2(physical, &feats);
	VkPhysicalDeviceVulkan12Features enable12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.timelineSemaphore = f12.timelineSemaphore,
		.storageBuffer8BitAccess = f12.storageBuffer8BitAccess,
		.uniformAndStorageBuffer8BitAccess = f12.uniformAndStorageBuffer8BitAccess,
		.storagePushConstant8 = f12.storagePushConstant8,
		.shaderBufferInt64Atomics = f12.shaderBufferInt64Atomics,
		.shaderFloat16 = f12.shaderFloat16,
		.shaderInt8 = f12.shaderInt8,
	};
	VkPhysicalDeviceVulkan11Features enable11 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
		.pNext = &enable12,
		.storageBuffer16BitAccess = f11.storageBuffer16BitAccess,
		.uniformAndStorageBuffer16BitAccess = f11.uniformAndStorageBuffer16BitAccess,
		.storagePushConstant16 = f11.storagePushConstant16,
	};
	VkPhysicalDeviceFeatures2 enable = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
		.pNext = &enable11,
		.features = {
			.robustBufferAccess = feats.features.robustBufferAccess,
			.shaderInt64 = feats.features.shaderInt64,
			.shaderFloat64 = feats.features.shaderFloat64,
			.shaderInt16 = feats.features.shaderInt16,
		},
	};
	uint32_t nfamilies = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfamilies, NULL);
	VkQueueFamilyProperties families[32];
	if (nfamilies > 32)
		nfamilies = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(physical, &nfamilies, families);
	uint32_t family = UINT32_MAX;
	for (uint32_t i = 0; i < nfamilies && family == UINT32_MAX; i++)
		if (families[i].queueFlags & VK_QUEUE_COMPUTE_BIT)
			family = i;
	if (family == UINT32_MAX)
		return -1;
	float priority = 1.0f;
	VkDeviceQueueCreateInfo queue = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = family,
		.queueCount = 1,
		.pQueuePriorities = &priority,
	};
	const char *ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
	if (!has_extension(physical, ext))
		return -1;
	VkDeviceCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.pNext = &enable,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &queue,
		.enabledExtensionCount = 1,
		.ppEnabledExtensionNames = &ext,
	};
	if (vkCreateDevice(physical, &info, NULL, &out->vk) != VK_SUCCESS)
		return -1;
	vkGetDeviceQueue(out->vk, family, 0, &out->queue);
	VkFenceCreateInfo fence = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	if (vkCreateFence(out->vk, &fence, NULL, &out->fence) != VK_SUCCESS)
		return -1;
	return 0;
}

/* One request, compiled as pipeline.c compiles it (pipeline_build.h);
 * what was made is destroyed at once. */
static VkResult compile_one(struct worker_device *d, const struct wire_request *h,
			    const uint8_t *body)
{
	/* copied out: the body gives them no alignment */
	ruda_spec_constant spec[RUDA_PIPELINE_MAX_SPEC_CONSTANTS];
	memcpy(spec, body + h->spirv_size + h->entry_size, h->nspec * sizeof(*spec));
	struct ruda_pipeline_source src = {
		.spirv = (const uint32_t *)body,
		.spirv_size = h->spirv_size,
		.entry_point = (const char *)body + h->spirv_size,
		.binding_count = h->binding_count,
		.push_constant_size = h->push_constant_size,
		.spec = spec,
		.nspec = h->nspec,
	};
	struct ruda_pipeline_objects made;
	VkResult r = ruda__pipeline_build(d->vk, VK_NULL_HANDLE, &src, &made);
	ruda__pipeline_objects_destroy(d->vk, &made);
	/* lavapipe frees destroyed pipelines at the next submission: without
	 * one, every kernel compiled would stay in the worker's memory */
	if (vkQueueSubmit(d->queue, 0, NULL, d->fence) == VK_SUCCESS) {
		vkWaitForFences(d->vk, 1, &d->fence, VK_TRUE, UINT64_MAX);
		vkResetFences(d->vk, 1, &d->fence);
	}
#ifdef __GLIBC__
	malloc_trim(0);
#endif
	return r;
}

static int parse_uuid(const char *text, uint8_t out[VK_UUID_SIZE])
{
	if (strlen(text) != 2 * VK_UUID_SIZE)
		return -1;
	for (unsigned i = 0; i < VK_UUID_SIZE; i++) {
		unsigned v;
		if (sscanf(text + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return 0;
}

static bool uuid_matches(VkPhysicalDevice physical, const uint8_t uuid[VK_UUID_SIZE])
{
	VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
	VkPhysicalDeviceProperties2 props = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
		.pNext = &id,
	};
	vkGetPhysicalDeviceProperties2(physical, &props);
	return memcmp(id.deviceUUID, uuid, VK_UUID_SIZE) == 0;
}

int ruda__compile_worker_main(int argc, char **argv)
{
	ruda__log_init(RUDA_LOG_WARNING);
	/* it dies with rudad, and holds none of rudad's descriptors */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		return 1;
	close_range(RUDA_COMPILE_WORKER_FD + 1, ~0u, 0);
	/* a compiler killed at its cap leaves no core of gigabytes */
	struct rlimit no_core = {0, 0};
	setrlimit(RLIMIT_CORE, &no_core);
	uint8_t uuid[VK_UUID_SIZE];
	if (argc != 4 || parse_uuid(argv[3], uuid) < 0) {
		log_error("compile worker: usage: rudad " RUDA_COMPILE_WORKER_ARG " PHYSICAL UUID");
		return 2;
	}
	if (fcntl(RUDA_COMPILE_WORKER_FD, F_GETFD) < 0) {
		log_error("compile worker: no socket on fd %d", RUDA_COMPILE_WORKER_FD);
		return 2;
	}
	struct ruda_vulkan vk;
	if (ruda__vulkan_init(&vk) < 0)
		return 1;
	/* the daemon's number first; the UUID decides */
	uint32_t hint = (uint32_t)strtoul(argv[2], NULL, 10);
	VkPhysicalDevice physical = VK_NULL_HANDLE;
	if (hint < vk.nphysical && uuid_matches(vk.physical[hint], uuid))
		physical = vk.physical[hint];
	for (uint32_t i = 0; i < vk.nphysical && !physical; i++)
		if (uuid_matches(vk.physical[i], uuid))
			physical = vk.physical[i];
	struct worker_device d = {0};
	if (!physical || open_device(physical, &d) < 0) {
		log_error("compile worker: cannot open the device (physical %s)", argv[2]);
		_exit(1);
	}
	struct wire_reply ready = {.magic = RUDA_COMPILE_MAGIC_READY};
	if (write_all(RUDA_COMPILE_WORKER_FD, &ready, sizeof(ready)) < 0)
		_exit(1);
	uint8_t *body = NULL;
	for (;;) {
		struct wire_request h;
		if (read_all(RUDA_COMPILE_WORKER_FD, &h, sizeof(h)) < 0)
			break; /* rudad closed it: done */
		if (h.magic != RUDA_COMPILE_MAGIC_REQUEST || h.spirv_size % 4 || h.entry_size == 0 ||
		    h.spirv_size > (64u << 20) || h.entry_size > 4096 ||
		    h.nspec > RUDA_PIPELINE_MAX_SPEC_CONSTANTS ||
		    h.binding_count > RUDA_PIPELINE_MAX_BINDINGS)
			_exit(3);
		size_t size = (size_t)h.spirv_size + h.entry_size + h.nspec * sizeof(ruda_spec_constant);
		free(body);
		body = malloc(size);
		if (!body || read_all(RUDA_COMPILE_WORKER_FD, body, size) < 0)
			_exit(3);
		if (body[h.spirv_size + h.entry_size - 1] != '\0')
			_exit(3);
		struct wire_reply reply = {.magic = RUDA_COMPILE_MAGIC_REPLY, .result = compile_one(&d, &h, body)};
		free(body);
		body = NULL;
		if (write_all(RUDA_COMPILE_WORKER_FD, &reply, sizeof(reply)) < 0)
			break;
	}
	/* the kernel frees everything; the driver's teardown is not needed */
	_exit(0);
}
