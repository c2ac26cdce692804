/*
 * rudad's configuration: /etc/ruda/rudad.conf (see rudad.conf(5)), with
 * the command line on top. A key = value file; [user X] and [group X]
 * sections hold per-identity memory quotas.
 *
 * Users and groups are resolved to ids while parsing, so a name that does
 * not exist is reported with its line; a number is taken as an id as is.
 */
#ifndef RUDA_CONFIG_H
#define RUDA_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#ifndef RUDA_CONFIG_PATH
#define RUDA_CONFIG_PATH "/etc/ruda/rudad.conf"
#endif

/* A memory limit that is not one. */
#define RUDA_UNLIMITED UINT64_MAX
/* max_memory_per_client/uid = auto (the default): a share of the heap of
 * the device the client connects to, so that no one client (or user)
 * can take all of it and others still find room. */
#define RUDA_QUOTA_AUTO (UINT64_MAX - 1)
#define RUDA_QUOTA_AUTO_CLIENT_SHARE 2 /* per client: 1/2 of the heap */
#define RUDA_QUOTA_AUTO_UID_SHARE 4     /* per uid: 3/4 of it (3 * heap / 4) */

/* Priority scheduling (daemon/common/priority.h): how long lower priorities wait
 * after a higher one's last work, and at most. */
#define RUDA_PRIORITY_ANTICIPATION_US 1000u
#define RUDA_PRIORITY_MAX_WAIT_US 2000u

/* How long freed large buffers' device memory is kept for reuse
 * (daemon/device/allocator.c). */
#define RUDA_FREED_MEMORY_KEEP_MS 10000u

/* A submission that makes no progress for this long fails with
 * RUDA_ERROR_TIMEOUT and the device is re-created for the other clients
 * (daemon/server/recovery.c): one client's endless kernel cannot hold the device.
 * Lavapipe computes 16 MiB fills at ~1 GB/s on one core, so a legitimate
 * submission of a few seconds still fits. */
#define RUDA_SUBMISSION_TIMEOUT_MS 10000u
/* How long a stop may take: after it rudad exits with
 * RUDA_EXIT_STOP_TIMEOUT even though a driver thread has not returned.
 * systemd/rudad.service's TimeoutStopSec= is above it. */
#define RUDA_STOP_TIMEOUT_MS 5000u
#define RUDA_EXIT_STOP_TIMEOUT 3
/* How long one kernel may compile, and how much resident memory the
 * compile worker may use meanwhile (daemon/compile_worker.h). */
#define RUDA_COMPILE_TIMEOUT_MS 10000u
#define RUDA_COMPILE_MEMORY_MAX (2ull << 30)

/* The top-level keys, in the order rudad.conf(5) documents them. */
enum ruda_config_key {
	RUDA_CONFIG_SOCKET,
	RUDA_CONFIG_SOCKET_MODE,
	RUDA_CONFIG_SOCKET_GROUP,
	RUDA_CONFIG_DEVICES,
	RUDA_CONFIG_ARENA_SIZE,
	RUDA_CONFIG_MAX_CLIENTS,
	RUDA_CONFIG_MAX_REQUESTS_IN_FLIGHT,
	RUDA_CONFIG_SUBMISSION_TIMEOUT_MS,
	RUDA_CONFIG_LOG_LEVEL,
	RUDA_CONFIG_CACHE_DIRECTORY,
	RUDA_CONFIG_ADMIN_GROUP,
	RUDA_CONFIG_READ_ONLY_VIEWS,
	RUDA_CONFIG_ALLOWED_USERS,
	RUDA_CONFIG_ALLOWED_GROUPS,
	RUDA_CONFIG_UNCHECKED_LAUNCH_USERS,
	RUDA_CONFIG_UNCHECKED_LAUNCH_GROUPS,
	RUDA_CONFIG_FORCE_CHECKED_LAUNCHES,
	RUDA_CONFIG_FREED_MEMORY_KEEP_MS,
	RUDA_CONFIG_EXPORT_MEMORY,
	RUDA_CONFIG_QUEUES,
	RUDA_CONFIG_LANES,
	RUDA_CONFIG_PEER_REDUCE,
	RUDA_CONFIG_MAX_MEMORY_PER_CLIENT,
	RUDA_CONFIG_MAX_MEMORY_PER_UID,
	RUDA_CONFIG_MAX_STAGING_PER_CLIENT,
	RUDA_CONFIG_MAX_STAGING_PER_UID,
	RUDA_CONFIG_MAX_PRIORITY,
	RUDA_CONFIG_HIGH_PRIORITY_USERS,
	RUDA_CONFIG_HIGH_PRIORITY_GROUPS,
	RUDA_CONFIG_PRIORITY_ANTICIPATION_US,
	RUDA_CONFIG_PRIORITY_MAX_WAIT_US,
	RUDA_CONFIG_HANDSHAKE_TIMEOUT_MS,
	RUDA_CONFIG_MAX_PENDING_PER_UID,
	RUDA_CONFIG_ADMIN_RESERVED_CLIENTS,
	RUDA_CONFIG_EXCLUSIVE_USERS,
	RUDA_CONFIG_EXCLUSIVE_GROUPS,
	RUDA_CONFIG_MAX_EXCLUSIVE_MS,
	RUDA_CONFIG_EXCLUSIVE_SHARE,
	RUDA_CONFIG_STOP_TIMEOUT_MS,
	RUDA_CONFIG_COMPILE_TIMEOUT_MS,
	RUDA_CONFIG_COMPILE_MEMORY_MAX,
	RUDA_CONFIG_NKEYS,
};

/* uids or gids. */
struct ruda_id_list {
	uint32_t *ids; /* owned */
	size_t count;
};

/* A [user X] or [group X] section: quotas for one identity. */
struct ruda_config_quota {
	bool is_group;
	uint32_t id;                    /* uid or gid */
	unsigned line;                  /* of the section header */
	bool has_max_memory_per_client; /* false: the next rule decides */
	bool has_max_memory_per_uid;
	uint64_t max_memory_per_client; /* bytes or RUDA_UNLIMITED */
	uint64_t max_memory_per_uid;
};

struct ruda_config {
	uint64_t set; /* bit (1ull << key): given in the file or on the command line */

	char *socket;       /* owned; NULL: the default path (server.h) */
	unsigned socket_mode;
	char *socket_group; /* owned, as written; NULL: rudad's own group */
	gid_t socket_gid;
	char *devices;      /* owned; device selector; NULL: the best device */
	uint64_t arena_size;
	uint32_t max_clients;
	uint32_t max_requests_in_flight; /* per client */
	uint32_t submission_timeout_ms;  /* 0: none */
	/* how long a stop (SIGTERM) may take before rudad exits anyway with
	 * RUDA_EXIT_STOP_TIMEOUT (device work that does not end); 0: no limit */
	uint32_t stop_timeout_ms;
	/* bounds of the compile worker (compile_worker.h): how long one
	 * kernel may compile (0: no limit) and its process's resident memory
	 * meanwhile (bytes; 0: no limit) */
	uint32_t compile_timeout_ms;
	uint64_t compile_memory_max;
	int log_level;                   /* enum ruda_log_level */
	char *cache_directory;           /* owned; NULL until resolved */

	char *admin_group; /* owned, as written; NULL: root only */
	gid_t admin_gid;
	bool read_only_views;
	struct ruda_id_list allowed_users;  /* both empty: anyone who can open the socket */
	struct ruda_id_list allowed_groups;
	struct ruda_id_list unchecked_launch_users;
	struct ruda_id_list unchecked_launch_groups;
	bool force_checked_launches;
	bool export_memory; /* buffers may be exported as fds (get_resource) */
	uint32_t queues;    /* device queues to spread streams over; 0: all, up to 16 */
	char *lanes; /* owned: "auto", "on" or "off"; NULL: auto (exec/lane.c) */
	/* owned: "auto", "on" or "off"; NULL: auto (requests/collective_peer.c):
	 * all-reduce between logical devices of one physical device by device
	 * copies and a kernel rather than host staging */
	char *peer_reduce;

	uint64_t max_memory_per_client; /* bytes or RUDA_UNLIMITED */
	uint64_t max_memory_per_uid;
	struct ruda_config_quota *quotas; /* owned */
	size_t nquotas;
	/* host memory pinned for staging regions: a quota of its own, since
	 * it is the host's RAM, not the device's (docs/memory.md) */
	uint64_t max_staging_per_client; /* bytes or RUDA_UNLIMITED */
	uint64_t max_staging_per_uid;    /* default: half the host's memory */
	/* how long freed large buffers' memory is kept for reuse (0: not) */
	uint32_t freed_memory_keep_ms;

	/* scheduling priority (1..7) a client may ask for; high_priority_*
	 * may ask for up to 7 */
	uint32_t max_priority;
	struct ruda_id_list high_priority_users;
	struct ruda_id_list high_priority_groups;
	/* while a higher priority is active, lower ones start a command only
	 * once it has had no work on the device for this long, or once they
	 * have waited the most (daemon/common/priority.h); 0: no such wait, no limit */
	uint32_t priority_anticipation_us;
	uint32_t priority_max_wait_us;

	/* connections that have not said Hello: closed after this long (0:
	 * never), and at most this many per uid (0: no limit) */
	uint32_t handshake_timeout_ms;
	uint32_t max_pending_per_uid;
	/* of max_clients, the slots only administrators may take */
	uint32_t admin_reserved_clients;
	/* who may take exclusive leases besides administrators (both empty:
	 * everyone), for how long at most, and the percentage of the time a
	 * uid may hold the device alone: after a lease of d ms, the uid's
	 * next one waits d * (100 - share) / share ms */
	struct ruda_id_list exclusive_users;
	struct ruda_id_list exclusive_groups;
	uint32_t max_exclusive_ms;
	uint32_t exclusive_share;
};

/* Receives each error: `path` NULL and `line` 0 for the command line. */
typedef void ruda_config_report_fn(void *data, const char *path, unsigned line,
				   const char *message);

/* max_staging_per_uid's default: half the host's physical memory, rounded
 * down to a MiB (unlimited if it cannot be read). */
uint64_t ruda__config_default_staging_per_uid(void);

/* The defaults, nothing set. */
void ruda__config_init(struct ruda_config *config);
void ruda__config_finish(struct ruda_config *config);

/* Parse `text` (`len` bytes, read from `path`) on top of `config`.
 * Reports every error and returns how many there were. */
int ruda__config_parse(struct ruda_config *config, const char *path, const char *text,
		       size_t len, ruda_config_report_fn *report, void *data);
/* Read and parse the file `path`. A missing file is an error only when
 * `must_exist`; *found (optional) says whether it was there. Returns how
 * many errors were reported (a count, never an errno). */
int ruda__config_load(struct ruda_config *config, const char *path, bool must_exist,
		      bool *found, ruda_config_report_fn *report, void *data);
/* Set one top-level key as the file would ("" sets the default back).
 * Returns 0 or -EINVAL after reporting why. */
int ruda__config_set(struct ruda_config *config, const char *key, const char *value,
		     ruda_config_report_fn *report, void *data);
/* Copy every key set in `src` over `dst` (command line over file); 0 or
 * -ENOMEM. */
int ruda__config_override(struct ruda_config *dst, const struct ruda_config *src);
/* Fill what is derived from the environment (cache_directory); 0 or a
 * negative errno. */
int ruda__config_resolve(struct ruda_config *config);

/* The key's name in the file; the key from its name, or -ENOENT. */
const char *ruda__config_key_name(enum ruda_config_key key);
int ruda__config_key_lookup(const char *name);
/* Whether SIGHUP applies a new value of `key` (else it needs a restart). */
bool ruda__config_key_reloadable(enum ruda_config_key key);
/* Whether `key` has the same value in both. */
bool ruda__config_key_equal(const struct ruda_config *a, const struct ruda_config *b,
			    enum ruda_config_key key);
/* Give dst src's value of `key` (its set bit too). Returns 0 or -ENOMEM. */
int ruda__config_key_copy(struct ruda_config *dst, const struct ruda_config *src,
			  enum ruda_config_key key);
/* Whether both have the same [user]/[group] sections. */
bool ruda__config_quotas_equal(const struct ruda_config *a, const struct ruda_config *b);

/* Write the whole configuration in the file's format. */
void ruda__config_write(const struct ruda_config *config, FILE *out);
/* "2G", "512M", "1000", "unlimited" into buf. */
const char *ruda__config_format_size(uint64_t bytes, char *buf, size_t len);

/* The default cache directory: $CACHE_DIRECTORY (its first entry), else
 * /var/cache/ruda for root, else $XDG_CACHE_HOME/ruda or ~/.cache/ruda.
 * 0, -ENOENT (no home) or -ENAMETOOLONG. */
int ruda__config_default_cache_directory(char *buf, size_t len);

#endif
