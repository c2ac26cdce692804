#include "exec/graph.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory/buffer.h"
#include "device/device.h"
#include "common/handle_table.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "exec/stream.h"

static void graph_destroy(struct ruda_ref *ref)
{
	struct ruda_graph *g = (struct ruda_graph *)ref;
	/* no replay is in flight: each holds a reference */
	if (g->cmd)
		vkFreeCommandBuffers(g->device->vk, g->device->command_pool, 1, &g->cmd);
	for (size_t i = 0; i < g->nheld; i++)
		ruda_ref_put(g->held[i]);
	free(g->held);
	free(g->buffers);
	free(g);
}

struct ruda_graph *ruda__graph_create(struct ruda_device *d, uint32_t stream, uint32_t queue)
{
	struct ruda_graph *g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	ruda_ref_init(&g->ref, graph_destroy);
	g->device = d;
	g->stream = stream;
	g->queue = queue;
	VkCommandBufferAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
		.commandPool = d->command_pool,
		.level = VK_COMMAND_BUFFER_LEVEL_SECONDARY,
		.commandBufferCount = 1,
	};
	if (vkAllocateCommandBuffers(d->vk, &alloc, &g->cmd) != VK_SUCCESS) {
		g->cmd = VK_NULL_HANDLE;
		ruda__graph_put(g);
		return NULL;
	}
	VkCommandBufferInheritanceInfo inherit = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_INHERITANCE_INFO,
	};
	/* simultaneous use: replays may be in flight in several submissions */
	VkCommandBufferBeginInfo begin = {
		.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
		.flags = VK_COMMAND_BUFFER_USAGE_SIMULTANEOUS_USE_BIT,
		.pInheritanceInfo = &inherit,
	};
	if (vkBeginCommandBuffer(g->cmd, &begin) != VK_SUCCESS) {
		ruda__graph_put(g);
		return NULL;
	}
	return g;
}

void ruda__graph_fail(struct ruda_graph *g, ruda_status status, const char *fmt, ...)
{
	if (g->error != RUDA_OK)
		return;
	g->error = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(g->error_message, sizeof(g->error_message), fmt, ap);
	va_end(ap);
}

/* Keep `ref` alive with the graph; a kernel or buffer used by the previous
 * launches is held once. */
static int hold(struct ruda_graph *g, struct ruda_ref *ref)
{
	for (size_t i = g->nheld; i > 0 && i + 8 > g->nheld; i--)
		if (g->held[i - 1] == ref)
			return 0;
	if (g->nheld == g->held_cap) {
		size_t cap = g->held_cap ? g->held_cap * 2 : 16;
		struct ruda_ref **held = realloc(g->held, cap * sizeof(*held));
		if (!held)
			return -1;
		g->held = held;
		g->held_cap = cap;
	}
	g->held[g->nheld++] = ruda_ref_get(ref);
	return 0;
}

/* Hold `b`, and list it for replays when it is new to the graph. */
static int hold_buffer(struct ruda_graph *g, struct ruda_buffer *b)
{
	size_t before = g->nheld;
	if (hold(g, &b->ref) < 0)
		return -1;
	if (g->nheld == before)
		return 0;
	if (g->nbuffers == g->buffers_cap) {
		size_t cap = g->buffers_cap ? g->buffers_cap * 2 : 8;
		struct ruda_buffer **buffers = realloc(g->buffers, cap * sizeof(*buffers));
		if (!buffers)
			return -1;
		g->buffers = buffers;
		g->buffers_cap = cap;
	}
	g->buffers[g->nbuffers++] = b;
	return 0;
}

ruda_status ruda__graph_launch(struct ruda_graph *g, struct ruda_pipeline *p,
			       const struct ruda_launch_count *count,
			       const struct ruda_binding *bindings,
			       uint32_t nbindings, const void *push, uint32_t push_size)
{
	if (g->launches >= RUDA_GRAPH_MAX_LAUNCHES)
		return RUDA_ERROR_TOO_LARGE;
	if (hold(g, &p->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < nbindings; i++)
		if (hold_buffer(g, bindings[i].buffer) < 0)
			return RUDA_ERROR_OUT_OF_MEMORY;
	if (count->buffer && hold_buffer(g, count->buffer) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	/* in order, as on a stream: each launch after the one before it */
	ruda__record_barrier(g->cmd);
	ruda__record_dispatch(g->device, g->cmd, g->queue, &g->bound, p, count, bindings,
			      nbindings, push, push_size);
	g->launches++;
	return RUDA_OK;
}

ruda_status ruda__graph_end(struct ruda_graph *g)
{
	if (!g->ended) {
		g->ended = 1;
		if (vkEndCommandBuffer(g->cmd) != VK_SUCCESS)
			ruda__graph_fail(g, RUDA_ERROR_OUT_OF_MEMORY,
					 "the driver could not close the graph's command buffer");
	}
	return g->error;
}

void ruda__graph_release_all(struct ruda_handle_table *graphs)
{
	struct ruda_graph *g;
	while ((g = ruda__handle_table_pop(graphs, NULL)))
		ruda__graph_put(g);
}
