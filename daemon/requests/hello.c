/*
 * The handshake: Hello picks the device and priority, checks the policy,
 * opens the arena and answers with what the device is.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "../../proto/frame.h"
#include "common/config.h"
#include "common/log.h"
#include "common/policy.h"
#include "device/device.h"
#include "exec/pipeline.h"
#include "exec/stream.h"
#include "memory/arena.h"
#include "memory/buffer.h"
#include "memory/client_arena.h"
#include "requests/device_info.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

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
	info->max_buffer_size = ruda__buffer_largest(d);
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

/* The session's arena at Hello: the client's own memfd (`request_fd`, the
 * frame's), or a fresh one from the pool (*fd: a copy to pass back).
 * RUDA_OK, or a status and `why`. */
static ruda_status open_arena(struct ruda_session *s, const Ruda__Hello *h, int request_fd,
			      int *fd, char *why, size_t why_len)
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

void ruda__handle_hello(struct ruda_session *s, const Ruda__Request *req, int request_fd)
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
	uint32_t device_index;
	ruda_status st = ruda__device_info_resolve(ctx, h, &device_index, no_device,
						   sizeof(no_device));
	if (st != RUDA_OK) {
		s->state = RUDA_SESSION_CLOSING;
		ruda__reply_status(s->conn, req->id, st, "%s", no_device);
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
	ruda_status arena_status = open_arena(s, h, request_fd, &fd, why, sizeof(why));
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
	hr.max_buffer_size = ruda__buffer_largest(s->device);
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
