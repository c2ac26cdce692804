/*
 * A library for LD_PRELOAD that counts the live Vulkan objects of the
 * process (rudad under test): the create and destroy entry points the
 * loader exports are wrapped, counted in the shared file named by
 * $RUDA_VK_COUNT_FILE (struct vkcount, vkcount.h) and passed on to the
 * loader. Objects freed with their parent (command buffers with their
 * pool, descriptor sets with theirs) are subtracted then. Only what the
 * program calls through the loader's symbols is seen, which is how rudad
 * makes and destroys every object it counts.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <vulkan/vulkan.h>

#include "vkcount.h"

static struct vkcount fallback;
static struct vkcount *counts = &fallback;

__attribute__((constructor)) static void vkcount_open(void)
{
	const char *path = getenv("RUDA_VK_COUNT_FILE");
	if (!path)
		return;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (ftruncate(fd, sizeof(struct vkcount)) == 0) {
		void *map = mmap(NULL, sizeof(struct vkcount), PROT_READ | PROT_WRITE, MAP_SHARED,
				 fd, 0);
		if (map != MAP_FAILED) {
			counts = map;
			for (int i = 0; i < VKCOUNT_KINDS; i++)
				counts->live[i] = 0;
			__atomic_store_n(&counts->magic, VKCOUNT_MAGIC, __ATOMIC_RELEASE);
		}
	}
	close(fd);
}

static void add(enum vkcount_kind k, int64_t n)
{
	__atomic_fetch_add(&counts->live[k], n, __ATOMIC_RELAXED);
}

#define REAL(name)                                                                            \
	static PFN_##name real;                                                               \
	if (!real)                                                                            \
		real = (PFN_##name)dlsym(RTLD_NEXT, #name)

/* Command buffers and descriptor sets per parent, to subtract when the
 * parent goes. Few parents exist: a short list will do. */
struct parent {
	uint64_t handle;
	int64_t children;
};
static struct parent parents[256];
static pthread_mutex_t parents_lock = PTHREAD_MUTEX_INITIALIZER;

static void parent_add(uint64_t handle, int64_t n)
{
	pthread_mutex_lock(&parents_lock);
	struct parent *free_slot = NULL;
	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]); i++) {
		if (parents[i].handle == handle) {
			parents[i].children += n;
			pthread_mutex_unlock(&parents_lock);
			return;
		}
		if (!parents[i].handle && !free_slot)
			free_slot = &parents[i];
	}
	if (free_slot)
		*free_slot = (struct parent){handle, n};
	pthread_mutex_unlock(&parents_lock);
}

static int64_t parent_forget(uint64_t handle)
{
	int64_t n = 0;
	pthread_mutex_lock(&parents_lock);
	for (size_t i = 0; i < sizeof(parents) / sizeof(parents[0]); i++)
		if (parents[i].handle == handle) {
			n = parents[i].children;
			parents[i] = (struct parent){0, 0};
		}
	pthread_mutex_unlock(&parents_lock);
	return n;
}

/* vkCreateX(device, info, allocator, out) and vkDestroyX(device, x, allocator) */
#define SIMPLE(Type, kind)                                                                    \
	VKAPI_ATTR VkResult VKAPI_CALL vkCreate##Type(VkDevice d,                             \
						      const Vk##Type##CreateInfo *info,       \
						      const VkAllocationCallbacks *a,         \
						      Vk##Type *out)                          \
	{                                                                                     \
		REAL(vkCreate##Type);                                                         \
		VkResult r = real(d, info, a, out);                                           \
		if (r == VK_SUCCESS)                                                          \
			add(kind, 1);                                                         \
		return r;                                                                     \
	}                                                                                     \
	VKAPI_ATTR void VKAPI_CALL vkDestroy##Type(VkDevice d, Vk##Type x,                    \
						   const VkAllocationCallbacks *a)            \
	{                                                                                     \
		REAL(vkDestroy##Type);                                                        \
		if (x)                                                                        \
			add(kind, -1);                                                        \
		real(d, x, a);                                                                \
	}

SIMPLE(Buffer, VKCOUNT_BUFFER)
SIMPLE(PipelineLayout, VKCOUNT_PIPELINE_LAYOUT)
SIMPLE(DescriptorSetLayout, VKCOUNT_SET_LAYOUT)
SIMPLE(ShaderModule, VKCOUNT_SHADER_MODULE)
SIMPLE(PipelineCache, VKCOUNT_PIPELINE_CACHE)
SIMPLE(QueryPool, VKCOUNT_QUERY_POOL)
SIMPLE(Semaphore, VKCOUNT_SEMAPHORE)
SIMPLE(Fence, VKCOUNT_FENCE)

VKAPI_ATTR VkResult VKAPI_CALL vkCreateCommandPool(VkDevice d, const VkCommandPoolCreateInfo *info,
						   const VkAllocationCallbacks *a,
						   VkCommandPool *out)
{
	REAL(vkCreateCommandPool);
	VkResult r = real(d, info, a, out);
	if (r == VK_SUCCESS)
		add(VKCOUNT_COMMAND_POOL, 1);
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkDestroyCommandPool(VkDevice d, VkCommandPool pool,
						const VkAllocationCallbacks *a)
{
	REAL(vkDestroyCommandPool);
	if (pool) {
		add(VKCOUNT_COMMAND_POOL, -1);
		add(VKCOUNT_COMMAND_BUFFER, -parent_forget((uint64_t)pool));
	}
	real(d, pool, a);
}

VKAPI_ATTR VkResult VKAPI_CALL vkAllocateCommandBuffers(VkDevice d,
							const VkCommandBufferAllocateInfo *info,
							VkCommandBuffer *out)
{
	REAL(vkAllocateCommandBuffers);
	VkResult r = real(d, info, out);
	if (r == VK_SUCCESS) {
		add(VKCOUNT_COMMAND_BUFFER, info->commandBufferCount);
		parent_add((uint64_t)info->commandPool, info->commandBufferCount);
	}
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkFreeCommandBuffers(VkDevice d, VkCommandPool pool, uint32_t n,
						const VkCommandBuffer *cmds)
{
	REAL(vkFreeCommandBuffers);
	int64_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += cmds[i] != NULL;
	add(VKCOUNT_COMMAND_BUFFER, -k);
	parent_add((uint64_t)pool, -k);
	real(d, pool, n, cmds);
}

VKAPI_ATTR VkResult VKAPI_CALL vkCreateDescriptorPool(VkDevice d,
						      const VkDescriptorPoolCreateInfo *info,
						      const VkAllocationCallbacks *a,
						      VkDescriptorPool *out)
{
	REAL(vkCreateDescriptorPool);
	VkResult r = real(d, info, a, out);
	if (r == VK_SUCCESS)
		add(VKCOUNT_DESCRIPTOR_POOL, 1);
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkDestroyDescriptorPool(VkDevice d, VkDescriptorPool pool,
						   const VkAllocationCallbacks *a)
{
	REAL(vkDestroyDescriptorPool);
	if (pool) {
		add(VKCOUNT_DESCRIPTOR_POOL, -1);
		add(VKCOUNT_DESCRIPTOR_SET, -parent_forget((uint64_t)pool));
	}
	real(d, pool, a);
}

VKAPI_ATTR VkResult VKAPI_CALL vkAllocateDescriptorSets(VkDevice d,
							const VkDescriptorSetAllocateInfo *info,
							VkDescriptorSet *out)
{
	REAL(vkAllocateDescriptorSets);
	VkResult r = real(d, info, out);
	if (r == VK_SUCCESS) {
		add(VKCOUNT_DESCRIPTOR_SET, info->descriptorSetCount);
		parent_add((uint64_t)info->descriptorPool, info->descriptorSetCount);
	}
	return r;
}

VKAPI_ATTR VkResult VKAPI_CALL vkFreeDescriptorSets(VkDevice d, VkDescriptorPool pool, uint32_t n,
						    const VkDescriptorSet *sets)
{
	REAL(vkFreeDescriptorSets);
	int64_t k = 0;
	for (uint32_t i = 0; i < n; i++)
		k += sets[i] != VK_NULL_HANDLE;
	add(VKCOUNT_DESCRIPTOR_SET, -k);
	parent_add((uint64_t)pool, -k);
	return real(d, pool, n, sets);
}

VKAPI_ATTR VkResult VKAPI_CALL vkAllocateMemory(VkDevice d, const VkMemoryAllocateInfo *info,
						const VkAllocationCallbacks *a, VkDeviceMemory *out)
{
	REAL(vkAllocateMemory);
	VkResult r = real(d, info, a, out);
	if (r == VK_SUCCESS)
		add(VKCOUNT_MEMORY, 1);
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkFreeMemory(VkDevice d, VkDeviceMemory m,
					const VkAllocationCallbacks *a)
{
	REAL(vkFreeMemory);
	if (m)
		add(VKCOUNT_MEMORY, -1);
	real(d, m, a);
}

VKAPI_ATTR VkResult VKAPI_CALL vkCreateComputePipelines(VkDevice d, VkPipelineCache cache,
							uint32_t n,
							const VkComputePipelineCreateInfo *infos,
							const VkAllocationCallbacks *a,
							VkPipeline *out)
{
	REAL(vkCreateComputePipelines);
	VkResult r = real(d, cache, n, infos, a, out);
	for (uint32_t i = 0; i < n; i++)
		add(VKCOUNT_PIPELINE, out[i] != VK_NULL_HANDLE);
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkDestroyPipeline(VkDevice d, VkPipeline p,
					     const VkAllocationCallbacks *a)
{
	REAL(vkDestroyPipeline);
	if (p)
		add(VKCOUNT_PIPELINE, -1);
	real(d, p, a);
}

VKAPI_ATTR VkResult VKAPI_CALL vkCreateDevice(VkPhysicalDevice p, const VkDeviceCreateInfo *info,
					      const VkAllocationCallbacks *a, VkDevice *out)
{
	REAL(vkCreateDevice);
	VkResult r = real(p, info, a, out);
	if (r == VK_SUCCESS)
		add(VKCOUNT_DEVICE, 1);
	return r;
}

VKAPI_ATTR void VKAPI_CALL vkDestroyDevice(VkDevice d, const VkAllocationCallbacks *a)
{
	REAL(vkDestroyDevice);
	if (d)
		add(VKCOUNT_DEVICE, -1);
	real(d, a);
}
