#include "harness.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../proto/frame.h"

#ifndef RUDA_BUILD_DIR
#define RUDA_BUILD_DIR "build"
#endif

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int fork_ready_fd = -1; /* in a test_fork_client child */

void test_fork_ready(void)
{
	if (fork_ready_fd < 0)
		return;
	if (write(fork_ready_fd, "x", 1) != 1)
		_exit(1);
	close(fork_ready_fd);
	fork_ready_fd = -1;
}

pid_t test_fork_client(const struct test_daemon *d, const char *name,
		       int (*work)(ruda_client *c, void *arg), void *arg)
{
	int ready[2];
	ck_assert_int_eq(pipe(ready), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(ready[0]);
		fork_ready_fd = ready[1];
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = d->socket_path, .client_name = name};
		ruda_client *c;
		if (ruda_client_connect(&o, &c) != RUDA_OK || work(c, arg) != 0)
			_exit(1);
		test_fork_ready();
		pause();
		_exit(0);
	}
	close(ready[1]); /* a child that dies early reads as end of file */
	char x;
	ck_assert_msg(read(ready[0], &x, 1) == 1, "the forked client %s failed before it was ready",
		      name);
	close(ready[0]);
	return pid;
}

void test_kill(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The client of test_good_client_start: 0 only if every result was right
 * and it did at least one round; `stop` reads -1 until the parent closes
 * it. */
static int good_client_rounds(const struct test_daemon *d, int stop)
{
	ruda_client *c;
	ruda_kernel add;
	int failed = test_child_connect_add(d->socket_path, "good", &c, &add);
	if (failed)
		return failed;
	enum { N = 4096 };
	static float a[N], b[N], out[N];
	int rounds = 0;
	for (;; rounds++) {
		char x;
		if (rounds > 0 && read(stop, &x, 1) != -1)
			break; /* the parent closed its end: stop */
		for (int i = 0; i < N; i++) {
			a[i] = (float)(rounds * 3 + i % 7);
			b[i] = (float)i;
		}
		ruda_handle h[3];
		if (ruda_client_create(c, a, sizeof(a), &h[0]) != RUDA_OK ||
		    ruda_client_create(c, b, sizeof(b), &h[1]) != RUDA_OK ||
		    ruda_client_empty(c, sizeof(out), &h[2]) != RUDA_OK)
			return 4;
		uint32_t n = N;
		ruda_client_launch(c, add, (ruda_count){16, 1, 1}, h, 3, &n, 4);
		if (ruda_client_read_one(c, h[2], out) != RUDA_OK)
			return 5;
		for (int i = 0; i < N; i++)
			if (out[i] != a[i] + b[i])
				return 6;
		for (int i = 0; i < 3; i++)
			ruda_client_release(c, h[i]);
	}
	ruda_client_close(c);
	return rounds > 0 ? 0 : 7;
}

void test_good_client_start(const struct test_daemon *d, struct test_good_client *g)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(p[1]);
		/* non-blocking reads: -1 until the parent writes or closes */
		fcntl(p[0], F_SETFL, O_NONBLOCK);
		_exit(good_client_rounds(d, p[0]));
	}
	close(p[0]);
	g->pid = pid;
	g->stop = p[1];
}

void test_good_client_stop(struct test_good_client *g)
{
	close(g->stop);
	g->stop = -1;
	int status;
	ck_assert_int_eq(waitpid(g->pid, &status, 0), g->pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the well-behaved client failed: status %d", status);
}

const char *test_build_path(const char *rel)
{
	static char path[512];
	snprintf(path, sizeof(path), "%s/%s", RUDA_BUILD_DIR, rel);
	return path;
}

static int try_connect(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void test_daemon_start(struct test_daemon *d, const char *const *extra_args)
{
	test_daemon_start_at(d, NULL, extra_args);
}

void test_daemon_start_at(struct test_daemon *d, const char *socket_path,
			  const char *const *extra_args)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/ruda-test-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(d->dir));
	if (socket_path)
		snprintf(d->socket_path, sizeof(d->socket_path), "%s", socket_path);
	else
		snprintf(d->socket_path, sizeof(d->socket_path), "%s/rudad.sock", d->dir);
	snprintf(d->log_path, sizeof(d->log_path), "%s/rudad.log", d->dir);
	/* a cache of the test's own, not the system's */
	char cache_dir[96];
	snprintf(cache_dir, sizeof(cache_dir), "%s/cache", d->dir);
	const char *argv[32] = {test_build_path("rudad"), "--socket", d->socket_path,
				"--log-level", "info", "--cache-dir", cache_dir};
	int argc = 7;
	/* RUDA_TEST_SET="lanes=on queues=1": keys set for every rudad a suite
	 * starts (a whole suite run in another configuration) */
	char set_args[8][128];
	const char *set = getenv("RUDA_TEST_SET");
	for (int n = 0; set && *set && n < 8; n++) {
		size_t len = strcspn(set, " ");
		if (len) {
			snprintf(set_args[n], sizeof(set_args[n]), "--set=%.*s", (int)len, set);
			argv[argc++] = set_args[n];
		}
		set += len;
		set += strspn(set, " ");
	}
	for (int i = 0; extra_args && extra_args[i] && argc < 31; i++)
		argv[argc++] = extra_args[i];
	argv[argc] = NULL;
	/* under valgrind (RUDA_TEST_WRAPPER="valgrind ...") the daemon runs
	 * inside the wrapper */
	const char *wrapper = getenv("RUDA_TEST_WRAPPER");
	d->pid = fork();
	ck_assert_int_ge(d->pid, 0);
	if (d->pid == 0) {
		int log = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (log >= 0) {
			dup2(log, STDERR_FILENO);
			dup2(log, STDOUT_FILENO);
		}
		if (wrapper && *wrapper) {
			char cmd[4096];
			int n = snprintf(cmd, sizeof(cmd), "exec %s", wrapper);
			for (int i = 0; argv[i]; i++)
				n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, " '%s'", argv[i]);
			execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		} else {
			execv(argv[0], (char *const *)argv);
		}
		_exit(127);
	}
	/* wait until it accepts connections: the daemon starts Vulkan first */
	for (int i = 0; i < 600; i++) {
		int fd = try_connect(d->socket_path);
		if (fd >= 0) {
			close(fd);
			return;
		}
		int status;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid)
			ck_abort_msg("rudad exited during start-up (status %d); see %s", status,
				     d->log_path);
		sleep_ms(50);
	}
	kill(d->pid, SIGKILL);
	ck_abort_msg("rudad did not start listening within 30 s");
}

int test_daemon_alive(const struct test_daemon *d)
{
	int status;
	return waitpid(d->pid, &status, WNOHANG) == 0;
}

/* RUDA_TEST_KEEP_LOGS=DIR: each rudad's log is copied to DIR/rudad-PID.log
 * before its directory goes (runs on a lent GPU read them afterwards). */
static void keep_log(const struct test_daemon *d)
{
	const char *dir = getenv("RUDA_TEST_KEEP_LOGS");
	if (!dir || !*dir)
		return;
	char path[512];
	snprintf(path, sizeof(path), "%s/rudad-%d.log", dir, (int)d->pid);
	FILE *in = fopen(d->log_path, "r"), *out = in ? fopen(path, "w") : NULL;
	char buf[8192];
	size_t n;
	while (out && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		fwrite(buf, 1, n, out);
	if (out)
		fclose(out);
	if (in)
		fclose(in);
}

int test_daemon_stop(struct test_daemon *d)
{
	int status = -1;
	kill(d->pid, SIGTERM);
	for (int i = 0; i < 600; i++) {
		if (waitpid(d->pid, &status, WNOHANG) == d->pid)
			break;
		sleep_ms(50);
		if (i == 599) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
			ck_abort_msg("rudad did not stop within 30 s of SIGTERM");
		}
	}
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "rudad exited with status %d; see %s", status, d->log_path);
	ck_assert_msg(access(d->socket_path, F_OK) < 0, "rudad left its socket behind");
	keep_log(d);
	test_remove_tree(d->dir);
	return status;
}

ruda_client *test_connect_device(const struct test_daemon *d, const char *name, uint32_t index)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path, .client_name = name, .device_index = index};
	ruda_client *c = NULL;
	ruda_status st = ruda_client_connect(&o, &c);
	ck_assert_msg(st == RUDA_OK, "connect to device %u: %s", index, ruda_strerror(st));
	return c;
}

ruda_client *test_connect(const struct test_daemon *d, const char *name)
{
	return test_connect_device(d, name, 0);
}

uint32_t *test_load_spirv(const char *name, size_t *size)
{
	char rel[128];
	/* built-in kernels by name; test kernels by path ("tests/shaders/x") */
	snprintf(rel, sizeof(rel), strchr(name, '/') ? "%s.spv" : "shaders/%s.spv", name);
	FILE *f = fopen(test_build_path(rel), "rb");
	ck_assert_msg(f != NULL, "cannot open %s", test_build_path(rel));
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint32_t *words = malloc((size_t)len);
	ck_assert_ptr_nonnull(words);
	ck_assert_int_eq(fread(words, 1, (size_t)len, f), (size_t)len);
	fclose(f);
	*size = (size_t)len;
	return words;
}

int test_child_connect_add(const char *socket, const char *name, ruda_client **c,
			   ruda_kernel *add)
{
	ruda_connect_options o = {.struct_size = sizeof(o), .socket_path = socket,
				  .client_name = name};
	if (ruda_client_connect(&o, c) != RUDA_OK)
		return 2;
	size_t spirv_size;
	uint32_t *spirv = test_load_spirv("add_f32", &spirv_size);
	ruda_kernel_desc desc = {sizeof(desc), spirv, spirv_size, "main", 3, 4};
	ruda_status st = ruda_client_kernel_register(*c, &desc, add);
	free(spirv);
	return st == RUDA_OK ? 0 : 3;
}

ruda_kernel test_register(ruda_client *c, const char *name, uint32_t bindings, uint32_t push_size)
{
	size_t size;
	uint32_t *words = test_load_spirv(name, &size);
	ruda_kernel_desc desc = {
		.struct_size = sizeof(ruda_kernel_desc),
		.spirv = words,
		.spirv_size = size,
		.entry_point = "main",
		.binding_count = bindings,
		.push_constant_size = push_size,
	};
	ruda_kernel k = 0;
	ruda_status st = ruda_client_kernel_register(c, &desc, &k);
	free(words);
	char why[256];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(st == RUDA_OK, "register %s: %s: %s", name, ruda_strerror(st), why);
	return k;
}

ruda_daemon_stats test_wait_for_stats(ruda_client *c, uint32_t sessions, uint64_t bytes)
{
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	for (int i = 0; i < 200; i++) {
		ck_assert_int_eq(ruda_client_daemon_stats(c, &s), RUDA_OK);
		if (s.sessions == sessions && s.device_bytes == bytes)
			break;
		sleep_ms(50);
	}
	return s;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void test_remove_tree(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int test_settled_fds(pid_t pid)
{
	/* rudad makes spare arenas (memfds) when idle: wait for the count to
	 * hold still */
	int n = test_count_fds(pid);
	for (int i = 0; i < 50; i++) {
		sleep_ms(200);
		int again = test_count_fds(pid);
		if (again == n)
			break;
		n = again;
	}
	return n;
}

int test_count_fds(pid_t pid)
{
	char path[64];
	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	else
		snprintf(path, sizeof(path), "/proc/self/fd");
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(dir)))
		if (e->d_name[0] != '.')
			n++;
	closedir(dir);
	return pid ? n : n - 1; /* not the directory's own fd */
}

double test_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

long test_rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	long kib = -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	fclose(f);
	ck_assert_int_ge(kib, 0);
	return kib;
}

void test_fill_random(void *dst, size_t size, uint64_t seed)
{
	uint8_t *p = dst;
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < size; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)(x >> 24);
	}
}

/* ---- raw protocol ------------------------------------------------------- */

int raw_connect(const struct test_daemon *d)
{
	int fd = try_connect(d->socket_path);
	ck_assert_int_ge(fd, 0);
	return fd;
}

int raw_send_frame(int fd, const void *payload, uint32_t len, const int *fds, int nfds)
{
	uint8_t header[RUDA_FRAME_HEADER_SIZE];
	ruda__frame_header_encode(header, len, (uint16_t)nfds);
	struct iovec iov[2] = {
		{.iov_base = header, .iov_len = sizeof(header)},
		{.iov_base = (void *)payload, .iov_len = len},
	};
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(sizeof(int) * 8)];
	} control;
	struct msghdr msg = {.msg_iov = iov, .msg_iovlen = len ? 2 : 1};
	if (nfds) {
		msg.msg_control = control.buf;
		msg.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
	}
	ssize_t n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	return n < 0 ? -errno : 0;
}

int raw_send_request(int fd, const Ruda__Request *req)
{
	size_t len = ruda__request__get_packed_size(req);
	uint8_t *buf = malloc(len ? len : 1);
	ruda__request__pack(req, buf);
	int r = raw_send_frame(fd, buf, (uint32_t)len, NULL, 0);
	free(buf);
	return r;
}

Ruda__Reply *raw_recv_reply(int fd, int timeout_ms, int *fd_out)
{
	return raw_recv_reply_fds(fd, timeout_ms, fd_out, fd_out ? 1 : 0);
}

Ruda__Reply *raw_recv_reply_fds(int fd, int timeout_ms, int *fds_out, int max_fds)
{
	int nout = 0;
	for (int i = 0; i < max_fds; i++)
		fds_out[i] = -1;
	struct pollfd p = {.fd = fd, .events = POLLIN};
	if (poll(&p, 1, timeout_ms) <= 0)
		return NULL;
	/* the header, with any fds the frame carries */
	uint8_t header[RUDA_FRAME_HEADER_SIZE];
	union {
		struct cmsghdr align;
		char c[CMSG_SPACE(sizeof(int) * RUDA_FRAME_QUEUED_FDS)];
	} control;
	struct iovec iov = {.iov_base = header, .iov_len = sizeof(header)};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.c,
			     .msg_controllen = sizeof(control.c)};
	ssize_t n = recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); n > 0 && c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		int fds[RUDA_FRAME_QUEUED_FDS];
		memcpy(fds, CMSG_DATA(c), k * sizeof(int));
		for (size_t i = 0; i < k; i++) {
			if (nout < max_fds)
				fds_out[nout++] = fds[i];
			else
				close(fds[i]);
		}
	}
	struct ruda_frame_header h;
	if (n != (ssize_t)sizeof(header) || ruda__frame_header_decode(header, &h) < 0)
		return NULL;
	uint8_t *payload = malloc(h.length ? h.length : 1);
	if (h.length && recv(fd, payload, h.length, MSG_WAITALL) != (ssize_t)h.length) {
		free(payload);
		return NULL;
	}
	Ruda__Reply *reply = ruda__reply__unpack(NULL, h.length, payload);
	free(payload);
	return reply;
}

ruda_status raw_hello(int fd, uint64_t id)
{
	int fds[2];
	ruda_status st = raw_hello_fds(fd, id, fds);
	for (int i = 0; i < 2; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return st;
}

ruda_status raw_hello_fds(int fd, uint64_t id, int fds[2])
{
	fds[0] = fds[1] = -1;
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "raw";
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	if (raw_send_request(fd, &req) < 0)
		return RUDA_ERROR_DISCONNECTED;
	Ruda__Reply *reply = raw_recv_reply_fds(fd, 10000, fds, 2);
	if (!reply)
		return RUDA_ERROR_DISCONNECTED;
	ruda_status st = (ruda_status)reply->status;
	ruda__reply__free_unpacked(reply, NULL);
	return st;
}

int raw_closed_by_peer(int fd, int timeout_ms)
{
	for (int waited = 0; waited <= timeout_ms; waited += 50) {
		char buf[4096];
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno == ECONNRESET))
			return 1;
		if (n < 0 && errno != EAGAIN)
			return 1;
		if (n < 0)
			sleep_ms(50);
	}
	return 0;
}

uint32_t test_f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return u;
}

float test_f32_of(uint32_t bits)
{
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

int test_log_count(const struct test_daemon *d, const char *needle)
{
	FILE *f = fopen(d->log_path, "r");
	ck_assert_ptr_nonnull(f);
	char line[1024];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		n += strstr(line, needle) != NULL;
	fclose(f);
	return n;
}

Ruda__Reply *test_admin_call(const struct test_daemon *d, Ruda__Admin *admin)
{
	int fd = raw_connect(d);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(raw_hello(fd, 1), RUDA_OK);
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 2;
	req.body_case = RUDA__REQUEST__BODY_ADMIN;
	req.admin = admin;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	Ruda__Reply *reply = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_int_eq(reply->status, RUDA_OK);
	ck_assert_int_eq(reply->body_case, RUDA__REPLY__BODY_ADMIN);
	close(fd);
	return reply;
}

Ruda__Reply *test_admin_status(const struct test_daemon *d)
{
	Ruda__AdminStatus status = RUDA__ADMIN_STATUS__INIT;
	Ruda__Admin admin = RUDA__ADMIN__INIT;
	admin.body_case = RUDA__ADMIN__BODY_STATUS;
	admin.status = &status;
	Ruda__Reply *reply = test_admin_call(d, &admin);
	ck_assert_int_eq(reply->admin->body_case, RUDA__ADMIN_REPLY__BODY_STATUS);
	return reply;
}

Ruda__Reply *test_admin_clients(const struct test_daemon *d)
{
	Ruda__AdminClients clients = RUDA__ADMIN_CLIENTS__INIT;
	Ruda__Admin admin = RUDA__ADMIN__INIT;
	admin.body_case = RUDA__ADMIN__BODY_CLIENTS;
	admin.clients = &clients;
	Ruda__Reply *reply = test_admin_call(d, &admin);
	ck_assert_int_eq(reply->admin->body_case, RUDA__ADMIN_REPLY__BODY_CLIENTS);
	return reply;
}

ruda_status test_inject_device_loss(const struct test_daemon *d, uint32_t device,
				      uint32_t *sessions)
{
	int fd = raw_connect(d);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(raw_hello(fd, 1), RUDA_OK);
	Ruda__AdminInjectDeviceLoss inject = RUDA__ADMIN_INJECT_DEVICE_LOSS__INIT;
	inject.device = device;
	Ruda__Admin admin = RUDA__ADMIN__INIT;
	admin.body_case = RUDA__ADMIN__BODY_INJECT_DEVICE_LOSS;
	admin.inject_device_loss = &inject;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 2;
	req.body_case = RUDA__REQUEST__BODY_ADMIN;
	req.admin = &admin;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	Ruda__Reply *reply = raw_recv_reply(fd, 30000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_uint_eq(reply->id, 2);
	ruda_status st = (ruda_status)reply->status;
	if (st == RUDA_OK) {
		ck_assert_int_eq(reply->body_case, RUDA__REPLY__BODY_ADMIN);
		ck_assert_int_eq(reply->admin->body_case, RUDA__ADMIN_REPLY__BODY_INJECT_DEVICE_LOSS);
		if (sessions)
			*sessions = reply->admin->inject_device_loss->sessions;
		Ruda__Reply *notice = raw_recv_reply(fd, 30000, NULL);
		ck_assert_ptr_nonnull(notice);
		ck_assert_uint_eq(notice->id, 0);
		ck_assert_int_eq(notice->status, RUDA__STATUS__ERROR_DEVICE_LOST);
		ck_assert_ptr_nonnull(strstr(notice->message, "was lost"));
		ruda__reply__free_unpacked(notice, NULL);
		ck_assert(raw_closed_by_peer(fd, 30000));
	}
	ruda__reply__free_unpacked(reply, NULL);
	close(fd);
	return st;
}
