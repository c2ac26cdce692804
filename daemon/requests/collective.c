#include "requests/collective.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "memory/buffer.h"
#include "device/device.h"
#include "memory/host_staging.h"
#include "memory/peer_window.h"
#include "common/log.h"
#include "requests/collective_op.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "exec/stream.h"

#define TIMER_PERIOD_MS 1000u

static const char *const op_names[] = {"sum", "prod", "max", "min", "mean"};

/* ---- registry ------------------------------------------------------------- */

static struct ruda_collectives *registry(struct ruda_session_context *ctx)
{
	if (!ctx->collectives) {
		struct ruda_collectives *c = calloc(1, sizeof(*c));
		if (!c)
			return NULL;
		ruda__handle_table_init(&c->members);
		ctx->collectives = c;
	}
	return ctx->collectives;
}

static struct member *member_of(struct ruda_collectives *c, uint64_t session, int make)
{
	struct member *m = ruda__handle_table_get(&c->members, session);
	if (m || !make)
		return m;
	m = calloc(1, sizeof(*m));
	if (m && ruda__handle_table_insert(&c->members, session, m) < 0) {
		free(m);
		m = NULL;
	}
	return m;
}

/* Answer the session's waiting CollectiveSyncs once nothing is pending. */
static void answer_syncs(struct ruda_session_context *ctx, uint64_t session, struct member *m)
{
	if (m->pending || !m->syncs)
		return;
	struct ruda_session *s = ruda__handle_table_get(&ctx->sessions, session);
	while (m->syncs) {
		struct sync_wait *w = m->syncs;
		m->syncs = w->next;
		if (s && s->state == RUDA_SESSION_READY)
			ruda__reply_status(s->conn, w->request, m->error, "%s", m->message);
		free(w);
	}
	m->error = RUDA_OK;
	m->message[0] = '\0';
}

static void note_error(struct member *m, ruda_status status, const char *message)
{
	if (status != RUDA_OK && m->error == RUDA_OK) {
		m->error = status;
		snprintf(m->message, sizeof(m->message), "%s", message);
	}
}

void ruda__collective_settle(struct collective_op *op, uint32_t i, ruda_status status,
			     const char *message)
{
	struct part *p = &op->parts[i];
	if (!p->arrived || p->settled)
		return;
	p->settled = 1;
	struct ruda_collectives *c = op->ctx->collectives;
	struct member *m = c ? member_of(c, p->session, 0) : NULL;
	if (!m)
		return;
	m->pending--;
	note_error(m, status, message);
	answer_syncs(op->ctx, p->session, m);
}

static void unqueue(struct collective_op *op)
{
	if (!op->queued)
		return;
	struct collective_op **link = &op->ctx->collectives->queue;
	while (*link != op)
		link = &(*link)->next;
	*link = op->next;
	op->queued = 0;
}

static void registry_free(struct ruda_session_context *ctx)
{
	struct ruda_collectives *c = ctx->collectives;
	struct member *m;
	while ((m = ruda__handle_table_pop(&c->members, NULL))) {
		while (m->syncs) {
			struct sync_wait *w = m->syncs;
			m->syncs = w->next;
			free(w);
		}
		free(m);
	}
	ruda__handle_table_finish(&c->members);
	free(c);
	ctx->collectives = NULL;
}

void ruda__collective_maybe_free(struct collective_op *op)
{
	if (op->queued || op->waiters)
		return;
	for (uint32_t i = 0; i < op->n; i++)
		if (op->parts[i].arrived && !op->parts[i].settled)
			return;
	for (uint32_t i = 0; i < op->n; i++)
		if (op->parts[i].tmp)
			ruda__buffer_put(op->parts[i].tmp);
	ruda__collective_peer_free(op);
	if (op->staging)
		ruda__host_staging_put(op->staging);
	struct ruda_collectives *c = op->ctx->collectives;
	struct ruda_session_context *ctx = op->ctx;
	free(op->jobs);
	free(op);
	if (c && --c->live == 0 && c->closing)
		registry_free(ctx);
}

void ruda__collective_fail(struct collective_op *op, ruda_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ruda__collective_fail(struct collective_op *op, ruda_status status, const char *fmt, ...)
{
	if (op->failed)
		return;
	op->failed = 1;
	op->error = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(op->message, sizeof(op->message), fmt, ap);
	va_end(ap);
	log_info("all-reduce over %u devices failed: %s", op->n, op->message);
	for (uint32_t i = 0; i < op->n; i++)
		ruda__collective_settle(op, i, status, op->message);
	ruda__collective_peer_drop(op);
}

int ruda__collective_busy(const struct ruda_session_context *ctx)
{
	return ctx->collectives && ctx->collectives->peer_inflight;
}

/* ---- matching ------------------------------------------------------------ */

static void on_timer(uv_timer_t *timer)
{
	struct ruda_session_context *ctx = timer->data;
	struct ruda_collectives *c = ctx->collectives;
	uint64_t now = uv_now(ctx->loop);
	struct collective_op *op = c->queue;
	while (op) {
		struct collective_op *next = op->next;
		if (now - op->created_ms >= RUDA_COLLECTIVE_TIMEOUT_MS) {
			char missing[128] = "";
			for (uint32_t i = 0; i < op->n; i++)
				if (!op->parts[i].arrived) {
					size_t len = strlen(missing);
					snprintf(missing + len, sizeof(missing) - len, "%s%u",
						 len ? ", " : "", op->parts[i].device);
				}
			ruda__collective_fail(op, RUDA_ERROR_TIMEOUT,
					      "all-reduce: no call from device %s within %u ms", missing,
					      RUDA_COLLECTIVE_TIMEOUT_MS);
			unqueue(op);
			ruda__collective_maybe_free(op);
		}
		op = next;
	}
	if (!c->queue)
		uv_timer_stop(timer);
}

static void start_timer(struct ruda_session_context *ctx)
{
	struct ruda_collectives *c = ctx->collectives;
	if (!c->timer) {
		c->timer = malloc(sizeof(*c->timer));
		if (!c->timer)
			return;
		uv_timer_init(ctx->loop, c->timer);
		c->timer->data = ctx;
		uv_unref((uv_handle_t *)c->timer);
	}
	if (!uv_is_active((uv_handle_t *)c->timer))
		uv_timer_start(c->timer, on_timer, TIMER_PERIOD_MS, TIMER_PERIOD_MS);
}

static int cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

/* The device set of a request, sorted and checked; 0 with `why` set. */
static uint32_t device_set(struct ruda_session *s, const uint32_t *devices, size_t n,
			   uint32_t *out, char *why, size_t why_len)
{
	struct ruda_session_context *ctx = s->ctx;
	if (!n || n > ctx->ndevices) {
		snprintf(why, why_len, "%zu devices; rudad has %u", n, ctx->ndevices);
		return 0;
	}
	memcpy(out, devices, n * sizeof(*out));
	qsort(out, n, sizeof(*out), cmp_u32);
	int mine = 0;
	for (size_t i = 0; i < n; i++) {
		if (out[i] >= ctx->ndevices) {
			snprintf(why, why_len, "no device %u (rudad has %u)", out[i], ctx->ndevices);
			return 0;
		}
		if (i && out[i] == out[i - 1]) {
			snprintf(why, why_len, "device %u is named twice", out[i]);
			return 0;
		}
		mine |= out[i] == s->device->index;
	}
	if (!mine) {
		snprintf(why, why_len, "this client's device %u is not one of them",
			 s->device->index);
		return 0;
	}
	return (uint32_t)n;
}

void ruda__handle_collective_init(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__CollectiveInit *ci = req->collective_init;
	/* no more than the daemon has (the list is sorted in a copy) */
	size_t n = ci->n_devices <= s->ctx->ndevices ? ci->n_devices : s->ctx->ndevices + 1;
	uint32_t set[n ? n : 1];
	char why[160];
	if (!device_set(s, ci->devices, ci->n_devices, set, why, sizeof(why))) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "collective: %s", why);
		return;
	}
	if (!registry(s->ctx)) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

static int part_of(const struct collective_op *op, uint32_t device)
{
	for (uint32_t i = 0; i < op->n; i++)
		if (op->parts[i].device == device)
			return (int)i;
	return -1;
}

static void describe_set(char *buf, size_t len, const uint32_t *set, uint32_t n)
{
	buf[0] = '\0';
	for (uint32_t i = 0; i < n; i++) {
		size_t used = strlen(buf);
		snprintf(buf + used, len - used, "%s%u", i ? "," : "", set[i]);
	}
}

/* Validate the participant's own buffers; RUDA_OK or why not. */
static ruda_status check_buffers(struct ruda_session *s, const Ruda__AllReduce *a,
				 struct ruda_buffer **src, char *why, size_t why_len)
{
	uint32_t esize = a->elem_type == RUDA_ELEM_F32 || a->elem_type == RUDA_ELEM_I32 ||
					 a->elem_type == RUDA_ELEM_U32
				 ? 4
			 : a->elem_type == RUDA_ELEM_F16 ? 2 : 0;
	if (!esize) {
		snprintf(why, why_len, "element type %u: only f32, i32, u32 and f16 reduce",
			 a->elem_type);
		return RUDA_ERROR_UNSUPPORTED;
	}
	if (a->op > RUDA__REDUCE_OP__REDUCE_MEAN) {
		snprintf(why, why_len, "no reduction %u", a->op);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (!a->size || a->size % esize) {
		snprintf(why, why_len, "%llu bytes is not a whole number of %u-byte elements",
			 (unsigned long long)a->size, esize);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (a->size > s->device->max_allocation_size) {
		snprintf(why, why_len, "%llu bytes; at most %llu at once",
			 (unsigned long long)a->size,
			 (unsigned long long)s->device->max_allocation_size);
		return RUDA_ERROR_TOO_LARGE;
	}
	const uint64_t ids[2] = {a->src, a->dst}, offsets[2] = {a->src_offset, a->dst_offset};
	for (int k = 0; k < 2; k++) {
		struct ruda_session_buffer *b = ruda__handle_table_get(&s->buffers, ids[k]);
		if (!b || !b->buffer) {
			snprintf(why, why_len, "%s buffer %llu: %s", k ? "dst" : "src",
				 (unsigned long long)ids[k], b ? "failed" : "no such buffer");
			return b ? b->error : RUDA_ERROR_INVALID_HANDLE;
		}
		if (offsets[k] > b->buffer->size || a->size > b->buffer->size - offsets[k]) {
			snprintf(why, why_len, "%s buffer %llu: bytes %llu..%llu lie outside its %llu",
				 k ? "dst" : "src", (unsigned long long)ids[k],
				 (unsigned long long)offsets[k],
				 (unsigned long long)(offsets[k] + a->size),
				 (unsigned long long)b->buffer->size);
			return RUDA_ERROR_OUT_OF_RANGE;
		}
		if (!k)
			*src = b->buffer;
	}
	return RUDA_OK;
}

static struct collective_op *op_new(struct ruda_session *s, const Ruda__AllReduce *a,
				    const uint32_t *set, uint32_t n)
{
	struct collective_op *op = calloc(1, sizeof(*op) + n * sizeof(struct part));
	if (!op)
		return NULL;
	op->ctx = s->ctx;
	op->size = a->size;
	op->elem = a->elem_type;
	op->reduce = a->op;
	op->n = n;
	op->created_ms = uv_now(s->ctx->loop);
	for (uint32_t i = 0; i < n; i++)
		op->parts[i].device = set[i];
	struct ruda_collectives *c = s->ctx->collectives;
	struct collective_op **link = &c->queue;
	while (*link)
		link = &(*link)->next;
	*link = op;
	op->queued = 1;
	c->live++;
	/* host memory imported into every device of the set: kept from an
	 * earlier call, or made in the thread pool (meanwhile each src waits
	 * in device memory); or, between logical devices of one physical
	 * device, none (collective_peer.c) */
	op->ready = 1;
	struct ruda_device *devices[n];
	for (uint32_t i = 0; i < n; i++)
		devices[i] = s->ctx->devices[set[i]];
	if (a->size && ruda__collective_peer_plan(op, devices)) {
		/* each src waits in a device buffer of its own device */
	} else if (a->size && n && a->size <= UINT64_MAX / n) {
		op->staging = ruda__host_staging_cached(a->size * n, devices, n);
		if (!op->staging &&
		    ruda__host_staging_make(s->ctx->loop, a->size * n, devices, n, ruda__collective_staging_made,
					    op) == 0) {
			op->ready = 0;
			op->waiters++;
		}
	}
	start_timer(s->ctx);
	return op;
}

/* The queued op a call of device `mine` joins (the oldest it has not
 * arrived at; NULL: a new one), and its part there in *part. */
static struct collective_op *op_joined(struct ruda_collectives *c, uint32_t mine, int *part)
{
	for (struct collective_op *op = c->queue; op; op = op->next) {
		*part = part_of(op, mine);
		if (*part >= 0 && !op->parts[*part].arrived)
			return op;
	}
	return NULL;
}

/* Whether the call parks while the memory of the buffer its src will wait
 * in (`tmp`: the staging still being made, or the device path) is made in
 * the thread pool, as a create's is: made on the loop, a 1 GiB all-reduce
 * held every client ~25 ms on the H200. Read only: the call joins its op
 * after, when it runs again. */
static bool park_for_tmp(struct ruda_collectives *c, struct ruda_session *s,
			 const Ruda__AllReduce *a, const uint32_t *set, uint32_t n)
{
	if (s->memory_made) { /* handed again: the memory is made */
		s->memory_made = 0;
		return false;
	}
	if (!a->size || a->size > UINT64_MAX / n)
		return false;
	uint32_t mine = s->device->index;
	int i = -1;
	struct collective_op *op = op_joined(c, mine, &i);
	bool needs;
	if (!op) {
		/* a new op waits for its staging unless one of its size is
		 * kept; on the device path a part but the first may copy into
		 * its window instead, and the memory made is kept for the
		 * next buffer of its size */
		struct ruda_device *devices[n];
		for (uint32_t k = 0; k < n; k++)
			devices[k] = s->ctx->devices[set[k]];
		needs = !ruda__host_staging_kept(a->size * n, devices, n);
	} else if (op->failed || op->size != a->size) {
		needs = false; /* it fails */
	} else if (op->peer) {
		struct ruda_ref *hold = NULL;
		needs = ruda__collective_peer_direct(op, (uint32_t)i, &hold) == VK_NULL_HANDLE;
	} else {
		needs = !op->ready;
	}
	return needs && ruda__session_park_for_memory(s, s->device, a->size, RUDA_ALLOCATION_AUTO);
}

void ruda__handle_all_reduce(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__AllReduce *a = req->all_reduce;
	struct ruda_session_context *ctx = s->ctx;
	struct ruda_collectives *c = registry(ctx);
	struct member *m = c ? member_of(c, s->id, 1) : NULL;
	if (!m) {
		ruda__stream_fail(s->current, RUDA_ERROR_OUT_OF_MEMORY, "all-reduce: out of memory");
		return;
	}
	size_t asked = a->n_devices <= ctx->ndevices ? a->n_devices : ctx->ndevices + 1;
	uint32_t set[asked ? asked : 1];
	char why[200];
	uint32_t n = device_set(s, a->devices, a->n_devices, set, why, sizeof(why));
	if (!n) {
		/* matches nothing: only this client hears of it */
		char message[256];
		snprintf(message, sizeof(message), "all-reduce (request %llu): %s",
			 (unsigned long long)req->id, why);
		note_error(m, RUDA_ERROR_INVALID_ARGUMENT, message);
		return;
	}
	if (park_for_tmp(c, s, a, set, n))
		return; /* parked: it runs again once the memory is made */
	uint32_t mine = s->device->index;
	int i = -1;
	struct collective_op *op = op_joined(c, mine, &i);
	int same_set = 1;
	if (op) {
		same_set = op->n == n;
		for (uint32_t k = 0; same_set && k < n; k++)
			same_set = op->parts[k].device == set[k];
	} else {
		op = op_new(s, a, set, n);
		if (!op) {
			note_error(m, RUDA_ERROR_OUT_OF_MEMORY, "all-reduce: out of memory");
			return;
		}
		i = part_of(op, mine);
	}
	struct part *p = &op->parts[i];
	p->arrived = 1;
	p->session = s->id;
	p->dst = a->dst;
	p->dst_offset = a->dst_offset;
	op->arrived++;
	m->pending++;
	if (op->arrived == op->n)
		unqueue(op);

	struct ruda_buffer *src = NULL;
	ruda_status st = check_buffers(s, a, &src, why, sizeof(why));
	if (op->failed) {
		ruda__collective_settle(op, (uint32_t)i, op->error, op->message);
	} else if (!same_set) {
		char ours[96], theirs[96];
		describe_set(ours, sizeof(ours), set, n);
		uint32_t other[op->n];
		for (uint32_t k = 0; k < op->n; k++)
			other[k] = op->parts[k].device;
		describe_set(theirs, sizeof(theirs), other, op->n);
		ruda__collective_fail(op, RUDA_ERROR_INVALID_ARGUMENT,
				      "all-reduce: device sets differ: device %u named {%s}, another {%s}", mine,
				      ours, theirs);
	} else if (st != RUDA_OK) {
		ruda__collective_fail(op, st, "all-reduce: device %u: %s", mine, why);
	} else if (a->size != op->size || a->elem_type != op->elem || a->op != op->reduce) {
		ruda__collective_fail(op, RUDA_ERROR_INVALID_ARGUMENT,
				      "all-reduce: calls differ: device %u asked for %llu bytes of type %u (%s), "
				      "another for %llu bytes of type %u (%s)",
				      mine, (unsigned long long)a->size, a->elem_type, op_names[a->op],
				      (unsigned long long)op->size, op->elem, op_names[op->reduce]);
	} else if (op->peer || !op->ready) {
		/* the staging is still being made, or the device path reads
		 * src a chunk at a time: keep src's bytes, in order */
		struct ruda_buffer *tmp = NULL;
		struct op_waiter *w = calloc(1, sizeof(*w));
		VkBufferCopy region = {.srcOffset = a->src_offset, .dstOffset = 0, .size = op->size};
		/* or, one chunk on the device path, straight into its window */
		struct ruda_ref *hold = NULL;
		VkBuffer into = op->peer ? ruda__collective_peer_direct(op, (uint32_t)i, &hold)
					 : VK_NULL_HANDLE;
		ruda_status made = !w	 ? RUDA_ERROR_OUT_OF_MEMORY
				   : into ? RUDA_OK
					  : ruda__buffer_create(s->device, op->size, &tmp);
		if (made == RUDA_OK) {
			ruda__stream_note_use(s->current, src); /* the copy may submit */
			made = ruda__stream_copy_regions(s->current, src->vk, tmp ? tmp->vk : into,
							 &region, 1, true, &src->ref,
							 tmp ? &tmp->ref : hold);
		}
		if (made != RUDA_OK) {
			free(w);
			if (tmp)
				ruda__buffer_put(tmp);
			ruda__collective_fail(op, made,
					      "all-reduce: device %u: no memory to keep %llu bytes", mine,
					      (unsigned long long)op->size);
		} else {
			if (!op->peer)
				s->device->stats.staged_bytes_out += op->size;
			p->tmp = tmp;
			w->base.done = ruda__collective_tmp_copied;
			w->op = op;
			w->part = (uint32_t)i;
			op->waiters++;
			ruda__stream_wait(s->current, &w->base);
			return; /* `op` may be gone now */
		}
	} else {
		VkBuffer host = op->staging ? ruda__host_staging_buffer(op->staging, s->device)
					    : VK_NULL_HANDLE;
		struct op_waiter *w = host ? calloc(1, sizeof(*w)) : NULL;
		VkBufferCopy region = {
			.srcOffset = a->src_offset,
			.dstOffset = (uint64_t)i * op->size,
			.size = op->size,
		};
		if (w)
			ruda__stream_note_use(s->current, src); /* the copy may submit */
		if (!w || ruda__stream_copy_regions(s->current, src->vk, host, &region, 1, false,
						    &src->ref, &op->staging->ref) != RUDA_OK) {
			free(w);
			ruda__collective_fail(op, RUDA_ERROR_OUT_OF_MEMORY,
					      "all-reduce: no host memory for %u x %llu bytes", op->n,
					      (unsigned long long)op->size);
		} else {
			s->device->stats.staged_bytes_out += op->size;
			w->base.done = ruda__collective_copied;
			w->op = op;
			w->part = (uint32_t)i;
			op->waiters++;
			ruda__stream_wait(s->current, &w->base);
			return; /* `op` may be gone now */
		}
	}
	ruda__collective_maybe_free(op);
}

void ruda__handle_collective_sync(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_collectives *c = registry(s->ctx);
	struct member *m = c ? member_of(c, s->id, 1) : NULL;
	struct sync_wait *w = m ? malloc(sizeof(*w)) : NULL;
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	/* collectives' copies are on the session's streams: submit them */
	ruda__session_submit_all(s);
	w->request = req->id;
	w->next = NULL;
	struct sync_wait **link = &m->syncs;
	while (*link)
		link = &(*link)->next;
	*link = w;
	answer_syncs(s->ctx, s->id, m);
}

/* ---- ends ------------------------------------------------------------------ */

static int device_has_other_session(struct ruda_session_context *ctx, uint32_t device,
				    const struct ruda_session *gone)
{
	for (size_t i = 0; i < ctx->sessions.cap; i++) {
		struct ruda_session *s = ctx->sessions.slots[i].value;
		if (s && s != gone && s->state == RUDA_SESSION_READY && s->device &&
		    s->device->index == device)
			return 1;
	}
	return 0;
}

void ruda__collective_session_gone(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	struct ruda_collectives *c = ctx->collectives;
	if (!c)
		return;
	struct member *m = ruda__handle_table_remove(&c->members, s->id);
	if (m) {
		while (m->syncs) {
			struct sync_wait *w = m->syncs;
			m->syncs = w->next;
			free(w);
		}
		free(m);
	}
	if (!s->device)
		return;
	uint32_t device = s->device->index;
	struct collective_op *op = c->queue;
	while (op) {
		struct collective_op *next = op->next;
		int i = part_of(op, device);
		int joined = i >= 0 && op->parts[i].arrived && op->parts[i].session == s->id;
		int orphan = i >= 0 && !op->parts[i].arrived &&
			     !device_has_other_session(ctx, device, s);
		if (joined || orphan)
			ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED,
					      "all-reduce: the client of device %u disconnected (session %llu)",
					      device, (unsigned long long)s->id);
		/* a call it joined stays queued so the participants still to come
		 * hear of the failure; one nobody can join any more goes */
		if (orphan) {
			unqueue(op);
			ruda__collective_maybe_free(op);
		}
		op = next;
	}
}

static void free_timer(uv_handle_t *handle)
{
	free(handle);
}

void ruda__collective_finish(struct ruda_session_context *ctx)
{
	struct ruda_collectives *c = ctx->collectives;
	ruda__host_staging_cache_clear();
	ruda__peer_window_cache_clear();
	if (!c)
		return;
	while (c->queue) {
		struct collective_op *op = c->queue;
		ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED, "rudad is shutting down");
		unqueue(op);
		ruda__collective_maybe_free(op);
	}
	if (c->timer) {
		uv_timer_stop(c->timer);
		uv_close((uv_handle_t *)c->timer, free_timer);
		c->timer = NULL;
	}
	/* ops still copying free the registry when the last one goes */
	c->closing = 1;
	if (!c->live)
		registry_free(ctx);
}
