/*
 * The slowest named step of the loop's pass under way: a request's
 * handler, or a thread pool result handled on the loop. The loop watch
 * (server/loop_watch.c) names it when the pass was slow, so that a stall
 * says what caused it. Steps nest (a pool result resumes parked requests);
 * each is charged its own time, less the steps within it, so the one that
 * really took the time is named. Loop thread only.
 */
#ifndef RUDA_PASS_STEP_H
#define RUDA_PASS_STEP_H

#include <stdint.h>

struct ruda_pass_step {
	const char *kind; /* "request", "thread pool result", or NULL: none */
	const char *what; /* a request's name, or what the result was */
	uint64_t ns;
};

/* Where a step began, from ruda__pass_step_begin. */
struct ruda_step_mark {
	uint64_t started_ns, outer_nested_ns;
};

struct ruda_step_mark ruda__pass_step_begin(void);
/* The step begun at `mark` ends now; the strings are static. */
void ruda__pass_step_end(struct ruda_step_mark mark, const char *kind, const char *what);
/* The pass's slowest step so far; the next pass starts with none. */
struct ruda_pass_step ruda__pass_step_take(void);

#endif
