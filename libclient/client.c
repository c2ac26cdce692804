/* libruda: one connection to rudad and the session behind it. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ruda/ruda.h>

#include "../proto/arena_header.h"
#include "../proto/frame.h"
#include "../proto/sha256.h"
#include "arena_ring.h"
#include "client_private.h"
#include "last_error.h"
#include "launch_wire.h"
#include "parallel_copy.h"
#include "struct_size.h"
#include "sync_fast.h"
#include "tensor.h"
#include "transfer.h"
#include "wire.h"
#include "ruda.pb-c.h"

/* Queued fire-and-forget bytes that trigger a send without being asked. */
#define BATCH_BYTES (32u * 1024u)
/* Transfers in chunks at least this large overlap the client's copies with
 * the device's. */
#define PIPELINE_CHUNK_BYTES (256u * 1024u)
/* Reads in flight at once for one download: as many chunks as the arena
 * holds (ruda__arena_ring_chunk), so the device always has the next ones
 * while the client copies one out. */
#define READS_IN_FLIGHT 4
/* How long an upload waiting for arena space watches the published
 * progress before it blocks on a Fence round trip instead (which also
 * notices a daemon gone), beyond what the bytes in flight take to move. */
#define PROGRESS_WATCH_NS (20ull * 1000u * 1000u)
/* Modules at least this large are first offered by hash, not sent. */
#define SEND_BY_HASH_BYTES (16u * 1024u)

/* A thread waiting for the reply to request `id`. */
struct waiting {
	struct waiting *next;
	uint64_t id;
	Ruda__Reply *reply; /* owned once set */
	int fd;             /* passed with the reply, or -1 */
	int fd2;            /* a second one (Hello's progress page), or -1 */
	int keep_fd2;       /* the caller takes fd2; else call_finish closes it */
};

struct ruda_client {
	int fd;
	pthread_mutex_t lock; /* guards everything below but `in` */
	pthread_cond_t cond;
	struct ruda_frame_writer out;
	struct ruda_frame_reader in; /* only the thread that is the reader */
	int reader_active;
	int broken; /* the connection is gone */
	ruda_status gone; /* why, when rudad said so in a notice (0: it did not) */
	struct waiting *waiting;
	uint64_t next_request, next_handle, next_kernel, next_window;
	uint32_t stream; /* where requests go; guarded by lock */

	/* replies to skip: requests a fast sync answered (sync_fast.c) */
	uint64_t *abandoned;
	size_t nabandoned, abandoned_cap;
	struct ruda_sync_fast fast;
	/* bytes of staging transfers posted since the last sync: a sync
	 * watches the progress page for as long as they take to move */
	uint64_t transfer_bytes;

	uint8_t *arena; /* the shared memory, mapped */
	uint64_t arena_size, data_offset;
	struct ruda_arena_ring ring;
	struct ruda_transfer_counters xfer; /* guarded by lock */

	uint64_t session_id;
	uint32_t priority; /* granted at Hello */
	ruda_device_properties props;
	struct ruda_client_devices devices; /* every device of the daemon */
	struct ruda_tensor_state *tensors; /* tensor.c */
	int allocation_mode; /* the last one asked for (allocation.c); guarded by lock */
	uint64_t serial; /* names the client in its threads' last errors */
	char broken_reason[RUDA__LAST_ERROR_LEN]; /* why the connection is gone; lock */
};

/* This thread's last error on `c` (ruda_client_last_error). */
static void set_error(const ruda_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void set_error(const ruda_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ruda__last_error_vset(c->serial, fmt, ap);
	va_end(ap);
}

/* The connection is gone, for this reason: any thread may find that out
 * (the reader, a sender), so the reason is the client's, and each call
 * that then fails makes it its thread's last error (gone_status). Lock
 * held. */
static void set_broken(ruda_client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_broken(ruda_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(c->broken_reason, sizeof(c->broken_reason), fmt, ap);
	va_end(ap);
	c->broken = 1;
}

/* What calls on a broken connection return: the reason rudad gave (a
 * lost device), else RUDA_ERROR_DISCONNECTED; the reason becomes the
 * calling thread's last error. Lock held. */
static ruda_status gone_status(const ruda_client *c)
{
	if (c->broken_reason[0])
		set_error(c, "%s", c->broken_reason);
	return c->gone ? c->gone : RUDA_ERROR_DISCONNECTED;
}

static void deliver(ruda_client *c, struct ruda_frame *frame, Ruda__Reply *reply);

/* ---- replies nobody waits for any more --------------------------------- */

/* Whether the reply to `id` was given up on (and forget it). Lock held. */
static int forget_abandoned(ruda_client *c, uint64_t id)
{
	for (size_t i = 0; i < c->nabandoned; i++)
		if (c->abandoned[i] == id) {
			c->abandoned[i] = c->abandoned[--c->nabandoned];
			return 1;
		}
	return 0;
}

/* Stop waiting for `w`'s reply, which will be skipped when it comes. Lock
 * held. Returns RUDA_OK, or RUDA_ERROR_OUT_OF_MEMORY when it cannot be
 * recorded (the caller then waits for the reply). */
static ruda_status abandon(ruda_client *c, struct waiting *w)
{
	if (!w->reply && c->nabandoned == c->abandoned_cap) {
		size_t cap = c->abandoned_cap ? c->abandoned_cap * 2 : 8;
		uint64_t *grown = realloc(c->abandoned, cap * sizeof(*grown));
		if (!grown)
			return RUDA_ERROR_OUT_OF_MEMORY;
		c->abandoned = grown;
		c->abandoned_cap = cap;
	}
	struct waiting **link = &c->waiting;
	while (*link != w)
		link = &(*link)->next;
	*link = w->next;
	if (w->reply)
		ruda__reply__free_unpacked(w->reply, NULL); /* it came meanwhile */
	else
		c->abandoned[c->nabandoned++] = w->id;
	if (w->fd >= 0)
		close(w->fd);
	if (w->fd2 >= 0)
		close(w->fd2);
	return RUDA_OK;
}

/* A send failed: rudad may have said why before it closed the connection
 * (a notice waiting unread). Read what is there without blocking. Lock
 * held. */
static void read_pending_notice(ruda_client *c)
{
	if (c->reader_active)
		return;
	while (!c->gone && ruda__frame_reader_recv(&c->in, c->fd, MSG_DONTWAIT) > 0) {
		struct ruda_frame frame;
		Ruda__Reply *reply;
		int r = 0;
		while (!c->gone && (r = ruda__wire_next_reply(&c->in, &frame, &reply)) > 0)
			deliver(c, &frame, reply);
		if (r < 0)
			break;
	}
}

/* ---- sending ------------------------------------------------------------ */

/* Send everything queued. Lock held. */
static ruda_status send_queued(ruda_client *c)
{
	if (c->broken)
		return gone_status(c);
	int err = ruda__frame_writer_flush(&c->out, c->fd, 0);
	if (err < 0) {
		read_pending_notice(c);
		c->broken = 1;
		if (!c->gone)
			set_broken(c, "sending to rudad failed: %s", strerror(-err));
		pthread_cond_broadcast(&c->cond);
		return gone_status(c);
	}
	return RUDA_OK;
}

/* Room for a request of `size` bytes in the output queue: *dst. Lock held. */
static ruda_status reserve_request(ruda_client *c, size_t size, uint8_t **dst)
{
	if (c->broken)
		return gone_status(c);
	*dst = size <= RUDA_FRAME_MAX_PAYLOAD
		       ? ruda__frame_writer_reserve(&c->out, (uint32_t)size)
		       : NULL;
	if (!*dst) {
		set_error(c, "request of %zu bytes is over the frame limit", size);
		return size > RUDA_FRAME_MAX_PAYLOAD ? RUDA_ERROR_INVALID_ARGUMENT
						     : RUDA_ERROR_OUT_OF_MEMORY;
	}
	return RUDA_OK;
}

/* Send what is queued once there is enough of it. Lock held. */
static ruda_status send_batch(ruda_client *c)
{
	if (ruda__frame_writer_pending(&c->out) >= BATCH_BYTES)
		return send_queued(c);
	return RUDA_OK;
}

/* The reserved request is written: queue it (and maybe send). Lock held. */
static ruda_status commit_request(ruda_client *c, size_t size)
{
	ruda__frame_writer_commit(&c->out, (uint32_t)size);
	return send_batch(c);
}

/* Give `req` the next id and queue it. Lock held. */
static ruda_status queue(ruda_client *c, Ruda__Request *req)
{
	if (c->broken)
		return gone_status(c);
	req->id = c->next_request++;
	req->stream = c->stream;
	size_t size;
	ruda_status st = ruda__wire_queue(&c->out, req, &size);
	if (st != RUDA_OK) {
		set_error(c, "request of %zu bytes is over the frame limit", size);
		return st;
	}
	return send_batch(c);
}

/* ---- receiving ---------------------------------------------------------- */

/* Hand a received frame to the thread waiting for it. Lock held. */
static void deliver(ruda_client *c, struct ruda_frame *frame, Ruda__Reply *reply)
{
	struct waiting *w = NULL;
	if (reply && reply->id == 0 && reply->status != RUDA__STATUS__OK) {
		/* a notice: rudad closes the connection for this reason (its
		 * device was lost); every call reports it from now on */
		c->gone = (ruda_status)reply->status;
		set_broken(c, "%s", reply->message && *reply->message ? reply->message
								      : ruda_strerror(c->gone));
		ruda__reply__free_unpacked(reply, NULL);
		for (uint16_t i = 0; i < frame->nfds; i++)
			close(frame->fds[i]);
		return;
	}
	if (reply)
		for (w = c->waiting; w && w->id != reply->id; w = w->next)
			;
	if (!w && reply && forget_abandoned(c, reply->id)) {
		/* a sync the progress page already answered */
		ruda__reply__free_unpacked(reply, NULL);
		for (uint16_t i = 0; i < frame->nfds; i++)
			close(frame->fds[i]);
		return;
	}
	if (!w || w->reply) {
		/* nobody asked: a broken daemon; do not trust the stream further */
		if (reply)
			ruda__reply__free_unpacked(reply, NULL);
		for (uint16_t i = 0; i < frame->nfds; i++)
			close(frame->fds[i]);
		set_broken(c, "rudad sent an unexpected or undecodable reply");
		return;
	}
	w->reply = reply;
	for (uint16_t i = 0; i < frame->nfds; i++) {
		if (i == 0 && w->fd < 0)
			w->fd = frame->fds[i];
		else if (i == 1 && w->fd2 < 0)
			w->fd2 = frame->fds[i];
		else
			close(frame->fds[i]);
	}
}

/* Read from the socket until one or more replies are delivered. Lock held
 * on entry and exit; dropped while blocked in recv. */
static void read_replies(ruda_client *c)
{
	c->reader_active = 1;
	pthread_mutex_unlock(&c->lock);
	ssize_t n = ruda__wire_recv(&c->in, c->fd, -1);
	pthread_mutex_lock(&c->lock);
	c->reader_active = 0;
	if (n <= 0) {
		c->broken = 1;
		if (!c->gone)
			set_broken(c, n == 0 ? "rudad closed the connection"
					     : "receiving from rudad failed: %s",
				   strerror((int)-n));
	} else {
		struct ruda_frame frame;
		Ruda__Reply *reply;
		int r;
		while (!c->broken && (r = ruda__wire_next_reply(&c->in, &frame, &reply)) != 0) {
			if (r < 0) {
				set_broken(c, "rudad sent a malformed frame");
				break;
			}
			deliver(c, &frame, reply);
		}
	}
	pthread_cond_broadcast(&c->cond);
}

/* Send `req` with everything queued before it; its reply will be waited
 * for with call_finish, which unlinks `w` again before it goes out of scope
 * (GCC cannot see that across the two calls). Lock held. */
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
static ruda_status call_begin(ruda_client *c, Ruda__Request *req, struct waiting *w)
{
	ruda_status st = queue(c, req);
	if (st == RUDA_OK)
		st = send_queued(c);
	if (st != RUDA_OK)
		return st;
	*w = (struct waiting){.id = req->id, .fd = -1, .fd2 = -1, .next = c->waiting};
	c->waiting = w;
	return RUDA_OK;
}
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic pop
#endif

/*
 * Wait for the reply of a call begun with call_begin. Returns the reply's
 * status; *out (optional) receives the reply, owned by the caller; *fd
 * (optional) a descriptor passed with it. Lock held.
 */
static ruda_status call_finish(ruda_client *c, struct waiting *w, Ruda__Reply **out, int *fd)
{
	while (!w->reply && !c->broken) {
		if (!c->reader_active)
			read_replies(c);
		else
			pthread_cond_wait(&c->cond, &c->lock);
	}
	struct waiting **link = &c->waiting;
	while (*link != w)
		link = &(*link)->next;
	*link = w->next;
	if (w->fd2 >= 0 && !w->keep_fd2) {
		close(w->fd2);
		w->fd2 = -1;
	}
	if (!w->reply) {
		if (w->fd >= 0)
			close(w->fd);
		return gone_status(c);
	}
	ruda_status st = (ruda_status)w->reply->status;
	if (st != RUDA_OK)
		set_error(c, "%s", w->reply->message && *w->reply->message ? w->reply->message
									     : ruda_strerror(st));
	if (fd)
		*fd = w->fd;
	else if (w->fd >= 0)
		close(w->fd);
	if (out)
		*out = w->reply;
	else
		ruda__reply__free_unpacked(w->reply, NULL);
	return st;
}

struct ruda_pending {
	struct waiting w;
};

ruda_status ruda__client_call_begin(ruda_client *c, Ruda__Request *req, struct ruda_pending **out)
{
	struct ruda_pending *p = malloc(sizeof(*p));
	if (!p)
		return RUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&c->lock);
	ruda_status st = call_begin(c, req, &p->w);
	pthread_mutex_unlock(&c->lock);
	if (st != RUDA_OK) {
		free(p);
		return st;
	}
	*out = p;
	return RUDA_OK;
}

ruda_status ruda__client_call_finish(ruda_client *c, struct ruda_pending *p)
{
	pthread_mutex_lock(&c->lock);
	ruda_status st = call_finish(c, &p->w, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	free(p);
	return st;
}

/* Send `req` and wait for its reply. Lock held. */
static ruda_status round_trip(ruda_client *c, Ruda__Request *req, Ruda__Reply **out, int *fd)
{
	struct waiting w;
	ruda_status st = call_begin(c, req, &w);
	return st == RUDA_OK ? call_finish(c, &w, out, fd) : st;
}

/* A round trip, taking the lock. */
static ruda_status call(ruda_client *c, Ruda__Request *req, Ruda__Reply **out)
{
	pthread_mutex_lock(&c->lock);
	ruda_status st = round_trip(c, req, out, NULL);
	pthread_mutex_unlock(&c->lock);
	return st;
}

/* Queue a request that needs no answer (and send it at once when `now`),
 * taking the lock. */
static ruda_status post(ruda_client *c, Ruda__Request *req, int now)
{
	pthread_mutex_lock(&c->lock);
	ruda_status st = queue(c, req);
	if (st == RUDA_OK && now)
		st = send_queued(c);
	pthread_mutex_unlock(&c->lock);
	return st;
}

/* ---- for the other files of libruda (client_private.h) ----------------- */

ruda_status ruda__client_call_get_fd(ruda_client *c, Ruda__Request *req, Ruda__Reply **out,
				     int *fd)
{
	pthread_mutex_lock(&c->lock);
	ruda_status st = round_trip(c, req, out, fd);
	pthread_mutex_unlock(&c->lock);
	return st;
}

int ruda__client_swap_allocation_mode(ruda_client *c, int mode)
{
	pthread_mutex_lock(&c->lock);
	int old = c->allocation_mode;
	c->allocation_mode = mode;
	pthread_mutex_unlock(&c->lock);
	return old;
}

uint64_t ruda__client_next_id(ruda_client *c)
{
	pthread_mutex_lock(&c->lock);
	uint64_t id = c->next_handle++;
	pthread_mutex_unlock(&c->lock);
	return id;
}

/* A round trip whose request passes `fd` (borrowed); *out (optional) gets
 * the reply, *fd_out (optional) an fd passed with it. Takes the lock. */
static ruda_status call_passing_fd(ruda_client *c, Ruda__Request *req, int fd, Ruda__Reply **out,
				   int *fd_out)
{
	int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0); /* the writer closes what it sends */
	if (copy < 0) {
		set_error(c, "cannot duplicate fd %d: %s", fd, strerror(errno));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	pthread_mutex_lock(&c->lock);
	ruda_status st = c->broken ? RUDA_ERROR_DISCONNECTED : RUDA_OK;
	struct waiting w;
	uint8_t *payload = NULL;
	size_t size = 0;
	if (st == RUDA_OK) {
		req->id = c->next_request++;
		req->stream = c->stream;
		size = ruda__request__get_packed_size(req);
		payload = malloc(size ? size : 1);
		if (!payload)
			st = RUDA_ERROR_OUT_OF_MEMORY;
	}
	if (st == RUDA_OK) {
		ruda__request__pack(req, payload);
		if (ruda__frame_writer_append(&c->out, payload, (uint32_t)size, &copy, 1) < 0)
			st = RUDA_ERROR_OUT_OF_MEMORY;
		copy = -1; /* owned (or closed) by the writer now */
	}
	if (st == RUDA_OK)
		st = send_queued(c);
	if (st == RUDA_OK) {
		w = (struct waiting){.id = req->id, .fd = -1, .fd2 = -1, .next = c->waiting};
		c->waiting = &w;
		st = call_finish(c, &w, out, fd_out);
	}
	pthread_mutex_unlock(&c->lock);
	if (copy >= 0)
		close(copy);
	free(payload);
	return st;
}

ruda_status ruda__client_call_with_fd(ruda_client *c, Ruda__Request *req, int fd)
{
	return call_passing_fd(c, req, fd, NULL, NULL);
}

/* ---- arena -------------------------------------------------------------- */

static uint64_t arena_completed(ruda_client *c)
{
	struct ruda_arena_header *h = (struct ruda_arena_header *)c->arena;
	return atomic_load_explicit(&h->completed_request, memory_order_acquire);
}

/* Arena space for `size` bytes if there is some now: RUDA_OK, or
 * RUDA_ERROR_BUSY. Lock held. */
static ruda_status arena_try_alloc(ruda_client *c, uint64_t size, int client_owned,
				   uint64_t *offset, uint64_t *region)
{
	ruda__arena_ring_reclaim(&c->ring, arena_completed(c));
	int err = ruda__arena_ring_alloc(&c->ring, size, client_owned, offset, region);
	if (err)
		return err == -EAGAIN ? RUDA_ERROR_BUSY : RUDA_ERROR_OUT_OF_MEMORY;
	*offset += c->data_offset;
	return RUDA_OK;
}

/* Arena space for `size` bytes, waiting for the daemon to free some if
 * needed. Lock held. */
static ruda_status arena_alloc(ruda_client *c, uint64_t size, int client_owned,
			       uint64_t *offset, uint64_t *region)
{
	for (;;) {
		ruda__arena_ring_reclaim(&c->ring, arena_completed(c));
		int err = ruda__arena_ring_alloc(&c->ring, size, client_owned, offset, region);
		if (err == 0) {
			*offset += c->data_offset;
			return RUDA_OK;
		}
		if (err == -E2BIG) {
			set_error(c, "%llu bytes do not fit the %llu-byte arena",
				  (unsigned long long)size, (unsigned long long)c->ring.capacity);
			return RUDA_ERROR_TOO_LARGE;
		}
		if (err != -EAGAIN)
			return RUDA_ERROR_OUT_OF_MEMORY;
		if (ruda__arena_ring_has_held(&c->ring)) {
			/* another thread is copying a download out */
			pthread_cond_wait(&c->cond, &c->lock);
			continue;
		}
		uint64_t t0 = ruda__transfer_now_ns();
		uint64_t oldest = ruda__arena_ring_oldest_request(&c->ring);
		if (oldest && oldest < c->next_request) {
			/* wait for the oldest upload alone: the others keep the
			 * device busy meanwhile (transfer.h). What is queued goes
			 * first, or its progress never comes. */
			ruda_status st = send_queued(c);
			if (st != RUDA_OK)
				return st;
			uint64_t deadline = t0 + PROGRESS_WATCH_NS +
					    ruda_transfer_ns(c->ring.head - c->ring.tail);
			pthread_mutex_unlock(&c->lock);
			int got = ruda__transfer_wait_progress((struct ruda_arena_header *)c->arena,
							       oldest, deadline);
			pthread_mutex_lock(&c->lock);
			c->xfer.wait_ns += ruda__transfer_now_ns() - t0;
			if (got) {
				c->xfer.progress_waits++;
				continue;
			}
			t0 = ruda__transfer_now_ns();
		}
		c->xfer.fence_waits++;
		Ruda__Request req = RUDA__REQUEST__INIT;
		Ruda__Fence fence = RUDA__FENCE__INIT;
		req.body_case = RUDA__REQUEST__BODY_FENCE;
		req.fence = &fence;
		ruda_status st = round_trip(c, &req, NULL, NULL);
		c->xfer.wait_ns += ruda__transfer_now_ns() - t0;
		if (st != RUDA_OK)
			return st;
	}
}

/* ---- connection --------------------------------------------------------- */


static void copy_properties(ruda_device_properties *p, const Ruda__DeviceInfo *d)
{
	*p = (ruda_device_properties)RUDA_DEVICE_PROPERTIES_INIT;
	p->features.struct_size = sizeof(p->features);
	p->index = d->index;
	snprintf(p->name, sizeof(p->name), "%s", d->name ? d->name : "");
	p->vendor_id = d->vendor_id;
	p->device_id = d->device_id;
	p->type = (ruda_device_type)d->type;
	p->api_version = d->api_version;
	p->driver_version = d->driver_version;
	if (d->pipeline_cache_uuid.len == sizeof(p->pipeline_cache_uuid))
		memcpy(p->pipeline_cache_uuid, d->pipeline_cache_uuid.data,
		       sizeof(p->pipeline_cache_uuid));
	p->max_buffer_size = d->max_buffer_size;
	p->max_storage_buffer_range = d->max_storage_buffer_range;
	p->min_storage_buffer_offset_alignment = d->min_storage_buffer_offset_alignment;
	p->max_push_constants_size = d->max_push_constants_size;
	p->max_bindings = d->max_bindings;
	for (size_t i = 0; i < 3 && i < d->n_max_workgroup_count; i++)
		p->max_workgroup_count[i] = d->max_workgroup_count[i];
	for (size_t i = 0; i < 3 && i < d->n_max_workgroup_size; i++)
		p->max_workgroup_size[i] = d->max_workgroup_size[i];
	p->max_workgroup_invocations = d->max_workgroup_invocations;
	p->subgroup_size = d->subgroup_size;
	p->device_local_bytes = d->device_local_bytes;
	p->host_import = d->host_import;
	ruda__client_properties_extend(p, d);
}

/* Map the arena the daemon passed (or the client's own, `own`, which may
 * be larger than what rudad uses of it) and check it is what it says. */
static ruda_status map_arena(ruda_client *c, int fd, int own, const Ruda__HelloReply *h)
{
	struct stat st;
	if (fstat(fd, &st) < 0 ||
	    (own ? (uint64_t)st.st_size < h->arena_size : (uint64_t)st.st_size != h->arena_size) ||
	    h->arena_data_offset < sizeof(struct ruda_arena_header) ||
	    h->arena_data_offset >= h->arena_size) {
		set_error(c, "rudad passed an arena of the wrong size");
		return RUDA_ERROR_PROTOCOL;
	}
	void *map = mmap(NULL, h->arena_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		set_error(c, "cannot map the arena: %s", strerror(errno));
		return RUDA_ERROR_IO;
	}
	struct ruda_arena_header *hdr = map;
	if (hdr->magic != RUDA_ARENA_MAGIC || hdr->version != RUDA_ARENA_VERSION) {
		munmap(map, h->arena_size);
		set_error(c, "the arena has an unknown layout");
		return RUDA_ERROR_PROTOCOL;
	}
	c->arena = map;
	c->arena_size = h->arena_size;
	c->data_offset = h->arena_data_offset;
	ruda__arena_ring_init(&c->ring, h->arena_size - h->arena_data_offset);
	return RUDA_OK;
}

static ruda_status hello(ruda_client *c, const ruda_connect_options *o)
{
	Ruda__Hello h;
	Ruda__Request req;
	ruda__wire_hello(&req, &h,
			 o && o->client_name ? o->client_name : program_invocation_short_name);
	h.device_index = o ? o->device_index : 0;
	if (o && o->use_device_id) {
		h.by_device_id = 1;
		h.device_type_id = o->device_id.type_id;
		h.device_type_index = o->device_id.index_id;
	}
	h.priority = o ? o->priority : 0;
	int own = o && o->use_arena_fd; /* the client's memfd is the arena */
	h.client_arena = own;
	h.client_arena_size = own ? o->arena_size : 0;
	Ruda__Reply *reply = NULL;
	int fd = -1, progress_fd = -1;
	ruda_status st;
	if (own) {
		/* no arena comes back: the one fd, if any, is the progress page */
		st = call_passing_fd(c, &req, o->arena_fd, &reply, &progress_fd);
	} else {
		struct waiting w;
		pthread_mutex_lock(&c->lock);
		st = call_begin(c, &req, &w);
		if (st == RUDA_OK) {
			w.keep_fd2 = 1;
			st = call_finish(c, &w, &reply, &fd);
			progress_fd = w.fd2;
		}
		pthread_mutex_unlock(&c->lock);
	}
	if (st == RUDA_OK && (!ruda__wire_hello_reply(reply) || (!own && fd < 0))) {
		set_error(c, "rudad's handshake reply is incomplete");
		st = RUDA_ERROR_PROTOCOL;
	}
	if (st == RUDA_OK)
		st = map_arena(c, own ? o->arena_fd : fd, own, reply->hello);
	if (st == RUDA_OK) {
		c->session_id = reply->hello->session_id;
		c->priority = reply->hello->priority;
		copy_properties(&c->props, reply->hello->devices[reply->hello->device_index]);
		if (ruda__client_devices_init(&c->devices, reply->hello, copy_properties) < 0)
			st = RUDA_ERROR_OUT_OF_MEMORY;
		else
			c->devices.fingerprint = ruda__client_devices_fingerprint(&c->props);
	}
	if (st == RUDA_OK && reply->hello->progress_page)
		ruda__sync_fast_init(&c->fast, progress_fd); /* else: replies only */
	if (fd >= 0)
		close(fd);
	if (progress_fd >= 0)
		close(progress_fd);
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}

static void client_free(ruda_client *c)
{
	ruda__sync_fast_finish(&c->fast);
	free(c->abandoned);
	if (c->arena)
		munmap(c->arena, c->arena_size);
	ruda__arena_ring_finish(&c->ring);
	ruda__client_devices_finish(&c->devices);
	ruda__tensor_state_free(c->tensors);
	ruda__frame_reader_finish(&c->in);
	ruda__frame_writer_finish(&c->out);
	if (c->fd >= 0)
		close(c->fd);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->cond);
	free(c);
}

/* Why this thread's last ruda_client_connect failed: no client holds it
 * then; it is the thread's last error of serial 0. */
static _Thread_local char connect_error[RUDA__LAST_ERROR_LEN];

static ruda_status connect_failed(ruda_status st, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static ruda_status connect_failed(ruda_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(connect_error, sizeof(connect_error), fmt, ap);
	va_end(ap);
	return st;
}

ruda_status ruda_client_connect(const ruda_connect_options *options, ruda_client **out)
{
	char path[108];
	connect_error[0] = '\0';
	if (!out)
		return connect_failed(RUDA_ERROR_INVALID_ARGUMENT, "ruda_client_connect: out is NULL");
	*out = NULL;
	ruda_connect_options o = RUDA_CONNECT_OPTIONS_INIT; /* the defaults */
	ruda_status st = options ? ruda__struct_in(&o, sizeof(o), RUDA__MIN_CONNECT_OPTIONS,
						   options, ruda__struct_size(options))
				 : RUDA_OK;
	if (st == RUDA_ERROR_UNSUPPORTED)
		return connect_failed(st, "ruda_client_connect: the options set fields this "
					  "libruda does not know (a newer ruda.h)");
	if (st != RUDA_OK)
		return connect_failed(st, "ruda_client_connect: options.size is %u, not the "
					  "sizeof(ruda_connect_options) (RUDA_CONNECT_OPTIONS_INIT "
					  "sets it)",
				      ruda__struct_size(options));
	ruda_client *c = calloc(1, sizeof(*c));
	if (!c)
		return connect_failed(RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	c->fd = -1;
	c->serial = ruda__last_error_serial();
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	ruda__frame_writer_init(&c->out);
	c->next_request = c->next_handle = c->next_kernel = c->next_window = 1;
	c->tensors = ruda__tensor_state_new();
	if (!c->tensors || ruda__frame_reader_init(&c->in) < 0) {
		client_free(c);
		return connect_failed(RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	}
	st = ruda__wire_connect(
		o.socket_path,
		"no rudad socket to try: set RUDA_SOCKET (or XDG_RUNTIME_DIR, for "
		"$XDG_RUNTIME_DIR/ruda/rudad.sock) or pass socket_path",
		path, sizeof(path), &c->fd, connect_error, sizeof(connect_error));
	if (st != RUDA_OK) {
		client_free(c);
		return st;
	}
	st = hello(c, &o);
	if (st != RUDA_OK) {
		/* rudad's reason: a Hello reply, or the notice it sends before
		 * closing a connection it refuses (limits, policy) */
		connect_failed(st, "rudad at %s refused the session: %s", path,
			       *ruda__last_error_get(c->serial) ? ruda__last_error_get(c->serial)
								 : ruda_strerror(st));
		client_free(c);
		return st;
	}
	*out = c;
	return RUDA_OK;
}

void ruda_client_close(ruda_client *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	send_queued(c); /* releases and launches asked for still happen */
	pthread_mutex_unlock(&c->lock);
	client_free(c);
}

static size_t copy_message(const char *msg, char *buf, size_t len)
{
	size_t n = strlen(msg);
	if (buf && len) {
		size_t k = n < len - 1 ? n : len - 1;
		memcpy(buf, msg, k);
		buf[k] = '\0';
	}
	return n;
}

size_t ruda_client_last_error(ruda_client *c, char *buf, size_t len)
{
	/* this thread's own: no lock */
	return copy_message(c ? ruda__last_error_get(c->serial) : connect_error, buf, len);
}

uint32_t ruda_client_priority(const ruda_client *c)
{
	return c ? c->priority : 0;
}

const char *ruda_client_name(const ruda_client *c)
{
	(void)c;
	return "ruda";
}

uint64_t ruda_client_session_id(const ruda_client *c)
{
	return c ? c->session_id : 0;
}

ruda_status ruda_client_properties(const ruda_client *c, ruda_device_properties *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_DEVICE_PROPERTIES) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	/* set once at connect; never changes */
	ruda__struct_out(out, ruda__struct_size(out), &c->props, sizeof(c->props));
	return RUDA_OK;
}

/* ---- memory ------------------------------------------------------------- */

static ruda_status queue_empty(ruda_client *c, uint64_t size, ruda_handle *out)
{
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = c->next_handle++;
	e.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	ruda_status st = queue(c, &req);
	if (st == RUDA_OK)
		*out = (ruda_handle){.id = e.handle, .offset = 0, .size = size};
	return st;
}

/* Upload through the arena in chunks. Lock held. */
static ruda_status upload(ruda_client *c, uint64_t handle, uint64_t offset, const void *data,
			  size_t size)
{
	const uint8_t *src = data;
	uint64_t chunk_max = ruda__arena_ring_chunk(&c->ring);
	do {
		uint64_t chunk = size < chunk_max ? size : chunk_max;
		uint64_t arena_offset, region;
		ruda_status st = arena_alloc(c, chunk, 0, &arena_offset, &region);
		if (st != RUDA_OK)
			return st;
		uint64_t t0 = ruda__transfer_now_ns();
		ruda__parallel_copy(c->arena + arena_offset, src, chunk);
		c->xfer.copy_ns += ruda__transfer_now_ns() - t0;
		c->xfer.upload_bytes += chunk;
		c->xfer.chunks++;
		Ruda__Write w = RUDA__WRITE__INIT;
		w.handle = handle;
		w.offset = offset;
		w.arena_offset = arena_offset;
		w.size = chunk;
		Ruda__Request req = RUDA__REQUEST__INIT;
		req.body_case = RUDA__REQUEST__BODY_WRITE;
		req.write = &w;
		st = queue(c, &req);
		ruda__arena_ring_set_request(&c->ring, region, req.id);
		/* a big chunk goes now: the device copies it while we fill the next */
		if (st == RUDA_OK && chunk >= PIPELINE_CHUNK_BYTES)
			st = send_queued(c);
		if (st != RUDA_OK)
			return st;
		src += chunk;
		offset += chunk;
		size -= chunk;
	} while (size);
	return RUDA_OK;
}

ruda_status ruda_client_empty(ruda_client *c, size_t size, ruda_handle *out)
{
	if (!c || !out)
		return RUDA_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	ruda_status st = queue_empty(c, size, out);
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_try_empty(ruda_client *c, size_t size, ruda_handle *out)
{
	if (!c || !out)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.size = size;
	e.reply = 1;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	pthread_mutex_lock(&c->lock);
	e.handle = c->next_handle++;
	ruda_status st = round_trip(c, &req, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	if (st == RUDA_OK)
		*out = (ruda_handle){.id = e.handle, .offset = 0, .size = size};
	return st;
}

ruda_status ruda_client_memory_usage(ruda_client *c, ruda_memory_usage *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_MEMORY_USAGE) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__MemoryUsage m = RUDA__MEMORY_USAGE__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_MEMORY_USAGE;
	req.memory_usage = &m;
	Ruda__Reply *reply = NULL;
	ruda_status st = call(c, &req, &reply);
	if (st == RUDA_OK && reply->body_case != RUDA__REPLY__BODY_MEMORY_USAGE)
		st = RUDA_ERROR_PROTOCOL;
	if (st == RUDA_OK) {
		ruda_memory_usage u = {
			.allocations = reply->memory_usage->allocations,
			.bytes_in_use = reply->memory_usage->bytes_in_use,
			.bytes_padding = reply->memory_usage->bytes_padding,
			.bytes_reserved = reply->memory_usage->bytes_reserved,
			.quota = reply->memory_usage->quota,
			.uid_bytes = reply->memory_usage->uid_bytes,
			.pages = reply->memory_usage->pages,
			.device_bytes_reserved = reply->memory_usage->device_bytes_reserved,
			.device_pages = reply->memory_usage->device_pages,
		};
		ruda__struct_out(out, ruda__struct_size(out), &u, sizeof(u));
	}
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}

ruda_status ruda_client_memory_cleanup(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__MemoryCleanup m = RUDA__MEMORY_CLEANUP__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_MEMORY_CLEANUP;
	req.memory_cleanup = &m;
	return post(c, &req, 1);
}

ruda_status ruda_client_memory_compact(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__MemoryCompact m = RUDA__MEMORY_COMPACT__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_MEMORY_COMPACT;
	req.memory_compact = &m;
	return call(c, &req, NULL);
}

ruda_status ruda_client_create(ruda_client *c, const void *data, size_t size, ruda_handle *out)
{
	if (!c || !out || (!data && size))
		return RUDA_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	ruda_status st = queue_empty(c, size, out);
	if (st == RUDA_OK && size)
		st = upload(c, out->id, 0, data, size);
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_write(ruda_client *c, ruda_handle h, uint64_t offset, const void *data,
			      size_t size)
{
	if (!c || (!data && size) || offset > h.size || size > h.size - offset)
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (!size)
		return RUDA_OK;
	pthread_mutex_lock(&c->lock);
	ruda_status st = upload(c, h.id, h.offset + offset, data, size);
	pthread_mutex_unlock(&c->lock);
	return st;
}

/* One chunk of a download in flight. */
struct read_chunk {
	struct waiting w;
	uint64_t arena_offset, region, done, size;
};

/* Wait for the oldest chunk, copy it out, free its arena space. Lock held. */
static ruda_status finish_read(ruda_client *c, struct read_chunk *r, uint8_t *dst)
{
	uint64_t t0 = ruda__transfer_now_ns();
	ruda_status st = call_finish(c, &r->w, NULL, NULL);
	uint64_t t1 = ruda__transfer_now_ns();
	c->xfer.wait_ns += t1 - t0;
	if (st == RUDA_OK && r->size) {
		/* copy without the lock: other threads may go on meanwhile */
		pthread_mutex_unlock(&c->lock);
		ruda__parallel_copy(dst + r->done, c->arena + r->arena_offset, r->size);
		pthread_mutex_lock(&c->lock);
		c->xfer.copy_ns += ruda__transfer_now_ns() - t1;
		c->xfer.download_bytes += r->size;
		c->xfer.chunks++;
	}
	ruda__arena_ring_release(&c->ring, r->region);
	pthread_cond_broadcast(&c->cond);
	return st;
}

/* Download one slice in chunks, the next read already asked for while the
 * last is copied out. Lock held. */
static ruda_status download(ruda_client *c, ruda_handle h, uint8_t *dst)
{
	uint64_t chunk_max = ruda__arena_ring_chunk(&c->ring);
	struct read_chunk flight[READS_IN_FLIGHT];
	size_t first = 0, count = 0;
	uint64_t issued = 0;
	ruda_status st = RUDA_OK;
	do {
		/* ask for more while there is room; block only with nothing in flight */
		while (st == RUDA_OK && count < READS_IN_FLIGHT && (issued < h.size || !issued)) {
			struct read_chunk *r = &flight[(first + count) % READS_IN_FLIGHT];
			r->size = h.size - issued < chunk_max ? h.size - issued : chunk_max;
			r->done = issued;
			st = count ? arena_try_alloc(c, r->size, 1, &r->arena_offset, &r->region)
				   : arena_alloc(c, r->size, 1, &r->arena_offset, &r->region);
			if (st == RUDA_ERROR_BUSY) {
				st = RUDA_OK;
				break;
			}
			if (st != RUDA_OK)
				break;
			Ruda__Read rd = RUDA__READ__INIT;
			rd.handle = h.id;
			rd.offset = h.offset + issued;
			rd.arena_offset = r->arena_offset;
			rd.size = r->size;
			Ruda__Request req = RUDA__REQUEST__INIT;
			req.body_case = RUDA__REQUEST__BODY_READ;
			req.read = &rd;
			st = call_begin(c, &req, &r->w);
			if (st != RUDA_OK) {
				ruda__arena_ring_release(&c->ring, r->region);
				break;
			}
			count++;
			issued += r->size ? r->size : 1; /* a 0-byte read is one request */
		}
		if (!count)
			break;
		ruda_status done = finish_read(c, &flight[first], dst);
		if (st == RUDA_OK)
			st = done;
		first = (first + 1) % READS_IN_FLIGHT;
		count--;
	} while (count || (st == RUDA_OK && issued < h.size));
	return st;
}

ruda_status ruda_client_read(ruda_client *c, const ruda_handle *handles, size_t count,
			     void *const *dst)
{
	if (!c || (count && (!handles || !dst)))
		return RUDA_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	ruda_status st = RUDA_OK;
	for (size_t i = 0; i < count && st == RUDA_OK; i++)
		st = download(c, handles[i], dst[i]);
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_read_one(ruda_client *c, ruda_handle handle, void *dst)
{
	return ruda_client_read(c, &handle, 1, &dst);
}

struct ruda_tensor_state *ruda__client_tensor_state(ruda_client *c)
{
	return c->tensors;
}

ruda_status ruda_client_release(ruda_client *c, ruda_handle h)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (ruda__tensor_release_shared(c->tensors, h.id))
		return RUDA_OK; /* other tensors of its create_tensors call remain */
	Ruda__Release r = RUDA__RELEASE__INIT;
	r.n_handles = 1;
	r.handles = &h.id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_RELEASE;
	req.release = &r;
	return post(c, &req, 0);
}

/* ---- kernels ------------------------------------------------------------ */

/* One KernelRegister round trip: with the module in the arena, or by hash
 * alone when `by_hash`. Lock held. */
static ruda_status register_kernel(ruda_client *c, const ruda_kernel_desc *d,
				   const uint8_t sha[RUDA_SHA256_SIZE], int by_hash,
				   ruda_kernel *out)
{
	Ruda__SpecConstant specs[64];
	Ruda__SpecConstant *spec_ptrs[64];
	if (d->spec_constant_count > 64 || (d->spec_constant_count && !d->spec_constants))
		return RUDA_ERROR_INVALID_ARGUMENT;
	for (uint32_t i = 0; i < d->spec_constant_count; i++) {
		ruda__spec_constant__init(&specs[i]);
		specs[i].id = d->spec_constants[i].id;
		specs[i].value.data = (uint8_t *)&d->spec_constants[i].value; /* little-endian */
		specs[i].value.len = d->spec_constants[i].size;
		spec_ptrs[i] = &specs[i];
	}
	Ruda__KernelRegister k = RUDA__KERNEL_REGISTER__INIT;
	k.kernel = c->next_kernel++;
	k.entry_point = (char *)d->entry_point;
	k.binding_count = d->binding_count;
	k.push_constant_size = d->push_constant_size;
	k.module_hash.data = (uint8_t *)sha;
	k.module_hash.len = RUDA_SHA256_SIZE;
	k.n_specialization = d->spec_constant_count;
	k.specialization = spec_ptrs;
	uint64_t region = 0;
	if (!by_hash) {
		uint64_t arena_offset;
		ruda_status st = arena_alloc(c, d->spirv_size, 0, &arena_offset, &region);
		if (st != RUDA_OK)
			return st;
		memcpy(c->arena + arena_offset, d->spirv, d->spirv_size);
		k.arena_offset = arena_offset;
		k.size = d->spirv_size;
	}
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_KERNEL_REGISTER;
	req.kernel_register = &k;
	ruda_status st = round_trip(c, &req, NULL, NULL);
	if (!by_hash)
		ruda__arena_ring_set_request(&c->ring, region, req.id);
	if (st == RUDA_OK)
		*out = k.kernel;
	return st;
}

ruda_status ruda_client_kernel_register(ruda_client *c, const ruda_kernel_desc *given,
					ruda_kernel *out)
{
	ruda_kernel_desc desc = {0}, *d = &desc;
	if (!c || !given || !out)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_status st = ruda__struct_in(&desc, sizeof(desc), RUDA__MIN_KERNEL_DESC, given,
					 ruda__struct_size(given));
	if (st != RUDA_OK)
		return st;
	if (!d->spirv || !d->entry_point)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint8_t sha[RUDA_SHA256_SIZE];
	ruda__sha256(d->spirv, d->spirv_size, sha);
	pthread_mutex_lock(&c->lock);
	st = RUDA_ERROR_INVALID_HANDLE;
	if (d->spirv_size >= SEND_BY_HASH_BYTES)
		st = register_kernel(c, d, sha, 1, out);
	if (st == RUDA_ERROR_INVALID_HANDLE) /* not there yet: send it */
		st = register_kernel(c, d, sha, 0, out);
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_kernel_lookup(ruda_client *c, const uint32_t *spirv, size_t spirv_size,
				      int *held)
{
	if (!c || !spirv || !held)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint8_t sha[RUDA_SHA256_SIZE];
	ruda__sha256(spirv, spirv_size, sha);
	Ruda__KernelLookup l = RUDA__KERNEL_LOOKUP__INIT;
	l.module_hash.data = sha;
	l.module_hash.len = sizeof(sha);
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_KERNEL_LOOKUP;
	req.kernel_lookup = &l;
	ruda_status st = call(c, &req, NULL);
	*held = st == RUDA_OK;
	return st == RUDA_ERROR_INVALID_HANDLE ? RUDA_OK : st;
}

ruda_status ruda_client_kernel_release(ruda_client *c, ruda_kernel kernel)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__KernelRelease r = RUDA__KERNEL_RELEASE__INIT;
	r.kernel = kernel;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_KERNEL_RELEASE;
	req.kernel_release = &r;
	return post(c, &req, 0);
}

#define MAX_BINDINGS 64u

/* Queue a launch, encoded by hand (launch_wire.c): the one request sent at
 * high rates. Lock held. */
static ruda_status queue_launch(ruda_client *c, struct ruda_launch_wire *w)
{
	if (c->broken)
		return gone_status(c);
	w->id = c->next_request++;
	w->stream = c->stream;
	size_t size = ruda__launch_wire_size(w);
	uint8_t *dst;
	ruda_status st = reserve_request(c, size, &dst);
	if (st != RUDA_OK)
		return st;
	ruda__launch_wire_encode(w, dst);
	return commit_request(c, size);
}

static ruda_status launch(ruda_client *c, ruda_kernel kernel, ruda_count count,
			  const ruda_handle *dynamic, const ruda_handle *bindings, size_t nbindings,
			  const void *push, size_t push_size, int unchecked)
{
	if (!c || (nbindings && !bindings) || nbindings > MAX_BINDINGS || (push_size && !push) ||
	    push_size > 256)
		return RUDA_ERROR_INVALID_ARGUMENT;
	struct ruda_launch_wire w = {
		.kernel = kernel,
		.count = {count.x, count.y, count.z},
		.bindings = bindings,
		.nbindings = nbindings,
		.push = push,
		.push_size = push_size,
		.unchecked = unchecked,
		.dynamic = dynamic,
	};
	pthread_mutex_lock(&c->lock);
	ruda_status st = queue_launch(c, &w);
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_launch(ruda_client *c, ruda_kernel kernel, ruda_count count,
			       const ruda_handle *bindings, size_t nbindings, const void *push,
			       size_t push_size)
{
	return launch(c, kernel, count, NULL, bindings, nbindings, push, push_size, 0);
}

ruda_status ruda_client_launch_unchecked(ruda_client *c, ruda_kernel kernel, ruda_count count,
					 const ruda_handle *bindings, size_t nbindings,
					 const void *push, size_t push_size)
{
	return launch(c, kernel, count, NULL, bindings, nbindings, push, push_size, 1);
}

ruda_status ruda_client_launch_dynamic(ruda_client *c, ruda_kernel kernel, ruda_handle counts,
				       const ruda_handle *bindings, size_t nbindings,
				       const void *push, size_t push_size)
{
	return launch(c, kernel, (ruda_count){0, 0, 0}, &counts, bindings, nbindings, push,
		      push_size, 0);
}

/* ---- execution ---------------------------------------------------------- */

ruda_status ruda_client_flush(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__Flush f = RUDA__FLUSH__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_FLUSH;
	req.flush = &f;
	return post(c, &req, 1);
}

/* Send `req` and, while the reply is on its way, watch the progress page for
 * the end of its work (its rudad handler publishes which timeline value
 * that is; sync_fast.h) for the usual watch plus the time `bytes` of
 * transfers take. The reply decides when the page cannot. */
static ruda_status watched_call(ruda_client *c, Ruda__Request *req, uint64_t bytes)
{
	struct waiting w;
	pthread_mutex_lock(&c->lock);
	/* On a CPU device too: its copy is one thread's memcpy (lavapipe),
	 * which leaves a core to the watch, and the end is seen ~0.1 ms sooner
	 * than through the loop and the reply (docs/design.md, "Fast sync") */
	bytes += c->transfer_bytes;
	c->transfer_bytes = 0;
	ruda_status st = call_begin(c, req, &w);
	if (st == RUDA_OK) {
		/* watch the progress page unlocked: the thread reading replies
		 * for the others may need the lock */
		pthread_mutex_unlock(&c->lock);
		int done = ruda__sync_fast_wait(&c->fast, (struct ruda_arena_header *)c->arena,
						req->stream, req->id, bytes);
		pthread_mutex_lock(&c->lock);
		if (!done || abandon(c, &w) != RUDA_OK)
			st = call_finish(c, &w, NULL, NULL);
	}
	pthread_mutex_unlock(&c->lock);
	return st;
}

ruda_status ruda_client_sync(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__Sync s = RUDA__SYNC__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_SYNC;
	req.sync = &s;
	return watched_call(c, &req, 0);
}

static ruda_status handles_request(ruda_client *c, const ruda_handle *handles, size_t count,
				   int wait)
{
	if (!c || (count && !handles))
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint64_t *ids = malloc((count ? count : 1) * sizeof(*ids));
	if (!ids)
		return RUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < count; i++)
		ids[i] = handles[i].id;
	Ruda__Check check = RUDA__CHECK__INIT;
	Ruda__SyncBuffers sync = RUDA__SYNC_BUFFERS__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	if (wait) {
		sync.n_handles = count;
		sync.handles = ids;
		req.body_case = RUDA__REQUEST__BODY_SYNC_BUFFERS;
		req.sync_buffers = &sync;
	} else {
		check.n_handles = count;
		check.handles = ids;
		req.body_case = RUDA__REQUEST__BODY_CHECK;
		req.check = &check;
	}
	ruda_status st = call(c, &req, NULL);
	free(ids);
	return st;
}

ruda_status ruda_client_check(ruda_client *c, const ruda_handle *handles, size_t count)
{
	return handles_request(c, handles, count, 0);
}

ruda_status ruda_client_sync_buffers(ruda_client *c, const ruda_handle *handles, size_t count)
{
	return handles_request(c, handles, count, 1);
}

ruda_status ruda_client_daemon_stats(ruda_client *c, ruda_daemon_stats *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_DAEMON_STATS) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__Stats s = RUDA__STATS__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_STATS;
	req.stats = &s;
	Ruda__Reply *reply = NULL;
	ruda_status st = call(c, &req, &reply);
	if (st == RUDA_OK && reply->body_case != RUDA__REPLY__BODY_STATS)
		st = RUDA_ERROR_PROTOCOL;
	if (st == RUDA_OK) {
		const Ruda__StatsReply *r = reply->stats;
		ruda_daemon_stats stats = {
			.sessions = r->sessions,
			.device_bytes = r->device_bytes,
			.device_buffers = r->device_buffers,
			.session_bytes = r->session_bytes,
			.session_buffers = r->session_buffers,
			.submissions_in_flight = r->submissions_in_flight,
			.kernels_compiled = r->kernels_compiled,
			.pipelines = r->pipelines,
			.kernel_hits = r->kernel_hits,
			.compile_time_us = r->compile_time_us,
			.modules = r->modules,
			.cache_file_bytes = r->cache_file_bytes,
			.session_gpu_time_ns = r->session_gpu_time_ns,
			.session_launches = r->session_launches,
		};
		ruda__struct_out(out, ruda__struct_size(out), &stats, sizeof(stats));
	}
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}

/* ---- profiling and exclusive access ------------------------------------- */

ruda_status ruda_client_profile_start(ruda_client *c, ruda_profile_window *out)
{
	if (!c || !out)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ProfileStart p = RUDA__PROFILE_START__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_PROFILE_START;
	req.profile_start = &p;
	pthread_mutex_lock(&c->lock);
	p.window = c->next_window++;
	ruda_status st = queue(c, &req);
	pthread_mutex_unlock(&c->lock);
	if (st == RUDA_OK)
		*out = p.window;
	return st;
}

ruda_status ruda_client_profile_end(ruda_client *c, ruda_profile_window window,
				    uint64_t *duration_ns)
{
	if (!c || !duration_ns)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ProfileEnd p = RUDA__PROFILE_END__INIT;
	p.window = window;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_PROFILE_END;
	req.profile_end = &p;
	Ruda__Reply *reply = NULL;
	ruda_status st = call(c, &req, &reply);
	if (st == RUDA_OK && reply->body_case != RUDA__REPLY__BODY_PROFILE)
		st = RUDA_ERROR_PROTOCOL;
	if (st == RUDA_OK)
		*duration_ns = reply->profile->duration_ns;
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}

ruda_status ruda_client_profile_abandon(ruda_client *c, ruda_profile_window window)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ProfileAbandon p = RUDA__PROFILE_ABANDON__INIT;
	p.window = window;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_PROFILE_ABANDON;
	req.profile_abandon = &p;
	return post(c, &req, 0);
}

ruda_status ruda_client_profile(ruda_client *c, void (*task)(void *user), void *user,
				const char *name, uint64_t *duration_ns)
{
	(void)name;
	if (!task)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_profile_window w;
	ruda_status st = ruda_client_profile_start(c, &w);
	if (st != RUDA_OK)
		return st;
	task(user);
	return ruda_client_profile_end(c, w, duration_ns);
}

ruda_status ruda_client_exclusive_begin(ruda_client *c, uint32_t timeout_ms)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ExclusiveBegin e = RUDA__EXCLUSIVE_BEGIN__INIT;
	e.timeout_ms = timeout_ms;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EXCLUSIVE_BEGIN;
	req.exclusive_begin = &e;
	return call(c, &req, NULL);
}

ruda_status ruda_client_exclusive_end(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ExclusiveEnd e = RUDA__EXCLUSIVE_END__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EXCLUSIVE_END;
	req.exclusive_end = &e;
	return call(c, &req, NULL);
}

ruda_status ruda_client_exclusive(ruda_client *c, void (*task)(void *user), void *user)
{
	if (!task)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_status st = ruda_client_exclusive_begin(c, 0);
	if (st != RUDA_OK)
		return st;
	task(user);
	return ruda_client_exclusive_end(c);
}

/* ---- throughput cache ---------------------------------------------------- */

ruda_status ruda_client_measure_throughput(ruda_client *c, const char *key,
					   int (*probe)(void *user, double *value), void *user,
					   double *value)
{
	if (!c || !key || !probe || !value)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ThroughputGet get = RUDA__THROUGHPUT_GET__INIT;
	get.key = (char *)key;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_THROUGHPUT_GET;
	req.throughput_get = &get;
	Ruda__Reply *reply = NULL;
	ruda_status st = call(c, &req, &reply);
	if (st == RUDA_OK && reply->body_case == RUDA__REPLY__BODY_THROUGHPUT) {
		*value = reply->throughput->value;
		ruda__reply__free_unpacked(reply, NULL);
		return RUDA_OK;
	}
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	if (st != RUDA_ERROR_INVALID_HANDLE)
		return st == RUDA_OK ? RUDA_ERROR_PROTOCOL : st;
	/* a miss: measure, then tell the daemon */
	if (probe(user, value) != 0)
		return RUDA_ERROR_UNSUPPORTED;
	Ruda__ThroughputSet set = RUDA__THROUGHPUT_SET__INIT;
	set.key = (char *)key;
	set.value = *value;
	Ruda__Request put = RUDA__REQUEST__INIT;
	put.body_case = RUDA__REQUEST__BODY_THROUGHPUT_SET;
	put.throughput_set = &set;
	/* a round trip, so the next client to ask finds it */
	pthread_mutex_lock(&c->lock);
	st = round_trip(c, &put, NULL, NULL);
	pthread_mutex_unlock(&c->lock);
	return st;
}

/* ---- streams -------------------------------------------------------------- */

ruda_stream ruda_client_execution_stream(const ruda_client *c)
{
	return c ? __atomic_load_n(&c->stream, __ATOMIC_RELAXED) : 0;
}

ruda_status ruda_client_set_stream(ruda_client *c, ruda_stream stream)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&c->lock);
	c->stream = stream;
	pthread_mutex_unlock(&c->lock);
	return RUDA_OK;
}

int ruda_client_same_execution_queue(const ruda_client *a, const ruda_client *b)
{
	return a && b && a == b; /* one client is one session: its stream is shared */
}

/* ---- for the library's other files --------------------------------------- */

ruda_status ruda__client_call(ruda_client *c, Ruda__Request *req, Ruda__Reply **out)
{
	return call(c, req, out);
}

ruda_status ruda__client_post(ruda_client *c, Ruda__Request *req, int now)
{
	return post(c, req, now);
}

ruda_status ruda__client_watched_call(ruda_client *c, Ruda__Request *req, uint64_t bytes)
{
	return watched_call(c, req, bytes);
}

ruda_status ruda__client_post_transfer(ruda_client *c, Ruda__Request *req, uint64_t bytes)
{
	ruda_status st = post(c, req, 1);
	if (st == RUDA_OK) {
		pthread_mutex_lock(&c->lock);
		c->transfer_bytes += bytes;
		pthread_mutex_unlock(&c->lock);
	}
	return st;
}

void ruda__client_set_error(ruda_client *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	ruda__last_error_vset(c->serial, fmt, ap);
	va_end(ap);
}

void ruda__client_transfer_counters(ruda_client *c, struct ruda_transfer_counters *out)
{
	pthread_mutex_lock(&c->lock);
	*out = c->xfer;
	pthread_mutex_unlock(&c->lock);
}

ruda_device_properties *ruda__client_props(ruda_client *c)
{
	return &c->props;
}

const struct ruda_client_devices *ruda__client_devices(const ruda_client *c)
{
	return &c->devices;
}

