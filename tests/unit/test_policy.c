/* The access and quota rules of rudad.conf applied to identities. Ids are
 * numbers so the answers do not depend on this machine's users. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/config.h"
#include "common/policy.h"

static struct ruda_config config;
static struct ruda_policy policy;

static void load(const char *text)
{
	ruda__config_init(&config);
	ck_assert_int_eq(ruda__config_parse(&config, "t.conf", text, strlen(text), NULL, NULL), 0);
	ruda__policy_init(&policy, &config);
}

static struct ruda_rights check(uid_t uid, gid_t gid, const gid_t *groups, size_t n)
{
	struct ruda_rights r;
	ruda__policy_check(&policy, uid, gid, groups, n, &r);
	return r;
}

START_TEST(everyone_by_default)
{
	load("");
	struct ruda_rights r = check(1234, 1234, NULL, 0);
	ck_assert(r.may_connect);
	ck_assert(!r.admin);
	ck_assert(r.views); /* read_only_views defaults to yes */
	ck_assert(!r.unchecked_launch);
	/* default quotas: a share of the device's heap, worked out at connect */
	ck_assert(r.max_memory_per_client == RUDA_QUOTA_AUTO);
	ck_assert(r.max_memory_per_uid == RUDA_QUOTA_AUTO);
	ck_assert(r.exclusive);
	r = check(0, 0, NULL, 0);
	ck_assert(r.admin && r.views);
	ruda__config_finish(&config);
}
END_TEST

/* Exclusive leases: everyone by default; with a list, those listed and the
 * administrators. */
START_TEST(exclusive_lists)
{
	load("exclusive_users = 1000\nexclusive_groups = 2000\nadmin_group = 3000\n");
	gid_t in_2000[] = {2000}, in_3000[] = {3000};
	ck_assert(check(1000, 1000, NULL, 0).exclusive);
	ck_assert(check(1001, 1001, in_2000, 1).exclusive);
	ck_assert(check(1002, 1002, in_3000, 1).exclusive);
	ck_assert(check(0, 0, NULL, 0).exclusive);
	struct ruda_rights r = check(1003, 1003, NULL, 0);
	ck_assert(r.may_connect && !r.exclusive);
	ruda__config_finish(&config);
}
END_TEST

START_TEST(allowed_lists)
{
	load("allowed_users = 1000\nallowed_groups = 2000\nadmin_group = 3000\n");
	gid_t in_2000[] = {5, 2000};
	gid_t in_3000[] = {3000};
	ck_assert(check(1000, 1000, NULL, 0).may_connect);        /* by uid */
	ck_assert(check(1001, 1001, in_2000, 2).may_connect);     /* supplementary group */
	ck_assert(check(1002, 2000, NULL, 0).may_connect);        /* primary group */
	ck_assert(check(0, 0, NULL, 0).may_connect);              /* root */
	struct ruda_rights r = check(1003, 1003, in_3000, 1);     /* admin group */
	ck_assert(r.may_connect && r.admin && r.views);
	r = check(1004, 1004, in_2000, 1); /* only the first group: 5 */
	ck_assert(!r.may_connect);
	ck_assert_ptr_nonnull(strstr(r.why, "uid 1004"));
	ck_assert_ptr_nonnull(strstr(r.why, "allowed_users"));
	ruda__config_finish(&config);
}
END_TEST

START_TEST(views_and_unchecked)
{
	load("read_only_views = no\nunchecked_launch_users = 1000\n"
	     "unchecked_launch_groups = 2000\n");
	gid_t g[] = {2000};
	ck_assert(!check(1, 1, NULL, 0).views);
	ck_assert(check(0, 0, NULL, 0).views); /* admins always */
	ck_assert(check(1000, 1000, NULL, 0).unchecked_launch);
	ck_assert(check(1001, 1001, g, 1).unchecked_launch);
	ck_assert(!check(1002, 1002, NULL, 0).unchecked_launch);
	ck_assert(!check(0, 0, NULL, 0).unchecked_launch); /* not even root, unless listed */
	ruda__config_finish(&config);

	load("unchecked_launch_users = 1000\nforce_checked_launches = yes\n");
	ck_assert(!check(1000, 1000, NULL, 0).unchecked_launch);
	ruda__config_finish(&config);
}
END_TEST

/* Each limit on its own: [user] beats [group] (the most generous one),
 * which beats the global key. */
START_TEST(quotas)
{
	load("max_memory_per_client = 1G\nmax_memory_per_uid = 2G\n"
	     "[group 2000]\nmax_memory_per_uid = 4G\n"
	     "[group 2001]\nmax_memory_per_uid = 8G\nmax_memory_per_client = 512M\n"
	     "[user 1000]\nmax_memory_per_client = 3G\n"
	     "[user 1001]\nmax_memory_per_uid = unlimited\n");
	gid_t both[] = {2000, 2001};
	gid_t first[] = {2000};
	struct ruda_rights r = check(7, 7, NULL, 0);
	ck_assert(r.max_memory_per_client == 1ull << 30);
	ck_assert(r.max_memory_per_uid == 2ull << 30);
	r = check(7, 7, first, 1);
	ck_assert(r.max_memory_per_client == 1ull << 30);
	ck_assert(r.max_memory_per_uid == 4ull << 30);
	r = check(7, 7, both, 2);
	ck_assert(r.max_memory_per_client == 512ull << 20);
	ck_assert(r.max_memory_per_uid == 8ull << 30);
	r = check(1000, 1000, both, 2);
	ck_assert(r.max_memory_per_client == 3ull << 30);
	ck_assert(r.max_memory_per_uid == 8ull << 30);
	r = check(1001, 2000, NULL, 0);
	ck_assert(r.max_memory_per_client == 1ull << 30);
	ck_assert(r.max_memory_per_uid == RUDA_UNLIMITED);
	/* staging quotas: global keys, defaults unlimited per client and half
	 * the host's memory per uid */
	ck_assert(r.max_staging_per_client == RUDA_UNLIMITED);
	ck_assert(r.max_staging_per_uid == ruda__config_default_staging_per_uid());
	ck_assert(r.max_staging_per_uid != RUDA_UNLIMITED && r.max_staging_per_uid > 0);
	r.max_staging_per_uid = 2ull << 30;
	char text[256];
	ruda__rights_describe(&r, text, sizeof(text));
	ck_assert_str_eq(text, "admin no, views yes, unchecked launches no, exclusive leases yes, "
			       "memory 1G per client, unlimited per uid, staging unlimited per "
			       "client, 2G per uid");
	ruda__config_finish(&config);
}
END_TEST

/* The priority cap: max_priority for everyone, 7 for the listed users and
 * groups (root included only when listed); a request above it is lowered. */
START_TEST(priorities)
{
	load("");
	struct ruda_rights r = check(0, 0, NULL, 0);
	ck_assert_uint_eq(r.max_priority, 4);
	ck_assert_uint_eq(ruda__policy_priority(&r, 0), 4);
	ck_assert_uint_eq(ruda__policy_priority(&r, 7), 4);
	ck_assert_uint_eq(ruda__policy_priority(&r, 1), 1);
	ruda__config_finish(&config);

	load("max_priority = 2\nhigh_priority_users = 1000\nhigh_priority_groups = 2000\n");
	gid_t in_2000[] = {2000};
	ck_assert_uint_eq(check(1000, 1000, NULL, 0).max_priority, 7);
	ck_assert_uint_eq(check(1001, 1001, in_2000, 1).max_priority, 7);
	r = check(1002, 1002, NULL, 0);
	ck_assert_uint_eq(r.max_priority, 2);
	ck_assert_uint_eq(ruda__policy_priority(&r, 0), 2);
	ck_assert_uint_eq(ruda__policy_priority(&r, 6), 2);
	ruda__config_finish(&config);

	/* out of range in the file */
	ruda__config_init(&config);
	const char *bad = "max_priority = 8\n";
	ck_assert_int_eq(ruda__config_parse(&config, "t.conf", bad, strlen(bad), NULL, NULL), 1);
	ruda__config_finish(&config);
}
END_TEST

/* The groups of the process at the other end of a socket. */
START_TEST(peer_groups)
{
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	gid_t mine[256];
	int n = getgroups(256, mine);
	gid_t got[256];
	int m = ruda__policy_peer_groups(sv[0], getuid(), getgid(), got, 256);
	ck_assert_int_eq(m, n);
	for (int i = 0; i < n; i++)
		ck_assert_uint_eq(got[i], mine[i]);
	close(sv[0]);
	close(sv[1]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("policy");
	TCase *tc = tcase_create("policy");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, everyone_by_default);
	tcase_add_test(tc, allowed_lists);
	tcase_add_test(tc, exclusive_lists);
	tcase_add_test(tc, views_and_unchecked);
	tcase_add_test(tc, quotas);
	tcase_add_test(tc, priorities);
	tcase_add_test(tc, peer_groups);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
