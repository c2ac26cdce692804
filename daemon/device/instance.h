/*
 * The daemon's Vulkan instance and every physical device it can see; the
 * logical devices (device.h) are opened on them.
 */
#ifndef RUDA_INSTANCE_H
#define RUDA_INSTANCE_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

struct ruda_heap_budget;

/* The daemon's Vulkan instance and every physical device it can see. */
struct ruda_vulkan {
	VkInstance instance;
	VkPhysicalDevice *physical;
	uint32_t nphysical;
	bool no_export; /* rudad.conf export_memory = no: devices export nothing */
	uint32_t max_queues; /* rudad.conf queues: queues per device (0: all, up to 16) */
	/* rudad.conf lanes: streams sharing a queue record in rounds where the
	 * device has several queues (auto), always (on) or never (off) */
	enum ruda_lanes_mode { RUDA_LANES_AUTO, RUDA_LANES_ON, RUDA_LANES_OFF } lanes;
	/* tests (RUDA_TEST_FLUSH_SUBNORMALS): devices' kernels flush f32
	 * subnormals, as one without shaderDenormPreserveFloat32 may */
	bool test_flush_subnormals;
	/* per physical device, VK_MAX_MEMORY_HEAPS budgets: what the logical
	 * devices opened on it reserve together (allocator.h) */
	struct ruda_heap_budget *budgets;
	bool budgets_borrowed; /* another instance's (recovery.c): not freed */
};

int ruda__vulkan_init(struct ruda_vulkan *vk);
void ruda__vulkan_finish(struct ruda_vulkan *vk);
/* Index of the device `selector` names (a number, or part of a device
 * name), or of the best device when selector is NULL; -ENODEV if none. */
int ruda__vulkan_select(const struct ruda_vulkan *vk, const char *selector);

#endif
