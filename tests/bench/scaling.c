/*
 * Scaling and fairness: 1, 2, 4, 8 and 16 client processes, each running
 * a stream of mid-sized kernels (shaders/saxpy.comp) for the same window,
 * through rudad and, for comparison, each process opening Vulkan itself.
 *
 * Each worker launches `per_sync` kernels, syncs, and goes on until the
 * window ends; y = x + y with x = 1 and y = 0 at first, so at the end every
 * element of y is the number of kernels that ran (checked).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define MAX_PROCS 16
static const int procs[] = {1, 2, 4, 8, 16};
#define NPOINTS (sizeof(procs) / sizeof(procs[0]))

/* ---- the worker --------------------------------------------------------------- */

static void sleep_until(double t)
{
	double left;
	while ((left = t - bench_now()) > 0) {
		struct timespec ts = {.tv_sec = (time_t)left,
				      .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

/* The saxpy stream of one process; shared by the priority group's low
 * clients. argv: scaling KIND SOCKET N PER_SYNC PRIORITY */
int bench_scaling_worker(int argc, char **argv)
{
	BENCH_CHECK(argc >= 6, "scaling worker: arguments");
	struct bench_runner_options o = {
		.kind = strcmp(argv[1], "inproc") == 0 ? BENCH_RUNNER_INPROC : BENCH_RUNNER_RUDAD,
		.socket_path = argv[2],
		.name = "bench-scaling",
		.priority = (uint32_t)atoi(argv[5]),
	};
	uint32_t n = (uint32_t)strtoul(argv[3], NULL, 10);
	int per_sync = atoi(argv[4]);
	struct bench_runner *r = bench_runner_open(&o);
	int k = bench_runner_kernel(r, "shaders/saxpy.spv", 2, 8);
	float *host = malloc((size_t)n * sizeof(float));
	BENCH_CHECK(host, "out of memory");
	for (uint32_t i = 0; i < n; i++)
		host[i] = 1.0f;
	int bufs[2];
	bufs[0] = bench_runner_buffer(r, (uint64_t)n * 4, host);
	memset(host, 0, (size_t)n * sizeof(float));
	bufs[1] = bench_runner_buffer(r, (uint64_t)n * 4, host);
	struct { float alpha; uint32_t n; } push = {1.0f, n};
	uint32_t groups = (n + 255) / 256 < 65535 ? (n + 255) / 256 : 65535;
	uint64_t launched = 0;
	for (int i = 0; i < per_sync; i++, launched++)
		bench_runner_launch(r, k, groups, bufs, &push, sizeof(push));
	bench_runner_sync(r);

	bench_worker_say("ready");
	char line[128];
	bench_worker_hear(line, sizeof(line));
	double t0, window;
	BENCH_CHECK(sscanf(line, "go %lf %lf", &t0, &window) == 2, "worker: bad go line");
	sleep_until(t0);
	/* the kernels done by the window's end, interpolated between the
	 * syncs around it: what queued work finishes after it is not counted */
	uint64_t counted = 0;
	double prev = t0, end;
	do {
		prev = bench_now();
		for (int i = 0; i < per_sync; i++)
			bench_runner_launch(r, k, groups, bufs, &push, sizeof(push));
		bench_runner_sync(r);
		counted += (uint64_t)per_sync;
	} while ((end = bench_now()) < t0 + window);
	double done = (double)(counted - (uint64_t)per_sync) +
		      per_sync * (t0 + window - prev) / (end - prev);
	launched += counted;
	bench_runner_read(r, bufs[1], host);
	for (uint32_t i = 0; i < n; i++)
		BENCH_CHECK(host[i] == (float)launched, "scaling worker: y[%u] = %g, expected %llu",
			    i, host[i], (unsigned long long)launched);
	bench_worker_say("done %.3f %.9f", done, end);
	free(host);
	bench_runner_close(r);
	return 0;
}

/* ---- the group ---------------------------------------------------------------- */

struct scaling_point {
	double aggregate;       /* kernels/s of all clients together */
	double min_share, max_share; /* per-client rate / fair share */
};

/* Start `n` workers, run them over one window, collect. */
static void run_point(const char *kind, const char *socket, int n, uint32_t elems, int per_sync,
		      double window, struct scaling_point *out)
{
	struct bench_child kids[MAX_PROCS];
	char log[1200], elems_s[16], sync_s[16];
	snprintf(log, sizeof(log), "%s", bench_path("bench/scaling-worker.log"));
	unlink(log);
	snprintf(elems_s, sizeof(elems_s), "%u", elems);
	snprintf(sync_s, sizeof(sync_s), "%d", per_sync);
	char *argv[] = {"scaling", (char *)kind, (char *)(socket ? socket : "-"), elems_s, sync_s,
			"0", NULL};
	for (int i = 0; i < n; i++)
		bench_child_start(&kids[i], argv, log);
	char line[256];
	for (int i = 0; i < n; i++) {
		bench_child_read_line(&kids[i], line, sizeof(line));
		BENCH_CHECK(strcmp(line, "ready") == 0, "scaling worker said %s", line);
	}
	double t0 = bench_now() + 0.05;
	snprintf(line, sizeof(line), "go %.9f %.6f\n", t0, window);
	for (int i = 0; i < n; i++)
		bench_child_write(&kids[i], line);
	double rate[MAX_PROCS], sum = 0;
	for (int i = 0; i < n; i++) {
		double count, end;
		bench_child_read_line(&kids[i], line, sizeof(line));
		BENCH_CHECK(sscanf(line, "done %lf %lf", &count, &end) == 2,
			    "scaling worker said %s", line);
		rate[i] = count / window;
		sum += rate[i];
	}
	for (int i = 0; i < n; i++)
		bench_child_wait(&kids[i], log);
	unlink(log);
	out->aggregate = sum;
	out->min_share = INFINITY;
	out->max_share = 0;
	for (int i = 0; i < n; i++) {
		double share = rate[i] / sum * n;
		out->min_share = fmin(out->min_share, share);
		out->max_share = fmax(out->max_share, share);
	}
}

void bench_scaling(const struct bench_daemon *d, const ruda_device_properties *props)
{
	/* mid-sized: ~0.1-1 ms a kernel; 12 bytes of traffic an element */
	uint32_t elems = props->type == RUDA_DEVICE_CPU ? 1u << 16 : 1u << 26;
	const char *env = getenv("RUDA_BENCH_SCALING_ELEMS");
	if (env && *env)
		elems = (uint32_t)strtoul(env, NULL, 0);
	int per_sync = 16;
	double window = bench_opt.quick ? 1.0 : 4.0;
	printf("\nscaling: saxpy over %u floats, %d kernels per sync, %.0f s a point\n", elems,
	       per_sync, window);
	struct scaling_point ru[NPOINTS], in[NPOINTS];
	for (size_t i = 0; i < NPOINTS; i++) {
		printf("scaling: %d process%s through rudad, then in-process...\n", procs[i],
		       procs[i] > 1 ? "es" : "");
		run_point("rudad", d->socket_path, procs[i], elems, per_sync, window, &ru[i]);
		run_point("inproc", NULL, procs[i], elems, per_sync, window, &in[i]);
	}
	char name[96], note[96];
	for (size_t i = 0; i < NPOINTS; i++) {
		snprintf(name, sizeof(name), "rudad, %2d procs: aggregate", procs[i]);
		bench_result("scaling", name, "kernels/s", ru[i].aggregate, ru[0].aggregate,
			     BENCH_HIGHER, "x one process alone through rudad");
		if (i > 0)
			bench_target(0.95);
		snprintf(name, sizeof(name), "rudad, %2d procs: min share", procs[i]);
		snprintf(note, sizeof(note), "max share %.3f (of a fair share)", ru[i].max_share);
		bench_result("scaling", name, "x fair", ru[i].min_share, 1.0, BENCH_HIGHER, note);
		if (i > 0)
			bench_target(0.8);
	}
	for (size_t i = 0; i < NPOINTS; i++) {
		snprintf(name, sizeof(name), "in-process, %2d procs: aggregate", procs[i]);
		snprintf(note, sizeof(note), "x one in-process alone; min/max share %.2f/%.2f",
			 in[i].min_share, in[i].max_share);
		bench_result("scaling", name, "kernels/s", in[i].aggregate, in[0].aggregate,
			     BENCH_HIGHER, note);
	}
	for (size_t i = 0; i < NPOINTS; i++) {
		snprintf(name, sizeof(name), "rudad vs in-process, %2d procs", procs[i]);
		bench_result("scaling", name, "kernels/s", ru[i].aggregate, in[i].aggregate,
			     BENCH_HIGHER, "x the same processes each opening Vulkan");
	}
	bench_print_group("scaling");

	struct bench_svg_plot plot = {
		.title = "Aggregate throughput of N client processes",
		.xlabel = "client processes",
		.ylabel = "kernels/s (all clients)",
		.log2_x = 1,
		.nseries = 2,
		.series = {{.label = "through rudad", .n = NPOINTS},
			   {.label = "each process opening Vulkan", .n = NPOINTS}},
	};
	struct bench_svg_plot share = {
		.title = "Fairness through rudad: per-client share of the device",
		.xlabel = "client processes",
		.ylabel = "share / fair share",
		.log2_x = 1,
		.nseries = 2,
		.series = {{.label = "min share", .n = NPOINTS}, {.label = "max share", .n = NPOINTS}},
	};
	for (size_t i = 0; i < NPOINTS; i++) {
		plot.series[0].x[i] = plot.series[1].x[i] = procs[i];
		plot.series[0].y[i] = ru[i].aggregate;
		plot.series[1].y[i] = in[i].aggregate;
		share.series[0].x[i] = share.series[1].x[i] = procs[i];
		share.series[0].y[i] = ru[i].min_share;
		share.series[1].y[i] = ru[i].max_share;
	}
	bench_svg_write(&plot, "scaling");
	bench_svg_write(&share, "fairness");
}
