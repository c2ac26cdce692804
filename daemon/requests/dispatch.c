/*
 * The dispatch table: a frame's request is decoded (into a scratch area, or
 * the fast path for launches), checked against the session's state (Hello
 * first, its stream, a capture in progress) and handed to its family's
 * handler (requests/handlers.h). Descriptors are accepted only with the
 * requests that take one, and lent to the handler for the call.
 */
#include "requests/dispatch.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <ruda/status.h>

#include "common/launch_decode.h"
#include "common/log.h"
#include "common/pass_step.h"
#include "exec/stream.h"
#include "requests/admin.h"
#include "requests/collective.h"
#include "requests/device_info.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "requests/to_client.h"
#include "ruda.pb-c.h"

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

/* ---- the table ----------------------------------------------------------- */

typedef void (*handler_fn)(struct ruda_session *s, const Ruda__Request *req);
/* a request whose frame may carry a descriptor, lent for the call */
typedef void (*handler_fd_fn)(struct ruda_session *s, const Ruda__Request *req, int fd);

static const struct {
	handler_fn run;
	const char *name;
	int replies; /* always answered (Empty only when it asks to be) */
	handler_fd_fn run_fd; /* instead of run */
} handlers[] = {
	[RUDA__REQUEST__BODY_HELLO] = {NULL, "Hello", 1, ruda__handle_hello},
	[RUDA__REQUEST__BODY_EMPTY] = {ruda__handle_empty, "Empty", 0},
	[RUDA__REQUEST__BODY_WRITE] = {ruda__handle_write, "Write", 0},
	[RUDA__REQUEST__BODY_READ] = {ruda__handle_read, "Read", 1},
	[RUDA__REQUEST__BODY_RELEASE] = {ruda__handle_release, "Release", 0},
	[RUDA__REQUEST__BODY_KERNEL_REGISTER] = {ruda__handle_kernel_register, "KernelRegister", 1},
	[RUDA__REQUEST__BODY_KERNEL_RELEASE] = {ruda__handle_kernel_release, "KernelRelease", 0},
	[RUDA__REQUEST__BODY_LAUNCH] = {ruda__handle_launch, "Launch", 0},
	[RUDA__REQUEST__BODY_FLUSH] = {ruda__handle_flush, "Flush", 0},
	[RUDA__REQUEST__BODY_SYNC] = {ruda__handle_sync, "Sync", 1},
	[RUDA__REQUEST__BODY_CHECK] = {ruda__handle_check, "Check", 1},
	[RUDA__REQUEST__BODY_SYNC_BUFFERS] = {ruda__handle_sync_buffers, "SyncBuffers", 1},
	[RUDA__REQUEST__BODY_FENCE] = {ruda__handle_fence, "Fence", 1},
	[RUDA__REQUEST__BODY_STATS] = {ruda__handle_stats, "Stats", 1},
	[RUDA__REQUEST__BODY_ADMIN] = {ruda__admin_handle, "Admin", 1},
	[RUDA__REQUEST__BODY_KERNEL_LOOKUP] = {ruda__handle_kernel_lookup, "KernelLookup", 1},
	[RUDA__REQUEST__BODY_PROFILE_START] = {ruda__handle_profile_start, "ProfileStart", 0},
	[RUDA__REQUEST__BODY_PROFILE_END] = {ruda__handle_profile_end, "ProfileEnd", 1},
	[RUDA__REQUEST__BODY_PROFILE_ABANDON] = {ruda__handle_profile_abandon, "ProfileAbandon", 0},
	[RUDA__REQUEST__BODY_EXCLUSIVE_BEGIN] = {ruda__handle_exclusive_begin, "ExclusiveBegin", 1},
	[RUDA__REQUEST__BODY_EXCLUSIVE_END] = {ruda__handle_exclusive_end, "ExclusiveEnd", 1},
	[RUDA__REQUEST__BODY_MEMORY_USAGE] = {ruda__handle_memory_usage, "MemoryUsage", 1},
	[RUDA__REQUEST__BODY_MEMORY_CLEANUP] = {ruda__handle_memory_cleanup, "MemoryCleanup", 0},
	[RUDA__REQUEST__BODY_MEMORY_COMPACT] = {ruda__handle_memory_compact, "MemoryCompact", 1},
	[RUDA__REQUEST__BODY_THROUGHPUT_GET] = {ruda__handle_throughput_get, "ThroughputGet", 1},
	[RUDA__REQUEST__BODY_THROUGHPUT_SET] = {ruda__handle_throughput_set, "ThroughputSet", 1},
	[RUDA__REQUEST__BODY_UTILIZATION] = {ruda__handle_utilization, "Utilization", 1},
	[RUDA__REQUEST__BODY_TO_CLIENT] = {ruda__handle_to_client, "ToClient", 1},
	[RUDA__REQUEST__BODY_COLLECTIVE_INIT] = {ruda__handle_collective_init, "CollectiveInit", 1},
	[RUDA__REQUEST__BODY_ALL_REDUCE] = {ruda__handle_all_reduce, "AllReduce", 0},
	[RUDA__REQUEST__BODY_COLLECTIVE_SYNC] = {ruda__handle_collective_sync, "CollectiveSync", 1},
	[RUDA__REQUEST__BODY_STAGING_ATTACH] = {NULL, "StagingAttach", 1,
						ruda__handle_staging_attach},
	[RUDA__REQUEST__BODY_STAGING_DETACH] = {ruda__handle_staging_detach, "StagingDetach", 0},
	[RUDA__REQUEST__BODY_ALLOCATION_MODE] = {ruda__handle_allocation_mode, "AllocationMode", 0},
	[RUDA__REQUEST__BODY_EXPORT_RESOURCE] = {ruda__handle_export_resource, "ExportResource", 1},
	[RUDA__REQUEST__BODY_GRAPH_PREPARE] = {ruda__graph_handle_prepare, "GraphPrepare", 1},
	[RUDA__REQUEST__BODY_GRAPH_START_CAPTURE] = {ruda__graph_handle_start, "GraphStartCapture", 1},
	[RUDA__REQUEST__BODY_GRAPH_STOP_CAPTURE] = {ruda__graph_handle_stop, "GraphStopCapture", 1},
	[RUDA__REQUEST__BODY_GRAPH_ABORT_CAPTURE] = {ruda__graph_handle_abort, "GraphAbortCapture",
						     0},
	[RUDA__REQUEST__BODY_GRAPH_REPLAY] = {ruda__graph_handle_replay, "GraphReplay", 0},
	[RUDA__REQUEST__BODY_GRAPH_RELEASE] = {ruda__graph_handle_release, "GraphRelease", 0},
};

static void dispatch_decoded(struct ruda_session *s, struct ruda_frame *frame, int fd);

/* Whether the frame is a request that takes an fd (StagingAttach, a Hello
 * with client_arena); such frames are rare, so decoding one twice costs
 * nothing that matters. */
static bool takes_fd(const struct ruda_frame *frame)
{
	Ruda__Request *req = ruda__request__unpack(NULL, frame->length, frame->payload);
	bool yes = req && (req->body_case == RUDA__REQUEST__BODY_STAGING_ATTACH ||
			  (req->body_case == RUDA__REQUEST__BODY_HELLO && req->hello->client_arena));
	if (req)
		ruda__request__free_unpacked(req, NULL);
	return yes;
}

void ruda__dispatch_frame(struct ruda_session *s, struct ruda_frame *frame)
{
	/* only StagingAttach and Hello take an fd: peek at the body before decoding */
	int attach = frame->nfds == 1 && takes_fd(frame);
	if (frame->nfds && !attach) {
		for (uint16_t i = 0; i < frame->nfds; i++)
			close(frame->fds[i]);
		ruda__session_violation(s, "file descriptors with a request that takes none");
		return;
	}
	/* the handler borrows it: whatever it keeps, it duplicates */
	int fd = attach ? frame->fds[0] : -1;
	dispatch_decoded(s, frame, fd);
	if (attach)
		close(fd);
}

/* Decode and run one request; `fd` came with its frame (or -1). */
static void dispatch_decoded(struct ruda_session *s, struct ruda_frame *frame, int fd)
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
	bool decoded_fast = ruda__launch_decode(frame->payload, frame->length, &fast);
	Ruda__Request *req = decoded_fast ? &fast.request
					  : ruda__request__unpack(alloc, frame->length,
								  frame->payload);
	if (!req) {
		ruda__session_violation(s, "undecodable request (%u bytes)", frame->length);
		return;
	}
	size_t body = (size_t)req->body_case;
	int known = body < sizeof(handlers) / sizeof(handlers[0]) &&
		    (handlers[body].run || handlers[body].run_fd);
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
		    ruda__graph_refused_while_capturing(s, req, body, handlers[body].name))
			goto done;
		ctx->decoding += use_scratch;
		struct ruda_step_mark step = ruda__pass_step_begin();
		if (handlers[body].run_fd)
			handlers[body].run_fd(s, req, fd);
		else
			handlers[body].run(s, req);
		/* the loop watch names the slowest step of a slow pass */
		ruda__pass_step_end(step, "request", handlers[body].name);
		ctx->decoding -= use_scratch;
	}
done:
	if (!use_scratch && !decoded_fast)
		ruda__request__free_unpacked(req, NULL);
	/* else nothing to free: the scratch area is reused by the next frame */
}
