/*
 * Framing shared by rudad and libruda: a fixed 8-byte little-endian header
 * (u32 payload length, u16 fd count, u16 reserved = 0), then the payload.
 * File descriptors ride as SCM_RIGHTS on the frame's bytes.
 *
 * Functions return 0 or a positive count on success and a negative errno on
 * failure; -EPROTO means the peer broke the framing rules and must be
 * disconnected.
 */
#ifndef RUDA_FRAME_H
#define RUDA_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define RUDA_FRAME_HEADER_SIZE 8u
/* Control messages are small; bulk data goes through shared memory. */
#define RUDA_FRAME_MAX_PAYLOAD (64u * 1024u)
#define RUDA_FRAME_MAX_FDS 4u
/* fds received but not yet claimed by a frame. */
#define RUDA_FRAME_QUEUED_FDS 16u

struct ruda_frame_header {
	uint32_t length;
	uint16_t nfds;
};

void ruda__frame_header_encode(uint8_t out[RUDA_FRAME_HEADER_SIZE], uint32_t length,
			      uint16_t nfds);
/* 0 and *out filled; -EPROTO for a reserved field that is not 0, a length
 * over RUDA_FRAME_MAX_PAYLOAD or too many fds. */
int ruda__frame_header_decode(const uint8_t in[RUDA_FRAME_HEADER_SIZE],
			     struct ruda_frame_header *out);

/* A complete frame taken from a reader. */
struct ruda_frame {
	const uint8_t *payload; /* borrowed: valid until the reader is used again */
	uint32_t length;
	int fds[RUDA_FRAME_MAX_FDS]; /* owned by the caller once returned */
	uint16_t nfds;
};

struct ruda_frame_reader {
	uint8_t *buf; /* owned */
	size_t start, end, cap;
	int fds[RUDA_FRAME_QUEUED_FDS];
	size_t nfds;
};

int ruda__frame_reader_init(struct ruda_frame_reader *r);
/* Closes any fds still queued. */
void ruda__frame_reader_finish(struct ruda_frame_reader *r);
/*
 * One recvmsg on `sock` into the reader (`flags` e.g. MSG_DONTWAIT).
 * Returns bytes received, 0 at end of stream, -EAGAIN, -EPROTO (too many
 * fds, truncated control data) or another negative errno.
 */
ssize_t ruda__frame_reader_recv(struct ruda_frame_reader *r, int sock, int flags);
/* Feed bytes directly (tests, fuzzing). */
int ruda__frame_reader_feed(struct ruda_frame_reader *r, const void *data, size_t len);
/* 1 and *out filled when a whole frame is buffered, 0 when more bytes are
 * needed, -EPROTO on a bad header or a frame naming fds that never came. */
int ruda__frame_reader_next(struct ruda_frame_reader *r, struct ruda_frame *out);
/* Put back the frame without fds that ruda__frame_reader_next just
 * returned (the reader not used since): the next call returns it again. */
void ruda__frame_reader_unread(struct ruda_frame_reader *r, const struct ruda_frame *frame);
/* Bytes buffered but not yet returned as frames. */
size_t ruda__frame_reader_pending(const struct ruda_frame_reader *r);

struct ruda_frame_writer {
	uint8_t *buf; /* owned */
	size_t start, end, cap;
	/* frames that carry fds, in order: where each starts and its fds (owned) */
	struct ruda_frame_fdset {
		size_t pos;
		int fds[RUDA_FRAME_MAX_FDS];
		uint16_t nfds;
	} *fdsets;
	size_t nfdsets, fdsets_cap;
};

int ruda__frame_writer_init(struct ruda_frame_writer *w);
void ruda__frame_writer_finish(struct ruda_frame_writer *w);
/*
 * Queue one frame. The writer takes ownership of `fds` (closing them after
 * they are sent, or in finish). Returns 0, -EMSGSIZE or -ENOMEM; on failure
 * the fds are closed.
 */
int ruda__frame_writer_append(struct ruda_frame_writer *w, const void *payload, uint32_t length,
			     const int *fds, uint16_t nfds);
/* Reserve room for a frame of `length` bytes and return where its payload
 * goes; commit with ruda__frame_writer_commit. No fds. */
uint8_t *ruda__frame_writer_reserve(struct ruda_frame_writer *w, uint32_t length);
void ruda__frame_writer_commit(struct ruda_frame_writer *w, uint32_t length);
/* Bytes queued and not yet sent. */
size_t ruda__frame_writer_pending(const struct ruda_frame_writer *w);
/*
 * Send as much as the socket takes (`flags` e.g. MSG_DONTWAIT). Returns 0
 * when everything was sent, -EAGAIN when bytes remain, or a negative errno.
 */
int ruda__frame_writer_flush(struct ruda_frame_writer *w, int sock, int flags);

#endif
