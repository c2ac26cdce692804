#include "exec/peer_copy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include <ruda/status.h>

#include "common/log.h"
#include "device/device.h"
#include "exec/copy.h"
#include "memory/buffer.h"
#include "memory/peer_window.h"

#define DEFAULT_CHUNK (64ull << 20)
#define MIN_CHUNK 4096ull

static uint64_t chunk_from_env; /* 0: RUDA_PEER_CHUNK unset or invalid */
static bool chunk_read;

static void read_chunk(void)
{
	if (chunk_read)
		return;
	chunk_read = true;
	const char *v = getenv("RUDA_PEER_CHUNK");
	char *end = NULL;
	unsigned long long n = v && *v ? strtoull(v, &end, 10) : 0;
	if (n >= MIN_CHUNK && end && !*end && n % MIN_CHUNK == 0)
		chunk_from_env = n;
}

uint64_t ruda__peer_chunk(void)
{
	read_chunk();
	return chunk_from_env ? chunk_from_env : DEFAULT_CHUNK;
}

bool ruda__peer_chunk_forced(void)
{
	read_chunk();
	return chunk_from_env != 0;
}

uint64_t ruda__peer_reduce_chunk(uint64_t size, uint32_t members)
{
	uint64_t chunk = ruda__peer_chunk();
	if (chunk_from_env || size <= chunk || members < 2)
		return chunk;
	uint64_t windows = members - 1;
	if (ruda__peer_window_size(size) <= RUDA_PEER_CACHE_BYTES / windows)
		return size;
	/* two chunks a window, every window kept */
	uint64_t best = chunk;
	while (4 * best * windows <= RUDA_PEER_CACHE_BYTES)
		best *= 2;
	return best;
}

struct peer_copy;

/* One half of the window and the copies through it. */
struct slot {
	struct ruda_waiter waiter; /* first member: the waiter is the slot */
	struct peer_copy *copy;
	uint32_t index;
	uint64_t offset, len; /* the chunk it carries now */
};

struct peer_copy {
	struct ruda_peer_window *window; /* owned reference */
	struct ruda_buffer *src, *dst;   /* owned references */
	uint64_t dst_offset, size, chunk;
	int zero_tail;
	uint64_t zero_from;
	uint64_t issued; /* bytes handed to the source device so far */
	uint32_t inflight;
	int status;
	void (*done)(void *data, int status);
	void *data;
	struct slot slots[2];
};

static void fail(struct peer_copy *p, int status)
{
	if (p->status == RUDA_OK)
		p->status = status;
}

/* Drop one count of `inflight` (a copy done, or a callback's own hold
 * while it submits: a submission failing at once runs its waiter inside
 * ruda__copy_submit); the last one ends the transfer. */
static void release(struct peer_copy *p)
{
	if (--p->inflight)
		return;
	p->done(p->data, p->status);
	ruda__peer_window_put(p->window);
	ruda__buffer_put(p->src);
	ruda__buffer_put(p->dst);
	free(p);
}

static void landed(struct ruda_waiter *base, int status);
static void out_done(struct ruda_waiter *base, int status);

/* Submit `c` on `d` for slot `s`, its waiter running `then`; the caller
 * holds a count, so this never ends the transfer. */
static void submit(struct slot *s, struct ruda_device *d, const struct ruda_copy *c,
		   void (*then)(struct ruda_waiter *, int))
{
	struct peer_copy *p = s->copy;
	s->waiter.done = then;
	p->inflight++;
	int rc = d ? ruda__copy_submit(d, c, &s->waiter, NULL) : -EAGAIN;
	if (rc == -EAGAIN || rc == -ENOMEM) {
		/* the waiter never runs */
		p->inflight--;
		fail(p, RUDA_ERROR_OUT_OF_MEMORY);
	}
}

/* The next chunk, if any, into slot `s` on the source device. */
static void send_next(struct slot *s)
{
	struct peer_copy *p = s->copy;
	if (p->status != RUDA_OK || p->issued == p->size)
		return;
	s->offset = p->issued;
	s->len = p->size - p->issued < p->chunk ? p->size - p->issued : p->chunk;
	p->issued += s->len;
	struct ruda_copy c = {
		.src = p->src->vk,
		.dst = p->window->from.buffer,
		.region = {.srcOffset = s->offset, .dstOffset = s->index * p->chunk, .size = s->len},
		.hold = {&p->window->ref, &p->src->ref},
		.device_local = true,
	};
	submit(s, p->window->from.device, &c, out_done);
}

/* A chunk is in the window: the target device copies it out. */
static void out_done(struct ruda_waiter *base, int status)
{
	struct slot *s = (struct slot *)base;
	struct peer_copy *p = s->copy;
	if (status != RUDA_OK)
		fail(p, status);
	if (p->status == RUDA_OK) {
		int last = s->offset + s->len == p->size;
		struct ruda_copy c = {
			.src = p->window->to.buffer,
			.dst = p->dst->vk,
			.region = {.srcOffset = s->index * p->chunk,
				   .dstOffset = p->dst_offset + s->offset,
				   .size = s->len},
			.hold = {&p->window->ref, &p->dst->ref},
			.device_local = true,
			.zero = last && p->zero_tail,
			.zero_from = p->zero_from,
		};
		submit(s, p->window->to.device, &c, landed);
	}
	release(p);
}

/* A chunk is in dst: the slot is free for the next. */
static void landed(struct ruda_waiter *base, int status)
{
	struct slot *s = (struct slot *)base;
	struct peer_copy *p = s->copy;
	if (status != RUDA_OK)
		fail(p, status);
	send_next(s);
	release(p);
}

int ruda__peer_copy_start(struct ruda_peer_window *window, struct ruda_buffer *src,
			  struct ruda_buffer *dst, uint64_t dst_offset, uint64_t size,
			  int zero_tail, uint64_t zero_from,
			  void (*done)(void *data, int status), void *data)
{
	uint64_t chunk = window->size / 2 >= ruda__peer_chunk() ? ruda__peer_chunk()
								 : window->size / 2;
	if (size <= window->size && size > chunk)
		chunk = size; /* one chunk fills the window */
	if (!window->from.buffer || !window->to.buffer || !chunk)
		return -EAGAIN;
	struct peer_copy *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	*p = (struct peer_copy){
		.window = window,
		.src = src,
		.dst = dst,
		.dst_offset = dst_offset,
		.size = size,
		.chunk = chunk,
		.zero_tail = zero_tail,
		.zero_from = zero_from,
		.done = done,
		.data = data,
	};
	ruda_ref_get(&window->ref);
	ruda_ref_get(&src->ref);
	ruda_ref_get(&dst->ref);
	log_debug("device %u -> %u: %llu bytes by device copy, %llu-byte chunks",
		  window->from.device->index, window->to.device->index, (unsigned long long)size,
		  (unsigned long long)chunk);
	p->inflight = 1; /* this call's own, until everything is submitted */
	for (uint32_t i = 0; i < 2; i++) {
		p->slots[i].copy = p;
		p->slots[i].index = i;
	}
	/* an empty copy still lands once (the tail's zeros) */
	if (!size) {
		struct ruda_copy c = {
			.src = window->to.buffer,
			.dst = dst->vk,
			.hold = {&window->ref, &dst->ref},
			.zero = zero_tail,
			.zero_from = zero_from,
		};
		submit(&p->slots[0], window->to.device, &c, landed);
	} else {
		send_next(&p->slots[0]);
		send_next(&p->slots[1]);
	}
	if (p->inflight == 1) {
		/* nothing is in flight: say so, and nothing runs later */
		int status = p->status;
		ruda__peer_window_put(window);
		ruda__buffer_put(src);
		ruda__buffer_put(dst);
		free(p);
		return status == RUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
	}
	release(p); /* not the last: copies are in flight */
	return 0;
}
