#include "server/connection.h"

#include <errno.h>
#include <stdbool.h>
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
	/* its frames' turn ended with more buffered: on ctx->yielded */
	bool yielded;
	struct ruda_connection *yield_next;
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

/*
 * The frames one connection runs in a turn of the loop while other clients
 * are connected. One loop thread serves every client, and a busy client's
 * socket can hold hundreds of launches: run them all and every other
 * client's next request waits behind them (on an H200, 8 clients sending
 * small kernels kept a ninth client's launch 300 us in the loop). With a
 * budget, a client whose request arrives waits for at most this many
 * frames of each other busy client. RUDA_FRAME_BUDGET in rudad's
 * environment changes it (0: no budget), to measure.
 */
#define FRAME_BUDGET 8u

static uint32_t frame_budget(const struct ruda_session_context *ctx)
{
	static uint32_t budget;
	static bool read;
	if (!read) {
		const char *env = getenv("RUDA_FRAME_BUDGET");
		budget = env ? (uint32_t)strtoul(env, NULL, 10) : FRAME_BUDGET;
		read = true;
	}
	/* alone, a client waits for nobody: it keeps the whole batch */
	return ctx->sessions.count > 1 ? budget : 0;
}

static void run_frames(struct ruda_connection *c);

/* The poll events of a connection that may read again: replies first (a
 * client that does not read its replies is not read either). */
static int reading_events(const struct ruda_connection *c)
{
	return ruda__frame_writer_pending(&c->out) ? UV_WRITABLE : UV_READABLE;
}

static void on_yield_idle(uv_idle_t *idle)
{
	struct ruda_session_context *ctx = idle->data;
	struct ruda_connection *list = ctx->yielded;
	ctx->yielded = NULL;
	ctx->yielded_tail = &ctx->yielded;
	while (list) {
		struct ruda_connection *c = list;
		list = c->yield_next;
		c->yield_next = NULL;
		c->yielded = false;
		struct ruda_session *s = c->session;
		struct ruda_turn turn = ruda__session_turn_begin(ctx);
		run_frames(c);
		if (!c->yielded && s->state == RUDA_SESSION_READY && !s->throttled)
			set_poll(c, reading_events(c));
		ruda__session_turn_done(ctx, turn);
	}
	if (!ctx->yielded)
		uv_idle_stop(idle);
}

/* End `c`'s turn with frames still buffered: it reads no more until the
 * next turn has run them. False when that cannot be arranged (no memory):
 * then it keeps its turn. */
static bool yield_turn(struct ruda_connection *c)
{
	struct ruda_session_context *ctx = c->session->ctx;
	if (c->yielded)
		return true;
	if (!ctx->yield_idle) {
		ctx->yield_idle = malloc(sizeof(*ctx->yield_idle));
		if (!ctx->yield_idle)
			return false;
		uv_idle_init(ctx->loop, ctx->yield_idle);
		ctx->yield_idle->data = ctx;
	}
	if (!ctx->yielded_tail)
		ctx->yielded_tail = &ctx->yielded;
	c->yielded = true;
	c->yield_next = NULL;
	ctx->turns_yielded++;
	*ctx->yielded_tail = c;
	ctx->yielded_tail = &c->yield_next;
	set_poll(c, (c->poll_events & UV_WRITABLE) | UV_DISCONNECT);
	uv_idle_start(ctx->yield_idle, on_yield_idle);
	return true;
}

static void unyield(struct ruda_connection *c)
{
	struct ruda_session_context *ctx = c->session->ctx;
	if (!c->yielded)
		return;
	struct ruda_connection **link = &ctx->yielded;
	while (*link != c)
		link = &(*link)->yield_next;
	*link = c->yield_next;
	if (ctx->yielded_tail == &c->yield_next)
		ctx->yielded_tail = link;
	c->yielded = false;
	if (!ctx->yielded)
		uv_idle_stop(ctx->yield_idle);
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
	unyield(c);
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
	if (ctx->yield_idle) {
		uv_idle_stop(ctx->yield_idle);
		uv_close((uv_handle_t *)ctx->yield_idle, ruda__session_free_closed);
		ctx->yield_idle = NULL;
	}
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
	if (!c->yielded)
		set_poll(c, reading_events(c));
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
		set_poll(c, s->throttled || c->yielded ? UV_DISCONNECT : UV_READABLE);
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
 * client may have, or another holds the device alone), up to the frame
 * budget: then the rest wait for the connection's next turn. */
static void process_frames(struct ruda_connection *c)
{
	struct ruda_session *s = c->session;
	uint32_t budget = frame_budget(s->ctx), ran = 0;
	struct ruda_frame frame;
	int r;
	while (ruda__session_takes_frame(s)) {
		if (budget && ran == budget && ruda__frame_reader_pending(&c->in) &&
		    yield_turn(c))
			break;
		ran++;
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
	run_frames(c);
}

static void run_frames(struct ruda_connection *c)
{
	struct ruda_session *s = c->session;
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
	    s->state != RUDA_SESSION_CLOSING) {
		struct ruda_session_context *ctx = s->ctx;
		struct ruda_turn turn = ruda__session_turn_begin(ctx);
		connection_read(c);
		ruda__session_turn_done(ctx, turn);
	}
}
