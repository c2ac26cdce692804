/* Checks on client SPIR-V before it reaches the driver: SPIRV-Tools
 * validation, then the facts rudad relies on (entry point, layout). */
#ifndef RUDA_SPIRV_H
#define RUDA_SPIRV_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

/*
 * 0 when `words` is a valid module for `api_version` with a GLCompute entry
 * point named `entry`, using descriptor set 0 bindings below
 * `binding_count` only and no physical storage buffer pointers. Otherwise
 * -EINVAL with the reason in `why`.
 */
int ruda__spirv_check(const uint32_t *words, size_t nwords, uint32_t api_version,
		      const char *entry, uint32_t binding_count, char *why, size_t why_len);

#endif
