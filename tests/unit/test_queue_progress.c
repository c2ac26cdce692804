/*
 * Unit tests for how rudad tells work of several queues done, which queues
 * complete in no order between them (lavapipe's one queue completes in
 * order and cannot show it end to end, so the streams and the device here
 * are bare structs: only their queues and submission history count).
 * - What SyncBuffers waits for (daemon/exec/stream.c, ruda__stream_note_use
 *   and ruda__stream_buffer_done_values): a buffer used by streams on
 *   several queues waits for each queue's last use. One value, the
 *   largest, named only the last use's queue: an earlier, longer use on
 *   another queue could still be writing when SyncBuffers answered.
 * - When a stream has as much in flight as it may (ruda__stream_saturated)
 *   and whether a submission is done (ruda__device_done): by its own
 *   queue's progress, not held back by another queue's slower work.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>

#include "device/device.h"
#include "exec/stream.h"
#include "memory/buffer.h"

/* A stream on `queue` whose submissions so far had these values. */
static void stream_on(struct ruda_stream *s, uint32_t queue)
{
	memset(s, 0, sizeof(*s));
	s->queue = queue;
}

static void submitted(struct ruda_stream *s, uint64_t value)
{
	s->recent[s->recent_next++ % RUDA_STREAM_MAX_INFLIGHT] = value;
}

static int has(const uint64_t *values, int n, uint64_t v)
{
	for (int i = 0; i < n; i++)
		if (values[i] == v)
			return 1;
	return 0;
}

START_TEST(one_stream_waits_for_its_last_use)
{
	struct ruda_stream s;
	stream_on(&s, 3);
	struct ruda_buffer b;
	memset(&b, 0, sizeof(b));
	uint64_t values[RUDA_MAX_QUEUES + 1];
	ck_assert_int_eq(ruda__stream_buffer_done_values(&b, values), 0); /* never used */
	ruda__stream_note_use(&s, &b);
	submitted(&s, 40);
	submitted(&s, 41); /* later work of the stream, not using b */
	int n = ruda__stream_buffer_done_values(&b, values);
	ck_assert_int_eq(n, 1);
	ck_assert_uint_eq(values[0], 40);
}
END_TEST

START_TEST(uses_on_several_queues_are_all_waited_for)
{
	struct ruda_stream x, y, z;
	stream_on(&x, 0);
	stream_on(&y, 1);
	stream_on(&z, 0);
	struct ruda_buffer b;
	memset(&b, 0, sizeof(b));
	/* a long use on queue 0 (value 100), then a short one on queue 1 (101) */
	ruda__stream_note_use(&x, &b);
	submitted(&x, 100);
	ruda__stream_note_use(&y, &b);
	submitted(&y, 101);
	uint64_t values[RUDA_MAX_QUEUES + 1];
	int n = ruda__stream_buffer_done_values(&b, values);
	ck_assert_int_eq(n, 2);
	ck_assert(has(values, n, 101)); /* the last use */
	ck_assert(has(values, n, 100)); /* and queue 0's, which 101 says nothing of */
	/* a third use on queue 0 again: queue 0's last is now 102's stream's,
	 * queue 1's stays 101 */
	ruda__stream_note_use(&z, &b);
	submitted(&z, 102);
	n = ruda__stream_buffer_done_values(&b, values);
	ck_assert(has(values, n, 102));
	ck_assert(has(values, n, 101));
	ck_assert(has(values, n, 100)); /* an earlier use on queue 0, ended by 102 too */
	ck_assert_int_le(n, 3);
}
END_TEST

/* A device with queue 1 ahead of the work everywhere: `completed` (all
 * work up to it) at 10, queue 1's own timeline at 20. */
static struct ruda_device *device_with_queue_ahead(void)
{
	struct ruda_device *d = calloc(1, sizeof(*d));
	ck_assert_ptr_nonnull(d);
	d->nqueues = 2;
	atomic_store(&d->completed, 10);
	atomic_store(&d->queue_done[0], 10);
	atomic_store(&d->queue_done[1], 20);
	return d;
}

START_TEST(done_by_its_own_queue)
{
	struct ruda_device *d = device_with_queue_ahead();
	ck_assert(ruda__device_done(d, 0, 10));
	ck_assert(!ruda__device_done(d, 0, 11));
	ck_assert(ruda__device_done(d, 1, 11)); /* queue 1 is past it */
	ck_assert(ruda__device_done(d, 1, 20));
	ck_assert(!ruda__device_done(d, 1, 21));
	ck_assert(ruda__device_done(d, 5, 9)); /* everything up to 10 is */
	free(d);
}
END_TEST

START_TEST(saturated_by_its_own_queue)
{
	struct ruda_device *d = device_with_queue_ahead();
	struct ruda_stream s;
	stream_on(&s, 1);
	s.device = d;
	for (uint64_t v = 11; v < 11 + RUDA_STREAM_MAX_INFLIGHT; v++)
		submitted(&s, v);
	/* its oldest, 11, is done on queue 1 though queue 0 holds `completed` */
	ck_assert_int_eq(ruda__stream_saturated(&s), 0);
	/* on queue 0, which has not reached 11, it is saturated */
	s.queue = 0;
	ck_assert_int_eq(ruda__stream_saturated(&s), 1);
	free(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("queue_progress");
	TCase *tc = tcase_create("uses");
	tcase_add_test(tc, one_stream_waits_for_its_last_use);
	tcase_add_test(tc, uses_on_several_queues_are_all_waited_for);
	tcase_add_test(tc, done_by_its_own_queue);
	tcase_add_test(tc, saturated_by_its_own_queue);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
