/* Fast sync: the progress page and the arena's sync slots that let a client
 * see its work end without waiting for the reply (docs/design.md). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../proto/arena_header.h"
#include "../proto/progress_page.h"
#include "harness.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

/* A raw session: its socket, its arena and the device's progress page. */
struct raw_session {
	int fd;
	struct ruda_arena_header *arena;
	size_t arena_size;
	const struct ruda_progress_page *page;
	int page_fd;
};

static void raw_open(struct raw_session *r)
{
	int fds[2];
	r->fd = raw_connect(&daemon_);
	ck_assert_int_ge(r->fd, 0);
	ck_assert_int_eq(raw_hello_fds(r->fd, 1, fds), RUDA_OK);
	ck_assert_int_ge(fds[0], 0);
	ck_assert_msg(fds[1] >= 0, "Hello passed no progress page");
	off_t size = lseek(fds[0], 0, SEEK_END);
	ck_assert_int_gt(size, RUDA_ARENA_DATA_OFFSET);
	r->arena_size = (size_t)size;
	r->arena = mmap(NULL, r->arena_size, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	ck_assert_ptr_ne(r->arena, MAP_FAILED);
	close(fds[0]);
	r->page = mmap(NULL, RUDA_PROGRESS_PAGE_SIZE, PROT_READ, MAP_SHARED, fds[1], 0);
	ck_assert_ptr_ne(r->page, MAP_FAILED);
	r->page_fd = fds[1];
}

static void raw_close(struct raw_session *r)
{
	munmap(r->arena, r->arena_size);
	munmap((void *)r->page, RUDA_PROGRESS_PAGE_SIZE);
	close(r->page_fd);
	close(r->fd);
}

static ruda_status raw_call(struct raw_session *r, Ruda__Request *req)
{
	ck_assert_int_eq(raw_send_request(r->fd, req), 0);
	Ruda__Reply *reply = raw_recv_reply(r->fd, 30000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_uint_eq(reply->id, req->id);
	ruda_status st = (ruda_status)reply->status;
	ruda__reply__free_unpacked(reply, NULL);
	return st;
}

static ruda_status raw_sync(struct raw_session *r, uint64_t id)
{
	Ruda__Sync sync = RUDA__SYNC__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_SYNC;
	req.sync = &sync;
	return raw_call(r, &req);
}

static struct ruda_arena_sync_entry slot(struct raw_session *r, uint32_t stream)
{
	struct ruda_arena_sync_entry e;
	while (!ruda_arena_sync_read(r->arena, stream, &e))
		;
	return e;
}

START_TEST(progress_page_is_sealed_and_read_only)
{
	struct raw_session r;
	raw_open(&r);
	ck_assert_uint_eq(r.page->magic, RUDA_PROGRESS_MAGIC);
	ck_assert_uint_eq(r.page->version, RUDA_PROGRESS_VERSION);
	ck_assert_uint_ge(r.page->queues, 1);
	ck_assert_uint_eq(r.page->failed, 0);
	int seals = fcntl(r.page_fd, F_GET_SEALS);
	ck_assert_int_ge(seals, 0);
	int want = F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL;
	ck_assert_int_eq(seals & want, want);
	/* no client can write what the others read */
	errno = 0;
	void *w = mmap(NULL, RUDA_PROGRESS_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED,
		       r.page_fd, 0);
	ck_assert_ptr_eq(w, MAP_FAILED);
	ck_assert_int_eq(errno, EPERM);
	uint64_t junk = ~0ull;
	ck_assert_int_eq(pwrite(r.page_fd, &junk, sizeof(junk), 8), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(ftruncate(r.page_fd, 0), -1);
	raw_close(&r);
}
END_TEST

START_TEST(sync_publishes_its_slot)
{
	struct raw_session r;
	raw_open(&r);
	ck_assert_int_eq(raw_sync(&r, 5), RUDA_OK);
	struct ruda_arena_sync_entry e = slot(&r, 0);
	ck_assert_uint_eq(e.stream, 0);
	ck_assert_uint_eq(e.request, 5);
	ck_assert_uint_lt(e.queue, r.page->queues);
	ck_assert_uint_ne(e.value, RUDA_ARENA_SYNC_REPLY_ONLY);
	/* the reply came once the work was done: the page says so too */
	ck_assert_uint_ge(r.page->completed[e.queue], e.value);
	raw_close(&r);
}
END_TEST

/* A stream with an error to report: the slot sends the client to the reply,
 * which reports it; the next sync is clean again. */
START_TEST(sync_with_an_error_waits_for_the_reply)
{
	struct raw_session r;
	raw_open(&r);
	Ruda__Launch launch = RUDA__LAUNCH__INIT;
	launch.kernel = 999; /* no such kernel */
	launch.count_x = launch.count_y = launch.count_z = 1;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 6;
	req.body_case = RUDA__REQUEST__BODY_LAUNCH;
	req.launch = &launch;
	ck_assert_int_eq(raw_send_request(r.fd, &req), 0);
	ck_assert_int_eq(raw_sync(&r, 7), RUDA_ERROR_INVALID_HANDLE);
	struct ruda_arena_sync_entry e = slot(&r, 0);
	ck_assert_uint_eq(e.request, 7);
	ck_assert_uint_eq(e.value, RUDA_ARENA_SYNC_REPLY_ONLY);
	ck_assert_int_eq(raw_sync(&r, 8), RUDA_OK);
	e = slot(&r, 0);
	ck_assert_uint_eq(e.request, 8);
	ck_assert_uint_ne(e.value, RUDA_ARENA_SYNC_REPLY_ONLY);
	raw_close(&r);
}
END_TEST

/* A read into a staging region publishes its slot as a sync does (the
 * client watches the page for it, libclient/staging.c), and its bytes are
 * there once the page says so; a refused one sends the client to the
 * reply. A read into the arena publishes nothing. */
START_TEST(read_to_staging_publishes_its_slot)
{
	struct raw_session r;
	raw_open(&r);
	enum { SIZE = 4096 };
	int mfd = memfd_create("staging", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(mfd, SIZE), 0);
	ck_assert_int_eq(fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	uint8_t *region = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ck_assert_ptr_ne(region, MAP_FAILED);
	Ruda__StagingAttach a = RUDA__STAGING_ATTACH__INIT;
	a.region = 1;
	a.size = SIZE;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 10;
	req.body_case = RUDA__REQUEST__BODY_STAGING_ATTACH;
	req.staging_attach = &a;
	uint8_t frame[128];
	size_t len = ruda__request__pack(&req, frame);
	ck_assert_int_eq(raw_send_frame(r.fd, frame, (uint32_t)len, &mfd, 1), 0);
	Ruda__Reply *reply = raw_recv_reply(r.fd, 30000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_int_eq(reply->status, RUDA_OK);
	ruda__reply__free_unpacked(reply, NULL);

	/* a buffer written from the region's first half */
	test_fill_random(region, SIZE / 2, 11);
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = 2;
	e.size = SIZE / 2;
	req = (Ruda__Request)RUDA__REQUEST__INIT;
	req.id = 11;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	ck_assert_int_eq(raw_send_request(r.fd, &req), 0);
	Ruda__Write w = RUDA__WRITE__INIT;
	w.handle = 2;
	w.region = 1;
	w.size = SIZE / 2;
	req.id = 12;
	req.body_case = RUDA__REQUEST__BODY_WRITE;
	req.write = &w;
	ck_assert_int_eq(raw_send_request(r.fd, &req), 0);

	/* read into the second half: the slot names the read, and once the
	 * page shows its value the bytes are there, before any reply is read */
	Ruda__Read rd = RUDA__READ__INIT;
	rd.handle = 2;
	rd.region = 1;
	rd.arena_offset = SIZE / 2;
	rd.size = SIZE / 2;
	req.id = 13;
	req.body_case = RUDA__REQUEST__BODY_READ;
	req.read = &rd;
	ck_assert_int_eq(raw_send_request(r.fd, &req), 0);
	struct ruda_arena_sync_entry s0;
	do
		s0 = slot(&r, 0);
	while (s0.request < 13);
	ck_assert_uint_eq(s0.request, 13);
	ck_assert_uint_ne(s0.value, RUDA_ARENA_SYNC_REPLY_ONLY);
	while (atomic_load(&r.page->completed[s0.queue]) < s0.value)
		;
	ck_assert_int_eq(memcmp(region + SIZE / 2, region, SIZE / 2), 0);
	reply = raw_recv_reply(r.fd, 30000, NULL);
	ck_assert_ptr_nonnull(reply);
	ck_assert_uint_eq(reply->id, 13);
	ck_assert_int_eq(reply->status, RUDA_OK);
	ruda__reply__free_unpacked(reply, NULL);

	/* out of the region's range: refused, and the slot says "the reply" */
	rd.arena_offset = SIZE;
	req.id = 14;
	ck_assert_int_eq(raw_call(&r, &req), RUDA_ERROR_OUT_OF_RANGE);
	s0 = slot(&r, 0);
	ck_assert_uint_eq(s0.request, 14);
	ck_assert_uint_eq(s0.value, RUDA_ARENA_SYNC_REPLY_ONLY);

	/* into the arena: the slot still names the last staging read */
	rd.region = 0;
	rd.arena_offset = RUDA_ARENA_DATA_OFFSET;
	req.id = 15;
	ck_assert_int_eq(raw_call(&r, &req), RUDA_OK);
	ck_assert_uint_eq(slot(&r, 0).request, 14);
	munmap(region, SIZE);
	close(mfd);
	raw_close(&r);
}
END_TEST

/* Each sync must cover the launch before it: fill with i, sync, read i
 * back, many times, with the skipped replies interleaved with reads. */
static void fill_sync_read(ruda_client *c, ruda_kernel fill, ruda_handle h, uint32_t words,
			   uint32_t from, uint32_t n)
{
	uint32_t *back = malloc(words * 4u);
	for (uint32_t i = from; i < from + n; i++) {
		uint32_t push[2] = {i, words};
		ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){4, 1, 1}, &h, 1, push, 8),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
		ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
		for (uint32_t k = 0; k < words; k++)
			ck_assert_uint_eq(back[k], i);
	}
	free(back);
}

START_TEST(sync_covers_the_work_before_it)
{
	ruda_client *c = test_connect(&daemon_, "sync_fast");
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	const uint32_t words = 4096;
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, words * 4u, &h), RUDA_OK);
	fill_sync_read(c, fill, h, words, 1, 300);
	/* an error in between is reported by the sync after it, once */
	ruda_handle bad = {.id = 424242, .size = 4};
	uint32_t push[2] = {0, words};
	ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){1, 1, 1}, &bad, 1, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	fill_sync_read(c, fill, h, words, 1000, 50);
	ruda_client_close(c);
}
END_TEST

struct worker {
	ruda_client *c;
	ruda_kernel fill;
	uint32_t from;
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	const uint32_t words = 1024;
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(w->c, words * 4u, &h), RUDA_OK);
	fill_sync_read(w->c, w->fill, h, words, w->from, 150);
	return NULL;
}

/* Threads of one client sync the same stream: slots overwrite each other,
 * replies arrive for syncs another thread answered from the page. */
START_TEST(threads_of_one_client)
{
	ruda_client *c = test_connect(&daemon_, "sync_fast_threads");
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	pthread_t t[3];
	struct worker w[3];
	for (int i = 0; i < 3; i++) {
		w[i] = (struct worker){.c = c, .fill = fill, .from = 10000u * (uint32_t)(i + 1)};
		ck_assert_int_eq(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ruda_client_close(c);
}
END_TEST

/* With the watch off every sync waits for its reply, and works the same. */
START_TEST(watch_off)
{
	setenv("RUDA_SYNC_SPIN_US", "0", 1);
	ruda_client *c = test_connect(&daemon_, "sync_fast_off");
	unsetenv("RUDA_SYNC_SPIN_US");
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, 4096, &h), RUDA_OK);
	fill_sync_read(c, fill, h, 1024, 7, 50);
	ruda_client_close(c);
}
END_TEST

/* A lost device is marked on the page before anything else it publishes,
 * so no client takes work that failed for done. */
START_TEST(device_loss_is_marked)
{
	setenv("RUDA_TEST_FAULTS", "1", 1);
	test_daemon_start(&daemon_, NULL);
	unsetenv("RUDA_TEST_FAULTS");
	struct raw_session r;
	raw_open(&r);
	ck_assert_uint_eq(r.page->failed, 0);
	ck_assert_int_eq(test_inject_device_loss(&daemon_, 0, NULL), RUDA_OK);
	ck_assert_uint_ne(r.page->failed, 0);
	raw_close(&r);
	test_daemon_stop(&daemon_);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("sync_fast");
	TCase *tc = tcase_create("sync_fast");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, progress_page_is_sealed_and_read_only);
	tcase_add_test(tc, sync_publishes_its_slot);
	tcase_add_test(tc, sync_with_an_error_waits_for_the_reply);
	tcase_add_test(tc, read_to_staging_publishes_its_slot);
	tcase_add_test(tc, sync_covers_the_work_before_it);
	tcase_add_test(tc, threads_of_one_client);
	tcase_add_test(tc, watch_off);
	suite_add_tcase(s, tc);
	TCase *faults = tcase_create("faults"); /* starts its own rudad */
	tcase_set_timeout(faults, 120);
	tcase_add_test(faults, device_loss_is_marked);
	suite_add_tcase(s, faults);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
