/* Allocation modes and windows, and buffers exported as file descriptors. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_allocation");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static uint64_t pages(void)
{
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	return u.device_pages;
}

struct window_task {
	ruda_handle h[3];
	const uint8_t *data;
	size_t size;
};

static void make_three(void *user)
{
	struct window_task *t = user;
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ruda_client_create(client, t->data, t->size, &t->h[i]), RUDA_OK);
}

/* In a dedicated window every buffer gets memory of its own, exportable;
 * after it, buffers are pooled again. */
START_TEST(dedicated_window_exports)
{
	enum { SIZE = 100000 };
	uint8_t *data = malloc(SIZE);
	test_fill_random(data, SIZE, 1);
	uint64_t before = pages();
	struct window_task t = {.data = data, .size = SIZE};
	ck_assert_int_eq(ruda_client_allocation_window(client, RUDA_ALLOCATION_DEDICATED,
						       make_three, &t),
			 RUDA_OK);
	ck_assert_uint_eq(pages(), before + 3);
	ck_assert_int_eq(ruda_client_sync_buffers(client, t.h, 3), RUDA_OK);
	ruda_resource r = RUDA_RESOURCE_INIT;
	ck_assert_int_eq(ruda_client_get_resource(client, t.h[1], &r), RUDA_OK);
	ck_assert_int_ge(r.fd, 0);
	ck_assert_uint_eq(r.size, SIZE);
	ck_assert_uint_eq(r.offset, 0);
	ck_assert_uint_ge(r.memory_size, SIZE);
	struct stat st;
	ck_assert_int_eq(fstat(r.fd, &st), 0);
	/* a second export is another fd of the same memory */
	ruda_resource again = RUDA_RESOURCE_INIT;
	ck_assert_int_eq(ruda_client_get_resource(client, t.h[1], &again), RUDA_OK);
	ck_assert_int_ne(again.fd, r.fd);
	ck_assert_uint_eq(again.memory_size, r.memory_size);
	ck_assert_int_eq(memcmp(again.device_uuid, r.device_uuid, sizeof(r.device_uuid)), 0);
	close(again.fd);
	close(r.fd);
	/* the window is over: a new small buffer is pooled and not exportable */
	ruda_handle pooled;
	ck_assert_int_eq(ruda_client_create(client, data, 1000, &pooled), RUDA_OK);
	ck_assert_int_eq(ruda_client_get_resource(client, pooled, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "dedicated"));
	/* exported memory outlives nothing it should: released buffers free it */
	for (int i = 0; i < 3; i++)
		ruda_client_release(client, t.h[i]);
	ruda_client_release(client, pooled);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	test_wait_for_stats(client, 1, 0);
	ck_assert_uint_le(pages(), before + 1);
	free(data);
}
END_TEST

START_TEST(get_resource_refusals)
{
	ruda_resource r = RUDA_RESOURCE_INIT;
	ruda_handle ghost = {.id = 77, .size = 4};
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, &r), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_get_resource(client, ghost, NULL),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_allocation_mode(client, (ruda_allocation_mode)7),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_allocation_window(client, RUDA_ALLOCATION_DEDICATED, NULL,
						       NULL),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* Persistent buffers keep to pages of their own: transient buffers freed
 * around them leave whole pages that cleanup gives back. */
START_TEST(persistent_buffers_keep_apart)
{
	uint64_t before = pages();
	ck_assert_int_eq(ruda_client_allocation_mode(client, RUDA_ALLOCATION_PERSISTENT),
			 RUDA_OK);
	ruda_handle weights[4], scratch[4];
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_empty(client, 50000, &weights[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_allocation_mode(client, RUDA_ALLOCATION_AUTO), RUDA_OK);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(ruda_client_empty(client, 50000, &scratch[i]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	uint64_t both = pages();
	ck_assert_uint_ge(both, before + 1);
	for (int i = 0; i < 4; i++)
		ruda_client_release(client, scratch[i]);
	ck_assert_int_eq(ruda_client_memory_cleanup(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	/* the transient page went; the persistent one holds the weights */
	ck_assert_uint_eq(pages(), both - 1);
	uint8_t data[50000], back[50000];
	test_fill_random(data, sizeof(data), 3);
	ck_assert_int_eq(ruda_client_write(client, weights[2], 0, data, sizeof(data)), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, weights[2], back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	for (int i = 0; i < 4; i++)
		ruda_client_release(client, weights[i]);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

/* ---- device memory made off the loop -------------------------------------- */

/* rudad's stand-in for a driver slow to allocate (RUDA_TEST_SLOW_ALLOCATION_MS:
 * every new device memory of 16 MiB or more takes this long). */
#define SLOW_MS 600
/* past a quarter of the largest shared page (256 MiB): memory of its own
 * on every device, never room in a page B's buffer made */
#define BIG (80u << 20)

/* rudad with slow allocations, and a client whose first page is made
 * (slowly) before the case starts: it holds `small`. */
static ruda_client *start_slow_on(struct test_daemon *d, const char *name, ruda_handle *small,
				  const char *devices, const char *set)
{
	/* no quota: one case fills the device's heap */
	const char *const args[] = {"--set",  "max_memory_per_client=unlimited",
				    "--set",  "max_memory_per_uid=unlimited",
				    "--device", devices,
				    set ? "--set" : NULL, set, NULL};
	setenv("RUDA_TEST_SLOW_ALLOCATION_MS", "600", 1);
	test_daemon_start(d, args);
	unsetenv("RUDA_TEST_SLOW_ALLOCATION_MS");
	ruda_client *c = test_connect(d, name);
	ck_assert_int_eq(ruda_client_empty(c, 4096, small), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	return c;
}

static ruda_client *start_slow(struct test_daemon *d, const char *name, ruda_handle *small)
{
	return start_slow_on(d, name, small, "0", NULL);
}

static void stop_slow(struct test_daemon *d, ruda_client *c, ruda_handle small)
{
	ruda_client_release(c, small);
	ruda_client_close(c);
	ck_assert_int_eq(test_daemon_stop(d), 0);
}

struct creator {
	const struct test_daemon *d;
	double seconds;
	int ok; /* written, read back and equal */
	int done;
	/* try_empty_in_full_heap: its client, the size, the buffer made */
	ruda_client *client;
	uint64_t size;
	ruda_handle made;
	uint32_t to_device; /* move_big: the device of the client it moves to */
	ruda_status status; /* try_empty_in_full_heap: its answer */
};

/* A client that creates a big buffer from data and reads it back. */
static void *create_big(void *arg)
{
	struct creator *c = arg;
	ruda_client *a = test_connect(c->d, "big buffer");
	uint8_t *data = malloc(BIG), *back = malloc(BIG);
	test_fill_random(data, BIG, 11);
	double t0 = test_now();
	ruda_handle h;
	c->ok = ruda_client_create(a, data, BIG, &h) == RUDA_OK &&
		ruda_client_read_one(a, h, back) == RUDA_OK && memcmp(data, back, BIG) == 0;
	c->seconds = test_now() - t0;
	ruda_client_release(a, h);
	ruda_client_close(a);
	free(data);
	free(back);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Run `work(c)` in a thread; meanwhile, `b`'s round trips: the longest,
 * and how many it made. */
static double longest_round_trip(ruda_client *b, void *(*work)(void *), struct creator *c,
				 int *count)
{
	pthread_t thread;
	ck_assert_int_eq(pthread_create(&thread, NULL, work, c), 0);
	double longest = 0;
	*count = 0;
	while (!__atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) {
		ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
		double t0 = test_now();
		ck_assert_int_eq(ruda_client_memory_usage(b, &u), RUDA_OK);
		double t = test_now() - t0;
		longest = t > longest ? t : longest;
		(*count)++;
		usleep(5000);
	}
	pthread_join(thread, NULL);
	return longest;
}

/* `work(c)` made a BIG buffer with a slow allocation, right, while `b`'s
 * round trips went on, none waiting for the allocation (on the loop, one
 * would have waited it out). */
static void served_beside(ruda_client *b, void *(*work)(void *), struct creator *c,
			  const char *what)
{
	int count;
	double longest = longest_round_trip(b, work, c, &count);
	printf("%s of %u MiB: %.3f s; %d round trips of another client beside it, the longest "
	       "%.3f s\n",
	       what, BIG >> 20, c->seconds, count, longest);
	ck_assert(c->ok);
	ck_assert(c->seconds >= SLOW_MS / 1000.0); /* the slow allocation happened */
	ck_assert_int_ge(count, 5);
	ck_assert(longest < SLOW_MS / 2000.0);
}

/* A big buffer's device memory is made in the thread pool: the client that
 * asked waits for it, the others are served meanwhile, and the buffer holds
 * what was written. */
START_TEST(big_allocation_leaves_the_loop_free)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow(&d, "round trips", &small);
	struct creator c = {.d = &d};
	served_beside(b, create_big, &c, "create + read");
	/* try_empty's verdict waits for its memory too, and is the buffer */
	double t0 = test_now();
	ruda_handle tried;
	ck_assert_int_eq(ruda_client_try_empty(b, BIG + (16u << 20), &tried), RUDA_OK);
	ck_assert(test_now() - t0 >= SLOW_MS / 1000.0);
	uint32_t *back = malloc(BIG + (16u << 20));
	ck_assert_int_eq(ruda_client_read_one(b, tried, back), RUDA_OK);
	for (size_t i = 0; i < (BIG + (16u << 20)) / 4; i += 4099)
		ck_assert_uint_eq(back[i], 0); /* zero filled, as every new buffer */
	free(back);
	ruda_client_release(b, tried);
	stop_slow(&d, b, small);
}
END_TEST

/* In a dedicated window: BIG bytes written, exported and read back. */
static void create_exported(void *user)
{
	struct creator *c = user;
	uint8_t *data = malloc(BIG), *back = malloc(BIG);
	test_fill_random(data, BIG, 12);
	ruda_handle h;
	ruda_resource r = RUDA_RESOURCE_INIT;
	c->ok = ruda_client_create(c->client, data, BIG, &h) == RUDA_OK &&
		ruda_client_get_resource(c->client, h, &r) == RUDA_OK && r.fd >= 0 &&
		r.memory_size >= BIG && ruda_client_read_one(c->client, h, back) == RUDA_OK &&
		memcmp(data, back, BIG) == 0;
	if (r.fd >= 0)
		close(r.fd);
	ruda_client_release(c->client, h);
	free(data);
	free(back);
}

static void *create_big_dedicated(void *arg)
{
	struct creator *c = arg;
	c->client = test_connect(c->d, "big exportable buffer");
	double t0 = test_now();
	if (ruda_client_allocation_window(c->client, RUDA_ALLOCATION_DEDICATED, create_exported,
					  c) != RUDA_OK)
		c->ok = 0;
	c->seconds = test_now() - t0;
	ruda_client_close(c->client);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Exportable memory, dedicated to its buffer, is made in the thread pool
 * too (with the buffer it is for): the other clients are served meanwhile,
 * and the buffer exports and holds what was written. */
START_TEST(exportable_allocation_leaves_the_loop_free)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow(&d, "round trips", &small);
	ruda_memory_usage u0 = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(b, &u0), RUDA_OK);
	uint64_t pages_before = u0.device_pages;
	ruda_daemon_stats s0 = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(b, &s0), RUDA_OK);
	struct creator c = {.d = &d};
	served_beside(b, create_big_dedicated, &c, "exportable create + export + read");
	/* its memory went with the buffer (exported memory is never kept):
	 * only b's buffer is left */
	test_wait_for_stats(b, 1, s0.device_bytes);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(b, &u), RUDA_OK);
	ck_assert_uint_eq(u.device_pages, pages_before);
	stop_slow(&d, b, small);
}
END_TEST

/* A client that creates a big buffer and moves it to another client of
 * the process (a new buffer there; on the daemon's second device when
 * `size` says so), read back from that one. */
static void *move_big(void *arg)
{
	struct creator *c = arg;
	ruda_client *a = test_connect_device(c->d, "test_allocation", 0);
	ruda_client *to = test_connect_device(c->d, "test_allocation", c->to_device);
	uint8_t *data = malloc(BIG), *back = malloc(BIG);
	test_fill_random(data, BIG, 13);
	double t0 = test_now();
	ruda_handle h, moved;
	c->ok = ruda_client_create(a, data, BIG, &h) == RUDA_OK &&
		ruda_client_to_client(a, h, to, RUDA_ELEM_U8, &moved) == RUDA_OK &&
		ruda_client_read_one(to, moved, back) == RUDA_OK && memcmp(data, back, BIG) == 0;
	c->seconds = test_now() - t0;
	ruda_client_close(to);
	ruda_client_close(a);
	free(data);
	free(back);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* On rudad with slow allocations over `devices` (--set `set`, or none),
 * move_big to a client of device `to_device`, beside another client's round
 * trips; `slow` allocations were made, none of them on the loop. */
static void moved_beside(const char *devices, const char *set, uint32_t to_device,
			 const char *what, int slow)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow_on(&d, "round trips", &small, devices, set);
	struct creator c = {.d = &d, .to_device = to_device};
	served_beside(b, move_big, &c, what);
	ck_assert(c.seconds >= slow * SLOW_MS / 1000.0);
	stop_slow(&d, b, small);
}

/* to_client's new buffer gets its memory in the thread pool too: the
 * request waits for it, the other clients do not. Two slow allocations:
 * the source's and the new buffer's. */
START_TEST(to_client_allocation_leaves_the_loop_free)
{
	moved_beside("0", NULL, 0, "create + to_client + read", 2);
}
END_TEST

/* Between two logical devices of one GPU (--device 0,0) the new buffer is
 * a window of the source device's memory: that memory is made in the
 * thread pool too. */
START_TEST(window_allocation_leaves_the_loop_free)
{
	moved_beside("0,0", NULL, 1, "create + to_client into a window + read", 2);
}
END_TEST

/* Where the devices cannot share memory (two GPUs; here two logical
 * devices with export off) the bytes go through host staging, from a
 * buffer on the source device: the request parks for that buffer's
 * memory too, after the new buffer's. Three slow allocations: the source,
 * the new buffer, the staging's. */
START_TEST(staged_allocations_leave_the_loop_free)
{
	moved_beside("0,0", "export_memory=off", 1,
		     "create + to_client through host staging + read", 3);
}
END_TEST

/* Two clients, on devices 0 and 1, sum BIG bytes of u32 in an
 * all-reduce, each read back and checked. */
static void *reduce_big(void *arg)
{
	struct creator *c = arg;
	enum { MEMBERS = 2 };
	size_t count = BIG / 4;
	ruda_client *m[MEMBERS];
	ruda_device_id ids[MEMBERS];
	ruda_handle src[MEMBERS], dst[MEMBERS];
	uint32_t *in[MEMBERS], *back = malloc(BIG);
	double t0 = test_now();
	c->ok = 1;
	for (int j = 0; j < MEMBERS; j++) {
		m[j] = test_connect_device(c->d, "test_allocation", (uint32_t)j);
		ids[j] = ruda_client_device_id(m[j]);
		in[j] = malloc(BIG);
		test_fill_random(in[j], BIG, 21 + j);
		c->ok &= ruda_client_create(m[j], in[j], BIG, &src[j]) == RUDA_OK &&
			 ruda_client_empty(m[j], BIG, &dst[j]) == RUDA_OK;
	}
	for (int j = 0; j < MEMBERS; j++)
		c->ok &= ruda_client_all_reduce(m[j], src[j], dst[j], RUDA_ELEM_U32, ids, MEMBERS,
						RUDA_REDUCE_SUM) == RUDA_OK;
	for (int j = 0; j < MEMBERS; j++)
		c->ok &= ruda_client_sync_collective(m[j]) == RUDA_OK;
	for (int j = 0; c->ok && j < MEMBERS; j++) {
		c->ok = ruda_client_read_one(m[j], dst[j], back) == RUDA_OK;
		for (size_t i = 0; c->ok && i < count; i++)
			c->ok = back[i] == in[0][i] + in[1][i];
	}
	c->seconds = test_now() - t0;
	for (int j = 0; j < MEMBERS; j++) {
		ruda_client_close(m[j]);
		free(in[j]);
	}
	free(back);
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* An all-reduce whose staging is still being made keeps each src in a
 * buffer of rudad's meanwhile: that buffer's memory is made in the thread
 * pool too (the call parks for it), not on the loop. Two logical devices,
 * export off: the host staging path. Six slow allocations: two srcs, two
 * dsts, two of those buffers. */
START_TEST(all_reduce_allocation_leaves_the_loop_free)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow_on(&d, "round trips", &small, "0,0", "export_memory=off");
	struct creator c = {.d = &d};
	served_beside(b, reduce_big, &c, "2 x (create + empty) + all_reduce + read");
	stop_slow(&d, b, small);
}
END_TEST

static void *try_empty_in_full_heap(void *arg)
{
	struct creator *c = arg;
	double t0 = test_now();
	c->status = ruda_client_try_empty(c->client, c->size, &c->made);
	c->ok = c->status == RUDA_OK;
	c->seconds = test_now() - t0;
	__atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

#define MiB (1024u * 1024u)
enum { MAX_FILL = 256 };

/* Fill the heap through `a` with buffers of three quarters of it (or the
 * largest a buffer may be), as many as fit: their handles in `fill`, how
 * many, and their size in *big. */
static int fill_heap_with_big(ruda_client *a, ruda_handle *fill, uint64_t *big)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(a, &p);
	*big = p.device_local_bytes / 4 * 3;
	if (*big > p.max_buffer_size)
		*big = p.max_buffer_size;
	int n = 0;
	while (n < MAX_FILL && ruda_client_try_empty(a, *big, &fill[n]) == RUDA_OK)
		n++;
	ck_assert_int_gt(n, 0);
	ck_assert_int_lt(n, MAX_FILL);
	return n;
}

/* After a release whose free takes 600 ms in the pool, on a heap that is
 * full until then: `size` bytes asked for through `a` are made once the
 * free has ended, while `b`'s round trips stay short. Then every buffer
 * (the `n` in `fill`, and the one made) goes, and the daemon stops. */
static void made_after_the_free_by(struct test_daemon *d, ruda_client *b, ruda_handle small,
				   ruda_client *a, ruda_client *filler, const ruda_handle *fill,
				   int n, uint64_t size)
{
	ck_assert_int_eq(ruda_client_sync(filler), RUDA_OK);
	struct creator c = {.client = a, .size = size};
	int count;
	double longest = longest_round_trip(b, try_empty_in_full_heap, &c, &count);
	printf("%d buffers filled the heap; %llu bytes more after a release: %.3f s; "
	       "%d round trips beside it, the longest %.3f s\n",
	       n + 1, (unsigned long long)size, c.seconds, count, longest);
	ck_assert(c.ok);
	/* it waited for the free, which began a round trip or so before the
	 * request (under ASan, tens of ms) */
	ck_assert(c.seconds >= SLOW_MS / 2000.0);
	ck_assert(longest < SLOW_MS / 2000.0);
	ruda_client_release(a, c.made);
	for (int i = 0; i < n; i++)
		ruda_client_release(filler, fill[i]);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(filler), RUDA_OK);
	if (filler != a)
		ruda_client_close(filler);
	ruda_client_close(a);
	stop_slow(d, b, small);
}

/* The same, `a` having filled the heap itself. */
static void made_after_the_free(struct test_daemon *d, ruda_client *b, ruda_handle small,
				ruda_client *a, const ruda_handle *fill, int n, uint64_t size)
{
	made_after_the_free_by(d, b, small, a, a, fill, n, size);
}

/* A buffer asked for while the heap is full and a free under way will make
 * room: the pool waits for the free and makes the memory, the loop serves
 * the others meanwhile (it used to wait for the free, then allocate). */
START_TEST(full_heap_waits_for_frees_in_the_pool)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow(&d, "round trips", &small);
	ruda_client *a = test_connect(&d, "fills the heap");
	ruda_handle fill[MAX_FILL];
	uint64_t big;
	int n = fill_heap_with_big(a, fill, &big);
	/* its free takes 600 ms in the pool; the heap is full until then */
	ruda_client_release(a, fill[--n]);
	made_after_the_free(&d, b, small, a, fill, n, big);
}
END_TEST

/* The same for a buffer whose memory is under 16 MiB (made on the loop
 * when the heap has room): the heap is filled to its last MiB, and a
 * buffer of 12 MiB (on lavapipe, a page of its own: above a quarter of the
 * 32 MiB shared pages) asked for after a big one's release waits in the pool
 * for that free. The loop used to wait for it. */
START_TEST(full_heap_small_request_waits_in_the_pool)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow(&d, "round trips", &small);
	ruda_client *a = test_connect(&d, "fills the heap");
	ruda_handle fill[MAX_FILL];
	uint64_t big;
	int n = fill_heap_with_big(a, fill, &big), bigs = n;
	/* then the rest, in halves, to the last MiB */
	for (uint64_t size = big / 2; size >= MiB; size /= 2)
		while (n < MAX_FILL && ruda_client_try_empty(a, size, &fill[n]) == RUDA_OK)
			n++;
	ck_assert_int_lt(n, MAX_FILL);
	ruda_handle none;
	ck_assert_int_eq(ruda_client_try_empty(a, 12 * MiB, &none), RUDA_ERROR_OUT_OF_MEMORY);
	/* a big one's free takes 600 ms in the pool */
	ruda_client_release(a, fill[bigs - 1]);
	fill[bigs - 1] = fill[--n];
	made_after_the_free(&d, b, small, a, fill, n, 12 * MiB);
}
END_TEST

/* start_slow_on, with a driver that gives 1 GiB of the heap
 * (RUDA_TEST_DRIVER_HEAP_BYTES, the stand-in for NVIDIA's refusals short of
 * the heap's size): the client of round trips. */
static ruda_client *start_driver_limited(struct test_daemon *d, ruda_handle *small,
					 const char *devices, const char *set)
{
	setenv("RUDA_TEST_DRIVER_HEAP_BYTES", "1073741824", 1);
	ruda_client *b = start_slow_on(d, "round trips", small, devices, set);
	unsetenv("RUDA_TEST_DRIVER_HEAP_BYTES");
	return b;
}

/* Fill what a RUDA_TEST_DRIVER_HEAP_BYTES driver gives through `c`: buffers
 * of 384 MiB, then halves down to `smallest`, as many as it takes (the
 * first is 384 MiB); how many. */
static int fill_driver_heap(ruda_client *c, ruda_handle *fill, uint64_t smallest)
{
	int n = 0;
	for (uint64_t size = 384 * MiB; size >= smallest; size /= 2)
		while (n < MAX_FILL && ruda_client_try_empty(c, size, &fill[n]) == RUDA_OK)
			n++;
	ck_assert_int_ge(n, 2);
	ck_assert_int_lt(n, MAX_FILL);
	return n;
}

/* A driver that refuses memory before rudad's count of the heap is
 * reached (NVIDIA does: seen on an H100; RUDA_TEST_DRIVER_HEAP_BYTES stands
 * in for it here): after a release whose free takes 600 ms in the pool, a
 * 12 MiB buffer that fits rudad's count waits in the pool for that free,
 * and is made. The loop used to wait for it. */
START_TEST(driver_refusal_waits_in_the_pool)
{
	struct test_daemon d;
	ruda_handle small;
	/* freed pages not kept: the release is a free */
	ruda_client *b = start_driver_limited(&d, &small, "0", "freed_memory_keep_ms=0");
	ruda_client *a = test_connect(&d, "fills what the driver gives");
	ruda_handle fill[MAX_FILL];
	int n = fill_driver_heap(a, fill, MiB);
	ruda_handle none;
	ck_assert_int_eq(ruda_client_try_empty(a, 12 * MiB, &none), RUDA_ERROR_OUT_OF_MEMORY);
	/* the first, 384 MiB, is freed in 600 ms */
	ruda_client_release(a, fill[0]);
	fill[0] = fill[--n];
	made_after_the_free(&d, b, small, a, fill, n, 12 * MiB);
}
END_TEST

/* The same where the free is another logical device's on the same heap
 * (--device 0,0): a 12 MiB page asked for on device 0, whose own
 * allocator frees nothing, waits in the pool for device 1's free. The loop used to
 * wait for it (page_new's fallback after the driver's refusal). */
START_TEST(driver_refusal_waits_for_the_other_devices_free)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_driver_limited(&d, &small, "0,0", "freed_memory_keep_ms=0");
	ruda_client *filler = test_connect_device(&d, "fills what the driver gives", 1);
	ruda_client *a = test_connect(&d, "asks on device 0");
	/* pages of their own, each its buffer's size (a shared page of a
	 * GPU's size would leave device 0 room, and take the driver's last
	 * bytes in one piece) */
	ck_assert_int_eq(ruda_client_allocation_mode(filler, RUDA_ALLOCATION_DEDICATED), RUDA_OK);
	ck_assert_int_eq(ruda_client_allocation_mode(a, RUDA_ALLOCATION_DEDICATED), RUDA_OK);
	ruda_handle fill[MAX_FILL];
	int n = fill_driver_heap(filler, fill, MiB);
	ruda_handle none;
	ck_assert_int_eq(ruda_client_try_empty(a, 12 * MiB, &none), RUDA_ERROR_OUT_OF_MEMORY);
	/* the first, 384 MiB, is freed in 600 ms by device 1's allocator */
	ruda_client_release(filler, fill[0]);
	fill[0] = fill[--n];
	made_after_the_free_by(&d, b, small, a, filler, fill, n, 12 * MiB);
}
END_TEST

/* A big buffer the driver refuses while no frees are under way: the pool's
 * attempt is refused (600 ms there), and the request is answered
 * OUT_OF_MEMORY without the loop asking the driver again (it did: another
 * 600 ms, on the loop, for every client). */
START_TEST(driver_refusal_answered_without_the_loop)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_driver_limited(&d, &small, "0", NULL);
	ruda_client *a = test_connect(&d, "fills what the driver gives");
	ruda_handle fill[MAX_FILL];
	int n = fill_driver_heap(a, fill, 64 * MiB);
	struct creator c = {.client = a, .size = 384 * MiB};
	int count;
	double longest = longest_round_trip(b, try_empty_in_full_heap, &c, &count);
	printf("%d buffers filled what the driver gives; %llu bytes more refused in %.3f s; "
	       "%d round trips beside it, the longest %.3f s\n",
	       n, (unsigned long long)c.size, c.seconds, count, longest);
	ck_assert_int_eq(c.status, RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert(c.seconds >= SLOW_MS / 1000.0); /* the pool's attempt */
	ck_assert(longest < SLOW_MS / 2000.0);
	for (int i = 0; i < n; i++)
		ruda_client_release(a, fill[i]);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ruda_client_close(a);
	stop_slow(&d, b, small);
}
END_TEST

static ruda_client *forever_client;

static void create_one_forever(void *user)
{
	(void)user;
	static uint8_t data[BIG];
	ruda_handle h;
	test_fork_ready();
	ruda_client_create(forever_client, data, BIG, &h); /* killed while rudad allocates */
	pause();
}

/* `arg` non-NULL: exportable memory (a dedicated window), made with its
 * buffer */
static int create_forever(ruda_client *c, void *arg)
{
	forever_client = c;
	if (arg)
		ruda_client_allocation_window(c, RUDA_ALLOCATION_DEDICATED, create_one_forever, NULL);
	else
		create_one_forever(NULL);
	return 0;
}

/* The device's pages once they are `want`, or after 5 s. */
static uint64_t pages_become(ruda_client *c, uint64_t want)
{
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	for (int i = 0; i < 50; i++) {
		ck_assert_int_eq(ruda_client_memory_usage(c, &u), RUDA_OK);
		if (u.device_pages == want)
			break;
		usleep(100 * 1000);
	}
	return u.device_pages;
}

/* rudad's fd count once it is `want` again, or after 5 s: freed memory
 * goes in the thread pool (and lavapipe closes an exportable memory's fd
 * with it), well before the 10 s that kept pages wait */
static int fds_back_to(const struct test_daemon *d, int want)
{
	int n = test_count_fds(d->pid);
	for (int i = 0; i < 50 && n != want; i++) {
		usleep(100 * 1000);
		n = test_count_fds(d->pid);
	}
	return n;
}

/* A client killed while its buffer's memory is being made leaves nothing
 * behind: the daemon serves the next one, which gets a buffer of the same
 * size, and holds no more file descriptors than before. */
START_TEST(client_killed_while_its_memory_is_made)
{
	struct test_daemon d;
	ruda_handle small;
	ruda_client *b = start_slow(&d, "after", &small);
	int fds = test_settled_fds(d.pid);
	ruda_memory_usage u0 = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(b, &u0), RUDA_OK);
	uint64_t pages0 = u0.device_pages;
	for (int i = 0; i < 4; i++) {
		pid_t child = test_fork_client(&d, "killed", create_forever,
					       i % 2 ? "exportable" : NULL);
		usleep(200 * 1000); /* inside the 600 ms allocation */
		test_kill(child);
	}
	/* what was made for the requests that never came back is kept for
	 * the next buffers of its size (lavapipe holds an fd for each
	 * exportable one) until given back: then nothing is left */
	ck_assert_uint_eq(pages_become(b, pages0 + 4), pages0 + 4); /* all four made, kept */
	/* the next exportable buffer of that size takes one of them, rather
	 * than have another made: once it is released (exported memory is
	 * not kept), one fewer */
	struct creator reuse = {.d = &d};
	create_big_dedicated(&reuse);
	ck_assert(reuse.ok);
	ck_assert_uint_eq(pages_become(b, pages0 + 3), pages0 + 3);
	ck_assert_int_eq(ruda_client_memory_cleanup(b), RUDA_OK);
	ck_assert_int_eq(fds_back_to(&d, fds), fds);
	struct creator c = {.d = &d};
	create_big(&c);
	ck_assert(c.ok);
	struct creator exported = {.d = &d};
	create_big_dedicated(&exported);
	ck_assert(exported.ok);
	ck_assert(test_daemon_alive(&d));
	ck_assert_int_eq(ruda_client_memory_cleanup(b), RUDA_OK);
	ck_assert_int_eq(fds_back_to(&d, fds), fds);
	stop_slow(&d, b, small);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("allocation");
	TCase *tc = tcase_create("allocation");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, dedicated_window_exports);
	tcase_add_test(tc, get_resource_refusals);
	tcase_add_test(tc, persistent_buffers_keep_apart);
	suite_add_tcase(s, tc);
	TCase *slow = tcase_create("memory made off the loop");
	tcase_set_timeout(slow, 120);
	tcase_add_test(slow, big_allocation_leaves_the_loop_free);
	tcase_add_test(slow, exportable_allocation_leaves_the_loop_free);
	tcase_add_test(slow, to_client_allocation_leaves_the_loop_free);
	tcase_add_test(slow, window_allocation_leaves_the_loop_free);
	tcase_add_test(slow, staged_allocations_leave_the_loop_free);
	tcase_add_test(slow, client_killed_while_its_memory_is_made);
	tcase_add_test(slow, full_heap_waits_for_frees_in_the_pool);
	tcase_add_test(slow, full_heap_small_request_waits_in_the_pool);
	tcase_add_test(slow, driver_refusal_waits_in_the_pool);
	tcase_add_test(slow, driver_refusal_waits_for_the_other_devices_free);
	tcase_add_test(slow, driver_refusal_answered_without_the_loop);
	tcase_add_test(slow, all_reduce_allocation_leaves_the_loop_free);
	suite_add_tcase(s, slow);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
