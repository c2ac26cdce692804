/*
 * A connect that fails says which socket and why, with no client object:
 * ruda_client_last_error(NULL, ...) carries the reason, *out is NULL, and
 * the status tells the cases apart.
 */
#include <check.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

struct attempt {
	ruda_status status;
	int out_was_null;
	char message[512];
};

static void attempt_connect(const char *path, struct attempt *a)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = path, .client_name = "connect-errors"};
	ruda_client *c = (ruda_client *)&o; /* must come back NULL */
	a->status = ruda_client_connect(&o, &c);
	a->out_was_null = c == NULL;
	ruda_client_last_error(NULL, a->message, sizeof(a->message));
	if (a->status == RUDA_OK)
		ruda_client_close(c);
}

/* The same attempt in a child that is uid/gid 65534 with no groups. */
static void attempt_as_nobody(const char *path, int clear_env, struct attempt *a)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[0]);
		if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
		    setresuid(65534, 65534, 65534) < 0)
			_exit(2);
		if (clear_env) {
			unsetenv("RUDA_SOCKET");
			unsetenv("XDG_RUNTIME_DIR");
		}
		struct attempt mine;
		attempt_connect(path, &mine);
		_exit(write(p[1], &mine, sizeof(mine)) == (ssize_t)sizeof(mine) ? 0 : 3);
	}
	close(p[1]);
	ssize_t n = read(p[0], a, sizeof(*a));
	close(p[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0 && n == (ssize_t)sizeof(*a),
		      "child status %d", st);
}

START_TEST(missing_socket_is_named)
{
	const char *path = "/tmp/ruda-no-such-dir/rudad.sock";
	struct attempt a;
	attempt_connect(path, &a);
	ck_assert_int_eq(a.status, RUDA_ERROR_DISCONNECTED);
	ck_assert(a.out_was_null);
	ck_assert_msg(strstr(a.message, path) && strstr(a.message, "no such socket"), "%s",
		      a.message);
	/* the length without a buffer, as snprintf does */
	ck_assert_uint_eq(ruda_client_last_error(NULL, NULL, 0), strlen(a.message));
	ck_assert_uint_eq(ruda_client_session_id(NULL), 0);
}
END_TEST

START_TEST(nothing_listening_is_named)
{
	char dir[] = "/tmp/ruda-test-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/dead.sock", dir);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd); /* bound, never listened: a daemon that died */
	struct attempt a;
	attempt_connect(addr.sun_path, &a);
	ck_assert_int_eq(a.status, RUDA_ERROR_DISCONNECTED);
	ck_assert_msg(strstr(a.message, addr.sun_path) && strstr(a.message, "nothing listens"),
		      "%s", a.message);
	test_remove_tree(dir);
}
END_TEST

START_TEST(permission_names_the_group)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ck_assert_int_eq(chmod(d.dir, 0755), 0);
	ck_assert_int_eq(chown(d.socket_path, 0, 1), 0);
	ck_assert_int_eq(chmod(d.socket_path, 0660), 0);
	struct group *g = getgrgid(1);
	ck_assert_ptr_nonnull(g);
	char group[64];
	snprintf(group, sizeof(group), "'%s'", g->gr_name);

	struct attempt a;
	attempt_as_nobody(d.socket_path, 0, &a);
	ck_assert_int_eq(a.status, RUDA_ERROR_PERMISSION);
	ck_assert(a.out_was_null);
	ck_assert_msg(strstr(a.message, d.socket_path) && strstr(a.message, "permission denied") &&
			      strstr(a.message, group),
		      "%s", a.message);
	/* rudad saw nothing of it and serves root as before */
	ruda_client *c = test_connect(&d, "after");
	char buf[8] = "x";
	ck_assert_uint_eq(ruda_client_last_error(NULL, buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "");
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(no_path_to_try)
{
	struct attempt a;
	attempt_as_nobody(NULL, 1, &a);
	ck_assert_int_eq(a.status, RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert(a.out_was_null);
	ck_assert_msg(strstr(a.message, "RUDA_SOCKET") && strstr(a.message, "XDG_RUNTIME_DIR"), "%s",
		      a.message);
}
END_TEST

START_TEST(full_daemon_says_busy)
{
	struct test_daemon d;
	const char *const one[] = {"--set", "max_clients=1", NULL};
	test_daemon_start(&d, one);
	/* the harness's readiness probe may hold the one slot for a moment */
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d.socket_path, .client_name = "first"};
	ruda_client *first = NULL;
	for (int i = 0; i < 200 && ruda_client_connect(&o, &first) == RUDA_ERROR_BUSY; i++)
		usleep(10000);
	ck_assert_ptr_nonnull(first);
	struct attempt a;
	attempt_connect(d.socket_path, &a);
	ck_assert_int_eq(a.status, RUDA_ERROR_BUSY);
	ck_assert(a.out_was_null);
	ck_assert_msg(strstr(a.message, d.socket_path) && strstr(a.message, "max_clients"), "%s",
		      a.message);
	/* the one already there is served throughout */
	ruda_handle h;
	uint32_t v = 0x12345678, back = 0;
	ck_assert_int_eq(ruda_client_create(first, &v, sizeof(v), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(first, h, &back), RUDA_OK);
	ck_assert_uint_eq(back, v);
	ruda_client_close(first);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("connect_errors");
	TCase *tc = tcase_create("connect_errors");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, missing_socket_is_named);
	tcase_add_test(tc, nothing_listening_is_named);
	tcase_add_test(tc, permission_names_the_group);
	tcase_add_test(tc, no_path_to_try);
	tcase_add_test(tc, full_daemon_says_busy);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
