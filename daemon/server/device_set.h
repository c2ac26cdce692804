/*
 * The devices rudad opens: every one its configuration names (default: all
 * physical devices, GPUs only when there are any), each with its kernel
 * registry and pipeline-cache saver. One physical device may be opened
 * several times, as separate logical devices (how tests get several
 * devices on a machine with one).
 */
#ifndef RUDA_DEVICE_SET_H
#define RUDA_DEVICE_SET_H

#include <stdint.h>
#include <uv.h>

#include "device/device.h"
#include "exec/pipeline.h"
#include "exec/pipeline_cache.h"

/* Logical devices one daemon opens at most. */
#define RUDA_MAX_DEVICES 64u

struct ruda_device_entry {
	struct ruda_pipeline_registry pipelines;
	struct ruda_pipeline_cache_saver cache_saver;
	int registry_ready;
};

struct ruda_device_set {
	struct ruda_device_entry *slots;
	struct ruda_device **devices;               /* for the server, in order */
	struct ruda_pipeline_registry **pipelines;  /* for the server, in order */
	uint32_t count;
};

/*
 * Physical device indices `selectors` names, into out (at most max):
 * a comma-separated list of device numbers or parts of device names, each
 * opened once per mention; "all" (or NULL) for every physical device, GPUs
 * only when there are any, the best first. Returns the count, or -ENODEV after
 * logging which selector matched nothing.
 */
int ruda__device_set_resolve(const struct ruda_vulkan *vk, const char *selectors, uint32_t *out,
			     uint32_t max);

/* Open what `selectors` names; 0, or a negative errno after logging (then
 * close and free what was opened). */
int ruda__device_set_open(struct ruda_device_set *set, struct ruda_vulkan *vk,
			  const char *selectors, uv_loop_t *loop, uint64_t submission_timeout_ns,
			  const char *cache_dir, uint64_t cache_save_period_ms);
/* Save caches, drop registries, destroy every device (their handles close
 * on the loop's next run). */
void ruda__device_set_close(struct ruda_device_set *set);
/* Build rudad's own kernels on a device just opened, before any client is
 * served (made at their first use, the loop waited for the driver's
 * compile): the copy kernel, and on a GPU the dynamic counts' clamp and the
 * all-reduce combine. On a CPU device those two compile in LLVM, tens of
 * ms each, and stay made at first use rather than at every start. */
void ruda__device_build_own_kernels(struct ruda_device *device);
/* Device `index` was re-created after a loss (daemon/server/recovery.c): give the
 * new one what rudad knew of the old (`old_copy`, taken before) and its
 * details. */
void ruda__device_set_adopt(struct ruda_device_set *set, uint32_t index,
			    const struct ruda_device *old_copy,
			    struct ruda_device_details *details);
/* Free the set's arrays, once the loop has closed the handles. */
void ruda__device_set_free(struct ruda_device_set *set);

#endif
