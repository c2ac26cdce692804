/*
 * `make bench`: rudad against plain in-process Vulkan, measured in the same
 * run. See tests/bench/README.md.
 *
 *   bench [--quick] [--only GROUP[,GROUP]] [--build-dir DIR] [--json PATH]
 *
 * GROUP: transfers, launch, first_launch, kernels, scaling, sharing, priority,
 * connections, devices (the `groups` table below). Environment:
 *   RUDA_BENCH_MAX_BYTES  largest transfer (default 1G; K, M, G suffixes)
 *   RUDA_BENCH_DEVICE     the device (rudad --device syntax) for rudad and
 *                         for the in-process baselines
 *   RUDA_BENCH_DEVICES    the devices of the devices group (rudad --device
 *                         syntax; default: all, or device 0 twice when
 *                         there is one)
 *   RUDA_BENCH_REPS       set: the kernels group prints every repetition
 *   RUDA_BENCH_SETTLE_MS  a pause after each create's free, both sides
 */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

#ifndef RUDA_BUILD_DIR
#define RUDA_BUILD_DIR "build"
#endif

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)

static int want(const char *group)
{
	if (!bench_opt.only)
		return 1;
	size_t n = strlen(group);
	for (const char *p = bench_opt.only; (p = strstr(p, group)); p += n)
		if ((p == bench_opt.only || p[-1] == ',') && (p[n] == '\0' || p[n] == ','))
			return 1;
	return 0;
}

static uint64_t parse_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	BENCH_CHECK(end != s && v > 0, "RUDA_BENCH_MAX_BYTES: not a size: %s", s);
	switch (*end) {
	case 'k': case 'K': v *= 1024; break;
	case 'm': case 'M': v *= (double)MiB; break;
	case 'g': case 'G': v *= (double)GiB; break;
	case 't': case 'T': v *= 1024.0 * (double)GiB; break;
	case '\0': break;
	default: bench_fail("RUDA_BENCH_MAX_BYTES: not a size: %s", s);
	}
	return (uint64_t)v;
}

/* ---- the groups, in the order they run ------------------------------------ */

static void launches(const struct bench_daemon *d);


static void run_launch(struct bench_daemon *warm, const ruda_device_properties *props)
{
	(void)props;
	launches(warm);
}

static void run_first_launch(struct bench_daemon *warm, const ruda_device_properties *props)
{
	(void)props;
	printf("\nfirst launch...\n");
	bench_first_launch(warm);
}

static void run_kernels(struct bench_daemon *warm, const ruda_device_properties *props)
{
	bench_kernel_speed(warm, props);
}

static void run_scaling(struct bench_daemon *warm, const ruda_device_properties *props)
{
	bench_scaling(warm, props);
}

static void run_sharing(struct bench_daemon *warm, const ruda_device_properties *props)
{
	bench_sharing(warm, props);
}

static void run_priority(struct bench_daemon *warm, const ruda_device_properties *props)
{
	(void)warm;
	bench_priority(props);
}

static void run_connections(struct bench_daemon *warm, const ruda_device_properties *props)
{
	(void)warm;
	(void)props;
	bench_connections();
}

static void run_devices(struct bench_daemon *warm, const ruda_device_properties *props)
{
	(void)warm; /* it starts a rudad of its own, on every device */
	(void)props;
	bench_devices();
}

/* A group: its name for --only, what runs it (with the warm daemon) and
 * its table's header. Add a line for a new group. */
static const struct bench_group {
	const char *name;
	void (*run)(struct bench_daemon *warm, const ruda_device_properties *props);
	const char *title, *value_col, *baseline_col, *ratio_note;
} groups[] = {
	{"transfers", bench_transfers,
	 "transfers: libruda calls against vkCmdCopyBuffer from/to imported host memory "
	 "in-process",
	 "rudad", "in-process",
	 "create = allocate a device buffer + upload, then sync (in-process: allocate + copy + "
	 "wait)\n"
	 "write = upload into an existing buffer, then sync; read_one = download an existing "
	 "buffer\n"
	 "the two sides take turns, rep by rep; 9 rounds (1 GiB: 3), each on new pages and "
	 "buffers\n"
	 "GB/s = 1e9 bytes/s, medians of every rep; ratio = the median of each rep's rudad / "
	 "in-process, higher is better (ms: lower)"},
	{"launch", run_launch,
	 "launches of shaders/fill.comp over 256 words, against the same dispatches recorded and "
	 "submitted in-process",
	 "rudad", "in-process",
	 "ratio = rudad / in-process: for us lower is better; for launches/s higher is better (x "
	 "in-process launches/s)"},
	{"first_launch", run_first_launch,
	 "first-launch latency: fork to exit of a new process that reads a kernel's correct "
	 "result",
	 "this", "(i) in-proc", "ratio = this / (i) plain Vulkan in a new process; lower is better"},
	{"kernels", run_kernels,
	 "kernel speed: built-in kernels over large buffers through rudad against the same "
	 "kernel launched in-process",
	 "rudad", "baseline",
	 "GB/s of device traffic, medians; ratio = rudad / in-process (last row: / the device "
	 "limit)"},
	{"scaling", run_scaling,
	 "scaling and fairness: N client processes each running a stream of saxpy kernels "
	 "(16 a sync) over the same window",
	 "value", "baseline",
	 "aggregate = all clients' kernels / the window; share = a client's rate / (total / N), "
	 "min over clients\n"
	 "in-process: each process opens Vulkan itself (no daemon)"},
	{"sharing", run_sharing,
	 "sharing: P client processes of one-workgroup kernels (K launches, then a sync), "
	 "started at one instant",
	 "value", "baseline",
	 "aggregate kernels/s of all clients; short ~25 us and long ~1 ms kernels, calibrated "
	 "in-process\n"
	 "baselines: one client alone; P processes each opening Vulkan; one client over 16 "
	 "streams"},
	{"priority", run_priority,
	 "priorities: a latency-sensitive client's launch + sync round trip while 8 other "
	 "processes saturate the device",
	 "value", "idle",
	 "with priorities: the latency client at 7 (highest), the others at 1; without: all at "
	 "the default\n"
	 "ratio = value / the idle device's median, lower is better"},
	{"connections", run_connections,
	 "connection scale: idle clients connected to one rudad at once", "value", "baseline",
	 "memory: the daemon's resident growth per client outside the arenas' mappings\n"
	 "connect: ruda_client_connect with the others connected, against connects with none\n"
	 "pinned: imported arenas (AdminStatus) per idle client, against one arena\n"
	 "first transfer: a client's first 4 KiB upload + sync (imports its arena), against its "
	 "next"},
	{"devices", run_devices,
	 "between devices: all-reduce (f32, every device) and to_client (device 0 to 1) inside "
	 "rudad, against the same bytes through the client (and to_client against the device's "
	 "own copy)",
	 "rudad", "baseline",
	 "baseline: via client = read each source to the client, reduce there, write each "
	 "destination, sync (to_client: read + create + sync)\n"
	 "          device copy = to_client from device 0's client to itself (one device "
	 "copy on device 0: rudad's copy kernel on a GPU), in turns with to_client rep by rep\n"
	 "GB/s = buffer bytes / time, medians; every result checked against a CPU reference; "
	 "ratio = rudad / baseline (device copy: the median of each rep's), higher is better"},
};
#define NGROUPS (sizeof(groups) / sizeof(groups[0]))

static void usage(FILE *f)
{
	fprintf(f, "usage: bench [--quick] [--only GROUP[,GROUP...]] [--build-dir DIR] "
		   "[--json PATH]\n       groups:");
	for (size_t i = 0; i < NGROUPS; i++)
		fprintf(f, " %s", groups[i].name);
	fprintf(f, "\n");
}

static void find_build_dir(void)
{
	/* <build>/bench/bench: the build is two levels up, wherever it was
	 * carried to; else the one it was built in */
	char exe[1024];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		char *dir = dirname(dirname(exe));
		char probe[1100];
		snprintf(probe, sizeof(probe), "%s/rudad", dir);
		if (access(probe, X_OK) == 0) {
			snprintf(bench_opt.build_dir, sizeof(bench_opt.build_dir), "%s", dir);
			return;
		}
	}
	snprintf(bench_opt.build_dir, sizeof(bench_opt.build_dir), "%s", RUDA_BUILD_DIR);
}

static const char *type_name(ruda_device_type t)
{
	switch (t) {
	case RUDA_DEVICE_DISCRETE_GPU: return "discrete GPU";
	case RUDA_DEVICE_INTEGRATED_GPU: return "integrated GPU";
	case RUDA_DEVICE_VIRTUAL_GPU: return "virtual GPU";
	case RUDA_DEVICE_CPU: return "CPU";
	default: return "other";
	}
}

/* Each field's median over `n` runs. */
static struct bench_launch_result median_launch_result(const struct bench_launch_result *r, int n)
{
	double v[8] = {0};
#define MEDIAN_OF(field)                                                                   \
	do {                                                                               \
		for (int i = 0; i < n; i++)                                                \
			v[i] = r[i].field;                                                 \
		out.field = bench_median(v, (size_t)n);                                    \
	} while (0)
	struct bench_launch_result out;
	MEDIAN_OF(rt_median_us);
	MEDIAN_OF(rt_mean_us);
	MEDIAN_OF(rt_cpu_us);
	MEDIAN_OF(launches_per_s);
	MEDIAN_OF(launch_cpu_us);
	MEDIAN_OF(graph_us);
#undef MEDIAN_OF
	return out;
}

static void launches(const struct bench_daemon *d)
{
	struct bench_launch_plan plan = {
		.round_trips = bench_opt.quick ? 200 : 2000,
		.launches = bench_opt.quick ? 10000 : 100000,
		.batches = bench_opt.quick ? 1 : 3,
		.graph_launches = 100,
		.graph_replays = bench_opt.quick ? 100 : 1000,
	};
	/* the two sides take turns, and each figure is the median over the
	 * rounds: a GPU's clocks and power state drift between one side's
	 * run and the other's by more than the difference being measured */
	enum { MAX_ROUNDS = 3 };
	int rounds = bench_opt.quick ? 1 : MAX_ROUNDS;
	struct bench_launch_result base_r[MAX_ROUNDS], rudad_r[MAX_ROUNDS];
	for (int i = 0; i < rounds; i++) {
		printf("\nlaunch (round %d of %d): in-process...\n", i + 1, rounds);
		fflush(stdout);
		bench_inproc_launches(&plan, &base_r[i]);
		printf("launch (round %d of %d): rudad...\n", i + 1, rounds);
		fflush(stdout);
		bench_rudad_launches(d, &plan, &rudad_r[i]);
		printf("launch (round %d): (a) median %.2f us through rudad, %.2f us in-process\n",
		       i + 1, rudad_r[i].rt_median_us, base_r[i].rt_median_us);
	}
	struct bench_launch_result base = median_launch_result(base_r, rounds);
	struct bench_launch_result rudad = median_launch_result(rudad_r, rounds);
	bench_result("launch", "(a) launch + sync round trip, median", "us", rudad.rt_median_us,
		     base.rt_median_us, BENCH_LOWER, NULL);
	bench_result("launch", "(a) launch + sync round trip, mean", "us", rudad.rt_mean_us,
		     base.rt_mean_us, BENCH_LOWER, NULL);
	bench_result("launch", "(a) CPU time per round trip", "us", rudad.rt_cpu_us,
		     base.rt_cpu_us, BENCH_LOWER, "client + rudad vs the one process");
	char name[96];
	snprintf(name, sizeof(name), "(b) %d launches, then sync", plan.launches);
	bench_result("launch", name, "launches/s", rudad.launches_per_s, base.launches_per_s,
		     BENCH_HIGHER, "x in-process launches/s");
	snprintf(name, sizeof(name), "(b) %d launches, then sync: per launch", plan.launches);
	bench_result("launch", name, "us", 1e6 / rudad.launches_per_s, 1e6 / base.launches_per_s,
		     BENCH_LOWER, NULL);
	bench_result("launch", "(b) CPU time per launch", "us", rudad.launch_cpu_us,
		     base.launch_cpu_us, BENCH_LOWER, "client + rudad vs the one process");
	snprintf(name, sizeof(name), "(c) graph %d launches x %d: per launch",
		 plan.graph_launches, plan.graph_replays);
	bench_result("launch", name, "us", rudad.graph_us, base.graph_us, BENCH_LOWER,
		     "in-process: one command buffer resubmitted");
	snprintf(name, sizeof(name), "(c) graph %d launches x %d replays", plan.graph_launches,
		 plan.graph_replays);
	bench_result("launch", name, "launches/s", 1e6 / rudad.graph_us, 1e6 / base.graph_us,
		     BENCH_HIGHER, "x in-process launches/s");
	bench_print_group("launch");
}

int main(int argc, char **argv)
{
	const char *json = NULL;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0)
			bench_opt.quick = 1;
		else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
			bench_opt.only = argv[++i];
		else if (strcmp(argv[i], "--build-dir") == 0 && i + 1 < argc)
			snprintf(bench_opt.build_dir, sizeof(bench_opt.build_dir), "%s", argv[++i]);
		else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
			json = argv[++i];
		else if (strcmp(argv[i], "--worker") == 0 && i + 1 < argc) {
			/* a child process of a group (worker.c) */
			if (!bench_opt.build_dir[0])
				find_build_dir();
			return bench_worker_main(argc - i - 1, argv + i + 1);
		}
		else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!bench_opt.build_dir[0])
		find_build_dir();
	const char *max = getenv("RUDA_BENCH_MAX_BYTES");
	bench_opt.max_bytes = max && *max ? parse_bytes(max) : GiB;
	const char *dev = getenv("RUDA_BENCH_DEVICE");
	bench_opt.device = dev && *dev ? dev : NULL;
	bench_install_signal_handlers();
	setvbuf(stdout, NULL, _IOLBF, 0);

	/* the plots go beside the JSON */
	char json_path[1100];
	if (json) {
		snprintf(json_path, sizeof(json_path), "%s", json);
		const char *slash = strrchr(json, '/');
		snprintf(bench_opt.out_dir, sizeof(bench_opt.out_dir), "%.*s",
			 slash ? (int)(slash == json ? 1 : slash - json) : 1, slash ? json : ".");
	} else {
		snprintf(bench_opt.out_dir, sizeof(bench_opt.out_dir), "%s", bench_path("bench"));
		mkdir(bench_opt.out_dir, 0755);
		snprintf(json_path, sizeof(json_path), "%s/results.json", bench_opt.out_dir);
	}

	for (size_t i = 0; i < NGROUPS; i++)
		bench_group_header(groups[i].name, groups[i].title, groups[i].value_col,
				   groups[i].baseline_col, groups[i].ratio_note);

	struct bench_daemon warm;
	bench_daemon_start(&warm, NULL);
	ruda_client *c = bench_connect(&warm);
	ruda_device_properties props = RUDA_DEVICE_PROPERTIES_INIT;
	BENCH_CHECK(ruda_client_properties(c, &props) == RUDA_OK, "properties");
	ruda_client_close(c);
	printf("ruda bench%s: %s (%s), Vulkan %u.%u, %u CPUs; rudad up in %.0f ms\n",
	       bench_opt.quick ? " (quick)" : "", props.name, type_name(props.type),
	       props.api_version >> 22, (props.api_version >> 12) & 0x3ff,
	       (unsigned)sysconf(_SC_NPROCESSORS_ONLN), warm.start_s * 1e3);
	printf("build %s\n", bench_opt.build_dir);

	for (size_t i = 0; i < NGROUPS; i++)
		if (want(groups[i].name))
			groups[i].run(&warm, &props);
	bench_daemon_stop(&warm);

	bench_print_summary();
	int err = bench_write_json(json_path);
	BENCH_CHECK(err == 0, "cannot write %s: %s", json_path, strerror(-err));
	printf("\nresults: %s\n", json_path);
	return 0;
}
