/*
 * The first page of a session's shared-memory arena, written by rudad and
 * read by the client. Everything after `RUDA_ARENA_DATA_OFFSET` is data
 * space that the client allocates from.
 */
#ifndef RUDA_ARENA_HEADER_H
#define RUDA_ARENA_HEADER_H

#include <stdatomic.h>
#include <stdint.h>

#define RUDA_ARENA_MAGIC 0x41445552u /* "RUDA" */
#define RUDA_ARENA_VERSION 2u
#define RUDA_ARENA_DATA_OFFSET 4096u
#define RUDA_ARENA_SYNC_SLOTS 64u
/* `value` of a sync the client must wait for the reply of (the stream
 * had an error to report, or the device had failed) */
#define RUDA_ARENA_SYNC_REPLY_ONLY UINT64_MAX

/* Where the last Sync request of a stream (in slot stream % SLOTS) stands,
 * once rudad has submitted the stream's work for it: done when queue
 * `queue` of the device's progress page has completed `value`. Written by
 * rudad's loop, read by the client; `seq` is odd while rudad writes. */
struct ruda_arena_sync {
	_Atomic uint32_t seq;
	_Atomic uint32_t stream;
	_Atomic uint32_t queue;
	uint32_t reserved;
	_Atomic uint64_t request;
	_Atomic uint64_t value;
};

struct ruda_arena_sync_entry {
	uint32_t stream, queue;
	uint64_t request, value;
};

struct ruda_arena_header {
	uint32_t magic;
	uint32_t version;
	/* Every request with an id up to this one has finished with its arena
	 * bytes (uploads copied, kernels read); the client may reuse them. */
	_Atomic uint64_t completed_request;
	uint64_t reserved;
	struct ruda_arena_sync sync[RUDA_ARENA_SYNC_SLOTS];
};

_Static_assert(sizeof(struct ruda_arena_header) <= RUDA_ARENA_DATA_OFFSET,
	       "the arena header fits before the data");

/* rudad: publish `e` in its stream's slot. */
static inline void ruda_arena_sync_write(struct ruda_arena_header *h,
					 const struct ruda_arena_sync_entry *e)
{
	struct ruda_arena_sync *slot = &h->sync[e->stream % RUDA_ARENA_SYNC_SLOTS];
	uint32_t seq = atomic_load_explicit(&slot->seq, memory_order_relaxed);
	atomic_store_explicit(&slot->seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&slot->stream, e->stream, memory_order_relaxed);
	atomic_store_explicit(&slot->queue, e->queue, memory_order_relaxed);
	atomic_store_explicit(&slot->request, e->request, memory_order_relaxed);
	atomic_store_explicit(&slot->value, e->value, memory_order_relaxed);
	atomic_store_explicit(&slot->seq, seq + 2, memory_order_release);
}

/* The client: read stream `stream`'s slot into *e; 0 when rudad was
 * writing it (try again). */
static inline int ruda_arena_sync_read(struct ruda_arena_header *h, uint32_t stream,
				       struct ruda_arena_sync_entry *e)
{
	struct ruda_arena_sync *slot = &h->sync[stream % RUDA_ARENA_SYNC_SLOTS];
	uint32_t seq = atomic_load_explicit(&slot->seq, memory_order_acquire);
	if (seq & 1)
		return 0;
	e->stream = atomic_load_explicit(&slot->stream, memory_order_relaxed);
	e->queue = atomic_load_explicit(&slot->queue, memory_order_relaxed);
	e->request = atomic_load_explicit(&slot->request, memory_order_relaxed);
	e->value = atomic_load_explicit(&slot->value, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	return atomic_load_explicit(&slot->seq, memory_order_relaxed) == seq;
}

#endif
