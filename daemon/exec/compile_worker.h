/*
 * The compile worker: a child process (rudad run again with
 * --compile-worker) that compiles each new kernel first, so that a "compile
 * bomb" (a small module the driver's compiler spends minutes or gigabytes
 * on: forced unrolling, huge switches) costs a process rudad can kill, not
 * its own threads and memory. The daemon compiles a kernel itself only once
 * the worker has, within compile_timeout_ms and compile_memory_max.
 *
 * One worker per logical device, started at the first compilation, serving
 * one kernel at a time; a worker past a bound is killed (SIGKILL), the
 * kernel refused with RUDA_ERROR_INVALID_KERNEL, the verdict remembered (a
 * retry of the same key is refused at once) and a fresh worker started for
 * the next kernel. Jobs from different owners (sessions) take turns, so one
 * client's bombs do not queue ahead of everyone else's kernels.
 *
 * Everything here runs on the loop thread; the worker's socket is read and
 * written through libuv, never blocking.
 */
#ifndef RUDA_COMPILE_WORKER_H
#define RUDA_COMPILE_WORKER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "../../proto/sha256.h"
#include "exec/pipeline_build.h"

/* The hidden first argument that makes rudad a compile worker. */
#define RUDA_COMPILE_WORKER_ARG "--compile-worker"

/* Verdicts kept per device: keys refused at once when asked again. */
#define RUDA_COMPILE_VERDICTS 64u

enum ruda_compile_result {
	RUDA_COMPILE_PASSED,      /* the worker compiled it (or the driver refused it) in bounds */
	RUDA_COMPILE_REFUSED,     /* past a bound, or the worker died: status and message set */
	RUDA_COMPILE_UNAVAILABLE, /* no worker: compile in-process as before */
};

struct ruda_compile_job;
typedef void ruda_compile_done_fn(struct ruda_compile_job *job, enum ruda_compile_result result,
				  ruda_status status, const char *message);

/* What the worker compiles: the fields of daemon/pipeline.c's key. */
struct ruda_compile_request {
	struct ruda_pipeline_source kernel; /* borrowed until done */
	uint64_t owner; /* who asked (a session id): owners take turns */
};

/* Embedded in what is compiled; owned by the pool from submit to done. */
struct ruda_compile_job {
	struct ruda_compile_job *next;
	uint64_t owner;
	ruda_compile_done_fn *done;
	void *data;
	uint8_t *message; /* the request as the worker reads it */
	size_t message_size;
	uint8_t digest[RUDA_SHA256_SIZE]; /* of the key: the verdict's name */
	uint64_t start_ns; /* when the worker got it */
};

/* Settings from rudad.conf, for every pool (SIGHUP changes them). */
struct ruda_compile_settings {
	bool enabled;        /* false (unit tests, fuzzers): every job UNAVAILABLE */
	char exe[4096];      /* what to run as the worker: rudad itself */
	uint32_t timeout_ms; /* 0: no deadline */
	uint64_t memory_max; /* bytes of RSS; 0: no cap */
};

void ruda__compile_worker_configure(const struct ruda_compile_settings *settings);
/* main.c: set exe to rudad's own path and enable the worker. */
void ruda__compile_worker_enable(uint32_t timeout_ms, uint64_t memory_max);
/* SIGHUP: new bounds for the next jobs. */
void ruda__compile_worker_set_bounds(uint32_t timeout_ms, uint64_t memory_max);

struct ruda_compile_worker;

struct ruda_compile_pool {
	uv_loop_t *loop;
	uint32_t physical_index; /* the daemon's Vulkan numbering, a hint */
	uint8_t device_uuid[VK_UUID_SIZE];
	struct ruda_compile_worker *worker; /* NULL until needed */
	struct ruda_compile_job *queue;     /* FIFO, waiting for the worker */
	uint64_t last_owner;
	bool broken; /* the worker could not start: everything compiles in-process */
	uint8_t verdicts[RUDA_COMPILE_VERDICTS][RUDA_SHA256_SIZE];
	ruda_status verdict_status[RUDA_COMPILE_VERDICTS];
	char verdict_message[RUDA_COMPILE_VERDICTS][160];
	uint32_t nverdicts, next_verdict;
	uint64_t killed; /* workers killed for a bound */
};

void ruda__compile_pool_init(struct ruda_compile_pool *pool, uv_loop_t *loop,
			     uint32_t physical_index, const uint8_t device_uuid[VK_UUID_SIZE]);
/* Kill the worker (its process is reaped on the loop later); jobs still
 * queued are told UNAVAILABLE. */
void ruda__compile_pool_finish(struct ruda_compile_pool *pool);

/* Digest of a request: what verdicts are kept by. */
void ruda__compile_request_digest(const struct ruda_compile_request *req,
				  uint8_t out[RUDA_SHA256_SIZE]);

/* A verdict for this digest: copies the message into `message` and returns
 * its status; RUDA_OK when there is none. */
ruda_status ruda__compile_pool_verdict(const struct ruda_compile_pool *pool,
				       const uint8_t digest[RUDA_SHA256_SIZE], char *message,
				       size_t len);

/* Queue `req` for the worker (job->digest filled by the caller); `done`
 * runs later on the loop, never from inside this call. Returns 0; -ENODEV
 * when there is no worker (disabled, or it cannot start): compile
 * in-process; -ENOMEM. Nothing is queued on an error. */
int ruda__compile_pool_submit(struct ruda_compile_pool *pool, struct ruda_compile_job *job,
			      const struct ruda_compile_request *req, ruda_compile_done_fn *done,
			      void *data);

/* rudad --compile-worker PHYSICAL UUID: serve fd 3 until it closes. */
int ruda__compile_worker_main(int argc, char **argv);

#endif
