/* Checks on client SPIR-V before it reaches the driver: SPIRV-Tools
 * validation, then the facts rudad relies on (entry point, layout) and the
 * device features the module needs. */
#ifndef RUDA_SPIRV_H
#define RUDA_SPIRV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ruda/common.h>
#include <ruda/status.h>

/* Device features that SPIR-V capabilities need (enabled at device
 * creation where the device has them). */
struct ruda_spirv_features {
	bool float64, int64, int64_atomics, int16, float16, int8;
	bool storage_buffer16, uniform_storage16, push_constant16;
	bool storage_buffer8, uniform_storage8, push_constant8;
};

/* What a kernel may ask of the device and of its compiler, checked before
 * the driver sees it: a workgroup or shared memory over the device's limits
 * crashes some drivers at the first launch, and huge private arrays or
 * exponential inlining stall the compiler (and, on lavapipe, the queue
 * every client shares) for tens of seconds. */
struct ruda_spirv_limits {
	uint32_t max_workgroup_size[3];      /* maxComputeWorkGroupSize */
	uint32_t max_workgroup_invocations;  /* maxComputeWorkGroupInvocations */
	uint32_t max_shared_bytes;           /* maxComputeSharedMemorySize */
	uint32_t max_private_bytes;          /* Private + Function variables, per invocation */
	uint32_t max_words;                  /* module size */
	uint32_t max_call_depth;             /* longest chain of calls */
	uint64_t max_inlined_instructions;   /* instructions once every call is inlined */
};

/* rudad's own limits (the device's come from VkPhysicalDeviceLimits). */
#define RUDA_SPIRV_MAX_PRIVATE_BYTES (16u << 10)
#define RUDA_SPIRV_MAX_WORDS (1u << 20)
#define RUDA_SPIRV_MAX_CALL_DEPTH 64u
#define RUDA_SPIRV_MAX_INLINED_INSTRUCTIONS (1ull << 18)

struct ruda_spirv_layout {
	uint32_t api_version; /* the device's, for the validator's target */
	const char *entry_point;
	uint32_t binding_count;      /* storage buffers at set 0, bindings 0..n-1 */
	uint32_t push_constant_size; /* bytes the kernel declares */
	const struct ruda_spirv_features *features;
	const struct ruda_spirv_limits *limits; /* NULL: not checked */
	const ruda_spec_constant *spec;         /* the request's specialization */
	uint32_t nspec;
	/* out, when set: bit i for each binding i that a variable not
	 * decorated NonWritable (itself, or on every member of its block)
	 * uses, i.e. that the kernel may write */
	uint64_t *writable;
};

/*
 * 0 when `words` is a valid module with a GLCompute entry point named as
 * the layout says, whose resources are storage buffers at set 0 within
 * `binding_count`, whose push constants fit the declared size, and whose
 * capabilities the device has and do not escape bounds checking, and (with
 * `limits`) whose workgroup, shared and private memory, size, call depth
 * and inlined size fit them under the request's specialization. Otherwise
 * -EINVAL with the reason in `why`.
 */
int ruda__spirv_check(const uint32_t *words, size_t nwords, const struct ruda_spirv_layout *layout,
		      char *why, size_t why_len);

#endif
