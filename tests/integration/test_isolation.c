/* Isolation between clients' memory, and frees off the loop: a buffer that
 * a client gets without writing it reads as zeros, even where another
 * client's bytes lay before (released, closed or killed); large frees run
 * in the thread pool while other clients go on. docs/memory.md,
 * "Isolation between clients" and "Freeing". */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_isolation");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* Sizes that land in shared pages on every device (a quarter page is at
 * least 1 MiB), odd ones included, and one buffer with memory of its own on
 * every device (above a quarter page, which is at most 64 MiB: pages are
 * 4 to 256 MiB; docs/memory.md). */
static const size_t shared_sizes[] = {1, 1000, 4096, 65536 + 12, 1u << 20, (1u << 20) - 3};
#define NSHARED (sizeof(shared_sizes) / sizeof(shared_sizes[0]))
#define DEDICATED_SIZE ((size_t)65 << 20)
#define PATTERN 0xa5

/* Allocate every size with empty, fill it with the pattern and check it
 * is there; the handles go to h (NSHARED + 1). */
static void fill_with_pattern(ruda_client *c, ruda_handle *h)
{
	uint8_t *data = malloc(DEDICATED_SIZE), *back = malloc(DEDICATED_SIZE);
	memset(data, PATTERN, DEDICATED_SIZE);
	for (size_t i = 0; i <= NSHARED; i++) {
		size_t size = i < NSHARED ? shared_sizes[i] : DEDICATED_SIZE;
		ck_assert_int_eq(ruda_client_empty(c, size, &h[i]), RUDA_OK);
		ck_assert_int_eq(ruda_client_write(c, h[i], 0, data, size), RUDA_OK);
	}
	for (size_t i = 0; i <= NSHARED; i++) {
		ck_assert_int_eq(ruda_client_read_one(c, h[i], back), RUDA_OK);
		ck_assert_int_eq(memcmp(back, data, h[i].size), 0);
	}
	free(data);
	free(back);
}

static void assert_zeros(const uint8_t *bytes, size_t size)
{
	for (size_t i = 0; i < size; i++)
		if (bytes[i])
			ck_abort_msg("byte %zu of %zu is 0x%02x, not 0", i, size, bytes[i]);
}

/* `client` allocates the same sizes in the same order: first fit puts the
 * shared ones where the pattern lay, in the page that held it, and the
 * dedicated one takes the kept page that held its pattern (no new page at
 * all: docs/memory.md, "Kept dedicated pages"). Every byte is 0. */
static void expect_zeros_where_pattern_was(void)
{
	ruda_memory_usage before = RUDA_MEMORY_USAGE_INIT, after = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &before), RUDA_OK);
	ck_assert_uint_ge(before.device_pages, 2); /* the empty shared page and the kept one */
	ruda_handle h[NSHARED + 1];
	for (size_t i = 0; i <= NSHARED; i++)
		ck_assert_int_eq(ruda_client_empty(client,
						   i < NSHARED ? shared_sizes[i] : DEDICATED_SIZE,
						   &h[i]),
				 RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &after), RUDA_OK);
	ck_assert_uint_eq(after.device_pages, before.device_pages);
	ck_assert_uint_eq(after.device_bytes_reserved, before.device_bytes_reserved);
	uint8_t *back = malloc(DEDICATED_SIZE);
	for (size_t i = 0; i <= NSHARED; i++) {
		memset(back, 0xff, DEDICATED_SIZE);
		ck_assert_int_eq(ruda_client_read_one(client, h[i], back), RUDA_OK);
		assert_zeros(back, h[i].size);
	}
	free(back);
	for (size_t i = 0; i <= NSHARED; i++)
		ck_assert_int_eq(ruda_client_release(client, h[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}

/* The other client releases its buffers and stays connected. */
START_TEST(empty_after_release_reads_zeros)
{
	ruda_client *a = test_connect(&daemon_, "a");
	ruda_handle h[NSHARED + 1];
	fill_with_pattern(a, h);
	for (size_t i = 0; i <= NSHARED; i++)
		ck_assert_int_eq(ruda_client_release(a, h[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(a, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0);
	ck_assert_uint_eq(u.device_pages, 2); /* the shared page, empty, and the dedicated one, kept */
	expect_zeros_where_pattern_was();
	ruda_client_close(a);
}
END_TEST

/* The other client disconnects holding its buffers. */
START_TEST(empty_after_close_reads_zeros)
{
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	ruda_client *a = test_connect(&daemon_, "a");
	ruda_handle h[NSHARED + 1];
	fill_with_pattern(a, h);
	ruda_client_close(a);
	test_wait_for_stats(client, 1, base.device_bytes);
	expect_zeros_where_pattern_was();
}
END_TEST

/* Every size allocated with empty and written with the pattern, synced. */
static int write_the_pattern(ruda_client *c, void *arg)
{
	(void)arg;
	static uint8_t data[DEDICATED_SIZE];
	memset(data, PATTERN, sizeof(data));
	for (size_t i = 0; i <= NSHARED; i++) {
		ruda_handle h;
		size_t size = i < NSHARED ? shared_sizes[i] : DEDICATED_SIZE;
		if (ruda_client_empty(c, size, &h) != RUDA_OK ||
		    ruda_client_write(c, h, 0, data, size) != RUDA_OK)
			return 1;
	}
	return ruda_client_sync(c) != RUDA_OK;
}

/* The other client is killed holding its buffers. */
START_TEST(empty_after_kill_reads_zeros)
{
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	pid_t pid = test_fork_client(&daemon_, "killed", write_the_pattern, NULL);
	ruda_daemon_stats held = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &held), RUDA_OK);
	ck_assert_uint_eq(held.device_buffers, base.device_buffers + NSHARED + 1);
	test_kill(pid);
	ruda_daemon_stats after = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(after.device_buffers, base.device_buffers);
	expect_zeros_where_pattern_was();
}
END_TEST

/* A pitched tensor (rows padded to 4096 bytes) and two tensors of one
 * call, where another client's pattern lay: their bytes, padding and the
 * gap between them included, read as zeros. */
START_TEST(empty_tensors_read_zeros)
{
	enum { ROWS = 37, COLS = 1001, PITCH = 1024 };
	size_t span = (size_t)ROWS * PITCH * 4;
	ruda_client *a = test_connect(&daemon_, "a");
	uint8_t *data = malloc(span * 2), *back = malloc(span * 2);
	memset(data, PATTERN, span * 2);
	ruda_handle dirty;
	ck_assert_int_eq(ruda_client_create(a, data, span * 2, &dirty), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(a, dirty), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_close(a);

	ruda_layout_desc d = {.struct_size = sizeof(ruda_layout_desc),
		.strategy = RUDA_LAYOUT_OPTIMIZED, .rank = 2,
			      .shape = {ROWS, COLS}, .elem_size = 4};
	ruda_layout l = RUDA_LAYOUT_INIT;
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_OK);
	ck_assert_uint_eq(l.strides[0], PITCH); /* pitched: padding after every row */
	ck_assert_uint_eq(l.handle.offset, 0); /* where the pattern began */
	ck_assert_uint_ge(l.handle.size, (size_t)(ROWS - 1) * PITCH * 4 + COLS * 4);
	memset(back, 0xff, span * 2);
	ck_assert_int_eq(ruda_client_read_one(client, l.handle, back), RUDA_OK);
	assert_zeros(back, l.handle.size);
	ck_assert_int_eq(ruda_client_release(client, l.handle), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	/* two tensors in one buffer: each reads as zeros, and so does the
	 * gap that aligns the second (read through a view of the buffer) */
	ruda_layout_desc two[2] = {
		{.struct_size = sizeof(ruda_layout_desc), .strategy = RUDA_LAYOUT_CONTIGUOUS,
		 .rank = 1, .shape = {1001}, .elem_size = 1},
		{.strategy = RUDA_LAYOUT_OPTIMIZED, .rank = 2, .shape = {ROWS, COLS},
		 .elem_size = 4},
	};
	ruda_layout lt[2] = {RUDA_LAYOUT_INIT};
	ck_assert_int_eq(ruda_client_empty_tensors(client, two, 2, lt), RUDA_OK);
	ck_assert_uint_eq(lt[0].handle.id, lt[1].handle.id);
	ck_assert_uint_gt(lt[1].handle.offset, 1001); /* a gap lies between */
	ruda_handle whole = {.id = lt[0].handle.id, .offset = 0,
			     .size = lt[1].handle.offset + lt[1].handle.size};
	memset(back, 0xff, span * 2);
	ck_assert_int_eq(ruda_client_read_one(client, whole, back), RUDA_OK);
	assert_zeros(back, whole.size);
	ruda_client_release(client, lt[0].handle);
	ruda_client_release(client, lt[1].handle);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	free(data);
	free(back);
}
END_TEST

/* A buffer allocated on one stream and read on another at once reads
 * zeros: the fill reaches the queue before the other stream's read. */
START_TEST(empty_on_one_stream_read_on_another)
{
	ruda_client *a = test_connect(&daemon_, "a");
	ruda_handle dirty;
	static uint8_t data[1u << 20], back[1u << 20];
	memset(data, PATTERN, sizeof(data));
	ck_assert_int_eq(ruda_client_create(a, data, sizeof(data), &dirty), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_release(a, dirty);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_close(a);

	/* the arena imported already: the read below waits for nothing */
	ruda_handle warm;
	ck_assert_int_eq(ruda_client_create(client, data, 4096, &warm), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, warm, back), RUDA_OK);
	ck_assert_int_eq(ruda_client_set_stream(client, 1), RUDA_OK);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(client, sizeof(back), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_set_stream(client, 2), RUDA_OK);
	memset(back, 0xff, sizeof(back));
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	assert_zeros(back, sizeof(back));
}
END_TEST

/* Writes from a new buffer's start in order stand for its fill where they
 * reach (create, split through the arena or not); the rest reads zeros, and
 * a write elsewhere, a launch or a read zero it first. */
START_TEST(partial_writes_leave_zeros)
{
	enum { SIZE = 1u << 20, Q = SIZE / 4 };
	static uint8_t dirty[SIZE], data[SIZE], back[SIZE], expect[SIZE];
	ruda_client *a = test_connect(&daemon_, "a");
	ruda_handle h;
	memset(dirty, PATTERN, sizeof(dirty));
	ck_assert_int_eq(ruda_client_create(a, dirty, SIZE, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_release(a, h);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_close(a);

	test_fill_random(data, sizeof(data), 7);
	/* [0, Q) in order, then [2Q, 3Q) out of order */
	ck_assert_int_eq(ruda_client_empty(client, SIZE, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_write(client, h, 0, data, Q), RUDA_OK);
	ck_assert_int_eq(ruda_client_write(client, h, 2 * Q, data + 2 * Q, Q), RUDA_OK);
	memset(expect, 0, sizeof(expect));
	memcpy(expect, data, Q);
	memcpy(expect + 2 * Q, data + 2 * Q, Q);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, expect, SIZE), 0);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	/* an odd size written whole, and a whole buffer in pieces in order */
	ruda_handle odd, pieces;
	ck_assert_int_eq(ruda_client_create(client, data, SIZE - 3, &odd), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(client, SIZE, &pieces), RUDA_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_write(client, pieces, (uint64_t)i * Q, data + i * Q, Q),
				 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, odd, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, SIZE - 3), 0);
	ck_assert_int_eq(ruda_client_read_one(client, pieces, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data, SIZE), 0);
	ruda_client_release(client, odd);
	ruda_client_release(client, pieces);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* The same from a staging region: a create from staging stands for its
 * fill, a partial in-order write leaves zeros after it, and a write out of
 * order leaves zeros around it. Dirty memory first, so zeros are earned. */
START_TEST(staging_writes_leave_zeros)
{
	enum { SIZE = 1u << 20, Q = SIZE / 4 };
	static uint8_t dirty[SIZE], back[SIZE], expect[SIZE];
	ruda_client *a = test_connect(&daemon_, "a");
	ruda_handle h;
	memset(dirty, PATTERN, sizeof(dirty));
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ruda_client_create(a, dirty, SIZE, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_close(a);

	ruda_staging st;
	ck_assert_int_eq(ruda_client_staging_create(client, SIZE, &st), RUDA_OK);
	test_fill_random(st.data, SIZE, 9);
	ruda_handle whole, head, middle;
	ck_assert_int_eq(ruda_client_create_from_staging(client, &st, 0, SIZE, &whole), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(client, SIZE, &head), RUDA_OK);
	ck_assert_int_eq(ruda_client_write_from_staging(client, head, 0, &st, 0, Q), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(client, SIZE, &middle), RUDA_OK);
	ck_assert_int_eq(ruda_client_write_from_staging(client, middle, 2 * Q, &st, 2 * Q, Q),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	ck_assert_int_eq(ruda_client_read_one(client, whole, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, st.data, SIZE), 0);
	memset(expect, 0, sizeof(expect));
	memcpy(expect, st.data, Q);
	ck_assert_int_eq(ruda_client_read_one(client, head, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, expect, SIZE), 0);
	memset(expect, 0, sizeof(expect));
	memcpy(expect + 2 * Q, (uint8_t *)st.data + 2 * Q, Q);
	ck_assert_int_eq(ruda_client_read_one(client, middle, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, expect, SIZE), 0);
	ruda_client_release(client, whole);
	ruda_client_release(client, head);
	ruda_client_release(client, middle);
	ruda_client_staging_release(client, &st);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* ---- frees off the loop ------------------------------------------------ */

struct round_trips {
	ruda_client *client;
	atomic_int stop;
	atomic_int done, wrong;
};

static void *round_trips_run(void *arg)
{
	struct round_trips *rt = arg;
	uint8_t data[4096], back[4096];
	ruda_handle h;
	if (ruda_client_empty(rt->client, sizeof(data), &h) != RUDA_OK) {
		rt->wrong++;
		return NULL;
	}
	for (uint64_t seed = 1; !atomic_load(&rt->stop); seed++) {
		test_fill_random(data, sizeof(data), seed);
		if (ruda_client_write(rt->client, h, 0, data, sizeof(data)) != RUDA_OK ||
		    ruda_client_read_one(rt->client, h, back) != RUDA_OK ||
		    memcmp(data, back, sizeof(data)) != 0)
			rt->wrong++;
		rt->done++;
	}
	ruda_client_release(rt->client, h);
	return NULL;
}

/* A client frees a large buffer (memory of its own, given back by a
 * cleanup and freed in the thread pool) while another does round trips: every round trip is right, the
 * memory figures drop as soon as the free is processed, and the daemon
 * is back to its baseline. */
START_TEST(large_free_while_another_round_trips)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	uint64_t big = p.max_buffer_size < (1ull << 30) ? p.max_buffer_size : (1ull << 30);
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	ruda_memory_usage before = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage held = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage after = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &before), RUDA_OK);

	struct round_trips rt = {.client = test_connect(&daemon_, "b")};
	pthread_t thread;
	ck_assert_int_eq(pthread_create(&thread, NULL, round_trips_run, &rt), 0);
	/* its buffer (and the shared page under it) exists before the figures
	 * are compared */
	while (atomic_load(&rt.done) < 1 && atomic_load(&rt.wrong) == 0)
		usleep(1000);
	for (int round = 0; round < 3; round++) {
		ruda_handle h;
		ck_assert_int_eq(ruda_client_try_empty(client, big, &h), RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
		/* no empty page kept: the cleanup below then frees only the
		 * big buffer's (kept on release: docs/memory.md) */
		ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
		ck_assert_int_eq(ruda_client_memory_usage(client, &held), RUDA_OK);
		ck_assert_uint_ge(held.device_bytes_reserved, before.device_bytes_reserved + big);
		int done = atomic_load(&rt.done);
		ck_assert_int_eq(ruda_client_release(client, h), RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
		ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
		/* the figures drop when the free is processed, not when the
		 * driver has the memory back */
		ck_assert_int_eq(ruda_client_memory_usage(client, &after), RUDA_OK);
		ck_assert_uint_eq(after.allocations, 0);
		ck_assert_uint_eq(after.device_bytes_reserved, held.device_bytes_reserved - big);
		ck_assert_uint_eq(after.device_pages, held.device_pages - 1);
		/* the other client went on meanwhile */
		while (atomic_load(&rt.done) < done + 3)
			usleep(1000);
	}
	atomic_store(&rt.stop, 1);
	pthread_join(thread, NULL);
	ck_assert_int_eq(atomic_load(&rt.wrong), 0);
	ruda_client_close(rt.client);
	ruda_daemon_stats end = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(end.device_buffers, base.device_buffers);
	/* the other client's small buffer left an empty shared page, kept */
	ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &after), RUDA_OK);
	ck_assert_uint_eq(after.device_bytes_reserved, before.device_bytes_reserved);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("isolation");
	TCase *tc = tcase_create("zeros");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, empty_after_release_reads_zeros);
	tcase_add_test(tc, empty_after_close_reads_zeros);
	tcase_add_test(tc, empty_after_kill_reads_zeros);
	tcase_add_test(tc, empty_tensors_read_zeros);
	tcase_add_test(tc, empty_on_one_stream_read_on_another);
	tcase_add_test(tc, partial_writes_leave_zeros);
	tcase_add_test(tc, staging_writes_leave_zeros);
	suite_add_tcase(s, tc);
	TCase *frees = tcase_create("frees");
	tcase_add_checked_fixture(frees, setup, teardown);
	tcase_set_timeout(frees, 120);
	tcase_add_test(frees, large_free_while_another_round_trips);
	suite_add_tcase(s, frees);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
