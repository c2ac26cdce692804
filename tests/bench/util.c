/* Bench support: timing, statistics, the results table and JSON, a rudad
 * of our own, child processes. */
#include "bench.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
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

#include "../proto/frame.h"

struct bench_options bench_opt;

const char *bench_path(const char *rel)
{
	static char path[2048];
	snprintf(path, sizeof(path), "%s/%s", bench_opt.build_dir, rel);
	return path;
}

/* ---- failures ------------------------------------------------------------- */

/* Daemons to stop if the bench fails. */
#define MAX_DAEMONS 8
static struct bench_daemon *running[MAX_DAEMONS];

static void track(struct bench_daemon *d, int on)
{
	for (int i = 0; i < MAX_DAEMONS; i++) {
		if (on && !running[i]) {
			running[i] = d;
			return;
		}
		if (!on && running[i] == d) {
			running[i] = NULL;
			return;
		}
	}
}

void bench_fail(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fflush(stdout);
	fprintf(stderr, "bench: FAILED: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	for (int i = 0; i < MAX_DAEMONS; i++) {
		if (!running[i])
			continue;
		int status;
		if (waitpid(running[i]->pid, &status, WNOHANG) == running[i]->pid) {
			if (WIFSIGNALED(status))
				fprintf(stderr, "bench: rudad (pid %d) had died of signal %d\n",
					(int)running[i]->pid, WTERMSIG(status));
			else
				fprintf(stderr, "bench: rudad (pid %d) had exited with status %d\n",
					(int)running[i]->pid, WEXITSTATUS(status));
		} else {
			kill(running[i]->pid, SIGKILL);
			waitpid(running[i]->pid, NULL, 0);
		}
		fprintf(stderr, "bench: rudad's log is %s\n", running[i]->log_path);
	}
	exit(1);
}

static void on_signal(int sig)
{
	for (int i = 0; i < MAX_DAEMONS; i++)
		if (running[i])
			kill(running[i]->pid, SIGKILL);
	signal(sig, SIG_DFL);
	raise(sig);
}

void bench_install_signal_handlers(void)
{
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	signal(SIGHUP, on_signal);
}

/* ---- time and statistics -------------------------------------------------- */

double bench_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void bench_settle(uint64_t freed)
{
	const char *env = getenv("RUDA_BENCH_SETTLE_MS");
	int ms = env ? atoi(env) : freed >= BENCH_SETTLE_FROM ? BENCH_SETTLE_DEFAULT_MS : 0;
	if (ms > 0)
		usleep((useconds_t)ms * 1000u);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

double bench_median(const double *v, size_t n)
{
	if (!n)
		return NAN;
	double *s = malloc(n * sizeof(*s));
	BENCH_CHECK(s, "out of memory");
	memcpy(s, v, n * sizeof(*s));
	qsort(s, n, sizeof(*s), cmp_double);
	double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
	free(s);
	return m;
}

double bench_mean(const double *v, size_t n)
{
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	return n ? sum / (double)n : NAN;
}

double bench_cpu_self(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

double bench_cpu_of(pid_t pid)
{
	char path[64], buf[2048];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "r");
	if (!f)
		return NAN;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* fields after the command's closing parenthesis; utime and stime
	 * are the 14th and 15th of the line */
	const char *p = strrchr(buf, ')');
	unsigned long long ut, st;
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
			 &st) != 2)
		return NAN;
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* ---- results -------------------------------------------------------------- */

struct row {
	char group[32], name[96], unit[24], note[96];
	double value, baseline;
	double paired_ratio; /* measured in pairs (bench_paired_ratio); NaN: value / baseline */
	enum bench_better better;
	double target; /* on the ratio; NaN: none */
};

struct group {
	char name[32], title[256], value_col[24], baseline_col[24], ratio_note[512];
};

#define MAX_ROWS 512
#define MAX_GROUPS 16
static struct row rows[MAX_ROWS];
static size_t nrows;
static struct group groups[MAX_GROUPS];
static size_t ngroups;

void bench_result(const char *group, const char *name, const char *unit, double value,
		  double baseline, enum bench_better better, const char *note)
{
	BENCH_CHECK(nrows < MAX_ROWS, "too many results");
	struct row *r = &rows[nrows++];
	snprintf(r->group, sizeof(r->group), "%s", group);
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->unit, sizeof(r->unit), "%s", unit);
	snprintf(r->note, sizeof(r->note), "%s", note ? note : "");
	r->value = value;
	r->baseline = baseline;
	r->better = better;
	r->target = NAN;
	r->paired_ratio = NAN;
}

void bench_paired_ratio(double ratio)
{
	BENCH_CHECK(nrows > 0, "a ratio before any result");
	rows[nrows - 1].paired_ratio = ratio;
}

void bench_target(double ratio_target)
{
	BENCH_CHECK(nrows > 0, "a target before any result");
	rows[nrows - 1].target = ratio_target;
}

/* "≥ 0.95" or "≤ 2", by the row's direction; "" when it has none. */
static const char *target_text(const struct row *r, char *buf, size_t len)
{
	if (isnan(r->target))
		snprintf(buf, len, "%s", "");
	else
		snprintf(buf, len, "%s %g", r->better == BENCH_HIGHER ? ">=" : "<=", r->target);
	return buf;
}

static const char *verdict(const struct row *r, double x)
{
	if (isnan(r->target))
		return "";
	if (isnan(x))
		return "  (not measured)";
	int met = r->better == BENCH_HIGHER ? x >= r->target : x <= r->target;
	return met ? "  met" : "  MISSED";
}

void bench_group_header(const char *group, const char *title, const char *value_col,
			const char *baseline_col, const char *ratio_note)
{
	BENCH_CHECK(ngroups < MAX_GROUPS, "too many groups");
	struct group *g = &groups[ngroups++];
	snprintf(g->name, sizeof(g->name), "%s", group);
	snprintf(g->title, sizeof(g->title), "%s", title);
	snprintf(g->value_col, sizeof(g->value_col), "%s", value_col);
	snprintf(g->baseline_col, sizeof(g->baseline_col), "%s", baseline_col);
	snprintf(g->ratio_note, sizeof(g->ratio_note), "%s", ratio_note);
}

static const char *number(double v, char *buf, size_t len)
{
	double a = fabs(v);
	if (isnan(v))
		snprintf(buf, len, "n/a");
	else if (a >= 10000)
		snprintf(buf, len, "%.0f", v);
	else if (a >= 100)
		snprintf(buf, len, "%.1f", v);
	else if (a >= 10)
		snprintf(buf, len, "%.2f", v);
	else
		snprintf(buf, len, "%.3f", v);
	return buf;
}

static double ratio(const struct row *r)
{
	if (!isnan(r->paired_ratio))
		return r->paired_ratio;
	if (isnan(r->value) || isnan(r->baseline) || r->baseline == 0)
		return NAN;
	return r->value / r->baseline;
}

void bench_print_group(const char *name)
{
	const struct group *g = NULL;
	for (size_t i = 0; i < ngroups; i++)
		if (strcmp(groups[i].name, name) == 0)
			g = &groups[i];
	BENCH_CHECK(g, "no group %s", name);
	printf("\n== %s\n", g->title);
	/* the note may hold several lines */
	for (const char *p = g->ratio_note; *p;) {
		const char *nl = strchr(p, '\n');
		int len = nl ? (int)(nl - p) : (int)strlen(p);
		printf("   %.*s\n", len, p);
		p += len + (nl ? 1 : 0);
	}
	printf("\n");
	printf("  %-44s %12s %12s  %-10s %8s %8s\n", "", g->value_col, g->baseline_col, "unit",
	       "ratio", "target");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (strcmp(r->group, name) != 0)
			continue;
		char v[32], b[32], q[32], t[32];
		target_text(r, t, sizeof(t));
		number(r->value, v, sizeof(v));
		number(r->baseline, b, sizeof(b));
		double x = ratio(r);
		if (isnan(x))
			snprintf(q, sizeof(q), "n/a");
		else
			snprintf(q, sizeof(q), "%.3f", x);
		printf("  %-44s %12s %12s  %-10s %8s %8s%s%s\n", r->name, v, b, r->unit, q, t,
		       r->note[0] ? "  " : "", r->note);
	}
	fflush(stdout);
}

void bench_print_summary(void)
{
	printf("\n== summary: every figure with a target (ratio = value / baseline, or its "
	       "paired ratio where its group says so)\n\n");
	printf("  %-14s %-44s %12s %12s  %-10s %8s %8s\n", "group", "figure", "value", "baseline",
	       "unit", "ratio", "target");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		if (isnan(r->target))
			continue;
		char v[32], b[32], q[32], t[32];
		double x = ratio(r);
		if (isnan(x))
			snprintf(q, sizeof(q), "n/a");
		else
			snprintf(q, sizeof(q), "%.3f", x);
		printf("  %-14s %-44s %12s %12s  %-10s %8s %8s%s\n", r->group, r->name,
		       number(r->value, v, sizeof(v)), number(r->baseline, b, sizeof(b)), r->unit,
		       q, target_text(r, t, sizeof(t)), verdict(r, x));
	}
	fflush(stdout);
}

static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", *s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

static void json_number(FILE *f, double v)
{
	if (isnan(v) || isinf(v))
		fprintf(f, "null");
	else
		fprintf(f, "%.6g", v);
}

int bench_write_json(const char *path)
{
	char tmp[2100];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -errno;
	fprintf(f, "[\n");
	for (size_t i = 0; i < nrows; i++) {
		const struct row *r = &rows[i];
		fprintf(f, "  {\"group\": ");
		json_string(f, r->group);
		fprintf(f, ", \"name\": ");
		json_string(f, r->name);
		fprintf(f, ", \"unit\": ");
		json_string(f, r->unit);
		fprintf(f, ", \"value\": ");
		json_number(f, r->value);
		fprintf(f, ", \"baseline\": ");
		json_number(f, r->baseline);
		fprintf(f, ", \"ratio\": ");
		json_number(f, ratio(r));
		fprintf(f, ", \"better\": \"%s\"", r->better == BENCH_HIGHER ? "higher" : "lower");
		if (!isnan(r->target)) {
			fprintf(f, ", \"target\": ");
			json_number(f, r->target);
		}
		if (r->note[0]) {
			fprintf(f, ", \"note\": ");
			json_string(f, r->note);
		}
		fprintf(f, "}%s\n", i + 1 < nrows ? "," : "");
	}
	fprintf(f, "]\n");
	int err = ferror(f) ? -EIO : 0;
	if (fclose(f) != 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	return err;
}

/* ---- rudad ---------------------------------------------------------------- */

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static int try_connect(const char *path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	size_t n = strlen(path);
	if (n >= sizeof(addr.sun_path))
		return -1;
	memcpy(addr.sun_path, path, n + 1);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void remove_tree(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: could not remove %s\n", dir);
}

void bench_daemon_start(struct bench_daemon *d, const char *const *extra)
{
	/* options rudad may or may not have yet, asked once */
	static int has_config = -1, has_cache_dir = -1;
	if (has_config < 0) {
		has_config = bench_daemon_has_option("--config");
		has_cache_dir = bench_daemon_has_option("--cache-dir");
	}
	memset(d, 0, sizeof(*d));
	snprintf(d->dir, sizeof(d->dir), "/tmp/ruda-bench-XXXXXX");
	BENCH_CHECK(mkdtemp(d->dir), "mkdtemp: %s", strerror(errno));
	snprintf(d->socket_path, sizeof(d->socket_path), "%s/rudad.sock", d->dir);
	snprintf(d->log_path, sizeof(d->log_path), "%s/rudad.log", d->dir);
	char rudad[2048], config[128], cache[128];
	snprintf(rudad, sizeof(rudad), "%s", bench_path("rudad"));
	const char *argv[40] = {rudad, "--socket", d->socket_path};
	int argc = 3;
	if (has_config) {
		/* the defaults, whatever /etc/ruda/rudad.conf says */
		snprintf(config, sizeof(config), "%s/rudad.conf", d->dir);
		FILE *f = fopen(config, "w");
		BENCH_CHECK(f, "cannot write %s", config);
		fprintf(f, "# rudad's defaults for the bench\n");
		/* lines of rudad.conf to compare settings in one place */
		const char *lines = getenv("RUDA_BENCH_RUDAD_CONF");
		if (lines)
			fprintf(f, "%s\n", lines);
		fclose(f);
		argv[argc++] = "--config";
		argv[argc++] = config;
	}
	int own_cache = 1;
	for (int i = 0; extra && extra[i]; i++)
		if (strcmp(extra[i], "--cache-dir") == 0)
			own_cache = 0;
	if (has_cache_dir && own_cache) {
		/* an empty cache of its own, not the machine's */
		snprintf(cache, sizeof(cache), "%s/cache", d->dir);
		BENCH_CHECK(mkdir(cache, 0700) == 0, "mkdir %s: %s", cache, strerror(errno));
		argv[argc++] = "--cache-dir";
		argv[argc++] = cache;
	}
	if (bench_opt.device) {
		argv[argc++] = "--device";
		argv[argc++] = bench_opt.device;
	}
	for (int i = 0; extra && extra[i] && argc < 39; i++)
		argv[argc++] = extra[i];
	argv[argc] = NULL;
	double t0 = bench_now();
	d->pid = fork();
	BENCH_CHECK(d->pid >= 0, "fork: %s", strerror(errno));
	if (d->pid == 0) {
		int log = open(d->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (log >= 0) {
			dup2(log, STDERR_FILENO);
			dup2(log, STDOUT_FILENO);
		}
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	track(d, 1);
	/* it accepts connections once Vulkan is up */
	for (int i = 0; i < 60000; i++) {
		int fd = try_connect(d->socket_path);
		if (fd >= 0) {
			close(fd);
			d->start_s = bench_now() - t0;
			return;
		}
		int status;
		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			track(d, 0);
			bench_fail("rudad exited during start-up (status %d); see %s", status,
				   d->log_path);
		}
		sleep_ms(1);
		if (bench_now() - t0 > 60)
			break;
	}
	bench_fail("rudad did not accept connections within 60 s; see %s", d->log_path);
}

/* $RUDA_BENCH_RUDAD_LOG: rudad's log is appended there before its folder
 * goes (with RUDA_BENCH_RUDAD_CONF='log_level = debug', what it did). */
static void keep_log(const struct bench_daemon *d)
{
	const char *path = getenv("RUDA_BENCH_RUDAD_LOG");
	if (!path || !*path)
		return;
	size_t n = 0;
	char *text = bench_read_file(d->log_path, &n);
	FILE *f = fopen(path, "a");
	BENCH_CHECK(f, "cannot write %s: %s", path, strerror(errno));
	if (text)
		fwrite(text, 1, n, f);
	fclose(f);
	free(text);
}

void bench_daemon_stop(struct bench_daemon *d)
{
	int status = -1;
	kill(d->pid, SIGTERM);
	double t0 = bench_now();
	while (waitpid(d->pid, &status, WNOHANG) != d->pid) {
		if (bench_now() - t0 > 60)
			bench_fail("rudad did not stop within 60 s of SIGTERM");
		sleep_ms(5);
	}
	track(d, 0);
	BENCH_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		    "rudad exited with status %d; see %s", status, d->log_path);
	keep_log(d);
	remove_tree(d->dir);
}

ruda_client *bench_connect(const struct bench_daemon *d)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path, .client_name = "bench"};
	ruda_client *c = NULL;
	ruda_status st = ruda_client_connect(&o, &c);
	BENCH_CHECK(st == RUDA_OK, "connect: %s", ruda_strerror(st));
	return c;
}

/* One request on a raw connection and its reply (an fd passed with it is
 * closed). */
static Ruda__Reply *raw_call(int sock, struct ruda_frame_reader *in, Ruda__Request *req)
{
	uint8_t buf[512];
	size_t n = ruda__request__get_packed_size(req);
	BENCH_CHECK(n <= sizeof(buf), "request too large");
	ruda__frame_header_encode(buf, (uint32_t)n, 0);
	uint8_t frame[RUDA_FRAME_HEADER_SIZE + sizeof(buf)];
	memcpy(frame, buf, RUDA_FRAME_HEADER_SIZE);
	ruda__request__pack(req, frame + RUDA_FRAME_HEADER_SIZE);
	BENCH_CHECK(send(sock, frame, RUDA_FRAME_HEADER_SIZE + n, MSG_NOSIGNAL) ==
			    (ssize_t)(RUDA_FRAME_HEADER_SIZE + n),
		    "send to rudad: %s", strerror(errno));
	struct ruda_frame f;
	int r;
	while ((r = ruda__frame_reader_next(in, &f)) == 0)
		BENCH_CHECK(ruda__frame_reader_recv(in, sock, 0) > 0, "rudad closed the connection");
	BENCH_CHECK(r > 0, "a malformed frame from rudad");
	for (uint16_t i = 0; i < f.nfds; i++)
		close(f.fds[i]);
	Ruda__Reply *reply = ruda__reply__unpack(NULL, f.length, f.payload);
	BENCH_CHECK(reply && reply->status == RUDA__STATUS__OK, "rudad refused a request");
	return reply;
}

Ruda__Reply *bench_admin_status(const char *socket_path)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	BENCH_CHECK(strlen(socket_path) < sizeof(addr.sun_path), "socket path too long");
	memcpy(addr.sun_path, socket_path, strlen(socket_path) + 1);
	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	BENCH_CHECK(sock >= 0 && connect(sock, (struct sockaddr *)&addr, sizeof(addr)) == 0,
		    "cannot connect to %s", socket_path);
	struct ruda_frame_reader in;
	BENCH_CHECK(ruda__frame_reader_init(&in) == 0, "out of memory");
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "bench-admin";
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	ruda__reply__free_unpacked(raw_call(sock, &in, &req), NULL);
	Ruda__AdminStatus status = RUDA__ADMIN_STATUS__INIT;
	Ruda__Admin admin = RUDA__ADMIN__INIT;
	admin.body_case = RUDA__ADMIN__BODY_STATUS;
	admin.status = &status;
	req = (Ruda__Request)RUDA__REQUEST__INIT;
	req.id = 2;
	req.body_case = RUDA__REQUEST__BODY_ADMIN;
	req.admin = &admin;
	Ruda__Reply *reply = raw_call(sock, &in, &req);
	BENCH_CHECK(reply->body_case == RUDA__REPLY__BODY_ADMIN &&
			    reply->admin->body_case == RUDA__ADMIN_REPLY__BODY_STATUS &&
			    reply->admin->status->n_devices > 0,
		    "no AdminStatus reply");
	ruda__frame_reader_finish(&in);
	close(sock);
	return reply;
}

int bench_daemon_has_option(const char *option)
{
	char cmd[2200];
	snprintf(cmd, sizeof(cmd), "'%s' --help 2>&1", bench_path("rudad"));
	FILE *p = popen(cmd, "r");
	if (!p)
		return 0;
	char line[512];
	int found = 0;
	size_t n = strlen(option);
	while (fgets(line, sizeof(line), p)) {
		const char *at = strstr(line, option);
		/* the whole option, not a longer one that starts the same */
		if (at && (at[n] == '=' || at[n] == ' ' || at[n] == '\n' || at[n] == '\0' ||
			   at[n] == '['))
			found = 1;
	}
	pclose(p);
	return found;
}

/* ---- helpers -------------------------------------------------------------- */

void *bench_read_file(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	void *buf = len > 0 ? malloc((size_t)len) : NULL;
	if (buf && fread(buf, 1, (size_t)len, f) != (size_t)len) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	*size = buf ? (size_t)len : 0;
	return buf;
}

void bench_fill_pattern(void *dst, size_t size, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
	uint8_t *p = dst;
	size_t words = size / 8;
	for (size_t i = 0; i < words; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(p + i * 8, &x, 8);
	}
	for (size_t i = words * 8; i < size; i++)
		p[i] = (uint8_t)(x >> (8 * (i % 8)));
}

int64_t bench_compare(const void *a, const void *b, size_t size)
{
	if (memcmp(a, b, size) == 0)
		return -1;
	const uint8_t *x = a, *y = b;
	for (size_t i = 0; i < size; i++)
		if (x[i] != y[i])
			return (int64_t)i;
	return -1;
}

const char *bench_size_name(uint64_t bytes, char *buf, size_t len)
{
	static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	int u = 0;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

double bench_run_program(char *const argv[], const char *log, char *out, size_t outlen)
{
	double t0 = bench_now();
	pid_t pid = fork();
	BENCH_CHECK(pid >= 0, "fork: %s", strerror(errno));
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	double t = bench_now() - t0;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		size_t n = 0;
		char *text = bench_read_file(log, &n);
		unlink(log);
		bench_fail("%s exited with status %d:\n%.*s", argv[0], status, (int)n,
			   text ? text : "");
	}
	if (out && outlen) {
		size_t n = 0;
		char *text = bench_read_file(log, &n);
		n = n < outlen - 1 ? n : outlen - 1;
		if (text)
			memcpy(out, text, n);
		out[text ? n : 0] = '\0';
		free(text);
	}
	unlink(log);
	return t;
}
