/*
 * The plain path's chunked, pipelined transfers (libclient/transfer.h):
 * sizes that are not whole chunks, written and read back byte for byte;
 * a client killed in the middle of a large write leaves nothing behind; a
 * buffer released by another thread during a chunked read gives the exact
 * error and frees every chunk's arena space; a client beside them keeps
 * getting correct results.
 */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* The arena is 16 MiB (rudad's default); the client moves it in quarters. */
#define ARENA (16u << 20)
#define CHUNK ((ARENA - 4096u) / 4 / 64 * 64)

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

/* Create `size` bytes, overwrite a part at an odd offset, read it all back
 * (and a slice at an odd offset), compare with the CPU's copy. */
static void check_size(ruda_client *c, size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size), *back = malloc(size);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(back);
	test_fill_random(data, size, seed);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, size, &h), RUDA_OK);
	size_t at = size / 3 + 1, n = size - at - 5;
	test_fill_random(data + at, n, seed + 1);
	ck_assert_int_eq(ruda_client_write(c, h, at, data + at, n), RUDA_OK);
	memset(back, 0xa5, size);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "%zu bytes differ after a round trip", size);
	ruda_handle slice = {.id = h.id, .offset = 7, .size = size - 7 - 3};
	memset(back, 0xa5, size);
	ck_assert_int_eq(ruda_client_read_one(c, slice, back), RUDA_OK);
	ck_assert_msg(memcmp(data + 7, back, slice.size) == 0, "a slice of %zu bytes differs",
		      size);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	free(data);
	free(back);
}

START_TEST(sizes_that_are_not_whole_chunks)
{
	ruda_client *c = test_connect(&daemon_, "chunks");
	static const size_t sizes[] = {
		CHUNK - 1, CHUNK + 1, 3 * (size_t)CHUNK + 17,
		5 * (size_t)CHUNK - 7,        /* past the arena: the ring wraps */
		(40u << 20) + 13,             /* ten chunks and a bit */
	};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		check_size(c, sizes[i], 100 + i);
	ruda_client_close(c);
}
END_TEST

/* ---- a client killed in the middle of a large write ---------------------- */

#define KILLED_SIZE (96u << 20)

static int write_forever(ruda_client *c, void *arg)
{
	(void)arg;
	uint8_t *data = malloc(KILLED_SIZE);
	if (!data)
		return 1;
	test_fill_random(data, KILLED_SIZE, 7);
	ruda_handle h;
	if (ruda_client_create(c, data, KILLED_SIZE, &h) != RUDA_OK)
		return 1;
	test_fork_ready();
	for (;;)
		if (ruda_client_write(c, h, 0, data, KILLED_SIZE) != RUDA_OK)
			return 1;
}

/* A neighbour's round trip of `size` bytes comes back intact. */
static void neighbour_round_trip(ruda_client *c, size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size), *back = malloc(size);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(back);
	test_fill_random(data, size, seed);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, size, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "the neighbour's %zu bytes differ", size);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	free(data);
	free(back);
}

START_TEST(client_killed_midway_leaves_nothing)
{
	ruda_client *c = test_connect(&daemon_, "neighbour");
	/* a first session's arena and fds, so the baseline is the steady state */
	neighbour_round_trip(c, 1u << 20, 1);
	ruda_daemon_stats base = test_wait_for_stats(c, 1, 0);
	int fds = test_settled_fds(daemon_.pid);
	for (int round = 0; round < 3; round++) {
		pid_t child = test_fork_client(&daemon_, "killed", write_forever, NULL);
		/* somewhere in a write: the child writes in chunks continuously */
		struct timespec ts = {.tv_nsec = (20 + 40 * round) * 1000000L};
		nanosleep(&ts, NULL);
		/* beside it meanwhile */
		neighbour_round_trip(c, (8u << 20) + 3, 10 + (uint64_t)round);
		test_kill(child);
		ruda_daemon_stats s = test_wait_for_stats(c, 1, base.device_bytes);
		ck_assert_uint_eq(s.sessions, 1);
		ck_assert_uint_eq(s.device_bytes, base.device_bytes);
		ck_assert_uint_eq(s.device_buffers, base.device_buffers);
		neighbour_round_trip(c, 3 * (size_t)CHUNK + 5, 20 + (uint64_t)round);
	}
	int after = test_settled_fds(daemon_.pid);
	ck_assert_msg(after <= fds, "rudad holds %d fds after the killed clients, %d before",
		      after, fds);
	ruda_client_close(c);
}
END_TEST

/* ---- a buffer released by another thread during a chunked read ---------- */

#define READ_SIZE (128u << 20)
#define SENTINEL 0x5a

struct reader {
	ruda_client *c;
	ruda_handle h;
	uint8_t *dst;
	ruda_status status;
	char why[256];
};

static void *read_thread(void *arg)
{
	struct reader *r = arg;
	r->status = ruda_client_read_one(r->c, r->h, r->dst);
	ruda_client_last_error(r->c, r->why, sizeof(r->why));
	return NULL;
}

START_TEST(buffer_released_during_a_read)
{
	ruda_client *c = test_connect(&daemon_, "reader");
	ruda_client *other = test_connect(&daemon_, "beside");
	uint8_t *data = malloc(READ_SIZE), *dst = malloc(READ_SIZE);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(dst);
	test_fill_random(data, READ_SIZE, 5);
	data[0] = SENTINEL ^ 0xff; /* the first chunk is seen to land */
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, READ_SIZE, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(other, &base), RUDA_OK);
	memset(dst, SENTINEL, READ_SIZE);
	struct reader r = {.c = c, .h = h, .dst = dst};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, read_thread, &r), 0);
	/* once the first chunk is copied out, 31 more are still to be asked for */
	double deadline = test_now() + 30;
	while (*(volatile uint8_t *)dst == SENTINEL && test_now() < deadline)
		sched_yield();
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	pthread_join(t, NULL);
	ck_assert_msg(r.status == RUDA_ERROR_INVALID_HANDLE,
		      "a read of a buffer released midway returned %s (%s)",
		      ruda_strerror(r.status), r.why);
	ck_assert_msg(strstr(r.why, "buffer") != NULL, "the reason names no buffer: %s", r.why);
	/* what was read before the release is the buffer's */
	ck_assert_int_eq(memcmp(dst, data, CHUNK), 0);
	/* every chunk's arena space is free again: a transfer needing the
	 * whole ring goes through (a leaked region would block it forever) */
	neighbour_round_trip(c, 6 * (size_t)CHUNK + 1, 31);
	neighbour_round_trip(other, 2 * (size_t)CHUNK + 9, 32);
	ruda_daemon_stats s = test_wait_for_stats(other, 2, base.device_bytes - READ_SIZE);
	ck_assert_uint_eq(s.device_buffers, base.device_buffers - 1);
	free(data);
	free(dst);
	ruda_client_close(other);
	ruda_client_close(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("chunked_transfers");
	TCase *tc = tcase_create("chunked");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, sizes_that_are_not_whole_chunks);
	tcase_add_test(tc, client_killed_midway_leaves_nothing);
	tcase_add_test(tc, buffer_released_during_a_read);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
