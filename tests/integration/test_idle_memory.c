/*
 * An idle rudad gives host memory back: after sixteen clients came, worked
 * (buffers of 128 KiB to 4 MiB made, filled and dropped in turn, kernels
 * run, results checked) and went, its resident size returns to within
 * 1.5 x what it was before. On lavapipe "device" memory is the driver's
 * malloc, so this is also glibc's heap giving pages back.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

enum { CLIENTS = 16, BUFFERS = 6, FLOATS = 1 << 20, MIXED = 24 }; /* 4 MiB a buffer */

/* One client: buffers of 4 MiB, a kernel over them, results checked. */
static int client_work(const struct test_daemon *d, int index)
{
	ruda_client *c;
	ruda_kernel add;
	int failed = test_child_connect_add(d->socket_path, "stress", &c, &add);
	if (failed)
		return failed;
	float *a = malloc(FLOATS * 4), *out = malloc(FLOATS * 4);
	for (int i = 0; i < FLOATS; i++)
		a[i] = (float)(i % 1000 + index);
	ruda_handle h[BUFFERS];
	for (int i = 0; i < BUFFERS; i++)
		if (ruda_client_create(c, a, FLOATS * 4, &h[i]) != RUDA_OK)
			return 4;
	/* buffers of many sizes, 128 KiB to 8 MiB, made and dropped in turn:
	 * what leaves holes in an allocator's heap */
	ruda_handle mixed[MIXED];
	uint8_t *fill = malloc(32u << 17);
	memset(fill, index, 32u << 17);
	for (int round = 0; round < 4; round++) {
		for (int i = 0; i < MIXED; i++) {
			size_t size = (size_t)(1 + (i * 7 + index + round) % 32) << 17;
			if (ruda_client_create(c, fill, size, &mixed[i]) != RUDA_OK)
				return 7;
		}
		for (int i = 0; i < MIXED; i++)
			if (i % 2 == round % 2)
				ruda_client_release(c, mixed[i]);
		for (int i = 0; i < MIXED; i++)
			if (i % 2 != round % 2)
				ruda_client_release(c, mixed[i]);
	}
	free(fill);
	if (ruda_client_sync(c) != RUDA_OK)
		return 8;
	uint32_t n = FLOATS;
	for (int i = 0; i + 2 < BUFFERS; i += 3)
		ruda_client_launch(c, add, (ruda_count){FLOATS / 64, 1, 1}, &h[i], 3, &n, 4);
	if (ruda_client_read_one(c, h[2], out) != RUDA_OK)
		return 5;
	for (int i = 0; i < FLOATS; i++)
		if (out[i] != 2 * a[i])
			return 6;
	ruda_client_close(c);
	return 0;
}

START_TEST(idle_rss_comes_back)
{
	if (RUDA_SAN_FLAGS[0]) {
		printf("SKIP idle_rss_comes_back: a sanitizer's allocator keeps freed memory "
		       "(%s)\n", RUDA_SAN_FLAGS);
		return;
	}
	struct test_daemon d;
	const char *const args[] = {"--set", "freed_memory_keep_ms=200", NULL};
	test_daemon_start(&d, args);
	/* warm: the kernel compiled, one client's worth of state made once */
	ck_assert_int_eq(client_work(&d, 0), 0);
	ruda_client *watch = test_connect(&d, "watch");
	test_wait_for_stats(watch, 1, 0);
	sleep(1);
	long before = test_rss_kib(d.pid);

	pid_t pids[CLIENTS];
	for (int i = 0; i < CLIENTS; i++) {
		pids[i] = fork();
		ck_assert_int_ge(pids[i], 0);
		if (pids[i] == 0)
			_exit(client_work(&d, i + 1));
	}
	long peak = 0;
	for (int i = 0; i < CLIENTS; i++) {
		int st;
		long rss = test_rss_kib(d.pid);
		peak = rss > peak ? rss : peak;
		ck_assert_int_eq(waitpid(pids[i], &st, 0), pids[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "client %d: status %d", i, st);
	}
	ruda_daemon_stats s = test_wait_for_stats(watch, 1, 0);
	ck_assert_uint_eq(s.device_bytes, 0);
	/* idle now: wait (10 s at most) for the resident size to come back */
	double t0 = test_now();
	long rss = test_rss_kib(d.pid);
	while (rss > before * 3 / 2 && test_now() - t0 < 10) {
		usleep(100000);
		rss = test_rss_kib(d.pid);
	}
	fprintf(stderr, "rudad VmRSS: %ld kB before, %ld kB seen during, %ld kB idle after %.1f s\n",
		before, peak, rss, test_now() - t0);
	ck_assert_msg(rss <= before * 3 / 2, "idle RSS %ld kB, before %ld kB", rss, before);
	ck_assert(test_daemon_alive(&d));
	ruda_client_close(watch);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("idle_memory");
	TCase *tc = tcase_create("idle_memory");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, idle_rss_comes_back);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
