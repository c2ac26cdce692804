/* Copies between device-local buffers by rudad's copy kernel
 * (exec/copy_kernel.c), RUDA_DEVICE_COPY=kernel in rudad's environment, on
 * lavapipe opened twice (two logical devices of one physical device):
 * to_client on one device and between the two, by every path a transfer
 * between them takes (a window lent as the new buffer, a window of up to
 * two chunks, chunks through a window after a copy on the source), sizes
 * of 1 MiB + 16, 64 MiB, not a multiple of 16 (the last bytes by
 * vkCmdCopyBuffer), larger than a binding may span (maxStorageBufferRange:
 * slices), offsets the kernel cannot bind (vkCmdCopyBuffer), a strided
 * tensor (regions by kernel and not in one copy), launches after a kernel
 * copy, and all-reduce on the device path against a CPU reference. Random
 * data, every byte checked; rudad's debug log says each time the kernel
 * copied (and how), which the tests count. Without RUDA_DEVICE_COPY every
 * copy stays a vkCmdCopyBuffer. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define ck_assert_status(got, want) ck_assert_msg((got) == (want), "%s (%d), expected %s", \
						 ruda_strerror(got), (int)(got), ruda_strerror(want))

#define MIB (1ull << 20)
/* 4 MiB chunks through the windows: transfers past two chunks and
 * all-reduces of several chunks stay cheap on lavapipe, and a chunk is
 * still large enough for the kernel */
#define CHUNK (4 * MIB)

static struct test_daemon daemon_;
/* clients[0] and clients[2] on device 0, clients[1] on device 1 */
static ruda_client *clients[3];
static ruda_device_id ids[2];
static ruda_device_properties props;

/* rudad on lavapipe twice, RUDA_DEVICE_COPY=`mode` (NULL: unset), with
 * `extra` --set keys (NULL-terminated pairs, may be NULL). */
static void start(const char *mode, const char *const *extra)
{
	if (mode)
		setenv("RUDA_DEVICE_COPY", mode, 1); /* inherited by rudad */
	else
		unsetenv("RUDA_DEVICE_COPY");
	setenv("RUDA_PEER_CHUNK", "4194304", 1);
	const char *args[16] = {"--device", "0,0", "--set", "log_level=debug",
				"--set",    "peer_reduce=on"};
	int n = 6;
	for (int i = 0; extra && extra[i] && n < 14; i++)
		args[n++] = extra[i];
	args[n] = NULL;
	test_daemon_start(&daemon_, args);
	unsetenv("RUDA_DEVICE_COPY");
	unsetenv("RUDA_PEER_CHUNK");
	clients[0] = test_connect_device(&daemon_, "test_device_copy", 0);
	clients[1] = test_connect_device(&daemon_, "test_device_copy", 1);
	clients[2] = test_connect_device(&daemon_, "test_device_copy", 0);
	ids[0] = ruda_client_device_id(clients[0]);
	ids[1] = ruda_client_device_id(clients[1]);
	props = (ruda_device_properties)RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_status(ruda_client_device_properties(clients[0], ids[0], &props), RUDA_OK);
}

static void setup_kernel(void)
{
	start("kernel", NULL);
}

/* every stream on one queue lane, whose launches share a bind cache */
static void setup_kernel_lanes(void)
{
	static const char *const lanes[] = {"--set", "lanes=on", "--set", "queues=1", NULL};
	start("kernel", lanes);
}

static void setup_default(void)
{
	start(NULL, NULL);
}

static void teardown(void)
{
	for (uint32_t i = 0; i < 3; i++) {
		if (clients[i])
			ruda_client_close(clients[i]);
		clients[i] = NULL;
	}
	test_daemon_stop(&daemon_);
}

/* The offset a kernel binding may start at: 16 bytes (a unit) and the
 * device's minStorageBufferOffsetAlignment. */
static uint64_t kernel_align(void)
{
	return props.min_storage_buffer_offset_alignment > 16
		       ? props.min_storage_buffer_offset_alignment
		       : 16;
}

/* to_client of `size` random bytes at byte `offset` of a buffer of `from`
 * into `to`, every byte checked; returns the log lines of kernel copies it
 * added. */
static int moved(ruda_client *from, ruda_client *to, size_t size, size_t offset, uint64_t seed)
{
	int before = test_log_count(&daemon_, ": copy kernel ");
	uint8_t *data = malloc(offset + size), *back = malloc(size);
	ck_assert_ptr_nonnull(data);
	ck_assert_ptr_nonnull(back);
	test_fill_random(data, offset + size, seed);
	ruda_handle whole, dst;
	ck_assert_status(ruda_client_create(from, data, offset + size, &whole), RUDA_OK);
	ruda_handle src = {.id = whole.id, .offset = offset, .size = size};
	ck_assert_status(ruda_client_to_client(from, src, to, RUDA_ELEM_U8, &dst), RUDA_OK);
	ck_assert_uint_eq(dst.size, size);
	ck_assert_status(ruda_client_release(from, whole), RUDA_OK);
	memset(back, 0, size);
	ck_assert_status(ruda_client_read_one(to, dst, back), RUDA_OK);
	size_t i = 0;
	while (i < size && back[i] == data[offset + i])
		i++;
	ck_assert_msg(i == size, "%zu bytes from offset %zu: byte %zu differs (%02x, expected %02x)",
		      size, offset, i, back[i], data[offset + i]);
	ck_assert_status(ruda_client_release(to, dst), RUDA_OK);
	ck_assert_status(ruda_client_sync(to), RUDA_OK);
	ck_assert_status(ruda_client_sync(from), RUDA_OK);
	free(data);
	free(back);
	return test_log_count(&daemon_, ": copy kernel ") - before;
}

/* ---- RUDA_DEVICE_COPY=kernel ------------------------------------------------ */

/* One device: the stream's copy into the new buffer is the kernel's, in
 * one slice up to maxStorageBufferRange; a size not a multiple of 16 ends
 * with a vkCmdCopyBuffer of its last bytes. */
START_TEST(to_client_on_one_device_by_kernel)
{
	ck_assert_int_eq(moved(clients[0], clients[2], MIB + 16, 0, 1), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 1048592 B (slices 1), vkCmdCopyBuffer 0 B"), 1);
	ck_assert_int_eq(moved(clients[0], clients[2], 64 * MIB, 0, 2), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 67108864 B (slices 1)"), 1);
	ck_assert_int_eq(moved(clients[2], clients[0], 3 * MIB + 5, 0, 3), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 3145728 B (slices 1), vkCmdCopyBuffer 5 B"), 1);
	ck_assert_int_eq(moved(clients[2], clients[0], 2 * MIB + 12, 0, 4), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 2097152 B (slices 1), vkCmdCopyBuffer 12 B"), 1);
	/* each device made its kernel at start, before any client (made at
	 * the first copy, the loop waited for the compile) */
	ck_assert_int_eq(test_log_count(&daemon_, "by the copy kernel (RUDA_DEVICE_COPY=kernel)"), 2);
}
END_TEST

/* Below RUDA_COPY_KERNEL_MIN_BYTES, and from offsets a binding cannot
 * start at, the copy stays a vkCmdCopyBuffer; from an aligned offset it
 * is the kernel's. */
START_TEST(small_or_unaligned_stays_a_command)
{
	ck_assert_int_eq(moved(clients[0], clients[2], MIB - 16, 0, 5), 0);
	ck_assert_int_eq(moved(clients[0], clients[2], 4 * MIB, 4, 6), 0);
	ck_assert_int_eq(moved(clients[0], clients[2], 4 * MIB + 3, 8, 7), 0);
	ck_assert_int_eq(moved(clients[0], clients[2], 4 * MIB, kernel_align(), 8), 1);
	ck_assert_int_eq(moved(clients[0], clients[2], 4 * MIB + 7, 2 * kernel_align(), 9), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "vkCmdCopyBuffer 7 B"), 1);
}
END_TEST

/* Larger than one binding may span: the kernel copies it in slices of at
 * most maxStorageBufferRange (lavapipe's is 128 MiB). */
START_TEST(larger_than_a_binding_in_slices)
{
	uint64_t range = props.max_storage_buffer_range;
	if (range > 512 * MIB) {
		printf("SKIP larger_than_a_binding_in_slices: maxStorageBufferRange is %llu\n",
		       (unsigned long long)range);
		return;
	}
	size_t size = (size_t)range + 64 * MIB + 16;
	uint64_t slices = (size + range - 1) / range;
	ck_assert_int_eq(moved(clients[0], clients[2], size, 0, 10), 1);
	char line[128];
	snprintf(line, sizeof(line), "copy kernel %zu B (slices %llu), vkCmdCopyBuffer 0 B", size,
		 (unsigned long long)slices);
	ck_assert_msg(test_log_count(&daemon_, line) == 1, "no \"%s\" in the log", line);
	/* between the devices: the stream's copy into the lent window */
	ck_assert_int_eq(moved(clients[0], clients[1], size, 0, 11), 1);
	ck_assert_int_eq(test_log_count(&daemon_, line), 2);
}
END_TEST

/* Between the two logical devices: a window lent as the new buffer (whole
 * words from 1 MiB: the source's stream copies into it), a window of up to
 * two chunks (not whole words: the target copies out of it too), past two
 * chunks (a copy on the source, then chunk by chunk through the window's
 * halves, each copy on either side the kernel's). */
START_TEST(to_client_between_devices_by_kernel)
{
	ck_assert_int_eq(moved(clients[0], clients[1], MIB + 16, 0, 20), 1);
	ck_assert_int_eq(moved(clients[1], clients[0], 64 * MIB, 0, 21), 1);
	ck_assert_int_eq(moved(clients[0], clients[1], 3 * MIB + 20, 0, 22), 1);
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 3);
	/* into the window, then out of it on the target */
	ck_assert_int_eq(moved(clients[1], clients[0], 2 * MIB + 3, 0, 23), 2);
	/* into a buffer on the source, then 5 chunks each way: the last of
	 * 1 MiB + 3 bytes, its body the kernel's, its last 3 bytes not */
	ck_assert_int_eq(moved(clients[0], clients[1], 5 * CHUNK + MIB + 3, 0, 24), 1 + 2 * 6);
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 1048576 B (slices 1), vkCmdCopyBuffer 3 B"), 2);
	ck_assert_int_eq(test_log_count(&daemon_, "by the copy kernel (RUDA_DEVICE_COPY=kernel)"), 2);
}
END_TEST

/* A strided tensor: its rows are regions of one copy; those whose source
 * offset a binding may start at go by kernel, the others together in one
 * vkCmdCopyBuffer. */
START_TEST(tensor_rows_by_kernel_and_not)
{
	enum { ROWS = 3 };
	size_t cols = (size_t)(2 * MIB / 4), stride = cols + 1; /* rows 4 bytes apart */
	size_t elems = stride * (ROWS - 1) + cols;
	uint32_t *m = malloc(elems * 4), *t = malloc(ROWS * cols * 4);
	test_fill_random(m, elems * 4, 30);
	ruda_handle hm, ht;
	ck_assert_status(ruda_client_create(clients[0], m, elems * 4, &hm), RUDA_OK);
	uint64_t shape[2] = {ROWS, cols}, strides[2] = {stride, 1};
	ck_assert_status(ruda_client_to_client_tensor(clients[0], hm, shape, strides, 2, 4,
						      clients[2], RUDA_ELEM_U32, &ht),
			 RUDA_OK);
	ck_assert_status(ruda_client_read_one(clients[2], ht, t), RUDA_OK);
	for (size_t r = 0; r < ROWS; r++)
		ck_assert_msg(memcmp(t + r * cols, m + r * stride, cols * 4) == 0, "row %zu", r);
	/* row 0 starts at 0; rows 1 and 2 at 2 MiB + 4 and + 8 */
	ck_assert_int_eq(test_log_count(&daemon_, "copy kernel 2097152 B (slices 1), vkCmdCopyBuffer 4194304 B"),
			 1);
	free(m);
	free(t);
}
END_TEST

/* The kernel copy binds its own pipeline and descriptors: a launch after
 * it with the kernel and bindings of the launch before must bind them
 * again. (to_client submits the stream today, which forgets the bindings
 * anyway; this holds whatever the recording.) */
START_TEST(launches_after_a_kernel_copy)
{
	enum { N = 1 << 16 };
	ruda_client *c = clients[0];
	ruda_kernel add = test_register(c, "add_f32", 3, 4);
	float *a = malloc(N * 4), *b = malloc(N * 4), *out = malloc(N * 4);
	for (uint32_t i = 0; i < N; i++) {
		a[i] = (float)i;
		b[i] = (float)(3 * i % 1001);
	}
	ruda_handle h[3];
	ck_assert_status(ruda_client_create(c, a, N * 4, &h[0]), RUDA_OK);
	ck_assert_status(ruda_client_create(c, b, N * 4, &h[1]), RUDA_OK);
	ck_assert_status(ruda_client_empty(c, N * 4, &h[2]), RUDA_OK);
	uint32_t n = N;
	ruda_count count = {.x = (N + 255) / 256, .y = 1, .z = 1};
	ck_assert_status(ruda_client_launch(c, add, count, h, 3, &n, 4), RUDA_OK);
	ck_assert_int_eq(moved(c, clients[2], 2 * MIB, 0, 40), 1);
	for (uint32_t i = 0; i < N; i++)
		a[i] = (float)(N - i);
	ck_assert_status(ruda_client_write(c, h[0], 0, a, N * 4), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, add, count, h, 3, &n, 4), RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h[2], out), RUDA_OK);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_msg(out[i] == a[i] + b[i], "element %u: %g, expected %g", i, out[i],
			      a[i] + b[i]);
	free(a);
	free(b);
	free(out);
}
END_TEST

/* ---- all-reduce on the device path ---------------------------------------- */

/* Distinct random floats, never subnormal, infinite or NaN, of magnitudes
 * where a sum rounds. */
static void fill_floats(float *v, size_t n, uint64_t seed)
{
	uint32_t *w = (uint32_t *)(void *)v;
	test_fill_random(w, n * 4, seed);
	for (size_t i = 0; i < n; i++) {
		uint32_t r = w[i];
		uint32_t exp = 127 - 20 + (r >> 8) % 41;
		w[i] = (r & 0x80000000u) | exp << 23 | (r * 2654435761u & 0x7fffffu);
	}
}

/* Both members reduce `count` floats with `op` from byte `src_off` of
 * their src into byte `dst_off` of their dst; each dst compared bit for
 * bit with the CPU's a0 op a1, and the bytes around it unchanged. */
static void reduce_checked(size_t count, ruda_reduce_op op, uint64_t src_off, uint64_t dst_off,
			   uint64_t seed)
{
	size_t bytes = count * 4;
	float *in[2], *expect = malloc(bytes);
	uint8_t *around[2], *back = malloc(dst_off + bytes + 64);
	ruda_handle src[2], dst[2];
	for (uint32_t j = 0; j < 2; j++) {
		uint8_t *whole = malloc(src_off + bytes);
		test_fill_random(whole, src_off, seed + 50 + j);
		in[j] = (float *)(void *)(whole + src_off);
		fill_floats(in[j], count, seed * 2 + j);
		ruda_handle s, d;
		ck_assert_status(ruda_client_create(clients[j], whole, src_off + bytes, &s), RUDA_OK);
		src[j] = (ruda_handle){.id = s.id, .offset = src_off, .size = bytes};
		around[j] = malloc(dst_off + bytes + 64);
		test_fill_random(around[j], dst_off + bytes + 64, seed + 100 + j);
		ck_assert_status(ruda_client_create(clients[j], around[j], dst_off + bytes + 64, &d),
				 RUDA_OK);
		dst[j] = (ruda_handle){.id = d.id, .offset = dst_off, .size = bytes};
	}
	for (size_t i = 0; i < count; i++) {
		float x = in[0][i], y = in[1][i];
		expect[i] = op == RUDA_REDUCE_SUM ? x + y
						 : test_f32_of(x > y ? test_f32_bits(x) : test_f32_bits(y));
	}
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_all_reduce(clients[j], src[j], dst[j], RUDA_ELEM_F32,
							ids, 2, op),
				 RUDA_OK);
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_sync_collective(clients[j]), RUDA_OK);
	for (uint32_t j = 0; j < 2; j++) {
		ruda_handle whole = {.id = dst[j].id, .offset = 0, .size = dst_off + bytes + 64};
		ck_assert_status(ruda_client_read_one(clients[j], whole, back), RUDA_OK);
		ck_assert_msg(memcmp(back, around[j], dst_off) == 0 &&
				      memcmp(back + dst_off + bytes, around[j] + dst_off + bytes,
					     64) == 0,
			      "member %u: bytes around dst changed", j);
		const uint32_t *got = (const uint32_t *)(const void *)(back + dst_off);
		for (size_t i = 0; i < count; i++)
			if (got[i] != test_f32_bits(expect[i]))
				ck_abort_msg("%s of %zu floats, member %u, element %zu: %08x, "
					     "expected %08x",
					     op == RUDA_REDUCE_SUM ? "sum" : "max", count, j, i, got[i],
					     test_f32_bits(expect[i]));
		ck_assert_status(ruda_client_release(clients[j], (ruda_handle){.id = src[j].id}),
				 RUDA_OK);
		ck_assert_status(ruda_client_release(clients[j], (ruda_handle){.id = dst[j].id}),
				 RUDA_OK);
		ck_assert_status(ruda_client_sync(clients[j]), RUDA_OK);
		free((uint8_t *)in[j] - src_off);
		free(around[j]);
	}
	free(expect);
	free(back);
}

/* Sum and max of f32 through shared windows and the combine kernel, every
 * device-local copy of 1 MiB or more the kernel's: several chunks (the
 * last not a multiple of 16 bytes), one chunk (the sources straight into
 * the windows), offsets a binding may start at and offsets it may not. */
START_TEST(all_reduce_by_device_copies)
{
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_status(ruda_client_ensure_init_collective(clients[j], ids, 2), RUDA_OK);
	uint64_t a = kernel_align();
	size_t several = (size_t)(3 * CHUNK + MIB) / 4 + 3, one = (size_t)(3 * MIB) / 4 + 1;
	int before = test_log_count(&daemon_, ": copy kernel ");
	reduce_checked(several, RUDA_REDUCE_SUM, a, 2 * a, 1);
	int summed = test_log_count(&daemon_, ": copy kernel ") - before;
	reduce_checked(several, RUDA_REDUCE_MAX, 0, 0, 2);
	reduce_checked(one, RUDA_REDUCE_SUM, 0, a, 3);
	reduce_checked(one, RUDA_REDUCE_MAX, a, 0, 4);
	ck_assert_int_eq(test_log_count(&daemon_, "device copies through shared windows"), 4);
	/* each member's src into its buffer, then a chunk at a time: member
	 * 1's in, the result back into its slot and into member 0's dst, and
	 * out into member 1's dst: 2 + 4 x 4 */
	ck_assert_int_eq(summed, 2 + 4 * 4);
	int before_unaligned = test_log_count(&daemon_, ": copy kernel ");
	/* src and dst offsets a binding cannot start at: the copies from src
	 * and into dst stay vkCmdCopyBuffers, those between the daemon's own
	 * buffers and windows do not */
	reduce_checked(several, RUDA_REDUCE_SUM, 4, 8, 5);
	ck_assert_int_eq(test_log_count(&daemon_, ": copy kernel ") - before_unaligned, 4 * 2);
}
END_TEST

/* ---- RUDA_DEVICE_COPY unset ------------------------------------------------- */

/* The default: every copy a vkCmdCopyBuffer, said once per device. */
START_TEST(default_is_the_command)
{
	ck_assert_int_eq(moved(clients[0], clients[2], 4 * MIB, 0, 60), 0);
	ck_assert_int_eq(moved(clients[0], clients[1], 4 * MIB, 0, 61), 0);
	ck_assert_int_eq(moved(clients[1], clients[0], 2 * CHUNK + MIB + 3, 0, 62), 0);
	ck_assert_int_eq(test_log_count(&daemon_, "device-local copies by vkCmdCopyBuffer (RUDA_DEVICE_COPY=unset)"),
			 2);
	ck_assert_int_eq(test_log_count(&daemon_, "by the copy kernel"), 0);
}
END_TEST

Suite *device_copy_suite(void)
{
	Suite *s = suite_create("device_copy");
	TCase *tc = tcase_create("kernel");
	tcase_add_checked_fixture(tc, setup_kernel, teardown);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, to_client_on_one_device_by_kernel);
	tcase_add_test(tc, small_or_unaligned_stays_a_command);
	tcase_add_test(tc, larger_than_a_binding_in_slices);
	tcase_add_test(tc, to_client_between_devices_by_kernel);
	tcase_add_test(tc, tensor_rows_by_kernel_and_not);
	tcase_add_test(tc, launches_after_a_kernel_copy);
	tcase_add_test(tc, all_reduce_by_device_copies);
	suite_add_tcase(s, tc);
	TCase *lanes = tcase_create("kernel_in_lanes");
	tcase_add_checked_fixture(lanes, setup_kernel_lanes, teardown);
	tcase_set_timeout(lanes, 120);
	tcase_add_test(lanes, to_client_on_one_device_by_kernel);
	tcase_add_test(lanes, launches_after_a_kernel_copy);
	tcase_add_test(lanes, all_reduce_by_device_copies);
	suite_add_tcase(s, lanes);
	TCase *plain = tcase_create("default");
	tcase_add_checked_fixture(plain, setup_default, teardown);
	tcase_set_timeout(plain, 60);
	tcase_add_test(plain, default_is_the_command);
	suite_add_tcase(s, plain);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(device_copy_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
