/* Transfers between two logical devices of one physical device (lavapipe
 * opened twice): device copies through memory one device lends the other
 * (exported and imported as an opaque fd), in chunks of 64 KiB here
 * (RUDA_PEER_CHUNK) so that sizes around and past a window are cheap;
 * against the host-staging path rudad falls back to (export_memory=off),
 * and a client killed in the middle of a transfer. rudad logs at debug
 * level which path each transfer took; rudactl counts the bytes of each. */
#include <check.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#define CHUNK 65536u

static struct test_daemon daemon_;
static ruda_client *clients[2];

static void start(const char *extra, const char *extra2)
{
	static char admin[160];
	struct group *g = getgrgid(getegid());
	ck_assert_ptr_nonnull(g);
	snprintf(admin, sizeof(admin), "admin_group=%s", g->gr_name);
	setenv("RUDA_PEER_CHUNK", "65536", 1);
	setenv("RUDA_TEST_FAULTS", "1", 1); /* test_inject_device_loss */
	const char *args[] = {"--device", "0,0", "--set", "log_level=debug", "--set", admin,
			      extra ? "--set" : NULL, extra, extra2 ? "--set" : NULL, extra2, NULL};
	test_daemon_start(&daemon_, args);
	unsetenv("RUDA_TEST_FAULTS");
	for (uint32_t i = 0; i < 2; i++)
		clients[i] = test_connect_device(&daemon_, "test_peer_copy", i);
}

static void setup(void)
{
	start(NULL, NULL);
}

static void setup_no_export(void)
{
	start("export_memory=off", NULL);
}

/* No quotas: one client may fill the heap. */
static void setup_no_quota(void)
{
	start("max_memory_per_client=unlimited", "max_memory_per_uid=unlimited");
}

static void teardown(void)
{
	for (uint32_t i = 0; i < 2; i++) {
		ruda_client_close(clients[i]);
		clients[i] = NULL;
	}
	test_daemon_stop(&daemon_);
}

/* The output of `rudactl status` (with `json`: --json). */
static const char *ctl_status(int json)
{
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "%s --socket %s status%s", test_build_path("rudactl"),
		 daemon_.socket_path, json ? " --json" : "");
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	static char out[1 << 16];
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	return out;
}

/* The sum of every value of `key` in `rudactl status --json` (one per
 * device for a device's counter). */
static uint64_t ctl_sum(const char *key)
{
	const char *out = ctl_status(1);
	char quoted[64];
	snprintf(quoted, sizeof(quoted), "\"%s\": ", key);
	uint64_t sum = 0;
	int found = 0;
	for (const char *at = strstr(out, quoted); at; at = strstr(at + 1, quoted), found++)
		sum += strtoull(at + strlen(quoted), NULL, 10);
	ck_assert_msg(found, "no %s in %s", key, out);
	return sum;
}

static void check_to_client(ruda_client *from, ruda_client *to, size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size ? size : 1), *back = malloc(size ? size : 1);
	test_fill_random(data, size, seed);
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_create(from, data, size, &src), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(from, src, to, RUDA_ELEM_U8, &dst), RUDA_OK);
	ck_assert_uint_eq(dst.size, size);
	ck_assert_int_eq(ruda_client_release(from, src), RUDA_OK);
	memset(back, 0, size);
	ck_assert_int_eq(ruda_client_read_one(to, dst, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "%zu bytes differ", size);
	ck_assert_int_eq(ruda_client_release(to, dst), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(to), RUDA_OK);
	free(data);
	free(back);
}

/* Sizes in one window, exactly two chunks (one window), past a window
 * (through a copy on the source device, chunk by chunk), none a multiple
 * of the chunk but those that must be; both ways. */
static const size_t sizes[] = {1,	  3,	      4096,	     CHUNK - 1,	 CHUNK + 1,
			       2 * CHUNK, 2 * CHUNK + 5, 3 * CHUNK + 3, 17 * CHUNK + 7};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

START_TEST(to_client_by_device_copy)
{
	for (size_t i = 0; i < NSIZES; i++) {
		check_to_client(clients[0], clients[1], sizes[i], i + 1);
		check_to_client(clients[1], clients[0], sizes[i], i + 100);
	}
	ck_assert_int_eq(test_log_count(&daemon_, "through a "), 2 * NSIZES);
	ck_assert_int_eq(test_log_count(&daemon_, "through host staging"), 0);
	/* the three sizes past a window went in chunks */
	ck_assert_int_eq(test_log_count(&daemon_, "65536-byte chunks"), 2 * 3);
	uint64_t total = 0;
	for (size_t i = 0; i < NSIZES; i++)
		total += sizes[i];
	ck_assert_uint_eq(ctl_sum("peer_copy_bytes"), 2 * total); /* both ways */
	ck_assert_uint_eq(ctl_sum("staged_copy_bytes"), 0);
	/* windows are kept for reuse, a few */
	ck_assert_uint_ge(ctl_sum("peer_windows"), 1);
	ck_assert_uint_le(ctl_sum("peer_windows"), 4);
	const char *text = ctl_status(0);
	ck_assert_msg(strstr(text, "by device copy, 0 B through host staging"), "%s", text);
}
END_TEST

/* A strided tensor past a window: packed on the source device, then in
 * chunks. */
START_TEST(to_client_tensor_in_chunks)
{
	enum { ROWS = 301, COLS = 203 };
	uint32_t *m = malloc(ROWS * COLS * 4), *t = malloc(ROWS * COLS * 4);
	for (uint32_t i = 0; i < ROWS * COLS; i++)
		m[i] = i * 2654435761u;
	ruda_handle hm, ht;
	ck_assert_int_eq(ruda_client_create(clients[1], m, ROWS * COLS * 4, &hm), RUDA_OK);
	uint64_t shape[2] = {COLS, ROWS}, strides[2] = {1, COLS};
	ck_assert_int_eq(ruda_client_to_client_tensor(clients[1], hm, shape, strides, 2, 4,
						      clients[0], RUDA_ELEM_U32, &ht),
			 RUDA_OK);
	ck_assert_uint_eq(ht.size, ROWS * COLS * 4);
	ck_assert_int_eq(ruda_client_read_one(clients[0], ht, t), RUDA_OK);
	for (uint32_t c = 0; c < COLS; c++)
		for (uint32_t r = 0; r < ROWS; r++)
			ck_assert_uint_eq(t[c * ROWS + r], m[r * COLS + c]);
	ck_assert_int_eq(test_log_count(&daemon_, "65536-byte chunks"), 1);
	free(m);
	free(t);
}
END_TEST

/* `data` moved from client 0 to client 1, then `other` written into the
 * source on its stream: the moved bytes are `data` still, the source's
 * `other`. Returns the moved buffer; `back` holds its bytes. */
static ruda_handle move_then_overwrite(const uint8_t *data, const uint8_t *other, uint8_t *back,
				       size_t size)
{
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_create(clients[0], data, size, &src), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(clients[0], src, clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_write(clients[0], src, 0, other, size), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(clients[0], src, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, other, size), 0);
	ck_assert_int_eq(ruda_client_read_one(clients[1], dst, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, size), 0);
	return dst;
}

/* What the source's stream does after the request does not reach the
 * bytes moved, even those that cross in later chunks: they were copied
 * on the source device first, in order. */
START_TEST(to_client_keeps_stream_order)
{
	size_t size = 9 * CHUNK + 1;
	uint8_t *data = malloc(size), *back = malloc(size), *other = malloc(size);
	test_fill_random(data, size, 1);
	test_fill_random(other, size, 2);
	move_then_overwrite(data, other, back, size);
	free(data);
	free(back);
	free(other);
}
END_TEST

/* From 1 MiB of whole words the new buffer is a window of the source's
 * memory lent to the target: one copy, no chunks; released, the window is
 * kept for the next; the source's later writes do not reach it. */
START_TEST(to_client_into_lent_window)
{
	static const size_t lent[] = {1u << 20, (3u << 20) + 4, 8u << 20};
	for (size_t i = 0; i < 3; i++) {
		check_to_client(clients[0], clients[1], lent[i], i + 1);
		check_to_client(clients[1], clients[0], lent[i], i + 100);
	}
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 6);
	ck_assert_int_eq(test_log_count(&daemon_, "-byte chunks"), 0);
	/* one byte short of whole words: a buffer of the target's own */
	check_to_client(clients[0], clients[1], (1u << 20) + 3, 7);
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 6);
	ck_assert_uint_le(ctl_sum("peer_windows"), 4);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);

	size_t size = 2u << 20;
	uint8_t *data = malloc(size), *back = malloc(size), *other = malloc(size);
	test_fill_random(data, size, 11);
	test_fill_random(other, size, 12);
	ruda_handle dst = move_then_overwrite(data, other, back, size);
	/* and the target writes its own bytes into it */
	ck_assert_int_eq(ruda_client_write(clients[1], dst, 4096, other, 4096), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(clients[1], dst, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, 4096), 0);
	ck_assert_int_eq(memcmp(back + 4096, other, 4096), 0);
	ck_assert_int_eq(memcmp(back + 8192, data + 8192, size - 8192), 0);
	free(data);
	free(back);
	free(other);
}
END_TEST

/* A window kept for reuse after its lent buffer was released holds half
 * the heap; a buffer that needs that memory takes it back (the allocator
 * asks the window cache before answering OUT_OF_MEMORY). */
START_TEST(kept_window_given_back_when_the_heap_is_full)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_device_properties(clients[0], ruda_client_device_id(clients[0]), &p), RUDA_OK);
	uint64_t heap = p.device_local_bytes, window = 1;
	while (window * 2 <= heap / 2)
		window *= 2;
	if (window > (1ull << 30) || window < (64ull << 20)) {
		printf("kept_window_given_back: a heap of %llu bytes: not tried\n",
		       (unsigned long long)heap);
		return;
	}
	/* half the window and a word: lent a window of `window` bytes */
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_empty(clients[0], window / 2 + 4, &src), RUDA_OK);
	ruda_status st = ruda_client_to_client(clients[0], src, clients[1], RUDA_ELEM_U8, &dst);
	char why[256] = "";
	ruda_client_last_error(clients[0], why, sizeof(why));
	ck_assert_msg(st == RUDA_OK, "to_client of %llu bytes (heap %llu): %s: %s",
		      (unsigned long long)(window / 2 + 4), (unsigned long long)heap,
		      ruda_strerror(st), why);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 1);
	ck_assert_int_eq(ruda_client_release(clients[0], src), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(clients[1], dst), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_uint_eq(ctl_sum("peer_window_bytes"), window);
	/* three quarters of the heap, beside half of it kept */
	uint64_t big = heap / 4 * 3;
	if (big > p.max_buffer_size)
		big = p.max_buffer_size;
	ck_assert_uint_gt(big + window, heap);
	ruda_handle b;
	ck_assert_int_eq(ruda_client_empty(clients[1], big, &b), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_int_eq(test_log_count(&daemon_, "given back: its heap is full"), 1);
	ck_assert_uint_eq(ctl_sum("peer_window_bytes"), 0);
	ck_assert_int_eq(ruda_client_release(clients[1], b), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
}
END_TEST

/* The source device lost while the target holds a buffer lent from its
 * memory: the target's buffer keeps its bytes (the import holds the
 * memory), and everything goes once it is released. */
START_TEST(lent_window_outlives_its_source_device)
{
	size_t size = 4u << 20;
	uint8_t *data = malloc(size), *back = malloc(size);
	test_fill_random(data, size, 21);
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_create(clients[0], data, size, &src), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(clients[0], src, clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 1);
	uint32_t closed = 0;
	ck_assert_int_eq(test_inject_device_loss(&daemon_, 0, &closed), RUDA_OK);
	ck_assert_uint_ge(closed, 1);
	ruda_client_close(clients[0]);
	clients[0] = NULL;
	memset(back, 0, size);
	ck_assert_int_eq(ruda_client_read_one(clients[1], dst, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, size), 0);
	ck_assert_int_eq(ruda_client_release(clients[1], dst), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK);
	ck_assert_uint_eq(test_wait_for_stats(clients[1], 1, 0).device_bytes, 0);
	/* the re-created device 0 lends again */
	clients[0] = test_connect_device(&daemon_, "test_peer_copy", 0);
	check_to_client(clients[0], clients[1], size, 22);
	ck_assert_int_eq(test_log_count(&daemon_, "lent as the new buffer"), 2);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);
	free(data);
	free(back);
}
END_TEST

/* all-reduce between the two against a CPU reference (sums of small
 * integers: exact in any order), sizes around the chunk; it goes through
 * host staging (the reduction runs on the host) and says so. */
START_TEST(all_reduce_two_logical_devices)
{
	static const size_t counts[] = {1, CHUNK / 4 - 1, CHUNK / 4 + 3, 5 * CHUNK + 7};
	ruda_device_id ids[2] = {ruda_client_device_id(clients[0]),
				 ruda_client_device_id(clients[1])};
	for (uint32_t j = 0; j < 2; j++)
		ck_assert_int_eq(ruda_client_ensure_init_collective(clients[j], ids, 2), RUDA_OK);
	uint64_t staged = 0;
	for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		size_t n = counts[k], bytes = n * 4;
		float *in[2], *expect = malloc(bytes), *back = malloc(bytes);
		ruda_handle src[2], dst[2];
		for (uint32_t j = 0; j < 2; j++) {
			in[j] = malloc(bytes);
			for (size_t i = 0; i < n; i++)
				in[j][i] = (float)((i * 7 + j * 13 + k) % 1000);
			ck_assert_int_eq(ruda_client_create(clients[j], in[j], bytes, &src[j]),
					 RUDA_OK);
			ck_assert_int_eq(ruda_client_empty(clients[j], bytes, &dst[j]), RUDA_OK);
		}
		for (size_t i = 0; i < n; i++)
			expect[i] = in[0][i] + in[1][i];
		for (uint32_t j = 0; j < 2; j++)
			ck_assert_int_eq(ruda_client_all_reduce(clients[j], src[j], dst[j],
								RUDA_ELEM_F32, ids, 2, RUDA_REDUCE_SUM),
					 RUDA_OK);
		for (uint32_t j = 0; j < 2; j++)
			ck_assert_int_eq(ruda_client_sync_collective(clients[j]), RUDA_OK);
		for (uint32_t j = 0; j < 2; j++) {
			ck_assert_int_eq(ruda_client_read_one(clients[j], dst[j], back), RUDA_OK);
			ck_assert_msg(memcmp(back, expect, bytes) == 0, "%zu floats, device %u", n, j);
			ruda_client_release(clients[j], src[j]);
			ruda_client_release(clients[j], dst[j]);
			free(in[j]);
		}
		staged += 2 * bytes;
		free(expect);
		free(back);
	}
	ck_assert_int_eq(test_log_count(&daemon_, "all-reduce of "), 4);
	ck_assert_uint_eq(ctl_sum("staged_copy_bytes"), staged);
}
END_TEST

/* The fallback: no export (export_memory=off), the same transfers go
 * through host staging, with the same bytes. */
START_TEST(to_client_through_host_staging)
{
	for (size_t i = 0; i < NSIZES; i++)
		check_to_client(clients[0], clients[1], sizes[i], i + 200);
	ck_assert_int_eq(test_log_count(&daemon_, "through host staging (export_memory is off"), NSIZES);
	ck_assert_int_eq(test_log_count(&daemon_, "through a "), 0);
	ck_assert_uint_eq(ctl_sum("peer_copy_bytes"), 0);
	ck_assert_uint_eq(ctl_sum("peer_windows"), 0);
}
END_TEST

/* ---- a client killed in the middle of transfers ----------------------------- */

static int transfer_forever(ruda_client *c, void *arg)
{
	const struct test_daemon *d = arg;
	ruda_client *other = test_connect_device(d, "test_peer_copy", 1);
	/* in turns: into a lent window, and in 128 chunks each way (not whole
	 * words) */
	size_t size = (8u << 20) + 3;
	uint8_t *data = malloc(size);
	test_fill_random(data, size, 3);
	ruda_handle src[2], dst;
	if (ruda_client_create(c, data, size, &src[0]) != RUDA_OK ||
	    ruda_client_create(c, data, size - 3, &src[1]) != RUDA_OK)
		return 1;
	test_fork_ready();
	for (unsigned i = 0;; i++) {
		if (ruda_client_to_client(c, src[(i + 1) & 1], other, RUDA_ELEM_U8, &dst) != RUDA_OK)
			return 1;
		ruda_client_release(other, dst);
	}
}

START_TEST(killed_midway_leaves_nothing)
{
	ruda_daemon_stats before = test_wait_for_stats(clients[0], 2, 0);
	ck_assert_uint_eq(before.device_bytes, 0);
	for (int round = 0; round < 3; round++) {
		pid_t child = test_fork_client(&daemon_, "killed", transfer_forever, &daemon_);
		/* let some transfers start and end; kill it in the middle of one */
		struct timespec ts = {0, (60 + 70 * round) * 1000000L};
		nanosleep(&ts, NULL);
		test_kill(child);
		ruda_daemon_stats s = test_wait_for_stats(clients[0], 2, 0);
		ck_assert_uint_eq(s.sessions, 2);
		ck_assert_uint_eq(s.device_bytes, 0);
	}
	ck_assert_int_ge(test_log_count(&daemon_, "65536-byte chunks"), 1);
	ck_assert_int_ge(test_log_count(&daemon_, "lent as the new buffer"), 1);
	/* every window back in the cache (released) or gone: at most what it
	 * keeps, whatever was in flight when the client died */
	uint64_t windows = 0;
	for (int i = 0; i < 100; i++) {
		windows = ctl_sum("peer_windows");
		if (windows <= 4)
			break;
		usleep(50000);
	}
	ck_assert_uint_le(windows, 4);
	ck_assert_uint_le(ctl_sum("peer_window_bytes"), 2ull << 30);
	/* and the path still works */
	check_to_client(clients[0], clients[1], 3 * CHUNK + 3, 9);
	ck_assert_uint_eq(test_wait_for_stats(clients[0], 2, 0).device_bytes, 0);
}
END_TEST

Suite *peer_copy_suite(void)
{
	Suite *s = suite_create("peer_copy");
	TCase *tc = tcase_create("peer");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, to_client_by_device_copy);
	tcase_add_test(tc, to_client_tensor_in_chunks);
	tcase_add_test(tc, to_client_keeps_stream_order);
	tcase_add_test(tc, to_client_into_lent_window);
	tcase_add_test(tc, lent_window_outlives_its_source_device);
	tcase_add_test(tc, all_reduce_two_logical_devices);
	tcase_add_test(tc, killed_midway_leaves_nothing);
	suite_add_tcase(s, tc);
	TCase *heap = tcase_create("heap");
	tcase_add_checked_fixture(heap, setup_no_quota, teardown);
	tcase_set_timeout(heap, 120);
	tcase_add_test(heap, kept_window_given_back_when_the_heap_is_full);
	suite_add_tcase(s, heap);
	TCase *fallback = tcase_create("fallback");
	tcase_add_checked_fixture(fallback, setup_no_export, teardown);
	tcase_set_timeout(fallback, 60);
	tcase_add_test(fallback, to_client_through_host_staging);
	suite_add_tcase(s, fallback);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(peer_copy_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
