/*
 * Priorities on one device: when a client held back for a higher-priority
 * one may start its next command.
 *
 * The queue does not preempt: a command that has started runs to its end,
 * and whatever is submitted after it waits. So while a higher priority is
 * active, lower-priority clients are held: one command at a time on the
 * device, only while nothing of their rank or below is running, and (the
 * anticipation) only once the higher priorities have had no work on the
 * device for `anticipation_ns`. A latency-sensitive client doing launch +
 * sync round trips is back with its next launch within that time, and
 * finds the device idle instead of behind a long low-priority kernel. So
 * that held clients are never starved, one of them starts anyway once they
 * have waited `max_wait_ns` since the last of them started.
 *
 * Loop thread only; session.c keeps the state up to date.
 */
#ifndef RUDA_PRIORITY_H
#define RUDA_PRIORITY_H

#include <stdbool.h>
#include <stdint.h>

#define RUDA_PRIORITY_LEVELS 8u

/* A client counts as active at its priority for this long after its last
 * submission: lower priorities stay held back across its round trips. */
#define RUDA_PRIORITY_HOLD_MS 50u

struct ruda_priority_state {
	/* until when (uv_now() ms) a client of each priority counts as active */
	uint64_t active_until_ms[RUDA_PRIORITY_LEVELS];
	/* each priority's submissions in flight */
	uint32_t inflight[RUDA_PRIORITY_LEVELS];
	/* when (uv_hrtime() ns) each priority's last submission completed */
	uint64_t done_ns[RUDA_PRIORITY_LEVELS];
	/* when a held client last submitted a command */
	uint64_t held_start_ns;
};

struct ruda_priority_rules {
	uint64_t anticipation_ns; /* 0: held clients start as soon as the device allows */
	uint64_t max_wait_ns;     /* 0: held clients may wait as long as the higher work goes on */
};

/* A client of priority higher than `priority` is active at `now_ms`. */
bool ruda__priority_outranked(const struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ms);

/* Submissions in flight of priorities below `priority`. */
uint32_t ruda__priority_inflight_below(const struct ruda_priority_state *state,
				       uint32_t priority);

/* Whether a held client of `priority` may start a command at `now_ns`:
 * nothing of its rank or below is running, and either the higher
 * priorities have been quiet for the anticipation or the held clients have
 * waited their longest. */
bool ruda__priority_may_start(const struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ns, const struct ruda_priority_rules *rules);

/* Record state changes. A submission makes its priority active until
 * RUDA_PRIORITY_HOLD_MS after `now_ms` (uv_now()). */
void ruda__priority_submitted(struct ruda_priority_state *state, uint32_t priority, int held,
			      uint64_t now_ns, uint64_t now_ms);
void ruda__priority_completed(struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ns);

#endif
