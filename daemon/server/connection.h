/*
 * A client's connection: the socket, its framing (frames in, with the
 * descriptors they carry; the write queue out), and the poll handle that
 * drives both. It owns the client's session (requests/session.h): a frame
 * received is handed to the dispatch table, and replies come back through
 * requests/reply.h, which this file implements.
 */
#ifndef RUDA_CONNECTION_H
#define RUDA_CONNECTION_H

#include <stdint.h>

#include "requests/reply.h"

struct ruda_session;
struct ruda_session_context;

/* Take ownership of connected socket `fd` and make its session `id`. */
int ruda__connection_create(struct ruda_session_context *ctx, int fd, uint64_t id,
			    struct ruda_session **out);
/* End a client however it ends: what its requests made (collectives,
 * staging regions), its session, then the socket; the memory of both goes
 * once the poll handle is closed. */
void ruda__connection_end(struct ruda_session *session);
/* End the sessions killed so far and submit the streams with recorded
 * work (end of a loop iteration). */
void ruda__connection_tick(struct ruda_session_context *ctx);
/* Release what the request layer keeps in the context (at shutdown, once
 * every connection has ended). */
void ruda__connection_context_finish(struct ruda_session_context *ctx);

#endif
