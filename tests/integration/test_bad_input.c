/*
 * rudad against bad input: broken framing, undecodable or out-of-order
 * requests, bad handles, offsets and kernels, slow and greedy clients.
 * Each test checks the exact outcome (a reply with a given status, or a
 * disconnect) and then that a well-behaved client is unaffected.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../proto/arena_header.h"
#include "../proto/frame.h"
#include "harness.h"

#define ck_assert_status(expr, want)                                                          \
	do {                                                                                  \
		ruda_status got_ = (expr);                                                    \
		ruda_status want_ = (want);                                                   \
		ck_assert_msg(got_ == want_, "%s: got %s (%d), want %s (%d)", #expr,          \
			      ruda_strerror(got_), (int)got_, ruda_strerror(want_), (int)want_); \
	} while (0)

static struct test_daemon d;
static ruda_client *good; /* the well-behaved client, connected before the bad input */

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static void setup(void)
{
	test_daemon_start(&d, NULL);
	good = test_connect(&d, "good");
}

static void teardown(void)
{
	ruda_client_close(good);
	test_daemon_stop(&d);
}

/* ---- the well-behaved client ------------------------------------------ */

/* Upload known bytes and read them back, then run the fill kernel and read
 * its result: the whole path through the daemon and the device. */
static void assert_client_works(ruda_client *c)
{
	enum { BYTES = 4096, WORDS = 1024, VALUE = 0xc0ffee };
	static uint8_t in[BYTES], out[BYTES];
	test_fill_random(in, sizeof(in), 42);
	memset(out, 0, sizeof(out));
	ruda_handle h;
	ck_assert_status(ruda_client_create(c, in, sizeof(in), &h), RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h, out), RUDA_OK);
	ck_assert_msg(memcmp(in, out, sizeof(in)) == 0, "read back other bytes than written");

	ruda_kernel k = test_register(c, "fill", 1, 8);
	ruda_handle words;
	ck_assert_status(ruda_client_empty(c, WORDS * sizeof(uint32_t), &words), RUDA_OK);
	uint32_t push[2] = {VALUE, WORDS};
	ck_assert_status(ruda_client_launch(c, k, (ruda_count){WORDS / 256, 1, 1}, &words, 1, push,
					    sizeof(push)),
			 RUDA_OK);
	static uint32_t result[WORDS];
	memset(result, 0, sizeof(result));
	ck_assert_status(ruda_client_read_one(c, words, result), RUDA_OK);
	for (int i = 0; i < WORDS; i++)
		ck_assert_msg(result[i] == VALUE, "fill: word %d is 0x%x", i, result[i]);

	ck_assert_status(ruda_client_release(c, h), RUDA_OK);
	ck_assert_status(ruda_client_release(c, words), RUDA_OK);
	ck_assert_status(ruda_client_kernel_release(c, k), RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_OK);
}

/* The daemon is alive, the client connected before the bad input still
 * works, and so does one connecting now. */
static void assert_daemon_healthy(void)
{
	ck_assert_msg(test_daemon_alive(&d), "rudad died; see %s", d.log_path);
	assert_client_works(good);
	ruda_client *fresh = test_connect(&d, "fresh");
	assert_client_works(fresh);
	ruda_client_close(fresh);
}

/* The daemon's fd count once it has settled (after the good client's first
 * work, so that lazily opened driver fds are already counted). */
static int settled_fds(void)
{
	assert_client_works(good);
	/* and once spare arenas have been made again (rudad does that when
	 * idle): the same count twice, 200 ms apart */
	int n = test_count_fds(d.pid);
	for (int i = 0; i < 50; i++) {
		sleep_ms(200);
		int again = test_count_fds(d.pid);
		if (again == n)
			break;
		n = again;
	}
	return n;
}

/* Wait up to `ms` for the daemon to hold `baseline` fds again: closed
 * sessions are destroyed at the end of a loop iteration, not at once. */
static void assert_fds_return(int baseline, int ms)
{
	int n = -1;
	for (int waited = 0; waited <= ms; waited += 50) {
		n = test_count_fds(d.pid);
		if (n == baseline)
			return;
		sleep_ms(50);
	}
	ck_abort_msg("rudad holds %d fds, %d before: a leak", n, baseline);
}

/* ---- raw protocol helpers --------------------------------------------- */

static void send_all(int fd, const void *data, size_t len)
{
	const uint8_t *p = data;
	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
		ck_assert_msg(n > 0, "send: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* A frame header built by hand, so that tests can break rules that
 * ruda__frame_header_encode enforces. */
static void put_header(uint8_t out[RUDA_FRAME_HEADER_SIZE], uint32_t length, uint16_t nfds,
		       uint16_t reserved)
{
	out[0] = length & 0xff;
	out[1] = (length >> 8) & 0xff;
	out[2] = (length >> 16) & 0xff;
	out[3] = length >> 24;
	out[4] = nfds & 0xff;
	out[5] = nfds >> 8;
	out[6] = reserved & 0xff;
	out[7] = reserved >> 8;
}

/* Header and packed request in `out` (room for both); returns the frame's size. */
static size_t build_frame(uint8_t *out, size_t cap, const Ruda__Request *req, uint16_t reserved)
{
	size_t len = ruda__request__get_packed_size(req);
	ck_assert_uint_le(RUDA_FRAME_HEADER_SIZE + len, cap);
	put_header(out, (uint32_t)len, 0, reserved);
	ruda__request__pack(req, out + RUDA_FRAME_HEADER_SIZE);
	return RUDA_FRAME_HEADER_SIZE + len;
}

static void init_sync(Ruda__Request *req, Ruda__Sync *sync, uint64_t id)
{
	ruda__request__init(req);
	ruda__sync__init(sync);
	req->id = id;
	req->body_case = RUDA__REQUEST__BODY_SYNC;
	req->sync = sync;
}

static void send_hello(int fd, uint64_t id, uint32_t version, uint32_t device_index)
{
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = version;
	h.client_name = "bad input";
	h.device_index = device_index;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

static void send_sync(int fd, uint64_t id)
{
	Ruda__Request req;
	Ruda__Sync sync;
	init_sync(&req, &sync, id);
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

static void send_empty(int fd, uint64_t id, uint64_t handle, uint64_t size)
{
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = handle;
	e.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

static void send_write(int fd, uint64_t id, uint64_t handle, uint64_t offset,
		       uint64_t arena_offset, uint64_t size)
{
	Ruda__Write w = RUDA__WRITE__INIT;
	w.handle = handle;
	w.offset = offset;
	w.arena_offset = arena_offset;
	w.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_WRITE;
	req.write = &w;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

static void send_read(int fd, uint64_t id, uint64_t handle, uint64_t offset,
		      uint64_t arena_offset, uint64_t size)
{
	Ruda__Read r = RUDA__READ__INIT;
	r.handle = handle;
	r.offset = offset;
	r.arena_offset = arena_offset;
	r.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_READ;
	req.read = &r;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

static void send_check(int fd, uint64_t id, uint64_t handle)
{
	Ruda__Check c = RUDA__CHECK__INIT;
	c.n_handles = 1;
	c.handles = &handle;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_CHECK;
	req.check = &c;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
}

/* The next reply must answer `id` with `want`, its message containing
 * `needle` (when not NULL), and pass no fd. */
static void expect_reply(int fd, uint64_t id, ruda_status want, const char *needle)
{
	int passed = -1;
	Ruda__Reply *r = raw_recv_reply(fd, 10000, &passed);
	ck_assert_msg(r != NULL, "no reply to request %llu", (unsigned long long)id);
	ck_assert_uint_eq(r->id, id);
	ck_assert_status((ruda_status)r->status, want);
	const char *message = r->message ? r->message : "";
	ck_assert_msg(!needle || strstr(message, needle), "message \"%s\" lacks \"%s\"", message,
		      needle);
	ck_assert_int_lt(passed, 0);
	ruda__reply__free_unpacked(r, NULL);
}

/* The daemon must close the connection without answering anything. */
static void expect_disconnected(int fd)
{
	int passed = -1;
	Ruda__Reply *r = raw_recv_reply(fd, 5000, &passed);
	ck_assert_msg(r == NULL, "got a reply (request %llu, %s) instead of a disconnect",
		      (unsigned long long)r->id, ruda_strerror((ruda_status)r->status));
	ck_assert_int_lt(passed, 0);
	ck_assert_msg(raw_closed_by_peer(fd, 5000), "rudad kept the connection open");
	close(fd);
}

/* A connection that has completed the handshake. */
static int hello_connection(void)
{
	int fd = raw_connect(&d);
	ck_assert_status(raw_hello(fd, 1), RUDA_OK);
	return fd;
}

/* ---- framing ----------------------------------------------------------- */

START_TEST(test_truncated_frame)
{
	int before = settled_fds();
	uint8_t bytes[RUDA_FRAME_HEADER_SIZE + 10];
	put_header(bytes, 100, 0, 0);
	memset(bytes + RUDA_FRAME_HEADER_SIZE, 0x08, 10);
	/* before and after the handshake: the session has more to free after */
	for (int handshake = 0; handshake <= 1; handshake++) {
		int fd = handshake ? hello_connection() : raw_connect(&d);
		send_all(fd, bytes, sizeof(bytes));
		/* a partial frame is no violation: the rest may still come */
		ck_assert_msg(!raw_closed_by_peer(fd, 300), "dropped inside a frame");
		close(fd);
	}
	assert_fds_return(before, 5000);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_oversized_length)
{
	int fd = hello_connection();
	uint8_t header[RUDA_FRAME_HEADER_SIZE];
	put_header(header, RUDA_FRAME_MAX_PAYLOAD + 1, 0, 0);
	send_all(fd, header, sizeof(header));
	expect_disconnected(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_reserved_header_bytes)
{
	/* each reserved byte on its own, with a request that is fine otherwise */
	const uint16_t reserved[] = {0x0001, 0x8000};
	for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++) {
		int fd = hello_connection();
		Ruda__Request req;
		Ruda__Sync sync;
		init_sync(&req, &sync, 2);
		uint8_t frame[64];
		size_t len = build_frame(frame, sizeof(frame), &req, reserved[i]);
		send_all(fd, frame, len);
		expect_disconnected(fd);
	}
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_undecodable_payload)
{
	int fd = hello_connection();
	uint8_t frame[RUDA_FRAME_HEADER_SIZE + 16];
	put_header(frame, 16, 0, 0);
	/* a field key whose varint never ends */
	memset(frame + RUDA_FRAME_HEADER_SIZE, 0xff, 16);
	send_all(fd, frame, sizeof(frame));
	expect_disconnected(fd);
	assert_daemon_healthy();
}
END_TEST

/* ---- request order and types ------------------------------------------ */

START_TEST(test_first_request_not_hello)
{
	int fd = raw_connect(&d);
	send_sync(fd, 1);
	expect_disconnected(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_second_hello)
{
	int fd = hello_connection();
	send_hello(fd, 2, RUDA_PROTOCOL_VERSION, 0);
	expect_disconnected(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_unknown_request_type)
{
	int fd = hello_connection();
	/* Request{id = 7} plus field 99 (varint 1): what a newer client's
	 * request type looks like to this daemon, no body it knows */
	const uint8_t payload[] = {0x08, 0x07, 0x98, 0x06, 0x01};
	ck_assert_int_eq(raw_send_frame(fd, payload, sizeof(payload), NULL, 0), 0);
	expect_reply(fd, 7, RUDA_ERROR_UNSUPPORTED, NULL);
	/* answered, not dropped: the connection goes on */
	send_sync(fd, 8);
	expect_reply(fd, 8, RUDA_OK, NULL);
	close(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_wrong_protocol_version)
{
	int fd = raw_connect(&d);
	send_hello(fd, 1, RUDA_PROTOCOL_VERSION + 1, 0);
	expect_reply(fd, 1, RUDA_ERROR_VERSION, "protocol version");
	ck_assert_msg(raw_closed_by_peer(fd, 5000), "rudad kept the connection open");
	close(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_frame_with_fd)
{
	int before = settled_fds();
	int fd = hello_connection();
	int memfd = memfd_create("ruda-bad-input", MFD_CLOEXEC);
	ck_assert_int_ge(memfd, 0);
	Ruda__Request req;
	Ruda__Sync sync;
	init_sync(&req, &sync, 2);
	uint8_t payload[32];
	size_t len = ruda__request__get_packed_size(&req);
	ck_assert_uint_le(len, sizeof(payload));
	ruda__request__pack(&req, payload);
	ck_assert_int_eq(raw_send_frame(fd, payload, (uint32_t)len, &memfd, 1), 0);
	expect_disconnected(fd);
	close(memfd);
	/* the daemon's copy of the memfd is closed along with the session */
	assert_fds_return(before, 5000);
	assert_daemon_healthy();
}
END_TEST

/* An fd sent on a frame whose header announces none is claimed by no frame:
 * the daemon must not keep it (it would be handed to a later frame). */
START_TEST(test_unclaimed_fd)
{
	int before = settled_fds();
	int fd = hello_connection();
	int memfd = memfd_create("ruda-bad-input", MFD_CLOEXEC);
	ck_assert_int_ge(memfd, 0);
	Ruda__Request req;
	Ruda__Sync sync;
	init_sync(&req, &sync, 2);
	uint8_t frame[64];
	size_t len = build_frame(frame, sizeof(frame), &req, 0); /* header says 0 fds */
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int))];
	} control;
	memset(&control, 0, sizeof(control));
	struct iovec iov = {.iov_base = frame, .iov_len = len};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf,
			     .msg_controllen = sizeof(control.buf)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &memfd, sizeof(int));
	ck_assert_int_eq(sendmsg(fd, &msg, MSG_NOSIGNAL), (ssize_t)len);
	close(memfd);
	/* the Sync itself may be answered before the stray fd is noticed */
	ck_assert(raw_closed_by_peer(fd, 5000));
	close(fd);
	assert_fds_return(before, 5000);
	assert_daemon_healthy();
}
END_TEST

/* A frame within the size limit that would decode into far more memory
 * (32 000 empty bindings: 2 bytes each on the wire, ~56 in memory) is
 * refused, not decoded. */
START_TEST(test_decoding_bomb)
{
	int fd = hello_connection();
	static uint8_t payload[RUDA_FRAME_MAX_PAYLOAD];
	size_t n = 0;
	payload[n++] = 0x08; /* id = 5 */
	payload[n++] = 5;
	/* field 9 (launch), length-delimited: the Launch message follows */
	size_t inner = 32000 * 2;
	payload[n++] = 0x4a;
	size_t len = inner;
	while (len >= 0x80) {
		payload[n++] = (uint8_t)(len | 0x80);
		len >>= 7;
	}
	payload[n++] = (uint8_t)len;
	for (int i = 0; i < 32000; i++) {
		payload[n++] = 0x2a; /* bindings (field 5), empty */
		payload[n++] = 0x00;
	}
	ck_assert_uint_le(n, sizeof(payload));
	ck_assert_int_eq(raw_send_frame(fd, payload, (uint32_t)n, NULL, 0), 0);
	expect_disconnected(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_bad_device_index)
{
	int fd = raw_connect(&d);
	send_hello(fd, 1, RUDA_PROTOCOL_VERSION, 7);
	expect_reply(fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "no device 7");
	ck_assert_msg(raw_closed_by_peer(fd, 5000), "rudad kept the connection open");
	close(fd);
	assert_daemon_healthy();
}
END_TEST

/* ---- handles and ranges ------------------------------------------------ */

static void assert_last_error_mentions(ruda_client *c, const char *needle)
{
	char why[512];
	ck_assert_uint_gt(ruda_client_last_error(c, why, sizeof(why)), 0);
	ck_assert_msg(strstr(why, needle), "last error \"%s\" lacks \"%s\"", why, needle);
}

START_TEST(test_bad_handle)
{
	ruda_client *c = test_connect(&d, "bad handles");
	const ruda_handle bogus = {.id = 9999, .size = 16};
	uint8_t dst[16];

	/* a read answers at once and leaves the stream clean */
	ck_assert_status(ruda_client_read_one(c, bogus, dst), RUDA_ERROR_INVALID_HANDLE);
	assert_last_error_mentions(c, "9999");
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	/* release is fire-and-forget: the next sync reports it, once */
	ck_assert_status(ruda_client_release(c, bogus), RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_INVALID_HANDLE);
	assert_last_error_mentions(c, "9999");
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	/* a launch binding a bogus buffer, and one naming a bogus kernel */
	ruda_kernel k = test_register(c, "fill", 1, 8);
	uint32_t push[2] = {1, 4};
	ck_assert_status(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &bogus, 1, push, 8),
			 RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_INVALID_HANDLE);
	assert_last_error_mentions(c, "9999");
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	ruda_handle real;
	ck_assert_status(ruda_client_empty(c, 16, &real), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, 9999, (ruda_count){1, 1, 1}, &real, 1, push, 8),
			 RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_INVALID_HANDLE);
	assert_last_error_mentions(c, "kernel 9999");
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	assert_client_works(c);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_arena_offset_out_of_range)
{
	int fd = hello_connection();
	/* 1, 2: written from outside the arena's data space; 3: read into it */
	send_empty(fd, 2, 1, 64);
	send_empty(fd, 3, 2, 64);
	send_empty(fd, 4, 3, 64);

	send_write(fd, 5, 1, 0, 1ull << 40, 16);
	send_sync(fd, 6);
	expect_reply(fd, 6, RUDA_ERROR_OUT_OF_RANGE, "arena");

	/* the header page is the daemon's, not data space */
	send_write(fd, 7, 2, 0, 0, 16);
	send_sync(fd, 8);
	expect_reply(fd, 8, RUDA_ERROR_OUT_OF_RANGE, "arena");

	/* a read answers at once and marks nothing */
	send_read(fd, 9, 3, 0, 1ull << 40, 16);
	expect_reply(fd, 9, RUDA_ERROR_OUT_OF_RANGE, "arena");

	/* offset + size wrapping around 2^64 */
	send_read(fd, 10, 3, 0, UINT64_MAX - 7, 16);
	expect_reply(fd, 10, RUDA_ERROR_OUT_OF_RANGE, "arena");

	/* the failed writes are recorded against their buffers */
	send_check(fd, 11, 1);
	expect_reply(fd, 11, RUDA_ERROR_OUT_OF_RANGE, "arena");
	send_check(fd, 12, 2);
	expect_reply(fd, 12, RUDA_ERROR_OUT_OF_RANGE, "arena");
	send_check(fd, 13, 3);
	expect_reply(fd, 13, RUDA_OK, NULL);
	send_sync(fd, 14);
	expect_reply(fd, 14, RUDA_OK, NULL);
	close(fd);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_buffer_offset_out_of_range)
{
	/* libruda refuses a write past its handle without asking the daemon */
	ruda_client *c = test_connect(&d, "bad offsets");
	uint8_t bytes[16] = {0};
	ruda_handle h;
	ck_assert_status(ruda_client_empty(c, 16, &h), RUDA_OK);
	ck_assert_status(ruda_client_write(c, h, 8, bytes, sizeof(bytes)),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_status(ruda_client_write(c, h, UINT64_MAX - 7, bytes, sizeof(bytes)),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_status(ruda_client_sync(c), RUDA_OK);
	ruda_client_close(c);

	/* the daemon refuses the same write sent raw */
	int fd = hello_connection();
	send_empty(fd, 2, 1, 16);
	send_write(fd, 3, 1, 8, RUDA_ARENA_DATA_OFFSET, 16);
	send_sync(fd, 4);
	expect_reply(fd, 4, RUDA_ERROR_OUT_OF_RANGE, "outside its 16 bytes");
	send_check(fd, 5, 1);
	expect_reply(fd, 5, RUDA_ERROR_OUT_OF_RANGE, NULL);
	/* offset + size wrapping around 2^64 */
	send_empty(fd, 6, 2, 16);
	send_write(fd, 7, 2, UINT64_MAX - 7, RUDA_ARENA_DATA_OFFSET, 16);
	send_sync(fd, 8);
	expect_reply(fd, 8, RUDA_ERROR_OUT_OF_RANGE, "outside its 16 bytes");
	close(fd);
	assert_daemon_healthy();
}
END_TEST

/* ---- kernels and launches ---------------------------------------------- */

/* Register `size` bytes of `words`; returns the status, the reason in `why`. */
static ruda_status try_register(ruda_client *c, const uint32_t *words, size_t size,
				const char *entry, uint32_t bindings, uint32_t push, char *why,
				size_t why_len)
{
	ruda_kernel_desc desc = {
		.struct_size = sizeof(ruda_kernel_desc),
		.spirv = words,
		.spirv_size = size,
		.entry_point = entry,
		.binding_count = bindings,
		.push_constant_size = push,
	};
	ruda_kernel k = 0;
	ruda_status st = ruda_client_kernel_register(c, &desc, &k);
	ruda_client_last_error(c, why, why_len);
	return st;
}

/* Refused with `want`, for a reason that mentions `needle`. */
#define ck_assert_refused(st, why, want, needle)                                              \
	do {                                                                                  \
		ck_assert_msg((st) == (want), "got %s, want %s (reason: \"%s\")",           \
			      ruda_strerror(st), ruda_strerror(want), why);                   \
		ck_assert_msg(strstr(why, needle), "reason \"%s\" lacks \"%s\"", why, needle); \
	} while (0)

START_TEST(test_bad_kernels)
{
	ruda_client *c = test_connect(&d, "bad kernels");
	char why[512];
	size_t fill_size;
	uint32_t *fill = test_load_spirv("fill", &fill_size);

	uint32_t garbage[64];
	test_fill_random(garbage, sizeof(garbage), 13);
	garbage[0] = 0x12345678; /* certainly not the SPIR-V magic */
	ruda_status st = try_register(c, garbage, sizeof(garbage), "main", 1, 8, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_KERNEL, "SPIR-V");
	assert_client_works(c);

	st = try_register(c, fill, fill_size, "nope", 1, 8, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_KERNEL, "entry point");
	ck_assert_msg(strstr(why, "nope"), "reason \"%s\" does not name the entry point", why);
	assert_client_works(c);

	/* fill writes binding 0, so it needs at least one */
	st = try_register(c, fill, fill_size, "main", 0, 8, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_KERNEL, "binding 0");
	assert_client_works(c);

	st = try_register(c, fill, fill_size, "main", 1, 6, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_ARGUMENT, "push-constant size 6");
	assert_client_works(c);

	/* a size that is not whole words; the buffer itself is large enough */
	uint32_t *odd = calloc(1004 / 4, sizeof(uint32_t));
	ck_assert_ptr_nonnull(odd);
	memcpy(odd, fill, fill_size < 1004 ? fill_size : 1004);
	st = try_register(c, odd, 1001, "main", 1, 8, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_KERNEL, "1001");
	free(odd);
	assert_client_works(c);

	/* a valid header whose module is cut short fails validation */
	ck_assert_uint_gt(fill_size, 64);
	st = try_register(c, fill, 64, "main", 1, 8, why, sizeof(why));
	ck_assert_refused(st, why, RUDA_ERROR_INVALID_KERNEL, "SPIR-V");
	assert_client_works(c);

	free(fill);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

START_TEST(test_bad_launches)
{
	ruda_client *c = test_connect(&d, "bad launches");
	ruda_kernel k = test_register(c, "fill", 1, 8);
	uint32_t push[2] = {7, 256};

	/* fill declares one binding; two are refused and both buffers marked */
	ruda_handle two[2];
	ck_assert_status(ruda_client_empty(c, 1024, &two[0]), RUDA_OK);
	ck_assert_status(ruda_client_empty(c, 1024, &two[1]), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, two, 2, push, 8),
			 RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_mentions(c, "bindings");
	ck_assert_status(ruda_client_check(c, &two[0], 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_status(ruda_client_check(c, &two[1], 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	/* more workgroups than the device can dispatch */
	ruda_device_properties props = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_status(ruda_client_properties(c, &props), RUDA_OK);
	ck_assert_uint_lt(props.max_workgroup_count[0], UINT32_MAX);
	ruda_handle out;
	ck_assert_status(ruda_client_empty(c, 1024, &out), RUDA_OK);
	ruda_count count = {props.max_workgroup_count[0] + 1, 1, 1};
	ck_assert_status(ruda_client_launch(c, k, count, &out, 1, push, 8), RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_mentions(c, "exceeds");
	ck_assert_status(ruda_client_check(c, &out, 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_status(ruda_client_sync(c), RUDA_OK);

	assert_client_works(c);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

/* ---- slow, greedy and many clients ------------------------------------ */

START_TEST(test_byte_at_a_time)
{
	int fd = raw_connect(&d);
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "one byte at a time";
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	uint8_t frame[128];
	size_t len = build_frame(frame, sizeof(frame), &req, 0);
	/* one send per byte, spaced so that each arrives on its own */
	for (size_t i = 0; i < len; i++) {
		ck_assert_int_eq(send(fd, &frame[i], 1, MSG_NOSIGNAL), 1);
		sleep_ms(2);
	}
	int arena = -1;
	Ruda__Reply *r = raw_recv_reply(fd, 10000, &arena);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->id, 1);
	ck_assert_status((ruda_status)r->status, RUDA_OK);
	ck_assert_int_eq(r->body_case, RUDA__REPLY__BODY_HELLO);
	ck_assert_uint_eq(r->hello->protocol_version, RUDA_PROTOCOL_VERSION);
	ck_assert_int_ge(arena, 0);
	close(arena);
	ruda__reply__free_unpacked(r, NULL);

	/* and a request after it, the same way */
	Ruda__Sync sync;
	init_sync(&req, &sync, 2);
	len = build_frame(frame, sizeof(frame), &req, 0);
	for (size_t i = 0; i < len; i++) {
		ck_assert_int_eq(send(fd, &frame[i], 1, MSG_NOSIGNAL), 1);
		sleep_ms(2);
	}
	expect_reply(fd, 2, RUDA_OK, NULL);
	close(fd);
	assert_daemon_healthy();
}
END_TEST

/* Send a whole frame without blocking for long: 0 when sent, -ETIMEDOUT
 * when the socket stayed full for `ms`, or -errno. */
static int send_frame_patiently(int fd, const uint8_t *frame, size_t len, int ms)
{
	while (len) {
		ssize_t n = send(fd, frame, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			frame += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, ms) == 0)
			return -ETIMEDOUT;
	}
	return 0;
}

START_TEST(test_never_reads_replies)
{
	int before = settled_fds();
	long rss_before = test_rss_kib(d.pid);
	int fd = hello_connection();
	enum { MAX_REQUESTS = 200000 };
	int sent = 0, err = 0;
	while (sent < MAX_REQUESTS && !err) {
		Ruda__Request req;
		Ruda__Sync sync;
		init_sync(&req, &sync, 2 + (uint64_t)sent);
		uint8_t frame[32];
		size_t len = build_frame(frame, sizeof(frame), &req, 0);
		err = send_frame_patiently(fd, frame, len, 2000);
		if (!err)
			sent++;
	}
	/* the daemon must push back: stop reading us (the socket stays full)
	 * or drop us, rather than queue replies without limit */
	ck_assert_msg(err == -ETIMEDOUT || err == -EPIPE || err == -ECONNRESET,
		      "%d requests sent without back-pressure (last error %d)", sent, err);
	ck_assert_msg(test_daemon_alive(&d), "rudad died; see %s", d.log_path);
	long growth = test_rss_kib(d.pid) - rss_before;
	ck_assert_msg(growth < 200 * 1024, "rudad grew by %ld KiB", growth);
	/* the stalled client holds up nobody else */
	assert_daemon_healthy();
	close(fd);
	assert_fds_return(before, 5000);
}
END_TEST

START_TEST(test_thousands_of_connections)
{
	int before = settled_fds();
	enum { BATCHES = 20, BATCH = 100 };
	for (int b = 0; b < BATCHES; b++) {
		int fds[BATCH];
		for (int i = 0; i < BATCH; i++)
			fds[i] = raw_connect(&d);
		/* half of them get a session, arena and all */
		for (int i = 0; i < BATCH; i += 2)
			ck_assert_status(raw_hello(fds[i], 1), RUDA_OK);
		for (int i = 0; i < BATCH; i++)
			close(fds[i]);
	}
	assert_fds_return(before, 10000);
	assert_daemon_healthy();
}
END_TEST

static Suite *bad_input_suite(void)
{
	Suite *s = suite_create("bad_input");
	TCase *tc = tcase_create("bad_input");
	tcase_set_timeout(tc, 60);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_truncated_frame);
	tcase_add_test(tc, test_oversized_length);
	tcase_add_test(tc, test_reserved_header_bytes);
	tcase_add_test(tc, test_undecodable_payload);
	tcase_add_test(tc, test_first_request_not_hello);
	tcase_add_test(tc, test_second_hello);
	tcase_add_test(tc, test_unknown_request_type);
	tcase_add_test(tc, test_wrong_protocol_version);
	tcase_add_test(tc, test_frame_with_fd);
	tcase_add_test(tc, test_unclaimed_fd);
	tcase_add_test(tc, test_decoding_bomb);
	tcase_add_test(tc, test_bad_handle);
	tcase_add_test(tc, test_arena_offset_out_of_range);
	tcase_add_test(tc, test_buffer_offset_out_of_range);
	tcase_add_test(tc, test_bad_kernels);
	tcase_add_test(tc, test_bad_launches);
	tcase_add_test(tc, test_byte_at_a_time);
	tcase_add_test(tc, test_never_reads_replies);
	tcase_add_test(tc, test_thousands_of_connections);
	tcase_add_test(tc, test_bad_device_index);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	/* A failed assertion _exits the forked test before its teardown; make
	 * the daemon die with the test process instead of lingering. A wrapper
	 * already chosen (valgrind) is left alone. */
	if (!getenv("RUDA_TEST_WRAPPER") && access("/usr/bin/setpriv", X_OK) == 0)
		setenv("RUDA_TEST_WRAPPER", "/usr/bin/setpriv --pdeathsig KILL", 1);
	SRunner *sr = srunner_create(bad_input_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
