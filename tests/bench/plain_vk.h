/*
 * What the plain-Vulkan probes (queue_priority, copy_placement) share: a
 * Vulkan call that must succeed, a compute kernel with push descriptors
 * from a SPIR-V file, a clock and a comparison for qsort. Nothing of rudad.
 */
#ifndef RUDA_BENCH_PLAIN_VK_H
#define RUDA_BENCH_PLAIN_VK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <vulkan/vulkan.h>

/* The call, or the program exits saying which one failed. */
#define VK(call)                                                                   \
	do {                                                                       \
		VkResult r_ = (call);                                              \
		if (r_ != VK_SUCCESS) {                                            \
			fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #call, r_); \
			exit(1);                                                   \
		}                                                                  \
	} while (0)

struct plain_kernel {
	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline pipeline;
};

/* `dir`/`name` (SPIR-V) with `bindings` storage buffers (at most 2) as push
 * descriptors and `push` bytes of push constants; exits on failure. */
void plain_kernel_make(VkDevice dev, const char *dir, const char *name, uint32_t bindings,
		       uint32_t push, struct plain_kernel *k);
void plain_kernel_destroy(VkDevice dev, struct plain_kernel *k);

/* An instance and its physical device `index` (exits when there is none);
 * its properties in `props`. */
VkPhysicalDevice plain_device_open(const char *app_name, uint32_t index, VkInstance *instance,
				   VkPhysicalDeviceProperties *props);
/* A storage buffer of `size` bytes in device-local memory of its own. */
void plain_buffer_make(VkPhysicalDevice pd, VkDevice dev, VkDeviceSize size, VkBuffer *buf,
		       VkDeviceMemory *mem);
/* Wait (10 s at most) for timeline `sem` to reach `value`. */
void plain_timeline_wait(VkDevice dev, VkSemaphore sem, uint64_t value);

/* CLOCK_MONOTONIC in seconds. */
double plain_now_s(void);
/* qsort's comparison of doubles. */
int plain_cmp_double(const void *a, const void *b);

#endif
