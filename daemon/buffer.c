#include "buffer.h"

#include <stdlib.h>

#include "device.h"
#include "log.h"

static void buffer_destroy(struct ruda_ref *ref)
{
	struct ruda_buffer *b = (struct ruda_buffer *)ref;
	struct ruda_device *d = b->device;
	vkDestroyBuffer(d->vk, b->vk, NULL);
	vkFreeMemory(d->vk, b->memory, NULL);
	d->stats.bytes -= b->allocated;
	d->stats.buffers--;
	free(b);
}

ruda_status ruda__buffer_create(struct ruda_device *d, uint64_t size, struct ruda_buffer **out)
{
	if (size > d->max_allocation_size)
		return RUDA_ERROR_TOO_LARGE;
	struct ruda_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return RUDA_ERROR_OUT_OF_MEMORY;
	b->device = d;
	b->size = size;
	/* Vulkan has no empty buffers; round up to a word so fills work */
	uint64_t vk_size = size < 4 ? 4 : (size + 3) & ~(uint64_t)3;
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = vk_size,
		.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
			 VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	VkResult r = vkCreateBuffer(d->vk, &info, NULL, &b->vk);
	if (r != VK_SUCCESS) {
		free(b);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->vk, b->vk, &req);
	int type = ruda__device_memory_type(d, req.memoryTypeBits,
					    VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT, 0);
	if (type < 0)
		type = ruda__device_memory_type(d, req.memoryTypeBits, 0, 0);
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = (uint32_t)type,
	};
	r = type < 0 ? VK_ERROR_OUT_OF_DEVICE_MEMORY
		     : vkAllocateMemory(d->vk, &alloc, NULL, &b->memory);
	if (r == VK_SUCCESS)
		r = vkBindBufferMemory(d->vk, b->vk, b->memory, 0);
	if (r != VK_SUCCESS) {
		if (b->memory)
			vkFreeMemory(d->vk, b->memory, NULL);
		vkDestroyBuffer(d->vk, b->vk, NULL);
		free(b);
		log_debug("device %u: allocation of %llu bytes failed: %d", d->index,
			  (unsigned long long)size, r);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	b->allocated = req.size;
	ruda_ref_init(&b->ref, buffer_destroy);
	d->stats.bytes += b->allocated;
	d->stats.buffers++;
	*out = b;
	return RUDA_OK;
}
