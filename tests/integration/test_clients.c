/* Many processes, one daemon: isolation, and clean-up after a killed one. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

/* One client process: its own data, its own kernel runs, its own checks.
 * Exits 0 only if every result is right. */
static int client_work(int index)
{
	ruda_client *c;
	ruda_kernel add;
	int failed = test_child_connect_add(daemon_.socket_path, "worker", &c, &add);
	if (failed)
		return failed;
	enum { N = 65536 };
	static float a[N], b[N], out[N];
	for (int round = 0; round < 10; round++) {
		for (int i = 0; i < N; i++) {
			a[i] = (float)(index * 1000 + round);
			b[i] = (float)i;
		}
		ruda_handle h[3];
		ruda_client_create(c, a, sizeof(a), &h[0]);
		ruda_client_create(c, b, sizeof(b), &h[1]);
		ruda_client_empty(c, sizeof(out), &h[2]);
		uint32_t n = N;
		ruda_client_launch(c, add, (ruda_count){64, 1, 1}, h, 3, &n, 4);
		if (ruda_client_read_one(c, h[2], out) != RUDA_OK)
			return 4;
		for (int i = 0; i < N; i++)
			if (out[i] != a[i] + b[i])
				return 5;
		for (int i = 0; i < 3; i++)
			ruda_client_release(c, h[i]);
	}
	if (ruda_client_sync(c) != RUDA_OK)
		return 6;
	ruda_client_close(c);
	return 0;
}

START_TEST(four_processes_at_once)
{
	pid_t pids[4];
	for (int i = 0; i < 4; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(client_work(i));
	}
	for (int i = 0; i < 4; i++) {
		int status;
		ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "client %d failed with status %d", i, status);
	}
	ruda_client *c = test_connect(&daemon_, "observer");
	ruda_daemon_stats s = test_wait_for_stats(c, 1, 0);
	ck_assert_uint_eq(s.sessions, 1);
	ck_assert_uint_eq(s.device_bytes, 0);
	ruda_client_close(c);
}
END_TEST

/* SIGKILL in the middle of work: the others go on, its memory comes back. */
START_TEST(killed_client_is_cleaned_up)
{
	ruda_client *survivor = test_connect(&daemon_, "survivor");
	ruda_handle mine;
	static uint8_t data[1 << 20], back[1 << 20];
	test_fill_random(data, sizeof(data), 42);
	ck_assert_int_eq(ruda_client_create(survivor, data, sizeof(data), &mine), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(survivor), RUDA_OK);
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(survivor, &base), RUDA_OK);
	/* the device's compile worker started before counting: it stays */
	test_register(survivor, "fill", 1, 8);
	int fds_before = test_settled_fds(daemon_.pid);

	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = daemon_.socket_path, .client_name = "victim"};
		ruda_client *c;
		if (ruda_client_connect(&o, &c) != RUDA_OK)
			_exit(1);
		ruda_kernel fill;
		size_t size;
		uint32_t *spirv = test_load_spirv("fill", &size);
		ruda_kernel_desc desc = {sizeof(ruda_kernel_desc), spirv, size, "main", 1, 8};
		if (ruda_client_kernel_register(c, &desc, &fill) != RUDA_OK)
			_exit(1);
		ruda_handle big[8];
		for (int i = 0; i < 8; i++)
			ruda_client_empty(c, 8u << 20, &big[i]);
		ruda_client_sync(c);
		if (write(ready[1], "x", 1) != 1)
			_exit(1);
		/* launch forever: the kill lands mid-stream */
		for (uint32_t i = 0;; i++) {
			uint32_t push[2] = {i, 2u << 20};
			ruda_client_launch(c, fill, (ruda_count){64, 1, 1}, &big[i % 8], 1, push, 8);
			if (i % 64 == 0)
				ruda_client_flush(c);
		}
	}
	close(ready[1]); /* a child that dies early reads as end of file */
	char x;
	ck_assert_int_eq(read(ready[0], &x, 1), 1);
	usleep(200 * 1000);
	ruda_daemon_stats busy = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(survivor, &busy), RUDA_OK);
	ck_assert_uint_eq(busy.sessions, 2);
	ck_assert_uint_ge(busy.device_bytes, base.device_bytes + (64u << 20));
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	close(ready[0]);

	ruda_daemon_stats after = test_wait_for_stats(survivor, 1, base.device_bytes);
	ck_assert_uint_eq(after.sessions, 1);
	ck_assert_uint_eq(after.device_bytes, base.device_bytes);
	ck_assert_uint_eq(after.device_buffers, base.device_buffers);
	ck_assert_int_eq(test_settled_fds(daemon_.pid), fds_before);
	ck_assert_int_eq(ruda_client_read_one(survivor, mine, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	ruda_client_close(survivor);
}
END_TEST

/* One client used from several threads at once. */
struct thread_arg {
	ruda_client *client;
	int index;
	int ok;
};

#include <pthread.h>

static void *thread_work(void *p)
{
	struct thread_arg *t = p;
	enum { SIZE = 300000 };
	uint8_t *data = malloc(SIZE), *back = malloc(SIZE);
	t->ok = 1;
	for (int round = 0; round < 20 && t->ok; round++) {
		test_fill_random(data, SIZE, (uint64_t)(t->index * 100 + round));
		ruda_handle h;
		if (ruda_client_create(t->client, data, SIZE, &h) != RUDA_OK ||
		    ruda_client_read_one(t->client, h, back) != RUDA_OK ||
		    memcmp(data, back, SIZE) != 0)
			t->ok = 0;
		ruda_client_release(t->client, h);
		if (round % 5 == 0 && ruda_client_sync(t->client) != RUDA_OK)
			t->ok = 0;
	}
	free(data);
	free(back);
	return NULL;
}

START_TEST(threads_share_a_client)
{
	ruda_client *c = test_connect(&daemon_, "threads");
	pthread_t th[6];
	struct thread_arg args[6];
	for (int i = 0; i < 6; i++) {
		args[i] = (struct thread_arg){.client = c, .index = i};
		pthread_create(&th[i], NULL, thread_work, &args[i]);
	}
	for (int i = 0; i < 6; i++) {
		pthread_join(th[i], NULL);
		ck_assert_msg(args[i].ok, "thread %d saw wrong data or an error", i);
	}
	ruda_client_close(c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("clients");
	TCase *tc = tcase_create("sharing");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, four_processes_at_once);
	tcase_add_test(tc, killed_client_is_cleaned_up);
	tcase_add_test(tc, threads_share_a_client);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
