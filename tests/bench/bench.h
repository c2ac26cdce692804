/*
 * `make bench`: rudad measured against plain in-process Vulkan in the same
 * run. Shared declarations of the bench program (tests/bench/main.c and the
 * files beside it; first_vk.c and first_client.c are separate programs).
 *
 * Every figure is a median of several repetitions after a warm-up; nothing
 * here ever fails on speed, only on a wrong result (every transferred byte
 * and every kernel output is checked at least once).
 */
#ifndef RUDA_BENCH_H
#define RUDA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ruda/ruda.h>

/* ---- options ------------------------------------------------------------ */

struct bench_options {
	int quick;            /* fewer repetitions, smaller sizes */
	const char *only;     /* a group name, or NULL for all */
	char build_dir[1024]; /* where rudad, shaders and helpers live */
	uint64_t max_bytes;   /* largest transfer ($RUDA_BENCH_MAX_BYTES) */
	const char *device;   /* $RUDA_BENCH_DEVICE: rudad --device and baselines */
};

extern struct bench_options bench_opt;

/* "<build>/<rel>" in a static buffer (one at a time). */
const char *bench_path(const char *rel);

/* ---- failures ----------------------------------------------------------- */

/* Print, stop any daemon the bench started, exit 1. */
void bench_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
/* On SIGINT/SIGTERM/SIGHUP, kill the daemons the bench started first. */
void bench_install_signal_handlers(void);
#define BENCH_CHECK(cond, ...)                     \
	do {                                       \
		if (!(cond))                       \
			bench_fail(__VA_ARGS__);   \
	} while (0)

/* ---- time and statistics ------------------------------------------------ */

double bench_now(void); /* seconds, CLOCK_MONOTONIC */
double bench_median(const double *v, size_t n);
double bench_mean(const double *v, size_t n);

/* ---- results ------------------------------------------------------------ */

enum bench_better { BENCH_HIGHER, BENCH_LOWER };

/* One figure beside its baseline; ratio = value / baseline. NaN value: not
 * measured (`note` says why). */
void bench_result(const char *group, const char *name, const char *unit, double value,
		  double baseline, enum bench_better better, const char *note);
/* A title line for a group's table and what its columns mean. */
void bench_group_header(const char *group, const char *title, const char *value_col,
			const char *baseline_col, const char *ratio_note);
void bench_print_group(const char *group);
/* Write every result as a JSON array; returns 0 or -errno. */
int bench_write_json(const char *path);

/* ---- a rudad of our own --------------------------------------------------- */

struct bench_daemon {
	pid_t pid;
	char dir[64];
	char socket_path[128];
	char log_path[128];
	double start_s; /* from exec to accepting connections */
};

/* Start <build>/rudad on a fresh socket with `extra` arguments (NULL
 * terminated, may be NULL) and wait until it accepts connections. */
void bench_daemon_start(struct bench_daemon *d, const char *const *extra);
/* SIGTERM and wait; fails the bench if it does not exit 0. */
void bench_daemon_stop(struct bench_daemon *d);
ruda_client *bench_connect(const struct bench_daemon *d);
/* Whether `rudad --help` mentions `option` (e.g. "--cache-dir"). */
int bench_daemon_has_option(const char *option);

/* CPU time (user + system, all threads) of this process / of `pid`, s. */
double bench_cpu_self(void);
double bench_cpu_of(pid_t pid);

/* ---- helpers ---------------------------------------------------------------- */

/* Read a whole file; NULL if unreadable. */
void *bench_read_file(const char *path, size_t *size);
/* Deterministic bytes (fast: 64-bit words) and their check. */
void bench_fill_pattern(void *dst, size_t size, uint64_t seed);
/* Index of the first differing byte, or -1. */
int64_t bench_compare(const void *a, const void *b, size_t size);
/* Bytes as "1 MiB", "64 MiB", "1 GiB", "3.5 MiB". */
const char *bench_size_name(uint64_t bytes, char *buf, size_t len);
/* Fork/exec argv (argv[0] a path) with stdout/stderr to `log`; returns the
 * seconds from fork to exit, or fails the bench if it does not exit 0.
 * `out` (optional) receives what it printed. */
double bench_run_program(char *const argv[], const char *log, char *out, size_t outlen);

/* ---- the groups ------------------------------------------------------------ */

/* Transfers and launches: through rudad (rudad.c) and in-process
 * (inproc.c), with the same plan. main.c makes the plans. */
#define BENCH_MAX_SIZES 4
struct bench_transfer_plan {
	uint64_t sizes[BENCH_MAX_SIZES];
	int reps[BENCH_MAX_SIZES];   /* timed repetitions */
	int warmup[BENCH_MAX_SIZES]; /* untimed ones before them */
	size_t nsizes;
};

/* GB/s (1e9 bytes/s), medians */
struct bench_transfer_result {
	double create_gbs[BENCH_MAX_SIZES];   /* allocate a buffer + upload, wait */
	double write_gbs[BENCH_MAX_SIZES];    /* upload into an existing buffer, wait */
	double download_gbs[BENCH_MAX_SIZES]; /* read an existing buffer back */
};

struct bench_launch_plan {
	int round_trips;  /* (a): launch + sync, one at a time */
	int launches;     /* (b): launches then one sync */
	int batches;      /* (b): repetitions */
	int graph_launches; /* (c): launches captured in one graph */
	int graph_replays;  /* (c): replays of it, then one sync */
};

struct bench_launch_result {
	double rt_median_us, rt_mean_us;
	double rt_cpu_us; /* CPU time per round trip, every process involved */
	double launches_per_s;
	double launch_cpu_us; /* CPU time per launch in (b), likewise */
	double graph_us;      /* (c): wall time per launch of the replayed graph, median */
};

/* Limits the in-process device imposes (largest buffer). */
uint64_t bench_inproc_max_buffer(void);
void bench_inproc_transfers(const struct bench_transfer_plan *plan,
			    struct bench_transfer_result *out);
void bench_inproc_launches(const struct bench_launch_plan *plan, struct bench_launch_result *out);

void bench_rudad_transfers(const struct bench_daemon *d, const struct bench_transfer_plan *plan,
			   struct bench_transfer_result *out);
void bench_rudad_launches(const struct bench_daemon *d, const struct bench_launch_plan *plan,
			  struct bench_launch_result *out);

/* First-launch latency (first.c): uses the warm daemon it is given and
 * starts and stops others of its own for (iv). */
void bench_first_launch(struct bench_daemon *warm);

/* All-reduce and to_client between the devices rudad opens (devices.c):
 * starts a daemon of its own. */
void bench_devices(void);

#endif
