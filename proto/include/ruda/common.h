/*
 * Definitions that libruda's API (<ruda/ruda.h>, which includes this) shares
 * with rudad, which includes this header and <ruda/status.h> but never
 * <ruda/ruda.h>. Installed beside them; the values are ABI and mirror the
 * wire (proto/ruda.proto).
 */
#ifndef RUDA_COMMON_H
#define RUDA_COMMON_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The protocol version of Hello (proto/ruda.proto). */
#define RUDA_PROTOCOL_VERSION 1u

/* Scheduling priorities (ruda_connect_options.priority). */
#define RUDA_PRIORITY_LOWEST 1u
#define RUDA_PRIORITY_NORMAL 4u
#define RUDA_PRIORITY_HIGHEST 7u

/* Element types (the seed's ElemType), for reductions and feature bits. */
typedef enum ruda_elem_type {
	RUDA_ELEM_F32 = 0,
	RUDA_ELEM_I32 = 1,
	RUDA_ELEM_U32 = 2,
	RUDA_ELEM_F16 = 3,
	RUDA_ELEM_BF16 = 4,
	RUDA_ELEM_F64 = 5,
	RUDA_ELEM_I8 = 6,
	RUDA_ELEM_I16 = 7,
	RUDA_ELEM_I64 = 8,
	RUDA_ELEM_U8 = 9,
	RUDA_ELEM_U16 = 10,
	RUDA_ELEM_U64 = 11,
} ruda_elem_type;

/* Bytes of one element of `type`; 0 for an unknown type. */
#define RUDA_ELEM_SIZE(type)                                                            \
	((type) == RUDA_ELEM_F64 || (type) == RUDA_ELEM_I64 || (type) == RUDA_ELEM_U64 ? 8u \
	 : (type) == RUDA_ELEM_F16 || (type) == RUDA_ELEM_BF16 || (type) == RUDA_ELEM_I16 || \
			 (type) == RUDA_ELEM_U16                                          \
		 ? 2u                                                                     \
	 : (type) == RUDA_ELEM_I8 || (type) == RUDA_ELEM_U8 ? 1u                          \
	 : (unsigned)(type) <= RUDA_ELEM_U64 ? 4u : 0u)

/* How new buffers get their memory (MemoryAllocationMode); docs/memory.md. */
typedef enum ruda_allocation_mode {
	RUDA_ALLOCATION_AUTO = 0,       /* pooled: shared pages, large buffers alone */
	RUDA_ALLOCATION_PERSISTENT = 1, /* long-lived buffers, in shared pages of their own */
	RUDA_ALLOCATION_DEDICATED = 2,  /* memory of its own per buffer, exportable */
} ruda_allocation_mode;

/* A specialization constant: `size` is 4 or 8 bytes of `value`. */
typedef struct ruda_spec_constant {
	uint32_t id;
	uint32_t size;
	uint64_t value;
} ruda_spec_constant;

/* Reductions of ruda_client_all_reduce (the seed's ReduceOperation). */
typedef enum ruda_reduce_op {
	RUDA_REDUCE_SUM = 0,
	RUDA_REDUCE_PROD = 1,
	RUDA_REDUCE_MAX = 2,
	RUDA_REDUCE_MIN = 3,
	RUDA_REDUCE_MEAN = 4,
} ruda_reduce_op;

#ifdef __cplusplus
}
#endif

#endif
