#include "requests/session_arena.h"

#include <stdlib.h>

#include "memory/arena.h"
#include "device/device.h"
#include "common/log.h"
#include "requests/session.h"

static uint64_t release_ms(struct ruda_session_context *ctx)
{
	if (!ctx->arena_release_read) {
		const char *env = getenv("RUDA_ARENA_RELEASE_MS");
		ctx->arena_release_ms = env && *env ? strtoull(env, NULL, 10) : RUDA_ARENA_RELEASE_MS;
		ctx->arena_release_read = 1;
	}
	return ctx->arena_release_ms;
}

static void arm(struct ruda_session_context *ctx);

/* Drop the device side of arenas no transfer has used for release_ms, and
 * no submission holds (a recorded or in-flight one keeps a reference). */
static void on_release_timer(uv_timer_t *timer)
{
	struct ruda_session_context *ctx = timer->data;
	uint64_t now = uv_now(ctx->loop), idle = release_ms(ctx);
	int attached = 0;
	const struct ruda_handle_table *t = &ctx->sessions;
	for (size_t i = 0; i < t->cap; i++) {
		struct ruda_session *s = t->slots[i].value;
		struct ruda_arena *a = s ? s->arena : NULL;
		if (!a || a->state != RUDA_ARENA_ATTACHED)
			continue;
		if (now - a->last_used_ms >= idle && ruda__arena_detach(a)) {
			log_debug("session %llu: arena released after %llu ms without a transfer",
				  (unsigned long long)s->id, (unsigned long long)(now - a->last_used_ms));
			continue;
		}
		attached = 1;
	}
	if (attached)
		arm(ctx);
}

static void arm(struct ruda_session_context *ctx)
{
	uint64_t idle = release_ms(ctx);
	if (!idle)
		return;
	if (!ctx->arena_timer && (ctx->arena_timer = malloc(sizeof(uv_timer_t)))) {
		uv_timer_init(ctx->loop, ctx->arena_timer);
		ctx->arena_timer->data = ctx;
	}
	if (ctx->arena_timer && !uv_is_active((uv_handle_t *)ctx->arena_timer))
		uv_timer_start(ctx->arena_timer, on_release_timer, idle, 0);
}

/* An import has ended: resume the sessions waiting for it. */
static void attached(void *data)
{
	struct ruda_session_context *ctx = data;
	arm(ctx);
	ruda__session_context_resume(ctx);
}

int ruda__session_arena_ready(struct ruda_session *s)
{
	struct ruda_arena *a = s->arena;
	a->last_used_ms = uv_now(s->ctx->loop);
	int r = ruda__arena_attach(&s->ctx->arena_pools[s->device->index], a, attached, s->ctx);
	if (r == 0)
		s->parked = 1;
	return r;
}

int ruda__session_region_ready(struct ruda_session *s, struct ruda_arena *region)
{
	int r = ruda__arena_attach(&s->ctx->arena_pools[s->device->index], region, attached,
				   s->ctx);
	if (r == 0) {
		s->parked = 1;
		s->parked_on = region; /* resumed once this one is done */
	}
	return r;
}

int ruda__session_region_import(struct ruda_session *s, struct ruda_arena *region)
{
	int r = ruda__arena_attach(&s->ctx->arena_pools[s->device->index], region, attached,
				   s->ctx);
	return r < 0 ? r : 0;
}

static void free_timer(uv_handle_t *handle)
{
	free(handle);
}

void ruda__session_arenas_finish(struct ruda_session_context *ctx)
{
	if (!ctx->arena_timer)
		return;
	uv_timer_stop(ctx->arena_timer);
	uv_close((uv_handle_t *)ctx->arena_timer, free_timer);
	ctx->arena_timer = NULL;
}
