/*
 * rudactl against a real rudad: every view with clients doing known work
 * (the numbers must match), kill, cleanup, drain and shutdown, permissions
 * for a non-admin uid, exit codes, --json validity, metrics, and `top` in a
 * pseudo-terminal.
 */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define MiB (1024u * 1024u)
/* rudad's default arena_size */
#define DEFAULT_ARENA (16 * MiB)

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* ---- running rudactl ------------------------------------------------------- */

struct ctl_run {
	int rc; /* exit status, or -1 if it did not exit */
	char out[65536];
	char err[8192];
};

enum { AS_ROOT, AS_NOBODY };

/*
 * Run build/rudactl with `args` (NULL-terminated). `socket` NULL: no
 * --socket (the environment decides); `env_socket` set: RUDA_SOCKET.
 */
static void run_ctl_full(struct ctl_run *r, int who, const char *socket, const char *env_socket,
			 const char *const *args)
{
	char ctl[512];
	snprintf(ctl, sizeof(ctl), "%s", test_build_path("rudactl"));
	const char *argv[64];
	int n = 0;
	if (who == AS_NOBODY) {
		argv[n++] = "/usr/bin/setpriv";
		argv[n++] = "--reuid=65534";
		argv[n++] = "--regid=65534";
		argv[n++] = "--clear-groups";
	}
	argv[n++] = ctl;
	if (socket) {
		argv[n++] = "--socket";
		argv[n++] = socket;
	}
	for (int i = 0; args[i] && n < 63; i++)
		argv[n++] = args[i];
	argv[n] = NULL;

	int out[2], err[2];
	ck_assert_int_eq(pipe(out), 0);
	ck_assert_int_eq(pipe(err), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (env_socket)
			setenv("RUDA_SOCKET", env_socket, 1);
		else
			unsetenv("RUDA_SOCKET");
		int null = open("/dev/null", O_RDONLY);
		dup2(null, STDIN_FILENO);
		dup2(out[1], STDOUT_FILENO);
		dup2(err[1], STDERR_FILENO);
		close(out[0]);
		close(err[0]);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(out[1]);
	close(err[1]);
	size_t used[2] = {0, 0};
	char *bufs[2] = {r->out, r->err};
	size_t caps[2] = {sizeof(r->out), sizeof(r->err)};
	struct pollfd p[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
	int open_fds = 2;
	while (open_fds) {
		if (poll(p, 2, 20000) <= 0)
			break;
		for (int i = 0; i < 2; i++) {
			if (p[i].fd < 0 || !p[i].revents)
				continue;
			char tmp[4096];
			ssize_t got = read(p[i].fd, tmp, sizeof(tmp));
			if (got <= 0) {
				close(p[i].fd);
				p[i].fd = -1;
				open_fds--;
				continue;
			}
			size_t take = (size_t)got;
			if (used[i] + take >= caps[i])
				take = caps[i] - used[i] - 1;
			memcpy(bufs[i] + used[i], tmp, take);
			used[i] += take;
		}
	}
	for (int i = 0; i < 2; i++) {
		bufs[i][used[i]] = '\0';
		if (p[i].fd >= 0)
			close(p[i].fd);
	}
	int status;
	waitpid(pid, &status, 0);
	r->rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* rudactl --socket <daemon's> args... (as root) */
#define CTL(r, d, ...) run_ctl_full((r), AS_ROOT, (d)->socket_path, NULL, \
				    (const char *const[]){__VA_ARGS__, NULL})
#define CTL_NOBODY(r, d, ...) run_ctl_full((r), AS_NOBODY, (d)->socket_path, NULL, \
					   (const char *const[]){__VA_ARGS__, NULL})

static void expect_ok(const struct ctl_run *r, const char *what)
{
	ck_assert_msg(r->rc == 0, "rudactl %s: exit %d\nstdout: %.2000s\nstderr: %.1000s", what,
		      r->rc, r->out, r->err);
}

static void expect_in(const char *text, const char *needle)
{
	/* Check refuses (exit 2) a failure message past its 4 KiB */
	ck_assert_msg(strstr(text, needle) != NULL, "expected \"%.300s\" in:\n%.3000s", needle,
		      text);
}

/* ---- a tiny JSON checker ------------------------------------------------------ */

/*
 * Validates JSON and flattens it into lines "path=value", e.g.
 * "clients.0.bytes=3145728" or "daemon.version=0.1.0" (strings unquoted,
 * escapes decoded), so tests can look fields up.
 */
struct flat {
	char *text; /* "\n" path=value "\n" ... */
	size_t len, cap;
	const char *p;
	int ok;
};

static void flat_put(struct flat *f, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char line[4096];
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (f->len + (size_t)n + 1 >= f->cap) {
		f->cap = (f->cap + (size_t)n + 1) * 2;
		f->text = realloc(f->text, f->cap);
	}
	memcpy(f->text + f->len, line, (size_t)n + 1);
	f->len += (size_t)n;
}

static void ws(struct flat *f)
{
	while (*f->p == ' ' || *f->p == '\n' || *f->p == '\t' || *f->p == '\r')
		f->p++;
}

static int parse_string(struct flat *f, char *out, size_t cap)
{
	size_t n = 0;
	if (*f->p != '"')
		return 0;
	f->p++;
	while (*f->p != '"') {
		unsigned char c = (unsigned char)*f->p;
		if (c == 0 || c < 0x20)
			return 0;
		if (c == '\\') {
			f->p++;
			char e = *f->p;
			if (e == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!strchr("0123456789abcdefABCDEF", f->p[i]) || !f->p[i])
						return 0;
				unsigned v = (unsigned)strtoul((char[5]){f->p[1], f->p[2], f->p[3], f->p[4], 0},
							       NULL, 16);
				f->p += 4;
				c = v < 0x80 ? (unsigned char)v : '?';
			} else if (strchr("\"\\/", e)) {
				c = (unsigned char)e;
			} else if (strchr("bfnrt", e)) {
				c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e == 'b' ? '\b' : '\f';
			} else {
				return 0;
			}
		}
		if (n + 1 < cap)
			out[n++] = (char)c;
		f->p++;
	}
	f->p++;
	out[n] = '\0';
	return 1;
}

static int parse_value(struct flat *f, const char *path, int depth);

static int parse_container(struct flat *f, const char *path, int depth, int object)
{
	char close = object ? '}' : ']';
	f->p++;
	ws(f);
	if (*f->p == close) {
		f->p++;
		flat_put(f, "%s=%s\n", path, object ? "{}" : "[]");
		return 1;
	}
	for (unsigned i = 0;; i++) {
		char sub[1024], key[256];
		ws(f);
		if (object) {
			if (!parse_string(f, key, sizeof(key)))
				return 0;
			ws(f);
			if (*f->p++ != ':')
				return 0;
			snprintf(sub, sizeof(sub), "%s%s%s", path, *path ? "." : "", key);
		} else {
			snprintf(sub, sizeof(sub), "%s%s%u", path, *path ? "." : "", i);
		}
		if (!parse_value(f, sub, depth + 1))
			return 0;
		ws(f);
		if (*f->p == ',') {
			f->p++;
			continue;
		}
		if (*f->p == close) {
			f->p++;
			return 1;
		}
		return 0;
	}
}

static int parse_value(struct flat *f, const char *path, int depth)
{
	if (depth > 32)
		return 0;
	ws(f);
	char c = *f->p;
	if (c == '{' || c == '[')
		return parse_container(f, path, depth, c == '{');
	if (c == '"') {
		char s[1024];
		if (!parse_string(f, s, sizeof(s)))
			return 0;
		flat_put(f, "%s=%s\n", path, s);
		return 1;
	}
	static const char *const words[] = {"true", "false", "null"};
	for (int i = 0; i < 3; i++)
		if (!strncmp(f->p, words[i], strlen(words[i]))) {
			f->p += strlen(words[i]);
			flat_put(f, "%s=%s\n", path, words[i]);
			return 1;
		}
	const char *start = f->p;
	if (*f->p == '-')
		f->p++;
	if (*f->p < '0' || *f->p > '9')
		return 0;
	if (*f->p == '0' && f->p[1] >= '0' && f->p[1] <= '9')
		return 0; /* no leading zeros */
	while (*f->p >= '0' && *f->p <= '9')
		f->p++;
	if (*f->p == '.') {
		f->p++;
		if (*f->p < '0' || *f->p > '9')
			return 0;
		while (*f->p >= '0' && *f->p <= '9')
			f->p++;
	}
	if (*f->p == 'e' || *f->p == 'E') {
		f->p++;
		if (*f->p == '+' || *f->p == '-')
			f->p++;
		if (*f->p < '0' || *f->p > '9')
			return 0;
		while (*f->p >= '0' && *f->p <= '9')
			f->p++;
	}
	flat_put(f, "%s=%.*s\n", path, (int)(f->p - start), start);
	return 1;
}

/* Parse `json` or fail the test. */
static struct flat *json_parse(const char *json)
{
	struct flat *f = calloc(1, sizeof(*f));
	f->p = json;
	flat_put(f, "\n");
	f->ok = parse_value(f, "", 0);
	ws(f);
	ck_assert_msg(f->ok && *f->p == '\0', "invalid JSON near byte %ld:\n%s",
		      (long)(f->p - json), json);
	return f;
}

static void json_free(struct flat *f)
{
	free(f->text);
	free(f);
}

/* The value at `path` (static buffer), or NULL. */
static const char *jget(const struct flat *f, const char *fmt, ...)
{
	static char value[1024];
	char path[512], needle[520];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	snprintf(needle, sizeof(needle), "\n%s=", path);
	const char *at = strstr(f->text, needle);
	if (!at)
		return NULL;
	at += strlen(needle);
	const char *end = strchr(at, '\n');
	snprintf(value, sizeof(value), "%.*s", (int)(end - at), at);
	return value;
}

static unsigned long long jnum(const struct flat *f, const char *path)
{
	const char *v = jget(f, "%s", path);
	ck_assert_msg(v != NULL, "no %s in the JSON:%s", path, f->text);
	return strtoull(v, NULL, 10);
}

static void jexpect(const struct flat *f, const char *path, const char *want)
{
	const char *v = jget(f, "%s", path);
	ck_assert_msg(v && !strcmp(v, want), "%s: expected %s, got %s", path, want,
		      v ? v : "(absent)");
}

/* Index of the element of array `array` whose `name` is `name`, or -1. */
static int jfind(const struct flat *f, const char *array, const char *name)
{
	for (int i = 0; i < 1000; i++) {
		const char *v = jget(f, "%s.%d.name", array, i);
		if (!v)
			return -1;
		if (!strcmp(v, name))
			return i;
	}
	return -1;
}

static int jcount(const struct flat *f, const char *array)
{
	int n = 0;
	while (jget(f, "%s.%d.id", array, n))
		n++;
	return n;
}

/* ---- clients doing known work --------------------------------------------------- */

struct workload {
	ruda_client *alpha, *beta;
	ruda_handle up, scratch, small;
	ruda_kernel fill;
};

#define ALPHA_LAUNCHES 5

/* alpha: 1 MiB uploaded + 2 MiB empty = 3 MiB in 2 buffers, the fill
 * kernel, 5 launches. beta: 1 MiB empty. */
static void workload_start(struct workload *w, const struct test_daemon *d)
{
	w->alpha = test_connect(d, "alpha");
	w->beta = test_connect(d, "beta");
	uint8_t *data = malloc(MiB);
	test_fill_random(data, MiB, 7);
	ck_assert_int_eq(ruda_client_create(w->alpha, data, MiB, &w->up), RUDA_OK);
	free(data);
	ck_assert_int_eq(ruda_client_empty(w->alpha, 2 * MiB, &w->scratch), RUDA_OK);
	w->fill = test_register(w->alpha, "fill", 1, 8);
	for (int i = 0; i < ALPHA_LAUNCHES; i++) {
		uint32_t push[2] = {(uint32_t)i, 2 * MiB / 4};
		ck_assert_int_eq(ruda_client_launch(w->alpha, w->fill, (ruda_count){16, 1, 1},
						    &w->scratch, 1, push, sizeof(push)),
				 RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_sync(w->alpha), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(w->beta, MiB, &w->small), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(w->beta), RUDA_OK);
}

static void workload_stop(struct workload *w)
{
	ruda_client_close(w->alpha);
	ruda_client_close(w->beta);
}

/* ---- the views ------------------------------------------------------------------- */

START_TEST(clients_view_counts)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	struct workload w;
	workload_start(&w, &d);
	struct ctl_run *r = malloc(sizeof(*r));
	/* a staging region of beta's: 192 KiB charged to its staging quota */
	ruda_staging region;
	ck_assert_int_eq(ruda_client_staging_create(w.beta, 192 * 1024, &region), RUDA_OK);

	CTL(r, &d, "clients", "--json");
	expect_ok(r, "clients --json");
	struct flat *j = json_parse(r->out);
	jexpect(j, "schema_version", "1");
	jexpect(j, "command", "clients");
	ck_assert_int_eq(jcount(j, "clients"), 2); /* rudactl leaves itself out */
	int a = jfind(j, "clients", "alpha"), b = jfind(j, "clients", "beta");
	ck_assert_int_ge(a, 0);
	ck_assert_int_ge(b, 0);
	char p[64];
#define AT(i, field) (snprintf(p, sizeof(p), "clients.%d.%s", (i), field), p)
	ck_assert_uint_eq(jnum(j, AT(a, "id")), ruda_client_session_id(w.alpha));
	ck_assert_uint_eq(jnum(j, AT(a, "bytes")), 3 * MiB);
	ck_assert_uint_eq(jnum(j, AT(a, "buffers")), 2);
	ck_assert_uint_eq(jnum(j, AT(a, "launches")), ALPHA_LAUNCHES);
	ck_assert_uint_eq(jnum(j, AT(a, "bytes_uploaded")), MiB);
	ck_assert_uint_eq(jnum(j, AT(a, "kernels_registered")), 1);
	ck_assert_uint_eq(jnum(j, AT(a, "kernels")), 1);
	ck_assert_uint_eq(jnum(j, AT(a, "streams")), 1);
	ck_assert_uint_eq(jnum(j, AT(a, "pid")), (unsigned long long)getpid());
	ck_assert_uint_eq(jnum(j, AT(a, "uid")), getuid());
	ck_assert_uint_eq(jnum(j, AT(a, "device")), 0);
	ck_assert_uint_eq(jnum(j, AT(a, "inflight_submissions")), 0);
	ck_assert_uint_eq(jnum(j, AT(a, "limits.arena_bytes")), DEFAULT_ARENA);
	/* the default quota: half the device's heap */
	ck_assert_uint_gt(jnum(j, AT(a, "limits.quota_bytes")), 0);
	jexpect(j, AT(a, "state"), "ready");
	ck_assert_ptr_nonnull(jget(j, "%s", AT(a, "gpu_time_ns")));
	ck_assert_ptr_nonnull(jget(j, "%s", AT(a, "age_ms")));
	ck_assert_ptr_nonnull(jget(j, "%s", AT(a, "idle_ms")));
	ck_assert_uint_eq(jnum(j, AT(b, "bytes")), MiB);
	ck_assert_uint_eq(jnum(j, AT(b, "buffers")), 1);
	ck_assert_uint_eq(jnum(j, AT(b, "launches")), 0);
	ck_assert_uint_eq(jnum(j, AT(b, "bytes_uploaded")), 0);
	ck_assert_uint_eq(jnum(j, AT(b, "staging_bytes")), 192 * 1024);
	ck_assert_uint_eq(jnum(j, AT(b, "staging_regions")), 1);
	ck_assert_uint_eq(jnum(j, AT(a, "staging_bytes")), 0);
	ck_assert_uint_eq(jnum(j, AT(a, "staging_regions")), 0);
	ck_assert_uint_ge(jnum(j, AT(a, "submissions")), 1);
	jexpect(j, AT(a, "limits.staging_quota_bytes"), "null");
	ck_assert_uint_gt(jnum(j, AT(a, "limits.uid_staging_quota_bytes")), 0);
	json_free(j);

	CTL(r, &d, "status", "--json");
	expect_ok(r, "status --json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "daemon.staging_bytes"), 192 * 1024);
	ck_assert_uint_eq(jnum(j, "daemon.staging_regions"), 1);
	ck_assert_ptr_nonnull(jget(j, "%s", "daemon.staging_importing"));
	json_free(j);

	CTL(r, &d, "clients");
	expect_ok(r, "clients");
	expect_in(r->out, "ID");
	expect_in(r->out, "GPU TIME");
	expect_in(r->out, "STAGING");
	expect_in(r->out, "192.0 KiB");
	expect_in(r->out, "alpha");
	expect_in(r->out, "3.0 MiB");
	expect_in(r->out, "beta");
	expect_in(r->out, "1.0 MiB");
	expect_in(r->out, "16.0 MiB");
	ck_assert_ptr_null(strstr(r->out, "rudactl"));
	ck_assert_int_eq(ruda_client_staging_release(w.beta, &region), RUDA_OK);

	free(r);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

/* One physical device opened twice: rudactl shows both, with their ids. */
START_TEST(devices_lists_logical_devices)
{
	struct test_daemon d;
	test_daemon_start(&d, (const char *const[]){"--device", "0,0", NULL});
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "devices", "--json");
	expect_ok(r, "devices --json");
	struct flat *j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.index"), 0);
	ck_assert_uint_eq(jnum(j, "devices.1.index"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.type_index"), 0);
	ck_assert_uint_eq(jnum(j, "devices.1.type_index"), 1);
	ck_assert_uint_eq(jnum(j, "devices.1.physical_index"), jnum(j, "devices.0.physical_index"));
	ck_assert_ptr_null(jget(j, "devices.2.name"));
	json_free(j);
	CTL(r, &d, "devices");
	expect_ok(r, "devices");
	ck_assert_ptr_nonnull(strstr(r->out, "device 1: "));
	ck_assert_ptr_nonnull(strstr(r->out, "physical device 0"));
	free(r);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(status_memory_devices_cache)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	struct workload w;
	workload_start(&w, &d);
	/* a name JSON must escape */
	ruda_client *odd = test_connect(&d, "back\\slash");
	struct ctl_run *r = malloc(sizeof(*r));

	CTL(r, &d, "status", "--json");
	expect_ok(r, "status --json");
	struct flat *j = json_parse(r->out);
	jexpect(j, "command", "status");
	jexpect(j, "daemon.version", "0.1.0");
	jexpect(j, "daemon.socket", d.socket_path);
	jexpect(j, "daemon.admin", "true");
	jexpect(j, "daemon.draining", "false");
	ck_assert_uint_eq(jnum(j, "daemon.clients"), 3);
	ck_assert_uint_eq(jnum(j, "daemon.pid"), (unsigned long long)d.pid);
	ck_assert_uint_eq(jnum(j, "daemon.limits.arena_bytes"), DEFAULT_ARENA);
	ck_assert_ptr_nonnull(jget(j, "devices.0.name"));
	ck_assert_uint_eq(jnum(j, "devices.0.buffer_bytes"), 4 * MiB);
	ck_assert_uint_eq(jnum(j, "devices.0.buffers"), 3);
	ck_assert_uint_eq(jnum(j, "devices.0.clients"), 3);
	ck_assert_uint_eq(jnum(j, "devices.0.arenas"), 3);
	ck_assert_uint_eq(jnum(j, "devices.0.arena_bytes"), 3 * DEFAULT_ARENA);
	/* only alpha has moved bytes through its arena: only it is imported */
	ck_assert_uint_eq(jnum(j, "devices.0.arenas_imported"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.arena_imported_bytes"), DEFAULT_ARENA);
	ck_assert_ptr_nonnull(jget(j, "devices.0.busy_percent"));
	ck_assert_int_eq(jcount(j, "clients"), 3);
	ck_assert_int_ge(jfind(j, "clients", "alpha"), 0);
	ck_assert_int_ge(jfind(j, "clients", "back\\slash"), 0);
	ck_assert_uint_eq(jnum(j, "caches.0.entries"), 1);
	json_free(j);
	expect_in(r->out, "\"name\": \"back\\\\slash\"");

	CTL(r, &d, "status");
	expect_ok(r, "status");
	expect_in(r->out, "rudad 0.1.0");
	expect_in(r->out, d.socket_path);
	expect_in(r->out, "3 connected");
	expect_in(r->out, "4.0 MiB in 3 buffers");
	expect_in(r->out, "BUSY");

	CTL(r, &d, "memory", "--json");
	expect_ok(r, "memory --json");
	j = json_parse(r->out);
	jexpect(j, "command", "memory");
	ck_assert_uint_eq(jnum(j, "devices.0.buffer_bytes"), 4 * MiB);
	ck_assert_uint_eq(jnum(j, "devices.0.buffers"), 3);
	ck_assert_uint_eq(jnum(j, "devices.0.arenas"), 3);
	ck_assert_uint_gt(jnum(j, "devices.0.heaps.0.size_bytes"), 0);
	/* the allocator holds at least what buffers use, in at least one page */
	ck_assert_uint_ge(jnum(j, "devices.0.reserved_bytes"), 4 * MiB);
	ck_assert_uint_eq(jnum(j, "devices.0.reserved_bytes") - jnum(j, "devices.0.free_bytes"),
			  4 * MiB);
	ck_assert_uint_ge(jnum(j, "devices.0.pages"), 1);
	ck_assert_uint_gt(jnum(j, "devices.0.page_size_bytes"), 0);
	int a = jfind(j, "clients", "alpha");
	ck_assert_int_ge(a, 0);
	char p[64];
	ck_assert_uint_eq(jnum(j, AT(a, "bytes")), 3 * MiB);
	ck_assert_uint_eq(jnum(j, AT(a, "buffers")), 2);
	json_free(j);

	CTL(r, &d, "memory");
	expect_ok(r, "memory");
	expect_in(r->out, "4.0 MiB in 3 buffers");
	expect_in(r->out, "48.0 MiB in 3 arenas");
	expect_in(r->out, "16.0 MiB in 1 imported");
	expect_in(r->out, "reserved");
	expect_in(r->out, "alpha");
	expect_in(r->out, "3.0 MiB");

	CTL(r, &d, "devices", "--json");
	expect_ok(r, "devices --json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.index"), 0);
	ck_assert_uint_eq(jnum(j, "devices.0.clients"), 3);
	ck_assert_uint_gt(jnum(j, "devices.0.limits.max_buffer_bytes"), 0);
	ck_assert_uint_gt(jnum(j, "devices.0.limits.max_workgroup_count.0"), 0);
	jexpect(j, "devices.0.host_import", "true");
	ck_assert_uint_ge(jnum(j, "devices.0.completed"), 1);
	json_free(j);

	CTL(r, &d, "devices");
	expect_ok(r, "devices");
	expect_in(r->out, "device 0:");
	expect_in(r->out, "heaps");
	expect_in(r->out, "4.0 MiB in 3 buffers");

	/* a second registration of the same kernel is a cache hit */
	test_register(w.beta, "fill", 1, 8);
	CTL(r, &d, "cache", "--json");
	expect_ok(r, "cache --json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.entries"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.compiled"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.hits"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.misses"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.unused"), 0);
	jexpect(j, "devices.0.pipelines.0.entry_point", "main");
	jexpect(j, "devices.0.pipelines.0.state", "ready");
	ck_assert_uint_eq(jnum(j, "devices.0.pipelines.0.bindings"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.pipelines.0.push_constant_bytes"), 8);
	ck_assert_uint_eq(jnum(j, "devices.0.pipelines.0.references"), 2);
	ck_assert_uint_eq(strlen(jget(j, "devices.0.pipelines.0.module_sha256")), 64);
	json_free(j);

	CTL(r, &d, "cache");
	expect_ok(r, "cache");
	expect_in(r->out, "1 hits, 1 misses");
	expect_in(r->out, "main");

	free(r);
	ruda_client_close(odd);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(metrics_exposition)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	struct workload w;
	workload_start(&w, &d);
	struct ctl_run *r = malloc(sizeof(*r));
	ruda_staging region;
	ck_assert_int_eq(ruda_client_staging_create(w.beta, 64 * 1024, &region), RUDA_OK);
	CTL(r, &d, "metrics");
	expect_ok(r, "metrics");
	char line[256];
	expect_in(r->out, "# TYPE ruda_staging_bytes gauge\nruda_staging_bytes 65536\n");
	expect_in(r->out, "\nruda_staging_regions 1\n");
	snprintf(line, sizeof(line),
		 "\nruda_client_staging_bytes{client=\"%llu\",name=\"beta\",uid=\"%u\",device=\"0\"} "
		 "65536\n",
		 (unsigned long long)ruda_client_session_id(w.beta), getuid());
	expect_in(r->out, line);
	expect_in(r->out, "# TYPE ruda_client_submissions_total counter\n");
	unsigned long long alpha = (unsigned long long)ruda_client_session_id(w.alpha);
	expect_in(r->out, "# HELP ruda_clients ");
	expect_in(r->out, "# TYPE ruda_clients gauge\nruda_clients 2\n");
	expect_in(r->out, "# TYPE ruda_device_memory_kept_bytes gauge\n"
			  "ruda_device_memory_kept_bytes{device=\"0\"} 0\n");
	expect_in(r->out, "# TYPE ruda_client_buffer_bytes gauge\n");
	snprintf(line, sizeof(line),
		 "\nruda_client_buffer_bytes{client=\"%llu\",name=\"alpha\",uid=\"%u\",device=\"0\"} "
		 "3145728\n",
		 alpha, getuid());
	expect_in(r->out, line);
	snprintf(line, sizeof(line),
		 "\nruda_client_launches_total{client=\"%llu\",name=\"alpha\",uid=\"%u\",device=\"0\"} "
		 "%d\n",
		 alpha, getuid(), ALPHA_LAUNCHES);
	expect_in(r->out, line);
	expect_in(r->out, "# TYPE ruda_client_gpu_seconds_total counter\n");
	expect_in(r->out, "\nruda_device_buffer_bytes{device=\"0\"} 4194304\n");
	expect_in(r->out, "\nruda_pipeline_cache_misses_total{device=\"0\"} 1\n");
	/* every line is a comment or "name{labels} value" */
	for (char *l = strtok(r->out, "\n"); l; l = strtok(NULL, "\n")) {
		if (l[0] == '#') {
			ck_assert_msg(!strncmp(l, "# HELP ruda_", 12) || !strncmp(l, "# TYPE ruda_", 12),
				      "bad comment: %s", l);
			continue;
		}
		ck_assert_msg(!strncmp(l, "ruda_", 5), "bad sample: %s", l);
		char *space = strrchr(l, ' ');
		ck_assert_msg(space != NULL, "no value: %s", l);
		char *end;
		strtod(space + 1, &end);
		ck_assert_msg(*end == '\0' && end != space + 1, "bad value: %s", l);
	}
	ruda_client_staging_release(w.beta, &region);
	free(r);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

/* ---- commands ------------------------------------------------------------------------ */

START_TEST(kill_disconnects_and_frees)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	struct workload w;
	workload_start(&w, &d);
	struct ctl_run *r = malloc(sizeof(*r));
	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)ruda_client_session_id(w.alpha));

	CTL(r, &d, "kill", id);
	expect_ok(r, "kill");
	expect_in(r->out, "killed client");
	expect_in(r->out, "alpha");
	expect_in(r->out, "3.0 MiB");

	/* gone, and its 3 MiB freed: only beta's 1 MiB is left */
	ruda_daemon_stats st = test_wait_for_stats(w.beta, 1, MiB);
	ck_assert_uint_eq(st.sessions, 1);
	ck_assert_uint_eq(st.device_bytes, MiB);
	ck_assert_uint_eq(st.device_buffers, 1);
	ck_assert_int_eq(ruda_client_sync(w.alpha), RUDA_ERROR_DISCONNECTED);

	CTL(r, &d, "clients", "--json");
	expect_ok(r, "clients --json");
	struct flat *j = json_parse(r->out);
	ck_assert_int_eq(jfind(j, "clients", "alpha"), -1);
	ck_assert_int_ge(jfind(j, "clients", "beta"), 0);
	json_free(j);
	CTL(r, &d, "memory", "--json");
	expect_ok(r, "memory --json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.buffer_bytes"), MiB);
	json_free(j);

	/* twice, or a client that never was: an error from the daemon */
	CTL(r, &d, "kill", id);
	ck_assert_int_eq(r->rc, 1);
	expect_in(r->err, "is connected");
	CTL(r, &d, "kill", "99999");
	ck_assert_int_eq(r->rc, 1);
	CTL(r, &d, "kill", id, "--json");
	ck_assert_int_eq(r->rc, 1);

	/* --json on a command */
	snprintf(id, sizeof(id), "%llu", (unsigned long long)ruda_client_session_id(w.beta));
	CTL(r, &d, "--json", "kill", id);
	expect_ok(r, "kill --json");
	j = json_parse(r->out);
	jexpect(j, "command", "kill");
	jexpect(j, "name", "beta");
	ck_assert_uint_eq(jnum(j, "bytes"), MiB);
	json_free(j);

	free(r);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

static unsigned long long zero_filled(struct ctl_run *r, const struct test_daemon *d)
{
	CTL(r, d, "memory", "--json");
	expect_ok(r, "memory --json");
	struct flat *m = json_parse(r->out);
	unsigned long long z = jnum(m, "devices.0.zero_filled_bytes");
	json_free(m);
	return z;
}

/* New buffers' zero fills are counted; a create (from the arena or from a
 * staging region) writes the buffer whole and needs none, and an in-order
 * partial write leaves only the rest to fill. */
START_TEST(zero_fills_counted)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "filler");
	struct ctl_run *r = malloc(sizeof(*r));
	static uint8_t data[MiB], back[MiB];
	memset(data, 5, sizeof(data));
	unsigned long long z0 = zero_filled(r, &d);
	ruda_staging st;
	ck_assert_int_eq(ruda_client_staging_create(c, MiB, &st), RUDA_OK);
	memset(st.data, 6, MiB);
	ruda_handle whole, arena, half;
	ck_assert_int_eq(ruda_client_create_from_staging(c, &st, 0, MiB, &whole), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	/* the staging write opens the submission: it must not record the fill */
	ck_assert_int_eq(ruda_client_read_one(c, whole, back), RUDA_OK);
	ck_assert_int_eq(back[MiB - 1], 6);
	ck_assert_int_eq(ruda_client_create(c, data, MiB, &arena), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_uint_eq(zero_filled(r, &d), z0);
	/* half written in order from a staging region: the other half is
	 * filled before the read */
	ck_assert_int_eq(ruda_client_empty(c, MiB, &half), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_int_eq(ruda_client_write_from_staging(c, half, 0, &st, 0, MiB / 2), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, half, back), RUDA_OK);
	ck_assert_int_eq(back[0], 6);
	ck_assert_int_eq(back[MiB - 1], 0);
	ck_assert_uint_eq(zero_filled(r, &d), z0 + MiB / 2);
	free(r);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* What `status --json` says of the loop thread and device 0's submits. */
struct loop_counts {
	unsigned long long loop_busy_ns, queue_submits, submit_ns, submitted;
};

static struct loop_counts loop_counts(struct ctl_run *r, const struct test_daemon *d)
{
	CTL(r, d, "status", "--json", "--sample", "0");
	expect_ok(r, "status --json");
	struct flat *j = json_parse(r->out);
	struct loop_counts n = {
		.loop_busy_ns = jnum(j, "daemon.loop_busy_ns"),
		.queue_submits = jnum(j, "devices.0.queue_submits"),
		.submit_ns = jnum(j, "devices.0.submit_ns"),
		.submitted = jnum(j, "devices.0.submitted"),
	};
	json_free(j);
	return n;
}

/* The loop thread's busy time grows with the requests it serves, and every
 * vkQueueSubmit is counted with the host time spent in it. */
START_TEST(loop_busy_and_submits_counted)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "submitter");
	struct ctl_run *r = malloc(sizeof(*r));
	struct loop_counts before = loop_counts(r, &d);
	ck_assert_uint_gt(before.loop_busy_ns, 0); /* it handled rudactl's requests */

	ruda_handle buf;
	ck_assert_int_eq(ruda_client_empty(c, MiB, &buf), RUDA_OK);
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	for (uint32_t i = 0; i < 4; i++) {
		uint32_t push[2] = {i, MiB / 4};
		ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){16, 1, 1}, &buf, 1, push,
						    sizeof(push)),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	}
	struct loop_counts after = loop_counts(r, &d);
	ck_assert_uint_ge(after.queue_submits, 1);
	ck_assert_uint_gt(after.queue_submits, before.queue_submits);
	/* a submission is one vkQueueSubmit (the timeline value counts both) */
	ck_assert_uint_eq(after.queue_submits - before.queue_submits,
			  after.submitted - before.submitted);
	ck_assert_uint_gt(after.submit_ns, before.submit_ns);
	ck_assert_uint_gt(after.loop_busy_ns, before.loop_busy_ns);

	CTL(r, &d, "status");
	expect_ok(r, "status");
	expect_in(r->out, "loop      busy ");
	expect_in(r->out, "% of the last ");
	expect_in(r->out, " queue submits, ");
	CTL(r, &d, "devices");
	expect_ok(r, "devices");
	expect_in(r->out, " vkQueueSubmit calls, ");
	free(r);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

static uint64_t slow_passes(const struct test_daemon *d, uint64_t *longest_ns)
{
	Ruda__Reply *reply = test_admin_status(d);
	uint64_t n = reply->admin->status->slow_passes;
	*longest_ns = reply->admin->status->longest_pass_ns;
	ruda__reply__free_unpacked(reply, NULL);
	return n;
}

/* A pass of the loop that blocks it for 50 ms or more is counted and
 * logged with where its time went: here a Flush that sleeps 120 ms on the
 * loop (RUDA_TEST_STALL_FLUSH_MS, the stand-in for a request that blocks
 * it), named as the slowest step of the pass. */
START_TEST(slow_pass_counted_and_logged)
{
	struct test_daemon d;
	setenv("RUDA_TEST_STALL_FLUSH_MS", "120", 1);
	test_daemon_start(&d, NULL);
	unsetenv("RUDA_TEST_STALL_FLUSH_MS");
	ruda_client *c = test_connect(&d, "staller");
	uint64_t longest, before = slow_passes(&d, &longest);
	ck_assert_int_eq(test_log_count(&d, "its slowest step: request Flush"), 0);
	/* past the one report a second, should a pass before it have been slow
	 * (start-up, or any under valgrind) */
	usleep(1100 * 1000);
	ck_assert_int_eq(ruda_client_flush(c), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	uint64_t after = slow_passes(&d, &longest);
	ck_assert_uint_ge(after, before + 1);
	ck_assert_uint_ge(longest, 120 * 1000 * 1000ull);
	ck_assert_int_ge(test_log_count(&d, "loop: one pass kept it from its events for"), 1);
	ck_assert_int_eq(test_log_count(&d, "its slowest step: request Flush"), 1);
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "status");
	expect_ok(r, "status");
	expect_in(r->out, "longest pass ");
	expect_in(r->out, " passes of 50 ms or more");
	CTL(r, &d, "metrics");
	expect_ok(r, "metrics");
	char line[64];
	snprintf(line, sizeof(line), "\nruda_loop_slow_passes_total %llu\n",
		 (unsigned long long)after);
	expect_in(r->out, line);
	expect_in(r->out, "# TYPE ruda_loop_longest_pass_seconds gauge\n");
	free(r);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* What `devices --json` says of device 0's queue lanes. */
struct lane_counts {
	unsigned long long submissions, rounds, launches, gpu_ns, idle_ns, record_ns;
	int cpu; /* the device has no timestamps to count device time by */
};

static struct lane_counts lane_counts(struct ctl_run *r, const struct test_daemon *d)
{
	CTL(r, d, "devices", "--json");
	expect_ok(r, "devices --json");
	struct flat *j = json_parse(r->out);
	struct lane_counts n = {
		.submissions = jnum(j, "devices.0.lane_submissions"),
		.rounds = jnum(j, "devices.0.lane_rounds"),
		.launches = jnum(j, "devices.0.lane_launches"),
		.gpu_ns = jnum(j, "devices.0.lane_gpu_ns"),
		.idle_ns = jnum(j, "devices.0.lane_idle_ns"),
		.record_ns = jnum(j, "devices.0.lane_record_ns"),
	};
	const char *type = jget(j, "devices.0.type");
	n.cpu = type && !strcmp(type, "cpu");
	json_free(j);
	return n;
}

/* Queue lanes' counters: every launch recorded in a round is counted once,
 * in rounds no more than the launches, in submissions no more than the
 * rounds; `devices` prints them. */
START_TEST(lane_rounds_counted)
{
	static const char *const lanes[] = {"--set", "lanes=on", "--set", "queues=1", NULL};
	struct test_daemon d;
	test_daemon_start(&d, lanes);
	ruda_client *a = test_connect(&d, "lane a"), *b = test_connect(&d, "lane b");
	struct ctl_run *r = malloc(sizeof(*r));
	ruda_handle ha, hb;
	ck_assert_int_eq(ruda_client_empty(a, MiB, &ha), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(b, MiB, &hb), RUDA_OK);
	ruda_kernel fa = test_register(a, "fill", 1, 8), fb = test_register(b, "fill", 1, 8);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	struct lane_counts before = lane_counts(r, &d);
	enum { N = 40 };
	for (uint32_t i = 0; i < N; i++) {
		uint32_t push[2] = {i, MiB / 4};
		ck_assert_int_eq(ruda_client_launch(a, fa, (ruda_count){16, 1, 1}, &ha, 1, push,
						    sizeof(push)),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_launch(b, fb, (ruda_count){16, 1, 1}, &hb, 1, push,
						    sizeof(push)),
				 RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	struct lane_counts after = lane_counts(r, &d);
	unsigned long long subs = after.submissions - before.submissions,
			   rounds = after.rounds - before.rounds,
			   launches = after.launches - before.launches;
	ck_assert_uint_eq(launches, 2 * N);
	ck_assert_uint_ge(rounds, N); /* a round takes one launch of each stream */
	ck_assert_uint_le(rounds, 2 * N);
	ck_assert_uint_ge(subs, 1);
	ck_assert_uint_le(subs, rounds);
	/* recording the rounds took the loop some host time */
	ck_assert_uint_gt(after.record_ns, before.record_ns);
	/* device time by timestamps, where the device has them: the rounds'
	 * kernels took some; the queue was not idle longer than it worked */
	unsigned long long gpu = after.gpu_ns - before.gpu_ns, idle = after.idle_ns - before.idle_ns;
	if (after.cpu) {
		ck_assert_uint_eq(after.gpu_ns, 0);
		ck_assert_uint_eq(after.idle_ns, 0);
	} else {
		ck_assert_uint_gt(gpu, 0);
		ck_assert_uint_le(idle, gpu);
	}
	CTL(r, &d, "devices");
	expect_ok(r, "devices");
	expect_in(r->out, " rounds, ");
	expect_in(r->out, " a round), ");
	expect_in(r->out, " recording them");
	free(r);
	ruda_client_close(a);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

/* A count of `status --json` (`key` in its flattened form). */
static unsigned long long status_count(struct ctl_run *r, const struct test_daemon *d,
				       const char *key)
{
	CTL(r, d, "status", "--json", "--sample", "0");
	expect_ok(r, "status --json");
	struct flat *j = json_parse(r->out);
	unsigned long long n = jnum(j, key);
	json_free(j);
	return n;
}

static unsigned long long turns_yielded(struct ctl_run *r, const struct test_daemon *d)
{
	return status_count(r, d, "daemon.turns_yielded");
}

/* Until rudad counts `n` sessions, asked through `c` itself: rudactl's
 * session ends when rudactl exits, but rudad may read a client's next
 * batch before it reads that end, and a second session puts the batch
 * under the frame budget. */
static void wait_for_sessions(ruda_client *c, uint32_t n)
{
	for (int i = 0; i < 500; i++) {
		ruda_daemon_stats st = RUDA_DAEMON_STATS_INIT;
		ck_assert_int_eq(ruda_client_daemon_stats(c, &st), RUDA_OK);
		if (st.sessions == n)
			return;
		usleep(10000);
	}
	ck_abort_msg("rudad never counted %u sessions", n);
}

/* `n` launches of fill, each writing its index over the whole buffer, sent
 * as one batch, then a sync: the buffer ends holding the last index only
 * if every launch ran, in order. */
static void fill_batch(ruda_client *c, ruda_kernel fill, ruda_handle buf, uint32_t words,
		       uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t push[2] = {i, words};
		ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){1, 1, 1}, &buf, 1, push,
						    sizeof(push)),
				 RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	uint32_t back[64];
	ck_assert_int_eq(ruda_client_read_one(c, buf, back), RUDA_OK);
	for (uint32_t w = 0; w < words; w++)
		ck_assert_uint_eq(back[w], n - 1);
}

/* A client alone runs its whole batch in one turn of the loop; beside
 * another client it yields its turn every 8 requests, and its launches
 * still all run, in order. */
START_TEST(frame_budget_yields_turns)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *busy = test_connect(&d, "busy");
	struct ctl_run *r = malloc(sizeof(*r));
	ruda_handle buf;
	ck_assert_int_eq(ruda_client_empty(busy, 64 * 4, &buf), RUDA_OK);
	ruda_kernel fill = test_register(busy, "fill", 1, 8);
	unsigned long long alone0 = turns_yielded(r, &d);
	wait_for_sessions(busy, 1);
	fill_batch(busy, fill, buf, 64, 200);
	ck_assert_uint_eq(turns_yielded(r, &d), alone0);

	ruda_client *other = test_connect(&d, "other");
	unsigned long long shared0 = turns_yielded(r, &d);
	fill_batch(busy, fill, buf, 64, 200);
	ck_assert_uint_gt(turns_yielded(r, &d), shared0);
	ck_assert_int_eq(ruda_client_sync(other), RUDA_OK);

	CTL(r, &d, "status");
	expect_ok(r, "status");
	expect_in(r->out, " turns yielded");
	free(r);
	ruda_client_close(other);
	ruda_client_close(busy);
	test_daemon_stop(&d);
}
END_TEST

/* With queue lanes, a launch and the Sync after it, arriving on an idle
 * queue, are submitted as soon as the client's turn ends, not after every
 * other client's: each round trip counts one, and its result is right. */
START_TEST(sync_on_idle_lane_goes_at_once)
{
	static const char *const lanes[] = {"--set", "lanes=on", "--set", "queues=1", NULL};
	struct test_daemon d;
	test_daemon_start(&d, lanes);
	ruda_client *c = test_connect(&d, "round trips");
	struct ctl_run *r = malloc(sizeof(*r));
	ruda_handle buf;
	ck_assert_int_eq(ruda_client_empty(c, 64 * 4, &buf), RUDA_OK);
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	unsigned long long early0 = status_count(r, &d, "daemon.syncs_submitted_early");
	unsigned long long busy0 = status_count(r, &d, "daemon.loop_busy_ns"),
			   turns0 = status_count(r, &d, "daemon.turns_ns"),
			   done0 = status_count(r, &d, "devices.0.completion_ns");
	enum { TRIPS = 20 };
	for (uint32_t i = 0; i < TRIPS; i++)
		fill_batch(c, fill, buf, 64, 1 + i % 3);
	unsigned long long early = status_count(r, &d, "daemon.syncs_submitted_early") - early0;
	ck_assert_uint_ge(early, TRIPS);
	ck_assert_uint_le(early, 2 * TRIPS); /* one, and the read's, at most */
	/* the loop's time went to the client's turns and to the completions,
	 * each counted apart: some to each, together no more than the loop
	 * was busy (1 ms for the samples' own edges) */
	unsigned long long turns = status_count(r, &d, "daemon.turns_ns") - turns0,
			   done = status_count(r, &d, "devices.0.completion_ns") - done0,
			   busy = status_count(r, &d, "daemon.loop_busy_ns") - busy0;
	ck_assert_uint_gt(turns, 0);
	ck_assert_uint_gt(done, 0);
	ck_assert_uint_le(turns + done, busy + 1000000);
	CTL(r, &d, "status");
	expect_ok(r, "status");
	expect_in(r->out, " syncs submitted");
	free(r);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

START_TEST(cleanup_drops_unused_pipelines)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "cleaner");
	ruda_kernel k = test_register(c, "fill", 1, 8);
	test_register(c, "saxpy", 2, 8);
	ck_assert_int_eq(ruda_client_kernel_release(c, k), RUDA_OK);
	/* a page that held a buffer, now empty */
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, MiB, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	/* and a large buffer's own page, kept for the next of its size */
	ck_assert_int_eq(ruda_client_empty(c, 100 * MiB, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "memory", "--json");
	expect_ok(r, "memory --json");
	struct flat *m = json_parse(r->out);
	unsigned long long reserved = jnum(m, "devices.0.reserved_bytes");
	ck_assert_uint_eq(jnum(m, "devices.0.buffer_bytes"), 0);
	ck_assert_uint_eq(jnum(m, "devices.0.kept_bytes"), 100 * MiB);
	ck_assert_uint_ge(jnum(m, "devices.0.kept_max_bytes"), 100 * MiB);
	ck_assert_uint_eq(jnum(m, "devices.0.kept_for_ms"), 10000);
	ck_assert_uint_ge(reserved, 101 * MiB);
	json_free(m);
	CTL(r, &d, "memory");
	expect_ok(r, "memory");
	expect_in(r->out, "kept           100.0 MiB of freed buffers' own pages");

	CTL(r, &d, "cache", "--json");
	expect_ok(r, "cache --json");
	struct flat *j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.entries"), 2);
	ck_assert_uint_eq(jnum(j, "devices.0.unused"), 1);
	json_free(j);

	CTL(r, &d, "cleanup", "--json");
	expect_ok(r, "cleanup --json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "pipelines_dropped"), 1);
	unsigned long long freed = jnum(j, "bytes_freed");
	json_free(j);
	/* what it freed is what the allocator no longer holds; nothing empty is left */
	CTL(r, &d, "memory", "--json");
	m = json_parse(r->out);
	ck_assert_uint_eq(jnum(m, "devices.0.reserved_bytes"), reserved - freed);
	ck_assert_uint_eq(jnum(m, "devices.0.empty_pages"), 0);
	ck_assert_uint_eq(jnum(m, "devices.0.kept_bytes"), 0);
	json_free(m);

	CTL(r, &d, "cache", "--json");
	j = json_parse(r->out);
	ck_assert_uint_eq(jnum(j, "devices.0.entries"), 1);
	ck_assert_uint_eq(jnum(j, "devices.0.unused"), 0);
	json_free(j);

	CTL(r, &d, "cleanup");
	expect_ok(r, "cleanup");
	expect_in(r->out, "0 B of device memory freed, 0 unused pipelines dropped");
	free(r);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* drain and shutdown use the server's hooks, which rudad always sets: a
 * reply of ERROR_UNSUPPORTED ("no drain hook") is a failure here. */
START_TEST(drain_then_last_client_leaves)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "staying");
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "drain");
	expect_ok(r, "drain");
	expect_in(r->out, "draining");
	/* no new clients; the one here keeps working */
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d.socket_path, .client_name = "late"};
	ruda_client *late = NULL;
	ck_assert_int_ne(ruda_client_connect(&o, &late), RUDA_OK);
	ck_assert_int_eq(access(d.socket_path, F_OK), -1); /* another rudad may start there */
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, 4096, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	/* once it leaves, rudad exits */
	ruda_client_close(c);
	int status = -1;
	for (int i = 0; i < 200 && waitpid(d.pid, &status, WNOHANG) != d.pid; i++)
		sleep_ms(50);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "rudad did not exit 0 after draining (status %d)", status);
	ck_assert_int_eq(access(d.socket_path, F_OK), -1);
	unlink(d.log_path);
	rmdir(d.dir);
	free(r);
}
END_TEST

START_TEST(shutdown_stops_daemon)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c = test_connect(&d, "bystander");
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "shutdown");
	expect_ok(r, "shutdown");
	expect_in(r->out, "shutting down");
	int status = -1;
	for (int i = 0; i < 200 && waitpid(d.pid, &status, WNOHANG) != d.pid; i++)
		sleep_ms(50);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "rudad did not exit 0 after shutdown (status %d)", status);
	ck_assert_int_eq(access(d.socket_path, F_OK), -1);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_DISCONNECTED);
	ruda_client_close(c);
	unlink(d.log_path);
	rmdir(d.dir);
	free(r);
}
END_TEST

/* ---- permissions ---------------------------------------------------------------------- */

/* Let uid 65534 reach the daemon's socket. */
static void open_socket_to_all(const struct test_daemon *d)
{
	ck_assert_int_eq(chmod(d->dir, 0777), 0);
	ck_assert_int_eq(chmod(d->socket_path, 0666), 0);
}

START_TEST(non_admin_refused)
{
	struct test_daemon d;
	const char *const closed[] = {"--set", "read_only_views=false", NULL};
	test_daemon_start(&d, closed);
	open_socket_to_all(&d);
	struct workload w;
	workload_start(&w, &d);
	char id[32];
	snprintf(id, sizeof(id), "%llu", (unsigned long long)ruda_client_session_id(w.alpha));
	struct ctl_run *r = malloc(sizeof(*r));

	static const char *const commands[] = {"cleanup", "drain", "shutdown"};
	CTL_NOBODY(r, &d, "kill", id);
	ck_assert_msg(r->rc == 1, "exit %d: %s", r->rc, r->err);
	expect_in(r->err, "permission denied");
	expect_in(r->err, "uid 65534");
	for (int i = 0; i < 3; i++) {
		CTL_NOBODY(r, &d, commands[i]);
		ck_assert_msg(r->rc == 1, "%s: exit %d: %s", commands[i], r->rc, r->err);
		expect_in(r->err, "permission denied");
	}
	/* views are closed too unless read_only_views says otherwise */
	CTL_NOBODY(r, &d, "clients");
	ck_assert_int_eq(r->rc, 1);
	expect_in(r->err, "read_only_views");
	/* nothing happened: the daemon and alpha are still there */
	ck_assert(test_daemon_alive(&d));
	ck_assert_int_eq(ruda_client_sync(w.alpha), RUDA_OK);
	CTL(r, &d, "clients", "--json");
	expect_ok(r, "clients --json");
	struct flat *j = json_parse(r->out);
	ck_assert_int_ge(jfind(j, "clients", "alpha"), 0);
	json_free(j);
	/* and status tells root it may run commands */
	CTL(r, &d, "status", "--json", "--sample=0");
	expect_ok(r, "status");
	j = json_parse(r->out);
	jexpect(j, "daemon.admin", "true");
	jexpect(j, "devices.0.busy_percent", "null");
	json_free(j);
	workload_stop(&w);
	test_daemon_stop(&d);

	/* read_only_views = true: views for everyone, commands still not */
	const char *const open_views[] = {"--set", "read_only_views=true", NULL};
	test_daemon_start(&d, open_views);
	open_socket_to_all(&d);
	workload_start(&w, &d);
	CTL_NOBODY(r, &d, "clients", "--json");
	expect_ok(r, "clients --json as nobody");
	j = json_parse(r->out);
	ck_assert_int_ge(jfind(j, "clients", "alpha"), 0);
	json_free(j);
	CTL_NOBODY(r, &d, "status", "--json");
	expect_ok(r, "status --json as nobody");
	j = json_parse(r->out);
	jexpect(j, "daemon.admin", "false");
	json_free(j);
	CTL_NOBODY(r, &d, "kill", id);
	ck_assert_int_eq(r->rc, 1);
	expect_in(r->err, "permission denied");
	free(r);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

/* ---- usage and connection errors -------------------------------------------------------- */

START_TEST(exit_codes)
{
	struct ctl_run *r = malloc(sizeof(*r));
	const char *missing = "/tmp/ruda-no-such-dir/rudad.sock";
	run_ctl_full(r, AS_ROOT, missing, NULL, (const char *const[]){"status", NULL});
	ck_assert_int_eq(r->rc, 3);
	expect_in(r->err, missing);
	expect_in(r->err, "/tmp/ruda-no-such-dir/rudad.sock: no such socket");
	/* the environment's socket, named in the message too */
	run_ctl_full(r, AS_ROOT, NULL, "/tmp/ruda-no-such-dir/env.sock",
		     (const char *const[]){"clients", NULL});
	ck_assert_int_eq(r->rc, 3);
	expect_in(r->err, "/tmp/ruda-no-such-dir/env.sock");

	static const char *const bad[][4] = {
		{NULL},
		{"bogus", NULL},
		{"kill", NULL},
		{"kill", "abc", NULL},
		{"kill", "0", NULL},
		{"status", "extra", NULL},
		{"--bogus", "status", NULL},
		{"top", "--json", NULL},
		{"metrics", "--json", NULL},
		{"top", "--interval", "zero", NULL},
		{"status", "--timeout", NULL},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		run_ctl_full(r, AS_ROOT, missing, NULL, bad[i]);
		ck_assert_msg(r->rc == 2, "case %zu (%s): exit %d", i, bad[i][0] ? bad[i][0] : "-",
			      r->rc);
		expect_in(r->err, "rudactl: ");
	}
	run_ctl_full(r, AS_ROOT, missing, NULL, (const char *const[]){"--help", NULL});
	ck_assert_int_eq(r->rc, 0);
	expect_in(r->out, "Usage: rudactl");
	free(r);
}
END_TEST

/* ---- top ------------------------------------------------------------------------------- */

START_TEST(top_in_a_terminal)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	struct workload w;
	workload_start(&w, &d);
	char ctl[512];
	snprintf(ctl, sizeof(ctl), "%s", test_build_path("rudactl"));
	struct winsize ws = {.ws_row = 40, .ws_col = 150};
	int master;
	pid_t pid = forkpty(&master, NULL, NULL, &ws);
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		setenv("TERM", "xterm", 1);
		execl(ctl, ctl, "--socket", d.socket_path, "top", "--interval", "0.3", (char *)NULL);
		_exit(127);
	}
	/* one refresh showing both clients, then 'q' */
	static char screen[1 << 16];
	size_t used = 0;
	int seen = 0;
	for (int waited = 0; waited < 15000 && !seen; waited += 50) {
		struct pollfd p = {.fd = master, .events = POLLIN};
		if (poll(&p, 1, 50) > 0) {
			ssize_t n = read(master, screen + used, sizeof(screen) - used - 1);
			if (n <= 0)
				break;
			used += (size_t)n;
			screen[used] = '\0';
		}
		seen = strstr(screen, "alpha") && strstr(screen, "beta") && strstr(screen, "IDLE");
	}
	ck_assert_msg(seen, "top did not show the clients:\n%s", screen);
	expect_in(screen, "\033[?1049h"); /* the alternate screen */
	expect_in(screen, "dev 0");
	expect_in(screen, "GPU TIME");
	expect_in(screen, "3.0 MiB");
	ck_assert_int_eq(write(master, "q", 1), 1);
	int status = -1;
	for (int tries = 0; tries < 500; tries++) {
		struct pollfd p = {.fd = master, .events = POLLIN};
		ssize_t n = 0;
		if (poll(&p, 1, 10) > 0 && used + 1 < sizeof(screen))
			n = read(master, screen + used, sizeof(screen) - used - 1);
		if (n > 0) {
			used += (size_t)n;
			screen[used] = '\0';
		} else {
			sleep_ms(10); /* the terminal hung up: the child is exiting */
		}
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
	}
	if (!WIFEXITED(status))
		kill(pid, SIGKILL);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "top did not quit on 'q' (status %d); it showed:\n%s", status,
		      used > 3000 ? screen + used - 3000 : screen);
	expect_in(screen, "\033[?1049l"); /* and left the terminal as it was */
	close(master);

	/* batch mode, without a terminal */
	struct ctl_run *r = malloc(sizeof(*r));
	CTL(r, &d, "top", "--iterations", "2", "--interval", "0.1");
	expect_ok(r, "top --iterations 2");
	expect_in(r->out, "alpha");
	ck_assert_ptr_null(strstr(r->out, "\033["));
	free(r);
	workload_stop(&w);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("rudactl");
	TCase *tc = tcase_create("rudactl");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, clients_view_counts);
	tcase_add_test(tc, status_memory_devices_cache);
	tcase_add_test(tc, devices_lists_logical_devices);
	tcase_add_test(tc, metrics_exposition);
	tcase_add_test(tc, kill_disconnects_and_frees);
	tcase_add_test(tc, cleanup_drops_unused_pipelines);
	tcase_add_test(tc, zero_fills_counted);
	tcase_add_test(tc, loop_busy_and_submits_counted);
	tcase_add_test(tc, slow_pass_counted_and_logged);
	tcase_add_test(tc, lane_rounds_counted);
	tcase_add_test(tc, sync_on_idle_lane_goes_at_once);
	tcase_add_test(tc, frame_budget_yields_turns);
	tcase_add_test(tc, drain_then_last_client_leaves);
	tcase_add_test(tc, shutdown_stops_daemon);
	tcase_add_test(tc, non_admin_refused);
	tcase_add_test(tc, exit_codes);
	tcase_add_test(tc, top_in_a_terminal);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
