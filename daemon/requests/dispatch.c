#include "requests/dispatch.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "requests/admin.h"
#include "memory/arena.h"
#include "memory/client_arena.h"
#include "requests/session_arena.h"
#include "memory/buffer.h"
#include "device/device.h"
#include "requests/device_info.h"
#include "requests/collective.h"
#include "exec/throughput_cache.h"
#include "requests/to_client.h"
#include "exec/graph.h"
#include "requests/handlers.h"
#include "exec/indirect.h"
#include "common/launch_decode.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "common/config.h"
#include "common/policy.h"
#include "ruda.pb-c.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "common/spirv.h"
#include "requests/staging.h"
#include "exec/stream.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

#define MAX_ENTRY_POINT 255u

/* ---- helpers ------------------------------------------------------------ */

static struct ruda_session_buffer *buffer_entry(struct ruda_session *s, uint64_t id)
{
	return ruda__handle_table_get(&s->buffers, id);
}

/* Record `status` against buffer `id` unless it already carries an error. */
static void mark_failed(struct ruda_session *s, uint64_t id, ruda_status status,
			const char *message)
{
	struct ruda_session_buffer *b = buffer_entry(s, id);
	if (!b || b->error != RUDA_OK)
		return;
	b->error = status;
	b->error_message = strdup(message);
}

/* The error of a buffer and why, or RUDA_OK. */
static ruda_status buffer_status(struct ruda_session *s, uint64_t id, const char **why)
{
	struct ruda_session_buffer *b = buffer_entry(s, id);
	if (!b) {
		*why = "no such buffer in this session";
		return RUDA_ERROR_INVALID_HANDLE;
	}
	*why = b->error_message ? b->error_message : "";
	return b->error;
}

static int range_ok(uint64_t offset, uint64_t size, uint64_t limit)
{
	return offset <= limit && size <= limit - offset;
}

/* Replies that wait for the GPU. */
enum wait_kind { WAIT_READ, WAIT_SYNC, WAIT_SYNC_BUFFERS, WAIT_FENCE, WAIT_PROFILE, WAIT_EXPORT };

struct reply_waiter {
	struct ruda_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session;
	uint64_t request;
	enum wait_kind kind;
	uint32_t stream;
	struct ruda_device *device; /* borrowed: devices outlive sessions */
	struct ruda_session_profile *profile; /* WAIT_PROFILE: the session's, while it lives */
	/* WAIT_SYNC: the stream had no error when the sync came, as the arena
	 * told the client (errors recorded later are the next sync's) */
	int settled_ok;
	size_t nhandles;
	uint64_t handles[];
};

static ruda_status first_buffer_error(struct ruda_session *s, const uint64_t *ids, size_t n,
				      const char **why)
{
	for (size_t i = 0; i < n; i++) {
		ruda_status st = buffer_status(s, ids[i], why);
		if (st != RUDA_OK)
			return st;
	}
	return RUDA_OK;
}

static void export_now(struct ruda_session *s, uint64_t request, uint64_t id);

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
	if (w->kind == WAIT_PROFILE) {
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
	case WAIT_READ:
		if (w->nhandles == 2) /* {arena offset, size} */
			ruda__arena_bounce_out(s->arena, w->handles[0], w->handles[1]);
		ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
		break;
	case WAIT_SYNC: {
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
	case WAIT_SYNC_BUFFERS: {
		ruda_status st = first_buffer_error(s, w->handles, w->nhandles, &why);
		ruda__reply_status(s->conn, w->request, st, "%s", why);
		break;
	}
	case WAIT_FENCE:
		ruda__session_arena_publish(s);
		ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
		break;
	case WAIT_EXPORT: /* the buffer's zeros and the work before are done */
		export_now(s, w->request, w->handles[0]);
		break;
	case WAIT_PROFILE:
		break;
	}
out:
	free(w);
}

static struct reply_waiter *reply_waiter_new(struct ruda_session *s, uint64_t request,
					     enum wait_kind kind, const uint64_t *handles,
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
	w->settled_ok = 0;
	w->nhandles = nhandles;
	if (nhandles)
		memcpy(w->handles, handles, nhandles * sizeof(uint64_t));
	return w;
}

static void wait_then_reply(struct ruda_session *s, uint64_t request, enum wait_kind kind,
			    const uint64_t *handles, size_t nhandles)
{
	struct reply_waiter *w = reply_waiter_new(s, request, kind, handles, nhandles);
	if (!w) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	if (kind == WAIT_SYNC || kind == WAIT_READ) {
		ruda__stream_wait(s->current, &w->base);
		return;
	}
	/* the session's work on every stream: on the device's one queue, done
	 * once the newest submission is */
	ruda__session_submit_all(s);
	ruda__stream_wait(ruda__session_latest_stream(s), &w->base);
}

/* Publish in the session's arena which timeline value ends request
 * `request` on `st` (every command of it recorded and submitted), or, when
 * `ok` is 0, that only the reply can answer it. A client watching the
 * progress page then sees its work end without waiting for the reply
 * (docs/design.md, "Fast sync"). */
static void publish_watch(struct ruda_session *s, const struct ruda_stream *st, uint64_t request,
			  int ok)
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
static int settled_ok(struct ruda_session *s, const struct ruda_stream *st)
{
	return st->error == RUDA_OK && ruda__device_failure(s->device) == RUDA_OK;
}

/* ---- handshake ---------------------------------------------------------- */

static void fill_device_info(Ruda__DeviceInfo *info, const struct ruda_device *d,
			     uint32_t *count, uint32_t *size)
{
	const VkPhysicalDeviceLimits *l = &d->props.limits;
	ruda__device_info__init(info);
	info->index = d->index;
	info->name = (char *)d->props.deviceName;
	info->vendor_id = d->props.vendorID;
	info->device_id = d->props.deviceID;
	switch (d->props.deviceType) {
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU:
		info->type = RUDA__DEVICE_TYPE__DEVICE_INTEGRATED_GPU;
		break;
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU:
		info->type = RUDA__DEVICE_TYPE__DEVICE_DISCRETE_GPU;
		break;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU:
		info->type = RUDA__DEVICE_TYPE__DEVICE_VIRTUAL_GPU;
		break;
	case VK_PHYSICAL_DEVICE_TYPE_CPU:
		info->type = RUDA__DEVICE_TYPE__DEVICE_CPU;
		break;
	default:
		info->type = RUDA__DEVICE_TYPE__DEVICE_OTHER;
	}
	info->api_version = d->props.apiVersion;
	info->driver_version = d->props.driverVersion;
	info->pipeline_cache_uuid.data = (uint8_t *)d->props.pipelineCacheUUID;
	info->pipeline_cache_uuid.len = VK_UUID_SIZE;
	info->max_buffer_size = d->max_allocation_size;
	info->max_storage_buffer_range = l->maxStorageBufferRange;
	info->min_storage_buffer_offset_alignment = (uint32_t)l->minStorageBufferOffsetAlignment;
	info->max_push_constants_size = l->maxPushConstantsSize;
	info->max_bindings = d->max_push_descriptors < RUDA_PIPELINE_MAX_BINDINGS
				     ? d->max_push_descriptors
				     : RUDA_PIPELINE_MAX_BINDINGS;
	memcpy(count, l->maxComputeWorkGroupCount, 3 * sizeof(uint32_t));
	memcpy(size, l->maxComputeWorkGroupSize, 3 * sizeof(uint32_t));
	info->n_max_workgroup_count = 3;
	info->max_workgroup_count = count;
	info->n_max_workgroup_size = 3;
	info->max_workgroup_size = size;
	info->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
	info->subgroup_size = d->subgroup_size;
	uint64_t local = 0;
	for (uint32_t i = 0; i < d->memory.memoryHeapCount; i++)
		if ((d->memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) &&
		    d->memory.memoryHeaps[i].size > local)
			local = d->memory.memoryHeaps[i].size;
	info->device_local_bytes = local;
	info->host_import = d->import_alignment != 0;
}

/* The fd that came with the request being handled (StagingAttach, a Hello
 * with client_arena), or -1; whoever takes it closes it. */
static int request_fd = -1;

/* The session's arena at Hello: the client's own memfd, or a fresh one from
 * the pool (*fd: a copy to pass back). RUDA_OK, or a status and `why`. */
static ruda_status open_arena(struct ruda_session *s, const Ruda__Hello *h, int *fd, char *why,
			      size_t why_len)
{
	*fd = -1;
	if (h->client_arena) {
		if (request_fd < 0) {
			snprintf(why, why_len, "Hello asks for a client arena but carries no memfd");
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		return ruda__client_arena_adopt(s->device, request_fd, h->client_arena_size,
						&s->arena, why, why_len);
	}
	if (ruda__arena_pool_take(&s->ctx->arena_pools[s->device->index], &s->arena) < 0) {
		snprintf(why, why_len, "cannot create the session's shared memory");
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	*fd = dup(s->arena->fd);
	if (*fd < 0) {
		snprintf(why, why_len, "out of file descriptors");
		return RUDA_ERROR_IO;
	}
	return RUDA_OK;
}

static void handle_hello(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Hello *h = req->hello;
	struct ruda_session_context *ctx = s->ctx;
	if (s->state != RUDA_SESSION_HELLO) {
		ruda__session_violation(s, "second Hello");
		return;
	}
	ruda__session_hello_done(s);
	snprintf(s->name, sizeof(s->name), "%s", h->client_name ? h->client_name : "");
	for (unsigned char *c = (unsigned char *)s->name; *c; c++)
		if (*c < 0x20 || *c == 0x7f || *c == '"')
			*c = '?'; /* keep log lines one line each; UTF-8 stays */
	if (h->protocol_version != RUDA_PROTOCOL_VERSION) {
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_VERSION,
				   "protocol version %u is not supported; rudad %s speaks %u",
				   h->protocol_version, RUDA_VERSION, RUDA_PROTOCOL_VERSION);
		return;
	}
	if (h->priority > RUDA_PRIORITY_HIGHEST) {
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "priority %u is out of range: %u (lowest) to %u "
				   "(highest), or 0 for the default",
				   h->priority, RUDA_PRIORITY_LOWEST, RUDA_PRIORITY_HIGHEST);
		return;
	}
	/* without a policy, as the default policy: up to normal */
	struct ruda_rights no_policy = {.max_priority = RUDA_PRIORITY_NORMAL};
	s->priority = ruda__policy_priority(&no_policy, h->priority);
	s->admin = s->uid == 0;
	s->exclusive_allowed = 1;
	if (ctx->policy) {
		struct ruda_rights rights;
		char described[256];
		ruda__policy_check_peer(ctx->policy, ruda__connection_fd(s->conn), s->uid, s->gid,
					&rights);
		if (!rights.may_connect) {
			log_warn("session %llu (uid %u, pid %d, \"%s\"): refused: %s",
				 (unsigned long long)s->id, s->uid, s->pid, s->name, rights.why);
			s->state = RUDA_SESSION_CLOSING;
			ruda__reply_status(s->conn, req->id, RUDA_ERROR_PERMISSION,
					   "rudad's policy refuses this client: %s", rights.why);
			return;
		}
		log_debug("session %llu (uid %u, pid %d): %s", (unsigned long long)s->id, s->uid,
			  s->pid, ruda__rights_describe(&rights, described, sizeof(described)));
		/* fixed for the session's life: a reload applies to new clients
		 * (auto quotas once the device is known, below) */
		s->quota = rights.max_memory_per_client == RUDA_UNLIMITED
				   ? 0 : rights.max_memory_per_client;
		s->uid_quota = rights.max_memory_per_uid == RUDA_UNLIMITED
				       ? 0 : rights.max_memory_per_uid;
		s->staging_quota = rights.max_staging_per_client == RUDA_UNLIMITED
					   ? 0 : rights.max_staging_per_client;
		s->staging_uid_quota = rights.max_staging_per_uid == RUDA_UNLIMITED
					       ? 0 : rights.max_staging_per_uid;
		s->unchecked_allowed = rights.unchecked_launch;
		s->admin = rights.admin;
		s->exclusive_allowed = rights.exclusive;
		s->priority = ruda__policy_priority(&rights, h->priority);
	}
	char no_device[128];
	int device_index = ruda__device_info_resolve(ctx, h, no_device, sizeof(no_device));
	if (device_index < 0) {
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT, "%s", no_device);
		return;
	}
	s->device = ctx->devices[device_index];
	/* auto: a share of the heap buffers come from, leaving room for others */
	uint64_t heap = s->device->allocator.heap_size;
	if (s->quota == RUDA_QUOTA_AUTO)
		s->quota = heap / RUDA_QUOTA_AUTO_CLIENT_SHARE;
	if (s->uid_quota == RUDA_QUOTA_AUTO)
		s->uid_quota = heap - heap / RUDA_QUOTA_AUTO_UID_SHARE;
	int fd;
	char why[320];
	ruda_status arena_status = open_arena(s, h, &fd, why, sizeof(why));
	if (arena_status != RUDA_OK) {
		log_warn("session %llu (uid %u, pid %d, \"%s\"): refused: %s",
			 (unsigned long long)s->id, s->uid, s->pid, s->name, why);
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, arena_status, "%s", why);
		return;
	}
	ruda__stream_init(&s->stream, s->device, s->arena, &ctx->dirty);
	ruda__session_adopt_stream(s, &s->stream);
	s->state = RUDA_SESSION_READY;
	log_info("session %llu (uid %u, pid %d, \"%s\"): connected to device %u, priority %u",
		 (unsigned long long)s->id, s->uid, s->pid, s->name, s->device->index, s->priority);

	Ruda__DeviceInfo infos[ctx->ndevices ? ctx->ndevices : 1];
	Ruda__DeviceInfo *ptrs[ctx->ndevices ? ctx->ndevices : 1];
	uint32_t counts[ctx->ndevices ? ctx->ndevices : 1][3];
	uint32_t sizes[ctx->ndevices ? ctx->ndevices : 1][3];
	struct ruda_device_info_extra *extra = calloc(ctx->ndevices ? ctx->ndevices : 1,
						      sizeof(*extra));
	if (!extra) {
		if (fd >= 0)
			close(fd);
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		fill_device_info(&infos[i], ctx->devices[i], counts[i], sizes[i]);
		ruda__device_info_extend(&infos[i], ctx->devices[i], &extra[i]);
		ptrs[i] = &infos[i];
	}
	Ruda__HelloReply hr = RUDA__HELLO_REPLY__INIT;
	hr.protocol_version = RUDA_PROTOCOL_VERSION;
	hr.daemon_version = RUDA_VERSION;
	hr.session_id = s->id;
	hr.n_devices = ctx->ndevices;
	hr.devices = ptrs;
	hr.device_index = (uint32_t)device_index;
	hr.arena_size = s->arena->size;
	hr.arena_data_offset = RUDA_ARENA_DATA_OFFSET;
	hr.max_frame_size = RUDA_FRAME_MAX_PAYLOAD;
	hr.max_fds_per_frame = RUDA_FRAME_MAX_FDS;
	hr.max_buffer_size = s->device->max_allocation_size;
	hr.priority = s->priority;
	/* the arena (unless it is the client's own), then the progress page */
	int fds[2];
	uint16_t nfds = 0;
	if (fd >= 0)
		fds[nfds++] = fd;
	int progress = ruda__progress_dup(&s->device->progress);
	hr.progress_page = progress >= 0;
	if (progress >= 0)
		fds[nfds++] = progress;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_HELLO;
	reply.hello = &hr;
	if (nfds)
		ruda__reply_fds(s->conn, &reply, fds, nfds);
	else
		ruda__reply_send(s->conn, &reply);
	free(extra);
}

/* ---- memory ------------------------------------------------------------- */

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

/* Allocate a buffer charged to the session; the reason for a failure goes
 * to `why`. */
static ruda_status allocate(struct ruda_session *s, uint64_t handle, uint64_t size,
			    struct ruda_buffer **out, char *why, size_t why_len)
{
	if (buffer_entry(s, handle)) {
		snprintf(why, why_len, "buffer %llu: id already in use", (unsigned long long)handle);
		return RUDA_ERROR_INVALID_HANDLE;
	}
	if (s->buffers.count >= s->ctx->max_handles) {
		snprintf(why, why_len, "buffer %llu: more than %u buffers",
			 (unsigned long long)handle, s->ctx->max_handles);
		return RUDA_ERROR_BUSY;
	}
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
	else if (st != RUDA_OK)
		snprintf(why, why_len, "buffer %llu: allocating %llu bytes failed: %s",
			 (unsigned long long)handle, (unsigned long long)size, ruda_strerror(st));
	return st;
}

static void handle_empty(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Empty *e = req->empty;
	struct ruda_stream *st = s->current;
	char why[256];
	struct ruda_buffer *buffer = NULL;
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
	if (!range_ok(offset, size, r->size)) {
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
	ruda_status st = buffer_status(s, id, &reason);
	if (st != RUDA_OK) {
		snprintf(why, why_len, "buffer %llu: %s", (unsigned long long)id, reason);
		return st;
	}
	struct ruda_buffer *b = buffer_entry(s, id)->buffer;
	if (!range_ok(offset, size, b->size)) {
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

static void handle_write(struct ruda_session *s, const Ruda__Request *req)
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
			mark_failed(s, w->handle, st, why);
		ruda__stream_fail(s->current, st, "write (request %llu): %s",
				  (unsigned long long)req->id, why);
	}
	ruda__session_arena_used(s, req->id);
}

/* A read into a staging region is watched by its client as a sync is
 * (libclient/staging.c): it learns from the arena when its copy ends, or
 * that the reply must say. A read into the arena is not: its bytes may
 * still need copying out of a bounce buffer when the reply goes. */
static void handle_read(struct ruda_session *s, const Ruda__Request *req)
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
			publish_watch(s, s->current, req->id, 0);
		ruda__reply_status(s->conn, req->id, st, "%s", why);
		return;
	}
	s->usage.bytes_downloaded += r->size;
	if (region) {
		ruda__stream_submit(s->current);
		publish_watch(s, s->current, req->id, settled_ok(s, s->current));
	}
	/* where the bytes land, for a bounce-buffer arena to copy out then */
	uint64_t span[2] = {r->arena_offset, r->size};
	wait_then_reply(s, req->id, WAIT_READ, span, region ? 0 : 2);
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

static void handle_release(struct ruda_session *s, const Ruda__Request *req)
{
	for (size_t i = 0; i < req->release->n_handles; i++)
		release_buffer(s, req->release->handles[i]);
}

/* ---- kernels ------------------------------------------------------------ */

struct kernel_waiter {
	struct ruda_pipeline_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session, request, kernel;
	struct ruda_pipeline *pipeline; /* owned reference */
};

/* Give the session its kernel, or tell it why not. */
static void kernel_settle(struct ruda_session *s, struct kernel_waiter *w)
{
	struct ruda_pipeline *p = w->pipeline;
	if (p->state != RUDA_PIPELINE_READY) {
		ruda__reply_status(s->conn, w->request, p->status, "kernel %llu: %s",
				   (unsigned long long)w->kernel, p->error);
		ruda__pipeline_put(p);
		return;
	}
	struct ruda_session_kernel *k = malloc(sizeof(*k));
	int err = k ? ruda__handle_table_insert(&s->kernels, w->kernel, k) : -1;
	if (err) {
		free(k);
		ruda__pipeline_put(p);
		ruda__reply_status(s->conn, w->request,
				   err == -EEXIST ? RUDA_ERROR_INVALID_HANDLE
							  : RUDA_ERROR_OUT_OF_MEMORY,
				   "kernel %llu: %s", (unsigned long long)w->kernel,
				   err == -EEXIST ? "id already in use" : "out of memory");
		return;
	}
	k->pipeline = p;
	s->usage.kernels_registered++;
	ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
}

static void kernel_waiter_done(struct ruda_pipeline_waiter *base, struct ruda_pipeline *p)
{
	struct kernel_waiter *w = (struct kernel_waiter *)base;
	(void)p;
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (s && s->state == RUDA_SESSION_READY)
		kernel_settle(s, w);
	else
		ruda__pipeline_put(w->pipeline);
	free(w);
}

/* Specialization constants of a request, checked: 4- or 8-byte values,
 * distinct ids. */
static ruda_status spec_constants(const Ruda__KernelRegister *k, ruda_spec_constant *out,
				  char *why, size_t why_len)
{
	if (k->n_specialization > RUDA_PIPELINE_MAX_SPEC_CONSTANTS) {
		snprintf(why, why_len, "%zu specialization constants; at most %u",
			 k->n_specialization, RUDA_PIPELINE_MAX_SPEC_CONSTANTS);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < k->n_specialization; i++) {
		const Ruda__SpecConstant *c = k->specialization[i];
		if (c->value.len != 4 && c->value.len != 8) {
			snprintf(why, why_len, "specialization constant %u: %zu bytes, not 4 or 8",
				 c->id, c->value.len);
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		for (size_t j = 0; j < i; j++)
			if (out[j].id == c->id) {
				snprintf(why, why_len, "specialization constant %u given twice", c->id);
				return RUDA_ERROR_INVALID_ARGUMENT;
			}
		out[i] = (ruda_spec_constant){.id = c->id, .size = (uint32_t)c->value.len};
		memcpy(&out[i].value, c->value.data, c->value.len); /* 4 or 8: never empty */
	}
	return RUDA_OK;
}

static void handle_kernel_register(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__KernelRegister *k = req->kernel_register;
	const VkPhysicalDeviceLimits *l = &s->device->props.limits;
	struct ruda_pipeline_registry *reg = s->ctx->pipelines[s->device->index];
	uint32_t max_bindings = s->device->max_push_descriptors < RUDA_PIPELINE_MAX_BINDINGS
					? s->device->max_push_descriptors
					: RUDA_PIPELINE_MAX_BINDINGS;
	ruda_spec_constant spec[RUDA_PIPELINE_MAX_SPEC_CONSTANTS];
	const uint32_t *spirv = NULL;
	size_t spirv_size = 0;
	ruda_status st = RUDA_ERROR_INVALID_ARGUMENT;
	char why[256] = "";
	if (ruda__handle_table_get(&s->kernels, k->kernel)) {
		st = RUDA_ERROR_INVALID_HANDLE;
		snprintf(why, sizeof(why), "id already in use");
	} else if (k->binding_count > max_bindings)
		snprintf(why, sizeof(why), "%u bindings; the device allows %u", k->binding_count,
			 max_bindings);
	else if (k->push_constant_size % 4 || k->push_constant_size > l->maxPushConstantsSize)
		snprintf(why, sizeof(why),
			 "push-constant size %u: must be a multiple of 4 and at most %u",
			 k->push_constant_size, l->maxPushConstantsSize);
	else if (!k->entry_point || !*k->entry_point || strlen(k->entry_point) > MAX_ENTRY_POINT)
		snprintf(why, sizeof(why), "entry point name missing or over %u bytes",
			 MAX_ENTRY_POINT);
	else if (k->size == 0) {
		/* by hash: the module must already be here */
		const struct ruda_pipeline *known =
			k->module_hash.len == RUDA_SHA256_SIZE
				? ruda__pipeline_registry_find_module(reg, k->module_hash.data)
				: NULL;
		if (known) {
			spirv = known->spirv;
			spirv_size = known->spirv_size;
			st = spec_constants(k, spec, why, sizeof(why));
		} else {
			st = RUDA_ERROR_INVALID_HANDLE;
			snprintf(why, sizeof(why), "no module with that SHA-256 in rudad");
		}
	} else if (k->size % 4 || k->size < 20) {
		st = RUDA_ERROR_INVALID_KERNEL;
		snprintf(why, sizeof(why), "SPIR-V size %llu is not a whole module",
			 (unsigned long long)k->size);
	} else if (k->size > (uint64_t)RUDA_SPIRV_MAX_WORDS * 4) {
		/* refused before it is copied, hashed or validated */
		st = RUDA_ERROR_INVALID_KERNEL;
		snprintf(why, sizeof(why), "SPIR-V of %llu words is over rudad's limit of %u words",
			 (unsigned long long)k->size / 4, RUDA_SPIRV_MAX_WORDS);
	} else if (!ruda__arena_contains(s->arena, k->arena_offset, k->size)) {
		st = RUDA_ERROR_OUT_OF_RANGE;
		snprintf(why, sizeof(why), "SPIR-V bytes %llu..%llu lie outside the arena",
			 (unsigned long long)k->arena_offset,
			 (unsigned long long)(k->arena_offset + k->size));
	} else {
		spirv = (const uint32_t *)(s->arena->map + k->arena_offset);
		spirv_size = k->size;
		st = spec_constants(k, spec, why, sizeof(why));
	}
	if (st != RUDA_OK) {
		ruda__session_arena_used(s, req->id);
		ruda__reply_status(s->conn, req->id, st, "kernel %llu: %s",
				   (unsigned long long)k->kernel, why);
		return;
	}

	struct kernel_waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	w->base.done = kernel_waiter_done;
	w->ctx = s->ctx;
	w->session = s->id;
	w->request = req->id;
	w->kernel = k->kernel;
	struct ruda_pipeline_key key = {
		.spirv = spirv,
		.spirv_size = spirv_size,
		.entry_point = k->entry_point,
		.binding_count = k->binding_count,
		.push_constant_size = k->push_constant_size,
		.spec = spec,
		.nspec = (uint32_t)k->n_specialization,
	};
	st = ruda__pipeline_acquire(reg, &key, &w->base, &w->pipeline);
	/* the module has been copied or compared: its arena bytes are free */
	ruda__session_arena_used(s, req->id);
	if (st != RUDA_OK) {
		free(w);
		ruda__reply_status(s->conn, req->id, st, "kernel %llu: cannot compile",
				   (unsigned long long)k->kernel);
		return;
	}
	if (w->pipeline->state != RUDA_PIPELINE_COMPILING) {
		kernel_settle(s, w);
		free(w);
	}
	/* else the waiter settles it when the compilation is done */
}

static void handle_kernel_lookup(struct ruda_session *s, const Ruda__Request *req)
{
	const ProtobufCBinaryData *h = &req->kernel_lookup->module_hash;
	struct ruda_pipeline_registry *reg = s->ctx->pipelines[s->device->index];
	if (h->len == RUDA_SHA256_SIZE && ruda__pipeline_registry_find_module(reg, h->data))
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
	else
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "no module with that SHA-256 in rudad");
}

static void handle_kernel_release(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_kernel *k =
		ruda__handle_table_remove(&s->kernels, req->kernel_release->kernel);
	if (!k) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
				  "release: no kernel %llu in this session",
				  (unsigned long long)req->kernel_release->kernel);
		return;
	}
	ruda__pipeline_put(k->pipeline);
	free(k);
}

/* ---- launch ------------------------------------------------------------- */

static ruda_status launch_bindings(struct ruda_session *s, const Ruda__Launch *l,
				   struct ruda_binding *out, char *why, size_t why_len)
{
	const VkPhysicalDeviceLimits *lim = &s->device->props.limits;
	for (size_t i = 0; i < l->n_bindings; i++) {
		const Ruda__Binding *bd = l->bindings[i];
		const char *reason;
		ruda_status st = buffer_status(s, bd->handle, &reason);
		if (st != RUDA_OK) {
			snprintf(why, why_len, "binding %zu, buffer %llu: %s", i,
				 (unsigned long long)bd->handle, reason);
			return st;
		}
		struct ruda_buffer *b = buffer_entry(s, bd->handle)->buffer;
		uint64_t size = bd->size ? bd->size : (bd->offset < b->size ? b->size - bd->offset : 0);
		if (!range_ok(bd->offset, size, b->size) || size == 0) {
			snprintf(why, why_len,
				 "binding %zu, buffer %llu: bytes %llu..%llu lie outside its %llu bytes",
				 i, (unsigned long long)bd->handle, (unsigned long long)bd->offset,
				 (unsigned long long)(bd->offset + size), (unsigned long long)b->size);
			return RUDA_ERROR_OUT_OF_RANGE;
		}
		if (bd->offset % lim->minStorageBufferOffsetAlignment) {
			snprintf(why, why_len, "binding %zu: offset %llu is not a multiple of %llu", i,
				 (unsigned long long)bd->offset,
				 (unsigned long long)lim->minStorageBufferOffsetAlignment);
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		if (size > lim->maxStorageBufferRange) {
			snprintf(why, why_len, "binding %zu: %llu bytes; the device binds at most %u",
				 i, (unsigned long long)size, lim->maxStorageBufferRange);
			return RUDA_ERROR_TOO_LARGE;
		}
		out[i] = (struct ruda_binding){.buffer = b, .offset = bd->offset, .size = size};
	}
	return RUDA_OK;
}

/* The buffer and offset of a launch's dynamic counts, checked: 12 bytes
 * inside the buffer at a multiple of 4. */
static ruda_status dynamic_count(struct ruda_session *s, const Ruda__DynamicCount *dc,
				 struct ruda_launch_count *out, char *why, size_t why_len)
{
	const char *reason;
	ruda_status st = buffer_status(s, dc->handle, &reason);
	if (st != RUDA_OK) {
		snprintf(why, why_len, "count buffer %llu: %s", (unsigned long long)dc->handle,
			 reason);
		return st;
	}
	struct ruda_buffer *b = buffer_entry(s, dc->handle)->buffer;
	if (!range_ok(dc->offset, 12, b->size)) {
		snprintf(why, why_len, "count buffer %llu: bytes %llu..%llu lie outside its %llu bytes",
			 (unsigned long long)dc->handle, (unsigned long long)dc->offset,
			 (unsigned long long)dc->offset + 12, (unsigned long long)b->size);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	if (dc->offset % 4) {
		snprintf(why, why_len, "count buffer %llu: offset %llu is not a multiple of 4",
			 (unsigned long long)dc->handle, (unsigned long long)dc->offset);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (!ruda__indirect_get(s->device)) {
		snprintf(why, why_len, "dynamic counts are unavailable on this device");
		return RUDA_ERROR_UNSUPPORTED;
	}
	out->buffer = b;
	out->offset = dc->offset;
	return RUDA_OK;
}

/* Whether x*y*z workgroups stay below 2^32: drivers count them in 32 bits
 * (lavapipe ran 65535^3 as 196 607, 2^48 mod 2^32, and reported success),
 * and kernels that flatten gl_WorkGroupID into a uint wrap likewise. */
static int count_product_fits(const uint32_t c[3])
{
	if (!c[0] || !c[1] || !c[2])
		return 1; /* a no-op */
	uint64_t xy = (uint64_t)c[0] * c[1];
	return xy <= UINT32_MAX && xy * c[2] <= UINT32_MAX;
}

static void handle_launch(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Launch *l = req->launch;
	const VkPhysicalDeviceLimits *lim = &s->device->props.limits;
	struct ruda_session_kernel *k = ruda__handle_table_get(&s->kernels, l->kernel);
	struct ruda_binding bindings[RUDA_PIPELINE_MAX_BINDINGS];
	struct ruda_launch_count count = {.count = {l->count_x, l->count_y, l->count_z}};
	uint8_t push[256] = {0};
	char why[256] = "";
	ruda_status st = RUDA_ERROR_INVALID_ARGUMENT;
	if (l->unchecked && !s->unchecked_allowed) {
		st = RUDA_ERROR_PERMISSION;
		snprintf(why, sizeof(why),
			 "rudad's policy does not allow unchecked launches for uid %u", s->uid);
	} else if (!k) {
		st = RUDA_ERROR_INVALID_HANDLE;
		snprintf(why, sizeof(why), "no kernel %llu in this session",
			 (unsigned long long)l->kernel);
	} else if (l->n_bindings != k->pipeline->binding_count)
		snprintf(why, sizeof(why), "%zu bindings given; the kernel declares %u",
			 l->n_bindings, k->pipeline->binding_count);
	else if (l->push_constants.len > k->pipeline->push_constant_size)
		snprintf(why, sizeof(why), "%zu push-constant bytes; the kernel declares %u",
			 l->push_constants.len, k->pipeline->push_constant_size);
	else if (l->dynamic_count)
		st = dynamic_count(s, l->dynamic_count, &count, why, sizeof(why));
	else if (count.count[0] > lim->maxComputeWorkGroupCount[0] ||
		 count.count[1] > lim->maxComputeWorkGroupCount[1] ||
		 count.count[2] > lim->maxComputeWorkGroupCount[2])
		snprintf(why, sizeof(why), "count (%u, %u, %u) exceeds the device's (%u, %u, %u)",
			 count.count[0], count.count[1], count.count[2],
			 lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1],
			 lim->maxComputeWorkGroupCount[2]);
	else if (!count_product_fits(count.count))
		snprintf(why, sizeof(why),
			 "workgroup count product %u x %u x %u exceeds 2^32-1 (%u) workgroups",
			 count.count[0], count.count[1], count.count[2], UINT32_MAX);
	else
		st = RUDA_OK;
	if (st == RUDA_OK)
		st = launch_bindings(s, l, bindings, why, sizeof(why));
	if (st == RUDA_OK) {
		/* short push constants are zero-padded to the declared size */
		if (l->push_constants.len)
			memcpy(push, l->push_constants.data, l->push_constants.len);
		struct ruda_graph *capture = s->current->capture;
		st = capture ? ruda__graph_launch(capture, k->pipeline, &count, bindings,
						  (uint32_t)l->n_bindings, push,
						  k->pipeline->push_constant_size)
			     : ruda__stream_launch(s->current, k->pipeline, &count, bindings,
						   (uint32_t)l->n_bindings, push,
						   k->pipeline->push_constant_size);
		if (st != RUDA_OK)
			snprintf(why, sizeof(why), "%s", ruda_strerror(st));
	}
	if (st == RUDA_OK) {
		if (!s->current->capture)
			s->usage.launches++;
		return;
	}
	char message[320];
	snprintf(message, sizeof(message), "launch (request %llu): %s",
		 (unsigned long long)req->id, why);
	if (s->current->capture) {
		/* nothing ran: the capture is what failed */
		ruda__graph_fail(s->current->capture, st, "%s", message);
		return;
	}
	/* only what the kernel may write is wrong now: its read-only inputs
	 * (say, a model's weights) keep their bytes and stay readable */
	for (size_t i = 0; i < l->n_bindings; i++)
		if (ruda__pipeline_may_write(k ? k->pipeline : NULL, i))
			mark_failed(s, l->bindings[i]->handle, st, message);
	ruda__stream_fail(s->current, st, "%s", message);
}

/* ---- execution ---------------------------------------------------------- */

static void handle_flush(struct ruda_session *s, const Ruda__Request *req)
{
	(void)req;
	ruda__stream_submit(s->current);
}

/* A sync's answer is settled once its stream's work is submitted. */
static void handle_sync(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_stream *st = s->current;
	ruda__stream_submit(st); /* a refused submission is the stream's error */
	struct reply_waiter *w = reply_waiter_new(s, req->id, WAIT_SYNC, NULL, 0);
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	w->settled_ok = settled_ok(s, st);
	publish_watch(s, st, req->id, w->settled_ok);
	ruda__stream_wait(st, &w->base);
}

static void handle_check(struct ruda_session *s, const Ruda__Request *req)
{
	const char *why = "";
	ruda_status st = first_buffer_error(s, req->check->handles, req->check->n_handles, &why);
	ruda__reply_status(s->conn, req->id, st, "%s", why);
}

static void handle_sync_buffers(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__SyncBuffers *sb = req->sync_buffers;
	/* only the last work that used them: an unrelated kernel running on
	 * the same stream is not waited for */
	uint64_t target = 0;
	for (size_t i = 0; i < sb->n_handles; i++) {
		struct ruda_session_buffer *e = buffer_entry(s, sb->handles[i]);
		if (!e || !e->buffer)
			continue; /* its error is the reply */
		struct ruda_buffer *b = e->buffer;
		if (b->use_elsewhere) {
			/* a use on another stream was still recorded when it moved:
			 * bounded by everything the session has recorded */
			ruda__session_submit_all(s);
			uint64_t all = ruda__session_latest_stream(s)->last_value;
			if (all > b->use_value)
				b->use_value = all;
			b->use_elsewhere = 0;
		}
		int64_t v = ruda__stream_buffer_done_value(b);
		if (v > 0 && (uint64_t)v > target)
			target = (uint64_t)v;
	}
	struct reply_waiter *w =
		reply_waiter_new(s, req->id, WAIT_SYNC_BUFFERS, sb->handles, sb->n_handles);
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	ruda__device_wait_value(s->device, target, &w->base);
}

static void handle_fence(struct ruda_session *s, const Ruda__Request *req)
{
	wait_then_reply(s, req->id, WAIT_FENCE, NULL, 0);
}

/* ---- throughput cache ---------------------------------------------------- */

static struct ruda_throughput_cache *throughput_cache(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	return ctx->throughput_caches ? ctx->throughput_caches[s->device->index] : NULL;
}

static void handle_throughput_get(struct ruda_session *s, const Ruda__Request *req)
{
	const char *key = req->throughput_get->key;
	struct ruda_throughput_cache *cache = throughput_cache(s);
	double value = 0;
	int err = cache ? ruda__throughput_cache_get(cache, key, &value) : -ENOMEM;
	if (err == -EINVAL) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput key empty or over %u bytes",
				   RUDA_THROUGHPUT_MAX_KEY);
		return;
	}
	if (err) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "no throughput measured for \"%s\" yet", key);
		return;
	}
	Ruda__ThroughputReply tr = RUDA__THROUGHPUT_REPLY__INIT;
	tr.value = value;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_THROUGHPUT;
	reply.throughput = &tr;
	ruda__reply_send(s->conn, &reply);
}

static void handle_throughput_set(struct ruda_session *s, const Ruda__Request *req)
{
	const char *key = req->throughput_set->key;
	double value = req->throughput_set->value;
	struct ruda_throughput_cache *cache = throughput_cache(s);
	int err = cache ? ruda__throughput_cache_set(cache, key, value) : -ENOMEM;
	if (err == -EINVAL && !(key && *key && strlen(key) <= RUDA_THROUGHPUT_MAX_KEY))
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput key empty or over %u bytes",
				   RUDA_THROUGHPUT_MAX_KEY);
	else if (err == -EINVAL) /* every client reads what one sets */
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput %g for \"%s\" is not a finite value above 0",
				   value, key);
	else if (err == -ENOSPC)
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_QUOTA,
				   "the throughput cache of device %u is full (%u keys): "
				   "\"%s\" is not recorded",
				   s->device->index, RUDA_THROUGHPUT_MAX, key);
	else if (err)
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	else
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

/* ---- memory usage ------------------------------------------------------- */

static void handle_memory_usage(struct ruda_session *s, const Ruda__Request *req)
{
	Ruda__MemoryUsageReply mu = RUDA__MEMORY_USAGE_REPLY__INIT;
	mu.allocations = s->buffers.count;
	mu.bytes_in_use = s->requested;
	mu.bytes_padding = s->bytes - s->requested;
	/* the seed's MemoryUsage is this client's memory: its buffers' share
	 * of the allocator, not the pages every client's buffers share */
	mu.bytes_reserved = s->bytes;
	mu.quota = s->quota;
	mu.uid_bytes = ruda__session_uid_bytes(s->ctx, s->uid);
	mu.pages = s->own_pages;
	mu.device_bytes_reserved = s->device->allocator.stats.reserved;
	mu.device_pages = s->device->allocator.stats.pages;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_MEMORY_USAGE;
	reply.memory_usage = &mu;
	ruda__reply_send(s->conn, &reply);
}

static void handle_memory_cleanup(struct ruda_session *s, const Ruda__Request *req)
{
	(void)req;
	uint64_t freed = ruda__memory_cleanup(&s->device->allocator);
	if (freed)
		log_info("session %llu: memory cleanup gave back %llu bytes",
			 (unsigned long long)s->id, (unsigned long long)freed);
}

static void handle_memory_compact(struct ruda_session *s, const Ruda__Request *req)
{
	/* free ranges coalesce as buffers go; nothing needs moving */
	ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

/* ---- profiling and exclusive access -------------------------------------- */

static void handle_profile_start(struct ruda_session *s, const Ruda__Request *req)
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

static void handle_profile_end(struct ruda_session *s, const Ruda__Request *req)
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
	struct reply_waiter *w = reply_waiter_new(s, req->id, WAIT_PROFILE, NULL, 0);
	if (!w) {
		ruda__session_profile_free(s, p);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	ruda__session_profile_close(s, p);
	w->profile = p;
	/* the session's newest submission completes after all its others */
	ruda__stream_wait(ruda__session_latest_stream(s), &w->base);
}

static void handle_profile_abandon(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_profile *p =
		ruda__handle_table_remove(&s->profiles, req->profile_abandon->window);
	if (p)
		ruda__session_profile_free(s, p);
}

static void handle_exclusive_begin(struct ruda_session *s, const Ruda__Request *req)
{
	if (!s->exclusive_allowed) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_PERMISSION,
				   "rudad's policy does not let uid %u hold the device alone "
				   "(exclusive_users, exclusive_groups)", s->uid);
		return;
	}
	/* work queued before the lease goes first */
	ruda__session_submit_all(s);
	ruda__session_exclusive_begin(s, req->id, req->exclusive_begin->timeout_ms);
}

static void handle_exclusive_end(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__session_submit_all(s);
	int rc = ruda__session_exclusive_end(s);
	if (rc == -ETIMEDOUT) {
		uint32_t limit = ruda__session_exclusive_limit_ms(s->ctx);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_LEASE_EXPIRED,
				   "the exclusive lease expired after %u ms (%s %u ms); "
				   "work queued since then ran beside other clients",
				   s->lease_expired_ms,
				   s->lease_expired_ms < limit ? "the timeout asked; "
									 "max_exclusive_ms"
								       : "max_exclusive_ms",
				   limit);
		s->lease_expired_ms = 0;
	} else if (rc < 0) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "this session holds no exclusive lease");
	} else
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

static void handle_stats(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_context *ctx = s->ctx;
	Ruda__StatsReply sr = RUDA__STATS_REPLY__INIT;
	sr.sessions = (uint32_t)ctx->sessions.count;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		struct ruda_device *d = ctx->devices[i];
		sr.device_bytes += d->stats.bytes;
		sr.device_buffers += d->stats.buffers;
		sr.submissions_in_flight += d->inflight_count;
		sr.kernels_compiled += d->stats.kernels_compiled;
		sr.pipelines += d->stats.pipelines;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		const struct ruda_pipeline_registry *reg = ctx->pipelines[i];
		sr.kernel_hits += reg->hits;
		sr.compile_time_us += reg->compile_ns / 1000;
		sr.modules += ruda__pipeline_registry_modules(reg);
		sr.cache_file_bytes += ctx->devices[i]->stats.cache_file_bytes;
	}
	sr.session_bytes = s->bytes;
	sr.session_gpu_time_ns = s->usage.gpu_time_ns;
	sr.session_launches = s->usage.launches;
	sr.session_buffers = s->buffers.count;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_STATS;
	reply.stats = &sr;
	ruda__reply_send(s->conn, &reply);
}

/* ---- decoding ------------------------------------------------------------ */

/*
 * Requests are decoded into a scratch area reused for every frame: no
 * malloc per request on the launch path, and a hard cap on what one frame
 * can make the daemon allocate (a 64 KiB frame of tiny repeated fields
 * decodes to several times its size).
 */
#define SCRATCH_BYTES (1u << 20)

struct scratch {
	uint8_t *base;
	size_t used;
};

static void *scratch_alloc(void *data, size_t size)
{
	struct scratch *sc = data;
	size_t start = (sc->used + 15) & ~(size_t)15;
	if (size > SCRATCH_BYTES - start)
		return NULL; /* the frame asks for too much: refused */
	sc->used = start + size;
	return sc->base + start;
}

static void scratch_free(void *data, void *pointer)
{
	(void)data;
	(void)pointer; /* everything goes at once when the frame is done */
}

/* ---- staging regions ------------------------------------------------------ */

static void handle_staging_attach(struct ruda_session *s, const Ruda__Request *req)
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

static void handle_staging_detach(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__staging_detach(s, req->staging_detach->region);
}

/* ---- allocation modes and exported memory -------------------------------- */

static void handle_allocation_mode(struct ruda_session *s, const Ruda__Request *req)
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
static void export_now(struct ruda_session *s, uint64_t request, uint64_t id)
{
	const char *reason;
	ruda_status st = buffer_status(s, id, &reason);
	if (st != RUDA_OK) {
		ruda__reply_status(s->conn, request, st, "buffer %llu: %s",
				   (unsigned long long)id, reason);
		return;
	}
	struct ruda_buffer *b = buffer_entry(s, id)->buffer;
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
static void handle_export_resource(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t id = req->export_resource->handle;
	struct ruda_session_buffer *e = buffer_entry(s, id);
	if (e && e->buffer)
		ruda__stream_fill_now(e->buffer);
	wait_then_reply(s, req->id, WAIT_EXPORT, &id, 1);
}

/* ---- graph capture -------------------------------------------------------- */

/*
 * While a stream captures a graph only launches (and requests that record
 * nothing on it) make sense there: what would wait for the stream or move
 * bytes through the arena is refused. Returns 1 when `req` was refused.
 */
static int refused_while_capturing(struct ruda_session *s, const Ruda__Request *req,
				   size_t body, const char *name)
{
	struct ruda_graph *g = s->current->capture;
	char why[160];
	snprintf(why, sizeof(why), "%s (request %llu): stream %u is capturing a graph", name,
		 (unsigned long long)req->id, s->current->id);
	switch (body) {
	case RUDA__REQUEST__BODY_READ:
	case RUDA__REQUEST__BODY_SYNC:
	case RUDA__REQUEST__BODY_SYNC_BUFFERS:
	case RUDA__REQUEST__BODY_PROFILE_END:
	case RUDA__REQUEST__BODY_GRAPH_PREPARE:
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "%s; end the capture first", why);
		return 1;
	case RUDA__REQUEST__BODY_WRITE:
		/* the bytes never reach the buffer: it carries the error */
		mark_failed(s, req->write->handle, RUDA_ERROR_INVALID_ARGUMENT, why);
		ruda__graph_fail(g, RUDA_ERROR_INVALID_ARGUMENT, "%s; writes are not captured", why);
		ruda__session_arena_used(s, req->id);
		return 1;
	case RUDA__REQUEST__BODY_PROFILE_START:
		ruda__graph_fail(g, RUDA_ERROR_INVALID_ARGUMENT, "%s; profiling is not captured",
				 why);
		return 1;
	default:
		return 0;
	}
}

/* ---- table -------------------------------------------------------------- */

typedef void (*handler_fn)(struct ruda_session *s, const Ruda__Request *req);

static const struct {
	handler_fn run;
	const char *name;
	int replies; /* always answered (Empty only when it asks to be) */
} handlers[] = {
	[RUDA__REQUEST__BODY_HELLO] = {handle_hello, "Hello", 1},
	[RUDA__REQUEST__BODY_EMPTY] = {handle_empty, "Empty", 0},
	[RUDA__REQUEST__BODY_WRITE] = {handle_write, "Write", 0},
	[RUDA__REQUEST__BODY_READ] = {handle_read, "Read", 1},
	[RUDA__REQUEST__BODY_RELEASE] = {handle_release, "Release", 0},
	[RUDA__REQUEST__BODY_KERNEL_REGISTER] = {handle_kernel_register, "KernelRegister", 1},
	[RUDA__REQUEST__BODY_KERNEL_RELEASE] = {handle_kernel_release, "KernelRelease", 0},
	[RUDA__REQUEST__BODY_LAUNCH] = {handle_launch, "Launch", 0},
	[RUDA__REQUEST__BODY_FLUSH] = {handle_flush, "Flush", 0},
	[RUDA__REQUEST__BODY_SYNC] = {handle_sync, "Sync", 1},
	[RUDA__REQUEST__BODY_CHECK] = {handle_check, "Check", 1},
	[RUDA__REQUEST__BODY_SYNC_BUFFERS] = {handle_sync_buffers, "SyncBuffers", 1},
	[RUDA__REQUEST__BODY_FENCE] = {handle_fence, "Fence", 1},
	[RUDA__REQUEST__BODY_STATS] = {handle_stats, "Stats", 1},
	[RUDA__REQUEST__BODY_ADMIN] = {ruda__admin_handle, "Admin", 1},
	[RUDA__REQUEST__BODY_KERNEL_LOOKUP] = {handle_kernel_lookup, "KernelLookup", 1},
	[RUDA__REQUEST__BODY_PROFILE_START] = {handle_profile_start, "ProfileStart", 0},
	[RUDA__REQUEST__BODY_PROFILE_END] = {handle_profile_end, "ProfileEnd", 1},
	[RUDA__REQUEST__BODY_PROFILE_ABANDON] = {handle_profile_abandon, "ProfileAbandon", 0},
	[RUDA__REQUEST__BODY_EXCLUSIVE_BEGIN] = {handle_exclusive_begin, "ExclusiveBegin", 1},
	[RUDA__REQUEST__BODY_EXCLUSIVE_END] = {handle_exclusive_end, "ExclusiveEnd", 1},
	[RUDA__REQUEST__BODY_MEMORY_USAGE] = {handle_memory_usage, "MemoryUsage", 1},
	[RUDA__REQUEST__BODY_MEMORY_CLEANUP] = {handle_memory_cleanup, "MemoryCleanup", 0},
	[RUDA__REQUEST__BODY_MEMORY_COMPACT] = {handle_memory_compact, "MemoryCompact", 1},
	[RUDA__REQUEST__BODY_THROUGHPUT_GET] = {handle_throughput_get, "ThroughputGet", 1},
	[RUDA__REQUEST__BODY_THROUGHPUT_SET] = {handle_throughput_set, "ThroughputSet", 1},
	[RUDA__REQUEST__BODY_UTILIZATION] = {ruda__handle_utilization, "Utilization", 1},
	[RUDA__REQUEST__BODY_TO_CLIENT] = {ruda__handle_to_client, "ToClient", 1},
	[RUDA__REQUEST__BODY_COLLECTIVE_INIT] = {ruda__handle_collective_init, "CollectiveInit", 1},
	[RUDA__REQUEST__BODY_ALL_REDUCE] = {ruda__handle_all_reduce, "AllReduce", 0},
	[RUDA__REQUEST__BODY_COLLECTIVE_SYNC] = {ruda__handle_collective_sync, "CollectiveSync", 1},
	[RUDA__REQUEST__BODY_STAGING_ATTACH] = {handle_staging_attach, "StagingAttach", 1},
	[RUDA__REQUEST__BODY_STAGING_DETACH] = {handle_staging_detach, "StagingDetach", 0},
	[RUDA__REQUEST__BODY_ALLOCATION_MODE] = {handle_allocation_mode, "AllocationMode", 0},
	[RUDA__REQUEST__BODY_EXPORT_RESOURCE] = {handle_export_resource, "ExportResource", 1},
	[RUDA__REQUEST__BODY_GRAPH_PREPARE] = {ruda__graph_handle_prepare, "GraphPrepare", 1},
	[RUDA__REQUEST__BODY_GRAPH_START_CAPTURE] = {ruda__graph_handle_start, "GraphStartCapture", 1},
	[RUDA__REQUEST__BODY_GRAPH_STOP_CAPTURE] = {ruda__graph_handle_stop, "GraphStopCapture", 1},
	[RUDA__REQUEST__BODY_GRAPH_ABORT_CAPTURE] = {ruda__graph_handle_abort, "GraphAbortCapture",
						     0},
	[RUDA__REQUEST__BODY_GRAPH_REPLAY] = {ruda__graph_handle_replay, "GraphReplay", 0},
	[RUDA__REQUEST__BODY_GRAPH_RELEASE] = {ruda__graph_handle_release, "GraphRelease", 0},
};

static void dispatch_decoded(struct ruda_session *s, struct ruda_frame *frame);

/* Whether the frame is a request that takes an fd (StagingAttach, a Hello
 * with client_arena); such frames are rare, so decoding one twice costs
 * nothing that matters. */
static int takes_fd(const struct ruda_frame *frame)
{
	Ruda__Request *req = ruda__request__unpack(NULL, frame->length, frame->payload);
	int yes = req && (req->body_case == RUDA__REQUEST__BODY_STAGING_ATTACH ||
			  (req->body_case == RUDA__REQUEST__BODY_HELLO && req->hello->client_arena));
	if (req)
		ruda__request__free_unpacked(req, NULL);
	return yes;
}

void ruda__dispatch_frame(struct ruda_session *s, struct ruda_frame *frame)
{
	/* only StagingAttach and Hello take an fd: peek at the body before decoding */
	int attach = frame->nfds == 1 && request_fd < 0 && takes_fd(frame);
	if (frame->nfds && !attach) {
		for (uint16_t i = 0; i < frame->nfds; i++)
			close(frame->fds[i]);
		ruda__session_violation(s, "file descriptors with a request that takes none");
		return;
	}
	if (attach)
		request_fd = frame->fds[0];
	dispatch_decoded(s, frame);
	if (attach) {
		close(request_fd);
		request_fd = -1;
	}
}

static void dispatch_decoded(struct ruda_session *s, struct ruda_frame *frame)
{
	/* one scratch area serves every session in turn; a request decoded
	 * while another is being handled (a lease's end resumes other
	 * sessions) gets the heap */
	struct ruda_session_context *ctx = s->ctx;
	if (!ctx->scratch)
		ctx->scratch = malloc(SCRATCH_BYTES);
	struct scratch sc = {.base = ctx->scratch};
	ProtobufCAllocator allocator = {
		.alloc = scratch_alloc,
		.free = scratch_free,
		.allocator_data = &sc,
	};
	int use_scratch = ctx->scratch && !ctx->decoding;
	ProtobufCAllocator *alloc = use_scratch ? &allocator : NULL;
	/* launches, the request sent at high rates, skip protobuf-c's
	 * reflection when canonically encoded (libruda always does) */
	struct ruda_launch_frame fast;
	int decoded_fast = ruda__launch_decode(frame->payload, frame->length, &fast);
	Ruda__Request *req = decoded_fast ? &fast.request
					  : ruda__request__unpack(alloc, frame->length,
								  frame->payload);
	if (!req) {
		ruda__session_violation(s, "undecodable request (%u bytes)", frame->length);
		return;
	}
	size_t body = (size_t)req->body_case;
	int known = body < sizeof(handlers) / sizeof(handlers[0]) && handlers[body].run;
	if (s->state == RUDA_SESSION_HELLO && body != RUDA__REQUEST__BODY_HELLO) {
		ruda__session_violation(s, "first request is not Hello");
	} else if (!known) {
		/* a newer client's request: answer it, keep the connection */
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_UNSUPPORTED,
				   "unknown request type (request %llu)",
				   (unsigned long long)req->id);
	} else {
		log_debug("session %llu: %s %llu", (unsigned long long)s->id, handlers[body].name,
			  (unsigned long long)req->id);
		s->usage.requests++;
		s->usage.last_request_ms = uv_now(s->ctx->loop);
		/* every request names its stream; Hello comes before any. New
		 * buffers' zero fills reach the queue before another stream's
		 * work can use the buffers. */
		struct ruda_stream *before = s->current;
		s->current = s->state == RUDA_SESSION_READY ? ruda__session_stream(s, req->stream)
							   : &s->stream;
		if (before && before != s->current && ruda__stream_holds_fills(before)) {
			ruda__stream_submit_fills(before);
			if (s->current)
				ruda__stream_after(s->current, before);
		}
		if (!s->current) {
			s->current = &s->stream;
			ruda__stream_fail(s->current, RUDA_ERROR_BUSY,
					  "request %llu: stream %u is one stream too many (at most %u)",
					  (unsigned long long)req->id, req->stream,
					  RUDA_SESSION_MAX_STREAMS);
			if (handlers[body].replies ||
			    (body == RUDA__REQUEST__BODY_EMPTY && req->empty->reply))
				ruda__reply_status(s->conn, req->id, RUDA_ERROR_BUSY,
						   "at most %u streams per client",
						   RUDA_SESSION_MAX_STREAMS);
			goto done;
		}
		if (s->current->capture &&
		    refused_while_capturing(s, req, body, handlers[body].name))
			goto done;
		ctx->decoding += use_scratch;
		handlers[body].run(s, req);
		ctx->decoding -= use_scratch;
	}
done:
	if (!use_scratch && !decoded_fast)
		ruda__request__free_unpacked(req, NULL);
	/* else nothing to free: the scratch area is reused by the next frame */
}
