/*
 * The rudad side of the transfer and launch benchmarks: one libruda client
 * of the bench's daemon doing what a program would do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define FILL_WORDS 256u

static void ok(ruda_client *c, ruda_status st, const char *what)
{
	if (st == RUDA_OK)
		return;
	char why[512] = "";
	ruda_client_last_error(c, why, sizeof(why));
	bench_fail("%s: %s: %s", what, ruda_strerror(st), why);
}

static void verify(const void *got, const void *want, uint64_t size, const char *what)
{
	int64_t at = bench_compare(got, want, size);
	BENCH_CHECK(at < 0, "%s: byte %lld of %llu differs", what, (long long)at,
		    (unsigned long long)size);
}

/* Read buffer `h` of a staging create into `dst` (cleared first) and check
 * it holds `src`'s bytes. */
static void read_back(ruda_client *c, ruda_handle h, const ruda_staging *dst,
		      const ruda_staging *src, uint64_t size, const char *how, const char *name)
{
	char what[96];
	memset(dst->data, 0, size);
	ok(c, ruda_client_read_to_staging(c, h, dst, 0), "read back");
	snprintf(what, sizeof(what), "%s of %s", how, name);
	verify(dst->data, src->data, size, what);
}

static void *page_aligned(uint64_t size)
{
	void *p = NULL;
	BENCH_CHECK(posix_memalign(&p, 4096, size ? size : 1) == 0, "out of memory (%llu bytes)",
		    (unsigned long long)size);
	return p;
}

/* The fastest path a program has: its bytes written straight into a staging
 * region, and created, written and read from there with no host copy. */
static void staging_transfers(ruda_client *c, const struct bench_transfer_plan *plan,
			      struct bench_transfer_result *out)
{
	for (size_t i = 0; i < plan->nsizes; i++) {
		uint64_t size = plan->sizes[i];
		int reps = plan->reps[i], warm = plan->warmup[i];
		char name[32], what[96];
		bench_size_name(size, name, sizeof(name));
		ruda_staging src, dst;
		ok(c, ruda_client_staging_create(c, size, &src), "staging_create");
		ok(c, ruda_client_staging_create(c, size, &dst), "staging_create");
		bench_fill_pattern(src.data, size, 1000 + i);
		double *t = calloc((size_t)reps, sizeof(*t));
		BENCH_CHECK(t, "out of memory");
		ruda_handle h;
		for (int r = -warm; r < reps; r++) {
			double t0 = bench_now();
			ok(c, ruda_client_create_from_staging(c, &src, 0, size, &h), "create_from_staging");
			ok(c, ruda_client_sync(c), "sync after create_from_staging");
			double t1 = bench_now();
			if (r == -warm || r == reps - 1) {
				read_back(c, h, &dst, &src, size, "rudad staging create", name);
			}
			/* freed before the next timing starts, as the in-process
			 * side frees its buffer outside its timing */
			ok(c, ruda_client_release(c, h), "release");
			ok(c, ruda_client_sync(c), "sync after release");
			bench_settle();
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->staging_create_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;

		/* the same create in two timed steps: the allocation (empty +
		 * sync) and the copy into the new buffer (write + sync) */
		double *t2 = calloc((size_t)reps, sizeof(*t2));
		BENCH_CHECK(t2, "out of memory");
		for (int r = -warm; r < reps; r++) {
			double t0 = bench_now();
			ok(c, ruda_client_empty(c, size, &h), "empty");
			ok(c, ruda_client_sync(c), "sync after empty");
			double t1 = bench_now();
			ok(c, ruda_client_write_from_staging(c, h, 0, &src, 0, size), "write_from_staging");
			ok(c, ruda_client_sync(c), "sync after write_from_staging");
			double t2_ = bench_now();
			if (r == -warm || r == reps - 1) {
				read_back(c, h, &dst, &src, size, "rudad staging empty + write", name);
			}
			ok(c, ruda_client_release(c, h), "release");
			ok(c, ruda_client_sync(c), "sync after release");
			bench_settle();
			if (r >= 0) {
				t[r] = t1 - t0;
				t2[r] = t2_ - t1;
			}
		}
		out->alloc_ms[i] = bench_median(t, (size_t)reps) * 1e3;
		out->fresh_copy_gbs[i] = (double)size / bench_median(t2, (size_t)reps) / 1e9;
		free(t2);

		ok(c, ruda_client_empty(c, size, &h), "empty");
		for (int r = -warm; r < reps; r++) {
			int check = r == -warm || r == reps - 1;
			if (check) {
				memset(dst.data, 0, size);
				ok(c, ruda_client_write_from_staging(c, h, 0, &dst, 0, size), "zeros");
				ok(c, ruda_client_sync(c), "sync after zeros");
			}
			double t0 = bench_now();
			ok(c, ruda_client_write_from_staging(c, h, 0, &src, 0, size), "write_from_staging");
			ok(c, ruda_client_sync(c), "sync after write_from_staging");
			double t1 = bench_now();
			if (check) {
				ok(c, ruda_client_read_to_staging(c, h, &dst, 0), "read back");
				snprintf(what, sizeof(what), "rudad staging write of %s", name);
				verify(dst.data, src.data, size, what);
			}
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->staging_write_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;

		for (int r = -warm; r < reps; r++) {
			int check = r == -warm || r == reps - 1;
			if (check)
				memset(dst.data, 0, size);
			double t0 = bench_now();
			ok(c, ruda_client_read_to_staging(c, h, &dst, 0), "read_to_staging");
			double t1 = bench_now();
			if (check) {
				snprintf(what, sizeof(what), "rudad staging download of %s", name);
				verify(dst.data, src.data, size, what);
			}
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->staging_download_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;
		ok(c, ruda_client_release(c, h), "release");
		ok(c, ruda_client_sync(c), "sync after release");
		ok(c, ruda_client_staging_release(c, &src), "staging_release");
		ok(c, ruda_client_staging_release(c, &dst), "staging_release");
		free(t);
	}
}

void bench_rudad_transfers(const struct bench_daemon *d, const struct bench_transfer_plan *plan,
			   struct bench_transfer_result *out)
{
	ruda_client *c = bench_connect(d);
	for (size_t i = 0; i < plan->nsizes; i++) {
		uint64_t size = plan->sizes[i];
		int reps = plan->reps[i], warm = plan->warmup[i];
		char name[32], what[96];
		bench_size_name(size, name, sizeof(name));
		uint8_t *src = page_aligned(size), *dst = page_aligned(size);
		bench_fill_pattern(src, size, 1000 + i);
		memset(dst, 0, size);
		double *t = calloc((size_t)reps, sizeof(*t));
		BENCH_CHECK(t, "out of memory");

		/* create: allocate + upload, then sync; r < 0 warms up, the first
		 * and the last are checked */
		for (int r = -warm; r < reps; r++) {
			ruda_handle h;
			double t0 = bench_now();
			ok(c, ruda_client_create(c, src, size, &h), "create");
			ok(c, ruda_client_sync(c), "sync after create");
			double t1 = bench_now();
			if (r == -warm || r == reps - 1) {
				memset(dst, 0, size);
				ok(c, ruda_client_read_one(c, h, dst), "read back");
				snprintf(what, sizeof(what), "rudad create of %s", name);
				verify(dst, src, size, what);
			}
			/* freed before the next timing starts, as in-process */
			ok(c, ruda_client_release(c, h), "release");
			ok(c, ruda_client_sync(c), "sync after release");
			bench_settle();
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->create_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;

		/* write: upload into a buffer that exists, then sync */
		ruda_handle h;
		ok(c, ruda_client_empty(c, size, &h), "empty");
		for (int r = -warm; r < reps; r++) {
			int check = r == -warm || r == reps - 1;
			if (check) {
				/* zeros first, so the write is seen to land */
				memset(dst, 0, size);
				ok(c, ruda_client_write(c, h, 0, dst, size), "write zeros");
				ok(c, ruda_client_sync(c), "sync after zeros");
			}
			double t0 = bench_now();
			ok(c, ruda_client_write(c, h, 0, src, size), "write");
			ok(c, ruda_client_sync(c), "sync after write");
			double t1 = bench_now();
			if (check) {
				ok(c, ruda_client_read_one(c, h, dst), "read back");
				snprintf(what, sizeof(what), "rudad write of %s", name);
				verify(dst, src, size, what);
			}
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->write_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;

		/* download: read_one of a buffer already on the device */
		for (int r = -warm; r < reps; r++) {
			int check = r == -warm || r == reps - 1;
			if (check)
				memset(dst, 0, size);
			double t0 = bench_now();
			ok(c, ruda_client_read_one(c, h, dst), "read_one");
			double t1 = bench_now();
			if (check) {
				snprintf(what, sizeof(what), "rudad download of %s", name);
				verify(dst, src, size, what);
			}
			if (r >= 0)
				t[r] = t1 - t0;
		}
		out->download_gbs[i] = (double)size / bench_median(t, (size_t)reps) / 1e9;
		ok(c, ruda_client_release(c, h), "release");
		ok(c, ruda_client_sync(c), "sync after release");
		free(src);
		free(dst);
		free(t);
	}
	staging_transfers(c, plan, out);
	ruda_client_close(c);
}

static void check_fill(ruda_client *c, ruda_handle h, uint32_t value, const char *what)
{
	uint32_t w[FILL_WORDS];
	memset(w, 0, sizeof(w));
	ok(c, ruda_client_read_one(c, h, w), "read_one");
	for (uint32_t i = 0; i < FILL_WORDS; i++)
		BENCH_CHECK(w[i] == value, "%s: word %u is %u, expected %u", what, i, w[i], value);
}

static void launch(ruda_client *c, ruda_kernel k, ruda_handle h, uint32_t value)
{
	uint32_t push[2] = {value, FILL_WORDS};
	ok(c, ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, push, sizeof(push)),
	   "launch");
}

void bench_rudad_launches(const struct bench_daemon *d, const struct bench_launch_plan *plan,
			  struct bench_launch_result *out)
{
	ruda_client *c = bench_connect(d);
	size_t size;
	uint32_t *code = bench_read_file(bench_path("shaders/fill.spv"), &size);
	BENCH_CHECK(code, "cannot read %s", bench_path("shaders/fill.spv"));
	ruda_kernel_desc desc = {
		.spirv = code,
		.spirv_size = size,
		.entry_point = "main",
		.binding_count = 1,
		.push_constant_size = 8,
	};
	ruda_kernel k;
	ok(c, ruda_client_kernel_register(c, &desc, &k), "register fill");
	free(code);
	ruda_handle h;
	ok(c, ruda_client_empty(c, FILL_WORDS * 4, &h), "empty");

	/* (a) one launch + sync at a time */
	int warm = plan->round_trips / 10 + 1;
	for (int i = 0; i < warm; i++) {
		launch(c, k, h, 7);
		ok(c, ruda_client_sync(c), "sync");
	}
	check_fill(c, h, 7, "rudad launch (warm-up)");
	double *t = calloc((size_t)plan->round_trips, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	double cpu0 = bench_cpu_self() + bench_cpu_of(d->pid);
	for (int i = 0; i < plan->round_trips; i++) {
		double t0 = bench_now();
		launch(c, k, h, (uint32_t)i + 100);
		ok(c, ruda_client_sync(c), "sync");
		t[i] = bench_now() - t0;
	}
	out->rt_cpu_us =
		(bench_cpu_self() + bench_cpu_of(d->pid) - cpu0) / plan->round_trips * 1e6;
	check_fill(c, h, (uint32_t)plan->round_trips - 1 + 100, "rudad launch");
	out->rt_median_us = bench_median(t, (size_t)plan->round_trips) * 1e6;
	out->rt_mean_us = bench_mean(t, (size_t)plan->round_trips) * 1e6;
	free(t);

	/* (b) many launches, then one sync */
	int warm_n = plan->launches < 10000 ? plan->launches : 10000;
	for (int i = 0; i < warm_n; i++)
		launch(c, k, h, (uint32_t)i + 1);
	ok(c, ruda_client_sync(c), "sync");
	double *rate = calloc((size_t)plan->batches, sizeof(*rate));
	BENCH_CHECK(rate, "out of memory");
	double cpu = 0;
	for (int r = 0; r < plan->batches; r++) {
		double c0 = bench_cpu_self() + bench_cpu_of(d->pid), t0 = bench_now();
		for (int i = 0; i < plan->launches; i++)
			launch(c, k, h, (uint32_t)i + 1);
		ok(c, ruda_client_sync(c), "sync");
		rate[r] = plan->launches / (bench_now() - t0);
		cpu += bench_cpu_self() + bench_cpu_of(d->pid) - c0;
		check_fill(c, h, (uint32_t)plan->launches, "rudad launches");
	}
	out->launches_per_s = bench_median(rate, (size_t)plan->batches);
	out->launch_cpu_us = cpu / ((double)plan->launches * plan->batches) * 1e6;
	free(rate);

	/* (c) a graph of tiny launches, replayed, then one sync */
	ok(c, ruda_client_graph_prepare(c), "graph_prepare");
	ok(c, ruda_client_graph_start_capture(c), "graph_start_capture");
	for (int i = 0; i < plan->graph_launches; i++)
		launch(c, k, h, (uint32_t)i + 1);
	ruda_graph *graph;
	ok(c, ruda_client_graph_stop_capture(c, &graph), "graph_stop_capture");
	double *t_graph = calloc((size_t)plan->batches, sizeof(*t_graph));
	BENCH_CHECK(t_graph, "out of memory");
	for (int r = -1; r < plan->batches; r++) { /* r = -1: warm-up */
		launch(c, k, h, 0); /* a replay must overwrite it */
		ok(c, ruda_client_sync(c), "sync");
		double t0 = bench_now();
		for (int i = 0; i < plan->graph_replays; i++)
			ok(c, ruda_graph_replay(graph), "graph_replay");
		ok(c, ruda_client_sync(c), "sync");
		double dt = bench_now() - t0;
		if (r >= 0)
			t_graph[r] = dt / ((double)plan->graph_launches * plan->graph_replays) * 1e6;
		check_fill(c, h, (uint32_t)plan->graph_launches, "rudad graph");
	}
	out->graph_us = bench_median(t_graph, (size_t)plan->batches);
	free(t_graph);
	ruda_graph_release(graph);
	ruda_client_close(c);
}
