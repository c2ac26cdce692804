/*
 * The protocol pieces every client of rudad needs, shared by libruda's
 * connection (client.c) and rudactl: reaching the socket, framing a
 * request, waiting for and decoding replies, the Hello. Internal to
 * libruda (not exported); rudactl links them from libruda.a.
 */
#ifndef RUDA_WIRE_H
#define RUDA_WIRE_H

#include <stddef.h>
#include <sys/types.h>

#include <ruda/ruda.h>

#include "../proto/frame.h"
#include "ruda.pb-c.h"

/*
 * Resolve rudad's socket (`given`, else $RUDA_SOCKET, else the default for
 * this user) into `path` (`path_len` bytes; 108 holds any) and connect to
 * it. RUDA_OK and *fd (close-on-exec), or, with one sentence in `why`:
 *   RUDA_ERROR_INVALID_ARGUMENT  no path to try (`why` is `no_path`, the
 *                                caller's advice), or a path too long
 *   RUDA_ERROR_PERMISSION        the socket's permissions refuse this user
 *   RUDA_ERROR_DISCONNECTED      no socket there, or nothing listens
 * The last two name the socket and what to do (socket_path.h).
 */
ruda_status ruda__wire_connect(const char *given, const char *no_path, char *path,
			       size_t path_len, int *fd, char *why, size_t why_len);

/* Pack `req` as one frame at the end of `out`'s queue (nothing is sent).
 * RUDA_OK; RUDA_ERROR_INVALID_ARGUMENT for a request over the frame limit
 * (*size says how large it is), RUDA_ERROR_OUT_OF_MEMORY. */
ruda_status ruda__wire_queue(struct ruda_frame_writer *out, const Ruda__Request *req,
			     size_t *size);

/* Wait up to `timeout_ms` (-1: for ever) for bytes on `fd`, then receive
 * them into `in`. Bytes received (> 0), 0 at the end of the stream,
 * -ETIMEDOUT, -EINTR (try again) or another negative errno. */
ssize_t ruda__wire_recv(struct ruda_frame_reader *in, int fd, int timeout_ms);

/* The next whole frame in `in`, decoded: 1 with *frame (its fds are the
 * caller's) and *reply (the caller's; NULL when the payload is no Reply),
 * 0 when more bytes are needed, -EPROTO for a malformed frame. */
int ruda__wire_next_reply(struct ruda_frame_reader *in, struct ruda_frame *frame,
			  Ruda__Reply **reply);

/* A Hello request of this protocol version naming `client_name`, in *req
 * and *hello (req->hello points at it); the caller adds the options. */
void ruda__wire_hello(Ruda__Request *req, Ruda__Hello *hello, const char *client_name);

/* The HelloReply of `reply` when it is a complete one (the body is a Hello
 * and names one of the devices it lists); else NULL. */
const Ruda__HelloReply *ruda__wire_hello_reply(const Ruda__Reply *reply);

#endif
