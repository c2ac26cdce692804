/*
 * rudactl: inspect and manage a running rudad. It speaks the protocol
 * through libruda's internal protocol code (libclient/wire.h, linked from
 * libruda.a), not its public API: connect, Hello, then Admin requests
 * (proto/admin.proto). This header is shared by its files:
 * rudactl.c (options, connection, human output), rudactl_json.c (--json),
 * rudactl_metrics.c (Prometheus) and rudactl_top.c (the live view).
 */
#ifndef RUDACTL_H
#define RUDACTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../proto/frame.h"
#include "ruda.pb-c.h"

/* Exit codes (documented in rudactl(1)). */
enum {
	CTL_EXIT_OK = 0,
	CTL_EXIT_DAEMON = 1,  /* the daemon refused or failed, or the connection broke */
	CTL_EXIT_USAGE = 2,
	CTL_EXIT_CONNECT = 3, /* no daemon could be reached */
};

/* The version of the --json schema (docs/rudactl.md). */
#define CTL_JSON_SCHEMA 1

/* One connection to rudad. */
struct ctl {
	int fd;
	char socket[108];
	const char *command; /* for messages */
	uint64_t next_id;
	uint64_t session_id;   /* our own session, left out of every view */
	uint64_t arena_size;   /* our own arena, likewise */
	uint32_t device_index; /* the device our session uses */
	int timeout_ms;
	struct ruda_frame_reader in;
	struct ruda_frame_writer out;
};

/* Send `admin` and wait for its reply. CTL_EXIT_OK and *out (owned by the
 * caller: ruda__reply__free_unpacked) holding an AdminReply body of case
 * `want`; otherwise prints why and returns an exit code. */
int ctl_admin(struct ctl *c, Ruda__Admin *admin, Ruda__AdminReply__BodyCase want,
	      Ruda__Reply **out);

/* Everything rudactl shows, fetched in a few requests. Our own session is
 * already left out of the counts and lists. */
struct snapshot {
	double taken; /* CLOCK_MONOTONIC seconds */
	Ruda__Reply *status_reply;  /* owned */
	Ruda__AdminStatusReply *status;
	Ruda__Reply **client_pages; /* owned */
	size_t npages;
	Ruda__AdminClient **clients; /* borrowed from the pages; sorted by id */
	size_t nclients;
	Ruda__Reply *memory_reply; /* owned, when asked for */
	Ruda__AdminMemoryReply *memory;
	Ruda__Reply *cache_reply; /* owned, when asked for */
	Ruda__AdminCacheReply *cache;
};

enum {
	SNAP_CLIENTS = 1 << 0,
	SNAP_MEMORY = 1 << 1,
	SNAP_CACHE = 1 << 2,
};

/* Fetch a snapshot (the status always, the rest as `what` says). */
int snapshot_take(struct ctl *c, struct snapshot *snap, unsigned what);
void snapshot_free(struct snapshot *snap);
/* The client with this id in `snap`, or NULL. */
const Ruda__AdminClient *snapshot_client(const struct snapshot *snap, uint64_t id);

/*
 * Device busy fraction (0..1) between two snapshots, from the GPU time the
 * clients used in between; -1 when it cannot be told (no earlier snapshot).
 * `client_share`, when not NULL, receives each client's fraction of the
 * interval (indexed like now->clients).
 */
double snapshot_busy(const struct snapshot *before, const struct snapshot *now,
		     uint32_t device, double *client_share);

/* ---- formatting ---------------------------------------------------------- */

/* "0 B", "512 B", "1.5 KiB", "3.0 MiB", "1.2 GiB", "2.0 TiB". */
const char *fmt_bytes(char *buf, size_t len, uint64_t bytes);
/* "850 ms", "12.3 s", "3m12s", "2h03m", "3d04h". */
const char *fmt_ms(char *buf, size_t len, uint64_t ms);
/* GPU time: "0 ms", "0.42 ms", "12.3 ms", "1.234 s", then as fmt_ms. */
const char *fmt_ns(char *buf, size_t len, uint64_t ns);
/* "1.3.255" */
const char *fmt_vk_version(char *buf, size_t len, uint32_t v);
/* Lower-case hex of `len` bytes (at most 32). */
const char *fmt_hex(char *buf, size_t buflen, const uint8_t *data, size_t len);

/* An aligned text table: columns are left-aligned unless `align` says 'r'. */
struct table {
	size_t ncols;
	const char *const *headers;
	const char *align;
	char **cells; /* owned, ncols per row */
	size_t nrows, cap, col;
};

void table_init(struct table *t, size_t ncols, const char *const *headers, const char *align);
void table_cell(struct table *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void table_print(const struct table *t, FILE *out);
void table_finish(struct table *t);

/* ---- JSON (rudactl_json.c) ----------------------------------------------- */

struct json {
	FILE *out;
	int depth;
	bool first[16];
};

void json_begin(struct json *j, FILE *out, const char *command);
void json_end(struct json *j);
void json_object(struct json *j, const char *key);
void json_object_end(struct json *j);
void json_array(struct json *j, const char *key);
void json_array_end(struct json *j);
void json_str(struct json *j, const char *key, const char *value); /* NULL: null */
void json_u64(struct json *j, const char *key, uint64_t value);
void json_i64(struct json *j, const char *key, int64_t value);
void json_bool(struct json *j, const char *key, bool value);
void json_null(struct json *j, const char *key);
/* `value`, or null when it is not `present` (a field the reply may leave unset). */
void json_u64_or_null(struct json *j, const char *key, bool present, uint64_t value);
/* A quota in bytes; 0 (none) is null. */
void json_quota(struct json *j, const char *key, uint64_t bytes);
void json_double(struct json *j, const char *key, double value, int decimals);

/* Objects of the schema shared by several commands. `busy` < 0: null. */
void json_device(struct json *j, const Ruda__AdminDevice *d, double busy);
void json_client(struct json *j, const Ruda__AdminClient *c);
void json_memory_device(struct json *j, const Ruda__AdminMemoryDevice *m);
void json_cache_device(struct json *j, const Ruda__AdminCacheDevice *m);
void json_daemon(struct json *j, const Ruda__AdminStatusReply *s);

/* ---- the other commands ---------------------------------------------------- */

/* rudactl metrics: Prometheus text exposition of a full snapshot. */
int ctl_metrics(struct ctl *c, FILE *out);

struct top_options {
	double interval;    /* seconds between refreshes */
	long iterations;    /* refreshes before exiting; 0: until 'q' */
};
/* rudactl top. */
int ctl_top(struct ctl *c, const struct top_options *o);

#endif
