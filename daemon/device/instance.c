#include "device/instance.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "device/allocator.h"
#include "common/log.h"

int ruda__vulkan_init(struct ruda_vulkan *vk)
{
	memset(vk, 0, sizeof(*vk));
	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "rudad",
		.pEngineName = "ruda",
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	VkResult r = vkCreateInstance(&info, NULL, &vk->instance);
	if (r != VK_SUCCESS) {
		log_error("vkCreateInstance failed: %d (is a Vulkan driver installed?)", r);
		return -ENODEV;
	}
	vkEnumeratePhysicalDevices(vk->instance, &vk->nphysical, NULL);
	vk->physical = calloc(vk->nphysical ? vk->nphysical : 1, sizeof(*vk->physical));
	if (!vk->physical) {
		vkDestroyInstance(vk->instance, NULL);
		return -ENOMEM;
	}
	vkEnumeratePhysicalDevices(vk->instance, &vk->nphysical, vk->physical);
	vk->budgets = calloc((size_t)(vk->nphysical ? vk->nphysical : 1) * VK_MAX_MEMORY_HEAPS,
			     sizeof(*vk->budgets));
	if (!vk->budgets) {
		free(vk->physical);
		vkDestroyInstance(vk->instance, NULL);
		return -ENOMEM;
	}
	return 0;
}

#if defined(__SANITIZE_ADDRESS__)
/* Under LeakSanitizer only: mark every library loaded now (the drivers the
 * loader opened among them) as never to be unloaded. The loader unloads its
 * drivers at vkDestroyInstance; LeakSanitizer then no longer scans their
 * globals and reports what those still point to (lavapipe: 128 bytes from
 * its enumeration) as leaked. */
static int keep_mapped(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_name && info->dlpi_name[0]) {
		void *h = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE);
		if (h)
			dlclose(h);
	}
	return 0;
}
#endif

void ruda__vulkan_finish(struct ruda_vulkan *vk)
{
	free(vk->physical);
	if (!vk->budgets_borrowed)
		free(vk->budgets);
#if defined(__SANITIZE_ADDRESS__)
	dl_iterate_phdr(keep_mapped, NULL);
#endif
	if (vk->instance)
		vkDestroyInstance(vk->instance, NULL);
	memset(vk, 0, sizeof(*vk));
}

static int device_type_rank(VkPhysicalDeviceType type)
{
	switch (type) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
	default: return 0;
	}
}

int ruda__vulkan_select(const struct ruda_vulkan *vk, const char *selector)
{
	int best = -ENODEV, best_rank = -1;
	for (uint32_t i = 0; i < vk->nphysical; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(vk->physical[i], &p);
		if (selector) {
			char *end;
			unsigned long n = strtoul(selector, &end, 10);
			if (*selector && !*end) {
				if (n == i)
					return (int)i;
				continue;
			}
			if (strcasestr(p.deviceName, selector))
				return (int)i;
			continue;
		}
		int rank = device_type_rank(p.deviceType);
		if (rank > best_rank) {
			best = (int)i;
			best_rank = rank;
		}
	}
	return best;
}
