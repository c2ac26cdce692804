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
#include "requests/reply.h"
#include "exec/throughput_cache.h"

static void unthrottle(struct ruda_session *s);
static void exclusive_forget(struct ruda_session *s);
static int locked_out(const struct ruda_session *s);
static int saturated(struct ruda_session *s);
static void arm_priority_timer(struct ruda_session_context *ctx);
static void remains_defer(struct ruda_session_context *ctx, struct ruda_handle_table *buffers,
			  struct ruda_handle_table *kernels);
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
	return 0;
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

static void free_after_close_timer(uv_handle_t *handle)
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
	exclusive_forget(s);
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
	remains_defer(ctx, &s->buffers, &s->kernels);
	if (s->arena) {
		ruda__arena_forget_waiter(s->arena); /* an import may still be running */
		ruda_ref_put(&s->arena->ref);
	}
}

/* ---- closed sessions' buffers and kernels ---------------------------------- */

struct ruda_session_remains {
	struct ruda_session_remains *next;
	struct ruda_handle_table buffers, kernels; /* taken from the session */
	size_t at; /* the next slot: of buffers, then (past their cap) of kernels */
};

static void remains_free_all(struct ruda_session_remains *r)
{
	ruda__handle_table_finish(&r->buffers);
	ruda__handle_table_finish(&r->kernels);
	free(r);
}

/* Release one slot's value; the tables are walked, not popped: no entry
 * moves, and the whole walk is O(slots). */
static void remains_release_slot(struct ruda_session_remains *r, size_t slot)
{
	if (slot < r->buffers.cap) {
		struct ruda_session_buffer *b = r->buffers.slots[slot].value;
		if (!b)
			return;
		if (b->buffer)
			ruda__buffer_put(b->buffer);
		free(b->error_message);
		free(b);
		return;
	}
	struct ruda_session_kernel *k = r->kernels.slots[slot - r->buffers.cap].value;
	if (k) {
		ruda__pipeline_put(k->pipeline);
		free(k);
	}
}

int ruda__session_remains_release(struct ruda_session_context *ctx, size_t max)
{
	size_t done = 0;
	while (ctx->remains && done < max) {
		struct ruda_session_remains *r = ctx->remains;
		size_t end = r->buffers.cap + r->kernels.cap;
		/* empty slots cost little, but count them too: the batch bounds
		 * the time, not only the releases */
		while (r->at < end && done < max) {
			remains_release_slot(r, r->at++);
			done++;
		}
		if (r->at < end)
			break;
		ctx->remains = r->next;
		remains_free_all(r);
	}
	if (!ctx->remains && ctx->remains_idle)
		uv_idle_stop(ctx->remains_idle);
	return ctx->remains != NULL;
}

static void on_remains_idle(uv_idle_t *idle)
{
	ruda__session_remains_release(idle->data, RUDA_SESSION_TEARDOWN_BATCH);
}

/* Take the session's buffers and kernels to release them later; a few are
 * released at once (most sessions have a few). */
static void remains_defer(struct ruda_session_context *ctx, struct ruda_handle_table *buffers,
			  struct ruda_handle_table *kernels)
{
	struct ruda_session_remains *r = NULL;
	if (buffers->count + kernels->count > 64 && ctx->loop)
		r = calloc(1, sizeof(*r));
	if (r && !ctx->remains_idle && (ctx->remains_idle = malloc(sizeof(uv_idle_t)))) {
		uv_idle_init(ctx->loop, ctx->remains_idle);
		ctx->remains_idle->data = ctx;
	}
	if (!r || !ctx->remains_idle) {
		/* now, all of it (out of memory: the same, only slower) */
		struct ruda_session_remains now = {.buffers = *buffers, .kernels = *kernels};
		for (size_t i = 0; i < now.buffers.cap + now.kernels.cap; i++)
			remains_release_slot(&now, i);
		ruda__handle_table_finish(buffers);
		ruda__handle_table_finish(kernels);
		free(r);
		return;
	}
	r->buffers = *buffers;
	r->kernels = *kernels;
	ruda__handle_table_init(buffers);
	ruda__handle_table_init(kernels);
	/* at the tail: an earlier session's remains go first */
	struct ruda_session_remains **tail = &ctx->remains;
	while (*tail)
		tail = &(*tail)->next;
	*tail = r;
	uv_idle_start(ctx->remains_idle, on_remains_idle);
}

void ruda__session_submit_dirty(struct ruda_session_context *ctx)
{
	ruda__stream_submit_dirty(&ctx->dirty);
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
		    ruda__arena_attaching(s->parked_on)) {
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

static void newest(struct ruda_stream *st, void *data)
{
	struct ruda_stream **best = data;
	if (st->last_value > (*best)->last_value)
		*best = st;
}

struct ruda_stream *ruda__session_latest_stream(struct ruda_session *s)
{
	struct ruda_stream *best = &s->stream;
	ruda__session_each_stream(s, newest, &best);
	return best;
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
	/* submissions complete in order on the device's one queue: drop those
	 * done, and the first still running bounds progress */
	uint64_t done = atomic_load(&s->device->completed);
	while (s->pending_count &&
	       s->pending_writes[s->pending_first % s->pending_cap].value <= done) {
		s->pending_first++;
		s->pending_count--;
	}
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
};

static void submission_done(struct ruda_waiter *base, int status)
{
	struct submission_waiter *w = (struct submission_waiter *)base;
	(void)status;
	ruda__priority_completed(&w->device->priority, w->priority, uv_hrtime());
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (s) {
		s->usage.gpu_time_ns += base->gpu_ns;
		/* the windows it ran inside: this session's time only */
		for (struct ruda_session_profile *p = s->measuring; p; p = p->next)
			if (w->value > p->after && w->value <= p->until)
				p->gpu_ns += base->gpu_ns;
		ruda__session_arena_publish(s);
	}
	free(w);
}

static int pending_push(struct ruda_session *s, uint64_t value, uint64_t first_write)
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
		(struct ruda_pending_write){.value = value, .first_write = first_write};
	return 0;
}

static void stream_submitted(void *data, struct ruda_submission *sub, uint64_t first_write)
{
	struct ruda_session *s = data;
	s->usage.submissions++;
	sub->owner = s->id; /* whose work timed out, if it does */
	if (first_write && pending_push(s, sub->value, first_write) < 0) {
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

/* ---- memory accounting ------------------------------------------------- */

/* The bytes every session of `uid` holds in `table` (uid -> uint64_t). */
static uint64_t uid_held(const struct ruda_handle_table *table, uid_t uid)
{
	uint64_t *bytes = ruda__handle_table_get(table, uid);
	return bytes ? *bytes : 0;
}

/* Add `bytes` to the uid's count in `table` unless that or the session's
 * own count `*held` would pass its limit (0: none). */
static ruda_status charge(struct ruda_handle_table *table, uid_t uid, uint64_t *held,
			  uint64_t limit, uint64_t uid_limit, uint64_t bytes)
{
	uint64_t *uid_bytes = ruda__handle_table_get(table, uid);
	uint64_t uid_total = uid_bytes ? *uid_bytes : 0;
	if ((limit && (bytes > limit || *held > limit - bytes)) ||
	    (uid_limit && (bytes > uid_limit || uid_total > uid_limit - bytes)))
		return RUDA_ERROR_QUOTA;
	if (!uid_bytes) {
		uid_bytes = calloc(1, sizeof(*uid_bytes));
		if (!uid_bytes || ruda__handle_table_insert(table, uid, uid_bytes) < 0) {
			free(uid_bytes);
			return RUDA_ERROR_OUT_OF_MEMORY;
		}
	}
	*uid_bytes += bytes;
	*held += bytes;
	return RUDA_OK;
}

static void uncharge(struct ruda_handle_table *table, uid_t uid, uint64_t *held, uint64_t bytes)
{
	uint64_t *uid_bytes = ruda__handle_table_get(table, uid);
	if (uid_bytes) {
		*uid_bytes -= bytes;
		if (*uid_bytes == 0)
			free(ruda__handle_table_remove(table, uid));
	}
	*held -= bytes;
}

uint64_t ruda__session_uid_bytes(const struct ruda_session_context *ctx, uid_t uid)
{
	return uid_held(&ctx->uid_bytes, uid);
}

ruda_status ruda__session_charge(struct ruda_session *s, uint64_t allocated, uint64_t requested)
{
	ruda_status st = charge(&s->ctx->uid_bytes, s->uid, &s->bytes, s->quota, s->uid_quota,
				allocated);
	if (st == RUDA_OK)
		s->requested += requested;
	return st;
}

void ruda__session_uncharge(struct ruda_session *s, uint64_t allocated, uint64_t requested)
{
	uncharge(&s->ctx->uid_bytes, s->uid, &s->bytes, allocated);
	s->requested -= requested;
}

ruda_status ruda__session_charge_buffer(struct ruda_session *s, const struct ruda_buffer *b)
{
	ruda_status st = ruda__session_charge(s, b->allocated, b->size);
	if (st == RUDA_OK && ruda__memory_dedicated(&b->memory))
		s->own_pages++;
	return st;
}

void ruda__session_uncharge_buffer(struct ruda_session *s, const struct ruda_buffer *b)
{
	ruda__session_uncharge(s, b->allocated, b->size);
	if (ruda__memory_dedicated(&b->memory))
		s->own_pages--;
}

uint64_t ruda__session_uid_staging(const struct ruda_session_context *ctx, uid_t uid)
{
	return uid_held(&ctx->uid_staging, uid);
}

ruda_status ruda__session_charge_staging(struct ruda_session *s, uint64_t bytes)
{
	return charge(&s->ctx->uid_staging, s->uid, &s->staging_bytes, s->staging_quota,
		      s->staging_uid_quota, bytes);
}

void ruda__session_uncharge_staging(struct ruda_session *s, uint64_t bytes)
{
	uncharge(&s->ctx->uid_staging, s->uid, &s->staging_bytes, bytes);
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

/* ---- exclusive access ---------------------------------------------------- */

/*
 * A lease stops every other session, so leases are rationed: after a lease
 * of d ms, the holder's uid waits d * (100 - exclusive_share) / exclusive_share
 * ms before its next one is granted (administrators do not wait), and no
 * lease lasts past max_exclusive_ms. A client that took leases back to
 * back got the device nearly alone (others got 54 results in 38 s instead
 * of ~7000); now the others get at least 100 - exclusive_share percent of
 * the time.
 */

static void exclusive_release(struct ruda_session_context *ctx);
static void exclusive_next(struct ruda_session_context *ctx);

uint32_t ruda__session_exclusive_limit_ms(const struct ruda_session_context *ctx)
{
	if (ctx->policy)
		return ctx->policy->config->max_exclusive_ms;
	return ctx->max_exclusive_ms ? ctx->max_exclusive_ms : 10000;
}

/* The uv_now() before which a lease for `s` is not granted (0: none). */
static uint64_t exclusive_not_before(struct ruda_session_context *ctx, const struct ruda_session *s)
{
	uint64_t *until = ruda__handle_table_get(&ctx->uid_exclusive, s->uid);
	if (!until)
		return 0;
	if (*until <= uv_now(ctx->loop)) {
		free(ruda__handle_table_remove(&ctx->uid_exclusive, s->uid));
		return 0;
	}
	return s->admin ? 0 : *until;
}

static void on_exclusive_timeout(uv_timer_t *timer)
{
	struct ruda_session_context *ctx = timer->data;
	struct ruda_session *s = ruda__handle_table_get(&ctx->sessions, ctx->exclusive);
	log_warn("session %llu: exclusive lease expired after %u ms",
		 (unsigned long long)ctx->exclusive, ctx->exclusive_timeout_ms);
	/* its ExclusiveEnd is told, rather than looking like a misuse */
	if (s)
		s->lease_expired_ms = ctx->exclusive_timeout_ms ? ctx->exclusive_timeout_ms : 1;
	exclusive_release(ctx);
}

static void exclusive_grant(struct ruda_session *s, uint64_t request, uint32_t timeout_ms)
{
	struct ruda_session_context *ctx = s->ctx;
	uint32_t limit = ruda__session_exclusive_limit_ms(ctx);
	if (!timeout_ms || timeout_ms > limit)
		timeout_ms = limit;
	if (!ctx->exclusive_timer && (ctx->exclusive_timer = malloc(sizeof(uv_timer_t)))) {
		uv_timer_init(ctx->loop, ctx->exclusive_timer);
		ctx->exclusive_timer->data = ctx;
	}
	ctx->exclusive = s->id;
	ctx->exclusive_uid = s->uid;
	ctx->exclusive_admin = s->admin;
	ctx->exclusive_since_ms = uv_now(ctx->loop);
	ctx->exclusive_timeout_ms = timeout_ms;
	s->lease_expired_ms = 0; /* a new lease: the old one's expiry is moot */
	if (ctx->exclusive_timer)
		uv_timer_start(ctx->exclusive_timer, on_exclusive_timeout, timeout_ms, 0);
	log_info("session %llu (uid %u, pid %d): exclusive lease for up to %u ms",
		 (unsigned long long)s->id, s->uid, s->pid, timeout_ms);
	ruda__reply_status(s->conn, request, RUDA_OK, NULL);
}

/* Remember when the uid of the lease ending now may have its next one. */
static void exclusive_cool_down(struct ruda_session_context *ctx)
{
	uint32_t share = ctx->policy ? ctx->policy->config->exclusive_share : 100;
	if (ctx->exclusive_admin || !share || share >= 100)
		return;
	uint64_t now = uv_now(ctx->loop), held = now - ctx->exclusive_since_ms;
	uint64_t until = now + held * (100 - share) / share;
	uint64_t *entry = ruda__handle_table_get(&ctx->uid_exclusive, ctx->exclusive_uid);
	if (!entry) {
		entry = malloc(sizeof(*entry));
		if (!entry || ruda__handle_table_insert(&ctx->uid_exclusive, ctx->exclusive_uid,
							entry) < 0) {
			free(entry); /* out of memory: this one lease is not counted */
			return;
		}
		*entry = 0;
	}
	if (until > *entry)
		*entry = until;
}

static void on_exclusive_cooled(uv_timer_t *timer)
{
	struct ruda_session_context *ctx = timer->data;
	if (!ctx->exclusive)
		exclusive_next(ctx);
}

/* Grant the lease to the first live waiter whose uid may have one now;
 * the others keep their place. When only waiters that must wait are left,
 * a timer comes back for the first of them. */
static void exclusive_next(struct ruda_session_context *ctx)
{
	uint64_t soonest = 0;
	struct ruda_exclusive_wait **link = &ctx->exclusive_waiting;
	while (*link && !ctx->exclusive) {
		struct ruda_exclusive_wait *w = *link;
		struct ruda_session *s = ruda__handle_table_get(&ctx->sessions, w->session);
		if (!s || s->state != RUDA_SESSION_READY) {
			*link = w->next;
			free(w);
			continue;
		}
		uint64_t not_before = exclusive_not_before(ctx, s);
		if (not_before) {
			if (!soonest || not_before < soonest)
				soonest = not_before;
			link = &w->next;
			continue;
		}
		*link = w->next;
		exclusive_grant(s, w->request, w->timeout_ms);
		free(w);
	}
	if (ctx->exclusive || !soonest)
		return;
	if (!ctx->exclusive_cool_timer && (ctx->exclusive_cool_timer = malloc(sizeof(uv_timer_t)))) {
		uv_timer_init(ctx->loop, ctx->exclusive_cool_timer);
		ctx->exclusive_cool_timer->data = ctx;
	}
	if (ctx->exclusive_cool_timer) {
		uint64_t now = uv_now(ctx->loop);
		uv_timer_start(ctx->exclusive_cool_timer, on_exclusive_cooled,
			       soonest > now ? soonest - now : 0, 0);
	}
}

/* The lease ends: the next waiter that may gets it, or everyone goes on. */
static void exclusive_release(struct ruda_session_context *ctx)
{
	exclusive_cool_down(ctx);
	ctx->exclusive = 0;
	if (ctx->exclusive_timer)
		uv_timer_stop(ctx->exclusive_timer);
	exclusive_next(ctx);
	ruda__session_context_resume(ctx);
}

int ruda__session_exclusive_begin(struct ruda_session *s, uint64_t request, uint32_t timeout_ms)
{
	struct ruda_session_context *ctx = s->ctx;
	if (ctx->exclusive == s->id) {
		/* held already: granted again, but it ends when it would have
		 * (asking again does not make a lease longer) */
		ruda__reply_status(s->conn, request, RUDA_OK, NULL);
		return 1;
	}
	if (!ctx->exclusive && !ctx->exclusive_waiting && !exclusive_not_before(ctx, s)) {
		exclusive_grant(s, request, timeout_ms);
		return 1;
	}
	struct ruda_exclusive_wait *w = malloc(sizeof(*w)), **tail = &ctx->exclusive_waiting;
	if (!w) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return 0;
	}
	*w = (struct ruda_exclusive_wait){.session = s->id, .request = request,
					  .timeout_ms = timeout_ms};
	while (*tail)
		tail = &(*tail)->next;
	*tail = w;
	if (!ctx->exclusive)
		exclusive_next(ctx); /* a waiter that must wait: its timer */
	return ctx->exclusive == s->id;
}

int ruda__session_exclusive_end(struct ruda_session *s)
{
	if (s->ctx->exclusive != s->id) {
		if (!s->lease_expired_ms)
			return -ENOENT;
		return -ETIMEDOUT;
	}
	exclusive_release(s->ctx);
	return 0;
}

/* A session that ends holds no lease and waits for none. */
static void exclusive_forget(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	struct ruda_exclusive_wait **link = &ctx->exclusive_waiting;
	while (*link) {
		if ((*link)->session == s->id) {
			struct ruda_exclusive_wait *w = *link;
			*link = w->next;
			free(w);
		} else {
			link = &(*link)->next;
		}
	}
	if (ctx->exclusive == s->id)
		exclusive_release(ctx);
}

void ruda__session_context_finish(struct ruda_session_context *ctx)
{
	ruda__session_remains_release(ctx, SIZE_MAX);
	ruda__handle_table_finish(&ctx->uid_pending);
	if (ctx->hello_timer) {
		uv_timer_stop(ctx->hello_timer);
		uv_close((uv_handle_t *)ctx->hello_timer, free_after_close_timer);
		ctx->hello_timer = NULL;
	}
	if (ctx->remains_idle) {
		uv_idle_stop(ctx->remains_idle);
		uv_close((uv_handle_t *)ctx->remains_idle, free_after_close_timer);
		ctx->remains_idle = NULL;
	}
	free(ctx->scratch);
	ctx->scratch = NULL;
	for (uint32_t i = 0; ctx->throughput_caches && i < ctx->ndevices; i++)
		ruda__throughput_cache_free(ctx->throughput_caches[i]);
	free(ctx->throughput_caches);
	ctx->throughput_caches = NULL;
	uint64_t *bytes;
	while ((bytes = ruda__handle_table_pop(&ctx->uid_bytes, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_bytes);
	while ((bytes = ruda__handle_table_pop(&ctx->uid_staging, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_staging);
	while (ctx->exclusive_waiting) {
		struct ruda_exclusive_wait *w = ctx->exclusive_waiting;
		ctx->exclusive_waiting = w->next;
		free(w);
	}
	while ((bytes = ruda__handle_table_pop(&ctx->uid_exclusive, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_exclusive);
	if (ctx->exclusive_cool_timer) {
		uv_timer_stop(ctx->exclusive_cool_timer);
		uv_close((uv_handle_t *)ctx->exclusive_cool_timer, free_after_close_timer);
		ctx->exclusive_cool_timer = NULL;
	}
	if (ctx->exclusive_timer) {
		uv_timer_stop(ctx->exclusive_timer);
		uv_close((uv_handle_t *)ctx->exclusive_timer, free_after_close_timer);
		ctx->exclusive_timer = NULL;
	}
	if (ctx->priority_timer) {
		uv_timer_stop(ctx->priority_timer);
		uv_close((uv_handle_t *)ctx->priority_timer, free_after_close_timer);
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
static int outranked(const struct ruda_session *s)
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
static int update_held(struct ruda_session *s)
{
	int held = outranked(s);
	if (held != s->held) {
		uint32_t batch = held ? 1 : 0;
		s->held = held;
		if (s->arena)
			ruda__session_each_stream(s, set_batch, &batch);
	}
	return held;
}

static void any_inflight(struct ruda_stream *st, void *data)
{
	uint64_t last = st->last_value;
	if (last > atomic_load(&st->device->completed))
		*(int *)data = 1;
}

/* One of the session's streams has as much in flight as it may. */
static int saturated(struct ruda_session *s)
{
	int held = s->device ? update_held(s) : 0, full = 0;
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
static int locked_out(const struct ruda_session *s)
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

int ruda__session_takes_frame(struct ruda_session *s)
{
	if (locked_out(s)) {
		if (!s->throttled)
			throttle(s);
		return 0;
	}
	if (s->state == RUDA_SESSION_DEAD || s->state == RUDA_SESSION_CLOSING || s->throttled)
		return 0;
	/* held back since the last frame (a higher priority woke up): the next
	 * frame waits too */
	if (s->state == RUDA_SESSION_READY && outranked(s) && saturated(s)) {
		throttle(s);
		return 0;
	}
	return 1;
}

int ruda__session_frame_done(struct ruda_session *s)
{
	if (s->parked) {
		/* its arena is being imported: the same frame again, once it is */
		s->parked = 0;
		s->usage.requests--;
		throttle(s);
		return 1;
	}
	/* backpressure: take no more requests until the GPU catches up (or the
	 * session holding the device alone is done) */
	if (s->state == RUDA_SESSION_READY && (saturated(s) || locked_out(s)))
		throttle(s);
	return 0;
}
