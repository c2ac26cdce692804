#include "common/spirv.h"
#include "common/spirv_module.h"

#include <errno.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vulkan.h>

#define SPIRV_MAGIC 0x07230203u
/* ids beyond this are refused rather than tracked */
#define MAX_ID_BOUND (1u << 22)

static spv_target_env target_env(uint32_t api_version)
{
	if (VK_API_VERSION_MINOR(api_version) >= 3)
		return SPV_ENV_VULKAN_1_3;
	if (VK_API_VERSION_MINOR(api_version) == 2)
		return SPV_ENV_VULKAN_1_2;
	return SPV_ENV_VULKAN_1_1;
}

static int validate(const uint32_t *words, size_t nwords, uint32_t api_version, char *why,
		    size_t why_len)
{
	spv_context ctx = spvContextCreate(target_env(api_version));
	if (!ctx) {
		snprintf(why, why_len, "cannot create a SPIRV-Tools context");
		return -ENOMEM;
	}
	spv_const_binary_t binary = {.code = words, .wordCount = nwords};
	spv_diagnostic diag = NULL;
	spv_result_t r = spvValidate(ctx, &binary, &diag);
	if (r != SPV_SUCCESS)
		snprintf(why, why_len, "SPIR-V validation failed: %s",
			 diag && diag->error ? diag->error : "unknown reason");
	spvDiagnosticDestroy(diag);
	spvContextDestroy(ctx);
	return r == SPV_SUCCESS ? 0 : -EINVAL;
}

static int collect(const struct module *m, uint32_t op, const uint32_t *o, uint32_t n, void *data)
{
	(void)data;
	struct id_info *info;
	switch (op) {
	case OP_TYPE_INT:
	case OP_TYPE_FLOAT:
	case OP_TYPE_VECTOR:
	case OP_TYPE_MATRIX:
	case OP_TYPE_ARRAY:
	case OP_TYPE_STRUCT:
	case OP_TYPE_POINTER:
	case OP_TYPE_BOOL:
	case OP_TYPE_RUNTIME_ARRAY:
		if (n >= 1 && (info = id(m, o[0])))
			info->def = o - 1;
		break;
	case OP_CONSTANT:
	case OP_SPEC_CONSTANT:
	case OP_CONSTANT_TRUE:
	case OP_CONSTANT_FALSE:
	case OP_SPEC_CONSTANT_TRUE:
	case OP_SPEC_CONSTANT_FALSE:
	case OP_CONSTANT_COMPOSITE:
	case OP_SPEC_CONSTANT_COMPOSITE:
	case OP_SPEC_CONSTANT_OP:
	case OP_CONSTANT_NULL:
	case OP_VARIABLE:
		if (n >= 2 && (info = id(m, o[1])))
			info->def = o - 1;
		break;
	case OP_DECORATE:
		if (n < 2 || !(info = id(m, o[0])))
			break;
		if (o[1] == DECORATION_BINDING && n >= 3)
			info->binding = o[2];
		else if (o[1] == DECORATION_DESCRIPTOR_SET && n >= 3)
			info->set = o[2];
		else if (o[1] == DECORATION_ARRAY_STRIDE && n >= 3)
			info->array_stride = o[2];
		else if (o[1] == DECORATION_BLOCK)
			info->block = 1;
		else if (o[1] == DECORATION_BUFFER_BLOCK)
			info->buffer_block = 1;
		else if (o[1] == DECORATION_SPEC_ID && n >= 3)
			info->spec_id = o[2];
		else if (o[1] == DECORATION_BUILTIN && n >= 3 && o[2] == BUILTIN_WORKGROUP_SIZE)
			info->workgroup_size = 1;
		else if (o[1] == DECORATION_NON_WRITABLE)
			info->non_writable = 1;
		break;
	case OP_MEMBER_DECORATE:
		if (n >= 4 && o[2] == DECORATION_MATRIX_STRIDE && (info = id(m, o[0])))
			info->matrix_stride = o[3];
		break;
	default:
		break;
	}
	return 0;
}

/* (struct << 32 | member) of every OpMemberDecorate NonWritable. */
struct member_marks {
	uint64_t *pairs;
	size_t n, cap;
	int oom;
};

static int collect_non_writable(const struct module *m, uint32_t op, const uint32_t *o,
				uint32_t n, void *data)
{
	(void)m;
	struct member_marks *mm = data;
	if (op != OP_MEMBER_DECORATE || n < 3 || o[2] != DECORATION_NON_WRITABLE)
		return 0;
	if (mm->n == mm->cap) {
		size_t cap = mm->cap ? mm->cap * 2 : 16;
		uint64_t *p = realloc(mm->pairs, cap * sizeof(*p));
		if (!p) {
			mm->oom = 1;
			return -ENOMEM;
		}
		mm->pairs = p;
		mm->cap = cap;
	}
	mm->pairs[mm->n++] = (uint64_t)o[0] << 32 | o[1];
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Count each struct's distinct NonWritable members (a member decorated
 * twice counts once), in O(n log n) however hostile the module. */
static int count_non_writable_members(const struct module *m)
{
	struct member_marks mm = {0};
	each_instruction(m, collect_non_writable, &mm);
	if (mm.oom) {
		free(mm.pairs);
		return -ENOMEM;
	}
	if (mm.n)
		qsort(mm.pairs, mm.n, sizeof(*mm.pairs), cmp_u64);
	for (size_t i = 0; i < mm.n; i++) {
		uint32_t op, n, member = (uint32_t)mm.pairs[i];
		const uint32_t *o = definition(m, (uint32_t)(mm.pairs[i] >> 32), &op, &n);
		if (!o || op != OP_TYPE_STRUCT || member >= n - 1 ||
		    (i && mm.pairs[i] == mm.pairs[i - 1]))
			continue;
		m->ids[o[0]].non_writable_members++;
	}
	free(mm.pairs);
	return 0;
}

struct member_offsets {
	uint32_t structure;
	uint32_t *offsets;
	uint32_t count;
};

static int collect_offsets(const struct module *m, uint32_t op, const uint32_t *o, uint32_t n,
			   void *data)
{
	(void)m;
	struct member_offsets *mo = data;
	if (op == OP_MEMBER_DECORATE && n >= 4 && o[0] == mo->structure && o[2] == DECORATION_OFFSET &&
	    o[1] < mo->count)
		mo->offsets[o[1]] = o[3];
	return 0;
}

/* Bytes a value of type `type` occupies under its explicit layout; 0 when
 * unknown. `depth` bounds recursion on hostile input. */
static uint64_t type_size(const struct module *m, uint32_t type, int depth)
{
	uint32_t op, n;
	const uint32_t *o = definition(m, type, &op, &n);
	if (!o || depth > 16)
		return 0;
	switch (op) {
	case OP_TYPE_INT:
	case OP_TYPE_FLOAT:
		return n >= 2 ? o[1] / 8 : 0;
	case OP_TYPE_VECTOR:
		return n >= 3 ? type_size(m, o[1], depth + 1) * o[2] : 0;
	case OP_TYPE_MATRIX: {
		if (n < 3)
			return 0;
		uint64_t column = type_size(m, o[1], depth + 1);
		return (uint64_t)o[2] * column; /* a lower bound without MatrixStride */
	}
	case OP_TYPE_ARRAY: {
		uint32_t cop, cn;
		const uint32_t *c = n >= 3 ? definition(m, o[2], &cop, &cn) : NULL;
		if (!c || (cop != OP_CONSTANT && cop != OP_SPEC_CONSTANT) || cn < 3)
			return 0;
		uint32_t stride = m->ids[o[0]].array_stride;
		uint64_t elem = stride ? stride : type_size(m, o[1], depth + 1);
		return elem * c[2];
	}
	case OP_TYPE_STRUCT: {
		uint32_t members = n - 1;
		if (members == 0)
			return 0;
		uint32_t *offsets = calloc(members, sizeof(uint32_t));
		if (!offsets)
			return 0;
		struct member_offsets mo = {.structure = o[0], .offsets = offsets, .count = members};
		each_instruction(m, collect_offsets, &mo);
		uint64_t size = 0;
		for (uint32_t i = 0; i < members; i++) {
			uint64_t end = offsets[i] + type_size(m, o[1 + i], depth + 1);
			if (end > size)
				size = end;
		}
		free(offsets);
		return size;
	}
	default:
		return 0;
	}
}

struct check {
	const struct ruda_spirv_layout *layout;
	char *why;
	size_t why_len;
	int found_entry;
	uint64_t writable; /* bindings some variable may write */
};

static int check_capability(uint32_t cap, const struct ruda_spirv_features *f, const char **name)
{
	static const struct {
		uint32_t cap;
		const char *name;
		size_t feature; /* offset of the bool in ruda_spirv_features */
	} needs[] = {
		{9, "Float16", offsetof(struct ruda_spirv_features, float16)},
		{10, "Float64", offsetof(struct ruda_spirv_features, float64)},
		{11, "Int64", offsetof(struct ruda_spirv_features, int64)},
		{12, "Int64Atomics", offsetof(struct ruda_spirv_features, int64_atomics)},
		{22, "Int16", offsetof(struct ruda_spirv_features, int16)},
		{39, "Int8", offsetof(struct ruda_spirv_features, int8)},
		{4433, "StorageBuffer16BitAccess", offsetof(struct ruda_spirv_features, storage_buffer16)},
		{4434, "UniformAndStorageBuffer16BitAccess",
		 offsetof(struct ruda_spirv_features, uniform_storage16)},
		{4435, "StoragePushConstant16", offsetof(struct ruda_spirv_features, push_constant16)},
		{4448, "StorageBuffer8BitAccess", offsetof(struct ruda_spirv_features, storage_buffer8)},
		{4449, "UniformAndStorageBuffer8BitAccess",
		 offsetof(struct ruda_spirv_features, uniform_storage8)},
		{4450, "StoragePushConstant8", offsetof(struct ruda_spirv_features, push_constant8)},
	};
	for (size_t i = 0; i < sizeof(needs) / sizeof(needs[0]); i++)
		if (needs[i].cap == cap) {
			*name = needs[i].name;
			return *(const bool *)((const char *)f + needs[i].feature);
		}
	return 1;
}

/* Whether a storage buffer variable of block type `block` is read-only:
 * NonWritable on the variable (SPIR-V 1.4 and later may put it there), or
 * on every member of its block (GLSL's `readonly buffer` before 1.4). */
static int read_only(const struct module *m, const struct id_info *var, uint32_t block)
{
	if (var->non_writable)
		return 1;
	uint32_t op, n;
	const uint32_t *o = definition(m, block, &op, &n);
	if (!o || op != OP_TYPE_STRUCT || n < 2)
		return 0;
	return m->ids[block].non_writable_members >= n - 1;
}

static int check_instruction(const struct module *m, uint32_t op, const uint32_t *o, uint32_t n,
			     void *data)
{
	struct check *c = data;
	const struct ruda_spirv_layout *l = c->layout;
	if (op == OP_CAPABILITY && n >= 1) {
		const char *name = NULL;
		if (o[0] == 5347) {
			snprintf(c->why, c->why_len,
				 "capability PhysicalStorageBufferAddresses escapes bounds checking");
			return -EINVAL;
		}
		if (o[0] == 4441 || o[0] == 4442) {
			snprintf(c->why, c->why_len, "variable pointers are not supported");
			return -EINVAL;
		}
		if (l->features && !check_capability(o[0], l->features, &name)) {
			snprintf(c->why, c->why_len, "capability %s: the device does not support it",
				 name);
			return -EINVAL;
		}
	}
	if (op == OP_ENTRY_POINT && n >= 3 && o[0] == EXECUTION_MODEL_GLCOMPUTE) {
		const char *name = (const char *)&o[2];
		size_t max = (n - 2) * 4;
		if (strnlen(name, max) < max && strcmp(name, l->entry_point) == 0)
			c->found_entry = 1;
	}
	if (op != OP_VARIABLE || n < 3)
		return 0;
	uint32_t storage = o[2];
	struct id_info *var = id(m, o[1]);
	uint32_t pop, pn;
	const uint32_t *pointer = definition(m, o[0], &pop, &pn);
	uint32_t pointee = pointer && pop == OP_TYPE_POINTER && pn >= 3 ? pointer[2] : 0;
	if (storage == STORAGE_PUSH_CONSTANT && pointee) {
		uint64_t size = type_size(m, pointee, 0);
		if (size > l->push_constant_size) {
			snprintf(c->why, c->why_len,
				 "the module's push constants take %llu bytes but the kernel declares %u",
				 (unsigned long long)size, l->push_constant_size);
			return -EINVAL;
		}
	}
	if (!var || var->binding == UINT32_MAX)
		return 0;
	if (var->set != 0) {
		snprintf(c->why, c->why_len, "module uses descriptor set %u; kernels use set 0 only",
			 var->set);
		return -EINVAL;
	}
	if (var->binding >= l->binding_count) {
		snprintf(c->why, c->why_len,
			 "module uses binding %u but the kernel declares %u bindings", var->binding,
			 l->binding_count);
		return -EINVAL;
	}
	/* the pointee may be an array of blocks; look through it */
	uint32_t top, tn;
	const uint32_t *t = pointee ? definition(m, pointee, &top, &tn) : NULL;
	if (t && top == OP_TYPE_ARRAY && tn >= 2)
		pointee = t[1];
	struct id_info *block = id(m, pointee);
	int storage_buffer = storage == STORAGE_STORAGE_BUFFER ||
			     (storage == STORAGE_UNIFORM && block && block->buffer_block);
	if (!storage_buffer) {
		snprintf(c->why, c->why_len,
			 "binding %u is not a storage buffer; kernels bind storage buffers only",
			 var->binding);
		return -EINVAL;
	}
	if (!read_only(m, var, pointee) && var->binding < 64)
		c->writable |= 1ull << var->binding;
	return 0;
}

int ruda__spirv_check(const uint32_t *words, size_t nwords, const struct ruda_spirv_layout *l,
		      char *why, size_t why_len)
{
	if (nwords < 5 || words[0] != SPIRV_MAGIC) {
		snprintf(why, why_len, "not a SPIR-V module (bad magic number or too short)");
		return -EINVAL;
	}
	if (words[3] > MAX_ID_BOUND) {
		snprintf(why, why_len, "id bound %u is over %u", words[3], MAX_ID_BOUND);
		return -EINVAL;
	}
	/* before the validator, whose time grows with the size */
	if (l->limits && l->limits->max_words && nwords > l->limits->max_words) {
		snprintf(why, why_len, "SPIR-V of %zu words is over rudad's limit of %u words",
			 nwords, l->limits->max_words);
		return -EINVAL;
	}
	struct module m = {.words = words, .nwords = nwords, .bound = words[3]};
	/* the call graph first: the validator's time grows with the square of
	 * the call depth (minutes for a hostile chain), ours is linear */
	int err = l->limits ? ruda__spirv_check_calls(&m, l->limits, why, why_len) : 0;
	if (!err)
		err = validate(words, nwords, l->api_version, why, why_len);
	if (err)
		return err;
	m.ids = calloc(m.bound ? m.bound : 1, sizeof(*m.ids));
	if (!m.ids) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < m.bound; i++) {
		m.ids[i].binding = UINT32_MAX;
		m.ids[i].spec_id = UINT32_MAX;
	}
	each_instruction(&m, collect, NULL);
	if (count_non_writable_members(&m) < 0) {
		snprintf(why, why_len, "out of memory");
		free(m.ids);
		return -ENOMEM;
	}
	struct check c = {.layout = l, .why = why, .why_len = why_len};
	err = each_instruction(&m, check_instruction, &c);
	if (!err && l->writable)
		*l->writable = c.writable;
	if (!err && !c.found_entry) {
		snprintf(why, why_len, "no GLCompute entry point named \"%s\"", l->entry_point);
		err = -EINVAL;
	}
	if (!err && l->limits)
		err = ruda__spirv_check_limits(&m, l, why, why_len);
	free(m.ids);
	return err;
}
