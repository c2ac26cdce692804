/* Unit tests for libclient/parallel_copy.c (issue #24): with non-temporal
 * stores on (RUDA_COPY_STREAM=1), every byte arrives, at any alignment of
 * either side and any length, through the helpers and without them; with
 * the helpers spinning between copies (RUDA_COPY_SPIN_US), copies back to
 * back and from two threads at once each arrive whole. Each test runs in a
 * child of its own, whose pool reads the environment the test set. */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "parallel_copy.h"

static void copy_and_compare(size_t n, size_t src_off, size_t dst_off, uint64_t seed)
{
	uint8_t *src = malloc(n + 64), *dst = malloc(n + 128);
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	test_fill_random(src, n + 64, seed);
	memset(dst, 0xa5, n + 128);
	ruda__parallel_copy(dst + dst_off, src + src_off, n);
	ck_assert_msg(memcmp(dst + dst_off, src + src_off, n) == 0,
		      "%zu bytes from +%zu to +%zu differ", n, src_off, dst_off);
	/* nothing written outside */
	for (size_t i = 0; i < dst_off; i++)
		ck_assert_uint_eq(dst[i], 0xa5);
	for (size_t i = dst_off + n; i < n + 128; i++)
		ck_assert_uint_eq(dst[i], 0xa5);
	free(src);
	free(dst);
}

START_TEST(every_alignment_and_length)
{
	static const size_t sizes[] = {0, 1, 15, 63, 64, 65, 4095, (1u << 20) - 1, 1u << 20,
				       (3u << 20) + 17, (9u << 20) + 5};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (size_t s = 0; s < 3; s++)
			for (size_t d = 0; d < 3; d++)
				copy_and_compare(sizes[i], s * 7, d * 13 + (d == 2 ? 51 : 0),
						 i * 9 + s * 3 + d);
}
END_TEST

/* Copies of 1-3 MiB one after another, each checked, so that helpers
 * still spinning after one copy take the next. */
static void *copies_in_a_row(void *arg)
{
	uint64_t seed = (uint64_t)(uintptr_t)arg;
	size_t max = (3u << 20) + 64;
	uint8_t *src = malloc(max), *dst = malloc(max);
	ck_assert_ptr_nonnull(src);
	ck_assert_ptr_nonnull(dst);
	for (int i = 0; i < 200; i++) {
		size_t n = (1u << 20) + (size_t)((seed * 7919u + (uint64_t)i * 104729u) % (2u << 20));
		test_fill_random(src, n, seed + (uint64_t)i);
		memset(dst, 0, n);
		ruda__parallel_copy(dst, src, n);
		ck_assert_msg(memcmp(dst, src, n) == 0, "copy %d of %zu bytes differs", i, n);
	}
	free(src);
	free(dst);
	return NULL;
}

START_TEST(spinning_helpers_back_to_back)
{
	setenv("RUDA_COPY_STREAM", "0", 1);
	setenv("RUDA_COPY_THREADS", "3", 1);
	setenv("RUDA_COPY_SPIN_US", "300", 1);
	copies_in_a_row((void *)(uintptr_t)1);
	/* two callers: one takes the helpers, the other copies alone */
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, copies_in_a_row, (void *)(uintptr_t)2), 0);
	copies_in_a_row((void *)(uintptr_t)3);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
}
END_TEST

int main(void)
{
	setenv("RUDA_COPY_STREAM", "1", 1); /* read when the pool starts */
	Suite *s = suite_create("parallel_copy");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_alignment_and_length);
	suite_add_tcase(s, tc);
	TCase *spin = tcase_create("spin");
	tcase_set_timeout(spin, 120);
	tcase_add_test(spin, spinning_helpers_back_to_back);
	suite_add_tcase(s, spin);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
