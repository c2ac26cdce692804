/*
 * The plain path's bulk transfers (ruda_client_create/write/read_one from
 * the caller's own memory): the pieces client.c's chunked, pipelined
 * upload and download share. The caller's bytes cross the session arena in
 * chunks; while the device moves chunk n the client copies chunk n+1, so a
 * transfer takes the slower of the two, not their sum. When the arena is
 * full the client waits for its oldest chunk alone (the arena header's
 * published progress), not for everything in flight (a Fence), which
 * would leave the device idle while the next chunk is copied.
 */
#ifndef RUDA_TRANSFER_H
#define RUDA_TRANSFER_H

#include <stdint.h>

#include "../proto/arena_header.h"

/* What the plain path's transfers spent where, since the client connected:
 * kept by client.c, read by the bench (tests/bench/transfers.c) to split a
 * transfer's time by phase. */
struct ruda_transfer_counters {
	uint64_t upload_bytes, download_bytes;
	uint64_t chunks;        /* arena chunks moved, both ways */
	uint64_t copy_ns;       /* the client's copies into and out of the arena */
	uint64_t wait_ns;       /* waiting for arena space or a read's reply */
	uint64_t progress_waits; /* waits the published progress answered */
	uint64_t fence_waits;   /* waits that fell back to a Fence round trip */
};

uint64_t ruda__transfer_now_ns(void);

/*
 * Watch the arena header until rudad has published `request` as done with
 * its arena bytes: 1 once it has, 0 when `deadline_ns` (CLOCK_MONOTONIC)
 * passes first (the caller then blocks on a round trip, which also tells
 * it when rudad is gone). Yields at first, then sleeps in short steps: the
 * client has nothing else to do, and on a CPU device the driver's copy
 * needs the cores.
 */
int ruda__transfer_wait_progress(struct ruda_arena_header *h, uint64_t request,
				 uint64_t deadline_ns);

#endif
