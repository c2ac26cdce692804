/* Unit tests for libclient/parallel_copy.c with non-temporal stores on
 * (RUDA_COPY_STREAM=1, issue #24): every byte arrives, at any alignment of
 * either side and any length, through the helpers and without them. */
#include <check.h>
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

int main(void)
{
	setenv("RUDA_COPY_STREAM", "1", 1); /* read when the pool starts */
	Suite *s = suite_create("parallel_copy");
	TCase *tc = tcase_create("stream");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, every_alignment_and_length);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
