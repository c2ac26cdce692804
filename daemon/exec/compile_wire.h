/*
 * What rudad and its compile worker (compile_child.c) say to each other
 * over the socketpair: fixed headers, then the bytes they announce.
 */
#ifndef RUDA_COMPILE_WIRE_H
#define RUDA_COMPILE_WIRE_H

#include <stdint.h>

/* The worker's socket in the child. */
#define RUDA_COMPILE_WORKER_FD 3

#define RUDA_COMPILE_MAGIC_REQUEST 0x52434d31u /* "RCM1" */
#define RUDA_COMPILE_MAGIC_REPLY 0x52435231u   /* "RCR1" */
#define RUDA_COMPILE_MAGIC_READY 0x52435259u   /* "RCRY" */

/* The request: this header, the SPIR-V, the entry point with its NUL, the
 * specialization constants as ruda_spec_constant (one binary on both ends). */
struct wire_request {
	uint32_t magic;
	uint32_t spirv_size;
	uint32_t entry_size;
	uint32_t binding_count;
	uint32_t push_constant_size;
	uint32_t nspec;
};

/* The answer to a request (or, once, MAGIC_READY with result 0). */
struct wire_reply {
	uint32_t magic;
	int32_t result; /* VkResult of vkCreateComputePipelines */
};

#endif
