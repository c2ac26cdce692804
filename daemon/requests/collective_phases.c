/*
 * An all-reduce's data path once its participants have called: each src is
 * copied into its slot of host staging (imported into every device), the
 * slots are reduced into slot 0 in the thread pool, and the result is
 * copied into every participant's dst, each in a submission of its own.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "device/device.h"
#include "exec/copy.h"
#include "exec/reduce.h"
#include "exec/stream.h"
#include "memory/buffer.h"
#include "memory/host_staging.h"
#include "requests/collective_op.h"
#include "requests/session.h"
#include "common/pass_step.h"

static void written(struct ruda_waiter *base, int status)
{
	struct op_waiter *w = (struct op_waiter *)base;
	struct collective_op *op = w->op;
	op->waiters--;
	if (status != RUDA_OK)
		ruda__collective_settle(op, w->part, (ruda_status)status,
					"all-reduce: the device failed");
	else
		ruda__collective_settle(op, w->part, op->failed ? op->error : RUDA_OK, op->message);
	free(w);
	ruda__collective_maybe_free(op);
}

/* The result is in slot 0: copy it into every participant's dst. */
static void write_back(struct collective_op *op)
{
	struct ruda_session_context *ctx = op->ctx;
	for (uint32_t i = 0; i < op->n; i++) {
		struct part *p = &op->parts[i];
		struct ruda_session *s = ruda__handle_table_get(&ctx->sessions, p->session);
		if (p->settled)
			continue;
		if (!s || s->state != RUDA_SESSION_READY) {
			ruda__collective_settle(op, i, RUDA_ERROR_DISCONNECTED,
						"all-reduce: the client has gone");
			continue;
		}
		struct ruda_session_buffer *b = ruda__handle_table_get(&s->buffers, p->dst);
		if (!b || !b->buffer || p->dst_offset > b->buffer->size ||
		    op->size > b->buffer->size - p->dst_offset) {
			ruda__collective_settle(op, i, RUDA_ERROR_INVALID_HANDLE,
						"all-reduce: the destination buffer was released");
			continue;
		}
		VkBuffer host = ruda__host_staging_buffer(op->staging, s->device);
		/* a new destination's zeros go first, not over the result */
		ruda__stream_fill_now(b->buffer);
		struct op_waiter *w = calloc(1, sizeof(*w));
		struct ruda_copy c = {
			.src = host,
			.dst = b->buffer->vk,
			.region = {.srcOffset = 0, .dstOffset = p->dst_offset, .size = op->size},
			.hold = {&op->staging->ref, &b->buffer->ref},
		};
		uint64_t value = 0;
		int rc = -ENOMEM;
		if (w) {
			w->base.done = written;
			w->op = op;
			w->part = i;
			op->waiters++;
			rc = ruda__copy_submit(s->device, &c, &w->base, &value);
		}
		if (rc == -EAGAIN || rc == -ENOMEM) {
			if (w)
				op->waiters--;
			free(w);
			ruda__collective_settle(op, i, RUDA_ERROR_OUT_OF_MEMORY,
						"all-reduce: out of memory");
			continue;
		}
		/* SyncBuffers on it waits for the result (a copy of queue 0) */
		if (rc == 0 && value > b->buffer->use_value[0])
			b->buffer->use_value[0] = value;
	}
}

static void job_run(uv_work_t *work)
{
	struct op_job *j = work->data;
	struct collective_op *op = j->op;
	ruda__collective_reduce(op->staging->map, op->size, op->n, j->begin, j->end, op->elem,
				op->reduce);
}

static void job_done(uv_work_t *work, int status)
{
	struct ruda_step_mark step = ruda__pass_step_begin();
	struct op_job *j = work->data;
	struct collective_op *op = j->op;
	(void)status;
	op->waiters--;
	if (++op->jobs_done == op->njobs && !op->failed)
		write_back(op);
	ruda__collective_maybe_free(op);
	ruda__pass_step_end(step, "thread pool result", "all-reduce part reduced");
}

/* Every participant's src is in host memory: reduce in the thread pool. */
static void reduce(struct collective_op *op)
{
	uint64_t count = op->size / RUDA_ELEM_SIZE(op->elem);
	uint64_t njobs = (count + REDUCE_CHUNK - 1) / REDUCE_CHUNK;
	op->jobs = calloc(njobs ? njobs : 1, sizeof(*op->jobs));
	if (!op->jobs) {
		ruda__collective_fail(op, RUDA_ERROR_OUT_OF_MEMORY, "all-reduce: out of memory");
		return;
	}
	op->njobs = (uint32_t)njobs;
	for (uint32_t k = 0; k < op->njobs; k++) {
		struct op_job *j = &op->jobs[k];
		j->op = op;
		j->begin = (uint64_t)k * REDUCE_CHUNK;
		j->end = j->begin + REDUCE_CHUNK < count ? j->begin + REDUCE_CHUNK : count;
		j->work.data = j;
		op->waiters++;
		uv_queue_work(op->ctx->loop, &j->work, job_run, job_done);
	}
}

void ruda__collective_copied(struct ruda_waiter *base, int status)
{
	struct op_waiter *w = (struct op_waiter *)base;
	struct collective_op *op = w->op;
	op->waiters--;
	if (status != RUDA_OK)
		ruda__collective_fail(op, (ruda_status)status, "all-reduce: device %u failed",
				      op->parts[w->part].device);
	else if (op->ctx->collectives->closing)
		ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED, "rudad is shutting down");
	else if (++op->copied == op->n && !op->failed)
		reduce(op);
	free(w);
	ruda__collective_maybe_free(op);
}

/* A participant's src waited in `tmp` for the staging: copy it into its
 * slot now (a submission of its own on the participant's device). */
static void stage_tmp(struct collective_op *op, uint32_t i)
{
	struct part *p = &op->parts[i];
	struct ruda_device *d = op->ctx->devices[p->device];
	VkBuffer host = ruda__host_staging_buffer(op->staging, d);
	struct op_waiter *w = host ? calloc(1, sizeof(*w)) : NULL;
	if (!w) {
		ruda__collective_fail(op, RUDA_ERROR_OUT_OF_MEMORY, "all-reduce: out of memory");
		return;
	}
	/* the copy into tmp ran in an earlier submission of this queue */
	struct ruda_buffer *tmp = p->tmp;
	struct ruda_copy c = {
		.src = tmp->vk,
		.dst = host,
		.region = {.srcOffset = 0, .dstOffset = (uint64_t)i * op->size, .size = op->size},
		.hold = {&op->staging->ref, &tmp->ref},
		.after_transfer = 1,
	};
	w->base.done = ruda__collective_copied;
	w->op = op;
	w->part = i;
	op->waiters++;
	p->tmp = NULL; /* the submission holds it (its waiter may free `op`) */
	int rc = ruda__copy_submit(d, &c, &w->base, NULL);
	if (rc == -EAGAIN || rc == -ENOMEM) {
		p->tmp = tmp;
		op->waiters--;
		free(w);
		ruda__collective_fail(op, RUDA_ERROR_OUT_OF_MEMORY, "all-reduce: out of memory");
		return;
	}
	ruda__buffer_put(tmp);
}

void ruda__collective_tmp_copied(struct ruda_waiter *base, int status)
{
	struct op_waiter *w = (struct op_waiter *)base;
	struct collective_op *op = w->op;
	op->waiters--;
	if (status != RUDA_OK)
		ruda__collective_fail(op, (ruda_status)status, "all-reduce: device %u failed",
				      op->parts[w->part].device);
	else if (op->ctx->collectives->closing)
		ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED, "rudad is shutting down");
	op->parts[w->part].tmp_ready = 1;
	if (!op->failed && op->peer)
		ruda__collective_peer_ready(op);
	else if (!op->failed && op->ready)
		stage_tmp(op, w->part);
	free(w);
	ruda__collective_maybe_free(op);
}

void ruda__collective_staging_made(struct ruda_host_staging *st, void *data)
{
	struct collective_op *op = data;
	op->waiters--;
	op->ready = 1;
	op->staging = st;
	if (!st)
		ruda__collective_fail(op, RUDA_ERROR_OUT_OF_MEMORY,
				      "all-reduce: no host memory for %u x %llu bytes",
				      op->n, (unsigned long long)op->size);
	else if (op->ctx->collectives->closing)
		ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED, "rudad is shutting down");
	for (uint32_t i = 0; i < op->n && !op->failed; i++)
		if (op->parts[i].tmp && op->parts[i].tmp_ready)
			stage_tmp(op, i);
	ruda__collective_maybe_free(op);
}
