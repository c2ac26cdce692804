/*
 * A Vulkan device opened by rudad: its queue, command pool, timeline
 * semaphore and the completion thread that waits on it so the loop never
 * does. Submissions complete in order; their waiters run on the loop.
 */
#ifndef RUDA_DEVICE_H
#define RUDA_DEVICE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include <ruda/status.h>

#include "device/allocator.h"
#include "device/deferred_free.h"
#include "device/instance.h"
#include "common/priority.h"
#include "device/progress_page.h"
#include "common/ref.h"
#include "common/spirv.h"

struct ruda_device;
struct ruda_combine;
struct ruda_copy_kernel;
struct ruda_indirect;
struct ruda_lanes;

/* Queues of the compute family a device uses at most. */
#define RUDA_MAX_QUEUES 16u
/* In ruda_device.asleep_on: the completion thread sleeps on its queues. */
#define RUDA_COMPLETION_ASLEEP (1u << 31)

/* Something to do on the loop once a submission has completed. */
struct ruda_waiter {
	struct ruda_waiter *next;
	/* `status` is RUDA_OK or the device's failure; frees the waiter. */
	void (*done)(struct ruda_waiter *waiter, int status);
	uint64_t gpu_ns; /* set before done: device time of the submission */
	/* and when it began and ended on the device's clock, in ns (0: not
	 * measured; lanes count their queue's idle gaps from them) */
	uint64_t gpu_begin_ns, gpu_end_ns;
};

/* One vkQueueSubmit: a command buffer and everything it must keep alive. */
struct ruda_submission {
	struct ruda_submission *next;
	struct ruda_device *device; /* borrowed */
	uint32_t queue;  /* which of the device's queues runs it */
	bool after_all;  /* waits for all work submitted before it, every queue's */
	/* and/or for one other queue's work up to `wait_value` (0: none) */
	uint32_t wait_queue;
	uint64_t wait_value;
	VkCommandBuffer cmd;
	uint64_t value; /* timeline value signalled on completion; 0 while recording */
	uint32_t commands;
	uint64_t host_bytes; /* copied between host memory and the device */
	int32_t query_pair; /* timestamps around it, or -1 */
	uint64_t submitted_ns; /* uv_hrtime() at submission */
	uint64_t owner;        /* id of the session whose work it is; 0: none */
	uint64_t gpu_ns;    /* device time it took, once complete */
	uint64_t gpu_begin_ns, gpu_end_ns; /* on the device's clock, once complete (0: unknown) */
	struct ruda_ref **refs; /* owned references, dropped on completion */
	size_t nrefs, refs_cap;
	struct ruda_waiter *waiters, **waiters_tail;
};

/*
 * Something made on a device by a layer above it (host memory imported
 * into it, the clamp kernel of dynamic counts) that must go before the
 * device does: libwayland's destroy listener. The device calls `notify`
 * once, idle, before its VkDevice is destroyed; the listener is off the
 * list by then. Loop thread only.
 */
struct ruda_device_listener {
	struct ruda_device_listener *next, **link; /* link: NULL when not listening */
	void (*notify)(struct ruda_device_listener *listener, struct ruda_device *device);
};

struct ruda_device_stats {
	uint64_t bytes;   /* device memory held by buffers */
	uint64_t buffers;
	uint64_t pipelines;
	uint64_t kernels_compiled;
	uint64_t cache_file_bytes; /* pipeline cache file, at the last load or save */
	uint64_t zero_filled_bytes; /* new buffers' bytes zero-filled, since start */
	/* bytes it sent to another device, since start (to_client, all-reduce):
	 * by device copies through a shared window (another logical device of
	 * its physical device), and through host staging */
	uint64_t peer_bytes_out;
	uint64_t staged_bytes_out;
	/* vkQueueSubmit calls since start, and the host time spent inside
	 * them (uv_hrtime ns): what submitting costs the loop thread */
	uint64_t queue_submits;
	uint64_t submit_ns;
	/* queue lanes (exec/lane.c): submissions made, rounds recorded, and
	 * launches recorded in rounds; launches / rounds says how many
	 * streams' kernels ran side by side */
	uint64_t lane_submissions;
	uint64_t lane_rounds;
	uint64_t lane_launches;
	/* device time of lane submissions, and the time their queues sat idle
	 * before one submitted while its lane had another in flight, or had
	 * launches held back by its depth (the depth did not cover rudad's
	 * delay in seeing the earlier ones end; gaps under
	 * RUDA_LANE_GAP_MAX_NS), by the device's timestamps */
	uint64_t lane_gpu_ns;
	uint64_t lane_idle_ns;
	/* host time the loop spent recording lane rounds (the driver's
	 * vkCmd* calls and the references they take), uv_hrtime ns */
	uint64_t lane_record_ns;
	/* host time the loop spent on finished submissions (waiters
	 * answered, command buffers reset), less the submitting and
	 * recording that led to, uv_hrtime ns */
	uint64_t completion_ns;
};

struct ruda_device {
	uint32_t index;
	VkPhysicalDevice physical;
	VkDevice vk;
	VkQueue queue; /* queues[0] */
	uint32_t queue_family;
	/* Several queues of the compute family (issue 22): each stream keeps
	 * to one, so one stream's barriers order only its queue's work and
	 * other streams' kernels run beside it. Every submission signals the
	 * next global timeline value on its queue's own semaphore;
	 * `completed` is the highest value below which everything is done. */
	uint32_t nqueues;
	VkQueue queues[RUDA_MAX_QUEUES];
	VkSemaphore timelines[RUDA_MAX_QUEUES]; /* timelines[0] == timeline */
	_Atomic uint64_t queue_submitted[RUDA_MAX_QUEUES]; /* last value submitted on it */
	/* a value below every one in flight on it (set when it was idle) */
	_Atomic uint64_t queue_floor[RUDA_MAX_QUEUES];
	/* each queue's timeline as last published: a submission is complete
	 * once its queue's reaches its value (completion thread writes) */
	_Atomic uint64_t queue_done[RUDA_MAX_QUEUES];
	uint32_t next_queue; /* loop thread: where the search for the next stream's queue starts */
	/* the order queues are handed out in, ties apart: 0, 1, 2, ... or,
	 * with RUDA_QUEUE_STRIDE=s in rudad's environment (to measure whether
	 * neighbouring queues run side by side), 0, s, 2s, ..., 1, 1+s, ... */
	uint8_t queue_order[RUDA_MAX_QUEUES];
	uint32_t queue_streams[RUDA_MAX_QUEUES]; /* loop thread: live streams on each queue */
	/* streams that share a queue record in rounds (exec/lane.c, which
	 * makes and tears down `lanes`; the device only keeps the pointer) */
	bool lanes_on;
	struct ruda_lanes *lanes;
	VkPhysicalDeviceProperties props;
	VkPhysicalDeviceMemoryProperties memory;
	uint32_t max_push_descriptors;
	uint32_t subgroup_size;
	uint64_t max_allocation_size; /* maxMemoryAllocationSize */
	/* maxBufferSize (Vulkan 1.3's maintenance4), else max_allocation_size;
	 * buffer_limits.h says what a buffer may be */
	uint64_t max_buffer_size;
	uint64_t import_alignment; /* 0: no VK_EXT_external_memory_host */
	struct ruda_spirv_features spirv_features; /* what kernels may use */
	PFN_vkCmdPushDescriptorSetKHR cmd_push_descriptor_set;
	PFN_vkGetMemoryHostPointerPropertiesEXT get_memory_host_pointer_properties;
	/* exported buffers (get_resource): get_memory_fd is NULL where they
	 * cannot be, and export_off (static text) says why */
	PFN_vkGetMemoryFdKHR get_memory_fd;
	const char *export_off;
	uint8_t device_uuid[VK_UUID_SIZE];  /* importers must match both */
	uint8_t driver_uuid[VK_UUID_SIZE];
	/* shaderDenormPreserveFloat32: a kernel may keep f32 subnormals as
	 * the host does (exec/combine.c) */
	bool keeps_f32_subnormals;
	/* tests: the combine kernel flushes them, whatever the device does */
	bool test_flushes_f32_subnormals;

	VkCommandPool command_pool; /* loop thread only */
	VkPipelineCache pipeline_cache;
	VkSemaphore timeline;
	uint64_t submitted; /* last value handed to vkQueueSubmit */
	struct ruda_submission *inflight, *inflight_tail;
	size_t inflight_count;
	struct ruda_submission *spare; /* completed submissions, for reuse */
	struct ruda_submission *zombies; /* failed (lost, timed out) but maybe running */

	/* completion thread: waits for `target` and publishes `completed` */
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t wake;
	_Atomic uint64_t target; /* written under lock; read unlocked while spinning */
	bool stop;               /* guarded by lock */
	/* With several queues the thread sleeps in one vkWaitSemaphores on the
	 * queues busy when it went to sleep: a queue that gets work later is
	 * not among them, and its end would be seen only when one of theirs
	 * moves (a long kernel's end). The loop raises this host timeline when
	 * it submits to an idle queue, which is in every such wait. */
	VkSemaphore wake_timeline; /* VK_NULL_HANDLE with one queue */
	_Atomic uint64_t wake_value;
	/* RUDA_COMPLETION_ASLEEP while the thread is in (or about to enter)
	 * that wait, with bit q set for each queue q it waits on: the loop
	 * raises the timeline only then, for a queue not among them (each
	 * raise is a call into the driver's kernel side) */
	_Atomic uint32_t asleep_on;
	uint64_t spin_ns; /* how long the thread polls before it sleeps */
	/* uv_hrtime() by which the host-device copies submitted so far should
	 * have ended: the thread polls until then, so a big transfer's end is
	 * seen at once rather than after a wake-up (written on the loop) */
	_Atomic uint64_t transfers_until_ns;
	_Atomic uint64_t completed;
	/* uv_hrtime() when the thread last published progress: how long the
	 * loop took to hear of it (to_client's timing log) */
	_Atomic uint64_t completed_ns;
	/* how many times the thread has published progress: the loop compares
	 * it with completions_taken to know whether there is news */
	_Atomic uint64_t publications;
	struct ruda_progress progress; /* `completed` and failure, for clients */
	_Atomic int lost;        /* a VkResult once the device has failed */
	_Atomic int lost_status; /* what to report: DEVICE_LOST or TIMEOUT */
	uint64_t submission_timeout_ns; /* no progress for this long: failed */
	uint64_t timed_out_owner;       /* the session whose submission timed out */
	/* given up after a timeout: its work may never end, so nothing it
	 * may touch is freed; destroyed once the work has ended after all */
	bool abandoned;
	struct ruda_device *abandoned_next;
	uv_timer_t watchdog;            /* loop: looks for work that stopped */
	uint64_t watch_done, watch_since;
	/* publications as the loop last handled them (ruda__device_take_completions) */
	uint64_t completions_taken;
	uv_async_t async;

	/* timestamp queries, in pairs: one pair per submission in flight */
	VkQueryPool timestamps; /* VK_NULL_HANDLE: the queue has none */
	double timestamp_period; /* ns per tick */
	uint64_t timestamp_mask;
	bool account_with_timestamps; /* else submission-to-completion time */
	uint64_t last_completion_ns;
	uint32_t *free_pairs; /* stack of free pair indices */
	uint32_t nfree_pairs;

	/* several devices: where it comes from, what it can do, how busy it
	 * is (device_set.c, device_details.c) */
	uint32_t physical_index;
	uint32_t type_index; /* among the daemon's devices of its type */
	struct ruda_device_details *details; /* owned by device_details.c */
	uint64_t busy_ns;   /* device time of the submissions completed so far */
	uint64_t opened_ns; /* uv_hrtime() once opened */
	/* told by ruda__device_destroy once the device is idle, before its
	 * VkDevice goes, in the order they were added */
	struct ruda_device_listener *destroy_listeners;

	/* its physical device's heaps' budgets, VK_MAX_MEMORY_HEAPS of them,
	 * shared with the other logical devices on it (ruda_vulkan's); NULL:
	 * the allocator counts alone */
	struct ruda_heap_budget *heap_budgets;
	struct ruda_memory allocator; /* buffers' device memory, loop thread only */
	struct ruda_deferred_free frees; /* slow frees, run in the thread pool */
	/* dynamic counts: made on first use and torn down by exec/indirect.c
	 * (through a destroy listener); the device only keeps the pointer */
	struct ruda_indirect *indirect;
	/* all-reduce's combine kernel: likewise, by exec/combine.c */
	struct ruda_combine *combine;
	/* how device-local copies are recorded (RUDA_DEVICE_COPY) and the
	 * copy kernel: likewise, by exec/copy_kernel.c */
	struct ruda_copy_kernel *copy_kernel;
	struct ruda_device_stats stats;
	struct ruda_priority_state priority; /* scheduling (session.c, priority.c) */
	/* called on the loop after completions were processed */
	void (*on_progress)(void *data);
	void *progress_data;
};

/* Open physical device `physical_index` as logical device `index`. */
int ruda__device_create(struct ruda_vulkan *vk, uint32_t physical_index, uint32_t index,
			uv_loop_t *loop, struct ruda_device **out);
/* Waits for the device to go idle, completes everything, frees it. */
void ruda__device_destroy(struct ruda_device *device);
/* Tell `listener` when `device` is destroyed (after those added before). */
void ruda__device_listen_destroy(struct ruda_device *device,
				 struct ruda_device_listener *listener);
/* Stop listening (the object goes before its device); nothing if it is
 * not listening. */
void ruda__device_listener_remove(struct ruda_device_listener *listener);

/* A submission in the recording state (command buffer begun), on queue 0
 * and after all work submitted before it on every queue: what rudad's own
 * copies and fills outside a stream need. */
struct ruda_submission *ruda__submission_begin(struct ruda_device *device);
/* The same on `queue`, ordered only after that queue's work (a stream's). */
struct ruda_submission *ruda__submission_begin_on(struct ruda_device *device, uint32_t queue);
/* The queue for a new stream: one with the fewest streams, in turn among
 * equals; ruda__device_put_queue when the stream ends. */
uint32_t ruda__device_next_queue(struct ruda_device *device);
void ruda__device_put_queue(struct ruda_device *device, uint32_t queue);
/* Into *value, the highest timeline value below which every submission,
 * on every queue, has completed (what `completed` publishes). Returns 0;
 * -EIO when the driver cannot say (the device is lost), *value untouched.
 * Any thread. */
int ruda__device_read_completed(struct ruda_device *device, uint64_t *value);
/* Order the submission after `queue`'s work up to `value` as well as what
 * it waits for already (after all queues' work where the two differ). */
void ruda__submission_wait_for(struct ruda_submission *sub, uint32_t queue, uint64_t value);
/* Keep `ref` alive until the submission completes (takes a new reference). */
int ruda__submission_hold(struct ruda_submission *sub, struct ruda_ref *ref);
void ruda__submission_add_waiter(struct ruda_submission *sub, struct ruda_waiter *waiter);
/* Run `waiter` once the submission of timeline value `value` has completed
 * (submissions complete in order on the one queue): at once with RUDA_OK
 * when it has, or with the device's failure when it is in flight no more
 * and never completed. */
void ruda__device_wait_value(struct ruda_device *device, uint64_t value,
			     struct ruda_waiter *waiter);
/* Run `waiter` once the submissions of all `n` values have completed (on
 * several queues, the newest of them completing says nothing of the
 * others): with the first failure seen, or RUDA_ERROR_OUT_OF_MEMORY. */
void ruda__device_wait_values(struct ruda_device *device, const uint64_t *values, size_t n,
			      struct ruda_waiter *waiter);
/* End, submit and hand to the completion thread. On failure the
 * submission's waiters see the error and the device counts as lost. */
int ruda__submission_submit(struct ruda_submission *sub);
/* Throw away a recording that will never be submitted; waiters see
 * `status`. */
void ruda__submission_discard(struct ruda_submission *sub, int status);

/* Replace a device whose work may never end (a timeout): it is taken off
 * the loop's books (no watchdog, no progress callback, the loop may exit
 * without it) and kept with everything its submissions hold; once its work
 * ends it is destroyed. Loop thread. */
void ruda__device_abandon(struct ruda_device *device);
/* Devices abandoned whose work still runs. */
unsigned ruda__device_abandoned_count(void);
/* Whether everything submitted has completed (asks the driver). */
bool ruda__device_idle(struct ruda_device *device);
/* On the loop, between clients' turns: completions the completion thread
 * has published since the loop last handled them are handled now (their
 * waiters answered), not when the async's turn comes after every other
 * client's frames. Whether there were any. */
bool ruda__device_take_completions(struct ruda_device *device);
/* Whether submission `value`, of queue `queue`, is complete as the
 * completion thread last published: its own queue reached it, or all work
 * up to it did. Queues complete in no order between them, so `completed`
 * alone would hold one queue's work back behind another's. */
static inline bool ruda__device_done(struct ruda_device *d, uint32_t queue, uint64_t value)
{
	return value <= atomic_load(&d->completed) ||
	       (queue < RUDA_MAX_QUEUES && value <= atomic_load(&d->queue_done[queue]));
}

/* Whether queue `queue` has work whose end the completion thread has not
 * published yet. Any thread. */
static inline bool ruda__device_queue_busy(struct ruda_device *d, uint32_t queue)
{
	return atomic_load(&d->queue_done[queue]) < atomic_load(&d->queue_submitted[queue]);
}

/* Device time of the submission running now, counted from its start (or
 * the previous completion) so far; 0 when none runs. *owner (optional):
 * its session's id. How busy a device is shows while a launch runs. */
uint64_t ruda__device_running_ns(const struct ruda_device *device, uint64_t *owner);
/* busy_ns with the running submission's time so far. */
uint64_t ruda__device_busy_ns(const struct ruda_device *device);

/* Why the device fails work: RUDA_ERROR_TIMEOUT or RUDA_ERROR_DEVICE_LOST
 * once it has failed, else RUDA_OK. */
ruda_status ruda__device_failure(struct ruda_device *device);

/* Test-only: fail the device as a VK_ERROR_DEVICE_LOST from the driver
 * would (its work fails with RUDA_ERROR_DEVICE_LOST). Loop thread. */
void ruda__device_inject_loss(struct ruda_device *device);

/* Run completions the completion thread has published (loop thread). */
void ruda__device_process_completions(struct ruda_device *device);
/* The loop's host time counted in the device's stats so far (submit_ns,
 * lane_record_ns, completion_ns): what to take out of a span of the loop's
 * time that contains some of them. */
uint64_t ruda__device_counted_ns(const struct ruda_device *device);

/* A free pair of timestamp queries (reset and ready), or -1. */
int32_t ruda__device_query_pair_get(struct ruda_device *device);
void ruda__device_query_pair_put(struct ruda_device *device, int32_t pair);
/* Record a reset of `pair` and a timestamp into its first query. */
void ruda__device_query_pair_begin(struct ruda_device *device, VkCommandBuffer cmd, int32_t pair);
/* Record a timestamp into its second query. */
void ruda__device_query_pair_end(struct ruda_device *device, VkCommandBuffer cmd, int32_t pair);
/* The pair's timestamps (both written and complete) in ns of the device's
 * clock: 0, or -1 when unavailable. */
int ruda__device_query_pair_times(struct ruda_device *device, int32_t pair, uint64_t *begin_ns,
				  uint64_t *end_ns);

#endif
