/* Limits a kernel must keep before it reaches the driver: its workgroup
 * size, shared and private memory (constants and specialization constants
 * evaluated), and its call graph (depth, and the size inlining would make). */
#include "common/spirv.h"
#include "common/spirv_module.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t sat_add(uint64_t a, uint64_t b)
{
	return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t sat_mul(uint64_t a, uint64_t b)
{
	return b && a > UINT64_MAX / b ? UINT64_MAX : a * b;
}

struct limits_check {
	const struct module *m;
	const struct ruda_spirv_layout *layout;
	char *why;
	size_t why_len;
	uint32_t entry;                 /* the entry point's function */
	uint32_t local_size[3];         /* LocalSize */
	uint32_t local_size_id[3];      /* LocalSizeId: ids; 0 when absent */
	uint32_t workgroup_size;        /* the WorkgroupSize builtin's constant; 0 when absent */
	int has_local_size;
	uint64_t shared, private_bytes; /* saturating sums */
	uint32_t unsized;               /* a variable whose size cannot be worked out */
};

/* Bits of an integer type, 1 for bool, 0 when neither. */
static uint32_t scalar_width(const struct module *m, uint32_t type)
{
	uint32_t op, n;
	const uint32_t *o = definition(m, type, &op, &n);
	if (o && op == OP_TYPE_INT && n >= 2 && (o[1] == 32 || o[1] == 64 || o[1] == 16 || o[1] == 8))
		return o[1];
	if (o && op == OP_TYPE_BOOL)
		return 1;
	return 0;
}

static uint64_t truncate_to(uint64_t v, uint32_t width)
{
	return width >= 64 ? v : v & ((1ull << width) - 1);
}

static int64_t sign_extend(uint64_t v, uint32_t width)
{
	if (width >= 64 || width <= 1)
		return (int64_t)v;
	uint64_t sign = 1ull << (width - 1);
	return (int64_t)((v ^ sign) - sign);
}

static int constant_value(struct limits_check *lc, uint32_t i, uint64_t *out, int depth);

/* OpSpecConstantOp on scalar integers and booleans: what sizes and array
 * lengths are made of. 0 and the result in *out, or -1. */
static int spec_op_value(struct limits_check *lc, const uint32_t *o, uint32_t n, uint64_t *out,
			 int depth)
{
	uint32_t width = scalar_width(lc->m, o[0]);
	if (n < 4 || !width)
		return -1;
	uint64_t a = 0, b = 0, c = 0;
	uint32_t operands = n - 3;
	if (operands > 3 || constant_value(lc, o[3], &a, depth + 1) < 0 ||
	    (operands >= 2 && constant_value(lc, o[4], &b, depth + 1) < 0) ||
	    (operands >= 3 && constant_value(lc, o[5], &c, depth + 1) < 0))
		return -1;
	/* operand widths may differ from the result's (conversions) */
	int64_t sa = sign_extend(a, width), sb = sign_extend(b, width);
	uint64_t r;
	switch (o[2]) {
	case 113: /* UConvert */ r = a; break;
	case 114: /* SConvert */ r = (uint64_t)sa; break;
	case 126: /* SNegate */ r = (uint64_t)0 - a; break;
	case 200: /* Not */ r = ~a; break;
	case 128: /* IAdd */ r = a + b; break;
	case 130: /* ISub */ r = a - b; break;
	case 132: /* IMul */ r = a * b; break;
	case 134: /* UDiv */ if (!b) return -1; r = a / b; break;
	case 135: /* SDiv */ if (!sb || (sb == -1 && sa == INT64_MIN)) return -1;
		r = (uint64_t)(sa / sb); break;
	case 137: /* UMod */ if (!b) return -1; r = a % b; break;
	case 138: /* SRem */
	case 139: /* SMod (same sign rules do not matter for sizes) */
		if (!sb || sb == -1) return -1;
		r = (uint64_t)(sa % sb); break;
	case 194: /* ShiftRightLogical */ r = b >= 64 ? 0 : truncate_to(a, width) >> b; break;
	case 195: /* ShiftRightArithmetic */ r = (uint64_t)(sa >> (b >= 63 ? 63 : b)); break;
	case 196: /* ShiftLeftLogical */ r = b >= 64 ? 0 : a << b; break;
	case 197: /* BitwiseOr */ r = a | b; break;
	case 198: /* BitwiseXor */ r = a ^ b; break;
	case 199: /* BitwiseAnd */ r = a & b; break;
	case 164: /* LogicalEqual */ r = !!a == !!b; break;
	case 165: /* LogicalNotEqual */ r = !!a != !!b; break;
	case 166: /* LogicalOr */ r = a || b; break;
	case 167: /* LogicalAnd */ r = a && b; break;
	case 168: /* LogicalNot */ r = !a; break;
	case 169: /* Select */ r = a ? b : c; break;
	case 170: /* IEqual */ r = a == b; break;
	case 171: /* INotEqual */ r = a != b; break;
	case 172: /* UGreaterThan */ r = a > b; break;
	case 173: /* SGreaterThan */ r = sa > sb; break;
	case 174: /* UGreaterThanEqual */ r = a >= b; break;
	case 175: /* SGreaterThanEqual */ r = sa >= sb; break;
	case 176: /* ULessThan */ r = a < b; break;
	case 177: /* SLessThan */ r = sa < sb; break;
	case 178: /* ULessThanEqual */ r = a <= b; break;
	case 179: /* SLessThanEqual */ r = sa <= sb; break;
	default: return -1;
	}
	*out = truncate_to(r, width);
	return 0;
}

/* The value of scalar constant `i` under the request's specialization;
 * memoised, so a hostile web of OpSpecConstantOp costs linear time. */
static int constant_value(struct limits_check *lc, uint32_t i, uint64_t *out, int depth)
{
	struct id_info *info = id(lc->m, i);
	if (!info || depth > 64)
		return -1;
	if (info->value_state == MEMO_DONE) {
		*out = info->value;
		return 0;
	}
	if (info->value_state != MEMO_NONE)
		return -1;
	info->value_state = MEMO_BUSY;
	uint32_t op = 0, n = 0;
	const uint32_t *o = definition(lc->m, i, &op, &n);
	uint64_t v = 0;
	int ok = o != NULL;
	if (ok) {
		switch (op) {
		case OP_CONSTANT:
		case OP_SPEC_CONSTANT:
			ok = n >= 3 && scalar_width(lc->m, o[0]) > 1;
			if (ok)
				v = n >= 4 ? (uint64_t)o[3] << 32 | o[2] : o[2];
			break;
		case OP_CONSTANT_TRUE:
		case OP_SPEC_CONSTANT_TRUE:
			v = 1;
			break;
		case OP_CONSTANT_FALSE:
		case OP_SPEC_CONSTANT_FALSE:
		case OP_CONSTANT_NULL:
			v = 0;
			break;
		case OP_SPEC_CONSTANT_OP:
			ok = spec_op_value(lc, o, n, &v, depth) == 0;
			break;
		default:
			ok = 0;
		}
	}
	int spec = op == OP_SPEC_CONSTANT || op == OP_SPEC_CONSTANT_TRUE ||
		   op == OP_SPEC_CONSTANT_FALSE;
	if (ok && spec && info->spec_id != UINT32_MAX) {
		const struct ruda_spirv_layout *l = lc->layout;
		for (uint32_t k = 0; k < l->nspec; k++) {
			if (l->spec[k].id != info->spec_id)
				continue;
			uint64_t given = l->spec[k].size == 4 ? (uint32_t)l->spec[k].value
							      : l->spec[k].value;
			v = op == OP_SPEC_CONSTANT ? given : given != 0;
		}
	}
	if (ok && op == OP_SPEC_CONSTANT)
		v = truncate_to(v, scalar_width(lc->m, o[0]));
	info->value_state = ok ? MEMO_DONE : MEMO_FAILED;
	info->value = v;
	*out = v;
	return ok ? 0 : -1;
}

/* Bytes a variable of `type` takes without an explicit layout (no padding
 * for alignment: a lower bound, as the driver may only add to it); -1 when
 * an array's length cannot be evaluated. Memoised per type. */
static int natural_size(struct limits_check *lc, uint32_t type, uint64_t *out, int depth)
{
	struct id_info *info = id(lc->m, type);
	if (!info || depth > 64)
		return -1;
	if (info->size_state == MEMO_DONE) {
		*out = info->size;
		return 0;
	}
	if (info->size_state != MEMO_NONE)
		return -1;
	info->size_state = MEMO_BUSY;
	uint32_t op, n;
	const uint32_t *o = definition(lc->m, type, &op, &n);
	uint64_t size = 0, elem = 0, count = 0;
	int ok = o != NULL;
	if (ok) {
		switch (op) {
		case OP_TYPE_BOOL:
			size = 4;
			break;
		case OP_TYPE_INT:
		case OP_TYPE_FLOAT:
			size = n >= 2 ? o[1] / 8 : 0;
			break;
		case OP_TYPE_POINTER:
			size = 8;
			break;
		case OP_TYPE_VECTOR:
		case OP_TYPE_MATRIX:
			ok = n >= 3 && natural_size(lc, o[1], &elem, depth + 1) == 0;
			size = sat_mul(elem, n >= 3 ? o[2] : 0);
			break;
		case OP_TYPE_ARRAY: /* a length of 0 (wrapped) is no array */
			ok = n >= 3 && natural_size(lc, o[1], &elem, depth + 1) == 0 &&
			     constant_value(lc, o[2], &count, 0) == 0 && count;
			size = sat_mul(elem, count);
			break;
		case OP_TYPE_STRUCT:
			for (uint32_t k = 1; ok && k < n; k++) {
				ok = natural_size(lc, o[k], &elem, depth + 1) == 0;
				size = sat_add(size, elem);
			}
			break;
		default: /* runtime arrays, opaque types: nothing per invocation */
			size = 0;
		}
	}
	info->size_state = ok ? MEMO_DONE : MEMO_FAILED;
	info->size = size;
	*out = size;
	return ok ? 0 : -1;
}

static int gather_limits(const struct module *m, uint32_t op, const uint32_t *o, uint32_t n,
			 void *data)
{
	struct limits_check *lc = data;
	const char *entry = lc->layout->entry_point;
	if (op == OP_ENTRY_POINT && n >= 3 && o[0] == EXECUTION_MODEL_GLCOMPUTE) {
		const char *name = (const char *)&o[2];
		size_t max = (n - 2) * 4;
		if (strnlen(name, max) < max && strcmp(name, entry) == 0)
			lc->entry = o[1];
	} else if (op == OP_EXECUTION_MODE && n >= 5 && o[1] == MODE_LOCAL_SIZE && o[0] == lc->entry) {
		memcpy(lc->local_size, &o[2], sizeof(lc->local_size));
		lc->has_local_size = 1;
	} else if (op == OP_EXECUTION_MODE_ID && n >= 5 && o[1] == MODE_LOCAL_SIZE_ID &&
		   o[0] == lc->entry) {
		memcpy(lc->local_size_id, &o[2], sizeof(lc->local_size_id));
	} else if ((op == OP_CONSTANT_COMPOSITE || op == OP_SPEC_CONSTANT_COMPOSITE) && n >= 5) {
		struct id_info *info = id(m, o[1]);
		if (info && info->workgroup_size)
			lc->workgroup_size = o[1];
	} else if (op == OP_VARIABLE && n >= 3 &&
		   (o[2] == STORAGE_WORKGROUP || o[2] == STORAGE_PRIVATE || o[2] == STORAGE_FUNCTION)) {
		uint32_t pop, pn;
		const uint32_t *pointer = definition(m, o[0], &pop, &pn);
		uint64_t size = 0;
		if (!pointer || pop != OP_TYPE_POINTER || pn < 3 ||
		    natural_size(lc, pointer[2], &size, 0) < 0) {
			lc->unsized = o[1];
			return -EINVAL;
		}
		if (o[2] == STORAGE_WORKGROUP)
			lc->shared = sat_add(lc->shared, size);
		else
			lc->private_bytes = sat_add(lc->private_bytes, size);
	}
	return 0;
}

static int check_workgroup(struct limits_check *lc)
{
	const struct ruda_spirv_limits *lim = lc->layout->limits;
	uint64_t size[3];
	const char *source = "LocalSize";
	if (lc->workgroup_size || lc->local_size_id[0]) {
		/* the builtin overrides the execution mode */
		uint32_t ids[3];
		if (lc->workgroup_size) {
			uint32_t op, n;
			const uint32_t *o = definition(lc->m, lc->workgroup_size, &op, &n);
			memcpy(ids, &o[2], sizeof(ids));
			source = "the WorkgroupSize builtin";
		} else {
			memcpy(ids, lc->local_size_id, sizeof(ids));
			source = "LocalSizeId";
		}
		for (int i = 0; i < 3; i++)
			if (constant_value(lc, ids[i], &size[i], 0) < 0) {
				snprintf(lc->why, lc->why_len,
					 "workgroup size (%s) cannot be evaluated", source);
				return -EINVAL;
			}
	} else if (lc->has_local_size) {
		for (int i = 0; i < 3; i++)
			size[i] = lc->local_size[i];
	} else {
		snprintf(lc->why, lc->why_len, "the entry point has no workgroup size");
		return -EINVAL;
	}
	uint64_t invocations = 1;
	for (int i = 0; i < 3; i++) {
		if (size[i] == 0) {
			snprintf(lc->why, lc->why_len, "workgroup size %c is 0 (from %s)", "xyz"[i],
				 source);
			return -EINVAL;
		}
		if (lim->max_workgroup_size[i] && size[i] > lim->max_workgroup_size[i]) {
			snprintf(lc->why, lc->why_len,
				 "workgroup size %c = %llu (from %s) is over the device's "
				 "maxComputeWorkGroupSize[%d] = %u",
				 "xyz"[i], (unsigned long long)size[i], source, i,
				 lim->max_workgroup_size[i]);
			return -EINVAL;
		}
		invocations = sat_mul(invocations, size[i]);
	}
	if (lim->max_workgroup_invocations && invocations > lim->max_workgroup_invocations) {
		snprintf(lc->why, lc->why_len,
			 "workgroup %llux%llux%llu = %llu invocations is over the device's "
			 "maxComputeWorkGroupInvocations = %u",
			 (unsigned long long)size[0], (unsigned long long)size[1],
			 (unsigned long long)size[2], (unsigned long long)invocations,
			 lim->max_workgroup_invocations);
		return -EINVAL;
	}
	return 0;
}

/* The call graph: each function's own instructions and the functions it
 * calls, one entry per call site. */
struct function {
	uint32_t id;
	uint32_t first_call, ncalls; /* into calls[] */
	uint64_t own, inlined;
	uint32_t depth; /* longest chain of calls below, counting itself */
	uint8_t state;  /* enum memo */
	uint8_t called;
};

struct call_graph {
	struct function *functions;
	uint32_t nfunctions, cap_functions;
	uint32_t *calls;
	uint32_t ncalls, cap_calls;
	uint32_t *index; /* id -> function index + 1; 0: not a function */
	uint32_t cap_index;
	int oom;
};

static int grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	uint32_t cap2 = *cap ? *cap * 2 : 64;
	void *q = realloc(*p, (size_t)cap2 * elem);
	if (!q)
		return -1;
	*p = q;
	*cap = cap2;
	return 0;
}

static int gather_calls(const struct module *m, uint32_t op, const uint32_t *o, uint32_t n,
			void *data)
{
	struct call_graph *g = data;
	if (op == OP_FUNCTION && n >= 2) {
		if (grow((void **)&g->functions, &g->cap_functions, g->nfunctions + 1,
			 sizeof(*g->functions))) {
			g->oom = 1;
			return -ENOMEM;
		}
		g->functions[g->nfunctions] =
			(struct function){.id = o[1], .first_call = g->ncalls};
		if (o[1] < m->bound)
			g->index[o[1]] = ++g->nfunctions;
	}
	if (!g->nfunctions)
		return 0;
	struct function *f = &g->functions[g->nfunctions - 1];
	f->own++;
	if (op == OP_FUNCTION_CALL && n >= 3) {
		if (grow((void **)&g->calls, &g->cap_calls, g->ncalls + 1, sizeof(*g->calls))) {
			g->oom = 1;
			return -ENOMEM;
		}
		g->calls[g->ncalls++] = o[2];
		f->ncalls++;
	}
	return 0;
}

/* Instructions `f` makes once every call below it is inlined, and its call
 * depth; memoised, so shared callees cost once however often they are
 * called. Recursion is refused (Vulkan forbids it). */
static int walk_calls(struct call_graph *g, struct function *f, const struct ruda_spirv_limits *lim,
		      uint32_t level, char *why, size_t why_len)
{
	if (f->state == MEMO_DONE)
		return 0;
	if (f->state == MEMO_BUSY) {
		snprintf(why, why_len, "function %u calls itself (recursion)", f->id);
		return -EINVAL;
	}
	/* also bounds this recursion on hostile chains */
	uint32_t max_depth = lim->max_call_depth ? lim->max_call_depth : 1024;
	if (level > max_depth) {
		snprintf(why, why_len, "calls nest over rudad's limit of %u deep", max_depth);
		return -EINVAL;
	}
	f->state = MEMO_BUSY;
	uint64_t total = f->own;
	uint32_t depth = 0;
	for (uint32_t k = 0; k < f->ncalls; k++) {
		uint32_t callee = g->calls[f->first_call + k];
		uint32_t idx = callee < g->cap_index ? g->index[callee] : 0;
		if (!idx)
			continue; /* the validator has refused calls to non-functions */
		struct function *c = &g->functions[idx - 1];
		c->called = 1;
		int err = walk_calls(g, c, lim, level + 1, why, why_len);
		if (err)
			return err;
		total = sat_add(total, c->inlined);
		if (c->depth > depth)
			depth = c->depth;
	}
	f->inlined = total;
	f->depth = depth + 1;
	f->state = MEMO_DONE;
	if (f->depth > max_depth) { /* a chain below a function walked before */
		snprintf(why, why_len, "calls nest over rudad's limit of %u deep", max_depth);
		return -EINVAL;
	}
	return 0;
}

int ruda__spirv_check_calls(const struct module *m, const struct ruda_spirv_limits *lim,
			    char *why, size_t why_len)
{
	struct call_graph g = {0};
	g.index = calloc(m->bound ? m->bound : 1, sizeof(*g.index));
	if (!g.index) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	g.cap_index = m->bound;
	int err = each_instruction(m, gather_calls, &g);
	uint64_t total = 0;
	/* every function, reachable or not: some drivers compile them all */
	for (uint32_t i = 0; !err && i < g.nfunctions; i++)
		err = walk_calls(&g, &g.functions[i], lim, 1, why, why_len);
	for (uint32_t i = 0; !err && i < g.nfunctions; i++)
		if (!g.functions[i].called)
			total = sat_add(total, g.functions[i].inlined);
	if (err == -ENOMEM)
		snprintf(why, why_len, "out of memory");
	if (!err && lim->max_inlined_instructions && total > lim->max_inlined_instructions) {
		snprintf(why, why_len,
			 "inlining would make %llu instructions, limit %llu (rudad's)",
			 (unsigned long long)total,
			 (unsigned long long)lim->max_inlined_instructions);
		err = -EINVAL;
	}
	free(g.functions);
	free(g.calls);
	free(g.index);
	return err;
}

int ruda__spirv_check_limits(const struct module *m, const struct ruda_spirv_layout *l,
			     char *why, size_t why_len)
{
	const struct ruda_spirv_limits *lim = l->limits;
	struct limits_check lc = {.m = m, .layout = l, .why = why, .why_len = why_len};
	/* the entry point comes before its execution modes in every module */
	if (each_instruction(m, gather_limits, &lc) < 0) {
		snprintf(why, why_len, "the size of variable %u cannot be evaluated", lc.unsized);
		return -EINVAL;
	}
	int err = check_workgroup(&lc);
	if (err)
		return err;
	if (lim->max_shared_bytes && lc.shared > lim->max_shared_bytes) {
		snprintf(why, why_len,
			 "shared memory of %llu bytes is over the device's "
			 "maxComputeSharedMemorySize = %u",
			 (unsigned long long)lc.shared, lim->max_shared_bytes);
		return -EINVAL;
	}
	if (lim->max_private_bytes && lc.private_bytes > lim->max_private_bytes) {
		snprintf(why, why_len,
			 "private memory of %llu bytes per invocation is over rudad's limit of %u",
			 (unsigned long long)lc.private_bytes, lim->max_private_bytes);
		return -EINVAL;
	}
	return 0;
}
