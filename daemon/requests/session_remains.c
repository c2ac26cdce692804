/*
 * The buffers and kernels of closed sessions, released a batch per loop
 * iteration so that other clients are served in between (a session may
 * hold a million).
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

bool ruda__session_remains_release(struct ruda_session_context *ctx, size_t max)
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
void ruda__session_remains_defer(struct ruda_session_context *ctx,
				 struct ruda_handle_table *buffers,
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

void ruda__session_remains_finish(struct ruda_session_context *ctx)
{
	ruda__session_remains_release(ctx, SIZE_MAX);
	if (ctx->remains_idle) {
		uv_idle_stop(ctx->remains_idle);
		uv_close((uv_handle_t *)ctx->remains_idle, ruda__session_free_closed);
		ctx->remains_idle = NULL;
	}
}
