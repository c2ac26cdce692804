/*
 * An all-reduce whose members are all logical devices of one physical
 * device (the same GPU opened several times), by device copies and a
 * kernel instead of host staging. Member 0 (the lowest device) reduces.
 * Each member's src is first copied on its stream into a buffer of the
 * daemon's on its device (`tmp`, as the host path does while its staging
 * is made: later work on the stream cannot change it), or, for a call of
 * one chunk, straight into the member's window; member 0's is the
 * accumulator. Then, a chunk at a time, through a window per other member
 * (memory/peer_window.h, from member j's device into member 0's, two
 * chunks):
 *
 *   in       member j's device copies its chunk into its window's slot
 *   combine  once every in-copy is seen done (the VkDevices share no
 *            semaphore: the loop hears each), member 0's device runs
 *            acc op= window_j for j = 1, 2, ... in order (exec/combine.h),
 *            then copies the result into its dst and back into each slot
 *   out      member j's device copies the slot into its dst
 *
 * The two slots alternate, so the in-copies of chunk k+1 run while chunk k
 * is combined; a slot takes its next chunk once its out-copies are done.
 * Every copy and combine is a submission of its own on queue 0 of its
 * device, so a member's writes land in order and the last one's
 * completion settles it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "common/log.h"
#include "device/device.h"
#include "exec/combine.h"
#include "exec/copy.h"
#include "exec/copy_kernel.h"
#include "exec/peer_copy.h"
#include "exec/stream.h"
#include "memory/buffer.h"
#include "memory/peer_window.h"
#include "requests/collective_op.h"
#include "requests/session.h"

enum phase { IDLE, IN, COMBINE, OUT };

struct peer_reduce;

struct peer_waiter {
	struct ruda_waiter base;
	struct peer_reduce *pr;
	uint32_t slot, member;
};

struct peer_slot {
	enum phase phase;
	uint64_t chunk;        /* index of the chunk it carries */
	uint32_t pending;      /* submissions of the phase not yet done */
	uint64_t since_ns;     /* when the phase began (uv_hrtime) */
	struct peer_waiter *w; /* one per member; member 0's is the combine's */
};

struct peer_reduce {
	struct collective_op *op; /* back pointer */
	/* [j]: from member j's device into member 0's (owned); [0] NULL */
	struct ruda_peer_window **windows;
	uint64_t chunk, nchunks, next; /* next: the next chunk to start */
	uint32_t nslots;
	struct peer_slot slots[2];
	/* for the debug line at the end: when the plan was made, the sources
	 * were all in place and the last phase ended; each phase's time
	 * summed over the chunks (uv_hrtime, ns) */
	uint64_t plan_ns, ready_ns, end_ns, phase_ns[4];
};

static struct ruda_collectives *registry_of(struct collective_op *op)
{
	return op->ctx->collectives;
}

/* ---- the plan ---------------------------------------------------------- */

/* Whether the call goes by device copies; why not (static text). */
static const char *refusal(const struct collective_op *op, struct ruda_device **devices)
{
	const char *why = NULL;
	if (op->n < 2)
		return "one device";
	if (op->ctx->peer_reduce == RUDA_PEER_REDUCE_OFF)
		return "peer_reduce = off";
	if (!ruda__combine_supports(op->elem, op->reduce))
		return "f16 and means reduce on the host";
	if (op->ctx->peer_reduce == RUDA_PEER_REDUCE_AUTO &&
	    devices[0]->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
		return "a CPU device: its copies are memcpys; peer_reduce = on to use them";
	for (uint32_t j = 1; j < op->n; j++)
		if (!ruda__peer_possible(devices[j], devices[0], &why))
			return why;
	struct ruda_combine *kernel = ruda__combine_get(devices[0], &why);
	if (!kernel)
		return why;
	/* the host keeps f32 subnormals: a device that may not is the host's
	 * for sums, maxima and minima (combine.comp) but not for products,
	 * those only when asked to */
	if (op->elem == RUDA_ELEM_F32 && op->reduce == RUDA_REDUCE_PROD &&
	    !kernel->keeps_subnormals && op->ctx->peer_reduce != RUDA_PEER_REDUCE_ON)
		return "the device may flush f32 subnormals (no shaderDenormPreserveFloat32): "
		       "f32 products reduce on the host";
	return NULL;
}

static void drop_windows(struct peer_reduce *pr)
{
	for (uint32_t j = 1; j < pr->op->n; j++)
		if (pr->windows[j]) {
			ruda__peer_window_put(pr->windows[j]);
			pr->windows[j] = NULL;
		}
}

/* Where a completed call's time went, from its plan (the first member's
 * request) to its last phase's end. */
static void log_phases(const struct peer_reduce *pr)
{
	if (pr->op->failed || !pr->end_ns)
		return;
	log_debug("all-reduce of %llu B over %u devices by device copies: sources in place "
		  "%.3f ms, done %.3f ms after the first request; %llu chunks, phases summed: "
		  "in %.3f ms, combine %.3f ms, out %.3f ms",
		  (unsigned long long)pr->op->size, pr->op->n,
		  (double)(pr->ready_ns - pr->plan_ns) / 1e6, (double)(pr->end_ns - pr->plan_ns) / 1e6,
		  (unsigned long long)pr->nchunks, (double)pr->phase_ns[IN] / 1e6,
		  (double)pr->phase_ns[COMBINE] / 1e6, (double)pr->phase_ns[OUT] / 1e6);
}

static void peer_free(struct peer_reduce *pr)
{
	log_phases(pr);
	drop_windows(pr);
	for (uint32_t s = 0; s < 2; s++)
		free(pr->slots[s].w);
	free(pr->windows);
	free(pr);
}

int ruda__collective_peer_plan(struct collective_op *op, struct ruda_device **devices)
{
	const char *why = refusal(op, devices);
	if (why) {
		log_debug("all-reduce of %llu bytes over %u devices: through host staging (%s)",
			  (unsigned long long)op->size, op->n, why);
		return 0;
	}
	struct peer_reduce *pr = calloc(1, sizeof(*pr));
	if (pr) {
		pr->op = op;
		pr->plan_ns = uv_hrtime();
		pr->windows = calloc(op->n, sizeof(*pr->windows));
		for (uint32_t s = 0; s < 2; s++)
			pr->slots[s].w = calloc(op->n, sizeof(*pr->slots[s].w));
	}
	if (!pr || !pr->windows || !pr->slots[0].w || !pr->slots[1].w) {
		if (pr)
			peer_free(pr);
		log_debug("all-reduce of %llu bytes over %u devices: through host staging (out of "
			  "memory)", (unsigned long long)op->size, op->n);
		return 0;
	}
	/* one chunk of the call's size while its windows can be kept: each
	 * phase is then one submission per device, and the loop hears three
	 * rounds, not three per chunk (H100, 1 GiB f32 sum: 72.6 GB/s against
	 * 38.1 in 64 MiB chunks); past that, chunks as large as can be kept */
	uint64_t chunk = ruda__peer_reduce_chunk(op->size, op->n);
	for (;;) {
		pr->chunk = op->size <= chunk ? op->size : chunk;
		pr->nchunks = (op->size + pr->chunk - 1) / pr->chunk;
		pr->nslots = pr->nchunks > 1 ? 2 : 1;
		int err = 0;
		for (uint32_t j = 1; j < op->n && !err; j++)
			err = ruda__peer_window_get(devices[j], devices[0], pr->nslots * pr->chunk,
						    &pr->windows[j]);
		if (!err)
			break;
		drop_windows(pr);
		if (err == -ENOMEM && pr->chunk > ruda__peer_chunk()) {
			chunk = ruda__peer_chunk(); /* windows of two default chunks may fit */
			continue;
		}
		log_debug("all-reduce of %llu bytes over %u devices: through host staging (%s)",
			  (unsigned long long)op->size, op->n,
			  err == -ENOMEM ? "no memory for a shared window"
					 : "the driver refused to share memory");
		peer_free(pr);
		return 0;
	}
	for (uint32_t s = 0; s < 2; s++)
		for (uint32_t i = 0; i < op->n; i++)
			pr->slots[s].w[i] = (struct peer_waiter){.pr = pr, .slot = s, .member = i};
	op->peer = pr;
	log_debug("all-reduce of %llu bytes over %u devices: device copies through shared "
		  "windows, %llu-byte chunks", (unsigned long long)op->size, op->n,
		  (unsigned long long)pr->chunk);
	return 1;
}

VkBuffer ruda__collective_peer_direct(struct collective_op *op, uint32_t i,
				      struct ruda_ref **hold)
{
	struct peer_reduce *pr = op->peer;
	if (!i || pr->nchunks != 1 || !pr->windows[i])
		return VK_NULL_HANDLE;
	*hold = &pr->windows[i]->ref;
	return pr->windows[i]->from.buffer;
}

void ruda__collective_peer_drop(struct collective_op *op)
{
	if (!op->peer)
		return;
	drop_windows(op->peer);
	for (uint32_t i = 0; i < op->n; i++)
		if (op->parts[i].tmp) {
			ruda__buffer_put(op->parts[i].tmp);
			op->parts[i].tmp = NULL;
		}
}

void ruda__collective_peer_free(struct collective_op *op)
{
	if (op->peer)
		peer_free(op->peer);
	op->peer = NULL;
}

/* ---- the chunks ---------------------------------------------------------- */

static void landed(struct ruda_waiter *base, int status);

/* Member i's dst as it is now, or NULL with the member settled (its
 * session or buffer gone): as write_back in collective_phases.c. */
static struct ruda_buffer *dst_of(struct collective_op *op, uint32_t i)
{
	struct part *p = &op->parts[i];
	if (p->settled)
		return NULL;
	struct ruda_session *s = ruda__handle_table_get(&op->ctx->sessions, p->session);
	if (!s || s->state != RUDA_SESSION_READY) {
		ruda__collective_settle(op, i, RUDA_ERROR_DISCONNECTED,
					"all-reduce: the client has gone");
		return NULL;
	}
	struct ruda_session_buffer *b = ruda__handle_table_get(&s->buffers, p->dst);
	if (!b || !b->buffer || p->dst_offset > b->buffer->size ||
	    op->size > b->buffer->size - p->dst_offset) {
		ruda__collective_settle(op, i, RUDA_ERROR_INVALID_HANDLE,
					"all-reduce: the destination buffer was released");
		return NULL;
	}
	/* a new destination's zeros go first, not over the result */
	ruda__stream_fill_now(b->buffer);
	return b->buffer;
}

/* Count a submission of slot s before it is handed over (its waiter may
 * run at once, on a failed submission). */
static void count_one(struct peer_reduce *pr, uint32_t s)
{
	pr->slots[s].pending++;
	pr->op->waiters++;
	registry_of(pr->op)->peer_inflight++;
}

static void uncount_one(struct peer_reduce *pr, uint32_t s)
{
	pr->slots[s].pending--;
	pr->op->waiters--;
	registry_of(pr->op)->peer_inflight--;
}

/* A copy of slot s for `member` on device d; its waiter runs `landed`. */
static void submit_copy(struct peer_reduce *pr, uint32_t s, uint32_t member,
			struct ruda_device *d, const struct ruda_copy *c, uint64_t *value)
{
	struct peer_waiter *w = &pr->slots[s].w[member];
	w->base.done = landed;
	count_one(pr, s);
	int rc = d && c->src && c->dst ? ruda__copy_submit(d, c, &w->base, value) : -ENODEV;
	if (rc == -EAGAIN || rc == -ENOMEM || rc == -ENODEV) {
		/* the waiter never runs */
		uncount_one(pr, s);
		ruda__collective_fail(pr->op,
				      rc == -ENODEV ? RUDA_ERROR_DEVICE_LOST : RUDA_ERROR_OUT_OF_MEMORY,
				      "all-reduce: cannot record a copy on device %u%s",
				      pr->op->parts[member].device,
				      rc == -ENODEV ? ": a device of the call has gone" : "");
	}
}

static uint64_t chunk_len(const struct peer_reduce *pr, uint64_t k)
{
	uint64_t off = k * pr->chunk;
	return pr->op->size - off < pr->chunk ? pr->op->size - off : pr->chunk;
}

/* in: every other member's chunk into its window's slot. */
static void send_in(struct peer_reduce *pr, uint32_t s)
{
	struct collective_op *op = pr->op;
	struct peer_slot *slot = &pr->slots[s];
	slot->chunk = pr->next++;
	slot->phase = IN;
	uint64_t off = slot->chunk * pr->chunk, len = chunk_len(pr, slot->chunk);
	for (uint32_t j = 1; j < op->n && !op->failed; j++) {
		struct ruda_peer_window *win = pr->windows[j];
		struct ruda_buffer *tmp = op->parts[j].tmp;
		if (!tmp) {
			/* one chunk: its stream copied src into the slot */
			if (win->from.device)
				win->from.device->stats.peer_bytes_out += len;
			continue;
		}
		struct ruda_copy c = {
			.src = tmp->vk,
			.dst = win->from.buffer,
			.region = {.srcOffset = off, .dstOffset = s * pr->chunk, .size = len},
			.hold = {&win->ref, &tmp->ref},
			.after_transfer = 1, /* tmp's copy, the slot's last out-copy */
			.device_local = true,
		};
		if (win->from.device)
			win->from.device->stats.peer_bytes_out += len;
		submit_copy(pr, s, j, win->from.device, &c, NULL);
	}
}

/* combine: on member 0's device, acc op= each slot in member order, then
 * the result into member 0's dst and back into every slot. */
static void combine(struct peer_reduce *pr, uint32_t s)
{
	struct collective_op *op = pr->op;
	struct peer_slot *slot = &pr->slots[s];
	slot->phase = COMBINE;
	struct ruda_device *d = pr->windows[1]->to.device;
	for (uint32_t j = 1; j < op->n; j++)
		if (!pr->windows[j]->to.buffer || pr->windows[j]->to.device != d)
			d = NULL; /* a device went: the windows are empty */
	struct ruda_combine *kernel = d ? ruda__combine_get(d, NULL) : NULL;
	struct ruda_buffer *acc = op->parts[0].tmp;
	struct ruda_buffer *dst = dst_of(op, 0);
	struct ruda_submission *sub = kernel ? ruda__submission_begin(d) : NULL;
	int held = sub && ruda__submission_hold(sub, &acc->ref) == 0 &&
		   (!dst || ruda__submission_hold(sub, &dst->ref) == 0);
	for (uint32_t j = 1; held && j < op->n; j++)
		held = ruda__submission_hold(sub, &pr->windows[j]->ref) == 0;
	if (!held) {
		if (sub)
			ruda__submission_discard(sub, RUDA_ERROR_OUT_OF_MEMORY);
		ruda__collective_fail(op, d ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_DEVICE_LOST,
				      "all-reduce: cannot record the reduction on device %u",
				      op->parts[0].device);
		return;
	}
	uint64_t off = slot->chunk * pr->chunk, len = chunk_len(pr, slot->chunk);
	VkCommandBuffer cmd = sub->cmd;
	for (uint32_t j = 1; j < op->n; j++) {
		ruda__record_barrier(cmd); /* after the copies in, and the last combine */
		ruda__combine_record(d, kernel, cmd, acc->vk, off, pr->windows[j]->to.buffer,
				     s * pr->chunk, len, op->elem, op->reduce);
	}
	/* after the last combine; the copies, by kernel or not, all read acc
	 * and write where nothing else in this submission does */
	ruda__record_barrier(cmd);
	for (uint32_t j = 1; j < op->n; j++) {
		VkBufferCopy back = {.srcOffset = off, .dstOffset = s * pr->chunk, .size = len};
		ruda__device_copy_record(d, cmd, acc->vk, pr->windows[j]->to.buffer, &back, 1);
	}
	if (dst) {
		VkBufferCopy out = {.srcOffset = off, .dstOffset = op->parts[0].dst_offset + off,
				    .size = len};
		ruda__device_copy_record(d, cmd, acc->vk, dst->vk, &out, 1);
	}
	d->stats.peer_bytes_out += len * (op->n - 1);
	struct peer_waiter *w = &slot->w[0];
	w->base.done = landed;
	ruda__submission_add_waiter(sub, &w->base);
	count_one(pr, s);
	/* on failure the waiter has heard it */
	/* SyncBuffers on dst waits for the result (a submission of queue 0) */
	if (ruda__submission_submit(sub) == 0 && dst && sub->value > dst->use_value[0])
		dst->use_value[0] = sub->value;
}

/* out: every other member's device copies the result into its dst. */
static void send_out(struct peer_reduce *pr, uint32_t s)
{
	struct collective_op *op = pr->op;
	struct peer_slot *slot = &pr->slots[s];
	slot->phase = OUT;
	uint64_t off = slot->chunk * pr->chunk, len = chunk_len(pr, slot->chunk);
	for (uint32_t j = 1; j < op->n && !op->failed; j++) {
		struct ruda_buffer *dst = dst_of(op, j);
		if (!dst)
			continue;
		struct ruda_peer_window *win = pr->windows[j];
		struct ruda_copy c = {
			.src = win->from.buffer,
			.dst = dst->vk,
			.region = {.srcOffset = s * pr->chunk,
				   .dstOffset = op->parts[j].dst_offset + off,
				   .size = len},
			.hold = {&win->ref, &dst->ref},
			.device_local = true,
		};
		uint64_t value = 0;
		submit_copy(pr, s, j, win->from.device, &c, &value);
		if (value > dst->use_value[0]) /* a copy of queue 0 */
			dst->use_value[0] = value;
	}
}

/* Move slot s on while its phase is done: the phase's own count keeps it
 * from ending under the submissions' feet. */
static void advance(struct peer_reduce *pr, uint32_t s)
{
	struct collective_op *op = pr->op;
	struct peer_slot *slot = &pr->slots[s];
	while (!slot->pending) {
		uint64_t now = uv_hrtime();
		if (slot->phase != IDLE) {
			pr->phase_ns[slot->phase] += now - slot->since_ns;
			pr->end_ns = now;
		}
		slot->since_ns = now;
		if (!op->failed && registry_of(op)->closing)
			ruda__collective_fail(op, RUDA_ERROR_DISCONNECTED, "rudad is shutting down");
		if (op->failed) {
			slot->phase = IDLE;
			return;
		}
		enum phase was = slot->phase;
		if (was == COMBINE && slot->chunk == pr->nchunks - 1)
			ruda__collective_settle(op, 0, RUDA_OK, "");
		if (was == OUT || was == IDLE) {
			slot->phase = IDLE;
			if (pr->next == pr->nchunks)
				return;
		}
		slot->pending = 1;
		if (was == IN)
			combine(pr, s);
		else if (was == COMBINE)
			send_out(pr, s);
		else
			send_in(pr, s);
		slot->pending--;
	}
}

/* Any submission of a slot is done. */
static void landed(struct ruda_waiter *base, int status)
{
	struct peer_waiter *w = (struct peer_waiter *)base;
	struct peer_reduce *pr = w->pr;
	struct collective_op *op = pr->op;
	struct peer_slot *slot = &pr->slots[w->slot];
	registry_of(op)->peer_inflight--;
	slot->pending--;
	if (status != RUDA_OK && slot->phase == OUT) {
		/* one member's dst: only it hears */
		ruda__collective_settle(op, w->member, (ruda_status)status,
					"all-reduce: the device failed");
	} else if (status != RUDA_OK) {
		ruda__collective_fail(op, (ruda_status)status, "all-reduce: device %u failed",
				      op->parts[w->member].device);
	} else if (slot->phase == OUT && slot->chunk == pr->nchunks - 1) {
		ruda__collective_settle(op, w->member, RUDA_OK, "");
	}
	advance(pr, w->slot);
	op->waiters--; /* last: advance may have ended the call */
	ruda__collective_maybe_free(op);
}

void ruda__collective_peer_ready(struct collective_op *op)
{
	struct peer_reduce *pr = op->peer;
	for (uint32_t i = 0; i < op->n; i++)
		if (!op->parts[i].tmp_ready)
			return;
	pr->ready_ns = uv_hrtime();
	op->waiters++; /* ours, while the first chunks are handed over */
	for (uint32_t s = 0; s < pr->nslots && !op->failed; s++)
		advance(pr, s);
	op->waiters--; /* the caller frees `op` if it is done */
}
