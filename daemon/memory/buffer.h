/* A device buffer: one VkBuffer bound to its own device memory. Reference
 * counted: the session's handle holds one reference, every submission that
 * uses it another. */
#ifndef RUDA_BUFFER_H
#define RUDA_BUFFER_H

#include <stdint.h>
#include <vulkan/vulkan.h>

#include <ruda/status.h>

#include "memory/buffer_limits.h"
#include "device/allocator.h"
#include "device/device.h"
#include "common/ref.h"

struct ruda_device;
struct ruda_stream;
struct ruda_peer_window;

struct ruda_buffer {
	struct ruda_ref ref;
	struct ruda_device *device; /* borrowed */
	VkBuffer vk;
	struct ruda_allocation memory;
	/* or: memory another logical device of the GPU lent (owned reference;
	 * `vk` is then the window's, memory unused) */
	struct ruda_peer_window *window;
	uint64_t size;      /* requested bytes */
	uint64_t vk_size;   /* VkBufferCreateInfo::size: an importer's buffer repeats it */
	uint64_t allocated; /* bytes of device memory reserved for it */
	/* new, its zero fill not yet recorded: on that stream's list
	 * (stream.c), which holds a reference; bytes [0, zero_from) have
	 * been written in order on it since, so only the rest needs zeros */
	struct ruda_stream *zero_stream; /* borrowed */
	struct ruda_buffer *zero_next;
	uint64_t zero_from;
	/* the last work that used it, which SyncBuffers waits for (not the
	 * whole session): recorded on `use_stream` (borrowed: a stream of the
	 * session that owns the buffer, and only its requests record uses) as
	 * that stream's submission number `use_seq`. use_value[q] is the last
	 * submission of queue q among earlier uses, on other streams, already
	 * submitted: one per queue, as queues complete in no order between
	 * them (a value of one queue says nothing of another's earlier work);
	 * `use_elsewhere`: one was still being recorded when the buffer moved
	 * to another stream (SyncBuffers then waits for the whole session). */
	struct ruda_stream *use_stream;
	uint64_t use_seq;
	uint64_t use_value[RUDA_MAX_QUEUES];
	int use_elsewhere;
};

/* RUDA_OK, RUDA_ERROR_TOO_LARGE, RUDA_ERROR_OUT_OF_MEMORY. */
ruda_status ruda__buffer_create(struct ruda_device *device, uint64_t size,
				struct ruda_buffer **out);
/* The same in allocation mode `mode` (device/allocator.h); dedicated buffers are
 * exportable (device.h: export_off NULL): created with
 * VkExternalMemoryBufferCreateInfo, their memory allocated exportable and
 * dedicated to them. */
ruda_status ruda__buffer_create_mode(struct ruda_device *device, uint64_t size, int mode,
				     struct ruda_buffer **out);
/* Before ruda__buffer_create_mode(device, size, mode): make the device
 * memory it would allocate on the loop in the thread pool instead
 * (ruda__memory_prepare). The job, whose `ready` comes on the loop once
 * that memory waits; NULL when the create can go ahead now (small, memory
 * at hand, or past the device's limits: the create answers). Exportable
 * memory is made for a buffer created here, which the create then takes. */
const struct ruda_memory_job *ruda__buffer_prepare(struct ruda_device *device, uint64_t size,
						   int mode, ruda_memory_ready_fn ready,
						   void *data);
/* A buffer of `size` bytes on the window's `to` device made of the
 * window's memory (peer_window.h), which is lent to it: no allocation, and
 * a copy into the window's `from` side on the other device fills it. The
 * caller's reference moves to the buffer. RUDA_OK or
 * RUDA_ERROR_OUT_OF_MEMORY (the reference is then the caller's still). */
ruda_status ruda__buffer_from_window(struct ruda_peer_window *window, uint64_t size,
				     struct ruda_buffer **out);

/* What buffers the device may hold (buffer_limits.h), and the largest. */
struct ruda_buffer_limits ruda__buffer_limits_of(const struct ruda_device *device);
uint64_t ruda__buffer_largest(const struct ruda_device *device);

static inline void ruda__buffer_put(struct ruda_buffer *buffer)
{
	ruda_ref_put(&buffer->ref);
}

#endif
