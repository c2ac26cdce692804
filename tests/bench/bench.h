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

#include "ruda.pb-c.h"

/* ---- options ------------------------------------------------------------ */

struct bench_options {
	int quick;            /* fewer repetitions, smaller sizes */
	const char *only;     /* a group name, or NULL for all */
	char build_dir[1024]; /* where rudad, shaders and helpers live */
	uint64_t max_bytes;   /* largest transfer ($RUDA_BENCH_MAX_BYTES) */
	const char *device;   /* $RUDA_BENCH_DEVICE: rudad --device and baselines */
	char out_dir[1024];   /* where results.json and the plots go */
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
/* Between a create's free of `freed` bytes and the next create: a pause,
 * so that a free still running (rudad frees after the device is done, and
 * the kernel takes its time over a GiB of pages) does not land in the
 * other side's timed allocation. RUDA_BENCH_SETTLE_MS sets it for every
 * size; by default it is 100 ms from 256 MiB up, none below. */
#define BENCH_SETTLE_FROM (256ull << 20)
#define BENCH_SETTLE_DEFAULT_MS 100
void bench_settle(uint64_t freed);
double bench_median(const double *v, size_t n);
double bench_mean(const double *v, size_t n);

/* ---- results ------------------------------------------------------------ */

enum bench_better { BENCH_HIGHER, BENCH_LOWER };

/* One figure beside its baseline; ratio = value / baseline. NaN value: not
 * measured (`note` says why). */
void bench_result(const char *group, const char *name, const char *unit, double value,
		  double baseline, enum bench_better better, const char *note);
/* The last result's ratio as measured in pairs (the median of each
 * repetition's value / baseline, the two timed in turns) instead of its
 * value / baseline, which are medians taken apart. */
void bench_paired_ratio(double ratio);
/* The target of the last result's ratio (>= for BENCH_HIGHER, <= for
 * BENCH_LOWER), shown beside it and in the summary. */
void bench_target(double ratio_target);
/* Every figure that has a target, in one table, met or missed. */
void bench_print_summary(void);
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
/* A raw connection to `socket_path` (a Hello, then AdminStatus, then
 * closed): the daemon's status, with at least one device. The caller frees
 * it with ruda__reply__free_unpacked; the status is reply->admin->status.
 * Fails the bench when rudad does not answer. */
Ruda__Reply *bench_admin_status(const char *socket_path);
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

/* Transfers (transfers.c): each figure through rudad (rudad.c) is timed in
 * turns with the in-process operation it is compared with (inproc.c), rep
 * by rep, so the machine's drift falls on both alike. Each side is opened
 * for one size: its host bytes, a device buffer holding them, and (rudad)
 * a client with two staging regions. A run is one timed operation; `check`
 * verifies its bytes outside the timing; `split` (may be NULL) gets a
 * create's two steps, the allocation and the copy, in seconds. */
enum bench_inproc_op { BENCH_INPROC_CREATE, BENCH_INPROC_WRITE, BENCH_INPROC_DOWNLOAD };
enum bench_rudad_op {
	BENCH_RUDAD_CREATE,          /* create + sync from the client's bytes */
	BENCH_RUDAD_WRITE,           /* write + sync into the buffer */
	BENCH_RUDAD_READ_ONE,        /* read_one of the buffer */
	BENCH_RUDAD_STAGING_CREATE,  /* create_from_staging + sync */
	BENCH_RUDAD_STAGING_SPLIT,   /* empty + sync, then write_from_staging + sync */
	BENCH_RUDAD_STAGING_WRITE,   /* write_from_staging + sync into the buffer */
	BENCH_RUDAD_READ_TO_STAGING, /* read_to_staging of the buffer */
};
struct bench_inproc_transfer;
struct bench_rudad_transfer;
struct bench_inproc_transfer *bench_inproc_transfer_open(uint64_t size, uint64_t seed);
double bench_inproc_transfer_run(struct bench_inproc_transfer *t, enum bench_inproc_op op,
				 int check, double split[2]);
void bench_inproc_transfer_close(struct bench_inproc_transfer *t);
struct bench_rudad_transfer *bench_rudad_transfer_open(const struct bench_daemon *d,
						       uint64_t size, uint64_t seed);
double bench_rudad_transfer_run(struct bench_rudad_transfer *t, enum bench_rudad_op op,
				int check, double split[2]);
void bench_rudad_transfer_close(struct bench_rudad_transfer *t);
/* Where one plain-path operation's time went (`op`: BENCH_RUDAD_WRITE or
 * BENCH_RUDAD_READ_ONE), from libruda's transfer counters and the session's
 * device time: seconds in all, in the client's copies, waiting (for arena
 * space or a read's reply) and on the device. */
struct bench_transfer_phases {
	double total, copy, wait, device;
	uint64_t chunks, progress_waits, fence_waits;
};
void bench_rudad_transfer_phases(struct bench_rudad_transfer *t, enum bench_rudad_op op,
				 struct bench_transfer_phases *out);
void bench_transfers(struct bench_daemon *d, const ruda_device_properties *props);

/* Launches: through rudad (rudad.c) and in-process (inproc.c), with the
 * same plan. main.c makes the plan. */
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
void bench_inproc_launches(const struct bench_launch_plan *plan, struct bench_launch_result *out);

void bench_rudad_launches(const struct bench_daemon *d, const struct bench_launch_plan *plan,
			  struct bench_launch_result *out);

/* First-launch latency (first.c): uses the warm daemon it is given and
 * starts and stops others of its own for (iv). */
void bench_first_launch(struct bench_daemon *warm);

/* All-reduce and to_client between the devices rudad opens (devices.c):
 * starts a daemon of its own. */
void bench_devices(void);

/* ---- a kernel runner --------------------------------------------------------- */

/* The same kernel work through libruda or with plain Vulkan in this process
 * (runner.c; the in-process side is in inproc.c), so that a workload is
 * written once and measured both ways. Fails the bench on any error. */
enum bench_runner_kind { BENCH_RUNNER_RUDAD, BENCH_RUNNER_INPROC };
struct bench_runner;
struct bench_runner_options {
	enum bench_runner_kind kind;
	const char *socket_path; /* rudad */
	const char *name;        /* client name */
	uint32_t priority;       /* requested from rudad; 0: the policy's default */
};
struct bench_runner *bench_runner_open(const struct bench_runner_options *o);
/* A kernel from <build>/`spv` with `nbindings` storage buffers; its index. */
int bench_runner_kernel(struct bench_runner *r, const char *spv, uint32_t nbindings,
			uint32_t push_size);
/* A device buffer of `size` bytes holding `init` (NULL: undefined); its index. */
int bench_runner_buffer(struct bench_runner *r, uint64_t size, const void *init);
/* Launch `groups` x 1 x 1 workgroups with buffers bufs[0..nbindings-1]. */
void bench_runner_launch(struct bench_runner *r, int kernel, uint32_t groups, const int *bufs,
			 const void *push, uint32_t push_size);
void bench_runner_sync(struct bench_runner *r);
/* rudad only: send the next requests (and syncs) to `stream`. */
void bench_runner_set_stream(struct bench_runner *r, uint32_t stream);
/* The whole buffer into `dst` (after everything launched). */
void bench_runner_read(struct bench_runner *r, int buf, void *dst);
void bench_runner_close(struct bench_runner *r);

struct bench_inproc_runner;
struct bench_inproc_runner *bench_inproc_runner_open(void);
int bench_inproc_runner_kernel(struct bench_inproc_runner *r, const char *spv,
			       uint32_t nbindings, uint32_t push_size);
int bench_inproc_runner_buffer(struct bench_inproc_runner *r, uint64_t size, const void *init);
void bench_inproc_runner_launch(struct bench_inproc_runner *r, int kernel, uint32_t groups,
				const int *bufs, const void *push, uint32_t push_size);
void bench_inproc_runner_sync(struct bench_inproc_runner *r);
void bench_inproc_runner_read(struct bench_inproc_runner *r, int buf, void *dst);
void bench_inproc_runner_close(struct bench_inproc_runner *r);

/* ---- worker processes -------------------------------------------------------- */

/* `bench --worker NAME ARGS...` runs a group's child process (the groups
 * fork and exec the bench itself, so a child starts clean: no Vulkan, no
 * connection inherited). Each group registers its worker mains here. */
struct bench_worker {
	const char *name;
	int (*main)(int argc, char **argv);
};
int bench_worker_main(int argc, char **argv); /* argv[0] = NAME */

/* A started worker: its pid, a pipe to it and one from it. */
struct bench_child {
	pid_t pid;
	int to, from;
	const char *log; /* its stdout and stderr (the caller's string) */
};
/* Start `bench --worker argv...` with its stdout/stderr to `log`. */
void bench_child_start(struct bench_child *c, char *const argv[], const char *log);
/* One line from the child (without '\n'); fails the bench on EOF, with the
 * child's exit status and the end of its log. */
void bench_child_read_line(struct bench_child *c, char *buf, size_t len);
void bench_child_write(struct bench_child *c, const char *text);
/* Wait for it; fails the bench if it does not exit 0. */
void bench_child_wait(struct bench_child *c, const char *log);
/* In the worker: a line to the parent / one from it. */
void bench_worker_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void bench_worker_hear(char *buf, size_t len);

/* ---- the groups of this file's neighbours ---------------------------------- */

/* Scaling and fairness (scaling.c), priorities (priority.c), connection
 * scale (connections.c), kernel speed (kernels.c). */
void bench_scaling(const struct bench_daemon *d, const ruda_device_properties *props);
void bench_priority(const ruda_device_properties *props);
void bench_connections(void);
void bench_kernel_speed(const struct bench_daemon *d, const ruda_device_properties *props);
int bench_scaling_worker(int argc, char **argv);
/* Sharing one device among many small-kernel clients (sharing.c). */
void bench_sharing(const struct bench_daemon *d, const ruda_device_properties *props);
int bench_sharing_worker(int argc, char **argv);

/* ---- SVG plots (svg.c) ------------------------------------------------------- */

#define BENCH_SVG_MAX_SERIES 4
#define BENCH_SVG_MAX_POINTS 16
struct bench_svg_series {
	const char *label;
	double x[BENCH_SVG_MAX_POINTS], y[BENCH_SVG_MAX_POINTS];
	int n;
};
struct bench_svg_plot {
	const char *title, *xlabel, *ylabel;
	int log2_x; /* x axis in powers of two (1, 2, 4, ...) */
	int bars;   /* a bar chart of the first point of each series */
	struct bench_svg_series series[BENCH_SVG_MAX_SERIES];
	int nseries;
};
/* Write the plot as <build>/bench/`name`.svg; 0 or -errno. */
int bench_svg_write(const struct bench_svg_plot *plot, const char *name);

#endif
