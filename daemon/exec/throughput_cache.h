/*
 * The throughputs measured on one device (ErasedClient::measure_throughput):
 * a key names a measurement, the first value recorded for it stays, and
 * every client of the device shares them. Kept on disk beside the pipeline
 * cache (throughputs-<vendor>-<device>-<uuid>-<driver>.bin in the cache
 * directory), so a restarted rudad does not measure again: loaded at
 * start-up, saved in the thread pool a second after a change, and at the
 * end. A bad file is logged and ignored.
 */
#ifndef RUDA_THROUGHPUT_CACHE_H
#define RUDA_THROUGHPUT_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/handle_table.h"

struct ruda_device;

/* Bytes of a key, at most; measurements per device, at most. */
#define RUDA_THROUGHPUT_MAX_KEY 256u
#define RUDA_THROUGHPUT_MAX 4096u

struct ruda_throughput_cache;

/* A cache for `device`; `dir` NULL keeps it in memory only. Loads the
 * file (blocking: call at start-up). NULL when out of memory. */
struct ruda_throughput_cache *ruda__throughput_cache_new(uv_loop_t *loop,
							 const struct ruda_device *device,
							 const char *dir);
/* Save what changed (blocking) and free it. NULL is fine. */
void ruda__throughput_cache_free(struct ruda_throughput_cache *cache);

/* 0 and *value, -ENOENT when nothing is recorded, -EINVAL for a bad key
 * (empty or over RUDA_THROUGHPUT_MAX_KEY bytes). */
int ruda__throughput_cache_get(const struct ruda_throughput_cache *cache, const char *key,
			       double *value);
/* Record `value` for `key` unless one is recorded already (then 0 too).
 * -EINVAL for a bad key or a value that is not finite and positive,
 * -ENOSPC when RUDA_THROUGHPUT_MAX are recorded, -ENOMEM. */
int ruda__throughput_cache_set(struct ruda_throughput_cache *cache, const char *key,
			       double value);
/* Measurements recorded. */
size_t ruda__throughput_cache_count(const struct ruda_throughput_cache *cache);

/* The file for `device` in `dir`; 0 or -ENAMETOOLONG. */
int ruda__throughput_cache_path(const struct ruda_device *device, const char *dir, char *buf,
				size_t len);

#endif
