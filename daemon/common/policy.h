/*
 * Who may do what: rudad.conf's access and quota rules applied to one
 * client's identity (its uid, gid and groups from the socket).
 */
#ifndef RUDA_POLICY_H
#define RUDA_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct ruda_config;

/* The most groups of a client that the policy looks at. */
#define RUDA_POLICY_MAX_GROUPS 256

struct ruda_policy {
	/* borrowed; main reloads the configuration in place, so answers
	 * always follow the current file */
	const struct ruda_config *config;
};

/* What one client may do, decided once at its Hello. */
struct ruda_rights {
	bool may_connect;
	bool admin;            /* root, or a member of admin_group */
	bool views;            /* read-only admin views: admin, or read_only_views */
	bool unchecked_launch; /* may launch kernels without bounds checking */
	bool exclusive;        /* may take exclusive leases (ExclusiveBegin) */
	uint64_t max_memory_per_client; /* bytes or RUDA_UNLIMITED */
	uint64_t max_memory_per_uid;    /* all sessions of the uid together */
	uint64_t max_staging_per_client; /* staging regions' host bytes, or RUDA_UNLIMITED */
	uint64_t max_staging_per_uid;
	uint32_t max_priority;          /* scheduling priority it may ask for, 1..7 */
	char why[160];                  /* when !may_connect: the reason */
};

void ruda__policy_init(struct ruda_policy *policy, const struct ruda_config *config);

/* Decide for an identity: `groups` are its groups besides `gid`. */
void ruda__policy_check(const struct ruda_policy *policy, uid_t uid, gid_t gid,
			const gid_t *groups, size_t ngroups, struct ruda_rights *out);

/* The groups of the process at the other end of connected socket `fd`
 * (SO_PEERGROUPS, the set the kernel checked against the socket file's
 * mode), else those of uid's account (getgrouplist). Returns how many were
 * written to `groups` (at most `max`), or -errno. */
int ruda__policy_peer_groups(int fd, uid_t uid, gid_t gid, gid_t *groups, size_t max);

/* Both of the above for a connected client. */
void ruda__policy_check_peer(const struct ruda_policy *policy, int fd, uid_t uid, gid_t gid,
			     struct ruda_rights *out);

/* The priority a client asking for `requested` (0: the default) gets:
 * what it asked, or the default, capped by `rights`. */
uint32_t ruda__policy_priority(const struct ruda_rights *rights, uint32_t requested);

/* "admin no, views no, unchecked launches no, memory 2G per client,
 * unlimited per uid" for the log. */
const char *ruda__rights_describe(const struct ruda_rights *rights, char *buf, size_t len);

#endif
