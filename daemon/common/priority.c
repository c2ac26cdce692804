/*
 * Priorities on one device: when a held client may start (priority.h).
 */
#include "common/priority.h"

bool ruda__priority_outranked(const struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ms)
{
	for (uint32_t q = priority + 1; q < RUDA_PRIORITY_LEVELS; q++)
		if (state->active_until_ms[q] > now_ms)
			return true;
	return false;
}

uint32_t ruda__priority_inflight_below(const struct ruda_priority_state *state,
				       uint32_t priority)
{
	uint32_t n = 0;
	for (uint32_t q = 0; q < priority && q < RUDA_PRIORITY_LEVELS; q++)
		n += state->inflight[q];
	return n;
}

bool ruda__priority_may_start(const struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ns, const struct ruda_priority_rules *rules)
{
	if (ruda__priority_inflight_below(state, priority + 1))
		return false; /* one held command on the device at a time */
	if (rules->max_wait_ns && now_ns - state->held_start_ns >= rules->max_wait_ns)
		return true;
	if (!rules->anticipation_ns)
		return true;
	uint64_t last_done = 0;
	for (uint32_t q = priority + 1; q < RUDA_PRIORITY_LEVELS; q++) {
		if (state->inflight[q])
			return false; /* it would start the moment that one ends */
		if (state->done_ns[q] > last_done)
			last_done = state->done_ns[q];
	}
	return now_ns - last_done >= rules->anticipation_ns;
}

void ruda__priority_submitted(struct ruda_priority_state *state, uint32_t priority, int held,
			      uint64_t now_ns, uint64_t now_ms)
{
	state->inflight[priority % RUDA_PRIORITY_LEVELS]++;
	state->active_until_ms[priority % RUDA_PRIORITY_LEVELS] = now_ms + RUDA_PRIORITY_HOLD_MS;
	if (held)
		state->held_start_ns = now_ns;
}

void ruda__priority_completed(struct ruda_priority_state *state, uint32_t priority,
			      uint64_t now_ns)
{
	state->inflight[priority % RUDA_PRIORITY_LEVELS]--;
	state->done_ns[priority % RUDA_PRIORITY_LEVELS] = now_ns;
}
