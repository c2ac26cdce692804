/*
 * SPIR-V modules made of calls, assembled word by word (spirv-opt would
 * inline them at build time): a compile bomb, deep call chains, recursion.
 * Header-only: test_spirv and test_kernel_limits both use it.
 */
#ifndef RUDA_TEST_SPIRV_CALLS_H
#define RUDA_TEST_SPIRV_CALLS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * A compute module "main" (LocalSize 1, no resources) whose main calls f0
 * `fanout` times, f_k calls f_{k+1} `fanout` times, down to f_{levels-1};
 * with `recursive`, the last function calls f0. Once inlined it is about
 * 6 * fanout^levels instructions. *nwords gets the size; the caller frees.
 */
static inline uint32_t *test_spirv_calls(uint32_t levels, uint32_t fanout, int recursive,
					 size_t *nwords)
{
	enum { VOID = 1, FN = 2, MAIN = 3, FIRST = 10 }; /* ids; f_k is FIRST + 3k */
	size_t cap = 32 + (size_t)(levels + 1) * (8 + 4 * (fanout + 1));
	uint32_t *w = calloc(cap, sizeof(*w)), n = 0;
	if (!w)
		return NULL;
	uint32_t bound = FIRST + 3 * levels + 3 * (levels + 1) * (fanout + 1) + 8;
	uint32_t next = FIRST + 3 * levels; /* labels and call results */
#define EMIT(...)                                                                          \
	do {                                                                               \
		const uint32_t ins_[] = {__VA_ARGS__};                                     \
		memcpy(w + n, ins_, sizeof(ins_));                                         \
		n += sizeof(ins_) / 4;                                                     \
	} while (0)
	EMIT(0x07230203u, 0x00010000u, 0, bound, 0);
	EMIT(2u << 16 | 17, 1);                            /* OpCapability Shader */
	EMIT(3u << 16 | 14, 0, 1);                         /* OpMemoryModel Logical GLSL450 */
	EMIT(5u << 16 | 15, 5, MAIN, 0x6e69616du, 0);      /* OpEntryPoint GLCompute "main" */
	EMIT(6u << 16 | 16, MAIN, 17, 1, 1, 1);            /* OpExecutionMode LocalSize 1 1 1 */
	EMIT(2u << 16 | 19, VOID);                         /* OpTypeVoid */
	EMIT(3u << 16 | 33, FN, VOID);                     /* OpTypeFunction */
	for (uint32_t f = 0; f <= levels; f++) {
		uint32_t self = f == 0 ? MAIN : FIRST + 3 * (f - 1);
		uint32_t callee = f < levels ? FIRST + 3 * f : recursive ? FIRST : 0;
		EMIT(5u << 16 | 54, VOID, self, 0, FN);    /* OpFunction */
		EMIT(2u << 16 | 248, next++);              /* OpLabel */
		for (uint32_t c = 0; callee && c < fanout; c++)
			EMIT(4u << 16 | 57, VOID, next++, callee); /* OpFunctionCall */
		EMIT(1u << 16 | 253);                      /* OpReturn */
		EMIT(1u << 16 | 56);                       /* OpFunctionEnd */
	}
#undef EMIT
	*nwords = n;
	return w;
}

#endif
