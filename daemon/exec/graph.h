/*
 * A graph: launches captured on one stream of a session, recorded once into
 * a secondary command buffer that every replay executes inside the stream's
 * batch. The graph keeps the kernels and buffers it uses alive (pinned) for
 * as long as it lives; each replay in flight keeps the graph alive.
 */
#ifndef RUDA_GRAPH_H
#define RUDA_GRAPH_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/status.h>

#include "common/ref.h"
#include "exec/stream.h"

struct ruda_binding;
struct ruda_launch_count;
struct ruda_device;
struct ruda_pipeline;
struct ruda_handle_table;

/* Launches one graph may hold: bounds the daemon memory a client can make
 * it keep with one capture. */
#define RUDA_GRAPH_MAX_LAUNCHES 65536u

struct ruda_graph {
	struct ruda_ref ref;
	struct ruda_device *device; /* borrowed: devices outlive sessions and work */
	VkCommandBuffer cmd;        /* secondary, simultaneous use */
	uint32_t stream;            /* the stream it was captured on, where it replays */
	uint32_t queue;             /* that stream's device queue */
	uint32_t launches;
	int ended;                  /* recording closed */
	struct ruda_bind_cache bound; /* what its last launch left bound */
	struct ruda_ref **held;     /* owned references: kernels and buffers */
	size_t nheld, held_cap;
	/* the buffers among them (borrowed), each noted as used by a replay */
	struct ruda_buffer **buffers;
	size_t nbuffers, buffers_cap;
	ruda_status error;          /* first failure of a captured request */
	char error_message[320];
};

/* A graph capturing on `stream`, or NULL when out of memory. */
struct ruda_graph *ruda__graph_create(struct ruda_device *device, uint32_t stream, uint32_t queue);
/* Record one launch (the caller has validated it). */
ruda_status ruda__graph_launch(struct ruda_graph *g, struct ruda_pipeline *pipeline,
			       const struct ruda_launch_count *count,
			       const struct ruda_binding *bindings,
			       uint32_t nbindings, const void *push, uint32_t push_size);
/* Note the first failure of the capture: it is refused at its end. */
void ruda__graph_fail(struct ruda_graph *g, ruda_status status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* Close the recording: RUDA_OK, or the capture's first failure. */
ruda_status ruda__graph_end(struct ruda_graph *g);

static inline void ruda__graph_put(struct ruda_graph *g)
{
	ruda_ref_put(&g->ref);
}

/* Drop every graph of `graphs` (id -> struct ruda_graph, a session's as it
 * ends). */
void ruda__graph_release_all(struct ruda_handle_table *graphs);

#endif
