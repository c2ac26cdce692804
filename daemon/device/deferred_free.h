/*
 * Frees that are slow in the driver or the kernel (vkFreeMemory of a large
 * page: 162 ms for 1 GiB on lavapipe; unmapping and unpinning an arena)
 * run in libuv's thread pool instead of on the loop. The caller has already
 * taken the object out of every list and counter, and no work in flight
 * uses it any more, so only the release itself is left. Large allocations
 * run there too (ruda__deferred_run: vkAllocateMemory of 1 GiB takes ~25 ms
 * on the H200). A device waits for its jobs before it goes
 * (ruda__deferred_free_finish).
 */
#ifndef RUDA_DEFERRED_FREE_H
#define RUDA_DEFERRED_FREE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

struct ruda_deferred_free {
	uv_loop_t *loop; /* borrowed */
	pthread_mutex_t lock;
	pthread_cond_t idle;
	unsigned pending; /* guarded by lock: queued and not yet run */
};

void ruda__deferred_free_init(struct ruda_deferred_free *f, uv_loop_t *loop);
/* Waits for every queued free (and job) to have run. */
void ruda__deferred_free_wait(struct ruda_deferred_free *f);
/* Waits until `*count`, which the queued frees lower as they run, is 0:
 * not for the other jobs (an allocation under way). */
void ruda__deferred_free_wait_zero(struct ruda_deferred_free *f, _Atomic uint64_t *count);
/* Waits as ruda__deferred_free_wait, then tears `f` down. */
void ruda__deferred_free_finish(struct ruda_deferred_free *f);

/* Run `release(arg)` in the thread pool (it owns `arg` and frees it); at
 * once, on the loop, if it cannot be queued. Loop thread. */
void ruda__deferred_free_run(struct ruda_deferred_free *f, void (*release)(void *arg),
			     void *arg);
/* Run `work(arg)` in the thread pool, then `then(arg)` on the loop (which
 * owns `arg` from then on). -1, with nothing run, if it cannot be queued.
 * Loop thread. */
int ruda__deferred_run(struct ruda_deferred_free *f, void (*work)(void *arg),
		       void (*then)(void *arg), void *arg);

#endif
