/* Unit tests for daemon/common/spirv.c: what rudad accepts as a kernel. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* the header defines this constant; spirv.o (linked in) does too */
#define kDefaultMaxIdBound test_spirv_default_max_id_bound
#include <spirv-tools/libspirv.h>
#undef kDefaultMaxIdBound
#include <vulkan/vulkan.h>

#include "common/spirv.h"
#include "spirv_calls.h"

#define API VK_MAKE_API_VERSION(0, 1, 2, 0)
#define OP_CAPABILITY 17u
#define OP_ENTRY_POINT 15u
#define OP_DECORATE 71u
#define DECORATION_BINDING 33u
#define DECORATION_DESCRIPTOR_SET 34u
#define CAPABILITY_PHYSICAL_STORAGE_BUFFER 5347u

struct module {
	uint32_t *words;
	size_t n;
};

static struct module load_fill(void)
{
	size_t size = 0;
	struct module m = {.words = test_load_spirv("fill", &size)};
	ck_assert_uint_eq(size % 4, 0);
	m.n = size / 4;
	ck_assert_uint_gt(m.n, 5);
	return m;
}

static const struct ruda_spirv_features all_features = {
	true, true, true, true, true, true, true, true, true, true, true, true,
};

static int check_with(const struct module *m, const char *entry, uint32_t bindings,
		      uint32_t push_size, const struct ruda_spirv_features *features, char *why,
		      size_t why_len)
{
	struct ruda_spirv_layout layout = {
		.api_version = API,
		.entry_point = entry,
		.binding_count = bindings,
		.push_constant_size = push_size,
		.features = features,
	};
	why[0] = '\0';
	return ruda__spirv_check(m->words, m->n, &layout, why, why_len);
}

/* fill.spv's layout: one binding, 8 bytes of push constants. */
static int check(const struct module *m, const char *entry, uint32_t bindings, char *why,
		 size_t why_len)
{
	return check_with(m, entry, bindings, 8, &all_features, why, why_len);
}

static struct module load(const char *name)
{
	size_t size = 0;
	struct module m = {.words = test_load_spirv(name, &size)};
	m.n = size / 4;
	return m;
}

/* Index of the first instruction with `opcode` (and, for OpDecorate, the
 * given decoration), or 0 when absent. */
static size_t find_instruction(const struct module *m, uint32_t opcode, uint32_t decoration)
{
	for (size_t i = 5; i < m->n;) {
		uint32_t count = m->words[i] >> 16, op = m->words[i] & 0xffff;
		ck_assert_uint_gt(count, 0);
		if (op == opcode && (opcode != OP_DECORATE || m->words[i + 2] == decoration))
			return i;
		i += count;
	}
	return 0;
}

/* Expect a refusal with a reason. */
static void expect_refused(const struct module *m, const char *entry, uint32_t bindings,
			   const char *what)
{
	char why[512];
	int rc = check(m, entry, bindings, why, sizeof(why));
	ck_assert_msg(rc == -EINVAL, "%s: expected -EINVAL, got %d", what, rc);
	ck_assert_msg(why[0] != '\0', "%s: refused without a reason", what);
}

START_TEST(accepts_fill)
{
	struct module m = load_fill();
	char why[512];
	int rc = check(&m, "main", 1, why, sizeof(why));
	ck_assert_msg(rc == 0, "fill.spv refused: %s", why);
	/* more bindings than the module uses is fine */
	ck_assert_int_eq(check(&m, "main", 4, why, sizeof(why)), 0);
	free(m.words);
}
END_TEST

/* The bindings a module may write: what a failed launch marks. */
static uint64_t writable_of(const struct module *m, uint32_t bindings, uint32_t push_size)
{
	uint64_t writable = 0xdeadbeef;
	struct ruda_spirv_layout layout = {
		.api_version = API,
		.entry_point = "main",
		.binding_count = bindings,
		.push_constant_size = push_size,
		.features = &all_features,
		.writable = &writable,
	};
	char why[512] = "";
	int rc = ruda__spirv_check(m->words, m->n, &layout, why, sizeof(why));
	ck_assert_msg(rc == 0, "refused: %s", why);
	return writable;
}

/* NonWritable on a variable (SPIR-V 1.4 and later), on one member twice
 * (not the whole block), on every member, and two variables sharing a
 * binding, one of them writable. */
static const char non_writable_asm[] =
	"OpCapability Shader\n"
	"OpMemoryModel Logical GLSL450\n"
	"OpEntryPoint GLCompute %main \"main\" %v0 %v1 %v2 %v3 %v4\n"
	"OpExecutionMode %main LocalSize 1 1 1\n"
	"OpDecorate %S1 Block\n"
	"OpMemberDecorate %S1 0 Offset 0\n"
	"OpDecorate %S2 Block\n"
	"OpMemberDecorate %S2 0 Offset 0\n"
	"OpMemberDecorate %S2 1 Offset 4\n"
	"OpMemberDecorate %S2 0 NonWritable\n"
	"OpMemberDecorate %S2 0 NonWritable\n"
	"OpDecorate %S3 Block\n"
	"OpMemberDecorate %S3 0 Offset 0\n"
	"OpMemberDecorate %S3 1 Offset 4\n"
	"OpMemberDecorate %S3 0 NonWritable\n"
	"OpMemberDecorate %S3 1 NonWritable\n"
	"OpDecorate %v0 DescriptorSet 0\n"
	"OpDecorate %v0 Binding 0\n"
	"OpDecorate %v0 NonWritable\n"
	"OpDecorate %v1 DescriptorSet 0\n"
	"OpDecorate %v1 Binding 1\n"
	"OpDecorate %v2 DescriptorSet 0\n"
	"OpDecorate %v2 Binding 2\n"
	"OpDecorate %v3 DescriptorSet 0\n"
	"OpDecorate %v3 Binding 3\n"
	"OpDecorate %v4 DescriptorSet 0\n"
	"OpDecorate %v4 Binding 3\n"
	"%void = OpTypeVoid\n"
	"%fn = OpTypeFunction %void\n"
	"%uint = OpTypeInt 32 0\n"
	"%S1 = OpTypeStruct %uint\n"
	"%S2 = OpTypeStruct %uint %uint\n"
	"%S3 = OpTypeStruct %uint %uint\n"
	"%pS1 = OpTypePointer StorageBuffer %S1\n"
	"%pS2 = OpTypePointer StorageBuffer %S2\n"
	"%pS3 = OpTypePointer StorageBuffer %S3\n"
	"%v0 = OpVariable %pS1 StorageBuffer\n"
	"%v1 = OpVariable %pS2 StorageBuffer\n"
	"%v2 = OpVariable %pS3 StorageBuffer\n"
	"%v3 = OpVariable %pS3 StorageBuffer\n"
	"%v4 = OpVariable %pS1 StorageBuffer\n"
	"%main = OpFunction %void None %fn\n"
	"%entry = OpLabel\n"
	"OpReturn\n"
	"OpFunctionEnd\n";

START_TEST(reports_writable_bindings)
{
	/* GLSL `readonly buffer` (NonWritable on the block's members) */
	struct module m = load("saxpy"); /* x readonly, y read-write */
	ck_assert_uint_eq(writable_of(&m, 2, 8), 0x2);
	free(m.words);
	m = load("copy"); /* src readonly, dst writeonly */
	ck_assert_uint_eq(writable_of(&m, 2, 4), 0x2);
	free(m.words);
	m = load("fill");
	ck_assert_uint_eq(writable_of(&m, 1, 8), 0x1);
	/* bindings the module never declares are not written */
	ck_assert_uint_eq(writable_of(&m, 4, 8), 0x1);
	free(m.words);

	spv_context ctx = spvContextCreate(SPV_ENV_VULKAN_1_2);
	spv_binary bin = NULL;
	spv_diagnostic diag = NULL;
	ck_assert_int_eq(spvTextToBinary(ctx, non_writable_asm, sizeof(non_writable_asm) - 1, &bin,
					 &diag),
			 SPV_SUCCESS);
	struct module a = {.words = bin->code, .n = bin->wordCount};
	ck_assert_uint_eq(writable_of(&a, 4, 0), 0xa);
	spvBinaryDestroy(bin);
	spvDiagnosticDestroy(diag);
	spvContextDestroy(ctx);
}
END_TEST

START_TEST(refuses_bad_magic)
{
	struct module m = load_fill();
	m.words[0] ^= 0x1;
	expect_refused(&m, "main", 1, "bad magic");
	/* a byte-swapped module is not accepted either */
	m.words[0] = 0x03022307u;
	expect_refused(&m, "main", 1, "byte-swapped magic");
	free(m.words);
}
END_TEST

START_TEST(refuses_short)
{
	struct module m = load_fill();
	for (size_t n = 0; n < 5; n++) {
		struct module s = {.words = m.words, .n = n};
		expect_refused(&s, "main", 1, "fewer than 5 words");
	}
	/* a header alone is not a module with an entry point */
	struct module h = {.words = m.words, .n = 5};
	expect_refused(&h, "main", 1, "header only");
	free(m.words);
}
END_TEST

START_TEST(refuses_garbage_after_header)
{
	struct module m = load_fill();
	for (uint64_t seed = 1; seed <= 20; seed++) {
		uint32_t words[5 + 64];
		memcpy(words, m.words, 5 * sizeof(uint32_t));
		test_fill_random(words + 5, 64 * sizeof(uint32_t), seed);
		struct module g = {.words = words, .n = 5 + 64};
		expect_refused(&g, "main", 1, "random garbage");
	}
	free(m.words);
}
END_TEST

START_TEST(refuses_wrong_entry)
{
	struct module m = load_fill();
	char why[512];
	ck_assert_int_eq(check(&m, "other", 1, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "other") != NULL, "reason does not name the entry: %s", why);
	/* a prefix of the real name is not the real name */
	ck_assert_int_eq(check(&m, "mai", 1, why, sizeof(why)), -EINVAL);
	ck_assert_int_eq(check(&m, "", 1, why, sizeof(why)), -EINVAL);
	free(m.words);
}
END_TEST

START_TEST(refuses_undeclared_binding)
{
	struct module m = load_fill();
	char why[512];
	ck_assert_int_eq(check(&m, "main", 0, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "binding") != NULL, "unexpected reason: %s", why);
	/* binding 1 with only one declared */
	size_t at = find_instruction(&m, OP_DECORATE, DECORATION_BINDING);
	ck_assert_uint_gt(at, 0);
	m.words[at + 3] = 1;
	ck_assert_int_eq(check(&m, "main", 1, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "binding") != NULL, "unexpected reason: %s", why);
	ck_assert_int_eq(check(&m, "main", 2, why, sizeof(why)), 0);
	free(m.words);
}
END_TEST

START_TEST(refuses_other_descriptor_set)
{
	struct module m = load_fill();
	size_t at = find_instruction(&m, OP_DECORATE, DECORATION_DESCRIPTOR_SET);
	ck_assert_uint_gt(at, 0);
	m.words[at + 3] = 1;
	char why[512];
	ck_assert_int_eq(check(&m, "main", 1, why, sizeof(why)), -EINVAL);
	ck_assert_msg(strstr(why, "set") != NULL, "unexpected reason: %s", why);
	free(m.words);
}
END_TEST

START_TEST(refuses_corrupt_word_count)
{
	struct module m = load_fill();
	size_t at = find_instruction(&m, OP_ENTRY_POINT, 0);
	ck_assert_uint_gt(at, 0);
	uint32_t orig = m.words[at], count = orig >> 16;
	/* zero, too short, one too many, past the end */
	const uint32_t bad[] = {0, 1, count - 1, count + 1, 0xffff};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		m.words[at] = bad[i] << 16 | (orig & 0xffff);
		expect_refused(&m, "main", 1, "corrupt word count");
	}
	/* the first instruction too: a count of zero would loop forever in a
	 * careless walker */
	m.words[at] = orig;
	m.words[5] &= 0xffff;
	expect_refused(&m, "main", 1, "zero word count on the first instruction");
	free(m.words);
}
END_TEST

START_TEST(refuses_physical_storage_buffer)
{
	struct module m = load_fill();
	/* insert OpCapability PhysicalStorageBufferAddresses after the module's
	 * own OpCapability instructions (they come first) */
	size_t at = 5;
	while (at < m.n && (m.words[at] & 0xffff) == OP_CAPABILITY)
		at += m.words[at] >> 16;
	ck_assert_uint_gt(at, 5);
	uint32_t *w = malloc((m.n + 2) * sizeof(uint32_t));
	ck_assert_ptr_nonnull(w);
	memcpy(w, m.words, at * sizeof(uint32_t));
	w[at] = 2u << 16 | OP_CAPABILITY;
	w[at + 1] = CAPABILITY_PHYSICAL_STORAGE_BUFFER;
	memcpy(w + at + 2, m.words + at, (m.n - at) * sizeof(uint32_t));
	struct module p = {.words = w, .n = m.n + 2};
	char why[512];
	ck_assert_int_eq(check(&p, "main", 1, why, sizeof(why)), -EINVAL);
	/* rudad's own check or the validator may refuse it, not something else */
	ck_assert_msg(strstr(why, "PhysicalStorageBuffer") || strstr(why, "validation"),
		      "unexpected reason: \"%s\"", why);
	free(w);
	free(m.words);
}
END_TEST

START_TEST(reason_fits_small_buffer)
{
	/* the reason is truncated to the caller's buffer, and terminated */
	struct module m = load_fill();
	char why[8];
	memset(why, 'x', sizeof(why));
	ck_assert_int_eq(check(&m, "other", 1, why, sizeof(why)), -EINVAL);
	ck_assert_uint_lt(strnlen(why, sizeof(why)), sizeof(why));
	free(m.words);
}
END_TEST

START_TEST(push_constants_must_fit)
{
	char why[256];
	struct module m = load_fill(); /* 8 bytes of push constants */
	ck_assert_int_eq(check_with(&m, "main", 1, 4, &all_features, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "push constants take 8 bytes"));
	ck_assert_int_eq(check_with(&m, "main", 1, 8, &all_features, why, sizeof(why)), 0);
	free(m.words);
	m = load("tests/shaders/big_push");
	ck_assert_int_eq(check_with(&m, "main", 1, 60, &all_features, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "64 bytes"));
	ck_assert_int_eq(check_with(&m, "main", 1, 64, &all_features, why, sizeof(why)), 0);
	free(m.words);
}
END_TEST

START_TEST(refuses_uniform_buffers)
{
	char why[256];
	struct module m = load("tests/shaders/uniform_block");
	ck_assert_int_eq(check_with(&m, "main", 2, 0, &all_features, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "not a storage buffer"));
	free(m.words);
}
END_TEST

START_TEST(refuses_missing_features)
{
	char why[256];
	struct module m = load("tests/shaders/double");
	ck_assert_int_eq(check_with(&m, "main", 1, 0, &all_features, why, sizeof(why)), 0);
	struct ruda_spirv_features no_f64 = all_features;
	no_f64.float64 = false;
	ck_assert_int_eq(check_with(&m, "main", 1, 0, &no_f64, why, sizeof(why)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(why, "Float64"));
	free(m.words);
}
END_TEST

/* ---- limits (issue 26): lavapipe's, and rudad's defaults --------------- */

static const struct ruda_spirv_limits lavapipe_limits = {
	.max_workgroup_size = {1024, 1024, 1024},
	.max_workgroup_invocations = 1024,
	.max_shared_bytes = 32768,
	.max_private_bytes = RUDA_SPIRV_MAX_PRIVATE_BYTES,
	.max_words = RUDA_SPIRV_MAX_WORDS,
	.max_call_depth = RUDA_SPIRV_MAX_CALL_DEPTH,
	.max_inlined_instructions = RUDA_SPIRV_MAX_INLINED_INSTRUCTIONS,
};

static int check_limited(const struct module *m, uint32_t bindings, uint32_t push_size,
			 const ruda_spec_constant *spec, uint32_t nspec,
			 const struct ruda_spirv_limits *limits, char *why, size_t why_len)
{
	struct ruda_spirv_layout layout = {
		.api_version = API,
		.entry_point = "main",
		.binding_count = bindings,
		.push_constant_size = push_size,
		.features = &all_features,
		.limits = limits,
		.spec = spec,
		.nspec = nspec,
	};
	why[0] = '\0';
	return ruda__spirv_check(m->words, m->n, &layout, why, why_len);
}

/* Refused with every `needle` in the reason. */
#define expect_limit(rc, why, ...)                                                       \
	do {                                                                             \
		ck_assert_msg((rc) == -EINVAL, "accepted (%d): %s", (rc), (why));         \
		const char *needles_[] = {__VA_ARGS__};                                  \
		for (size_t i_ = 0; i_ < sizeof(needles_) / sizeof(needles_[0]); i_++)   \
			ck_assert_msg(strstr((why), needles_[i_]), "\"%s\" not in \"%s\"", \
				      needles_[i_], (why));                              \
	} while (0)

static int check_spec(const struct module *m, uint32_t id, uint64_t value, char *why,
		      size_t why_len)
{
	ruda_spec_constant c = {.id = id, .size = 4, .value = value};
	return check_limited(m, 1, 0, &c, 1, &lavapipe_limits, why, why_len);
}

START_TEST(limits_accept_normal_kernels)
{
	char why[512];
	struct module m = load_fill();
	ck_assert_msg(check_limited(&m, 1, 8, NULL, 0, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
	m = load("add_f32");
	ck_assert_msg(check_limited(&m, 3, 4, NULL, 0, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
	m = load("tests/shaders/spec_limits");
	ck_assert_msg(check_limited(&m, 1, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	/* exactly at each limit is fine: 1024 invocations, 32 KiB shared
	 * (2 * 4096 floats), 16 KiB private (4096 floats) */
	ruda_spec_constant at[] = {{0, 32, 32}, {1, 4, 32}, {2, 4, 4096}, {3, 4, 4096}};
	at[0].size = 4;
	ck_assert_msg(check_limited(&m, 1, 0, at, 4, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_huge_workgroup)
{
	char why[512];
	struct module m = load("tests/shaders/huge_workgroup");
	int rc = check_limited(&m, 1, 0, NULL, 0, &lavapipe_limits, why, sizeof(why));
	expect_limit(rc, why, "1024x1024x64 = 67108864 invocations",
		     "maxComputeWorkGroupInvocations = 1024");
	/* without limits (the old behaviour) it passes: the limits did it */
	ck_assert_int_eq(check_limited(&m, 1, 0, NULL, 0, NULL, why, sizeof(why)), 0);
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_specialized_workgroup)
{
	char why[512];
	struct module m = load("tests/shaders/spec_limits");
	/* the WorkgroupSize builtin, evaluated with the request's values */
	expect_limit(check_spec(&m, 0, 2048, why, sizeof(why)), why, "x = 2048",
		     "WorkgroupSize", "maxComputeWorkGroupSize[0] = 1024");
	ruda_spec_constant sq[] = {{0, 4, 64}, {1, 4, 64}};
	expect_limit(check_limited(&m, 1, 0, sq, 2, &lavapipe_limits, why, sizeof(why)), why,
		     "64x64x1 = 4096 invocations", "maxComputeWorkGroupInvocations = 1024");
	expect_limit(check_spec(&m, 1, 0, why, sizeof(why)), why, "y is 0");
	/* 2^32 + 2 as an 8-byte value to a 32-bit constant: its low word */
	ruda_spec_constant wide = {.id = 0, .size = 8, .value = (1ull << 32) + 2};
	ck_assert_msg(check_limited(&m, 1, 0, &wide, 1, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_shared_memory)
{
	char why[512];
	struct module m = load("tests/shaders/huge_shared");
	expect_limit(check_limited(&m, 1, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)), why,
		     "shared memory of 67108864 bytes", "maxComputeSharedMemorySize = 32768");
	free(m.words);
	/* an array length made by OpSpecConstantOp (SHARED * 2) */
	m = load("tests/shaders/spec_limits");
	expect_limit(check_spec(&m, 2, 4097, why, sizeof(why)), why,
		     "shared memory of 32776 bytes", "maxComputeSharedMemorySize = 32768");
	expect_limit(check_spec(&m, 2, 0x7fffffff, why, sizeof(why)), why,
		     "shared memory of 17179869176 bytes");
	/* SHARED * 2 wraps to 0 in 32 bits: no valid array, refused */
	expect_limit(check_spec(&m, 2, 0x80000000u, why, sizeof(why)), why,
		     "cannot be evaluated");
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_private_memory)
{
	char why[512];
	struct module m = load("tests/shaders/huge_private");
	expect_limit(check_limited(&m, 1, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)), why,
		     "private memory of 64000 bytes per invocation", "limit of 16384");
	free(m.words);
	m = load("tests/shaders/spec_limits");
	expect_limit(check_spec(&m, 3, 4097, why, sizeof(why)), why,
		     "private memory of 16388 bytes");
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_compile_bomb)
{
	char why[512];
	/* 2^24 calls to a 6-instruction function, in 27 words a level */
	struct module m;
	m.words = test_spirv_calls(24, 2, 0, &m.n);
	ck_assert_uint_lt(m.n * 4, 6000);
	expect_limit(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)), why,
		     "inlining would make", "limit 262144");
	free(m.words);
	/* the same shape, small: fine */
	m.words = test_spirv_calls(8, 2, 0, &m.n);
	ck_assert_msg(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
	/* wide rather than deep: 64 levels of 1000 calls saturates the count */
	m.words = test_spirv_calls(60, 1000, 0, &m.n);
	expect_limit(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)), why,
		     "inlining would make 18446744073709551615 instructions");
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_deep_calls)
{
	char why[512];
	struct module m;
	m.words = test_spirv_calls(RUDA_SPIRV_MAX_CALL_DEPTH, 1, 0, &m.n);
	expect_limit(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)), why,
		     "calls nest over rudad's limit of 64 deep");
	free(m.words);
	m.words = test_spirv_calls(RUDA_SPIRV_MAX_CALL_DEPTH - 1, 1, 0, &m.n);
	ck_assert_msg(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)) == 0,
		      "%s", why);
	free(m.words);
	/* 100 000 deep: refused without overflowing rudad's stack */
	m.words = test_spirv_calls(100000, 1, 0, &m.n);
	struct ruda_spirv_limits big = lavapipe_limits;
	big.max_words = 0;
	expect_limit(check_limited(&m, 0, 0, NULL, 0, &big, why, sizeof(why)), why, "nest");
	free(m.words);
	/* recursion: the validator or rudad refuses it */
	m.words = test_spirv_calls(3, 1, 1, &m.n);
	ck_assert_int_eq(check_limited(&m, 0, 0, NULL, 0, &lavapipe_limits, why, sizeof(why)),
			 -EINVAL);
	free(m.words);
}
END_TEST

START_TEST(limits_refuse_oversize_module)
{
	char why[512];
	struct module m = load_fill();
	struct ruda_spirv_limits small = lavapipe_limits;
	small.max_words = (uint32_t)m.n - 1;
	expect_limit(check_limited(&m, 1, 8, NULL, 0, &small, why, sizeof(why)), why,
		     "words is over rudad's limit");
	small.max_words = (uint32_t)m.n;
	ck_assert_int_eq(check_limited(&m, 1, 8, NULL, 0, &small, why, sizeof(why)), 0);
	free(m.words);
}
END_TEST

static Suite *spirv_suite(void)
{
	Suite *s = suite_create("spirv");
	TCase *tc = tcase_create("check");
	tcase_set_timeout(tc, 30);
	tcase_add_test(tc, accepts_fill);
	tcase_add_test(tc, refuses_bad_magic);
	tcase_add_test(tc, refuses_short);
	tcase_add_test(tc, refuses_garbage_after_header);
	tcase_add_test(tc, refuses_wrong_entry);
	tcase_add_test(tc, refuses_undeclared_binding);
	tcase_add_test(tc, reports_writable_bindings);
	tcase_add_test(tc, refuses_other_descriptor_set);
	tcase_add_test(tc, refuses_corrupt_word_count);
	tcase_add_test(tc, refuses_physical_storage_buffer);
	tcase_add_test(tc, reason_fits_small_buffer);
	tcase_add_test(tc, push_constants_must_fit);
	tcase_add_test(tc, refuses_uniform_buffers);
	tcase_add_test(tc, refuses_missing_features);
	tcase_add_test(tc, limits_accept_normal_kernels);
	tcase_add_test(tc, limits_refuse_huge_workgroup);
	tcase_add_test(tc, limits_refuse_specialized_workgroup);
	tcase_add_test(tc, limits_refuse_shared_memory);
	tcase_add_test(tc, limits_refuse_private_memory);
	tcase_add_test(tc, limits_refuse_compile_bomb);
	tcase_add_test(tc, limits_refuse_deep_calls);
	tcase_add_test(tc, limits_refuse_oversize_module);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(spirv_suite());
	/* CK_FORK by default (each test in its own process); CK_FORK=no for debugging */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
