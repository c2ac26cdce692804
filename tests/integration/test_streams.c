/* Streams: in-order work per stream, errors per stream, arena space shared
 * by all of a client's streams. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_streams");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

START_TEST(errors_stay_on_their_stream)
{
	ck_assert_uint_eq(ruda_client_execution_stream(client), 0);
	ck_assert_int_eq(ruda_client_set_stream(client, 1), RUDA_OK);
	ck_assert_uint_eq(ruda_client_execution_stream(client), 1);
	ruda_handle bogus = {.id = 4242, .size = 4};
	ck_assert_int_eq(ruda_client_release(client, bogus), RUDA_OK);
	ruda_client_set_stream(client, 0);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK); /* stream 0 is clean */
	ruda_client_set_stream(client, 1);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK); /* reported once */
	ck_assert(ruda_client_same_execution_queue(client, client));
}
END_TEST

/* Uploads on two streams, interleaved, through one arena: every byte
 * arrives (the arena's space is reused only once every stream is done
 * with it). */
START_TEST(uploads_on_two_streams)
{
	enum { SIZE = 5 << 20, ROUNDS = 8 }; /* 80 MiB through a 16 MiB arena */
	uint8_t *data = malloc(SIZE), *back = malloc(SIZE);
	ruda_handle h[2][ROUNDS];
	for (int r = 0; r < ROUNDS; r++)
		for (int st = 0; st < 2; st++) {
			ruda_client_set_stream(client, (ruda_stream)(st + 1));
			test_fill_random(data, SIZE, (uint64_t)(r * 2 + st));
			ck_assert_int_eq(ruda_client_create(client, data, SIZE, &h[st][r]), RUDA_OK);
		}
	for (int r = 0; r < ROUNDS; r++)
		for (int st = 0; st < 2; st++) {
			ruda_client_set_stream(client, (ruda_stream)(st + 1));
			test_fill_random(data, SIZE, (uint64_t)(r * 2 + st));
			ck_assert_int_eq(ruda_client_read_one(client, h[st][r], back), RUDA_OK);
			ck_assert_msg(memcmp(data, back, SIZE) == 0, "stream %d round %d differs",
				      st + 1, r);
		}
	free(data);
	free(back);
}
END_TEST

/* Dependent launches interleaved on two streams each stay in order. */
START_TEST(order_per_stream)
{
	enum { N = 1024, LAUNCHES = 150 };
	static float x[N], y[2][N], out[N];
	for (int i = 0; i < N; i++) {
		x[i] = (float)(i % 5);
		y[0][i] = y[1][i] = (float)i;
	}
	ruda_kernel saxpy = test_register(client, "saxpy", 2, 8);
	ruda_handle hx, hy[2];
	ruda_client_create(client, x, sizeof(x), &hx);
	for (int st = 0; st < 2; st++) {
		ruda_client_set_stream(client, (ruda_stream)(st + 3));
		ruda_client_create(client, y[st], sizeof(y[st]), &hy[st]);
	}
	ruda_client_set_stream(client, 0);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK); /* x is on stream 0 */
	for (int l = 0; l < LAUNCHES; l++)
		for (int st = 0; st < 2; st++) {
			ruda_client_set_stream(client, (ruda_stream)(st + 3));
			struct {
				float alpha;
				uint32_t n;
			} push = {st ? 2.0f : 1.0f, N};
			ruda_handle bind[] = {hx, hy[st]};
			ruda_client_launch(client, saxpy, (ruda_count){4, 1, 1}, bind, 2, &push,
					   sizeof(push));
		}
	for (int st = 0; st < 2; st++) {
		ruda_client_set_stream(client, (ruda_stream)(st + 3));
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
		ck_assert_int_eq(ruda_client_read_one(client, hy[st], out), RUDA_OK);
		for (int i = 0; i < N; i++)
			ck_assert_float_eq(out[i], (float)i + LAUNCHES * (st ? 2.0f : 1.0f) *
							     (float)(i % 5));
	}
}
END_TEST

START_TEST(stream_limit)
{
	for (ruda_stream st = 1; st <= 64; st++) {
		ruda_client_set_stream(client, st);
		ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	}
	ruda_client_set_stream(client, 1000);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_BUSY);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "streams"));
	ruda_client_set_stream(client, 64); /* the existing ones still work */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
	ruda_client_set_stream(client, 0);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_BUSY); /* recorded on 0 */
}
END_TEST

int main(void)
{
	Suite *s = suite_create("streams");
	TCase *tc = tcase_create("streams");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, errors_stay_on_their_stream);
	tcase_add_test(tc, uploads_on_two_streams);
	tcase_add_test(tc, order_per_stream);
	tcase_add_test(tc, stream_limit);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
