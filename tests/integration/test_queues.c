/*
 * Device queues (issue 22): each stream keeps to one of the device's
 * queues, so one stream's work stays in order while different sessions'
 * work runs side by side where the device has several queues; in queue
 * lanes (`lanes = on`), streams that share a queue take turns in rounds,
 * which shows even on a device of one queue.
 */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* The queues rudad says device 0 has ("(physical device 0, N queues)"). */
static unsigned device_queues(const struct test_daemon *d)
{
	char line[512];
	unsigned n = 0;
	for (int tries = 0; tries < 50 && !n; tries++) {
		FILE *f = fopen(d->log_path, "r");
		while (f && fgets(line, sizeof(line), f)) {
			const char *at = strstr(line, "(physical device ");
			if (at && strstr(line, "device 0:"))
				sscanf(strchr(at, ',') ? strchr(at, ',') + 1 : "", " %u queue", &n);
		}
		if (f)
			fclose(f);
		if (!n)
			usleep(20000);
	}
	return n;
}

struct orderer {
	const struct test_daemon *d;
	int launches;
	uint32_t got, want;
	ruda_status status;
};

/* `launches` of affine on one stream, in batches that make several
 * submissions; the result is right only if they ran in order. */
static void *run_in_order(void *arg)
{
	struct orderer *o = arg;
	ruda_client *c = test_connect(o->d, "in order");
	ruda_kernel k = test_register(c, "tests/shaders/affine", 1, 4);
	uint32_t zero = 0;
	ruda_handle h;
	o->status = ruda_client_create(c, &zero, 4, &h);
	o->want = 0;
	for (int i = 1; i <= o->launches && o->status == RUDA_OK; i++) {
		uint32_t k_value = (uint32_t)i * 7u;
		o->want = o->want * 3u + k_value;
		o->status = ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, &k_value, 4);
		if (i % 37 == 0 && o->status == RUDA_OK)
			o->status = ruda_client_flush(c);
	}
	if (o->status == RUDA_OK)
		o->status = ruda_client_read_one(c, h, &o->got);
	ruda_client_close(c);
	return NULL;
}

/* rudad with streams sharing one queue in rounds. */
static const char *const lanes_on_one_queue[] = {"--set", "lanes=on", "--set", "queues=1", NULL};

/* Four clients at once, each 300 order-sensitive launches on its stream. */
static void four_clients_in_order(const char *const *args)
{
	struct test_daemon d;
	test_daemon_start(&d, args);
	enum { N = 4 };
	struct orderer o[N];
	pthread_t t[N];
	for (int i = 0; i < N; i++) {
		o[i] = (struct orderer){.d = &d, .launches = 300};
		ck_assert_int_eq(pthread_create(&t[i], NULL, run_in_order, &o[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ck_assert_int_eq(o[i].status, RUDA_OK);
		ck_assert_msg(o[i].got == o[i].want, "client %d: %u, in order %u", i, o[i].got,
			      o[i].want);
	}
	test_daemon_stop(&d);
}

START_TEST(one_stream_stays_in_order)
{
	four_clients_in_order(NULL);
}
END_TEST

/* The four clients' launches interleave in one command buffer, in rounds:
 * each client's chain still comes out exact. */
START_TEST(one_stream_stays_in_order_in_lanes)
{
	four_clients_in_order(lanes_on_one_queue);
}
END_TEST

/* Spin launches of tests/shaders/spin.comp: `n` of `steps` each. */
static ruda_status spin(ruda_client *c, ruda_kernel k, ruda_handle *bufs, int n, uint32_t steps)
{
	ruda_status st = RUDA_OK;
	for (int i = 0; i < n && st == RUDA_OK; i++)
		st = ruda_client_launch(c, k, (ruda_count){1, 1, 1}, bufs, 2, &steps, 4);
	return st;
}

/* tests/shaders/spin.comp in `c`, and its two buffers (the lanes' values,
 * the launch count), zeroed. */
static ruda_kernel spin_setup(ruda_client *c, ruda_handle bufs[2])
{
	uint32_t zeros[64] = {0};
	ck_assert_int_eq(ruda_client_create(c, zeros, sizeof(zeros), &bufs[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, zeros, 4, &bufs[1]), RUDA_OK);
	return test_register(c, "tests/shaders/spin", 2, 4);
}

/* A client with the spin kernel and its buffers. */
struct spinner {
	ruda_client *c;
	ruda_kernel k;
	ruda_handle h[2];
};

static struct spinner spinner_open(const struct test_daemon *d, const char *name)
{
	struct spinner s = {.c = test_connect(d, name)};
	s.k = spin_setup(s.c, s.h);
	return s;
}

/* A's `n` launches of `steps` sent, then B's one short launch + sync
 * beside them: B's ends within a third of A's time. Every launch ran (A's
 * `a_total` in all, B's one); closes both. */
static void short_beside(struct spinner *a, int n, uint32_t steps, uint32_t a_total,
			 struct spinner *b)
{
	double t0 = test_now();
	ck_assert_int_eq(spin(a->c, a->k, a->h, n, steps), RUDA_OK);
	ck_assert_int_eq(ruda_client_flush(a->c), RUDA_OK);
	usleep(20000); /* A's work has started */
	double b0 = test_now();
	ck_assert_int_eq(spin(b->c, b->k, b->h, 1, 64), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b->c), RUDA_OK);
	double b_took = test_now() - b0;
	ck_assert_int_eq(ruda_client_sync(a->c), RUDA_OK);
	double a_took = test_now() - t0;
	fprintf(stderr, "A: %d launches of %u steps in %.3f s; B's short launch + sync beside "
			"them: %.4f s\n",
		n, steps, a_took, b_took);
	ck_assert_msg(b_took < a_took / 3, "B waited %.3f s of A's %.3f s", b_took, a_took);
	uint32_t count;
	ck_assert_int_eq(ruda_client_read_one(b->c, b->h[1], &count), RUDA_OK);
	ck_assert_uint_eq(count, 1);
	ck_assert_int_eq(ruda_client_read_one(a->c, a->h[1], &count), RUDA_OK);
	ck_assert_uint_eq(count, a_total); /* every launch ran */
	ruda_client_close(a->c);
	ruda_client_close(b->c);
}

/* Another session's long work does not hold a short launch back: B's one
 * launch, sent after A's long backlog, is done long before A's is. */
static void short_beside_long(const char *const *args)
{
	struct test_daemon d;
	test_daemon_start(&d, args);
	struct spinner a = spinner_open(&d, "long"), b = spinner_open(&d, "short");
	/* A's long work alone, timed: enough launches for a quarter second */
	uint32_t steps = 1u << 19;
	int n = 8;
	uint32_t a_launches = 0;
	for (;;) {
		double t0 = test_now();
		a_launches += (uint32_t)n;
		ck_assert_int_eq(spin(a.c, a.k, a.h, n, steps), RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(a.c), RUDA_OK);
		if (test_now() - t0 > 0.25 || n >= 4096)
			break;
		n *= 2;
	}
	/* again, and B's one short launch beside it */
	short_beside(&a, n, steps, a_launches + (uint32_t)n, &b);
	test_daemon_stop(&d);
}

/* One client over 16 streams in lanes on 8 queues (RUDA_TEST_QUEUES: the
 * bench's "one client over 16 streams" on the 8-queue GPUs), each stream
 * 200 short launches then a sync, as the sharing group does it: every
 * launch runs once (the count), with the right values. */
START_TEST(sixteen_streams_on_eight_lanes)
{
	setenv("RUDA_TEST_QUEUES", "8", 1); /* inherited by rudad */
	const char *args[] = {"--set", "lanes=on", NULL};
	struct test_daemon d;
	test_daemon_start(&d, args);
	unsetenv("RUDA_TEST_QUEUES");
	ruda_client *c = test_connect(&d, "streams");
	ruda_handle h[2];
	ruda_kernel k = spin_setup(c, h);
	/* the zeros were uploaded on stream 0: synced, so that a late upload
	 * cannot wipe counts that streams 1..15 made (streams are unordered) */
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	enum { STREAMS = 16, PER_STREAM = 200 };
	uint32_t steps = 64;
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < STREAMS * PER_STREAM; i++) {
			ck_assert_int_eq(ruda_client_set_stream(c, (uint32_t)(i % STREAMS)), RUDA_OK);
			ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, h, 2, &steps, 4),
					 RUDA_OK);
		}
		for (uint32_t s = 0; s < STREAMS; s++) {
			ck_assert_int_eq(ruda_client_set_stream(c, s), RUDA_OK);
			ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
		}
	}
	uint32_t count = 0, v[64];
	ck_assert_int_eq(ruda_client_read_one(c, h[1], &count), RUDA_OK);
	ck_assert_uint_eq(count, 2 * STREAMS * PER_STREAM);
	ck_assert_int_eq(ruda_client_read_one(c, h[0], v), RUDA_OK);
	for (uint32_t lane = 0; lane < 64; lane++) {
		uint32_t x = lane + 1;
		for (uint32_t i = 0; i < steps; i++)
			x = x * 1664525u + 1013904223u;
		ck_assert_uint_eq(v[lane], x);
	}
	ck_assert_int_ge(test_log_count(&d, "8 queues"), 1);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* On queues of their own, where the device has several. */
START_TEST(sessions_run_side_by_side)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	unsigned queues = device_queues(&d);
	test_daemon_stop(&d);
	ck_assert_uint_ge(queues, 1);
	if (queues < 2) {
		fprintf(stderr, "SKIP sessions_run_side_by_side: device 0 has %u queue\n", queues);
		return;
	}
	short_beside_long(NULL);
}
END_TEST

/* B's short work on an idle queue is seen to end while A's one long
 * kernel runs on another. The completion thread sleeps on the queues busy
 * when it went to sleep; B's queue was idle then, and before the wake
 * timeline (device.h) its end was seen only when A's kernel ended. Needs a
 * device with two queues that run side by side (not lavapipe). */
START_TEST(an_idle_queues_work_is_seen_beside_a_long_kernel)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	/* RUDA_TEST_QUEUES's queues are one VkQueue: they run one at a time */
	unsigned queues = getenv("RUDA_TEST_QUEUES") ? 1 : device_queues(&d);
	if (queues < 2) {
		test_daemon_stop(&d);
		fprintf(stderr, "SKIP an_idle_queues_work_is_seen_beside_a_long_kernel: device 0 "
				"runs %u queue at a time\n",
			queues);
		return;
	}
	struct spinner a = spinner_open(&d, "long"), b = spinner_open(&d, "short");
	/* one kernel of A's, about 200 ms: timed at 2^22 steps (warm), scaled */
	ck_assert_int_eq(spin(a.c, a.k, a.h, 1, 64), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a.c), RUDA_OK);
	uint32_t steps = 1u << 22;
	double t1 = test_now();
	ck_assert_int_eq(spin(a.c, a.k, a.h, 1, steps), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a.c), RUDA_OK);
	double one = test_now() - t1;
	double scaled = (double)steps * 0.2 / (one > 1e-6 ? one : 1e-6);
	steps = scaled > 4.2e9 ? 4200000000u : scaled < 64 ? 64u : (uint32_t)scaled & ~63u;
	/* B's queue is idle while the completion thread sleeps on A's */
	short_beside(&a, 1, steps, 3, &b);
	test_daemon_stop(&d);
}
END_TEST

/* On one queue, in rounds: B's launch joins the next round rather than
 * waiting behind A's backlog (before lanes it waited for all of it). */
START_TEST(sessions_share_a_queue_in_rounds)
{
	short_beside_long(lanes_on_one_queue);
}
END_TEST

/* A lane's submission ends with the round that takes the last launch a
 * Sync waits for. rudad may put a whole second of rounds in a submission
 * here (RUDA_LANE_INFLIGHT_US); A's backlog fills the lane, B's one launch
 * + sync arrives while A's first two short submissions run (before any
 * round is measured), joins A's next round, and is answered when that
 * round is done, not when the second of A's rounds after it are. */
START_TEST(sync_ends_its_rounds_submission)
{
	setenv("RUDA_LANE_INFLIGHT_US", "1000000", 1); /* inherited by rudad */
	struct test_daemon d;
	test_daemon_start(&d, lanes_on_one_queue);
	unsetenv("RUDA_LANE_INFLIGHT_US");
	ruda_client *a = test_connect(&d, "backlog"), *b = test_connect(&d, "waits");
	ruda_handle ha[2], hb[2];
	ruda_kernel ka = spin_setup(a, ha), kb = spin_setup(b, hb);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	/* A's kernel: a ms or more, so its first two submissions (4 rounds
	 * each before a round's time is known) last long enough for B to
	 * arrive; below 2^22 steps, where llvmpipe cuts the kernel's loop */
	uint32_t steps = 1u << 16;
	ck_assert_int_eq(spin(a, ka, ha, 1, steps), RUDA_OK); /* compiled, warm */
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	double kernel_s = 0;
	for (; steps < (1u << 21); steps *= 2) {
		double t1 = test_now();
		ck_assert_int_eq(spin(a, ka, ha, 4, steps), RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
		kernel_s = (test_now() - t1) / 4;
		if (kernel_s > 0.001)
			break;
	}
	uint32_t warm = 0;
	ck_assert_int_eq(ruda_client_read_one(a, ha[1], &warm), RUDA_OK);
	enum { N = 200 };
	double t0 = test_now();
	ck_assert_int_eq(spin(a, ka, ha, N, steps), RUDA_OK);
	ck_assert_int_eq(ruda_client_flush(a), RUDA_OK);
	double b0 = test_now();
	ck_assert_int_eq(spin(b, kb, hb, 1, 64), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	double b_took = test_now() - b0;
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	double a_took = test_now() - t0;
	fprintf(stderr, "A: %d launches of ~%.1f ms in %.3f s; B's launch + sync: %.4f s\n", N,
		kernel_s * 1e3, a_took, b_took);
	ck_assert_msg(b_took < a_took / 3, "B waited %.3f s of A's %.3f s", b_took, a_took);
	uint32_t count;
	ck_assert_int_eq(ruda_client_read_one(b, hb[1], &count), RUDA_OK);
	ck_assert_uint_eq(count, 1);
	ck_assert_int_eq(ruda_client_read_one(a, ha[1], &count), RUDA_OK);
	ck_assert_uint_eq(count, warm + N);
	ruda_client_close(a);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queues");
	TCase *tc = tcase_create("queues");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, one_stream_stays_in_order);
	tcase_add_test(tc, one_stream_stays_in_order_in_lanes);
	tcase_add_test(tc, sixteen_streams_on_eight_lanes);
	tcase_add_test(tc, sessions_run_side_by_side);
	tcase_add_test(tc, an_idle_queues_work_is_seen_beside_a_long_kernel);
	tcase_add_test(tc, sessions_share_a_queue_in_rounds);
	tcase_add_test(tc, sync_ends_its_rounds_submission);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
