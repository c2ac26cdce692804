/*
 * A client's connection as the request layer sees it: where replies go,
 * and whether it is read. The connection itself (the socket, its framing,
 * the write queue, the poll handle) belongs to the server layer
 * (daemon/server/connection.c), which implements this interface; request
 * handlers and the session reach it only through these calls, so nothing
 * below the server includes it.
 */
#ifndef RUDA_REPLY_H
#define RUDA_REPLY_H

#include <stdint.h>

#include <ruda/status.h>

struct ruda_connection; /* opaque: daemon/server/connection.c */
struct Ruda__Reply;

/* Queue a reply (`body` set by the caller, or NULL). Nothing once the
 * session is dead; a reply that cannot be queued ends the session. */
void ruda__reply_send(struct ruda_connection *c, struct Ruda__Reply *reply);
/* Queue a reply that passes `fd` (the connection takes ownership of it). */
void ruda__reply_fd(struct ruda_connection *c, struct Ruda__Reply *reply, int fd);
/* The same with `nfds` descriptors (all taken, whatever happens). */
void ruda__reply_fds(struct ruda_connection *c, struct Ruda__Reply *reply, int *fds,
		     uint16_t nfds);
/* Queue a reply with only a status and message. */
void ruda__reply_status(struct ruda_connection *c, uint64_t request, ruda_status status,
			const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* Send what is queued now, or as soon as the socket takes it; a session
 * that is closing ends once all of it is sent. */
void ruda__reply_flush(struct ruda_connection *c);

/* Stop reading requests (backpressure), still noticing a hang-up. */
void ruda__connection_pause(struct ruda_connection *c);
/* Read again: the frames already received are handled first. */
void ruda__connection_resume(struct ruda_connection *c);
/* Neither read nor write any more (the session was killed). */
void ruda__connection_stop(struct ruda_connection *c);
/* The socket, for questions about the peer (its groups, the address it
 * connected to); it is read and written only by the connection. */
int ruda__connection_fd(const struct ruda_connection *c);

#endif
