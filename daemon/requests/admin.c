#include "requests/admin.h"
#include "memory/buffer.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/frame.h"
#include "memory/arena.h"
#include "memory/peer_window.h"
#include "common/config.h"
#include "device/device.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "exec/pipeline_cache.h"
#include "common/policy.h"
#include "requests/reply.h"
#include "requests/session.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

/* Replies must fit one frame; lists stop short of this many bytes and say
 * that more follow. */
#define REPLY_BUDGET (RUDA_FRAME_MAX_PAYLOAD - 4096u)
#define CACHE_LIST_DEFAULT 256u
#define CACHE_LIST_MAX 1024u

/* ---- policy ------------------------------------------------------------- */

/*
 * What `s` may do: commands that change the daemon (kill, cleanup, drain,
 * shutdown) need rights.admin (root or admin_group), the read-only views
 * rights.views (admin, or read_only_views). Asked afresh for every request
 * so a reloaded configuration applies at once. Without a policy (a daemon
 * built without one, unit tests): root only for commands, views open.
 */
static void rights_of(const struct ruda_session *s, struct ruda_rights *r)
{
	if (s->ctx->policy) {
		ruda__policy_check_peer(s->ctx->policy, ruda__connection_fd(s->conn), s->uid, s->gid,
					r);
		return;
	}
	memset(r, 0, sizeof(*r));
	r->may_connect = true;
	r->admin = s->uid == 0;
	r->views = true;
	r->max_memory_per_client = RUDA_UNLIMITED;
	r->max_memory_per_uid = RUDA_UNLIMITED;
	r->max_staging_per_client = RUDA_UNLIMITED;
	r->max_staging_per_uid = RUDA_UNLIMITED;
}

/* Who the policy calls an administrator, for refusals. */
static const char *admins(const struct ruda_session *s, char *buf, size_t len)
{
	const char *group = s->ctx->policy ? s->ctx->policy->config->admin_group : NULL;
	if (group)
		snprintf(buf, len, "root and group %s", group);
	else
		snprintf(buf, len, "root only: no admin_group is configured");
	return buf;
}

/* ---- helpers ------------------------------------------------------------ */

void ruda__admin_reply(struct ruda_session *s, uint64_t request, Ruda__AdminReply *body)
{
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = request;
	reply.body_case = RUDA__REPLY__BODY_ADMIN;
	reply.admin = body;
	ruda__reply_send(s->conn, &reply);
}

/* The sessions, as an array (caller frees), sorted by id when `sorted`. */
static int cmp_session_id(const void *a, const void *b)
{
	uint64_t x = (*(struct ruda_session *const *)a)->id;
	uint64_t y = (*(struct ruda_session *const *)b)->id;
	return x < y ? -1 : x > y;
}

struct ruda_session **ruda__admin_list_sessions(struct ruda_session_context *ctx, size_t *n,
						int sorted)
{
	const struct ruda_handle_table *t = &ctx->sessions;
	struct ruda_session **list = malloc((t->count ? t->count : 1) * sizeof(*list));
	*n = 0;
	if (!list)
		return NULL;
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i].value)
			list[(*n)++] = t->slots[i].value;
	if (sorted)
		qsort(list, *n, sizeof(*list), cmp_session_id);
	return list;
}

static const char *device_type(VkPhysicalDeviceType type)
{
	switch (type) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete-gpu";
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated-gpu";
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual-gpu";
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
	default: return "other";
	}
}

static const char *session_state(enum ruda_session_state state)
{
	switch (state) {
	case RUDA_SESSION_HELLO: return "hello";
	case RUDA_SESSION_READY: return "ready";
	case RUDA_SESSION_CLOSING: return "closing";
	case RUDA_SESSION_DEAD: return "dead";
	}
	return "unknown";
}

/* Milliseconds since this process started (from /proc; 0 if unknown). */
static uint64_t uptime_ms(void)
{
	FILE *f = fopen("/proc/self/stat", "re");
	if (!f)
		return 0;
	char buf[1024];
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command name, which may hold spaces: state is the
	 * 3rd field, starttime (clock ticks after boot) the 22nd */
	char *p = strrchr(buf, ')');
	if (!p)
		return 0;
	unsigned long long start = 0;
	int field = 2;
	for (char *tok = strtok(p + 1, " "); tok; tok = strtok(NULL, " "))
		if (++field == 22) {
			start = strtoull(tok, NULL, 10);
			break;
		}
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec now;
	if (field != 22 || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) < 0)
		return 0;
	uint64_t now_ms = (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
	uint64_t start_ms = (uint64_t)start * 1000u / (uint64_t)hz;
	return now_ms > start_ms ? now_ms - start_ms : 0;
}

/* How long the loop thread has not been waiting for events since the
 * server started (idle time is measured from then: server.c). */
static uint64_t loop_busy_ns(const struct ruda_session_context *ctx)
{
	if (!ctx->loop_start_ns)
		return 0;
	uint64_t run = uv_hrtime() - ctx->loop_start_ns;
	uint64_t idle = uv_metrics_idle_time(ctx->loop);
	return run > idle ? run - idle : 0;
}

/* A session's device time, with its submission running now so far: a
 * launch that runs long (or never ends) shows as busy while it runs. */
static uint64_t session_gpu_time(const struct ruda_session *s)
{
	uint64_t owner, running = s->device ? ruda__device_running_ns(s->device, &owner) : 0;
	return s->usage.gpu_time_ns + (running && owner == s->id ? running : 0);
}

/* What the sessions of one device add up to. */
struct device_usage {
	uint32_t clients, arenas, arenas_imported;
	uint64_t arena_bytes, arena_imported_bytes, gpu_time_ns;
};

/* Per device (ctx->ndevices entries, caller frees). */
static struct device_usage *usage_by_device(struct ruda_session_context *ctx)
{
	struct device_usage *u = calloc(ctx->ndevices ? ctx->ndevices : 1, sizeof(*u));
	if (!u)
		return NULL;
	const struct ruda_handle_table *t = &ctx->sessions;
	for (size_t i = 0; i < t->cap; i++) {
		const struct ruda_session *s = t->slots[i].value;
		if (!s || !s->device || s->device->index >= ctx->ndevices)
			continue;
		struct device_usage *d = &u[s->device->index];
		d->clients++;
		d->gpu_time_ns += session_gpu_time(s);
		if (s->arena) {
			d->arenas++;
			d->arena_bytes += s->arena->size;
			if (s->arena->state == RUDA_ARENA_ATTACHED) {
				d->arenas_imported++;
				d->arena_imported_bytes += s->arena->size;
			}
		}
	}
	return u;
}

/* Storage for the repeated fields of one AdminDevice. */
struct device_buf {
	Ruda__AdminDevice msg;
	Ruda__AdminHeap heaps[VK_MAX_MEMORY_HEAPS];
	Ruda__AdminHeap *heap_ptrs[VK_MAX_MEMORY_HEAPS];
	uint32_t count[3], size[3];
};

static size_t fill_heaps(const struct ruda_device *d, Ruda__AdminHeap *heaps,
			 Ruda__AdminHeap **ptrs)
{
	uint32_t n = d->memory.memoryHeapCount;
	if (n > VK_MAX_MEMORY_HEAPS)
		n = VK_MAX_MEMORY_HEAPS;
	for (uint32_t i = 0; i < n; i++) {
		ruda__admin_heap__init(&heaps[i]);
		heaps[i].index = i;
		heaps[i].size = d->memory.memoryHeaps[i].size;
		heaps[i].device_local =
			(d->memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
		ptrs[i] = &heaps[i];
	}
	return n;
}

static void fill_device(struct device_buf *b, struct ruda_device *d,
			const struct device_usage *u)
{
	Ruda__AdminDevice *m = &b->msg;
	const VkPhysicalDeviceLimits *l = &d->props.limits;
	ruda__admin_device__init(m);
	m->index = d->index;
	m->name = d->props.deviceName;
	m->type = (char *)device_type(d->props.deviceType);
	m->vendor_id = d->props.vendorID;
	m->device_id = d->props.deviceID;
	m->api_version = d->props.apiVersion;
	m->driver_version = d->props.driverVersion;
	m->pipeline_cache_uuid.data = d->props.pipelineCacheUUID;
	m->pipeline_cache_uuid.len = VK_UUID_SIZE;
	m->max_buffer_size = ruda__buffer_largest(d);
	m->max_storage_buffer_range = l->maxStorageBufferRange;
	m->max_push_constants_size = l->maxPushConstantsSize;
	m->max_bindings = d->max_push_descriptors < RUDA_PIPELINE_MAX_BINDINGS
				  ? d->max_push_descriptors
				  : RUDA_PIPELINE_MAX_BINDINGS;
	memcpy(b->count, l->maxComputeWorkGroupCount, sizeof(b->count));
	memcpy(b->size, l->maxComputeWorkGroupSize, sizeof(b->size));
	m->n_max_workgroup_count = 3;
	m->max_workgroup_count = b->count;
	m->n_max_workgroup_size = 3;
	m->max_workgroup_size = b->size;
	m->max_workgroup_invocations = l->maxComputeWorkGroupInvocations;
	m->subgroup_size = d->subgroup_size;
	m->host_import = d->import_alignment != 0;
	m->n_heaps = fill_heaps(d, b->heaps, b->heap_ptrs);
	m->heaps = b->heap_ptrs;

	m->clients = u->clients;
	m->buffer_bytes = d->stats.bytes;
	m->buffers = d->stats.buffers;
	m->arena_bytes = u->arena_bytes;
	m->arenas = u->arenas;
	m->arenas_imported = u->arenas_imported;
	m->arena_imported_bytes = u->arena_imported_bytes;
	m->inflight = d->inflight_count;
	m->submitted = d->submitted;
	m->completed = atomic_load(&d->completed);
	m->lost = atomic_load(&d->lost) != 0;
	m->pipelines = d->stats.pipelines;
	m->kernels_compiled = d->stats.kernels_compiled;
	m->gpu_time_ns = u->gpu_time_ns;
	m->physical_index = d->physical_index;
	m->type_index = d->type_index;
	m->busy_ns = ruda__device_busy_ns(d);
	m->peer_copy_bytes = d->stats.peer_bytes_out;
	m->staged_copy_bytes = d->stats.staged_bytes_out;
	m->queue_submits = d->stats.queue_submits;
	m->submit_ns = d->stats.submit_ns;
	m->lane_submissions = d->stats.lane_submissions;
	m->lane_rounds = d->stats.lane_rounds;
	m->lane_launches = d->stats.lane_launches;
	m->lane_gpu_ns = d->stats.lane_gpu_ns;
	m->lane_idle_ns = d->stats.lane_idle_ns;
	m->lane_record_ns = d->stats.lane_record_ns;
	m->completion_ns = d->stats.completion_ns;
}

/* Every device, filled into a new array (NULL on allocation failure). */
static struct device_buf *fill_devices(struct ruda_session_context *ctx,
				       Ruda__AdminDevice ***ptrs_out)
{
	uint32_t n = ctx->ndevices ? ctx->ndevices : 1;
	struct device_usage *u = usage_by_device(ctx);
	struct device_buf *bufs = calloc(n, sizeof(*bufs));
	Ruda__AdminDevice **ptrs = calloc(n, sizeof(*ptrs));
	if (!u || !bufs || !ptrs) {
		free(u);
		free(bufs);
		free(ptrs);
		return NULL;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		fill_device(&bufs[i], ctx->devices[i], &u[i]);
		ptrs[i] = &bufs[i].msg;
	}
	free(u);
	*ptrs_out = ptrs;
	return bufs;
}

static void reply_oom(struct ruda_session *s, uint64_t request)
{
	ruda__reply_status(s->conn, request, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
}

/* ---- views -------------------------------------------------------------- */

static void admin_status(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	(void)a;
	Ruda__AdminDevice **devices;
	struct device_buf *bufs = fill_devices(ctx, &devices);
	if (!bufs) {
		reply_oom(s, request);
		return;
	}
	struct sockaddr_un addr = {0};
	socklen_t len = sizeof(addr);
	char socket_path[sizeof(addr.sun_path) + 1] = "";
	if (getsockname(ruda__connection_fd(s->conn), (struct sockaddr *)&addr, &len) == 0 &&
	    addr.sun_family == AF_UNIX &&
	    len > offsetof(struct sockaddr_un, sun_path) && addr.sun_path[0])
		snprintf(socket_path, sizeof(socket_path), "%.*s",
			 (int)(len - offsetof(struct sockaddr_un, sun_path)), addr.sun_path);

	Ruda__AdminStatusReply st = RUDA__ADMIN_STATUS_REPLY__INIT;
	st.daemon_version = RUDA_VERSION;
	st.protocol_version = RUDA_PROTOCOL_VERSION;
	st.pid = (int32_t)getpid();
	st.uptime_ms = uptime_ms();
	st.socket = socket_path;
	st.sessions = (uint32_t)ctx->sessions.count;
	st.draining = ctx->draining != 0;
	struct ruda_rights rights;
	rights_of(s, &rights);
	st.admin = rights.admin;
	st.arena_size = ctx->arena_size;
	st.min_arena_size = RUDA_ARENA_MIN_SIZE;
	st.max_arena_size = RUDA_ARENA_MAX_SIZE;
	st.max_buffers = ctx->max_handles;
	st.max_output = ctx->max_output;
	st.session_id = s->id;
	for (size_t i = 0; i < ctx->sessions.cap; i++) {
		const struct ruda_session *t = ctx->sessions.slots[i].value;
		if (!t)
			continue;
		st.staging_bytes += t->staging_bytes;
		st.staging_regions += (uint32_t)t->staging.count;
		for (size_t k = 0; k < t->staging.cap; k++) {
			const struct ruda_arena *r = t->staging.slots[k].value;
			st.staging_importing += r && ruda__arena_attaching(r);
		}
	}
	st.peer_window_bytes = ruda__peer_window_bytes(&st.peer_windows);
	st.loop_busy_ns = loop_busy_ns(ctx);
	st.turns_yielded = ctx->turns_yielded;
	st.completions_between_turns = ctx->completions_between_turns;
	st.syncs_submitted_early = ctx->syncs_submitted_early;
	st.turns_ns = ctx->turns_ns;
	st.longest_pass_ns = ctx->passes.longest_ns;
	st.slow_passes = ctx->passes.slow;
	st.n_devices = ctx->ndevices;
	st.devices = devices;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_STATUS;
	body.status = &st;
	ruda__admin_reply(s, request, &body);
	free(devices);
	free(bufs);
}

static void admin_devices(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	(void)a;
	Ruda__AdminDevice **devices;
	struct device_buf *bufs = fill_devices(s->ctx, &devices);
	if (!bufs) {
		reply_oom(s, request);
		return;
	}
	Ruda__AdminDevicesReply dr = RUDA__ADMIN_DEVICES_REPLY__INIT;
	dr.n_devices = s->ctx->ndevices;
	dr.devices = devices;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_DEVICES;
	body.devices = &dr;
	ruda__admin_reply(s, request, &body);
	free(devices);
	free(bufs);
}

/* Submissions of the session's stream the device has not completed. */
static uint32_t session_inflight(const struct ruda_session *s)
{
	if (!s->device || !s->arena)
		return 0;
	uint32_t n = 0;
	for (unsigned i = 0; i < RUDA_STREAM_MAX_INFLIGHT; i++)
		if (!ruda__device_done(s->device, s->stream.queue, s->stream.recent[i]))
			n++;
	return n;
}

static void fill_client(Ruda__AdminClient *c, const struct ruda_session *t, uint64_t now)
{
	const struct ruda_session_context *ctx = t->ctx;
	ruda__admin_client__init(c);
	c->id = t->id;
	c->pid = (int32_t)t->pid;
	c->uid = t->uid;
	c->gid = t->gid;
	c->name = (char *)t->name;
	c->state = (char *)session_state(t->state);
	c->has_device = t->device != NULL;
	c->device = t->device ? t->device->index : 0;
	c->age_ms = now > t->usage.connected_ms ? now - t->usage.connected_ms : 0;
	c->idle_ms = now > t->usage.last_request_ms ? now - t->usage.last_request_ms : 0;
	c->streams = t->arena ? 1 : 0;
	c->buffers = t->buffers.count;
	c->bytes = t->bytes;
	c->kernels = t->kernels.count;
	c->inflight = session_inflight(t);
	c->recording = t->arena && t->stream.recording != NULL;
	c->requests = t->usage.requests;
	c->launches = t->usage.launches;
	c->bytes_uploaded = t->usage.bytes_uploaded;
	c->bytes_downloaded = t->usage.bytes_downloaded;
	c->kernels_registered = t->usage.kernels_registered;
	c->gpu_time_ns = session_gpu_time(t);
	c->arena_size = t->arena ? t->arena->size : ctx->arena_size;
	c->arena_imported = t->arena && t->arena->state == RUDA_ARENA_ATTACHED;
	c->client_arena = t->arena && t->arena->client;
	c->staging_bytes = t->staging_bytes;
	c->staging_regions = (uint32_t)t->staging.count;
	c->staging_quota_bytes = t->staging_quota;
	c->staging_quota_uid_bytes = t->staging_uid_quota;
	c->submissions = t->usage.submissions;
	c->max_buffers = ctx->max_handles;
	struct ruda_rights rights;
	rights_of(t, &rights);
	/* auto: the share of the heap the session was given at Hello */
	c->quota_bytes = rights.max_memory_per_client == RUDA_UNLIMITED ? 0
			 : rights.max_memory_per_client == RUDA_QUOTA_AUTO
				 ? t->quota
				 : rights.max_memory_per_client;
	c->quota_uid_bytes = rights.max_memory_per_uid == RUDA_UNLIMITED ? 0
			     : rights.max_memory_per_uid == RUDA_QUOTA_AUTO
				     ? t->uid_quota
				     : rights.max_memory_per_uid;
	c->priority = t->priority;
}

static void admin_clients(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	uint64_t after = a->clients->after;
	size_t n;
	struct ruda_session **list = ruda__admin_list_sessions(s->ctx, &n, 1);
	Ruda__AdminClient *clients = calloc(n ? n : 1, sizeof(*clients));
	Ruda__AdminClient **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
	if (!list || !clients || !ptrs) {
		free(list);
		free(clients);
		free(ptrs);
		reply_oom(s, request);
		return;
	}
	uint64_t now = uv_now(s->ctx->loop);
	Ruda__AdminClientsReply cr = RUDA__ADMIN_CLIENTS_REPLY__INIT;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		if (list[i]->id <= after)
			continue;
		Ruda__AdminClient *c = &clients[cr.n_clients];
		fill_client(c, list[i], now);
		size_t size = ruda__admin_client__get_packed_size(c) + 8;
		if (used + size > REPLY_BUDGET) {
			cr.more = 1;
			break;
		}
		used += size;
		ptrs[cr.n_clients++] = c;
	}
	cr.clients = ptrs;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_CLIENTS;
	body.clients = &cr;
	ruda__admin_reply(s, request, &body);
	free(list);
	free(clients);
	free(ptrs);
}

static void admin_memory(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	(void)a;
	uint32_t n = ctx->ndevices ? ctx->ndevices : 1;
	struct memory_buf {
		Ruda__AdminMemoryDevice msg;
		Ruda__AdminHeap heaps[VK_MAX_MEMORY_HEAPS];
		Ruda__AdminHeap *heap_ptrs[VK_MAX_MEMORY_HEAPS];
	} *bufs = calloc(n, sizeof(*bufs));
	Ruda__AdminMemoryDevice **ptrs = calloc(n, sizeof(*ptrs));
	struct device_usage *u = usage_by_device(ctx);
	if (!bufs || !ptrs || !u) {
		free(bufs);
		free(ptrs);
		free(u);
		reply_oom(s, request);
		return;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		struct ruda_device *d = ctx->devices[i];
		Ruda__AdminMemoryDevice *m = &bufs[i].msg;
		ruda__admin_memory_device__init(m);
		m->index = d->index;
		m->name = d->props.deviceName;
		m->n_heaps = fill_heaps(d, bufs[i].heaps, bufs[i].heap_ptrs);
		m->heaps = bufs[i].heap_ptrs;
		const struct ruda_memory *mem = &d->allocator;
		m->buffer_bytes = d->stats.bytes;
		m->buffers = d->stats.buffers;
		m->arena_bytes = u[i].arena_bytes;
		m->arenas = u[i].arenas;
		m->arenas_imported = u[i].arenas_imported;
		m->arena_imported_bytes = u[i].arena_imported_bytes;
		m->reserved_bytes = mem->stats.reserved;
		m->free_bytes = mem->stats.reserved > mem->stats.in_use
					? mem->stats.reserved - mem->stats.in_use
					: 0;
		m->pages = mem->stats.pages;
		m->empty_pages = mem->stats.empty_pages;
		m->page_size = mem->page_size;
		m->max_shared = mem->max_shared;
		m->keep_empty = mem->keep_empty;
		m->kept_bytes = mem->stats.kept_bytes;
		m->kept_max_bytes = mem->keep_dedicated;
		m->kept_for_ms = (uint32_t)(mem->keep_for_ns / 1000000u);
		m->zero_filled_bytes = d->stats.zero_filled_bytes;
		m->memory_type = mem->type;
		ptrs[i] = m;
	}
	Ruda__AdminMemoryReply mr = RUDA__ADMIN_MEMORY_REPLY__INIT;
	mr.n_devices = ctx->ndevices;
	mr.devices = ptrs;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_MEMORY;
	body.memory = &mr;
	ruda__admin_reply(s, request, &body);
	free(bufs);
	free(ptrs);
	free(u);
}

static const char *pipeline_state(enum ruda_pipeline_state state)
{
	switch (state) {
	case RUDA_PIPELINE_COMPILING: return "compiling";
	case RUDA_PIPELINE_READY: return "ready";
	case RUDA_PIPELINE_FAILED: return "failed";
	}
	return "unknown";
}

static void admin_cache(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	uint32_t max = a->cache->max_pipelines ? a->cache->max_pipelines : CACHE_LIST_DEFAULT;
	if (max > CACHE_LIST_MAX)
		max = CACHE_LIST_MAX;
	uint32_t n = ctx->ndevices ? ctx->ndevices : 1;
	Ruda__AdminCacheDevice *devs = calloc(n, sizeof(*devs));
	Ruda__AdminCacheDevice **dev_ptrs = calloc(n, sizeof(*dev_ptrs));
	Ruda__AdminPipeline *pipes = calloc((size_t)n * max, sizeof(*pipes));
	Ruda__AdminPipeline **pipe_ptrs = calloc((size_t)n * max, sizeof(*pipe_ptrs));
	char (*files)[PATH_MAX] = calloc(n, sizeof(*files));
	if (!devs || !dev_ptrs || !pipes || !pipe_ptrs || !files) {
		free(files);
		free(devs);
		free(dev_ptrs);
		free(pipes);
		free(pipe_ptrs);
		reply_oom(s, request);
		return;
	}
	size_t used = 0;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		struct ruda_device *d = ctx->devices[i];
		struct ruda_pipeline_registry *reg = ctx->pipelines[i];
		Ruda__AdminCacheDevice *m = &devs[i];
		ruda__admin_cache_device__init(m);
		m->index = d->index;
		m->name = d->props.deviceName;
		m->entries = reg->count;
		m->modules = ruda__pipeline_registry_modules(reg);
		m->ready = d->stats.pipelines;
		m->compiling = reg->compiling;
		m->compiled = reg->compiled;
		m->hits = reg->hits;
		m->compile_ns = reg->compile_ns;
		m->file = "";
		const char *dir = ctx->policy ? ctx->policy->config->cache_directory : NULL;
		if (dir && ruda__pipeline_cache_path(d, dir, files[i], sizeof(files[i])) == 0)
			m->file = files[i];
		m->file_bytes = d->stats.cache_file_bytes;
		m->pipelines_total = reg->count;
		m->pipelines = &pipe_ptrs[(size_t)i * max];
		for (size_t b = 0; b < reg->nbuckets; b++)
			for (struct ruda_pipeline *p = reg->buckets[b]; p; p = p->hash_next) {
				/* held by the registry, and by a running compilation */
				unsigned own = 1 + (p->state == RUDA_PIPELINE_COMPILING);
				unsigned refs = p->ref.count > own ? p->ref.count - own : 0;
				if (p->state == RUDA_PIPELINE_READY && refs == 0)
					m->unused++;
				if (m->n_pipelines >= max)
					continue;
				Ruda__AdminPipeline *e = &pipes[(size_t)i * max + m->n_pipelines];
				ruda__admin_pipeline__init(e);
				e->module_sha256.data = p->module_sha;
				e->module_sha256.len = sizeof(p->module_sha);
				e->entry_point = p->entry_point;
				e->spirv_size = p->spirv_size;
				e->binding_count = p->binding_count;
				e->push_constant_size = p->push_constant_size;
				e->spec_constants = p->nspec;
				e->state = (char *)pipeline_state(p->state);
				e->references = refs;
				e->compile_ns = p->compile_ns;
				size_t size = ruda__admin_pipeline__get_packed_size(e) + 8;
				if (used + size > REPLY_BUDGET)
					continue;
				used += size;
				m->pipelines[m->n_pipelines++] = e;
			}
		dev_ptrs[i] = m;
	}
	Ruda__AdminCacheReply cr = RUDA__ADMIN_CACHE_REPLY__INIT;
	cr.n_devices = ctx->ndevices;
	cr.devices = dev_ptrs;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_CACHE;
	body.cache = &cr;
	ruda__admin_reply(s, request, &body);
	free(devs);
	free(dev_ptrs);
	free(pipes);
	free(pipe_ptrs);
	free(files);
}

/* ---- table -------------------------------------------------------------- */

typedef void (*admin_fn)(struct ruda_session *s, uint64_t request, const Ruda__Admin *a);

static const struct {
	admin_fn run;
	const char *name;
	int command; /* changes the daemon: administrators only */
} admin_handlers[] = {
	[RUDA__ADMIN__BODY_STATUS] = {admin_status, "status", 0},
	[RUDA__ADMIN__BODY_DEVICES] = {admin_devices, "devices", 0},
	[RUDA__ADMIN__BODY_CLIENTS] = {admin_clients, "clients", 0},
	[RUDA__ADMIN__BODY_MEMORY] = {admin_memory, "memory", 0},
	[RUDA__ADMIN__BODY_CACHE] = {admin_cache, "cache", 0},
	[RUDA__ADMIN__BODY_KILL] = {ruda__admin_kill, "kill", 1},
	[RUDA__ADMIN__BODY_CLEANUP] = {ruda__admin_cleanup, "cleanup", 1},
	[RUDA__ADMIN__BODY_DRAIN] = {ruda__admin_drain, "drain", 1},
	[RUDA__ADMIN__BODY_SHUTDOWN] = {ruda__admin_shutdown, "shutdown", 1},
	[RUDA__ADMIN__BODY_INJECT_DEVICE_LOSS] = {ruda__admin_inject_device_loss, "inject_device_loss", 1},
};

void ruda__admin_handle(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Admin *a = req->admin;
	size_t body = (size_t)a->body_case;
	if (body >= sizeof(admin_handlers) / sizeof(admin_handlers[0]) ||
	    !admin_handlers[body].run) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_UNSUPPORTED,
				   "unknown admin request (request %llu)",
				   (unsigned long long)req->id);
		return;
	}
	const char *name = admin_handlers[body].name;
	int command = admin_handlers[body].command;
	struct ruda_rights rights;
	rights_of(s, &rights);
	if (command ? !rights.admin : !rights.views) {
		char who[160];
		log_warn("session %llu (uid %u, pid %d): admin %s refused: not an administrator",
			 (unsigned long long)s->id, s->uid, s->pid, name);
		ruda__reply_status(
			s->conn, req->id, RUDA_ERROR_PERMISSION,
			"permission denied: '%s' %s administrators (%s); uid %u is not one", name,
			command ? "changes the daemon and is for"
				: "is a view open, while read_only_views is off, to",
			admins(s, who, sizeof(who)), s->uid);
		return;
	}
	admin_handlers[body].run(s, req->id, a);
}
