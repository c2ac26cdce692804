/*
 * Every pass of the loop timed. The daemon must never block its loop on
 * the GPU, the disk or a client: a pass that kept it from its events for
 * RUDA_LOOP_SLOW_PASS_MS or more is logged with where its time went and
 * counted for AdminStatus (ctx->passes), so that a stall is seen, and its
 * cause named, wherever it happens.
 */
#ifndef RUDA_LOOP_WATCH_H
#define RUDA_LOOP_WATCH_H

#include <stdint.h>
#include <uv.h>

#include "requests/session.h"

#define RUDA_LOOP_SLOW_PASS_MS 50u

/* The loop's counters at the start of a pass. */
struct ruda_loop_sample {
	uint64_t ns, idle_ns, turns_ns, submit_ns, record_ns, completion_ns;
};

struct ruda_loop_watch {
	uv_prepare_t prepare;
	struct ruda_session_context *ctx; /* borrowed */
	struct ruda_loop_sample last;
	uint64_t reported_ns; /* when the last slow pass was logged */
	uint64_t unreported;  /* slow passes since, not logged */
};

/* Start timing `ctx`'s loop (its idle time must be measured:
 * UV_METRICS_IDLE_TIME). 0 or a negative errno. */
int ruda__loop_watch_start(struct ruda_loop_watch *w, uv_loop_t *loop,
			   struct ruda_session_context *ctx);
void ruda__loop_watch_stop(struct ruda_loop_watch *w);

#endif
