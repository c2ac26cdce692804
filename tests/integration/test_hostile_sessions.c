/*
 * Hostile clients against connections, sessions and leases (issue 26):
 * a session's teardown must not stall the others, connections that never
 * say Hello must not hold every slot, and exclusive leases taken back to
 * back must not starve everyone else.
 */
#include <check.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* ---- 1. closing a session with 100 000 buffers ----------------------------- */

enum { MANY_BUFFERS = 100000 };

static int make_many_buffers(ruda_client *c, void *arg)
{
	(void)arg;
	for (int i = 0; i < MANY_BUFFERS; i++) {
		ruda_handle h;
		if (ruda_client_empty(c, 16, &h) != RUDA_OK)
			return 1;
	}
	return ruda_client_sync(c) != RUDA_OK;
}

START_TEST(teardown_of_many_buffers_does_not_stall)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *victim = test_connect(&d, "victim");
	uint8_t data[64], back[64];
	test_fill_random(data, sizeof(data), 26);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(victim, data, sizeof(data), &h), RUDA_OK);
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_sync(victim), RUDA_OK);
	ck_assert_int_eq(ruda_client_daemon_stats(victim, &base), RUDA_OK);
	ck_assert_uint_eq(base.sessions, 1);

	pid_t attacker = test_fork_client(&d, "many-buffers", make_many_buffers, NULL);
	ruda_daemon_stats st = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(victim, &st), RUDA_OK);
	ck_assert_uint_ge(st.device_bytes, base.device_bytes + MANY_BUFFERS * 16ull);

	/* the attacker goes; meanwhile the victim's round trips go on */
	test_kill(attacker);
	double worst = 0, start = test_now();
	int rounds = 0, back_to_base = 0;
	while (test_now() - start < 60 && back_to_base < 20) {
		double t0 = test_now();
		memset(back, 0, sizeof(back));
		ck_assert_int_eq(ruda_client_read_one(victim, h, back), RUDA_OK);
		ck_assert_mem_eq(back, data, sizeof(data));
		double gap = test_now() - t0;
		if (gap > worst)
			worst = gap;
		ck_assert_int_eq(ruda_client_daemon_stats(victim, &st), RUDA_OK);
		if (st.sessions == base.sessions && st.device_bytes == base.device_bytes &&
		    st.device_buffers == base.device_buffers)
			back_to_base++;
		rounds++;
	}
	fprintf(stderr, "teardown of %d buffers: %d round trips, the worst %.3f s\n",
		MANY_BUFFERS, rounds, worst);
	ck_assert_msg(back_to_base, "stats did not return to baseline: %u sessions, %llu bytes",
		      st.sessions, (unsigned long long)st.device_bytes);
	/* before the fix one round trip waited for the whole teardown (11-15 s) */
	ck_assert_msg(worst < 2.0, "a round trip waited %.3f s", worst);
	ruda_client_close(victim);
	test_daemon_stop(&d);
}
END_TEST

/* ---- 2. connections that never say Hello ------------------------------------ */

/* What a child of another uid saw of its raw connections. */
struct squat {
	int accepted;            /* still open, nothing received */
	int refused;             /* answered with a Reply id 0, then closed */
	int first_refusal;       /* its status */
	char message[256];       /* its message */
	int timed_out;           /* (wait_timeout) answered ERROR_TIMEOUT, then closed */
	char timeout_message[256];
};

/* Become uid/gid `uid` with no groups. */
static int become(uid_t uid)
{
	return setgroups(0, NULL) < 0 || setresgid(uid, uid, uid) < 0 ||
	       setresuid(uid, uid, uid) < 0;
}

/* A child as `uid` opens `n` raw connections and says nothing. With
 * `wait_timeout`, it waits for rudad to close them; otherwise it reports
 * which were kept and waits for a byte on *go before it closes them. */
static pid_t squat(const struct test_daemon *d, uid_t uid, int n, int wait_timeout,
		   struct squat *out, int *go)
{
	int res[2], gop[2];
	ck_assert_int_eq(pipe(res), 0);
	ck_assert_int_eq(pipe(gop), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(res[0]);
		close(gop[1]);
		if (become(uid))
			_exit(2);
		struct squat sq = {.first_refusal = -1};
		int *fds = calloc((size_t)n, sizeof(int));
		for (int i = 0; i < n; i++)
			fds[i] = raw_connect(d);
		if (wait_timeout) {
			for (int i = 0; i < n; i++) {
				Ruda__Reply *r = raw_recv_reply(fds[i], 10000, NULL);
				if (r && r->id == 0 && r->status == RUDA__STATUS__ERROR_TIMEOUT &&
				    raw_closed_by_peer(fds[i], 5000)) {
					sq.timed_out++;
					snprintf(sq.timeout_message, sizeof(sq.timeout_message), "%s",
						 r->message ? r->message : "");
				}
				if (r)
					ruda__reply__free_unpacked(r, NULL);
			}
		} else {
			usleep(500000); /* rudad has accepted or refused each by now */
			for (int i = 0; i < n; i++) {
				Ruda__Reply *r = raw_recv_reply(fds[i], 20, NULL);
				if (!r) {
					sq.accepted++;
					continue;
				}
				if (r->id == 0 && raw_closed_by_peer(fds[i], 2000) && !sq.refused++) {
					sq.first_refusal = r->status;
					snprintf(sq.message, sizeof(sq.message), "%s",
						 r->message ? r->message : "");
				}
				ruda__reply__free_unpacked(r, NULL);
			}
		}
		if (write(res[1], &sq, sizeof(sq)) != (ssize_t)sizeof(sq))
			_exit(3);
		char x;
		if (!wait_timeout && read(gop[0], &x, 1) < 0)
			_exit(4);
		_exit(0);
	}
	close(res[1]);
	close(gop[0]);
	ck_assert_int_eq(read(res[0], out, sizeof(*out)), (ssize_t)sizeof(*out));
	close(res[0]);
	if (go)
		*go = gop[1];
	else
		close(gop[1]);
	return pid;
}

static void squat_end(pid_t pid, int go)
{
	if (go >= 0) {
		ck_assert_int_eq(write(go, "x", 1), 1);
		close(go);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "squatter status %d", st);
}

/* Let other uids in. */
static void open_socket(const struct test_daemon *d)
{
	ck_assert_int_eq(chmod(d->dir, 0755), 0);
	ck_assert_int_eq(chmod(d->socket_path, 0666), 0);
}

/* A well-behaved client as `uid` (in a child): its data back byte for
 * byte. Returns the child's exit status (0: all good). */
static int good_client_as(const struct test_daemon *d, uid_t uid)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (become(uid))
			_exit(2);
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = d->socket_path, .client_name = "good"};
		ruda_client *c;
		if (ruda_client_connect(&o, &c) != RUDA_OK)
			_exit(3);
		uint8_t data[4096], back[4096];
		test_fill_random(data, sizeof(data), uid);
		ruda_handle h;
		if (ruda_client_create(c, data, sizeof(data), &h) != RUDA_OK ||
		    ruda_client_read_one(c, h, back) != RUDA_OK || memcmp(data, back, sizeof(data)))
			_exit(4);
		ruda_client_close(c);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

/* The same, retried for a while: rudad notices closed connections a
 * moment after they close. */
static int good_client_as_soon(const struct test_daemon *d, uid_t uid)
{
	int st = 100;
	for (int i = 0; i < 100 && (st = good_client_as(d, uid)) == 3; i++)
		usleep(50000);
	return st;
}

/* The same as root, in this process. */
static void good_client_as_root(const struct test_daemon *d)
{
	ruda_client *c = test_connect(d, "root");
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 0);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_mem_eq(data, back, sizeof(data));
	ruda_client_close(c);
}

static int rudactl_status(const struct test_daemon *d)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s --socket %s status >/dev/null 2>&1",
		 test_build_path("rudactl"), d->socket_path);
	int st = system(cmd);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

START_TEST(pending_connections_are_limited_per_uid)
{
	struct test_daemon d;
	const char *const args[] = {"--set", "max_pending_per_uid=8", "--set",
				    "handshake_timeout_ms=600000", NULL};
	test_daemon_start(&d, args);
	open_socket(&d);
	struct squat sq;
	int go;
	pid_t pid = squat(&d, 65534, 12, 0, &sq, &go);
	ck_assert_int_eq(sq.accepted, 8);
	ck_assert_int_eq(sq.refused, 4);
	ck_assert_int_eq(sq.first_refusal, RUDA_ERROR_BUSY);
	ck_assert_msg(strstr(sq.message, "uid 65534") && strstr(sq.message, "max_pending_per_uid"),
		      "%s", sq.message);
	/* the others still get in: another uid, root, rudactl */
	ck_assert_int_eq(good_client_as(&d, 65533), 0);
	good_client_as_root(&d);
	ck_assert_int_eq(rudactl_status(&d), 0);
	squat_end(pid, go);
	/* and once the squatter has gone, its uid too */
	ck_assert_int_eq(good_client_as_soon(&d, 65534), 0);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(silent_connections_time_out)
{
	struct test_daemon d;
	const char *const args[] = {"--set", "handshake_timeout_ms=300", NULL};
	test_daemon_start(&d, args);
	open_socket(&d);
	struct squat sq;
	double t0 = test_now();
	pid_t pid = squat(&d, 65534, 20, 1, &sq, NULL);
	ck_assert_int_eq(sq.timed_out, 20);
	ck_assert_msg(strstr(sq.timeout_message, "no Hello within 300 ms") &&
			      strstr(sq.timeout_message, "handshake_timeout_ms"),
		      "%s", sq.timeout_message);
	ck_assert_msg(test_now() - t0 < 10, "took %.1f s", test_now() - t0);
	squat_end(pid, -1);
	/* a client that says Hello at once is not affected */
	ck_assert_int_eq(good_client_as(&d, 65534), 0);
	ruda_client *c = test_connect(&d, "stats");
	ruda_daemon_stats st = test_wait_for_stats(c, 1, 0);
	ck_assert_uint_eq(st.sessions, 1);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(admins_get_in_when_the_slots_are_full)
{
	struct test_daemon d;
	const char *const args[] = {"--set", "max_clients=12", "--set",
				    "handshake_timeout_ms=600000", NULL};
	test_daemon_start(&d, args);
	open_socket(&d);
	/* root holds one slot (once the harness's readiness probe has gone) */
	ruda_client *c = test_connect(&d, "stats");
	ck_assert_uint_eq(test_wait_for_stats(c, 1, 0).sessions, 1);
	struct squat sq;
	int go;
	pid_t pid = squat(&d, 65534, 12, 0, &sq, &go);
	/* 12 less the 4 kept for administrators (admin_reserved_clients),
	 * less root's */
	ck_assert_int_eq(sq.accepted, 7);
	ck_assert_int_eq(sq.refused, 5);
	ck_assert_int_eq(sq.first_refusal, RUDA_ERROR_BUSY);
	ck_assert_msg(strstr(sq.message, "admin_reserved_clients"), "%s", sq.message);
	/* an ordinary client of another uid is refused, and told why */
	ck_assert_int_eq(good_client_as(&d, 65533), 3);
	/* root is not: rudactl, and a client of root's */
	ck_assert_int_eq(rudactl_status(&d), 0);
	good_client_as_root(&d);
	squat_end(pid, go);
	ck_assert_int_eq(good_client_as_soon(&d, 65533), 0);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(policy_refuses_at_accept)
{
	struct test_daemon d;
	const char *const args[] = {"--set", "allowed_users=root", "--set",
				    "handshake_timeout_ms=600000", NULL};
	test_daemon_start(&d, args);
	open_socket(&d);
	struct squat sq;
	int go;
	pid_t pid = squat(&d, 65534, 100, 0, &sq, &go);
	ck_assert_int_eq(sq.accepted, 0);
	ck_assert_int_eq(sq.refused, 100);
	ck_assert_int_eq(sq.first_refusal, RUDA_ERROR_PERMISSION);
	ck_assert_msg(strstr(sq.message, "uid 65534") && strstr(sq.message, "allowed_users"), "%s",
		      sq.message);
	good_client_as_root(&d);
	squat_end(pid, go);
	test_daemon_stop(&d);
}
END_TEST

/* ---- 3. exclusive leases back to back --------------------------------------- */

/* One checked result: out = a + b over 4096 floats, compared with the
 * CPU's sums. */
struct adder {
	ruda_client *c;
	ruda_kernel add;
	ruda_handle h[3];
	float a[4096], b[4096], out[4096];
};

static void adder_init(struct adder *x, ruda_client *c)
{
	x->c = c;
	x->add = test_register(c, "add_f32", 3, 4);
	for (int i = 0; i < 4096; i++) {
		x->a[i] = (float)i;
		x->b[i] = (float)(3 * i + 1);
	}
	ck_assert_int_eq(ruda_client_create(c, x->a, sizeof(x->a), &x->h[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, x->b, sizeof(x->b), &x->h[1]), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(c, sizeof(x->out), &x->h[2]), RUDA_OK);
}

/* Results in `seconds`, each checked. */
static int adder_run(struct adder *x, double seconds)
{
	int results = 0;
	uint32_t n = 4096;
	for (double start = test_now(); test_now() - start < seconds; results++) {
		memset(x->out, 0, sizeof(x->out));
		ck_assert_int_eq(ruda_client_launch(x->c, x->add, (ruda_count){16, 1, 1}, x->h, 3, &n,
						    4), RUDA_OK);
		ck_assert_int_eq(ruda_client_read_one(x->c, x->h[2], x->out), RUDA_OK);
		for (int i = 0; i < 4096; i++)
			ck_assert(x->out[i] == x->a[i] + x->b[i]);
	}
	return results;
}

/* As uid 65534: leases of `hold_ms` back to back until killed; a byte on
 * `ready` once the first is held. */
static pid_t lease_hog(const struct test_daemon *d, int hold_ms, int ready)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	if (become(65534))
		_exit(2);
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path, .client_name = "lease-hog"};
	ruda_client *c;
	if (ruda_client_connect(&o, &c) != RUDA_OK)
		_exit(3);
	for (int i = 0;; i++) {
		if (ruda_client_exclusive_begin(c, 0) != RUDA_OK)
			_exit(4);
		if (i == 0 && write(ready, "x", 1) != 1)
			_exit(5);
		usleep((useconds_t)hold_ms * 1000);
		if (ruda_client_exclusive_end(c) != RUDA_OK)
			_exit(6);
	}
}

START_TEST(back_to_back_leases_do_not_starve_others)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	open_socket(&d);
	struct adder x;
	adder_init(&x, test_connect(&d, "victim"));
	int alone = adder_run(&x, 1.5);

	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t hog = lease_hog(&d, 150, ready[1]);
	char c;
	ck_assert_int_eq(read(ready[0], &c, 1), 1);
	int beside = adder_run(&x, 1.5);
	/* still taking leases: the hog was not refused, only rationed */
	ck_assert_int_eq(waitpid(hog, NULL, WNOHANG), 0);
	test_kill(hog);
	close(ready[0]);
	close(ready[1]);
	fprintf(stderr, "results in 1.5 s: %d alone, %d beside leases of 150 ms back to back\n",
		alone, beside);
	/* exclusive_share = 50: about half; before, ~1 per lease (~10) */
	ck_assert_msg(beside * 5 >= alone, "%d results beside the leases, %d alone", beside, alone);
	ruda_client_close(x.c);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(leases_follow_the_policy)
{
	struct test_daemon d;
	const char *const args[] = {"--set", "exclusive_users=root", "--set",
				    "max_exclusive_ms=300", NULL};
	test_daemon_start(&d, args);
	open_socket(&d);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (become(65534))
			_exit(2);
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = d.socket_path, .client_name = "no-lease"};
		ruda_client *cl;
		if (ruda_client_connect(&o, &cl) != RUDA_OK)
			_exit(3);
		char why[256];
		if (ruda_client_exclusive_begin(cl, 0) != RUDA_ERROR_PERMISSION)
			_exit(4);
		ruda_client_last_error(cl, why, sizeof(why));
		if (!strstr(why, "uid 65534") || !strstr(why, "exclusive_users"))
			_exit(5);
		/* the refusal ends nothing: the client goes on */
		uint8_t data[256], back[256];
		test_fill_random(data, sizeof(data), 3);
		ruda_handle h;
		if (ruda_client_create(cl, data, sizeof(data), &h) != RUDA_OK ||
		    ruda_client_read_one(cl, h, back) != RUDA_OK || memcmp(data, back, sizeof(data)))
			_exit(6);
		ruda_client_close(cl);
		_exit(0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
	/* root may; asking for a minute gets max_exclusive_ms, and asking
	 * again while holding it does not make it longer */
	ruda_client *c = test_connect(&d, "root");
	ck_assert_int_eq(ruda_client_exclusive_begin(c, 60000), RUDA_OK);
	usleep(200000);
	ck_assert_int_eq(ruda_client_exclusive_begin(c, 60000), RUDA_OK);
	usleep(400000);
	ck_assert_int_eq(ruda_client_exclusive_end(c), RUDA_ERROR_LEASE_EXPIRED);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_sessions");
	TCase *tc = tcase_create("hostile");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, teardown_of_many_buffers_does_not_stall);
	tcase_add_test(tc, pending_connections_are_limited_per_uid);
	tcase_add_test(tc, silent_connections_time_out);
	tcase_add_test(tc, admins_get_in_when_the_slots_are_full);
	tcase_add_test(tc, policy_refuses_at_accept);
	tcase_add_test(tc, back_to_back_leases_do_not_starve_others);
	tcase_add_test(tc, leases_follow_the_policy);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
