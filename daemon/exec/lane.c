/*
 * Queue lanes: the streams on one queue record into one command buffer,
 * their launches in rounds (stream.h, struct ruda_lane; docs/design.md,
 * "Queue lanes").
 */
#include <stdlib.h>
#include <string.h>

#include "device/device.h"
#include "exec/pipeline.h"
#include "exec/stream.h"
#include "memory/arena.h"
#include "memory/buffer.h"

/* A launch waiting for a round: what ruda__stream_launch was given, with
 * references to the kernel and buffers. */
struct ruda_deferred_launch {
	struct ruda_pipeline *pipeline;
	struct ruda_launch_count count; /* fixed counts: dynamic ones are recorded at once */
	uint32_t nbindings, push_size;
	struct ruda_binding *bindings; /* in the same allocation, after push */
	_Alignas(8) unsigned char push[];
};

/* Every lane of a device, torn down with it. */
struct ruda_lanes {
	struct ruda_device_listener on_destroy; /* first: the listener is the set */
	struct ruda_lane lane[RUDA_MAX_QUEUES];
};

/* Told when one of a lane's submissions completes. */
struct lane_waiter {
	struct ruda_waiter base;
	struct ruda_lane *lane;
	uint32_t rounds;
	/* submitted while the lane had another in flight, or had launches
	 * held back by its depth: the queue should not have been idle */
	bool behind;
};

static void lanes_destroy(struct ruda_device_listener *listener, struct ruda_device *d)
{
	/* streams leave before their device goes, and take an unsubmitted
	 * recording with the last of them (ruda__lane_leave) */
	d->lanes = NULL;
	free(listener);
}

struct ruda_lane *ruda__lane_of(struct ruda_device *d, uint32_t queue)
{
	if (!d->lanes_on || queue >= d->nqueues)
		return NULL;
	if (!d->lanes) {
		struct ruda_lanes *set = calloc(1, sizeof(*set));
		if (!set)
			return NULL;
		const char *env = getenv("RUDA_LANE_INFLIGHT_US");
		uint64_t us = env ? strtoull(env, NULL, 10) : 0;
		uint64_t inflight_ns = us ? us * 1000u : RUDA_LANE_INFLIGHT_NS;
		const char *max_env = getenv("RUDA_LANE_MAX_INFLIGHT");
		unsigned long max = max_env ? strtoul(max_env, NULL, 10) : 0;
		uint32_t max_inflight = max >= 1 && max <= 16 ? (uint32_t)max : RUDA_LANE_MAX_INFLIGHT;
		for (uint32_t q = 0; q < RUDA_MAX_QUEUES; q++)
			set->lane[q] = (struct ruda_lane){.device = d,
							  .queue = q,
							  .inflight_ns = inflight_ns,
							  .max_inflight = max_inflight};
		set->on_destroy.notify = lanes_destroy;
		ruda__device_listen_destroy(d, &set->on_destroy);
		d->lanes = set;
	}
	return &d->lanes->lane[queue];
}

static void deferred_free(struct ruda_deferred_launch *l)
{
	for (uint32_t i = 0; i < l->nbindings; i++)
		ruda__buffer_put(l->bindings[i].buffer);
	ruda__pipeline_put(l->pipeline);
	free(l);
}

ruda_status ruda__lane_defer(struct ruda_stream *s, struct ruda_pipeline *p,
			     const struct ruda_launch_count *count,
			     const struct ruda_binding *bindings, uint32_t nbindings,
			     const void *push, uint32_t push_size)
{
	if (s->ndeferred == s->deferred_cap) {
		uint32_t cap = s->deferred_cap ? s->deferred_cap * 2 : 16;
		struct ruda_deferred_launch **ring = malloc(cap * sizeof(*ring));
		if (!ring)
			return RUDA_ERROR_OUT_OF_MEMORY;
		for (uint32_t i = 0; i < s->ndeferred; i++)
			ring[i] = s->deferred[(s->deferred_head + i) % s->deferred_cap];
		free(s->deferred);
		s->deferred = ring;
		s->deferred_cap = cap;
		s->deferred_head = 0;
	}
	size_t push_bytes = (push_size + 7u) & ~(size_t)7u;
	struct ruda_deferred_launch *l =
		malloc(sizeof(*l) + push_bytes + nbindings * sizeof(struct ruda_binding));
	if (!l)
		return RUDA_ERROR_OUT_OF_MEMORY;
	l->pipeline = p;
	ruda_ref_get(&p->ref);
	l->count = *count;
	l->nbindings = nbindings;
	l->push_size = push_size;
	if (push_size)
		memcpy(l->push, push, push_size);
	l->bindings = (struct ruda_binding *)(void *)(l->push + push_bytes);
	for (uint32_t i = 0; i < nbindings; i++) {
		l->bindings[i] = bindings[i];
		ruda_ref_get(&bindings[i].buffer->ref);
		ruda__stream_note_use(s, bindings[i].buffer);
	}
	s->deferred[(s->deferred_head + s->ndeferred++) % s->deferred_cap] = l;
	if (!s->waiting) {
		struct ruda_lane *lane = s->lane;
		struct ruda_stream **link = &lane->waiting;
		while (*link)
			link = &(*link)->waiting_next;
		*link = s;
		s->waiting_next = NULL;
		s->waiting = true;
	}
	return RUDA_OK;
}

VkCommandBuffer ruda__lane_join(struct ruda_lane *lane, struct ruda_stream *s)
{
	if (!lane->recording) {
		lane->recording = ruda__submission_begin_on(lane->device, lane->queue);
		if (!lane->recording)
			return VK_NULL_HANDLE;
		lane->bound.pipeline = NULL; /* a new command buffer has nothing bound */
		lane->rounds = 0;
	}
	struct ruda_submission *sub = lane->recording;
	if (s->recording == sub)
		return sub->cmd;
	if (ruda__submission_hold(sub, &s->arena->ref) < 0)
		return VK_NULL_HANDLE;
	s->recording = sub;
	s->joined_next = lane->joined;
	lane->joined = s;
	if (s->wait_value) {
		ruda__submission_wait_for(sub, s->wait_queue, s->wait_value);
		s->wait_value = 0;
	}
	return sub->cmd;
}

static struct ruda_deferred_launch *deferred_pop(struct ruda_stream *s)
{
	struct ruda_deferred_launch *l = s->deferred[s->deferred_head];
	s->deferred_head = (s->deferred_head + 1) % s->deferred_cap;
	s->ndeferred--;
	return l;
}

/* Record launch `l` of `s` into the lane's recording. */
static ruda_status record_launch(struct ruda_lane *lane, struct ruda_stream *s,
				 struct ruda_deferred_launch *l)
{
	VkCommandBuffer cmd = ruda__lane_join(lane, s);
	struct ruda_submission *sub = lane->recording;
	if (!cmd || ruda__submission_hold(sub, &l->pipeline->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < l->nbindings; i++)
		if (ruda__submission_hold(sub, &l->bindings[i].buffer->ref) < 0)
			return RUDA_ERROR_OUT_OF_MEMORY;
	ruda__record_dispatch(lane->device, cmd, lane->queue, &lane->bound, l->pipeline, &l->count,
			      l->bindings, l->nbindings, l->push, l->push_size);
	sub->commands++;
	s->lane_commands++;
	lane->device->stats.lane_launches++;
	return RUDA_OK;
}

/* One round: a barrier (each stream's launch after its previous command),
 * then the oldest waiting launch of every stream waiting, side by side. */
static ruda_status record_launches_side_by_side(struct ruda_lane *lane)
{
	if (!lane->recording && !ruda__lane_join(lane, lane->waiting))
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda__record_barrier(lane->recording->cmd);
	lane->rounds++;
	lane->device->stats.lane_rounds++;
	struct ruda_stream **link = &lane->waiting;
	while (*link) {
		struct ruda_stream *s = *link;
		struct ruda_deferred_launch *l = deferred_pop(s);
		ruda_status st = record_launch(lane, s, l);
		if (st != RUDA_OK)
			ruda__stream_fail(s, st, "out of memory recording a launch");
		deferred_free(l);
		if (!lane->recording)
			return RUDA_ERROR_OUT_OF_MEMORY;
		if (s->ndeferred) {
			link = &s->waiting_next;
			continue;
		}
		*link = s->waiting_next;
		s->waiting = false;
		/* a Sync waits for this stream's last launch: the submission
		 * ends with this round, so its completion is not held back by
		 * the rounds of others after it */
		if (s->caught_up_waiters)
			lane->cut = true;
	}
	return RUDA_OK;
}

/* The same, its host time counted (what recording costs the loop). */
static ruda_status record_round(struct ruda_lane *lane)
{
	uint64_t t0 = uv_hrtime();
	ruda_status st = record_launches_side_by_side(lane);
	lane->device->stats.lane_record_ns += uv_hrtime() - t0;
	return st;
}

ruda_status ruda__lane_catch_up(struct ruda_lane *lane, struct ruda_stream *s)
{
	while (s->ndeferred) {
		ruda_status st = record_round(lane);
		if (st != RUDA_OK)
			return st;
	}
	return RUDA_OK;
}

static void lane_waiter_done(struct ruda_waiter *base, int status)
{
	struct lane_waiter *w = (struct lane_waiter *)base;
	struct ruda_lane *lane = w->lane;
	lane->inflight--;
	struct ruda_device_stats *stats = &lane->device->stats;
	if (status == RUDA_OK && base->gpu_end_ns) {
		stats->lane_gpu_ns += base->gpu_ns;
		/* the begin stamp waits for the queue's earlier work: a begin
		 * after the last end is time the queue had nothing to run */
		uint64_t gap = base->gpu_begin_ns - lane->last_end_ns;
		if (w->behind && lane->last_end_ns && base->gpu_begin_ns > lane->last_end_ns &&
		    gap < RUDA_LANE_GAP_MAX_NS)
			stats->lane_idle_ns += gap;
		if (base->gpu_end_ns > lane->last_end_ns)
			lane->last_end_ns = base->gpu_end_ns;
	}
	if (status == RUDA_OK && w->rounds) {
		uint64_t per_round = base->gpu_ns / w->rounds;
		lane->round_ns = lane->round_ns ? (3 * lane->round_ns + per_round) / 4 : per_round;
	}
	free(w);
}

static void run_waiters(struct ruda_waiter *list, int status)
{
	while (list) {
		struct ruda_waiter *next = list->next;
		list->done(list, status);
		list = next;
	}
}

/* What a stream's caught-up waiters wait for now: `sub`, or nothing
 * (run with `status`) when it failed. */
static void hand_over_waiters(struct ruda_stream *s, struct ruda_submission *sub, int status)
{
	struct ruda_waiter *list = s->caught_up_waiters;
	s->caught_up_waiters = NULL;
	s->caught_up_tail = &s->caught_up_waiters;
	if (!sub) {
		run_waiters(list, status);
		return;
	}
	while (list) {
		struct ruda_waiter *next = list->next;
		ruda__submission_add_waiter(sub, list);
		list = next;
	}
}

/* Submit the lane's recording and tell each stream in it. */
static ruda_status submit_recording(struct ruda_lane *lane)
{
	struct ruda_submission *sub = lane->recording;
	if (!sub)
		return RUDA_OK;
	lane->recording = NULL;
	struct ruda_stream *joined = lane->joined;
	lane->joined = NULL;
	for (struct ruda_stream *s = joined; s; s = s->joined_next)
		s->recording = NULL;
	struct lane_waiter *w = malloc(sizeof(*w));
	if (w) {
		w->base.done = lane_waiter_done;
		w->lane = lane;
		w->rounds = lane->rounds;
		w->behind = lane->inflight > 0 || lane->held;
	}
	lane->rounds = 0;
	lane->cut = false;
	lane->held = false;
	lane->awaited = false; /* a Sync still waiting now waits behind this */
	if (!w || ruda__submission_submit(sub) < 0) {
		if (!w)
			ruda__submission_discard(sub, RUDA_ERROR_OUT_OF_MEMORY);
		ruda_status why = w ? ruda__device_failure(lane->device) : RUDA_ERROR_OUT_OF_MEMORY;
		if (why == RUDA_OK)
			why = RUDA_ERROR_DEVICE_LOST;
		for (struct ruda_stream *s = joined; s; s = s->joined_next) {
			s->lane_commands = 0;
			s->rec_first_write = 0;
			s->records_fills = 0;
			ruda__stream_fail(s, why, "%s", why == RUDA_ERROR_TIMEOUT
							    ? "earlier work ran past the time limit"
							    : "the device refused a submission");
			if (!s->ndeferred)
				hand_over_waiters(s, NULL, why);
		}
		free(w);
		return why;
	}
	lane->inflight++;
	lane->device->stats.lane_submissions++;
	ruda__submission_add_waiter(sub, &w->base);
	for (struct ruda_stream *s = joined; s; s = s->joined_next) {
		uint64_t first_write = s->rec_first_write;
		s->rec_first_write = 0;
		s->records_fills = 0;
		s->last_value = sub->value;
		/* a stream counts the submission that takes the last of its
		 * launches: every use noted so far ends by then */
		if (!s->ndeferred) {
			s->recent[s->recent_next++ % RUDA_STREAM_MAX_INFLIGHT] = sub->value;
			hand_over_waiters(s, sub, RUDA_OK);
		}
		if (s->submitted)
			s->submitted(s->submitted_data, s, sub, first_write);
		s->lane_commands = 0;
	}
	return RUDA_OK;
}

ruda_status ruda__lane_submit(struct ruda_lane *lane)
{
	while (lane->waiting) {
		ruda_status st = record_round(lane);
		if (st != RUDA_OK)
			return st;
	}
	return submit_recording(lane);
}

/* Rounds one submission may take: about the lane's inflight_ns of device
 * time by the rounds completed so far, within a stream's batch. */
static uint32_t rounds_per_submission(const struct ruda_lane *lane)
{
	if (!lane->round_ns)
		return 4; /* no measure yet: a few, to get one */
	uint64_t rounds = lane->inflight_ns / lane->round_ns;
	return rounds < 1 ? 1 : rounds > RUDA_STREAM_BATCH ? RUDA_STREAM_BATCH : (uint32_t)rounds;
}

/* Record the rounds one submission takes and submit them, unless the
 * lane has as many in flight as its depth allows. Whether it submitted. */
static bool pump(struct ruda_lane *lane)
{
	if (!lane->recording && !lane->waiting)
		return false;
	if (lane->inflight >= lane->max_inflight) {
		lane->held = true; /* its next submission waited for this depth */
		return false;
	}
	uint32_t max = rounds_per_submission(lane);
	while (lane->waiting && !lane->cut && lane->rounds < max &&
	       (!lane->recording || lane->recording->commands < RUDA_STREAM_BATCH))
		if (record_round(lane) != RUDA_OK)
			break;
	return lane->recording && submit_recording(lane) == RUDA_OK;
}

void ruda__lane_pump(struct ruda_device *d)
{
	if (!d->lanes)
		return;
	for (uint32_t q = 0; q < d->nqueues; q++)
		pump(&d->lanes->lane[q]);
}

uint32_t ruda__lane_pump_idle(struct ruda_device *d)
{
	uint32_t submitted = 0;
	for (uint32_t q = 0; d->lanes && q < d->nqueues; q++)
		if (d->lanes->lane[q].awaited && !d->lanes->lane[q].inflight)
			submitted += pump(&d->lanes->lane[q]);
	return submitted;
}

void ruda__lane_leave(struct ruda_stream *s)
{
	struct ruda_lane *lane = s->lane;
	while (s->ndeferred)
		deferred_free(deferred_pop(s));
	free(s->deferred);
	s->deferred = NULL;
	s->deferred_cap = 0;
	if (s->waiting) {
		struct ruda_stream **link = &lane->waiting;
		while (*link != s)
			link = &(*link)->waiting_next;
		*link = s->waiting_next;
		s->waiting = false;
	}
	if (s->recording) {
		/* what it recorded runs with the others' (it holds what it
		 * uses), unless nobody else is left in the recording */
		struct ruda_stream **link = &lane->joined;
		while (*link != s)
			link = &(*link)->joined_next;
		*link = s->joined_next;
		s->recording = NULL;
		if (!lane->joined && !lane->waiting) {
			ruda__submission_discard(lane->recording, RUDA_ERROR_DISCONNECTED);
			lane->recording = NULL;
			lane->cut = false;
		}
	}
	hand_over_waiters(s, NULL, RUDA_ERROR_DISCONNECTED);
	s->publish_request = 0;
}
