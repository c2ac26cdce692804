/*
 * How large a buffer a device may hold (issue #24): up to its maxBufferSize
 * (VkPhysicalDeviceMaintenance4Properties) and its heap, all in 64 bits. A
 * buffer is one VkDeviceMemory allocation; one above the device's
 * maxMemoryAllocationSize (4,292,870,144 bytes on the H200, whose heap is
 * 140 GiB) is tried, as Vulkan allows drivers to accept it, and a driver's
 * refusal of it is TOO_LARGE with that limit named, not OUT_OF_MEMORY.
 */
#ifndef RUDA_BUFFER_LIMITS_H
#define RUDA_BUFFER_LIMITS_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/status.h>

struct ruda_buffer_limits {
	uint64_t max_buffer_size;     /* maxBufferSize; maxMemoryAllocationSize without it */
	uint64_t heap_size;           /* of the heap buffers are allocated from */
	uint64_t max_allocation_size; /* maxMemoryAllocationSize */
};

/* The largest buffer: the smaller of maxBufferSize and the heap. */
uint64_t ruda__buffer_limits_largest(const struct ruda_buffer_limits *l);

/* RUDA_OK when a buffer of `size` bytes may be tried; else
 * RUDA_ERROR_TOO_LARGE with the limit it passes written to `why`. */
ruda_status ruda__buffer_limits_check(const struct ruda_buffer_limits *l, uint64_t size,
				      char *why, size_t why_len);

/* Why an allocation of `size` bytes that the driver refused failed: past
 * maxMemoryAllocationSize it is TOO_LARGE (with that limit in `why`), else
 * the caller's `status` (out of memory). */
ruda_status ruda__buffer_limits_refused(const struct ruda_buffer_limits *l, uint64_t size,
					ruda_status status, char *why, size_t why_len);

#endif
