/*
 * The request handlers, one family per file, for the dispatch table
 * (dispatch.c), and what the families share. Each handler answers through
 * requests/reply.h; what it records goes to the session's current stream
 * (s->current), chosen by the dispatch table from the request.
 */
#ifndef RUDA_HANDLERS_H
#define RUDA_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ruda/status.h>

struct ruda_device;
struct ruda_session;
struct ruda_session_buffer;
struct ruda_stream;
struct Ruda__Request;

/* hello.c: the handshake; `fd` is the client's arena memfd when the
 * frame carried one (-1 otherwise), lent for the call */
void ruda__handle_hello(struct ruda_session *s, const struct Ruda__Request *req, int fd);

/* buffers.c: buffer ids, allocation, release, exported memory */
void ruda__handle_empty(struct ruda_session *s, const struct Ruda__Request *req);
/* Whether the request being handled waits (parked) while the thread pool
 * makes the device memory a new buffer of `size` bytes on `device`, in
 * allocation mode `mode`, needs: the loop serves the other clients
 * meanwhile, and the request is handed again once it is made. False when
 * it can go ahead now (memory at hand, little of it, past the device's
 * limits), or is the request handed again with its memory made. */
bool ruda__session_park_for_memory(struct ruda_session *s, struct ruda_device *device,
				   uint64_t size, int mode);
void ruda__handle_release(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_allocation_mode(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_export_resource(struct ruda_session *s, const struct Ruda__Request *req);
/* The entry of buffer id `id`, or NULL. */
struct ruda_session_buffer *ruda__request_buffer(struct ruda_session *s, uint64_t id);
/* Id `id` carries `status` from now on (the first failure stays). */
void ruda__request_mark_failed(struct ruda_session *s, uint64_t id, ruda_status status,
			       const char *why);
/* RUDA_OK when `id` is a buffer without error; else its status and why. */
ruda_status ruda__request_buffer_status(struct ruda_session *s, uint64_t id, const char **why);
/* Export `id`'s memory now (its work is done): the checks, then the fd. */
void ruda__buffers_export_now(struct ruda_session *s, uint64_t request, uint64_t id);

/* transfers.c: Write, Read, staging regions; `fd` as for Hello */
void ruda__handle_write(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_read(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_staging_attach(struct ruda_session *s, const struct Ruda__Request *req,
				 int fd);
void ruda__handle_staging_detach(struct ruda_session *s, const struct Ruda__Request *req);

/* kernels.c: kernels and their measured throughputs */
void ruda__handle_kernel_register(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_kernel_lookup(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_kernel_release(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_throughput_get(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_throughput_set(struct ruda_session *s, const struct Ruda__Request *req);

/* launch.c */
void ruda__handle_launch(struct ruda_session *s, const struct Ruda__Request *req);

/* sync.c: execution, profiling, and the replies that wait for the GPU */
void ruda__handle_flush(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_sync(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_check(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_sync_buffers(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_fence(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_profile_start(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_profile_end(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_profile_abandon(struct ruda_session *s, const struct Ruda__Request *req);
/* What a reply waits for before it is sent. */
enum ruda_wait_kind {
	RUDA_WAIT_READ,
	RUDA_WAIT_SYNC,
	RUDA_WAIT_SYNC_BUFFERS,
	RUDA_WAIT_FENCE,
	RUDA_WAIT_PROFILE,
	RUDA_WAIT_EXPORT,
};
/* Answer `request` once the current stream's work (READ, SYNC) or all of
 * the session's (the others) has completed; `handles` travel with it. */
void ruda__wait_then_reply(struct ruda_session *s, uint64_t request, enum ruda_wait_kind kind,
			   const uint64_t *handles, size_t nhandles);
/* Publish in the arena which timeline value ends `request` on `st`, or
 * (ok false) that only the reply answers it (docs/design.md, "Fast sync"). */
void ruda__wait_publish(struct ruda_session *s, const struct ruda_stream *st, uint64_t request,
			bool ok);
/* A request submitted on `st` just now is settled without error. */
bool ruda__wait_settled_ok(struct ruda_session *s, const struct ruda_stream *st);

/* usage.c: statistics, memory usage and cleanup, exclusive leases */
void ruda__handle_stats(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_memory_usage(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_memory_cleanup(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_memory_compact(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_exclusive_begin(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__handle_exclusive_end(struct ruda_session *s, const struct Ruda__Request *req);

/* graphs.c: capture, replay and release of graphs */
void ruda__graph_handle_prepare(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_start(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_stop(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_abort(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_replay(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_release(struct ruda_session *s, const struct Ruda__Request *req);
/* While a stream captures, only launches (and requests that record nothing
 * on it) make sense there; true when `req` (table entry `name`) was refused. */
bool ruda__graph_refused_while_capturing(struct ruda_session *s, const struct Ruda__Request *req,
					 size_t body, const char *name);

/* Whether [offset, offset + size) lies within `limit` bytes. */
static inline bool ruda__range_ok(uint64_t offset, uint64_t size, uint64_t limit)
{
	return offset <= limit && size <= limit - offset;
}

#endif
