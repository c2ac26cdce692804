/*
 * What a device can do beyond its core limits (subgroup sizes, element
 * types, cooperative-matrix shapes, memory heaps and budget), queried once
 * from Vulkan, and how busy it has been (for utilization).
 */
#ifndef RUDA_DEVICE_DETAILS_H
#define RUDA_DEVICE_DETAILS_H

#include <stdint.h>
#include <vulkan/vulkan.h>

struct ruda_device;

#define RUDA_DETAILS_MAX_COOP 32u

struct ruda_device_details {
	uint32_t min_subgroup_size, max_subgroup_size;
	uint32_t subgroup_operations;
	uint32_t max_shared_memory;
	uint32_t max_storage_buffers;
	uint32_t elem_types, atomic_elem_types; /* bits of ruda_elem_type */
	uint32_t spirv_version;
	uint32_t timestamp_period_ps;
	int memory_budget; /* VK_EXT_memory_budget */
	uint32_t ncoop;
	struct ruda_coop_shape {
		uint32_t m, n, k, a, b, c, d;
	} coop[RUDA_DETAILS_MAX_COOP];
	/* utilization: the last sample of busy time, and the window before it */
	uint64_t sample_busy_ns, sample_ns;
	double recent;
	uint64_t window_ns;
};

/* Fill device->details; 0 or -ENOMEM. */
int ruda__device_details_query(struct ruda_device *device, VkInstance instance);
void ruda__device_details_free(struct ruda_device *device);

/* Heap usage and budget from the driver (VK_EXT_memory_budget) into the
 * arrays (max entries); returns the heap count, 0 without the extension. */
uint32_t ruda__device_memory_budget(const struct ruda_device *device, uint64_t *usage,
				    uint64_t *budget, uint32_t max);

/* Busy fraction over the last window (at least 100 ms; a new one starts
 * when the last is older). */
double ruda__device_recent_utilization(struct ruda_device *device, uint64_t *window_ns);

#endif
