/* Unit tests for daemon/memory/buffer_limits.c: buffer sizes are checked in 64
 * bits against the device's own limits (issue #24: the H200 refused every
 * buffer over 4,292,870,144 bytes, its maxMemoryAllocationSize, on a
 * 140 GiB device). */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "memory/buffer_limits.h"

#define GiB (1024ull * 1024ull * 1024ull)

/* The H200's figures as the driver reports them. */
static const struct ruda_buffer_limits h200 = {
	.max_buffer_size = 1ull << 40,
	.heap_size = 140 * GiB,
	.max_allocation_size = 4292870144ull,
};

START_TEST(past_four_gib_within_the_heap)
{
	char why[192] = "";
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, 16 * GiB, why, sizeof(why)), RUDA_OK);
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, 4292870144ull + 1, why, sizeof(why)),
			 RUDA_OK);
	/* sizes whose low 32 bits are small: a truncation would pass them */
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, (1ull << 32) + 1, why, sizeof(why)),
			 RUDA_OK);
	ck_assert_uint_eq(ruda__buffer_limits_largest(&h200), 140 * GiB);
}
END_TEST

START_TEST(past_the_heap_is_too_large)
{
	char why[192] = "";
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, 140 * GiB + 1, why, sizeof(why)),
			 RUDA_ERROR_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(why, "heap"));
	ck_assert_ptr_nonnull(strstr(why, "150323855360")); /* 140 GiB, in bytes */
	/* 2^64 - 1 and the like do not wrap */
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, UINT64_MAX, why, sizeof(why)),
			 RUDA_ERROR_TOO_LARGE);
	ck_assert_int_eq(ruda__buffer_limits_check(&h200, (1ull << 40) + 1, why, sizeof(why)),
			 RUDA_ERROR_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(why, "largest buffer"));
}
END_TEST

START_TEST(driver_refusal_past_max_allocation_names_it)
{
	char why[192] = "";
	ck_assert_int_eq(ruda__buffer_limits_refused(&h200, 8 * GiB, RUDA_ERROR_OUT_OF_MEMORY,
						     why, sizeof(why)),
			 RUDA_ERROR_TOO_LARGE);
	ck_assert_ptr_nonnull(strstr(why, "maxMemoryAllocationSize"));
	ck_assert_ptr_nonnull(strstr(why, "4292870144"));
	/* below it, a refusal is what the caller says: out of memory */
	ck_assert_int_eq(ruda__buffer_limits_refused(&h200, 1 * GiB, RUDA_ERROR_OUT_OF_MEMORY,
						     why, sizeof(why)),
			 RUDA_ERROR_OUT_OF_MEMORY);
}
END_TEST

START_TEST(without_max_buffer_size_the_allocation_limit_holds)
{
	/* a Vulkan 1.2 device: no maxBufferSize to ask for */
	struct ruda_buffer_limits old = {.heap_size = 8 * GiB, .max_allocation_size = 2 * GiB};
	char why[192] = "";
	ck_assert_int_eq(ruda__buffer_limits_check(&old, 2 * GiB, why, sizeof(why)), RUDA_OK);
	ck_assert_int_eq(ruda__buffer_limits_check(&old, 2 * GiB + 1, why, sizeof(why)),
			 RUDA_ERROR_TOO_LARGE);
	ck_assert_uint_eq(ruda__buffer_limits_largest(&old), 2 * GiB);
	/* a heap smaller than maxBufferSize bounds the largest */
	struct ruda_buffer_limits small = {
		.max_buffer_size = 1ull << 40, .heap_size = 2 * GiB, .max_allocation_size = 1 * GiB};
	ck_assert_uint_eq(ruda__buffer_limits_largest(&small), 2 * GiB);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("buffer_limits");
	TCase *tc = tcase_create("limits");
	tcase_add_test(tc, past_four_gib_within_the_heap);
	tcase_add_test(tc, past_the_heap_is_too_large);
	tcase_add_test(tc, driver_refusal_past_max_allocation_names_it);
	tcase_add_test(tc, without_max_buffer_size_the_allocation_limit_holds);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
