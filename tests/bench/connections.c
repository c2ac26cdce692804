/*
 * Connection scale: 1000 idle clients connected to one rudad at once. The
 * daemon's memory per idle client is the growth of its resident memory
 * (/proc/PID/smaps: Rss and Pss) outside the arenas' memfd mappings, and
 * the connect latency is ruda_client_connect's, against connects to the
 * same daemon with no other client.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench.h"

struct memory {
	double rss_kib, pss_kib;         /* outside the arenas */
	double arena_rss_kib;            /* the arenas' pages */
};

/* Sum the daemon's Rss/Pss, the memfd mappings apart. */
static void daemon_memory(pid_t pid, struct memory *m)
{
	char path[64], line[512];
	snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
	FILE *f = fopen(path, "r");
	BENCH_CHECK(f, "cannot read %s: %s", path, strerror(errno));
	memset(m, 0, sizeof(*m));
	int arena = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long kib;
		/* a mapping's first line starts with its address in lower-case
		 * hex; its fields' names start with a capital */
		if ((line[0] >= '0' && line[0] <= '9') || (line[0] >= 'a' && line[0] <= 'f')) {
			arena = strstr(line, "/memfd:") != NULL;
		} else if (sscanf(line, "Rss: %llu kB", &kib) == 1) {
			if (arena)
				m->arena_rss_kib += (double)kib;
			else
				m->rss_kib += (double)kib;
		} else if (sscanf(line, "Pss: %llu kB", &kib) == 1 && !arena) {
			m->pss_kib += (double)kib;
		}
	}
	fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void raise_own_fd_limit(size_t need)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= need)
		return;
	rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
	BENCH_CHECK(rl.rlim_cur >= need, "connections: the hard limit on open files (%llu) is "
		    "below %zu", (unsigned long long)rl.rlim_max, need);
}

void bench_connections(void)
{
	size_t n = bench_opt.quick ? 250 : 1000;
	raise_own_fd_limit(n + 256);
	char max[32];
	snprintf(max, sizeof(max), "%zu", n + 16);
	const char *extra[] = {"--max-clients", max, "--log-level", "warning", NULL};
	struct bench_daemon d;
	bench_daemon_start(&d, extra);
	printf("\nconnections: %zu idle clients...\n", n);

	/* connect alone: the baseline; the first ones warm the daemon up */
	size_t alone_n = 50;
	double *alone = calloc(alone_n, sizeof(*alone)), *t = calloc(n, sizeof(*t));
	ruda_client **c = calloc(n, sizeof(*c));
	BENCH_CHECK(alone && t && c, "out of memory");
	for (size_t i = 0; i < alone_n + 10; i++) {
		double t0 = bench_now();
		ruda_client *one = bench_connect(&d);
		if (i >= 10)
			alone[i - 10] = bench_now() - t0;
		ruda_client_close(one);
	}
	struct memory before, after;
	daemon_memory(d.pid, &before);
	for (size_t i = 0; i < n; i++) {
		double t0 = bench_now();
		c[i] = bench_connect(&d);
		t[i] = bench_now() - t0;
	}
	/* each is alive: a round trip on the last and on the first */
	ruda_device_properties props;
	BENCH_CHECK(ruda_client_properties(c[0], &props) == RUDA_OK, "properties");
	ruda_memory_usage mu;
	BENCH_CHECK(ruda_client_memory_usage(c[0], &mu) == RUDA_OK &&
			    ruda_client_memory_usage(c[n - 1], &mu) == RUDA_OK,
		    "a connected client does not answer");
	daemon_memory(d.pid, &after);
	for (size_t i = 0; i < n; i++)
		ruda_client_close(c[i]);
	bench_daemon_stop(&d);

	double mean = bench_mean(t, n);
	qsort(t, n, sizeof(*t), cmp_double);
	double p99 = t[(size_t)((double)(n - 1) * 0.99)];
	double base = bench_median(alone, alone_n);
	double rss = (after.rss_kib - before.rss_kib) / (double)n;
	double pss = (after.pss_kib - before.pss_kib) / (double)n;
	double arena = (after.arena_rss_kib - before.arena_rss_kib) / (double)n;
	char name[96], note[96];
	snprintf(name, sizeof(name), "daemon RSS per idle client (%zu)", n);
	snprintf(note, sizeof(note), "x 256 KiB; the arenas' own pages: %.1f KiB a client", arena);
	bench_result("connections", name, "KiB", rss, 256, BENCH_LOWER, note);
	bench_target(1.0);
	snprintf(name, sizeof(name), "daemon PSS per idle client (%zu)", n);
	bench_result("connections", name, "KiB", pss, 256, BENCH_LOWER, "x 256 KiB");
	bench_result("connections", "connect, mean", "ms", mean * 1e3, base * 1e3, BENCH_LOWER,
		     "x the median connect with no other client");
	bench_result("connections", "connect, p99", "ms", p99 * 1e3, base * 1e3, BENCH_LOWER, NULL);
	bench_print_group("connections");
	free(alone);
	free(t);
	free(c);
}
