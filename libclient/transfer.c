#include "transfer.h"

#include <sched.h>
#include <time.h>

/* Yield (no sleep) this long before sleeping in steps of SLEEP_NS: a chunk's
 * DMA on a GPU is ~0.1-0.3 ms, on lavapipe a few ms. */
#define YIELD_NS (30u * 1000u)
#define SLEEP_NS (25u * 1000u)

uint64_t ruda__transfer_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int reached(struct ruda_arena_header *h, uint64_t request)
{
	return atomic_load_explicit(&h->completed_request, memory_order_acquire) >= request;
}

int ruda__transfer_wait_progress(struct ruda_arena_header *h, uint64_t request,
				 uint64_t deadline_ns)
{
	uint64_t start = ruda__transfer_now_ns();
	for (unsigned i = 0;; i++) {
		if (reached(h, request))
			return 1;
		uint64_t now = ruda__transfer_now_ns();
		if (now >= deadline_ns)
			return reached(h, request);
		if (now - start < YIELD_NS) {
			sched_yield();
		} else {
			struct timespec ts = {.tv_nsec = SLEEP_NS};
			nanosleep(&ts, NULL);
		}
	}
}
