/*
 * The devices group: all-reduce and to_client between the devices rudad
 * opens (every device by default; one device opened twice as two logical
 * devices where there is only one), against moving the same bytes through
 * the client process (read to host, reduce there, write to each device).
 * Every result is checked against a CPU reference.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

#define MiB (1024ull * 1024ull)
#define GiB (1024ull * MiB)
#define MAX_DEVICES 8

struct devices {
	struct bench_daemon daemon;
	ruda_client *clients[MAX_DEVICES];
	ruda_device_id ids[MAX_DEVICES];
	uint32_t n;
	int logical; /* one physical device opened several times */
};

static void open_devices(struct devices *d)
{
	const char *want = getenv("RUDA_BENCH_DEVICES"); /* rudad --device syntax */
	char twice[300];
	if (want && *want) {
		bench_daemon_start(&d->daemon, (const char *const[]){"--device", want, NULL});
	} else {
		bench_daemon_start(&d->daemon, NULL);
		ruda_client *c = bench_connect(&d->daemon);
		size_t n = ruda_client_device_count_total(c);
		ruda_client_close(c);
		if (n < 2) {
			/* one device: the same one twice, as two logical devices */
			bench_daemon_stop(&d->daemon);
			const char *one = bench_opt.device ? bench_opt.device : "0";
			snprintf(twice, sizeof(twice), "%s,%s", one, one);
			bench_daemon_start(&d->daemon, (const char *const[]){"--device", twice, NULL});
		}
	}
	ruda_client *first = bench_connect(&d->daemon);
	size_t n = ruda_client_device_count_total(first);
	ruda_client_close(first);
	BENCH_CHECK(n >= 2, "rudad opened %zu device(s); the devices group needs two", n);
	d->n = n < MAX_DEVICES ? (uint32_t)n : MAX_DEVICES;
	ruda_device_properties p0 = RUDA_DEVICE_PROPERTIES_INIT, p = RUDA_DEVICE_PROPERTIES_INIT;
	for (uint32_t i = 0; i < d->n; i++) {
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = d->daemon.socket_path,
					  .client_name = "bench devices", .device_index = i};
		BENCH_CHECK(ruda_client_connect(&o, &d->clients[i]) == RUDA_OK,
			    "connect to device %u", i);
		d->ids[i] = ruda_client_device_id(d->clients[i]);
		ruda_client_properties(d->clients[i], i ? &p : &p0);
		if (i && p.physical_index == p0.physical_index)
			d->logical = 1;
	}
	printf("devices: %u devices%s: %s\n", d->n,
	       d->logical ? " (one physical device opened several times)" : "", p0.name);
}

static void close_devices(struct devices *d)
{
	for (uint32_t i = 0; i < d->n; i++)
		ruda_client_close(d->clients[i]);
	bench_daemon_stop(&d->daemon);
}

/* Small integers as floats: sums and maxima are exact in any order. */
static void fill_floats(float *dst, uint64_t count, uint64_t seed)
{
	uint32_t *raw = (uint32_t *)dst;
	bench_fill_pattern(raw, count * 4, seed);
	for (uint64_t i = 0; i < count; i++)
		dst[i] = (float)(raw[i] % 2001) - 1000.0f;
}

static void reduce_into(float *acc, const float *v, uint64_t count, int op)
{
	for (uint64_t i = 0; i < count; i++)
		acc[i] = op == RUDA_REDUCE_MAX ? (acc[i] > v[i] ? acc[i] : v[i]) : acc[i] + v[i];
}

static void check_result(ruda_client *c, ruda_handle h, const float *expect, float *back,
			 uint64_t bytes, const char *what, uint32_t device)
{
	BENCH_CHECK(ruda_client_read_one(c, h, back) == RUDA_OK, "%s: read device %u", what,
		    device);
	int64_t at = bench_compare(back, expect, bytes);
	BENCH_CHECK(at < 0, "%s: device %u differs from the CPU reference at byte %lld", what,
		    device, (long long)at);
}

static void all_reduce(struct devices *d, uint64_t bytes, int op, int reps)
{
	uint64_t count = bytes / 4;
	float *in[MAX_DEVICES] = {0}, *expect = malloc(bytes), *back = malloc(bytes), *acc = malloc(bytes);
	BENCH_CHECK(expect && back && acc, "out of host memory for %llu bytes",
		    (unsigned long long)bytes);
	ruda_handle src[MAX_DEVICES], dst[MAX_DEVICES];
	for (uint32_t i = 0; i < d->n; i++) {
		in[i] = malloc(bytes);
		BENCH_CHECK(in[i], "out of host memory");
		fill_floats(in[i], count, 77 + i);
		ruda_status st = ruda_client_create(d->clients[i], in[i], bytes, &src[i]);
		if (st == RUDA_OK)
			st = ruda_client_empty(d->clients[i], bytes, &dst[i]);
		if (st == RUDA_OK)
			st = ruda_client_sync(d->clients[i]);
		char why[256] = "";
		ruda_client_last_error(d->clients[i], why, sizeof(why));
		BENCH_CHECK(st == RUDA_OK, "buffers on device %u: %s: %s", i, ruda_strerror(st), why);
		BENCH_CHECK(ruda_client_ensure_init_collective(d->clients[i], d->ids, d->n) ==
				    RUDA_OK,
			    "ensure_init_collective");
	}
	memcpy(expect, in[0], bytes);
	for (uint32_t i = 1; i < d->n; i++)
		reduce_into(expect, in[i], count, op);
	const char *opname = op == RUDA_REDUCE_MAX ? "max" : "sum";
	char size[32], name[96];
	bench_size_name(bytes, size, sizeof(size));

	/* rudad: every client calls, then every client waits */
	double t[16], b[16];
	for (int r = -1; r < reps; r++) {
		double t0 = bench_now();
		for (uint32_t i = 0; i < d->n; i++)
			BENCH_CHECK(ruda_client_all_reduce(d->clients[i], src[i], dst[i],
							   RUDA_ELEM_F32, d->ids, d->n,
							   (ruda_reduce_op)op) == RUDA_OK,
				    "all_reduce");
		for (uint32_t i = 0; i < d->n; i++)
			BENCH_CHECK(ruda_client_sync_collective(d->clients[i]) == RUDA_OK,
				    "sync_collective on device %u", i);
		if (r >= 0)
			t[r] = bench_now() - t0;
		for (uint32_t i = 0; i < d->n; i++)
			check_result(d->clients[i], dst[i], expect, back, bytes, "all_reduce", i);
	}
	/* through the client: read every src, reduce here, write every dst */
	for (int r = -1; r < reps; r++) {
		memset(back, 0, bytes);
		double t0 = bench_now();
		BENCH_CHECK(ruda_client_read_one(d->clients[0], src[0], acc) == RUDA_OK, "read");
		for (uint32_t i = 1; i < d->n; i++) {
			BENCH_CHECK(ruda_client_read_one(d->clients[i], src[i], back) == RUDA_OK,
				    "read");
			reduce_into(acc, back, count, op);
		}
		for (uint32_t i = 0; i < d->n; i++)
			BENCH_CHECK(ruda_client_write(d->clients[i], dst[i], 0, acc, bytes) == RUDA_OK,
				    "write");
		for (uint32_t i = 0; i < d->n; i++)
			BENCH_CHECK(ruda_client_sync(d->clients[i]) == RUDA_OK, "sync");
		if (r >= 0)
			b[r] = bench_now() - t0;
		for (uint32_t i = 0; i < d->n; i++)
			check_result(d->clients[i], dst[i], expect, back, bytes, "baseline", i);
	}
	snprintf(name, sizeof(name), "all_reduce %s f32 %s", opname, size);
	bench_result("devices", name, "GB/s", (double)bytes / bench_median(t, (size_t)reps) / 1e9,
		     (double)bytes / bench_median(b, (size_t)reps) / 1e9, BENCH_HIGHER, NULL);
	for (uint32_t i = 0; i < d->n; i++) {
		ruda_client_release(d->clients[i], src[i]);
		ruda_client_release(d->clients[i], dst[i]);
		ruda_client_sync(d->clients[i]);
		free(in[i]);
	}
	free(expect);
	free(back);
	free(acc);
}

/* One ruda_client_to_client of `src` from `from` to `to`, timed; the new
 * buffer's bytes are checked and it is released (and the release synced)
 * outside the timing, as the transfers group's creates are. */
static double timed_to_client(ruda_client *from, ruda_handle src, ruda_client *to,
			      const uint8_t *data, uint8_t *back, uint64_t bytes, const char *what)
{
	ruda_handle dst;
	double t0 = bench_now();
	BENCH_CHECK(ruda_client_to_client(from, src, to, RUDA_ELEM_F32, &dst) == RUDA_OK, "%s",
		    what);
	double t = bench_now() - t0;
	BENCH_CHECK(ruda_client_read_one(to, dst, back) == RUDA_OK, "%s: read", what);
	BENCH_CHECK(bench_compare(back, data, bytes) < 0, "%s: bytes differ", what);
	ruda_client_release(to, dst);
	ruda_client_sync(to);
	return t;
}

/* to_client from device 0's client to device 1's, against two baselines:
 * the device's own copy (to_client from device 0's client to itself: one
 * device copy into a new buffer on device 0, by rudad's copy kernel on a
 * GPU, docs/design.md "Device copies"), timed in turns with it
 * rep by rep so drift falls on both alike; and the same bytes through the
 * client (read, then create + sync). */
static void to_client(struct devices *d, uint64_t bytes, int reps)
{
	uint8_t *data = malloc(bytes), *back = malloc(bytes);
	BENCH_CHECK(data && back, "out of host memory");
	bench_fill_pattern(data, bytes, 5);
	ruda_client *from = d->clients[0], *to = d->clients[1];
	ruda_handle src, dst;
	BENCH_CHECK(ruda_client_create(from, data, bytes, &src) == RUDA_OK &&
			    ruda_client_sync(from) == RUDA_OK,
		    "source buffer");
	double t[16], c[16], b[16], ratio[16];
	for (int r = -1; r < reps; r++) {
		double across, copy;
		if (r & 1) { /* the first of the two goes first every other rep */
			copy = timed_to_client(from, src, from, data, back, bytes, "device copy");
			across = timed_to_client(from, src, to, data, back, bytes, "to_client");
		} else {
			across = timed_to_client(from, src, to, data, back, bytes, "to_client");
			copy = timed_to_client(from, src, from, data, back, bytes, "device copy");
		}
		if (r < 0)
			continue;
		t[r] = across;
		c[r] = copy;
		ratio[r] = copy / across; /* of GB/s: the times' inverse */
	}
	for (int r = -1; r < reps; r++) {
		memset(back, 0, bytes);
		double t0 = bench_now();
		BENCH_CHECK(ruda_client_read_one(from, src, back) == RUDA_OK, "read");
		BENCH_CHECK(ruda_client_create(to, back, bytes, &dst) == RUDA_OK &&
				    ruda_client_sync(to) == RUDA_OK,
			    "create");
		if (r >= 0)
			b[r] = bench_now() - t0;
		memset(back, 0, bytes);
		BENCH_CHECK(ruda_client_read_one(to, dst, back) == RUDA_OK, "read");
		BENCH_CHECK(bench_compare(back, data, bytes) < 0, "baseline: bytes differ");
		ruda_client_release(to, dst);
		ruda_client_sync(to);
	}
	char size[32], name[96];
	bench_size_name(bytes, size, sizeof(size));
	double gbs = (double)bytes / bench_median(t, (size_t)reps) / 1e9;
	snprintf(name, sizeof(name), "to_client %s / device copy", size);
	bench_result("devices", name, "GB/s", gbs,
		     (double)bytes / bench_median(c, (size_t)reps) / 1e9, BENCH_HIGHER, NULL);
	bench_paired_ratio(bench_median(ratio, (size_t)reps));
	if (bytes >= 64 * MiB) /* issue #24's, for 1 GiB */
		bench_target(0.5);
	snprintf(name, sizeof(name), "to_client %s / via client", size);
	bench_result("devices", name, "GB/s", gbs,
		     (double)bytes / bench_median(b, (size_t)reps) / 1e9, BENCH_HIGHER, NULL);
	ruda_client_release(from, src);
	ruda_client_sync(from);
	free(data);
	free(back);
}

void bench_devices(void)
{
	struct devices d = {0};
	open_devices(&d);
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(d.clients[0], &p);
	/* each size: n sources and destinations on the devices, n inputs, a
	 * reference, an accumulator and a read-back here, n slots in rudad */
	uint64_t cap = bench_opt.max_bytes, per = 3ull * d.n + 4;
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages > 0 && page > 0 && (uint64_t)pages * (uint64_t)page / 2 / per < cap)
		cap = (uint64_t)pages * (uint64_t)page / 2 / per;
	if (p.max_buffer_size < cap)
		cap = p.max_buffer_size;
	/* a source and a destination per device; to_client's source, window
	 * (device 0's memory) and device copy on device 0; beside the
	 * allocator's pages and the windows kept (lavapipe's heap is 2 GiB).
	 * Logical devices of one physical device share its heap (4 quarters
	 * of lavapipe's were too many: the all-reduce's last buffer failed).
	 * A power of two there, so to_client's window is its size, as at 1 GiB. */
	uint64_t buffers = d.logical ? 2ull * d.n + 2 : 4;
	if (p.device_local_bytes && p.device_local_bytes / buffers < cap) {
		cap = p.device_local_bytes / buffers;
		while (cap & (cap - 1))
			cap &= cap - 1;
	}
	if (bench_opt.quick && cap > 64 * MiB)
		cap = 64 * MiB;
	cap &= ~(uint64_t)4095;
	static const uint64_t sizes[] = {1 * MiB, 64 * MiB, 1 * GiB};
	uint64_t last = 0;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		uint64_t s = sizes[k] < cap ? sizes[k] : cap;
		if (s <= last)
			continue;
		last = s;
		int reps = s <= 4 * MiB ? (bench_opt.quick ? 3 : 10) : s <= 128 * MiB ? 3 : 2;
		char size[32];
		printf("devices: %s...\n", bench_size_name(s, size, sizeof(size)));
		fflush(stdout);
		all_reduce(&d, s, RUDA_REDUCE_SUM, reps);
		all_reduce(&d, s, RUDA_REDUCE_MAX, reps);
		to_client(&d, s, reps);
	}
	close_devices(&d);
	bench_print_group("devices");
}
