/*
 * Fast sync: once rudad has submitted the work a sync waits for, the
 * session's arena says which timeline value ends it, and the device's
 * progress page (mapped read-only) says how far each queue has got. A
 * client that watches both sees its work end without waiting for the reply
 * to come back through rudad's loop; the reply, which still comes, is then
 * skipped. Whenever the page cannot answer (an error to report, a failed
 * device, work that runs long) the reply decides, as before.
 */
#ifndef RUDA_SYNC_FAST_H
#define RUDA_SYNC_FAST_H

#include <stdint.h>

#include "../proto/arena_header.h"
#include "../proto/progress_page.h"

struct ruda_sync_fast {
	const struct ruda_progress_page *page; /* NULL: every sync waits for its reply */
	uint64_t spin_ns; /* how long a sync watches before it blocks */
};

/* Map the progress page passed at Hello (the fd stays the caller's). The
 * environment's RUDA_SYNC_SPIN_US sets the watch (0 turns it off).
 * Returns 0, or -1 when the page is unusable (the client works without). */
int ruda__sync_fast_init(struct ruda_sync_fast *f, int fd);
void ruda__sync_fast_finish(struct ruda_sync_fast *f);

/* Watch request `request` on stream `stream`: 1 once the page shows its
 * work ended, 0 when the reply must say (no answer within the watch, or one
 * the page cannot give). The watch is the spin time plus what `bytes` of
 * host-device transfers take (0 when it waits for none). */
int ruda__sync_fast_wait(const struct ruda_sync_fast *f, struct ruda_arena_header *arena,
			 uint32_t stream, uint64_t request, uint64_t bytes);

#endif
