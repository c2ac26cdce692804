/*
 * The request handlers, one family per file, for the dispatch table
 * (dispatch.c). Each answers through requests/reply.h; what a handler
 * records goes to the session's current stream (s->current).
 */
#ifndef RUDA_HANDLERS_H
#define RUDA_HANDLERS_H

struct ruda_session;
struct Ruda__Request;

/* graphs.c: capture, replay and release of graphs */
void ruda__graph_handle_prepare(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_start(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_stop(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_abort(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_replay(struct ruda_session *s, const struct Ruda__Request *req);
void ruda__graph_handle_release(struct ruda_session *s, const struct Ruda__Request *req);

#endif
