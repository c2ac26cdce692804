/* The throughput cache every client of a device shares: values that are no
 * measurement (NaN, infinities, 0, negative) are refused, and a full cache
 * says so (ERROR_QUOTA) instead of answering OK and dropping the value. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define MAX_KEYS 4096

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

static void send_set(int sock, uint64_t id, const char *key, double value)
{
	Ruda__ThroughputSet set = RUDA__THROUGHPUT_SET__INIT;
	set.key = (char *)key;
	set.value = value;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	req.body_case = RUDA__REQUEST__BODY_THROUGHPUT_SET;
	req.throughput_set = &set;
	ck_assert_int_eq(raw_send_request(sock, &req), 0);
}

static Ruda__Reply *reply_to(int sock, uint64_t id)
{
	Ruda__Reply *r = raw_recv_reply(sock, 10000, NULL);
	ck_assert_msg(r, "no reply to request %llu: rudad %s", (unsigned long long)id,
		      test_daemon_alive(&daemon_) ? "alive" : "dead");
	ck_assert_uint_eq(r->id, id);
	return r;
}

/* ThroughputSet answers `status` with `why` in the message (NULL: none). */
static void expect_set(int sock, const char *key, double value, ruda_status status,
		       const char *why)
{
	static uint64_t id = 100;
	send_set(sock, ++id, key, value);
	Ruda__Reply *r = reply_to(sock, id);
	ck_assert_msg((int)r->status == (int)status, "set %s = %g: status %d, not %d (%s)", key,
		      value, r->status, status, r->message);
	if (why)
		ck_assert_msg(r->message && strstr(r->message, why),
			      "message \"%s\" does not say \"%s\"", r->message ? r->message : "",
			      why);
	ruda__reply__free_unpacked(r, NULL);
}

/* ThroughputGet: RUDA_OK and *value, or the status. */
static ruda_status get(int sock, const char *key, double *value)
{
	static uint64_t id = 1000000;
	Ruda__ThroughputGet g = RUDA__THROUGHPUT_GET__INIT;
	g.key = (char *)key;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = ++id;
	req.body_case = RUDA__REQUEST__BODY_THROUGHPUT_GET;
	req.throughput_get = &g;
	ck_assert_int_eq(raw_send_request(sock, &req), 0);
	Ruda__Reply *r = reply_to(sock, id);
	ruda_status st = (ruda_status)r->status;
	if (st == RUDA_OK) {
		ck_assert_int_eq(r->body_case, RUDA__REPLY__BODY_THROUGHPUT);
		*value = r->throughput->value;
	}
	ruda__reply__free_unpacked(r, NULL);
	return st;
}

static int session(void)
{
	int sock = raw_connect(&daemon_);
	ck_assert_int_eq(raw_hello(sock, 1), RUDA_OK);
	return sock;
}

/* rudad lives, and a fresh client's bytes come back exactly. */
static void assert_daemon_healthy(void)
{
	ck_assert(test_daemon_alive(&daemon_));
	ruda_client *c = test_connect(&daemon_, "bystander");
	uint8_t data[4099], back[4099];
	test_fill_random(data, sizeof(data), 4);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, sizeof(data)), 0);
	ruda_client_close(c);
}

static int probe_calls;
static int probe(void *user, double *value)
{
	probe_calls++;
	*value = *(const double *)user;
	return 0;
}

START_TEST(values_that_are_no_measurement)
{
	int sock = session();
	const double bad[] = {NAN, -NAN, -INFINITY, INFINITY, 0.0, -0.0, -1.0, -1e300};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		expect_set(sock, "matmul", bad[i], RUDA_ERROR_INVALID_ARGUMENT,
			   "is not a finite value above 0");
		double v;
		ck_assert_int_eq(get(sock, "matmul", &v), RUDA_ERROR_INVALID_HANDLE);
	}
	/* a real one is kept, and the first measurement stays */
	expect_set(sock, "matmul", 1.5e12, RUDA_OK, NULL);
	expect_set(sock, "matmul", NAN, RUDA_ERROR_INVALID_ARGUMENT, "finite");
	expect_set(sock, "matmul", 3.0, RUDA_OK, NULL);
	double v = 0;
	ck_assert_int_eq(get(sock, "matmul", &v), RUDA_OK);
	ck_assert(v == 1.5e12);
	expect_set(sock, "tiny", 1e-300, RUDA_OK, NULL); /* small, but a measurement */
	close(sock);

	/* libruda passes a probe's NaN on and gets the refusal */
	ruda_client *c = test_connect(&daemon_, "prober");
	double nan_value = NAN, got = 0;
	probe_calls = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(c, "fft", probe, &nan_value, &got),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(probe_calls, 1);
	/* another client still finds the good one */
	ck_assert_int_eq(ruda_client_measure_throughput(c, "matmul", probe, &nan_value, &got),
			 RUDA_OK);
	ck_assert(got == 1.5e12);
	ck_assert_int_eq(probe_calls, 1);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

START_TEST(full_cache_says_so)
{
	int sock = session();
	char key[32];
	/* pipelined 64 at a time: rudad stops reading a client that does not
	 * read its replies */
	for (int base = 0; base < MAX_KEYS; base += 64) {
		for (int i = base; i < base + 64; i++) {
			snprintf(key, sizeof(key), "k%d", i);
			send_set(sock, 10 + i, key, 1.0 + i);
		}
		for (int i = base; i < base + 64; i++) {
			Ruda__Reply *r = reply_to(sock, 10 + i);
			ck_assert_msg(r->status == RUDA__STATUS__OK, "key %d: %d (%s)", i,
				      r->status, r->message);
			ruda__reply__free_unpacked(r, NULL);
		}
	}
	expect_set(sock, "one-too-many", 2.0, RUDA_ERROR_QUOTA,
		   "the throughput cache of device 0 is full (4096 keys)");
	double v;
	ck_assert_int_eq(get(sock, "one-too-many", &v), RUDA_ERROR_INVALID_HANDLE);
	/* a key it holds is still answered, and a set of it is still OK (the
	 * first measurement stays) */
	expect_set(sock, "k77", 5.0, RUDA_OK, NULL);
	ck_assert_int_eq(get(sock, "k77", &v), RUDA_OK);
	ck_assert(v == 78.0);
	ck_assert_int_eq(get(sock, "k4095", &v), RUDA_OK);
	ck_assert(v == 4096.0);
	/* validation comes before the quota */
	expect_set(sock, "one-too-many", -INFINITY, RUDA_ERROR_INVALID_ARGUMENT, "finite");
	close(sock);

	/* through libruda: a held key is read, a new one measured but refused */
	ruda_client *c = test_connect(&daemon_, "late");
	double measured = 9.0, got = 0;
	probe_calls = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(c, "k1", probe, &measured, &got), RUDA_OK);
	ck_assert(got == 2.0);
	ck_assert_int_eq(probe_calls, 0);
	ck_assert_int_eq(ruda_client_measure_throughput(c, "new", probe, &measured, &got),
			 RUDA_ERROR_QUOTA);
	ck_assert_int_eq(probe_calls, 1);
	ck_assert(got == 9.0); /* the measurement is the caller's even so */
	char why[256];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, "full"), "%s", why);
	ruda_client_close(c);
	assert_daemon_healthy();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("throughput_cache");
	TCase *tc = tcase_create("throughput_cache");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, values_that_are_no_measurement);
	tcase_add_test(tc, full_cache_says_so);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
