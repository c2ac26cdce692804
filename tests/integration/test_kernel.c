/* Kernels through a real rudad, checked against a CPU reference. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_kernel");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static void random_floats(float *v, size_t n, uint64_t seed)
{
	uint32_t *bits = malloc(n * sizeof(uint32_t));
	test_fill_random(bits, n * sizeof(uint32_t), seed);
	for (size_t i = 0; i < n; i++)
		v[i] = (float)(bits[i] % 2000001) / 1000.0f - 1000.0f;
	free(bits);
}

START_TEST(add_matches_cpu)
{
	enum { N = 1000003 }; /* not a multiple of the workgroup */
	float *a = malloc(N * 4), *b = malloc(N * 4), *out = malloc(N * 4);
	random_floats(a, N, 1);
	random_floats(b, N, 2);
	ruda_handle ha, hb, hout;
	ck_assert_int_eq(ruda_client_create(client, a, N * 4, &ha), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, b, N * 4, &hb), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(client, N * 4, &hout), RUDA_OK);
	ruda_kernel add = test_register(client, "add_f32", 3, 4);
	uint32_t n = N;
	ruda_handle bind[] = {ha, hb, hout};
	ck_assert_int_eq(ruda_client_launch(client, add, (ruda_count){512, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, hout, out), RUDA_OK);
	for (size_t i = 0; i < N; i++)
		ck_assert_msg(out[i] == a[i] + b[i], "element %zu: %f != %f + %f", i, out[i], a[i],
			      b[i]);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	free(a);
	free(b);
	free(out);
}
END_TEST

START_TEST(fill_words)
{
	enum { N = 70000 };
	uint32_t *out = malloc(N * 4);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(client, N * 4, &h), RUDA_OK);
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	uint32_t push[2] = {0xdeadbeef, N - 5}; /* leave the last 5 words alone */
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){4, 1, 1}, &h, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, out), RUDA_OK);
	for (size_t i = 0; i < N - 5; i++)
		ck_assert_uint_eq(out[i], 0xdeadbeef);
	/* a slice binding: fill only words 4..12 of the tail window */
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	ck_assert_uint_le(p.min_storage_buffer_offset_alignment, 32);
	uint32_t push2[2] = {7, 3};
	ruda_handle window = {.id = h.id, .offset = 32, .size = 12};
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &window, 1, push2, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, out), RUDA_OK);
	for (size_t i = 0; i < 16; i++)
		ck_assert_uint_eq(out[i], i >= 8 && i < 11 ? 7u : 0xdeadbeefu);
	free(out);
}
END_TEST

/* 500 dependent launches on one stream run in order: each adds x to y. */
START_TEST(launches_run_in_order)
{
	enum { N = 4096, LAUNCHES = 500 };
	static float x[N], y[N], out[N];
	for (int i = 0; i < N; i++) {
		x[i] = (float)(i % 7);
		y[i] = (float)i;
	}
	ruda_handle hx, hy;
	ruda_client_create(client, x, sizeof(x), &hx);
	ruda_client_create(client, y, sizeof(y), &hy);
	ruda_kernel saxpy = test_register(client, "saxpy", 2, 8);
	struct {
		float alpha;
		uint32_t n;
	} push = {1.0f, N};
	ruda_handle bind[] = {hx, hy};
	for (int l = 0; l < LAUNCHES; l++)
		ck_assert_int_eq(ruda_client_launch(client, saxpy, (ruda_count){4, 1, 1}, bind, 2,
						    &push, sizeof(push)),
				 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, hy, out), RUDA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_float_eq(out[i], (float)i + LAUNCHES * (float)(i % 7));
}
END_TEST

/* Two clients registering one module compile it once. */
/* Launches in one batch that switch kernels, buffers and slices of one
 * buffer (rudad records a kernel and its bindings again only when they
 * change): each still sees its own. */
START_TEST(switching_kernels_and_bindings)
{
	enum { N = 256, ROUNDS = 20 };
	static float x[N], y[2 * N], z[N], back[2 * N];
	for (int i = 0; i < N; i++)
		x[i] = (float)(i % 5);
	ruda_handle hx, hy, hz;
	ruda_client_create(client, x, sizeof(x), &hx);
	ruda_client_create(client, y, sizeof(y), &hy);
	ruda_client_create(client, z, sizeof(z), &hz);
	ruda_kernel saxpy = test_register(client, "saxpy", 2, 8);
	ruda_kernel add = test_register(client, "add_f32", 3, 4);
	ruda_handle lo = {.id = hy.id, .offset = 0, .size = N * 4};
	ruda_handle hi = {.id = hy.id, .offset = N * 4, .size = N * 4};
	struct {
		float alpha;
		uint32_t n;
	} push = {1.0f, N};
	uint32_t n = N;
	for (int r = 0; r < ROUNDS; r++) {
		ruda_handle b1[] = {hx, lo}, b2[] = {hx, hi}, b3[] = {lo, hi, hz};
		push.alpha = 1.0f;
		ck_assert_int_eq(ruda_client_launch(client, saxpy, (ruda_count){1, 1, 1}, b1, 2,
						    &push, sizeof(push)), RUDA_OK);
		push.alpha = 2.0f;
		ck_assert_int_eq(ruda_client_launch(client, saxpy, (ruda_count){1, 1, 1}, b2, 2,
						    &push, sizeof(push)), RUDA_OK);
		ck_assert_int_eq(ruda_client_launch(client, saxpy, (ruda_count){1, 1, 1}, b2, 2,
						    &push, sizeof(push)), RUDA_OK);
		ck_assert_int_eq(ruda_client_launch(client, add, (ruda_count){1, 1, 1}, b3, 3, &n,
						    sizeof(n)), RUDA_OK);
		for (int i = 0; i < N; i++) {
			y[i] += x[i];
			y[N + i] += 4 * x[i];
			z[i] = y[i] + y[N + i];
		}
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, hy, back), RUDA_OK);
	for (int i = 0; i < 2 * N; i++)
		ck_assert_float_eq(back[i], y[i]);
	ck_assert_int_eq(ruda_client_read_one(client, hz, back), RUDA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_float_eq(back[i], z[i]);
}
END_TEST

START_TEST(compiled_once_for_all_clients)
{
	ruda_daemon_stats before = RUDA_DAEMON_STATS_INIT, after = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &before), RUDA_OK);
	ruda_kernel k1 = test_register(client, "add_f32", 3, 4);
	ruda_client *other = test_connect(&daemon_, "second");
	ruda_kernel k2 = test_register(other, "add_f32", 3, 4);
	ck_assert_int_eq(ruda_client_daemon_stats(other, &after), RUDA_OK);
	ck_assert_uint_eq(after.kernels_compiled, before.kernels_compiled + 1);
	(void)k1;
	/* and the second client's copy works */
	float a[256], b[256], out[256];
	random_floats(a, 256, 5);
	random_floats(b, 256, 6);
	ruda_handle h[3];
	ruda_client_create(other, a, sizeof(a), &h[0]);
	ruda_client_create(other, b, sizeof(b), &h[1]);
	ruda_client_empty(other, sizeof(out), &h[2]);
	uint32_t n = 256;
	ruda_client_launch(other, k2, (ruda_count){1, 1, 1}, h, 3, &n, 4);
	ck_assert_int_eq(ruda_client_read_one(other, h[2], out), RUDA_OK);
	for (int i = 0; i < 256; i++)
		ck_assert(out[i] == a[i] + b[i]);
	ruda_client_close(other);
}
END_TEST

/* A launch that fails marks the buffers it would have written. */
START_TEST(failed_launch_marks_outputs)
{
	ruda_handle h;
	uint32_t zeros[16] = {0}, back[16];
	ruda_client_create(client, zeros, sizeof(zeros), &h);
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	uint32_t push[2] = {1, 16};
	ruda_handle slice = {.id = h.id, .offset = 3, .size = 16}; /* misaligned */
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &slice, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "offset"));
	ck_assert_int_eq(ruda_client_check(client, &h, 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &h, 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_ERROR_INVALID_ARGUMENT);
	/* other buffers are unaffected */
	ruda_handle good;
	ruda_client_create(client, zeros, sizeof(zeros), &good);
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &good, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_check(client, &good, 1), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, good, back), RUDA_OK);
	for (int i = 0; i < 16; i++)
		ck_assert_uint_eq(back[i], 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kernel");
	TCase *tc = tcase_create("launch");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, add_matches_cpu);
	tcase_add_test(tc, fill_words);
	tcase_add_test(tc, launches_run_in_order);
	tcase_add_test(tc, switching_kernels_and_bindings);
	tcase_add_test(tc, compiled_once_for_all_clients);
	tcase_add_test(tc, failed_launch_marks_outputs);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
