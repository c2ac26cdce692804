/* When a client held back for a higher priority may start its next command
 * (daemon/common/priority.c): the state is set by hand, the clock is a number. */
#include <check.h>
#include <stdlib.h>

#include "common/priority.h"

#define US 1000ull
#define MS 1000000ull

static const struct ruda_priority_rules rules = {.anticipation_ns = 1 * MS,
						 .max_wait_ns = 2 * MS};

/* A priority-7 client ran its last command until t = 10 ms; the priority-1
 * clients last started one at t = 9 ms. */
static struct ruda_priority_state after_high(void)
{
	struct ruda_priority_state s = {0};
	s.done_ns[7] = 10 * MS;
	s.held_start_ns = 9 * MS;
	return s;
}

START_TEST(waits_out_the_anticipation)
{
	struct ruda_priority_state s = after_high();
	ck_assert(!ruda__priority_may_start(&s, 1, 10 * MS + 999 * US, &rules));
	ck_assert(ruda__priority_may_start(&s, 1, 11 * MS, &rules));
	/* no anticipation: as soon as the device allows */
	struct ruda_priority_rules none = {0};
	ck_assert(ruda__priority_may_start(&s, 1, 10 * MS + 1, &none));
}
END_TEST

START_TEST(never_behind_higher_work)
{
	struct ruda_priority_state s = after_high();
	s.held_start_ns = 10 * MS; /* not waited the longest before 12 ms */
	ruda__priority_submitted(&s, 7, 0, 11 * MS, 0);
	ck_assert(!ruda__priority_may_start(&s, 1, 11 * MS + 500 * US, &rules));
	/* a priority between the two counts as higher too */
	struct ruda_priority_state mid = after_high();
	mid.held_start_ns = 10 * MS;
	ruda__priority_submitted(&mid, 4, 0, 10 * MS + 100 * US, 0);
	ck_assert(!ruda__priority_may_start(&mid, 1, 11 * MS + 500 * US, &rules));
	ruda__priority_completed(&mid, 4, 11 * MS);
	ck_assert(!ruda__priority_may_start(&mid, 1, 11 * MS + 500 * US, &rules));
	/* the longest wait lets it in behind the higher work */
	ck_assert(ruda__priority_may_start(&s, 1, 12 * MS, &rules));
	ck_assert(ruda__priority_may_start(&mid, 1, 12 * MS, &rules));
}
END_TEST

START_TEST(one_held_command_at_a_time)
{
	struct ruda_priority_state s = after_high();
	ruda__priority_submitted(&s, 1, 1, 20 * MS, 0);
	ck_assert_uint_eq(s.held_start_ns, 20 * MS);
	/* whatever the clock says, its own rank or a lower one is running */
	ck_assert(!ruda__priority_may_start(&s, 1, 30 * MS, &rules));
	ck_assert(!ruda__priority_may_start(&s, 2, 30 * MS, &rules));
	/* a higher held client is not behind it */
	ck_assert_uint_eq(ruda__priority_inflight_below(&s, 1), 0);
	ck_assert_uint_eq(ruda__priority_inflight_below(&s, 2), 1);
	ruda__priority_completed(&s, 1, 30 * MS);
	ck_assert(ruda__priority_may_start(&s, 1, 30 * MS, &rules));
}
END_TEST

/* The higher client never pauses for the anticipation: the held ones still
 * start one command each time they have waited the longest. */
START_TEST(the_longest_wait_ends_it)
{
	struct ruda_priority_state s = after_high();
	uint64_t now = 10 * MS;
	int started = 0;
	for (int i = 0; i < 100; i++) { /* 40 us round trips for 4 ms */
		ruda__priority_submitted(&s, 7, 0, now, 0);
		if (ruda__priority_may_start(&s, 1, now, &rules)) {
			ruda__priority_submitted(&s, 1, 1, now, 0);
			ruda__priority_completed(&s, 1, now + 10 * US);
			started++;
		}
		now += 20 * US;
		ruda__priority_completed(&s, 7, now);
		now += 20 * US;
	}
	/* held since 9 ms: at 11 and 13 ms */
	ck_assert_int_eq(started, 2);
	/* no longest wait: never while the higher one goes on */
	struct ruda_priority_rules patient = {.anticipation_ns = 1 * MS};
	s = after_high();
	for (int i = 0; i < 100; i++, now += 40 * US) {
		ruda__priority_submitted(&s, 7, 0, now, 0);
		ck_assert(!ruda__priority_may_start(&s, 1, now + 20 * US, &patient));
		ruda__priority_completed(&s, 7, now + 20 * US);
	}
}
END_TEST

START_TEST(outranked_while_a_higher_one_is_active)
{
	struct ruda_priority_state s = {0};
	s.active_until_ms[5] = 100;
	ck_assert(ruda__priority_outranked(&s, 1, 99));
	ck_assert(ruda__priority_outranked(&s, 4, 99));
	ck_assert(!ruda__priority_outranked(&s, 5, 99));
	ck_assert(!ruda__priority_outranked(&s, 1, 100));
	/* a submission makes its priority active for RUDA_PRIORITY_HOLD_MS */
	ruda__priority_submitted(&s, 3, 0, 0, 200);
	ck_assert(ruda__priority_outranked(&s, 1, 200 + RUDA_PRIORITY_HOLD_MS - 1));
	ck_assert(!ruda__priority_outranked(&s, 1, 200 + RUDA_PRIORITY_HOLD_MS));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("priority_rules");
	TCase *tc = tcase_create("priority_rules");
	tcase_add_test(tc, waits_out_the_anticipation);
	tcase_add_test(tc, never_behind_higher_work);
	tcase_add_test(tc, one_held_command_at_a_time);
	tcase_add_test(tc, the_longest_wait_ends_it);
	tcase_add_test(tc, outranked_while_a_higher_one_is_active);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
