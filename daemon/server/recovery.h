/*
 * Recovery from a lost device: every session on it is told (a Reply of id
 * 0 with RUDA_ERROR_DEVICE_LOST) and closed, everything made on the old
 * VkDevice is destroyed, and a new one is opened on the same physical
 * device with its pipeline registry, pipeline cache and arena pool rebuilt.
 * Clients connect again to use it. One device at a time, by index.
 */
#ifndef RUDA_RECOVERY_H
#define RUDA_RECOVERY_H

#include <stdint.h>

struct ruda_session_context;
struct ruda_vulkan;
struct ruda_device;
struct ruda_pipeline_registry;
struct ruda_pipeline_cache_saver;

/* What belongs to one device besides its sessions, as its owner keeps it. */
struct ruda_device_slot {
	struct ruda_vulkan *vulkan;
	struct ruda_device **device; /* where the owner keeps the pointer */
	struct ruda_pipeline_registry *pipelines;
	struct ruda_pipeline_cache_saver *saver; /* NULL: no cache directory */
	const char *cache_dir;                  /* NULL: none */
};

/* End of a loop iteration: recover every device lost with
 * RUDA_ERROR_DEVICE_LOST, if the context has a recreate_device hook.
 * Returns how many still wait for the thread pool (the server accepts no
 * clients meanwhile: they would land on the lost device). */
int ruda__recovery_tick(struct ruda_session_context *ctx);

/* Close the sessions on device `index` with a device-lost notice; returns
 * how many (a count), or -ENOMEM (none closed). */
int ruda__recovery_close_sessions(struct ruda_session_context *ctx, uint32_t index);

/* Tear down device `index` of ctx and open it again (the recreate_device
 * hook's work). 0 when done, -EAGAIN while the thread pool still works for
 * the old device (call again), else a negative errno with the old, lost
 * device left in place. */
int ruda__device_recreate(struct ruda_session_context *ctx, uint32_t index,
			  const struct ruda_device_slot *slot);

#endif
