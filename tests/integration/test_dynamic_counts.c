/* Launches whose workgroup counts come from a device buffer. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;
static ruda_kernel counter;
static ruda_device_properties props = RUDA_DEVICE_PROPERTIES_INIT;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_dynamic_counts");
	counter = test_register(client, "tests/shaders/count_groups", 1, 0);
	ck_assert_int_eq(ruda_client_properties(client, &props), RUDA_OK);
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* A fresh result buffer: ran, x, y, z. */
static ruda_handle result_buffer(void)
{
	uint32_t zero[4] = {0};
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, zero, sizeof(zero), &h), RUDA_OK);
	return h;
}

/* What the counting kernel saw, against the CPU's expectation. */
static void expect_ran(ruda_handle out, uint32_t x, uint32_t y, uint32_t z)
{
	uint32_t got[4];
	ck_assert_int_eq(ruda_client_read_one(client, out, got), RUDA_OK);
	ck_assert_uint_eq(got[0], x * y * z);
	if (x && y && z) {
		ck_assert_uint_eq(got[1], x);
		ck_assert_uint_eq(got[2], y);
		ck_assert_uint_eq(got[3], z);
	}
}

static ruda_handle counts_buffer(const uint32_t *words, size_t n)
{
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, words, n * 4, &h), RUDA_OK);
	return h;
}

START_TEST(counts_from_a_buffer)
{
	/* at byte 20: not aligned for a binding, fine for counts */
	uint32_t words[8] = {99, 99, 99, 99, 99, 3, 4, 2};
	ruda_handle counts = counts_buffer(words, 8);
	counts.offset = 20;
	ruda_handle out = result_buffer();
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(out, 3, 4, 2);

	/* zero in any count: nothing runs */
	ruda_handle out0 = result_buffer();
	counts.offset = 0;
	uint32_t zero_y[3] = {5, 0, 1};
	ck_assert_int_eq(ruda_client_write(client, counts, 0, zero_y, sizeof(zero_y)), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out0, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(out0, 0, 0, 0);
}
END_TEST

/* Counts written by a kernel just before are the ones used. */
START_TEST(counts_written_on_the_device)
{
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	uint32_t zeros[3] = {0};
	ruda_handle counts = counts_buffer(zeros, 3);
	ruda_handle out = result_buffer();
	uint32_t push[2] = {3, 3}; /* three words of 3 */
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &counts, 1, push,
					    sizeof(push)),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(out, 3, 3, 3);
}
END_TEST

/* Huge counts are clamped to the device's limit, on the device: the launch
 * runs that many workgroups and ends. */
START_TEST(huge_counts_are_clamped)
{
	uint32_t words[3] = {0xffffffffu, 1, 1};
	ruda_handle counts = counts_buffer(words, 3);
	ruda_handle out = result_buffer();
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(out, props.max_workgroup_count[0], 1, 1);

	uint32_t tall[3] = {1, 0x80000000u, 1};
	ruda_handle out2 = result_buffer();
	ck_assert_int_eq(ruda_client_write(client, counts, 0, tall, sizeof(tall)), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out2, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(out2, 1, props.max_workgroup_count[1], 1);
}
END_TEST

/* The count buffer's offset and size are checked; failures surface at sync
 * and mark the launch's buffers. */
START_TEST(bad_count_buffers)
{
	uint32_t words[4] = {1, 1, 1, 1};
	ruda_handle counts = counts_buffer(words, 4);
	ruda_handle out = result_buffer();
	char why[256];

	ruda_handle odd = counts;
	odd.offset = 2;
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, odd, &out, 1, NULL, 0), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "multiple of 4"), "%s", why);
	ck_assert_int_eq(ruda_client_check(client, &out, 1), RUDA_ERROR_INVALID_ARGUMENT);

	out = result_buffer();
	ruda_handle past = counts;
	past.offset = 8; /* 8 + 12 > 16 */
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, past, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "count buffer"), "%s", why);

	past.offset = UINT64_MAX - 4;
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, past, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);

	ruda_handle none = {.id = 424242};
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, none, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_HANDLE);

	/* and a good one still works */
	ruda_handle fresh = result_buffer();
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &fresh, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(fresh, 1, 1, 1);
}
END_TEST

/* A captured launch with dynamic counts reads them at each replay. */
START_TEST(dynamic_counts_in_a_graph)
{
	uint32_t words[3] = {2, 1, 1};
	ruda_handle counts = counts_buffer(words, 3);
	ruda_handle out = result_buffer();
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL, 0),
			 RUDA_OK);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);
	ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	uint32_t more[3] = {5, 1, 1};
	ck_assert_int_eq(ruda_client_write(client, counts, 0, more, sizeof(more)), RUDA_OK);
	ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	uint32_t got[4];
	ck_assert_int_eq(ruda_client_read_one(client, out, got), RUDA_OK);
	ck_assert_uint_eq(got[0], 2 + 5);
	ck_assert_uint_eq(got[1], 5);
	ruda_graph_release(graph);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("dynamic_counts");
	TCase *tc = tcase_create("dynamic_counts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, counts_from_a_buffer);
	tcase_add_test(tc, counts_written_on_the_device);
	tcase_add_test(tc, huge_counts_are_clamped);
	tcase_add_test(tc, bad_count_buffers);
	tcase_add_test(tc, dynamic_counts_in_a_graph);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
