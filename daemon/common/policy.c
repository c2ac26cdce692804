#include "common/policy.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/config.h"

void ruda__policy_init(struct ruda_policy *policy, const struct ruda_config *config)
{
	policy->config = config;
}

static bool in_list(const struct ruda_id_list *list, uint32_t id)
{
	for (size_t i = 0; i < list->count; i++)
		if (list->ids[i] == id)
			return true;
	return false;
}

static bool member(gid_t group, gid_t gid, const gid_t *groups, size_t ngroups)
{
	if (group == gid)
		return true;
	for (size_t i = 0; i < ngroups; i++)
		if (groups[i] == group)
			return true;
	return false;
}

static bool any_member(const struct ruda_id_list *list, gid_t gid, const gid_t *groups,
		       size_t ngroups)
{
	for (size_t i = 0; i < list->count; i++)
		if (member(list->ids[i], gid, groups, ngroups))
			return true;
	return false;
}

void ruda__policy_check(const struct ruda_policy *policy, uid_t uid, gid_t gid,
			const gid_t *groups, size_t ngroups, struct ruda_rights *out)
{
	const struct ruda_config *c = policy->config;
	memset(out, 0, sizeof(*out));
	out->admin = uid == 0 || (c->admin_group && member(c->admin_gid, gid, groups, ngroups));
	bool open = !c->allowed_users.count && !c->allowed_groups.count;
	/* an admin who cannot connect could not repair anything */
	out->may_connect = open || out->admin || in_list(&c->allowed_users, uid) ||
			   any_member(&c->allowed_groups, gid, groups, ngroups);
	if (!out->may_connect)
		snprintf(out->why, sizeof(out->why),
			 "uid %u is in neither allowed_users nor allowed_groups", (unsigned)uid);
	out->views = out->admin || c->read_only_views;
	out->exclusive = out->admin ||
			 (!c->exclusive_users.count && !c->exclusive_groups.count) ||
			 in_list(&c->exclusive_users, uid) ||
			 any_member(&c->exclusive_groups, gid, groups, ngroups);
	out->unchecked_launch = !c->force_checked_launches &&
				(in_list(&c->unchecked_launch_users, uid) ||
				 any_member(&c->unchecked_launch_groups, gid, groups, ngroups));

	/* a priority list lifts the cap to the top; root is not special: a
	 * latency-critical service is named, not implied */
	out->max_priority = in_list(&c->high_priority_users, uid) ||
					    any_member(&c->high_priority_groups, gid, groups, ngroups)
				    ? 7
				    : c->max_priority;

	/* quotas, each limit on its own: a [user] section, else the most
	 * generous of the client's [group] sections, else the global key */
	out->max_memory_per_client = c->max_memory_per_client;
	out->max_memory_per_uid = c->max_memory_per_uid;
	out->max_staging_per_client = c->max_staging_per_client;
	out->max_staging_per_uid = c->max_staging_per_uid;
	bool group_client = false, group_uid = false;
	uint64_t by_group_client = 0, by_group_uid = 0;
	const struct ruda_config_quota *user = NULL;
	for (size_t i = 0; i < c->nquotas; i++) {
		const struct ruda_config_quota *q = &c->quotas[i];
		if (!q->is_group) {
			if (q->id == uid)
				user = q;
			continue;
		}
		if (!member(q->id, gid, groups, ngroups))
			continue;
		if (q->has_max_memory_per_client) {
			group_client = true;
			if (q->max_memory_per_client > by_group_client)
				by_group_client = q->max_memory_per_client;
		}
		if (q->has_max_memory_per_uid) {
			group_uid = true;
			if (q->max_memory_per_uid > by_group_uid)
				by_group_uid = q->max_memory_per_uid;
		}
	}
	if (group_client)
		out->max_memory_per_client = by_group_client;
	if (group_uid)
		out->max_memory_per_uid = by_group_uid;
	if (user && user->has_max_memory_per_client)
		out->max_memory_per_client = user->max_memory_per_client;
	if (user && user->has_max_memory_per_uid)
		out->max_memory_per_uid = user->max_memory_per_uid;
}

int ruda__policy_peer_groups(int fd, uid_t uid, gid_t gid, gid_t *groups, size_t max)
{
	socklen_t len = (socklen_t)(max * sizeof(gid_t));
	if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
		return (int)(len / sizeof(gid_t));
	if (errno == ERANGE) {
		/* more groups than we look at: the first `max` of them */
		gid_t *all = malloc(len);
		if (!all)
			return -ENOMEM;
		int n = -errno;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, all, &len) == 0) {
			n = (int)(len / sizeof(gid_t));
			if ((size_t)n > max)
				n = (int)max;
			memcpy(groups, all, (size_t)n * sizeof(gid_t));
		}
		free(all);
		return n;
	}
	if (errno != ENOPROTOOPT)
		return -errno;
	/* kernels before 4.13: the account's groups */
	char buf[16384];
	struct passwd pw, *found = NULL;
	if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) != 0 || !found)
		return 0;
	int n = (int)max;
	if (getgrouplist(found->pw_name, gid, groups, &n) < 0)
		n = (int)max; /* truncated to what fits */
	return n;
}

void ruda__policy_check_peer(const struct ruda_policy *policy, int fd, uid_t uid, gid_t gid,
			     struct ruda_rights *out)
{
	gid_t groups[RUDA_POLICY_MAX_GROUPS];
	int n = ruda__policy_peer_groups(fd, uid, gid, groups, RUDA_POLICY_MAX_GROUPS);
	ruda__policy_check(policy, uid, gid, groups, n > 0 ? (size_t)n : 0, out);
}

uint32_t ruda__policy_priority(const struct ruda_rights *rights, uint32_t requested)
{
	uint32_t want = requested ? requested : 4; /* RUDA_PRIORITY_NORMAL */
	return want < rights->max_priority ? want : rights->max_priority;
}

const char *ruda__rights_describe(const struct ruda_rights *r, char *buf, size_t len)
{
	char client[32], per_uid[32], staging[32], staging_uid[32];
	snprintf(buf, len,
		 "admin %s, views %s, unchecked launches %s, exclusive leases %s, memory %s per "
		 "client, %s per uid, staging %s per client, %s per uid",
		 r->admin ? "yes" : "no", r->views ? "yes" : "no",
		 r->unchecked_launch ? "yes" : "no", r->exclusive ? "yes" : "no",
		 ruda__config_format_size(r->max_memory_per_client, client, sizeof(client)),
		 ruda__config_format_size(r->max_memory_per_uid, per_uid, sizeof(per_uid)),
		 ruda__config_format_size(r->max_staging_per_client, staging, sizeof(staging)),
		 ruda__config_format_size(r->max_staging_per_uid, staging_uid,
					  sizeof(staging_uid)));
	return buf;
}
