/*
 * The transfers group: uploads and downloads of 1 MiB, 64 MiB and 1 GiB
 * through rudad, each against the same bytes moved by plain in-process
 * Vulkan (inproc.c).
 *
 * The two sides take turns rep by rep, the order swapped each rep, and each
 * round opens both afresh (new host pages, new device buffers): nine rounds
 * of the sizes up to 128 MiB, three of the larger ones. A figure is
 * the median of every timed repetition of every round; its ratio the
 * median of the repetitions' ratios, each of two times taken in one turn.
 * Timing one side's whole run and then the other's put seconds between the
 * two measurements of a row; on lavapipe the machine's memory bandwidth drifts 10-20 % over
 * such spans, which came out as a ratio of 0.86 one run and 1.14 the next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define MAX_ROUNDS 9
#define MAX_SAMPLES 192 /* rounds x reps of one size */
#define MAX_SIZES 3

/* A row of the table: a rudad operation and the in-process one it is
 * measured against. `staging`: the zero-copy path, whose rows of 64 MiB and
 * more have issue #3's target (the plain path's host copy cannot meet it,
 * docs/performance.md) and whose ratios each round prints. */
struct transfer_row {
	const char *name; /* NULL: the split rows of staging create */
	enum bench_rudad_op rudad;
	enum bench_inproc_op base;
	int staging;
};

static const struct transfer_row rows[] = {
	{"create + sync", BENCH_RUDAD_CREATE, BENCH_INPROC_CREATE, 0},
	{"write + sync", BENCH_RUDAD_WRITE, BENCH_INPROC_WRITE, 0},
	{"read_one", BENCH_RUDAD_READ_ONE, BENCH_INPROC_DOWNLOAD, 0},
	/* the zero-copy path, against the same baselines */
	{"staging create + sync", BENCH_RUDAD_STAGING_CREATE, BENCH_INPROC_CREATE, 1},
	{"staging write + sync", BENCH_RUDAD_STAGING_WRITE, BENCH_INPROC_WRITE, 1},
	{"read_to_staging", BENCH_RUDAD_READ_TO_STAGING, BENCH_INPROC_DOWNLOAD, 1},
	/* where staging create's time goes: the allocation, then the copy */
	{NULL, BENCH_RUDAD_STAGING_SPLIT, BENCH_INPROC_CREATE, 0},
};
#define NROWS (sizeof(rows) / sizeof(rows[0]))

struct transfer_plan {
	uint64_t sizes[MAX_SIZES];
	int reps[MAX_SIZES];   /* timed repetitions per round */
	int rounds[MAX_SIZES]; /* rounds, each on new pages and buffers */
	int warmup[MAX_SIZES]; /* untimed ones before them */
	size_t nsizes;
};

/* Every timed repetition's seconds, pooled over the rounds:
 * [side][row][size][round * reps + rep], side 0 rudad, 1 in-process */
struct transfer_times {
	double total[2][NROWS][MAX_SIZES][MAX_SAMPLES];
	double alloc[2][MAX_SIZES][MAX_SAMPLES]; /* the split row's steps */
	double copy[2][MAX_SIZES][MAX_SAMPLES];
};

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* The largest size fits the option, the device and the host. */
static uint64_t largest_size(const ruda_device_properties *props)
{
	uint64_t cap = bench_opt.max_bytes;
	const char *why = "RUDA_BENCH_MAX_BYTES or its default";
	uint64_t limit[5] = {bench_opt.quick ? 64 * MiB : UINT64_MAX, props->max_buffer_size,
			     bench_inproc_max_buffer(),
			     props->device_local_bytes ? props->device_local_bytes / 2 : UINT64_MAX,
			     UINT64_MAX};
	static const char *limit_why[5] = {
		"--quick", "the device's largest buffer", "the in-process device's largest buffer",
		"half the device's local memory", "a sixteenth of the host's memory"};
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	/* host memory holds up to 11 copies at once where the device's memory
	 * is the host's (lavapipe): both sides' host bytes and buffers. Each
	 * side's device memory holds two (its written buffer and a create's),
	 * and each counts its own against the heap. */
	if (pages > 0 && page > 0)
		limit[4] = (uint64_t)pages * (uint64_t)page / 16;
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
	return cap;
}

static struct transfer_plan make_plan(uint64_t cap)
{
	static const uint64_t want_sizes[] = {1 * MiB, 64 * MiB, 1 * GiB};
	struct transfer_plan plan = {0};
	for (size_t i = 0; i < sizeof(want_sizes) / sizeof(want_sizes[0]); i++) {
		uint64_t s = min_u64(want_sizes[i], cap);
		if (plan.nsizes && plan.sizes[plan.nsizes - 1] >= s)
			continue;
		plan.sizes[plan.nsizes] = s;
		plan.reps[plan.nsizes] = s <= 4 * MiB     ? (bench_opt.quick ? 5 : 20)
					 : s <= 128 * MiB ? (bench_opt.quick ? 3 : 12)
							  : (bench_opt.quick ? 2 : 4);
		/* Where the two sides' pages happen to lie moves a round's ratio
		 * by up to 10 % on lavapipe (40 pairs of 64 MiB reads gave 0.82
		 * to 1.07 from one daemon to the next), so the sizes whose
		 * rounds are cheap get more of them. */
		plan.rounds[plan.nsizes] = bench_opt.quick ? 1 : s <= 128 * MiB ? MAX_ROUNDS : 3;
		BENCH_CHECK(plan.rounds[plan.nsizes] * plan.reps[plan.nsizes] <= MAX_SAMPLES,
			    "transfers: too many repetitions");
		/* enough untimed traffic to pass through the whole arena (64 MiB
		 * by default) once: its pages are touched the first time round */
		uint64_t warm = (128 * MiB + s - 1) / s;
		plan.warmup[plan.nsizes] = warm < 1 ? 1 : warm > 256 ? 256 : (int)warm;
		plan.nsizes++;
	}
	return plan;
}

/* One round of one size: every row, the two sides in turns. The creates
 * go first (pass 0), before the buffer the writes and reads use is made. */
static void run_size(const struct bench_daemon *d, const struct transfer_plan *plan, size_t i,
		     int round, struct transfer_times *out)
{
	uint64_t size = plan->sizes[i];
	int reps = plan->reps[i], warm = plan->warmup[i];
	struct bench_rudad_transfer *ru = bench_rudad_transfer_open(d, size, 1000 + i);
	struct bench_inproc_transfer *in = bench_inproc_transfer_open(size, 1000 + i);
	for (size_t k = 0; k < 2 * NROWS; k++) {
		size_t index = k % NROWS;
		const struct transfer_row *row = &rows[index];
		if ((row->base == BENCH_INPROC_CREATE) != (k < NROWS))
			continue;
		for (int r = -warm; r < reps; r++) {
			/* the first and the last are checked; r < 0 warms up */
			int check = r == -warm || r == reps - 1;
			for (int turn = 0; turn < 2; turn++) {
				int side = (turn + r) & 1; /* who goes first swaps each rep */
				double split[2], s;
				if (side == 0)
					s = bench_rudad_transfer_run(ru, row->rudad, check, split);
				else
					s = bench_inproc_transfer_run(in, row->base, check, split);
				if (r < 0)
					continue;
				int at = round * reps + r;
				out->total[side][index][i][at] = s;
				if (!row->name) {
					out->alloc[side][i][at] = split[0];
					out->copy[side][i][at] = split[1];
				}
			}
		}
	}
	bench_inproc_transfer_close(in);
	bench_rudad_transfer_close(ru);
}

/* GB/s of `size` bytes in the median of `n` times. */
static double median_gbs(uint64_t size, const double *seconds, int n)
{
	return (double)size / bench_median(seconds, (size_t)n) / 1e9;
}

/* The median of the repetitions' a[j] / b[j]: each pair was timed in one
 * turn, so what drifts between turns falls on both. */
static double paired_ratio(const double *a, const double *b, int n)
{
	double q[MAX_SAMPLES];
	for (int j = 0; j < n; j++)
		q[j] = a[j] / b[j];
	return bench_median(q, (size_t)n);
}

/* The largest size's plain write and read_one once more, split by phase
 * (libruda's counters and the session's device time): whether the client's
 * copies and the device's overlap (their sum above the total) or follow
 * one another (their sum about the total). Printed, not in the table. */
static void print_phases(const struct bench_daemon *d, uint64_t size)
{
	static const struct {
		const char *name;
		enum bench_rudad_op op;
	} ops[] = {{"write + sync", BENCH_RUDAD_WRITE}, {"read_one", BENCH_RUDAD_READ_ONE}};
	char name[32];
	bench_size_name(size, name, sizeof(name));
	struct bench_rudad_transfer *ru = bench_rudad_transfer_open(d, size, 3000);
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		struct bench_transfer_phases p[3];
		for (int r = 0; r < 3; r++) /* the last of three: warm pages */
			bench_rudad_transfer_phases(ru, ops[i].op, &p[r]);
		printf("transfers: %s %s by phase: %.1f ms in all; client copy %.1f ms, "
		       "waiting %.1f ms (%llu chunks, %llu waits on progress, %llu on a fence); "
		       "device %.1f ms\n",
		       ops[i].name, name, p[2].total * 1e3, p[2].copy * 1e3, p[2].wait * 1e3,
		       (unsigned long long)p[2].chunks, (unsigned long long)p[2].progress_waits,
		       (unsigned long long)p[2].fence_waits, p[2].device * 1e3);
	}
	bench_rudad_transfer_close(ru);
}

void bench_transfers(struct bench_daemon *d, const ruda_device_properties *props)
{
	struct transfer_plan plan = make_plan(largest_size(props));
	static struct transfer_times times;
	int done[MAX_SIZES] = {0}; /* rounds run of each size */
	int rounds = bench_opt.quick ? 1 : MAX_ROUNDS;
	for (int r = 0; r < rounds; r++)
		for (size_t i = 0; i < plan.nsizes; i++) {
			/* a size with fewer rounds has them spread over the run */
			if (r % (rounds / plan.rounds[i]) != 0)
				continue;
			char size[32];
			bench_size_name(plan.sizes[i], size, sizeof(size));
			int k = done[i]++, reps = plan.reps[i];
			printf("transfers (round %d of %d): %s...\n", k + 1, plan.rounds[i], size);
			fflush(stdout);
			run_size(d, &plan, i, k, &times);
			printf("transfers (round %d): %s staging create/write/read", k + 1, size);
			const char *sep = " ";
			for (size_t row = 0; row < NROWS; row++) {
				if (!rows[row].staging)
					continue;
				double *ru = &times.total[0][row][i][k * reps];
				double *in = &times.total[1][row][i][k * reps];
				printf("%s%.3f", sep, paired_ratio(in, ru, reps));
				sep = "/";
			}
			printf(" x in-process\n");
		}
	print_phases(d, plan.sizes[plan.nsizes - 1]);
	for (size_t row = 0; row < NROWS; row++)
		for (size_t i = 0; i < plan.nsizes; i++) {
			char size[32], name[80];
			uint64_t bytes = plan.sizes[i];
			int n = plan.rounds[i] * plan.reps[i];
			bench_size_name(bytes, size, sizeof(size));
			if (rows[row].name) {
				snprintf(name, sizeof(name), "%s %s", rows[row].name, size);
				const double *ru = times.total[0][row][i], *in = times.total[1][row][i];
				bench_result("transfers", name, "GB/s", median_gbs(bytes, ru, n),
					     median_gbs(bytes, in, n), BENCH_HIGHER, NULL);
				bench_paired_ratio(paired_ratio(in, ru, n));
				if (rows[row].staging && bytes >= 64 * MiB)
					bench_target(0.95);
				continue;
			}
			snprintf(name, sizeof(name), "staging create: alloc %s", size);
			bench_result("transfers", name, "ms",
				     bench_median(times.alloc[0][i], (size_t)n) * 1e3,
				     bench_median(times.alloc[1][i], (size_t)n) * 1e3, BENCH_LOWER, NULL);
			bench_paired_ratio(paired_ratio(times.alloc[0][i], times.alloc[1][i], n));
			snprintf(name, sizeof(name), "staging create: copy %s", size);
			bench_result("transfers", name, "GB/s", median_gbs(bytes, times.copy[0][i], n),
				     median_gbs(bytes, times.copy[1][i], n), BENCH_HIGHER, NULL);
			bench_paired_ratio(paired_ratio(times.copy[1][i], times.copy[0][i], n));
		}
	bench_print_group("transfers");
}
