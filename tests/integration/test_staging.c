/* Staging regions: client memory the daemon copies from and into directly,
 * and every memfd it refuses. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_staging");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static void assert_last_error_has(const char *what)
{
	char why[512];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_msg(strstr(why, what), "error \"%s\" does not say \"%s\"", why, what);
}

/* The session is still usable: a round trip through the arena works. */
static void assert_client_healthy(void)
{
	uint8_t data[100], back[100];
	test_fill_random(data, sizeof(data), 99);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(client, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	ruda_client_release(client, h);
}

/* Odd sizes uploaded from a region and read back into another one. */
START_TEST(staging_round_trips_odd_sizes)
{
	static const size_t sizes[] = {1, 3, 4095, 4097, (1u << 20) + 1, 40u << 20};
	size_t most = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1] + 64;
	ruda_staging up, down;
	ck_assert_int_eq(ruda_client_staging_create(client, most, &up), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_create(client, most, &down), RUDA_OK);
	ck_assert_uint_ge(up.size, most);
	ck_assert_uint_ne(up.id, down.id);
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t n = sizes[i];
		uint64_t at = i * 7; /* unaligned offsets inside the regions */
		test_fill_random((uint8_t *)up.data + at, n, 20 + i);
		ruda_handle h;
		ck_assert_int_eq(ruda_client_create_from_staging(client, &up, at, n, &h), RUDA_OK);
		ck_assert_uint_eq(h.size, n);
		ck_assert_int_eq(ruda_client_read_to_staging(client, h, &down, at + 1), RUDA_OK);
		ck_assert_int_eq(memcmp((uint8_t *)up.data + at, (uint8_t *)down.data + at + 1, n),
				 0);
		/* and through the ordinary read */
		uint8_t *back = malloc(n);
		ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
		ck_assert_int_eq(memcmp((uint8_t *)up.data + at, back, n), 0);
		free(back);
		ruda_client_release(client, h);
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_release(client, &up), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_release(client, &down), RUDA_OK);
}
END_TEST

/* Region bytes may be rewritten once the upload is synced; a write into a
 * slice of an existing buffer lands there only. */
START_TEST(staging_writes_into_slices)
{
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_create(client, 8192, &r), RUDA_OK);
	memset(r.data, 0xaa, 8192);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create_from_staging(client, &r, 0, 8192, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(client, &h, 1), RUDA_OK);
	memset(r.data, 0x55, 100);
	ck_assert_int_eq(ruda_client_write_from_staging(client, h, 1000, &r, 0, 100), RUDA_OK);
	uint8_t back[8192];
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	for (int i = 0; i < 8192; i++)
		ck_assert_uint_eq(back[i], i >= 1000 && i < 1100 ? 0x55 : 0xaa);
	ruda_client_staging_release(client, &r);
}
END_TEST

/* The caller's own memfd, sealed as required, is accepted and shared. */
START_TEST(caller_memfd_accepted)
{
	int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 1 << 20, &r), RUDA_OK);
	/* bytes written through the caller's own mapping reach the device */
	uint8_t *mine = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(mine, MAP_FAILED);
	close(fd);
	test_fill_random(mine, 1 << 20, 5);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create_from_staging(client, &r, 0, 1 << 20, &h), RUDA_OK);
	uint8_t *back = malloc(1 << 20);
	ck_assert_int_eq(ruda_client_read_one(client, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(mine, back, 1 << 20), 0);
	free(back);
	munmap(mine, 1 << 20);
	ruda_client_staging_release(client, &r);
}
END_TEST

START_TEST(unsealed_memfd_refused)
{
	int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 1 << 20, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("F_SEAL_SHRINK");
	/* sealed against growing only: still refused */
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_GROW), 0);
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 1 << 20, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("F_SEAL_SHRINK");
	close(fd);
	assert_client_healthy();
}
END_TEST

START_TEST(small_memfd_refused)
{
	int fd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_eq(ftruncate(fd, 4096), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 1 << 20, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("too small");
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 0, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	close(fd);
	assert_client_healthy();
}
END_TEST

START_TEST(pipe_refused)
{
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_attach(client, p[0], 4096, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("a pipe, not a memfd");
	close(p[0]);
	close(p[1]);
	assert_client_healthy();
}
END_TEST

START_TEST(regular_file_refused)
{
	char path[] = "/tmp/ruda-staging-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_attach(client, fd, 4096, &r),
			 RUDA_ERROR_INVALID_ARGUMENT);
	assert_last_error_has("a regular file, not a memfd");
	close(fd);
	assert_client_healthy();
}
END_TEST

/* A region the session does not hold, and bytes beyond one it does, fail
 * the write asynchronously with the usual codes. */
START_TEST(unknown_region_and_range_refused)
{
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_create(client, 4096, &r), RUDA_OK);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(client, 1 << 20, &h), RUDA_OK);
	ruda_staging ghost = r;
	ghost.id += 1000;
	ck_assert_int_eq(ruda_client_write_from_staging(client, h, 0, &ghost, 0, 16), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_HANDLE);
	ruda_staging big = r;
	big.size = 1 << 20; /* lies: the daemon checks against what it mapped */
	ck_assert_int_eq(ruda_client_write_from_staging(client, h, 0, &big, 0, 1 << 20), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);
	ruda_staging gone = r;
	ruda_client_staging_release(client, &r);
	/* the client unmapped it; only the daemon's verdict is exercised */
	ck_assert_int_eq(ruda_client_read_to_staging(client, (ruda_handle){h.id, 0, 16}, &gone, 0),
			 RUDA_ERROR_INVALID_HANDLE);
	ruda_client_sync(client);
	assert_client_healthy();
}
END_TEST

/* StagingAttach without its fd, or with two, over the raw protocol. */
START_TEST(attach_without_or_with_extra_fds)
{
	int fd = raw_connect(&daemon_);
	ck_assert_int_eq(raw_hello(fd, 1), RUDA_OK);
	Ruda__StagingAttach a = RUDA__STAGING_ATTACH__INIT;
	a.region = 1;
	a.size = 4096;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 2;
	req.body_case = RUDA__REQUEST__BODY_STAGING_ATTACH;
	req.staging_attach = &a;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	Ruda__Reply *r = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(r->message, "without its memfd"));
	ruda__reply__free_unpacked(r, NULL);
	/* two fds with one attach: a protocol violation */
	int m1 = memfd_create("a", MFD_CLOEXEC), m2 = memfd_create("b", MFD_CLOEXEC);
	req.id = 3;
	uint8_t buf[64];
	size_t len = ruda__request__pack(&req, buf);
	int fds[2] = {m1, m2};
	ck_assert_int_eq(raw_send_frame(fd, buf, (uint32_t)len, fds, 2), 0);
	ck_assert(raw_closed_by_peer(fd, 5000));
	close(m1);
	close(m2);
	close(fd);
	assert_client_healthy();
}
END_TEST

/* Regions attached and dropped, and sessions that end holding some, leave
 * no fds or mappings behind. */
START_TEST(regions_leave_nothing_behind)
{
	int fds = test_settled_fds(daemon_.pid);
	for (int i = 0; i < 20; i++) {
		ruda_client *c = test_connect(&daemon_, "regions");
		ruda_staging r[3];
		for (int k = 0; k < 3; k++)
			ck_assert_int_eq(ruda_client_staging_create(c, 100000, &r[k]), RUDA_OK);
		ruda_client_staging_release(c, &r[0]);
		ruda_client_close(c); /* two still attached */
	}
	test_wait_for_stats(client, 1, 0);
	ck_assert_int_eq(test_settled_fds(daemon_.pid), fds);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("staging");
	TCase *tc = tcase_create("staging");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, staging_round_trips_odd_sizes);
	tcase_add_test(tc, staging_writes_into_slices);
	tcase_add_test(tc, caller_memfd_accepted);
	tcase_add_test(tc, unsealed_memfd_refused);
	tcase_add_test(tc, small_memfd_refused);
	tcase_add_test(tc, pipe_refused);
	tcase_add_test(tc, regular_file_refused);
	tcase_add_test(tc, unknown_region_and_range_refused);
	tcase_add_test(tc, attach_without_or_with_extra_fds);
	tcase_add_test(tc, regions_leave_nothing_behind);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
