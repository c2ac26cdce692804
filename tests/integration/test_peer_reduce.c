/* All-reduce between logical devices of one physical device (lavapipe
 * opened two and three times) by device copies and rudad's combine kernel
 * (peer_reduce = on: on a CPU device the default keeps host staging), in
 * chunks of 64 KiB (RUDA_PEER_CHUNK) so that sizes past a chunk are cheap:
 * every op and type against a CPU reference computed as the host path does,
 * bit for bit (and the host path against the same reference), f32
 * subnormals also where the kernel flushes them, src and dst offsets,
 * three members, a call larger than one kernel binding may span
 * (maxStorageBufferRange), a client killed and a destination released in
 * the middle, and a device lost in the middle. */
#include <check.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define ck_assert_status(got, want) ck_assert_msg((got) == (want), "%s (%d), expected %s", \
						 ruda_strerror(got), (int)(got), ruda_strerror(want))

#define CHUNK 65536u
#define MAX_MEMBERS 3

static struct test_daemon daemon_;
static ruda_client *clients[MAX_MEMBERS];
static uint32_t members;
static ruda_device_id ids[MAX_MEMBERS];

static void connect_all(void)
{
	for (uint32_t i = 0; i < members; i++) {
		clients[i] = test_connect_device(&daemon_, "test_peer_reduce", i);
		ids[i] = ruda_client_device_id(clients[i]);
	}
	for (uint32_t i = 0; i < members; i++)
		ck_assert_status(ruda_client_ensure_init_collective(clients[i], ids, members),
				 RUDA_OK);
}

/* rudad on `devices`, with `policy` (peer_reduce), chunks of `chunk` bytes
 * and, with `faults`, the fault switch on and the caller's group as
 * administrators. */
static void start(const char *devices, uint32_t n, const char *policy, const char *chunk,
		  int faults)
{
	static char admin[160];
	struct group *g = getgrgid(getegid());
	ck_assert_ptr_nonnull(g);
	snprintf(admin, sizeof(admin), "admin_group=%s", g->gr_name);
	if (chunk)
		setenv("RUDA_PEER_CHUNK", chunk, 1);
	else
		unsetenv("RUDA_PEER_CHUNK");
	if (faults)
		setenv("RUDA_TEST_FAULTS", "1", 1);
	const char *args[] = {"--device", devices,	   "--set", "log_level=debug",
			      "--set",	  policy,	   "--set", admin,
			      NULL};
	test_daemon_start(&daemon_, args);
	unsetenv("RUDA_TEST_FAULTS");
	members = n;
	connect_all();
}

static void setup_two(void)
{
	start("0,0", 2, "peer_reduce=on", "65536", 0);
}

static void setup_host(void)
{
	start("0,0", 2, "peer_reduce=off", "65536", 0);
}

static void setup_auto(void)
{
	start("0,0", 2, "peer_reduce=auto", "65536", 0);
}

static void setup_three(void)
{
	start("0,0,0", 3, "peer_reduce=on", "65536", 0);
}

/* rudad's own chunks (RUDA_PEER_CHUNK unset). */
static void setup_default_chunks(void)
{
	start("0,0", 2, "peer_reduce=on", NULL, 0);
}

/* Chunks of 192 MiB: one chunk larger than lavapipe's 128 MiB binding. */
static void setup_big(void)
{
	start("0,0", 2, "peer_reduce=on", "201326592", 0);
}

/* The combine kernel that flushes f32 subnormals (RUDA_TEST_FLUSH_SUBNORMALS,
 * with RUDA_TEST_FAULTS), as a device without shaderDenormPreserveFloat32
 * may: lavapipe, which has none, keeps them all the same. */
static void setup_flushing(void)
{
	setenv("RUDA_TEST_FLUSH_SUBNORMALS", "1", 1);
	start("0,0", 2, "peer_reduce=on", "65536", 1);
	unsetenv("RUDA_TEST_FLUSH_SUBNORMALS");
}

static void setup_faults(void)
{
	start("0,0", 2, "peer_reduce=on", "65536", 1);
}

static void teardown(void)
{
	for (uint32_t i = 0; i < members; i++) {
		if (clients[i])
			ruda_client_close(clients[i]);
		clients[i] = NULL;
	}
	test_daemon_stop(&daemon_);
}

/* The sum of every value of `key` in `rudactl status --json`. */
static uint64_t ctl_sum(const char *key)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s --socket %s status --json", test_build_path("rudactl"),
		 daemon_.socket_path);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	static char out[1 << 16];
	size_t len = fread(out, 1, sizeof(out) - 1, p);
	out[len] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	char quoted[64];
	snprintf(quoted, sizeof(quoted), "\"%s\": ", key);
	uint64_t sum = 0;
	int found = 0;
	for (const char *at = strstr(out, quoted); at; at = strstr(at + 1, quoted), found++)
		sum += strtoull(at + strlen(quoted), NULL, 10);
	ck_assert_msg(found, "no %s in %s", key, out);
	return sum;
}

/* ---- the reference: exec/reduce.c's order and operations ------------------- */

static uint32_t combine(uint32_t a, uint32_t b, ruda_elem_type type, ruda_reduce_op op)
{
	if (type == RUDA_ELEM_F32) {
		float x = test_f32_of(a), y = test_f32_of(b);
		switch (op) {
		case RUDA_REDUCE_SUM: return test_f32_bits(x + y);
		case RUDA_REDUCE_PROD: return test_f32_bits(x * y);
		case RUDA_REDUCE_MAX: return x > y ? a : b;
		default: return x < y ? a : b;
		}
	}
	if (type == RUDA_ELEM_I32 && (op == RUDA_REDUCE_MAX || op == RUDA_REDUCE_MIN)) {
		int32_t x = (int32_t)a, y = (int32_t)b;
		return (uint32_t)(op == RUDA_REDUCE_MAX ? (x > y ? x : y) : (x < y ? x : y));
	}
	switch (op) {
	case RUDA_REDUCE_SUM: return a + b;
	case RUDA_REDUCE_PROD: return a * b;
	case RUDA_REDUCE_MAX: return a > b ? a : b;
	default: return a < b ? a : b;
	}
}

/* Inputs where order shows: floats of many magnitudes and both signs
 * (never subnormal, infinite or NaN: lavapipe may flush subnormals, and
 * NaN payloads are the device's), zeros of both signs; any integers. */
static void fill(uint32_t *v, size_t n, ruda_elem_type type, uint64_t seed)
{
	test_fill_random(v, n * 4, seed);
	if (type != RUDA_ELEM_F32)
		return;
	for (size_t i = 0; i < n; i++) {
		uint32_t r = v[i];
		if (r % 61 == 0) {
			v[i] = r & 0x80000000u; /* ±0 */
			continue;
		}
		/* exponent 2^-20 .. 2^20: products of three stay finite */
		uint32_t exp = 127 - 20 + (r >> 8) % 41;
		v[i] = (r & 0x80000000u) | exp << 23 | (r * 2654435761u & 0x7fffffu);
	}
}

static const char *const op_names[] = {"sum", "prod", "max", "min"};
static const char *type_name(ruda_elem_type t)
{
	return t == RUDA_ELEM_F32 ? "f32" : t == RUDA_ELEM_I32 ? "i32" : "u32";
}

static int is_nan(uint32_t u)
{
	return (u & 0x7fffffffu) > 0x7f800000u;
}

/*
 * Every member reduces `count` elements of `type` with `op`: src at byte
 * `src_off` of a buffer of its own, dst at `dst_off` of another (the bytes
 * around it must stay as they were); each dst compared bit for bit with
 * the reference (a NaN sum or product with any NaN: its payload is the
 * device's). Member j's elements are given[j] or, without given, filled
 * from `seed`. Returns nothing; asserts.
 */
static void reduce_given(size_t count, ruda_elem_type type, ruda_reduce_op op,
			 uint64_t src_off, uint64_t dst_off, uint64_t seed,
			 const uint32_t *const *given)
{
	size_t bytes = count * 4;
	uint32_t *in[MAX_MEMBERS], *expect = malloc(bytes);
	uint8_t *back = malloc(bytes + dst_off + 8), *around = malloc(bytes + dst_off + 8);
	ck_assert_ptr_nonnull(expect);
	ruda_handle src[MAX_MEMBERS], dst[MAX_MEMBERS];
	for (uint32_t j = 0; j < members; j++) {
		uint8_t *whole = malloc(bytes + src_off);
		memset(whole, 0x5a, src_off);
		in[j] = (uint32_t *)(void *)(whole + src_off);
		if (given)
			memcpy(in[j], given[j], bytes);
		else
			fill(in[j], count, type, seed * 31 + j);
		ruda_handle s;
		ck_assert_status(ruda_client_create(clients[j], whole, bytes + src_off, &s),
				 RUDA_OK);
		src[j] = (ruda_handle){.id = s.id, .offset = src_off, .size = bytes};
		/* dst's other bytes are known, to see they stay */
		test_fill_random(around, bytes + dst_off + 8, seed + 100 + j);
		ruda_handle d;
		ck_assert_status(ruda_client_create(clients[j], around, bytes + dst_off + 8, &d),
				 RUDA_OK);
		dst[j] = (ruda_handle){.id = d.id, .offset = dst_off, .size = bytes};
	}
	for (size_t i = 0; i < count; i++) {
		uint32_t acc = in[0][i];
		for (uint32_t j = 1; j < members; j++)
			acc = combine(acc, in[j][i], type, op);
		expect[i] = acc;
	}
	for (uint32_t j = 0; j < members; j++)
		ck_assert_status(ruda_client_all_reduce(clients[j], src[j], dst[j], type, ids,
							members, op),
				 RUDA_OK);
	for (uint32_t j = 0; j < members; j++)
		ck_assert_status(ruda_client_sync_collective(clients[j]), RUDA_OK);
	for (uint32_t j = 0; j < members; j++) {
		ruda_handle whole = {.id = dst[j].id, .offset = 0, .size = bytes + dst_off + 8};
		ck_assert_status(ruda_client_read_one(clients[j], whole, back), RUDA_OK);
		test_fill_random(around, bytes + dst_off + 8, seed + 100 + j);
		ck_assert_msg(memcmp(back, around, dst_off) == 0 &&
				      memcmp(back + dst_off + bytes, around + dst_off + bytes, 8) == 0,
			      "member %u: bytes around dst changed", j);
		const uint32_t *got = (const uint32_t *)(const void *)(back + dst_off);
		int nan_any = type == RUDA_ELEM_F32 &&
			      (op == RUDA_REDUCE_SUM || op == RUDA_REDUCE_PROD);
		for (size_t i = 0; i < count; i++)
			if (got[i] != expect[i] && !(nan_any && is_nan(got[i]) && is_nan(expect[i])))
				ck_abort_msg("%s %s, %zu elements, member %u, element %zu: %08x, "
					     "expected %08x", op_names[op], type_name(type), count, j,
					     i, got[i], expect[i]);
		ck_assert_status(ruda_client_release(clients[j], (ruda_handle){.id = src[j].id}),
				 RUDA_OK);
		ck_assert_status(ruda_client_release(clients[j], (ruda_handle){.id = dst[j].id}),
				 RUDA_OK);
		ck_assert_status(ruda_client_sync(clients[j]), RUDA_OK); /* the releases go */
		free((uint8_t *)in[j] - src_off);
	}
	free(expect);
	free(back);
	free(around);
}

static void reduce_checked(size_t count, ruda_elem_type type, ruda_reduce_op op,
			   uint64_t src_off, uint64_t dst_off, uint64_t seed)
{
	reduce_given(count, type, op, src_off, dst_off, seed, NULL);
}

static const ruda_elem_type types[] = {RUDA_ELEM_F32, RUDA_ELEM_I32, RUDA_ELEM_U32};
static const ruda_reduce_op ops[] = {RUDA_REDUCE_SUM, RUDA_REDUCE_PROD, RUDA_REDUCE_MAX,
				     RUDA_REDUCE_MIN};

/* Every op and type over 5 chunks and 7 elements (not a multiple of the
 * chunk), with offsets that are not: 12 calls. */
static void every_op_and_type(void)
{
	size_t count = 5 * CHUNK / 4 + 7;
	uint64_t seed = 1;
	for (size_t t = 0; t < 3; t++)
		for (size_t o = 0; o < 4; o++)
			reduce_checked(count, types[t], ops[o], 8, 12, seed++);
}

START_TEST(every_op_and_type_by_device)
{
	every_op_and_type();
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows, 65536-byte chunks"),
			 12);
	ck_assert_int_eq(test_log_count(&daemon_, "through host staging"), 0);
	ck_assert_uint_gt(ctl_sum("peer_copy_bytes"), 0);
	ck_assert_uint_eq(ctl_sum("staged_copy_bytes"), 0);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);
}
END_TEST

/* The host path against the same reference: both are the host's. */
START_TEST(every_op_and_type_by_host)
{
	every_op_and_type();
	ck_assert_int_eq(test_log_count(&daemon_, "through host staging (peer_reduce = off)"), 12);
	ck_assert_uint_eq(ctl_sum("peer_copy_bytes"), 0);
}
END_TEST

/* auto: lavapipe is a CPU device, its host staging stays; a GPU's u32
 * and f32 sums go by device copies (f32 ones whether or not the device
 * keeps subnormals). */
START_TEST(auto_keeps_host_staging_on_a_cpu)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_status(ruda_client_device_properties(clients[0], ids[0], &p), RUDA_OK);
	reduce_checked(1000, RUDA_ELEM_U32, RUDA_REDUCE_SUM, 0, 0, 3);
	reduce_checked(1000, RUDA_ELEM_F32, RUDA_REDUCE_SUM, 0, 0, 4);
	if (p.type == RUDA_DEVICE_CPU)
		ck_assert_int_eq(test_log_count(&daemon_, "through host staging (a CPU device"), 2);
	else
		ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows"), 2);
}
END_TEST

/* Sizes around the chunk, one element, and f16 and means, which stay on
 * the host. */
START_TEST(sizes_and_what_stays_on_the_host)
{
	static const size_t counts[] = {1, CHUNK / 4 - 1, CHUNK / 4, CHUNK / 4 + 1, 2 * CHUNK / 4,
					3 * CHUNK / 4 + 5};
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
		reduce_checked(counts[k], RUDA_ELEM_U32, RUDA_REDUCE_SUM, 0, 0, 40 + k);
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows"), 6);
	/* means and f16: the host's */
	ruda_handle src[2], dst[2];
	uint32_t data[64] = {0};
	for (uint32_t j = 0; j < 2; j++) {
		ck_assert_status(ruda_client_create(clients[j], data, sizeof(data), &src[j]), RUDA_OK);
		ck_assert_status(ruda_client_empty(clients[j], sizeof(data), &dst[j]), RUDA_OK);
	}
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_all_reduce(clients[j], src[j], dst[j], RUDA_ELEM_F32,
							ids, 2, RUDA_REDUCE_MEAN),
				 RUDA_OK);
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_all_reduce(clients[j], src[j], dst[j], RUDA_ELEM_F16,
							ids, 2, RUDA_REDUCE_SUM),
				 RUDA_OK);
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_sync_collective(clients[j]), RUDA_OK);
	ck_assert_int_eq(test_log_count(&daemon_, "through host staging (f16 and means reduce on the host)"), 2);
}
END_TEST

/* Three members: ((a0 op a1) op a2), every op and type. */
START_TEST(three_members)
{
	size_t count = 3 * CHUNK / 4 + 11;
	uint64_t seed = 70;
	for (size_t t = 0; t < 3; t++)
		for (size_t o = 0; o < 4; o++)
			reduce_checked(count, types[t], ops[o], 4, 0, seed++);
	/* and one chunk, whose sources go straight into the windows */
	reduce_checked(CHUNK / 4 - 3, RUDA_ELEM_F32, RUDA_REDUCE_SUM, 4, 8, seed++);
	ck_assert_int_eq(test_log_count(&daemon_, "over 3 devices: device copies through shared windows"), 13);
}
END_TEST

/* One chunk larger than a kernel binding may span: the kernel runs in
 * slices. */
START_TEST(larger_than_a_binding)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_status(ruda_client_device_properties(clients[0], ids[0], &p), RUDA_OK);
	uint64_t range = p.max_storage_buffer_range;
	if (range > (160ull << 20)) {
		printf("larger_than_a_binding: maxStorageBufferRange is %llu: not reached\n",
		       (unsigned long long)range);
		return;
	}
	size_t count = (size_t)(range / 4) + 4096 + 3;
	reduce_checked(count, RUDA_ELEM_F32, RUDA_REDUCE_SUM, 0, 4, 90);
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows"), 1);
}
END_TEST

/* Past rudad's 64 MiB chunk, a call whose windows can be kept goes as one
 * chunk of its size (a submission per phase, not three per chunk), and its
 * window is kept for the next call of that size; the bytes are the same. */
START_TEST(one_chunk_past_the_chunk_size)
{
	size_t count = (64u << 20) / 4 + 1024 + 3;
	char line[128];
	snprintf(line, sizeof(line), "device copies through shared windows, %zu-byte chunks",
		 count * 4);
	reduce_checked(count, RUDA_ELEM_F32, RUDA_REDUCE_SUM, 4, 8, 71);
	reduce_checked(count, RUDA_ELEM_U32, RUDA_REDUCE_MAX, 0, 0, 72);
	ck_assert_int_eq(test_log_count(&daemon_, line), 2);
	ck_assert_int_eq(test_log_count(&daemon_, "-> 0: shared window of"), 1);
	/* the debug line at the end says where its time went, one chunk */
	ck_assert_int_eq(test_log_count(&daemon_, "by device copies: sources in place"), 2);
	ck_assert_int_eq(test_log_count(&daemon_, "1 chunks, phases summed"), 2);
	/* below the chunk size, one chunk as before */
	reduce_checked(4099, RUDA_ELEM_I32, RUDA_REDUCE_SUM, 0, 0, 73);
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows, 16396-byte chunks"), 1);
}
END_TEST

/* ---- f32 subnormals where the device may flush them ------------------------ */

/* Elements of member 0 and 1 that take every branch of the kernel's sum,
 * max and min (exec/combine.comp) and the cases around them. */
static const uint32_t pairs[][2] = {
	/* subnormal + subnormal: subnormal, exactly the least normal, normal */
	{0x00000001, 0x00000001}, {0x00400000, 0x00000123}, {0x80000005, 0x00000003},
	{0x00000003, 0x80000005}, {0x00400000, 0x00400000}, {0x007fffff, 0x00000001},
	{0x007fffff, 0x007fffff}, {0x807fffff, 0x80000002},
	/* x + (-x): +0, for subnormals, small and large normals */
	{0x00001234, 0x80001234}, {0x80000001, 0x00000001}, {0x05000000, 0x85000000},
	{0x3f800000, 0xbf800000}, {0x7f000000, 0xff000000},
	/* normals cancelling to a subnormal (2^-149, 6 * 2^-149, 2^-127) or
	 * to a normal */
	{0x00800001, 0x80800000}, {0x01000003, 0x81000000}, {0x0b800001, 0x8b800000},
	{0x8b800001, 0x0b800000}, {0x0d000001, 0x8d000000}, {0x0d800001, 0x8d800000},
	/* small normals and subnormals that round */
	{0x08800001, 0x04000001}, {0x0c7fffff, 0x00000001}, {0x0cffffff, 0x807fffff},
	{0x00800000, 0x80000001}, {0x00800000, 0x00000001}, {0x0c800001, 0x00400000},
	/* a subnormal beside a normal of 2^-100 or more, or just less */
	{0x00000001, 0x3f800000}, {0x807fffff, 0x0d800000}, {0x007fffff, 0x8d800000},
	{0x0d000000, 0x807fffff}, {0x0d000000, 0x007fffff}, {0x8d7fffff, 0x00400001},
	{0x00000007, 0xff7fffff}, {0x0c800000, 0x807fffff}, {0x807fffff, 0x0c800000},
	/* zeros */
	{0x00000000, 0x00000000}, {0x00000000, 0x80000000}, {0x80000000, 0x00000000},
	{0x80000000, 0x80000000}, {0x00000000, 0x00000001}, {0x80000000, 0x00000001},
	{0x00000001, 0x80000000}, {0x80000001, 0x80000000}, {0x80000000, 0x80000001},
	{0x80000000, 0x3f800000}, {0x00000000, 0xbf800000}, {0x0d800000, 0x80000000},
	/* infinities and NaNs beside subnormals, and an overflow */
	{0x7f800000, 0x00000001}, {0x80000001, 0xff800000}, {0x7fc00000, 0x00000001},
	{0x00000001, 0x7fc00000}, {0x7fa00000, 0x80000003}, {0xffc00001, 0x00000000},
	{0x80000000, 0x7fc00000}, {0x7f800000, 0xff800000}, {0x7f7fffff, 0x7f7fffff},
	/* subnormals ordered against each other, zeros and the least normals */
	{0x00000001, 0x00000002}, {0x00000002, 0x00000001}, {0x80000001, 0x80000002},
	{0x80000002, 0x80000001}, {0x80000001, 0x00000001}, {0x00000001, 0x80000001},
	{0x00000001, 0x00000000}, {0x00000000, 0x80000001}, {0x80000001, 0x00000000},
	{0x007fffff, 0x00800000}, {0x80800000, 0x807fffff}, {0x00000001, 0x00000001},
};

/* Member 0's and 1's elements: the pairs, then random words: of any
 * magnitude, of exponent fields 0 to 31 (either side of the kernel's 27),
 * nearly cancelling, and beside subnormals. */
static void subnormal_inputs(uint32_t *a, uint32_t *b, size_t count, uint64_t seed)
{
	size_t npairs = sizeof(pairs) / sizeof(pairs[0]);
	test_fill_random(a, count * 4, seed);
	test_fill_random(b, count * 4, seed + 1);
	for (size_t i = 0; i < count; i++) {
		if (i < npairs) {
			a[i] = pairs[i][0];
			b[i] = pairs[i][1];
			continue;
		}
		switch (i % 4) {
		case 1:
			a[i] &= 0x8fffffffu;
			b[i] &= 0x8fffffffu;
			break;
		case 2:
			a[i] &= 0x8fffffffu;
			b[i] = a[i] ^ 0x80000000u ^ (b[i] & 0xffu);
			break;
		case 3:
			a[i] &= 0x8fffffffu;
			b[i] &= 0x80ffffffu; /* exponent fields 0 and 1 */
			break;
		}
	}
}

/* Sums, maxima and minima of f32 subnormals, bit for bit the host's:
 * members in both orders, 6 calls. */
static void subnormals_checked(void)
{
	size_t count = 32 * CHUNK / 4 + 5;
	uint32_t *a = malloc(count * 4), *b = malloc(count * 4);
	ck_assert(a && b);
	subnormal_inputs(a, b, count, 200);
	static const ruda_reduce_op checked[] = {RUDA_REDUCE_SUM, RUDA_REDUCE_MAX,
						 RUDA_REDUCE_MIN};
	for (int order = 0; order < 2; order++) {
		const uint32_t *given[2] = {order ? b : a, order ? a : b};
		for (size_t o = 0; o < 3; o++)
			reduce_given(count, RUDA_ELEM_F32, checked[o], 4, 8, 0, given);
	}
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows"), 6);
	free(a);
	free(b);
}

/* By the device's own kernel (on lavapipe the one for devices that may
 * flush them: it keeps them, though it does not say so). */
START_TEST(f32_subnormals_by_device)
{
	subnormals_checked();
}
END_TEST

/* By the kernel that flushes them as such a device may: what it does
 * holds where it flushes. */
START_TEST(f32_subnormals_where_flushed)
{
	subnormals_checked();
	ck_assert_int_eq(test_log_count(&daemon_, "f32 subnormals flushed (RUDA_TEST_FLUSH_SUBNORMALS)"), 1);
}
END_TEST

/* ---- ends in the middle ---------------------------------------------------- */

/* A process of its own with a client on each device, reducing 8 MiB (128
 * chunks) again and again until killed. */
static int reduce_forever(ruda_client *c0, void *arg)
{
	const struct test_daemon *d = arg;
	ruda_client *c[2] = {c0, test_connect_device(d, "test_peer_reduce", 1)};
	ruda_device_id both[2] = {ruda_client_device_id(c[0]), ruda_client_device_id(c[1])};
	size_t size = 8u << 20;
	uint8_t *data = malloc(size);
	test_fill_random(data, size, 5);
	ruda_handle src[2], dst[2];
	for (int j = 0; j < 2; j++)
		if (ruda_client_ensure_init_collective(c[j], both, 2) != RUDA_OK ||
		    ruda_client_create(c[j], data, size, &src[j]) != RUDA_OK ||
		    ruda_client_empty(c[j], size, &dst[j]) != RUDA_OK)
			return 1;
	test_fork_ready();
	for (;;) {
		for (int j = 0; j < 2; j++)
			if (ruda_client_all_reduce(c[j], src[j], dst[j], RUDA_ELEM_U32, both, 2,
						   RUDA_REDUCE_SUM) != RUDA_OK)
				return 1;
		for (int j = 0; j < 2; j++)
			if (ruda_client_sync_collective(c[j]) != RUDA_OK)
				return 1;
	}
}

/* Windows back in the cache (at most what it keeps) or gone. */
static void windows_settle(void)
{
	uint64_t windows = 0;
	for (int i = 0; i < 100; i++) {
		windows = ctl_sum("peer_windows");
		if (windows <= 4)
			break;
		usleep(50000);
	}
	ck_assert_uint_le(windows, 4);
	ck_assert_uint_le(ctl_sum("peer_window_bytes"), 512ull << 20);
}

START_TEST(killed_midway_leaves_nothing)
{
	ruda_daemon_stats before = test_wait_for_stats(clients[0], 2, 0);
	ck_assert_uint_eq(before.device_bytes, 0);
	for (int round = 0; round < 3; round++) {
		pid_t child = test_fork_client(&daemon_, "killed", reduce_forever, &daemon_);
		struct timespec ts = {0, (80 + 90 * round) * 1000000L};
		nanosleep(&ts, NULL);
		test_kill(child);
		ruda_daemon_stats s = test_wait_for_stats(clients[0], 2, 0);
		ck_assert_uint_eq(s.sessions, 2);
		ck_assert_uint_eq(s.device_bytes, 0);
		ck_assert_uint_eq(s.device_buffers, 0);
	}
	ck_assert_int_ge(test_log_count(&daemon_, "device copies through shared windows"), 1);
	windows_settle();
	/* and the path still works */
	reduce_checked(3 * CHUNK / 4 + 1, RUDA_ELEM_I32, RUDA_REDUCE_MAX, 0, 0, 11);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);
}
END_TEST

/* A destination released before the result lands: its member hears
 * INVALID_HANDLE, the other gets the result, nothing stays behind. */
START_TEST(dst_released_midway)
{
	size_t count = 64 * CHUNK / 4 + 3, bytes = count * 4;
	uint32_t *in = malloc(bytes), *back = malloc(bytes);
	fill(in, count, RUDA_ELEM_U32, 12);
	ruda_handle src[2], dst[2];
	for (uint32_t j = 0; j < 2; j++) {
		ck_assert_status(ruda_client_create(clients[j], in, bytes, &src[j]), RUDA_OK);
		ck_assert_status(ruda_client_empty(clients[j], bytes, &dst[j]), RUDA_OK);
	}
	/* member 1 calls and lets src and dst go (src's bytes were kept in
	 * order) before member 0 calls, so before anything is written */
	ck_assert_status(ruda_client_all_reduce(clients[1], src[1], dst[1], RUDA_ELEM_U32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_status(ruda_client_release(clients[1], src[1]), RUDA_OK);
	ck_assert_status(ruda_client_release(clients[1], dst[1]), RUDA_OK);
	ck_assert_status(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_status(ruda_client_all_reduce(clients[0], src[0], dst[0], RUDA_ELEM_U32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_status(ruda_client_release(clients[0], src[0]), RUDA_OK);
	ck_assert_status(ruda_client_sync_collective(clients[0]), RUDA_OK);
	ck_assert_status(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_status(ruda_client_read_one(clients[0], dst[0], back), RUDA_OK);
	for (size_t i = 0; i < count; i++)
		ck_assert_msg(back[i] == in[i] * 2u, "element %zu", i);
	ck_assert_status(ruda_client_release(clients[0], dst[0]), RUDA_OK);
	ck_assert_status(ruda_client_sync(clients[0]), RUDA_OK);
	ruda_daemon_stats s = test_wait_for_stats(clients[0], 2, 0);
	ck_assert_uint_eq(s.device_buffers, 0);
	windows_settle();
	free(in);
	free(back);
}
END_TEST

/* Device 0 (the reducing one) lost while a device reduce is in flight:
 * its client is told, the other's sync fails, rudad re-creates the device
 * without freeing anything on the old one after it has gone (ASan), and a
 * new reduce works. */
START_TEST(device_lost_midway)
{
	size_t count = 16u << 20 >> 2, bytes = count * 4; /* 256 chunks */
	uint32_t *in = malloc(bytes);
	fill(in, count, RUDA_ELEM_U32, 13);
	ruda_handle src[2], dst[2];
	for (uint32_t j = 0; j < 2; j++) {
		ck_assert_status(ruda_client_create(clients[j], in, bytes, &src[j]), RUDA_OK);
		ck_assert_status(ruda_client_empty(clients[j], bytes, &dst[j]), RUDA_OK);
	}
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_all_reduce(clients[j], src[j], dst[j], RUDA_ELEM_U32,
							ids, 2, RUDA_REDUCE_SUM),
				 RUDA_OK);
	ck_assert_status(ruda_client_sync(clients[1]), RUDA_OK); /* the call is under way */
	uint32_t closed = 0;
	ck_assert_status(test_inject_device_loss(&daemon_, 0, &closed), RUDA_OK);
	ck_assert_uint_ge(closed, 1);
	ruda_status st = ruda_client_sync_collective(clients[1]);
	ck_assert_msg(st == RUDA_ERROR_DISCONNECTED || st == RUDA_ERROR_DEVICE_LOST,
		      "device 1's sync: %s", ruda_strerror(st));
	ck_assert_status(ruda_client_sync_collective(clients[0]), RUDA_ERROR_DEVICE_LOST);
	for (uint32_t j = 0; j < 2; j++) {
		ruda_client_close(clients[j]);
		clients[j] = NULL;
	}
	/* rudad serves on: both devices again, the re-created one reducing */
	connect_all();
	reduce_checked(3 * CHUNK / 4 + 1, RUDA_ELEM_U32, RUDA_REDUCE_SUM, 0, 0, 14);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);
	windows_settle();
	free(in);
}
END_TEST

Suite *peer_reduce_suite(void)
{
	Suite *s = suite_create("peer_reduce");
	TCase *two = tcase_create("device");
	tcase_add_checked_fixture(two, setup_two, teardown);
	tcase_set_timeout(two, 180);
	tcase_add_test(two, every_op_and_type_by_device);
	tcase_add_test(two, sizes_and_what_stays_on_the_host);
	tcase_add_test(two, killed_midway_leaves_nothing);
	tcase_add_test(two, dst_released_midway);
	tcase_add_test(two, f32_subnormals_by_device);
	suite_add_tcase(s, two);
	TCase *host = tcase_create("host");
	tcase_add_checked_fixture(host, setup_host, teardown);
	tcase_set_timeout(host, 120);
	tcase_add_test(host, every_op_and_type_by_host);
	suite_add_tcase(s, host);
	TCase *autop = tcase_create("auto");
	tcase_add_checked_fixture(autop, setup_auto, teardown);
	tcase_set_timeout(autop, 60);
	tcase_add_test(autop, auto_keeps_host_staging_on_a_cpu);
	suite_add_tcase(s, autop);
	TCase *three = tcase_create("three");
	tcase_add_checked_fixture(three, setup_three, teardown);
	tcase_set_timeout(three, 180);
	tcase_add_test(three, three_members);
	suite_add_tcase(s, three);
	TCase *whole = tcase_create("default_chunks");
	tcase_add_checked_fixture(whole, setup_default_chunks, teardown);
	tcase_set_timeout(whole, 300);
	tcase_add_test(whole, one_chunk_past_the_chunk_size);
	suite_add_tcase(s, whole);
	TCase *big = tcase_create("big");
	tcase_add_checked_fixture(big, setup_big, teardown);
	tcase_set_timeout(big, 300);
	tcase_add_test(big, larger_than_a_binding);
	suite_add_tcase(s, big);
	TCase *flushing = tcase_create("flushing");
	tcase_add_checked_fixture(flushing, setup_flushing, teardown);
	tcase_set_timeout(flushing, 120);
	tcase_add_test(flushing, f32_subnormals_where_flushed);
	suite_add_tcase(s, flushing);
	TCase *faults = tcase_create("faults");
	tcase_add_checked_fixture(faults, setup_faults, teardown);
	tcase_set_timeout(faults, 120);
	tcase_add_test(faults, device_lost_midway);
	suite_add_tcase(s, faults);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peer_reduce_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
