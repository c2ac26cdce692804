#include "device.h"
#include "indirect.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruda/ruda.h>

#include "buffer.h"
#include "deferred_free.h"
#include "log.h"

/* How long the completion thread sleeps in one vkWaitSemaphores, so it
 * notices a stop request. */
#define COMPLETION_POLL_NS (100u * 1000u * 1000u)
/* How long the completion thread polls (the timeline for work in flight,
 * `target` for the next submission) before it sleeps: a sleep in the driver
 * or on the condition variable costs tens of microseconds to wake from,
 * more than a tiny dispatch takes. On the H200 a launch + sync round trip
 * was 1.63x in-process with no polling, 1.18x at 30 us, 0.97x at 300 us
 * (docs/performance.md). A CPU device computes on the cores the poll would
 * take: on lavapipe, 2 loaded cores, polling made it slower (median 48-63 us
 * with none, 71-77 at 300 us, 90 at 50 us), so it does not poll there.
 * RUDA_COMPLETION_SPIN_US overrides. */
#define DEFAULT_SPIN_US 300u
#define DEFAULT_CPU_SPIN_US 0u
/* How often the loop looks for work that stopped making progress. */
#define WATCHDOG_PERIOD_MS 100u
/* Timestamp query pairs: one per submission in flight. */
#define QUERY_PAIRS 4096u

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
	int best = -1, best_rank = -1;
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

int ruda__device_memory_type(const struct ruda_device *device, uint32_t type_bits,
			     VkMemoryPropertyFlags want, VkMemoryPropertyFlags avoid)
{
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t i = 0; i < device->memory.memoryTypeCount; i++) {
			VkMemoryPropertyFlags f = device->memory.memoryTypes[i].propertyFlags;
			if (!(type_bits & (1u << i)) || (f & want) != want)
				continue;
			if (pass == 0 && (f & avoid))
				continue;
			return (int)i;
		}
	return -1;
}

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

/* ---- completion thread ---------------------------------------------------- */

/* The device failed (or stopped making progress): fail everything. */
static void declare_lost(struct ruda_device *d, VkResult r, int status)
{
	ruda__progress_failed(&d->progress);
	atomic_store(&d->lost_status, status);
	atomic_store(&d->lost, (int)r);
	uv_async_send(&d->async);
	log_error("device %u: %s", d->index,
		  status == RUDA_ERROR_TIMEOUT
			  ? "a submission ran past the time limit; the device is re-created "
			    "for the other clients"
			  : "device lost; its work is lost");
}

/* Queue `q`'s timeline now, into *v, when work of it is in flight as far
 * as was published; false when it is idle so (nothing to ask the driver)
 * or the driver cannot say. */
static bool queue_timeline(struct ruda_device *d, uint32_t q, uint64_t *v)
{
	if (atomic_load(&d->queue_done[q]) >= atomic_load(&d->queue_submitted[q]))
		return false;
	return vkGetSemaphoreCounterValue(d->vk, d->timelines[q], v) == VK_SUCCESS;
}

/* Work up to timeline value `value` is complete, and each queue's up to
 * what its timeline says: tell the loop and the clients watching the
 * progress page. Whether anything moved. */
static bool publish_completed(struct ruda_device *d, uint64_t value)
{
	bool moved = false;
	/* each queue's own value first: a submission is complete once its
	 * queue's timeline reaches it, whatever the other queues do */
	for (uint32_t q = 0; q < d->nqueues; q++) {
		uint64_t v;
		if (queue_timeline(d, q, &v) && v > atomic_load(&d->queue_done[q])) {
			atomic_store(&d->queue_done[q], v);
			ruda__progress_completed(&d->progress, q, v);
			moved = true;
		}
	}
	if (value > atomic_load(&d->completed)) {
		atomic_store(&d->completed, value);
		moved = true;
	}
	if (moved)
		uv_async_send(&d->async);
	return moved;
}

/* Whether some queue has completed more than was published. */
static bool queues_moved(struct ruda_device *d)
{
	for (uint32_t q = 0; q < d->nqueues; q++) {
		uint64_t v;
		if (queue_timeline(d, q, &v) && v > atomic_load(&d->queue_done[q]))
			return true;
	}
	return false;
}

int ruda__device_read_completed(struct ruda_device *d, uint64_t *value)
{
	/* the last value handed out first: a queue it went to is seen busy
	 * below (its submitted and floor were stored before target) */
	uint64_t done = atomic_load(&d->target);
	for (uint32_t q = 0; q < d->nqueues; q++) {
		uint64_t submitted = atomic_load(&d->queue_submitted[q]), v;
		if (atomic_load(&d->queue_done[q]) >= submitted)
			continue; /* idle, as published: no need to ask the driver */
		if (vkGetSemaphoreCounterValue(d->vk, d->timelines[q], &v) != VK_SUCCESS)
			return -EIO;
		if (v >= submitted)
			continue; /* idle: nothing of it holds `done` back */
		/* every value in flight on it is above both */
		uint64_t floor = atomic_load(&d->queue_floor[q]);
		uint64_t below = v > floor ? v : floor;
		if (below < done)
			done = below;
	}
	*value = done;
	return 0;
}

/* Poll the timeline until it reaches `want` or `spin_ns` pass; what it
 * reached. */
static uint64_t spin_on_timeline(struct ruda_device *d, uint64_t want, uint64_t seen)
{
	uint64_t now = uv_hrtime(), until = now + d->spin_ns;
	/* and until the host-device copies in flight should have ended */
	uint64_t transfers = atomic_load(&d->transfers_until_ns) + d->spin_ns;
	if (transfers > now + RUDA_TRANSFER_WATCH_MAX_NS)
		transfers = now + RUDA_TRANSFER_WATCH_MAX_NS;
	if (d->spin_ns && transfers > until)
		until = transfers;
	while (seen < want) {
		if (ruda__device_read_completed(d, &seen) < 0)
			break;
		if (seen >= want || uv_hrtime() >= until)
			break;
		/* several queues: one finishing is news even if `seen` stays */
		if (d->nqueues > 1 && queues_moved(d))
			break;
		sched_yield();
	}
	return seen;
}

/* Poll `target` for new work past `done` for up to `spin_ns`, so a client
 * that submits right after its previous work completed does not wait for
 * this thread to wake from the condition variable. */
static void spin_for_work(struct ruda_device *d, uint64_t done)
{
	if (!d->spin_ns)
		return;
	uint64_t until = uv_hrtime() + d->spin_ns;
	while (atomic_load(&d->target) <= done && uv_hrtime() < until)
		sched_yield();
}

static void *completion_main(void *arg)
{
	struct ruda_device *d = arg;
	pthread_mutex_lock(&d->lock);
	for (;;) {
		uint64_t done = atomic_load(&d->completed);
		if (!d->stop && atomic_load(&d->target) <= done) {
			pthread_mutex_unlock(&d->lock);
			spin_for_work(d, done);
			pthread_mutex_lock(&d->lock);
		}
		while (!d->stop && atomic_load(&d->target) <= done)
			pthread_cond_wait(&d->wake, &d->lock);
		if (d->stop)
			break;
		uint64_t want = done + 1;
		pthread_mutex_unlock(&d->lock);

		uint64_t seen = spin_on_timeline(d, want, done);
		if (publish_completed(d, seen)) {
			pthread_mutex_lock(&d->lock);
			continue;
		}

		/* wake when any busy queue moves on (one queue: its next value) */
		VkSemaphore sems[RUDA_MAX_QUEUES];
		uint64_t values[RUDA_MAX_QUEUES];
		uint32_t n = 0;
		VkResult r = VK_SUCCESS;
		for (uint32_t q = 0; q < d->nqueues; q++) {
			uint64_t v;
			if (queue_timeline(d, q, &v) && v < atomic_load(&d->queue_submitted[q])) {
				sems[n] = d->timelines[q];
				values[n++] = d->nqueues == 1 ? want : v + 1;
			}
		}
		VkSemaphoreWaitInfo wait = {
			.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
			.flags = n > 1 ? VK_SEMAPHORE_WAIT_ANY_BIT : 0,
			.semaphoreCount = n,
			.pSemaphores = sems,
			.pValues = values,
		};
		if (r == VK_SUCCESS && n)
			r = vkWaitSemaphores(d->vk, &wait, COMPLETION_POLL_NS);
		uint64_t value = done;
		if (r == VK_SUCCESS || r == VK_TIMEOUT)
			r = ruda__device_read_completed(d, &value) < 0 ? VK_ERROR_DEVICE_LOST
									: VK_SUCCESS;
		if (r != VK_SUCCESS && r != VK_TIMEOUT) {
			declare_lost(d, r, RUDA_ERROR_DEVICE_LOST);
			pthread_mutex_lock(&d->lock);
			/* nothing more will complete; wait to be stopped */
			while (!d->stop)
				pthread_cond_wait(&d->wake, &d->lock);
			break;
		}
		publish_completed(d, value);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/* On the loop: work in flight that has not advanced for longer than the
 * limit fails, whatever the driver's waits do (some never time out). */
static void on_watchdog(uv_timer_t *timer)
{
	struct ruda_device *d = timer->data;
	/* kept pages nobody took back go, so an idle daemon holds no more
	 * device memory than its buffers */
	ruda__memory_age(&d->allocator, uv_hrtime());
	uint64_t done = atomic_load(&d->completed), now = uv_now(timer->loop);
	if (done != d->watch_done || !d->inflight || atomic_load(&d->lost)) {
		d->watch_done = done;
		d->watch_since = now;
		return;
	}
	if (!d->submission_timeout_ns || (now - d->watch_since) * 1000000u <= d->submission_timeout_ns)
		return;
	/* the oldest submission in flight is the one that stopped: the queue
	 * runs them in order */
	d->timed_out_owner = d->inflight->owner;
	log_warn("device %u: session %llu's submission made no progress for %llu ms", d->index,
		 (unsigned long long)d->timed_out_owner,
		 (unsigned long long)(d->submission_timeout_ns / 1000000u));
	declare_lost(d, VK_ERROR_DEVICE_LOST, RUDA_ERROR_TIMEOUT);
	ruda__device_process_completions(d);
	if (d->on_progress)
		d->on_progress(d->progress_data);
}

static struct ruda_device *abandoned_list; /* reachable: not leaks at exit */

static void on_async(uv_async_t *async)
{
	struct ruda_device *d = async->data;
	ruda__device_process_completions(d);
	if (d->abandoned) {
		/* the work that would not end has ended after all */
		if (atomic_load(&d->completed) < d->submitted)
			return;
		for (struct ruda_device **l = &abandoned_list; *l; l = &(*l)->abandoned_next)
			if (*l == d) {
				*l = d->abandoned_next;
				break;
			}
		log_notice("device %u: the timed-out work of a replaced device has ended; "
			   "its memory is freed", d->index);
		ruda__device_destroy(d);
		return;
	}
	if (d->on_progress)
		d->on_progress(d->progress_data);
}

static uint64_t loop_now_ns(void)
{
	return uv_hrtime();
}

/* ---- timestamps --------------------------------------------------------- */

int32_t ruda__device_query_pair_get(struct ruda_device *d)
{
	if (!d->timestamps || !d->nfree_pairs)
		return -1;
	return (int32_t)d->free_pairs[--d->nfree_pairs];
}

void ruda__device_query_pair_put(struct ruda_device *d, int32_t pair)
{
	if (pair >= 0)
		d->free_pairs[d->nfree_pairs++] = (uint32_t)pair;
}

void ruda__device_query_pair_begin(struct ruda_device *d, VkCommandBuffer cmd, int32_t pair)
{
	if (pair < 0)
		return;
	vkCmdResetQueryPool(cmd, d->timestamps, 2 * (uint32_t)pair, 2);
	/* latched once all earlier commands on the queue are done (other
	 * sessions' submissions included), not when this one is first seen:
	 * the pair then holds this submission's time only */
	vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->timestamps,
			    2 * (uint32_t)pair);
}

void ruda__device_query_pair_end(struct ruda_device *d, VkCommandBuffer cmd, int32_t pair)
{
	if (pair >= 0)
		vkCmdWriteTimestamp(cmd, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, d->timestamps,
				    2 * (uint32_t)pair + 1);
}

uint64_t ruda__device_query_pair_ns(struct ruda_device *d, int32_t pair)
{
	uint64_t ticks[2];
	if (pair < 0 || vkGetQueryPoolResults(d->vk, d->timestamps, 2 * (uint32_t)pair, 2,
					      sizeof(ticks), ticks, sizeof(uint64_t),
					      VK_QUERY_RESULT_64_BIT) != VK_SUCCESS)
		return 0;
	uint64_t begin = ticks[0] & d->timestamp_mask, end = ticks[1] & d->timestamp_mask;
	return end >= begin ? (uint64_t)((double)(end - begin) * d->timestamp_period) : 0;
}

/* ---- submissions -------------------------------------------------------- */

static void submission_release_refs(struct ruda_submission *sub)
{
	for (size_t i = 0; i < sub->nrefs; i++)
		ruda_ref_put(sub->refs[i]);
	sub->nrefs = 0;
}

static void submission_run_waiters(struct ruda_submission *sub, int status)
{
	struct ruda_waiter *w = sub->waiters;
	sub->waiters = NULL;
	sub->waiters_tail = &sub->waiters;
	while (w) {
		struct ruda_waiter *next = w->next;
		w->gpu_ns = sub->gpu_ns;
		w->done(w, status);
		w = next;
	}
}

/* Back to the spare list, its command buffer ready to record again. */
static void submission_recycle(struct ruda_submission *sub)
{
	struct ruda_device *d = sub->device;
	vkResetCommandBuffer(sub->cmd, 0);
	ruda__device_query_pair_put(d, sub->query_pair);
	sub->query_pair = -1;
	sub->gpu_ns = 0;
	sub->value = 0;
	sub->commands = 0;
	sub->host_bytes = 0;
	sub->next = d->spare;
	d->spare = sub;
}

uint32_t ruda__device_next_queue(struct ruda_device *d)
{
	uint32_t q = d->next_queue % d->nqueues;
	d->next_queue = q + 1;
	return q;
}

struct ruda_submission *ruda__submission_begin(struct ruda_device *d)
{
	struct ruda_submission *sub = ruda__submission_begin_on(d, 0);
	if (sub)
		sub->after_all = d->nqueues > 1;
	return sub;
}

struct ruda_submission *ruda__submission_begin_on(struct ruda_device *d, uint32_t queue)
{
	struct ruda_submission *sub = d->spare;
	if (sub) {
		d->spare = sub->next;
	} else {
		sub = calloc(1, sizeof(*sub));
		if (!sub)
			return NULL;
		sub->device = d;
		VkCommandBufferAllocateInfo alloc = {
			.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
			.commandPool = d->command_pool,
			.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
			.commandBufferCount = 1,
		};
		if (vkAllocateCommandBuffers(d->vk, &alloc, &sub->cmd) != VK_SUCCESS) {
			free(sub);
			return NULL;
		}
	}
	sub->next = NULL;
	sub->queue = queue < d->nqueues ? queue : 0;
	sub->after_all = false;
	sub->wait_queue = 0;
	sub->wait_value = 0;
	sub->owner = 0;
	sub->waiters = NULL;
	sub->waiters_tail = &sub->waiters;
	VkCommandBufferBeginInfo begin = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	if (vkBeginCommandBuffer(sub->cmd, &begin) != VK_SUCCESS) {
		sub->next = d->spare;
		d->spare = sub;
		return NULL;
	}
	/* device time per submission, for accounting: timestamps where they
	 * are cheap (lavapipe's cost ~150 us a submission: there the time from
	 * submission to completion is counted instead) */
	sub->query_pair = d->account_with_timestamps ? ruda__device_query_pair_get(d) : -1;
	sub->gpu_ns = 0;
	ruda__device_query_pair_begin(d, sub->cmd, sub->query_pair);
	return sub;
}

int ruda__submission_hold(struct ruda_submission *sub, struct ruda_ref *ref)
{
	if (sub->nrefs == sub->refs_cap) {
		size_t cap = sub->refs_cap ? sub->refs_cap * 2 : 16;
		struct ruda_ref **refs = realloc(sub->refs, cap * sizeof(*refs));
		if (!refs)
			return -ENOMEM;
		sub->refs = refs;
		sub->refs_cap = cap;
	}
	sub->refs[sub->nrefs++] = ruda_ref_get(ref);
	return 0;
}

void ruda__submission_add_waiter(struct ruda_submission *sub, struct ruda_waiter *waiter)
{
	waiter->next = NULL;
	*sub->waiters_tail = waiter;
	sub->waiters_tail = &waiter->next;
}

void ruda__device_wait_value(struct ruda_device *d, uint64_t value, struct ruda_waiter *waiter)
{
	/* done already (its submission may have left the list, where the first
	 * one at or past `value` is later work) */
	if (value <= atomic_load(&d->completed)) {
		waiter->done(waiter, RUDA_OK);
		return;
	}
	for (struct ruda_submission *sub = d->inflight; sub; sub = sub->next)
		if (sub->value >= value) {
			ruda__submission_add_waiter(sub, waiter);
			return;
		}
	waiter->done(waiter, ruda__device_failure(d));
}

void ruda__submission_discard(struct ruda_submission *sub, int status)
{
	vkEndCommandBuffer(sub->cmd);
	submission_run_waiters(sub, status);
	submission_release_refs(sub);
	submission_recycle(sub);
}

int ruda__submission_submit(struct ruda_submission *sub)
{
	struct ruda_device *d = sub->device;
	if (atomic_load(&d->lost)) {
		ruda__submission_discard(sub, ruda__device_failure(d));
		return -EIO;
	}
	/* make every device write visible to the host (arena downloads) */
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_MEMORY_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_HOST_READ_BIT,
	};
	vkCmdPipelineBarrier(sub->cmd, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT,
			     VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &barrier, 0, NULL, 0, NULL);
	ruda__device_query_pair_end(d, sub->cmd, sub->query_pair);
	VkResult r = vkEndCommandBuffer(sub->cmd);
	uint64_t value = d->submitted + 1;
	uint32_t q = sub->queue;
	/* the queue idle: nothing in flight on it is below this value */
	uint64_t reached = atomic_load(&d->queue_done[q]);
	uint64_t last_on_q = atomic_load(&d->queue_submitted[q]);
	bool idle = reached >= last_on_q ||
		    (vkGetSemaphoreCounterValue(d->vk, d->timelines[q], &reached) == VK_SUCCESS &&
		     reached >= last_on_q);
	if (r == VK_SUCCESS) {
		/* rudad's own work outside streams: after every queue's */
		VkSemaphore waits[RUDA_MAX_QUEUES];
		uint64_t wait_values[RUDA_MAX_QUEUES];
		VkPipelineStageFlags stages[RUDA_MAX_QUEUES];
		uint32_t nwaits = 0;
		for (uint32_t i = 0; i < d->nqueues; i++) {
			uint64_t last = sub->after_all ? atomic_load(&d->queue_submitted[i])
				      : i == sub->wait_queue ? sub->wait_value : 0;
			if (i == q || !last)
				continue;
			waits[nwaits] = d->timelines[i];
			wait_values[nwaits] = last;
			stages[nwaits++] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
		}
		VkTimelineSemaphoreSubmitInfo timeline = {
			.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
			.waitSemaphoreValueCount = nwaits,
			.pWaitSemaphoreValues = wait_values,
			.signalSemaphoreValueCount = 1,
			.pSignalSemaphoreValues = &value,
		};
		VkSubmitInfo info = {
			.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
			.pNext = &timeline,
			.waitSemaphoreCount = nwaits,
			.pWaitSemaphores = waits,
			.pWaitDstStageMask = stages,
			.commandBufferCount = 1,
			.pCommandBuffers = &sub->cmd,
			.signalSemaphoreCount = 1,
			.pSignalSemaphores = &d->timelines[q],
		};
		r = vkQueueSubmit(d->queues[q], 1, &info, VK_NULL_HANDLE);
	}
	if (r != VK_SUCCESS) {
		log_error("device %u: vkQueueSubmit failed: %d", d->index, r);
		if (r == VK_ERROR_DEVICE_LOST) {
			atomic_store(&d->lost_status, RUDA_ERROR_DEVICE_LOST);
			atomic_store(&d->lost, (int)r);
		}
		submission_run_waiters(sub, r == VK_ERROR_DEVICE_LOST ? RUDA_ERROR_DEVICE_LOST
								   : RUDA_ERROR_INTERNAL);
		submission_release_refs(sub);
		submission_recycle(sub);
		return -EIO;
	}
	d->submitted = value;
	/* in this order: a reader that sees the new target sees these too */
	if (idle)
		atomic_store(&d->queue_floor[q], value - 1);
	atomic_store(&d->queue_submitted[q], value);
	sub->value = value;
	sub->submitted_ns = loop_now_ns();
	if (sub->host_bytes) {
		/* queued behind the copies before it, or starting now */
		uint64_t start = atomic_load(&d->transfers_until_ns);
		if (start < sub->submitted_ns)
			start = sub->submitted_ns;
		atomic_store(&d->transfers_until_ns, start + ruda_transfer_ns(sub->host_bytes));
	}
	if (d->inflight_tail)
		d->inflight_tail->next = sub;
	else
		d->inflight = sub;
	d->inflight_tail = sub;
	d->inflight_count++;

	pthread_mutex_lock(&d->lock);
	d->target = value;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	return 0;
}

int ruda__device_failure(struct ruda_device *d)
{
	return atomic_load(&d->lost) ? atomic_load(&d->lost_status) : RUDA_OK;
}

void ruda__device_inject_loss(struct ruda_device *d)
{
	if (atomic_load(&d->lost))
		return;
	log_warn("device %u: injecting a device loss (RUDA_TEST_FAULTS)", d->index);
	declare_lost(d, VK_ERROR_DEVICE_LOST, RUDA_ERROR_DEVICE_LOST);
	ruda__device_process_completions(d);
}

void ruda__device_process_completions(struct ruda_device *d)
{
	uint64_t done = atomic_load(&d->completed);
	int lost = atomic_load(&d->lost);
	int failure = lost ? atomic_load(&d->lost_status) : RUDA_OK;
	/* in value order, but a submission whose own queue has reached it is
	 * complete whatever the other queues still run */
	struct ruda_submission *prev = NULL, *sub = d->inflight;
	/* queues with work not done: later work of theirs is not done either */
	uint32_t waiting = 0, busy = 0;
	for (uint32_t q = 0; q < d->nqueues; q++)
		if (atomic_load(&d->queue_done[q]) < atomic_load(&d->queue_submitted[q]))
			busy |= 1u << q;
	while (sub) {
		bool ok = sub->value <= done ||
			  sub->value <= atomic_load(&d->queue_done[sub->queue]);
		if (!ok && !lost) {
			waiting |= 1u << sub->queue;
			if ((waiting & busy) == busy)
				break; /* one queue: the first not done ends the scan */
			prev = sub;
			sub = sub->next;
			continue;
		}
		struct ruda_submission *next = sub->next;
		if (prev)
			prev->next = next;
		else
			d->inflight = next;
		if (d->inflight_tail == sub)
			d->inflight_tail = prev;
		d->inflight_count--;
		if (ok && sub->query_pair >= 0)
			sub->gpu_ns = ruda__device_query_pair_ns(d, sub->query_pair);
		else if (ok) {
			/* busy from its submission (or the previous completion, if
			 * later: the queue runs one thing at a time) until now */
			uint64_t now = loop_now_ns();
			uint64_t start = sub->submitted_ns > d->last_completion_ns
						 ? sub->submitted_ns : d->last_completion_ns;
			sub->gpu_ns = now > start ? now - start : 0;
			d->last_completion_ns = now;
		}
		if (ok)
			d->busy_ns += sub->gpu_ns;
		/* after a timeout only the guilty session's work timed out; the
		 * others' is lost with the device that is replaced */
		int status = failure;
		if (failure == RUDA_ERROR_TIMEOUT && sub->owner != d->timed_out_owner)
			status = RUDA_ERROR_DEVICE_LOST;
		submission_run_waiters(sub, ok ? RUDA_OK : status);
		if (ok) {
			submission_release_refs(sub);
			submission_recycle(sub);
		} else {
			/* reported failed, but the device may still be running it
			 * (a timeout): what it uses stays alive until it ends */
			sub->next = d->zombies;
			d->zombies = sub;
		}
		sub = next;
	}
	/* failed submissions that have since ended after all */
	struct ruda_submission **link = &d->zombies;
	while (*link) {
		struct ruda_submission *zombie = *link;
		if (zombie->value > done &&
		    zombie->value > atomic_load(&d->queue_done[zombie->queue])) {
			link = &zombie->next;
			continue;
		}
		*link = zombie->next;
		submission_release_refs(zombie);
		submission_recycle(zombie);
	}
}

uint64_t ruda__device_running_ns(const struct ruda_device *d, uint64_t *owner)
{
	const struct ruda_submission *sub = d->inflight;
	if (owner)
		*owner = sub ? sub->owner : 0;
	if (!sub || atomic_load(&d->lost))
		return 0;
	/* the same start process_completions counts from on completion */
	uint64_t now = loop_now_ns();
	uint64_t start = sub->submitted_ns > d->last_completion_ns ? sub->submitted_ns
								      : d->last_completion_ns;
	return now > start ? now - start : 0;
}

uint64_t ruda__device_busy_ns(const struct ruda_device *d)
{
	return d->busy_ns + ruda__device_running_ns(d, NULL);
}

bool ruda__device_idle(struct ruda_device *d)
{
	uint64_t value = 0;
	if (ruda__device_read_completed(d, &value) < 0)
		return false;
	return value >= d->submitted;
}

void ruda__device_abandon(struct ruda_device *d)
{
	log_warn("device %u: its timed-out work still runs; the replaced device and the memory "
		 "that work uses are kept until it ends (or rudad stops)", d->index);
	d->abandoned = true;
	d->on_progress = NULL;
	uv_timer_stop(&d->watchdog);
	uv_unref((uv_handle_t *)&d->async);
	d->abandoned_next = abandoned_list;
	abandoned_list = d;
	/* the completion thread keeps waiting: its work ending wakes on_async */
}

unsigned ruda__device_abandoned_count(void)
{
	unsigned n = 0;
	for (struct ruda_device *d = abandoned_list; d; d = d->abandoned_next)
		n++;
	return n;
}

/* After the device is idle (or gone): free what failed submissions held. */
static void release_zombies(struct ruda_device *d)
{
	while (d->zombies) {
		struct ruda_submission *sub = d->zombies;
		d->zombies = sub->next;
		submission_release_refs(sub);
		free(sub->refs);
		free(sub); /* its command buffer goes with the pool */
	}
}

/* ---- device ------------------------------------------------------------- */

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
	vkGetPhysicalDeviceProperties(d->physical, &d->props);
	vkGetPhysicalDeviceMemoryProperties(d->physical, &d->memory);

	uint32_t nexts = 0;
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, NULL);
	VkExtensionProperties *exts = calloc(nexts ? nexts : 1, sizeof(*exts));
	if (!exts) {
		free(d);
		return -ENOMEM;
	}
	vkEnumerateDeviceExtensionProperties(d->physical, NULL, &nexts, exts);
	bool push_descriptor = has_extension(exts, nexts, VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME);
	bool host_import = has_extension(exts, nexts, VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME);
	/* optional: buffers exported as fds (get_resource) */
	bool memory_fd = has_extension(exts, nexts, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
	free(exts);
	if (vk->no_export) {
		memory_fd = false;
		d->export_off = "export_memory is off in rudad.conf";
	} else if (!memory_fd) {
		d->export_off = "the device has no VK_KHR_external_memory_fd";
	} else if (!opaque_fd_buffers(d->physical)) {
		memory_fd = false;
		d->export_off = "the device cannot export and import buffers as opaque fds";
	}
	/* without host import, transfers go through a bounce buffer in rudad
	 * (arena.c); RUDA_NO_HOST_IMPORT=1 forces that path, for its tests */
	const char *no_import = getenv("RUDA_NO_HOST_IMPORT");
	if (no_import && *no_import && strcmp(no_import, "0") != 0)
		host_import = false;
	if (!push_descriptor || d->props.apiVersion < VK_API_VERSION_1_2) {
		log_error("device %s: needs Vulkan 1.2 and VK_KHR_push_descriptor",
			  d->props.deviceName);
		free(d);
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
	d->import_alignment = host_import ? host_props.minImportedHostPointerAlignment : 0;

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
		free(d);
		return -ENOTSUP;
	}
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
	if (family < 0) {
		log_error("device %s: no compute queue", d->props.deviceName);
		free(d);
		return -ENOTSUP;
	}
	d->queue_family = (uint32_t)family;

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
			.robustBufferAccess = feats.features.robustBufferAccess,
			.shaderInt64 = sf->int64,
			.shaderFloat64 = sf->float64,
			.shaderInt16 = sf->int16,
		},
	};
	/* as many queues as the family has, up to RUDA_MAX_QUEUES or the
	 * configured number: streams are spread over them */
	d->nqueues = families[d->queue_family].queueCount;
	if (d->nqueues > RUDA_MAX_QUEUES)
		d->nqueues = RUDA_MAX_QUEUES;
	if (vk->max_queues && d->nqueues > vk->max_queues)
		d->nqueues = vk->max_queues;
	if (!d->nqueues)
		d->nqueues = 1;
	float priorities[RUDA_MAX_QUEUES];
	for (uint32_t i = 0; i < RUDA_MAX_QUEUES; i++)
		priorities[i] = 1.0f;
	VkDeviceQueueCreateInfo queue = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = d->queue_family,
		.queueCount = d->nqueues,
		.pQueuePriorities = priorities,
	};
	const char *enabled[3] = {VK_KHR_PUSH_DESCRIPTOR_EXTENSION_NAME};
	uint32_t nenabled = 1;
	if (host_import)
		enabled[nenabled++] = VK_EXT_EXTERNAL_MEMORY_HOST_EXTENSION_NAME;
	if (memory_fd)
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
		free(d);
		return -ENODEV;
	}
	for (uint32_t i = 0; i < d->nqueues; i++)
		vkGetDeviceQueue(d->vk, d->queue_family, i, &d->queues[i]);
	d->queue = d->queues[0];
	d->cmd_push_descriptor_set = (PFN_vkCmdPushDescriptorSetKHR)vkGetDeviceProcAddr(
		d->vk, "vkCmdPushDescriptorSetKHR");
	d->get_memory_host_pointer_properties = (PFN_vkGetMemoryHostPointerPropertiesEXT)
		vkGetDeviceProcAddr(d->vk, "vkGetMemoryHostPointerPropertiesEXT");
	if (memory_fd)
		d->get_memory_fd =
			(PFN_vkGetMemoryFdKHR)vkGetDeviceProcAddr(d->vk, "vkGetMemoryFdKHR");
	{
		VkPhysicalDeviceIDProperties id = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
		};
		VkPhysicalDeviceProperties2 id_query = {
			.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
			.pNext = &id,
		};
		vkGetPhysicalDeviceProperties2(d->physical, &id_query);
		memcpy(d->device_uuid, id.deviceUUID, VK_UUID_SIZE);
		memcpy(d->driver_uuid, id.driverUUID, VK_UUID_SIZE);
	}

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
	VkQueryPoolCreateInfo queries = {
		.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
		.queryType = VK_QUERY_TYPE_TIMESTAMP,
		.queryCount = 2 * QUERY_PAIRS,
	};
	if (vkCreateCommandPool(d->vk, &pool, NULL, &d->command_pool) != VK_SUCCESS ||
	    vkCreateSemaphore(d->vk, &sem, NULL, &d->timelines[0]) != VK_SUCCESS ||
	    vkCreatePipelineCache(d->vk, &cache, NULL, &d->pipeline_cache) != VK_SUCCESS) {
		log_error("device %s: cannot create queue objects", d->props.deviceName);
		goto fail;
	}
	d->timeline = d->timelines[0];
	for (uint32_t i = 1; i < d->nqueues; i++)
		if (vkCreateSemaphore(d->vk, &sem, NULL, &d->timelines[i]) != VK_SUCCESS) {
			log_error("device %s: cannot create queue objects", d->props.deviceName);
			goto fail;
		}
	uint32_t valid_bits = families[d->queue_family].timestampValidBits;
	if (valid_bits && d->props.limits.timestampPeriod > 0 &&
	    (d->free_pairs = malloc(QUERY_PAIRS * sizeof(uint32_t))) &&
	    vkCreateQueryPool(d->vk, &queries, NULL, &d->timestamps) == VK_SUCCESS) {
		d->timestamp_period = d->props.limits.timestampPeriod;
		d->account_with_timestamps = d->props.deviceType != VK_PHYSICAL_DEVICE_TYPE_CPU;
		d->timestamp_mask = valid_bits >= 64 ? UINT64_MAX : (1ull << valid_bits) - 1;
		for (uint32_t i = 0; i < QUERY_PAIRS; i++)
			d->free_pairs[d->nfree_pairs++] = QUERY_PAIRS - 1 - i;
	} else {
		d->timestamps = VK_NULL_HANDLE;
		log_warn("device %s: no timestamps; GPU time is not accounted",
			 d->props.deviceName);
	}

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
		goto fail;
	}
	vkGetBufferMemoryRequirements(d->vk, probe, &req);
	vkDestroyBuffer(d->vk, probe, NULL);
	if (ruda__memory_init(&d->allocator, d, &req) < 0) {
		log_error("device %s: no memory type for buffers", d->props.deviceName);
		goto fail;
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

	ruda__progress_init(&d->progress, d->nqueues);
	pthread_mutex_init(&d->lock, NULL);
	pthread_cond_init(&d->wake, NULL);
	const char *spin = getenv("RUDA_COMPLETION_SPIN_US");
	uint64_t spin_us = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? DEFAULT_CPU_SPIN_US
									       : DEFAULT_SPIN_US;
	d->spin_ns = 1000u * (spin ? strtoull(spin, NULL, 10) : spin_us);
	/* the thread touches the async handle only once work is submitted, so
	 * the handles can follow it (and need no undoing if it fails) */
	if (pthread_create(&d->thread, NULL, completion_main, d) != 0) {
		log_error("device %s: cannot start completion thread", d->props.deviceName);
		pthread_mutex_destroy(&d->lock);
		pthread_cond_destroy(&d->wake);
		ruda__progress_finish(&d->progress);
		ruda__memory_finish(&d->allocator);
		goto fail;
	}
	uv_async_init(loop, &d->async, on_async);
	d->async.data = d;
	uv_timer_init(loop, &d->watchdog);
	d->watchdog.data = d;
	/* progress is measured from now: a device re-created while the loop
	 * has run for longer than the limit must not time out its first work */
	d->watch_since = uv_now(loop);
	uv_timer_start(&d->watchdog, on_watchdog, WATCHDOG_PERIOD_MS, WATCHDOG_PERIOD_MS);
	uv_unref((uv_handle_t *)&d->watchdog);
	ruda__deferred_free_init(&d->frees, loop);
	*out = d;
	return 0;

fail:
	if (d->timestamps)
		vkDestroyQueryPool(d->vk, d->timestamps, NULL);
	free(d->free_pairs);
	if (d->pipeline_cache)
		vkDestroyPipelineCache(d->vk, d->pipeline_cache, NULL);
	for (uint32_t i = 0; i < RUDA_MAX_QUEUES; i++)
		if (d->timelines[i])
			vkDestroySemaphore(d->vk, d->timelines[i], NULL);
	if (d->command_pool)
		vkDestroyCommandPool(d->vk, d->command_pool, NULL);
	vkDestroyDevice(d->vk, NULL);
	free(d);
	return -ENODEV;
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

void ruda__device_destroy(struct ruda_device *d)
{
	if (!d)
		return;
	vkDeviceWaitIdle(d->vk);
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	pthread_join(d->thread, NULL);
	uint64_t value = 0;
	if (ruda__device_read_completed(d, &value) == 0 && value > atomic_load(&d->completed))
		atomic_store(&d->completed, value);
	ruda__device_process_completions(d);
	release_zombies(d);
	if (d->before_destroy)
		d->before_destroy(d);
	ruda__indirect_destroy(d, d->indirect);
	while (d->spare) {
		struct ruda_submission *sub = d->spare;
		d->spare = sub->next;
		free(sub->refs);
		free(sub);
	}
	ruda__memory_finish(&d->allocator);
	/* pages and arenas being freed in the thread pool go before the device */
	ruda__deferred_free_finish(&d->frees);
	vkDestroyPipelineCache(d->vk, d->pipeline_cache, NULL);
	for (uint32_t i = 0; i < d->nqueues; i++)
		vkDestroySemaphore(d->vk, d->timelines[i], NULL);
	vkDestroyCommandPool(d->vk, d->command_pool, NULL);
	if (d->timestamps)
		vkDestroyQueryPool(d->vk, d->timestamps, NULL);
	free(d->free_pairs);
	vkDestroyDevice(d->vk, NULL);
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	ruda__progress_finish(&d->progress);
	uv_timer_stop(&d->watchdog);
	/* both handles' memory is the device: freed once the last is closed */
	d->watchdog.data = d;
	uv_close((uv_handle_t *)&d->watchdog, close_async_after_watchdog);
}
