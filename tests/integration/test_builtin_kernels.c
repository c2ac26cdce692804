/* The built-in kernels of shaders/, run through rudad and checked against
 * CPU references. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_builtin_kernels");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

START_TEST(copy_vec4_and_words)
{
	enum { BYTES = (1 << 20) + 12 }; /* whole vec4s, then a 3-word tail */
	uint8_t *src = malloc(BYTES), *back = malloc(BYTES);
	test_fill_random(src, BYTES, 9);
	ruda_handle hs, hd;
	ruda_client_create(client, src, BYTES, &hs);
	ruda_client_empty(client, BYTES, &hd);
	ruda_kernel copy = test_register(client, "copy", 2, 4);
	ruda_kernel copy_u32 = test_register(client, "copy_u32", 2, 4);
	uint32_t vec4s = BYTES / 16, tail = (BYTES % 16) / 4;
	ruda_handle bind[] = {hs, hd};
	ruda_client_launch(client, copy, (ruda_count){64, 1, 1}, bind, 2, &vec4s, 4);
	ruda_handle tail_bind[] = {{hs.id, vec4s * 16ull, tail * 4ull}, {hd.id, vec4s * 16ull, tail * 4ull}};
	ruda_client_launch(client, copy_u32, (ruda_count){1, 1, 1}, tail_bind, 2, &tail, 4);
	ck_assert_int_eq(ruda_client_read_one(client, hd, back), RUDA_OK);
	ck_assert_int_eq(memcmp(src, back, BYTES), 0);
	free(src);
	free(back);
}
END_TEST

/* A transposed view of a 300 x 200 matrix, packed by the gather kernel. */
START_TEST(gather_transposes)
{
	enum { ROWS = 300, COLS = 200 };
	uint32_t *m = malloc(ROWS * COLS * 4), *out = malloc(ROWS * COLS * 4);
	for (uint32_t i = 0; i < ROWS * COLS; i++)
		m[i] = i * 2654435761u;
	ruda_handle hs, hd;
	ruda_client_create(client, m, ROWS * COLS * 4, &hs);
	ruda_client_empty(client, ROWS * COLS * 4, &hd);
	ruda_kernel gather = test_register(client, "gather", 2, 40);
	struct {
		uint32_t shape[4], strides[4], count, elem_words;
	} push = {{1, 1, COLS, ROWS}, {0, 0, 1, COLS}, ROWS * COLS, 1};
	ruda_handle bind[] = {hs, hd};
	ruda_client_launch(client, gather, (ruda_count){128, 1, 1}, bind, 2, &push, sizeof(push));
	ck_assert_int_eq(ruda_client_read_one(client, hd, out), RUDA_OK);
	for (uint32_t c = 0; c < COLS; c++)
		for (uint32_t r = 0; r < ROWS; r++)
			ck_assert_uint_eq(out[c * ROWS + r], m[r * COLS + c]);
	free(m);
	free(out);
}
END_TEST

enum elem { F32, I32, U32 };
static const char *const type_names[] = {"f32", "i32", "u32"};
static const char *const op_names[] = {"sum", "prod", "max", "min", "mean"};

/* Reduce `n` 4-byte values with the built-in kernel: two passes. */
static void gpu_reduce(int op, enum elem type, const void *data, uint32_t n, void *result)
{
	char name[32];
	snprintf(name, sizeof(name), "reduce_%s_%s", op_names[op], type_names[type]);
	ruda_kernel k = test_register(client, name, 2, 12);
	enum { GROUPS = 64 };
	ruda_handle in, partial, out;
	ruda_client_create(client, data, (size_t)n * 4, &in);
	ruda_client_empty(client, GROUPS * 4, &partial);
	ruda_client_empty(client, 4, &out);
	struct {
		uint32_t count, finalize;
		float divisor;
	} p1 = {n, 0, 1.0f}, p2 = {GROUPS, 1, (float)n};
	ruda_handle b1[] = {in, partial}, b2[] = {partial, out};
	ruda_client_launch(client, k, (ruda_count){GROUPS, 1, 1}, b1, 2, &p1, sizeof(p1));
	ruda_client_launch(client, k, (ruda_count){1, 1, 1}, b2, 2, &p2, sizeof(p2));
	ck_assert_int_eq(ruda_client_read_one(client, out, result), RUDA_OK);
	ruda_client_release(client, in);
	ruda_client_release(client, partial);
	ruda_client_release(client, out);
	ruda_client_kernel_release(client, k);
}

START_TEST(reductions_match_cpu)
{
	enum { N = 100003 };
	int op = _i % 5;
	enum elem type = (enum elem)(_i / 5);
	uint32_t *bits = malloc(N * 4);
	test_fill_random(bits, N * 4, (uint64_t)_i + 1);
	float *f = (float *)bits;
	int32_t *s = (int32_t *)bits;
	if (type == F32)
		for (int i = 0; i < N; i++) /* products of these stay finite */
			f[i] = op == 1 ? 1.0f + ((float)(bits[i] % 2001) - 1000.0f) * 1e-6f
				       : (float)(bits[i] % 2000001) / 1000.0f - 1000.0f;
	union {
		float f;
		int32_t i;
		uint32_t u;
	} got, want;
	gpu_reduce(op, type, bits, N, &got);
	if (type == F32) {
		double acc = op == 1 ? 1.0 : op == 2 ? -INFINITY : op == 3 ? INFINITY : 0.0;
		for (int i = 0; i < N; i++)
			acc = op == 1 ? acc * f[i] : op == 2 ? fmax(acc, f[i]) : op == 3 ? fmin(acc, f[i])
											 : acc + f[i];
		if (op == 4)
			acc /= N;
		want.f = (float)acc;
		if (op == 2 || op == 3)
			ck_assert_float_eq(got.f, want.f);
		else /* summation order differs: compare with a tolerance */
			ck_assert_msg(fabs(got.f - want.f) <= 1e-3 * fmax(1.0, fabs(want.f)) +
								    (op == 0 ? 0.5 : 0.0),
				      "%s f32: got %.9g, want %.9g", op_names[op], got.f, want.f);
	} else if (type == I32) {
		int64_t acc = op == 1 ? 1 : op == 2 ? INT32_MIN : op == 3 ? INT32_MAX : 0;
		uint32_t wrap = op == 1 ? 1u : 0u; /* sums and products wrap mod 2^32 */
		for (int i = 0; i < N; i++) {
			if (op == 2)
				acc = s[i] > acc ? s[i] : acc;
			else if (op == 3)
				acc = s[i] < acc ? s[i] : acc;
			else if (op == 1)
				wrap *= (uint32_t)s[i];
			else
				wrap += (uint32_t)s[i];
		}
		want.i = op == 2 || op == 3 ? (int32_t)acc : (int32_t)wrap;
		if (op == 4)
			want.i = (int32_t)((float)want.i / (float)N);
		ck_assert_int_eq(got.i, want.i);
	} else {
		uint32_t acc = op == 1 ? 1u : op == 3 ? UINT32_MAX : 0u;
		for (int i = 0; i < N; i++)
			acc = op == 1 ? acc * bits[i] : op == 2 ? (bits[i] > acc ? bits[i] : acc)
				  : op == 3 ? (bits[i] < acc ? bits[i] : acc) : acc + bits[i];
		if (op == 4)
			acc = (uint32_t)((float)acc / (float)N);
		want.u = acc;
		ck_assert_uint_eq(got.u, want.u);
	}
	free(bits);
}
END_TEST

/* f16 variants need Float16 and 16-bit storage; the daemon says if the
 * device lacks them, and otherwise they must be right. */
START_TEST(f16_sum_where_supported)
{
	size_t size;
	uint32_t *words = test_load_spirv("reduce_sum_f16", &size);
	ruda_kernel_desc desc = {sizeof(ruda_kernel_desc), words, size, "main", 2, 12, NULL, 0};
	ruda_kernel k;
	ruda_status st = ruda_client_kernel_register(client, &desc, &k);
	free(words);
	if (st == RUDA_ERROR_INVALID_KERNEL) {
		char why[256];
		ruda_client_last_error(client, why, sizeof(why));
		ck_assert_msg(strstr(why, "capability") != NULL, "refused for another reason: %s",
			      why);
		fprintf(stderr, "SKIP f16_sum_where_supported: the device lacks 16-bit floats (%s)\n",
			why);
		return;
	}
	ck_assert_int_eq(st, RUDA_OK);
	enum { N = 4096 };
	uint16_t halves[N];
	for (int i = 0; i < N; i++)
		halves[i] = 0x3c00; /* 1.0 */
	ruda_handle in, partial, out;
	ruda_client_create(client, halves, sizeof(halves), &in);
	ruda_client_empty(client, 64 * 2, &partial);
	ruda_client_empty(client, 4, &out);
	struct {
		uint32_t count, finalize;
		float divisor;
	} p1 = {N, 0, 1}, p2 = {64, 1, 1};
	ruda_handle b1[] = {in, partial}, b2[] = {partial, out};
	ruda_client_launch(client, k, (ruda_count){64, 1, 1}, b1, 2, &p1, sizeof(p1));
	ruda_client_launch(client, k, (ruda_count){1, 1, 1}, b2, 2, &p2, sizeof(p2));
	uint16_t result[2];
	ck_assert_int_eq(ruda_client_read_one(client, out, result), RUDA_OK);
	ck_assert_uint_eq(result[0], 0x6c00); /* 4096.0 in half precision */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("builtin_kernels");
	TCase *tc = tcase_create("kernels");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, copy_vec4_and_words);
	tcase_add_test(tc, gather_transposes);
	tcase_add_loop_test(tc, reductions_match_cpu, 0, 15);
	tcase_add_test(tc, f16_sum_where_supported);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
