/*
 * copy_placement: does the speed of a big copy or saxpy depend on where its
 * buffers lie? The kernels bench saw the copy kernel at the device's speed
 * in some rounds and at half of it in others, a whole round at a time, in
 * rudad and (for saxpy) in-process alike. This probe, in one process and
 * without rudad, times the same kernels (shaders/copy.comp, saxpy.comp,
 * one barrier before each dispatch as rudad records them) over:
 *
 *   pairs    PAIRS pairs of fresh 1 GiB allocations, all kept alive, each
 *            pair timed with its own two buffers (and their GPU addresses)
 *   crossed  the copy from pair i's source into pair j's destination
 *   offsets  one allocation holding both buffers, the destination at
 *            1 GiB + delta from the source, for several deltas
 *
 * Usage: copy_placement SHADER_DIR [DEVICE_INDEX [MIB]] (buffers of MIB
 * MiB, 1024 by default; lavapipe wants 16 or so). Prints GB/s of device
 * traffic (copy: read + write; saxpy: two reads and a write an element).
 * docs/performance.md ("Kernel speed") quotes it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "plain_vk.h"

#define GiB (1024ull * 1024ull * 1024ull)

static VkDeviceSize buffer_size = GiB; /* of each buffer */
#define PAIRS 6
#define LAUNCHES 50
#define REPS 5

struct probe {
	VkPhysicalDevice physical;
	VkDevice dev;
	VkQueue queue;
	VkCommandPool pool;
	VkCommandBuffer cmd;
	VkFence fence;
	uint32_t memory_type;
	struct plain_kernel copy, saxpy;
	PFN_vkCmdPushDescriptorSetKHR push_descriptor;
};

/* a buffer bound at `offset` of `memory` (its own when offset is ~0) */
struct buffer {
	VkBuffer vk;
	VkDeviceMemory memory;
	int owns_memory;
	VkDeviceAddress address;
};

static VkDeviceMemory allocate(struct probe *p, VkDeviceSize size)
{
	VkMemoryAllocateFlagsInfo flags = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
					   .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				   .pNext = &flags,
				   .allocationSize = size,
				   .memoryTypeIndex = p->memory_type};
	VkDeviceMemory memory;
	VK(vkAllocateMemory(p->dev, &ai, NULL, &memory));
	return memory;
}

/* A buffer of `size` in `memory` at `offset`, or in memory of its own. */
static struct buffer make_buffer(struct probe *p, VkDeviceMemory memory, VkDeviceSize offset)
{
	struct buffer b = {.memory = memory};
	VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				 .size = buffer_size,
				 .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
					  VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
					  VK_BUFFER_USAGE_TRANSFER_DST_BIT |
					  VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT};
	VK(vkCreateBuffer(p->dev, &bi, NULL, &b.vk));
	if (!memory) {
		VkMemoryRequirements req;
		vkGetBufferMemoryRequirements(p->dev, b.vk, &req);
		b.memory = allocate(p, req.size);
		b.owns_memory = 1;
		offset = 0;
	}
	VK(vkBindBufferMemory(p->dev, b.vk, b.memory, offset));
	VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO,
					.buffer = b.vk};
	b.address = vkGetBufferDeviceAddress(p->dev, &ai);
	return b;
}

static void destroy_buffer(struct probe *p, struct buffer *b)
{
	vkDestroyBuffer(p->dev, b->vk, NULL);
	if (b->owns_memory)
		vkFreeMemory(p->dev, b->memory, NULL);
}

static void run(struct probe *p)
{
	VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
			   .commandBufferCount = 1,
			   .pCommandBuffers = &p->cmd};
	VK(vkQueueSubmit(p->queue, 1, &si, p->fence));
	VK(vkWaitForFences(p->dev, 1, &p->fence, VK_TRUE, 60ull * 1000 * 1000 * 1000));
	VK(vkResetFences(p->dev, 1, &p->fence));
}

/* `n` dispatches of `k` over a and b, each after a barrier as rudad records
 * them, submitted once; seconds. */
static double dispatches(struct probe *p, const struct plain_kernel *k, const struct buffer *a,
			 const struct buffer *b, const void *push, uint32_t push_size, int n)
{
	/* one invocation an item, at most 65535 groups of 256 (the bench's grid) */
	uint64_t items = *(const uint32_t *)push ? *(const uint32_t *)push : 1;
	if (push_size == 8)
		items = ((const uint32_t *)push)[1];
	uint32_t groups = items / 256 < 65535 ? (uint32_t)((items + 255) / 256) : 65535;
	VK(vkResetCommandPool(p->dev, p->pool, 0));
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
	VK(vkBeginCommandBuffer(p->cmd, &bi));
	VkDescriptorBufferInfo infos[2] = {{.buffer = a->vk, .range = buffer_size},
					   {.buffer = b->vk, .range = buffer_size}};
	VkWriteDescriptorSet writes[2];
	for (uint32_t i = 0; i < 2; i++)
		writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
						   .dstBinding = i,
						   .descriptorCount = 1,
						   .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
						   .pBufferInfo = &infos[i]};
	VkMemoryBarrier barrier = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
				   .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
				   .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
	for (int i = 0; i < n; i++) {
		vkCmdPipelineBarrier(p->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
				     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &barrier, 0, NULL, 0,
				     NULL);
		vkCmdBindPipeline(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->pipeline);
		p->push_descriptor(p->cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0, 2, writes);
		vkCmdPushConstants(p->cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size,
				   push);
		vkCmdDispatch(p->cmd, groups, 1, 1);
	}
	VK(vkEndCommandBuffer(p->cmd));
	double t0 = plain_now_s();
	run(p);
	return plain_now_s() - t0;
}

/* TB/s of a kernel over (a, b): the median of REPS runs of LAUNCHES. */
static double speed(struct probe *p, int saxpy, const struct buffer *a, const struct buffer *b)
{
	uint32_t copy_push = (uint32_t)(buffer_size / 16);
	struct { float alpha; uint32_t n; } saxpy_push = {1.0f, (uint32_t)(buffer_size / 4)};
	const struct plain_kernel *k = saxpy ? &p->saxpy : &p->copy;
	const void *push = saxpy ? (const void *)&saxpy_push : (const void *)&copy_push;
	uint32_t push_size = saxpy ? sizeof(saxpy_push) : sizeof(copy_push);
	double t[REPS];
	dispatches(p, k, a, b, push, push_size, 1); /* first touch, warm-up */
	for (int i = 0; i < REPS; i++)
		t[i] = dispatches(p, k, a, b, push, push_size, LAUNCHES);
	qsort(t, REPS, sizeof(*t), plain_cmp_double);
	return (saxpy ? 3.0 : 2.0) * (double)buffer_size * LAUNCHES / t[REPS / 2] / 1e9;
}

/* GB/s of one vkCmdCopyBuffer of a into b a submission, as to_client
 * records it: the median of REPS, each after `idle_ms` of an idle device. */
static double copy_command_speed(struct probe *p, const struct buffer *a, const struct buffer *b,
				 int idle_ms)
{
	double t[REPS];
	for (int i = -1; i < REPS; i++) {
		VK(vkResetCommandPool(p->dev, p->pool, 0));
		VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
					       .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
		VK(vkBeginCommandBuffer(p->cmd, &bi));
		VkBufferCopy region = {.size = buffer_size};
		vkCmdCopyBuffer(p->cmd, a->vk, b->vk, 1, &region);
		VK(vkEndCommandBuffer(p->cmd));
		if (idle_ms)
			usleep((useconds_t)idle_ms * 1000);
		double t0 = plain_now_s();
		run(p);
		if (i >= 0)
			t[i] = plain_now_s() - t0;
	}
	qsort(t, REPS, sizeof(*t), plain_cmp_double);
	return (double)buffer_size / t[REPS / 2] / 1e9;
}

static void open_probe(VkPhysicalDevice pd, const char *dir, struct probe *p)
{
	memset(p, 0, sizeof(*p));
	p->physical = pd;
	uint32_t nf = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
	VkQueueFamilyProperties fam[32];
	if (nf > 32)
		nf = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fam);
	uint32_t family = 0;
	while (family < nf && !(fam[family].queueFlags & VK_QUEUE_COMPUTE_BIT))
		family++;
	float priority = 1.0f;
	VkDeviceQueueCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
				      .queueFamilyIndex = family,
				      .queueCount = 1,
				      .pQueuePriorities = &priority};
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.bufferDeviceAddress = VK_TRUE};
	const char *ext = VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME;
	VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
				 .pNext = &f12,
				 .queueCreateInfoCount = 1,
				 .pQueueCreateInfos = &qi,
				 .enabledExtensionCount = 1,
				 .ppEnabledExtensionNames = &ext};
	VK(vkCreateDevice(pd, &di, NULL, &p->dev));
	p->push_descriptor = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		p->dev, "vkCmdPushDescriptorSetKHR");
	vkGetDeviceQueue(p->dev, family, 0, &p->queue);
	VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
				      .queueFamilyIndex = family};
	VK(vkCreateCommandPool(p->dev, &pi, NULL, &p->pool));
	VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					  .commandPool = p->pool,
					  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					  .commandBufferCount = 1};
	VK(vkAllocateCommandBuffers(p->dev, &ai, &p->cmd));
	VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VK(vkCreateFence(p->dev, &fi, NULL, &p->fence));
	VkPhysicalDeviceMemoryProperties mp;
	vkGetPhysicalDeviceMemoryProperties(pd, &mp);
	for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
		if (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) {
			p->memory_type = i;
			break;
		}
	plain_kernel_make(p->dev, dir, "copy.spv", 2, 4, &p->copy);
	plain_kernel_make(p->dev, dir, "saxpy.spv", 2, 8, &p->saxpy);
}

static void close_probe(struct probe *p)
{
	vkDeviceWaitIdle(p->dev);
	plain_kernel_destroy(p->dev, &p->copy);
	plain_kernel_destroy(p->dev, &p->saxpy);
	vkDestroyFence(p->dev, p->fence, NULL);
	vkDestroyCommandPool(p->dev, p->pool, NULL);
	vkDestroyDevice(p->dev, NULL);
}

static void print_pair(const char *what, const struct buffer *a, const struct buffer *b,
		       double copy, double saxpy)
{
	long long delta = (long long)(b->address - a->address);
	printf("  %-10s a %#14llx  b %#14llx  b-a %+14lld (mod 2M %7lld)  copy %6.0f  saxpy %6.0f\n",
	       what, (unsigned long long)a->address, (unsigned long long)b->address, delta,
	       ((delta % (2 << 20)) + (2 << 20)) % (2 << 20), copy, saxpy);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SHADER_DIR [DEVICE_INDEX]\n", argv[0]);
		return 2;
	}
	setvbuf(stdout, NULL, _IOLBF, 0);
	uint32_t want = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
	if (argc > 3)
		buffer_size = (VkDeviceSize)atoi(argv[3]) << 20;
	VkInstance instance;
	VkPhysicalDeviceProperties props;
	VkPhysicalDevice pd = plain_device_open("copy_placement", want, &instance, &props);
	printf("copy_placement: %s; copy.comp and saxpy.comp over %llu MiB buffers, %d "
	       "launches, median of %d (GB/s)\n",
	       props.deviceName, (unsigned long long)(buffer_size >> 20), LAUNCHES, REPS);
	struct probe p;
	open_probe(pd, argv[1], &p);

	if (argc > 4 && strcmp(argv[4], "hold") == 0) {
		/* another process's context and memory, idle, for the probe in
		 * this one to run beside */
		struct buffer x = make_buffer(&p, VK_NULL_HANDLE, 0), y = make_buffer(&p, VK_NULL_HANDLE, 0);
		printf("holding: copy %.0f GB/s\n", speed(&p, 0, &x, &y));
		sleep(atoi(argc > 5 ? argv[5] : "30"));
		destroy_buffer(&p, &x);
		destroy_buffer(&p, &y);
		close_probe(&p);
		vkDestroyInstance(instance, NULL);
		return 0;
	}
	printf("pairs: fresh allocations, all kept\n");
	struct buffer a[PAIRS], b[PAIRS];
	for (int i = 0; i < PAIRS; i++) {
		a[i] = make_buffer(&p, VK_NULL_HANDLE, 0);
		b[i] = make_buffer(&p, VK_NULL_HANDLE, 0);
		char what[32];
		snprintf(what, sizeof(what), "pair %d", i);
		print_pair(what, &a[i], &b[i], speed(&p, 0, &a[i], &b[i]),
			   speed(&p, 1, &a[i], &b[i]));
	}
	printf("vkCmdCopyBuffer a0->b0, one a submission (GB/s of bytes moved): back to back "
	       "%.0f, after 20 ms idle %.0f, after 1 s idle %.0f; copy.comp alone %.0f\n",
	       copy_command_speed(&p, &a[0], &b[0], 0), copy_command_speed(&p, &a[0], &b[0], 20),
	       copy_command_speed(&p, &a[0], &b[0], 1000), speed(&p, 0, &a[0], &b[0]) / 2);
	printf("crossed: copy from a[i] to b[j]\n");
	for (int i = 0; i < PAIRS; i += 2)
		for (int j = 1; j < PAIRS; j += 2) {
			char what[32];
			snprintf(what, sizeof(what), "a%d->b%d", i, j);
			print_pair(what, &a[i], &b[j], speed(&p, 0, &a[i], &b[j]),
				   speed(&p, 1, &a[i], &b[j]));
		}
	for (int i = 0; i < PAIRS; i++) {
		destroy_buffer(&p, &a[i]);
		destroy_buffer(&p, &b[i]);
	}

	printf("offsets: both buffers in one allocation, b at one buffer size + delta\n");
	static const VkDeviceSize deltas[] = {0,	   256,	      4096,	   65536,
					      1 << 20,	   2 << 20,   (2 << 20) + 65536,
					      3 << 20,	   32 << 20,  (32 << 20) + 4096};
	enum { NDELTAS = sizeof(deltas) / sizeof(deltas[0]) };
	VkDeviceMemory both = allocate(&p, 2 * buffer_size + (64ull << 20));
	for (int i = 0; i < NDELTAS; i++) {
		struct buffer x = make_buffer(&p, both, 0);
		struct buffer y = make_buffer(&p, both, buffer_size + deltas[i]);
		char what[32];
		snprintf(what, sizeof(what), "+%llu", (unsigned long long)deltas[i]);
		print_pair(what, &x, &y, speed(&p, 0, &x, &y), speed(&p, 1, &x, &y));
		destroy_buffer(&p, &x);
		destroy_buffer(&p, &y);
	}
	vkFreeMemory(p.dev, both, NULL);
	close_probe(&p);
	vkDestroyInstance(instance, NULL);
	return 0;
}
