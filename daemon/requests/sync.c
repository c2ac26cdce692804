/*
 * Execution requests and the replies that wait for the GPU: Flush, Sync,
 * Check, SyncBuffers, Fence, the profiling windows (ProfileStart,
 * ProfileEnd, ProfileAbandon). A Read, Sync, SyncBuffers, Fence, ProfileEnd
 * or ExportResource is answered once the work it follows has completed;
 * the waiter finds its session again by id (it may have gone meanwhile).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ruda/status.h>

#include "common/handle_table.h"
#include "device/device.h"
#include "exec/stream.h"
#include "memory/arena.h"
#include "memory/buffer.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

struct reply_waiter {
	struct ruda_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session;
	uint64_t request;
	enum ruda_wait_kind kind;
	uint32_t stream;
	struct ruda_device *device; /* borrowed: devices outlive sessions */
	struct ruda_session_profile *profile; /* RUDA_WAIT_PROFILE: the session's, while it lives */
	/* RUDA_WAIT_SYNC: the stream had no error when the sync came, as the arena
	 * told the client (errors recorded later are the next sync's) */
	bool settled_ok;
	size_t nhandles;
	uint64_t handles[];
};

static ruda_status first_buffer_error(struct ruda_session *s, const uint64_t *ids, size_t n,
				      const char **why)
{
	for (size_t i = 0; i < n; i++) {
		ruda_status st = ruda__request_buffer_status(s, ids[i], why);
		if (st != RUDA_OK)
			return st;
	}
	return RUDA_OK;
}

/* Why the work a reply waited for failed. */
static const char *failure_reason(int status)
{
	if (status == RUDA_ERROR_TIMEOUT)
		return "a submission ran past the time limit (submission_timeout_ms)";
	if (status == RUDA_ERROR_DEVICE_LOST)
		return "the device was lost or reset; this connection's work on it is gone";
	return "the device failed";
}

static void reply_waiter_done(struct ruda_waiter *base, int status)
{
	struct reply_waiter *w = (struct reply_waiter *)base;
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (w->kind == RUDA_WAIT_PROFILE) {
		/* the window's submissions are complete and counted (a dead
		 * session freed its windows) */
		uint64_t ns = 0;
		if (s && s->state != RUDA_SESSION_DEAD) {
			ns = w->profile->gpu_ns;
			ruda__session_profile_free(s, w->profile);
		}
		if (s && s->state != RUDA_SESSION_DEAD && status == RUDA_OK) {
			Ruda__ProfileReply pr = RUDA__PROFILE_REPLY__INIT;
			pr.duration_ns = ns;
			Ruda__Reply reply = RUDA__REPLY__INIT;
			reply.id = w->request;
			reply.body_case = RUDA__REPLY__BODY_PROFILE;
			reply.profile = &pr;
			ruda__reply_send(s->conn, &reply);
		} else if (s && s->state != RUDA_SESSION_DEAD) {
			ruda__reply_status(s->conn, w->request, status, "%s",
					   failure_reason(status));
		}
		goto out;
	}
	if (!s || s->state == RUDA_SESSION_DEAD)
		goto out;
	if (status != RUDA_OK) {
		ruda__reply_status(s->conn, w->request, status, "%s", failure_reason(status));
		goto out;
	}
	const char *why = "";
	switch (w->kind) {
	case RUDA_WAIT_READ:
		if (w->nhandles == 2) /* {arena offset, size} */
			ruda__arena_bounce_out(s->arena, w->handles[0], w->handles[1]);
		ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
		break;
	case RUDA_WAIT_SYNC: {
		struct ruda_stream *st = w->stream ? ruda__handle_table_get(&s->streams, w->stream)
						   : &s->stream;
		if (w->settled_ok) {
			ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
			break;
		}
		ruda_status err = st ? st->error : RUDA_OK;
		ruda__reply_status(s->conn, w->request, err, "%s", st ? st->error_message : "");
		if (st) {
			st->error = RUDA_OK;
			st->error_message[0] = '\0';
		}
		break;
	}
	case RUDA_WAIT_SYNC_BUFFERS: {
		ruda_status st = first_buffer_error(s, w->handles, w->nhandles, &why);
		ruda__reply_status(s->conn, w->request, st, "%s", why);
		break;
	}
	case RUDA_WAIT_FENCE:
		ruda__session_arena_publish(s);
		ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
		break;
	case RUDA_WAIT_EXPORT: /* the buffer's zeros and the work before are done */
		ruda__buffers_export_now(s, w->request, w->handles[0]);
		break;
	case RUDA_WAIT_PROFILE:
		break;
	}
out:
	free(w);
}

static struct reply_waiter *reply_waiter_new(struct ruda_session *s, uint64_t request,
					     enum ruda_wait_kind kind, const uint64_t *handles,
					     size_t nhandles)
{
	struct reply_waiter *w = malloc(sizeof(*w) + nhandles * sizeof(uint64_t));
	if (!w)
		return NULL;
	w->base.done = reply_waiter_done;
	w->ctx = s->ctx;
	w->session = s->id;
	w->request = request;
	w->kind = kind;
	w->stream = s->current->id;
	w->device = s->device;
	w->profile = NULL;
	w->settled_ok = false;
	w->nhandles = nhandles;
	if (nhandles)
		memcpy(w->handles, handles, nhandles * sizeof(uint64_t));
	return w;
}

struct stream_values {
	uint64_t *values;
	size_t n, cap;
};

static void collect_last_value(struct ruda_stream *st, void *data)
{
	struct stream_values *v = data;
	if (st->last_value && v->n < v->cap)
		v->values[v->n++] = st->last_value;
}

/* Submit the session's work on every stream, then run `waiter` once all of
 * it is complete: each stream's last submission, as streams may be on
 * different queues. */
static void wait_session_work(struct ruda_session *s, struct ruda_waiter *waiter)
{
	ruda__session_submit_all(s);
	struct stream_values v = {.cap = s->streams.count + 1};
	v.values = malloc(v.cap * sizeof(uint64_t));
	if (!v.values) {
		waiter->done(waiter, RUDA_ERROR_OUT_OF_MEMORY);
		return;
	}
	ruda__session_each_stream(s, collect_last_value, &v);
	ruda__device_wait_values(s->device, v.values, v.n, waiter);
	free(v.values);
}

void ruda__wait_then_reply(struct ruda_session *s, uint64_t request, enum ruda_wait_kind kind,
			   const uint64_t *handles, size_t nhandles)
{
	struct reply_waiter *w = reply_waiter_new(s, request, kind, handles, nhandles);
	if (!w) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	if (kind == RUDA_WAIT_SYNC || kind == RUDA_WAIT_READ) {
		ruda__stream_wait(s->current, &w->base);
		return;
	}
	wait_session_work(s, &w->base);
}

/* Publish in the session's arena which timeline value ends request
 * `request` on `st` (every command of it recorded and submitted), or, when
 * `ok` is 0, that only the reply can answer it. A client watching the
 * progress page then sees its work end without waiting for the reply
 * (docs/design.md, "Fast sync"). */
void ruda__wait_publish(struct ruda_session *s, const struct ruda_stream *st, uint64_t request,
			bool ok)
{
	struct ruda_arena_sync_entry e = {
		.stream = st->id,
		.queue = st->queue, /* its value is that queue's on the progress page */
		.request = request,
		.value = ok ? st->last_value : RUDA_ARENA_SYNC_REPLY_ONLY,
	};
	ruda_arena_sync_write(ruda__arena_header(s->arena), &e);
}

/* Whether a request submitted on `st` just now is settled without error:
 * the stream's error so far, or the device's failure if its work never
 * ends, would be the reply's. */
bool ruda__wait_settled_ok(struct ruda_session *s, const struct ruda_stream *st)
{
	return st->error == RUDA_OK && ruda__device_failure(s->device) == RUDA_OK;
}

/* In a lane the stream's launches go in their rounds from this loop
 * iteration's end anyway; submitting them all now would put them in front
 * of every other stream's. */
void ruda__handle_flush(struct ruda_session *s, const Ruda__Request *req)
{
	(void)req;
	if (s->ctx->test_stall_flush_ms) /* the tests' stand-in for a blocking request */
		usleep(s->ctx->test_stall_flush_ms * 1000u);
	if (!s->current->lane)
		ruda__stream_submit(s->current);
}

/* A sync's answer is settled once its stream's work is submitted. In a
 * lane the stream's launches still waiting go in their rounds, not all at
 * once: the entry is published when the last of them is submitted
 * (session.c, stream_submitted). */
void ruda__handle_sync(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_stream *st = s->current;
	bool in_rounds = st->lane && ruda__stream_unsubmitted(st);
	if (!in_rounds)
		ruda__stream_submit(st); /* a refused submission is the stream's error */
	struct reply_waiter *w = reply_waiter_new(s, req->id, RUDA_WAIT_SYNC, NULL, 0);
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	w->settled_ok = ruda__wait_settled_ok(s, st);
	if (in_rounds) {
		st->publish_request = req->id;
		st->publish_ok = w->settled_ok;
		ruda__stream_wait_caught_up(st, &w->base);
		return;
	}
	ruda__wait_publish(s, st, req->id, w->settled_ok);
	ruda__stream_wait(st, &w->base);
}

void ruda__handle_check(struct ruda_session *s, const Ruda__Request *req)
{
	const char *why = "";
	ruda_status st = first_buffer_error(s, req->check->handles, req->check->n_handles, &why);
	ruda__reply_status(s->conn, req->id, st, "%s", why);
}

void ruda__handle_sync_buffers(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__SyncBuffers *sb = req->sync_buffers;
	/* only the last work that used them: an unrelated kernel running on
	 * the same stream is not waited for; each buffer's, as they may have
	 * been used on different queues */
	size_t cap = sb->n_handles * (RUDA_MAX_QUEUES + 1) + s->streams.count + 1;
	uint64_t *targets = malloc(cap * sizeof(uint64_t));
	size_t ntargets = 0;
	bool everything = false;
	if (!targets) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	for (size_t i = 0; i < sb->n_handles; i++) {
		struct ruda_session_buffer *e = ruda__request_buffer(s, sb->handles[i]);
		if (!e || !e->buffer)
			continue; /* its error is the reply */
		struct ruda_buffer *b = e->buffer;
		if (b->use_elsewhere) {
			/* a use on another stream was still recorded when it moved:
			 * bounded by everything the session has recorded */
			everything = true;
			continue;
		}
		int n = ruda__stream_buffer_done_values(b, targets + ntargets);
		if (n > 0)
			ntargets += (size_t)n;
	}
	if (everything) {
		ruda__session_submit_all(s);
		struct stream_values all = {.values = targets + ntargets, .cap = cap - ntargets};
		ruda__session_each_stream(s, collect_last_value, &all);
		ntargets += all.n;
	}
	struct reply_waiter *w =
		reply_waiter_new(s, req->id, RUDA_WAIT_SYNC_BUFFERS, sb->handles, sb->n_handles);
	if (!w) {
		free(targets);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	ruda__device_wait_values(s->device, targets, ntargets, &w->base);
	free(targets);
}

void ruda__handle_fence(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__wait_then_reply(s, req->id, RUDA_WAIT_FENCE, NULL, 0);
}

void ruda__handle_profile_start(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t window = req->profile_start->window;
	if (ruda__handle_table_get(&s->profiles, window)) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
				  "profile %llu: id already in use", (unsigned long long)window);
		return;
	}
	struct ruda_session_profile *p = ruda__session_profile_open(s);
	if (!p)
		return; /* ProfileEnd will not find it */
	if (ruda__handle_table_insert(&s->profiles, window, p) < 0)
		ruda__session_profile_free(s, p);
}

void ruda__handle_profile_end(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t window = req->profile_end->window;
	struct ruda_session_profile *p = ruda__handle_table_remove(&s->profiles, window);
	if (!p) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "no open profile %llu", (unsigned long long)window);
		return;
	}
	if (p->refused) {
		ruda__session_profile_free(s, p);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_BUSY,
				   "profile %llu: more than %u windows were open at once",
				   (unsigned long long)window, RUDA_SESSION_MAX_PROFILES);
		return;
	}
	struct reply_waiter *w = reply_waiter_new(s, req->id, RUDA_WAIT_PROFILE, NULL, 0);
	if (!w) {
		ruda__session_profile_free(s, p);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	ruda__session_profile_close(s, p);
	w->profile = p;
	wait_session_work(s, &w->base);
}

void ruda__handle_profile_abandon(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_profile *p =
		ruda__handle_table_remove(&s->profiles, req->profile_abandon->window);
	if (p)
		ruda__session_profile_free(s, p);
}
