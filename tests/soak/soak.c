/*
 * Soak test: a real rudad and N client processes doing random verified
 * work for a bounded time.
 *
 *   soak [--seconds 60] [--clients 4] [--seed N]
 *
 * Each client creates, writes, reads, fills (shaders/fill.spv), adds
 * (shaders/add_f32.spv), releases and syncs buffers at random, keeping a CPU
 * copy of every buffer and comparing every read with it. One client in two
 * kills itself with SIGKILL after 50 to 20 050 operations, in the middle of
 * queued work; the parent starts another in its place. Every second the parent samples rudad's RSS
 * (VmRSS) and fd count. At the end, once every client has gone and rudad
 * holds still, it prints the operations done, the errors, and RSS and fds
 * over time, and exits 1 on any wrong result or unexpected error, on an fd
 * count that differs from the start, or on RSS over 64 MiB above the start.
 * Nothing is judged by time.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <ruda/ruda.h>

#ifndef RUDA_BUILD_DIR
#define RUDA_BUILD_DIR "build"
#endif

#define MAX_CLIENTS 64
#define LIVE 8                /* buffers a client holds at most */
#define RSS_GROWTH_LIMIT_KIB (64 * 1024)
#define MAX_SAMPLES 100000

enum op { OP_CREATE, OP_EMPTY, OP_WRITE, OP_READ, OP_FILL, OP_ADD, OP_RELEASE, OP_SYNC, OP_COUNT };
static const char *op_names[OP_COUNT] = {"create", "empty", "write", "read",
					 "fill", "add", "release", "sync"};

/* Shared with the clients (MAP_SHARED): counted as each operation is
 * verified, so a killed client's work still counts. */
struct shared {
	_Atomic uint64_t ops[OP_COUNT];
	_Atomic uint64_t wrong;      /* reads that differ from the CPU copy */
	_Atomic uint64_t unexpected; /* calls that failed */
	char first_error[512];
	atomic_flag error_taken;
};

static struct shared *shared;
static char socket_path[100];
static double deadline; /* CLOCK_MONOTONIC seconds */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

static uint64_t rng_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static void report_error(int client, const char *what, ruda_status st, ruda_client *c)
{
	char why[256] = "";
	if (c)
		ruda_client_last_error(c, why, sizeof(why));
	if (!atomic_flag_test_and_set(&shared->error_taken))
		snprintf(shared->first_error, sizeof(shared->first_error),
			 "client %d: %s: %s (%s)", client, what, ruda_strerror(st), why);
}

/* ---- one client ------------------------------------------------------------ */

struct buf {
	int live;
	ruda_handle h;
	uint32_t n;    /* 32-bit words */
	uint32_t *cpu; /* what it holds; floats for add are the same bits */
	int known;     /* contents are defined (empty() ones are not) */
};

static uint32_t *load_spirv(const char *name, size_t *size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/shaders/%s.spv", RUDA_BUILD_DIR, name);
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint32_t *w = malloc((size_t)len);
	if (w && fread(w, 1, (size_t)len, f) != (size_t)len) {
		free(w);
		w = NULL;
	}
	fclose(f);
	*size = (size_t)len;
	return w;
}

#define FAIL(what, st)                                                    \
	do {                                                              \
		atomic_fetch_add(&shared->unexpected, 1);                 \
		report_error(index, what, st, c);                         \
		return 3;                                                 \
	} while (0)

#define CHECK_OK(call, what)              \
	do {                              \
		ruda_status st_ = (call); \
		if (st_ != RUDA_OK)       \
			FAIL(what, st_);  \
	} while (0)

static const uint32_t sizes[] = {64, 1000, 4096, 65536, 262144};

static int client_main(int index, uint64_t seed, int may_die)
{
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 12345;
	ruda_client *c = NULL;
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = socket_path, .client_name = "soak"};
	CHECK_OK(ruda_client_connect(&o, &c), "connect");
	size_t fill_size, add_size;
	uint32_t *fill_spv = load_spirv("fill", &fill_size);
	uint32_t *add_spv = load_spirv("add_f32", &add_size);
	if (!fill_spv || !add_spv)
		FAIL("loading the kernels from " RUDA_BUILD_DIR "/shaders", RUDA_ERROR_IO);
	ruda_kernel fill, add;
	ruda_kernel_desc fd = {sizeof(ruda_kernel_desc), fill_spv, fill_size, "main", 1, 8};
	ruda_kernel_desc ad = {sizeof(ruda_kernel_desc), add_spv, add_size, "main", 3, 4};
	CHECK_OK(ruda_client_kernel_register(c, &fd, &fill), "register fill");
	CHECK_OK(ruda_client_kernel_register(c, &ad, &add), "register add_f32");
	free(fill_spv);
	free(add_spv);

	struct buf bufs[LIVE] = {0};
	uint32_t *tmp = malloc(262144 * 4);
	/* a client that will die picks the operation count it dies at */
	uint64_t die_at = may_die ? 50 + rng_next(&rng) % 20000 : UINT64_MAX;
	for (uint64_t step = 0; now_s() < deadline; step++) {
		if (step == die_at)
			raise(SIGKILL); /* with work queued and unsynced */
		int k = (int)(rng_next(&rng) % LIVE);
		struct buf *b = &bufs[k];
		enum op op = (enum op)(rng_next(&rng) % OP_COUNT);
		if (!b->live && op != OP_SYNC)
			op = rng_next(&rng) % 3 ? OP_CREATE : OP_EMPTY;
		switch (op) {
		case OP_CREATE:
		case OP_EMPTY: {
			if (b->live) {
				CHECK_OK(ruda_client_release(c, b->h), "release");
				free(b->cpu);
				b->live = 0;
			}
			b->n = sizes[rng_next(&rng) % 5];
			b->cpu = malloc((size_t)b->n * 4);
			if (op == OP_CREATE) {
				for (uint32_t i = 0; i < b->n; i++)
					b->cpu[i] = (uint32_t)rng_next(&rng) & 0x3fffffff;
				CHECK_OK(ruda_client_create(c, b->cpu, (size_t)b->n * 4, &b->h),
					 "create");
				b->known = 1;
			} else {
				CHECK_OK(ruda_client_empty(c, (size_t)b->n * 4, &b->h), "empty");
				b->known = 0;
			}
			b->live = 1;
			break;
		}
		case OP_WRITE: {
			uint32_t at = (uint32_t)(rng_next(&rng) % b->n);
			uint32_t len = 1 + (uint32_t)(rng_next(&rng) % (b->n - at));
			for (uint32_t i = 0; i < len; i++)
				tmp[i] = (uint32_t)rng_next(&rng) & 0x3fffffff;
			CHECK_OK(ruda_client_write(c, b->h, (uint64_t)at * 4, tmp, (size_t)len * 4),
				 "write");
			memcpy(b->cpu + at, tmp, (size_t)len * 4);
			if (at == 0 && len == b->n)
				b->known = 1; /* else an empty() one stays undefined */
			break;
		}
		case OP_READ: {
			if (!b->known)
				break;
			/* the whole buffer or a slice of it */
			ruda_handle h = b->h;
			uint32_t at = 0, len = b->n;
			if (rng_next(&rng) % 2) {
				at = (uint32_t)(rng_next(&rng) % b->n);
				len = 1 + (uint32_t)(rng_next(&rng) % (b->n - at));
				h.offset = (uint64_t)at * 4;
				h.size = (uint64_t)len * 4;
			}
			CHECK_OK(ruda_client_read_one(c, h, tmp), "read");
			if (memcmp(tmp, b->cpu + at, (size_t)len * 4) != 0) {
				atomic_fetch_add(&shared->wrong, 1);
				report_error(index, "read: data differs from the CPU copy",
					     RUDA_OK, NULL);
				return 4;
			}
			break;
		}
		case OP_FILL: {
			uint32_t push[2] = {(uint32_t)rng_next(&rng) & 0x3fffffff,
					    (uint32_t)(rng_next(&rng) % (b->n + 1))};
			uint32_t groups = 1 + (uint32_t)(rng_next(&rng) % 64);
			CHECK_OK(ruda_client_launch(c, fill, (ruda_count){groups, 1, 1}, &b->h, 1,
						    push, sizeof(push)),
				 "launch fill");
			for (uint32_t i = 0; i < push[1]; i++)
				b->cpu[i] = push[0];
			if (push[1] == b->n)
				b->known = 1;
			break;
		}
		case OP_ADD: {
			/* out = a + b over n floats, with two other known buffers
			 * at least as long (small exact floats: no rounding) */
			int a = -1, bb = -1;
			for (int j = 0; j < LIVE; j++) {
				if (j == k || !bufs[j].live || !bufs[j].known || bufs[j].n < b->n)
					continue;
				if (a < 0)
					a = j;
				else if (bb < 0)
					bb = j;
			}
			if (a < 0 || bb < 0)
				break;
			float *fa = (float *)bufs[a].cpu, *fb = (float *)bufs[bb].cpu;
			/* make the inputs small integers so sums are exact */
			for (int j = 0; j < 2; j++) {
				struct buf *in = &bufs[j ? bb : a];
				float *f = (float *)in->cpu;
				for (uint32_t i = 0; i < in->n; i++)
					f[i] = (float)(rng_next(&rng) % 100000);
				CHECK_OK(ruda_client_write(c, in->h, 0, in->cpu, (size_t)in->n * 4),
					 "write add input");
			}
			ruda_handle bind[3] = {bufs[a].h, bufs[bb].h, b->h};
			uint32_t n = b->n;
			uint32_t groups = 1 + (uint32_t)(rng_next(&rng) % 64);
			CHECK_OK(ruda_client_launch(c, add, (ruda_count){groups, 1, 1}, bind, 3, &n,
						    sizeof(n)),
				 "launch add_f32");
			float *out = (float *)b->cpu;
			for (uint32_t i = 0; i < n; i++)
				out[i] = fa[i] + fb[i];
			b->known = 1;
			break;
		}
		case OP_RELEASE:
			CHECK_OK(ruda_client_release(c, b->h), "release");
			free(b->cpu);
			b->live = 0;
			break;
		case OP_SYNC:
			CHECK_OK(ruda_client_sync(c), "sync");
			break;
		default:
			break;
		}
		atomic_fetch_add(&shared->ops[op], 1);
	}
	CHECK_OK(ruda_client_sync(c), "final sync");
	for (int j = 0; j < LIVE; j++)
		if (bufs[j].live) {
			if (bufs[j].known) {
				CHECK_OK(ruda_client_read_one(c, bufs[j].h, tmp), "final read");
				if (memcmp(tmp, bufs[j].cpu, (size_t)bufs[j].n * 4) != 0) {
					atomic_fetch_add(&shared->wrong, 1);
					report_error(index, "final read differs", RUDA_OK, NULL);
					return 4;
				}
			}
			free(bufs[j].cpu);
		}
	free(tmp);
	ruda_client_close(c);
	return 0;
}

/* ---- the daemon ------------------------------------------------------------ */

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

static pid_t start_daemon(const char *dir)
{
	char cache[160], log[160], rudad[512];
	snprintf(cache, sizeof(cache), "%s/cache", dir);
	snprintf(log, sizeof(log), "%s/rudad.log", dir);
	snprintf(rudad, sizeof(rudad), "%s/rudad", RUDA_BUILD_DIR);
	pid_t pid = fork();
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execl(rudad, rudad, "--socket", socket_path, "--log-level", "notice", "--cache-dir",
		      cache, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; pid > 0 && i < 600; i++) {
		int fd = try_connect(socket_path);
		if (fd >= 0) {
			close(fd);
			return pid;
		}
		if (waitpid(pid, NULL, WNOHANG) == pid)
			break;
		sleep_ms(50);
	}
	fprintf(stderr, "soak: rudad did not start; see %s\n", log);
	if (pid > 0)
		kill(pid, SIGKILL);
	exit(1);
}

static long rss_kib(pid_t pid)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	FILE *f = fopen(path, "r");
	long kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib;
}

static int count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The fd count once it holds still for a second (rudad makes spare arenas
 * when idle, and saves its pipeline cache now and then). */
static int settled_fds(pid_t pid)
{
	int n = count_fds(pid), same = 0;
	for (int i = 0; i < 150 && same < 5; i++) {
		sleep_ms(200);
		int again = count_fds(pid);
		same = again == n ? same + 1 : 0;
		n = again;
	}
	return n;
}

/* Wait until rudad has only the observer and no buffer bytes. */
static int wait_idle(void)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = socket_path, .client_name = "soak-observer"};
	ruda_client *c;
	if (ruda_client_connect(&o, &c) != RUDA_OK)
		return -1;
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	int ok = 0;
	for (int i = 0; i < 600 && !ok; i++) {
		if (ruda_client_daemon_stats(c, &s) != RUDA_OK)
			break;
		ok = s.sessions == 1 && s.device_bytes == 0 && s.device_buffers == 0;
		if (!ok)
			sleep_ms(100);
	}
	if (!ok)
		fprintf(stderr, "soak: rudad still reports %u sessions, %llu bytes in %llu buffers\n",
			s.sessions, (unsigned long long)s.device_bytes,
			(unsigned long long)s.device_buffers);
	ruda_client_close(c);
	return ok ? 0 : -1;
}

struct sample {
	double t;
	long rss;
	int fds;
};

int main(int argc, char **argv)
{
	int seconds = 60, nclients = 4;
	uint64_t seed = (uint64_t)time(NULL);
	static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
					     {"clients", required_argument, NULL, 'c'},
					     {"seed", required_argument, NULL, 'r'},
					     {NULL, 0, NULL, 0}};
	int ch;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (ch == 's')
			seconds = atoi(optarg);
		else if (ch == 'c')
			nclients = atoi(optarg);
		else if (ch == 'r')
			seed = strtoull(optarg, NULL, 0);
		else {
			fprintf(stderr, "usage: %s [--seconds N] [--clients N] [--seed N]\n", argv[0]);
			return 2;
		}
	}
	if (seconds < 1 || nclients < 1 || nclients > MAX_CLIENTS) {
		fprintf(stderr, "soak: --seconds >= 1, 1 <= --clients <= %d\n", MAX_CLIENTS);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED)
		return 1;
	memset(shared, 0, sizeof(*shared));
	char dir[] = "/tmp/ruda-soak-XXXXXX";
	if (!mkdtemp(dir))
		return 1;
	snprintf(socket_path, sizeof(socket_path), "%s/rudad.sock", dir);
	pid_t daemon = start_daemon(dir);
	printf("soak: %d clients for %d s, seed %llu, rudad pid %d (log %s/rudad.log)\n", nclients,
	       seconds, (unsigned long long)seed, daemon, dir);
	fflush(stdout);

	/* the start: one client has come and gone, so arenas and caches exist */
	int failed = wait_idle() < 0;
	int fds_start = settled_fds(daemon);
	long rss_start = rss_kib(daemon);

	static struct sample samples[MAX_SAMPLES];
	size_t nsamples = 0;
	double t0 = now_s();
	deadline = t0 + seconds;
	pid_t pids[MAX_CLIENTS] = {0};
	uint64_t started = 0, killed = 0, client_failures = 0;
	double next_sample = t0;
	for (;;) {
		double t = now_s();
		int running = 0;
		for (int i = 0; i < nclients; i++) {
			if (pids[i] > 0) {
				int status;
				pid_t r = waitpid(pids[i], &status, WNOHANG);
				if (r == pids[i]) {
					pids[i] = 0;
					if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
						killed++;
					else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
						client_failures++;
						fprintf(stderr, "soak: client %d ended with status 0x%x\n",
							i, status);
					}
				}
			}
			if (pids[i] == 0 && t < deadline - 1) {
				/* one client in two dies on its own at some point */
				uint64_t s = seed * 1000003u + started;
				int may_die = (s ^ s >> 7) % 2 == 0;
				pid_t p = fork();
				if (p == 0) {
					_exit(client_main(i, s, may_die));
				}
				if (p > 0) {
					pids[i] = p;
					started++;
				}
			}
			running += pids[i] > 0;
		}
		if (t >= next_sample && nsamples < MAX_SAMPLES) {
			samples[nsamples++] = (struct sample){t - t0, rss_kib(daemon), count_fds(daemon)};
			next_sample += 1.0;
		}
		if (waitpid(daemon, NULL, WNOHANG) == daemon) {
			fprintf(stderr, "soak: rudad died\n");
			daemon = 0;
			failed = 1;
			break;
		}
		if (t >= deadline && !running)
			break;
		if (t > deadline + 120) {
			fprintf(stderr, "soak: clients still running 120 s after the end; killing\n");
			for (int i = 0; i < nclients; i++)
				if (pids[i] > 0)
					kill(pids[i], SIGKILL);
			failed = 1;
		}
		sleep_ms(20);
	}

	int fds_end = -1;
	long rss_end = -1;
	if (daemon) {
		failed |= wait_idle() < 0;
		fds_end = settled_fds(daemon);
		rss_end = rss_kib(daemon);
	}

	uint64_t total = 0;
	printf("\noperations (verified):");
	for (int i = 0; i < OP_COUNT; i++) {
		uint64_t n = atomic_load(&shared->ops[i]);
		total += n;
		printf(" %s %llu,", op_names[i], (unsigned long long)n);
	}
	printf(" total %llu\n", (unsigned long long)total);
	printf("clients: %llu started, %llu killed themselves (SIGKILL), %llu failed\n",
	       (unsigned long long)started, (unsigned long long)killed,
	       (unsigned long long)client_failures);
	printf("wrong results: %llu, unexpected errors: %llu\n",
	       (unsigned long long)atomic_load(&shared->wrong),
	       (unsigned long long)atomic_load(&shared->unexpected));
	if (shared->first_error[0])
		printf("first error: %s\n", shared->first_error);
	long rss_max = 0;
	int fds_max = 0;
	for (size_t i = 0; i < nsamples; i++) {
		if (samples[i].rss > rss_max)
			rss_max = samples[i].rss;
		if (samples[i].fds > fds_max)
			fds_max = samples[i].fds;
	}
	printf("rudad RSS (MiB):  start %.1f, first sample %.1f, max %.1f, last sample %.1f, "
	       "end (idle) %.1f\n",
	       rss_start / 1024.0, nsamples ? samples[0].rss / 1024.0 : 0.0, rss_max / 1024.0,
	       nsamples ? samples[nsamples - 1].rss / 1024.0 : 0.0, rss_end / 1024.0);
	printf("rudad fds:        start %d, first sample %d, max %d, last sample %d, end (idle) %d\n",
	       fds_start, nsamples ? samples[0].fds : 0, fds_max,
	       nsamples ? samples[nsamples - 1].fds : 0, fds_end);
	printf("over time (every %zu s): t RSS-MiB fds\n", nsamples > 20 ? nsamples / 20 : (size_t)1);
	for (size_t i = 0; i < nsamples; i += nsamples > 20 ? nsamples / 20 : 1)
		printf("  %6.0f %8.1f %4d\n", samples[i].t, samples[i].rss / 1024.0, samples[i].fds);

	if (atomic_load(&shared->wrong) || atomic_load(&shared->unexpected) || client_failures) {
		printf("FAIL: wrong results or unexpected errors\n");
		failed = 1;
	}
	if (fds_end != fds_start) {
		printf("FAIL: rudad holds %d fds at the end, %d at the start\n", fds_end, fds_start);
		failed = 1;
	}
	if (rss_end - rss_start > RSS_GROWTH_LIMIT_KIB) {
		printf("FAIL: rudad's RSS grew by %.1f MiB (limit %d)\n",
		       (rss_end - rss_start) / 1024.0, RSS_GROWTH_LIMIT_KIB / 1024);
		failed = 1;
	}
	if (daemon) {
		int status;
		kill(daemon, SIGTERM);
		waitpid(daemon, &status, 0);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			printf("FAIL: rudad exited with status 0x%x\n", status);
			failed = 1;
		}
	}
	printf("%s\n", failed ? "soak: FAILED" : "soak: passed");
	if (!failed) {
		char cmd[128];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "soak: could not remove %s\n", dir);
	}
	return failed ? 1 : 0;
}
