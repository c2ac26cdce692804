#include "requests/session.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "memory/arena.h"
#include "device/device.h"
#include "memory/buffer.h"
#include "common/config.h"
#include "exec/graph.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "common/policy.h"
#include "ruda.pb-c.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "exec/throughput_cache.h"

static void unthrottle(struct ruda_session *s);
static bool locked_out(const struct ruda_session *s);
static bool saturated(struct ruda_session *s);
static void arm_priority_timer(struct ruda_session_context *ctx);
static void pending_add(struct ruda_session *s);

int ruda__session_create(struct ruda_session_context *ctx, struct ruda_connection *conn,
			 uint64_t id, pid_t pid, uid_t uid, gid_t gid, struct ruda_session **out)
{
	struct ruda_session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->id = id;
	s->ctx = ctx;
	s->conn = conn;
	s->state = RUDA_SESSION_HELLO;
	snprintf(s->name, sizeof(s->name), "?");
	s->pid = pid;
	s->uid = uid;
	s->gid = gid;
	ruda__handle_table_init(&s->buffers);
	ruda__handle_table_init(&s->kernels);
	ruda__handle_table_init(&s->profiles);
	ruda__handle_table_init(&s->streams);
	ruda__handle_table_init(&s->staging);
	ruda__handle_table_init(&s->graphs);
	int err = ruda__handle_table_insert(&ctx->sessions, id, s);
	if (err) {
		free(s);
		return err;
	}
	s->usage.connected_ms = s->usage.last_request_ms = uv_now(ctx->loop);
	pending_add(s);
	*out = s;
	return false;
}

/* ---- connections without a Hello ------------------------------------------ */

static uint32_t handshake_timeout_ms(const struct ruda_session_context *ctx)
{
	return ctx->policy ? ctx->policy->config->handshake_timeout_ms : 5000;
}

uint32_t ruda__session_pending(const struct ruda_session_context *ctx, uid_t uid)
{
	return (uint32_t)(uintptr_t)ruda__handle_table_get(&ctx->uid_pending, uid);
}

static void pending_set(struct ruda_session_context *ctx, uid_t uid, uint32_t n)
{
	ruda__handle_table_remove(&ctx->uid_pending, uid);
	/* out of memory, the uid is not counted: its limit is not enforced */
	if (n)
		(void)ruda__handle_table_insert(&ctx->uid_pending, uid, (void *)(uintptr_t)n);
}

static void on_hello_timer(uv_timer_t *timer);

/* Wake up when the oldest pending connection's time is up. */
static void arm_hello_timer(struct ruda_session_context *ctx)
{
	uint32_t timeout = handshake_timeout_ms(ctx);
	if (!ctx->hello_first || !timeout || !ctx->loop)
		return;
	if (!ctx->hello_timer && (ctx->hello_timer = malloc(sizeof(uv_timer_t)))) {
		uv_timer_init(ctx->loop, ctx->hello_timer);
		ctx->hello_timer->data = ctx;
		/* it alone must not keep rudad running */
		uv_unref((uv_handle_t *)ctx->hello_timer);
	}
	if (!ctx->hello_timer)
		return;
	uint64_t now = uv_now(ctx->loop), due = ctx->hello_first->usage.connected_ms + timeout;
	uv_timer_start(ctx->hello_timer, on_hello_timer, due > now ? due - now : 0, 0);
}

static void pending_add(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	s->pending = 1;
	s->hello_next = NULL;
	s->hello_prev = ctx->hello_last;
	if (ctx->hello_last)
		ctx->hello_last->hello_next = s;
	else
		ctx->hello_first = s;
	ctx->hello_last = s;
	pending_set(ctx, s->uid, ruda__session_pending(ctx, s->uid) + 1);
	if (ctx->hello_first == s)
		arm_hello_timer(ctx);
}

void ruda__session_hello_done(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	if (!s->pending)
		return;
	s->pending = 0;
	if (s->hello_prev)
		s->hello_prev->hello_next = s->hello_next;
	else
		ctx->hello_first = s->hello_next;
	if (s->hello_next)
		s->hello_next->hello_prev = s->hello_prev;
	else
		ctx->hello_last = s->hello_prev;
	pending_set(ctx, s->uid, ruda__session_pending(ctx, s->uid) - 1);
	if (!ctx->hello_first && ctx->hello_timer)
		uv_timer_stop(ctx->hello_timer);
}

/* Close the connections that have not said Hello in time (the list is in
 * order of connecting), each with its reason. */
static void on_hello_timer(uv_timer_t *timer)
{
	struct ruda_session_context *ctx = timer->data;
	uint32_t timeout = handshake_timeout_ms(ctx);
	uint64_t now = uv_now(ctx->loop);
	while (timeout && ctx->hello_first &&
	       now - ctx->hello_first->usage.connected_ms >= timeout) {
		struct ruda_session *s = ctx->hello_first;
		ruda__session_hello_done(s);
		log_warn("session %llu (uid %u, pid %d): no Hello within %u ms "
			 "(handshake_timeout_ms); closing", (unsigned long long)s->id, s->uid,
			 s->pid, timeout);
		/* id 0: libruda takes it as the reason the connection ends */
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, 0, RUDA_ERROR_TIMEOUT,
				   "rudad closed this connection: no Hello within %u ms of "
				   "connecting (handshake_timeout_ms)", timeout);
		/* whether or not the reason went out, the slot is freed now */
		ruda__session_kill(s);
	}
	arm_hello_timer(ctx);
}

void ruda__session_kill(struct ruda_session *s)
{
	if (s->state == RUDA_SESSION_DEAD)
		return;
	s->state = RUDA_SESSION_DEAD;
	ruda__connection_stop(s->conn);
	s->dead_next = s->ctx->dead;
	s->ctx->dead = s;
}

void ruda__session_free_closed(uv_handle_t *handle)
{
	free(handle);
}

void ruda__session_detach(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	log_info("session %llu (uid %u, pid %d, \"%s\"): closed, %llu buffers, %llu bytes released",
		 (unsigned long long)s->id, s->uid, s->pid, s->name,
		 (unsigned long long)s->buffers.count, (unsigned long long)s->bytes);
	ruda__handle_table_remove(&ctx->sessions, s->id);
	if (s->state == RUDA_SESSION_DEAD) {
		struct ruda_session **link = &ctx->dead;
		while (*link && *link != s)
			link = &(*link)->dead_next;
		if (*link)
			*link = s->dead_next;
	}
	s->state = RUDA_SESSION_DEAD;
	ruda__session_hello_done(s);
	if (s->throttled)
		unthrottle(s);
	ruda__session_exclusive_forget(s);
}

/* A stream of the session ends, and the graph it was capturing with it. */
static void stream_finish(struct ruda_stream *st)
{
	if (st->capture)
		ruda__graph_put(st->capture);
	st->capture = NULL;
	ruda__stream_finish(st);
}

void ruda__session_release(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	struct ruda_session_profile *prof;
	while ((prof = ruda__handle_table_pop(&s->profiles, NULL)))
		if (prof->refused)
			free(prof); /* the others are on the list */
	ruda__handle_table_finish(&s->profiles);
	while ((prof = s->measuring)) {
		s->measuring = prof->next;
		free(prof);
	}
	s->nmeasuring = 0;
	if (s->arena) {
		struct ruda_stream *st;
		while ((st = ruda__handle_table_pop(&s->streams, NULL))) {
			stream_finish(st);
			free(st);
		}
		stream_finish(&s->stream);
	}
	ruda__handle_table_finish(&s->streams);
	ruda__graph_release_all(&s->graphs);
	ruda__handle_table_finish(&s->graphs);
	free(s->pending_writes);
	/* the uid's quota is free at once; the buffers themselves go in
	 * batches (remains_defer), as a session may hold a million */
	ruda__session_uncharge(s, s->bytes, s->requested);
	s->own_pages = 0;
	ruda__session_remains_defer(ctx, &s->buffers, &s->kernels);
	if (s->arena) {
		ruda__arena_forget_waiter(s->arena); /* an import may still be running */
		ruda_ref_put(&s->arena->ref);
	}
}

static uint64_t devices_counted_ns(const struct ruda_session_context *ctx)
{
	uint64_t ns = 0;
	for (uint32_t i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i])
			ns += ruda__device_counted_ns(ctx->devices[i]);
	return ns;
}

struct ruda_turn ruda__session_turn_begin(const struct ruda_session_context *ctx)
{
	return (struct ruda_turn){.started_ns = uv_hrtime(), .counted_ns = devices_counted_ns(ctx)};
}

void ruda__session_turn_done(struct ruda_session_context *ctx, struct ruda_turn turn)
{
	uint64_t inside = devices_counted_ns(ctx) - turn.counted_ns;
	ctx->turns_ns += uv_hrtime() - turn.started_ns - inside;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		if (!ctx->devices[i])
			continue;
		ctx->completions_between_turns += ruda__device_take_completions(ctx->devices[i]);
		ctx->syncs_submitted_early += ruda__lane_pump_idle(ctx->devices[i]);
	}
}

void ruda__session_submit_dirty(struct ruda_session_context *ctx)
{
	ruda__stream_submit_dirty(&ctx->dirty);
	for (uint32_t i = 0; i < ctx->ndevices; i++)
		if (ctx->devices[i])
			ruda__lane_pump(ctx->devices[i]);
}

/* Take `s`, which `*link` points to, off the throttled list. */
static void throttled_unlink(struct ruda_session_context *ctx, struct ruda_session **link,
			     struct ruda_session *s)
{
	*link = s->throttled_next;
	if (ctx->throttled_tail == &s->throttled_next)
		ctx->throttled_tail = link;
}

static void unthrottle(struct ruda_session *s)
{
	struct ruda_session **link = &s->ctx->throttled;
	while (*link && *link != s)
		link = &(*link)->throttled_next;
	if (*link)
		throttled_unlink(s->ctx, link, s);
	s->throttled = 0;
}

void ruda__session_context_resume(struct ruda_session_context *ctx)
{
	struct ruda_session **link = &ctx->throttled;
	while (*link) {
		struct ruda_session *s = *link;
		/* a session waiting for an import stays until that one is done
		 * (another's end wakes everyone) */
		if (saturated(s) || locked_out(s) || ruda__arena_attaching(s->arena) ||
		    ruda__arena_attaching(s->parked_on) || s->parked_for) {
			link = &s->throttled_next;
			continue;
		}
		s->parked_on = NULL;
		throttled_unlink(ctx, link, s);
		s->throttled = 0;
		if (s->state != RUDA_SESSION_READY)
			continue;
		ruda__connection_resume(s->conn);
	}
	for (struct ruda_session *s = ctx->throttled; s; s = s->throttled_next)
		if (s->held) {
			arm_priority_timer(ctx);
			break;
		}
}

/* ---- streams and arena progress ------------------------------------------ */

void ruda__session_each_stream(struct ruda_session *s,
			       void (*fn)(struct ruda_stream *stream, void *data), void *data)
{
	fn(&s->stream, data);
	for (size_t i = 0; i < s->streams.cap; i++)
		if (s->streams.slots[i].value)
			fn(s->streams.slots[i].value, data);
}

/* Every upload the stream has recorded but not submitted bounds progress. */
static void recorded_bound(struct ruda_stream *st, void *data)
{
	uint64_t *bound = data;
	if (st->rec_first_write && st->rec_first_write - 1 < *bound)
		*bound = st->rec_first_write - 1;
}

void ruda__session_arena_publish(struct ruda_session *s)
{
	if (!s->arena)
		return;
	/* drop the writes done, each by its own queue's progress (queues
	 * complete in no order between them); those still running bound it */
	uint64_t done = atomic_load(&s->device->completed);
	size_t kept = 0;
	for (size_t i = 0; i < s->pending_count; i++) {
		struct ruda_pending_write w = s->pending_writes[(s->pending_first + i) % s->pending_cap];
		if (!ruda__device_done(s->device, w.queue, w.value))
			s->pending_writes[(s->pending_first + kept++) % s->pending_cap] = w;
	}
	s->pending_count = kept;
	uint64_t bound = s->arena_seen;
	if (s->pending_overflow.first_write) {
		if (s->pending_overflow.value <= done)
			s->pending_overflow = (struct ruda_pending_write){0};
		else if (s->pending_overflow.first_write - 1 < bound)
			bound = s->pending_overflow.first_write - 1;
	}
	for (size_t i = 0; i < s->pending_count; i++) {
		uint64_t first = s->pending_writes[(s->pending_first + i) % s->pending_cap].first_write;
		if (first - 1 < bound)
			bound = first - 1;
	}
	ruda__session_each_stream(s, recorded_bound, &bound);
	ruda__arena_publish(s->arena, bound);
}

void ruda__session_arena_used(struct ruda_session *s, uint64_t id)
{
	if (id > s->arena_seen)
		s->arena_seen = id;
	ruda__session_arena_publish(s);
}

/* Told when one of the session's submissions completes: its device time,
 * and the arena progress it allows. */
struct submission_waiter {
	struct ruda_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session;
	struct ruda_device *device;
	uint32_t priority;
	uint64_t value; /* the submission's number on the device */
	/* the session's commands of the submission's (streams sharing a lane
	 * share a submission): its device time is split by them */
	uint32_t commands, of;
};

static void submission_done(struct ruda_waiter *base, int status)
{
	struct submission_waiter *w = (struct submission_waiter *)base;
	(void)status;
	ruda__priority_completed(&w->device->priority, w->priority, uv_hrtime());
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (s) {
		uint64_t ns = base->gpu_ns;
		if (w->of > w->commands)
			ns = ns / w->of * w->commands + ns % w->of * w->commands / w->of;
		s->usage.gpu_time_ns += ns;
		/* the windows it ran inside: this session's time only */
		for (struct ruda_session_profile *p = s->measuring; p; p = p->next)
			if (w->value > p->after && w->value <= p->until)
				p->gpu_ns += ns;
		ruda__session_arena_publish(s);
	}
	free(w);
}

static int pending_push(struct ruda_session *s, uint32_t queue, uint64_t value,
			uint64_t first_write)
{
	if (s->pending_count == s->pending_cap) {
		size_t cap = s->pending_cap ? s->pending_cap * 2 : 8;
		struct ruda_pending_write *p = malloc(cap * sizeof(*p));
		if (!p)
			return -1;
		for (size_t i = 0; i < s->pending_count; i++)
			p[i] = s->pending_writes[(s->pending_first + i) % s->pending_cap];
		free(s->pending_writes);
		s->pending_writes = p;
		s->pending_cap = cap;
		s->pending_first = 0;
	}
	s->pending_writes[(s->pending_first + s->pending_count++) % s->pending_cap] =
		(struct ruda_pending_write){.queue = queue, .value = value, .first_write = first_write};
	return 0;
}

static void stream_submitted(void *data, struct ruda_stream *st, struct ruda_submission *sub,
			     uint64_t first_write)
{
	struct ruda_session *s = data;
	/* a sync that waited for its lane to take the stream's last launch */
	if (st->publish_request && !st->ndeferred) {
		ruda__wait_publish(s, st, st->publish_request, st->publish_ok);
		st->publish_request = 0;
	}
	s->usage.submissions++;
	sub->owner = s->id; /* whose work timed out, if it does */
	if (first_write && pending_push(s, sub->queue, sub->value, first_write) < 0) {
		/* out of memory: fold it into one coarser entry, which holds
		 * progress back until everything it covers is done */
		if (!s->pending_overflow.first_write || first_write < s->pending_overflow.first_write)
			s->pending_overflow.first_write = first_write;
		if (sub->value > s->pending_overflow.value)
			s->pending_overflow.value = sub->value;
	}
	struct submission_waiter *w = malloc(sizeof(*w));
	if (!w)
		return; /* no device time for it; progress comes with the next */
	w->base.done = submission_done;
	w->ctx = s->ctx;
	w->session = s->id;
	w->device = s->device;
	w->priority = s->priority & 7;
	w->value = sub->value;
	w->commands = st->lane ? st->lane_commands : 0;
	w->of = st->lane ? sub->commands : 0;
	/* active at its priority (queries, stats and admin requests do not
	 * submit, so they do not count) */
	ruda__priority_submitted(&w->device->priority, w->priority, s->held, uv_hrtime(),
				 uv_now(s->ctx->loop));
	ruda__submission_add_waiter(sub, &w->base);
}

void ruda__session_adopt_stream(struct ruda_session *s, struct ruda_stream *st)
{
	st->submitted = stream_submitted;
	st->submitted_data = s;
}

struct ruda_stream *ruda__session_stream(struct ruda_session *s, uint32_t id)
{
	if (id == 0)
		return &s->stream;
	struct ruda_stream *st = ruda__handle_table_get(&s->streams, id);
	if (st || s->streams.count >= RUDA_SESSION_MAX_STREAMS)
		return st;
	st = malloc(sizeof(*st));
	if (!st)
		return NULL;
	ruda__stream_init(st, s->device, s->arena, &s->ctx->dirty);
	st->id = id;
	ruda__session_adopt_stream(s, st);
	if (ruda__handle_table_insert(&s->streams, id, st) < 0) {
		free(st);
		return NULL;
	}
	return st;
}

static void submit_one(struct ruda_stream *st, void *data)
{
	(void)data;
	ruda__stream_submit(st);
}

void ruda__session_submit_all(struct ruda_session *s)
{
	ruda__session_each_stream(s, submit_one, NULL);
}

struct ruda_session_profile *ruda__session_profile_open(struct ruda_session *s)
{
	struct ruda_session_profile *p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	/* what was recorded before the window goes in submissions before it */
	ruda__session_submit_all(s);
	p->after = s->device->submitted;
	p->until = UINT64_MAX;
	if (s->nmeasuring >= RUDA_SESSION_MAX_PROFILES) {
		p->refused = 1; /* its end says so */
		return p;
	}
	p->next = s->measuring;
	s->measuring = p;
	s->nmeasuring++;
	return p;
}

void ruda__session_profile_close(struct ruda_session *s, struct ruda_session_profile *p)
{
	ruda__session_submit_all(s);
	p->until = s->device->submitted;
}

void ruda__session_profile_free(struct ruda_session *s, struct ruda_session_profile *p)
{
	for (struct ruda_session_profile **link = &s->measuring; *link; link = &(*link)->next) {
		if (*link == p) {
			*link = p->next;
			s->nmeasuring--;
			break;
		}
	}
	free(p);
}

void ruda__session_context_finish(struct ruda_session_context *ctx)
{
	ruda__session_remains_finish(ctx);
	ruda__handle_table_finish(&ctx->uid_pending);
	if (ctx->hello_timer) {
		uv_timer_stop(ctx->hello_timer);
		uv_close((uv_handle_t *)ctx->hello_timer, ruda__session_free_closed);
		ctx->hello_timer = NULL;
	}
	free(ctx->scratch);
	ctx->scratch = NULL;
	for (uint32_t i = 0; ctx->throughput_caches && i < ctx->ndevices; i++)
		ruda__throughput_cache_free(ctx->throughput_caches[i]);
	free(ctx->throughput_caches);
	ctx->throughput_caches = NULL;
	ruda__session_quota_finish(ctx);
	ruda__session_exclusive_finish(ctx);
	if (ctx->priority_timer) {
		uv_timer_stop(ctx->priority_timer);
		uv_close((uv_handle_t *)ctx->priority_timer, ruda__session_free_closed);
		ctx->priority_timer = NULL;
	}
}

void ruda__session_violation(struct ruda_session *s, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("session %llu (uid %u, pid %d): protocol violation: %s; disconnecting",
		 (unsigned long long)s->id, s->uid, s->pid, why);
	ruda__session_kill(s);
}

static void any_saturated(struct ruda_stream *st, void *data)
{
	*(int *)data |= ruda__stream_saturated(st);
}

/* ---- priorities ------------------------------------------------------------ */

/* A client of higher priority than `s` has been active on its device
 * within RUDA_PRIORITY_HOLD_MS. */
static bool outranked(const struct ruda_session *s)
{
	return s->device &&
	       ruda__priority_outranked(&s->device->priority, s->priority, uv_now(s->ctx->loop));
}

/* rudad.conf's priority_* keys, as they are now (reloads included). */
static struct ruda_priority_rules priority_rules(const struct ruda_session_context *ctx)
{
	const struct ruda_config *c = ctx->policy ? ctx->policy->config : NULL;
	uint64_t anticipation = c ? c->priority_anticipation_us : RUDA_PRIORITY_ANTICIPATION_US;
	uint64_t max_wait = c ? c->priority_max_wait_us : RUDA_PRIORITY_MAX_WAIT_US;
	return (struct ruda_priority_rules){.anticipation_ns = anticipation * 1000u,
					    .max_wait_ns = max_wait * 1000u};
}

static void set_batch(struct ruda_stream *st, void *data)
{
	st->batch = *(uint32_t *)data;
}

/* Whether `s` is held back now; a held session submits one command at a
 * time, when ruda__priority_may_start allows, so that a higher-priority
 * client waits for one command at most, and seldom for any. */
static bool update_held(struct ruda_session *s)
{
	bool held = outranked(s);
	if (held != s->held) {
		uint32_t batch = held ? 1 : 0;
		s->held = held;
		if (s->arena)
			ruda__session_each_stream(s, set_batch, &batch);
	}
	return held;
}

/* Work of the stream's not yet done: in flight, or (in a lane) launches
 * still waiting for a round or in the lane's recording. */
static void any_inflight(struct ruda_stream *st, void *data)
{
	if (!ruda__device_done(st->device, st->queue, st->last_value) ||
	    (st->lane && ruda__stream_unsubmitted(st)))
		*(int *)data = 1;
}

/* One of the session's streams has as much in flight as it may. */
static bool saturated(struct ruda_session *s)
{
	bool held = s->device && update_held(s);
	int full = 0;
	ruda__session_each_stream(s, any_saturated, &full);
	if (full || !held || atomic_load(&s->device->lost))
		return full;
	/* held: its own work must drain, and the device let it start */
	ruda__session_each_stream(s, any_inflight, &full);
	if (full)
		return 1;
	struct ruda_priority_rules rules = priority_rules(s->ctx);
	return !ruda__priority_may_start(&s->device->priority, s->priority, uv_hrtime(), &rules);
}

static void on_priority_timer(uv_timer_t *timer)
{
	ruda__session_context_resume(timer->data);
}

/* Held sessions wait for device progress; when nothing is in flight, a
 * timer looks again once the higher priority may have gone quiet, or
 * (every millisecond) once the anticipation or the longest wait is over. */
static void arm_priority_timer(struct ruda_session_context *ctx)
{
	if (!ctx->priority_timer && (ctx->priority_timer = malloc(sizeof(uv_timer_t)))) {
		uv_timer_init(ctx->loop, ctx->priority_timer);
		ctx->priority_timer->data = ctx;
	}
	struct ruda_priority_rules rules = priority_rules(ctx);
	uint64_t ms = rules.anticipation_ns || rules.max_wait_ns ? 1 : RUDA_PRIORITY_HOLD_MS / 2;
	if (ctx->priority_timer && !uv_is_active((uv_handle_t *)ctx->priority_timer))
		uv_timer_start(ctx->priority_timer, on_priority_timer, ms, 0);
}

/* Another session holds the device alone. */
static bool locked_out(const struct ruda_session *s)
{
	return s->ctx->exclusive && s->ctx->exclusive != s->id && s->state == RUDA_SESSION_READY;
}

static void throttle(struct ruda_session *s)
{
	/* at the tail: sessions are resumed in the order they were stopped,
	 * so none is always last */
	struct ruda_session_context *ctx = s->ctx;
	if (!ctx->throttled_tail)
		ctx->throttled_tail = &ctx->throttled;
	s->throttled = 1;
	s->throttled_next = NULL;
	*ctx->throttled_tail = s;
	ctx->throttled_tail = &s->throttled_next;
	if (s->held)
		arm_priority_timer(s->ctx);
	/* still notice a client that goes away */
	ruda__connection_pause(s->conn);
}

bool ruda__session_takes_frame(struct ruda_session *s)
{
	if (locked_out(s)) {
		if (!s->throttled)
			throttle(s);
		return false;
	}
	if (s->state == RUDA_SESSION_DEAD || s->state == RUDA_SESSION_CLOSING || s->throttled)
		return false;
	/* held back since the last frame (a higher priority woke up): the next
	 * frame waits too */
	if (s->state == RUDA_SESSION_READY && outranked(s) && saturated(s)) {
		throttle(s);
		return false;
	}
	return true;
}

bool ruda__session_frame_done(struct ruda_session *s)
{
	if (s->parked) {
		/* its arena is being imported: the same frame again, once it is */
		s->parked = 0;
		s->usage.requests--;
		throttle(s);
		return true;
	}
	/* backpressure: take no more requests until the GPU catches up (or the
	 * session holding the device alone is done) */
	if (s->state == RUDA_SESSION_READY && (saturated(s) || locked_out(s)))
		throttle(s);
	return false;
}
