/* Start-up, shutdown and the README's example against a real rudad. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Run a program with RUDA_SOCKET set; its stdout goes to `out`. */
static int run_program(const char *socket_path, const char *const *argv, char *out, size_t len)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("RUDA_SOCKET", socket_path, 1);
		dup2(p[1], STDOUT_FILENO);
		close(p[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(p[1]);
	size_t used = 0;
	ssize_t n;
	while (used + 1 < len && (n = read(p[0], out + used, len - used - 1)) > 0)
		used += (size_t)n;
	out[used] = '\0';
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

START_TEST(readme_example_runs)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	char spv[512], out[4096];
	snprintf(spv, sizeof(spv), "%s", test_build_path("shaders/add_f32.spv"));
	const char *argv[] = {test_build_path("example"), spv, NULL};
	char example[512];
	snprintf(example, sizeof(example), "%s", argv[0]);
	argv[0] = example;
	ck_assert_int_eq(run_program(d.socket_path, argv, out, sizeof(out)), 0);
	ck_assert_ptr_nonnull(strstr(out, "ok: 4096 sums correct"));
	test_daemon_stop(&d);
}
END_TEST

/* SIGTERM with clients connected: the socket goes, clients see it. */
START_TEST(shutdown_with_clients)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "left behind");
	ruda_handle h;
	uint8_t data[64] = {1, 2, 3};
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	test_daemon_stop(&d); /* asserts exit 0 and the socket removed */
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_DISCONNECTED);
	ck_assert_int_eq(ruda_client_read_one(c, h, data), RUDA_ERROR_DISCONNECTED);
	ruda_client_close(c);
}
END_TEST

START_TEST(connect_without_daemon)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = "/tmp/ruda-no-such-dir/rudad.sock"};
	ruda_client *c = NULL;
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_ERROR_DISCONNECTED);
	ck_assert_ptr_null(c);
}
END_TEST

/* A second daemon on a live socket refuses to start; a stale one is
 * replaced. */
START_TEST(socket_ownership)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, STDERR_FILENO);
		execl(test_build_path("rudad"), "rudad", "--socket", d.socket_path, (char *)NULL);
		_exit(127);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1);
	ruda_client *c = test_connect(&d, "still served");
	ruda_client_close(c);
	test_daemon_stop(&d);

	/* leave a stale socket file behind, as a crashed daemon would */
	char dir[] = "/tmp/ruda-stale-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/rudad.sock", dir);
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd);
	ck_assert_int_eq(access(addr.sun_path, F_OK), 0);
	struct test_daemon d2;
	test_daemon_start_at(&d2, addr.sun_path, NULL);
	c = test_connect(&d2, "after stale");
	ruda_client_close(c);
	test_daemon_stop(&d2);
	rmdir(dir);
}
END_TEST

START_TEST(properties_reported)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "props");
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(c, &p), RUDA_OK);
	ck_assert_str_ne(p.name, "");
	ck_assert_uint_gt(p.max_buffer_size, 0);
	ck_assert_uint_gt(p.max_workgroup_count[0], 0);
	ck_assert_uint_gt(p.max_push_constants_size, 0);
	ck_assert_uint_ge(p.max_bindings, 4);
	ck_assert_int_eq(p.host_import, 1);
	ck_assert_uint_gt(ruda_client_session_id(c), 0);
	ck_assert_str_eq(ruda_client_name(c), "ruda");
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("lifecycle");
	TCase *tc = tcase_create("lifecycle");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, readme_example_runs);
	tcase_add_test(tc, shutdown_with_clients);
	tcase_add_test(tc, connect_without_daemon);
	tcase_add_test(tc, socket_ownership);
	tcase_add_test(tc, properties_reported);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
