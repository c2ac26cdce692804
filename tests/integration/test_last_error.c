/*
 * ruda_client_last_error is per thread and per client: two threads failing
 * on one client at the same time each read back their own message; success
 * leaves it; another client's failure, or another thread's, does not
 * touch it.
 */
#include <check.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_last_error");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* Two failures rudad explains differently. */
static ruda_status fail_export(ruda_client *c)
{
	ruda_resource r = RUDA_RESOURCE_INIT;
	return ruda_client_get_resource(c, (ruda_handle){.id = 987654321, .size = 4}, &r);
}

static const uint32_t not_spirv[] = {0xdeadbeef, 1, 2, 3, 4, 5, 6, 7};

static ruda_status fail_kernel(ruda_client *c)
{
	ruda_kernel_desc k = {.struct_size = sizeof(k), .spirv = not_spirv,
			      .spirv_size = sizeof(not_spirv), .entry_point = "main",
			      .binding_count = 1};
	ruda_kernel kernel;
	return ruda_client_kernel_register(c, &k, &kernel);
}

static char export_msg[512], kernel_msg[512];

struct worker {
	ruda_status (*provoke)(ruda_client *c);
	ruda_status status;
	const char *expected, *other; /* in its messages, in the other's */
	int rounds, wrong, bad_status;
	char seen[512];
};

static void *work(void *arg)
{
	struct worker *w = arg;
	for (int i = 0; i < w->rounds; i++) {
		ruda_status st = w->provoke(client);
		/* a success between the failure and the read: no effect */
		ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
		if (st != w->status || ruda_client_memory_usage(client, &u) != RUDA_OK)
			w->bad_status++;
		char msg[512];
		ruda_client_last_error(client, msg, sizeof(msg));
		if ((!strstr(msg, w->expected) || strstr(msg, w->other)) && !w->wrong++)
			memcpy(w->seen, msg, sizeof(msg));
	}
	return NULL;
}

START_TEST(two_threads_read_their_own)
{
	/* each message alone first */
	ck_assert_int_eq(fail_export(client), RUDA_ERROR_INVALID_HANDLE);
	ruda_client_last_error(client, export_msg, sizeof(export_msg));
	ck_assert_int_eq(fail_kernel(client), RUDA_ERROR_INVALID_KERNEL);
	ruda_client_last_error(client, kernel_msg, sizeof(kernel_msg));
	ck_assert_msg(export_msg[0] && !strstr(export_msg, "SPIR-V") &&
			      strstr(kernel_msg, "not a SPIR-V module"),
		      "\"%s\" / \"%s\"", export_msg, kernel_msg);

	struct worker a = {.provoke = fail_export, .status = RUDA_ERROR_INVALID_HANDLE,
			   .expected = export_msg, .other = "SPIR-V", .rounds = 300};
	struct worker b = {.provoke = fail_kernel, .status = RUDA_ERROR_INVALID_KERNEL,
			   .expected = "not a SPIR-V module", .other = export_msg, .rounds = 300};
	pthread_t ta, tb;
	ck_assert_int_eq(pthread_create(&ta, NULL, work, &a), 0);
	ck_assert_int_eq(pthread_create(&tb, NULL, work, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	ck_assert_int_eq(a.bad_status, 0);
	ck_assert_int_eq(b.bad_status, 0);
	ck_assert_msg(!a.wrong, "export thread read another's message %d times: \"%s\"", a.wrong,
		      a.seen);
	ck_assert_msg(!b.wrong, "kernel thread read another's message %d times: \"%s\"", b.wrong,
		      b.seen);
	/* this thread's own is still its last (the kernel's) */
	char msg[512];
	ruda_client_last_error(client, msg, sizeof(msg));
	ck_assert_ptr_nonnull(strstr(msg, "not a SPIR-V module"));
}
END_TEST

static void *read_only(void *arg)
{
	ruda_client_last_error(client, arg, 512);
	return NULL;
}

START_TEST(per_client_and_fresh_threads)
{
	ruda_client *other = test_connect(&daemon_, "test_last_error other");
	ck_assert_int_eq(fail_export(client), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(fail_kernel(other), RUDA_ERROR_INVALID_KERNEL);
	char msg[512];
	ruda_client_last_error(client, msg, sizeof(msg));
	ck_assert_msg(msg[0] && !strstr(msg, "SPIR-V"), "%s", msg);
	char theirs[512];
	ruda_client_last_error(other, theirs, sizeof(theirs));
	ck_assert_str_ne(msg, theirs);
	/* a thread that never failed on the client reads "" */
	char fresh[512] = "x";
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, read_only, fresh), 0);
	pthread_join(t, NULL);
	ck_assert_str_eq(fresh, "");
	ck_assert_uint_eq(ruda_client_last_error(client, NULL, 0), strlen(msg));
	ruda_client_close(other);
	/* a new client (maybe at the closed one's address) starts with none */
	other = test_connect(&daemon_, "test_last_error third");
	ruda_client_last_error(other, theirs, sizeof(theirs));
	ck_assert_str_eq(theirs, "");
	ruda_client_close(other);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("last_error");
	TCase *tc = tcase_create("last_error");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, two_threads_read_their_own);
	tcase_add_test(tc, per_client_and_fresh_threads);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
