/*
 * A device's progress page (proto/progress_page.h): a sealed one-page memfd
 * that rudad writes and its clients map read-only.
 */
#ifndef RUDA_DAEMON_PROGRESS_PAGE_H
#define RUDA_DAEMON_PROGRESS_PAGE_H

#include <stdint.h>

#include "../../proto/progress_page.h"

struct ruda_progress {
	int fd; /* -1: none (the fast path is off for this device's clients) */
	struct ruda_progress_page *page;
};

/* Make the page for a device with `queues` queues; on failure the device
 * works without one. */
void ruda__progress_init(struct ruda_progress *p, uint32_t queues);
void ruda__progress_finish(struct ruda_progress *p);

/* A descriptor to pass to a client (the caller's), or a negative errno
 * (-ENOENT: the device has no page). */
int ruda__progress_dup(const struct ruda_progress *p);

/* Queue `queue` has completed timeline value `value` (completion thread). */
static inline void ruda__progress_completed(struct ruda_progress *p, uint32_t queue,
					    uint64_t value)
{
	if (p->page && queue < RUDA_PROGRESS_QUEUES)
		atomic_store_explicit(&p->page->completed[queue], value, memory_order_release);
}

/* The device failed: clients must wait for replies from now on. */
static inline void ruda__progress_failed(struct ruda_progress *p)
{
	if (p->page)
		atomic_store_explicit(&p->page->failed, 1, memory_order_seq_cst);
}

#endif
