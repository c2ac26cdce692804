/*
 * Compile bombs the checks at register cannot see (issue 26): a small
 * module whose compilation explodes in the driver (tests/shaders/
 * compile_bomb.comp: a loop the driver unrolls n times, n a specialization
 * constant). rudad compiles each kernel first in its compile worker
 * (daemon/exec/compile_worker.h); past compile_timeout_ms or compile_memory_max
 * the worker is killed and the kernel refused with
 * RUDA_ERROR_INVALID_KERNEL, a retry is refused at once, a fresh worker
 * compiles the next kernel, and another client's kernels keep giving right
 * answers throughout.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

/* The bomb's n: practically never done compiling on lavapipe (and
 * hundreds of MB more every few seconds) */
#define BOMB_N 1000000u
#define TIMEOUT_MS 1500

static struct test_daemon daemon_;

static void stop_daemon(void)
{
	test_daemon_stop(&daemon_);
}

/* rudad's children: how many, how many of them zombies, and one pid. */
static int children(pid_t parent, int *zombies, pid_t *one)
{
	DIR *dir = opendir("/proc");
	ck_assert_ptr_nonnull(dir);
	int n = 0;
	*zombies = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		char path[300], text[512];
		if (e->d_name[0] < '0' || e->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(text, 1, sizeof(text) - 1, f);
		fclose(f);
		text[len] = '\0';
		const char *end = strrchr(text, ')');
		char state;
		int ppid;
		if (!end || sscanf(end + 1, " %c %d", &state, &ppid) != 2 || ppid != parent)
			continue;
		n++;
		if (state == 'Z')
			(*zombies)++;
		if (one)
			*one = (pid_t)atoi(e->d_name);
	}
	closedir(dir);
	return n;
}

/* Wait (up to 10 s) until rudad has exactly `want` children, none a zombie. */
static void expect_children(int want)
{
	int n = 0, zombies = 0;
	for (int i = 0; i < 100; i++) {
		n = children(daemon_.pid, &zombies, NULL);
		if (n == want && zombies == 0)
			return;
		usleep(100 * 1000);
	}
	ck_abort_msg("rudad has %d children (%d zombies), expected %d", n, zombies, want);
}

static ruda_status register_bomb(ruda_client *c, uint32_t n, ruda_kernel *k, char *why,
				 size_t len)
{
	size_t size;
	uint32_t *spirv = test_load_spirv("tests/shaders/compile_bomb", &size);
	ruda_spec_constant spec = {.id = 0, .size = 4, .value = n};
	ruda_kernel_desc desc = {sizeof(desc), spirv, size, "main", 1, 0, &spec, 1};
	ruda_status st = ruda_client_kernel_register(c, &desc, k);
	free(spirv);
	why[0] = '\0';
	if (st != RUDA_OK)
		ruda_client_last_error(c, why, len);
	return st;
}

/* The bomb's kernel with a harmless n compiles and computes what the CPU
 * does. */
static void expect_small_bomb_runs(ruda_client *c, uint32_t n)
{
	ruda_kernel k;
	char why[512];
	ruda_status st = register_bomb(c, n, &k, why, sizeof(why));
	ck_assert_msg(st == RUDA_OK, "n = %u: status %d (%s)", n, st, why);
	uint32_t data[8] = {3, 1, 4, 1, 5, 9, 2, 6}, back[8];
	uint32_t x = data[0];
	for (uint32_t i = 0; i < n; i++)
		x = x * (i + 3u) + (data[i & 7u] ^ x);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, NULL, 0), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_uint_eq(back[0], x);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ck_assert_int_eq(ruda_client_kernel_release(c, k), RUDA_OK);
}

START_TEST(bomb_past_the_deadline_is_refused)
{
	char timeout[64];
	snprintf(timeout, sizeof(timeout), "--set=compile_timeout_ms=%d", TIMEOUT_MS);
	test_daemon_start(&daemon_, (const char *[]){timeout, NULL});
	/* the worker is up once a first kernel compiled */
	ruda_client *c = test_connect(&daemon_, "first");
	expect_small_bomb_runs(c, 4);
	ruda_client_close(c);
	expect_children(1);
	int fds = test_settled_fds(daemon_.pid);

	struct test_good_client good;
	test_good_client_start(&daemon_, &good);
	c = test_connect(&daemon_, "bomber");

	ruda_kernel k;
	char why[512];
	double t0 = test_now();
	ruda_status st = register_bomb(c, BOMB_N, &k, why, sizeof(why));
	double took = test_now() - t0;
	ck_assert_msg(st == RUDA_ERROR_INVALID_KERNEL, "status %d (%s)", st, why);
	ck_assert_msg(strstr(why, "took longer than compile_timeout_ms (1500 ms)"), "%s", why);
	/* the deadline acted: not before it, and long before the bomb's end */
	ck_assert_msg(took >= TIMEOUT_MS / 1000.0 && took < 60, "refused after %.1f s", took);

	/* again: refused at once, without compiling (well under the deadline) */
	t0 = test_now();
	st = register_bomb(c, BOMB_N, &k, why, sizeof(why));
	took = test_now() - t0;
	ck_assert_msg(st == RUDA_ERROR_INVALID_KERNEL, "status %d (%s)", st, why);
	ck_assert_msg(strstr(why, "compile_timeout_ms") && strstr(why, "refused earlier"), "%s",
		      why);
	ck_assert_msg(took < TIMEOUT_MS / 1000.0, "the retry took %.1f s", took);

	/* a fresh worker compiles the next kernels */
	expect_small_bomb_runs(c, 5);
	expect_small_bomb_runs(c, 6);
	ruda_client_close(c);
	test_good_client_stop(&good);

	/* the killed worker was reaped; no descriptor of it is left */
	expect_children(1);
	int after = test_settled_fds(daemon_.pid);
	ck_assert_msg(after == fds, "rudad had %d fds with its worker, %d after a kill", fds,
		      after);
	ck_assert(test_daemon_alive(&daemon_));
	stop_daemon();
}
END_TEST

START_TEST(bomb_past_the_memory_cap_is_refused)
{
	/* the deadline far away: only the cap can stop it */
	test_daemon_start(&daemon_, (const char *[]){"--set=compile_timeout_ms=300000",
						     "--set=compile_memory_max=384M", NULL});
	ruda_client *c = test_connect(&daemon_, "bomber");
	ruda_kernel k;
	char why[512];
	ruda_status st = register_bomb(c, BOMB_N, &k, why, sizeof(why));
	ck_assert_msg(st == RUDA_ERROR_INVALID_KERNEL, "status %d (%s)", st, why);
	ck_assert_msg(strstr(why, "used more than compile_memory_max (384M)"), "%s", why);
	/* and rudad itself never held that memory */
	long rss = test_rss_kib(daemon_.pid);
	ck_assert_msg(rss < 384 * 1024, "rudad's RSS is %ld KiB", rss);
	expect_small_bomb_runs(c, 4);
	ruda_client_close(c);
	expect_children(1);
	stop_daemon();
}
END_TEST

/* A client sending bombs one after another does not hold back another
 * client's kernels for more than one deadline each: they take turns. */
static int bomber(ruda_client *c, void *arg)
{
	(void)arg;
	test_fork_ready();
	for (uint32_t i = 0;; i++) {
		ruda_kernel k;
		char why[512];
		register_bomb(c, BOMB_N + i, &k, why, sizeof(why));
	}
	return 0;
}

START_TEST(bombs_take_turns_with_others)
{
	char timeout[64];
	snprintf(timeout, sizeof(timeout), "--set=compile_timeout_ms=%d", TIMEOUT_MS);
	test_daemon_start(&daemon_, (const char *[]){timeout, NULL});
	pid_t bad = test_fork_client(&daemon_, "bomber", bomber, NULL);
	ruda_client *c = test_connect(&daemon_, "good");
	for (uint32_t n = 10; n < 13; n++) {
		double t0 = test_now();
		expect_small_bomb_runs(c, n);
		/* one bomb's deadline and a worker's start at most, never the
		 * whole queue of bombs */
		double took = test_now() - t0;
		ck_assert_msg(took < 30, "a kernel took %.1f s behind the bombs", took);
	}
	test_kill(bad);
	ruda_client_close(c);
	ck_assert(test_daemon_alive(&daemon_));
	stop_daemon();
}
END_TEST

/* No worker (it cannot be started): kernels compile in rudad as before. */
START_TEST(without_a_worker_kernels_still_compile)
{
	setenv("RUDA_TEST_COMPILE_WORKER", "/nonexistent/rudad", 1);
	test_daemon_start(&daemon_, NULL);
	unsetenv("RUDA_TEST_COMPILE_WORKER");
	ruda_client *c = test_connect(&daemon_, "plain");
	expect_small_bomb_runs(c, 4);
	expect_small_bomb_runs(c, 7);
	ruda_client_close(c);
	int zombies;
	ck_assert_int_eq(children(daemon_.pid, &zombies, NULL), 0);
	FILE *f = fopen(daemon_.log_path, "r");
	ck_assert_ptr_nonnull(f);
	char line[1024];
	int said = 0;
	while (fgets(line, sizeof(line), f))
		said += strstr(line, "kernels compile in-process") != NULL;
	fclose(f);
	ck_assert_int_eq(said, 1); /* once */
	stop_daemon();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("compile_worker");
	TCase *tc = tcase_create("worker");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, bomb_past_the_deadline_is_refused);
	tcase_add_test(tc, bomb_past_the_memory_cap_is_refused);
	tcase_add_test(tc, bombs_take_turns_with_others);
	tcase_add_test(tc, without_a_worker_kernels_still_compile);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
