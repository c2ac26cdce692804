/*
 * `make bench`: rudad against plain in-process Vulkan, measured in the same
 * run. See tests/bench/README.md.
 *
 *   bench [--quick] [--only GROUP[,GROUP]] [--build-dir DIR] [--json PATH]
 *
 * GROUP: transfers, launch, first_launch, kernels, scaling, priority,
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

static void transfers(const struct bench_daemon *d, const ruda_device_properties *props);
static void launches(const struct bench_daemon *d);

static void run_transfers(struct bench_daemon *warm, const ruda_device_properties *props)
{
	transfers(warm, props);
}

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
	{"transfers", run_transfers,
	 "transfers: libruda calls against vkCmdCopyBuffer from/to imported host memory "
	 "in-process",
	 "rudad", "in-process",
	 "create = allocate a device buffer + upload, then sync (in-process: allocate + copy + "
	 "wait)\n"
	 "write = upload into an existing buffer, then sync; read_one = download an existing "
	 "buffer\n"
	 "GB/s = 1e9 bytes/s, medians; ratio = rudad / in-process, higher is better"},
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
	 "rudad, against the same bytes through the client",
	 "rudad", "via client",
	 "via client = read each source to the client, reduce there, write each destination, "
	 "sync (to_client: read + create + sync)\n"
	 "GB/s = buffer bytes / time, medians; every result checked against a CPU reference; "
	 "ratio = rudad / via client, higher is better"},
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

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}


/* Each field's median over `n` rounds, size by size. */
static struct bench_transfer_result median_transfer_result(const struct bench_transfer_result *r,
							   int n, size_t nsizes)
{
	struct bench_transfer_result out = {0};
	double v[8];
#define MEDIAN_OF(field)                                                                   \
	do {                                                                               \
		for (size_t s = 0; s < nsizes; s++) {                                      \
			for (int i = 0; i < n; i++)                                        \
				v[i] = r[i].field[s];                                      \
			out.field[s] = bench_median(v, (size_t)n);                         \
		}                                                                          \
	} while (0)
	MEDIAN_OF(create_gbs);
	MEDIAN_OF(write_gbs);
	MEDIAN_OF(download_gbs);
	MEDIAN_OF(staging_create_gbs);
	MEDIAN_OF(staging_write_gbs);
	MEDIAN_OF(staging_download_gbs);
	MEDIAN_OF(alloc_ms);
	MEDIAN_OF(fresh_copy_gbs);
#undef MEDIAN_OF
	return out;
}

static void transfers(const struct bench_daemon *d, const ruda_device_properties *props)
{
	/* the largest size fits the option, the device and the host */
	uint64_t cap = bench_opt.max_bytes;
	const char *why = "RUDA_BENCH_MAX_BYTES or its default";
	uint64_t limit[5] = {bench_opt.quick ? 64 * MiB : UINT64_MAX, props->max_buffer_size,
			     bench_inproc_max_buffer(),
			     props->device_local_bytes ? props->device_local_bytes / 2 : UINT64_MAX,
			     UINT64_MAX};
	static const char *limit_why[5] = {
		"--quick", "the device's largest buffer", "the in-process device's largest buffer",
		"half the device's local memory", "an eighth of the host's memory"};
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0)
		limit[4] = (uint64_t)pages * (uint64_t)page / 8; /* ~5 copies live at once */
	for (int i = 0; i < 5; i++)
		if (limit[i] < cap) {
			cap = limit[i];
			why = limit_why[i];
		}
	cap &= ~(uint64_t)4095;
	BENCH_CHECK(cap >= 4096, "no room for transfers (cap %llu bytes)", (unsigned long long)cap);
	char capname[32];
	printf("\ntransfers: up to %s (%s)\n", bench_size_name(cap, capname, sizeof(capname)),
	       why);

	static const uint64_t want_sizes[] = {1 * MiB, 64 * MiB, 1 * GiB};
	struct bench_transfer_plan plan = {0};
	for (size_t i = 0; i < sizeof(want_sizes) / sizeof(want_sizes[0]); i++) {
		uint64_t s = min_u64(want_sizes[i], cap);
		if (plan.nsizes && plan.sizes[plan.nsizes - 1] >= s)
			continue;
		plan.sizes[plan.nsizes] = s;
		plan.reps[plan.nsizes] = s <= 4 * MiB     ? (bench_opt.quick ? 5 : 20)
					 : s <= 128 * MiB ? (bench_opt.quick ? 3 : 8)
							  : (bench_opt.quick ? 2 : 4);
		/* enough untimed traffic to pass through the whole arena (64 MiB
		 * by default) once: its pages are touched the first time round */
		uint64_t warm = (128 * MiB + s - 1) / s;
		plan.warmup[plan.nsizes] = warm < 1 ? 1 : warm > 256 ? 256 : (int)warm;
		plan.nsizes++;
	}
	/* the two sides take turns and each figure is the median over the
	 * rounds, as for launches and kernels: on lavapipe one side's run
	 * could come out 10-20 % off the other's from the machine's drift */
	enum { MAX_ROUNDS = 3 };
	int rounds = bench_opt.quick ? 1 : MAX_ROUNDS;
	static struct bench_transfer_result base_r[MAX_ROUNDS], rudad_r[MAX_ROUNDS];
	for (int r = 0; r < rounds; r++) {
		printf("transfers (round %d of %d): in-process...\n", r + 1, rounds);
		fflush(stdout);
		bench_inproc_transfers(&plan, &base_r[r]);
		printf("transfers (round %d of %d): rudad...\n", r + 1, rounds);
		fflush(stdout);
		bench_rudad_transfers(d, &plan, &rudad_r[r]);
		for (size_t i = 0; i < plan.nsizes; i++) {
			char size[32];
			printf("transfers (round %d): %s staging create/write/read %.3f/%.3f/%.3f x "
			       "in-process\n",
			       r + 1, bench_size_name(plan.sizes[i], size, sizeof(size)),
			       rudad_r[r].staging_create_gbs[i] / base_r[r].create_gbs[i],
			       rudad_r[r].staging_write_gbs[i] / base_r[r].write_gbs[i],
			       rudad_r[r].staging_download_gbs[i] / base_r[r].download_gbs[i]);
		}
	}
	struct bench_transfer_result base = median_transfer_result(base_r, rounds, plan.nsizes);
	struct bench_transfer_result rudad = median_transfer_result(rudad_r, rounds, plan.nsizes);
	static const char *ops[] = {"create + sync", "write + sync", "read_one"};
	for (int op = 0; op < 3; op++)
		for (size_t i = 0; i < plan.nsizes; i++) {
			char size[32], name[64];
			bench_size_name(plan.sizes[i], size, sizeof(size));
			snprintf(name, sizeof(name), "%s %s", ops[op], size);
			const double *v = op == 0 ? rudad.create_gbs
					  : op == 1 ? rudad.write_gbs
						    : rudad.download_gbs;
			const double *b = op == 0 ? base.create_gbs
					  : op == 1 ? base.write_gbs
						    : base.download_gbs;
			bench_result("transfers", name, "GB/s", v[i], b[i], BENCH_HIGHER, NULL);
		}
	/* the zero-copy path, against the same baselines */
	static const char *staging_ops[] = {"staging create + sync", "staging write + sync",
					    "read_to_staging"};
	for (int op = 0; op < 3; op++)
		for (size_t i = 0; i < plan.nsizes; i++) {
			char size[32], name[64];
			bench_size_name(plan.sizes[i], size, sizeof(size));
			snprintf(name, sizeof(name), "%s %s", staging_ops[op], size);
			const double *v = op == 0 ? rudad.staging_create_gbs
					  : op == 1 ? rudad.staging_write_gbs
						    : rudad.staging_download_gbs;
			const double *b = op == 0 ? base.create_gbs
					  : op == 1 ? base.write_gbs
						    : base.download_gbs;
			bench_result("transfers", name, "GB/s", v[i], b[i], BENCH_HIGHER, NULL);
		}
	/* where staging create's time goes: the allocation, then the copy */
	for (size_t i = 0; i < plan.nsizes; i++) {
		char size[32], name[80];
		bench_size_name(plan.sizes[i], size, sizeof(size));
		snprintf(name, sizeof(name), "staging create: alloc %s", size);
		bench_result("transfers", name, "ms", rudad.alloc_ms[i], base.alloc_ms[i],
			     BENCH_LOWER, NULL);
		snprintf(name, sizeof(name), "staging create: copy %s", size);
		bench_result("transfers", name, "GB/s", rudad.fresh_copy_gbs[i],
			     base.fresh_copy_gbs[i], BENCH_HIGHER, NULL);
	}
	bench_print_group("transfers");
}

/* Each field's median over `n` runs. */
static struct bench_launch_result median_launch_result(const struct bench_launch_result *r, int n)
{
	double v[8];
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
	ruda_device_properties props;
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
