/* The completion thread, which waits on the device's timelines so the loop
 * never does and publishes how far they have come; the loop's side of it
 * (the async it wakes, the watchdog for work that stopped), and failure:
 * a lost device, a timeout, a device abandoned with its work running. */
#include "device/device.h"
#include "device/device_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

#include <ruda/status.h>

#include "common/log.h"

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
	if (!ruda__device_queue_busy(d, q))
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
	if (moved) {
		atomic_store(&d->completed_ns, uv_hrtime());
		atomic_fetch_add(&d->publications, 1);
		uv_async_send(&d->async);
	}
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

		/* wake when any busy queue moves on (one queue: its next value),
		 * or when the loop submits to a queue idle now (read first: a
		 * submission after it raises the wake timeline past it) */
		VkSemaphore sems[RUDA_MAX_QUEUES + 1];
		uint64_t values[RUDA_MAX_QUEUES + 1];
		uint32_t n = 0, on = 0;
		VkResult r = VK_SUCCESS;
		uint64_t wake = atomic_load(&d->wake_value);
		/* said before the queues are read: a submission the reads miss
		 * sees it, and wakes the wait */
		atomic_store(&d->asleep_on, RUDA_COMPLETION_ASLEEP);
		for (uint32_t q = 0; q < d->nqueues; q++) {
			uint64_t v;
			if (queue_timeline(d, q, &v) && v < atomic_load(&d->queue_submitted[q])) {
				sems[n] = d->timelines[q];
				values[n++] = d->nqueues == 1 ? want : v + 1;
				on |= 1u << q;
			}
		}
		atomic_store(&d->asleep_on, n ? RUDA_COMPLETION_ASLEEP | on : 0);
		if (n && d->wake_timeline) {
			sems[n] = d->wake_timeline;
			values[n++] = wake + 1;
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
		atomic_store(&d->asleep_on, 0);
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

int ruda__device_completion_start(struct ruda_device *d)
{
	ruda__progress_init(&d->progress, d->nqueues);
	const char *spin = getenv("RUDA_COMPLETION_SPIN_US");
	uint64_t spin_us = d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU ? DEFAULT_CPU_SPIN_US
									       : DEFAULT_SPIN_US;
	d->spin_ns = 1000u * (spin ? strtoull(spin, NULL, 10) : spin_us);
	if (pthread_mutex_init(&d->lock, NULL) != 0)
		goto no_lock;
	if (pthread_cond_init(&d->wake, NULL) != 0)
		goto no_cond;
	/* the thread touches the async handle only once work is submitted, so
	 * the loop's handles can follow it */
	if (pthread_create(&d->thread, NULL, completion_main, d) != 0)
		goto no_thread;
	return 0;

no_thread:
	pthread_cond_destroy(&d->wake);
no_cond:
	pthread_mutex_destroy(&d->lock);
no_lock:
	ruda__progress_finish(&d->progress);
	log_error("device %s: cannot start completion thread", d->props.deviceName);
	return -ENODEV;
}

void ruda__device_completion_wake(struct ruda_device *d)
{
	if (!d->wake_timeline)
		return;
	VkSemaphoreSignalInfo signal = {
		.sType = VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO,
		.semaphore = d->wake_timeline,
		.value = atomic_fetch_add(&d->wake_value, 1) + 1,
	};
	if (vkSignalSemaphore(d->vk, &signal) != VK_SUCCESS)
		log_warn("device %u: cannot wake the completion thread", d->index);
}

void ruda__device_completion_stop(struct ruda_device *d)
{
	if (d->stop) /* only the loop writes it */
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_cond_signal(&d->wake);
	pthread_mutex_unlock(&d->lock);
	ruda__device_completion_wake(d); /* not a wait's whole poll period later */
	pthread_join(d->thread, NULL);
	uint64_t value = 0;
	if (ruda__device_read_completed(d, &value) == 0 && value > atomic_load(&d->completed))
		atomic_store(&d->completed, value);
}

void ruda__device_completion_finish(struct ruda_device *d)
{
	pthread_mutex_destroy(&d->lock);
	pthread_cond_destroy(&d->wake);
	ruda__progress_finish(&d->progress);
}

/* On the loop: work in flight that has not advanced for longer than the
 * limit fails, whatever the driver's waits do (some never time out). */
void ruda__device_on_watchdog(uv_timer_t *timer)
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

bool ruda__device_take_completions(struct ruda_device *d)
{
	if (atomic_load(&d->publications) == d->completions_taken || d->abandoned)
		return false;
	ruda__device_process_completions(d);
	if (d->on_progress)
		d->on_progress(d->progress_data);
	return true;
}

void ruda__device_on_async(uv_async_t *async)
{
	struct ruda_device *d = async->data;
	/* what it announces may have been handled already, between clients'
	 * turns: then nothing is left to do */
	if (!d->abandoned && !atomic_load(&d->lost)) {
		ruda__device_take_completions(d);
		return;
	}
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

ruda_status ruda__device_failure(struct ruda_device *d)
{
	return atomic_load(&d->lost) ? (ruda_status)atomic_load(&d->lost_status) : RUDA_OK;
}

void ruda__device_inject_loss(struct ruda_device *d)
{
	if (atomic_load(&d->lost))
		return;
	log_warn("device %u: injecting a device loss (RUDA_TEST_FAULTS)", d->index);
	declare_lost(d, VK_ERROR_DEVICE_LOST, RUDA_ERROR_DEVICE_LOST);
	ruda__device_process_completions(d);
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
