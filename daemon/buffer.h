/* A device buffer: one VkBuffer bound to its own device memory. Reference
 * counted: the session's handle holds one reference, every submission that
 * uses it another. */
#ifndef RUDA_BUFFER_H
#define RUDA_BUFFER_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/ruda.h>

#include "ref.h"

struct ruda_device;

struct ruda_buffer {
	struct ruda_ref ref;
	struct ruda_device *device; /* borrowed */
	VkBuffer vk;
	VkDeviceMemory memory;
	uint64_t size;      /* requested bytes */
	uint64_t allocated; /* bytes of device memory */
};

/* RUDA_OK, RUDA_ERROR_TOO_LARGE, RUDA_ERROR_OUT_OF_MEMORY. */
ruda_status ruda__buffer_create(struct ruda_device *device, uint64_t size,
				struct ruda_buffer **out);

static inline void ruda__buffer_put(struct ruda_buffer *buffer)
{
	ruda_ref_put(&buffer->ref);
}

#endif
