/* Unit tests for proto/frame.c: header codec, reader, writer, fd passing. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

#include "../../proto/frame.h"

/* ---- helpers ------------------------------------------------------------ */

static void make_socketpair(int sv[2], int extra_type)
{
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | extra_type, 0, sv), 0);
}

static int make_memfd(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	return fd;
}

static int xdup(int fd)
{
	int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	ck_assert_int_ge(d, 0);
	return d;
}

static ino_t inode_of(int fd)
{
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	return st.st_ino;
}

static int fd_is_closed(int fd)
{
	errno = 0;
	return fcntl(fd, F_GETFD) == -1 && errno == EBADF;
}

/* A whole frame (header + payload) in a fresh buffer; *len gets its size. */
static uint8_t *build_frame(const void *payload, uint32_t length, uint16_t nfds, size_t *len)
{
	uint8_t *f = malloc(RUDA_FRAME_HEADER_SIZE + length);
	ck_assert_ptr_nonnull(f);
	ruda__frame_header_encode(f, length, nfds);
	if (length)
		memcpy(f + RUDA_FRAME_HEADER_SIZE, payload, length);
	*len = RUDA_FRAME_HEADER_SIZE + length;
	return f;
}

/* ---- header ------------------------------------------------------------- */

START_TEST(header_round_trip)
{
	const uint32_t lengths[] = {0, 1, 255, 256, 65535, RUDA_FRAME_MAX_PAYLOAD};
	for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++)
		for (uint16_t n = 0; n <= RUDA_FRAME_MAX_FDS; n++) {
			uint8_t b[RUDA_FRAME_HEADER_SIZE];
			memset(b, 0xAA, sizeof(b));
			ruda__frame_header_encode(b, lengths[i], n);
			struct ruda_frame_header h = {0};
			ck_assert_int_eq(ruda__frame_header_decode(b, &h), 0);
			ck_assert_uint_eq(h.length, lengths[i]);
			ck_assert_uint_eq(h.nfds, n);
		}
}
END_TEST

START_TEST(header_little_endian_layout)
{
	/* the wire format is fixed: check each byte, not just the round trip */
	uint8_t b[RUDA_FRAME_HEADER_SIZE];
	memset(b, 0xAA, sizeof(b));
	ruda__frame_header_encode(b, 0x04030201u, 0x0605u);
	const uint8_t want[RUDA_FRAME_HEADER_SIZE] = {1, 2, 3, 4, 5, 6, 0, 0};
	ck_assert_mem_eq(b, want, sizeof(want));

	/* and a decodable one read back from raw bytes */
	const uint8_t raw[RUDA_FRAME_HEADER_SIZE] = {0x34, 0x12, 0x00, 0x00, 0x03, 0x00, 0, 0};
	struct ruda_frame_header h;
	ck_assert_int_eq(ruda__frame_header_decode(raw, &h), 0);
	ck_assert_uint_eq(h.length, 0x1234);
	ck_assert_uint_eq(h.nfds, 3);
}
END_TEST

START_TEST(header_decode_rejects)
{
	uint8_t b[RUDA_FRAME_HEADER_SIZE];
	struct ruda_frame_header h;

	/* either reserved byte set */
	for (int k = 6; k < 8; k++) {
		ruda__frame_header_encode(b, 16, 0);
		b[k] = 1;
		ck_assert_int_eq(ruda__frame_header_decode(b, &h), -EPROTO);
	}
	/* one past the limits; the limits themselves are fine */
	ruda__frame_header_encode(b, RUDA_FRAME_MAX_PAYLOAD + 1, 0);
	ck_assert_int_eq(ruda__frame_header_decode(b, &h), -EPROTO);
	ruda__frame_header_encode(b, UINT32_MAX, 0);
	ck_assert_int_eq(ruda__frame_header_decode(b, &h), -EPROTO);
	ruda__frame_header_encode(b, 0, RUDA_FRAME_MAX_FDS + 1);
	ck_assert_int_eq(ruda__frame_header_decode(b, &h), -EPROTO);
	ruda__frame_header_encode(b, 0, UINT16_MAX);
	ck_assert_int_eq(ruda__frame_header_decode(b, &h), -EPROTO);
	ruda__frame_header_encode(b, RUDA_FRAME_MAX_PAYLOAD, RUDA_FRAME_MAX_FDS);
	ck_assert_int_eq(ruda__frame_header_decode(b, &h), 0);
}
END_TEST

/* ---- reader (fed directly) ---------------------------------------------- */

START_TEST(reader_byte_by_byte)
{
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	uint8_t payload[300];
	test_fill_random(payload, sizeof(payload), 1);
	size_t len;
	uint8_t *f = build_frame(payload, sizeof(payload), 0, &len);
	struct ruda_frame out;
	for (size_t i = 0; i < len; i++) {
		ck_assert_int_eq(ruda__frame_reader_feed(&r, &f[i], 1), 0);
		int rc = ruda__frame_reader_next(&r, &out);
		if (i + 1 < len) {
			ck_assert_msg(rc == 0, "frame reported complete after %zu of %zu bytes", i + 1,
				      len);
			ck_assert_uint_eq(ruda__frame_reader_pending(&r), i + 1);
		} else {
			ck_assert_int_eq(rc, 1);
		}
	}
	ck_assert_uint_eq(out.length, sizeof(payload));
	ck_assert_uint_eq(out.nfds, 0);
	ck_assert_mem_eq(out.payload, payload, sizeof(payload));
	ck_assert_uint_eq(ruda__frame_reader_pending(&r), 0);
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 0);
	free(f);
	ruda__frame_reader_finish(&r);
}
END_TEST

START_TEST(reader_two_frames_one_feed)
{
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	const char a[] = "first frame", b[] = "second";
	uint8_t buf[64];
	size_t n = 0;
	ruda__frame_header_encode(buf + n, sizeof(a), 0);
	memcpy(buf + n + RUDA_FRAME_HEADER_SIZE, a, sizeof(a));
	n += RUDA_FRAME_HEADER_SIZE + sizeof(a);
	ruda__frame_header_encode(buf + n, sizeof(b), 0);
	memcpy(buf + n + RUDA_FRAME_HEADER_SIZE, b, sizeof(b));
	n += RUDA_FRAME_HEADER_SIZE + sizeof(b);
	/* plus an empty frame: zero-length payloads are legal */
	ruda__frame_header_encode(buf + n, 0, 0);
	n += RUDA_FRAME_HEADER_SIZE;
	ck_assert_int_eq(ruda__frame_reader_feed(&r, buf, n), 0);

	struct ruda_frame out;
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 1);
	ck_assert_uint_eq(out.length, sizeof(a));
	ck_assert_mem_eq(out.payload, a, sizeof(a));
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 1);
	ck_assert_uint_eq(out.length, sizeof(b));
	ck_assert_mem_eq(out.payload, b, sizeof(b));
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 1);
	ck_assert_uint_eq(out.length, 0);
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 0);
	ck_assert_uint_eq(ruda__frame_reader_pending(&r), 0);
	ruda__frame_reader_finish(&r);
}
END_TEST

START_TEST(reader_large_frames_in_chunks)
{
	/* small, maximal, small: the buffer must compact to fit the big one */
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	const uint32_t lens[] = {100, RUDA_FRAME_MAX_PAYLOAD, 7, RUDA_FRAME_MAX_PAYLOAD - 1, 0};
	const size_t nframes = sizeof(lens) / sizeof(lens[0]);
	size_t total = 0;
	for (size_t i = 0; i < nframes; i++)
		total += RUDA_FRAME_HEADER_SIZE + lens[i];
	uint8_t *stream = malloc(total), *p = stream;
	ck_assert_ptr_nonnull(stream);
	for (size_t i = 0; i < nframes; i++) {
		ruda__frame_header_encode(p, lens[i], 0);
		test_fill_random(p + RUDA_FRAME_HEADER_SIZE, lens[i], 100 + i);
		p += RUDA_FRAME_HEADER_SIZE + lens[i];
	}
	uint8_t *expect = malloc(RUDA_FRAME_MAX_PAYLOAD);
	ck_assert_ptr_nonnull(expect);
	size_t fed = 0, got = 0;
	while (fed < total) {
		/* never more than the reader has room for, as recv would */
		size_t room = r.cap - ruda__frame_reader_pending(&r);
		size_t chunk = total - fed < 7777 ? total - fed : 7777;
		if (chunk > room)
			chunk = room;
		ck_assert_uint_gt(chunk, 0);
		ck_assert_int_eq(ruda__frame_reader_feed(&r, stream + fed, chunk), 0);
		fed += chunk;
		struct ruda_frame out;
		int rc;
		while ((rc = ruda__frame_reader_next(&r, &out)) == 1) {
			ck_assert_uint_lt(got, nframes);
			ck_assert_uint_eq(out.length, lens[got]);
			test_fill_random(expect, lens[got], 100 + got);
			ck_assert_int_eq(memcmp(out.payload, expect, lens[got]), 0);
			got++;
		}
		ck_assert_int_eq(rc, 0);
	}
	ck_assert_uint_eq(got, nframes);
	free(expect);
	free(stream);
	ruda__frame_reader_finish(&r);
}
END_TEST

START_TEST(reader_missing_fd)
{
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	size_t len;
	uint8_t *f = build_frame("abcd", 4, 1, &len);
	/* header only: still waiting for bytes, no verdict yet */
	ck_assert_int_eq(ruda__frame_reader_feed(&r, f, RUDA_FRAME_HEADER_SIZE), 0);
	struct ruda_frame out;
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), 0);
	/* complete, but the announced fd never came */
	ck_assert_int_eq(ruda__frame_reader_feed(&r, f + RUDA_FRAME_HEADER_SIZE,
						 len - RUDA_FRAME_HEADER_SIZE),
			 0);
	ck_assert_int_eq(ruda__frame_reader_next(&r, &out), -EPROTO);
	free(f);
	ruda__frame_reader_finish(&r);
}
END_TEST

START_TEST(reader_bad_header)
{
	const uint8_t reserved[RUDA_FRAME_HEADER_SIZE] = {0, 0, 0, 0, 0, 0, 0, 1};
	uint8_t too_long[RUDA_FRAME_HEADER_SIZE];
	ruda__frame_header_encode(too_long, RUDA_FRAME_MAX_PAYLOAD + 1, 0);
	const uint8_t *bad[] = {reserved, too_long};
	for (size_t i = 0; i < 2; i++) {
		struct ruda_frame_reader r;
		ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
		ck_assert_int_eq(ruda__frame_reader_feed(&r, bad[i], RUDA_FRAME_HEADER_SIZE), 0);
		struct ruda_frame out;
		ck_assert_int_eq(ruda__frame_reader_next(&r, &out), -EPROTO);
		ruda__frame_reader_finish(&r);
	}
}
END_TEST

/* ---- writer -> socket -> reader ----------------------------------------- */

/* Receive until `want` frames came (blocking socket); frames go to `out`
 * with their payloads copied. */
struct got_frame {
	uint8_t *payload;
	uint32_t length;
	int fds[RUDA_FRAME_MAX_FDS];
	uint16_t nfds;
};

static void recv_frames(struct ruda_frame_reader *r, int sock, struct got_frame *out, size_t want)
{
	size_t got = 0;
	while (got < want) {
		ssize_t n = ruda__frame_reader_recv(r, sock, 0);
		ck_assert_int_gt(n, 0);
		struct ruda_frame f;
		int rc;
		while ((rc = ruda__frame_reader_next(r, &f)) == 1) {
			ck_assert_uint_lt(got, want);
			out[got].payload = malloc(f.length ? f.length : 1);
			ck_assert_ptr_nonnull(out[got].payload);
			memcpy(out[got].payload, f.payload, f.length);
			out[got].length = f.length;
			out[got].nfds = f.nfds;
			memcpy(out[got].fds, f.fds, sizeof(f.fds));
			got++;
		}
		ck_assert_int_eq(rc, 0);
	}
}

START_TEST(writer_to_reader_with_fds)
{
	int before = test_count_fds(0);
	int sv[2];
	make_socketpair(sv, 0);
	int mem_a = make_memfd("frame-a"), mem_b = make_memfd("frame-b");

	struct ruda_frame_writer w;
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_writer_init(&w), 0);
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);

	uint8_t p1[512], p3[1000];
	test_fill_random(p1, sizeof(p1), 11);
	test_fill_random(p3, sizeof(p3), 13);
	ck_assert_int_eq(ruda__frame_writer_append(&w, "first", 5, NULL, 0), 0);
	int f1[1] = {xdup(mem_a)};
	ck_assert_int_eq(ruda__frame_writer_append(&w, p1, sizeof(p1), f1, 1), 0);
	ck_assert_int_eq(ruda__frame_writer_append(&w, NULL, 0, NULL, 0), 0);
	/* the reserve/commit path writes the same framing */
	uint8_t *slot = ruda__frame_writer_reserve(&w, sizeof(p3));
	ck_assert_ptr_nonnull(slot);
	memcpy(slot, p3, sizeof(p3));
	ruda__frame_writer_commit(&w, sizeof(p3));
	/* two fds, in an order the receiver must keep */
	int f4[2] = {xdup(mem_b), xdup(mem_a)};
	ck_assert_int_eq(ruda__frame_writer_append(&w, "last", 4, f4, 2), 0);
	size_t want_bytes = 5 * RUDA_FRAME_HEADER_SIZE + 5 + sizeof(p1) + sizeof(p3) + 4;
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), want_bytes);

	ck_assert_int_eq(ruda__frame_writer_flush(&w, sv[0], 0), 0);
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), 0);

	struct got_frame g[5];
	recv_frames(&r, sv[1], g, 5);
	ck_assert_uint_eq(ruda__frame_reader_pending(&r), 0);

	ck_assert_uint_eq(g[0].length, 5);
	ck_assert_mem_eq(g[0].payload, "first", 5);
	ck_assert_uint_eq(g[0].nfds, 0);
	ck_assert_uint_eq(g[1].length, sizeof(p1));
	ck_assert_mem_eq(g[1].payload, p1, sizeof(p1));
	ck_assert_uint_eq(g[1].nfds, 1);
	ck_assert_uint_eq(g[2].length, 0);
	ck_assert_uint_eq(g[2].nfds, 0);
	ck_assert_uint_eq(g[3].length, sizeof(p3));
	ck_assert_mem_eq(g[3].payload, p3, sizeof(p3));
	ck_assert_uint_eq(g[3].nfds, 0);
	ck_assert_uint_eq(g[4].length, 4);
	ck_assert_mem_eq(g[4].payload, "last", 4);
	ck_assert_uint_eq(g[4].nfds, 2);

	/* the passed fd is the same open file: same inode, shared contents */
	int rx = g[1].fds[0];
	ck_assert_int_ne(rx, mem_a);
	ck_assert_uint_eq(inode_of(rx), inode_of(mem_a));
	ck_assert_int_eq(pwrite(rx, "through the socket", 18, 0), 18);
	char back[18];
	ck_assert_int_eq(pread(mem_a, back, sizeof(back), 0), 18);
	ck_assert_mem_eq(back, "through the socket", 18);
	ck_assert_uint_eq(inode_of(g[4].fds[0]), inode_of(mem_b));
	ck_assert_uint_eq(inode_of(g[4].fds[1]), inode_of(mem_a));
	ck_assert_uint_ne(inode_of(mem_a), inode_of(mem_b));

	for (int i = 0; i < 5; i++) {
		for (int k = 0; k < g[i].nfds; k++)
			close(g[i].fds[k]);
		free(g[i].payload);
	}
	ruda__frame_writer_finish(&w);
	ruda__frame_reader_finish(&r);
	close(mem_a);
	close(mem_b);
	close(sv[0]);
	close(sv[1]);
	/* the writer closed its copies once sent */
	ck_assert_int_eq(test_count_fds(0), before);
}
END_TEST

#define BP_FRAMES 48u
#define BP_LEN 60000u

/* Drain what the peer has, checking frames against what was queued. */
static void bp_drain(struct ruda_frame_reader *r, int sock, size_t *got, uint8_t *expect,
		     ino_t mem_ino)
{
	for (;;) {
		ssize_t n = ruda__frame_reader_recv(r, sock, MSG_DONTWAIT);
		if (n == -EAGAIN)
			return;
		ck_assert_int_gt(n, 0);
		struct ruda_frame f;
		int rc;
		while ((rc = ruda__frame_reader_next(r, &f)) == 1) {
			ck_assert_uint_lt(*got, BP_FRAMES);
			uint32_t len = BP_LEN - (uint32_t)*got; /* distinct lengths */
			ck_assert_uint_eq(f.length, len);
			test_fill_random(expect, len, 1000 + *got);
			ck_assert_msg(memcmp(f.payload, expect, len) == 0, "frame %zu corrupted",
				      *got);
			if (*got % 8 == 3) {
				ck_assert_uint_eq(f.nfds, 1);
				ck_assert_uint_eq(inode_of(f.fds[0]), mem_ino);
				close(f.fds[0]);
			} else {
				ck_assert_uint_eq(f.nfds, 0);
			}
			(*got)++;
		}
		ck_assert_int_eq(rc, 0);
	}
}

START_TEST(writer_backpressure)
{
	int before = test_count_fds(0);
	int sv[2];
	make_socketpair(sv, SOCK_NONBLOCK);
	/* a small send buffer: many partial sends, whatever the system default */
	int sndbuf = 32 * 1024;
	ck_assert_int_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf)), 0);
	int mem = make_memfd("bp");
	ino_t mem_ino = inode_of(mem);

	struct ruda_frame_writer w;
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_writer_init(&w), 0);
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	uint8_t *buf = malloc(BP_LEN), *expect = malloc(BP_LEN);
	ck_assert_ptr_nonnull(buf);
	ck_assert_ptr_nonnull(expect);
	/* ~2.8 MB, far beyond a Unix socket's buffer; some frames carry fds so
	 * partial sends cross fd boundaries too */
	for (uint32_t i = 0; i < BP_FRAMES; i++) {
		test_fill_random(buf, BP_LEN - i, 1000 + i);
		int fd = xdup(mem);
		int rc = ruda__frame_writer_append(&w, buf, BP_LEN - i, &fd, i % 8 == 3 ? 1 : 0);
		ck_assert_int_eq(rc, 0);
		if (i % 8 != 3)
			close(fd);
	}

	int rc = ruda__frame_writer_flush(&w, sv[0], MSG_DONTWAIT);
	ck_assert_int_eq(rc, -EAGAIN);
	size_t left = ruda__frame_writer_pending(&w);
	ck_assert_uint_gt(left, 0);
	/* nobody read: another flush makes no progress and loses nothing */
	ck_assert_int_eq(ruda__frame_writer_flush(&w, sv[0], MSG_DONTWAIT), -EAGAIN);
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), left);

	size_t got = 0;
	int rounds = 0;
	while (rc == -EAGAIN) {
		ck_assert_int_lt(++rounds, 100000);
		bp_drain(&r, sv[1], &got, expect, mem_ino);
		rc = ruda__frame_writer_flush(&w, sv[0], MSG_DONTWAIT);
		ck_assert_msg(rc == 0 || rc == -EAGAIN, "flush: %d", rc);
	}
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), 0);
	bp_drain(&r, sv[1], &got, expect, mem_ino);
	ck_assert_uint_eq(got, BP_FRAMES);
	ck_assert_uint_eq(ruda__frame_reader_pending(&r), 0);

	free(buf);
	free(expect);
	ruda__frame_writer_finish(&w);
	ruda__frame_reader_finish(&r);
	close(mem);
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(test_count_fds(0), before);
}
END_TEST

START_TEST(writer_append_too_large)
{
	int before = test_count_fds(0);
	struct ruda_frame_writer w;
	ck_assert_int_eq(ruda__frame_writer_init(&w), 0);
	uint8_t *big = calloc(1, RUDA_FRAME_MAX_PAYLOAD + 1);
	ck_assert_ptr_nonnull(big);

	/* too long: refused, and the fds it was given are closed */
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	ck_assert_int_eq(ruda__frame_writer_append(&w, big, RUDA_FRAME_MAX_PAYLOAD + 1, p, 2),
			 -EMSGSIZE);
	ck_assert(fd_is_closed(p[0]));
	ck_assert(fd_is_closed(p[1]));
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), 0);

	/* too many fds: same */
	int fds[RUDA_FRAME_MAX_FDS + 1];
	int mem = make_memfd("many");
	for (size_t i = 0; i <= RUDA_FRAME_MAX_FDS; i++)
		fds[i] = xdup(mem);
	close(mem);
	ck_assert_int_eq(ruda__frame_writer_append(&w, "x", 1, fds, RUDA_FRAME_MAX_FDS + 1),
			 -EMSGSIZE);
	for (size_t i = 0; i <= RUDA_FRAME_MAX_FDS; i++)
		ck_assert_msg(fd_is_closed(fds[i]), "fd %d left open", fds[i]);
	ck_assert_uint_eq(ruda__frame_writer_pending(&w), 0);

	/* exactly the maximum is fine */
	ck_assert_int_eq(ruda__frame_writer_append(&w, big, RUDA_FRAME_MAX_PAYLOAD, NULL, 0), 0);
	ck_assert_uint_eq(ruda__frame_writer_pending(&w),
			  RUDA_FRAME_HEADER_SIZE + RUDA_FRAME_MAX_PAYLOAD);
	ck_assert_ptr_null(ruda__frame_writer_reserve(&w, RUDA_FRAME_MAX_PAYLOAD + 1));

	free(big);
	ruda__frame_writer_finish(&w);
	ck_assert_int_eq(test_count_fds(0), before);
}
END_TEST

START_TEST(writer_finish_closes_unsent)
{
	int before = test_count_fds(0);
	struct ruda_frame_writer w;
	ck_assert_int_eq(ruda__frame_writer_init(&w), 0);
	int p[2];
	ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
	int m = make_memfd("unsent");
	ck_assert_int_eq(ruda__frame_writer_append(&w, "a", 1, p, 2), 0);
	ck_assert_int_eq(ruda__frame_writer_append(&w, "b", 1, &m, 1), 0);
	/* owned by the writer now, still open until sent or finished */
	ck_assert(!fd_is_closed(p[0]));
	ck_assert(!fd_is_closed(m));
	ruda__frame_writer_finish(&w);
	ck_assert(fd_is_closed(p[0]));
	ck_assert(fd_is_closed(p[1]));
	ck_assert(fd_is_closed(m));
	ck_assert_int_eq(test_count_fds(0), before);
}
END_TEST

START_TEST(reader_finish_closes_queued)
{
	int before = test_count_fds(0);
	int sv[2];
	make_socketpair(sv, 0);
	struct ruda_frame_writer w;
	struct ruda_frame_reader r;
	ck_assert_int_eq(ruda__frame_writer_init(&w), 0);
	ck_assert_int_eq(ruda__frame_reader_init(&r), 0);
	int fds[2] = {make_memfd("q1"), make_memfd("q2")};
	ck_assert_int_eq(ruda__frame_writer_append(&w, "xy", 2, fds, 2), 0);
	ck_assert_int_eq(ruda__frame_writer_flush(&w, sv[0], 0), 0);
	/* received but never taken as a frame: the reader holds them */
	ck_assert_int_gt(ruda__frame_reader_recv(&r, sv[1], 0), 0);
	ck_assert_uint_eq(r.nfds, 2);
	int q0 = r.fds[0], q1 = r.fds[1];
	ck_assert(!fd_is_closed(q0));
	ck_assert(!fd_is_closed(q1));
	ruda__frame_reader_finish(&r);
	ck_assert(fd_is_closed(q0));
	ck_assert(fd_is_closed(q1));
	ruda__frame_writer_finish(&w);
	close(sv[0]);
	close(sv[1]);
	ck_assert_int_eq(test_count_fds(0), before);
}
END_TEST

static Suite *frame_suite(void)
{
	Suite *s = suite_create("frame");
	TCase *h = tcase_create("header");
	tcase_add_test(h, header_round_trip);
	tcase_add_test(h, header_little_endian_layout);
	tcase_add_test(h, header_decode_rejects);
	suite_add_tcase(s, h);

	TCase *rd = tcase_create("reader");
	tcase_add_test(rd, reader_byte_by_byte);
	tcase_add_test(rd, reader_two_frames_one_feed);
	tcase_add_test(rd, reader_large_frames_in_chunks);
	tcase_add_test(rd, reader_missing_fd);
	tcase_add_test(rd, reader_bad_header);
	suite_add_tcase(s, rd);

	TCase *wr = tcase_create("writer");
	tcase_set_timeout(wr, 30);
	tcase_add_test(wr, writer_to_reader_with_fds);
	tcase_add_test(wr, writer_backpressure);
	tcase_add_test(wr, writer_append_too_large);
	tcase_add_test(wr, writer_finish_closes_unsent);
	tcase_add_test(wr, reader_finish_closes_queued);
	suite_add_tcase(s, wr);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(frame_suite());
	/* CK_FORK by default (each test in its own process); CK_FORK=no for debugging */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
