/*
 * A SPIR-V module as the checks see it (common/spirv.c reads it and
 * checks capabilities and bindings, common/spirv_limits.c its sizes,
 * workgroup and calls): opcodes, what is known of each id, and walking
 * the instructions. Nothing outside common/spirv*.c includes it.
 */
#ifndef RUDA_SPIRV_MODULE_H
#define RUDA_SPIRV_MODULE_H

#include <stddef.h>
#include <stdint.h>

/* Forward only: the files that include this include spirv.h. */
struct ruda_spirv_layout;
struct ruda_spirv_limits;

enum {
	OP_ENTRY_POINT = 15,
	OP_EXECUTION_MODE = 16,
	OP_CAPABILITY = 17,
	OP_TYPE_BOOL = 20,
	OP_TYPE_INT = 21,
	OP_TYPE_FLOAT = 22,
	OP_TYPE_VECTOR = 23,
	OP_TYPE_MATRIX = 24,
	OP_TYPE_ARRAY = 28,
	OP_TYPE_RUNTIME_ARRAY = 29,
	OP_TYPE_STRUCT = 30,
	OP_TYPE_POINTER = 32,
	OP_CONSTANT_TRUE = 41,
	OP_CONSTANT_FALSE = 42,
	OP_CONSTANT = 43,
	OP_CONSTANT_COMPOSITE = 44,
	OP_CONSTANT_NULL = 46,
	OP_SPEC_CONSTANT_TRUE = 48,
	OP_SPEC_CONSTANT_FALSE = 49,
	OP_SPEC_CONSTANT = 50,
	OP_SPEC_CONSTANT_COMPOSITE = 51,
	OP_SPEC_CONSTANT_OP = 52,
	OP_FUNCTION = 54,
	OP_FUNCTION_END = 56,
	OP_FUNCTION_CALL = 57,
	OP_VARIABLE = 59,
	OP_DECORATE = 71,
	OP_MEMBER_DECORATE = 72,
	OP_EXECUTION_MODE_ID = 331,
};

enum {
	DECORATION_SPEC_ID = 1,
	DECORATION_BLOCK = 2,
	DECORATION_BUFFER_BLOCK = 3,
	DECORATION_ARRAY_STRIDE = 6,
	DECORATION_MATRIX_STRIDE = 7,
	DECORATION_OFFSET = 35,
	DECORATION_BINDING = 33,
	DECORATION_DESCRIPTOR_SET = 34,
	DECORATION_BUILTIN = 11,
	DECORATION_NON_WRITABLE = 24,
};

#define BUILTIN_WORKGROUP_SIZE 25u
#define MODE_LOCAL_SIZE 17u
#define MODE_LOCAL_SIZE_ID 38u

enum {
	STORAGE_UNIFORM_CONSTANT = 0,
	STORAGE_UNIFORM = 2,
	STORAGE_WORKGROUP = 4,
	STORAGE_PRIVATE = 6,
	STORAGE_FUNCTION = 7,
	STORAGE_PUSH_CONSTANT = 9,
	STORAGE_STORAGE_BUFFER = 12,
};

#define EXECUTION_MODEL_GLCOMPUTE 5u

/* What the checks need to know about each id. */
struct id_info {
	const uint32_t *def; /* the defining instruction (types, constants, variables) */
	uint32_t binding;    /* UINT32_MAX: none */
	uint32_t set;
	uint32_t array_stride, matrix_stride;
	uint32_t spec_id; /* UINT32_MAX: none */
	uint8_t block, buffer_block, workgroup_size;
	uint8_t non_writable;         /* a variable decorated NonWritable */
	uint32_t non_writable_members; /* a struct's distinct members decorated NonWritable */
	/* memos for the limit checks: value of a constant, size of a type */
	uint8_t value_state, size_state; /* enum memo */
	uint64_t value, size;
};

enum memo { MEMO_NONE, MEMO_BUSY, MEMO_DONE, MEMO_FAILED };

struct module {
	const uint32_t *words;
	size_t nwords;
	uint32_t bound;
	struct id_info *ids;
};

/* Calls `fn` for every instruction; stops at the first non-zero result. */
static inline int each_instruction(const struct module *m,
			    int (*fn)(const struct module *m, uint32_t op, const uint32_t *operands,
				      uint32_t n, void *data),
			    void *data)
{
	for (size_t i = 5; i < m->nwords;) {
		uint32_t count = m->words[i] >> 16, op = m->words[i] & 0xffff;
		/* the validator has checked every count; stay safe regardless */
		if (count == 0 || count > m->nwords - i)
			return 0;
		int r = fn(m, op, &m->words[i + 1], count - 1, data);
		if (r)
			return r;
		i += count;
	}
	return 0;
}

static inline struct id_info *id(const struct module *m, uint32_t i)
{
	return i < m->bound ? &m->ids[i] : NULL;
}

/* The operands (after the word count/opcode word) of the instruction that
 * defines `i`, and its opcode; NULL if unknown. */
static inline const uint32_t *definition(const struct module *m, uint32_t i, uint32_t *op, uint32_t *n)
{
	struct id_info *info = id(m, i);
	if (!info || !info->def)
		return NULL;
	*op = info->def[0] & 0xffff;
	*n = (info->def[0] >> 16) - 1;
	return info->def + 1;
}

/* spirv_limits.c: the call graph against lim (before the validator: its
 * time grows with the square of the call depth) and the module's sizes
 * and workgroup against l->limits; 0 or -EINVAL with *why set. */
int ruda__spirv_check_calls(const struct module *m, const struct ruda_spirv_limits *lim,
			    char *why, size_t why_len);
int ruda__spirv_check_limits(const struct module *m, const struct ruda_spirv_layout *l,
			     char *why, size_t why_len);

#endif
