/* Submissions: a command buffer recorded, submitted on one of the
 * device's queues with the next timeline value, and completed in order on
 * the loop (its waiters run, its references drop). */
#include "device/device.h"
#include "device/device_internal.h"

#include <errno.h>
#include <stdlib.h>

#include <ruda/status.h>

#include "common/log.h"

static uint64_t loop_now_ns(void)
{
	return uv_hrtime();
}

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
		w->gpu_begin_ns = sub->gpu_begin_ns;
		w->gpu_end_ns = sub->gpu_end_ns;
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
	sub->gpu_begin_ns = sub->gpu_end_ns = 0;
	sub->value = 0;
	sub->commands = 0;
	sub->host_bytes = 0;
	sub->next = d->spare;
	d->spare = sub;
}

uint32_t ruda__device_next_queue(struct ruda_device *d)
{
	/* the queue with the fewest streams, ties in turn (queue_order):
	 * clients come and go, and a new one should not share a busy queue
	 * while another is idle */
	const uint8_t *order = d->queue_order;
	uint32_t best = d->next_queue % d->nqueues;
	for (uint32_t i = 1; i < d->nqueues; i++) {
		uint32_t at = (d->next_queue + i) % d->nqueues;
		if (d->queue_streams[order[at]] < d->queue_streams[order[best]])
			best = at;
	}
	d->next_queue = best + 1;
	d->queue_streams[order[best]]++;
	return order[best];
}

void ruda__device_put_queue(struct ruda_device *d, uint32_t queue)
{
	if (queue < d->nqueues && d->queue_streams[queue])
		d->queue_streams[queue]--;
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
	sub->gpu_begin_ns = sub->gpu_end_ns = 0;
	ruda__device_query_pair_begin(d, sub->cmd, sub->query_pair);
	return sub;
}

void ruda__submission_wait_for(struct ruda_submission *sub, uint32_t queue, uint64_t value)
{
	if (!value)
		return;
	if (sub->wait_value && sub->wait_queue != queue) {
		sub->after_all = true; /* one wait slot: all queues' work covers both */
		return;
	}
	sub->wait_queue = queue;
	if (value > sub->wait_value)
		sub->wait_value = value;
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

/* One waiter for several values: each part counts down. */
struct wait_all {
	struct ruda_waiter *then;
	size_t pending;
	int status;
	struct wait_part {
		struct ruda_waiter base;
		struct wait_all *all;
	} parts[];
};

static void wait_all_count_down(struct wait_all *all, int status)
{
	if (status != RUDA_OK && all->status == RUDA_OK)
		all->status = status;
	if (--all->pending)
		return;
	struct ruda_waiter *then = all->then;
	status = all->status;
	free(all);
	then->done(then, status);
}

static void wait_part_done(struct ruda_waiter *base, int status)
{
	wait_all_count_down(((struct wait_part *)base)->all, status);
}

void ruda__device_wait_values(struct ruda_device *d, const uint64_t *values, size_t n,
			      struct ruda_waiter *waiter)
{
	if (n <= 1) {
		ruda__device_wait_value(d, n ? values[0] : 0, waiter);
		return;
	}
	struct wait_all *all = malloc(sizeof(*all) + n * sizeof(all->parts[0]));
	if (!all) {
		waiter->done(waiter, RUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	all->then = waiter;
	all->pending = n + 1; /* parts may be done at once: this call's share last */
	all->status = RUDA_OK;
	for (size_t i = 0; i < n; i++) {
		all->parts[i].all = all;
		all->parts[i].base.done = wait_part_done;
		ruda__device_wait_value(d, values[i], &all->parts[i].base);
	}
	wait_all_count_down(all, RUDA_OK);
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
		uint64_t t0 = uv_hrtime();
		r = vkQueueSubmit(d->queues[q], 1, &info, VK_NULL_HANDLE);
		d->stats.submit_ns += uv_hrtime() - t0;
		d->stats.queue_submits++;
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
	/* the thread may be asleep on the queues busy before, not this one
	 * (queue_submitted[q] was stored before this read: a thread that read
	 * it too early says so here) */
	uint32_t asleep_on = atomic_load(&d->asleep_on);
	if (idle && (asleep_on & RUDA_COMPLETION_ASLEEP) && !(asleep_on & (1u << q)))
		ruda__device_completion_wake(d);
	return 0;
}

uint64_t ruda__device_counted_ns(const struct ruda_device *d)
{
	return d->stats.submit_ns + d->stats.lane_record_ns + d->stats.completion_ns;
}

static void process_completions(struct ruda_device *d);

void ruda__device_process_completions(struct ruda_device *d)
{
	uint64_t t0 = uv_hrtime(), counted = ruda__device_counted_ns(d);
	process_completions(d);
	uint64_t inside = ruda__device_counted_ns(d) - counted;
	d->stats.completion_ns += uv_hrtime() - t0 - inside;
}

static void process_completions(struct ruda_device *d)
{
	/* read before what it says: a later publication is seen again */
	d->completions_taken = atomic_load(&d->publications);
	uint64_t done = atomic_load(&d->completed);
	int lost = atomic_load(&d->lost);
	int failure = lost ? atomic_load(&d->lost_status) : RUDA_OK;
	/* in value order, but a submission whose own queue has reached it is
	 * complete whatever the other queues still run */
	struct ruda_submission *prev = NULL, *sub = d->inflight;
	/* queues with work not done: later work of theirs is not done either */
	uint32_t waiting = 0, busy = 0;
	for (uint32_t q = 0; q < d->nqueues; q++)
		if (ruda__device_queue_busy(d, q))
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
		if (ok && sub->query_pair >= 0) {
			if (ruda__device_query_pair_times(d, sub->query_pair, &sub->gpu_begin_ns,
							  &sub->gpu_end_ns) == 0)
				sub->gpu_ns = sub->gpu_end_ns - sub->gpu_begin_ns;
		} else if (ok) {
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

void ruda__device_free_submissions(struct ruda_device *d)
{
	while (d->zombies) {
		struct ruda_submission *sub = d->zombies;
		d->zombies = sub->next;
		submission_release_refs(sub);
		free(sub->refs);
		free(sub); /* its command buffer goes with the pool */
	}
	while (d->spare) {
		struct ruda_submission *sub = d->spare;
		d->spare = sub->next;
		free(sub->refs);
		free(sub);
	}
}
