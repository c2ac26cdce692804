/*
 * Client priorities: what a client asks for at connect, what the daemon's
 * policy grants, the exact refusal of values out of range, what rudactl
 * shows, and that clients held back for a higher priority still get every
 * result right (no timing here: latency is measured by make bench).
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

#define WORDS 256u

static ruda_client *connect_at(const struct test_daemon *d, const char *name, uint32_t priority,
			       ruda_status *status)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path, .client_name = name,
				  .priority = priority};
	ruda_client *c = NULL;
	*status = ruda_client_connect(&o, &c);
	return c;
}

static uint32_t granted(const struct test_daemon *d, uint32_t asked)
{
	ruda_status st;
	ruda_client *c = connect_at(d, "p", asked, &st);
	ck_assert_int_eq(st, RUDA_OK);
	uint32_t p = ruda_client_priority(c);
	ruda_client_close(c);
	return p;
}

/* No policy settings: the default is normal, and normal is the cap. */
START_TEST(default_policy_caps_at_normal)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ck_assert_uint_eq(granted(&d, 0), RUDA_PRIORITY_NORMAL);
	ck_assert_uint_eq(granted(&d, RUDA_PRIORITY_LOWEST), RUDA_PRIORITY_LOWEST);
	ck_assert_uint_eq(granted(&d, 3), 3);
	ck_assert_uint_eq(granted(&d, RUDA_PRIORITY_HIGHEST), RUDA_PRIORITY_NORMAL);
	test_daemon_stop(&d);
}
END_TEST

/* max_priority lowers everyone's cap (the default included);
 * high_priority_users lifts a user's to the top. */
START_TEST(policy_sets_the_cap)
{
	struct test_daemon d;
	const char *low[] = {"--set", "max_priority=2", NULL};
	test_daemon_start(&d, low);
	ck_assert_uint_eq(granted(&d, 0), 2);
	ck_assert_uint_eq(granted(&d, 5), 2);
	ck_assert_uint_eq(granted(&d, 1), 1);
	test_daemon_stop(&d);

	char set[64];
	snprintf(set, sizeof(set), "high_priority_users=%u", (unsigned)getuid());
	const char *high[] = {"--set", "max_priority=2", "--set", set, NULL};
	test_daemon_start(&d, high);
	ck_assert_uint_eq(granted(&d, RUDA_PRIORITY_HIGHEST), RUDA_PRIORITY_HIGHEST);
	ck_assert_uint_eq(granted(&d, 0), RUDA_PRIORITY_NORMAL);
	test_daemon_stop(&d);
}
END_TEST

/* Out of range: refused with the exact status and message, the daemon
 * unharmed. */
START_TEST(out_of_range_refused)
{
	struct test_daemon d;
	test_daemon_start(&d, NULL);
	ruda_status st;
	ck_assert_ptr_null(connect_at(&d, "bad", RUDA_PRIORITY_HIGHEST + 1, &st));
	ck_assert_int_eq(st, RUDA_ERROR_INVALID_ARGUMENT);

	int fd = raw_connect(&d);
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "raw";
	h.priority = 99;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	Ruda__Reply *r = raw_recv_reply(fd, 5000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_str_eq(r->message, "priority 99 is out of range: 1 (lowest) to 7 (highest), "
				     "or 0 for the default");
	ruda__reply__free_unpacked(r, NULL);
	ck_assert(raw_closed_by_peer(fd, 5000));
	close(fd);
	ck_assert(test_daemon_alive(&d));
	ck_assert_uint_eq(granted(&d, 2), 2);
	test_daemon_stop(&d);
}
END_TEST

/* rudactl clients --json reports each client's priority. */
START_TEST(rudactl_shows_priority)
{
	struct test_daemon d;
	char set[64];
	snprintf(set, sizeof(set), "high_priority_users=%u", (unsigned)getuid());
	const char *args[] = {"--set", set, NULL};
	test_daemon_start(&d, args);
	ruda_status st;
	ruda_client *hi = connect_at(&d, "hi", RUDA_PRIORITY_HIGHEST, &st);
	ruda_client *lo = connect_at(&d, "lo", RUDA_PRIORITY_LOWEST, &st);
	ck_assert_ptr_nonnull(hi);
	ck_assert_ptr_nonnull(lo);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "'%s' --socket '%s' clients --json", test_build_path("rudactl"),
		 d.socket_path);
	FILE *p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	char out[16384], flat[16384];
	size_t n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (out[i] != ' ' && out[i] != '\n')
			flat[k++] = out[i];
	flat[k] = '\0';
	/* each client's object: its name, then its priority */
	const char *h = strstr(flat, "\"name\":\"hi\""), *l = strstr(flat, "\"name\":\"lo\"");
	ck_assert_msg(h && l, "%s", out);
	const char *hp = strstr(h, "\"priority\":"), *lp = strstr(l, "\"priority\":");
	ck_assert_ptr_nonnull(hp);
	ck_assert_ptr_nonnull(lp);
	ck_assert_int_eq(atoi(hp + strlen("\"priority\":")), 7);
	ck_assert_int_eq(atoi(lp + strlen("\"priority\":")), 1);
	ruda_client_close(hi);
	ruda_client_close(lo);
	test_daemon_stop(&d);
}
END_TEST

static void fill(ruda_client *c, ruda_kernel k, ruda_handle h, uint32_t value)
{
	uint32_t push[2] = {value, WORDS};
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, push, sizeof(push)),
			 RUDA_OK);
}

static void expect_words(ruda_client *c, ruda_handle h, uint32_t value)
{
	uint32_t w[WORDS];
	ck_assert_int_eq(ruda_client_read_one(c, h, w), RUDA_OK);
	for (uint32_t i = 0; i < WORDS; i++)
		ck_assert_uint_eq(w[i], value);
}

/* Low-priority clients held back while a high one works: every launch of
 * each still runs, in order, and the low ones finish once it is quiet. */
START_TEST(held_clients_complete)
{
	struct test_daemon d;
	char set[64];
	snprintf(set, sizeof(set), "high_priority_users=%u", (unsigned)getuid());
	const char *args[] = {"--set", set, NULL};
	test_daemon_start(&d, args);
	ruda_status st;
	ruda_client *hi = connect_at(&d, "hi", RUDA_PRIORITY_HIGHEST, &st);
	ruda_client *lo[3];
	ruda_kernel klo[3];
	ruda_handle hlo[3];
	for (int i = 0; i < 3; i++) {
		lo[i] = connect_at(&d, "lo", RUDA_PRIORITY_LOWEST, &st);
		ck_assert_ptr_nonnull(lo[i]);
		klo[i] = test_register(lo[i], "fill", 1, 8);
		ck_assert_int_eq(ruda_client_empty(lo[i], WORDS * 4, &hlo[i]), RUDA_OK);
	}
	ruda_kernel khi = test_register(hi, "fill", 1, 8);
	ruda_handle hhi;
	ck_assert_int_eq(ruda_client_empty(hi, WORDS * 4, &hhi), RUDA_OK);
	/* queue the low clients' work (not waited for), then keep the high
	 * one busy with round trips */
	for (uint32_t v = 1; v <= 300; v++)
		for (int i = 0; i < 3; i++)
			fill(lo[i], klo[i], hlo[i], v + 1000u * (uint32_t)i);
	for (int i = 0; i < 3; i++)
		ck_assert_int_eq(ruda_client_flush(lo[i]), RUDA_OK);
	for (uint32_t v = 1; v <= 100; v++) {
		fill(hi, khi, hhi, v);
		ck_assert_int_eq(ruda_client_sync(hi), RUDA_OK);
	}
	expect_words(hi, hhi, 100);
	for (int i = 0; i < 3; i++) {
		ck_assert_int_eq(ruda_client_sync(lo[i]), RUDA_OK);
		expect_words(lo[i], hlo[i], 300 + 1000u * (uint32_t)i);
	}
	/* a held client that goes away leaves nothing behind */
	fill(lo[0], klo[0], hlo[0], 5);
	fill(hi, khi, hhi, 6);
	ruda_client_close(lo[0]);
	ck_assert_int_eq(ruda_client_sync(hi), RUDA_OK);
	expect_words(hi, hhi, 6);
	ruda_daemon_stats s = test_wait_for_stats(hi, 3, 3 * WORDS * 4);
	ck_assert_uint_eq(s.sessions, 3);
	for (int i = 1; i < 3; i++)
		ruda_client_close(lo[i]);
	ruda_client_close(hi);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("priority");
	TCase *tc = tcase_create("priority");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, default_policy_caps_at_normal);
	tcase_add_test(tc, policy_sets_the_cap);
	tcase_add_test(tc, out_of_range_refused);
	tcase_add_test(tc, rudactl_shows_priority);
	tcase_add_test(tc, held_clients_complete);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
