#include "server/connection.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "../../proto/frame.h"
#include "common/log.h"
#include "requests/collective.h"
#include "requests/dispatch.h"
#include "requests/session.h"
#include "requests/session_arena.h"
#include "requests/staging.h"
#include "ruda.pb-c.h"

struct ruda_connection {
	struct ruda_session *session; /* owned: freed with the connection */
	int fd;
	uv_poll_t poll;
	int poll_events;
	struct ruda_frame_reader in;
	struct ruda_frame_writer out;
};

static void on_poll(uv_poll_t *poll, int status, int events);

static void set_poll(struct ruda_connection *c, int events)
{
	if (events == c->poll_events)
		return;
	c->poll_events = events;
	if (events)
		uv_poll_start(&c->poll, events, on_poll);
	else
		uv_poll_stop(&c->poll);
}

int ruda__connection_create(struct ruda_session_context *ctx, int fd, uint64_t id,
			    struct ruda_session **out)
{
	struct ruda_connection *c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->fd = fd;
	ruda__frame_writer_init(&c->out);
	int err = ruda__frame_reader_init(&c->in);
	if (err) {
		free(c);
		return err;
	}
	struct ucred cred = {0};
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0)
		cred = (struct ucred){0};
	err = ruda__session_create(ctx, c, id, cred.pid, cred.uid, cred.gid, &c->session);
	if (err) {
		ruda__frame_reader_finish(&c->in);
		free(c);
		return err;
	}
	uv_poll_init(ctx->loop, &c->poll, fd);
	c->poll.data = c;
	set_poll(c, UV_READABLE);
	*out = c->session;
	return 0;
}

static void free_after_close(uv_handle_t *handle)
{
	struct ruda_connection *c = handle->data;
	free(c->session);
	free(c);
}

void ruda__connection_end(struct ruda_session *s)
{
	struct ruda_connection *c = s->conn;
	ruda__session_detach(s);
	ruda__collective_session_gone(s);
	ruda__staging_release_all(s);
	ruda__session_release(s);
	ruda__frame_reader_finish(&c->in);
	ruda__frame_writer_finish(&c->out);
	close(c->fd);
	uv_close((uv_handle_t *)&c->poll, free_after_close);
}

void ruda__connection_tick(struct ruda_session_context *ctx)
{
	while (ctx->dead) {
		struct ruda_session *s = ctx->dead;
		ctx->dead = s->dead_next;
		ruda__connection_end(s);
	}
	ruda__session_submit_dirty(ctx);
}

void ruda__connection_context_finish(struct ruda_session_context *ctx)
{
	ruda__collective_finish(ctx);
	ruda__session_arenas_finish(ctx);
	ruda__session_context_finish(ctx);
}

/* ---- what the request layer does to its connection (requests/reply.h) ---- */

void ruda__connection_pause(struct ruda_connection *c)
{
	set_poll(c, (c->poll_events & UV_WRITABLE) | UV_DISCONNECT);
}

static void process_frames(struct ruda_connection *c);

void ruda__connection_resume(struct ruda_connection *c)
{
	set_poll(c, ruda__frame_writer_pending(&c->out) ? UV_WRITABLE : UV_READABLE);
	process_frames(c); /* those already received come first */
}

void ruda__connection_stop(struct ruda_connection *c)
{
	set_poll(c, 0);
}

int ruda__connection_fd(const struct ruda_connection *c)
{
	return c->fd;
}

void ruda__reply_flush(struct ruda_connection *c)
{
	struct ruda_session *s = c->session;
	if (s->state == RUDA_SESSION_DEAD)
		return;
	int err = ruda__frame_writer_flush(&c->out, c->fd, MSG_DONTWAIT);
	if (err == 0) {
		if (s->state == RUDA_SESSION_CLOSING) {
			ruda__session_kill(s);
			return;
		}
		set_poll(c, s->throttled ? UV_DISCONNECT : UV_READABLE);
	} else if (err == -EAGAIN) {
		if (ruda__frame_writer_pending(&c->out) > s->ctx->max_output) {
			log_warn("session %llu (uid %u, pid %d): %zu reply bytes unread; disconnecting",
				 (unsigned long long)s->id, s->uid, s->pid,
				 ruda__frame_writer_pending(&c->out));
			ruda__session_kill(s);
			return;
		}
		/* stop reading a client that does not read: it is the backpressure */
		set_poll(c, UV_WRITABLE);
	} else {
		log_debug("session %llu: send failed: %s", (unsigned long long)s->id, strerror(-err));
		ruda__session_kill(s);
	}
}

void ruda__reply_send(struct ruda_connection *c, Ruda__Reply *reply)
{
	struct ruda_session *s = c->session;
	if (s->state == RUDA_SESSION_DEAD)
		return;
	size_t size = ruda__reply__get_packed_size(reply);
	uint8_t *dst = size <= RUDA_FRAME_MAX_PAYLOAD
			       ? ruda__frame_writer_reserve(&c->out, (uint32_t)size)
			       : NULL;
	if (!dst) {
		log_error("session %llu: cannot queue a %zu-byte reply", (unsigned long long)s->id,
			  size);
		ruda__session_kill(s);
		return;
	}
	ruda__reply__pack(reply, dst);
	ruda__frame_writer_commit(&c->out, (uint32_t)size);
	ruda__reply_flush(c);
}

void ruda__reply_fds(struct ruda_connection *c, Ruda__Reply *reply, int *fds, uint16_t nfds)
{
	struct ruda_session *s = c->session;
	uint8_t buf[RUDA_FRAME_MAX_PAYLOAD];
	size_t size = ruda__reply__get_packed_size(reply);
	if (s->state == RUDA_SESSION_DEAD || size > sizeof(buf)) {
		for (uint16_t i = 0; i < nfds; i++)
			close(fds[i]);
		ruda__session_kill(s);
		return;
	}
	ruda__reply__pack(reply, buf);
	if (ruda__frame_writer_append(&c->out, buf, (uint32_t)size, fds, nfds) < 0) {
		ruda__session_kill(s);
		return;
	}
	ruda__reply_flush(c);
}

void ruda__reply_fd(struct ruda_connection *c, Ruda__Reply *reply, int fd)
{
	ruda__reply_fds(c, reply, &fd, 1);
}

void ruda__reply_status(struct ruda_connection *c, uint64_t request, ruda_status status,
			const char *fmt, ...)
{
	char message[512] = "";
	if (fmt) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(message, sizeof(message), fmt, ap);
		va_end(ap);
	}
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = request;
	reply.status = (Ruda__Status)status;
	reply.message = message;
	ruda__reply_send(c, &reply);
}

/* ---- reading ---------------------------------------------------------------- */

/* Run the complete frames buffered while the session takes them (it stops
 * taking them when its streams have as much GPU work in flight as one
 * client may have, or another holds the device alone). */
static void process_frames(struct ruda_connection *c)
{
	struct ruda_session *s = c->session;
	struct ruda_frame frame;
	int r;
	while (ruda__session_takes_frame(s)) {
		if ((r = ruda__frame_reader_next(&c->in, &frame)) == 0)
			break;
		if (r < 0) {
			ruda__session_violation(s, "malformed frame header");
			return;
		}
		ruda__dispatch_frame(s, &frame);
		if (ruda__session_frame_done(s)) {
			/* its arena is being imported: the same frame again, once it is */
			ruda__frame_reader_unread(&c->in, &frame);
			break;
		}
	}
}

static void connection_read(struct ruda_connection *c)
{
	struct ruda_session *s = c->session;
	ssize_t n = ruda__frame_reader_recv(&c->in, c->fd, MSG_DONTWAIT);
	if (n == -EAGAIN)
		return;
	if (n == 0 || (n < 0 && n != -EPROTO)) {
		if (ruda__frame_reader_pending(&c->in))
			log_warn("session %llu (uid %u, pid %d): connection ended inside a frame",
				 (unsigned long long)s->id, s->uid, s->pid);
		ruda__session_kill(s);
		return;
	}
	if (n == -EPROTO) {
		ruda__session_violation(s, "too many file descriptors or truncated control data");
		return;
	}
	process_frames(c);
	/* fds come with their frame's first bytes: any left over once every
	 * byte is a whole frame were claimed by none */
	if (s->state == RUDA_SESSION_READY && !s->throttled && c->in.nfds &&
	    !ruda__frame_reader_pending(&c->in))
		ruda__session_violation(s, "file descriptors that no frame claims");
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
	struct ruda_connection *c = poll->data;
	struct ruda_session *s = c->session;
	if (status < 0) {
		ruda__session_kill(s);
		return;
	}
	if (events & UV_DISCONNECT) {
		ruda__session_kill(s);
		return;
	}
	if (events & UV_WRITABLE)
		ruda__reply_flush(c);
	if ((events & UV_READABLE) && s->state != RUDA_SESSION_DEAD &&
	    s->state != RUDA_SESSION_CLOSING)
		connection_read(c);
}
