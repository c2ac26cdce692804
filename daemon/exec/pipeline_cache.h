/*
 * The device's VkPipelineCache on disk, so kernels compiled before a restart
 * are cheap to compile again. One file per device in the cache directory,
 * named by vendor, device, pipeline-cache UUID and driver version, with a
 * header of its own (magic, identity, size, SHA-256) checked on load, and
 * written atomically (temporary file, fsync, rename). A bad file is logged
 * and ignored: rudad starts anyway.
 */
#ifndef RUDA_PIPELINE_CACHE_H
#define RUDA_PIPELINE_CACHE_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct ruda_device;
struct ruda_pipeline_registry;

/* The file for `device` in `dir`; 0 or -ENAMETOOLONG. */
int ruda__pipeline_cache_path(const struct ruda_device *device, const char *dir, char *buf,
			      size_t len);
/* Make the file's contents the device's cache. Returns the bytes loaded,
 * 0 when there is no usable file (the reason is logged). Blocking: call at
 * start-up, before any pipeline is compiled. */
int64_t ruda__pipeline_cache_load(struct ruda_device *device, const char *dir);
/* Write the device's cache to its file. Blocking: call from the thread
 * pool or at shutdown. Returns bytes written or a negative errno. */
int64_t ruda__pipeline_cache_save(struct ruda_device *device, const char *dir);

/* Saves a device's cache periodically (in the thread pool, when new
 * pipelines were compiled since the last save) and at the end. */
struct ruda_pipeline_cache_saver {
	struct ruda_device *device;             /* borrowed */
	struct ruda_pipeline_registry *registry; /* borrowed */
	char *dir;                              /* owned */
	uv_timer_t timer;
	uv_work_t work;
	int saving;
	int64_t result;
	uint64_t saved_compiled; /* registry->compiled at the last save */
};

/* Points the drivers' own shader caches (Mesa, NVIDIA) into `dir` unless
 * the environment already chose; call before the Vulkan instance exists. */
void ruda__pipeline_cache_setup_driver_caches(const char *dir);

int ruda__pipeline_cache_saver_init(struct ruda_pipeline_cache_saver *saver, uv_loop_t *loop,
				    struct ruda_device *device,
				    struct ruda_pipeline_registry *registry, const char *dir,
				    uint64_t period_ms);
/* Stops the timer and saves once more (blocking). */
void ruda__pipeline_cache_saver_finish(struct ruda_pipeline_cache_saver *saver);

#endif
