/*
 * One collective call in flight, shared by the two halves of collective.c:
 * the requests that match calls across devices (collective.c) and the data
 * path once the call is complete (collective_phases.c: sources into host
 * staging, the reduction, the result back).
 */
#ifndef RUDA_COLLECTIVE_OP_H
#define RUDA_COLLECTIVE_OP_H

#include <stdint.h>
#include <uv.h>

#include <ruda/status.h>

#include "common/handle_table.h"
#include "device/device.h"

struct peer_reduce;
struct ruda_buffer;
struct ruda_host_staging;
struct ruda_session_context;

/* Elements one thread-pool job reduces. */
#define REDUCE_CHUNK (4u << 20)

/* What a session has to hear about its collectives. */
struct member {
	uint32_t pending; /* collectives joined and not settled */
	ruda_status error; /* first failure since the last sync */
	char message[256];
	struct sync_wait {
		struct sync_wait *next;
		uint64_t request;
	} *syncs;
};

struct part {
	uint32_t device; /* daemon device index; parts are in increasing order */
	uint64_t session;
	int arrived, settled;
	uint64_t dst, dst_offset;
	/* while the staging is being made: src copied here first, in order */
	struct ruda_buffer *tmp; /* owned reference */
	int tmp_ready;
};

struct op_job {
	uv_work_t work;
	struct collective_op *op;
	uint64_t begin, end;
};

struct collective_op {
	struct collective_op *next; /* waiting for participants, in call order */
	struct ruda_session_context *ctx;
	uint64_t size;
	uint32_t elem, reduce, n;
	uint64_t created_ms;
	struct ruda_host_staging *staging; /* n slots of `size` bytes; slot 0 gets the result */
	uint32_t arrived, copied;
	uint32_t waiters; /* completions and jobs still to come */
	int ready; /* the staging is made (or failed: staging NULL) */
	int queued, failed;
	ruda_status error;
	char message[256];
	struct op_job *jobs;
	uint32_t njobs, jobs_done;
	/* every member a logical device of one physical device: device copies
	 * and a kernel (collective_peer.c) instead of the staging; owned */
	struct peer_reduce *peer;
	struct part parts[];
};

struct ruda_collectives {
	struct collective_op *queue;
	struct ruda_handle_table members; /* session id -> struct member */
	uv_timer_t *timer;
	uint32_t live; /* ops not yet freed */
	/* submissions of device-path ops in flight: a lost device is not torn
	 * down before they are done (they may use memory it lent) */
	uint32_t peer_inflight;
	int closing;
};

/* A copy (or write) of one participant's part, waited for. */
struct op_waiter {
	struct ruda_waiter base;
	struct collective_op *op;
	uint32_t part;
};

/* collective.c: a participant's call is settled (answered at its next
 * CollectiveSync); the whole call fails, every participant settled; the
 * call is freed once nothing waits for it. */
void ruda__collective_settle(struct collective_op *op, uint32_t i, ruda_status status,
			     const char *message);
void ruda__collective_fail(struct collective_op *op, ruda_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ruda__collective_maybe_free(struct collective_op *op);

/* collective_phases.c: what runs once a part's bytes have moved */
/* a participant's src is in its staging slot (the last one starts the
 * reduction) */
void ruda__collective_copied(struct ruda_waiter *base, int status);
/* a participant's src waited in tmp for the staging: stage it once made */
void ruda__collective_tmp_copied(struct ruda_waiter *base, int status);
/* the host staging of the call is made (or NULL: failed) */
void ruda__collective_staging_made(struct ruda_host_staging *st, void *data);

/* collective_peer.c: the device path */
/* Whether the call (size, type, op and device set known) goes by device
 * copies; 1 with op->peer made (its windows taken), 0 for host staging
 * (the log says why). */
int ruda__collective_peer_plan(struct collective_op *op, struct ruda_device **devices);
/* Where member i's src goes on its stream instead of a tmp: for a call of
 * one chunk, straight into the member's window (*hold its reference, for
 * the copy to keep); VK_NULL_HANDLE for a tmp (member 0's is the
 * accumulator). */
VkBuffer ruda__collective_peer_direct(struct collective_op *op, uint32_t i,
				      struct ruda_ref **hold);
/* A member's src is in its tmp (or window): once all are, the chunks start. The caller
 * holds `op` (it may be done when this returns). */
void ruda__collective_peer_ready(struct collective_op *op);
/* The call failed: drop its windows and tmps now (submissions in flight
 * hold what they use), so that nothing of a device that may be going
 * waits for the call's end. */
void ruda__collective_peer_drop(struct collective_op *op);
void ruda__collective_peer_free(struct collective_op *op);

#endif
