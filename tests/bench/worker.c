/*
 * Worker processes: a group that needs several client processes starts the
 * bench itself again as `bench --worker NAME ARGS...` with a pipe each way
 * (fds 3: from the parent, 4: to the parent), so every child starts clean.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define WORKER_IN 3
#define WORKER_OUT 4

/* Every group's workers: add a line for a new one. */
static const struct bench_worker workers[] = {
	{"scaling", bench_scaling_worker},
	{"sharing", bench_sharing_worker},
};

int bench_worker_main(int argc, char **argv)
{
	for (size_t i = 0; i < sizeof(workers) / sizeof(workers[0]); i++)
		if (strcmp(argv[0], workers[i].name) == 0)
			return workers[i].main(argc, argv);
	fprintf(stderr, "bench: no worker named %s\n", argv[0]);
	return 2;
}

void bench_child_start(struct bench_child *c, char *const argv[], const char *log)
{
	int down[2], up[2];
	signal(SIGPIPE, SIG_IGN); /* a worker that died is reported by its exit */
	BENCH_CHECK(pipe2(down, O_CLOEXEC) == 0 && pipe2(up, O_CLOEXEC) == 0, "pipe: %s",
		    strerror(errno));
	char self[1100];
	snprintf(self, sizeof(self), "%s", bench_path("bench/bench"));
	char *args[64] = {self, "--build-dir", bench_opt.build_dir, "--worker"};
	int n = 4;
	for (int i = 0; argv[i] && n < 63; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	c->log = log;
	c->pid = fork();
	BENCH_CHECK(c->pid >= 0, "fork: %s", strerror(errno));
	if (c->pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		/* out of the way of fds 3 and 4 first; dup2 clears close-on-exec
		 * on the copies */
		int in = fcntl(down[0], F_DUPFD_CLOEXEC, 10), out = fcntl(up[1], F_DUPFD_CLOEXEC, 10);
		if (in < 0 || out < 0 || dup2(in, WORKER_IN) < 0 || dup2(out, WORKER_OUT) < 0)
			_exit(126);
		execv(self, args);
		_exit(127);
	}
	close(down[0]);
	close(up[1]);
	c->to = down[1];
	c->from = up[0];
}

static int read_line(int fd, char *buf, size_t len)
{
	size_t n = 0;
	while (n + 1 < len) {
		char ch;
		ssize_t r = read(fd, &ch, 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		if (ch == '\n')
			break;
		buf[n++] = ch;
	}
	buf[n] = '\0';
	return 0;
}

static void write_all(int fd, const char *text)
{
	size_t n = strlen(text);
	while (n) {
		ssize_t w = write(fd, text, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		text += w;
		n -= (size_t)w;
	}
}

void bench_child_read_line(struct bench_child *c, char *buf, size_t len)
{
	if (read_line(c->from, buf, len) == 0)
		return;
	/* what the worker said before it went, which its log (in the build
	 * directory, on a lent machine gone with it) would otherwise keep */
	int status = -1;
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	size_t n = 0;
	char *text = c->log ? bench_read_file(c->log, &n) : NULL;
	size_t from = n > 4000 ? n - 4000 : 0;
	bench_fail("worker %d ended early (wait status %d); the end of its log, %s:\n%.*s",
		   (int)c->pid, status, c->log ? c->log : "(none)", (int)(n - from),
		   text ? text + from : "");
}

void bench_child_write(struct bench_child *c, const char *text)
{
	write_all(c->to, text);
}

void bench_child_wait(struct bench_child *c, const char *log)
{
	close(c->to);
	close(c->from);
	int status;
	while (waitpid(c->pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		size_t n = 0;
		char *text = bench_read_file(log, &n);
		bench_fail("worker %d exited with status %d:\n%.*s", (int)c->pid, status, (int)n,
			   text ? text : "");
	}
}

void bench_worker_say(const char *fmt, ...)
{
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	write_all(WORKER_OUT, line);
}

void bench_worker_hear(char *buf, size_t len)
{
	BENCH_CHECK(read_line(WORKER_IN, buf, len) == 0, "worker: the bench went away");
}
