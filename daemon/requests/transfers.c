/*
 * Transfer requests: Write and Read through the arena or a staging region,
 * StagingAttach and StagingDetach.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ruda/status.h>

#include "device/device.h"
#include "exec/stream.h"
#include "memory/arena.h"
#include "memory/buffer.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "requests/session_arena.h"
#include "requests/staging.h"
#include "ruda.pb-c.h"

/* The bytes of a Write or Read naming staging region `region`: it exists and
 * holds them. */
static ruda_status staging_target(struct ruda_session *s, uint64_t region, uint64_t offset,
				  uint64_t size, struct ruda_arena **out, char *why, size_t why_len)
{
	struct ruda_arena *r = ruda__staging_get(s, region);
	if (!r) {
		snprintf(why, why_len, "no staging region %llu in this session",
			 (unsigned long long)region);
		return RUDA_ERROR_INVALID_HANDLE;
	}
	if (!ruda__range_ok(offset, size, r->size)) {
		snprintf(why, why_len, "staging bytes %llu..%llu lie outside region %llu's %llu",
			 (unsigned long long)offset, (unsigned long long)(offset + size),
			 (unsigned long long)region, (unsigned long long)r->size);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	*out = r;
	return RUDA_OK;
}

/* Common checks of Write and Read: the buffer, its range and the arena's
 * (or the staging region's, *region set, when `region_id` is nonzero). */
static ruda_status transfer_target(struct ruda_session *s, uint64_t id, uint64_t offset,
				   uint64_t region_id, uint64_t arena_offset, uint64_t size,
				   struct ruda_buffer **out, struct ruda_arena **region,
				   char *why, size_t why_len)
{
	*region = NULL;
	if (region_id) {
		ruda_status rs = staging_target(s, region_id, arena_offset, size, region, why,
						why_len);
		if (rs != RUDA_OK)
			return rs;
	}
	const char *reason;
	ruda_status st = ruda__request_buffer_status(s, id, &reason);
	if (st != RUDA_OK) {
		snprintf(why, why_len, "buffer %llu: %s", (unsigned long long)id, reason);
		return st;
	}
	struct ruda_buffer *b = ruda__request_buffer(s, id)->buffer;
	if (!ruda__range_ok(offset, size, b->size)) {
		snprintf(why, why_len, "buffer %llu: bytes %llu..%llu lie outside its %llu bytes",
			 (unsigned long long)id, (unsigned long long)offset,
			 (unsigned long long)(offset + size), (unsigned long long)b->size);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	if (!region_id && !ruda__arena_contains(s->arena, arena_offset, size)) {
		snprintf(why, why_len,
			 "arena bytes %llu..%llu lie outside the data space %u..%llu",
			 (unsigned long long)arena_offset, (unsigned long long)(arena_offset + size),
			 RUDA_ARENA_DATA_OFFSET, (unsigned long long)s->arena->size);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	*out = b;
	if (region_id) {
		/* its import may still run (StagingAttach started it), or have failed */
		int ready = ruda__session_region_ready(s, *region);
		if (ready == 0)
			*out = NULL; /* the request waits for the region's import */
		if (ready < 0) {
			snprintf(why, why_len,
				 "staging region %llu: importing its %llu bytes failed: %s (the "
				 "next use of the region tries again)",
				 (unsigned long long)region_id, (unsigned long long)(*region)->size,
				 strerror(-ready));
			return ready == -ENOMEM ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
		}
	}
	if (!region_id && size) {
		int ready = ruda__session_arena_ready(s);
		if (ready == 0)
			*out = NULL; /* the request waits for the arena's import */
		if (ready < 0) {
			snprintf(why, why_len, "cannot %s the session's arena: %s",
				 s->device->import_alignment ? "import" : "make a bounce buffer for",
				 strerror(-ready));
			return ready == -ENOMEM ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
		}
	}
	return RUDA_OK;
}

void ruda__handle_write(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Write *w = req->write;
	char why[256];
	struct ruda_buffer *b;
	struct ruda_arena *region;
	ruda_status st = transfer_target(s, w->handle, w->offset, w->region, w->arena_offset,
					 w->size, &b, &region, why, sizeof(why));
	if (st == RUDA_OK && !b)
		return; /* parked: it runs again once the arena (or region) is imported */
	if (st == RUDA_OK && region)
		st = ruda__stream_copy_region(s->current, region, w->arena_offset, b, w->offset,
					      w->size, 1);
	else if (st == RUDA_OK)
		st = ruda__stream_write(s->current, b, w->offset, w->arena_offset, w->size);
	if (st == RUDA_OK)
		ruda__stream_note_write(s->current, req->id);
	if (st == RUDA_OK)
		s->usage.bytes_uploaded += w->size;
	if (st != RUDA_OK) {
		if (st != RUDA_ERROR_INVALID_HANDLE)
			ruda__request_mark_failed(s, w->handle, st, why);
		ruda__stream_fail(s->current, st, "write (request %llu): %s",
				  (unsigned long long)req->id, why);
	}
	ruda__session_arena_used(s, req->id);
}

/* A read into a staging region is watched by its client as a sync is
 * (libclient/staging.c): it learns from the arena when its copy ends, or
 * that the reply must say. A read into the arena is not: its bytes may
 * still need copying out of a bounce buffer when the reply goes. */
void ruda__handle_read(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Read *r = req->read;
	char why[256] = "out of memory";
	struct ruda_buffer *b;
	struct ruda_arena *region;
	ruda_status st = transfer_target(s, r->handle, r->offset, r->region, r->arena_offset,
					 r->size, &b, &region, why, sizeof(why));
	if (st == RUDA_OK && !b)
		return; /* parked: it runs again once the arena (or region) is imported */
	if (st == RUDA_OK && region)
		st = ruda__stream_copy_region(s->current, region, r->arena_offset, b, r->offset,
					      r->size, 0);
	else if (st == RUDA_OK)
		st = ruda__stream_read(s->current, b, r->offset, r->arena_offset, r->size);
	if (st != RUDA_OK) {
		if (r->region)
			ruda__wait_publish(s, s->current, req->id, false);
		ruda__reply_status(s->conn, req->id, st, "%s", why);
		return;
	}
	s->usage.bytes_downloaded += r->size;
	if (region) {
		ruda__stream_submit(s->current);
		ruda__wait_publish(s, s->current, req->id, ruda__wait_settled_ok(s, s->current));
	}
	/* where the bytes land, for a bounce-buffer arena to copy out then */
	uint64_t span[2] = {r->arena_offset, r->size};
	ruda__wait_then_reply(s, req->id, RUDA_WAIT_READ, span, region ? 0 : 2);
}

void ruda__handle_staging_attach(struct ruda_session *s, const Ruda__Request *req,
				 int request_fd)
{
	const Ruda__StagingAttach *a = req->staging_attach;
	char why[256] = "";
	ruda_status st = RUDA_ERROR_INVALID_ARGUMENT;
	if (request_fd < 0)
		snprintf(why, sizeof(why), "StagingAttach without its memfd");
	else
		st = ruda__staging_attach(s, a->region, a->size, request_fd, why, sizeof(why));
	ruda__reply_status(s->conn, req->id, st, "%s", st == RUDA_OK ? "" : why);
}

void ruda__handle_staging_detach(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__staging_detach(s, req->staging_detach->region);
}
