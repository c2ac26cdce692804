/* Graph requests: a stream captures launches into a graph, which replays on
 * that stream until released (the graph itself: exec/graph.c). */
#include <stdint.h>

#include <ruda/status.h>

#include "common/handle_table.h"
#include "common/log.h"
#include "exec/graph.h"
#include "exec/stream.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

void ruda__graph_handle_prepare(struct ruda_session *s, const Ruda__Request *req)
{
	/* what the stream recorded runs before anything it captures */
	ruda_status st = ruda__stream_submit(s->current);
	ruda__reply_status(s->conn, req->id, st, "%s", st == RUDA_OK ? "" : ruda_strerror(st));
}

void ruda__graph_handle_start(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_stream *st = s->current;
	if (st->capture) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "stream %u is already capturing a graph", st->id);
		return;
	}
	ruda__stream_submit(st);
	st->capture = ruda__graph_create(s->device, st->id, st->queue);
	if (!st->capture) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY,
				   "cannot make a command buffer for the graph");
		return;
	}
	ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

void ruda__graph_handle_stop(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_stream *st = s->current;
	uint64_t id = req->graph_stop_capture->graph;
	struct ruda_graph *g = st->capture;
	if (!g) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "stream %u is not capturing a graph", st->id);
		return;
	}
	st->capture = NULL; /* the capture ends whatever the verdict */
	ruda_status status = ruda__graph_end(g);
	const char *why = g->error_message;
	if (status == RUDA_OK && ruda__handle_table_get(&s->graphs, id)) {
		status = RUDA_ERROR_INVALID_HANDLE;
		why = "graph id already in use";
	} else if (status == RUDA_OK && s->graphs.count >= s->ctx->max_handles) {
		status = RUDA_ERROR_BUSY;
		why = "too many graphs";
	} else if (status == RUDA_OK && ruda__handle_table_insert(&s->graphs, id, g) < 0) {
		status = RUDA_ERROR_OUT_OF_MEMORY;
		why = "out of memory";
	}
	if (status != RUDA_OK) {
		ruda__reply_status(s->conn, req->id, status, "graph %llu: %s",
				   (unsigned long long)id, why);
		ruda__graph_put(g);
		return;
	}
	log_debug("session %llu: graph %llu of %u launches on stream %u", (unsigned long long)s->id,
		  (unsigned long long)id, g->launches, g->stream);
	ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

void ruda__graph_handle_abort(struct ruda_session *s, const Ruda__Request *req)
{
	(void)req;
	struct ruda_stream *st = s->current;
	if (st->capture)
		ruda__graph_put(st->capture);
	st->capture = NULL;
}

void ruda__graph_handle_replay(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t id = req->graph_replay->graph;
	struct ruda_graph *g = ruda__handle_table_get(&s->graphs, id);
	if (!g) {
		if (s->current->capture)
			ruda__graph_fail(s->current->capture, RUDA_ERROR_INVALID_HANDLE,
					 "replay (request %llu): no graph %llu in this session",
					 (unsigned long long)req->id, (unsigned long long)id);
		else
			ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
					  "replay (request %llu): no graph %llu in this session",
					  (unsigned long long)req->id, (unsigned long long)id);
		return;
	}
	/* its stream existed when it was captured, and streams stay */
	struct ruda_stream *st = ruda__session_stream(s, g->stream);
	if (!st)
		return;
	if (st->capture) {
		ruda__graph_fail(st->capture, RUDA_ERROR_INVALID_ARGUMENT,
				 "replay (request %llu): graph %llu replays on stream %u, which is "
				 "capturing; graphs do not nest",
				 (unsigned long long)req->id, (unsigned long long)id, st->id);
		return;
	}
	/* before: recording the replay may submit it */
	for (size_t i = 0; i < g->nbuffers; i++)
		ruda__stream_note_use(st, g->buffers[i]);
	ruda_status status = ruda__stream_execute(st, g->cmd, g->launches, &g->ref);
	if (status != RUDA_OK) {
		ruda__stream_fail(st, status, "replay (request %llu) of graph %llu: %s",
				  (unsigned long long)req->id, (unsigned long long)id,
				  ruda_strerror(status));
		return;
	}
	s->usage.launches += g->launches;
}

void ruda__graph_handle_release(struct ruda_session *s, const Ruda__Request *req)
{
	uint64_t id = req->graph_release->graph;
	struct ruda_graph *g = ruda__handle_table_remove(&s->graphs, id);
	if (!g) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
				  "release: no graph %llu in this session", (unsigned long long)id);
		return;
	}
	ruda__graph_put(g); /* replays in flight hold their own reference */
}

/*
 * While a stream captures a graph only launches (and requests that record
 * nothing on it) make sense there: what would wait for the stream or move
 * bytes through the arena is refused. Returns true when `req` was refused.
 */
bool ruda__graph_refused_while_capturing(struct ruda_session *s, const Ruda__Request *req,
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
		return true;
	case RUDA__REQUEST__BODY_WRITE:
		/* the bytes never reach the buffer: it carries the error */
		ruda__request_mark_failed(s, req->write->handle, RUDA_ERROR_INVALID_ARGUMENT, why);
		ruda__graph_fail(g, RUDA_ERROR_INVALID_ARGUMENT, "%s; writes are not captured", why);
		ruda__session_arena_used(s, req->id);
		return true;
	case RUDA__REQUEST__BODY_PROFILE_START:
		ruda__graph_fail(g, RUDA_ERROR_INVALID_ARGUMENT, "%s; profiling is not captured",
				 why);
		return true;
	default:
		return false;
	}
}
