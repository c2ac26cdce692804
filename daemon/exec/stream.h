/*
 * A session's stream: work recorded in order into one command buffer and
 * submitted on flush, on a full batch, when a reply needs it, or at the end
 * of the loop iteration. Holds the first asynchronous error since the last
 * sync.
 */
#ifndef RUDA_STREAM_H
#define RUDA_STREAM_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include <ruda/status.h>

struct ruda_arena;
struct ruda_buffer;
struct ruda_device;
struct ruda_graph;
struct ruda_pipeline;
struct ruda_ref;
struct ruda_submission;
struct ruda_waiter;

/* Commands per command buffer before it is submitted anyway. */
#define RUDA_STREAM_BATCH 1024u
/* Submissions of one stream in flight before its client is made to wait:
 * bounds the GPU work (and memory) one client can queue. With 2, a stream
 * of tiny launches left the H200 idle between batches (0.69x in-process
 * launches/s); 4 keeps it fed (0.99x; docs/performance.md). */
#define RUDA_STREAM_MAX_INFLIGHT 4u

/* What the last launch left bound in a command buffer: a launch with the
 * same kernel and bindings records neither again. */
#define RUDA_BIND_CACHE_BINDINGS 8u
struct ruda_bind_cache {
	struct ruda_pipeline *pipeline; /* NULL: nothing known */
	uint32_t nbindings;
	struct {
		VkBuffer buffer;
		uint64_t offset, size;
	} bindings[RUDA_BIND_CACHE_BINDINGS];
};

struct ruda_lane;
struct ruda_deferred_launch;

struct ruda_stream {
	struct ruda_device *device; /* borrowed */
	/* the lane of its queue when streams share queues (see struct
	 * ruda_lane below); NULL: it records alone */
	struct ruda_lane *lane;
	struct ruda_stream *joined_next;  /* in lane->joined while `recording` is the lane's */
	struct ruda_stream *waiting_next; /* in lane->waiting while launches wait */
	bool waiting;
	uint32_t lane_commands; /* its commands in the lane's recording */
	/* launches waiting for a round, oldest first (a ring; owned) */
	struct ruda_deferred_launch **deferred;
	uint32_t ndeferred, deferred_head, deferred_cap;
	/* waiters for the submission that takes its last waiting launch, and
	 * the sync (request id, 0: none) to publish then (requests/sync.c) */
	struct ruda_waiter *caught_up_waiters, **caught_up_tail;
	uint64_t publish_request;
	bool publish_ok;
	uint32_t queue;             /* the device queue all its work goes to */
	/* its next submission waits for queue `wait_queue` to reach
	 * `wait_value` (0: nothing to wait for): see ruda__stream_after */
	uint32_t wait_queue;
	uint64_t wait_value;
	struct ruda_arena *arena;   /* borrowed from the session */
	struct ruda_submission *recording;
	uint32_t id;
	uint64_t last_value;    /* timeline value of the last submission */
	uint64_t recent[RUDA_STREAM_MAX_INFLIGHT]; /* values of the last submissions */
	unsigned recent_next;
	uint64_t rec_first_write; /* first arena upload recorded since the last submit */
	/* streams with a recording, submitted at the end of the loop iteration */
	struct ruda_stream *dirty_next;
	struct ruda_stream **dirty_list; /* borrowed list head */
	int dirty;
	/* commands per submission; 0: RUDA_STREAM_BATCH (the session lowers
	 * it while the stream's client is held back for a higher priority) */
	uint32_t batch;

	/* told of each submission once it is on the queue; `first_write` is
	 * its first arena upload, 0 if none (the owner tracks arena progress
	 * and device time with it); `lane_commands` is the stream's share of
	 * the submission's commands, which other streams may share */
	void (*submitted)(void *data, struct ruda_stream *stream, struct ruda_submission *sub,
			  uint64_t first_write);
	void *submitted_data;

	/* the graph its launches go to, if capturing: owned by whoever set it
	 * (requests/graphs.c), who releases it before ruda__stream_finish; the
	 * stream only carries it (graphs record into streams, not the reverse) */
	struct ruda_graph *capture;
	struct ruda_bind_cache bound; /* in `recording` */

	/* New buffers whose zero fill is recorded before the stream's next
	 * command (owned references, linked through zero_next); writes from a
	 * buffer's start in order replace its fill where they reach. `records_fills`: `recording` holds fills or such writes, so it
	 * goes to the queue before another stream's work may use those
	 * buffers (docs/memory.md, "Isolation between clients"). */
	struct ruda_buffer *zero_pending;
	int records_fills;

	ruda_status error; /* first failure since the last sync */
	char error_message[256];
};

struct ruda_binding {
	struct ruda_buffer *buffer;
	uint64_t offset, size;
};

/* Where a launch's counts come from: `count` words, or (dynamic counts)
 * three words at byte `offset` of `buffer` when it is set. */
struct ruda_launch_count {
	uint32_t count[3];
	struct ruda_buffer *buffer;
	uint64_t offset;
};

void ruda__stream_init(struct ruda_stream *s, struct ruda_device *device,
		       struct ruda_arena *arena, struct ruda_stream **dirty_list);
/* Throws away unsubmitted work; submitted work completes on its own. */
void ruda__stream_finish(struct ruda_stream *s);

/* Record the first asynchronous error. */
void ruda__stream_fail(struct ruda_stream *s, ruda_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Note that request `id` recorded an upload from the arena. */
void ruda__stream_note_write(struct ruda_stream *s, uint64_t id);

ruda_status ruda__stream_write(struct ruda_stream *s, struct ruda_buffer *dst, uint64_t offset,
			       uint64_t arena_offset, uint64_t size);
/* Fill all of `buffer` (new) with zeros before anything later on the
 * stream uses it: its memory may last have held another client's bytes.
 * Recorded with the stream's next command (after any writes from the
 * buffer's start in order, which it then leaves alone), at a switch to
 * another stream, or before a use outside the stream. */
void ruda__stream_zero(struct ruda_stream *s, struct ruda_buffer *buffer);
/* `buffer` is released: a fill not recorded yet is not needed. */
void ruda__stream_forget_zero(struct ruda_buffer *buffer);
/* Record the fills waiting, then submit (a switch to another stream). */
ruda_status ruda__stream_submit_fills(struct ruda_stream *s);
/* Order `s`'s next work after everything `before` has submitted, where
 * they are on different queues (a session moving from stream to stream:
 * the zero fills `before` just submitted must land first). */
void ruda__stream_after(struct ruda_stream *s, const struct ruda_stream *before);

/* `buffer` is about to be used outside its stream (a submission of its
 * own, an export): its fill, if still waiting, is recorded and submitted
 * now, ahead of that use on the queue. */
void ruda__stream_fill_now(struct ruda_buffer *buffer);
/* Whether the stream has fills (or writes that stand for them) not yet
 * submitted: submit it before another stream of the session records. */
static inline int ruda__stream_holds_fills(const struct ruda_stream *s)
{
	return s->zero_pending || s->records_fills;
}
ruda_status ruda__stream_read(struct ruda_stream *s, struct ruda_buffer *src, uint64_t offset,
			      uint64_t arena_offset, uint64_t size);
/* Copy between a buffer and a staging region (held until the copy is done):
 * into the buffer when `to_buffer`, else out of it. */
ruda_status ruda__stream_copy_region(struct ruda_stream *s, struct ruda_arena *region,
				     uint64_t region_offset, struct ruda_buffer *buffer,
				     uint64_t offset, uint64_t size, int to_buffer);
ruda_status ruda__stream_launch(struct ruda_stream *s, struct ruda_pipeline *pipeline,
				const struct ruda_launch_count *count,
				const struct ruda_binding *bindings,
				uint32_t nbindings, const void *push, uint32_t push_size);

/* Copy `n` regions from `src` to `dst` (daemon-owned buffers, e.g. host
 * staging imported into this device) after everything recorded before
 * it; `hold` and `hold2` (either may be NULL) stay alive until the copy is
 * done. `device_local`: both are device memory (buffers, shared windows),
 * so the copy may go by kernel (exec/copy_kernel.h); host memory never. */
ruda_status ruda__stream_copy_regions(struct ruda_stream *s, VkBuffer src, VkBuffer dst,
				      const VkBufferCopy *regions, uint32_t n,
				      bool device_local, struct ruda_ref *hold,
				      struct ruda_ref *hold2);

/* Record an inline-executed secondary command buffer of `commands` commands
 * (a graph's replay), keeping `hold` alive until it has run. */
ruda_status ruda__stream_execute(struct ruda_stream *s, VkCommandBuffer secondary,
				 uint32_t commands, struct ruda_ref *hold);

/* Record into `cmd` the barrier that orders each command of a stream after
 * the ones before it. */
void ruda__record_barrier(VkCommandBuffer cmd);
/* The narrower one before a copy that reads what an earlier copy on the
 * same queue wrote (exec/copy.c): either may be a vkCmdCopyBuffer or the
 * copy kernel (exec/copy_kernel.h), so it covers transfers and compute
 * shaders both ways. */
void ruda__record_copy_barrier(VkCommandBuffer cmd);
/* Record one dispatch of `p` into `cmd` (pipeline bound and bindings pushed
 * unless `cache` says they are already, push constants set; dynamic counts
 * clamped first, see indirect.h); the caller keeps what it uses alive. */
void ruda__record_dispatch(struct ruda_device *d, VkCommandBuffer cmd, uint32_t queue,
			   struct ruda_bind_cache *cache, struct ruda_pipeline *p,
			   const struct ruda_launch_count *count,
			   const struct ruda_binding *bindings, uint32_t nbindings,
			   const void *push, uint32_t push_size);

/* Note that `buffer` is used by the command being recorded on `s` (see
 * struct ruda_buffer's use_* fields). */
void ruda__stream_note_use(struct ruda_stream *s, struct ruda_buffer *buffer);
/* The timeline values that end the work recorded that uses `buffer`: the
 * last use's submission (submitting its stream first when that work is
 * still being recorded there), and the last earlier use on each other
 * queue; each ends its queue's work up to it, so waiting for all of them
 * (ruda__device_wait_values) waits for every use; `values` holds
 * RUDA_MAX_QUEUES + 1. How many were written
 * (0: nothing is left to wait for), or -1 (and nothing submitted) when
 * only the whole session's work bounds it (use_elsewhere): the caller
 * submits and waits for all of it. */
int ruda__stream_buffer_done_values(struct ruda_buffer *buffer,
				    uint64_t *values);

/* Submit what is recorded. */
ruda_status ruda__stream_submit(struct ruda_stream *s);
/* Submit, then run `waiter` once everything submitted so far is done (at
 * once when nothing is in flight). */
void ruda__stream_wait(struct ruda_stream *s, struct ruda_waiter *waiter);

/* Whether the stream has RUDA_STREAM_MAX_INFLIGHT submissions in flight. */
int ruda__stream_saturated(const struct ruda_stream *s);

/* Submit every stream on `list` (end of a loop iteration). */
void ruda__stream_submit_dirty(struct ruda_stream **list);

/* Whether the stream has work recorded or waiting that is not submitted. */
static inline bool ruda__stream_unsubmitted(const struct ruda_stream *s)
{
	return s->recording || s->ndeferred;
}
/* Run `waiter` once everything the stream has so far is complete, without
 * hurrying it: in a lane, once the submission that takes its last waiting
 * launch completes (a sync, which need not cut other streams' rounds
 * short); else as ruda__stream_wait. */
void ruda__stream_wait_caught_up(struct ruda_stream *s, struct ruda_waiter *waiter);

/*
 * A queue lane (exec/lane.c): the streams on one queue of a device where
 * streams share queues (`lanes` in rudad.conf). They record into one
 * command buffer, their launches in rounds: one waiting launch of each
 * stream, then a barrier. A barrier orders everything before it on the
 * queue, so this is what lets different streams' kernels run side by side
 * on one queue while each stream's stay in order. Other commands (copies,
 * fills, graphs, dynamic counts) are recorded at once, after the stream's
 * waiting launches, and end the round. The lane keeps about
 * RUDA_LANE_INFLIGHT_NS of device time in flight, so a newcomer's launch
 * joins a round soon rather than queueing behind another client's backlog
 * (RUDA_LANE_INFLIGHT_US in rudad's environment changes it, to measure),
 * in at most RUDA_LANE_MAX_INFLIGHT submissions (RUDA_LANE_MAX_INFLIGHT in
 * the environment, 1-16, to measure).
 */
#define RUDA_LANE_INFLIGHT_NS 150000u
#define RUDA_LANE_MAX_INFLIGHT 2u

struct ruda_lane {
	struct ruda_device *device; /* borrowed */
	uint32_t queue;
	struct ruda_submission *recording; /* shared by the streams on `joined` */
	struct ruda_stream *joined;
	struct ruda_stream *waiting; /* streams with waiting launches, in turn */
	struct ruda_bind_cache bound; /* in `recording` */
	uint32_t rounds;              /* rounds in `recording` */
	uint32_t inflight;            /* its submissions not yet complete */
	bool cut;                     /* `recording` ends here: a Sync waits for it */
	uint64_t round_ns;            /* device time of a round, averaged (0: unknown) */
	uint64_t inflight_ns;         /* device time a submission may take */
	uint32_t max_inflight;        /* submissions in flight at most */
	uint64_t last_end_ns;         /* device clock: its last submission's end (0: unknown) */
	bool held;                    /* launches waited for max_inflight since its last submission */
	bool awaited;                 /* a Sync waits for launches not yet submitted */
};

/* A lane's queue idle longer than this before a submission waited for
 * something else than rudad (a device stall): not counted in
 * stats.lane_idle_ns. */
#define RUDA_LANE_GAP_MAX_NS 20000000u

/* The lane of `queue` on `device`, made on first use; NULL when the
 * device's streams record alone (lanes off, or out of memory). */
struct ruda_lane *ruda__lane_of(struct ruda_device *device, uint32_t queue);
/* Keep launch `l` of `s` (references taken) for a round. */
ruda_status ruda__lane_defer(struct ruda_stream *s, struct ruda_pipeline *pipeline,
			     const struct ruda_launch_count *count,
			     const struct ruda_binding *bindings, uint32_t nbindings,
			     const void *push, uint32_t push_size);
/* The lane's recording, begun if there is none, with `s` in it (its
 * arena held, its pending wait added); VK_NULL_HANDLE: out of memory. */
VkCommandBuffer ruda__lane_join(struct ruda_lane *lane, struct ruda_stream *s);
/* Record rounds until `s` has no launch waiting (others' go along). */
ruda_status ruda__lane_catch_up(struct ruda_lane *lane, struct ruda_stream *s);
/* Record every waiting launch, then submit the lane's recording. */
ruda_status ruda__lane_submit(struct ruda_lane *lane);
/* The loop's turn: record and submit what the lanes of `device` may have
 * in flight. */
void ruda__lane_pump(struct ruda_device *device);
/* The same for the lanes with nothing in flight whose launches a Sync
 * waits for: their queues and a client wait, so the work goes now, not
 * after every other client's turn (lanes with work in flight fill their
 * next submission meanwhile). How many submitted. */
uint32_t ruda__lane_pump_idle(struct ruda_device *device);
/* `s` goes: its waiting launches and waiters are dropped. */
void ruda__lane_leave(struct ruda_stream *s);

#endif
