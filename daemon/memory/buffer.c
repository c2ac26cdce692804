#include "memory/buffer.h"

#include <stdbool.h>
#include <stdlib.h>

#include "memory/buffer_limits.h"
#include "memory/peer_window.h"
#include "device/device.h"
#include "common/log.h"

struct ruda_buffer_limits ruda__buffer_limits_of(const struct ruda_device *d)
{
	return (struct ruda_buffer_limits){
		.max_buffer_size = d->max_buffer_size,
		.heap_size = d->allocator.heap_size,
		.max_allocation_size = d->max_allocation_size,
	};
}

uint64_t ruda__buffer_largest(const struct ruda_device *d)
{
	struct ruda_buffer_limits l = ruda__buffer_limits_of(d);
	return ruda__buffer_limits_largest(&l);
}

static void buffer_destroy(struct ruda_ref *ref)
{
	struct ruda_buffer *b = (struct ruda_buffer *)ref;
	struct ruda_device *d = b->device;
	if (b->window) {
		ruda__peer_window_put(b->window); /* its buffer and memory */
	} else {
		vkDestroyBuffer(d->vk, b->vk, NULL);
		ruda__memory_free(&d->allocator, &b->memory);
	}
	d->stats.bytes -= b->allocated;
	d->stats.buffers--;
	free(b);
}

/* Vulkan has no empty buffers; whole words, so fills work */
static uint64_t vk_size_of(uint64_t size)
{
	return size < 4 ? 4 : (size + 3) & ~(uint64_t)3;
}

/* `b`, its memory bound, counted on its device and handed out. */
static void publish(struct ruda_buffer *b, struct ruda_buffer **out)
{
	ruda_ref_init(&b->ref, buffer_destroy);
	b->device->stats.bytes += b->allocated;
	b->device->stats.buffers++;
	*out = b;
}

ruda_status ruda__buffer_from_window(struct ruda_peer_window *window, uint64_t size,
				     struct ruda_buffer **out)
{
	struct ruda_device *d = window->to.device;
	uint64_t vk_size = vk_size_of(size);
	if (!d || !window->to.buffer || vk_size > window->size)
		return RUDA_ERROR_OUT_OF_MEMORY;
	struct ruda_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda__peer_window_lend(window);
	*b = (struct ruda_buffer){
		.device = d,
		.vk = window->to.buffer,
		.window = window,
		.size = size,
		.vk_size = vk_size,
		.allocated = window->size,
	};
	publish(b, out);
	return RUDA_OK;
}

ruda_status ruda__buffer_create(struct ruda_device *d, uint64_t size, struct ruda_buffer **out)
{
	return ruda__buffer_create_mode(d, size, RUDA_ALLOCATION_AUTO, out);
}

static bool exportable_mode(const struct ruda_device *d, int mode)
{
	return mode == RUDA_ALLOCATION_DEDICATED && d->get_memory_fd;
}

const struct ruda_memory_job *ruda__buffer_prepare(struct ruda_device *d, uint64_t size,
						   int mode, ruda_memory_ready_fn ready,
						   void *data)
{
	char why[160];
	struct ruda_buffer_limits limits = ruda__buffer_limits_of(d);
	if (ruda__buffer_limits_check(&limits, size, why, sizeof(why)) != RUDA_OK ||
	    ruda__memory_at_hand(&d->allocator, vk_size_of(size), (ruda_allocation_mode)mode))
		return NULL;
	/* the memory a buffer of this size needs: a probe's requirements, or
	 * for exportable memory, which is dedicated to its buffer, the
	 * buffer's own (the allocator keeps it with the memory) */
	bool exportable = exportable_mode(d, mode);
	if (exportable && ruda__memory_exportable_kept(&d->allocator, vk_size_of(size)))
		return NULL; /* made ahead already, for a request that did not come back */
	VkBuffer buffer = ruda__memory_make_buffer(&d->allocator, vk_size_of(size), exportable);
	if (!buffer)
		return NULL;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->vk, buffer, &req);
	const struct ruda_memory_job *job = ruda__memory_prepare(
		&d->allocator, req.size, (ruda_allocation_mode)mode,
		exportable ? buffer : VK_NULL_HANDLE, vk_size_of(size), ready, data);
	if (!exportable || !job)
		vkDestroyBuffer(d->vk, buffer, NULL);
	return job;
}

ruda_status ruda__buffer_create_mode(struct ruda_device *d, uint64_t size, int mode,
				     struct ruda_buffer **out)
{
	bool exportable = exportable_mode(d, mode);
	char why[160];
	struct ruda_buffer_limits limits = ruda__buffer_limits_of(d);
	if (ruda__buffer_limits_check(&limits, size, why, sizeof(why)) != RUDA_OK)
		return RUDA_ERROR_TOO_LARGE;
	struct ruda_buffer *b = calloc(1, sizeof(*b));
	if (!b)
		return RUDA_ERROR_OUT_OF_MEMORY;
	b->device = d;
	b->size = size;
	uint64_t vk_size = vk_size_of(size);
	/* an exportable buffer whose memory the thread pool made ahead
	 * (ruda__buffer_prepare) comes with it */
	ruda_status st = ruda__memory_buffer(&d->allocator, vk_size, (ruda_allocation_mode)mode,
					     exportable, &b->vk, &b->memory);
	if (st == RUDA_OK &&
	    vkBindBufferMemory(d->vk, b->vk, b->memory.memory, b->memory.offset) != VK_SUCCESS) {
		ruda__memory_free(&d->allocator, &b->memory);
		vkDestroyBuffer(d->vk, b->vk, NULL);
		st = RUDA_ERROR_OUT_OF_MEMORY;
	}
	if (st != RUDA_OK) {
		free(b);
		log_debug("device %u: allocation of %llu bytes failed: %s", d->index,
			  (unsigned long long)size, ruda_strerror(st));
		return st;
	}
	b->allocated = b->memory.size;
	b->vk_size = vk_size;
	publish(b, out);
	return RUDA_OK;
}
