#include "spirv.h"

#include <errno.h>
#include <spirv-tools/libspirv.h>
#include <stdio.h>
#include <string.h>

#define SPIRV_MAGIC 0x07230203u
#define OP_CAPABILITY 17u
#define OP_ENTRY_POINT 15u
#define OP_DECORATE 71u
#define EXECUTION_MODEL_GLCOMPUTE 5u
#define DECORATION_BINDING 33u
#define DECORATION_DESCRIPTOR_SET 34u
#define CAPABILITY_PHYSICAL_STORAGE_BUFFER 5347u

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

int ruda__spirv_check(const uint32_t *words, size_t nwords, uint32_t api_version,
		      const char *entry, uint32_t binding_count, char *why, size_t why_len)
{
	if (nwords < 5 || words[0] != SPIRV_MAGIC) {
		snprintf(why, why_len, "not a SPIR-V module (bad magic number or too short)");
		return -EINVAL;
	}
	int err = validate(words, nwords, api_version, why, why_len);
	if (err)
		return err;

	int found_entry = 0;
	for (size_t i = 5; i < nwords;) {
		uint32_t count = words[i] >> 16, op = words[i] & 0xffff;
		/* the validator has checked every count; stay safe regardless */
		if (count == 0 || count > nwords - i)
			break;
		const uint32_t *operands = &words[i + 1];
		size_t noperands = count - 1;
		if (op == OP_CAPABILITY && noperands >= 1 &&
		    operands[0] == CAPABILITY_PHYSICAL_STORAGE_BUFFER) {
			snprintf(why, why_len,
				 "capability PhysicalStorageBufferAddresses escapes bounds checking");
			return -EINVAL;
		}
		if (op == OP_ENTRY_POINT && noperands >= 3 &&
		    operands[0] == EXECUTION_MODEL_GLCOMPUTE) {
			const char *name = (const char *)&operands[2];
			size_t max = (noperands - 2) * 4;
			if (strnlen(name, max) < max && strcmp(name, entry) == 0)
				found_entry = 1;
		}
		if (op == OP_DECORATE && noperands >= 3) {
			if (operands[1] == DECORATION_DESCRIPTOR_SET && operands[2] != 0) {
				snprintf(why, why_len,
					 "module uses descriptor set %u; kernels use set 0 only",
					 operands[2]);
				return -EINVAL;
			}
			if (operands[1] == DECORATION_BINDING && operands[2] >= binding_count) {
				snprintf(why, why_len,
					 "module uses binding %u but the kernel declares %u bindings",
					 operands[2], binding_count);
				return -EINVAL;
			}
		}
		i += count;
	}
	if (!found_entry) {
		snprintf(why, why_len, "no GLCompute entry point named \"%s\"", entry);
		return -EINVAL;
	}
	return 0;
}
