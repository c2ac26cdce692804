#include "memory/buffer_limits.h"

#include <stdio.h>

uint64_t ruda__buffer_limits_largest(const struct ruda_buffer_limits *l)
{
	uint64_t largest = l->max_buffer_size ? l->max_buffer_size : l->max_allocation_size;
	if (l->heap_size && l->heap_size < largest)
		largest = l->heap_size;
	return largest;
}

ruda_status ruda__buffer_limits_check(const struct ruda_buffer_limits *l, uint64_t size,
				      char *why, size_t why_len)
{
	uint64_t max = l->max_buffer_size ? l->max_buffer_size : l->max_allocation_size;
	if (size > max) {
		snprintf(why, why_len, "%llu bytes exceed the device's largest buffer (%llu bytes)",
			 (unsigned long long)size, (unsigned long long)max);
		return RUDA_ERROR_TOO_LARGE;
	}
	if (l->heap_size && size > l->heap_size) {
		snprintf(why, why_len, "%llu bytes exceed the device's memory heap (%llu bytes)",
			 (unsigned long long)size, (unsigned long long)l->heap_size);
		return RUDA_ERROR_TOO_LARGE;
	}
	return RUDA_OK;
}

ruda_status ruda__buffer_limits_refused(const struct ruda_buffer_limits *l, uint64_t size,
					ruda_status status, char *why, size_t why_len)
{
	if (l->max_allocation_size && size > l->max_allocation_size) {
		snprintf(why, why_len,
			 "the driver refused one allocation of %llu bytes, above its "
			 "maxMemoryAllocationSize (%llu bytes)",
			 (unsigned long long)size, (unsigned long long)l->max_allocation_size);
		return RUDA_ERROR_TOO_LARGE;
	}
	return status;
}
