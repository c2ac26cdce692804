/*
 * Making the Vulkan objects of one compute pipeline: its shader module, a
 * push-descriptor set layout of storage buffers, the pipeline layout with
 * its push constant range, and the pipeline with its specialization
 * constants. The daemon (pipeline.c) keeps what it makes; the compile
 * worker (compile_child.c) makes the same and destroys it at once, so both
 * compile a kernel the one same way.
 */
#ifndef RUDA_PIPELINE_BUILD_H
#define RUDA_PIPELINE_BUILD_H

#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/common.h>

/* Callers check binding counts against the device before acquiring. */
#define RUDA_PIPELINE_MAX_BINDINGS 64u
#define RUDA_PIPELINE_MAX_SPEC_CONSTANTS 64u

/* What a pipeline is made from; all borrowed for the call. */
struct ruda_pipeline_source {
	const uint32_t *spirv;
	size_t spirv_size; /* bytes */
	const char *entry_point;
	uint32_t binding_count; /* at most RUDA_PIPELINE_MAX_BINDINGS */
	uint32_t push_constant_size;
	const ruda_spec_constant *spec; /* each of size 1 to 8 */
	uint32_t nspec;                 /* at most RUDA_PIPELINE_MAX_SPEC_CONSTANTS */
};

/* Each VK_NULL_HANDLE until made. */
struct ruda_pipeline_objects {
	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline pipeline;
};

/*
 * Make the objects of `src` into `out` (zeroed first), through `cache`
 * (may be VK_NULL_HANDLE). Returns the VkResult of the first call that
 * failed, VK_SUCCESS when all were made (callers need the driver's own
 * reason: it is what the worker reports and what maps out-of-memory);
 * VK_ERROR_INITIALIZATION_FAILED for a source past the limits above. On
 * failure, what was made is left in `out` for ruda__pipeline_objects_destroy.
 */
VkResult ruda__pipeline_build(VkDevice vk, VkPipelineCache cache,
			      const struct ruda_pipeline_source *src,
			      struct ruda_pipeline_objects *out);

/* Destroy whatever of `objs` was made and reset it to VK_NULL_HANDLE. */
void ruda__pipeline_objects_destroy(VkDevice vk, struct ruda_pipeline_objects *objs);

/* Record `infos[0..n)` (n at most RUDA_PIPELINE_MAX_BINDINGS) as storage
 * buffer bindings 0..n-1 of set 0 of `layout`, with `push` (the device's
 * vkCmdPushDescriptorSetKHR): how every kernel of rudad's gets its
 * buffers. */
void ruda__push_storage_buffers(PFN_vkCmdPushDescriptorSetKHR push, VkCommandBuffer cmd,
				VkPipelineLayout layout, const VkDescriptorBufferInfo *infos,
				uint32_t n);

#endif
