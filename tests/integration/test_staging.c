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

/* ---- admin figures, over a raw connection ------------------------------- */

struct staging_totals {
	uint64_t bytes;
	uint32_t regions, importing;
};

/* AdminStatus: every client's staging regions together. */
static struct staging_totals admin_totals(const struct test_daemon *d)
{
	Ruda__Reply *reply = test_admin_status(d);
	const Ruda__AdminStatusReply *st = reply->admin->status;
	struct staging_totals t = {st->staging_bytes, st->staging_regions, st->staging_importing};
	ruda__reply__free_unpacked(reply, NULL);
	return t;
}

struct client_figures {
	uint64_t staging_bytes, staging_quota, staging_uid_quota, submissions;
	uint32_t staging_regions;
};

/* AdminClients' view of the client named `name`. */
static struct client_figures admin_client(const struct test_daemon *d, const char *name)
{
	Ruda__Reply *reply = test_admin_clients(d);
	struct client_figures f = {0};
	int found = 0;
	for (size_t i = 0; i < reply->admin->clients->n_clients; i++) {
		const Ruda__AdminClient *c = reply->admin->clients->clients[i];
		if (strcmp(c->name, name) == 0) {
			f = (struct client_figures){c->staging_bytes, c->staging_quota_bytes,
						    c->staging_quota_uid_bytes, c->submissions,
						    c->staging_regions};
			found++;
		}
	}
	ck_assert_msg(found == 1, "%d clients named %s", found, name);
	ruda__reply__free_unpacked(reply, NULL);
	return f;
}

/* Wait until AdminStatus shows `bytes` staging bytes in all (sessions end
 * asynchronously when a client is killed). */
static struct staging_totals wait_for_staging(const struct test_daemon *d, uint64_t bytes)
{
	struct staging_totals t;
	for (int i = 0; i < 1000 && (t = admin_totals(d)).bytes != bytes; i++)
		usleep(10000);
	return t;
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
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK); /* the refusal left no error */
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

/* ---- quotas -------------------------------------------------------------- */

#define KIB(n) ((size_t)(n) << 10)

/* Staging regions are charged to the staging quotas, per client and per
 * uid; an attach past either is refused with ERROR_QUOTA and the client goes
 * on; what a detach gives back another client may take. Admin figures are
 * exact: a region is charged its size rounded up to the device's import
 * granularity (4 KiB on lavapipe; the sizes here are multiples of it). */
START_TEST(staging_quota_refused_and_given_back)
{
	struct test_daemon d;
	const char *args[] = {"--set", "max_staging_per_client=1M", "--set",
			      "max_staging_per_uid=3M", NULL};
	test_daemon_start(&d, args);
	ruda_client *a = test_connect(&d, "a"), *b = test_connect(&d, "b"),
		    *c = test_connect(&d, "c");
	ruda_staging ra[2], rb, rc, extra;
	ck_assert_int_eq(ruda_client_staging_create(a, KIB(704), &ra[0]), RUDA_OK);
	/* a's own quota: 704 + 512 KiB > 1 MiB */
	ck_assert_int_eq(ruda_client_staging_create(a, KIB(512), &extra), RUDA_ERROR_QUOTA);
	char why[512];
	ruda_client_last_error(a, why, sizeof(why));
	ck_assert_msg(strstr(why, "exceed the staging quota") && strstr(why, "max_staging_per_client"),
		      "%s", why);
	ck_assert_int_eq(ruda_client_staging_create(a, KIB(320), &ra[1]), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_create(b, KIB(1024), &rb), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_create(c, KIB(1024), &rc), RUDA_OK);
	struct client_figures fa = admin_client(&d, "a"), fc = admin_client(&d, "c");
	ck_assert_uint_eq(fa.staging_bytes, 1u << 20);
	ck_assert_uint_eq(fa.staging_regions, 2);
	ck_assert_uint_eq(fa.staging_quota, 1u << 20);
	ck_assert_uint_eq(fa.staging_uid_quota, 3u << 20);
	ck_assert_uint_eq(fc.staging_bytes, 1u << 20);
	struct staging_totals t = admin_totals(&d);
	ck_assert_uint_eq(t.bytes, 3u << 20);
	ck_assert_uint_eq(t.regions, 4);
	/* a fresh client of the same uid: refused by the uid's quota */
	ruda_client *e = test_connect(&d, "e");
	ck_assert_int_eq(ruda_client_staging_create(e, 1, &extra), RUDA_ERROR_QUOTA);
	ruda_client_last_error(e, why, sizeof(why));
	ck_assert_msg(strstr(why, "3.0 MiB of 3.0 MiB"), "%s", why);
	/* a detaches one region: e may take its bytes, no more */
	ck_assert_int_eq(ruda_client_staging_release(a, &ra[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK); /* the detach is done */
	ck_assert_uint_eq(admin_client(&d, "a").staging_bytes, KIB(320));
	ck_assert_int_eq(ruda_client_staging_create(e, KIB(704) + 1, &extra), RUDA_ERROR_QUOTA);
	ruda_staging re;
	ck_assert_int_eq(ruda_client_staging_create(e, KIB(704), &re), RUDA_OK);
	t = admin_totals(&d);
	ck_assert_uint_eq(t.bytes, 3u << 20);
	ck_assert_uint_eq(t.regions, 4);
	/* refused clients were left serving: every region still works */
	uint8_t *back = malloc(KIB(704));
	test_fill_random(re.data, KIB(704), 8);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create_from_staging(e, &re, 0, KIB(704), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(e, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, re.data, KIB(704)), 0);
	free(back);
	ck_assert_int_eq(ruda_client_staging_release(e, &re), RUDA_OK);
	ruda_client_close(e);
	ruda_client_close(c);
	ruda_client_close(b);
	ruda_client_close(a);
	/* everything given back as the sessions end */
	ck_assert_uint_eq(wait_for_staging(&d, 0).regions, 0);
	test_daemon_stop(&d);
}
END_TEST

/* Four regions of 2 MiB; killed right after the attaches' replies: on odd
 * rounds (*arg) before their imports are awaited, on even ones after. */
static int hold_four_regions(ruda_client *c, void *arg)
{
	int round = *(const int *)arg;
	ruda_staging r[4];
	for (int k = 0; k < 4; k++)
		if (ruda_client_staging_create(c, 2u << 20, &r[k]) != RUDA_OK)
			return 1;
	if (round % 2 == 0) {
		ruda_handle h;
		ruda_client_create_from_staging(c, &r[3], 0, 1u << 20, &h);
		ruda_client_sync(c);
	}
	return 0;
}

/* A client killed while holding regions (and while their imports may still
 * run) gives its bytes back: another client can then attach as much. */
START_TEST(staging_uncharged_when_killed)
{
	struct test_daemon d;
	const char *args[] = {"--set", "max_staging_per_uid=8M", NULL};
	test_daemon_start(&d, args);
	for (int round = 0; round < 10; round++) {
		pid_t pid = test_fork_client(&d, "victim", hold_four_regions, &round);
		ck_assert_uint_eq(admin_totals(&d).bytes, 8u << 20);
		test_kill(pid);
		ck_assert_uint_eq(wait_for_staging(&d, 0).regions, 0);
	}
	/* all 8 MiB may be attached again */
	ruda_client *c = test_connect(&d, "after");
	ruda_staging r;
	ck_assert_int_eq(ruda_client_staging_create(c, 8u << 20, &r), RUDA_OK);
	ck_assert_uint_eq(admin_client(&d, "after").staging_bytes, 8u << 20);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* ---- the import, off the loop ------------------------------------------- */

/* Regions used at once after their attach: the transfers wait for each
 * import in order, and every byte lands. */
START_TEST(attaches_interleaved_with_transfers)
{
	enum { N = 24 };
	ruda_staging up[N], down[N];
	ruda_handle h[N];
	for (int i = 0; i < N; i++) {
		size_t size = (size_t)(i + 1) * 300007u;
		ck_assert_int_eq(ruda_client_staging_create(client, size, &up[i]), RUDA_OK);
		test_fill_random(up[i].data, size, 100 + (uint64_t)i);
		ck_assert_int_eq(ruda_client_create_from_staging(client, &up[i], 0, size, &h[i]),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_staging_create(client, size, &down[i]), RUDA_OK);
		memset(down[i].data, 0, size);
		/* a Write into the region's neighbour buffer from the arena in between */
		uint8_t small[64];
		test_fill_random(small, sizeof(small), (uint64_t)i);
		ck_assert_int_eq(ruda_client_write(client, h[i], 0, small, sizeof(small)), RUDA_OK);
		ck_assert_int_eq(ruda_client_write_from_staging(client, h[i], 0, &up[i], 0, 64),
				 RUDA_OK);
	}
	for (int i = 0; i < N; i++) {
		ck_assert_int_eq(ruda_client_read_to_staging(client, h[i], &down[i], 0), RUDA_OK);
		ck_assert_int_eq(memcmp(up[i].data, down[i].data, h[i].size), 0);
	}
	for (int i = 0; i < N; i++) {
		ruda_client_release(client, h[i]);
		ruda_client_staging_release(client, &up[i]);
		ruda_client_staging_release(client, &down[i]);
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	struct staging_totals t = admin_totals(&daemon_);
	ck_assert_uint_eq(t.bytes, 0);
	ck_assert_uint_eq(t.regions, 0);
}
END_TEST

/* A region released right after its attach (its import still running, or
 * not): nothing leaks, nothing stays charged, the client goes on. */
START_TEST(detach_right_after_attach)
{
	int fds = test_settled_fds(daemon_.pid);
	for (int i = 0; i < 40; i++) {
		ruda_staging r;
		ck_assert_int_eq(ruda_client_staging_create(client, (size_t)(i % 5 + 1) << 20, &r),
				 RUDA_OK);
		ck_assert_int_eq(ruda_client_staging_release(client, &r), RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	struct staging_totals t = admin_totals(&daemon_);
	ck_assert_uint_eq(t.bytes, 0);
	ck_assert_uint_eq(t.regions, 0);
	ck_assert_uint_eq(admin_client(&daemon_, "test_staging").staging_bytes, 0);
	test_wait_for_stats(client, 1, 0);
	ck_assert_int_eq(test_settled_fds(daemon_.pid), fds);
	assert_client_healthy();
}
END_TEST

/* An import that fails (RUDA_TEST_FAIL_STAGING_IMPORT, honoured with
 * RUDA_TEST_FAULTS=1, makes a region of that size fail its first) is
 * reported at the region's next use, with the reason; the use after that
 * imports it again. */
START_TEST(failed_import_reported_at_next_use)
{
	struct test_daemon d;
	setenv("RUDA_TEST_FAULTS", "1", 1); /* inherited by the daemon */
	setenv("RUDA_TEST_FAIL_STAGING_IMPORT", "196608", 1);
	test_daemon_start(&d, NULL);
	unsetenv("RUDA_TEST_FAULTS");
	unsetenv("RUDA_TEST_FAIL_STAGING_IMPORT");
	ruda_client *c = test_connect(&d, "failing");
	ruda_staging r;
	/* the attach itself succeeds: the import runs after its reply */
	ck_assert_int_eq(ruda_client_staging_create(c, 196608, &r), RUDA_OK);
	test_fill_random(r.data, 196608, 3);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, 196608, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_write_from_staging(c, h, 0, &r, 0, 196608), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_ERROR_OUT_OF_MEMORY);
	char why[512];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, "staging region") && strstr(why, "importing its 196608 bytes failed"),
		      "%s", why);
	/* the next use imports it again, and works */
	ruda_handle h2;
	ck_assert_int_eq(ruda_client_create_from_staging(c, &r, 0, 196608, &h2), RUDA_OK);
	uint8_t *back = malloc(196608);
	ck_assert_int_eq(ruda_client_read_one(c, h2, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, r.data, 196608), 0);
	free(back);
	/* still charged while attached, given back at detach */
	ck_assert_uint_eq(admin_client(&d, "failing").staging_bytes, 196608);
	ck_assert_int_eq(ruda_client_staging_release(c, &r), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_uint_eq(admin_totals(&d).bytes, 0);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* ---- submissions ---------------------------------------------------------- */

/* A staging create, write and read are each one GPU submission, whatever
 * their size (40 MiB here, more than twice the 16 MiB arena that ordinary
 * transfers move through): the region is imported whole, so nothing is
 * split into chunks. The per-client counter is AdminClient.submissions. */
START_TEST(one_submission_per_staging_transfer)
{
	const size_t size = 40u << 20;
	ruda_staging up, down;
	ck_assert_int_eq(ruda_client_staging_create(client, size, &up), RUDA_OK);
	ck_assert_int_eq(ruda_client_staging_create(client, size, &down), RUDA_OK);
	test_fill_random(up.data, size, 77);
	ruda_handle h;
	/* the first use waits for the imports; then the counts are steady */
	ck_assert_int_eq(ruda_client_create_from_staging(client, &up, 0, 4096, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_to_staging(client, h, &down, 0), RUDA_OK);
	ruda_client_release(client, h);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);

	uint64_t before = admin_client(&daemon_, "test_staging").submissions;
	ck_assert_int_eq(ruda_client_create_from_staging(client, &up, 0, size, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	uint64_t after_create = admin_client(&daemon_, "test_staging").submissions;
	ck_assert_uint_eq(after_create - before, 1);

	ck_assert_int_eq(ruda_client_write_from_staging(client, h, 0, &up, 0, size), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	uint64_t after_write = admin_client(&daemon_, "test_staging").submissions;
	ck_assert_uint_eq(after_write - after_create, 1);

	ck_assert_int_eq(ruda_client_read_to_staging(client, h, &down, 0), RUDA_OK);
	uint64_t after_read = admin_client(&daemon_, "test_staging").submissions;
	ck_assert_uint_eq(after_read - after_write, 1);
	ck_assert_int_eq(memcmp(up.data, down.data, size), 0);

	ruda_client_release(client, h);
	ruda_client_staging_release(client, &up);
	ruda_client_staging_release(client, &down);
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
	tcase_add_test(tc, staging_quota_refused_and_given_back);
	tcase_add_test(tc, staging_uncharged_when_killed);
	tcase_add_test(tc, attaches_interleaved_with_transfers);
	tcase_add_test(tc, detach_right_after_attach);
	tcase_add_test(tc, failed_import_reported_at_next_use);
	tcase_add_test(tc, one_submission_per_staging_transfer);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
