/*
 * First-launch latency: from fork to the exit of a new process that gets
 * one kernel's correct result.
 *
 *   (i)   first_vk: plain in-process Vulkan (instance, device, pipeline);
 *         the kernel is new to the driver (a fresh specialization value)
 *   (i')  first_vk again with a value it has used: the driver's own disk
 *         cache may help (shown for reference)
 *   (ii)  first_client of the warm rudad, a kernel rudad has not seen
 *   (iii) first_client of the warm rudad, a kernel it has compiled
 *   (iv)  first_client of a rudad just restarted with its pipeline cache
 *         on disk (--cache-dir), a kernel compiled before the restart
 *
 * Ratios are against (i); lower is better.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_REPS 16
#define MAX_PHASES 8

struct series {
	const char *label;
	double ms[MAX_REPS];
	int n;
	char keys[MAX_PHASES][16];
	int nkeys;
	double phase[MAX_PHASES][MAX_REPS];
};

/* Parse "phases: name ms name ms ..." from a helper's output. */
static void add_run(struct series *s, double seconds, const char *output)
{
	BENCH_CHECK(s->n < MAX_REPS, "too many repetitions");
	int r = s->n++;
	s->ms[r] = seconds * 1e3;
	const char *p = strstr(output, "phases:");
	if (!p)
		return;
	p += strlen("phases:");
	for (int k = 0; k < MAX_PHASES; k++) {
		char key[16];
		double v;
		int used;
		if (sscanf(p, " %15s %lf%n", key, &v, &used) != 2)
			break;
		p += used;
		if (r == 0) {
			snprintf(s->keys[k], sizeof(s->keys[k]), "%s", key);
			s->nkeys = k + 1;
		}
		s->phase[k][r] = v;
	}
}

static double median_ms(const struct series *s)
{
	return s->n ? bench_median(s->ms, (size_t)s->n) : NAN;
}

static void print_phases(const struct series *s)
{
	if (!s->n)
		return;
	printf("  %-44s %.1f ms =", s->label, median_ms(s));
	for (int k = 0; k < s->nkeys; k++)
		printf(" %s %.2f", s->keys[k], bench_median(s->phase[k], (size_t)s->n));
	printf(" (+ exec and exit)\n");
}

static uint32_t next_value(void)
{
	/* never seen before by this machine's caches, in all likelihood */
	static uint32_t base, n;
	if (!base)
		base = ((uint32_t)getpid() * 2654435761u) ^ (uint32_t)time(NULL) ^ 0x5a5a0000u;
	uint32_t v = base + 7919u * ++n;
	return v > 1 ? v : v + 2;
}

static double run_vk(uint32_t value, char *out, size_t outlen)
{
	char prog[2048], spirv[2048], val[16], log[64];
	snprintf(prog, sizeof(prog), "%s", bench_path("bench/first_vk"));
	snprintf(spirv, sizeof(spirv), "%s", bench_path("tests/shaders/spec_fill.spv"));
	snprintf(val, sizeof(val), "%u", value);
	snprintf(log, sizeof(log), "/tmp/ruda-bench-vk-%d.log", (int)getpid());
	char *argv[] = {prog, spirv, val, NULL};
	return bench_run_program(argv, log, out, outlen);
}

static double run_client(const struct bench_daemon *d, uint32_t value, char *out, size_t outlen)
{
	char prog[2048], spirv[2048], val[16], log[64], sock[128];
	snprintf(prog, sizeof(prog), "%s", bench_path("bench/first_client"));
	snprintf(spirv, sizeof(spirv), "%s", bench_path("tests/shaders/spec_fill.spv"));
	snprintf(val, sizeof(val), "%u", value);
	snprintf(sock, sizeof(sock), "%s", d->socket_path);
	snprintf(log, sizeof(log), "/tmp/ruda-bench-client-%d.log", (int)getpid());
	char *argv[] = {prog, sock, spirv, val, NULL};
	return bench_run_program(argv, log, out, outlen);
}

static void remove_dir(const char *dir)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "bench: could not remove %s\n", dir);
}

void bench_first_launch(struct bench_daemon *warm)
{
	int reps = bench_opt.quick ? 2 : 5;
	char out[1024];
	struct series vk_new = {.label = "(i) plain Vulkan, new process"},
		      vk_seen = {.label = "(i') plain Vulkan, kernel seen before"},
		      cl_new = {.label = "(ii) new client, warm rudad, unseen kernel"},
		      cl_seen = {.label = "(iii) new client, rudad has the kernel"},
		      cl_cache = {.label = "(iv) new client, restarted rudad, disk cache"};
	uint32_t vk_vals[MAX_REPS], cl_vals[MAX_REPS];

	/* warm-up: libraries in the page cache, the daemon's first session */
	run_vk(next_value(), NULL, 0);
	run_client(warm, next_value(), NULL, 0);

	/* interleaved so that drift in the machine's load hits all alike */
	for (int r = 0; r < reps; r++) {
		vk_vals[r] = next_value();
		add_run(&vk_new, run_vk(vk_vals[r], out, sizeof(out)), out);
		cl_vals[r] = next_value();
		add_run(&cl_new, run_client(warm, cl_vals[r], out, sizeof(out)), out);
		add_run(&vk_seen, run_vk(vk_vals[r], out, sizeof(out)), out);
		add_run(&cl_seen, run_client(warm, cl_vals[r], out, sizeof(out)), out);
	}

	const char *no_cache = NULL;
	if (bench_daemon_has_option("--cache-dir")) {
		char dir[64];
		snprintf(dir, sizeof(dir), "/tmp/ruda-bench-cache-XXXXXX");
		BENCH_CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
		const char *args[] = {"--cache-dir", dir, NULL};
		uint32_t vals[MAX_REPS];
		struct bench_daemon first, again;
		/* compile every repetition's kernel, then stop: the cache is saved */
		bench_daemon_start(&first, args);
		for (int r = 0; r < reps; r++) {
			vals[r] = next_value();
			run_client(&first, vals[r], NULL, 0);
		}
		bench_daemon_stop(&first);
		for (int r = 0; r < reps; r++) {
			bench_daemon_start(&again, args);
			add_run(&cl_cache, run_client(&again, vals[r], out, sizeof(out)), out);
			bench_daemon_stop(&again);
		}
		remove_dir(dir);
	} else {
		no_cache = "n/a (no --cache-dir)";
	}

	double base = median_ms(&vk_new);
	const struct series *rows[] = {&cl_new, &cl_seen, &cl_cache, &vk_seen};
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		const struct series *s = rows[i];
		double v = median_ms(s);
		char note[96];
		if (s == &cl_cache && no_cache)
			snprintf(note, sizeof(note), "%s", no_cache);
		else
			snprintf(note, sizeof(note), "%.1fx sooner", base / v);
		bench_result("first_launch", s->label, "ms", v, base, BENCH_LOWER, note);
	}
	bench_print_group("first_launch");

	/* the floor every new process pays, whatever it does */
	double floor_ms[MAX_REPS];
	for (int r = 0; r < reps; r++) {
		char prog[] = "/bin/true", log[64];
		snprintf(log, sizeof(log), "/tmp/ruda-bench-true-%d.log", (int)getpid());
		char *argv[] = {prog, NULL};
		floor_ms[r] = bench_run_program(argv, log, NULL, 0) * 1e3;
	}
	printf("\n  where the time goes (medians, ms; each program's own clock):\n");
	printf("  %-44s %.1f ms\n", "fork + exec + exit of /bin/true",
	       bench_median(floor_ms, (size_t)reps));
	print_phases(&vk_new);
	print_phases(&vk_seen);
	print_phases(&cl_new);
	print_phases(&cl_seen);
	print_phases(&cl_cache);
	fflush(stdout);
}
