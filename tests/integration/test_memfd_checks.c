/* Hostile memfds at StagingAttach and at Hello's client arena: unsealed,
 * truncated, write-sealed, not memfds at all, and changed while rudad
 * checks them. Each is refused with a message saying why, rudad lives, and
 * a well-behaved client beside it still gets its bytes back. */
#include <check.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

#define MiB (1u << 20)

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

static int memfd(uint64_t size, unsigned seals)
{
	int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seals)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

/* rudad lives, and a fresh client's bytes come back exactly. */
static void assert_daemon_healthy(void)
{
	ck_assert(test_daemon_alive(&daemon_));
	ruda_client *c = test_connect(&daemon_, "bystander");
	size_t n = 3 * MiB + 17;
	uint8_t *data = malloc(n), *back = malloc(n);
	test_fill_random(data, n, 26);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, n, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, n), 0);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ruda_client_close(c);
	free(data);
	free(back);
	ck_assert(test_daemon_alive(&daemon_));
}

/* ---- StagingAttach, raw ---------------------------------------------------- */

/* StagingAttach of `fd` on raw session `sock`; the reply (free it). */
static Ruda__Reply *raw_attach(int sock, uint64_t id, uint64_t region, uint64_t size, int fd)
{
	Ruda__StagingAttach a = RUDA__STAGING_ATTACH__INIT;
	a.region = region;
	a.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_STAGING_ATTACH;
	req.staging_attach = &a;
	uint8_t buf[128];
	size_t n = ruda__request__get_packed_size(&req);
	ck_assert_uint_le(n, sizeof(buf));
	ruda__request__pack(&req, buf);
	ck_assert_int_eq(raw_send_frame(sock, buf, (uint32_t)n, &fd, 1), 0);
	Ruda__Reply *reply = raw_recv_reply(sock, 10000, NULL);
	ck_assert_msg(reply, "no reply to StagingAttach: rudad %s",
		      test_daemon_alive(&daemon_) ? "alive" : "dead");
	ck_assert_uint_eq(reply->id, id);
	return reply;
}

/* Attaching `fd` (closed here) as a `size`-byte region is refused with
 * `status` and `why` in the message; the session goes on. */
static void expect_attach_refused(int fd, uint64_t size, ruda_status status, const char *why)
{
	int sock = raw_connect(&daemon_);
	ck_assert_int_eq(raw_hello(sock, 1), RUDA_OK);
	Ruda__Reply *r = raw_attach(sock, 2, 7, size, fd);
	close(fd);
	ck_assert_msg((int)r->status == (int)status, "status %d, not %d (%s)", r->status, status,
		      r->message);
	ck_assert_msg(r->message && strstr(r->message, why), "message \"%s\" does not say \"%s\"",
		      r->message ? r->message : "", why);
	ruda__reply__free_unpacked(r, NULL);
	/* the session is still served: a good region under the same id */
	int good = memfd(MiB, F_SEAL_SHRINK);
	r = raw_attach(sock, 3, 7, MiB, good);
	close(good);
	ck_assert_msg((int)r->status == RUDA_OK, "good attach: %d (%s)", r->status, r->message);
	ruda__reply__free_unpacked(r, NULL);
	close(sock);
	assert_daemon_healthy();
}

START_TEST(staging_unsealed)
{
	expect_attach_refused(memfd(MiB, 0), MiB, RUDA_ERROR_INVALID_ARGUMENT,
			      "not sealed against shrinking (F_SEAL_SHRINK)");
	expect_attach_refused(memfd(MiB, F_SEAL_GROW | F_SEAL_WRITE), MiB,
			      RUDA_ERROR_INVALID_ARGUMENT, "F_SEAL_SHRINK");
}
END_TEST

START_TEST(staging_truncated_then_sealed)
{
	int fd = memfd(MiB, 0);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	expect_attach_refused(fd, MiB, RUDA_ERROR_INVALID_ARGUMENT,
			      "too small: it holds 0 bytes, fewer than the 1048576 needed");
}
END_TEST

START_TEST(staging_not_a_memfd)
{
	expect_attach_refused(eventfd(0, EFD_CLOEXEC), 4096, RUDA_ERROR_INVALID_ARGUMENT,
			      "the fd is an eventfd, not a memfd");
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	close(p[1]);
	expect_attach_refused(p[0], 4096, RUDA_ERROR_INVALID_ARGUMENT,
			      "the fd is a pipe, not a memfd");
	char path[] = "/tmp/ruda-memfd-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, MiB), 0);
	expect_attach_refused(fd, 4096, RUDA_ERROR_INVALID_ARGUMENT,
			      "the fd is a regular file, not a memfd");
}
END_TEST

/* rudad maps a region writable (Read downloads into it): a write seal is the
 * client's error, INVALID_ARGUMENT, not rudad's (once ERROR_IO from mmap). */
START_TEST(staging_write_sealed)
{
	expect_attach_refused(memfd(MiB, F_SEAL_SHRINK | F_SEAL_WRITE), MiB,
			      RUDA_ERROR_INVALID_ARGUMENT, "sealed against writing (F_SEAL_WRITE)");
	expect_attach_refused(memfd(MiB, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE), MiB,
			      RUDA_ERROR_INVALID_ARGUMENT,
			      "sealed against writing (F_SEAL_FUTURE_WRITE)");
}
END_TEST

/* ---- Hello client_arena, raw ----------------------------------------------- */

/* A Hello with client arena `fd`; its reply (free it). */
static Ruda__Reply *raw_hello_arena(int sock, int fd, uint64_t size)
{
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "hostile arena";
	h.client_arena = 1;
	h.client_arena_size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	uint8_t buf[256];
	size_t n = ruda__request__get_packed_size(&req);
	ck_assert_uint_le(n, sizeof(buf));
	ruda__request__pack(&req, buf);
	ck_assert_int_eq(raw_send_frame(sock, buf, (uint32_t)n, &fd, 1), 0);
	int passed[2] = {-1, -1};
	Ruda__Reply *reply = raw_recv_reply_fds(sock, 10000, passed, 2);
	for (int i = 0; i < 2; i++)
		if (passed[i] >= 0)
			close(passed[i]);
	ck_assert_msg(reply, "no reply to Hello: rudad %s",
		      test_daemon_alive(&daemon_) ? "alive" : "dead");
	return reply;
}

static void expect_arena_refused(int fd, uint64_t size, ruda_status status, const char *why)
{
	int sock = raw_connect(&daemon_);
	Ruda__Reply *r = raw_hello_arena(sock, fd, size);
	close(fd);
	ck_assert_msg((int)r->status == (int)status, "status %d, not %d (%s)", r->status, status,
		      r->message);
	ck_assert_msg(r->message && strstr(r->message, why), "message \"%s\" does not say \"%s\"",
		      r->message ? r->message : "", why);
	ruda__reply__free_unpacked(r, NULL);
	ck_assert(raw_closed_by_peer(sock, 5000));
	close(sock);
	assert_daemon_healthy();
}

START_TEST(arena_hostile_memfds)
{
	expect_arena_refused(memfd(2 * MiB, 0), 0, RUDA_ERROR_INVALID_ARGUMENT,
			     "client arena: the memfd is not sealed against shrinking "
			     "(F_SEAL_SHRINK)");
	int fd = memfd(2 * MiB, 0);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	expect_arena_refused(fd, 2 * MiB, RUDA_ERROR_INVALID_ARGUMENT,
			     "too small: it holds 0 bytes, fewer than the 2097152 needed");
	expect_arena_refused(eventfd(0, EFD_CLOEXEC), 0, RUDA_ERROR_INVALID_ARGUMENT,
			     "client arena: the fd is an eventfd, not a memfd");
	expect_arena_refused(memfd(2 * MiB, F_SEAL_SHRINK | F_SEAL_WRITE), 0,
			     RUDA_ERROR_INVALID_ARGUMENT, "sealed against writing (F_SEAL_WRITE)");
}
END_TEST

/* ---- racing the checks ----------------------------------------------------- */

static double now_us(void)
{
	return test_now() * 1e6;
}

/* The attacker: flips the memfd between `size` bytes and none until `at`,
 * then seals it at none (where an old size read is a lie); with `regrow`,
 * grows it back afterwards (allowed: only a shrink is sealed). */
struct flipper {
	pthread_t thread;
	int fd;
	uint64_t size;
	double at;
	int regrow;
};

static void *flip(void *arg)
{
	struct flipper *f = arg;
	do {
		(void)!ftruncate(f->fd, (off_t)f->size);
		(void)!ftruncate(f->fd, 0);
	} while (now_us() < f->at);
	(void)fcntl(f->fd, F_ADD_SEALS, F_SEAL_SHRINK);
	if (f->regrow)
		(void)!ftruncate(f->fd, (off_t)f->size);
	return NULL;
}

/* What rudad accepted must hold the bytes for good: a memfd it took is
 * sealed against shrinking and at least `size` long now. */
static void assert_accepted_fd_sound(int fd, uint64_t size)
{
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_msg((uint64_t)st.st_size >= size,
		      "rudad accepted a memfd of %lld bytes for %llu: its next transfer faults",
		      (long long)st.st_size, (unsigned long long)size);
	ck_assert_int_ne(fcntl(fd, F_GET_SEALS) & F_SEAL_SHRINK, 0);
}

/* Attach, again and again, memfds a thread truncates, grows and seals while
 * rudad checks them. An accepted region must be sound (and carries bytes
 * both ways exactly); a refused one names the seal or the size. */
START_TEST(staging_race)
{
	ruda_client *c = test_connect(&daemon_, "racer");
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, MiB, &h), RUDA_OK);
	/* how long an attach takes, to spread the seal over it */
	double t0 = now_us();
	for (int i = 0; i < 20; i++) {
		int fd = memfd(MiB, F_SEAL_SHRINK);
		ruda_staging r;
		ck_assert_int_eq(ruda_client_staging_attach(c, fd, MiB, &r), RUDA_OK);
		ruda_client_staging_release(c, &r);
		close(fd);
	}
	double span = (now_us() - t0) / 20;
	unsigned accepted = 0, refused = 0;
	double end = now_us() + 4e6;
	srand(26);
	for (int i = 0; i < 1000 && now_us() < end; i++) {
		struct flipper f = {.fd = memfd(MiB, 0), .size = MiB, .regrow = i & 1};
		f.at = now_us() + span * 2 * rand() / RAND_MAX;
		ck_assert_int_eq(pthread_create(&f.thread, NULL, flip, &f), 0);
		ruda_staging r;
		ruda_status st = ruda_client_staging_attach(c, f.fd, MiB, &r);
		pthread_join(f.thread, NULL);
		if (st == RUDA_OK) {
			accepted++;
			assert_accepted_fd_sound(f.fd, MiB);
			memset(r.data, i & 0xff, MiB);
			ck_assert_int_eq(ruda_client_write_from_staging(c, h, 0, &r, 0, MiB),
					 RUDA_OK);
			ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
			memset(r.data, 0, MiB);
			ck_assert_int_eq(ruda_client_read_to_staging(c, h, &r, 0), RUDA_OK);
			for (size_t k = 0; k < MiB; k += 4093)
				ck_assert_uint_eq(((uint8_t *)r.data)[k], i & 0xff);
			ruda_client_staging_release(c, &r);
		} else {
			refused++;
			ck_assert_int_eq(st, RUDA_ERROR_INVALID_ARGUMENT);
			char why[512];
			ruda_client_last_error(c, why, sizeof(why));
			ck_assert_msg(strstr(why, "F_SEAL_SHRINK") || strstr(why, "too small"),
				      "refused for \"%s\"", why);
		}
		close(f.fd);
		ck_assert_msg(test_daemon_alive(&daemon_), "rudad died after attach %d", i);
	}
	fprintf(stderr, "staging_race: %u accepted, %u refused (attach ~%.0f us)\n", accepted,
		refused, span);
	ck_assert_uint_gt(accepted + refused, 0);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

/* The same at Hello: rudad writes the arena's header at once, so an
 * accepted arena of no bytes would fault it there. */
START_TEST(arena_race)
{
	double t0 = now_us();
	for (int i = 0; i < 5; i++) {
		int sock = raw_connect(&daemon_);
		int fd = memfd(2 * MiB, F_SEAL_SHRINK);
		Ruda__Reply *r = raw_hello_arena(sock, fd, 2 * MiB);
		ck_assert_int_eq(r->status, RUDA_OK);
		ruda__reply__free_unpacked(r, NULL);
		close(fd);
		close(sock);
	}
	double span = (now_us() - t0) / 5;
	double end = now_us() + 3e6;
	srand(62);
	for (int i = 0; i < 300 && now_us() < end; i++) {
		int sock = raw_connect(&daemon_);
		struct flipper f = {.fd = memfd(2 * MiB, 0), .size = 2 * MiB, .regrow = i & 1};
		f.at = now_us() + span * 2 * rand() / RAND_MAX;
		ck_assert_int_eq(pthread_create(&f.thread, NULL, flip, &f), 0);
		Ruda__Reply *r = raw_hello_arena(sock, f.fd, 2 * MiB);
		pthread_join(f.thread, NULL);
		if ((int)r->status == RUDA_OK)
			assert_accepted_fd_sound(f.fd, 2 * MiB);
		else
			ck_assert_msg((int)r->status == RUDA_ERROR_INVALID_ARGUMENT &&
					      (strstr(r->message, "F_SEAL_SHRINK") ||
					       strstr(r->message, "too small")),
				      "refused with %d for \"%s\"", r->status, r->message);
		ruda__reply__free_unpacked(r, NULL);
		close(f.fd);
		close(sock);
		ck_assert_msg(test_daemon_alive(&daemon_), "rudad died after Hello %d", i);
	}
	assert_daemon_healthy();
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("memfd_checks");
	TCase *tc = tcase_create("refusals");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, staging_unsealed);
	tcase_add_test(tc, staging_truncated_then_sealed);
	tcase_add_test(tc, staging_not_a_memfd);
	tcase_add_test(tc, staging_write_sealed);
	tcase_add_test(tc, arena_hostile_memfds);
	tcase_add_test(tc, staging_race);
	tcase_add_test(tc, arena_race);
	suite_add_tcase(s, tc);
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
