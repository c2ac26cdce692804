/*
 * Device memory shared by two logical devices of one physical device (the
 * same GPU opened twice): allocated on `from` as an exportable opaque fd
 * (VK_KHR_external_memory_fd) and imported into `to`, so a transfer
 * between them is two device copies, never a trip through host memory.
 * Reference counted: every submission using it holds a reference; released
 * windows are kept for reuse (a few, up to RUDA_PEER_CACHE_BYTES) until
 * ruda__peer_window_cache_clear. A window whose device goes is emptied (its
 * buffers VK_NULL_HANDLE) and no longer kept.
 */
#ifndef RUDA_PEER_WINDOW_H
#define RUDA_PEER_WINDOW_H

#include <stdbool.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "common/ref.h"
#include "device/allocator.h"
#include "device/device.h"

/* Idle windows kept for reuse, in all: their device memory counts here
 * (ruda__peer_window_bytes), not among the devices' buffers (a window lent
 * as a buffer counts as that buffer while it is). Kept no longer than the
 * allocator keeps freed pages (freed_memory_keep_ms). */
#define RUDA_PEER_CACHE_ENTRIES 4u
#define RUDA_PEER_CACHE_BYTES (2ull << 30)

struct ruda_peer_window;

/* One side of a window: a buffer of `size` bytes bound to the shared memory. */
struct ruda_peer_side {
	struct ruda_device *device; /* borrowed; NULL once either device went */
	VkBuffer buffer;
	struct ruda_device_listener gone; /* empties the window with its device */
	struct ruda_peer_window *window;  /* back pointer, for the listener */
};

struct ruda_peer_window {
	struct ruda_ref ref;
	uint64_t size; /* usable bytes (a buffer may be a little larger) */
	struct ruda_allocation memory; /* on from.device, exportable and dedicated */
	VkDeviceMemory imported;       /* the same memory, in to.device */
	struct ruda_peer_side from, to;
	bool lent;           /* to's side is a buffer (ruda__buffer_from_window) */
	uint64_t uses;       /* times ruda__peer_window_get handed it out (1: new) */
	uint64_t kept_until_ns; /* uv_hrtime(): kept for reuse until then */
};

/* Whether `from` can lend memory to `to` this way: two logical devices of
 * one physical device (equal deviceUUID and driverUUID), both able to
 * export and import opaque fds, with one memory type for buffers. When not,
 * *why (static text) says why. */
bool ruda__peer_possible(const struct ruda_device *from, const struct ruda_device *to,
			 const char **why);

/* The bytes of the window made for `size` bytes: a power of two from
 * 64 KiB. */
uint64_t ruda__peer_window_size(uint64_t size);

/* A window of at least `size` bytes from `from` into `to`: a kept one (at
 * most twice that size) or a new one (exported and imported on the loop,
 * its memory made there unless made ahead: no page is pinned, the memory
 * is the device's own). 0 with
 * *out (the caller's reference), or a negative errno: -ENOTSUP when not
 * possible, -ENOMEM, -EIO when the driver refused the export or import. */
int ruda__peer_window_get(struct ruda_device *from, struct ruda_device *to, uint64_t size,
			  struct ruda_peer_window **out);

/* Whether ruda__peer_window_get(from, to, size) would find a kept window
 * (else it makes one; its memory on `from` is an exportable buffer of
 * ruda__peer_window_size(size) bytes, which ruda__buffer_prepare can have
 * made ahead in the thread pool). */
bool ruda__peer_window_kept(const struct ruda_device *from, const struct ruda_device *to,
			    uint64_t size);

/* Lend `window` (the caller's reference) to a buffer of its `to` device:
 * it is that buffer's memory until released, then kept for reuse as any
 * other. If `from` goes meanwhile, the buffer keeps the memory. */
void ruda__peer_window_lend(struct ruda_peer_window *window);

/* Destroy the windows kept for reuse; later releases destroy at once (at
 * shutdown, before the devices go). */
void ruda__peer_window_cache_clear(void);

/* Device memory held by windows (in use and kept), and how many there are. */
uint64_t ruda__peer_window_bytes(uint32_t *count);

static inline void ruda__peer_window_put(struct ruda_peer_window *window)
{
	ruda_ref_put(&window->ref);
}

#endif
