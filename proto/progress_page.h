/*
 * A device's progress page: one page of shared memory per device, written
 * by rudad's completion threads and mapped read-only by every client of the
 * device. It says how far each of the device's queues has got, so that a
 * client whose sync rudad has already submitted can see it complete without
 * waiting for the reply to travel back through rudad's loop (see
 * docs/design.md, "Fast sync"). The reply still comes and stays the word of
 * record whenever the page cannot answer.
 */
#ifndef RUDA_PROGRESS_PAGE_H
#define RUDA_PROGRESS_PAGE_H

#include <stdatomic.h>
#include <stdint.h>

#define RUDA_PROGRESS_MAGIC 0x50445552u /* "RUDP" */
#define RUDA_PROGRESS_VERSION 1u
#define RUDA_PROGRESS_PAGE_SIZE 4096u
#define RUDA_PROGRESS_QUEUES 64u

struct ruda_progress_page {
	uint32_t magic;
	uint32_t version;
	/* nonzero once the device has failed (lost, or work past the time
	 * limit): from then on only replies say how work ended; set before any
	 * later `completed` value is stored */
	_Atomic uint32_t failed;
	uint32_t queues; /* entries of `completed` in use */
	/* the timeline value each queue has completed */
	_Atomic uint64_t completed[RUDA_PROGRESS_QUEUES];
};

_Static_assert(sizeof(struct ruda_progress_page) <= RUDA_PROGRESS_PAGE_SIZE,
	       "the progress page is one page");

/* How long the watchers of this page (a client's sync watch, rudad's
 * completion thread) keep watching for host-device transfers to end: what
 * they take at a bus speed no link falls below (8 GB/s: PCIe 3 x8; the
 * H200 moves 50), the whole watch capped at RUDA_TRANSFER_WATCH_MAX_NS. On
 * the H200 a 64 MiB staging transfer (1.4 ms) was seen ~0.1 ms late by
 * watchers that had stopped at a fixed 200-300 us (docs/design.md, "Fast
 * sync"). */
#define RUDA_TRANSFER_WATCH_MAX_NS (20ull * 1000u * 1000u)
static inline uint64_t ruda_transfer_ns(uint64_t bytes)
{
	return (bytes / 1024u) * 128u; /* 128 ns a KiB: 8 GB/s */
}

#endif
