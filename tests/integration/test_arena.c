/* Session arenas: imported into the device at the first transfer, not at
 * connect (idle clients pin nothing), with and without host import; and a
 * client's own memfd as its arena, with every refusal rudad makes of one. */
#include <check.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../proto/arena_header.h"
#include "harness.h"

#define MiB (1ull << 20)
#define DEFAULT_ARENA (16 * MiB)

/* ---- admin figures, over a raw connection ------------------------------- */

struct arena_figures {
	uint32_t arenas, imported;
	uint64_t arena_bytes, imported_bytes;
	uint64_t min_arena, max_arena;
};

/* Device 0's arena figures as AdminStatus reports them; the raw session
 * asking has an arena too (never imported). */
static struct arena_figures admin_figures(const struct test_daemon *d)
{
	Ruda__Reply *reply = test_admin_status(d);
	const Ruda__AdminStatusReply *st = reply->admin->status;
	ck_assert_uint_ge(st->n_devices, 1);
	struct arena_figures f = {
		.arenas = st->devices[0]->arenas,
		.imported = st->devices[0]->arenas_imported,
		.arena_bytes = st->devices[0]->arena_bytes,
		.imported_bytes = st->devices[0]->arena_imported_bytes,
		.min_arena = st->min_arena_size,
		.max_arena = st->max_arena_size,
	};
	ruda__reply__free_unpacked(reply, NULL);
	return f;
}

/* AdminClients' view of the client named `name`: whether its arena is
 * imported and whether it is the client's own. */
static void admin_client_flags(const struct test_daemon *d, const char *name, int *imported,
			       int *own)
{
	Ruda__Reply *reply = test_admin_clients(d);
	int found = 0;
	for (size_t i = 0; i < reply->admin->clients->n_clients; i++) {
		const Ruda__AdminClient *c = reply->admin->clients->clients[i];
		if (strcmp(c->name, name) == 0) {
			*imported = c->arena_imported;
			*own = c->client_arena;
			found = 1;
		}
	}
	ck_assert_msg(found, "no client named %s", name);
	ruda__reply__free_unpacked(reply, NULL);
}

static void round_trip(ruda_client *c, size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size), *back = malloc(size);
	ck_assert(data && back);
	test_fill_random(data, size, seed);
	memset(back, 0xa5, size);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, size, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_msg(memcmp(data, back, size) == 0, "%zu bytes differ after a round trip", size);
	ck_assert_int_eq(ruda_client_release(c, h), RUDA_OK);
	free(data);
	free(back);
}

/* ---- lazy import ---------------------------------------------------------- */

/* N idle clients import nothing; one transfer imports that client's arena
 * alone; it stays imported for the next ones; it goes with its client. */
static void idle_clients_pin_nothing(int bounce)
{
	enum { N = 6 };
	struct test_daemon d;
	if (bounce)
		setenv("RUDA_NO_HOST_IMPORT", "1", 1); /* inherited by the daemon */
	test_daemon_start(&d, NULL);
	unsetenv("RUDA_NO_HOST_IMPORT");
	ruda_client *c[N];
	for (int i = 0; i < N; i++)
		c[i] = test_connect(&d, "idle");
	/* an idle client's requests that move no bytes import nothing either */
	ruda_handle empty;
	ck_assert_int_eq(ruda_client_empty(c[1], 4096, &empty), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c[1]), RUDA_OK);
	struct arena_figures f = admin_figures(&d);
	ck_assert_uint_eq(f.arenas, N + 1);
	ck_assert_uint_eq(f.arena_bytes, (N + 1) * DEFAULT_ARENA);
	ck_assert_uint_eq(f.imported, 0);
	ck_assert_uint_eq(f.imported_bytes, 0);
	int imported, own;
	admin_client_flags(&d, "idle", &imported, &own);
	ck_assert(!imported && !own);
	ck_assert_uint_eq(f.min_arena, MiB);
	ck_assert_uint_eq(f.max_arena, 4096 * MiB);

	round_trip(c[0], 4097, 1);
	f = admin_figures(&d);
	ck_assert_uint_eq(f.imported, 1);
	ck_assert_uint_eq(f.imported_bytes, DEFAULT_ARENA);
	/* more transfers, larger than the arena, through the same import */
	round_trip(c[0], 40 * MiB + 3, 2);
	round_trip(c[0], 1, 3);
	f = admin_figures(&d);
	ck_assert_uint_eq(f.imported, 1);

	ruda_daemon_stats stats = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(c[2], &stats), RUDA_OK);
	ruda_client_close(c[0]);
	/* the session's end releases its arena, import and all */
	stats = test_wait_for_stats(c[2], N - 1, stats.device_bytes);
	ck_assert_uint_eq(stats.sessions, N - 1);
	f = admin_figures(&d);
	ck_assert_uint_eq(f.imported, 0);
	ck_assert_uint_eq(f.imported_bytes, 0);
	for (int i = 1; i < N; i++)
		ruda_client_close(c[i]);
	test_daemon_stop(&d);
}

START_TEST(idle_clients_import_nothing)
{
	idle_clients_pin_nothing(0);
}
END_TEST

START_TEST(idle_clients_make_no_bounce_buffer)
{
	idle_clients_pin_nothing(1);
}
END_TEST

/* An imported arena unused for RUDA_ARENA_RELEASE_MS loses its import (a
 * client that has gone idle pins nothing either); the next transfer
 * imports it again. */
static void released_when_unused(int bounce)
{
	struct test_daemon d;
	setenv("RUDA_ARENA_RELEASE_MS", "2000", 1);
	if (bounce)
		setenv("RUDA_NO_HOST_IMPORT", "1", 1);
	test_daemon_start(&d, NULL);
	unsetenv("RUDA_ARENA_RELEASE_MS");
	unsetenv("RUDA_NO_HOST_IMPORT");
	ruda_client *c = test_connect(&d, "goes idle");
	round_trip(c, 5 * MiB + 1, 60);
	ck_assert_uint_eq(admin_figures(&d).imported, 1);
	/* unused for 2 s: nothing is imported any more */
	struct arena_figures f;
	for (int i = 0; i < 400 && (f = admin_figures(&d)).imported; i++)
		usleep(50 * 1000);
	ck_assert_uint_eq(f.imported, 0);
	ck_assert_uint_eq(f.imported_bytes, 0);
	round_trip(c, 3 * MiB + 3, 62);
	ck_assert_uint_eq(admin_figures(&d).imported, 1);
	ruda_client_close(c);
	test_daemon_stop(&d);
}

START_TEST(unused_arena_released)
{
	released_when_unused(0);
}
END_TEST

START_TEST(unused_bounce_buffer_released)
{
	released_when_unused(1);
}
END_TEST

/* Many clients' first transfers at once: each waits for its own import
 * while the others' requests go on; every byte arrives. */
START_TEST(first_transfers_of_many_clients)
{
	enum { N = 8 };
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_client *c[N];
	ruda_handle h[N];
	uint8_t *data[N];
	const size_t size = 3 * MiB + 5;
	for (int i = 0; i < N; i++) {
		c[i] = test_connect(&d, "first");
		data[i] = malloc(size);
		test_fill_random(data[i], size, 100 + (uint64_t)i);
	}
	/* every upload queued before any read: the imports overlap */
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(ruda_client_create(c[i], data[i], size, &h[i]), RUDA_OK);
	uint8_t *back = malloc(size);
	for (int i = 0; i < N; i++) {
		memset(back, 0, size);
		ck_assert_int_eq(ruda_client_read_one(c[i], h[i], back), RUDA_OK);
		ck_assert_msg(memcmp(back, data[i], size) == 0, "client %d's bytes differ", i);
	}
	ck_assert_uint_eq(admin_figures(&d).imported, N);
	for (int i = 0; i < N; i++) {
		ruda_client_close(c[i]);
		free(data[i]);
	}
	free(back);
	test_daemon_stop(&d);
}
END_TEST

/* ---- a client's own memfd as the arena ------------------------------------ */

static int sealed_memfd(uint64_t size, unsigned seals)
{
	int fd = memfd_create("test-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seals)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static ruda_client *connect_with_arena(const struct test_daemon *d, int fd, uint64_t size,
				       ruda_status *st)
{
	ruda_connect_options o = {
		.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path,
		.client_name = "own arena",
		.use_arena_fd = 1,
		.arena_fd = fd,
		.arena_size = size,
	};
	ruda_client *c = NULL;
	*st = ruda_client_connect(&o, &c);
	return c;
}

START_TEST(client_arena_round_trips)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	int fd = sealed_memfd(2 * MiB, F_SEAL_SHRINK);
	ruda_status st;
	ruda_client *c = connect_with_arena(&d, fd, 0, &st);
	ck_assert_int_eq(st, RUDA_OK);
	/* rudad wrote the header into the client's memory, and sealed growth */
	struct ruda_arena_header *h = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(h, MAP_FAILED);
	ck_assert_uint_eq(h->magic, RUDA_ARENA_MAGIC);
	ck_assert_uint_eq(h->version, RUDA_ARENA_VERSION);
	munmap(h, 4096);
	ck_assert_int_ne(fcntl(fd, F_GET_SEALS) & F_SEAL_GROW, 0);
	close(fd); /* the caller's copy: the session keeps its mappings */
	int imported, own;
	admin_client_flags(&d, "own arena", &imported, &own);
	ck_assert(own && !imported);

	static const size_t sizes[] = {1, 3, 4095, 4097, (1u << 20) + 1};
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		round_trip(c, sizes[i], 20 + i);
	/* many times the 2 MiB arena: split and pipelined through it */
	round_trip(c, 9 * MiB + 7, 30);
	/* a kernel and a sync (its fast path watches a slot of this arena) */
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	ruda_handle out;
	ck_assert_int_eq(ruda_client_empty(c, 4096, &out), RUDA_OK);
	uint32_t push[2] = {0xabcd1234u, 1024};
	ck_assert_int_eq(ruda_client_launch(c, fill, (ruda_count){4, 1, 1}, &out, 1, push,
					    sizeof(push)),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	uint32_t words[1024];
	ck_assert_int_eq(ruda_client_read_one(c, out, words), RUDA_OK);
	for (int i = 0; i < 1024; i++)
		ck_assert_uint_eq(words[i], 0xabcd1234u);
	ck_assert_int_eq(ruda_client_release(c, out), RUDA_OK);
	struct arena_figures f = admin_figures(&d);
	ck_assert_uint_eq(f.arenas, 2);
	ck_assert_uint_eq(f.arena_bytes, 2 * MiB + DEFAULT_ARENA);
	ck_assert_uint_eq(f.imported, 1);
	ck_assert_uint_eq(f.imported_bytes, 2 * MiB);
	admin_client_flags(&d, "own arena", &imported, &own);
	ck_assert(own && imported);
	ruda_client_close(c);

	/* a declared size: part of a larger memfd, rounded down to whole pages */
	fd = sealed_memfd(8 * MiB, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	c = connect_with_arena(&d, fd, 3 * MiB + 100, &st);
	ck_assert_int_eq(st, RUDA_OK);
	round_trip(c, 7 * MiB + 1, 31);
	ruda_client_close(c);
	close(fd);
	test_daemon_stop(&d);
}
END_TEST

/* The same through rudad's bounce buffer (no host import). */
START_TEST(client_arena_without_host_import)
{
	struct test_daemon d;
	setenv("RUDA_NO_HOST_IMPORT", "1", 1);
	test_daemon_start(&d, NULL);
	unsetenv("RUDA_NO_HOST_IMPORT");
	int fd = sealed_memfd(MiB, F_SEAL_SHRINK);
	ruda_status st;
	ruda_client *c = connect_with_arena(&d, fd, 0, &st);
	ck_assert_int_eq(st, RUDA_OK);
	close(fd);
	round_trip(c, 4097, 40);
	round_trip(c, 5 * MiB + 3, 41);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* Send a Hello asking for a client arena with `fds` attached; expect the
 * refusal `status` with `why` in its message, and the connection closed. */
static void expect_refused(const struct test_daemon *d, int client_arena, uint64_t size,
			   const int *fds, int nfds, ruda_status status, const char *why)
{
	int sock = raw_connect(d);
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "bad arena";
	h.client_arena = client_arena;
	h.client_arena_size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	uint8_t buf[256];
	size_t n = ruda__request__get_packed_size(&req);
	ck_assert_uint_le(n, sizeof(buf));
	ruda__request__pack(&req, buf);
	ck_assert_int_eq(raw_send_frame(sock, buf, (uint32_t)n, fds, nfds), 0);
	int passed = -1;
	Ruda__Reply *reply = raw_recv_reply(sock, 10000, &passed);
	if (why) {
		ck_assert_ptr_nonnull(reply);
		ck_assert_int_eq(reply->id, 1);
		ck_assert_msg((int)reply->status == (int)status, "status %d, not %d (%s)",
			      reply->status, status, reply->message);
		ck_assert_msg(reply->message && strstr(reply->message, why),
			      "message \"%s\" does not say \"%s\"",
			      reply->message ? reply->message : "", why);
		ck_assert_int_eq(passed, -1);
	}
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	if (passed >= 0)
		close(passed);
	ck_assert(raw_closed_by_peer(sock, 5000));
	close(sock);
}

START_TEST(client_arena_refusals)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	int fd;

	fd = sealed_memfd(4 * MiB, 0); /* sealable, not sealed */
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "F_SEAL_SHRINK");
	close(fd);
	fd = memfd_create("no-sealing", MFD_CLOEXEC); /* cannot be sealed at all */
	ck_assert_int_eq(ftruncate(fd, 4 * MiB), 0);
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "F_SEAL_SHRINK");
	close(fd);
	fd = sealed_memfd(4 * MiB, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE);
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "sealed against writing");
	close(fd);

	fd = sealed_memfd(256 * 1024, F_SEAL_SHRINK); /* below 1 MiB */
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_OUT_OF_RANGE, "outside rudad's arena sizes");
	close(fd);
	fd = sealed_memfd(8 * 1024 * MiB, F_SEAL_SHRINK); /* above 4 GiB (sparse) */
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_OUT_OF_RANGE, "outside rudad's arena sizes");
	close(fd);
	fd = sealed_memfd(2 * MiB, F_SEAL_SHRINK); /* fewer bytes than declared */
	expect_refused(&d, 1, 4 * MiB, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "fewer than");
	close(fd);

	/* not a memfd: a regular file, a pipe, /dev/null, a socket */
	char path[] = "/tmp/ruda-arena-XXXXXX";
	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, 4 * MiB), 0);
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT,
		       "a regular file, not a memfd");
	close(fd);
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	expect_refused(&d, 1, 0, &p[0], 1, RUDA_ERROR_INVALID_ARGUMENT, "a pipe, not a memfd");
	close(p[0]);
	close(p[1]);
	fd = open("/dev/null", O_RDWR | O_CLOEXEC);
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT,
		       "a character device, not a memfd");
	close(fd);
	fd = raw_connect(&d);
	expect_refused(&d, 1, 0, &fd, 1, RUDA_ERROR_INVALID_ARGUMENT, "a socket, not a memfd");
	close(fd);

	/* the flag without its fd; an fd without the flag (a protocol
	 * violation: the connection is dropped without a reply) */
	expect_refused(&d, 1, 0, NULL, 0, RUDA_ERROR_INVALID_ARGUMENT, "carries no memfd");
	fd = sealed_memfd(4 * MiB, F_SEAL_SHRINK);
	expect_refused(&d, 0, 0, &fd, 1, RUDA_OK, NULL);
	close(fd);

	/* libruda passes the status on */
	ruda_status st;
	fd = sealed_memfd(4 * MiB, 0);
	ck_assert_ptr_null(connect_with_arena(&d, fd, 0, &st));
	ck_assert_int_eq(st, RUDA_ERROR_INVALID_ARGUMENT);
	close(fd);
	fd = sealed_memfd(512 * 1024, F_SEAL_SHRINK);
	ck_assert_ptr_null(connect_with_arena(&d, fd, 0, &st));
	ck_assert_int_eq(st, RUDA_ERROR_OUT_OF_RANGE);
	close(fd);

	/* none of it left anything behind: a good one still works */
	ruda_client *c = test_connect(&d, "after");
	round_trip(c, 4097, 50);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("arena");
	TCase *tc = tcase_create("arena");
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, idle_clients_import_nothing);
	tcase_add_test(tc, idle_clients_make_no_bounce_buffer);
	tcase_add_test(tc, unused_arena_released);
	tcase_add_test(tc, unused_bounce_buffer_released);
	tcase_add_test(tc, first_transfers_of_many_clients);
	tcase_add_test(tc, client_arena_round_trips);
	tcase_add_test(tc, client_arena_without_host_import);
	tcase_add_test(tc, client_arena_refusals);
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
