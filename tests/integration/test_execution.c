/* Execution through rudad: accounting, profiling, exclusive access and
 * bounds-checked launches, with several clients. */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_execution");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* Fill `words` words of a new buffer `launches` times. */
static ruda_handle busy_work(ruda_client *c, uint32_t words, int launches)
{
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, words * 4ull, &h), RUDA_OK);
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	for (int i = 0; i < launches; i++) {
		uint32_t push[2] = {(uint32_t)i, words};
		ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){16, 1, 1}, &h, 1, push, 8),
				 RUDA_OK);
	}
	return h;
}

START_TEST(gpu_time_is_accounted)
{
	ruda_daemon_stats before = RUDA_DAEMON_STATS_INIT, after = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &before), RUDA_OK);
	ck_assert_uint_eq(before.session_gpu_time_ns, 0);
	busy_work(client, 1u << 20, 20);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_daemon_stats(client, &after), RUDA_OK);
	ck_assert_uint_eq(after.session_launches, 20);
	ck_assert_uint_gt(after.session_gpu_time_ns, 0);
	/* another client's counters are its own */
	ruda_client *other = test_connect(&daemon_, "idle");
	ruda_daemon_stats idle = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(other, &idle), RUDA_OK);
	ck_assert_uint_eq(idle.session_gpu_time_ns, 0);
	ck_assert_uint_eq(idle.session_launches, 0);
	ruda_client_close(other);
}
END_TEST

START_TEST(profile_windows)
{
	ruda_profile_window w;
	uint64_t empty_ns = 0, busy_ns = 0;
	ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_end(client, w, &empty_ns), RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
	busy_work(client, 4u << 20, 10);
	ck_assert_int_eq(ruda_client_profile_end(client, w, &busy_ns), RUDA_OK);
	ck_assert_uint_gt(busy_ns, 0);
	ck_assert_uint_gt(busy_ns, empty_ns); /* 160 MiB written takes longer than nothing */
	/* an abandoned or unknown window cannot be ended */
	ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_abandon(client, w), RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_end(client, w, &busy_ns), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_profile_end(client, 12345, &busy_ns),
			 RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* `launches` launches of one invocation doing `iterations` x 256 atomic
 * adds each (tests/shaders/spin_long), then its count of launches and
 * adds: a long piece of work, submitted at once. */
struct spinner {
	ruda_client *c;
	ruda_kernel spin;
	ruda_handle h; /* {launches, adds} */
	uint32_t iterations, launches;
	atomic_int launched;
	double took; /* launch to sync, seconds */
	ruda_status status;
	uint64_t launched_total, adds_total; /* what the buffer must count */
};

static void spinner_init(struct spinner *sp, ruda_client *c)
{
	memset(sp, 0, sizeof(*sp));
	sp->c = c;
	sp->spin = test_register(c, "tests/shaders/spin_long", 1, 4);
	uint32_t zero[2] = {0, 0};
	ck_assert_int_eq(ruda_client_create(c, zero, sizeof(zero), &sp->h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	sp->iterations = 1;
	sp->launches = 1;
}

static void *spinner_run(void *p)
{
	struct spinner *sp = p;
	double t0 = test_now();
	sp->status = RUDA_OK;
	for (uint32_t i = 0; i < sp->launches && sp->status == RUDA_OK; i++)
		sp->status = ruda_client_launch(sp->c, sp->spin, (ruda_count){1, 1, 1}, &sp->h,
						1, &sp->iterations, 4);
	if (sp->status == RUDA_OK)
		sp->status = ruda_client_flush(sp->c);
	atomic_store(&sp->launched, 1);
	if (sp->status == RUDA_OK)
		sp->status = ruda_client_sync(sp->c);
	sp->took = test_now() - t0;
	sp->launched_total += sp->launches;
	sp->adds_total += 256ull * sp->iterations * sp->launches;
	return NULL;
}

/* Its counts match every launch run whole. */
static void spinner_check(struct spinner *sp)
{
	uint32_t count[2];
	ck_assert_int_eq(ruda_client_read_one(sp->c, sp->h, count), RUDA_OK);
	ck_assert_uint_eq(count[0], (uint32_t)sp->launched_total);
	ck_assert_uint_eq(count[1], (uint32_t)sp->adds_total);
}

/*
 * A window counts its own client's work only: A opens one, B starts ~0.5 s
 * of kernels, A launches one short kernel (which waits behind B's on a
 * one-queue device) and ends the window: it is far shorter than B's work,
 * which timestamps around the window on the shared queue would include.
 * Around A's own long kernels it is most of their time.
 */
START_TEST(profile_windows_count_own_work)
{
	ruda_client *b = test_connect(&daemon_, "long kernel");
	struct spinner sb;
	spinner_init(&sb, b);
	/* B's work: ~0.5 s on this device (the first launch also compiles) */
	spinner_run(&sb);
	ck_assert_int_eq(sb.status, RUDA_OK);
	for (;;) {
		sb.iterations = sb.iterations * 16 > 65535 ? 65535 : sb.iterations * 16;
		spinner_run(&sb);
		ck_assert_int_eq(sb.status, RUDA_OK);
		if (sb.took >= 0.3 || sb.iterations == 65535)
			break;
	}
	while (sb.took < 0.3 && sb.launches < 64) {
		sb.launches *= 2;
		spinner_run(&sb);
		ck_assert_int_eq(sb.status, RUDA_OK);
	}
	for (int round = 0; round < 2; round++) {
		ruda_handle h;
		ck_assert_int_eq(ruda_client_empty(client, 1024 * 4, &h), RUDA_OK);
		ruda_kernel fill = test_register(client, "fill", 1, 8);
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
		/* A's window opens (and reaches the queue) first */
		ruda_profile_window w;
		uint64_t short_ns = 0;
		double t0 = test_now();
		ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
		ck_assert_int_eq(ruda_client_flush(client), RUDA_OK);
		/* then B's long work, then A's short launch behind it */
		atomic_store(&sb.launched, 0);
		pthread_t t;
		pthread_create(&t, NULL, spinner_run, &sb);
		while (!atomic_load(&sb.launched))
			usleep(1000);
		usleep(50 * 1000); /* B's kernel is on the queue */
		uint32_t push[2] = {0xC0FFEEu + (uint32_t)round, 1024};
		ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &h, 1,
						    push, 8),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_profile_end(client, w, &short_ns), RUDA_OK);
		double a_wall = test_now() - t0;
		pthread_join(t, NULL);
		ck_assert_int_eq(sb.status, RUDA_OK);
		ck_assert_msg((double)short_ns < sb.took * 1e9 / 3,
			      "A's window around one short launch: %.3f s; B's kernel beside "
			      "it: %.3f s (A waited %.3f s)",
			      (double)short_ns / 1e9, sb.took, a_wall);
		/* A's launch ran and is right */
		static uint32_t back[1024];
		ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
		for (int i = 0; i < 1024; i++)
			ck_assert_uint_eq(back[i], push[0]);
		ck_assert_int_eq(ruda_client_release(client, h), RUDA_OK);
		ck_assert_int_eq(ruda_client_kernel_release(client, fill), RUDA_OK);
	}
	spinner_check(&sb); /* B's kernels all ran whole */

	/* A's own long kernel: the window holds most of it */
	struct spinner sa;
	spinner_init(&sa, client);
	sa.iterations = sb.iterations;
	sa.launches = sb.launches;
	ruda_profile_window w;
	uint64_t long_ns = 0;
	double t0 = test_now();
	ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
	spinner_run(&sa);
	ck_assert_int_eq(sa.status, RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_end(client, w, &long_ns), RUDA_OK);
	double wall = test_now() - t0;
	ck_assert_msg((double)long_ns > sb.took * 1e9 / 2 && (double)long_ns <= wall * 1e9,
		      "A's window around its own %.3f s of kernels: %.3f s (%.3f s wall)", sb.took,
		      (double)long_ns / 1e9, wall);
	spinner_check(&sa);
	ruda_client_close(b);
}
END_TEST

struct waiter_arg {
	ruda_client *client;
	atomic_int *lease_over;
	int saw_lease_over;
	ruda_status status;
};

static void *sync_other(void *p)
{
	struct waiter_arg *a = p;
	a->status = ruda_client_sync(a->client);
	a->saw_lease_over = atomic_load(a->lease_over);
	return NULL;
}

/* While one client holds the device alone, another's requests wait. */
START_TEST(exclusive_blocks_others)
{
	ruda_client *other = test_connect(&daemon_, "waits");
	atomic_int lease_over = 0;
	ck_assert_int_eq(ruda_client_exclusive_begin(client, 5000), RUDA_OK);
	struct waiter_arg a = {.client = other, .lease_over = &lease_over};
	pthread_t t;
	pthread_create(&t, NULL, sync_other, &a);
	usleep(300 * 1000); /* give the other client every chance to get ahead */
	busy_work(client, 1024, 3);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	atomic_store(&lease_over, 1);
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_OK);
	pthread_join(t, NULL);
	ck_assert_int_eq(a.status, RUDA_OK);
	ck_assert_msg(a.saw_lease_over, "the other client's sync finished during the lease");
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_close(other);
}
END_TEST

/* A lease that runs out is told apart from a misuse: the holder's
 * ExclusiveEnd gets ERROR_LEASE_EXPIRED once (then no lease is held:
 * INVALID_ARGUMENT), its work meanwhile completes correctly, and a session
 * that never held a lease gets INVALID_ARGUMENT. */
START_TEST(exclusive_times_out)
{
	char why[256];
	ruda_client *other = test_connect(&daemon_, "outlasts");
	ck_assert_int_eq(ruda_client_exclusive_end(other), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(other, why, sizeof(why));
	ck_assert_msg(strstr(why, "holds no exclusive lease"), "%s", why);

	ck_assert_int_eq(ruda_client_exclusive_begin(client, 200), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(other), RUDA_OK); /* after the 200 ms lease */
	/* the holder's own work after the expiry still runs and is right */
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 23);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_mem_eq(data, back, sizeof(data));
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_ERROR_LEASE_EXPIRED);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "expired after 200 ms") && strstr(why, "max_exclusive_ms 10000"),
		      "%s", why);
	ck_assert_str_eq(ruda_strerror(RUDA_ERROR_LEASE_EXPIRED), "the exclusive lease expired");
	/* told once: the lease is gone now */
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_ERROR_INVALID_ARGUMENT);
	/* a new lease ended in time is fine, and forgets an old expiry */
	ck_assert_int_eq(ruda_client_exclusive_begin(client, 150), RUDA_OK);
	usleep(400 * 1000);
	ck_assert_int_eq(ruda_client_exclusive_begin(client, 5000), RUDA_OK);
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_exclusive_end(client), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_close(other);
}
END_TEST

/* Asking for longer than max_exclusive_ms: the lease ends at the limit and
 * the message names it. */
START_TEST(exclusive_expires_at_the_limit)
{
	struct test_daemon d;
	test_daemon_start(&d, (const char *const[]){"--set", "max_exclusive_ms=300", NULL});
	ruda_client *c = test_connect(&d, "holder"), *other = test_connect(&d, "other");
	ck_assert_int_eq(ruda_client_exclusive_begin(c, 60000), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(other), RUDA_OK); /* after the 300 ms lease */
	ck_assert_int_eq(ruda_client_exclusive_end(c), RUDA_ERROR_LEASE_EXPIRED);
	char why[256];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, "expired after 300 ms (max_exclusive_ms 300 ms)"), "%s", why);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ruda_client_close(other);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

static int take_the_device(ruda_client *c, void *arg)
{
	(void)arg;
	return ruda_client_exclusive_begin(c, 60000) != RUDA_OK;
}

/* A holder that dies frees the device for everyone else. */
START_TEST(exclusive_holder_killed)
{
	test_kill(test_fork_client(&daemon_, "holder", take_the_device, NULL));
	double t0 = test_now();
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	busy_work(client, 256, 1);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	/* released when the holder died, not when its lease ran out (the
	 * lease's cap is 10 s; work here takes milliseconds) */
	double waited = test_now() - t0;
	ck_assert_msg(waited < 2.0, "the others waited %.2f s for the dead holder's lease", waited);
}
END_TEST

/* A kernel writing far past its binding cannot touch another client's
 * buffer (or anything else). */
START_TEST(out_of_bounds_write_is_contained)
{
	ruda_client *victim = test_connect(&daemon_, "victim");
	enum { WORDS = 4096 };
	static uint32_t pattern[WORDS], back[WORDS];
	for (int i = 0; i < WORDS; i++)
		pattern[i] = 0x5a5a0000u + (uint32_t)i;
	ruda_handle mine, theirs[8];
	uint32_t zeros[64] = {0};
	ck_assert_int_eq(ruda_client_create(client, zeros, sizeof(zeros), &mine), RUDA_OK);
	/* neighbours allocated right after, in the other session */
	for (int i = 0; i < 8; i++)
		ck_assert_int_eq(ruda_client_create(victim, pattern, sizeof(pattern), &theirs[i]),
				 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(victim), RUDA_OK);
	ruda_kernel oob = test_register(client, "tests/shaders/oob_write", 1, 12);
	uint32_t push[3] = {0, 1u << 22, 0xdeadbeef}; /* 16 MiB of writes from index 0 */
	ck_assert_int_eq(ruda_client_launch(client, oob, (ruda_count){65535, 1, 1}, &mine, 1, push,
					    sizeof(push)),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, mine, zeros), RUDA_OK);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(zeros[i], 0xdeadbeef);
	for (int b = 0; b < 8; b++) {
		ck_assert_int_eq(ruda_client_read_one(victim, theirs[b], back), RUDA_OK);
		ck_assert_msg(memcmp(back, pattern, sizeof(back)) == 0,
			      "the other client's buffer %d changed", b);
	}
	ruda_client_close(victim);
}
END_TEST

/* launch_unchecked is for those the policy names; others get a clear
 * refusal at sync, and checked launches still work. */
START_TEST(unchecked_needs_policy)
{
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	ruda_handle h;
	ruda_client_empty(client, 1024, &h);
	uint32_t push[2] = {5, 256}, out[256];
	ck_assert_int_eq(ruda_client_launch_unchecked(client, fill, (ruda_count){1, 1, 1}, &h, 1,
						      push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_PERMISSION);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "unchecked"));

	struct test_daemon d;
	const char *args[] = {"--set", "unchecked_launch_users=root", NULL};
	test_daemon_start(&d, args);
	ruda_client *c = test_connect(&d, "trusted");
	fill = test_register(c, "fill", 1, 8);
	ruda_client_empty(c, 1024, &h);
	ck_assert_int_eq(ruda_client_launch_unchecked(c, fill, (ruda_count){1, 1, 1}, &h, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, out), RUDA_OK);
	for (int i = 0; i < 256; i++)
		ck_assert_uint_eq(out[i], 5);
	ruda_client_close(c);
	test_daemon_stop(&d);

	/* force_checked_launches wins over the users named */
	const char *forced[] = {"--set", "unchecked_launch_users=root", "--set",
				"force_checked_launches=yes", NULL};
	test_daemon_start(&d, forced);
	c = test_connect(&d, "forced");
	fill = test_register(c, "fill", 1, 8);
	ruda_client_empty(c, 1024, &h);
	ck_assert_int_eq(ruda_client_launch_unchecked(c, fill, (ruda_count){1, 1, 1}, &h, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_PERMISSION);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* A submission that runs past the limit is reported, not waited for. */
START_TEST(submission_timeout)
{
	struct test_daemon d;
	/* lanes off whatever RUDA_TEST_SET says: lanes cut a stream's launches
	 * into submissions of ~150 µs of device time, and the test needs one
	 * submission of seconds (test_hang has a kernel that never ends) */
	const char *args[] = {"--set", "submission_timeout_ms=300", "--set", "lanes=off", NULL};
	test_daemon_start(&d, args);
	ruda_client *c = test_connect(&d, "slow");
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(c, &p);
	if (p.type != RUDA_DEVICE_CPU) {
		/* the workload below is seconds long only on a CPU device (CI's);
		 * a GPU finishes it in milliseconds */
		fprintf(stderr, "SKIP submission_timeout: its workload is seconds long only on a "
				"CPU device\n");
		ruda_client_close(c);
		test_daemon_stop(&d);
		return;
	}
	/* one submission of seconds of work on a CPU device: 1000 fills of
	 * 16 MiB, flushed together */
	busy_work(c, 4u << 20, 1000);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_TIMEOUT);
	/* the device's work is lost: later work says so rather than hanging */
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_TIMEOUT);
	ruda_handle h;
	ruda_client_empty(c, 4, &h);
	uint32_t word;
	ck_assert_int_eq(ruda_client_read_one(c, h, &word), RUDA_ERROR_TIMEOUT);
	ruda_client_close(c);
	test_daemon_stop(&d); /* still stops cleanly once the kernel ends */
}
END_TEST

static int probe_calls;

static int probe(void *user, double *value)
{
	probe_calls++;
	*value = *(double *)user;
	return 0;
}

static int failing_probe(void *user, double *value)
{
	(void)user;
	(void)value;
	return -1;
}

/* One client measures; every later one gets the daemon's cached value. */
START_TEST(throughput_cache_shared)
{
	double first = 123.5, other = 999.0, got = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(client, "copy.f32", probe, &first, &got),
			 RUDA_OK);
	ck_assert_int_eq(probe_calls, 1);
	ck_assert(got == 123.5);
	ruda_client *b = test_connect(&daemon_, "later");
	got = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(b, "copy.f32", probe, &other, &got), RUDA_OK);
	ck_assert_int_eq(probe_calls, 1); /* not measured again */
	ck_assert(got == 123.5);
	/* another key is its own; a failed probe records nothing */
	ck_assert_int_eq(ruda_client_measure_throughput(b, "reduce", failing_probe, NULL, &got),
			 RUDA_ERROR_UNSUPPORTED);
	ck_assert_int_eq(ruda_client_measure_throughput(b, "reduce", probe, &other, &got), RUDA_OK);
	ck_assert_int_eq(probe_calls, 2);
	ck_assert(got == 999.0);
	/* bad keys are refused */
	char long_key[300];
	memset(long_key, 'k', sizeof(long_key) - 1);
	long_key[sizeof(long_key) - 1] = '\0';
	ck_assert_int_eq(ruda_client_measure_throughput(b, long_key, probe, &other, &got),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_measure_throughput(b, "", probe, &other, &got),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_close(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("execution");
	TCase *tc = tcase_create("execution");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, gpu_time_is_accounted);
	tcase_add_test(tc, profile_windows);
	tcase_add_test(tc, profile_windows_count_own_work);
	tcase_add_test(tc, exclusive_blocks_others);
	tcase_add_test(tc, exclusive_times_out);
	tcase_add_test(tc, exclusive_expires_at_the_limit);
	tcase_add_test(tc, exclusive_holder_killed);
	tcase_add_test(tc, out_of_bounds_write_is_contained);
	tcase_add_test(tc, unchecked_needs_policy);
	tcase_add_test(tc, throughput_cache_shared);
	tcase_add_test(tc, submission_timeout);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
