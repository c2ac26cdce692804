#include "exec/pipeline_build.h"

#include <stdbool.h>
#include <string.h>

static bool within_limits(const struct ruda_pipeline_source *src)
{
	if (src->binding_count > RUDA_PIPELINE_MAX_BINDINGS ||
	    src->nspec > RUDA_PIPELINE_MAX_SPEC_CONSTANTS)
		return false;
	for (uint32_t i = 0; i < src->nspec; i++)
		if (src->spec[i].size == 0 || src->spec[i].size > sizeof(src->spec[i].value))
			return false;
	return true;
}

static VkResult make_layouts(VkDevice vk, const struct ruda_pipeline_source *src,
			     struct ruda_pipeline_objects *out)
{
	VkDescriptorSetLayoutBinding bindings[RUDA_PIPELINE_MAX_BINDINGS];
	for (uint32_t i = 0; i < src->binding_count; i++)
		bindings[i] = (VkDescriptorSetLayoutBinding){
			.binding = i,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.descriptorCount = 1,
			.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		};
	VkDescriptorSetLayoutCreateInfo set = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
		.bindingCount = src->binding_count,
		.pBindings = bindings,
	};
	VkResult r = vkCreateDescriptorSetLayout(vk, &set, NULL, &out->set_layout);
	if (r != VK_SUCCESS)
		return r;
	VkPushConstantRange push = {
		.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
		.size = src->push_constant_size,
	};
	VkPipelineLayoutCreateInfo layout = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &out->set_layout,
		.pushConstantRangeCount = src->push_constant_size ? 1 : 0,
		.pPushConstantRanges = &push,
	};
	return vkCreatePipelineLayout(vk, &layout, NULL, &out->layout);
}

VkResult ruda__pipeline_build(VkDevice vk, VkPipelineCache cache,
			      const struct ruda_pipeline_source *src,
			      struct ruda_pipeline_objects *out)
{
	memset(out, 0, sizeof(*out));
	if (!within_limits(src))
		return VK_ERROR_INITIALIZATION_FAILED;
	VkShaderModuleCreateInfo module = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = src->spirv_size,
		.pCode = src->spirv,
	};
	VkResult r = vkCreateShaderModule(vk, &module, NULL, &out->module);
	if (r == VK_SUCCESS)
		r = make_layouts(vk, src, out);
	if (r != VK_SUCCESS)
		return r;
	/* the constants packed one after another, each its own size */
	VkSpecializationMapEntry entries[RUDA_PIPELINE_MAX_SPEC_CONSTANTS];
	uint8_t data[RUDA_PIPELINE_MAX_SPEC_CONSTANTS * sizeof(src->spec->value)];
	uint32_t used = 0;
	for (uint32_t i = 0; i < src->nspec; i++) {
		entries[i] = (VkSpecializationMapEntry){
			.constantID = src->spec[i].id,
			.offset = used,
			.size = src->spec[i].size,
		};
		memcpy(data + used, &src->spec[i].value, src->spec[i].size);
		used += src->spec[i].size;
	}
	VkSpecializationInfo spec = {
		.mapEntryCount = src->nspec,
		.pMapEntries = entries,
		.dataSize = used,
		.pData = data,
	};
	VkComputePipelineCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = out->module,
			.pName = src->entry_point,
			.pSpecializationInfo = src->nspec ? &spec : NULL,
		},
		.layout = out->layout,
	};
	r = vkCreateComputePipelines(vk, cache, 1, &info, NULL, &out->pipeline);
	if (r != VK_SUCCESS)
		out->pipeline = VK_NULL_HANDLE; /* drivers may leave it unset */
	return r;
}

void ruda__pipeline_objects_destroy(VkDevice vk, struct ruda_pipeline_objects *objs)
{
	if (objs->pipeline)
		vkDestroyPipeline(vk, objs->pipeline, NULL);
	if (objs->layout)
		vkDestroyPipelineLayout(vk, objs->layout, NULL);
	if (objs->set_layout)
		vkDestroyDescriptorSetLayout(vk, objs->set_layout, NULL);
	if (objs->module)
		vkDestroyShaderModule(vk, objs->module, NULL);
	memset(objs, 0, sizeof(*objs));
}

void ruda__push_storage_buffers(PFN_vkCmdPushDescriptorSetKHR push, VkCommandBuffer cmd,
				VkPipelineLayout layout, const VkDescriptorBufferInfo *infos,
				uint32_t n)
{
	VkWriteDescriptorSet writes[RUDA_PIPELINE_MAX_BINDINGS];
	for (uint32_t i = 0; i < n; i++)
		writes[i] = (VkWriteDescriptorSet){
			.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
			.dstBinding = i,
			.descriptorCount = 1,
			.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
			.pBufferInfo = &infos[i],
		};
	if (n)
		push(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, n, writes);
}
