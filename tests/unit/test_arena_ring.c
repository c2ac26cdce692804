/* Unit tests for libclient/arena_ring.c, the client's arena allocator. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "arena_ring.h"

#define ALIGN 64u

/* For hot loops: a passing ck_assert writes to Check's pipe each time. */
#define REQUIRE(cond)                                                \
	do {                                                         \
		if (!(cond))                                         \
			ck_abort_msg("assertion failed: %s", #cond); \
	} while (0)

static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* Allocate and check the basic contract of every region handed out. */
static uint64_t alloc_ok(struct ruda_arena_ring *r, uint64_t size, int client_owned,
			 uint64_t *region)
{
	uint64_t off = UINT64_MAX, id = UINT64_MAX;
	int rc = ruda__arena_ring_alloc(r, size, client_owned, &off, &id);
	ck_assert_msg(rc == 0, "alloc %llu: %d", (unsigned long long)size, rc);
	ck_assert_uint_eq(off % ALIGN, 0);
	/* a region never crosses the end of the data space */
	ck_assert_uint_le(off + size, r->capacity);
	if (region)
		*region = id;
	return off;
}

static int try_alloc(struct ruda_arena_ring *r, uint64_t size)
{
	uint64_t off, id;
	return ruda__arena_ring_alloc(r, size, 0, &off, &id);
}

START_TEST(aligned_within_capacity)
{
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 64 * 1024), 0);
	const uint64_t sizes[] = {1, 63, 64, 65, 100, 0, 4096, 3};
	uint64_t offs[8], ids[8];
	for (int i = 0; i < 8; i++) {
		offs[i] = alloc_ok(&r, sizes[i], 0, &ids[i]);
		/* no two live regions overlap (size 0 still takes a slot) */
		uint64_t len_i = sizes[i] ? sizes[i] : 1;
		for (int j = 0; j < i; j++) {
			uint64_t len_j = sizes[j] ? sizes[j] : 1;
			ck_assert(offs[i] + len_i <= offs[j] || offs[j] + len_j <= offs[i]);
			ck_assert_uint_ne(ids[i], ids[j]);
		}
	}
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(too_big)
{
	struct ruda_arena_ring r;
	/* capacity rounds down to whole 64-byte units: 1000 -> 960 */
	ck_assert_int_eq(ruda__arena_ring_init(&r, 1000), 0);
	ck_assert_uint_le(r.capacity, 1000);
	ck_assert_uint_eq(r.capacity % ALIGN, 0);
	ck_assert_int_eq(try_alloc(&r, r.capacity + 1), -E2BIG);
	ck_assert_int_eq(try_alloc(&r, 1000), -E2BIG);
	ck_assert_int_eq(try_alloc(&r, UINT64_MAX / 2), -E2BIG);
	/* refusals took nothing: the whole ring is still there */
	uint64_t off = alloc_ok(&r, r.capacity, 0, NULL);
	ck_assert_uint_eq(off, 0);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(full_is_eagain)
{
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 16 * ALIGN), 0);
	for (int i = 0; i < 16; i++)
		alloc_ok(&r, ALIGN, 0, NULL);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	/* nothing was sent, so nothing can be reclaimed */
	ruda__arena_ring_reclaim(&r, UINT64_MAX);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	/* partly full: a size that does not fit is EAGAIN, one that does is not */
	ruda__arena_ring_finish(&r);
	ck_assert_int_eq(ruda__arena_ring_init(&r, 16 * ALIGN), 0);
	alloc_ok(&r, 10 * ALIGN, 0, NULL);
	ck_assert_int_eq(try_alloc(&r, 7 * ALIGN), -EAGAIN);
	alloc_ok(&r, 6 * ALIGN, 0, NULL);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(reclaim_uploads_in_order)
{
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 4 * ALIGN), 0);
	uint64_t a, b, c, d;
	uint64_t off_a = alloc_ok(&r, ALIGN, 0, &a);
	uint64_t off_b = alloc_ok(&r, ALIGN, 0, &b);
	alloc_ok(&r, ALIGN, 0, &c);
	alloc_ok(&r, ALIGN, 0, &d);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ruda__arena_ring_set_request(&r, b, 2);
	ruda__arena_ring_set_request(&r, c, 3);
	ruda__arena_ring_set_request(&r, d, 4);

	/* `a` was never sent (request 0): it holds everything behind it */
	ruda__arena_ring_reclaim(&r, 100);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ck_assert_uint_eq(r.count, 4);

	ruda__arena_ring_set_request(&r, a, 1);
	ruda__arena_ring_reclaim(&r, 0);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	/* completed == 1 frees `a` only */
	ruda__arena_ring_reclaim(&r, 1);
	ck_assert_uint_eq(r.count, 3);
	uint64_t e;
	ck_assert_uint_eq(alloc_ok(&r, ALIGN, 0, &e), off_a);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	/* completed == 2 frees `b`; `e` (request 0) is now last in line */
	ruda__arena_ring_reclaim(&r, 2);
	ck_assert_uint_eq(alloc_ok(&r, ALIGN, 0, NULL), off_b);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(reclaim_waits_for_front)
{
	/* requests out of order: a later request's completion frees nothing
	 * while the front region is still pending */
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 2 * ALIGN), 0);
	uint64_t a, b;
	alloc_ok(&r, ALIGN, 0, &a);
	alloc_ok(&r, ALIGN, 0, &b);
	ruda__arena_ring_set_request(&r, a, 5);
	ruda__arena_ring_set_request(&r, b, 1);
	ruda__arena_ring_reclaim(&r, 4);
	ck_assert_uint_eq(r.count, 2);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ruda__arena_ring_reclaim(&r, 5);
	ck_assert_uint_eq(r.count, 0);
	alloc_ok(&r, 2 * ALIGN, 0, NULL);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(client_owned_fifo)
{
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 4 * ALIGN), 0);
	uint64_t a, b, c, d;
	alloc_ok(&r, ALIGN, 1, &a);
	alloc_ok(&r, ALIGN, 1, &b);
	alloc_ok(&r, ALIGN, 0, &c);
	alloc_ok(&r, ALIGN, 1, &d);
	ruda__arena_ring_set_request(&r, c, 1);
	ck_assert(ruda__arena_ring_has_held(&r));

	/* daemon progress never frees a download */
	ruda__arena_ring_reclaim(&r, UINT64_MAX);
	ck_assert_uint_eq(r.count, 4);
	/* a released region behind an unreleased one stays */
	ruda__arena_ring_release(&r, b);
	ruda__arena_ring_reclaim(&r, UINT64_MAX);
	ck_assert_uint_eq(r.count, 4);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);
	ck_assert(ruda__arena_ring_has_held(&r));

	/* releasing the front frees a, b and the completed upload c; d stays */
	ruda__arena_ring_release(&r, a);
	ruda__arena_ring_reclaim(&r, 1);
	ck_assert_uint_eq(r.count, 1);
	ck_assert(ruda__arena_ring_has_held(&r));
	for (int i = 0; i < 3; i++)
		alloc_ok(&r, ALIGN, 0, NULL);
	ck_assert_int_eq(try_alloc(&r, 1), -EAGAIN);

	ruda__arena_ring_release(&r, d);
	ck_assert(!ruda__arena_ring_has_held(&r));
	ruda__arena_ring_reclaim(&r, 1);
	alloc_ok(&r, ALIGN, 0, NULL);
	/* ids no longer outstanding are ignored */
	ruda__arena_ring_release(&r, a);
	ruda__arena_ring_set_request(&r, 12345, 1);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(wrap_skips_tail_end)
{
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 16 * ALIGN), 0);
	uint64_t a, b;
	ck_assert_uint_eq(alloc_ok(&r, 10 * ALIGN, 0, &a), 0);
	uint64_t off_b = alloc_ok(&r, 4 * ALIGN, 0, &b);
	ck_assert_uint_eq(off_b, 10 * ALIGN);
	ruda__arena_ring_set_request(&r, a, 1);
	ruda__arena_ring_set_request(&r, b, 2);
	ruda__arena_ring_reclaim(&r, 1);
	/* 2 units left at the end, 10 free at the start: 3 units must not
	 * straddle the end, so they go to the start */
	uint64_t c;
	uint64_t off_c = alloc_ok(&r, 3 * ALIGN, 0, &c);
	ck_assert_uint_eq(off_c, 0);
	ck_assert(off_c + 3 * ALIGN <= off_b || off_c >= off_b + 4 * ALIGN);
	/* the rest of the start (7 units) is there; 8 are not */
	ck_assert_int_eq(try_alloc(&r, 8 * ALIGN), -EAGAIN);
	uint64_t off_d = alloc_ok(&r, 7 * ALIGN, 0, NULL);
	ck_assert_uint_eq(off_d, 3 * ALIGN);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(empty_ring_fits_any_size)
{
	/* An empty ring must serve any size up to its capacity wherever its
	 * head happens to be: otherwise a caller that waits for space (as
	 * libruda does) waits forever. */
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 16 * ALIGN), 0);
	uint64_t a;
	alloc_ok(&r, 8 * ALIGN, 0, &a);
	ruda__arena_ring_set_request(&r, a, 1);
	ruda__arena_ring_reclaim(&r, 1);
	ck_assert_uint_eq(r.count, 0);
	/* head is mid-ring; 9 units fit neither before nor after it */
	ck_assert_int_eq(try_alloc(&r, 9 * ALIGN), 0);
	ruda__arena_ring_finish(&r);

	ck_assert_int_eq(ruda__arena_ring_init(&r, 16 * ALIGN), 0);
	alloc_ok(&r, 5 * ALIGN, 0, &a);
	ruda__arena_ring_set_request(&r, a, 1);
	ruda__arena_ring_reclaim(&r, 1);
	alloc_ok(&r, 16 * ALIGN, 0, NULL);
	ruda__arena_ring_finish(&r);
}
END_TEST

/* ---- randomized simulation ---------------------------------------------- */

struct live {
	uint64_t id, off, size;
	int client_owned, released;
	uint64_t request; /* 0 = not sent yet */
};

START_TEST(random_simulation)
{
	/* Uploads are sent in allocation order (ids increase) and complete in
	 * order; downloads are released in random order. A model FIFO mirrors
	 * the ring: every new region must be disjoint from all live ones. */
	enum { STEPS = 200000, MAXLIVE = 8192 }; /* the ring holds at most cap / 64 = 4096 */
	const uint64_t cap = 256 * 1024;
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, cap), 0);
	static struct live fifo[MAXLIVE];
	size_t head = 0, n = 0; /* model FIFO: fifo[head .. head+n) mod MAXLIVE */
	uint64_t next_request = 1, completed = 0, last_sent = 0;
	size_t peak = 0, wraps = 0, eagains = 0;
	rng_state = 0x9e3779b97f4a7c15ull;

	for (int step = 0; step < STEPS; step++) {
		uint64_t action = rng() % 100;
		if (action < 55) {
			/* mostly small (many outstanding), sometimes up to a chunk */
			uint64_t size = rng() % 8 == 0 ? 1 + rng() % ruda__arena_ring_chunk(&r)
						       : 1 + rng() % 1500;
			int owned = rng() % 4 == 0;
			uint64_t off, id;
			int rc = ruda__arena_ring_alloc(&r, size, owned, &off, &id);
			if (rc == -EAGAIN) {
				/* only a ring holding something may be full */
				REQUIRE(n > 0);
				eagains++;
				continue;
			}
			REQUIRE(rc == 0);
			REQUIRE(n < MAXLIVE);
			REQUIRE(off % ALIGN == 0);
			REQUIRE(off + size <= cap);
			for (size_t k = 0; k < n; k++) {
				const struct live *l = &fifo[(head + k) % MAXLIVE];
				if (!(off + size <= l->off || l->off + l->size <= off))
					ck_abort_msg("step %d: [%llu,+%llu) overlaps live [%llu,+%llu)",
						     step, (unsigned long long)off,
						     (unsigned long long)size,
						     (unsigned long long)l->off,
						     (unsigned long long)l->size);
				if (l->id == id)
					ck_abort_msg("step %d: region id %llu reused", step,
						     (unsigned long long)id);
			}
			if (n && off < fifo[(head + n - 1) % MAXLIVE].off)
				wraps++;
			fifo[(head + n) % MAXLIVE] =
				(struct live){.id = id, .off = off, .size = size, .client_owned = owned};
			n++;
			if (n > peak)
				peak = n;
		} else if (action < 75) {
			/* send the oldest few unsent uploads */
			uint64_t batch = 1 + rng() % 4;
			for (size_t k = 0; k < n && batch; k++) {
				struct live *l = &fifo[(head + k) % MAXLIVE];
				if (!l->client_owned && !l->request) {
					l->request = last_sent = next_request++;
					ruda__arena_ring_set_request(&r, l->id, l->request);
					batch--;
				}
			}
		} else if (action < 85) {
			/* the daemon makes progress */
			if (completed < last_sent)
				completed += 1 + rng() % (last_sent - completed);
		} else {
			/* release a random held download (any order) */
			size_t nheld = 0;
			for (size_t k = 0; k < n; k++) {
				const struct live *l = &fifo[(head + k) % MAXLIVE];
				nheld += l->client_owned && !l->released;
			}
			if (nheld) {
				size_t pick = rng() % nheld;
				for (size_t k = 0; k < n; k++) {
					struct live *l = &fifo[(head + k) % MAXLIVE];
					if (l->client_owned && !l->released && pick-- == 0) {
						l->released = 1;
						ruda__arena_ring_release(&r, l->id);
						break;
					}
				}
			}
		}
		/* reclaim, in the model too, then compare */
		ruda__arena_ring_reclaim(&r, completed);
		while (n) {
			const struct live *l = &fifo[head];
			int done = l->client_owned ? l->released
						   : l->request && l->request <= completed;
			if (!done)
				break;
			head = (head + 1) % MAXLIVE;
			n--;
		}
		REQUIRE(r.count == n);
		int held = 0;
		for (size_t k = 0; k < n && !held; k++) {
			const struct live *l = &fifo[(head + k) % MAXLIVE];
			held = l->client_owned && !l->released;
		}
		REQUIRE(ruda__arena_ring_has_held(&r) == held);
	}
	/* the FIFO outgrew its first 64 slots, the ring wrapped and filled */
	ck_assert_uint_gt(peak, 64);
	ck_assert_uint_gt(wraps, 10);
	ck_assert_uint_gt(eagains, 10);

	/* drain everything: then a full chunk fits again */
	for (size_t k = 0; k < n; k++) {
		struct live *l = &fifo[(head + k) % MAXLIVE];
		if (l->client_owned)
			ruda__arena_ring_release(&r, l->id);
		else if (!l->request)
			ruda__arena_ring_set_request(&r, l->id, next_request++);
	}
	ruda__arena_ring_reclaim(&r, UINT64_MAX);
	ck_assert_uint_eq(r.count, 0);
	ck_assert(!ruda__arena_ring_has_held(&r));
	alloc_ok(&r, ruda__arena_ring_chunk(&r), 0, NULL);
	ruda__arena_ring_finish(&r);
}
END_TEST

START_TEST(fifo_growth_keeps_order)
{
	/* 1000 tiny outstanding regions force several FIFO growths while the
	 * front has moved (first != 0); freeing must still follow alloc order */
	struct ruda_arena_ring r;
	ck_assert_int_eq(ruda__arena_ring_init(&r, 4096 * ALIGN), 0);
	enum { N = 1000 };
	static uint64_t ids[N + 10], offs[N + 10];
	/* move the front first */
	for (int i = 0; i < 10; i++) {
		offs[i] = alloc_ok(&r, 1, 0, &ids[i]);
		ruda__arena_ring_set_request(&r, ids[i], (uint64_t)i + 1);
	}
	ruda__arena_ring_reclaim(&r, 5);
	ck_assert_uint_eq(r.count, 5);
	for (int i = 10; i < N + 10; i++) {
		offs[i] = alloc_ok(&r, 1, 0, &ids[i]);
		ruda__arena_ring_set_request(&r, ids[i], (uint64_t)i + 1);
	}
	ck_assert_uint_eq(r.count, N + 5);
	ck_assert_uint_gt(r.cap, 64);
	/* no wrap yet (1010 units of 4096): regions follow each other */
	for (int i = 1; i < N + 10; i++)
		ck_assert_uint_eq(offs[i], offs[i - 1] + ALIGN);
	/* free one by one: each step frees exactly the next region */
	for (int i = 5; i < N + 10; i++) {
		ruda__arena_ring_reclaim(&r, (uint64_t)i + 1);
		ck_assert_uint_eq(r.count, (size_t)(N + 10 - i - 1));
	}
	ruda__arena_ring_finish(&r);
}
END_TEST

static Suite *arena_ring_suite(void)
{
	Suite *s = suite_create("arena_ring");
	TCase *basic = tcase_create("basic");
	tcase_add_test(basic, aligned_within_capacity);
	tcase_add_test(basic, too_big);
	tcase_add_test(basic, full_is_eagain);
	tcase_add_test(basic, reclaim_uploads_in_order);
	tcase_add_test(basic, reclaim_waits_for_front);
	tcase_add_test(basic, client_owned_fifo);
	tcase_add_test(basic, wrap_skips_tail_end);
	tcase_add_test(basic, empty_ring_fits_any_size);
	suite_add_tcase(s, basic);

	TCase *sim = tcase_create("simulation");
	tcase_set_timeout(sim, 120);
	tcase_add_test(sim, random_simulation);
	tcase_add_test(sim, fifo_growth_keeps_order);
	suite_add_tcase(s, sim);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(arena_ring_suite());
	/* CK_FORK by default (each test in its own process); CK_FORK=no for debugging */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
