/*
 * Kernel speed: the built-in copy kernel (shaders/copy.comp, uvec4
 * grid-stride) and an elementwise one (shaders/saxpy.comp) over large
 * buffers, through rudad and launched in-process, in GB/s of device
 * traffic (copy: read + write; saxpy: two reads and a write an element);
 * the copy also against the device's limit (4.16 TB/s on an H200 with this
 * kernel; elsewhere what the in-process copy reaches).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MiB (1024ull * 1024ull)
#define WARM_S 0.3

struct speed {
	double copy_gbs, saxpy_gbs;
};

static uint32_t grid(uint64_t items)
{
	uint64_t g = (items + 255) / 256;
	return g < 65535 ? (uint32_t)g : 65535;
}

/* `launches` kernels, then a sync, `reps` times: the median GB/s; *ran
 * counts every launch, warm-up included. */
static double timed(struct bench_runner *r, int k, const int *bufs, const void *push,
		    uint32_t push_size, uint32_t groups, int launches, int reps,
		    double bytes_per_launch, int *ran)
{
	double *t = calloc((size_t)reps, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	/* warm-up: a GPU left idle for a second drops its clocks (the H200's SM
	 * clock to 345-750 MHz) and takes tens of ms of work to raise them; the
	 * first batches after an idle spell ran at 1.0-1.7 TB/s instead of 4.1
	 * (docs/performance.md, "Kernel speed"). Both sides run WARM_S of
	 * batches first, so both are timed at the clocks of a busy device. */
	double warm_until = bench_now() + WARM_S;
	do {
		for (int j = 0; j < launches; j++)
			bench_runner_launch(r, k, groups, bufs, push, push_size);
		bench_runner_sync(r);
		*ran += launches;
	} while (bench_now() < warm_until);
	*ran += launches * reps;
	for (int i = 0; i < reps; i++) {
		double t0 = bench_now();
		for (int j = 0; j < launches; j++)
			bench_runner_launch(r, k, groups, bufs, push, push_size);
		bench_runner_sync(r);
		t[i] = bench_now() - t0;
	}
	if (getenv("RUDA_BENCH_REPS")) /* each repetition, to see a slow one come and go */
		for (int i = 0; i < reps; i++)
			printf("  rep %d: %.0f GB/s at %.3f s\n", i, bytes_per_launch * launches / t[i] / 1e9,
			       bench_now());
	double gbs = bytes_per_launch * launches / bench_median(t, (size_t)reps) / 1e9;
	free(t);
	return gbs;
}

static void measure(enum bench_runner_kind kind, const char *socket, uint64_t bytes,
		    int launches, int reps, struct speed *out)
{
	struct bench_runner_options o = {.kind = kind, .socket_path = socket,
					 .name = "bench-kernels"};
	struct bench_runner *r = bench_runner_open(&o);
	const char *who = kind == BENCH_RUNNER_RUDAD ? "rudad" : "in-process";
	uint8_t *host = malloc(bytes), *back = malloc(bytes);
	BENCH_CHECK(host && back, "out of memory");

	/* copy */
	int copy = bench_runner_kernel(r, "shaders/copy.spv", 2, 4);
	bench_fill_pattern(host, bytes, 77);
	int bufs[2];
	bufs[0] = bench_runner_buffer(r, bytes, host);
	bufs[1] = bench_runner_buffer(r, bytes, NULL);
	uint32_t units = (uint32_t)(bytes / 16);
	int ran = 0;
	out->copy_gbs = timed(r, copy, bufs, &units, 4, grid(units), launches, reps,
			      2.0 * (double)bytes, &ran);
	bench_runner_read(r, bufs[1], back);
	int64_t at = bench_compare(back, host, bytes);
	BENCH_CHECK(at < 0, "%s copy: byte %lld differs", who, (long long)at);

	/* saxpy: y = x + y, x = 1, y = 0 at first: y ends as the launch count */
	int saxpy = bench_runner_kernel(r, "shaders/saxpy.spv", 2, 8);
	uint32_t n = (uint32_t)(bytes / 4);
	float *f = (float *)host;
	for (uint32_t i = 0; i < n; i++)
		f[i] = 1.0f;
	int sbufs[2];
	sbufs[0] = bench_runner_buffer(r, bytes, host);
	memset(host, 0, bytes);
	sbufs[1] = bench_runner_buffer(r, bytes, host);
	struct { float alpha; uint32_t n; } push = {1.0f, n};
	ran = 0;
	out->saxpy_gbs = timed(r, saxpy, sbufs, &push, sizeof(push), grid(n), launches, reps,
			       3.0 * (double)bytes, &ran);
	bench_runner_read(r, sbufs[1], back);
	float want = (float)ran; /* exact: far below 2^24 */
	const float *y = (const float *)back;
	for (uint32_t i = 0; i < n; i++)
		BENCH_CHECK(y[i] == want, "%s saxpy: y[%u] = %g, expected %g", who, i, y[i], want);
	free(host);
	free(back);
	bench_runner_close(r);
}

void bench_kernel_speed(const struct bench_daemon *d, const ruda_device_properties *props)
{
	int cpu = props->type == RUDA_DEVICE_CPU;
	uint64_t bytes = cpu ? (bench_opt.quick ? 16 : 64) * MiB : 1024 * MiB;
	/* one buffer, bound whole */
	uint64_t max = props->max_buffer_size < props->max_storage_buffer_range
			       ? props->max_buffer_size
			       : props->max_storage_buffer_range;
	if (bytes > max)
		bytes = max & ~(uint64_t)(16 * MiB - 1);
	int launches = cpu ? 4 : 50, reps = bench_opt.quick ? 3 : 5;
	char size[32];
	bench_size_name(bytes, size, sizeof(size));
	printf("\nkernels: copy and saxpy over %s, %d launches a sync, in-process...\n", size,
	       launches);
	/* alternating rounds, each figure the median over them: one run of
	 * each side once showed the copy at 0.56x of the other, unrepeated */
	enum { ROUNDS = 3 };
	int rounds = bench_opt.quick ? 1 : ROUNDS;
	double copy_base[ROUNDS], copy_ru[ROUNDS], saxpy_base[ROUNDS], saxpy_ru[ROUNDS];
	for (int i = 0; i < rounds; i++) {
		struct speed b, r;
		measure(BENCH_RUNNER_INPROC, NULL, bytes, launches, reps, &b);
		printf("kernels: rudad...\n");
		measure(BENCH_RUNNER_RUDAD, d->socket_path, bytes, launches, reps, &r);
		printf("kernels (round %d of %d): copy %.3g / %.3g GB/s, saxpy %.3g / %.3g GB/s "
		       "(rudad / in-process)\n",
		       i + 1, rounds, r.copy_gbs, b.copy_gbs, r.saxpy_gbs, b.saxpy_gbs);
		copy_base[i] = b.copy_gbs;
		copy_ru[i] = r.copy_gbs;
		saxpy_base[i] = b.saxpy_gbs;
		saxpy_ru[i] = r.saxpy_gbs;
	}
	struct speed base = {bench_median(copy_base, (size_t)rounds),
			     bench_median(saxpy_base, (size_t)rounds)};
	struct speed ru = {bench_median(copy_ru, (size_t)rounds),
			   bench_median(saxpy_ru, (size_t)rounds)};

	char name[96];
	snprintf(name, sizeof(name), "copy.comp over %s", size);
	bench_result("kernels", name, "GB/s", ru.copy_gbs, base.copy_gbs, BENCH_HIGHER,
		     "read + write");
	bench_target(0.95);
	snprintf(name, sizeof(name), "saxpy.comp over %s", size);
	bench_result("kernels", name, "GB/s", ru.saxpy_gbs, base.saxpy_gbs, BENCH_HIGHER,
		     "2 reads + 1 write an element");
	bench_target(0.95);
	int h200 = strstr(props->name, "H200") != NULL;
	double limit = h200 ? 4160 : base.copy_gbs;
	bench_result("kernels", "copy vs the device limit", "GB/s", ru.copy_gbs, limit,
		     BENCH_HIGHER,
		     h200 ? "limit: 4.16 TB/s measured on the H200"
			  : "limit: what the in-process copy reaches here");
	bench_target(0.90);
	bench_print_group("kernels");
}
