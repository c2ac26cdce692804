/*
 * The first-launch baseline: a new process that uses plain Vulkan the way a
 * program without rudad must. It creates an instance and a device, builds a
 * pipeline for tests/shaders/spec_fill.comp with VALUE = argv[2] (so the
 * bench can make every run's kernel one the driver has never seen), runs it
 * once over 256 words and checks them. Exits 0 only on a correct result.
 *
 *   first_vk SPIRV VALUE
 *
 * $RUDA_BENCH_DEVICE picks the device as rudad's --device does (an index or
 * part of a name); otherwise the best one by rudad's ranking. Prints the
 * time of each phase on stdout for the bench's breakdown.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <vulkan/vulkan.h>

#define WORDS 256u

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

#define VK(call)                                                                   \
	do {                                                                       \
		VkResult r_ = (call);                                              \
		if (r_ != VK_SUCCESS) {                                            \
			fprintf(stderr, "first_vk: %s failed: %d\n", #call, r_); \
			return 1;                                                  \
		}                                                                  \
	} while (0)

static int rank(VkPhysicalDeviceType t)
{
	switch (t) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
	default: return 0;
	}
}

static int pick(VkPhysicalDevice *devs, uint32_t n, const char *sel)
{
	int best = -1, best_rank = -1;
	for (uint32_t i = 0; i < n; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(devs[i], &p);
		if (sel && *sel) {
			char *end;
			unsigned long k = strtoul(sel, &end, 10);
			if (!*end) {
				if (k == i)
					return (int)i;
				continue;
			}
			if (strcasestr(p.deviceName, sel))
				return (int)i;
			continue;
		}
		if (rank(p.deviceType) > best_rank) {
			best = (int)i;
			best_rank = rank(p.deviceType);
		}
	}
	return best;
}

int main(int argc, char **argv)
{
	double t0 = now_ms();
	if (argc != 3) {
		fprintf(stderr, "usage: first_vk SPIRV VALUE\n");
		return 2;
	}
	uint32_t value = (uint32_t)strtoul(argv[2], NULL, 0);
	FILE *f = fopen(argv[1], "rb");
	if (!f) {
		perror(argv[1]);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint32_t *code = malloc((size_t)len);
	if (!code || fread(code, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "first_vk: cannot read %s\n", argv[1]);
		return 1;
	}
	fclose(f);

	VkApplicationInfo app = {
		.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
		.pApplicationName = "first_vk",
		.apiVersion = VK_API_VERSION_1_2,
	};
	VkInstanceCreateInfo ii = {
		.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
		.pApplicationInfo = &app,
	};
	VkInstance instance;
	VK(vkCreateInstance(&ii, NULL, &instance));
	uint32_t ndev = 0;
	VK(vkEnumeratePhysicalDevices(instance, &ndev, NULL));
	VkPhysicalDevice devs[16];
	if (ndev > 16)
		ndev = 16;
	VK(vkEnumeratePhysicalDevices(instance, &ndev, devs));
	int which = pick(devs, ndev, getenv("RUDA_BENCH_DEVICE"));
	if (which < 0) {
		fprintf(stderr, "first_vk: no Vulkan device\n");
		return 1;
	}
	VkPhysicalDevice phys = devs[which];
	double t_instance = now_ms();

	uint32_t nfam = 0;
	vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, NULL);
	VkQueueFamilyProperties fams[32];
	if (nfam > 32)
		nfam = 32;
	vkGetPhysicalDeviceQueueFamilyProperties(phys, &nfam, fams);
	int family = -1;
	for (uint32_t i = 0; i < nfam; i++)
		if (fams[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
			family = (int)i;
			break;
		}
	if (family < 0) {
		fprintf(stderr, "first_vk: no compute queue\n");
		return 1;
	}
	float prio = 1.0f;
	VkDeviceQueueCreateInfo qi = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO,
		.queueFamilyIndex = (uint32_t)family,
		.queueCount = 1,
		.pQueuePriorities = &prio,
	};
	VkDeviceCreateInfo di = {
		.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO,
		.queueCreateInfoCount = 1,
		.pQueueCreateInfos = &qi,
	};
	VkDevice dev;
	VK(vkCreateDevice(phys, &di, NULL, &dev));
	VkQueue queue;
	vkGetDeviceQueue(dev, (uint32_t)family, 0, &queue);

	/* a host-visible storage buffer the kernel writes and we read */
	VkBufferCreateInfo bi = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = WORDS * 4,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkBuffer buf;
	VK(vkCreateBuffer(dev, &bi, NULL, &buf));
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(dev, buf, &req);
	VkPhysicalDeviceMemoryProperties mp;
	vkGetPhysicalDeviceMemoryProperties(phys, &mp);
	int type = -1;
	VkMemoryPropertyFlags want =
		VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
	for (uint32_t i = 0; i < mp.memoryTypeCount && type < 0; i++)
		if ((req.memoryTypeBits & (1u << i)) && (mp.memoryTypes[i].propertyFlags & want) == want)
			type = (int)i;
	if (type < 0) {
		fprintf(stderr, "first_vk: no host-visible memory\n");
		return 1;
	}
	VkMemoryAllocateInfo ai = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = (uint32_t)type,
	};
	VkDeviceMemory mem;
	VK(vkAllocateMemory(dev, &ai, NULL, &mem));
	VK(vkBindBufferMemory(dev, buf, mem, 0));
	uint32_t *words;
	VK(vkMapMemory(dev, mem, 0, VK_WHOLE_SIZE, 0, (void **)&words));
	memset(words, 0, WORDS * 4);
	double t_device = now_ms();

	VkShaderModuleCreateInfo mi = {
		.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
		.codeSize = (size_t)len,
		.pCode = code,
	};
	VkShaderModule module;
	VK(vkCreateShaderModule(dev, &mi, NULL, &module));
	VkDescriptorSetLayoutBinding lb = {
		.binding = 0,
		.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		.descriptorCount = 1,
		.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT,
	};
	VkDescriptorSetLayoutCreateInfo li = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
		.bindingCount = 1,
		.pBindings = &lb,
	};
	VkDescriptorSetLayout set_layout;
	VK(vkCreateDescriptorSetLayout(dev, &li, NULL, &set_layout));
	VkPushConstantRange push = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .size = 4};
	VkPipelineLayoutCreateInfo pli = {
		.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
		.setLayoutCount = 1,
		.pSetLayouts = &set_layout,
		.pushConstantRangeCount = 1,
		.pPushConstantRanges = &push,
	};
	VkPipelineLayout layout;
	VK(vkCreatePipelineLayout(dev, &pli, NULL, &layout));
	VkSpecializationMapEntry entry = {.constantID = 0, .offset = 0, .size = 4};
	VkSpecializationInfo spec = {
		.mapEntryCount = 1,
		.pMapEntries = &entry,
		.dataSize = 4,
		.pData = &value,
	};
	VkComputePipelineCreateInfo ci = {
		.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
		.stage = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
			.stage = VK_SHADER_STAGE_COMPUTE_BIT,
			.module = module,
			.pName = "main",
			.pSpecializationInfo = &spec,
		},
		.layout = layout,
	};
	VkPipeline pipeline;
	VK(vkCreateComputePipelines(dev, VK_NULL_HANDLE, 1, &ci, NULL, &pipeline));
	double t_pipeline = now_ms();

	VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, .descriptorCount = 1};
	VkDescriptorPoolCreateInfo dpi = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
		.maxSets = 1,
		.poolSizeCount = 1,
		.pPoolSizes = &ps,
	};
	VkDescriptorPool dpool;
	VK(vkCreateDescriptorPool(dev, &dpi, NULL, &dpool));
	VkDescriptorSetAllocateInfo dsi = {
		.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
		.descriptorPool = dpool,
		.descriptorSetCount = 1,
		.pSetLayouts = &set_layout,
	};
	VkDescriptorSet set;
	VK(vkAllocateDescriptorSets(dev, &dsi, &set));
	VkDescriptorBufferInfo dbi = {.buffer = buf, .range = VK_WHOLE_SIZE};
	VkWriteDescriptorSet w = {
		.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET,
		.dstSet = set,
		.dstBinding = 0,
		.descriptorCount = 1,
		.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
		.pBufferInfo = &dbi,
	};
	vkUpdateDescriptorSets(dev, 1, &w, 0, NULL);

	VkCommandPoolCreateInfo cpi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
		.queueFamilyIndex = (uint32_t)family,
	};
	VkCommandPool pool;
	VK(vkCreateCommandPool(dev, &cpi, NULL, &pool));
	VkCommandBufferAllocateInfo cai = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = pool,
		.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
		.commandBufferCount = 1,
	};
	VkCommandBuffer cmd;
	VK(vkAllocateCommandBuffers(dev, &cai, &cmd));
	VkCommandBufferBeginInfo cbi = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT,
	};
	VK(vkBeginCommandBuffer(cmd, &cbi));
	vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
	vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, layout, 0, 1, &set, 0, NULL);
	uint32_t count = WORDS;
	vkCmdPushConstants(cmd, layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, 4, &count);
	vkCmdDispatch(cmd, WORDS / 64, 1, 1);
	VkMemoryBarrier host = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_HOST_READ_BIT,
	};
	vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT,
			     0, 1, &host, 0, NULL, 0, NULL);
	VK(vkEndCommandBuffer(cmd));
	VkFenceCreateInfo fi = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
	VkFence fence;
	VK(vkCreateFence(dev, &fi, NULL, &fence));
	VkSubmitInfo si = {
		.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO,
		.commandBufferCount = 1,
		.pCommandBuffers = &cmd,
	};
	VK(vkQueueSubmit(queue, 1, &si, fence));
	VK(vkWaitForFences(dev, 1, &fence, VK_TRUE, 60ull * 1000000000ull));
	int bad = 0;
	for (uint32_t i = 0; i < WORDS; i++)
		if (words[i] != value) {
			fprintf(stderr, "first_vk: word %u is %u, expected %u\n", i, words[i], value);
			bad = 1;
			break;
		}
	double t_run = now_ms();

	vkDestroyFence(dev, fence, NULL);
	vkDestroyCommandPool(dev, pool, NULL);
	vkDestroyDescriptorPool(dev, dpool, NULL);
	vkDestroyPipeline(dev, pipeline, NULL);
	vkDestroyPipelineLayout(dev, layout, NULL);
	vkDestroyDescriptorSetLayout(dev, set_layout, NULL);
	vkDestroyShaderModule(dev, module, NULL);
	vkUnmapMemory(dev, mem);
	vkDestroyBuffer(dev, buf, NULL);
	vkFreeMemory(dev, mem, NULL);
	vkDestroyDevice(dev, NULL);
	vkDestroyInstance(instance, NULL);
	free(code);
	double t_end = now_ms();
	printf("phases: instance %.2f device %.2f pipeline %.2f run %.2f teardown %.2f\n",
	       t_instance - t0, t_device - t_instance, t_pipeline - t_device, t_run - t_pipeline,
	       t_end - t_run);
	return bad;
}
