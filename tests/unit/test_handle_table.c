/* Unit tests for daemon/common/handle_table.c, checked against a naive reference. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "common/handle_table.h"

/* For hot loops: a passing ck_assert writes to Check's pipe each time. */
#define REQUIRE(cond)                                                \
	do {                                                         \
		if (!(cond))                                         \
			ck_abort_msg("assertion failed: %s", #cond); \
	} while (0)

/* Distinct non-NULL values to store. */
static char values[4096];

static void *val(size_t i)
{
	return &values[i % sizeof(values)];
}

/* Small deterministic PRNG (xorshift64*). */
static uint64_t rng_state;

static uint64_t rng(void)
{
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}

/* The table's home slot for `key` at capacity `cap`: mirrors slot_of so
 * the tests can build real collision chains. */
static size_t home_of(uint64_t key, size_t cap)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (cap - 1);
}

START_TEST(insert_get_remove)
{
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	ck_assert_ptr_null(ruda__handle_table_get(&t, 1));
	ck_assert_ptr_null(ruda__handle_table_remove(&t, 1)); /* empty, never allocated */

	ck_assert_int_eq(ruda__handle_table_insert(&t, 1, val(1)), 0);
	ck_assert_int_eq(ruda__handle_table_insert(&t, 2, val(2)), 0);
	ck_assert_int_eq(ruda__handle_table_insert(&t, 42, val(42)), 0);
	ck_assert_uint_eq(t.count, 3);
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 1), val(1));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 2), val(2));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 42), val(42));
	ck_assert_ptr_null(ruda__handle_table_get(&t, 3));

	ck_assert_ptr_eq(ruda__handle_table_remove(&t, 2), val(2));
	ck_assert_ptr_null(ruda__handle_table_get(&t, 2));
	ck_assert_ptr_null(ruda__handle_table_remove(&t, 2));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 1), val(1));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 42), val(42));
	ck_assert_uint_eq(t.count, 2);

	/* a removed key can come back with a new value */
	ck_assert_int_eq(ruda__handle_table_insert(&t, 2, val(7)), 0);
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 2), val(7));
	ruda__handle_table_finish(&t);
	ck_assert_ptr_null(ruda__handle_table_get(&t, 1));
}
END_TEST

START_TEST(duplicate_is_eexist)
{
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	ck_assert_int_eq(ruda__handle_table_insert(&t, 9, val(1)), 0);
	ck_assert_int_eq(ruda__handle_table_insert(&t, 9, val(2)), -EEXIST);
	/* the original value stays and the count did not move */
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 9), val(1));
	ck_assert_uint_eq(t.count, 1);
	ruda__handle_table_finish(&t);
}
END_TEST

START_TEST(extreme_keys)
{
	/* 0 and UINT64_MAX are ordinary keys: no sentinel values */
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	ck_assert_int_eq(ruda__handle_table_insert(&t, 0, val(0)), 0);
	ck_assert_int_eq(ruda__handle_table_insert(&t, UINT64_MAX, val(1)), 0);
	ck_assert_ptr_eq(ruda__handle_table_get(&t, 0), val(0));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, UINT64_MAX), val(1));
	ck_assert_int_eq(ruda__handle_table_insert(&t, 0, val(2)), -EEXIST);
	ck_assert_int_eq(ruda__handle_table_insert(&t, UINT64_MAX, val(2)), -EEXIST);
	ck_assert_ptr_eq(ruda__handle_table_remove(&t, 0), val(0));
	ck_assert_ptr_null(ruda__handle_table_get(&t, 0));
	ck_assert_ptr_eq(ruda__handle_table_get(&t, UINT64_MAX), val(1));
	ck_assert_ptr_eq(ruda__handle_table_remove(&t, UINT64_MAX), val(1));
	ck_assert_ptr_null(ruda__handle_table_get(&t, UINT64_MAX));
	ck_assert_uint_eq(t.count, 0);
	ruda__handle_table_finish(&t);
}
END_TEST

/* Every key of `keys[0..n)` is present exactly when `present[i]`. */
static void check_all(const struct ruda_handle_table *t, const uint64_t *keys,
		      const int *present, size_t n)
{
	size_t count = 0;
	for (size_t i = 0; i < n; i++) {
		void *v = ruda__handle_table_get(t, keys[i]);
		if (present[i]) {
			if (v != val(i))
				ck_abort_msg("key %llu lost", (unsigned long long)keys[i]);
			count++;
		} else if (v) {
			ck_abort_msg("key %llu still found", (unsigned long long)keys[i]);
		}
	}
	ck_assert_uint_eq(t->count, count);
}

START_TEST(collision_chains)
{
	/* At capacity 16, gather keys by home slot and build long runs that
	 * wrap past the end, then delete from their middles: backward shift
	 * must keep every survivor reachable. */
	enum { CAP = 16, PER = 3 };
	uint64_t keys[12];
	size_t n = 0;
	const size_t homes[] = {14, 15, 0, 1}; /* runs that cross slot 15 -> 0 */
	for (size_t h = 0; h < 4; h++) {
		size_t got = 0;
		for (uint64_t k = 1; got < PER; k++)
			if (home_of(k, CAP) == homes[h]) {
				keys[n++] = k;
				got++;
			}
	}
	ck_assert_uint_eq(n, 12);
	/* try many removal orders */
	rng_state = 0x1234567;
	for (int round = 0; round < 200; round++) {
		struct ruda_handle_table t;
		ruda__handle_table_init(&t);
		int present[12];
		/* insert in a shuffled order so the runs interleave differently */
		size_t order[12];
		for (size_t i = 0; i < n; i++)
			order[i] = i;
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = rng() % (i + 1), tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (size_t i = 0; i < n; i++) {
			ck_assert_int_eq(ruda__handle_table_insert(&t, keys[order[i]], val(order[i])), 0);
			present[order[i]] = 1;
		}
		/* 12 entries at load <= 3/4 of 16: still capacity 16 */
		ck_assert_uint_eq(t.cap, CAP);
		check_all(&t, keys, present, n);
		for (size_t i = n - 1; i > 0; i--) {
			size_t j = rng() % (i + 1), tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (size_t i = 0; i < n; i++) {
			ck_assert_ptr_eq(ruda__handle_table_remove(&t, keys[order[i]]), val(order[i]));
			present[order[i]] = 0;
			check_all(&t, keys, present, n);
		}
		ruda__handle_table_finish(&t);
	}
}
END_TEST

START_TEST(random_against_reference)
{
	/* Sequential ids (as clients choose them) plus random removals; the
	 * reference is a plain presence array over the key range. */
	enum { N = 3000, OPS = 100000 };
	static uint64_t keys[N];
	static int present[N];
	for (size_t i = 0; i < N; i++)
		keys[i] = i + 1;
	memset(present, 0, sizeof(present));
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	rng_state = 0xdeadbeefcafef00dull;
	size_t live = 0, peak = 0, removals = 0;
	for (int op = 0; op < OPS; op++) {
		/* drift between filling up and draining so the table both grows
		 * and gets long runs broken up */
		int fill_phase = (op / 20000) % 2 == 0;
		size_t i = rng() % N;
		uint64_t r = rng() % 100;
		int do_insert = fill_phase ? r < 70 : r < 30;
		if (do_insert) {
			int rc = ruda__handle_table_insert(&t, keys[i], val(i));
			REQUIRE(rc == (present[i] ? -EEXIST : 0));
			if (!present[i]) {
				present[i] = 1;
				live++;
			}
		} else {
			void *v = ruda__handle_table_remove(&t, keys[i]);
			if (present[i]) {
				REQUIRE(v == val(i));
				present[i] = 0;
				live--;
				removals++;
			} else {
				REQUIRE(v == NULL);
			}
		}
		if (live > peak)
			peak = live;
		/* spot-check a random key every step, everything now and then */
		size_t j = rng() % N;
		REQUIRE(ruda__handle_table_get(&t, keys[j]) == (present[j] ? val(j) : NULL));
		if (op % 250 == 0)
			check_all(&t, keys, present, N);
	}
	check_all(&t, keys, present, N);
	ck_assert_uint_gt(peak, 1000);
	ck_assert_uint_gt(removals, 10000);
	ruda__handle_table_finish(&t);
}
END_TEST

START_TEST(dense_sequential_then_random_removal)
{
	/* A full table of sequential keys, emptied in random order. */
	enum { N = 5000 };
	static uint64_t keys[N];
	static int present[N];
	size_t order[N];
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	for (size_t i = 0; i < N; i++) {
		keys[i] = i + 1;
		present[i] = 1;
		order[i] = i;
		ck_assert_int_eq(ruda__handle_table_insert(&t, keys[i], val(i)), 0);
	}
	rng_state = 42;
	for (size_t i = N - 1; i > 0; i--) {
		size_t j = rng() % (i + 1), tmp = order[i];
		order[i] = order[j];
		order[j] = tmp;
	}
	for (size_t k = 0; k < N; k++) {
		size_t i = order[k];
		REQUIRE(ruda__handle_table_remove(&t, keys[i]) == val(i));
		present[i] = 0;
		if (k % 50 == 0)
			check_all(&t, keys, present, N);
	}
	check_all(&t, keys, present, N);
	ruda__handle_table_finish(&t);
}
END_TEST

START_TEST(pop_empties)
{
	enum { N = 1000 };
	static int seen[N];
	memset(seen, 0, sizeof(seen));
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	uint64_t key = 0;
	ck_assert_ptr_null(ruda__handle_table_pop(&t, &key));
	for (size_t i = 0; i < N; i++)
		ck_assert_int_eq(ruda__handle_table_insert(&t, i * 7, val(i)), 0);
	size_t popped = 0;
	void *v;
	while ((v = ruda__handle_table_pop(&t, &key))) {
		ck_assert_uint_eq(key % 7, 0);
		size_t i = (size_t)(key / 7);
		ck_assert_uint_lt(i, N);
		ck_assert_ptr_eq(v, val(i));
		ck_assert_int_eq(seen[i], 0);
		seen[i] = 1;
		popped++;
		/* popped means gone */
		ck_assert_ptr_null(ruda__handle_table_get(&t, key));
		ck_assert_uint_eq(t.count, N - popped);
	}
	ck_assert_uint_eq(popped, N);
	ck_assert_uint_eq(t.count, 0);
	for (size_t i = 0; i < N; i++)
		ck_assert_ptr_null(ruda__handle_table_get(&t, i * 7));
	/* NULL key pointer is allowed */
	ck_assert_int_eq(ruda__handle_table_insert(&t, 5, val(5)), 0);
	ck_assert_ptr_eq(ruda__handle_table_pop(&t, NULL), val(5));
	ck_assert_ptr_null(ruda__handle_table_pop(&t, NULL));
	ruda__handle_table_finish(&t);
}
END_TEST

START_TEST(pop_keeps_rest_reachable)
{
	/* pop removes from the front of the array, where wrapped runs end:
	 * the remaining entries must all still be found after each pop */
	enum { N = 600 };
	static uint64_t keys[N];
	static int present[N];
	struct ruda_handle_table t;
	ruda__handle_table_init(&t);
	for (size_t i = 0; i < N; i++) {
		keys[i] = 1000 + i;
		present[i] = 1;
		ck_assert_int_eq(ruda__handle_table_insert(&t, keys[i], val(i)), 0);
	}
	uint64_t key;
	void *v;
	while ((v = ruda__handle_table_pop(&t, &key))) {
		size_t i = (size_t)(key - 1000);
		ck_assert_uint_lt(i, N);
		ck_assert_ptr_eq(v, val(i));
		present[i] = 0;
		check_all(&t, keys, present, N);
	}
	ck_assert_uint_eq(t.count, 0);
	ruda__handle_table_finish(&t);
}
END_TEST

static Suite *handle_table_suite(void)
{
	Suite *s = suite_create("handle_table");
	TCase *basic = tcase_create("basic");
	tcase_add_test(basic, insert_get_remove);
	tcase_add_test(basic, duplicate_is_eexist);
	tcase_add_test(basic, extreme_keys);
	tcase_add_test(basic, pop_empties);
	suite_add_tcase(s, basic);

	TCase *stress = tcase_create("stress");
	tcase_set_timeout(stress, 60);
	tcase_add_test(stress, collision_chains);
	tcase_add_test(stress, random_against_reference);
	tcase_add_test(stress, dense_sequential_then_random_removal);
	tcase_add_test(stress, pop_keeps_rest_reachable);
	suite_add_tcase(s, stress);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(handle_table_suite());
	/* CK_FORK by default (each test in its own process); CK_FORK=no for debugging */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
