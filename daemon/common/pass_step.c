#include "common/pass_step.h"

#include <uv.h>

/* the loop is one thread, and a pass one of its turns: one record */
static struct ruda_pass_step slowest;
/* time of the steps ended within the step under way */
static uint64_t nested_ns;

struct ruda_step_mark ruda__pass_step_begin(void)
{
	struct ruda_step_mark mark = {.started_ns = uv_hrtime(), .outer_nested_ns = nested_ns};
	nested_ns = 0;
	return mark;
}

void ruda__pass_step_end(struct ruda_step_mark mark, const char *kind, const char *what)
{
	uint64_t took = uv_hrtime() - mark.started_ns;
	uint64_t own = took > nested_ns ? took - nested_ns : 0;
	if (own > slowest.ns)
		slowest = (struct ruda_pass_step){.kind = kind, .what = what, .ns = own};
	nested_ns = mark.outer_nested_ns + took;
}

struct ruda_pass_step ruda__pass_step_take(void)
{
	struct ruda_pass_step s = slowest;
	slowest = (struct ruda_pass_step){0};
	nested_ns = 0;
	return s;
}
