#include "server/loop_watch.h"

#include "common/log.h"
#include "common/pass_step.h"
#include "device/device.h"

#define MS 1000000ull
/* at most one warning a second: a loop that stalls often would otherwise
 * flood the journal; the ones between are counted in the next */
#define REPORT_EVERY_NS (1000 * MS)

static struct ruda_loop_sample sample(const struct ruda_session_context *ctx)
{
	struct ruda_loop_sample s = {
		.ns = uv_hrtime(),
		.idle_ns = uv_metrics_idle_time(ctx->loop),
		.turns_ns = ctx->turns_ns,
	};
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		const struct ruda_device *d = ctx->devices[i];
		if (!d)
			continue;
		s.submit_ns += d->stats.submit_ns;
		s.record_ns += d->stats.lane_record_ns;
		s.completion_ns += d->stats.completion_ns;
	}
	return s;
}

/* A counter's growth; 0 where it went back (a device re-created after a
 * loss starts its counts again). */
static uint64_t since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

static double ms(uint64_t ns)
{
	return (double)ns / (double)MS;
}

static void report(struct ruda_loop_watch *w, const struct ruda_loop_sample *now, uint64_t busy,
		   const struct ruda_pass_step *step)
{
	const struct ruda_loop_sample *then = &w->last;
	if (w->reported_ns && now->ns - w->reported_ns < REPORT_EVERY_NS) {
		w->unreported++;
		return;
	}
	uint64_t turns = since(now->turns_ns, then->turns_ns),
		 submit = since(now->submit_ns, then->submit_ns),
		 record = since(now->record_ns, then->record_ns),
		 done = since(now->completion_ns, then->completion_ns);
	uint64_t counted = turns + submit + record + done;
	log_warn("loop: one pass kept it from its events for %.1f ms (its slowest step: %s %s, "
		 "%.1f ms): clients' turns %.1f ms, submitting %.1f ms, recording %.1f ms, "
		 "completions %.1f ms, the rest (timers, the thread pool's results and the "
		 "requests they resumed) %.1f ms; %llu more such passes since the last report",
		 ms(busy), step->kind ? step->kind : "none", step->what ? step->what : "",
		 ms(step->ns), ms(turns), ms(submit), ms(record), ms(done),
		 ms(busy > counted ? busy - counted : 0), (unsigned long long)w->unreported);
	w->reported_ns = now->ns;
	w->unreported = 0;
}

/* Before the loop polls: the pass since the last poll has ended. */
static void on_prepare(uv_prepare_t *prepare)
{
	struct ruda_loop_watch *w = prepare->data;
	struct ruda_session_context *ctx = w->ctx;
	struct ruda_loop_sample now = sample(ctx);
	struct ruda_pass_step step = ruda__pass_step_take();
	uint64_t wall = now.ns - w->last.ns, idle = now.idle_ns - w->last.idle_ns;
	uint64_t busy = wall > idle ? wall - idle : 0;
	if (busy > ctx->passes.longest_ns)
		ctx->passes.longest_ns = busy;
	if (busy >= RUDA_LOOP_SLOW_PASS_MS * MS) {
		ctx->passes.slow++;
		report(w, &now, busy, &step);
	}
	w->last = now;
}

int ruda__loop_watch_start(struct ruda_loop_watch *w, uv_loop_t *loop,
			   struct ruda_session_context *ctx)
{
	/* ctx stays NULL unless the handle is made: stop then has none to close */
	*w = (struct ruda_loop_watch){0};
	int err = uv_prepare_init(loop, &w->prepare);
	if (err)
		return err;
	w->ctx = ctx;
	w->prepare.data = w;
	w->last = sample(ctx);
	ruda__pass_step_take();
	uv_prepare_start(&w->prepare, on_prepare);
	/* it only watches: it does not keep the loop alive */
	uv_unref((uv_handle_t *)&w->prepare);
	return 0;
}

void ruda__loop_watch_stop(struct ruda_loop_watch *w)
{
	if (!w->ctx)
		return;
	uv_prepare_stop(&w->prepare);
	uv_close((uv_handle_t *)&w->prepare, NULL);
	w->ctx = NULL;
}
