/*
 * A client that holds the GPU: a kernel that never ends, a stop while it
 * runs, how busy rudactl says the device is meanwhile, and one client
 * allocating until refused. Each test checks that another client still
 * gets correct results beside it.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define ck_assert_status(got, want) ck_assert_msg((got) == (want), "%s (%d), expected %s", \
						 ruda_strerror(got), (int)(got), ruda_strerror(want))

static void sleep_ms(int ms)
{
	struct timespec t = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000};
	nanosleep(&t, NULL);
}

static void expect_error(ruda_client *c, ruda_status got, ruda_status want, const char *needle)
{
	ck_assert_status(got, want);
	char why[512];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, needle), "error \"%s\" lacks \"%s\"", why, needle);
}

/* out[i] = a[i] + b[i] on the device, compared with the CPU's sums. */
static void add_checked(ruda_client *c, uint32_t n, uint64_t seed)
{
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	float *out = malloc(n * sizeof(float));
	for (uint32_t i = 0; i < n; i++) {
		a[i] = (float)((i * 7 + seed) % 1000) * 0.25f;
		b[i] = (float)((i * 13 + seed * 3) % 777) * 0.5f;
	}
	ruda_kernel add = test_register(c, "add_f32", 3, 4);
	ruda_handle h[3];
	ck_assert_status(ruda_client_create(c, a, n * sizeof(float), &h[0]), RUDA_OK);
	ck_assert_status(ruda_client_create(c, b, n * sizeof(float), &h[1]), RUDA_OK);
	ck_assert_status(ruda_client_empty(c, n * sizeof(float), &h[2]), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, add, (ruda_count){(n + 255) / 256, 1, 1}, h, 3, &n,
					    4),
			 RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h[2], out), RUDA_OK);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(out[i] == a[i] + b[i], "element %u: %g, expected %g", i,
			      (double)out[i], (double)(a[i] + b[i]));
	for (int i = 0; i < 3; i++)
		ck_assert_status(ruda_client_release(c, h[i]), RUDA_OK);
	ck_assert_status(ruda_client_kernel_release(c, add), RUDA_OK);
	free(a);
	free(b);
	free(out);
}

/* The attack: one workgroup spinning until a word nobody writes changes. */
static ruda_kernel launch_endless(ruda_client *c, ruda_handle *h)
{
	ruda_kernel hang = test_register(c, "tests/shaders/hang", 1, 0);
	ck_assert_status(ruda_client_empty(c, 16, h), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, hang, (ruda_count){1, 1, 1}, h, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_status(ruda_client_flush(c), RUDA_OK);
	return hang;
}

/* SIGTERM, then wait up to `bound_s`: the exit status, or -1 (then killed). */
static int sigterm_and_wait(struct test_daemon *d, double bound_s, double *took)
{
	double t0 = test_now();
	kill(d->pid, SIGTERM);
	int status;
	while (test_now() - t0 < bound_s) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			*took = test_now() - t0;
			return status;
		}
		sleep_ms(50);
	}
	kill(d->pid, SIGKILL);
	waitpid(d->pid, &status, 0);
	*took = test_now() - t0;
	return -1;
}

/*
 * A kernel that never ends, with a 1 s limit: its client gets
 * RUDA_ERROR_TIMEOUT and is closed; a bystander connected meanwhile is told
 * the device was reset (its buffers were on it) and a client connecting
 * afterwards computes correctly on the re-created device. rudad then still
 * stops cleanly on SIGTERM, the endless work still running in the driver.
 */
START_TEST(endless_kernel_times_out_and_device_recovers)
{
	struct test_daemon d;
	const char *args[] = {"--set", "submission_timeout_ms=1000", NULL};
	test_daemon_start(&d, args);
	ruda_client *bystander = test_connect(&d, "bystander");
	uint8_t data[256], back[256];
	test_fill_random(data, sizeof(data), 26);
	ruda_handle hb;
	ck_assert_status(ruda_client_create(bystander, data, sizeof(data), &hb), RUDA_OK);
	ck_assert_status(ruda_client_sync(bystander), RUDA_OK);

	ruda_client *bad = test_connect(&d, "endless");
	ruda_handle h;
	double t0 = test_now();
	launch_endless(bad, &h);
	ruda_status st = ruda_client_sync(bad);
	double took = test_now() - t0;
	expect_error(bad, st, RUDA_ERROR_TIMEOUT, "time limit");
	/* the limit acted: not before it, and long before forever */
	ck_assert_msg(took >= 0.9 && took < 60, "timed out after %.2f s", took);
	/* the connection is closed with the reason: every later call says it */
	expect_error(bad, ruda_client_sync(bad), RUDA_ERROR_TIMEOUT, "submission_timeout_ms");
	uint32_t words[4];
	expect_error(bad, ruda_client_read_one(bad, h, words), RUDA_ERROR_TIMEOUT, "time limit");
	ruda_client_close(bad);

	/* the bystander's buffer was on the replaced device: it is told why */
	expect_error(bystander, ruda_client_read_one(bystander, hb, back), RUDA_ERROR_DEVICE_LOST,
		     "another client's submission ran past the time limit");
	ruda_client_close(bystander);

	/* a new client at once: a fresh device, correct results, twice */
	ruda_client *fresh = test_connect(&d, "after the timeout");
	add_checked(fresh, 10000, 1);
	ck_assert_status(ruda_client_create(fresh, data, sizeof(data), &hb), RUDA_OK);
	ck_assert_status(ruda_client_read_one(fresh, hb, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, sizeof(data)), 0);
	add_checked(fresh, 4096, 2);
	ruda_daemon_stats stats = test_wait_for_stats(fresh, 1, sizeof(data));
	ck_assert_uint_eq(stats.sessions, 1);
	ruda_client_close(fresh);
	ck_assert(test_daemon_alive(&d));
	/* the endless kernel still spins in the driver: SIGTERM still ends
	 * rudad at once, status 0, socket removed */
	double stop;
	int status = sigterm_and_wait(&d, 15, &stop);
	ck_assert_msg(status >= 0, "rudad did not stop within 15 s of SIGTERM");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "exit status %d", status);
	ck_assert_msg(access(d.socket_path, F_OK) < 0, "rudad left its socket behind");
	test_remove_tree(d.dir);
}
END_TEST

/*
 * No submission limit, a kernel that never ends: SIGTERM still ends rudad
 * within its stop timeout (exit status 3, the socket removed), though the
 * driver's thread never returns.
 */
START_TEST(sigterm_ends_rudad_during_an_endless_kernel)
{
	struct test_daemon d;
	const char *args[] = {"--set", "submission_timeout_ms=0", "--set", "stop_timeout_ms=2000",
			      NULL};
	test_daemon_start(&d, args);
	ruda_client *bad = test_connect(&d, "endless");
	ruda_handle h;
	launch_endless(bad, &h);
	sleep_ms(500); /* running in the driver by now */
	double took;
	int status = sigterm_and_wait(&d, 15, &took);
	ck_assert_msg(status >= 0, "rudad did not stop within 15 s of SIGTERM");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 3,
		      "exit status %d (after %.1f s), expected exit 3", status, took);
	ck_assert_msg(took >= 1.5, "forced exit after only %.2f s", took);
	ck_assert_msg(access(d.socket_path, F_OK) < 0, "rudad left its socket behind");
	/* the client sees the daemon gone, not a hang */
	ck_assert_status(ruda_client_sync(bad), RUDA_ERROR_DISCONNECTED);
	ruda_client_close(bad);
	test_remove_tree(d.dir);
}
END_TEST

/* rudactl --json status's busy_percent for device 0. */
static double busy_percent(const struct test_daemon *d)
{
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "%s --socket %s status --json", test_build_path("rudactl"),
		 d->socket_path);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	static char out[1 << 16];
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	const char *at = strstr(out, "\"busy_percent\"");
	ck_assert_msg(at, "no busy_percent in %s", out);
	at = strchr(at, ':');
	ck_assert_ptr_nonnull(at);
	char *end;
	double v = strtod(at + 1, &end);
	ck_assert_msg(end != at + 1, "busy_percent not a number in %s", out);
	return v;
}

/* A launch that holds the device shows it busy, not idle. */
START_TEST(hung_launch_shows_busy)
{
	struct test_daemon d;
	const char *args[] = {"--set", "submission_timeout_ms=0", "--set", "stop_timeout_ms=2000",
			      NULL};
	test_daemon_start(&d, args);
	double idle = busy_percent(&d);
	ck_assert_msg(idle < 50, "idle device %.1f%% busy", idle);
	ruda_client *bad = test_connect(&d, "endless");
	ruda_handle h;
	launch_endless(bad, &h);
	sleep_ms(300);
	double busy = busy_percent(&d);
	ck_assert_msg(busy >= 90, "a hung launch shows %.1f%% busy", busy);
	double took;
	int status = sigterm_and_wait(&d, 15, &took);
	ck_assert_msg(status >= 0, "rudad did not stop within 15 s of SIGTERM");
	ruda_client_close(bad);
	test_remove_tree(d.dir);
}
END_TEST

/* In a child: as uid/gid 65534, connect, write `size` random bytes into a
 * new buffer and read them back; exit 0 when byte-exact. */
static int other_user_round_trip(const struct test_daemon *d, uint64_t size)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = d->socket_path, .client_name = "other"};
		ruda_client *c = NULL;
		if (ruda_client_connect(&o, &c) != RUDA_OK)
			_exit(3);
		uint8_t *data = malloc(size), *back = malloc(size);
		test_fill_random(data, size, 65534);
		ruda_handle h;
		if (ruda_client_create(c, data, size, &h) != RUDA_OK ||
		    ruda_client_read_one(c, h, back) != RUDA_OK)
			_exit(4);
		_exit(memcmp(data, back, size) == 0 ? 0 : 5);
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/*
 * With the default quotas (auto: half the device's heap per client, three
 * quarters per uid), a client allocating until refused gets
 * RUDA_ERROR_QUOTA long before the heap runs out; a second client of the
 * same uid gets the uid's rest, and another user still finds room and
 * reads its bytes back exactly.
 */
START_TEST(default_quotas_leave_room_for_others)
{
	struct test_daemon d;
	/* quotas, not timeouts: a loaded machine's zero fills of a gigabyte
	 * must not meet the default submission limit here */
	const char *args[] = {"--set", "socket_mode=0666", "--set", "submission_timeout_ms=0",
			      NULL};
	if (geteuid() != 0) {
		printf("SKIP default_quotas_leave_room_for_others: the other user needs root's "
		       "setresuid\n");
		return;
	}
	test_daemon_start(&d, args);
	ck_assert_int_eq(chmod(d.dir, 0711), 0); /* the other user reaches the socket */
	ruda_client *greedy = test_connect(&d, "greedy");
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(greedy, &p);
	/* sixteenths of the heap, or smaller parts where a sixteenth is over
	 * the largest buffer (an H200's 140 GiB heap, 4 GiB buffers) */
	int parts = 16;
	while (p.device_local_bytes / (uint64_t)parts > p.max_buffer_size && parts < 64)
		parts *= 2;
	uint64_t heap = p.device_local_bytes, chunk = heap / (uint64_t)parts;
	enum { MAX = 64 };
	ruda_handle h[MAX];
	int n = 0;
	ruda_status st;
	while ((st = ruda_client_try_empty(greedy, chunk, &h[n])) == RUDA_OK && n < MAX - 1)
		n++;
	expect_error(greedy, st, RUDA_ERROR_QUOTA, "quota");
	/* refused at its half of the heap, not by the driver when it is full */
	ck_assert_int_eq(n, parts / 2);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_status(ruda_client_memory_usage(greedy, &u), RUDA_OK);
	ck_assert_uint_eq(u.quota, heap / 2);

	/* a second client of the same uid: the uid's three quarters */
	ruda_client *greedy2 = test_connect(&d, "greedy too");
	int n2 = 0;
	while ((st = ruda_client_try_empty(greedy2, chunk, &h[n + n2])) == RUDA_OK &&
	       n + n2 < MAX - 1)
		n2++;
	expect_error(greedy2, st, RUDA_ERROR_QUOTA, "quota");
	ck_assert_int_eq(n + n2, parts * 3 / 4);

	/* the last quarter is another user's */
	ck_assert_int_eq(other_user_round_trip(&d, chunk), 0);
	/* and the greedy clients still work within their shares */
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 7);
	ck_assert_status(ruda_client_release(greedy, h[0]), RUDA_OK);
	ruda_handle small;
	ck_assert_status(ruda_client_create(greedy, data, sizeof(data), &small), RUDA_OK);
	ck_assert_status(ruda_client_read_one(greedy, small, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	ruda_client_close(greedy2);
	ruda_client_close(greedy);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hang");
	TCase *tc = tcase_create("hang");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, endless_kernel_times_out_and_device_recovers);
	tcase_add_test(tc, sigterm_ends_rudad_during_an_endless_kernel);
	tcase_add_test(tc, hung_launch_shows_busy);
	tcase_add_test(tc, default_quotas_leave_room_for_others);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
