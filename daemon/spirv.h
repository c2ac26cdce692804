/* Checks on client SPIR-V before it reaches the driver: SPIRV-Tools
 * validation, then the facts rudad relies on (entry point, layout) and the
 * device features the module needs. */
#ifndef RUDA_SPIRV_H
#define RUDA_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Device features that SPIR-V capabilities need (enabled at device
 * creation where the device has them). */
struct ruda_spirv_features {
	bool float64, int64, int64_atomics, int16, float16, int8;
	bool storage_buffer16, uniform_storage16, push_constant16;
	bool storage_buffer8, uniform_storage8, push_constant8;
};

struct ruda_spirv_layout {
	uint32_t api_version; /* the device's, for the validator's target */
	const char *entry_point;
	uint32_t binding_count;      /* storage buffers at set 0, bindings 0..n-1 */
	uint32_t push_constant_size; /* bytes the kernel declares */
	const struct ruda_spirv_features *features;
};

/*
 * 0 when `words` is a valid module with a GLCompute entry point named as
 * the layout says, whose resources are storage buffers at set 0 within
 * `binding_count`, whose push constants fit the declared size, and whose
 * capabilities the device has and do not escape bounds checking. Otherwise
 * -EINVAL with the reason in `why`.
 */
int ruda__spirv_check(const uint32_t *words, size_t nwords, const struct ruda_spirv_layout *layout,
		      char *why, size_t why_len);

#endif
