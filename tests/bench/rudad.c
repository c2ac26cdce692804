/*
 * The rudad side of the transfer and launch benchmarks: one libruda client
 * of the bench's daemon doing what a program would do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "client_private.h"
#include "transfer.h"

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

static void *page_aligned(uint64_t size)
{
	void *p = NULL;
	BENCH_CHECK(posix_memalign(&p, 4096, size ? size : 1) == 0, "out of memory (%llu bytes)",
		    (unsigned long long)size);
	return p;
}

/* One size's bytes: `src` in the client's memory and in staging region
 * `ssrc` (the fastest path a program has: its bytes written straight into
 * shared memory, created, written and read from there with no host copy),
 * `h` a buffer holding them (written and read back; made at the first
 * write or read, so the creates before it have the device's memory to
 * themselves: lavapipe's heap is 2 GiB), `dst` and `sdst` where reads
 * land. */
struct bench_rudad_transfer {
	ruda_client *c;
	uint64_t size;
	char name[32];
	uint8_t *src, *dst;
	ruda_staging ssrc, sdst;
	ruda_handle h;
	int has_h;
};

struct bench_rudad_transfer *bench_rudad_transfer_open(const struct bench_daemon *d,
						       uint64_t size, uint64_t seed)
{
	struct bench_rudad_transfer *t = calloc(1, sizeof(*t));
	BENCH_CHECK(t, "out of memory");
	t->c = bench_connect(d);
	t->size = size;
	bench_size_name(size, t->name, sizeof(t->name));
	t->src = page_aligned(size);
	t->dst = page_aligned(size);
	bench_fill_pattern(t->src, size, seed);
	memset(t->dst, 0, size);
	ok(t->c, ruda_client_staging_create(t->c, size, &t->ssrc), "staging_create");
	ok(t->c, ruda_client_staging_create(t->c, size, &t->sdst), "staging_create");
	memcpy(t->ssrc.data, t->src, size);
	return t;
}

static void make_written_buffer(struct bench_rudad_transfer *t)
{
	if (t->has_h)
		return;
	ok(t->c, ruda_client_create(t->c, t->src, t->size, &t->h), "create");
	ok(t->c, ruda_client_sync(t->c), "sync after create");
	t->has_h = 1;
}

/* Buffer `h`'s bytes, read back (into the staging region or the client's
 * memory, cleared first), are the source's. */
static void check_buffer(struct bench_rudad_transfer *t, ruda_handle h, int staging,
			 const char *op)
{
	char what[96];
	uint8_t *into = staging ? t->sdst.data : t->dst;
	memset(into, 0, t->size);
	if (staging)
		ok(t->c, ruda_client_read_to_staging(t->c, h, &t->sdst, 0), "read back");
	else
		ok(t->c, ruda_client_read_one(t->c, h, into), "read back");
	snprintf(what, sizeof(what), "rudad %s of %s", op, t->name);
	verify(into, t->src, t->size, what);
}

/* Release a buffer made by a timed create, untimed, as the in-process
 * side frees its own outside its timing. */
static void release(struct bench_rudad_transfer *t, ruda_handle h)
{
	ok(t->c, ruda_client_release(t->c, h), "release");
	ok(t->c, ruda_client_sync(t->c), "sync after release");
	bench_settle(t->size);
}

double bench_rudad_transfer_run(struct bench_rudad_transfer *t, enum bench_rudad_op op,
				int check, double split[2])
{
	ruda_client *c = t->c;
	uint64_t size = t->size;
	int staging = op >= BENCH_RUDAD_STAGING_CREATE;
	ruda_handle h;
	double t0, t1, t2;
	switch (op) {
	case BENCH_RUDAD_CREATE:
	case BENCH_RUDAD_STAGING_CREATE:
		t0 = bench_now();
		if (staging)
			ok(c, ruda_client_create_from_staging(c, &t->ssrc, 0, size, &h),
			   "create_from_staging");
		else
			ok(c, ruda_client_create(c, t->src, size, &h), "create");
		ok(c, ruda_client_sync(c), "sync after create");
		t1 = bench_now();
		if (check)
			check_buffer(t, h, staging, staging ? "staging create" : "create");
		release(t, h);
		return t1 - t0;
	case BENCH_RUDAD_STAGING_SPLIT:
		t0 = bench_now();
		ok(c, ruda_client_empty(c, size, &h), "empty");
		ok(c, ruda_client_sync(c), "sync after empty");
		t1 = bench_now();
		ok(c, ruda_client_write_from_staging(c, h, 0, &t->ssrc, 0, size),
		   "write_from_staging");
		ok(c, ruda_client_sync(c), "sync after write_from_staging");
		t2 = bench_now();
		if (check)
			check_buffer(t, h, 1, "staging empty + write");
		release(t, h);
		if (split) {
			split[0] = t1 - t0;
			split[1] = t2 - t1;
		}
		return t2 - t0;
	case BENCH_RUDAD_WRITE:
	case BENCH_RUDAD_STAGING_WRITE:
		make_written_buffer(t);
		if (check) { /* zeros first, so the write is seen to land */
			memset(t->dst, 0, size);
			ok(c, ruda_client_write(c, t->h, 0, t->dst, size), "write zeros");
			ok(c, ruda_client_sync(c), "sync after zeros");
		}
		t0 = bench_now();
		if (staging)
			ok(c, ruda_client_write_from_staging(c, t->h, 0, &t->ssrc, 0, size),
			   "write_from_staging");
		else
			ok(c, ruda_client_write(c, t->h, 0, t->src, size), "write");
		ok(c, ruda_client_sync(c), "sync after write");
		t1 = bench_now();
		if (check)
			check_buffer(t, t->h, staging, staging ? "staging write" : "write");
		return t1 - t0;
	case BENCH_RUDAD_READ_ONE:
	case BENCH_RUDAD_READ_TO_STAGING: {
		uint8_t *into = staging ? t->sdst.data : t->dst;
		make_written_buffer(t);
		if (check)
			memset(into, 0, size);
		t0 = bench_now();
		if (staging)
			ok(c, ruda_client_read_to_staging(c, t->h, &t->sdst, 0), "read_to_staging");
		else
			ok(c, ruda_client_read_one(c, t->h, into), "read_one");
		t1 = bench_now();
		if (check) {
			char what[96];
			snprintf(what, sizeof(what), "rudad %s of %s",
				 staging ? "staging download" : "download", t->name);
			verify(into, t->src, size, what);
		}
		return t1 - t0;
	}
	}
	bench_fail("rudad: no transfer %d", (int)op);
	return 0;
}

void bench_rudad_transfer_close(struct bench_rudad_transfer *t)
{
	if (t->has_h)
		release(t, t->h);
	ok(t->c, ruda_client_staging_release(t->c, &t->ssrc), "staging_release");
	ok(t->c, ruda_client_staging_release(t->c, &t->sdst), "staging_release");
	ruda_client_close(t->c);
	free(t->src);
	free(t->dst);
	free(t);
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
		.struct_size = sizeof(ruda_kernel_desc),
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

void bench_rudad_transfer_phases(struct bench_rudad_transfer *t, enum bench_rudad_op op,
				 struct bench_transfer_phases *out)
{
	ruda_client *c = t->c;
	struct ruda_transfer_counters a, b;
	ruda_daemon_stats sa = RUDA_DAEMON_STATS_INIT, sb = RUDA_DAEMON_STATS_INIT;
	make_written_buffer(t);
	ok(c, ruda_client_sync(c), "sync");
	ok(c, ruda_client_daemon_stats(c, &sa), "daemon_stats");
	ruda__client_transfer_counters(c, &a);
	double t0 = bench_now();
	if (op == BENCH_RUDAD_READ_ONE) {
		ok(c, ruda_client_read_one(c, t->h, t->dst), "read_one");
	} else {
		ok(c, ruda_client_write(c, t->h, 0, t->src, t->size), "write");
		ok(c, ruda_client_sync(c), "sync after write");
	}
	double t1 = bench_now();
	ruda__client_transfer_counters(c, &b);
	ok(c, ruda_client_daemon_stats(c, &sb), "daemon_stats");
	*out = (struct bench_transfer_phases){
		.total = t1 - t0,
		.copy = (double)(b.copy_ns - a.copy_ns) / 1e9,
		.wait = (double)(b.wait_ns - a.wait_ns) / 1e9,
		.device = (double)(sb.session_gpu_time_ns - sa.session_gpu_time_ns) / 1e9,
		.chunks = b.chunks - a.chunks,
		.progress_waits = b.progress_waits - a.progress_waits,
		.fence_waits = b.fence_waits - a.fence_waits,
	};
}
