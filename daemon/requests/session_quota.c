/*
 * What a session and its uid hold, against their quotas: device bytes of
 * buffers and host bytes of staging regions.
 */
#include <errno.h>
#include <stdbool.h>
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

/* The bytes every session of `uid` holds in `table` (uid -> uint64_t). */
static uint64_t uid_held(const struct ruda_handle_table *table, uid_t uid)
{
	uint64_t *bytes = ruda__handle_table_get(table, uid);
	return bytes ? *bytes : 0;
}

/* Whether `bytes` more stay within `limit` beside `held` and within
 * `uid_limit` beside `uid_total` (limits of 0: none). */
static bool within(uint64_t held, uint64_t limit, uint64_t uid_total, uint64_t uid_limit,
		   uint64_t bytes)
{
	return !(limit && (bytes > limit || held > limit - bytes)) &&
	       !(uid_limit && (bytes > uid_limit || uid_total > uid_limit - bytes));
}

/* Add `bytes` to the uid's count in `table` unless that or the session's
 * own count `*held` would pass its limit (0: none). */
static ruda_status charge(struct ruda_handle_table *table, uid_t uid, uint64_t *held,
			  uint64_t limit, uint64_t uid_limit, uint64_t bytes)
{
	uint64_t *uid_bytes = ruda__handle_table_get(table, uid);
	uint64_t uid_total = uid_bytes ? *uid_bytes : 0;
	if (!within(*held, limit, uid_total, uid_limit, bytes))
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

bool ruda__session_quota_allows(const struct ruda_session *s, uint64_t bytes)
{
	return within(s->bytes, s->quota, uid_held(&s->ctx->uid_bytes, s->uid), s->uid_quota,
		      bytes);
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

void ruda__session_quota_finish(struct ruda_session_context *ctx)
{
	uint64_t *bytes;
	while ((bytes = ruda__handle_table_pop(&ctx->uid_bytes, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_bytes);
	while ((bytes = ruda__handle_table_pop(&ctx->uid_staging, NULL)))
		free(bytes);
	ruda__handle_table_finish(&ctx->uid_staging);
}
