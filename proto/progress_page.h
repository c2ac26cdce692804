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

#endif
