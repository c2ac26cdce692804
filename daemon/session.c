#include "session.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "arena.h"
#include "buffer.h"
#include "dispatch.h"
#include "log.h"
#include "pipeline.h"
#include "ruda.pb-c.h"

static void on_poll(uv_poll_t *poll, int status, int events);
static void unthrottle(struct ruda_session *s);
static void process_frames(struct ruda_session *s);

static void set_poll(struct ruda_session *s, int events)
{
	if (events == s->poll_events)
		return;
	s->poll_events = events;
	if (events)
		uv_poll_start(&s->poll, events, on_poll);
	else
		uv_poll_stop(&s->poll);
}

int ruda__session_create(struct ruda_session_context *ctx, int fd, uint64_t id,
			 struct ruda_session **out)
{
	struct ruda_session *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->id = id;
	s->ctx = ctx;
	s->fd = fd;
	s->state = RUDA_SESSION_HELLO;
	snprintf(s->name, sizeof(s->name), "?");
	struct ucred cred;
	socklen_t len = sizeof(cred);
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
		s->pid = cred.pid;
		s->uid = cred.uid;
		s->gid = cred.gid;
	}
	ruda__handle_table_init(&s->buffers);
	ruda__handle_table_init(&s->kernels);
	ruda__frame_writer_init(&s->out);
	int err = ruda__frame_reader_init(&s->in);
	if (!err)
		err = ruda__handle_table_insert(&ctx->sessions, id, s);
	if (err) {
		ruda__frame_reader_finish(&s->in);
		free(s);
		return err;
	}
	s->usage.connected_ms = s->usage.last_request_ms = uv_now(ctx->loop);
	uv_poll_init(ctx->loop, &s->poll, fd);
	s->poll.data = s;
	set_poll(s, UV_READABLE);
	*out = s;
	return 0;
}

void ruda__session_kill(struct ruda_session *s)
{
	if (s->state == RUDA_SESSION_DEAD)
		return;
	s->state = RUDA_SESSION_DEAD;
	set_poll(s, 0);
	s->dead_next = s->ctx->dead;
	s->ctx->dead = s;
}

static void free_after_close(uv_handle_t *handle)
{
	free(handle->data);
}

void ruda__session_destroy(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	log_info("session %llu (uid %u, pid %d, \"%s\"): closed, %llu buffers, %llu bytes released",
		 (unsigned long long)s->id, s->uid, s->pid, s->name,
		 (unsigned long long)s->buffers.count, (unsigned long long)s->bytes);
	ruda__handle_table_remove(&ctx->sessions, s->id);
	if (s->state == RUDA_SESSION_DEAD) {
		struct ruda_session **link = &ctx->dead;
		while (*link && *link != s)
			link = &(*link)->dead_next;
		if (*link)
			*link = s->dead_next;
	}
	s->state = RUDA_SESSION_DEAD;
	if (s->throttled)
		unthrottle(s);
	if (s->arena)
		ruda__stream_finish(&s->stream);
	struct ruda_session_buffer *b;
	while ((b = ruda__handle_table_pop(&s->buffers, NULL))) {
		if (b->buffer)
			ruda__buffer_put(b->buffer);
		free(b->error_message);
		free(b);
	}
	struct ruda_session_kernel *k;
	while ((k = ruda__handle_table_pop(&s->kernels, NULL))) {
		ruda__pipeline_put(k->pipeline);
		free(k);
	}
	ruda__handle_table_finish(&s->buffers);
	ruda__handle_table_finish(&s->kernels);
	if (s->arena)
		ruda_ref_put(&s->arena->ref);
	ruda__frame_reader_finish(&s->in);
	ruda__frame_writer_finish(&s->out);
	close(s->fd);
	uv_close((uv_handle_t *)&s->poll, free_after_close);
}

void ruda__session_context_tick(struct ruda_session_context *ctx)
{
	while (ctx->dead) {
		struct ruda_session *s = ctx->dead;
		ctx->dead = s->dead_next;
		ruda__session_destroy(s);
	}
	ruda__stream_submit_dirty(&ctx->dirty);
}

static void unthrottle(struct ruda_session *s)
{
	struct ruda_session **link = &s->ctx->throttled;
	while (*link && *link != s)
		link = &(*link)->throttled_next;
	if (*link)
		*link = s->throttled_next;
	s->throttled = 0;
}

void ruda__session_context_resume(struct ruda_session_context *ctx)
{
	struct ruda_session **link = &ctx->throttled;
	while (*link) {
		struct ruda_session *s = *link;
		if (ruda__stream_saturated(&s->stream)) {
			link = &s->throttled_next;
			continue;
		}
		*link = s->throttled_next;
		s->throttled = 0;
		if (s->state != RUDA_SESSION_READY)
			continue;
		set_poll(s, ruda__frame_writer_pending(&s->out) ? UV_WRITABLE : UV_READABLE);
		process_frames(s); /* those already received come first */
	}
}

void ruda__session_violation(struct ruda_session *s, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warn("session %llu (uid %u, pid %d): protocol violation: %s; disconnecting",
		 (unsigned long long)s->id, s->uid, s->pid, why);
	ruda__session_kill(s);
}

void ruda__session_flush(struct ruda_session *s)
{
	if (s->state == RUDA_SESSION_DEAD)
		return;
	int err = ruda__frame_writer_flush(&s->out, s->fd, MSG_DONTWAIT);
	if (err == 0) {
		if (s->state == RUDA_SESSION_CLOSING) {
			ruda__session_kill(s);
			return;
		}
		set_poll(s, s->throttled ? UV_DISCONNECT : UV_READABLE);
	} else if (err == -EAGAIN) {
		if (ruda__frame_writer_pending(&s->out) > s->ctx->max_output) {
			log_warn("session %llu (uid %u, pid %d): %zu reply bytes unread; disconnecting",
				 (unsigned long long)s->id, s->uid, s->pid,
				 ruda__frame_writer_pending(&s->out));
			ruda__session_kill(s);
			return;
		}
		/* stop reading a client that does not read: it is the backpressure */
		set_poll(s, UV_WRITABLE);
	} else {
		log_debug("session %llu: send failed: %s", (unsigned long long)s->id, strerror(-err));
		ruda__session_kill(s);
	}
}

void ruda__session_reply(struct ruda_session *s, Ruda__Reply *reply)
{
	if (s->state == RUDA_SESSION_DEAD)
		return;
	size_t size = ruda__reply__get_packed_size(reply);
	uint8_t *dst = size <= RUDA_FRAME_MAX_PAYLOAD
			       ? ruda__frame_writer_reserve(&s->out, (uint32_t)size)
			       : NULL;
	if (!dst) {
		log_error("session %llu: cannot queue a %zu-byte reply", (unsigned long long)s->id,
			  size);
		ruda__session_kill(s);
		return;
	}
	ruda__reply__pack(reply, dst);
	ruda__frame_writer_commit(&s->out, (uint32_t)size);
	ruda__session_flush(s);
}

void ruda__session_reply_fd(struct ruda_session *s, Ruda__Reply *reply, int fd)
{
	uint8_t buf[RUDA_FRAME_MAX_PAYLOAD];
	size_t size = ruda__reply__get_packed_size(reply);
	if (s->state == RUDA_SESSION_DEAD || size > sizeof(buf)) {
		close(fd);
		ruda__session_kill(s);
		return;
	}
	ruda__reply__pack(reply, buf);
	if (ruda__frame_writer_append(&s->out, buf, (uint32_t)size, &fd, 1) < 0) {
		ruda__session_kill(s);
		return;
	}
	ruda__session_flush(s);
}

void ruda__session_reply_status(struct ruda_session *s, uint64_t request, ruda_status status,
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
	ruda__session_reply(s, &reply);
}

/* Run the complete frames buffered, until the stream has as much GPU work
 * in flight as one client may have. */
static void process_frames(struct ruda_session *s)
{
	struct ruda_frame frame;
	int r;
	while (s->state != RUDA_SESSION_DEAD && s->state != RUDA_SESSION_CLOSING &&
	       !s->throttled && (r = ruda__frame_reader_next(&s->in, &frame)) != 0) {
		if (r < 0) {
			ruda__session_violation(s, "malformed frame header");
			return;
		}
		ruda__dispatch_frame(s, &frame);
		if (s->state == RUDA_SESSION_READY && ruda__stream_saturated(&s->stream)) {
			/* backpressure: take no more requests until the GPU catches up,
			 * but still notice a client that goes away */
			s->throttled = 1;
			s->throttled_next = s->ctx->throttled;
			s->ctx->throttled = s;
			set_poll(s, (s->poll_events & UV_WRITABLE) | UV_DISCONNECT);
		}
	}
}

static void session_read(struct ruda_session *s)
{
	ssize_t n = ruda__frame_reader_recv(&s->in, s->fd, MSG_DONTWAIT);
	if (n == -EAGAIN)
		return;
	if (n == 0 || (n < 0 && n != -EPROTO)) {
		if (ruda__frame_reader_pending(&s->in))
			log_warn("session %llu (uid %u, pid %d): connection ended inside a frame",
				 (unsigned long long)s->id, s->uid, s->pid);
		ruda__session_kill(s);
		return;
	}
	if (n == -EPROTO) {
		ruda__session_violation(s, "too many file descriptors or truncated control data");
		return;
	}
	process_frames(s);
	/* fds come with their frame's first bytes: any left over once every
	 * byte is a whole frame were claimed by none */
	if (s->state == RUDA_SESSION_READY && !s->throttled && s->in.nfds &&
	    !ruda__frame_reader_pending(&s->in))
		ruda__session_violation(s, "file descriptors that no frame claims");
}

static void on_poll(uv_poll_t *poll, int status, int events)
{
	struct ruda_session *s = poll->data;
	if (status < 0) {
		ruda__session_kill(s);
		return;
	}
	if (events & UV_DISCONNECT) {
		ruda__session_kill(s);
		return;
	}
	if (events & UV_WRITABLE)
		ruda__session_flush(s);
	if ((events & UV_READABLE) && s->state != RUDA_SESSION_DEAD &&
	    s->state != RUDA_SESSION_CLOSING)
		session_read(s);
}
