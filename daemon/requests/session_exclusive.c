/*
 * A session's exclusive lease: the device for it alone (ExclusiveBegin,
 * rudactl), rationed per uid, queued while another holds it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/handle_table.h"
#include "common/log.h"
#include "common/policy.h"
#include "device/device.h"
#include "exec/pipeline.h"
#include "memory/buffer.h"
#include "requests/reply.h"
#include "requests/session.h"

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

bool ruda__session_exclusive_begin(struct ruda_session *s, uint64_t request, uint32_t timeout_ms)
{
	struct ruda_session_context *ctx = s->ctx;
	if (ctx->exclusive == s->id) {
		/* held already: granted again, but it ends when it would have
		 * (asking again does not make a lease longer) */
		ruda__reply_status(s->conn, request, RUDA_OK, NULL);
		return true;
	}
	if (!ctx->exclusive && !ctx->exclusive_waiting && !exclusive_not_before(ctx, s)) {
		exclusive_grant(s, request, timeout_ms);
		return true;
	}
	struct ruda_exclusive_wait *w = malloc(sizeof(*w)), **tail = &ctx->exclusive_waiting;
	if (!w) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return false;
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
void ruda__session_exclusive_forget(struct ruda_session *s)
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

void ruda__session_exclusive_finish(struct ruda_session_context *ctx)
{
	while (ctx->exclusive_waiting) {
		struct ruda_exclusive_wait *w = ctx->exclusive_waiting;
		ctx->exclusive_waiting = w->next;
		free(w);
	}
	uint64_t *bytes;
	while ((bytes = ruda__handle_table_pop(&ctx->uid_exclusive, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_exclusive);
	if (ctx->exclusive_cool_timer) {
		uv_timer_stop(ctx->exclusive_cool_timer);
		uv_close((uv_handle_t *)ctx->exclusive_cool_timer, ruda__session_free_closed);
		ctx->exclusive_cool_timer = NULL;
	}
	if (ctx->exclusive_timer) {
		uv_timer_stop(ctx->exclusive_timer);
		uv_close((uv_handle_t *)ctx->exclusive_timer, ruda__session_free_closed);
		ctx->exclusive_timer = NULL;
	}
}
