/*
 * The in-process baselines: the same bytes and the same dispatches as the
 * rudad runs, done by this process with plain Vulkan on a device opened by
 * the daemon's own code (ruda__vulkan_init / ruda__device_create), so both
 * sides use the same instance and device set-up, the same device-local
 * buffers (ruda__buffer_create) and the same imported host memory
 * (ruda__arena_create + ruda__arena_attach_now: a memfd imported with
 * VK_EXT_external_memory_host).
 *
 * Submission is the plain kind a program would write: a few command
 * buffers of our own, a timeline semaphore, vkWaitSemaphores.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "memory/arena.h"
#include "bench.h"
#include "memory/buffer.h"
#include "device/device.h"

#define RING 4
#define WAIT_NS (120ull * 1000000000ull)
#define FILL_WORDS 256u
#define BATCH 1024 /* rudad's RUDA_STREAM_BATCH */

struct inproc {
	uv_loop_t loop;
	struct ruda_vulkan vk;
	struct ruda_device *dev;
	VkCommandPool pool;
	VkCommandBuffer cmd[RING];
	uint64_t cmd_value[RING];
	unsigned next;
	VkSemaphore timeline;
	uint64_t value;
};

#define VK(call)                                                              \
	do {                                                                  \
		VkResult r_ = (call);                                         \
		BENCH_CHECK(r_ == VK_SUCCESS, "%s failed: %d", #call, r_);    \
	} while (0)

static void wait_value(struct inproc *p, uint64_t value)
{
	VkSemaphoreWaitInfo w = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
		.semaphoreCount = 1,
		.pSemaphores = &p->timeline,
		.pValues = &value,
	};
	VK(vkWaitSemaphores(p->dev->vk, &w, WAIT_NS));
}

static void open_device(struct inproc *p)
{
	memset(p, 0, sizeof(*p));
	BENCH_CHECK(uv_loop_init(&p->loop) == 0, "uv_loop_init");
	BENCH_CHECK(ruda__vulkan_init(&p->vk) == 0, "in-process: no Vulkan");
	int idx = ruda__vulkan_select(&p->vk, bench_opt.device);
	BENCH_CHECK(idx >= 0, "in-process: no Vulkan device");
	BENCH_CHECK(ruda__device_create(&p->vk, (uint32_t)idx, 0, &p->loop, &p->dev) == 0,
		    "in-process: cannot open the device");
	struct ruda_device *d = p->dev;
	VkCommandPoolCreateInfo pool = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
		.queueFamilyIndex = d->queue_family,
	};
	VK(vkCreateCommandPool(d->vk, &pool, NULL, &p->pool));
	VkCommandBufferAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = p->pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = RING,
	};
	VK(vkAllocateCommandBuffers(d->vk, &alloc, p->cmd));
	VkSemaphoreTypeCreateInfo type = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
		.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE,
	};
	VkSemaphoreCreateInfo sem = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &type};
	VK(vkCreateSemaphore(d->vk, &sem, NULL, &p->timeline));
}

static void close_device(struct inproc *p)
{
	struct ruda_device *d = p->dev;
	vkDeviceWaitIdle(d->vk);
	vkDestroySemaphore(d->vk, p->timeline, NULL);
	vkDestroyCommandPool(d->vk, p->pool, NULL);
	ruda__device_destroy(d);
	uv_run(&p->loop, UV_RUN_DEFAULT); /* the device's async handle closes */
	uv_loop_close(&p->loop);
	ruda__vulkan_finish(&p->vk);
}

/* The next command buffer, begun; waits if the ring has come round to one
 * still running. */
static VkCommandBuffer begin(struct inproc *p, unsigned *slot)
{
	*slot = p->next++ % RING;
	if (p->cmd_value[*slot])
		wait_value(p, p->cmd_value[*slot]);
	VkCommandBufferBeginInfo info = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	VK(vkBeginCommandBuffer(p->cmd[*slot], &info));
	return p->cmd[*slot];
}

/* End and submit; returns the timeline value that marks its completion. */
static uint64_t submit(struct inproc *p, unsigned slot)
{
	VK(vkEndCommandBuffer(p->cmd[slot]));
	uint64_t value = ++p->value;
	VkTimelineSemaphoreSubmitInfo timeline = {
		.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
		.signalSemaphoreValueCount = 1,
		.pSignalSemaphoreValues = &value,
	};
	VkSubmitInfo info = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.pNext = &timeline,
		.commandBufferCount = 1,
		.pCommandBuffers = &p->cmd[slot],
		.signalSemaphoreCount = 1,
		.pSignalSemaphores = &p->timeline,
	};
	VK(vkQueueSubmit(p->dev->queue, 1, &info, VK_NULL_HANDLE));
	p->cmd_value[slot] = value;
	return value;
}

static void host_read_barrier(VkCommandBuffer cmd)
{
	VkMemoryBarrier b = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_HOST_READ_BIT,
	};
	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
			     1, &b, 0, NULL, 0, NULL);
}

/* One copy, submitted and waited for. */
static void copy_wait(struct inproc *p, VkBuffer src, VkBuffer dst, uint64_t size, int to_host)
{
	unsigned slot;
	VkCommandBuffer cmd = begin(p, &slot);
	VkBufferCopy region = {.size = size};
	vkCmdCopyBuffer(cmd, src, dst, 1, &region);
	if (to_host)
		host_read_barrier(cmd);
	wait_value(p, submit(p, slot));
}

uint64_t bench_inproc_max_buffer(void)
{
	struct inproc p;
	open_device(&p);
	uint64_t max = p.dev->max_allocation_size;
	close_device(&p);
	return max;
}

/* ---- transfers -------------------------------------------------------------- */

static struct ruda_arena *host_memory(struct inproc *p, uint64_t size)
{
	struct ruda_arena *a;
	int err = ruda__arena_create(p->dev, size, &a);
	if (err == 0 && (err = ruda__arena_attach_now(a)) != 0)
		ruda_ref_put(&a->ref);
	BENCH_CHECK(err == 0, "in-process: cannot import %llu bytes of host memory: %d",
		    (unsigned long long)size, err);
	return a;
}

static struct ruda_buffer *device_buffer(struct inproc *p, uint64_t size)
{
	struct ruda_buffer *b;
	ruda_status st = ruda__buffer_create(p->dev, size, &b);
	BENCH_CHECK(st == RUDA_OK, "in-process: cannot allocate %llu device bytes: %s",
		    (unsigned long long)size, ruda_strerror(st));
	return b;
}

static void verify(const void *got, const void *want, uint64_t size, const char *what)
{
	int64_t at = bench_compare(got, want, size);
	BENCH_CHECK(at < 0, "%s: byte %lld of %llu differs", what, (long long)at,
		    (unsigned long long)size);
}

/* One size's bytes: `src` in host memory, `b` a device buffer holding them
 * (written and read back; made at the first write or download, so the
 * creates before it have the device's memory to themselves, as on rudad's
 * side), `dst` host memory the downloads land in. */
struct bench_inproc_transfer {
	struct inproc p;
	uint64_t size;
	char name[32];
	struct ruda_arena *src, *dst;
	struct ruda_buffer *b;
};

struct bench_inproc_transfer *bench_inproc_transfer_open(uint64_t size, uint64_t seed)
{
	struct bench_inproc_transfer *t = calloc(1, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	open_device(&t->p);
	t->size = size;
	bench_size_name(size, t->name, sizeof(t->name));
	t->src = host_memory(&t->p, size);
	t->dst = host_memory(&t->p, size);
	bench_fill_pattern(t->src->map, size, seed);
	return t;
}

static void make_written_buffer(struct bench_inproc_transfer *t)
{
	if (t->b)
		return;
	t->b = device_buffer(&t->p, t->size);
	copy_wait(&t->p, t->src->buffer, t->b->vk, t->size, 0);
}

/* `b`'s bytes, copied out to `dst`, are `src`'s. */
static void check_buffer(struct bench_inproc_transfer *t, struct ruda_buffer *b, const char *op)
{
	char what[96];
	memset(t->dst->map, 0, t->size);
	copy_wait(&t->p, b->vk, t->dst->buffer, t->size, 1);
	snprintf(what, sizeof(what), "in-process %s of %s", op, t->name);
	verify(t->dst->map, t->src->map, t->size, what);
}

double bench_inproc_transfer_run(struct bench_inproc_transfer *t, enum bench_inproc_op op,
				 int check, double split[2])
{
	struct inproc *p = &t->p;
	uint64_t size = t->size;
	double t0, t1, t2;
	switch (op) {
	case BENCH_INPROC_CREATE: {
		/* allocate a device buffer and copy the host bytes in (what
		 * ruda_client_create + sync does) */
		t0 = bench_now();
		struct ruda_buffer *b = device_buffer(p, size);
		t1 = bench_now();
		copy_wait(p, t->src->buffer, b->vk, size, 0);
		t2 = bench_now();
		if (check)
			check_buffer(t, b, "create");
		/* untimed, as rudad's side frees its buffer (Release + sync)
		 * outside its timing */
		ruda__buffer_put(b);
		bench_settle(size);
		if (split) {
			split[0] = t1 - t0;
			split[1] = t2 - t1;
		}
		return t2 - t0;
	}
	case BENCH_INPROC_WRITE:
		make_written_buffer(t);
		if (check) { /* zeros first, so the copy is seen to land */
			memset(t->dst->map, 0, size);
			copy_wait(p, t->dst->buffer, t->b->vk, size, 0);
		}
		t0 = bench_now();
		copy_wait(p, t->src->buffer, t->b->vk, size, 0);
		t1 = bench_now();
		if (check)
			check_buffer(t, t->b, "write");
		return t1 - t0;
	case BENCH_INPROC_DOWNLOAD:
		make_written_buffer(t);
		if (check)
			memset(t->dst->map, 0, size);
		t0 = bench_now();
		copy_wait(p, t->b->vk, t->dst->buffer, size, 1);
		t1 = bench_now();
		if (check) {
			char what[96];
			snprintf(what, sizeof(what), "in-process download of %s", t->name);
			verify(t->dst->map, t->src->map, size, what);
		}
		return t1 - t0;
	}
	bench_fail("in-process: no transfer %d", (int)op);
	return 0;
}

void bench_inproc_transfer_close(struct bench_inproc_transfer *t)
{
	vkDeviceWaitIdle(t->p.dev->vk);
	if (t->b)
		ruda__buffer_put(t->b);
	ruda_ref_put(&t->src->ref);
	ruda_ref_put(&t->dst->ref);
	close_device(&t->p);
	free(t);
}

/* ---- launches --------------------------------------------------------------- */

struct fill_pipeline {
	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline vk;
};

/* shaders/fill.comp, laid out as pipeline.c lays out every kernel: one
 * push-descriptor set of storage buffers and the push constants. */
static void fill_pipeline_create(struct inproc *p, struct fill_pipeline *f)
{
	struct ruda_device *d = p->dev;
	size_t size;
	uint32_t *code = bench_read_file(bench_path("shaders/fill.spv"), &size);
	BENCH_CHECK(code, "cannot read %s", bench_path("shaders/fill.spv"));
	VkShaderModuleCreateInfo mi = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = size,
		.pCode = code,
	};
	VK(vkCreateShaderModule(d->vk, &mi, NULL, &f->module));
	free(code);
	VkDescriptorSetLayoutBinding binding = {
		.binding = 0,
		.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		.descriptorCount = 1,
		.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
	};
	VkDescriptorSetLayoutCreateInfo si = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
		.bindingCount = 1,
		.pBindings = &binding,
	};
	VK(vkCreateDescriptorSetLayout(d->vk, &si, NULL, &f->set_layout));
	VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 8};
	VkPipelineLayoutCreateInfo li = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &f->set_layout,
		.pushConstantRangeCount = 1,
		.pPushConstantRanges = &push,
	};
	VK(vkCreatePipelineLayout(d->vk, &li, NULL, &f->layout));
	VkComputePipelineCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = f->module,
			.pName = "main",
		},
		.layout = f->layout,
	};
	VK(vkCreateComputePipelines(d->vk, VK_NULL_HANDLE, 1, &ci, NULL, &f->vk));
}

static void fill_pipeline_destroy(struct inproc *p, struct fill_pipeline *f)
{
	VkDevice vk = p->dev->vk;
	vkDestroyPipeline(vk, f->vk, NULL);
	vkDestroyPipelineLayout(vk, f->layout, NULL);
	vkDestroyDescriptorSetLayout(vk, f->set_layout, NULL);
	vkDestroyShaderModule(vk, f->module, NULL);
}

/* One launch as stream.c records it: the barrier that orders it after
 * everything before it, bind, push descriptors, push constants, dispatch. */
static void record_fill(struct inproc *p, VkCommandBuffer cmd, const struct fill_pipeline *f,
			struct ruda_buffer *out, uint32_t value)
{
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
				 VK_ACCESS_HOST_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(cmd,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
				     VK_PIPELINE_STAGE_HOST_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
			     1, &barrier, 0, NULL, 0, NULL);
	VkDescriptorBufferInfo info = {.buffer = out->vk, .offset = 0, .range = FILL_WORDS * 4};
	VkWriteDescriptorSet write = {
		.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
		.dstBinding = 0,
		.descriptorCount = 1,
		.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		.pBufferInfo = &info,
	};
	uint32_t push[2] = {value, FILL_WORDS};
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->vk);
	p->dev->cmd_push_descriptor_set(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, f->layout, 0, 1,
					&write);
	vkCmdPushConstants(cmd, f->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(push), push);
	vkCmdDispatch(cmd, 1, 1, 1);
}

static void check_fill(struct inproc *p, struct ruda_buffer *out, struct ruda_arena *host,
		       uint32_t value, const char *what)
{
	memset(host->map, 0, FILL_WORDS * 4);
	copy_wait(p, out->vk, host->buffer, FILL_WORDS * 4, 1);
	const uint32_t *w = (const uint32_t *)host->map;
	for (uint32_t i = 0; i < FILL_WORDS; i++)
		BENCH_CHECK(w[i] == value, "%s: word %u is %u, expected %u", what, i, w[i], value);
}

/* (a): record + submit + wait for one dispatch. */
static uint64_t round_trip(struct inproc *p, const struct fill_pipeline *f,
			   struct ruda_buffer *out, uint32_t value)
{
	unsigned slot;
	VkCommandBuffer cmd = begin(p, &slot);
	record_fill(p, cmd, f, out, value);
	uint64_t v = submit(p, slot);
	wait_value(p, v);
	return v;
}

/* (b): `n` dispatches in command buffers of BATCH, then one wait. */
static void many(struct inproc *p, const struct fill_pipeline *f, struct ruda_buffer *out, int n)
{
	unsigned slot = 0;
	VkCommandBuffer cmd = VK_NULL_HANDLE;
	int recorded = 0;
	uint64_t last = 0;
	for (int i = 0; i < n; i++) {
		if (!cmd)
			cmd = begin(p, &slot);
		record_fill(p, cmd, f, out, (uint32_t)i + 1);
		if (++recorded == BATCH) {
			last = submit(p, slot);
			cmd = VK_NULL_HANDLE;
			recorded = 0;
		}
	}
	if (cmd)
		last = submit(p, slot);
	wait_value(p, last);
}

/* (c): one command buffer of `graph_launches` dispatches, recorded once
 * and submitted `graph_replays` times, then one wait. Returns the median
 * wall time per dispatch, us. */
static double graph_replays(struct inproc *p, const struct fill_pipeline *f,
			    struct ruda_buffer *out, struct ruda_arena *host,
			    const struct bench_launch_plan *plan)
{
	VkCommandBufferAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = p->pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkCommandBuffer cmd;
	VK(vkAllocateCommandBuffers(p->dev->vk, &alloc, &cmd));
	/* resubmitted while earlier submissions of it may still be pending */
	VkCommandBufferBeginInfo info = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
	};
	VK(vkBeginCommandBuffer(cmd, &info));
	for (int i = 0; i < plan->graph_launches; i++)
		record_fill(p, cmd, f, out, (uint32_t)i + 1);
	VK(vkEndCommandBuffer(cmd));
	double *t = calloc((size_t)plan->batches, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	for (int r = -1; r < plan->batches; r++) { /* r = -1: warm-up */
		double t0 = bench_now();
		for (int i = 0; i < plan->graph_replays; i++) {
			uint64_t value = ++p->value;
			VkTimelineSemaphoreSubmitInfo timeline = {
				.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
				.signalSemaphoreValueCount = 1,
				.pSignalSemaphoreValues = &value,
			};
			VkSubmitInfo submit_info = {
				.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
				.pNext = &timeline,
				.commandBufferCount = 1,
				.pCommandBuffers = &cmd,
				.signalSemaphoreCount = 1,
				.pSignalSemaphores = &p->timeline,
			};
			VK(vkQueueSubmit(p->dev->queue, 1, &submit_info, VK_NULL_HANDLE));
		}
		wait_value(p, p->value);
		double dt = bench_now() - t0;
		if (r >= 0)
			t[r] = dt / ((double)plan->graph_launches * plan->graph_replays) * 1e6;
		check_fill(p, out, host, (uint32_t)plan->graph_launches, "in-process graph");
	}
	double us = bench_median(t, (size_t)plan->batches);
	free(t);
	vkFreeCommandBuffers(p->dev->vk, p->pool, 1, &cmd);
	return us;
}

void bench_inproc_launches(const struct bench_launch_plan *plan, struct bench_launch_result *out)
{
	struct inproc p;
	open_device(&p);
	struct fill_pipeline f;
	fill_pipeline_create(&p, &f);
	struct ruda_buffer *buf = device_buffer(&p, FILL_WORDS * 4);
	struct ruda_arena *host = host_memory(&p, 4096);

	int warm = plan->round_trips / 10 + 1;
	for (int i = 0; i < warm; i++)
		round_trip(&p, &f, buf, 7);
	check_fill(&p, buf, host, 7, "in-process launch (warm-up)");
	double *t = calloc((size_t)plan->round_trips, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	double cpu0 = bench_cpu_self();
	for (int i = 0; i < plan->round_trips; i++) {
		double t0 = bench_now();
		round_trip(&p, &f, buf, (uint32_t)i + 100);
		t[i] = bench_now() - t0;
	}
	out->rt_cpu_us = (bench_cpu_self() - cpu0) / plan->round_trips * 1e6;
	check_fill(&p, buf, host, (uint32_t)plan->round_trips - 1 + 100, "in-process launch");
	out->rt_median_us = bench_median(t, (size_t)plan->round_trips) * 1e6;
	out->rt_mean_us = bench_mean(t, (size_t)plan->round_trips) * 1e6;
	free(t);

	many(&p, &f, buf, plan->launches < 10000 ? plan->launches : 10000);
	double *rate = calloc((size_t)plan->batches, sizeof(*rate));
	BENCH_CHECK(rate, "out of memory");
	double cpu = 0;
	for (int r = 0; r < plan->batches; r++) {
		double c0 = bench_cpu_self(), t0 = bench_now();
		many(&p, &f, buf, plan->launches);
		rate[r] = plan->launches / (bench_now() - t0);
		cpu += bench_cpu_self() - c0;
		check_fill(&p, buf, host, (uint32_t)plan->launches, "in-process launches");
	}
	out->launches_per_s = bench_median(rate, (size_t)plan->batches);
	out->launch_cpu_us = cpu / ((double)plan->launches * plan->batches) * 1e6;
	free(rate);

	out->graph_us = graph_replays(&p, &f, buf, host, plan);

	ruda_ref_put(&host->ref);
	ruda__buffer_put(buf);
	fill_pipeline_destroy(&p, &f);
	close_device(&p);
}

/* ---- a kernel runner (runner.c's in-process side) ------------------------- */

#define RUNNER_MAX 8

struct runner_pipeline {
	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline vk;
	uint32_t nbindings;
};

struct bench_inproc_runner {
	struct inproc p;
	struct runner_pipeline k[RUNNER_MAX];
	int nk;
	struct ruda_buffer *b[RUNNER_MAX];
	uint64_t bsize[RUNNER_MAX];
	int nb;
	VkCommandBuffer cmd; /* recording, or VK_NULL_HANDLE */
	unsigned slot;
	int recorded;
};

struct bench_inproc_runner *bench_inproc_runner_open(void)
{
	struct bench_inproc_runner *r = calloc(1, sizeof(*r));
	BENCH_CHECK(r, "out of memory");
	open_device(&r->p);
	return r;
}

int bench_inproc_runner_kernel(struct bench_inproc_runner *r, const char *spv,
			       uint32_t nbindings, uint32_t push_size)
{
	BENCH_CHECK(r->nk < RUNNER_MAX && nbindings <= 4, "in-process runner: too many kernels");
	struct ruda_device *d = r->p.dev;
	struct runner_pipeline *k = &r->k[r->nk];
	k->nbindings = nbindings;
	size_t size;
	uint32_t *code = bench_read_file(bench_path(spv), &size);
	BENCH_CHECK(code, "cannot read %s", bench_path(spv));
	VkShaderModuleCreateInfo mi = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = size,
		.pCode = code,
	};
	VK(vkCreateShaderModule(d->vk, &mi, NULL, &k->module));
	free(code);
	VkDescriptorSetLayoutBinding bindings[4];
	for (uint32_t i = 0; i < nbindings; i++)
		bindings[i] = (VkDescriptorSetLayoutBinding){
			.binding = i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	VkDescriptorSetLayoutCreateInfo si = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
		.bindingCount = nbindings,
		.pBindings = bindings,
	};
	VK(vkCreateDescriptorSetLayout(d->vk, &si, NULL, &k->set_layout));
	VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = push_size};
	VkPipelineLayoutCreateInfo li = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &k->set_layout,
		.pushConstantRangeCount = push_size ? 1 : 0,
		.pPushConstantRanges = &push,
	};
	VK(vkCreatePipelineLayout(d->vk, &li, NULL, &k->layout));
	VkComputePipelineCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = k->module,
			.pName = "main",
		},
		.layout = k->layout,
	};
	VK(vkCreateComputePipelines(d->vk, VK_NULL_HANDLE, 1, &ci, NULL, &k->vk));
	return r->nk++;
}

int bench_inproc_runner_buffer(struct bench_inproc_runner *r, uint64_t size, const void *init)
{
	BENCH_CHECK(r->nb < RUNNER_MAX, "in-process runner: too many buffers");
	struct ruda_buffer *b = device_buffer(&r->p, size);
	if (init) {
		struct ruda_arena *host = host_memory(&r->p, (size + 4095) & ~4095ull);
		memcpy(host->map, init, size);
		copy_wait(&r->p, host->buffer, b->vk, size, 0);
		ruda_ref_put(&host->ref);
	}
	r->b[r->nb] = b;
	r->bsize[r->nb] = size;
	return r->nb++;
}

static void runner_submit(struct bench_inproc_runner *r)
{
	if (!r->cmd)
		return;
	submit(&r->p, r->slot);
	r->cmd = VK_NULL_HANDLE;
	r->recorded = 0;
}

void bench_inproc_runner_launch(struct bench_inproc_runner *r, int kernel, uint32_t groups,
				const int *bufs, const void *push, uint32_t push_size)
{
	const struct runner_pipeline *k = &r->k[kernel];
	if (!r->cmd)
		r->cmd = begin(&r->p, &r->slot);
	VkCommandBuffer cmd = r->cmd;
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
				 VK_ACCESS_HOST_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(cmd,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
				     VK_PIPELINE_STAGE_HOST_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
			     1, &barrier, 0, NULL, 0, NULL);
	VkDescriptorBufferInfo infos[4];
	VkWriteDescriptorSet writes[4];
	for (uint32_t i = 0; i < k->nbindings; i++) {
		infos[i] = (VkDescriptorBufferInfo){
			.buffer = r->b[bufs[i]]->vk, .range = r->bsize[bufs[i]]};
		writes[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstBinding = i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &infos[i],
		};
	}
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->vk);
	r->p.dev->cmd_push_descriptor_set(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, k->layout, 0,
					  k->nbindings, writes);
	if (push_size)
		vkCmdPushConstants(cmd, k->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
	vkCmdDispatch(cmd, groups, 1, 1);
	if (++r->recorded == BATCH)
		runner_submit(r);
}

void bench_inproc_runner_sync(struct bench_inproc_runner *r)
{
	runner_submit(r);
	if (r->p.value)
		wait_value(&r->p, r->p.value);
}

void bench_inproc_runner_read(struct bench_inproc_runner *r, int buf, void *dst)
{
	bench_inproc_runner_sync(r);
	uint64_t size = r->bsize[buf];
	struct ruda_arena *host = host_memory(&r->p, (size + 4095) & ~4095ull);
	copy_wait(&r->p, r->b[buf]->vk, host->buffer, size, 1);
	memcpy(dst, host->map, size);
	ruda_ref_put(&host->ref);
}

void bench_inproc_runner_close(struct bench_inproc_runner *r)
{
	bench_inproc_runner_sync(r);
	VkDevice vk = r->p.dev->vk;
	for (int i = 0; i < r->nk; i++) {
		vkDestroyPipeline(vk, r->k[i].vk, NULL);
		vkDestroyPipelineLayout(vk, r->k[i].layout, NULL);
		vkDestroyDescriptorSetLayout(vk, r->k[i].set_layout, NULL);
		vkDestroyShaderModule(vk, r->k[i].module, NULL);
	}
	for (int i = 0; i < r->nb; i++)
		ruda__buffer_put(r->b[i]);
	close_device(&r->p);
	free(r);
}
