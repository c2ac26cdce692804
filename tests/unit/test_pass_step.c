/* Unit tests for daemon/common/pass_step.c: the loop watch names the step
 * that took a slow pass's time, each step charged its own time less the
 * steps within it. */
#include <check.h>
#include <string.h>
#include <unistd.h>

#include "common/pass_step.h"

#define MS 1000000ull

/* A pool result that resumes a request: the request, which took most of
 * the time, is named, with its own time only; the result's own 30 ms are
 * not the slowest. */
START_TEST(nested_step_named_with_its_own_time)
{
	ruda__pass_step_take();
	struct ruda_step_mark outer = ruda__pass_step_begin();
	usleep(20 * 1000);
	struct ruda_step_mark inner = ruda__pass_step_begin();
	usleep(60 * 1000);
	ruda__pass_step_end(inner, "request", "Empty");
	usleep(10 * 1000);
	ruda__pass_step_end(outer, "thread pool result", "device memory made");
	struct ruda_pass_step s = ruda__pass_step_take();
	ck_assert_str_eq(s.kind, "request");
	ck_assert_str_eq(s.what, "Empty");
	ck_assert_uint_ge(s.ns, 60 * MS);
	/* the next pass starts with none */
	s = ruda__pass_step_take();
	ck_assert_ptr_null(s.kind);
	ck_assert_uint_eq(s.ns, 0);
}
END_TEST

/* Where the outer step's own time is the larger, it is named, less the
 * nested one's. */
START_TEST(outer_step_named_less_the_nested)
{
	ruda__pass_step_take();
	struct ruda_step_mark outer = ruda__pass_step_begin();
	struct ruda_step_mark inner = ruda__pass_step_begin();
	usleep(10 * 1000);
	ruda__pass_step_end(inner, "request", "Sync");
	usleep(50 * 1000);
	ruda__pass_step_end(outer, "thread pool result", "host staging made");
	struct ruda_pass_step s = ruda__pass_step_take();
	ck_assert_str_eq(s.what, "host staging made");
	ck_assert_uint_ge(s.ns, 50 * MS);
	/* two steps one after the other: the longer */
	struct ruda_step_mark a = ruda__pass_step_begin();
	usleep(5 * 1000);
	ruda__pass_step_end(a, "request", "Launch");
	struct ruda_step_mark b = ruda__pass_step_begin();
	usleep(30 * 1000);
	ruda__pass_step_end(b, "request", "Write");
	s = ruda__pass_step_take();
	ck_assert_str_eq(s.what, "Write");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pass_step");
	TCase *tc = tcase_create("steps");
	tcase_add_test(tc, nested_step_named_with_its_own_time);
	tcase_add_test(tc, outer_step_named_less_the_nested);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
