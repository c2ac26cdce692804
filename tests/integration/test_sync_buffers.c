/* SyncBuffers waits for the last work that used its buffers, not for the
 * whole stream: a buffer whose work is done does not wait for a long
 * kernel submitted after it. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* spin.comp's steps per lane: lavapipe (gallivm) ends a loop after 65535
 * iterations, so a long kernel is many workgroups */
#define STEPS 60000u

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_sync_buffers");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static double now_ms(void)
{
	return test_now() * 1e3;
}

/* spin.comp's lane values after `iterations` steps of x = x*a + c, by
 * squaring the step (an affine map mod 2^32) rather than taking it */
static void spin_reference(uint32_t *v, uint64_t iterations)
{
	uint32_t ma = 1, mc = 0;               /* the map so far: identity */
	uint32_t sa = 1664525u, sc = 1013904223u; /* the step, squared each bit */
	for (uint64_t n = iterations; n; n >>= 1) {
		if (n & 1) { /* map = step after map */
			mc = sa * mc + sc;
			ma = sa * ma;
		}
		sc = sa * sc + sc;
		sa = sa * sa;
	}
	for (uint32_t lane = 0; lane < 64; lane++)
		v[lane] = ma * (lane + 1) + mc;
}

/* Launch `groups` workgroups of spin over `a` (every one counted in `count`)
 * and return how long until sync_buffers(a) said it was done; `a` then
 * holds its result. */
static double spin_ms(ruda_kernel spin, ruda_handle a, ruda_handle count, uint32_t groups)
{
	uint32_t steps = STEPS;
	ruda_handle bind[] = {a, count};
	double start = now_ms();
	ck_assert_int_eq(ruda_client_launch(client, spin, (ruda_count){groups, 1, 1}, bind, 2,
					    &steps, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &a, 1), RUDA_OK);
	double ms = now_ms() - start;
	uint32_t lanes[64], expect[64];
	ck_assert_int_eq(ruda_client_read_one(client, a, lanes), RUDA_OK);
	spin_reference(expect, STEPS);
	ck_assert_mem_eq(lanes, expect, sizeof(lanes));
	return ms;
}

START_TEST(unrelated_buffer_does_not_wait_for_a_long_kernel)
{
	enum { B_BYTES = 1 << 16 };
	ruda_kernel spin = test_register(client, "tests/shaders/spin", 2, 4);
	ruda_handle a, count;
	uint32_t zero = 0, launched = 0;
	ck_assert_int_eq(ruda_client_empty(client, 64 * 4, &a), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, &zero, 4, &count), RUDA_OK);
	/* a kernel long enough that the wait for it shows */
	uint32_t groups = 16;
	for (;;) {
		double ms = spin_ms(spin, a, count, groups);
		launched += groups;
		if (ms >= 300 || groups >= 32768)
			break;
		groups *= 2;
	}

	/* B's work is submitted before the long kernel */
	uint8_t *b_bytes = malloc(B_BYTES), *back = malloc(B_BYTES);
	test_fill_random(b_bytes, B_BYTES, 42);
	ruda_handle b;
	ck_assert_int_eq(ruda_client_create(client, b_bytes, B_BYTES, &b), RUDA_OK);
	ck_assert_int_eq(ruda_client_flush(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &b, 1), RUDA_OK);

	uint32_t steps = STEPS;
	ruda_handle bind[] = {a, count};
	double start = now_ms();
	ck_assert_int_eq(ruda_client_launch(client, spin, (ruda_count){groups, 1, 1}, bind, 2,
					    &steps, 4),
			 RUDA_OK);
	launched += groups;
	ck_assert_int_eq(ruda_client_flush(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &b, 1), RUDA_OK);
	double b_ms = now_ms() - start;
	ck_assert_int_eq(ruda_client_sync_buffers(client, &a, 1), RUDA_OK);
	double a_ms = now_ms() - start;
	ck_assert_msg(b_ms < a_ms / 2,
		      "sync_buffers(B) took %.0f ms of the kernel's %.0f ms (%u workgroups)", b_ms,
		      a_ms, groups);

	/* the kernel is done when sync_buffers(A) says so, with its result */
	uint32_t lanes[64], expect[64];
	ck_assert_int_eq(ruda_client_read_one(client, a, lanes), RUDA_OK);
	spin_reference(expect, STEPS);
	ck_assert_mem_eq(lanes, expect, sizeof(lanes));
	uint32_t counted = 0;
	ck_assert_int_eq(ruda_client_read_one(client, count, &counted), RUDA_OK);
	ck_assert_uint_eq(counted, launched); /* every workgroup ran */
	ck_assert_int_eq(ruda_client_read_one(client, b, back), RUDA_OK);
	ck_assert_mem_eq(back, b_bytes, B_BYTES);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	free(b_bytes);
	free(back);
}
END_TEST

/* Work recorded on the stream and not submitted yet is submitted and waited
 * for; a buffer used on two streams waits for both. */
START_TEST(waits_for_recorded_work_on_every_stream)
{
	enum { N = 1 << 14 };
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(client, N * 4, &h), RUDA_OK);
	uint32_t push[2] = {0x1234567u, N};
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){4, 1, 1}, &h, 1, push, 8),
			 RUDA_OK);
	/* no flush: the launch may still be recorded when this arrives */
	ck_assert_int_eq(ruda_client_sync_buffers(client, &h, 1), RUDA_OK);
	uint32_t *back = malloc(N * 4);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(back[i], 0x1234567u);

	/* stream 1 fills part of it, then stream 0 the rest */
	ck_assert_int_eq(ruda_client_set_stream(client, 1), RUDA_OK);
	uint32_t push1[2] = {7, N / 2};
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){4, 1, 1}, &h, 1, push1, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_set_stream(client, 0), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &h, 1), RUDA_OK);
	ck_assert_int_eq(ruda_client_set_stream(client, 1), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(back[i], i < N / 2 ? 7u : 0x1234567u);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	free(back);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sync_buffers");
	TCase *tc = tcase_create("sync_buffers");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, unrelated_buffer_does_not_wait_for_a_long_kernel);
	tcase_add_test(tc, waits_for_recorded_work_on_every_stream);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
