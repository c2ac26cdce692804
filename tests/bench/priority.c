/*
 * Priorities: the launch + sync round trip of a latency-sensitive client
 * (shaders/fill.comp over 256 words) on an idle device, then while 8 other
 * client processes saturate the device with scaling.c's saxpy stream:
 * once with the latency client at the highest priority and the others at
 * the lowest (rudad holds their submissions back), once with everyone at
 * the default priority, for comparison.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define LOW_CLIENTS 8
#define FILL_WORDS 256u

struct latency {
	double median_us, p99_us;
	double low_rate; /* kernels/s of the low clients together */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Round trips of one tiny launch + sync for `seconds`. */
static void round_trips(const char *socket, uint32_t priority, double seconds,
			struct latency *out)
{
	struct bench_runner_options o = {.kind = BENCH_RUNNER_RUDAD, .socket_path = socket,
					 .name = "bench-latency", .priority = priority};
	struct bench_runner *r = bench_runner_open(&o);
	int k = bench_runner_kernel(r, "shaders/fill.spv", 1, 8);
	int buf = bench_runner_buffer(r, FILL_WORDS * 4, NULL);
	size_t cap = 1 << 16, n = 0;
	double *t = malloc(cap * sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	uint32_t value = 1;
	for (int i = 0; i < 20; i++, value++) { /* warm-up */
		uint32_t push[2] = {value, FILL_WORDS};
		bench_runner_launch(r, k, 1, &buf, push, sizeof(push));
		bench_runner_sync(r);
	}
	double end = bench_now() + seconds;
	while (bench_now() < end && n < cap) {
		uint32_t push[2] = {value++, FILL_WORDS};
		double t0 = bench_now();
		bench_runner_launch(r, k, 1, &buf, push, sizeof(push));
		bench_runner_sync(r);
		t[n++] = bench_now() - t0;
	}
	uint32_t got[FILL_WORDS];
	bench_runner_read(r, buf, got);
	for (uint32_t i = 0; i < FILL_WORDS; i++)
		BENCH_CHECK(got[i] == value - 1, "latency client: word %u is %u, expected %u", i,
			    got[i], value - 1);
	bench_runner_close(r);
	qsort(t, n, sizeof(*t), cmp_double);
	out->median_us = t[n / 2] * 1e6;
	out->p99_us = t[(size_t)((double)(n - 1) * 0.99)] * 1e6;
	free(t);
}

/* The latency client's round trips while LOW_CLIENTS workers at priority
 * `low` run saxpy over `elems` floats. */
static void loaded(const char *socket, uint32_t high, uint32_t low, uint32_t elems,
		   double window, struct latency *out)
{
	struct bench_child kids[LOW_CLIENTS];
	char log[1200], elems_s[16], prio_s[8];
	snprintf(log, sizeof(log), "%s", bench_path("bench/priority-worker.log"));
	unlink(log);
	snprintf(elems_s, sizeof(elems_s), "%u", elems);
	snprintf(prio_s, sizeof(prio_s), "%u", low);
	char *argv[] = {"scaling", "rudad", (char *)socket, elems_s, "16", prio_s, NULL};
	for (int i = 0; i < LOW_CLIENTS; i++)
		bench_child_start(&kids[i], argv, log);
	char line[256];
	for (int i = 0; i < LOW_CLIENTS; i++) {
		bench_child_read_line(&kids[i], line, sizeof(line));
		BENCH_CHECK(strcmp(line, "ready") == 0, "priority worker said %s", line);
	}
	double t0 = bench_now() + 0.05;
	snprintf(line, sizeof(line), "go %.9f %.6f\n", t0, window);
	for (int i = 0; i < LOW_CLIENTS; i++)
		bench_child_write(&kids[i], line);
	/* measure inside the window, once the device is full */
	usleep((useconds_t)((0.05 + window * 0.1) * 1e6));
	round_trips(socket, high, window * 0.7, out);
	double total = 0;
	for (int i = 0; i < LOW_CLIENTS; i++) {
		double count, end;
		bench_child_read_line(&kids[i], line, sizeof(line));
		BENCH_CHECK(sscanf(line, "done %lf %lf", &count, &end) == 2,
			    "priority worker said %s", line);
		total += count;
	}
	for (int i = 0; i < LOW_CLIENTS; i++)
		bench_child_wait(&kids[i], log);
	unlink(log);
	out->low_rate = total / window;
}

void bench_priority(const ruda_device_properties *props)
{
	uint32_t elems = props->type == RUDA_DEVICE_CPU ? 1u << 16 : 1u << 26;
	const char *env = getenv("RUDA_BENCH_SCALING_ELEMS");
	if (env && *env)
		elems = (uint32_t)strtoul(env, NULL, 0);
	double window = bench_opt.quick ? 2.0 : 4.0;
	/* this user may ask for the highest priority */
	char set[64];
	snprintf(set, sizeof(set), "high_priority_users=%u", (unsigned)getuid());
	const char *extra[] = {"--set", set, NULL};
	struct bench_daemon d;
	bench_daemon_start(&d, extra);
	printf("\npriority: idle device...\n");
	struct latency idle, prio, flat;
	round_trips(d.socket_path, RUDA_PRIORITY_HIGHEST, bench_opt.quick ? 0.5 : 1.5, &idle);
	printf("priority: %d low-priority clients saturating, latency client at the highest...\n",
	       LOW_CLIENTS);
	loaded(d.socket_path, RUDA_PRIORITY_HIGHEST, RUDA_PRIORITY_LOWEST, elems, window, &prio);
	printf("priority: the same, everyone at the default priority...\n");
	loaded(d.socket_path, 0, 0, elems, window, &flat);
	bench_daemon_stop(&d);
	/* what the anticipation buys and costs: held clients start as soon
	 * as the higher priority's work ends */
	printf("priority: with priorities, no anticipation (priority_anticipation_us=0)...\n");
	const char *eager_args[] = {"--set", set, "--set", "priority_anticipation_us=0", NULL};
	struct latency eager;
	bench_daemon_start(&d, eager_args);
	loaded(d.socket_path, RUDA_PRIORITY_HIGHEST, RUDA_PRIORITY_LOWEST, elems, window, &eager);
	bench_daemon_stop(&d);

	char note[96];
	bench_result("priority", "idle device: round trip, median", "us", idle.median_us,
		     idle.median_us, BENCH_LOWER, "the baseline of the rows below");
	bench_result("priority", "idle device: round trip, p99", "us", idle.p99_us,
		     idle.median_us, BENCH_LOWER, NULL);
	snprintf(note, sizeof(note), "x idle; the low clients ran %.0f kernels/s",
		 prio.low_rate);
	bench_result("priority", "high vs 8 low saturating: median", "us", prio.median_us,
		     idle.median_us, BENCH_LOWER, note);
	bench_target(2.0);
	bench_result("priority", "high vs 8 low saturating: p99", "us", prio.p99_us,
		     idle.median_us, BENCH_LOWER, NULL);
	snprintf(note, sizeof(note), "x idle; the low clients ran %.0f kernels/s",
		 eager.low_rate);
	bench_result("priority", "same, no anticipation: median", "us", eager.median_us,
		     idle.median_us, BENCH_LOWER, note);
	bench_result("priority", "same, no anticipation: p99", "us", eager.p99_us,
		     idle.median_us, BENCH_LOWER, NULL);
	snprintf(note, sizeof(note), "x idle; the others ran %.0f kernels/s", flat.low_rate);
	bench_result("priority", "no priorities, 8 saturating: median", "us", flat.median_us,
		     idle.median_us, BENCH_LOWER, note);
	bench_result("priority", "no priorities, 8 saturating: p99", "us", flat.p99_us,
		     idle.median_us, BENCH_LOWER, NULL);
	bench_print_group("priority");

	struct bench_svg_plot plot = {
		.title = "Launch + sync round trip of a latency-sensitive client (median)",
		.xlabel = "",
		.ylabel = "microseconds",
		.bars = 1,
		.nseries = 4,
		.series = {{.label = "idle device", .n = 1, .y = {idle.median_us}},
			   {.label = "8 saturating, with priorities", .n = 1, .y = {prio.median_us}},
			   {.label = "the same, no anticipation", .n = 1, .y = {eager.median_us}},
			   {.label = "8 saturating, no priorities", .n = 1, .y = {flat.median_us}}},
	};
	bench_svg_write(&plot, "priority");
}
