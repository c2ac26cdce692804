/*
 * Buffer requests: Empty (allocate), Release, AllocationMode, ExportResource,
 * and the session's buffer ids (each a buffer, or the error that took its place).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "common/handle_table.h"
#include "device/device.h"
#include "exec/stream.h"
#include "memory/buffer.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

struct ruda_session_buffer *ruda__request_buffer(struct ruda_session *s, uint64_t id)
{
	return ruda__handle_table_get(&s->buffers, id);
}

/* Record `status` against buffer `id` unless it already carries an error. */
void ruda__request_mark_failed(struct ruda_session *s, uint64_t id, ruda_status status,
			       const char *message)
{
	struct ruda_session_buffer *b = ruda__request_buffer(s, id);
	if (!b || b->error != RUDA_OK)
		return;
	b->error = status;
	b->error_message = strdup(message);
}

/* The error of a buffer and why, or RUDA_OK. */
ruda_status ruda__request_buffer_status(struct ruda_session *s, uint64_t id, const char **why)
{
	struct ruda_session_buffer *b = ruda__request_buffer(s, id);
	if (!b) {
		*why = "no such buffer in this session";
		return RUDA_ERROR_INVALID_HANDLE;
	}
	*why = b->error_message ? b->error_message : "";
	return b->error;
}

/* Give id `handle` its buffer, or the error that took its place. Returns 0
 * (and releases the buffer) when out of memory. */
static int session_insert_buffer(struct ruda_session *s, uint64_t handle, struct ruda_buffer *buffer,
				 ruda_status error, const char *why)
{
	struct ruda_session_buffer *b = calloc(1, sizeof(*b));
	if (b) {
		b->buffer = buffer;
		b->error = error;
		b->error_message = error != RUDA_OK && why ? strdup(why) : NULL;
	}
	if (!b || ruda__handle_table_insert(&s->buffers, handle, b) < 0) {
		if (buffer) {
			ruda__session_uncharge_buffer(s, buffer);
			ruda__stream_forget_zero(buffer);
			ruda__buffer_put(buffer);
		}
		if (b)
			free(b->error_message);
		free(b);
		return 0;
	}
	return 1;
}

/* Whether `handle` may name a new buffer of the session; the reason it
 * may not goes to `why`. */
static ruda_status handle_free(struct ruda_session *s, uint64_t handle, char *why, size_t why_len)
{
	if (ruda__request_buffer(s, handle)) {
		snprintf(why, why_len, "buffer %llu: id already in use", (unsigned long long)handle);
		return RUDA_ERROR_INVALID_HANDLE;
	}
	if (s->buffers.count >= s->ctx->max_handles) {
		snprintf(why, why_len, "buffer %llu: more than %u buffers",
			 (unsigned long long)handle, s->ctx->max_handles);
		return RUDA_ERROR_BUSY;
	}
	return RUDA_OK;
}

/* Allocate a buffer charged to the session; the reason for a failure goes
 * to `why`. */
static ruda_status allocate(struct ruda_session *s, uint64_t handle, uint64_t size,
			    struct ruda_buffer **out, char *why, size_t why_len)
{
	ruda_status refused = handle_free(s, handle, why, why_len);
	if (refused != RUDA_OK)
		return refused;
	*out = NULL;
	ruda_status st = ruda__buffer_create_mode(s->device, size, s->allocation_mode, out);
	if (st == RUDA_OK) {
		st = ruda__session_charge_buffer(s, *out);
		if (st != RUDA_OK) {
			ruda__buffer_put(*out);
			*out = NULL; /* the id keeps the error, not the buffer */
		}
	}
	/* its memory may have held another client's bytes: zeros before
	 * anything reads it (docs/memory.md, "Isolation between clients") */
	if (st == RUDA_OK)
		ruda__stream_zero(s->current, *out);
	if (st == RUDA_ERROR_QUOTA)
		snprintf(why, why_len,
			 "buffer %llu: %llu bytes would exceed the memory quota (session %llu of %llu, "
			 "uid %llu of %llu)",
			 (unsigned long long)handle, (unsigned long long)size,
			 (unsigned long long)s->bytes, (unsigned long long)s->quota,
			 (unsigned long long)ruda__session_uid_bytes(s->ctx, s->uid),
			 (unsigned long long)s->uid_quota);
	else if (st == RUDA_ERROR_TOO_LARGE) {
		/* which limit: the device's largest buffer, its heap, or the
		 * driver refusing one allocation past maxMemoryAllocationSize */
		char limit[192];
		struct ruda_buffer_limits l = ruda__buffer_limits_of(s->device);
		if (ruda__buffer_limits_check(&l, size, limit, sizeof(limit)) == RUDA_OK)
			ruda__buffer_limits_refused(&l, size, st, limit, sizeof(limit));
		snprintf(why, why_len, "buffer %llu: allocating %llu bytes failed: %s",
			 (unsigned long long)handle, (unsigned long long)size, limit);
	} else if (st != RUDA_OK)
		snprintf(why, why_len, "buffer %llu: allocating %llu bytes failed: %s",
			 (unsigned long long)handle, (unsigned long long)size, ruda_strerror(st));
	return st;
}

/* Device memory a parked request waited for is ready: its session takes
 * the request again (`data`: the session context). */
static void memory_ready(void *data, const struct ruda_memory_job *job)
{
	struct ruda_session_context *ctx = data;
	for (struct ruda_session *s = ctx->throttled; s; s = s->throttled_next)
		if (s->parked_for == job)
			s->parked_for = NULL;
	ruda__session_context_resume(ctx);
}

/* Whether the request allocating `size` bytes as `handle` waits (parked)
 * while the thread pool makes the device memory it needs: the loop serves
 * the other clients meanwhile. Not when the request will be refused, nor
 * when it is handed again with its memory made. */
static bool wait_for_memory(struct ruda_session *s, uint64_t handle, uint64_t size)
{
	if (s->memory_made) {
		s->memory_made = 0;
		return false;
	}
	char why[128];
	if (handle_free(s, handle, why, sizeof(why)) != RUDA_OK ||
	    !ruda__session_quota_allows(s, size))
		return false;
	return ruda__session_park_for_memory(s, s->device, size, s->allocation_mode);
}

bool ruda__session_park_for_memory(struct ruda_session *s, struct ruda_device *device,
				   uint64_t size, int mode)
{
	if (s->memory_made) {
		s->memory_made = 0;
		return false;
	}
	const struct ruda_memory_job *job =
		ruda__buffer_prepare(device, size, mode, memory_ready, s->ctx);
	if (!job)
		return false;
	s->parked = 1;
	s->parked_for = job;
	s->memory_made = 1;
	return true;
}

void ruda__handle_empty(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Empty *e = req->empty;
	struct ruda_stream *st = s->current;
	char why[256];
	struct ruda_buffer *buffer = NULL;
	if (wait_for_memory(s, e->handle, e->size))
		return; /* parked: it runs again once the memory is made */
	ruda_status status = allocate(s, e->handle, e->size, &buffer, why, sizeof(why));
	if (e->reply) {
		/* try_empty: the verdict now, and no failed id left behind */
		if (status == RUDA_OK && !session_insert_buffer(s, e->handle, buffer, RUDA_OK, NULL))
			status = RUDA_ERROR_OUT_OF_MEMORY;
		ruda__reply_status(s->conn, req->id, status, "%s", status == RUDA_OK ? "" : why);
		return;
	}
	if (status != RUDA_OK) {
		ruda__stream_fail(st, status, "%s", why);
		if (status == RUDA_ERROR_INVALID_HANDLE || status == RUDA_ERROR_BUSY)
			return; /* the existing id stays as it was */
	}
	if (!session_insert_buffer(s, e->handle, buffer, status, why))
		ruda__stream_fail(st, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
}

static void release_buffer(struct ruda_session *s, uint64_t id)
{
	struct ruda_session_buffer *b = ruda__handle_table_remove(&s->buffers, id);
	if (!b) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
				  "release: no buffer %llu in this session", (unsigned long long)id);
		return;
	}
	if (b->buffer) {
		ruda__session_uncharge_buffer(s, b->buffer);
		ruda__stream_forget_zero(b->buffer); /* never used: no fill needed */
		ruda__buffer_put(b->buffer);
	}
	free(b->error_message);
	free(b);
}

void ruda__handle_release(struct ruda_session *s, const Ruda__Request *req)
{
	for (size_t i = 0; i < req->release->n_handles; i++)
		release_buffer(s, req->release->handles[i]);
}

void ruda__handle_allocation_mode(struct ruda_session *s, const Ruda__Request *req)
{
	int mode = req->allocation_mode->mode;
	if (mode < RUDA_ALLOCATION_AUTO || mode > RUDA_ALLOCATION_DEDICATED) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_ARGUMENT,
				  "allocation mode %d (request %llu) is none of auto, persistent, "
				  "dedicated", mode, (unsigned long long)req->id);
		return;
	}
	s->allocation_mode = mode;
}

/* Export `id`'s memory: the checks, then the fd. */
void ruda__buffers_export_now(struct ruda_session *s, uint64_t request, uint64_t id)
{
	const char *reason;
	ruda_status st = ruda__request_buffer_status(s, id, &reason);
	if (st != RUDA_OK) {
		ruda__reply_status(s->conn, request, st, "buffer %llu: %s",
				   (unsigned long long)id, reason);
		return;
	}
	struct ruda_buffer *b = ruda__request_buffer(s, id)->buffer;
	struct ruda_device *d = s->device;
	if (!d->get_memory_fd) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_UNSUPPORTED,
				   "device %u cannot export memory: %s", d->index,
				   d->export_off);
		return;
	}
	if (!ruda__memory_exportable(&b->memory)) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_INVALID_ARGUMENT,
				   "buffer %llu lives in pooled memory shared with other "
				   "buffers; allocate it in dedicated mode to export it",
				   (unsigned long long)id);
		return;
	}
	VkMemoryGetFdInfoKHR info = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
		.memory = b->memory.memory,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	int fd = -1;
	if (d->get_memory_fd(d->vk, &info, &fd) != VK_SUCCESS || fd < 0) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_INTERNAL,
				   "vkGetMemoryFdKHR failed for buffer %llu",
				   (unsigned long long)id);
		return;
	}
	Ruda__ResourceReply rr = RUDA__RESOURCE_REPLY__INIT;
	rr.memory_size = b->memory.size; /* the allocation's, exactly */
	rr.offset = b->memory.offset;
	rr.size = b->size;
	rr.memory_type_index = d->allocator.type;
	rr.device_uuid.data = d->device_uuid;
	rr.device_uuid.len = VK_UUID_SIZE;
	/* what an importer repeats: the buffer the memory is dedicated to */
	rr.driver_uuid.data = d->driver_uuid;
	rr.driver_uuid.len = VK_UUID_SIZE;
	rr.dedicated = 1;
	rr.buffer_size = b->vk_size;
	rr.buffer_usage = RUDA_BUFFER_USAGE;
	rr.handle_type = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT;
	rr.memory_property_flags = d->memory.memoryTypes[d->allocator.type].propertyFlags;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = request;
	reply.body_case = RUDA__REPLY__BODY_RESOURCE;
	reply.resource = &rr;
	ruda__reply_fd(s->conn, &reply, fd);
}

/* The importer reads the memory on its own, unordered with rudad's queue:
 * the fd goes out once the buffer's zero fill (and the session's work
 * before the export) has completed, never before. */
void ruda__handle_export_resource(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t id = req->export_resource->handle;
	struct ruda_session_buffer *e = ruda__request_buffer(s, id);
	if (e && e->buffer)
		ruda__stream_fill_now(e->buffer);
	ruda__wait_then_reply(s, req->id, RUDA_WAIT_EXPORT, &id, 1);
}
