#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void put_le32(uint8_t *p, uint32_t v)
{
	p[0] = v & 0xff;
	p[1] = (v >> 8) & 0xff;
	p[2] = (v >> 16) & 0xff;
	p[3] = (v >> 24) & 0xff;
}

static uint32_t get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

void ruda__frame_header_encode(uint8_t out[RUDA_FRAME_HEADER_SIZE], uint32_t length, uint16_t nfds)
{
	put_le32(out, length);
	out[4] = nfds & 0xff;
	out[5] = nfds >> 8;
	out[6] = 0;
	out[7] = 0;
}

int ruda__frame_header_decode(const uint8_t in[RUDA_FRAME_HEADER_SIZE], struct ruda_frame_header *out)
{
	out->length = get_le32(in);
	out->nfds = (uint16_t)(in[4] | in[5] << 8);
	if (in[6] || in[7])
		return -EPROTO;
	if (out->length > RUDA_FRAME_MAX_PAYLOAD || out->nfds > RUDA_FRAME_MAX_FDS)
		return -EPROTO;
	return 0;
}

static void close_fds(int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* ---- reader ----------------------------------------------------------- */

/* Room for one whole frame plus the next one's header, so a full frame
 * always fits once consumed bytes are moved out of the way. */
#define READER_CAP (RUDA_FRAME_HEADER_SIZE + RUDA_FRAME_MAX_PAYLOAD + RUDA_FRAME_HEADER_SIZE)

int ruda__frame_reader_init(struct ruda_frame_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(READER_CAP);
	if (!r->buf)
		return -ENOMEM;
	r->cap = READER_CAP;
	return 0;
}

void ruda__frame_reader_finish(struct ruda_frame_reader *r)
{
	close_fds(r->fds, r->nfds);
	r->nfds = 0;
	free(r->buf);
	r->buf = NULL;
}

size_t ruda__frame_reader_pending(const struct ruda_frame_reader *r)
{
	return r->end - r->start;
}

static void reader_compact(struct ruda_frame_reader *r)
{
	if (r->start == 0)
		return;
	memmove(r->buf, r->buf + r->start, r->end - r->start);
	r->end -= r->start;
	r->start = 0;
}

ssize_t ruda__frame_reader_recv(struct ruda_frame_reader *r, int sock, int flags)
{
	reader_compact(r);
	if (r->end == r->cap)
		return -ENOBUFS; /* caller must take frames out first */

	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * RUDA_FRAME_QUEUED_FDS)];
	} control;
	struct iovec iov = {.iov_base = r->buf + r->end, .iov_len = r->cap - r->end};
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.buf,
		.msg_controllen = sizeof(control.buf),
	};
	ssize_t n;
	do
		n = recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;

	int overflow = (msg.msg_flags & MSG_CTRUNC) != 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fds[RUDA_FRAME_QUEUED_FDS];
		memcpy(fds, CMSG_DATA(c), count * sizeof(int));
		for (size_t i = 0; i < count; i++) {
			if (r->nfds < RUDA_FRAME_QUEUED_FDS)
				r->fds[r->nfds++] = fds[i];
			else {
				close(fds[i]);
				overflow = 1;
			}
		}
	}
	r->end += (size_t)n;
	return overflow ? -EPROTO : n;
}

int ruda__frame_reader_feed(struct ruda_frame_reader *r, const void *data, size_t len)
{
	reader_compact(r);
	if (len > r->cap - r->end)
		return -ENOBUFS;
	memcpy(r->buf + r->end, data, len);
	r->end += len;
	return 0;
}

int ruda__frame_reader_next(struct ruda_frame_reader *r, struct ruda_frame *out)
{
	size_t avail = r->end - r->start;
	if (avail < RUDA_FRAME_HEADER_SIZE)
		return 0;
	struct ruda_frame_header h;
	if (ruda__frame_header_decode(r->buf + r->start, &h) < 0)
		return -EPROTO;
	if (avail < RUDA_FRAME_HEADER_SIZE + h.length)
		return 0;
	/* fds are sent with the frame's first bytes, so they are here by now */
	if (h.nfds > r->nfds)
		return -EPROTO;
	out->payload = r->buf + r->start + RUDA_FRAME_HEADER_SIZE;
	out->length = h.length;
	out->nfds = h.nfds;
	memcpy(out->fds, r->fds, h.nfds * sizeof(int));
	memmove(r->fds, r->fds + h.nfds, (r->nfds - h.nfds) * sizeof(int));
	r->nfds -= h.nfds;
	r->start += RUDA_FRAME_HEADER_SIZE + h.length;
	return 1;
}

void ruda__frame_reader_unread(struct ruda_frame_reader *r, const struct ruda_frame *frame)
{
	r->start -= RUDA_FRAME_HEADER_SIZE + frame->length;
}

/* ---- writer ----------------------------------------------------------- */

int ruda__frame_writer_init(struct ruda_frame_writer *w)
{
	memset(w, 0, sizeof(*w));
	return 0;
}

void ruda__frame_writer_finish(struct ruda_frame_writer *w)
{
	for (size_t i = 0; i < w->nfdsets; i++)
		close_fds(w->fdsets[i].fds, w->fdsets[i].nfds);
	free(w->fdsets);
	free(w->buf);
	memset(w, 0, sizeof(*w));
}

size_t ruda__frame_writer_pending(const struct ruda_frame_writer *w)
{
	return w->end - w->start;
}

/* Make room for `extra` more bytes at the end. */
static int writer_grow(struct ruda_frame_writer *w, size_t extra)
{
	if (w->start > 0 && w->start == w->end) {
		w->start = w->end = 0;
	}
	if (w->cap - w->end >= extra)
		return 0;
	if (w->start > 0) {
		size_t shift = w->start;
		memmove(w->buf, w->buf + shift, w->end - shift);
		w->end -= shift;
		w->start = 0;
		for (size_t i = 0; i < w->nfdsets; i++)
			w->fdsets[i].pos -= shift;
		if (w->cap - w->end >= extra)
			return 0;
	}
	size_t cap = w->cap ? w->cap : 4096;
	while (cap - w->end < extra)
		cap *= 2;
	uint8_t *buf = realloc(w->buf, cap);
	if (!buf)
		return -ENOMEM;
	w->buf = buf;
	w->cap = cap;
	return 0;
}

uint8_t *ruda__frame_writer_reserve(struct ruda_frame_writer *w, uint32_t length)
{
	if (length > RUDA_FRAME_MAX_PAYLOAD || writer_grow(w, RUDA_FRAME_HEADER_SIZE + length) < 0)
		return NULL;
	return w->buf + w->end + RUDA_FRAME_HEADER_SIZE;
}

void ruda__frame_writer_commit(struct ruda_frame_writer *w, uint32_t length)
{
	ruda__frame_header_encode(w->buf + w->end, length, 0);
	w->end += RUDA_FRAME_HEADER_SIZE + length;
}

int ruda__frame_writer_append(struct ruda_frame_writer *w, const void *payload, uint32_t length,
			     const int *fds, uint16_t nfds)
{
	int err = 0;
	if (length > RUDA_FRAME_MAX_PAYLOAD || nfds > RUDA_FRAME_MAX_FDS)
		err = -EMSGSIZE;
	else if (writer_grow(w, RUDA_FRAME_HEADER_SIZE + length) < 0)
		err = -ENOMEM;
	if (!err && nfds && w->nfdsets == w->fdsets_cap) {
		size_t cap = w->fdsets_cap ? w->fdsets_cap * 2 : 4;
		struct ruda_frame_fdset *s = realloc(w->fdsets, cap * sizeof(*s));
		if (!s)
			err = -ENOMEM;
		else {
			w->fdsets = s;
			w->fdsets_cap = cap;
		}
	}
	if (err) {
		close_fds((int *)fds, nfds);
		return err;
	}
	if (nfds) {
		struct ruda_frame_fdset *s = &w->fdsets[w->nfdsets++];
		s->pos = w->end;
		s->nfds = nfds;
		memcpy(s->fds, fds, nfds * sizeof(int));
	}
	ruda__frame_header_encode(w->buf + w->end, length, nfds);
	if (length)
		memcpy(w->buf + w->end + RUDA_FRAME_HEADER_SIZE, payload, length);
	w->end += RUDA_FRAME_HEADER_SIZE + length;
	return 0;
}

int ruda__frame_writer_flush(struct ruda_frame_writer *w, int sock, int flags)
{
	while (w->start < w->end) {
		size_t len = w->end - w->start;
		union {
			struct cmsghdr align;
			char buf[CMSG_SPACE(sizeof(int) * RUDA_FRAME_MAX_FDS)];
		} control;
		struct msghdr msg = {0};
		struct ruda_frame_fdset *set = w->nfdsets ? &w->fdsets[0] : NULL;
		if (set && set->pos == w->start) {
			/* fds go with the first byte of their frame */
			memset(&control, 0, sizeof(control));
			msg.msg_control = control.buf;
			msg.msg_controllen = CMSG_SPACE(sizeof(int) * set->nfds);
			struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
			c->cmsg_level = SOL_SOCKET;
			c->cmsg_type = SCM_RIGHTS;
			c->cmsg_len = CMSG_LEN(sizeof(int) * set->nfds);
			memcpy(CMSG_DATA(c), set->fds, sizeof(int) * set->nfds);
			if (w->nfdsets > 1)
				len = w->fdsets[1].pos - w->start;
		} else if (set) {
			/* stop before the next frame with fds */
			len = set->pos - w->start;
		}
		struct iovec iov = {.iov_base = w->buf + w->start, .iov_len = len};
		msg.msg_iov = &iov;
		msg.msg_iovlen = 1;
		ssize_t n;
		do
			n = sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
		while (n < 0 && errno == EINTR);
		if (n < 0)
			return errno == EWOULDBLOCK ? -EAGAIN : -errno;
		if (msg.msg_control) {
			/* the kernel holds its own references now */
			close_fds(set->fds, set->nfds);
			memmove(w->fdsets, w->fdsets + 1, (w->nfdsets - 1) * sizeof(*set));
			w->nfdsets--;
		}
		w->start += (size_t)n;
	}
	w->start = w->end = 0;
	return 0;
}
