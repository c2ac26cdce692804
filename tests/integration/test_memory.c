/* Memory through rudad: pooled allocation, try_empty, accounting, clean-up
 * after killed clients. */
#include <check.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	/* these fill the device's heap to see the driver's verdicts: no
	 * quota (the default is a share of the heap; test_hang checks it) */
	const char *args[] = {"--set", "max_memory_per_client=unlimited", "--set",
			      "max_memory_per_uid=unlimited", NULL};
	test_daemon_start(&daemon_, args);
	client = test_connect(&daemon_, "test_memory");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

START_TEST(try_empty_verdicts)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_try_empty(client, p.max_buffer_size + 1, &h),
			 RUDA_ERROR_TOO_LARGE);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "allocating"));
	/* a refused try leaves nothing behind, and no asynchronous error */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0);
	ck_assert_int_eq(ruda_client_try_empty(client, 4096, &h), RUDA_OK);
	ck_assert_uint_eq(h.size, 4096);
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 3);
	ck_assert_int_eq(ruda_client_write(client, h, 0, data, sizeof(data)), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
}
END_TEST

/* memory_usage is this client's: another client's buffers do not show in
 * its seed fields (allocations, bytes in use, padding, reserved) or pages;
 * the device_* fields are the device's, the same for both. */
START_TEST(memory_usage_is_per_client)
{
	ruda_client *idle = test_connect(&daemon_, "idle");
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	ruda_memory_usage base = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(idle, &base), RUDA_OK);
	/* ten small buffers (shared pages) and one over 64 MiB (a page of its
	 * own on every device: above a quarter page, pages are <= 256 MiB) */
	ruda_handle small[10], big;
	for (int i = 0; i < 10; i++)
		ck_assert_int_eq(ruda_client_try_empty(client, 1000 + (uint64_t)i, &small[i]),
				 RUDA_OK);
	ck_assert_int_eq(ruda_client_try_empty(client, (64u << 20) + 4096, &big), RUDA_OK);
	uint8_t data[1000], back[1000];
	test_fill_random(data, sizeof(data), 9);
	ck_assert_int_eq(ruda_client_write(client, small[0], 0, data, sizeof(data)), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	ruda_memory_usage mine = RUDA_MEMORY_USAGE_INIT, theirs = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &mine), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(idle, &theirs), RUDA_OK);
	uint64_t asked = (64u << 20) + 4096 + 10 * 1000 + 45;
	ck_assert_uint_eq(mine.allocations, 11);
	ck_assert_uint_eq(mine.bytes_in_use, asked);
	ck_assert_uint_gt(mine.bytes_padding, 0); /* sizes of 1000-1009 bytes are aligned */
	ck_assert_uint_eq(mine.bytes_reserved, mine.bytes_in_use + mine.bytes_padding);
	ck_assert_uint_eq(mine.bytes_reserved, mine.uid_bytes); /* the idle one holds none */
	ck_assert_uint_eq(mine.pages, 1); /* the big one's */
	/* before, the idle client read the device's bytes and pages here */
	ck_assert_uint_eq(theirs.allocations, 0);
	ck_assert_uint_eq(theirs.bytes_in_use, 0);
	ck_assert_uint_eq(theirs.bytes_padding, 0);
	ck_assert_uint_eq(theirs.bytes_reserved, 0);
	ck_assert_uint_eq(theirs.pages, 0);
	/* the device's figures: the same for both, the big page and a shared one */
	ck_assert_uint_eq(mine.device_bytes_reserved, theirs.device_bytes_reserved);
	ck_assert_uint_eq(mine.device_pages, theirs.device_pages);
	ck_assert_uint_ge(theirs.device_bytes_reserved,
			  base.device_bytes_reserved + mine.bytes_reserved);
	ck_assert_uint_ge(theirs.device_pages, base.device_pages + 1);
	ck_assert_uint_ge(theirs.device_bytes_reserved, mine.bytes_reserved);

	/* released: the client's figures go back to 0 */
	for (int i = 1; i < 10; i++)
		ck_assert_int_eq(ruda_client_release(client, small[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(client, big), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &mine), RUDA_OK);
	ck_assert_uint_eq(mine.allocations, 1);
	ck_assert_uint_eq(mine.bytes_in_use, 1000);
	ck_assert_uint_eq(mine.pages, 0);
	ck_assert_uint_eq(mine.bytes_reserved, mine.bytes_in_use + mine.bytes_padding);
	/* the buffer kept is intact beside the idle client's queries */
	ck_assert_int_eq(ruda_client_read_one(client, small[0], back), RUDA_OK);
	ck_assert_mem_eq(data, back, sizeof(data));
	ruda_client_close(idle);
}
END_TEST

/* More than the device's memory heap holds, in buffers each under the
 * size limit: OUT_OF_MEMORY, at once and naming the allocation. The heap is
 * filled with buffers of at most the largest size one buffer may have (a
 * quarter of lavapipe's heap, several dozen of an H200's); the driver may
 * run out before the heap's reported size, which is the same verdict. */
START_TEST(try_empty_out_of_memory)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	uint64_t heap = p.device_local_bytes;
	ck_assert_uint_gt(heap, 0);
	uint64_t big = heap / 4 * 3;
	if (big > p.max_buffer_size)
		big = p.max_buffer_size;
	enum { MAX_FILL = 256 };
	ruda_handle fill[MAX_FILL], b;
	int n = 0;
	uint64_t left = heap;
	ruda_status st = RUDA_OK;
	while (left >= big && n < MAX_FILL) {
		st = ruda_client_try_empty(client, big, &fill[n]);
		if (st != RUDA_OK)
			break;
		n++;
		left -= big;
	}
	ck_assert_int_gt(n, 0);
	uint64_t more = left + (1u << 20) <= big ? left + (1u << 20) : big;
	if (st == RUDA_OK)
		st = ruda_client_try_empty(client, more, &b);
	ck_assert_int_eq(st, RUDA_ERROR_OUT_OF_MEMORY);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "allocating"));
	/* nothing left behind; the room comes back with the buffers */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	for (int i = 0; i < n; i++)
		ruda_client_release(client, fill[i]);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	test_wait_for_stats(client, 1, 0);
	ck_assert_int_eq(ruda_client_try_empty(client, more, &b), RUDA_OK);
	ruda_client_release(client, b);
}
END_TEST

/* Small buffers share pages: a thousand of them do not take a thousand
 * device allocations, and their bytes are accounted exactly. */
START_TEST(small_buffers_share_pages)
{
	enum { N = 1000, SIZE = 1000 };
	ruda_handle h[N];
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ruda_client_empty(client, SIZE, &h[i]), RUDA_OK);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, N);
	ck_assert_uint_eq(u.bytes_in_use, (uint64_t)N * SIZE);
	ck_assert_uint_gt(u.bytes_padding, 0); /* rounded to the alignment */
	ck_assert_uint_lt(u.bytes_padding, (uint64_t)N * 1024);
	/* a page or two, not one allocation per buffer */
	ck_assert_uint_le(u.device_pages, 2);
	/* neighbours in one page keep their own bytes */
	for (int i = 0; i < N; i += 97) {
		uint8_t data[SIZE], back[SIZE];
		memset(data, i & 0xff, SIZE);
		ruda_client_write(client, h[i], 0, data, SIZE);
		ck_assert_int_eq(ruda_client_read_one(client, h[i], back), RUDA_OK);
		ck_assert_int_eq(memcmp(data, back, SIZE), 0);
	}
	for (int i = 0; i < N; i++)
		ruda_client_release(client, h[i]);
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0);
	ck_assert_uint_eq(u.bytes_in_use, 0);
	ck_assert_uint_eq(u.bytes_padding, 0);
	ck_assert_int_eq(ruda_client_memory_compact(client), RUDA_OK);
}
END_TEST

/* A 100 MiB buffer (a page of its own) made beside `base`'s memory and
 * released, the release waited for: the usage while it lived. */
static ruda_memory_usage big_buffer_made_and_released(ruda_client *c,
						      const ruda_memory_usage *base)
{
	ruda_handle big;
	ruda_memory_usage full = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_empty(c, 100u << 20, &big), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(c, &full), RUDA_OK);
	ck_assert_uint_ge(full.device_bytes_reserved, base->device_bytes_reserved + (100u << 20));
	ruda_client_release(c, big);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	return full;
}

/* Empty pages are given back by cleanup (after the last one kept). A
 * released buffer's memory goes once the work that used it is over, its
 * zero fill included: a sync waits for that. */
START_TEST(cleanup_gives_pages_back)
{
	ruda_memory_usage before = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage full = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage after = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &before), RUDA_OK);
	ruda_handle h[64];
	for (int i = 0; i < 64; i++)
		ruda_client_empty(client, 1 << 20, &h[i]);
	ck_assert_int_eq(ruda_client_memory_usage(client, &full), RUDA_OK);
	ck_assert_uint_ge(full.device_bytes_reserved, before.device_bytes_reserved + (64u << 20));
	for (int i = 0; i < 64; i++)
		ruda_client_release(client, h[i]);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &after), RUDA_OK);
	ck_assert_uint_le(after.device_bytes_reserved, before.device_bytes_reserved);
	/* large buffers have memory of their own, kept on release for the
	 * next buffer of their size (the heap is more than 8 x 100 MiB here),
	 * given back by cleanup */
	ruda_handle big;
	ruda_memory_usage kept = RUDA_MEMORY_USAGE_INIT, again = RUDA_MEMORY_USAGE_INIT;
	full = big_buffer_made_and_released(client, &after);
	ck_assert_int_eq(ruda_client_memory_usage(client, &kept), RUDA_OK);
	ck_assert_uint_eq(kept.device_bytes_reserved, full.device_bytes_reserved);
	ck_assert_uint_eq(kept.allocations, 0);
	ck_assert_uint_eq(kept.bytes_in_use, 0);
	/* the same size again takes the kept page; another size does not */
	ck_assert_int_eq(ruda_client_empty(client, 100u << 20, &big), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &again), RUDA_OK);
	ck_assert_uint_eq(again.device_pages, kept.device_pages);
	ck_assert_uint_eq(again.device_bytes_reserved, kept.device_bytes_reserved);
	ruda_client_release(client, big);
	ck_assert_int_eq(ruda_client_empty(client, 101u << 20, &big), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &again), RUDA_OK);
	ck_assert_uint_eq(again.device_pages, kept.device_pages + 1);
	ruda_client_release(client, big);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(client, &again), RUDA_OK);
	ck_assert_uint_eq(again.device_bytes_reserved, after.device_bytes_reserved);
}
END_TEST

static int allocate_some(ruda_client *c, void *arg)
{
	(void)arg;
	static uint8_t data[10 * 8192] = {1};
	ruda_handle h;
	for (int i = 0; i < 10; i++)
		ruda_client_create(c, data, 8192 * (size_t)(i + 1), &h);
	ruda_client_empty(c, 3u << 20, &h);
	ruda_client_sync(c);
	return 0;
}

/* 100 clients that allocate and are killed leave memory and fds as they
 * were. */
START_TEST(back_to_baseline_after_kills)
{
	ruda_daemon_stats base = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(client, &base), RUDA_OK);
	int fds = test_settled_fds(daemon_.pid);
	for (int round = 0; round < 100; round++)
		test_kill(test_fork_client(&daemon_, "victim", allocate_some, NULL));
	ruda_daemon_stats after = test_wait_for_stats(client, 1, base.device_bytes);
	ck_assert_uint_eq(after.sessions, 1);
	ck_assert_uint_eq(after.device_bytes, base.device_bytes);
	ck_assert_uint_eq(after.device_buffers, base.device_buffers);
	ck_assert_int_eq(test_settled_fds(daemon_.pid), fds);
}
END_TEST

/* Quotas per client and per uid, from the daemon's configuration. */
START_TEST(quotas_enforced)
{
	struct test_daemon d;
	const char *args[] = {"--set", "max_memory_per_client=5M", "--set",
			      "max_memory_per_uid=6M", NULL};
	test_daemon_start(&d, args);
	ruda_client *a = test_connect(&d, "a"), *b = test_connect(&d, "b");
	ruda_handle h;
	ck_assert_int_eq(ruda_client_try_empty(a, 4u << 20, &h), RUDA_OK);
	/* a's own quota: 4 + 2 > 5 MiB */
	ck_assert_int_eq(ruda_client_try_empty(a, 2u << 20, &h), RUDA_ERROR_QUOTA);
	char why[256];
	ruda_client_last_error(a, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "quota"));
	/* the uid's: 4 + 3 > 6 MiB, though b alone is under its own */
	ck_assert_int_eq(ruda_client_try_empty(b, 3u << 20, &h), RUDA_ERROR_QUOTA);
	ck_assert_int_eq(ruda_client_try_empty(b, 1u << 20, &h), RUDA_OK);
	/* asynchronous allocations report it at sync and on the buffer */
	ruda_handle big;
	ck_assert_int_eq(ruda_client_empty(b, 3u << 20, &big), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_ERROR_QUOTA);
	ck_assert_int_eq(ruda_client_check(b, &big, 1), RUDA_ERROR_QUOTA);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(b, &u), RUDA_OK);
	ck_assert_uint_eq(u.quota, 5u << 20);
	ck_assert_uint_eq(u.uid_bytes, 5u << 20);
	/* a leaving frees the uid's share */
	ruda_client_close(a);
	ruda_daemon_stats st = test_wait_for_stats(b, 1, 1u << 20);
	ck_assert_uint_eq(st.sessions, 1);
	ck_assert_int_eq(ruda_client_try_empty(b, 3u << 20, &h), RUDA_OK);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

/* Client b allocates and frees without pause while a fills its quota: a
 * gets exactly its share, b's churn neither takes from it nor is refused. */
struct churn {
	ruda_client *client;
	atomic_int stop;
	atomic_int refused, done;
};

static void *churn_run(void *arg)
{
	struct churn *ch = arg;
	while (!ch->stop) {
		ruda_handle h[3];
		for (int i = 0; i < 3; i++)
			if (ruda_client_try_empty(ch->client, 1u << 20, &h[i]) != RUDA_OK)
				ch->refused++;
			else
				ch->done++;
		for (int i = 0; i < 3; i++)
			ruda_client_release(ch->client, h[i]);
	}
	return NULL;
}

START_TEST(quota_per_client_while_another_allocates)
{
	struct test_daemon d;
	const char *args[] = {"--set", "max_memory_per_client=4M", NULL};
	test_daemon_start(&d, args);
	ruda_client *a = test_connect(&d, "a");
	struct churn ch = {.client = test_connect(&d, "b")};
	pthread_t thread;
	ck_assert_int_eq(pthread_create(&thread, NULL, churn_run, &ch), 0);
	/* the two overlap however the threads are scheduled: b is churning
	 * before a starts, and a goes on until b has churned meanwhile */
	while (atomic_load(&ch.done) < 3)
		usleep(1000);
	int before = atomic_load(&ch.done);
	ruda_handle h[5];
	for (int round = 0; round < 5 || (atomic_load(&ch.done) - before < 9 && round < 1000);
	     round++) {
		for (int i = 0; i < 4; i++)
			ck_assert_int_eq(ruda_client_try_empty(a, 1u << 20, &h[i]), RUDA_OK);
		ck_assert_int_eq(ruda_client_try_empty(a, 1u << 20, &h[4]), RUDA_ERROR_QUOTA);
		ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
		ck_assert_int_eq(ruda_client_memory_usage(a, &u), RUDA_OK);
		ck_assert_uint_eq(u.bytes_in_use, 4u << 20);
		for (int i = 0; i < 4; i++)
			ruda_client_release(a, h[i]);
		ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	}
	atomic_store(&ch.stop, 1);
	pthread_join(thread, NULL);
	ck_assert_int_eq(atomic_load(&ch.refused), 0);
	ck_assert_int_ge(atomic_load(&ch.done) - before, 9);
	ruda_client_close(a);
	ruda_client_close(ch.client);
	test_daemon_stop(&d);
}
END_TEST

/* A freed large buffer's page is kept for freed_memory_keep_ms, then given
 * back by itself; with 0 it is never kept. */
START_TEST(kept_pages_age_out)
{
	struct test_daemon d;
	const char *args[] = {"--set", "freed_memory_keep_ms=300", NULL};
	test_daemon_start(&d, args);
	ruda_client *c = test_connect(&d, "ager");
	ruda_memory_usage base = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage full = RUDA_MEMORY_USAGE_INIT;
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(c, &base), RUDA_OK);
	full = big_buffer_made_and_released(c, &base);
	ck_assert_int_eq(ruda_client_memory_usage(c, &u), RUDA_OK);
	ck_assert_uint_eq(u.device_bytes_reserved, full.device_bytes_reserved); /* kept */
	/* given back without any request: the daemon's own clock */
	int polls = 0;
	do {
		usleep(20000);
		ck_assert_int_eq(ruda_client_memory_usage(c, &u), RUDA_OK);
	} while (u.device_bytes_reserved != base.device_bytes_reserved && ++polls < 500);
	ck_assert_uint_eq(u.device_bytes_reserved, base.device_bytes_reserved);
	ck_assert_uint_eq(u.device_pages, base.device_pages);
	ruda_client_close(c);
	test_daemon_stop(&d);

	const char *none[] = {"--set", "freed_memory_keep_ms=0", NULL};
	test_daemon_start(&d, none);
	c = test_connect(&d, "keeps nothing");
	ck_assert_int_eq(ruda_client_memory_usage(c, &base), RUDA_OK);
	big_buffer_made_and_released(c, &base);
	ck_assert_int_eq(ruda_client_memory_usage(c, &u), RUDA_OK);
	ck_assert_uint_eq(u.device_bytes_reserved, base.device_bytes_reserved);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("memory");
	TCase *tc = tcase_create("memory");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 180);
	tcase_add_test(tc, try_empty_verdicts);
	tcase_add_test(tc, memory_usage_is_per_client);
	tcase_add_test(tc, try_empty_out_of_memory);
	tcase_add_test(tc, small_buffers_share_pages);
	tcase_add_test(tc, cleanup_gives_pages_back);
	tcase_add_test(tc, back_to_baseline_after_kills);
	suite_add_tcase(s, tc);
	TCase *config = tcase_create("configured");
	tcase_set_timeout(config, 60);
	tcase_add_test(config, quotas_enforced);
	tcase_add_test(config, quota_per_client_while_another_allocates);
	tcase_add_test(config, kept_pages_age_out);
	suite_add_tcase(s, config);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
