/*
 * Sharing one device among many clients of small kernels, as inference or
 * simulation users load it: P = 1, 2, 4, 8, 16 client processes, each
 * launching K kernels of one workgroup (64 invocations spinning a set
 * number of steps: tests/shaders/spin.comp) and then syncing, all started
 * at one instant; the figure is the aggregate kernels/s.
 *
 * Two kernel lengths, calibrated on this device in-process: a short one
 * (about 25 us) and a long one (about 1 ms). Baselines measured in the same
 * run: one client alone; the same P processes each opening Vulkan
 * themselves and launching the same kernel; one client spreading the same
 * P x K launches over 16 streams. And a latency probe: one client's launch
 * + sync round trip of the short kernel at the default priority, idle and
 * while 8 clients saturate the device with short kernels. Around each
 * latency window, rudad's AdminStatus tells how busy its loop thread was
 * and what its vkQueueSubmit calls cost (printed, not a result).
 *
 * Every launch counts itself in a buffer (atomicAdd): a worker checks its
 * count and each lane's value against a CPU reference.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"

#define SPIN "tests/shaders/spin.spv"
#define LANES 64
#define MAX_PROCS 16
#define STREAMS 16
#define LOADED_CLIENTS 8
static const int procs[] = {1, 2, 4, 8, 16};
#define NPOINTS (sizeof(procs) / sizeof(procs[0]))

/* ---- the worker --------------------------------------------------------------- */

static uint32_t spin_reference(uint32_t lane, uint32_t iterations)
{
	uint32_t x = lane + 1;
	for (uint32_t i = 0; i < iterations; i++)
		x = x * 1664525u + 1013904223u;
	return x;
}

static void sleep_until(double t)
{
	double left;
	while ((left = t - bench_now()) > 0) {
		struct timespec ts = {.tv_sec = (time_t)left,
				      .tv_nsec = (long)((left - (double)(time_t)left) * 1e9)};
		nanosleep(&ts, NULL);
	}
}

struct spinner {
	struct bench_runner *r;
	int kernel, bufs[2];
	uint32_t iterations, streams;
	uint64_t launched;
};

/* `n` launches spread over the spinner's streams, then a sync of each. */
static void spin_batch(struct spinner *s, uint64_t n)
{
	for (uint64_t i = 0; i < n; i++) {
		if (s->streams > 1)
			bench_runner_set_stream(s->r, (uint32_t)(i % s->streams));
		bench_runner_launch(s->r, s->kernel, 1, s->bufs, &s->iterations, 4);
	}
	for (uint32_t k = 0; k < (s->streams > 1 ? s->streams : 1); k++) {
		if (s->streams > 1)
			bench_runner_set_stream(s->r, k);
		bench_runner_sync(s->r);
	}
	s->launched += n;
}

static void spin_open(struct spinner *s, const char *kind, const char *socket,
		      uint32_t iterations, uint32_t streams)
{
	struct bench_runner_options o = {
		.kind = strcmp(kind, "inproc") == 0 ? BENCH_RUNNER_INPROC : BENCH_RUNNER_RUDAD,
		.socket_path = socket,
		.name = "bench-sharing",
	};
	*s = (struct spinner){.iterations = iterations, .streams = streams};
	s->r = bench_runner_open(&o);
	s->kernel = bench_runner_kernel(s->r, SPIN, 2, 4);
	uint32_t zero[LANES] = {0};
	s->bufs[0] = bench_runner_buffer(s->r, sizeof(zero), zero);
	s->bufs[1] = bench_runner_buffer(s->r, 4, zero);
	/* the buffers' contents are written on stream 0: other streams are
	 * not ordered after that unless the caller orders them (a sync), or a
	 * zero written late undoes their launches' counts */
	bench_runner_sync(s->r);
}

/* Every launch ran (the count) and computed the right values. */
static void spin_check(struct spinner *s)
{
	uint32_t v[LANES], count;
	bench_runner_read(s->r, s->bufs[1], &count);
	BENCH_CHECK(count == (uint32_t)s->launched, "sharing: %u launches counted, %llu made",
		    count, (unsigned long long)s->launched);
	bench_runner_read(s->r, s->bufs[0], v);
	for (uint32_t lane = 0; lane < LANES; lane++)
		BENCH_CHECK(v[lane] == spin_reference(lane, s->iterations),
			    "sharing: lane %u holds %u, expected %u", lane, v[lane],
			    spin_reference(lane, s->iterations));
}

/*
 * argv: sharing KIND SOCKET ITERATIONS K STREAMS MODE
 * MODE count: on "go T0", K launches then a sync; says "done END".
 * MODE window: on "go T0 WINDOW", batches of K until T0 + WINDOW; says
 * "done LAUNCHES END".
 */
int bench_sharing_worker(int argc, char **argv)
{
	BENCH_CHECK(argc >= 7, "sharing worker: arguments");
	struct spinner s;
	uint32_t iterations = (uint32_t)strtoul(argv[3], NULL, 10);
	uint64_t k = strtoull(argv[4], NULL, 10);
	spin_open(&s, argv[1], argv[2], iterations, (uint32_t)atoi(argv[5]));
	int window_mode = strcmp(argv[6], "window") == 0;
	spin_batch(&s, k < 20 ? k : 20); /* warm: the pipeline made, the queue used */
	bench_worker_say("ready");
	char line[128];
	bench_worker_hear(line, sizeof(line));
	double t0, window = 0;
	BENCH_CHECK(sscanf(line, "go %lf %lf", &t0, &window) >= 1, "sharing worker: bad go line");
	sleep_until(t0);
	uint64_t before = s.launched;
	double end;
	do {
		spin_batch(&s, k);
		end = bench_now();
	} while (window_mode && end < t0 + window);
	spin_check(&s);
	if (window_mode)
		bench_worker_say("done %llu %.9f", (unsigned long long)(s.launched - before), end);
	else
		bench_worker_say("done %.9f", end);
	bench_runner_close(s.r);
	return 0;
}

/* ---- one point ---------------------------------------------------------------- */

struct workers {
	struct bench_child kids[MAX_PROCS];
	int n;
	char log[1200];
};

static void workers_start(struct workers *w, int n, const char *kind, const char *socket,
			  uint32_t iterations, uint64_t k, uint32_t streams, const char *mode)
{
	char iter_s[16], k_s[24], streams_s[8];
	snprintf(w->log, sizeof(w->log), "%s", bench_path("bench/sharing-worker.log"));
	unlink(w->log);
	snprintf(iter_s, sizeof(iter_s), "%u", iterations);
	snprintf(k_s, sizeof(k_s), "%llu", (unsigned long long)k);
	snprintf(streams_s, sizeof(streams_s), "%u", streams);
	char *argv[] = {"sharing", (char *)kind, (char *)(socket ? socket : "-"), iter_s, k_s,
			streams_s, (char *)mode, NULL};
	w->n = n;
	for (int i = 0; i < n; i++)
		bench_child_start(&w->kids[i], argv, w->log);
	char line[256];
	for (int i = 0; i < n; i++) {
		bench_child_read_line(&w->kids[i], line, sizeof(line));
		BENCH_CHECK(strcmp(line, "ready") == 0, "sharing worker said %s", line);
	}
}

static double workers_go(struct workers *w, double window)
{
	double t0 = bench_now() + 0.05;
	char line[64];
	snprintf(line, sizeof(line), "go %.9f %.6f\n", t0, window);
	for (int i = 0; i < w->n; i++)
		bench_child_write(&w->kids[i], line);
	return t0;
}

static void workers_wait(struct workers *w)
{
	for (int i = 0; i < w->n; i++)
		bench_child_wait(&w->kids[i], w->log);
	unlink(w->log);
}

/* P processes of `kind`, K launches each (over `streams` streams): the
 * aggregate kernels/s from the common start to the last one's end. */
static double run_point(const char *kind, const char *socket, int p, uint32_t iterations,
			uint64_t k, uint32_t streams)
{
	struct workers w;
	workers_start(&w, p, kind, socket, iterations, k, streams, "count");
	double t0 = workers_go(&w, 0), last = t0;
	char line[256];
	for (int i = 0; i < p; i++) {
		double end;
		bench_child_read_line(&w.kids[i], line, sizeof(line));
		BENCH_CHECK(sscanf(line, "done %lf", &end) == 1, "sharing worker said %s", line);
		last = fmax(last, end);
	}
	workers_wait(&w);
	return (double)p * (double)k / (last - t0);
}

/* The median over `rounds` of run_point. */
static double median_point(const char *kind, const char *socket, int p, uint32_t iterations,
			   uint64_t k, uint32_t streams, int rounds)
{
	double v[5];
	for (int i = 0; i < rounds; i++)
		v[i] = run_point(kind, socket, p, iterations, k, streams);
	return bench_median(v, (size_t)rounds);
}

/* ---- calibration and latency ------------------------------------------------ */

/* Seconds a launch of `it` steps takes in-process, 20 one after another. */
static double per_launch(struct spinner *s, uint32_t it)
{
	s->iterations = it;
	spin_batch(s, 5);
	double t0 = bench_now();
	spin_batch(s, 20);
	return (bench_now() - t0) / 20;
}

/* The steps whose kernel runs `target` s on the device, or `fixed` steps:
 * fixed lengths compare rudad's settings across runs, since the
 * calibration moves with the GPU's clocks. Launches one after another cost
 * the host's launch at least (20-40 us on an H100, more than the short
 * kernel): a length was once taken as soon as a launch took `target`, so
 * on some machines the "25 us kernel" was 64 steps of nothing. The device's
 * time a step is measured instead where launches are clearly longer than
 * the host's floor, and the length scaled from it. *got: the kernel's
 * device time so estimated; *launch: a launch's time in-process. */
static uint32_t calibrate(double target, uint32_t fixed, uint32_t most, double *got,
			  double *launch)
{
	struct spinner s;
	spin_open(&s, "inproc", NULL, 1, 1);
	double floor = per_launch(&s, 64), per = floor;
	uint32_t it = fixed ? fixed : 64;
	if (fixed)
		per = per_launch(&s, it);
	while (!fixed && (per < 4 * floor || per < target) && it < most)
		per = per_launch(&s, it *= 2);
	double step = per / it; /* device seconds a step, past the floor */
	uint32_t want = it;
	if (!fixed && target / step < (double)it) {
		want = (uint32_t)(target / step + 63) / 64 * 64;
		if (want < 64)
			want = 64;
	}
	*got = step * want;
	*launch = want == it ? per : per_launch(&s, want);
	spin_check(&s);
	bench_runner_close(s.r);
	return want;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* One client's launch + sync round trips for `seconds`: the median, s. */
static double latency(const char *socket, uint32_t iterations, double seconds)
{
	struct spinner s;
	spin_open(&s, "rudad", socket, iterations, 1);
	spin_batch(&s, 20);
	size_t n = 0, cap = 1 << 16;
	double *t = malloc(cap * sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	double end = bench_now() + seconds;
	while (bench_now() < end && n < cap) {
		double t0 = bench_now();
		spin_batch(&s, 1);
		t[n++] = bench_now() - t0;
	}
	spin_check(&s);
	bench_runner_close(s.r);
	qsort(t, n, sizeof(*t), cmp_double);
	double median = t[n / 2];
	free(t);
	return median;
}

/* What rudad's AdminStatus says of its loop thread and device 0's
 * vkQueueSubmit calls, and when it was asked. */
struct loop_sample {
	double t;
	uint64_t loop_busy_ns, queue_submits, submit_ns, turns_yielded;
	uint64_t lane_submissions, lane_rounds, lane_launches, lane_gpu_ns, lane_idle_ns;
	uint64_t lane_record_ns, completion_ns, turns_ns;
	uint64_t completions_between_turns, syncs_submitted_early;
	uint64_t slow_passes, longest_pass_ns;
};

static struct loop_sample loop_sample(const char *socket)
{
	Ruda__Reply *reply = bench_admin_status(socket);
	const Ruda__AdminStatusReply *st = reply->admin->status;
	struct loop_sample x = {
		.t = bench_now(),
		.loop_busy_ns = st->loop_busy_ns,
		.queue_submits = st->devices[0]->queue_submits,
		.submit_ns = st->devices[0]->submit_ns,
		.turns_yielded = st->turns_yielded,
		.lane_submissions = st->devices[0]->lane_submissions,
		.lane_rounds = st->devices[0]->lane_rounds,
		.lane_launches = st->devices[0]->lane_launches,
		.lane_gpu_ns = st->devices[0]->lane_gpu_ns,
		.lane_idle_ns = st->devices[0]->lane_idle_ns,
		.lane_record_ns = st->devices[0]->lane_record_ns,
		.completion_ns = st->devices[0]->completion_ns,
		.turns_ns = st->turns_ns,
		.completions_between_turns = st->completions_between_turns,
		.syncs_submitted_early = st->syncs_submitted_early,
		.slow_passes = st->slow_passes,
		.longest_pass_ns = st->longest_pass_ns,
	};
	ruda__reply__free_unpacked(reply, NULL);
	return x;
}

/* Whether rudad's loop thread was what limited the window between `a` and
 * `b`: its busy share, and the submits it made and their mean cost. */
static void print_loop_window(const char *which, const struct loop_sample *a,
			      const struct loop_sample *b)
{
	double wall = b->t - a->t;
	uint64_t submits = b->queue_submits - a->queue_submits;
	double busy = wall > 0 ? (double)(b->loop_busy_ns - a->loop_busy_ns) / (wall * 1e9) : 0;
	printf("  rudad during the %s latency window: loop busy %.0f%%, %.0f queue submits/s",
	       which, busy * 100, wall > 0 ? (double)submits / wall : 0);
	if (submits)
		printf(", %.1f us per submit",
		       (double)(b->submit_ns - a->submit_ns) / (double)submits / 1e3);
	printf(", %.0f turns yielded/s\n",
	       wall > 0 ? (double)(b->turns_yielded - a->turns_yielded) / wall : 0);
	if (wall > 0)
		printf("    between clients' turns: %.0f completions/s handled, %.0f syncs/s "
		       "submitted\n",
		       (double)(b->completions_between_turns - a->completions_between_turns) / wall,
		       (double)(b->syncs_submitted_early - a->syncs_submitted_early) / wall);
	/* where the loop's time per launch went: submitting, recording,
	 * completions, clients' turns (sockets read, requests decoded and
	 * handled), the rest (ticks, timers, libuv's own) */
	uint64_t launches = b->lane_launches - a->lane_launches;
	if (launches) {
		double per = 1e3 * (double)launches;
		double loop = (double)(b->loop_busy_ns - a->loop_busy_ns) / per;
		double submit = (double)(b->submit_ns - a->submit_ns) / per;
		double record = (double)(b->lane_record_ns - a->lane_record_ns) / per;
		double done = (double)(b->completion_ns - a->completion_ns) / per;
		double turns = (double)(b->turns_ns - a->turns_ns) / per;
		printf("    loop time a launch: %.2f us, of which %.2f us submitting, %.2f us "
		       "recording, %.2f us on completions, %.2f us in clients' turns, %.2f us the "
		       "rest\n",
		       loop, submit, record, done, turns, loop - submit - record - done - turns);
	}
}

/* Passes of rudad's loop of 50 ms or more between `a` and `b` (its log
 * says where their time went): a stall every client waited through. */
static void print_stalls(const char *what, const struct loop_sample *a, const struct loop_sample *b)
{
	if (b->slow_passes > a->slow_passes)
		printf("  rudad's loop during %s: %llu passes of 50 ms or more (the longest since "
		       "start %.1f ms)\n",
		       what, (unsigned long long)(b->slow_passes - a->slow_passes),
		       (double)b->longest_pass_ns / 1e6);
}

/* How the lanes filled between `a` and `b`: streams' kernels side by side
 * in a round, rounds in a submission (nothing without lanes). */
static void print_lanes(const char *what, const struct loop_sample *a, const struct loop_sample *b)
{
	uint64_t rounds = b->lane_rounds - a->lane_rounds;
	uint64_t subs = b->lane_submissions - a->lane_submissions;
	if (!rounds || !subs)
		return;
	printf("  lanes during %s: %.2f launches a round, %.2f rounds a submission", what,
	       (double)(b->lane_launches - a->lane_launches) / (double)rounds,
	       (double)rounds / (double)subs);
	/* by the device's timestamps: a submission's time on the device, and
	 * how long its queue sat idle before it (rudad late to feed it) */
	if (b->lane_gpu_ns > a->lane_gpu_ns)
		printf(", %.0f us on the device and %.0f us idle before it",
		       (double)(b->lane_gpu_ns - a->lane_gpu_ns) / (double)subs / 1e3,
		       (double)(b->lane_idle_ns - a->lane_idle_ns) / (double)subs / 1e3);
	printf("\n");
}

/* ---- the group ---------------------------------------------------------------- */

struct kernel_size {
	const char *name;
	double target_s, measured_s;
	uint32_t iterations;
	double rudad[NPOINTS], inproc[NPOINTS], streams;
};

void bench_sharing(const struct bench_daemon *d, const ruda_device_properties *props)
{
	/* llvmpipe folds the 64 steps of an iteration into one multiply-add and
	 * stops a loop after 65535 iterations (2^22 steps less 64): past 2^21
	 * the kernel is cut short there, and still under 1 ms */
	uint32_t most = props->type == RUDA_DEVICE_CPU ? 1u << 21 : 1u << 26;
	int rounds = bench_opt.quick ? 1 : 3;
	uint64_t k = bench_opt.quick ? 50 : 200;
	struct kernel_size sizes[2] = {{.name = "short", .target_s = 25e-6},
				       {.name = "long", .target_s = 1e-3}};
	/* RUDA_BENCH_SPIN_STEPS=short,long: fixed kernel lengths, in steps */
	unsigned fixed[2] = {0, 0};
	const char *steps = getenv("RUDA_BENCH_SPIN_STEPS");
	if (steps)
		BENCH_CHECK(sscanf(steps, "%u,%u", &fixed[0], &fixed[1]) == 2,
			    "RUDA_BENCH_SPIN_STEPS wants two step counts, short,long: %s", steps);
	for (int z = 0; z < 2; z++) {
		double launch;
		sizes[z].iterations = calibrate(sizes[z].target_s, fixed[z], most,
					       &sizes[z].measured_s, &launch);
		printf("\nsharing: %s kernel: %u steps, about %.1f us on the device (%.1f us a "
		       "launch in-process, one after another); %llu launches a client, %d "
		       "round%s\n",
		       sizes[z].name, sizes[z].iterations, sizes[z].measured_s * 1e6,
		       launch * 1e6, (unsigned long long)k, rounds, rounds > 1 ? "s" : "");
	}
	/* a part alone, to compare rudad's settings quickly: latency, short, long */
	const char *only = getenv("RUDA_BENCH_SHARING");
	for (int z = 0; z < 2; z++) {
		struct kernel_size *ks = &sizes[z];
		if (only && strcmp(only, ks->name) != 0)
			continue;
		for (size_t i = 0; i < NPOINTS; i++) {
			printf("sharing: %s kernel, %d process%s through rudad, then in-process...\n",
			       ks->name, procs[i], procs[i] > 1 ? "es" : "");
			struct loop_sample s0 = loop_sample(d->socket_path);
			ks->rudad[i] = median_point("rudad", d->socket_path, procs[i],
						    ks->iterations, k, 1, rounds);
			struct loop_sample s1 = loop_sample(d->socket_path);
			print_lanes("them", &s0, &s1);
			print_stalls("them", &s0, &s1);
			ks->inproc[i] = median_point("inproc", NULL, procs[i], ks->iterations, k, 1,
						     rounds);
		}
		printf("sharing: %s kernel, one client over %d streams...\n", ks->name, STREAMS);
		struct loop_sample s0 = loop_sample(d->socket_path);
		ks->streams = median_point("rudad", d->socket_path, 1, ks->iterations,
					   k * MAX_PROCS, STREAMS, rounds);
		struct loop_sample s1 = loop_sample(d->socket_path);
		print_lanes("them", &s0, &s1);
		print_stalls("them", &s0, &s1);
	}
	if (only && strcmp(only, "latency") != 0) {
		for (int z = 0; z < 2; z++)
			for (size_t i = 0; i < NPOINTS; i++)
				if (strcmp(only, sizes[z].name) == 0)
					printf("  %s kernel, %2d clients: %.0f kernels/s, in-process %.0f\n",
					       sizes[z].name, procs[i], sizes[z].rudad[i],
					       sizes[z].inproc[i]);
		for (int z = 0; z < 2; z++)
			if (strcmp(only, sizes[z].name) == 0)
				printf("  %s kernel, one client over %d streams: %.0f kernels/s\n",
				       sizes[z].name, STREAMS, sizes[z].streams);
		return;
	}
	printf("sharing: latency of one client, idle and beside %d saturating clients...\n",
	       LOADED_CLIENTS);
	double window = bench_opt.quick ? 2.0 : 4.0;
	struct loop_sample idle0 = loop_sample(d->socket_path);
	double idle = latency(d->socket_path, sizes[0].iterations, window * 0.5);
	struct loop_sample idle1 = loop_sample(d->socket_path);
	print_loop_window("idle", &idle0, &idle1);
	struct workers w;
	workers_start(&w, LOADED_CLIENTS, "rudad", d->socket_path, sizes[0].iterations, 20, 1,
		      "window");
	workers_go(&w, window);
	usleep((useconds_t)((0.05 + window * 0.1) * 1e6));
	struct loop_sample loaded0 = loop_sample(d->socket_path);
	double loaded = latency(d->socket_path, sizes[0].iterations, window * 0.7);
	struct loop_sample loaded1 = loop_sample(d->socket_path);
	print_loop_window("loaded", &loaded0, &loaded1);
	print_lanes("the loaded latency window", &loaded0, &loaded1);
	print_stalls("the loaded latency window", &loaded0, &loaded1);
	double others = 0;
	char line[256];
	for (int i = 0; i < w.n; i++) {
		unsigned long long n;
		double end;
		bench_child_read_line(&w.kids[i], line, sizeof(line));
		BENCH_CHECK(sscanf(line, "done %llu %lf", &n, &end) == 2, "sharing worker said %s",
			    line);
		others += (double)n;
	}
	workers_wait(&w);

	char name[96], note[128];
	for (int z = 0; z < 2 && !only; z++) {
		struct kernel_size *ks = &sizes[z];
		int is_short = z == 0;
		for (size_t i = 0; i < NPOINTS; i++) {
			snprintf(name, sizeof(name), "%s kernel, %2d clients of rudad", ks->name,
				 procs[i]);
			bench_result("sharing", name, "kernels/s", ks->rudad[i], ks->rudad[0],
				     BENCH_HIGHER, "x one client alone");
			if (i > 0)
				bench_target(procs[i] == 16 ? (is_short ? 4.0 : 12.0)
					     : procs[i] == 2 && is_short ? 1.8
									 : 1.0);
		}
		for (size_t i = 0; i < NPOINTS; i++) {
			snprintf(name, sizeof(name), "%s kernel, %2d clients vs in-process",
				 ks->name, procs[i]);
			snprintf(note, sizeof(note), "x %d processes each opening Vulkan (%.0f/s)",
				 procs[i], ks->inproc[i]);
			bench_result("sharing", name, "kernels/s", ks->rudad[i], ks->inproc[i],
				     BENCH_HIGHER, note);
			if (procs[i] == 16)
				bench_target(is_short ? 1.0 : 3.0);
		}
		snprintf(name, sizeof(name), "%s kernel, one client over %d streams", ks->name,
			 STREAMS);
		bench_result("sharing", name, "kernels/s", ks->streams, ks->rudad[0], BENCH_HIGHER,
			     "x one client on one stream");
	}
	snprintf(note, sizeof(note), "x idle (%.0f us); the %d others ran %.0f kernels/s",
		 idle * 1e6, LOADED_CLIENTS, others / window);
	bench_result("sharing", "latency client beside 8 busy ones, equal priority", "us",
		     loaded * 1e6, idle * 1e6, BENCH_LOWER, note);
	bench_target(3.0);
	bench_print_group("sharing");
	if (only)
		return;

	struct bench_svg_plot plot = {
		.title = "Small kernels: aggregate of P client processes",
		.xlabel = "client processes",
		.ylabel = "kernels/s (all clients)",
		.log2_x = 1,
		.nseries = 4,
		.series = {{.label = "short kernel, through rudad", .n = NPOINTS},
			   {.label = "short kernel, each process opening Vulkan", .n = NPOINTS},
			   {.label = "long kernel, through rudad", .n = NPOINTS},
			   {.label = "long kernel, each process opening Vulkan", .n = NPOINTS}},
	};
	for (size_t i = 0; i < NPOINTS; i++) {
		for (int s = 0; s < 4; s++)
			plot.series[s].x[i] = procs[i];
		plot.series[0].y[i] = sizes[0].rudad[i];
		plot.series[1].y[i] = sizes[0].inproc[i];
		plot.series[2].y[i] = sizes[1].rudad[i];
		plot.series[3].y[i] = sizes[1].inproc[i];
	}
	bench_svg_write(&plot, "sharing");
}
