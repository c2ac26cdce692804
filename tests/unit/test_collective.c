/* The all-reduce's CPU reduction (daemon/exec/reduce.c): every operation and
 * element type against plain loops, f16 rounding, integer wrap-around and
 * truncating means; and the chunk the device path takes for a call of each
 * size (daemon/exec/peer_copy.c, RUDA_PEER_CHUNK unset). */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/ruda.h>

#include "exec/peer_copy.h"
#include "exec/reduce.h"
#include "memory/peer_window.h"

/* Three arrays of `count` elements, `stride` bytes apart. */
static uint8_t *slots(size_t stride)
{
	uint8_t *p = calloc(3, stride);
	ck_assert_ptr_nonnull(p);
	return p;
}

START_TEST(f32_every_op)
{
	enum { N = 5 };
	const float in[3][N] = {{1, -2, 3.5f, 0, 100},
				{4, 5, -6, 0.25f, -100},
				{-7, 8, 9, 1, 50}};
	for (int op = RUDA_REDUCE_SUM; op <= RUDA_REDUCE_MEAN; op++) {
		uint8_t *b = slots(N * 4);
		for (int j = 0; j < 3; j++)
			memcpy(b + j * N * 4, in[j], N * 4);
		ruda__collective_reduce(b, N * 4, 3, 0, N, RUDA_ELEM_F32, (uint32_t)op);
		float out[N];
		memcpy(out, b, sizeof(out));
		for (int i = 0; i < N; i++) {
			float a = in[0][i], x = in[1][i], y = in[2][i], e;
			switch (op) {
			case RUDA_REDUCE_SUM: e = a + x + y; break;
			case RUDA_REDUCE_PROD: e = a * x * y; break;
			case RUDA_REDUCE_MAX: e = fmaxf(fmaxf(a, x), y); break;
			case RUDA_REDUCE_MIN: e = fminf(fminf(a, x), y); break;
			default: e = (a + x + y) / 3.0f;
			}
			ck_assert_msg(out[i] == e, "op %d [%d]: %g, want %g", op, i, out[i], e);
		}
		free(b);
	}
}
END_TEST

START_TEST(integers_wrap_and_truncate)
{
	int32_t i0[2] = {INT32_MAX, -7}, i1[2] = {1, 0}, i2[2] = {0, 3};
	uint8_t *b = slots(8);
	memcpy(b, i0, 8);
	memcpy(b + 8, i1, 8);
	memcpy(b + 16, i2, 8);
	ruda__collective_reduce(b, 8, 3, 0, 2, RUDA_ELEM_I32, RUDA_REDUCE_SUM);
	int32_t out[2];
	memcpy(out, b, 8);
	ck_assert_int_eq(out[0], INT32_MIN); /* wraps, as on the GPU */
	ck_assert_int_eq(out[1], -4);
	memcpy(b, i0, 8);
	ruda__collective_reduce(b, 8, 3, 0, 2, RUDA_ELEM_I32, RUDA_REDUCE_MEAN);
	memcpy(out, b, 8);
	ck_assert_int_eq(out[0], (int32_t)(((int64_t)INT32_MAX + 1) / 3));
	ck_assert_int_eq(out[1], -1); /* -4 / 3 truncates toward zero */
	free(b);

	uint32_t u[3] = {0xffffffffu, 2, 5};
	b = slots(4);
	for (int j = 0; j < 3; j++)
		memcpy(b + 4 * j, &u[j], 4);
	ruda__collective_reduce(b, 4, 3, 0, 1, RUDA_ELEM_U32, RUDA_REDUCE_SUM);
	uint32_t r;
	memcpy(&r, b, 4);
	ck_assert_uint_eq(r, 6);
	memcpy(b, &u[0], 4);
	ruda__collective_reduce(b, 4, 3, 0, 1, RUDA_ELEM_U32, RUDA_REDUCE_MEAN);
	memcpy(&r, b, 4);
	ck_assert_uint_eq(r, (uint32_t)((0xffffffffull + 7) / 3));
	memcpy(b, &u[0], 4);
	ruda__collective_reduce(b, 4, 3, 0, 1, RUDA_ELEM_U32, RUDA_REDUCE_MIN);
	memcpy(&r, b, 4);
	ck_assert_uint_eq(r, 2);
	free(b);
}
END_TEST

START_TEST(f16_rounding)
{
	/* 1.0 (0x3c00) + 2^-11 (0x1000), half an ulp, ties to even: stays 1.0;
	 * 1 + 5 * 2^-11 (2.5 ulps) ties to even as well: 1 + 2^-9 (0x3c02) */
	uint16_t in[3][3] = {{0x3c00, 0x3c00, 0x7bff}, {0x1000, 0x1000, 0x7bff}, {0, 0x1800, 0}};
	uint8_t *b = slots(6);
	for (int j = 0; j < 3; j++)
		memcpy(b + 6 * j, in[j], 6);
	ruda__collective_reduce(b, 6, 3, 0, 3, RUDA_ELEM_F16, RUDA_REDUCE_SUM);
	uint16_t out[3];
	memcpy(out, b, 6);
	ck_assert_uint_eq(out[0], 0x3c00);
	ck_assert_uint_eq(out[1], 0x3c02);
	ck_assert_uint_eq(out[2], 0x7c00); /* 65504 + 65504 overflows to infinity */
	free(b);

	/* subnormals survive, and max takes the larger */
	uint16_t s[3] = {0x0001, 0x0003, 0x8002};
	b = slots(2);
	for (int j = 0; j < 3; j++)
		memcpy(b + 2 * j, &s[j], 2);
	ruda__collective_reduce(b, 2, 3, 0, 1, RUDA_ELEM_F16, RUDA_REDUCE_MAX);
	uint16_t m;
	memcpy(&m, b, 2);
	ck_assert_uint_eq(m, 0x0003);
	memcpy(b, &s[0], 2);
	ruda__collective_reduce(b, 2, 3, 0, 1, RUDA_ELEM_F16, RUDA_REDUCE_SUM);
	memcpy(&m, b, 2);
	ck_assert_uint_eq(m, 0x0002);
	free(b);
}
END_TEST

/* Only [begin, end) changes: jobs split an array between threads. */
START_TEST(range_only)
{
	float in[2][4] = {{1, 2, 3, 4}, {10, 20, 30, 40}};
	uint8_t *b = slots(16);
	memcpy(b, in[0], 16);
	memcpy(b + 16, in[1], 16);
	ruda__collective_reduce(b, 16, 2, 1, 3, RUDA_ELEM_F32, RUDA_REDUCE_SUM);
	float out[4];
	memcpy(out, b, 16);
	ck_assert(out[0] == 1 && out[1] == 22 && out[2] == 33 && out[3] == 4);
	free(b);
}
END_TEST

/* One chunk of the call's size while its windows can all be kept; past
 * that, the largest chunks whose windows of two can; at least 64 MiB. */
START_TEST(device_path_chunks)
{
	const uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
	ck_assert_uint_eq(RUDA_PEER_CACHE_BYTES, 2 * GiB);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(MiB, 2), 64 * MiB); /* within a chunk */
	ck_assert_uint_eq(ruda__peer_reduce_chunk(64 * MiB, 2), 64 * MiB);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(64 * MiB + 4, 2), 64 * MiB + 4);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(GiB, 2), GiB);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(2 * GiB, 2), 2 * GiB);
	/* a window of 4 GiB cannot be kept: two chunks of 1 GiB can */
	ck_assert_uint_eq(ruda__peer_reduce_chunk(2 * GiB + 4, 2), GiB);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(16 * GiB, 2), GiB);
	/* three members: two windows */
	ck_assert_uint_eq(ruda__peer_reduce_chunk(GiB, 3), GiB);
	ck_assert_uint_eq(ruda__peer_reduce_chunk(GiB + 4, 3), 512 * MiB);
	/* five: four windows of 2 x 256 MiB */
	ck_assert_uint_eq(ruda__peer_reduce_chunk(600 * MiB, 5), 256 * MiB);
	/* many members: never below the default chunk */
	ck_assert_uint_eq(ruda__peer_reduce_chunk(GiB, 64), 64 * MiB);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("collective");
	TCase *tc = tcase_create("reduce");
	tcase_add_test(tc, f32_every_op);
	tcase_add_test(tc, integers_wrap_and_truncate);
	tcase_add_test(tc, f16_rounding);
	tcase_add_test(tc, range_only);
	tcase_add_test(tc, device_path_chunks);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
