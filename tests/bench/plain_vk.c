/* What the plain-Vulkan probes share (plain_vk.h). */
#include "plain_vk.h"

#include <time.h>

static uint32_t *read_spirv(const char *dir, const char *name, size_t *size)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "cannot open %s\n", path);
		exit(1);
	}
	fseek(f, 0, SEEK_END);
	*size = (size_t)ftell(f);
	rewind(f);
	uint32_t *words = malloc(*size);
	if (!words || fread(words, 1, *size, f) != *size)
		exit(1);
	fclose(f);
	return words;
}

void plain_kernel_make(VkDevice dev, const char *dir, const char *name, uint32_t bindings,
		       uint32_t push, struct plain_kernel *k)
{
	size_t size;
	uint32_t *code = read_spirv(dir, name, &size);
	VkShaderModuleCreateInfo mi = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
				       .codeSize = size, .pCode = code};
	VK(vkCreateShaderModule(dev, &mi, NULL, &k->module));
	free(code);
	VkDescriptorSetLayoutBinding b[2];
	for (uint32_t i = 0; i < bindings && i < 2; i++)
		b[i] = (VkDescriptorSetLayoutBinding){.binding = i,
						      .descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
						      .descriptorCount = 1,
						      .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
	VkDescriptorSetLayoutCreateInfo si = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.flags = VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR,
		.bindingCount = bindings < 2 ? bindings : 2,
		.pBindings = b};
	VK(vkCreateDescriptorSetLayout(dev, &si, NULL, &k->set_layout));
	VkPushConstantRange range = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = push};
	VkPipelineLayoutCreateInfo li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
					 .setLayoutCount = 1,
					 .pSetLayouts = &k->set_layout,
					 .pushConstantRangeCount = 1,
					 .pPushConstantRanges = &range};
	VK(vkCreatePipelineLayout(dev, &li, NULL, &k->layout));
	VkComputePipelineCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			  .stage = VK_SHADER_STAGE_COMPUTE_BIT,
			  .module = k->module,
			  .pName = "main"},
		.layout = k->layout};
	VK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, NULL, &k->pipeline));
}

void plain_kernel_destroy(VkDevice dev, struct plain_kernel *k)
{
	vkDestroyPipeline(dev, k->pipeline, NULL);
	vkDestroyPipelineLayout(dev, k->layout, NULL);
	vkDestroyDescriptorSetLayout(dev, k->set_layout, NULL);
	vkDestroyShaderModule(dev, k->module, NULL);
}

double plain_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int plain_cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

VkPhysicalDevice plain_device_open(const char *app_name, uint32_t index, VkInstance *instance,
				   VkPhysicalDeviceProperties *props)
{
	VkApplicationInfo app = {.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
				 .pApplicationName = app_name,
				 .apiVersion = VK_API_VERSION_1_2};
	VkInstanceCreateInfo ii = {.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
				   .pApplicationInfo = &app};
	VK(vkCreateInstance(&ii, NULL, instance));
	uint32_t n = 0;
	vkEnumeratePhysicalDevices(*instance, &n, NULL);
	VkPhysicalDevice pds[16];
	if (n > 16)
		n = 16;
	vkEnumeratePhysicalDevices(*instance, &n, pds);
	if (index >= n) {
		fprintf(stderr, "no device %u\n", index);
		exit(1);
	}
	vkGetPhysicalDeviceProperties(pds[index], props);
	return pds[index];
}

void plain_buffer_make(VkPhysicalDevice pd, VkDevice dev, VkDeviceSize size, VkBuffer *buf,
		       VkDeviceMemory *mem)
{
	VkBufferCreateInfo bi = {.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
				 .size = size,
				 .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT};
	VK(vkCreateBuffer(dev, &bi, NULL, buf));
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(dev, *buf, &req);
	VkPhysicalDeviceMemoryProperties mp;
	vkGetPhysicalDeviceMemoryProperties(pd, &mp);
	uint32_t type = 0;
	for (uint32_t i = 0; i < mp.memoryTypeCount; i++)
		if ((req.memoryTypeBits & (1u << i)) &&
		    (mp.memoryTypes[i].propertyFlags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) {
			type = i;
			break;
		}
	VkMemoryAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
				   .allocationSize = req.size,
				   .memoryTypeIndex = type};
	VK(vkAllocateMemory(dev, &ai, NULL, mem));
	VK(vkBindBufferMemory(dev, *buf, *mem, 0));
}

void plain_timeline_wait(VkDevice dev, VkSemaphore sem, uint64_t value)
{
	VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO,
				  .semaphoreCount = 1,
				  .pSemaphores = &sem,
				  .pValues = &value};
	VK(vkWaitSemaphores(dev, &wi, 10ull * 1000 * 1000 * 1000));
}
