/*
 * The client's allocator over the session arena's data space: a ring of
 * regions handed out in order and freed in order. An upload region is free
 * once the daemon's published progress passes the request that used it; a
 * download region once the client has copied the bytes out.
 */
#ifndef RUDA_ARENA_RING_H
#define RUDA_ARENA_RING_H

#include <stddef.h>
#include <stdint.h>

struct ruda_arena_ring {
	uint64_t capacity; /* bytes of data space */
	uint64_t head, tail; /* monotonic byte positions */
	struct ruda_arena_region {
		uint64_t end;     /* monotonic position after the region */
		uint64_t request; /* upload: freed when published; 0 = not yet sent */
		int client_owned; /* download: freed by ruda__arena_ring_release */
		int released;
	} *regions;            /* a FIFO of outstanding regions */
	size_t first, count, cap;
};

int ruda__arena_ring_init(struct ruda_arena_ring *r, uint64_t capacity);
void ruda__arena_ring_finish(struct ruda_arena_ring *r);
/*
 * Take `size` bytes; their offset in the data space goes to *offset and the
 * region's id to *region. -EAGAIN when the ring is full for now, -E2BIG
 * when size exceeds what the ring can ever hold, -ENOMEM.
 */
int ruda__arena_ring_alloc(struct ruda_arena_ring *r, uint64_t size, int client_owned,
			  uint64_t *offset, uint64_t *region);
/* The upload in `region` was sent as request `request`. */
void ruda__arena_ring_set_request(struct ruda_arena_ring *r, uint64_t region, uint64_t request);
/* The download in `region` has been copied out. */
void ruda__arena_ring_release(struct ruda_arena_ring *r, uint64_t region);
/* Free regions in order up to the daemon's published `completed` request. */
void ruda__arena_ring_reclaim(struct ruda_arena_ring *r, uint64_t completed);
/* Whether a download region is still held by a reader. */
int ruda__arena_ring_has_held(const struct ruda_arena_ring *r);

/* The oldest region's request when it is an upload already sent (what
 * must complete before the ring has room again), else 0. */
uint64_t ruda__arena_ring_oldest_request(const struct ruda_arena_ring *r);

/* The largest size worth asking for in one piece: a quarter, in whole
 * regions, so that four such chunks are in flight at once. */
static inline uint64_t ruda__arena_ring_chunk(const struct ruda_arena_ring *r)
{
	return r->capacity / 4 / 64 * 64;
}

#endif
