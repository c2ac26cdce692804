/* Workgroup counts whose product reaches 2^32: each within the device's
 * per-dimension limit, together past what drivers count (lavapipe ran
 * 65535^3 as 196 607 workgroups, 2^48 mod 2^32, and reported OK). A static
 * Launch of them is refused; dynamic ones dispatch nothing. */
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
	client = test_connect(&daemon_, "test_workgroup_counts");
	counter = test_register(client, "tests/shaders/count_groups", 1, 0);
	ck_assert_int_eq(ruda_client_properties(client, &props), RUDA_OK);
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* A fresh result buffer for count_groups: ran, x, y, z. */
static ruda_handle result_buffer(ruda_client *c)
{
	uint32_t zero[4] = {0};
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, zero, sizeof(zero), &h), RUDA_OK);
	return h;
}

/* What the counting kernel saw, against the CPU's count. */
static void expect_ran(ruda_client *c, ruda_handle out, uint32_t x, uint32_t y, uint32_t z)
{
	uint32_t got[4];
	ck_assert_int_eq(ruda_client_read_one(c, out, got), RUDA_OK);
	ck_assert_uint_eq(got[0], x * y * z);
	if (x && y && z) {
		ck_assert_uint_eq(got[1], x);
		ck_assert_uint_eq(got[2], y);
		ck_assert_uint_eq(got[3], z);
	}
}

static void assert_last_error_has(const char *what)
{
	char why[512];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, what), "error \"%s\" does not say \"%s\"", why, what);
}

/* A well-behaved launch, on this client and on another, gives the CPU's
 * answer. */
static void assert_launches_work(void)
{
	ruda_handle out = result_buffer(client);
	ck_assert_int_eq(ruda_client_launch(client, counter, (ruda_count){7, 5, 3}, &out, 1,
					    NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(client, out, 7, 5, 3);
	ck_assert_int_eq(ruda_client_release(client, out), RUDA_OK);

	ruda_client *other = test_connect(&daemon_, "bystander");
	ruda_kernel fill = test_register(other, "fill", 1, 8);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(other, 4096 * 4, &h), RUDA_OK);
	uint32_t push[2] = {0x5eed1234u, 4000};
	ck_assert_int_eq(ruda_client_launch(other, fill, (ruda_count){3, 1, 1}, &h, 1, push,
					    sizeof(push)),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(other), RUDA_OK);
	uint32_t *words = calloc(4096, 4);
	ck_assert_int_eq(ruda_client_read_one(other, h, words), RUDA_OK);
	for (uint32_t i = 0; i < 4096; i++)
		ck_assert_uint_eq(words[i], i < 4000 ? 0x5eed1234u : 0);
	free(words);
	ruda_client_close(other);
	ck_assert(test_daemon_alive(&daemon_));
}

/* A static launch of `count` is refused at sync with `why`, its buffer marked. */
static void expect_refused(ruda_count count, const char *why)
{
	ruda_handle out = result_buffer(client);
	ck_assert_int_eq(ruda_client_launch(client, counter, count, &out, 1, NULL, 0), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has(why);
	ck_assert_int_eq(ruda_client_check(client, &out, 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_client_release(client, out);
}

START_TEST(product_past_32_bits_refused)
{
	uint32_t m = props.max_workgroup_count[0];
	ck_assert_uint_ge(props.max_workgroup_count[1], 65535);
	ck_assert_uint_ge(props.max_workgroup_count[2], 65535);
	ck_assert_uint_ge(m, 65535);
	expect_refused((ruda_count){65535, 65535, 65535},
		       "workgroup count product 65535 x 65535 x 65535 exceeds 2^32-1");
	expect_refused((ruda_count){65535, 65535, 2},
		       "workgroup count product 65535 x 65535 x 2 exceeds 2^32-1");
	expect_refused((ruda_count){2, 65535, 65535}, "exceeds 2^32-1");
	expect_refused((ruda_count){65535, 2, 65535}, "exceeds 2^32-1");
	/* over one dimension's limit: that error, named as before */
	if (m < UINT32_MAX)
		expect_refused((ruda_count){m + 1, m + 1, 1}, "exceeds the device's");
	/* a zero anywhere is a no-op, however large the others */
	ruda_handle out = result_buffer(client);
	ck_assert_int_eq(ruda_client_launch(client, counter, (ruda_count){65535, 65535, 0}, &out,
					    1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(client, out, 0, 0, 0);
	assert_launches_work();
}
END_TEST

/* Captured in a graph: the capture fails, nothing is replayed. */
START_TEST(product_past_32_bits_in_a_capture)
{
	ruda_handle out = result_buffer(client);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch(client, counter, (ruda_count){65535, 65535, 65535},
					    &out, 1, NULL, 0),
			 RUDA_OK);
	ruda_graph *graph = NULL;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("exceeds 2^32-1");
	ck_assert_ptr_null(graph);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(client, out, 0, 0, 0);
	assert_launches_work();
}
END_TEST

/* Dynamic counts are read on the device: past 2^32 together they dispatch
 * nothing (each alone is still clamped to the device's limit). */
START_TEST(dynamic_product_past_32_bits_runs_nothing)
{
	static const uint32_t cases[][3] = {
		{0xffffffffu, 0xffffffffu, 0xffffffffu}, /* clamped to the limits: 65535^3 */
		{65535, 65535, 65535},
		{65535, 65535, 2},
		{2, 0x80000000u, 65535},
	};
	ruda_handle counts;
	ck_assert_int_eq(ruda_client_create(client, cases[0], 12, &counts), RUDA_OK);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ck_assert_int_eq(ruda_client_write(client, counts, 0, cases[i], 12), RUDA_OK);
		ruda_handle out = result_buffer(client);
		ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL,
							    0),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
		uint32_t got[4];
		ck_assert_int_eq(ruda_client_read_one(client, out, got), RUDA_OK);
		ck_assert_msg(got[0] == 0, "case %zu ran %u workgroups", i, got[0]);
		ruda_client_release(client, out);
	}
	/* in range, the same buffer's counts run exactly */
	uint32_t fine[3] = {4, 3, 2};
	ck_assert_int_eq(ruda_client_write(client, counts, 0, fine, 12), RUDA_OK);
	ruda_handle out = result_buffer(client);
	ck_assert_int_eq(ruda_client_launch_dynamic(client, counter, counts, &out, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect_ran(client, out, 4, 3, 2);
	assert_launches_work();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("workgroup_counts");
	TCase *tc = tcase_create("workgroup_counts");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, product_past_32_bits_refused);
	tcase_add_test(tc, product_past_32_bits_in_a_capture);
	tcase_add_test(tc, dynamic_product_past_32_bits_runs_nothing);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
