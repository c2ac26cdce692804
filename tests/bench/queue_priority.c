/*
 * queue_priority: what a device does with queue priorities, in one process
 * and without rudad. A latency queue submits one tiny dispatch and waits,
 * over and over, while a load queue keeps four long saxpy dispatches in
 * flight; the latency is compared with the same queue's on an idle device.
 * Each setup is one way to ask the driver for the latency queue first:
 *
 *   same-family   two queues of one family, pQueuePriorities 0.5 / 1.0
 *   other-family  the latency queue in another compute family, no priority
 *   global-high   ... with VK_KHR_global_priority HIGH
 *   global-realtime ... REALTIME
 *
 * Usage: queue_priority SHADER_DIR [DEVICE_INDEX]   (SHADER_DIR holds
 * fill.spv and saxpy.spv). It measures what rudad's priority lane can rely
 * on; docs/performance.md ("Priorities") quotes it.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <vulkan/vulkan.h>

#include "plain_vk.h"

#define LOAD_ELEMENTS (64u << 20) /* floats per saxpy: the priority bench's */
#define LOAD_IN_FLIGHT 4
#define SAMPLES 1000

enum setup { SAME_FAMILY, OTHER_FAMILY, GLOBAL_HIGH, GLOBAL_REALTIME, SETUPS };
static const char *const setup_names[SETUPS] = {"same-family", "other-family", "global-high",
						"global-realtime"};

struct queue {
	VkQueue vk;
	uint32_t family;
	VkCommandPool pool;
	VkSemaphore timeline;
	uint64_t value;
};

struct probe {
	VkPhysicalDevice physical;
	VkDevice dev;
	struct queue load, latency;
	struct plain_kernel fill, saxpy;
	VkBuffer small, x, y;
	VkDeviceMemory memory[3];
	VkCommandBuffer load_cmd, latency_cmd;
	PFN_vkCmdPushDescriptorSetKHR push_descriptor;
};

static void record(struct probe *p, VkCommandBuffer cmd, const struct plain_kernel *k,
		   const VkBuffer *bufs, uint32_t n, const void *push, uint32_t push_size,
		   uint32_t groups)
{
	/* the load's is in flight several times at once */
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
	VK(vkBeginCommandBuffer(cmd, &bi));
	VkDescriptorBufferInfo infos[2];
	VkWriteDescriptorSet writes[2];
	for (uint32_t i = 0; i < n; i++) {
		infos[i] = (VkDescriptorBufferInfo){.buffer = bufs[i], .range = VK_WHOLE_SIZE};
		writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
						   .dstBinding = i,
						   .descriptorCount = 1,
						   .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
						   .pBufferInfo = &infos[i]};
	}
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
	p->push_descriptor(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, n, writes);
	vkCmdPushConstants(cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
	vkCmdDispatch(cmd, groups, 1, 1);
	VK(vkEndCommandBuffer(cmd));
}

static void submit(struct queue *q, VkCommandBuffer cmd)
{
	uint64_t value = ++q->value;
	VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
					    .signalSemaphoreValueCount = 1,
					    .pSignalSemaphoreValues = &value};
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
			   .pNext = &ti,
			   .commandBufferCount = 1,
			   .pCommandBuffers = &cmd,
			   .signalSemaphoreCount = 1,
			   .pSignalSemaphores = &q->timeline};
	VK(vkQueueSubmit(q->vk, 1, &si, VK_NULL_HANDLE));
}

static uint64_t completed(struct probe *p, struct queue *q)
{
	uint64_t v = 0;
	VK(vkGetSemaphoreCounterValue(p->dev, q->timeline, &v));
	return v;
}

static void wait_for(struct probe *p, struct queue *q, uint64_t value)
{
	plain_timeline_wait(p->dev, q->timeline, value);
}

/* Median and p99 of SAMPLES latency round trips, with or without load. */
static void measure(struct probe *p, int loaded, double *median, double *p99)
{
	static double t[SAMPLES];
	for (int i = -50; i < SAMPLES; i++) {
		/* keep the load queue LOAD_IN_FLIGHT deep */
		while (loaded && p->load.value - completed(p, &p->load) < LOAD_IN_FLIGHT)
			submit(&p->load, p->load_cmd);
		double t0 = plain_now_s() * 1e6;
		submit(&p->latency, p->latency_cmd);
		wait_for(p, &p->latency, p->latency.value);
		if (i >= 0)
			t[i] = plain_now_s() * 1e6 - t0;
	}
	wait_for(p, &p->load, p->load.value);
	qsort(t, SAMPLES, sizeof(*t), plain_cmp_double);
	*median = t[SAMPLES / 2];
	*p99 = t[SAMPLES * 99 / 100];
}

static int has_extension(VkPhysicalDevice pd, const char *name)
{
	uint32_t n = 0;
	vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL);
	VkExtensionProperties *e = calloc(n ? n : 1, sizeof(*e));
	vkEnumerateDeviceExtensionProperties(pd, NULL, &n, e);
	int found = 0;
	for (uint32_t i = 0; i < n; i++)
		found |= strcmp(e[i].extensionName, name) == 0;
	free(e);
	return found;
}

static void make_queue(struct probe *p, uint32_t family, uint32_t index, struct queue *q)
{
	q->family = family;
	vkGetDeviceQueue(p->dev, family, index, &q->vk);
	VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
				      .queueFamilyIndex = family};
	VK(vkCreateCommandPool(p->dev, &pi, NULL, &q->pool));
	VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
					.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
	VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
	VK(vkCreateSemaphore(p->dev, &si, NULL, &q->timeline));
	q->value = 0;
}

static VkCommandBuffer command_buffer(struct probe *p, struct queue *q)
{
	VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					  .commandPool = q->pool,
					  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					  .commandBufferCount = 1};
	VkCommandBuffer cmd;
	VK(vkAllocateCommandBuffers(p->dev, &ai, &cmd));
	return cmd;
}

/* Open the device for `setup`; 0, or -1 when the device cannot do it. */
static int open_probe(VkPhysicalDevice pd, enum setup setup, const char *dir, struct probe *p)
{
	memset(p, 0, sizeof(*p));
	p->physical = pd;
	uint32_t nf = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
	VkQueueFamilyProperties fam[32];
	if (nf > 32)
		nf = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fam);
	int first = -1, second = -1;
	for (uint32_t i = 0; i < nf; i++) {
		if (!(fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
			continue;
		if (first < 0)
			first = (int)i;
		else if (second < 0)
			second = (int)i;
	}
	if (first < 0)
		return -1;
	int global = setup == GLOBAL_HIGH || setup == GLOBAL_REALTIME;
	const char *ext_global = VK_KHR_GLOBAL_PRIORITY_EXTENSION_NAME;
	if (global && !has_extension(pd, ext_global))
		ext_global = "VK_EXT_global_priority";
	if ((setup == SAME_FAMILY && fam[first].queueCount < 2) ||
	    (setup != SAME_FAMILY && second < 0) || (global && !has_extension(pd, ext_global)))
		return -1;

	float low = 0.5f, both[2] = {0.5f, 1.0f}, high = 1.0f;
	VkDeviceQueueGlobalPriorityCreateInfoKHR gp = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_GLOBAL_PRIORITY_CREATE_INFO_KHR,
		.globalPriority = setup == GLOBAL_REALTIME ? VK_QUEUE_GLOBAL_PRIORITY_REALTIME_KHR
							   : VK_QUEUE_GLOBAL_PRIORITY_HIGH_KHR};
	VkDeviceQueueCreateInfo qi[2] = {
		{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		 .queueFamilyIndex = (uint32_t)first,
		 .queueCount = setup == SAME_FAMILY ? 2 : 1,
		 .pQueuePriorities = setup == SAME_FAMILY ? both : &low},
		{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		 .pNext = global ? &gp : NULL,
		 .queueFamilyIndex = (uint32_t)second,
		 .queueCount = 1,
		 .pQueuePriorities = &high},
	};
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.timelineSemaphore = VK_TRUE};
	const char *exts[2] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME, ext_global};
	VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
				 .pNext = &f12,
				 .queueCreateInfoCount = setup == SAME_FAMILY ? 1 : 2,
				 .pQueueCreateInfos = qi,
				 .enabledExtensionCount = global ? 2 : 1,
				 .ppEnabledExtensionNames = exts};
	VkResult r = vkCreateDevice(pd, &di, NULL, &p->dev);
	if (r != VK_SUCCESS) {
		printf("  %-16s vkCreateDevice: %d%s\n", setup_names[setup], r,
		       r == VK_ERROR_NOT_PERMITTED_KHR ? " (not permitted)" : "");
		return -1;
	}
	p->push_descriptor = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		p->dev, "vkCmdPushDescriptorSetKHR");
	make_queue(p, (uint32_t)first, 0, &p->load);
	if (setup == SAME_FAMILY)
		make_queue(p, (uint32_t)first, 1, &p->latency);
	else
		make_queue(p, (uint32_t)second, 0, &p->latency);

	plain_kernel_make(p->dev, dir, "fill.spv", 1, 8, &p->fill);
	plain_kernel_make(p->dev, dir, "saxpy.spv", 2, 8, &p->saxpy);
	plain_buffer_make(p->physical, p->dev, 1024, &p->small, &p->memory[0]);
	plain_buffer_make(p->physical, p->dev, (VkDeviceSize)LOAD_ELEMENTS * 4, &p->x, &p->memory[1]);
	plain_buffer_make(p->physical, p->dev, (VkDeviceSize)LOAD_ELEMENTS * 4, &p->y, &p->memory[2]);
	p->load_cmd = command_buffer(p, &p->load);
	p->latency_cmd = command_buffer(p, &p->latency);
	struct { float alpha; uint32_t n; } sp = {1.0f, LOAD_ELEMENTS};
	VkBuffer xy[2] = {p->x, p->y};
	record(p, p->load_cmd, &p->saxpy, xy, 2, &sp, sizeof(sp), 65535);
	uint32_t fp[2] = {7, 256};
	record(p, p->latency_cmd, &p->fill, &p->small, 1, fp, sizeof(fp), 1);
	return 0;
}

static void close_probe(struct probe *p)
{
	vkDeviceWaitIdle(p->dev);
	plain_kernel_destroy(p->dev, &p->fill);
	plain_kernel_destroy(p->dev, &p->saxpy);
	VkBuffer bufs[3] = {p->small, p->x, p->y};
	for (int i = 0; i < 3; i++) {
		vkDestroyBuffer(p->dev, bufs[i], NULL);
		vkFreeMemory(p->dev, p->memory[i], NULL);
	}
	struct queue *qs[2] = {&p->load, &p->latency};
	for (int i = 0; i < 2; i++) {
		vkDestroyCommandPool(p->dev, qs[i]->pool, NULL);
		vkDestroySemaphore(p->dev, qs[i]->timeline, NULL);
	}
	vkDestroyDevice(p->dev, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SHADER_DIR [DEVICE_INDEX]\n", argv[0]);
		return 2;
	}
	uint32_t want = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
	VkInstance instance;
	VkPhysicalDeviceProperties props;
	VkPhysicalDevice pd = plain_device_open("queue_priority", want, &instance, &props);
	printf("queue_priority: %s; latency of one tiny dispatch + wait, idle and with %d saxpy "
	       "dispatches of %u floats in flight on another queue (us)\n",
	       props.deviceName, LOAD_IN_FLIGHT, LOAD_ELEMENTS);
	printf("  %-16s %10s %10s %10s %10s %8s\n", "setup", "idle p50", "idle p99", "load p50",
	       "load p99", "x idle");
	for (int s = 0; s < SETUPS; s++) {
		struct probe p;
		if (open_probe(pd, (enum setup)s, argv[1], &p) < 0) {
			printf("  %-16s (not available on this device)\n", setup_names[s]);
			continue;
		}
		double idle50, idle99, load50, load99;
		measure(&p, 0, &idle50, &idle99);
		measure(&p, 1, &load50, &load99);
		printf("  %-16s %10.1f %10.1f %10.1f %10.1f %8.2f\n", setup_names[s], idle50, idle99,
		       load50, load99, load50 / idle50);
		close_probe(&p);
	}
	vkDestroyInstance(instance, NULL);
	return 0;
}
