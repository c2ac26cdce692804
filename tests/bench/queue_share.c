/*
 * queue_share: how a device shares its queues among small kernels, in one
 * process and without rudad. "Busy" threads each keep one queue of the
 * compute family two submissions deep with one-workgroup spin kernels (each
 * submission `rounds` kernels, a barrier before each, as rudad's lanes
 * record them); a latency thread submits one such kernel on a queue of its
 * own, or on a busy thread's queue, and waits for it, over and over. The
 * rows say whether a queue beyond those the device runs at once waits for
 * a busy one, and what sharing a busy queue costs: the questions behind
 * rudad's equal-priority latency target (docs/performance.md, "Queue lanes").
 *
 * Usage: queue_share SHADER_DIR [DEVICE_INDEX [STEPS [ROWS]]]   (SHADER_DIR
 * holds spin.spv; STEPS, the kernel's length, defaults to 524288, about
 * 38 µs on an H200; use a few thousand on lavapipe; ROWS, if given, runs
 * only the rows whose name holds it, e.g. "wide").
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#include "plain_vk.h"

#define MAX_QUEUES 32
#define SAMPLES 400
#define BUSY_IN_FLIGHT 2
#define MAX_ROUNDS 16

struct queue {
	VkQueue vk;
	VkCommandPool pool;
	VkSemaphore timeline;
	uint64_t value;
	pthread_mutex_t lock; /* a queue is submitted to from one thread at a time */
};

struct probe {
	VkPhysicalDevice physical;
	VkDevice dev;
	uint32_t family, nqueues, other_family; /* other_family: UINT32_MAX when none */
	struct queue q[MAX_QUEUES], other;
	struct plain_kernel spin;
	VkBuffer out, count;
	VkDeviceMemory memory[2];
	PFN_vkCmdPushDescriptorSetKHR push_descriptor;
	uint32_t steps;
};

struct busy {
	struct probe *p;
	struct queue *q;
	VkCommandBuffer cmd;
	uint32_t rounds, width;
	atomic_bool *stop;
	uint64_t kernels;
	pthread_t thread;
};

static void make_queue(struct probe *p, uint32_t family, uint32_t index, struct queue *q)
{
	vkGetDeviceQueue(p->dev, family, index, &q->vk);
	VkCommandPoolCreateInfo pi = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
				      .queueFamilyIndex = family};
	VK(vkCreateCommandPool(p->dev, &pi, NULL, &q->pool));
	VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
					.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE};
	VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
	VK(vkCreateSemaphore(p->dev, &si, NULL, &q->timeline));
	q->value = 0;
	pthread_mutex_init(&q->lock, NULL);
}

static void destroy_queue(struct probe *p, struct queue *q)
{
	vkDestroyCommandPool(p->dev, q->pool, NULL);
	vkDestroySemaphore(p->dev, q->timeline, NULL);
	pthread_mutex_destroy(&q->lock);
}

/* A command buffer of `rounds` rounds of `width` spin kernels, a barrier
 * before each round (the previous round's end) and none between a round's
 * kernels, as rudad's lanes record them; resubmittable while in flight. */
static VkCommandBuffer record(struct probe *p, struct queue *q, uint32_t rounds, uint32_t width)
{
	VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
					  .commandPool = q->pool,
					  .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
					  .commandBufferCount = 1};
	VkCommandBuffer cmd;
	VK(vkAllocateCommandBuffers(p->dev, &ai, &cmd));
	VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
				       .flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT};
	VK(vkBeginCommandBuffer(cmd, &bi));
	VkDescriptorBufferInfo infos[2] = {{.buffer = p->out, .range = VK_WHOLE_SIZE},
					   {.buffer = p->count, .range = VK_WHOLE_SIZE}};
	VkWriteDescriptorSet writes[2];
	for (uint32_t i = 0; i < 2; i++)
		writes[i] = (VkWriteDescriptorSet){.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
						   .dstBinding = i,
						   .descriptorCount = 1,
						   .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
						   .pBufferInfo = &infos[i]};
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->spin.pipeline);
	p->push_descriptor(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->spin.layout, 0, 2, writes);
	vkCmdPushConstants(cmd, p->spin.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &p->steps);
	VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
			      .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
			      .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
	for (uint32_t r = 0; r < rounds; r++) {
		vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
				     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &mb, 0, NULL, 0,
				     NULL);
		for (uint32_t k = 0; k < width; k++)
			vkCmdDispatch(cmd, 1, 1, 1);
	}
	VK(vkEndCommandBuffer(cmd));
	return cmd;
}

static uint64_t submit(struct queue *q, VkCommandBuffer cmd)
{
	pthread_mutex_lock(&q->lock);
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
	pthread_mutex_unlock(&q->lock);
	return value;
}

static void wait_for(struct probe *p, struct queue *q, uint64_t value)
{
	plain_timeline_wait(p->dev, q->timeline, value);
}

/* Keep the busy queue BUSY_IN_FLIGHT submissions deep until told to stop. */
static void *busy_main(void *arg)
{
	struct busy *b = arg;
	uint64_t values[BUSY_IN_FLIGHT] = {0};
	unsigned next = 0;
	while (!atomic_load(b->stop)) {
		if (values[next])
			wait_for(b->p, b->q, values[next]);
		values[next] = submit(b->q, b->cmd);
		b->kernels += b->rounds * b->width;
		next = (next + 1) % BUSY_IN_FLIGHT;
	}
	for (unsigned i = 0; i < BUSY_IN_FLIGHT; i++)
		if (values[i])
			wait_for(b->p, b->q, values[i]);
	return NULL;
}

struct row {
	const char *what;
	uint32_t busy;       /* busy threads, on queues 0, stride, 2 stride, ... */
	uint32_t rounds;     /* rounds per busy submission */
	int latency_queue;   /* its queue's index, or -1: a queue of the other family */
	uint32_t stride;     /* between the busy threads' queues (0: 1) */
	uint32_t width;      /* kernels side by side in a busy round (0: 1) */
};

static uint32_t busy_queue(const struct row *row, uint32_t i)
{
	return i * (row->stride ? row->stride : 1);
}

/* Latency median and p90 (µs) and the busy threads' kernels/s for `row`. */
static void measure(struct probe *p, const struct row *row, double *p50, double *p90,
		    double *busy_rate)
{
	atomic_bool stop = false;
	struct busy busy[MAX_QUEUES];
	for (uint32_t i = 0; i < row->busy; i++) {
		busy[i] = (struct busy){.p = p,
					.q = &p->q[busy_queue(row, i)],
					.rounds = row->rounds,
					.width = row->width ? row->width : 1,
					.stop = &stop};
		busy[i].cmd = record(p, busy[i].q, row->rounds, busy[i].width);
	}
	struct queue *lq = row->latency_queue < 0 ? &p->other : &p->q[row->latency_queue];
	VkCommandBuffer lcmd = record(p, lq, 1, 1);
	double start = plain_now_s();
	for (uint32_t i = 0; i < row->busy; i++)
		pthread_create(&busy[i].thread, NULL, busy_main, &busy[i]);
	static double t[SAMPLES];
	for (int i = -40; i < SAMPLES; i++) {
		double t0 = plain_now_s();
		wait_for(p, lq, submit(lq, lcmd));
		if (i >= 0)
			t[i] = (plain_now_s() - t0) * 1e6;
	}
	atomic_store(&stop, true);
	uint64_t kernels = 0;
	for (uint32_t i = 0; i < row->busy; i++) {
		pthread_join(busy[i].thread, NULL);
		kernels += busy[i].kernels;
	}
	double seconds = plain_now_s() - start;
	VK(vkQueueWaitIdle(lq->vk));
	for (uint32_t i = 0; i < row->busy; i++)
		vkFreeCommandBuffers(p->dev, busy[i].q->pool, 1, &busy[i].cmd);
	vkFreeCommandBuffers(p->dev, lq->pool, 1, &lcmd);
	qsort(t, SAMPLES, sizeof(*t), plain_cmp_double);
	*p50 = t[SAMPLES / 2];
	*p90 = t[SAMPLES * 9 / 10];
	*busy_rate = kernels / seconds;
}

/* rudad's choice: a compute family, one without graphics where there is
 * one; the other compute family, if any, for the cross-family row. */
static void open_probe(VkPhysicalDevice pd, const char *dir, uint32_t steps, struct probe *p)
{
	memset(p, 0, sizeof(*p));
	p->physical = pd;
	p->steps = steps;
	uint32_t nf = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, NULL);
	VkQueueFamilyProperties fam[32];
	if (nf > 32)
		nf = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(pd, &nf, fam);
	int family = -1, other = -1;
	for (uint32_t i = 0; i < nf; i++) {
		if (!(fam[i].queueFlags & VK_QUEUE_COMPUTE_BIT))
			continue;
		if (family < 0 || !(fam[i].queueFlags & VK_QUEUE_GRAPHICS_BIT)) {
			if (family >= 0)
				other = family;
			family = (int)i;
		} else if (other < 0) {
			other = (int)i;
		}
	}
	if (family < 0) {
		fprintf(stderr, "no compute queue\n");
		exit(1);
	}
	p->family = (uint32_t)family;
	p->nqueues = fam[family].queueCount < MAX_QUEUES ? fam[family].queueCount : MAX_QUEUES;
	p->other_family = other < 0 ? UINT32_MAX : (uint32_t)other;
	float priorities[MAX_QUEUES];
	for (uint32_t i = 0; i < MAX_QUEUES; i++)
		priorities[i] = 1.0f;
	VkDeviceQueueCreateInfo qi[2] = {
		{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		 .queueFamilyIndex = p->family,
		 .queueCount = p->nqueues,
		 .pQueuePriorities = priorities},
		{.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		 .queueFamilyIndex = p->other_family,
		 .queueCount = 1,
		 .pQueuePriorities = priorities},
	};
	VkPhysicalDeviceVulkan12Features f12 = {
		.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
		.timelineSemaphore = VK_TRUE};
	const char *exts[1] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
	VkDeviceCreateInfo di = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
				 .pNext = &f12,
				 .queueCreateInfoCount = other < 0 ? 1 : 2,
				 .pQueueCreateInfos = qi,
				 .enabledExtensionCount = 1,
				 .ppEnabledExtensionNames = exts};
	VK(vkCreateDevice(pd, &di, NULL, &p->dev));
	p->push_descriptor = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		p->dev, "vkCmdPushDescriptorSetKHR");
	for (uint32_t i = 0; i < p->nqueues; i++)
		make_queue(p, p->family, i, &p->q[i]);
	if (other >= 0)
		make_queue(p, p->other_family, 0, &p->other);
	plain_kernel_make(p->dev, dir, "spin.spv", 2, 4, &p->spin);
	plain_buffer_make(p->physical, p->dev, 64 * 4, &p->out, &p->memory[0]);
	plain_buffer_make(p->physical, p->dev, 4, &p->count, &p->memory[1]);
}

static void close_probe(struct probe *p)
{
	vkDeviceWaitIdle(p->dev);
	plain_kernel_destroy(p->dev, &p->spin);
	VkBuffer bufs[2] = {p->out, p->count};
	for (int i = 0; i < 2; i++) {
		vkDestroyBuffer(p->dev, bufs[i], NULL);
		vkFreeMemory(p->dev, p->memory[i], NULL);
	}
	for (uint32_t i = 0; i < p->nqueues; i++)
		destroy_queue(p, &p->q[i]);
	if (p->other_family != UINT32_MAX)
		destroy_queue(p, &p->other);
	vkDestroyDevice(p->dev, NULL);
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: %s SHADER_DIR [DEVICE_INDEX [STEPS [ROWS]]]\n", argv[0]);
		return 2;
	}
	uint32_t want = argc > 2 ? (uint32_t)atoi(argv[2]) : 0;
	uint32_t steps = argc > 3 ? (uint32_t)strtoul(argv[3], NULL, 10) : 524288;
	const char *only = argc > 4 ? argv[4] : NULL;
	VkInstance instance;
	VkPhysicalDeviceProperties props;
	VkPhysicalDevice pd = plain_device_open("queue_share", want, &instance, &props);
	struct probe p;
	open_probe(pd, argv[1], steps, &p);
	printf("queue_share: %s; family %u with %u queues; spin kernel of %u steps, one "
	       "workgroup; busy queues %d submissions deep; latency of one kernel + wait (us)\n",
	       props.deviceName, p.family, p.nqueues, steps, BUSY_IN_FLIGHT);
	uint32_t nq = p.nqueues, last = nq - 1;
	/* queue counts around the eight an H200 runs at once, as far as the
	 * family goes */
	struct row rows[] = {
		{"idle, own queue", 0, 1, 0},
		{"idle, other family", 0, 1, -1},
		{"4 busy, own queue", 4, 4, 4},
		{"6 busy, own queue", 6, 4, 6},
		{"7 busy, own queue", 7, 4, 7},
		{"8 busy, own queue", 8, 4, 8},
		{"8 busy, own queue, 1 round", 8, 1, 8},
		{"8 busy, own queue, 16 rounds", 8, 16, 8},
		{"8 busy, last queue", 8, 4, (int)last},
		{"8 busy, other family", 8, 4, -1},
		{"12 busy, own queue", 12, 4, 12},
		{"all but one busy, own queue", last, 4, (int)last},
		{"1 busy, sharing busy queue 0", 1, 4, 0},
		{"7 busy, sharing busy queue 0", 7, 4, 0},
		{"7 busy, sharing, 1 round", 7, 1, 0},
		{"8 busy, sharing busy queue 0", 8, 4, 0},
		/* whether neighbouring queues run side by side: the busy
		 * kernels/s of one and two busy queues, next to each other or
		 * apart (rudad gives its first clients queues 0, 1, 2, ...) */
		{"1 busy, queue 0", 1, 4, (int)last},
		{"2 busy, queues 0 and 1", 2, 4, (int)last, 1},
		{"2 busy, queues 0 and 2", 2, 4, (int)last, 2},
		{"2 busy, queues 0 and 4", 2, 4, (int)last, 4},
		{"2 busy, queues 0 and 8", 2, 4, (int)last, 8},
		{"4 busy, queues 0-3", 4, 4, (int)last, 1},
		{"4 busy, queues 0, 2, 4, 6", 4, 4, (int)last, 2},
		{"4 busy, queues 0, 3, 6, 9", 4, 4, (int)last, 3},
		/* the device's own rate for rudad's lanes: 16 clients on 8
		 * queues are rounds of 2 kernels side by side, one round a
		 * submission (the latency probe on the other family, out of
		 * the way) */
		{"1 busy, 1 wide", 1, 4, -1, 1, 1},
		{"1 busy, 2 wide", 1, 4, -1, 1, 2},
		{"4 busy, 1 wide", 4, 4, -1, 1, 1},
		{"8 busy, 1 wide", 8, 4, -1, 1, 1},
		{"8 busy, 2 wide", 8, 4, -1, 1, 2},
		{"8 busy, 1 wide, 1 round", 8, 1, -1, 1, 1},
		{"8 busy, 2 wide, 1 round", 8, 1, -1, 1, 2},
		{"4 busy, 4 wide", 4, 4, -1, 1, 4},
		{"1 busy, 16 wide", 1, 4, -1, 1, 16},
	};
	printf("  %-32s %6s %6s %10s %10s %8s %14s\n", "row", "busy", "rounds", "p50", "p90",
	       "x idle", "busy kernels/s");
	double idle = 0;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct row *r = &rows[i];
		if (i > 0 && only && !strstr(r->what, only))
			continue;
		if (r->busy > nq || (r->busy && busy_queue(r, r->busy - 1) >= nq) ||
		    (r->latency_queue >= 0 && (uint32_t)r->latency_queue >= nq) ||
		    (r->latency_queue < 0 && p.other_family == UINT32_MAX)) {
			printf("  %-32s (the device has too few queues)\n", r->what);
			continue;
		}
		double p50, p90, rate;
		measure(&p, r, &p50, &p90, &rate);
		if (i == 0)
			idle = p50;
		printf("  %-32s %6u %6u %10.1f %10.1f %8.2f %14.0f\n", r->what, r->busy, r->rounds,
		       p50, p90, p50 / idle, rate);
		fflush(stdout);
	}
	close_probe(&p);
	vkDestroyInstance(instance, NULL);
	return 0;
}
