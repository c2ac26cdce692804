/* Allocation modes and windows, and buffers exported as file descriptors. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_allocation");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static uint64_t pages(void)
{
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	return u.device_pages;
}

struct window_task {
	ruda_handle h[3];
	const uint8_t *data;
	size_t size;
};

static void make_three(void *user)
{
	struct window_task *t = user;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ruda_client_create(client, t->data, t->size, &t->h[i]), RUDA_OK);
}

/* In a dedicated window every buffer gets memory of its own, exportable;
 * after it, buffers are pooled again. */
START_TEST(dedicated_window_exports)
{
	enum { SIZE = 100000 };
	uint8_t *data = malloc(SIZE);
	test_fill_random(data, SIZE, 1);
	uint64_t before = pages();
	struct window_task t = {.data = data, .size = SIZE};
	ck_assert_int_eq(ruda_client_allocation_window(client, RUDA_ALLOCATION_DEDICATED,
						       make_three, &t),
			 RUDA_OK);
	ck_assert_uint_eq(pages(), before + 3);
	ck_assert_int_eq(ruda_client_sync_buffers(client, t.h, 3), RUDA_OK);
	ruda_resource r = RUDA_RESOURCE_INIT;
	ck_assert_int_eq(ruda_client_get_resource(client, t.h[1], &r), RUDA_OK);
	ck_assert_int_ge(r.fd, 0);
	ck_assert_uint_eq(r.size, SIZE);
	ck_assert_uint_eq(r.offset, 0);
	ck_assert_uint_ge(r.memory_size, SIZE);
	struct stat st;
	ck_assert_int_eq(fstat(r.fd, &st), 0);
	/* a second export is another fd of the same memory */
	ruda_resource again = RUDA_RESOURCE_INIT;
	ck_assert_int_eq(ruda_client_get_resource(client, t.h[1], &again), RUDA_OK);
	ck_assert_int_ne(again.fd, r.fd);
	ck_assert_uint_eq(again.memory_size, r.memory_size);
	ck_assert_int_eq(memcmp(again.device_uuid, r.device_uuid, sizeof(r.device_uuid)), 0);
	close(again.fd);
	close(r.fd);
	/* the window is over: a new small buffer is pooled and not exportable */
	ruda_handle pooled;
	ck_assert_int_eq(ruda_client_create(client, data, 1000, &pooled), RUDA_OK);
	ck_assert_int_eq(ruda_client_get_resource(client, pooled, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "dedicated"));
	/* exported memory outlives nothing it should: released buffers free it */
	for (int i = 0; i < 3; i++)
		ruda_client_release(client, t.h[i]);
	ruda_client_release(client, pooled);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	test_wait_for_stats(client, 1, 0);
	ck_assert_uint_le(pages(), before + 1);
	free(data);
}
END_TEST

START_TEST(get_resource_refusals)
{
	ruda_resource r = RUDA_RESOURCE_INIT;
	ruda_handle ghost = {.id = 77, .size = 4};
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, &r), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, NULL),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_allocation_mode(client, (ruda_allocation_mode)7),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_allocation_window(client, RUDA_ALLOCATION_DEDICATED, NULL,
						       NULL),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* Persistent buffers keep to pages of their own: transient buffers freed
 * around them leave whole pages that cleanup gives back. */
START_TEST(persistent_buffers_keep_apart)
{
	uint64_t before = pages();
	ck_assert_int_eq(ruda_client_allocation_mode(client, RUDA_ALLOCATION_PERSISTENT),
			 RUDA_OK);
	ruda_handle weights[4], scratch[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_empty(client, 50000, &weights[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_allocation_mode(client, RUDA_ALLOCATION_AUTO), RUDA_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_empty(client, 50000, &scratch[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	uint64_t both = pages();
	ck_assert_uint_ge(both, before + 1);
	for (int i = 0; i < 4; i++)
		ruda_client_release(client, scratch[i]);
	ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	/* the transient page went; the persistent one holds the weights */
	ck_assert_uint_eq(pages(), both - 1);
	uint8_t data[50000], back[50000];
	test_fill_random(data, sizeof(data), 3);
	ck_assert_int_eq(ruda_client_write(client, weights[2], 0, data, sizeof(data)), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, weights[2], back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	for (int i = 0; i < 4; i++)
		ruda_client_release(client, weights[i]);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allocation");
	TCase *tc = tcase_create("allocation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, dedicated_window_exports);
	tcase_add_test(tc, get_resource_refusals);
	tcase_add_test(tc, persistent_buffers_keep_apart);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
