/* Transfers on a device without host import (VK_EXT_external_memory_host):
 * forced here with RUDA_NO_HOST_IMPORT=1, rudad moves every transfer through
 * a bounce buffer of its own. The same byte-exact round trips as
 * test_transfer. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	setenv("RUDA_NO_HOST_IMPORT", "1", 1); /* inherited by the daemon */
	test_daemon_start(&daemon_, NULL);
	unsetenv("RUDA_NO_HOST_IMPORT");
	client = test_connect(&daemon_, "test_bounce");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static void round_trip(size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size ? size : 1), *back = malloc(size ? size : 1);
	test_fill_random(data, size, seed);
	memset(back, 0xa5, size);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, data, size, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "%zu bytes differ after a round trip", size);
	ruda_client_release(client, h);
	free(data);
	free(back);
}

START_TEST(device_reports_no_import)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(client, &p), RUDA_OK);
	ck_assert_int_eq(p.host_import, 0);
}
END_TEST

START_TEST(odd_sizes_through_the_bounce_buffer)
{
	static const size_t sizes[] = {1, 3, 4095, 4097, (1u << 20) + 1};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		round_trip(sizes[i], 10 + i);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* More than the arena in one transfer: chunks pipelined through it, and
 * through the bounce buffer at the same offsets. */
START_TEST(larger_than_the_arena)
{
	round_trip(40u << 20, 3);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* Kernels and strided reads see the bytes too. */
START_TEST(tensor_gather_through_the_bounce_buffer)
{
	uint32_t m[6] = {1, 2, 3, 4, 5, 6}, t[6];
	ruda_layout_desc d = {.struct_size = sizeof(ruda_layout_desc),
		.strategy = RUDA_LAYOUT_CONTIGUOUS, .rank = 2, .shape = {2, 3},
			      .elem_size = 4};
	ruda_layout l = RUDA_LAYOUT_INIT;
	ck_assert_int_eq(ruda_client_create_tensor(client, &d, m, &l), RUDA_OK);
	ruda_copy_desc c = {.struct_size = sizeof(ruda_copy_desc),
		.handle = l.handle, .rank = 2, .shape = {3, 2}, .strides = {1, 3},
			    .elem_size = 4};
	void *dst = t;
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_OK);
	const uint32_t expect[6] = {1, 4, 2, 5, 3, 6};
	ck_assert_int_eq(memcmp(t, expect, sizeof(t)), 0);
}
END_TEST

/* Staging regions need host import: refused, with the reason. */
START_TEST(staging_unsupported)
{
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_create(client, 4096, &r), RUDA_ERROR_UNSUPPORTED);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "import"));
	round_trip(1000, 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("bounce");
	TCase *tc = tcase_create("bounce");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, device_reports_no_import);
	tcase_add_test(tc, odd_sizes_through_the_bounce_buffer);
	tcase_add_test(tc, larger_than_the_arena);
	tcase_add_test(tc, tensor_gather_through_the_bounce_buffer);
	tcase_add_test(tc, staging_unsupported);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
