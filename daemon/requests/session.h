/*
 * A client's session: the peer's identity, the arena, the streams, the
 * buffers and kernels the client named, its quotas, profiling windows and
 * exclusive lease. Its connection (the socket and its framing) belongs to
 * the server layer, reached through requests/reply.h. Everything is
 * released when the connection ends, however it ends; GPU work already
 * submitted keeps what it uses alive until done.
 */
#ifndef RUDA_SESSION_H
#define RUDA_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include <ruda/status.h>

#include "common/handle_table.h"
#include "exec/stream.h"

struct ruda_arena;
struct ruda_buffer;
struct ruda_connection;
struct ruda_memory_job;
struct ruda_pipeline;
struct ruda_policy;
struct ruda_throughput_cache;
struct Ruda__Reply;

/* A buffer id of the session: the buffer, or the error that took its place. */
struct ruda_session_buffer {
	struct ruda_buffer *buffer; /* owned reference; NULL when allocation failed */
	ruda_status error;          /* first failure of work that wrote it */
	char *error_message;        /* owned */
};

/* A profiling window, open or ended and waiting for its work: the device
 * time of the session's own submissions numbered in (after, until] (the
 * device's queue is shared: another session's work never counts). */
struct ruda_session_profile {
	uint64_t after;  /* the device's last submission when it opened */
	uint64_t until;  /* ... when it ended; UINT64_MAX while open */
	uint64_t gpu_ns; /* device time of those completed so far */
	int refused;     /* more than RUDA_SESSION_MAX_PROFILES were measuring */
	struct ruda_session_profile *next; /* the session's `measuring` list */
};

/* Windows measuring at a time per session (each completion visits them). */
#define RUDA_SESSION_MAX_PROFILES 64u

/* A kernel id of the session. */
struct ruda_session_kernel {
	struct ruda_pipeline *pipeline; /* owned reference */
};

/* What sessions share, owned by the server and handed to each session. */
struct ruda_session_context {
	uv_loop_t *loop;
	/* uv_hrtime() when the loop began measuring its idle time
	 * (UV_METRICS_IDLE_TIME); 0: it does not */
	uint64_t loop_start_ns;
	struct ruda_device **devices; /* borrowed */
	uint32_t ndevices;
	struct ruda_pipeline_registry **pipelines; /* one per device, borrowed */
	struct ruda_arena_pool *arena_pools;       /* one per device, owned by the server */
	struct ruda_handle_table sessions;        /* id -> struct ruda_session */
	struct ruda_session *dead;  /* to destroy at the end of the loop iteration */
	struct ruda_stream *dirty;  /* to submit at the end of the loop iteration */
	struct ruda_session *throttled; /* not read until their GPU work drains */
	struct ruda_session **throttled_tail; /* its last link; NULL: &throttled */
	const struct ruda_policy *policy; /* borrowed; NULL: everyone may connect */
	uint64_t arena_size;
	size_t max_output; /* reply bytes queued for one client before it is dropped */
	uint32_t max_handles;
	struct ruda_handle_table uid_bytes; /* uid -> uint64_t bytes held */
	struct ruda_handle_table uid_staging; /* uid -> uint64_t staging bytes held */
	uint8_t *scratch; /* owned: where requests are decoded (dispatch.c) */
	/* measured throughputs, one cache per device (owned) */
	struct ruda_throughput_cache **throughput_caches;
	int decoding;     /* a request in the scratch area is being handled */
	/* the session holding the device alone (rudactl and ExclusiveBegin),
	 * 0: none; sessions waiting for a lease, in order */
	uint64_t exclusive;
	uv_timer_t *exclusive_timer; /* owned; ends a lease that runs too long */
	uv_timer_t *priority_timer;  /* owned; wakes held sessions once the higher
				      * priorities have gone quiet */
	uint32_t max_exclusive_ms; /* without a policy; 0: 10 s */
	/* the lease's holder: its uid, whether it is an administrator, since
	 * when it holds it */
	uid_t exclusive_uid;
	int exclusive_admin;
	uint64_t exclusive_since_ms;
	uint32_t exclusive_timeout_ms; /* how long the lease was granted for */
	/* uid -> uint64_t: uv_now() before which its next lease is not granted */
	struct ruda_handle_table uid_exclusive;
	uv_timer_t *exclusive_cool_timer; /* owned; grants a waiter once it may */
	struct ruda_exclusive_wait {
		struct ruda_exclusive_wait *next;
		uint64_t session, request;
		uint32_t timeout_ms;
	} *exclusive_waiting;
	/* Admin commands that need the server (rudactl drain, shutdown), set by
	 * whoever owns the server; NULL: the command is refused as unsupported.
	 * Called on the loop after the admin's reply is queued. */
	void (*drain)(void *data);    /* stop accepting clients, let current ones finish */
	void (*shutdown)(void *data); /* as SIGTERM */
	void *hook_data;
	int draining; /* drain() has been called */
	struct ruda_collectives *collectives; /* owned by collective.c; NULL: none yet */
	/* rudad.conf peer_reduce: all-reduce between logical devices of one
	 * physical device by device copies and a kernel (collective_peer.c) on
	 * devices other than CPUs (auto), everywhere (on), never (off) */
	enum ruda_peer_reduce {
		RUDA_PEER_REDUCE_AUTO,
		RUDA_PEER_REDUCE_ON,
		RUDA_PEER_REDUCE_OFF,
	} peer_reduce;
	/* Re-create device `index` after it was lost (daemon/server/recovery.c), set
	 * by whoever owns the devices; NULL: a lost device stays lost. Called
	 * at the end of a loop iteration; returns 0 when done, -EAGAIN to be
	 * called again later, another negative errno when it failed. */
	int (*recreate_device)(void *data, uint32_t index);
	uint64_t recreate_failed; /* bit per device: do not try again */
	/* RUDA_TEST_FAULTS=1 was in rudad's environment at start: test-only
	 * admin commands (inject_device_loss) are accepted */
	int test_faults;
	/* imported arenas unused this long lose their import (session_arena.c) */
	uv_timer_t *arena_timer; /* owned; NULL until an arena is imported */
	uint64_t arena_release_ms;
	int arena_release_read; /* arena_release_ms has been read */
	/* buffers and kernels of closed sessions, released a batch per loop
	 * iteration so that other clients are served in between */
	struct ruda_session_remains *remains;
	uv_idle_t *remains_idle; /* owned; active while there are remains */
	/* connections whose turn ended with frames still buffered (the frame
	 * budget, server/connection.c), in turn; they go on before the next
	 * poll, each after every other connection had its turn */
	struct ruda_connection *yielded, **yielded_tail;
	uv_idle_t *yield_idle; /* owned; active while any connection yielded */
	uint64_t turns_yielded; /* for AdminStatus */
	/* after a client's turn (ruda__session_turn_done): completions handled
	 * then, and lane submissions made then for a Sync; for AdminStatus */
	uint64_t completions_between_turns, syncs_submitted_early;
	/* host time of clients' turns (sockets read, frames decoded and
	 * handled), less the devices' counted parts within them
	 * (ruda__device_counted_ns); for AdminStatus */
	uint64_t turns_ns;
	/* the loop's passes (server/loop_watch.c): the longest and how many
	 * took RUDA_LOOP_SLOW_PASS_MS or more, for AdminStatus */
	struct {
		uint64_t longest_ns, slow;
	} passes;
	/* RUDA_TEST_STALL_FLUSH_MS: a Flush request sleeps that long on the
	 * loop, the tests' stand-in for a request that blocks it */
	uint32_t test_stall_flush_ms;
	/* connections that have not said Hello yet, oldest first, and how
	 * many each uid has (uid -> count, as a pointer) */
	struct ruda_session *hello_first, *hello_last;
	struct ruda_handle_table uid_pending;
	uv_timer_t *hello_timer; /* owned; closes those past handshake_timeout_ms */
};

/* What a session has done, for accounting and rudactl. */
struct ruda_session_usage {
	uint64_t connected_ms;    /* uv_now() at accept */
	uint64_t last_request_ms; /* uv_now() at the last request */
	uint64_t requests;
	uint64_t launches;
	uint64_t bytes_uploaded;
	uint64_t bytes_downloaded;
	uint64_t kernels_registered;
	uint64_t gpu_time_ns; /* device time of its submissions */
	uint64_t submissions; /* queue submissions of its streams */
};

enum ruda_session_state {
	RUDA_SESSION_HELLO,   /* waiting for the handshake */
	RUDA_SESSION_READY,
	RUDA_SESSION_CLOSING, /* sending its last reply, then closed */
	RUDA_SESSION_DEAD,    /* on the context's dead list */
};

struct ruda_session {
	uint64_t id;
	struct ruda_session_context *ctx; /* borrowed */
	struct ruda_session *dead_next;
	struct ruda_session *throttled_next;
	struct ruda_session *hello_prev, *hello_next; /* while pending */
	int pending; /* on the context's list of connections without a Hello */
	int throttled;
	struct ruda_connection *conn; /* borrowed: it owns the session */
	enum ruda_session_state state;
	pid_t pid;
	uid_t uid;
	gid_t gid;
	char name[65];

	struct ruda_device *device; /* borrowed */
	struct ruda_arena *arena;   /* owned reference */
	struct ruda_stream stream;  /* stream 0 */
	struct ruda_stream *current; /* the stream of the request being handled */
	struct ruda_handle_table streams; /* id -> struct ruda_stream, the others */
	/* arena progress: the newest request that used the arena, and the first
	 * upload of each submission still in flight (in submission order) */
	uint64_t arena_seen;
	struct ruda_pending_write {
		uint32_t queue; /* of the submission `value` */
		uint64_t value, first_write;
	} *pending_writes;
	size_t pending_first, pending_count, pending_cap;
	struct ruda_pending_write pending_overflow; /* when the list could not grow */
	struct ruda_handle_table buffers; /* id -> struct ruda_session_buffer */
	struct ruda_handle_table kernels; /* id -> struct ruda_session_kernel */
	struct ruda_handle_table profiles; /* open window id -> struct ruda_session_profile */
	struct ruda_session_profile *measuring; /* owned: open and ended windows */
	uint32_t nmeasuring;
	struct ruda_handle_table staging;  /* region id -> struct ruda_arena (staging.c) */
	int allocation_mode;               /* enum ruda_allocation_mode of new buffers */
	struct ruda_handle_table graphs;   /* id -> struct ruda_graph (owned reference) */
	uint64_t bytes;                   /* device bytes of its buffers */
	uint64_t requested;               /* bytes its buffers asked for */
	uint64_t own_pages;               /* its buffers with a page of their own */
	uint64_t quota;                   /* limit on `bytes`, 0 = none */
	uint64_t uid_quota;               /* limit for all sessions of its uid */
	uint64_t staging_bytes;           /* host bytes of its staging regions */
	uint64_t staging_quota;           /* limit on staging_bytes, 0 = none */
	uint64_t staging_uid_quota;       /* the same for all sessions of its uid */
	int unchecked_allowed;            /* policy: launch_unchecked runs unchecked */
	int admin;                        /* policy: an administrator (root, admin_group) */
	int exclusive_allowed;            /* policy: may take exclusive leases */
	/* its lease ran out after this many ms before its ExclusiveEnd came
	 * (0: not so); that ExclusiveEnd is answered ERROR_LEASE_EXPIRED */
	uint32_t lease_expired_ms;
	uint32_t priority;                /* scheduling priority, 1..7 (Hello) */
	int held;                         /* held back for a higher priority */
	int parked; /* the request being handled waits for the arena's import
		     * (session_arena.c) or for device memory (buffers.c): the
		     * connection hands its frame again once done
		     * (ruda__session_frame_done) */
	/* the staging region whose import the parked request waits for
	 * (borrowed: requests stop while it waits, so it cannot be detached;
	 * cleared when the session is resumed) */
	struct ruda_arena *parked_on;
	/* the device memory the parked request waits for, made in the thread
	 * pool (buffers.c; cleared when it is ready), and whether the request
	 * handed again has had its memory made (it allocates, not parks; a
	 * to_client between two GPUs may park twice: how many times) */
	const struct ruda_memory_job *parked_for;
	int memory_made;
	struct ruda_session_usage usage;
};

/* The session of connection `conn` (server/connection.c makes both), from
 * peer `pid`, `uid`, `gid`; pending until its Hello. */
int ruda__session_create(struct ruda_session_context *ctx, struct ruda_connection *conn,
			 uint64_t id, pid_t pid, uid_t uid, gid_t gid, struct ruda_session **out);
/* Connections of `uid` that have not said Hello yet. */
uint32_t ruda__session_pending(const struct ruda_session_context *ctx, uid_t uid);
/* The session's Hello has come (whatever it will be answered): it is no
 * longer pending, nor subject to handshake_timeout_ms. */
void ruda__session_hello_done(struct ruda_session *session);
/* Mark the session for destruction at the end of this loop iteration; it
 * reads and replies no more. Safe from any callback. */
void ruda__session_kill(struct ruda_session *session);
/* Submit the streams with recorded work (end of a loop iteration). */
void ruda__session_submit_dirty(struct ruda_session_context *ctx);
/* A client's turn on the loop, from its start: timed for turns_ns. */
struct ruda_turn {
	uint64_t started_ns; /* uv_hrtime() */
	uint64_t counted_ns; /* the devices' counted time then */
};
struct ruda_turn ruda__session_turn_begin(const struct ruda_session_context *ctx);
/* After one client's turn on the loop: its time is counted, completions
 * published meanwhile are answered, and lanes that a Sync waits for on an
 * idle queue submit, without waiting for every other busy client's turn. */
void ruda__session_turn_done(struct ruda_session_context *ctx, struct ruda_turn turn);
/* Buffers and kernels released per loop iteration after a session closed. */
#define RUDA_SESSION_TEARDOWN_BATCH 4096u
/* Release up to `max` of the closed sessions' buffers and kernels; returns
 * whether some are left. */
bool ruda__session_remains_release(struct ruda_session_context *ctx, size_t max);
/* Grant the device to session `id` alone (or queue it); see ExclusiveBegin.
 * Returns true when granted now. */
bool ruda__session_exclusive_begin(struct ruda_session *session, uint64_t request,
				   uint32_t timeout_ms);
/* End the lease `session` holds; 0, or -ENOENT when it holds none. */
/* The longest lease granted (max_exclusive_ms). */
uint32_t ruda__session_exclusive_limit_ms(const struct ruda_session_context *ctx);
/* 0: the lease ended; -ENOENT: this session holds none; -ETIMEDOUT: its
 * lease ran out after s->lease_expired_ms first (told once: cleared). */
int ruda__session_exclusive_end(struct ruda_session *session);

/* Streams a session may have besides stream 0. */
#define RUDA_SESSION_MAX_STREAMS 64u

/* Stream `id` of the session, made on first use; NULL when the session
 * has RUDA_SESSION_MAX_STREAMS already (or no memory). */
struct ruda_stream *ruda__session_stream(struct ruda_session *session, uint32_t id);
/* Call fn on every stream of the session, stream 0 first. */
void ruda__session_each_stream(struct ruda_session *session,
			       void (*fn)(struct ruda_stream *stream, void *data), void *data);
/* Submit what every stream of the session has recorded. */
void ruda__session_submit_all(struct ruda_session *session);
/* Request `id` used arena bytes; tell the client which requests' bytes it
 * may reuse now. */
void ruda__session_arena_used(struct ruda_session *session, uint64_t id);
/* Publish arena progress: every request up to the first upload still
 * recorded or in flight, on any stream. */
void ruda__session_arena_publish(struct ruda_session *session);
/* Make stream `s` report its submissions to the session (at Hello and
 * when a stream is made). */
void ruda__session_adopt_stream(struct ruda_session *session, struct ruda_stream *stream);

/* Account a buffer of `allocated` device bytes (`requested` asked for) to
 * the session and its uid; RUDA_ERROR_QUOTA when over a limit (then
 * nothing is charged). */
ruda_status ruda__session_charge(struct ruda_session *session, uint64_t allocated,
				 uint64_t requested);
void ruda__session_uncharge(struct ruda_session *session, uint64_t allocated,
			    uint64_t requested);
/* Whether `bytes` more would stay within the session's and its uid's
 * quotas (charging them may still find a few bytes more allocated). */
bool ruda__session_quota_allows(const struct ruda_session *session, uint64_t bytes);
/* The same for `buffer`, also counting the pages of its own (own_pages). */
ruda_status ruda__session_charge_buffer(struct ruda_session *session,
					const struct ruda_buffer *buffer);
void ruda__session_uncharge_buffer(struct ruda_session *session, const struct ruda_buffer *buffer);
/* Bytes held by every session of `uid`. */
uint64_t ruda__session_uid_bytes(const struct ruda_session_context *ctx, uid_t uid);
/* The same for staging regions (host memory pinned for the client), a
 * quota of its own: RUDA_ERROR_QUOTA when over a limit, then nothing is
 * charged. */
ruda_status ruda__session_charge_staging(struct ruda_session *session, uint64_t bytes);
void ruda__session_uncharge_staging(struct ruda_session *session, uint64_t bytes);
uint64_t ruda__session_uid_staging(const struct ruda_session_context *ctx, uid_t uid);

/* Open a window after everything the session has recorded (submitted now,
 * so that none of it counts); NULL without memory. */
struct ruda_session_profile *ruda__session_profile_open(struct ruda_session *session);
/* End it after everything recorded so far (submitted now): its time is
 * complete once the session's newest submission has completed. */
void ruda__session_profile_close(struct ruda_session *session, struct ruda_session_profile *p);
/* Forget an open or ended window. */
void ruda__session_profile_free(struct ruda_session *session, struct ruda_session_profile *p);
/* Release what the context owns (at shutdown). */
void ruda__session_context_finish(struct ruda_session_context *ctx);
/* Read again from the sessions whose GPU work has drained (after device
 * progress). */
void ruda__session_context_resume(struct ruda_session_context *ctx);
/* The session ends (server/connection.c, in this order): detach takes it
 * off every list (sessions, dead, pending, throttled, exclusive); the
 * request layer then drops what its requests made; release lets go of its
 * streams, graphs, buffers, kernels, profiles and arena. Its memory goes
 * with the connection. */
void ruda__session_detach(struct ruda_session *session);
void ruda__session_release(struct ruda_session *session);

/* Whether the connection may hand the session another frame now; when
 * not because the session must wait (its GPU work, a higher priority, an
 * exclusive lease), it is throttled until ruda__session_context_resume. */
bool ruda__session_takes_frame(struct ruda_session *session);
/* After a frame was dispatched: true when its request parked (it waits for
 * the arena's import) and the same frame must be handed again once the
 * session resumes; false otherwise (the session may be throttled). */
bool ruda__session_frame_done(struct ruda_session *session);

/* The session's parts in files of their own, for session.c: */
/* session_exclusive.c: a session that ends holds no lease and waits for
 * none; at shutdown, the leases' lists and timers go */
void ruda__session_exclusive_forget(struct ruda_session *session);
void ruda__session_exclusive_finish(struct ruda_session_context *ctx);
/* session_quota.c: the per-uid tables go (shutdown) */
void ruda__session_quota_finish(struct ruda_session_context *ctx);
/* session_remains.c: take a closed session's buffers and kernels, to be
 * released a batch per loop iteration; at shutdown, all of them at once */
void ruda__session_remains_defer(struct ruda_session_context *ctx,
				 struct ruda_handle_table *buffers,
				 struct ruda_handle_table *kernels);
void ruda__session_remains_finish(struct ruda_session_context *ctx);
/* uv_close callback of the handles the context owns: frees them */
void ruda__session_free_closed(uv_handle_t *handle);

/* Drop the client for a protocol violation. */
void ruda__session_violation(struct ruda_session *session, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#endif
