/*
 * What the files of device/ that together make struct ruda_device share:
 * device.c (opening and closing it), completion.c (the completion thread,
 * the watchdog, failure), submission.c (recording, submitting, completing)
 * and timestamps.c. Nothing outside device/ includes it.
 */
#ifndef RUDA_DEVICE_INTERNAL_H
#define RUDA_DEVICE_INTERNAL_H

#include <stdint.h>
#include <uv.h>

/* Forward only: the files that include this include device.h themselves,
 * so this header is below device.h, not beside it. */
struct ruda_device;

/* completion.c: start the completion thread (and what it waits on);
 * 0, or -ENODEV with nothing left to undo. */
int ruda__device_completion_start(struct ruda_device *device);
/* Stop and join it, then publish what the driver says has completed;
 * nothing if it is stopped already. */
void ruda__device_completion_stop(struct ruda_device *device);
/* Wake the thread from a wait on other queues (the loop submitted to an
 * idle queue, or asks it to stop); nothing with one queue. */
void ruda__device_completion_wake(struct ruda_device *device);
/* Tear down what _start made (once stopped). */
void ruda__device_completion_finish(struct ruda_device *device);
/* The loop's side: the async the thread wakes, the watchdog. */
void ruda__device_on_async(uv_async_t *async);
void ruda__device_on_watchdog(uv_timer_t *timer);
/* How often the loop looks for work that stopped making progress. */
#define RUDA_WATCHDOG_PERIOD_MS 100u

/* submission.c: free what failed submissions hold and the spare ones (the
 * device is idle; their command buffers go with the pool). */
void ruda__device_free_submissions(struct ruda_device *device);

/* timestamps.c: the query pool, when the queue family has timestamps
 * (`valid_bits`) and the device a period; without, GPU time is counted
 * from submission to completion. */
void ruda__device_timestamps_init(struct ruda_device *device, uint32_t valid_bits);
void ruda__device_timestamps_finish(struct ruda_device *device);

#endif
