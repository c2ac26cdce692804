/* Graphs: launches captured once, replayed with one request each. */
#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_graphs");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

enum { N = 1000 };

struct saxpy_push {
	float alpha;
	uint32_t n;
};

/* y += alpha * x, on the device and on the CPU. */
static void saxpy(ruda_client *c, ruda_kernel k, ruda_handle x, ruda_handle y, float alpha)
{
	struct saxpy_push push = {alpha, N};
	ruda_handle bind[] = {x, y};
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){2, 1, 1}, bind, 2, &push,
					    sizeof(push)),
			 RUDA_OK);
}

static void saxpy_cpu(const float *x, float *y, float alpha)
{
	for (int i = 0; i < N; i++)
		y[i] = alpha * x[i] + y[i];
}

/* out = a + b. */
static void add(ruda_client *c, ruda_kernel k, ruda_handle a, ruda_handle b, ruda_handle out)
{
	uint32_t n = N;
	ruda_handle bind[] = {a, b, out};
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){2, 1, 1}, bind, 3, &n, sizeof(n)),
			 RUDA_OK);
}

/* The captured sequence: 12 launches over three buffers, each depending on
 * the one before. Values stay small integers: exact in float32. */
static void sequence(ruda_client *c, ruda_kernel sx, ruda_kernel ad, ruda_handle x,
		     ruda_handle y, ruda_handle z)
{
	for (int i = 0; i < 4; i++) {
		saxpy(c, sx, x, y, (float)(i % 3 + 1));
		add(c, ad, x, y, z);
		saxpy(c, sx, z, x, -1.0f); /* x = x - z = -y */
	}
}

static void sequence_cpu(float *x, float *y, float *z)
{
	for (int i = 0; i < 4; i++) {
		saxpy_cpu(x, y, (float)(i % 3 + 1));
		for (int j = 0; j < N; j++)
			z[j] = x[j] + y[j];
		saxpy_cpu(z, x, -1.0f);
	}
}

static void start_values(float *x, float *y, float *z)
{
	for (int i = 0; i < N; i++) {
		x[i] = (float)(i % 5);
		y[i] = (float)(i % 3);
		z[i] = 0;
	}
}

static void make_buffers(ruda_client *c, ruda_handle h[3])
{
	static float x[N], y[N], z[N];
	start_values(x, y, z);
	ck_assert_int_eq(ruda_client_create(c, x, sizeof(x), &h[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, y, sizeof(y), &h[1]), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, z, sizeof(z), &h[2]), RUDA_OK);
}

static void expect(ruda_client *c, ruda_handle h, const float *want, const char *what)
{
	static float back[N];
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_msg(back[i] == want[i], "%s[%d] = %g, expected %g", what, i,
			      (double)back[i], (double)want[i]);
}

/* A replay computes what the launches it captured compute, every time; the
 * capture itself runs nothing. */
START_TEST(replay_matches_launches)
{
	enum { REPLAYS = 5 };
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	ruda_kernel ad = test_register(client, "add_f32", 3, 4);
	ruda_handle g[3], d[3];
	make_buffers(client, g);
	make_buffers(client, d);

	ck_assert_int_eq(ruda_client_graph_prepare(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	sequence(client, sx, ad, g[0], g[1], g[2]);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);

	static float x[N], y[N], z[N];
	start_values(x, y, z);
	expect(client, g[1], y, "y before any replay"); /* capturing ran nothing */
	for (int r = 0; r < REPLAYS; r++) {
		ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
		sequence(client, sx, ad, d[0], d[1], d[2]); /* the same, launched */
		sequence_cpu(x, y, z);
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	const char *names[] = {"x", "y", "z"};
	const float *want[] = {x, y, z};
	for (int b = 0; b < 3; b++) {
		expect(client, g[b], want[b], names[b]);
		expect(client, d[b], want[b], names[b]);
	}
	ruda_daemon_stats st = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &st), RUDA_OK);
	ck_assert_uint_eq(st.session_launches, 2 * REPLAYS * 12);
	ruda_graph_release(graph);
}
END_TEST

/* Many replays, interleaved in order with ordinary launches. */
START_TEST(repeated_replays_in_order)
{
	enum { REPLAYS = 1000 };
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	static float ones[N], y[N];
	for (int i = 0; i < N; i++)
		ones[i] = 1;
	ruda_handle hx, hy;
	ck_assert_int_eq(ruda_client_create(client, ones, sizeof(ones), &hx), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, y, sizeof(y), &hy), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	for (int i = 0; i < 3; i++)
		saxpy(client, sx, hx, hy, 1.0f);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);
	for (int r = 0; r < REPLAYS; r++) {
		ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
		if (r % 100 == 99)
			saxpy(client, sx, hx, hy, -300.0f); /* undoes the last 100 replays */
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect(client, hy, y, "y"); /* all zero again */
	ruda_graph_release(graph);
}
END_TEST

/* While a stream captures, what would wait for it or move bytes is refused
 * with a clear error; other streams carry on. */
START_TEST(capture_refuses_reads_and_syncs)
{
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	static float x[N], y[N];
	for (int i = 0; i < N; i++)
		x[i] = 2;
	ruda_handle hx, hy;
	ck_assert_int_eq(ruda_client_create(client, x, sizeof(x), &hx), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, y, sizeof(y), &hy), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_ERROR_INVALID_ARGUMENT);
	saxpy(client, sx, hx, hy, 1.0f);
	char why[256];
	ck_assert_int_eq(ruda_client_read_one(client, hy, y), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "capturing a graph"), "%s", why);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "capturing a graph"), "%s", why);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &hy, 1), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_graph_prepare(client), RUDA_ERROR_INVALID_ARGUMENT);
	uint64_t ns;
	ruda_profile_window w;
	ck_assert_int_eq(ruda_client_profile_start(client, &w), RUDA_OK);
	ck_assert_int_eq(ruda_client_profile_end(client, w, &ns), RUDA_ERROR_INVALID_ARGUMENT);

	/* another stream is not capturing */
	ruda_client_set_stream(client, 3);
	ck_assert_int_eq(ruda_client_read_one(client, hx, y), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_client_set_stream(client, 0);

	/* the profile start was captured: it fails the capture */
	ruda_graph *graph = NULL;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_null(graph);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "profiling is not captured"), "%s", why);
	/* nothing ran, the stream holds no error, reads work again */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	memset(x, 0, sizeof(x));
	expect(client, hy, x, "y");
}
END_TEST

/* A request that fails inside a capture fails the capture, not the stream;
 * aborting forgets it; a released or unknown graph is an error at sync. */
START_TEST(capture_errors)
{
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	static float x[N], y[N];
	ruda_handle hx, hy;
	ck_assert_int_eq(ruda_client_create(client, x, sizeof(x), &hx), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, y, sizeof(y), &hy), RUDA_OK);
	ruda_graph *graph = NULL;
	char why[256];

	/* not capturing */
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_INVALID_ARGUMENT);

	/* an unknown kernel */
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	saxpy(client, sx + 1000, hx, hy, 1.0f);
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_ptr_null(graph);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	/* a binding out of range */
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	saxpy(client, sx, hx, hy, 1.0f);
	ruda_handle past = {.id = hy.id, .offset = 1u << 20, .size = 4};
	ruda_handle bind[] = {hx, past};
	struct saxpy_push push = {1, N};
	ck_assert_int_eq(ruda_client_launch(client, sx, (ruda_count){1, 1, 1}, bind, 2, &push,
					    sizeof(push)),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_OUT_OF_RANGE);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "outside"), "%s", why);

	/* a write: refused, and the buffer carries the error */
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_write(client, hx, 0, y, 64), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "writes are not captured"), "%s", why);
	ck_assert_int_eq(ruda_client_check(client, &hx, 1), RUDA_ERROR_INVALID_ARGUMENT);

	/* aborted: nothing ran, nothing kept */
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	saxpy(client, sx, hy, hy, 5.0f);
	ck_assert_int_eq(ruda_client_graph_abort_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	expect(client, hy, y, "y");

	/* a graph may not replay into its own stream's capture */
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	saxpy(client, sx, hy, hy, 1.0f);
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	ruda_graph *nested = NULL;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &nested),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, "do not nest"), "%s", why);

	/* a released graph is gone */
	ruda_graph_release(graph);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* A graph pins its buffers: their handles may go, the graph still works,
 * and the memory goes with the graph. Releasing a graph whose replays are
 * in flight lets them finish. */
START_TEST(release_while_replaying)
{
	enum { BIG = 1 << 20, REPLAYS = 20 };
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	float *x = malloc(BIG * sizeof(float)), *y = calloc(BIG, sizeof(float));
	for (int i = 0; i < BIG; i++)
		x[i] = (float)(i % 4);
	ruda_handle hx, hy;
	ck_assert_int_eq(ruda_client_create(client, x, BIG * sizeof(float), &hx), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(client, y, BIG * sizeof(float), &hy), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	struct saxpy_push push = {1, BIG};
	ruda_handle bind[] = {hx, hy};
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_launch(client, sx, (ruda_count){16, 1, 1}, bind, 2,
						    &push, sizeof(push)),
				 RUDA_OK);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(client, hx), RUDA_OK); /* pinned by the graph */
	ck_assert_int_eq(ruda_client_kernel_release(client, sx), RUDA_OK);
	for (int r = 0; r < REPLAYS; r++)
		ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_flush(client), RUDA_OK);
	ruda_graph_release(graph); /* replays in flight */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, hy, y), RUDA_OK);
	for (int i = 0; i < BIG; i++)
		ck_assert_msg(y[i] == (float)(4 * REPLAYS * (i % 4)), "y[%d] = %g", i, (double)y[i]);
	ck_assert_int_eq(ruda_client_release(client, hy), RUDA_OK);
	ruda_daemon_stats after = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(after.device_bytes, base.device_bytes);
	free(x);
	free(y);
}
END_TEST

/* A graph of 50 saxpys replayed 200 times, one capture left open, then
 * replays until the process is killed. */
static int replay_until_killed(ruda_client *c, void *arg)
{
	(void)arg;
	ruda_kernel sx = test_register(c, "saxpy", 2, 8);
	ruda_handle h[3];
	make_buffers(c, h);
	ruda_graph *graph;
	if (ruda_client_graph_start_capture(c) != RUDA_OK)
		return 1;
	for (int i = 0; i < 50; i++)
		saxpy(c, sx, h[0], h[1], 1.0f);
	if (ruda_client_graph_stop_capture(c, &graph) != RUDA_OK)
		return 1;
	/* and one capture left open */
	ruda_client_set_stream(c, 2);
	if (ruda_client_graph_start_capture(c) != RUDA_OK)
		return 1;
	saxpy(c, sx, h[0], h[2], 1.0f);
	ruda_client_set_stream(c, 0);
	for (int r = 0; r < 200; r++)
		ruda_graph_replay(graph);
	ruda_client_flush(c);
	test_fork_ready();
	for (;;)
		ruda_graph_replay(graph);
}

/* A client killed with replays in flight and graphs alive leaves nothing
 * behind, and everyone else carries on. */
START_TEST(killed_while_replaying)
{
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	test_kill(test_fork_client(&daemon_, "replaying", replay_until_killed, NULL));
	ruda_daemon_stats after = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(after.sessions, 1);
	ck_assert_uint_eq(after.device_bytes, base.device_bytes);
	ck_assert(test_daemon_alive(&daemon_));
	/* the daemon still runs graphs */
	ruda_kernel sx = test_register(client, "saxpy", 2, 8);
	ruda_handle h[3];
	make_buffers(client, h);
	ck_assert_int_eq(ruda_client_graph_start_capture(client), RUDA_OK);
	saxpy(client, sx, h[0], h[1], 1.0f);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_stop_capture(client, &graph), RUDA_OK);
	ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_graph_release(graph);
}
END_TEST

/* Closing a client with graphs and a capture open releases them. */
START_TEST(graphs_released_with_session)
{
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	ruda_client *other = test_connect(&daemon_, "other");
	ruda_kernel sx = test_register(other, "saxpy", 2, 8);
	ruda_handle h[3];
	make_buffers(other, h);
	ruda_graph *graph;
	ck_assert_int_eq(ruda_client_graph_start_capture(other), RUDA_OK);
	saxpy(other, sx, h[0], h[1], 1.0f);
	ck_assert_int_eq(ruda_client_graph_stop_capture(other, &graph), RUDA_OK);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ruda_client_release(other, h[i]), RUDA_OK);
	ck_assert_int_eq(ruda_graph_replay(graph), RUDA_OK);
	ck_assert_int_eq(ruda_client_graph_start_capture(other), RUDA_OK);
	ruda_graph_release(graph);
	ruda_client_close(other);
	ruda_daemon_stats after = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(after.device_bytes, base.device_bytes);
	ck_assert_uint_eq(after.device_buffers, base.device_buffers);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("graphs");
	TCase *tc = tcase_create("graphs");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, replay_matches_launches);
	tcase_add_test(tc, repeated_replays_in_order);
	tcase_add_test(tc, capture_refuses_reads_and_syncs);
	tcase_add_test(tc, capture_errors);
	tcase_add_test(tc, release_while_replaying);
	tcase_add_test(tc, killed_while_replaying);
	tcase_add_test(tc, graphs_released_with_session);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
