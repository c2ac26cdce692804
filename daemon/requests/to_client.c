#include "requests/to_client.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/buffer.h"
#include "device/device.h"
#include "exec/copy.h"
#include "exec/peer_copy.h"
#include "memory/host_staging.h"
#include "memory/peer_window.h"
#include "common/log.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "exec/stream.h"

struct to_client_waiter {
	struct ruda_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session, request;       /* who asked */
	uint64_t target, target_handle;  /* where the buffer goes */
	struct ruda_buffer *dst;          /* owned reference */
	struct ruda_host_staging *staging; /* owned reference; NULL: same device */
	/* two logical devices of one physical device: memory of the source's
	 * lent to the target (owned reference), instead of staging */
	struct ruda_peer_window *window;
	uint64_t size;
	/* while the staging is made in the thread pool, or for a window
	 * smaller than the bytes, they wait here */
	struct ruda_buffer *tmp; /* owned reference */
	int pending;             /* the copy into tmp, the staging: still to come */
	ruda_status error;
	/* where the time goes, for one debug line at the reply: uv_hrtime()
	 * of each step, the source's submission's device time, and which way
	 * the bytes went */
	struct {
		uint64_t arrived, dst, recorded, submitted, completed, heard, device_ns;
		const char *dst_what;
		struct ruda_device *from; /* borrowed: read while its waiter runs */
		uint32_t from_index, to_index;
	} at;
};

/* Whether a new buffer of `size` bytes has bytes past them in its last
 * word (buffers are made whole words), which a copy of `size` leaves as
 * they were. */
static int has_tail(uint64_t size)
{
	return size == 0 || (size & 3) != 0;
}

static double ms_since(uint64_t from, uint64_t t)
{
	return t > from ? (double)(t - from) / 1e6 : 0.0;
}

static void reply(struct to_client_waiter *w, ruda_status status, const char *why)
{
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (s && s->state == RUDA_SESSION_READY)
		ruda__reply_status(s->conn, w->request, status, "to_client: %s", why);
	uint64_t t0 = w->at.arrived;
	log_debug("to_client %llu B, device %u -> %u: %s %.3f ms, recorded %.3f ms, submitted "
		  "%.3f ms, completed %.3f ms (device %.3f ms), heard %.3f ms, replied %.3f ms%s%s",
		  (unsigned long long)w->size, w->at.from_index, w->at.to_index, w->at.dst_what,
		  ms_since(t0, w->at.dst), ms_since(t0, w->at.recorded),
		  ms_since(t0, w->at.submitted), ms_since(t0, w->at.completed),
		  (double)w->at.device_ns / 1e6, ms_since(t0, w->at.heard),
		  ms_since(t0, uv_hrtime()), status == RUDA_OK ? "" : ": ",
		  status == RUDA_OK ? "" : ruda_strerror(status));
}

/* The source's submission is done: when the completion thread saw it (the
 * loop, when it found it first) and when the loop heard; once. */
static void heard(struct to_client_waiter *w, int status)
{
	if (w->at.heard)
		return;
	w->at.heard = uv_hrtime();
	uint64_t seen = status == RUDA_OK ? atomic_load(&w->at.from->completed_ns) : 0;
	w->at.completed = seen >= w->at.submitted ? seen : w->at.heard;
	w->at.device_ns = w->base.gpu_ns;
}

static void waiter_free(struct to_client_waiter *w)
{
	if (w->tmp)
		ruda__buffer_put(w->tmp);
	if (w->dst)
		ruda__buffer_put(w->dst);
	if (w->staging)
		ruda__host_staging_put(w->staging);
	if (w->window)
		ruda__peer_window_put(w->window);
	free(w);
}

/* The bytes are in the new buffer: give it to the target session. */
static void settle(struct to_client_waiter *w)
{
	struct ruda_session *t = ruda__handle_table_get(&w->ctx->sessions, w->target);
	if (!t || t->state != RUDA_SESSION_READY) {
		reply(w, RUDA_ERROR_DISCONNECTED, "the target session has gone");
		return;
	}
	if (ruda__handle_table_get(&t->buffers, w->target_handle)) {
		reply(w, RUDA_ERROR_INVALID_HANDLE, "the target's buffer id is in use");
		return;
	}
	ruda_status st = ruda__session_charge_buffer(t, w->dst);
	if (st != RUDA_OK) {
		reply(w, st, "over the target session's memory quota");
		return;
	}
	struct ruda_session_buffer *b = calloc(1, sizeof(*b));
	if (!b || ruda__handle_table_insert(&t->buffers, w->target_handle, b) < 0) {
		free(b);
		ruda__session_uncharge_buffer(t, w->dst);
		reply(w, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	b->buffer = w->dst; /* the waiter's reference moves to the session */
	w->dst = NULL;
	reply(w, RUDA_OK, "");
}

static void into_target_done(struct ruda_waiter *base, int status)
{
	struct to_client_waiter *w = (struct to_client_waiter *)base;
	if (status != RUDA_OK)
		reply(w, (ruda_status)status, "the target device failed");
	else
		settle(w);
	waiter_free(w);
}

/* The source's bytes are in host memory (or, on one device, already in
 * the new buffer). */
static void out_of_source_done(struct ruda_waiter *base, int status)
{
	struct to_client_waiter *w = (struct to_client_waiter *)base;
	heard(w, status);
	if (status != RUDA_OK) {
		reply(w, (ruda_status)status, "the source device failed");
		waiter_free(w);
		return;
	}
	if (!w->staging && !w->window) {
		settle(w);
		waiter_free(w);
		return;
	}
	/* nothing more to do for a session that has gone (nor, at shutdown,
	 * on a device that may be gone) */
	struct ruda_session *t = ruda__handle_table_get(&w->ctx->sessions, w->target);
	if (!t || t->state != RUDA_SESSION_READY) {
		reply(w, RUDA_ERROR_DISCONNECTED, "the target session has gone");
		waiter_free(w);
		return;
	}
	struct ruda_device *d = w->dst->device;
	struct ruda_copy c = {
		.src = w->window ? w->window->to.buffer : ruda__host_staging_buffer(w->staging, d),
		.dst = w->dst->vk,
		.region = {.srcOffset = 0, .dstOffset = 0, .size = w->size},
		.hold = {w->window ? &w->window->ref : &w->staging->ref, &w->dst->ref},
		/* the word the copy does not reach may hold another client's
		 * bytes: zero it first */
		.zero = has_tail(w->size),
		.zero_from = w->size & ~(uint64_t)3,
		.device_local = w->window != NULL, /* host staging stays a DMA */
	};
	w->base.done = into_target_done;
	/* on a failed submission the waiter hears it */
	int rc = ruda__copy_submit(d, &c, &w->base, NULL);
	if (rc == -EAGAIN || rc == -ENOMEM) {
		reply(w, RUDA_ERROR_OUT_OF_MEMORY,
		      rc == -EAGAIN ? "cannot record the copy into the target device"
				    : "out of memory");
		waiter_free(w);
	}
}

/* The bytes are in tmp and the staging is made: tmp -> host memory on the
 * source device, then on as usual. */
static void maybe_stage(struct to_client_waiter *w)
{
	if (w->pending)
		return;
	struct ruda_session *t = ruda__handle_table_get(&w->ctx->sessions, w->target);
	if (w->error == RUDA_OK && (!t || t->state != RUDA_SESSION_READY))
		w->error = RUDA_ERROR_DISCONNECTED;
	struct ruda_device *d = w->tmp->device;
	struct ruda_buffer *tmp = w->tmp;
	struct ruda_copy c = {
		.src = tmp->vk,
		.dst = w->error == RUDA_OK ? ruda__host_staging_buffer(w->staging, d)
					   : VK_NULL_HANDLE,
		.region = {.srcOffset = 0, .dstOffset = 0, .size = w->size},
		.hold = {w->staging ? &w->staging->ref : NULL, &tmp->ref},
		.after_transfer = 1, /* the copy into tmp */
	};
	w->base.done = out_of_source_done;
	w->tmp = NULL; /* the submission holds it (its waiter may free `w`) */
	int rc = ruda__copy_submit(d, &c, &w->base, NULL);
	if (rc == -EAGAIN || rc == -ENOMEM) {
		w->tmp = tmp;
		reply(w, w->error != RUDA_OK ? w->error : RUDA_ERROR_OUT_OF_MEMORY,
		      w->error == RUDA_ERROR_DISCONNECTED ? "the target session has gone"
							  : "no host memory for the copy");
		waiter_free(w);
		return;
	}
	ruda__buffer_put(tmp);
}

static void tmp_done(struct ruda_waiter *base, int status)
{
	struct to_client_waiter *w = (struct to_client_waiter *)base;
	heard(w, status);
	if (status != RUDA_OK && w->error == RUDA_OK)
		w->error = (ruda_status)status;
	w->pending--;
	maybe_stage(w);
}

static void staging_made(struct ruda_host_staging *st, void *data)
{
	struct to_client_waiter *w = data;
	w->staging = st;
	if (!st && w->error == RUDA_OK)
		w->error = RUDA_ERROR_OUT_OF_MEMORY;
	w->pending--;
	maybe_stage(w);
}

/* The bytes have gone through the window into the new buffer. */
static void through_window_done(void *data, int status)
{
	into_target_done(&((struct to_client_waiter *)data)->base, status);
}

/* The bytes are in tmp, more than the window holds: through it, chunk by
 * chunk (tmp keeps them as they were when asked for, whatever the stream
 * does next). */
static void tmp_for_window_done(struct ruda_waiter *base, int status)
{
	struct to_client_waiter *w = (struct to_client_waiter *)base;
	heard(w, status);
	struct ruda_session *t = ruda__handle_table_get(&w->ctx->sessions, w->target);
	if (status != RUDA_OK) {
		reply(w, (ruda_status)status, "the source device failed");
	} else if (!t || t->state != RUDA_SESSION_READY) {
		reply(w, RUDA_ERROR_DISCONNECTED, "the target session has gone");
	} else if (ruda__peer_copy_start(w->window, w->tmp, w->dst, 0, w->size, has_tail(w->size),
					 w->size & ~(uint64_t)3, through_window_done, w) < 0) {
		reply(w, RUDA_ERROR_OUT_OF_MEMORY, "cannot record the copies between the devices");
	} else {
		return; /* through_window_done frees `w` */
	}
	waiter_free(w);
}

/* The bytes of the window `packed` bytes move through: theirs, or two
 * chunks when they are more. */
static uint64_t moving_window(uint64_t packed)
{
	uint64_t chunk = ruda__peer_chunk();
	return packed <= 2 * chunk ? packed : 2 * chunk;
}

/* Two logical devices of one physical device: a window of the source's
 * memory lent to the target, of the bytes' size or (more bytes than a
 * window holds) two chunks, the bytes then waiting in tmp. On no window
 * (different devices, no export or import) it stays NULL: host staging. */
static ruda_status try_window(struct to_client_waiter *w, struct ruda_device *from,
			      struct ruda_device *to, uint64_t packed)
{
	const char *why = NULL;
	int err = -ENOTSUP;
	if (ruda__peer_possible(from, to, &why))
		err = ruda__peer_window_get(from, to, moving_window(packed), &w->window);
	if (err < 0) {
		log_debug("to_client %llu bytes, device %u -> %u: through host staging (%s)",
			  (unsigned long long)packed, from->index, to->index,
			  why ? why : err == -ENOMEM ? "no memory for a shared window"
						     : "the driver refused to share memory");
		return RUDA_OK;
	}
	log_debug("to_client %llu bytes, device %u -> %u: device copies through a %llu-byte "
		  "shared window", (unsigned long long)packed, from->index, to->index,
		  (unsigned long long)w->window->size);
	if (packed <= w->window->size)
		return RUDA_OK;
	return ruda__buffer_create(from, packed, &w->tmp);
}

/* From this size a new buffer between two logical devices of one GPU is a
 * lent window: a window is a dedicated allocation, and smaller buffers
 * share pages (drivers bound the count of allocations). */
#define LEND_MIN (1ull << 20)

/* Whether `packed` bytes between two logical devices of one GPU become a
 * window lent as the new buffer: at least LEND_MIN whole words. */
static bool lends(uint64_t packed)
{
	return !has_tail(packed) && packed >= LEND_MIN;
}

/* Two logical devices of one physical device, and at least LEND_MIN whole
 * words: the new buffer is a window of the source's memory lent to the
 * target, so one device copy on the source's stream fills it and nothing
 * runs on the target (the window's memory stays the target's buffer if the
 * source device goes). Leaves w->dst NULL when not (the caller makes a
 * buffer of the target's own). */
static void try_lent_window(struct to_client_waiter *w, struct ruda_device *from,
			    struct ruda_device *to, uint64_t packed)
{
	struct ruda_peer_window *window;
	if (!lends(packed) || !ruda__peer_possible(from, to, NULL) ||
	    ruda__peer_window_get(from, to, packed, &window) < 0)
		return;
	if (ruda__buffer_from_window(window, packed, &w->dst) != RUDA_OK) {
		ruda__peer_window_put(window); /* w->dst stays NULL */
		return;
	}
	log_debug("to_client %llu bytes, device %u -> %u: into a %llu-byte window lent as the "
		  "new buffer", (unsigned long long)packed, from->index, to->index,
		  (unsigned long long)window->size);
}

/* Whether the request parks while the thread pool makes device memory it
 * needs, having parked `made` times already: the new buffer's on `to`;
 * between two GPUs then the buffer on `from` its bytes wait in while host
 * staging is made (none kept); between two logical devices of one GPU
 * instead the memory on `from` of a window not yet kept (lent as the
 * buffer, or the bytes moved through it; try_lent_window, try_window). */
static bool park_for_memory(struct ruda_session *s, struct ruda_device *from,
			    struct ruda_device *to, uint64_t packed, int made)
{
	uint64_t bytes = packed ? packed : 1;
	bool parked;
	if (from == to) {
		parked = made < 1 && ruda__session_park_for_memory(s, to, bytes,
								   RUDA_ALLOCATION_AUTO);
	} else if (!ruda__peer_possible(from, to, NULL)) {
		struct ruda_device *devices[2] = {from, to};
		parked = (made < 1 &&
			  ruda__session_park_for_memory(s, to, bytes, RUDA_ALLOCATION_AUTO)) ||
			 (made < 2 && !ruda__host_staging_kept(packed, devices, 2) &&
			  ruda__session_park_for_memory(s, from, bytes, RUDA_ALLOCATION_AUTO));
	} else {
		uint64_t window = lends(packed) ? packed : moving_window(packed);
		parked = made < 1 && !ruda__peer_window_kept(from, to, window) &&
			 ruda__session_park_for_memory(s, from, ruda__peer_window_size(window),
						       RUDA_ALLOCATION_DEDICATED);
	}
	if (parked)
		s->memory_made = made + 1; /* the request comes back knowing it */
	return parked;
}

/* The copy regions of the request, packed in row-major order from 0:
 * one for plain bytes, one per row (or element) of a strided tensor.
 * Returns the count, or 0 with `why` set. */
static uint32_t plan(const Ruda__ToClient *t, uint64_t buffer_size, VkBufferCopy **out,
		     uint64_t *packed, ruda_status *status, char *why, size_t why_len)
{
	*status = RUDA_ERROR_INVALID_ARGUMENT;
	if (!t->n_shape) {
		if (t->offset > buffer_size || t->size > buffer_size - t->offset) {
			*status = RUDA_ERROR_OUT_OF_RANGE;
			snprintf(why, why_len, "bytes %llu..%llu lie outside the buffer's %llu",
				 (unsigned long long)t->offset,
				 (unsigned long long)(t->offset + t->size),
				 (unsigned long long)buffer_size);
			return 0;
		}
		*out = calloc(1, sizeof(**out));
		if (!*out) {
			*status = RUDA_ERROR_OUT_OF_MEMORY;
			snprintf(why, why_len, "out of memory");
			return 0;
		}
		(*out)[0] = (VkBufferCopy){.srcOffset = t->offset, .dstOffset = 0, .size = t->size};
		*packed = t->size;
		return 1;
	}
	size_t rank = t->n_shape;
	uint64_t elem = t->elem_size;
	if (t->n_strides != rank || rank > 8 || elem == 0 || elem > 16) {
		snprintf(why, why_len, "a tensor needs as many strides as dimensions (at most 8) "
			 "and an element size of 1..16 bytes");
		return 0;
	}
	/* elements, last byte reached, rows */
	uint64_t count = 1, last = 0;
	for (size_t i = 0; i < rank; i++) {
		uint64_t dim = t->shape[i];
		if (dim == 0) {
			count = 0;
			break;
		}
		if (count > UINT64_MAX / dim || t->strides[i] > (UINT64_MAX / 4) / dim) {
			*status = RUDA_ERROR_TOO_LARGE;
			snprintf(why, why_len, "the tensor's size overflows");
			return 0;
		}
		count *= dim;
		last += (dim - 1) * t->strides[i];
	}
	if (count && (count > UINT64_MAX / elem || last >= UINT64_MAX / elem - 1 ||
		      t->offset > buffer_size || (last + 1) * elem > buffer_size - t->offset)) {
		*status = RUDA_ERROR_OUT_OF_RANGE;
		snprintf(why, why_len, "the tensor reaches past the buffer's %llu bytes",
			 (unsigned long long)buffer_size);
		return 0;
	}
	int rows = t->strides[rank - 1] == 1;
	uint64_t run = rows ? t->shape[rank - 1] : 1;
	uint64_t nregions = count ? count / run : 0;
	if (nregions > RUDA_TO_CLIENT_MAX_REGIONS) {
		*status = RUDA_ERROR_TOO_LARGE;
		snprintf(why, why_len, "%llu pieces; at most %u", (unsigned long long)nregions,
			 RUDA_TO_CLIENT_MAX_REGIONS);
		return 0;
	}
	*out = calloc(nregions ? nregions : 1, sizeof(**out));
	if (!*out) {
		*status = RUDA_ERROR_OUT_OF_MEMORY;
		snprintf(why, why_len, "out of memory");
		return 0;
	}
	size_t outer = rows ? rank - 1 : rank; /* dimensions walked one region at a time */
	uint64_t index[8] = {0};
	for (uint64_t r = 0; r < nregions; r++) {
		uint64_t at = 0;
		for (size_t i = 0; i < outer; i++)
			at += index[i] * t->strides[i];
		(*out)[r] = (VkBufferCopy){
			.srcOffset = t->offset + at * elem,
			.dstOffset = r * run * elem,
			.size = run * elem,
		};
		for (size_t i = outer; i-- > 0;) {
			if (++index[i] < t->shape[i])
				break;
			index[i] = 0;
		}
	}
	*packed = count * elem;
	if (!nregions) {
		/* an empty tensor: an empty buffer, no copy */
		(*out)[0] = (VkBufferCopy){.size = 0};
		return 1;
	}
	return (uint32_t)nregions;
}

void ruda__handle_to_client(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t arrived = uv_hrtime();
	const Ruda__ToClient *t = req->to_client;
	/* handed again after memory was made for it (below), whatever it
	 * meets: how many times */
	int memory_made = s->memory_made;
	s->memory_made = 0;
	struct ruda_session_context *ctx = s->ctx;
	char why[256];
	struct ruda_session_buffer *src = ruda__handle_table_get(&s->buffers, t->handle);
	if (!src || !src->buffer || src->error != RUDA_OK) {
		ruda__reply_status(s->conn, req->id, src ? src->error : RUDA_ERROR_INVALID_HANDLE,
				   "to_client: buffer %llu: %s", (unsigned long long)t->handle,
				   !src ? "no such buffer in this session"
						: src->error_message ? src->error_message : "failed");
		return;
	}
	struct ruda_session *target = ruda__handle_table_get(&ctx->sessions, t->target_session);
	if (!target || target->state != RUDA_SESSION_READY) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "to_client: no session %llu",
				   (unsigned long long)t->target_session);
		return;
	}
	/* one process moves data between its own clients, nobody else's */
	if (target->uid != s->uid || target->pid != s->pid) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_PERMISSION,
				   "to_client: session %llu belongs to another process",
				   (unsigned long long)t->target_session);
		return;
	}
	if (ruda__handle_table_get(&target->buffers, t->target_handle)) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "to_client: buffer id %llu is in use in session %llu",
				   (unsigned long long)t->target_handle,
				   (unsigned long long)t->target_session);
		return;
	}
	VkBufferCopy *regions = NULL;
	uint64_t packed = 0;
	ruda_status st;
	uint32_t n = plan(t, src->buffer->size, &regions, &packed, &st, why, sizeof(why));
	if (!n) {
		ruda__reply_status(s->conn, req->id, st, "to_client: %s", why);
		return;
	}
	/* the new device memory is made in the thread pool, as a create's
	 * is (the loop would wait for it, ~25 ms a GiB on an H200): the
	 * request parks and comes again */
	if (ruda__session_quota_allows(target, packed) &&
	    park_for_memory(s, s->device, target->device, packed, memory_made)) {
		free(regions);
		return;
	}
	struct to_client_waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		free(regions);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	*w = (struct to_client_waiter){
		.base.done = out_of_source_done,
		.ctx = ctx,
		.session = s->id,
		.request = req->id,
		.target = target->id,
		.target_handle = t->target_handle,
		.size = packed,
		.at = {.arrived = arrived, .from = s->device, .from_index = s->device->index,
		       .to_index = target->device->index},
	};
	if (target->device != s->device)
		try_lent_window(w, s->device, target->device, packed);
	int lent = w->dst != NULL;
	st = lent ? RUDA_OK : ruda__buffer_create(target->device, packed ? packed : 1, &w->dst);
	struct ruda_device *devices[2] = {s->device, target->device};
	if (st == RUDA_OK && target->device != s->device && !lent)
		st = try_window(w, s->device, target->device, packed);
	if (st == RUDA_OK && target->device != s->device && !w->window && !lent) {
		/* host memory imported into both devices: kept from an earlier
		 * transfer, or made in the thread pool while the bytes wait in
		 * device memory (an import must not stall the loop) */
		w->staging = ruda__host_staging_cached(packed, devices, 2);
		if (!w->staging)
			st = ruda__buffer_create(s->device, packed ? packed : 1, &w->tmp);
	}
	w->at.dst = uv_hrtime();
	w->at.dst_what = lent ? (w->dst->window->uses > 1 ? "window cached" : "window new")
			 : w->window ? (w->window->uses > 1 ? "shared window cached"
							    : "shared window new")
			 : w->staging ? "host staging cached"
			 : w->tmp ? "host staging made"
				  : "new buffer";
	if (st == RUDA_OK && !w->staging && !w->window && !w->tmp && has_tail(packed)) {
		/* the copy below goes straight into the new buffer: zero the
		 * word it does not reach first (it may hold another client's
		 * bytes); the stream records the fill before the copy */
		ruda__stream_zero(s->current, w->dst);
		w->dst->zero_from = packed & ~(uint64_t)3;
	}
	VkBuffer into = VK_NULL_HANDLE;
	/* every destination but host staging is device memory */
	bool into_host = !lent && !w->tmp && !w->window && w->staging;
	if (st == RUDA_OK) {
		into = lent	     ? w->dst->window->from.buffer
		       : w->tmp	     ? w->tmp->vk
		       : w->window  ? w->window->from.buffer
		       : w->staging ? ruda__host_staging_buffer(w->staging, s->device)
				    : w->dst->vk;
		if (!into)
			st = RUDA_ERROR_OUT_OF_MEMORY;
	}
	if (st == RUDA_OK)
		st = ruda__stream_copy_regions(s->current, src->buffer->vk, into, regions,
					       packed ? n : 0, !into_host, &src->buffer->ref,
					       w->tmp	    ? &w->tmp->ref
					       : w->window  ? &w->window->ref
					       : w->staging ? &w->staging->ref
							    : &w->dst->ref);
	free(regions);
	if (st == RUDA_OK && w->tmp && !w->window) {
		if (ruda__host_staging_make(ctx->loop, packed, devices, 2, staging_made, w) < 0)
			st = RUDA_ERROR_OUT_OF_MEMORY;
		else
			w->pending = 2;
	}
	if (st != RUDA_OK) {
		ruda__reply_status(s->conn, req->id, st, "to_client: %llu bytes: %s",
				   (unsigned long long)packed, ruda_strerror(st));
		waiter_free(w);
		return;
	}
	s->usage.bytes_downloaded += packed;
	if (w->window || lent)
		s->device->stats.peer_bytes_out += packed;
	else if (target->device != s->device)
		s->device->stats.staged_bytes_out += packed;
	if (w->tmp)
		w->base.done = w->window ? tmp_for_window_done : tmp_done;
	w->at.recorded = uv_hrtime();
	/* what stream_wait would submit, here so its time is known (the
	 * waiter may run, and go, inside the wait) */
	ruda__stream_submit(s->current);
	w->at.submitted = uv_hrtime();
	ruda__stream_wait(s->current, &w->base);
}
