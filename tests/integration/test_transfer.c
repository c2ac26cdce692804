/* Buffers up and down through a real rudad: byte-exact round trips. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_transfer");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* Upload `size` random bytes, read them back, compare. */
static void round_trip(size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size ? size : 1);
	uint8_t *back = malloc(size ? size : 1);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(back);
	test_fill_random(data, size, seed);
	memset(back, 0xa5, size);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, data, size, &h), RUDA_OK);
	ck_assert_uint_eq(h.size, size);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "%zu bytes differ after a round trip", size);
	ck_assert_int_eq(ruda_client_release(client, h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	free(data);
	free(back);
}

START_TEST(one_byte) { round_trip(1, 1); }
END_TEST

START_TEST(one_mib) { round_trip(1u << 20, 2); }
END_TEST

/* Larger than the arena's chunk: goes up and down in several pieces. */
START_TEST(sixty_four_mib) { round_trip(64u << 20, 3); }
END_TEST

START_TEST(odd_sizes)
{
	static const size_t sizes[] = {0, 3, 4095, 4097, (1u << 20) + 1};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		round_trip(sizes[i], 10 + i);
}
END_TEST

/* Many buffers alive at once keep their own contents. */
START_TEST(many_buffers)
{
	enum { N = 64, SIZE = 12345 };
	ruda_handle h[N];
	static uint8_t data[N][SIZE], back[SIZE];
	for (int i = 0; i < N; i++) {
		test_fill_random(data[i], SIZE, 100 + (uint64_t)i);
		ck_assert_int_eq(ruda_client_create(client, data[i], SIZE, &h[i]), RUDA_OK);
	}
	for (int i = N - 1; i >= 0; i--) {
		ck_assert_int_eq(ruda_client_read_one(client, h[i], back), RUDA_OK);
		ck_assert_int_eq(memcmp(data[i], back, SIZE), 0);
	}
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &s), RUDA_OK);
	ck_assert_uint_eq(s.session_buffers, N);
	ck_assert_uint_ge(s.session_bytes, (uint64_t)N * SIZE);
	for (int i = 0; i < N; i++)
		ruda_client_release(client, h[i]);
	ck_assert_int_eq(ruda_client_daemon_stats(client, &s), RUDA_OK);
	ck_assert_uint_eq(s.session_buffers, 0);
	ck_assert_uint_eq(s.session_bytes, 0);
}
END_TEST

/* Writes at offsets and reads of slices see exactly the bytes written. */
START_TEST(write_and_read_slices)
{
	enum { SIZE = 1 << 16 };
	static uint8_t ref[SIZE], back[SIZE];
	memset(ref, 0, SIZE);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, ref, SIZE, &h), RUDA_OK);
	uint8_t patch[1000];
	for (uint64_t off = 7; off + sizeof(patch) <= SIZE; off += 9973) {
		test_fill_random(patch, sizeof(patch), off);
		memcpy(ref + off, patch, sizeof(patch));
		ck_assert_int_eq(ruda_client_write(client, h, off, patch, sizeof(patch)), RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(ref, back, SIZE), 0);
	ruda_handle slice = {.id = h.id, .offset = 4099, .size = 777};
	ck_assert_int_eq(ruda_client_read_one(client, slice, back), RUDA_OK);
	ck_assert_int_eq(memcmp(ref + 4099, back, 777), 0);
}
END_TEST

/* Uploading far more than the arena holds in total recycles its space. */
START_TEST(more_than_the_arena)
{
	enum { SIZE = 8 << 20, ROUNDS = 24 }; /* 192 MiB through a 64 MiB arena */
	uint8_t *data = malloc(SIZE), *back = malloc(SIZE);
	ruda_handle h[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		test_fill_random(data, 4096, (uint64_t)i);
		memset(data + 4096, i, SIZE - 4096);
		ck_assert_int_eq(ruda_client_create(client, data, SIZE, &h[i]), RUDA_OK);
	}
	for (int i = 0; i < ROUNDS; i++) {
		test_fill_random(data, 4096, (uint64_t)i);
		memset(data + 4096, i, SIZE - 4096);
		ck_assert_int_eq(ruda_client_read_one(client, h[i], back), RUDA_OK);
		ck_assert_msg(memcmp(data, back, SIZE) == 0, "buffer %d differs", i);
		ruda_client_release(client, h[i]);
	}
	free(data);
	free(back);
}
END_TEST

/* read_async: the future polls, then waits with the read's status; several
 * reads in flight at once each get their own bytes. */
START_TEST(read_async_futures)
{
	enum { SIZE = (3u << 20) + 5, N = 3 };
	uint8_t *data[N], *back[N];
	ruda_handle h[N];
	ruda_future *f[N];
	for (int i = 0; i < N; i++) {
		data[i] = malloc(SIZE);
		back[i] = malloc(SIZE);
		test_fill_random(data[i], SIZE, 40 + (uint64_t)i);
		ck_assert_int_eq(ruda_client_create(client, data[i], SIZE, &h[i]), RUDA_OK);
	}
	for (int i = 0; i < N; i++) {
		void *dst = back[i];
		ck_assert_int_eq(ruda_client_read_async(client, &h[i], 1, &dst, &f[i]), RUDA_OK);
	}
	while (!ruda_future_poll(f[0]))
		usleep(100);
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(ruda_future_wait(f[i]), RUDA_OK);
		ck_assert_int_eq(memcmp(data[i], back[i], SIZE), 0);
		free(data[i]);
		free(back[i]);
	}
	/* a failed read reports through its future */
	void *dst = back;
	ruda_handle ghost = {.id = 999, .size = 16};
	ck_assert_int_eq(ruda_client_read_async(client, &ghost, 1, &dst, &f[0]), RUDA_OK);
	ck_assert_int_eq(ruda_future_wait(f[0]), RUDA_ERROR_INVALID_HANDLE);
	/* a tensor read, transposed, through its future */
	uint32_t m[6] = {1, 2, 3, 4, 5, 6}, t[6];
	ruda_handle mh;
	ck_assert_int_eq(ruda_client_create(client, m, sizeof(m), &mh), RUDA_OK);
	ruda_copy_desc d = {.struct_size = sizeof(ruda_copy_desc),
		.handle = mh, .rank = 2, .shape = {3, 2}, .strides = {1, 3},
			    .elem_size = 4};
	dst = t;
	ck_assert_int_eq(ruda_client_read_tensor_async(client, &d, 1, &dst, &f[0]), RUDA_OK);
	ck_assert_int_eq(ruda_future_wait(f[0]), RUDA_OK);
	const uint32_t expect[6] = {1, 4, 2, 5, 3, 6};
	ck_assert_int_eq(memcmp(t, expect, sizeof(t)), 0);
	ck_assert_int_eq(ruda_client_read_async(NULL, &mh, 1, &dst, &f[0]),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_future_wait(NULL), RUDA_ERROR_INVALID_ARGUMENT);
}
END_TEST

/* A future reads what the buffer held at the call (ErasedClient's order):
 * a write or a release made after read_async cannot reach it, twenty times
 * over (before, the write won 18-20 times in 20 and the release always
 * failed the read). */
START_TEST(read_async_is_ordered_at_the_call)
{
	enum { SIZE = 1u << 20, TRIALS = 20 };
	uint8_t *before = malloc(SIZE), *after = malloc(SIZE), *back = malloc(SIZE);
	test_fill_random(before, SIZE, 7);
	test_fill_random(after, SIZE, 8);
	for (int trial = 0; trial < TRIALS; trial++) {
		ruda_handle h;
		ruda_future *f;
		void *dst = back;
		ck_assert_int_eq(ruda_client_create(client, before, SIZE, &h), RUDA_OK);
		ck_assert_int_eq(ruda_client_read_async(client, &h, 1, &dst, &f), RUDA_OK);
		ck_assert_int_eq(ruda_client_write(client, h, 0, after, SIZE), RUDA_OK);
		ck_assert_int_eq(ruda_future_wait(f), RUDA_OK);
		ck_assert_msg(memcmp(back, before, SIZE) == 0, "trial %d read the later write",
			      trial);
		/* the later write did land, for reads made after it */
		ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
		ck_assert_int_eq(memcmp(back, after, SIZE), 0);

		/* dropping the handle right after the call is normal */
		ck_assert_int_eq(ruda_client_read_async(client, &h, 1, &dst, &f), RUDA_OK);
		ck_assert_int_eq(ruda_client_release(client, h), RUDA_OK);
		ck_assert_int_eq(ruda_future_wait(f), RUDA_OK);
		ck_assert_int_eq(memcmp(back, after, SIZE), 0);
	}
	/* the same for a tensor read: a transposed view, then overwritten */
	uint32_t m[6] = {1, 2, 3, 4, 5, 6}, zero[6] = {0}, t[6];
	ruda_handle mh;
	ck_assert_int_eq(ruda_client_create(client, m, sizeof(m), &mh), RUDA_OK);
	ruda_copy_desc d = {.struct_size = sizeof(ruda_copy_desc),
		.handle = mh, .rank = 2, .shape = {3, 2}, .strides = {1, 3},
			    .elem_size = 4};
	void *dst = t;
	ruda_future *f;
	ck_assert_int_eq(ruda_client_read_tensor_async(client, &d, 1, &dst, &f), RUDA_OK);
	ck_assert_int_eq(ruda_client_write(client, mh, 0, zero, sizeof(zero)), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(client, mh), RUDA_OK);
	ck_assert_int_eq(ruda_future_wait(f), RUDA_OK);
	const uint32_t expect[6] = {1, 4, 2, 5, 3, 6};
	ck_assert_int_eq(memcmp(t, expect, sizeof(t)), 0);
	/* the futures' copies were released: nothing is left behind */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0);
	free(before);
	free(after);
	free(back);
}
END_TEST

/* An allocation larger than the device allows is reported, not fatal. */
START_TEST(too_large)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(client, &p), RUDA_OK);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(client, p.max_buffer_size + 1, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_TOO_LARGE);
	uint8_t byte;
	ruda_handle one = {.id = h.id, .size = 1};
	ck_assert_int_eq(ruda_client_read_one(client, one, &byte), RUDA_ERROR_TOO_LARGE);
	ck_assert_int_eq(ruda_client_check(client, &h, 1), RUDA_ERROR_TOO_LARGE);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	round_trip(100, 7);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("transfer");
	TCase *tc = tcase_create("round trips");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, one_byte);
	tcase_add_test(tc, one_mib);
	tcase_add_test(tc, sixty_four_mib);
	tcase_add_test(tc, odd_sizes);
	tcase_add_test(tc, many_buffers);
	tcase_add_test(tc, write_and_read_slices);
	tcase_add_test(tc, more_than_the_arena);
	tcase_add_test(tc, read_async_futures);
	tcase_add_test(tc, read_async_is_ordered_at_the_call);
	tcase_add_test(tc, too_large);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
