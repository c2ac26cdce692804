/*
 * rudad as a system service: socket activation, sd_notify, the units,
 * configuration checks, the access policy against a client of another
 * uid, and `make install` used by a program built with pkg-config.
 *
 * Needs systemd's tools (systemd-socket-activate, systemd-analyze) but not
 * systemd as PID 1; a test whose tool is missing prints "SKIP name: why" and
 * tests/run.sh counts it as skipped.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef RUDA_SOURCE_DIR
#define RUDA_SOURCE_DIR "."
#endif
#ifndef RUDA_SAN_FLAGS
#define RUDA_SAN_FLAGS ""
#endif

#define NOBODY 65534

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* Run argv (PATH searched) with extra "KEY=VALUE" environment entries;
 * stdout and stderr together into out. Returns the exit status, or -1. */
static int run(const char *const *argv, const char *const *env, char *out, size_t len)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		/* a make above us must not hand its settings to ours */
		unsetenv("MAKEFLAGS");
		unsetenv("MFLAGS");
		unsetenv("MAKELEVEL");
		for (int i = 0; env && env[i]; i++)
			putenv((char *)env[i]);
		dup2(p[1], STDOUT_FILENO);
		dup2(p[1], STDERR_FILENO);
		close(p[0]);
		close(p[1]);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	size_t used = 0;
	ssize_t n;
	char sink[4096];
	while ((n = read(p[0], used + 1 < len ? out + used : sink,
			 used + 1 < len ? len - used - 1 : sizeof(sink))) > 0)
		if (used + 1 < len)
			used += (size_t)n;
	out[used] = '\0';
	close(p[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int have(const char *program)
{
	char cmd[256], out[256];
	snprintf(cmd, sizeof(cmd), "command -v %s", program);
	const char *argv[] = {"sh", "-c", cmd, NULL};
	return run(argv, NULL, out, sizeof(out)) == 0;
}

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");
	ck_assert_msg(f != NULL, "cannot write %s", path);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
	char cmd[1024], out[512];
	snprintf(cmd, sizeof(cmd), "cp -L '%s' '%s' && chmod %o '%s'", from, to, (unsigned)mode, to);
	const char *argv[] = {"sh", "-c", cmd, NULL};
	ck_assert_msg(run(argv, NULL, out, sizeof(out)) == 0, "%s: %.2000s", cmd, out);
}

static char *read_text(const char *path)
{
	FILE *f = fopen(path, "r");
	if (!f)
		return strdup("");
	char *text = NULL;
	size_t len = 0;
	ssize_t n = getdelim(&text, &len, '\0', f);
	fclose(f);
	if (n < 0) {
		free(text);
		return strdup("");
	}
	return text;
}

/* Wait until the file contains every one of the strings (NULL-ended). */
static int wait_for_text(const char *path, int timeout_ms, ...)
{
	for (int waited = 0;; waited += 50) {
		char *text = read_text(path);
		va_list ap;
		va_start(ap, timeout_ms);
		int all = 1;
		const char *want;
		while ((want = va_arg(ap, const char *)))
			if (!strstr(text, want))
				all = 0;
		va_end(ap);
		free(text);
		if (all)
			return 1;
		if (waited >= timeout_ms)
			return 0;
		sleep_ms(50);
	}
}

static void rm_rf(const char *path)
{
	char cmd[512], out[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", path);
	const char *argv[] = {"sh", "-c", cmd, NULL};
	run(argv, NULL, out, sizeof(out));
}

/* ---- configuration --------------------------------------------------------- */

START_TEST(check_config_names_lines)
{
	char dir[] = "/tmp/ruda-svc-XXXXXX", bad[128], good[128], out[4096], where[160];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(bad, sizeof(bad), "%s/bad.conf", dir);
	snprintf(good, sizeof(good), "%s/good.conf", dir);
	write_file(bad, "max_clients = 10\nsocket_mode = 8\n\nbogus = 1\n[user 1000]\n"
			"max_memory_per_uid = much\n", 0644);
	write_file(good, "# fine\nmax_clients = 10\n[user 1000]\nmax_memory_per_uid = 2G\n", 0644);
	char rudad[512];
	snprintf(rudad, sizeof(rudad), "%s", test_build_path("rudad"));

	const char *check_bad[] = {rudad, "--check-config", "--config", bad, NULL};
	ck_assert_int_eq(run(check_bad, NULL, out, sizeof(out)), 1);
	snprintf(where, sizeof(where), "%s:2: socket_mode", bad);
	ck_assert_msg(strstr(out, where), "%.2000s", out);
	snprintf(where, sizeof(where), "%s:4: unknown key 'bogus'", bad);
	ck_assert_msg(strstr(out, where), "%.2000s", out);
	snprintf(where, sizeof(where), "%s:6: max_memory_per_uid: 'much'", bad);
	ck_assert_msg(strstr(out, where), "%.2000s", out);

	const char *check_good[] = {rudad, "--check-config", "--config", good, NULL};
	ck_assert_int_eq(run(check_good, NULL, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, ": ok"), "%.2000s", out);

	/* the command line is checked too, and overrides the file */
	const char *check_cli[] = {rudad, "--check-config", "--config", good,
				   "--max-clients", "0", NULL};
	ck_assert_int_eq(run(check_cli, NULL, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "max_clients: 0 is out of range"), "%.2000s", out);
	const char *print[] = {rudad, "--print-config", "--config", good, "--set", "max_clients=99",
			       NULL};
	ck_assert_int_eq(run(print, NULL, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "max_clients = 99\n"), "%.2000s", out);

	/* a named file must exist; a daemon with a bad file does not start */
	char missing[160];
	snprintf(missing, sizeof(missing), "%s/missing.conf", dir);
	const char *check_missing[] = {rudad, "--check-config", "--config", missing, NULL};
	ck_assert_int_eq(run(check_missing, NULL, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "cannot open"), "%.2000s", out);
	char sock[160];
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	const char *start_bad[] = {rudad, "--config", bad, "--socket", sock, NULL};
	ck_assert_int_eq(run(start_bad, NULL, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "not starting"), "%.2000s", out);
	ck_assert_int_ne(access(sock, F_OK), 0);
	rm_rf(dir);
}
END_TEST

/* A socket rudad binds itself gets socket_mode and socket_group before
 * anyone can connect; a bad group stops the start with a clear message. */
START_TEST(socket_mode_and_group)
{
	struct test_daemon d;
	const char *args[] = {"--set", "socket_mode=0640", "--set", "socket_group=65534", NULL};
	test_daemon_start(&d, args);
	struct stat st;
	ck_assert_int_eq(stat(d.socket_path, &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	ck_assert_uint_eq(st.st_mode & 07777, 0640);
	ck_assert_uint_eq(st.st_gid, 65534);
	test_daemon_stop(&d);

	char out[4096];
	const char *bad[] = {test_build_path("rudad"), "--set", "socket_group=no-such-group-x",
			     "--check-config", NULL};
	ck_assert_int_eq(run(bad, NULL, out, sizeof(out)), 2);
	ck_assert_msg(strstr(out, "socket_group: no group named 'no-such-group-x'"), "%.2000s",
		      out);
}
END_TEST

/* ---- systemd ---------------------------------------------------------------- */

/* systemd-socket-activate listens, and starts rudad on the first
 * connection with the socket as fd 3. */
START_TEST(socket_activation)
{
	if (!have("systemd-socket-activate")) {
		fprintf(stderr, "SKIP socket_activation: systemd-socket-activate is not installed "
				"(Debian package systemd)\n");
		return;
	}
	char dir[] = "/tmp/ruda-svc-XXXXXX", log[128];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	struct test_daemon d;
	memset(&d, 0, sizeof(d));
	snprintf(d.socket_path, sizeof(d.socket_path), "%s/rudad.sock", dir);
	snprintf(log, sizeof(log), "%s/rudad.log", dir);
	char rudad[512];
	snprintf(rudad, sizeof(rudad), "%s", test_build_path("rudad"));
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execlp("systemd-socket-activate", "systemd-socket-activate", "-l", d.socket_path,
		       rudad, "--log-level", "info", (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 200 && access(d.socket_path, F_OK) != 0; i++)
		sleep_ms(50);
	ck_assert_msg(access(d.socket_path, F_OK) == 0, "no socket; see %s", log);

	/* this connection is what starts rudad */
	ruda_client *c = test_connect(&d, "activated");
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 8);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_mem_eq(back, data, sizeof(data));
	ruda_client_close(c);
	ck_assert_msg(wait_for_text(log, 5000, "passed by the service manager", (char *)NULL),
		      "rudad did not say it uses the passed socket; see %s", log);

	kill(pid, SIGTERM);
	int status;
	waitpid(pid, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %d; see %s", status,
		      log);
	/* the socket belongs to whoever passed it */
	ck_assert_int_eq(access(d.socket_path, F_OK), 0);
	rm_rf(dir);
}
END_TEST

/* Receive sd_notify datagrams until `want` arrives; all of them are
 * appended to `seen`. */
static int notify_wait(int fd, const char *want, char *seen, size_t len, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 100) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (poll(&p, 1, 100) <= 0)
			continue;
		char msg[1024];
		ssize_t n = recv(fd, msg, sizeof(msg) - 1, 0);
		if (n <= 0)
			continue;
		msg[n] = '\0';
		size_t used = strlen(seen);
		snprintf(seen + used, len - used, "%s\n--\n", msg);
		if (strstr(msg, want))
			return 1;
	}
	return 0;
}

START_TEST(sd_notify_messages)
{
	char dir[] = "/tmp/ruda-svc-XXXXXX", path[64], seen[16384] = "";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/notify", dir);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	setenv("NOTIFY_SOCKET", path, 1);
	setenv("WATCHDOG_USEC", "200000", 1);
	unsetenv("WATCHDOG_PID");

	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ck_assert_msg(notify_wait(fd, "READY=1", seen, sizeof(seen), 10000), "no READY=1: %.2000s",
		      seen);
	ck_assert_msg(strstr(seen, "STATUS="), "no STATUS=: %.2000s", seen);
	ck_assert_msg(notify_wait(fd, "WATCHDOG=1", seen, sizeof(seen), 3000), "no WATCHDOG=1: %.2000s",
		      seen);

	kill(d.pid, SIGHUP);
	ck_assert_msg(notify_wait(fd, "RELOADING=1", seen, sizeof(seen), 5000),
		      "no RELOADING=1: %.2000s", seen);
	ck_assert_msg(strstr(seen, "RELOADING=1\nMONOTONIC_USEC="), "%.2000s", seen);
	ck_assert_msg(notify_wait(fd, "READY=1", seen, sizeof(seen), 5000),
		      "no READY=1 after the reload: %.2000s", seen);
	ck_assert(wait_for_text(d.log_path, 5000, "reloaded", (char *)NULL));

	test_daemon_stop(&d); /* SIGTERM; the datagrams wait in the socket */
	ck_assert_msg(notify_wait(fd, "STOPPING=1", seen, sizeof(seen), 1000), "no STOPPING=1: %.2000s",
		      seen);
	close(fd);
	unlink(path);
	rmdir(dir);
}
END_TEST

/* The soft limit on open files of `pid`, from /proc. */
static unsigned long long soft_nofile(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/limits", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	unsigned long long soft = 0;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Max open files", 14) == 0)
			soft = strtoull(line + 14, NULL, 10);
	fclose(f);
	return soft;
}

/* Raising max_clients with SIGHUP raises the open-files limit the clients
 * need (two descriptors each), as at start. */
START_TEST(reload_raises_fd_limit)
{
	struct rlimit saved, low;
	ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
	if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < 2 * 600 + 64) {
		fprintf(stderr, "SKIP reload_raises_fd_limit: hard limit %llu\n",
			(unsigned long long)saved.rlim_max);
		return;
	}
	char dir[] = "/tmp/ruda-svc-XXXXXX", conf[128];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(conf, sizeof(conf), "%s/rudad.conf", dir);
	write_file(conf, "max_clients = 10\n", 0644);
	low = saved;
	low.rlim_cur = 200; /* rudad inherits it */
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
	struct test_daemon d;
	const char *args[] = {"--config", conf, NULL};
	test_daemon_start(&d, args);
	ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
	ck_assert_uint_eq(soft_nofile(d.pid), 200); /* 10 clients fit */

	write_file(conf, "max_clients = 600\n", 0644);
	kill(d.pid, SIGHUP);
	ck_assert(wait_for_text(d.log_path, 5000, "reloaded", (char *)NULL));
	ck_assert_uint_eq(soft_nofile(d.pid), 2 * 600 + 64);
	test_daemon_stop(&d);
	unlink(conf);
	rmdir(dir);
}
END_TEST

/* `systemd-analyze verify` on the units, with rudad where ExecStart= says
 * it is, and the hardening score kept. */
START_TEST(units_verify)
{
	if (!have("systemd-analyze")) {
		fprintf(stderr, "SKIP units_verify: systemd-analyze is not installed "
				"(Debian package systemd)\n");
		return;
	}
	char dir[] = "/tmp/ruda-svc-XXXXXX", cmd[2048];
	static char out[1 << 17]; /* security prints wide lines */
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
		 "set -e; cd '%s'; sed 's|/usr/sbin/rudad|%s|' systemd/rudad.service > '%s/rudad.service'; "
		 "cp systemd/rudad.socket '%s/'; mkdir -p '%s/man/man5' '%s/man/man8'; "
		 "cp docs/man/rudad.8 '%s/man/man8/'; cp docs/man/rudad.conf.5 '%s/man/man5/'",
		 RUDA_SOURCE_DIR, test_build_path("rudad"), dir, dir, dir, dir, dir, dir);
	const char *prepare[] = {"sh", "-c", cmd, NULL};
	ck_assert_msg(run(prepare, NULL, out, sizeof(out)) == 0, "%.2000s", out);

	/* Documentation= is checked with man(1) when it is there */
	char manpath[160], service[160], socket_unit[160];
	snprintf(manpath, sizeof(manpath), "MANPATH=%s/man", dir);
	snprintf(service, sizeof(service), "%s/rudad.service", dir);
	snprintf(socket_unit, sizeof(socket_unit), "%s/rudad.socket", dir);
	int man = have("man");
	if (!man)
		fprintf(stderr, "units_verify: man(1) is not installed; Documentation= unchecked\n");
	const char *env[] = {manpath, NULL};
	const char *verify[] = {"systemd-analyze", "verify", man ? "--man=yes" : "--man=no",
				service, socket_unit, NULL};
	int rc = run(verify, env, out, sizeof(out));
	if (rc != 0 || *out)
		fprintf(stderr, "systemd-analyze verify: exit %d:\n%s\n", rc, out);
	ck_assert_msg(rc == 0 && !*out, "systemd-analyze verify is not clean (above)");

	const char *security[] = {"systemd-analyze", "security", "--offline=yes", service, NULL};
	rc = run(security, NULL, out, sizeof(out));
	if (rc != 0 && strstr(out, "offline")) {
		fprintf(stderr, "SKIP units_verify (security): this systemd-analyze has no "
				"--offline\n");
	} else {
		const char *level = strstr(out, "Overall exposure level for rudad.service: ");
		if (!level)
			fprintf(stderr, "systemd-analyze security: exit %d:\n%s\n", rc, out);
		ck_assert_msg(level, "no exposure level from systemd-analyze security (above)");
		double score = atof(level + strlen("Overall exposure level for rudad.service: "));
		/* docs/deploy.md records 0.8 */
		ck_assert_msg(score <= 1.5, "exposure %.1f; docs/deploy.md says 0.8", score);
	}
	rm_rf(dir);
}
END_TEST

START_TEST(man_pages_render)
{
	if (!have("man")) {
		fprintf(stderr, "SKIP man_pages_render: man(1) is not installed\n");
		return;
	}
	static const char *const pages[] = {"rudad.8", "rudad.conf.5", "libruda.3", "rudactl.1"};
	for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
		char cmd[1024], out[8192];
		/* warnings only: the rendered text goes away */
		snprintf(cmd, sizeof(cmd), "man --warnings -l '%s/docs/man/%s' 2>&1 >/dev/null",
			 RUDA_SOURCE_DIR, pages[i]);
		const char *argv[] = {"sh", "-c", cmd, NULL};
		const char *env[] = {"MANWIDTH=80", "LC_ALL=C.UTF-8", NULL};
		int rc = run(argv, env, out, sizeof(out));
		ck_assert_msg(rc == 0 && !*out, "%s: exit %d: %.2000s", pages[i], rc, out);
	}
}
END_TEST

/* ---- policy ------------------------------------------------------------------ */

/* Copies of the example and what it needs, readable by any uid. */
static void stage_example(const char *dir)
{
	char to[256];
	snprintf(to, sizeof(to), "%s/example", dir);
	copy_file(test_build_path("example"), to, 0755);
	snprintf(to, sizeof(to), "%s/libruda.so.1", dir);
	copy_file(test_build_path("libruda.so.1"), to, 0755);
	snprintf(to, sizeof(to), "%s/add_f32.spv", dir);
	copy_file(test_build_path("shaders/add_f32.spv"), to, 0644);
	chmod(dir, 0755);
}

/* Run the staged example as uid/gid 65534 with no other groups. */
static int run_as_nobody(const char *dir, const char *socket_path, char *out, size_t len)
{
	char example[256], spv[256], env_socket[256];
	snprintf(example, sizeof(example), "%s/example", dir);
	snprintf(spv, sizeof(spv), "%s/add_f32.spv", dir);
	snprintf(env_socket, sizeof(env_socket), "RUDA_SOCKET=%s", socket_path);
	const char *env[] = {env_socket, NULL};
	const char *argv[] = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			      example, spv, NULL};
	return run(argv, env, out, len);
}

static int can_switch_uid(const char *test)
{
	if (geteuid() != 0) {
		fprintf(stderr, "SKIP %s: needs root to run a client as uid %d\n", test, NOBODY);
		return 0;
	}
	if (!have("setpriv")) {
		fprintf(stderr, "SKIP %s: setpriv is not installed (util-linux)\n", test);
		return 0;
	}
	return 1;
}

/* A uid outside allowed_users/allowed_groups is refused at its Hello with
 * RUDA_ERROR_PERMISSION; after the file lets it in and SIGHUP, it works. */
START_TEST(other_uid_refused)
{
	if (!can_switch_uid("other_uid_refused"))
		return;
	char dir[] = "/tmp/ruda-svc-XXXXXX", conf[128], out[8192];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	stage_example(dir);
	snprintf(conf, sizeof(conf), "%s/rudad.conf", dir);
	write_file(conf, "allowed_users = root\n", 0644);
	struct test_daemon d;
	const char *args[] = {"--config", conf, "--set", "socket_mode=0666", NULL};
	test_daemon_start(&d, args);
	chmod(d.dir, 0755); /* the socket's directory, for uid 65534 */

	int rc = run_as_nobody(dir, d.socket_path, out, sizeof(out));
	ck_assert_msg(rc == 1 && strstr(out, "connect: permission denied"), "exit %d: %.2000s", rc, out);
	ck_assert_msg(wait_for_text(d.log_path, 5000, "(uid 65534, pid ",
				    "refused: uid 65534 is in neither allowed_users nor "
				    "allowed_groups", (char *)NULL),
		      "no refusal logged; see %s", d.log_path);
	ruda_client *c = test_connect(&d, "root is allowed");
	ruda_client_close(c);

	write_file(conf, "allowed_users = root, 65534\n", 0644);
	kill(d.pid, SIGHUP);
	ck_assert_msg(wait_for_text(d.log_path, 5000, "reloaded", "allowed_users", (char *)NULL),
		      "no reload logged; see %s", d.log_path);
	rc = run_as_nobody(dir, d.socket_path, out, sizeof(out));
	ck_assert_msg(rc == 0 && strstr(out, "ok: 4096 sums correct"), "exit %d: %.2000s", rc, out);
	test_daemon_stop(&d);
	rm_rf(dir);
}
END_TEST

/* Quotas by uid and group are read and applied to each client's rights
 * (logged at debug level). Their enforcement is the memory work's. */
START_TEST(quota_by_uid_reported)
{
	if (!can_switch_uid("quota_by_uid_reported"))
		return;
	char dir[] = "/tmp/ruda-svc-XXXXXX", conf[128], out[8192];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	stage_example(dir);
	snprintf(conf, sizeof(conf), "%s/rudad.conf", dir);
	write_file(conf,
		   "max_memory_per_client = 1G\n"
		   "[user 65534]\nmax_memory_per_client = 2G\nmax_memory_per_uid = 3G\n"
		   "[group 0]\nmax_memory_per_uid = 5G\n",
		   0644);
	const char *print[] = {test_build_path("rudad"), "--print-config", "--config", conf, NULL};
	char rudad[512];
	snprintf(rudad, sizeof(rudad), "%s", print[0]);
	print[0] = rudad;
	ck_assert_int_eq(run(print, NULL, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, "max_memory_per_client = 1G\n"), "%.2000s", out);
	ck_assert_msg(strstr(out, "]\nmax_memory_per_client = 2G\nmax_memory_per_uid = 3G\n"), "%s",
		      out);

	struct test_daemon d;
	const char *args[] = {"--config", conf, "--set", "socket_mode=0666", "--log-level", "debug",
			      NULL};
	test_daemon_start(&d, args);
	chmod(d.dir, 0755);
	ruda_client *c = test_connect(&d, "root");
	ck_assert_msg(wait_for_text(d.log_path, 5000,
				    "(uid 0, pid ", "admin yes, views yes, unchecked launches no, "
				    "exclusive leases yes, memory 1G per client, 5G per uid", (char *)NULL),
		      "root's rights not logged; see %s", d.log_path);
	int rc = run_as_nobody(dir, d.socket_path, out, sizeof(out));
	ck_assert_msg(rc == 0, "exit %d: %.2000s", rc, out);
	ck_assert_msg(wait_for_text(d.log_path, 5000, "(uid 65534, pid ",
				    "admin no, views yes, unchecked launches no, exclusive leases "
				    "yes, memory 2G per client, 3G per uid", (char *)NULL),
		      "uid 65534's quota not logged; see %s", d.log_path);
	ruda_client_close(c);
	test_daemon_stop(&d);
	rm_rf(dir);
}
END_TEST

/* ---- installation ------------------------------------------------------------- */

START_TEST(install_and_build_with_pkg_config)
{
	char dest[] = "/tmp/ruda-install-XXXXXX", cmd[4096], out[16384];
	ck_assert_ptr_nonnull(mkdtemp(dest));
	char build[512], destdir[128];
	snprintf(build, sizeof(build), "BUILD=%s", RUDA_BUILD_DIR);
	snprintf(destdir, sizeof(destdir), "DESTDIR=%s", dest);
	/* `make check` built everything: -o all keeps this make from building
	 * again (with other flags) whatever changed since */
	const char *install[] = {"make", "--no-print-directory", "-s", "-o", "all", "-C",
				 RUDA_SOURCE_DIR, build, destdir, "PREFIX=/usr", "install", NULL};
	int rc = run(install, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0, "make install: exit %d:\n%.2000s", rc, out);

	static const char *const files[] = {
		"usr/sbin/rudad",
		"usr/lib/libruda.a",
		"usr/lib/libruda.so.1",
		"usr/lib/libruda.so",
		"usr/include/ruda/ruda.h",
		"usr/include/ruda/status.h",
		"usr/include/ruda/common.h",
		"usr/lib/pkgconfig/ruda.pc",
		"usr/share/ruda/shaders/add_f32.spv",
		"usr/lib/systemd/system/rudad.service",
		"usr/lib/systemd/system/rudad.socket",
		"usr/lib/sysusers.d/ruda.conf",
		"usr/lib/tmpfiles.d/ruda.conf",
		"usr/share/man/man8/rudad.8",
		"usr/share/man/man5/rudad.conf.5",
		"usr/share/man/man3/libruda.3",
		"usr/share/man/man1/rudactl.1",
		"usr/share/doc/ruda/rudad.conf.example",
	};
	char path[512], link[256];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dest, files[i]);
		ck_assert_msg(access(path, R_OK) == 0, "%s not installed", files[i]);
	}
	/* libruda.so -> libruda.so.1 -> libruda.so.1.x.y, whose soname is .so.1 */
	snprintf(path, sizeof(path), "%s/usr/lib/libruda.so", dest);
	ssize_t n = readlink(path, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_str_eq(link, "libruda.so.1");
	snprintf(path, sizeof(path), "%s/usr/lib/libruda.so.1", dest);
	n = readlink(path, link, sizeof(link) - 1);
	ck_assert_int_gt(n, 0);
	link[n] = '\0';
	ck_assert_msg(strncmp(link, "libruda.so.1.", 13) == 0, "%s", link);
	snprintf(cmd, sizeof(cmd), "objdump -p '%s/usr/lib/libruda.so' | grep SONAME", dest);
	const char *soname[] = {"sh", "-c", cmd, NULL};
	if (run(soname, NULL, out, sizeof(out)) == 0)
		ck_assert_msg(strstr(out, "libruda.so.1\n"), "%.2000s", out);
	snprintf(path, sizeof(path), "%s/usr/lib/systemd/system/rudad.service", dest);
	char *unit = read_text(path);
	ck_assert_msg(strstr(unit, "\nExecStart=/usr/sbin/rudad\n"), "%s", unit);
	free(unit);

	/* the README's example, built only from the installed tree */
	snprintf(cmd, sizeof(cmd),
		 "set -e; export PKG_CONFIG_PATH='%s/usr/lib/pkgconfig' PKG_CONFIG_SYSROOT_DIR='%s'; "
		 "flags=$(pkg-config --cflags --libs ruda); echo \"flags: $flags\"; "
		 "cc -std=c11 -Wall -Werror %s -o '%s/example' '%s/docs/example.c' $flags",
		 dest, dest, RUDA_SAN_FLAGS, dest, RUDA_SOURCE_DIR);
	const char *compile[] = {"sh", "-c", cmd, NULL};
	rc = run(compile, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0, "building the example: exit %d:\n%.2000s", rc, out);
	char want[256];
	snprintf(want, sizeof(want), "-I%s/usr/include", dest);
	ck_assert_msg(strstr(out, want), "%.2000s", out);

	struct test_daemon d;
	test_daemon_start(&d, NULL);
	char example[256], spv[256], env_lib[256], env_socket[256];
	snprintf(example, sizeof(example), "%s/example", dest);
	snprintf(spv, sizeof(spv), "%s/usr/share/ruda/shaders/add_f32.spv", dest);
	snprintf(env_lib, sizeof(env_lib), "LD_LIBRARY_PATH=%s/usr/lib", dest);
	snprintf(env_socket, sizeof(env_socket), "RUDA_SOCKET=%s", d.socket_path);
	const char *env[] = {env_lib, env_socket, NULL};
	const char *argv[] = {example, spv, NULL};
	rc = run(argv, env, out, sizeof(out));
	ck_assert_msg(rc == 0 && strstr(out, "ok: 4096 sums correct"), "exit %d: %.2000s", rc, out);
	test_daemon_stop(&d);

	/* the example configuration is valid as shipped */
	char installed_rudad[256], example_conf[256];
	snprintf(installed_rudad, sizeof(installed_rudad), "%s/usr/sbin/rudad", dest);
	snprintf(example_conf, sizeof(example_conf), "%s/usr/share/doc/ruda/rudad.conf.example",
		 dest);
	const char *check[] = {installed_rudad, "--check-config", "--config", example_conf, NULL};
	rc = run(check, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0, "exit %d: %.2000s", rc, out);

	/* uninstall leaves no file behind */
	unlink(example);
	install[10] = "uninstall";
	rc = run(install, NULL, out, sizeof(out));
	ck_assert_msg(rc == 0, "make uninstall: exit %d:\n%.2000s", rc, out);
	snprintf(cmd, sizeof(cmd), "find '%s' ! -type d", dest);
	const char *find[] = {"sh", "-c", cmd, NULL};
	ck_assert_int_eq(run(find, NULL, out, sizeof(out)), 0);
	ck_assert_msg(!*out, "left behind:\n%.2000s", out);
	rm_rf(dest);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("service");
	TCase *tc = tcase_create("service");
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, check_config_names_lines);
	tcase_add_test(tc, socket_mode_and_group);
	tcase_add_test(tc, socket_activation);
	tcase_add_test(tc, sd_notify_messages);
	tcase_add_test(tc, reload_raises_fd_limit);
	tcase_add_test(tc, units_verify);
	tcase_add_test(tc, man_pages_render);
	tcase_add_test(tc, other_uid_refused);
	tcase_add_test(tc, quota_by_uid_reported);
	tcase_add_test(tc, install_and_build_with_pkg_config);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
