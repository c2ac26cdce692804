#include "memory/peer_window.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "common/log.h"

/* Window sizes are powers of two from this, so that nearby sizes share one. */
#define WINDOW_MIN (64ull << 10)

/* Idle windows, oldest first, and every window's memory: process-wide for
 * the reason host_staging.c gives (any session's transfer between any two
 * devices takes any kept window, and the bound is on what the whole
 * process holds). Loop thread only. */
static struct {
	struct ruda_peer_window *entries[RUDA_PEER_CACHE_ENTRIES];
	unsigned n;
	uint64_t bytes; /* of the kept ones */
	bool closed;
	uint64_t live_bytes; /* of every window not yet destroyed, nor lent */
	uint32_t live;
	uv_timer_t *timer; /* ages the kept ones */
} cache;

static void arm_timer(uv_loop_t *loop);

bool ruda__peer_possible(const struct ruda_device *from, const struct ruda_device *to,
			 const char **why)
{
	const char *no = NULL;
	if (from == to)
		no = "one device";
	else if (memcmp(from->device_uuid, to->device_uuid, VK_UUID_SIZE) != 0 ||
		 memcmp(from->driver_uuid, to->driver_uuid, VK_UUID_SIZE) != 0)
		no = "different physical devices";
	else if (!from->get_memory_fd)
		no = from->export_off;
	else if (!to->get_memory_fd)
		no = to->export_off;
	else if (from->allocator.type != to->allocator.type)
		no = "the devices' buffers use different memory types";
	if (why)
		*why = no;
	return !no;
}

/* Free what the window holds on `from`: its buffer there and the exported
 * memory (an importer keeps the memory itself alive). */
static void empty_from(struct ruda_peer_window *w)
{
	struct ruda_device *from = w->from.device;
	ruda__device_listener_remove(&w->from.gone);
	if (from) {
		if (w->from.buffer)
			vkDestroyBuffer(from->vk, w->from.buffer, NULL);
		if (w->memory.memory)
			ruda__memory_free(&from->allocator, &w->memory);
	}
	w->from = (struct ruda_peer_side){.window = w};
	w->memory = (struct ruda_allocation){0};
}

/* Free what the window holds on its devices (once: the sides are cleared). */
static void empty(struct ruda_peer_window *w)
{
	struct ruda_device *to = w->to.device;
	ruda__device_listener_remove(&w->to.gone);
	if (to) {
		if (w->to.buffer)
			vkDestroyBuffer(to->vk, w->to.buffer, NULL);
		if (w->imported)
			vkFreeMemory(to->vk, w->imported, NULL);
	}
	w->to = (struct ruda_peer_side){.window = w};
	w->imported = VK_NULL_HANDLE;
	empty_from(w);
}

static void really_destroy(struct ruda_peer_window *w)
{
	empty(w);
	if (!w->lent) {
		cache.live_bytes -= w->size;
		cache.live--;
	}
	free(w);
}

static void uncache(unsigned i)
{
	struct ruda_peer_window *w = cache.entries[i];
	memmove(cache.entries + i, cache.entries + i + 1,
		(cache.n - i - 1) * sizeof(cache.entries[0]));
	cache.n--;
	cache.bytes -= w->size;
}

/* Either device is going (shut down or lost): the window goes empty; a
 * kept one goes altogether. A window lent as a buffer of `to` keeps that
 * buffer when `from` goes: the import holds the memory. */
static void device_gone(struct ruda_device_listener *l, struct ruda_device *d)
{
	struct ruda_peer_side *side =
		(struct ruda_peer_side *)((char *)l - offsetof(struct ruda_peer_side, gone));
	struct ruda_peer_window *w = side->window;
	if (w->lent && d == w->from.device) {
		empty_from(w);
		return;
	}
	for (unsigned i = 0; i < cache.n; i++)
		if (cache.entries[i] == w) {
			uncache(i);
			really_destroy(w);
			return;
		}
	empty(w);
}

/* Kept windows go as freed pages do (allocator.h, keep_for_ns): an idle
 * daemon holds no more device memory than its buffers. */
static void on_age_timer(uv_timer_t *timer)
{
	uint64_t now = uv_hrtime();
	for (unsigned i = cache.n; i-- > 0;)
		if (cache.entries[i]->kept_until_ns <= now) {
			struct ruda_peer_window *w = cache.entries[i];
			uncache(i);
			really_destroy(w);
		}
	if (cache.n)
		arm_timer(timer->loop);
}

static void arm_timer(uv_loop_t *loop)
{
	if (!cache.timer) {
		cache.timer = malloc(sizeof(*cache.timer));
		if (!cache.timer || uv_timer_init(loop, cache.timer) < 0) {
			free(cache.timer);
			cache.timer = NULL;
			return;
		}
		uv_unref((uv_handle_t *)cache.timer);
	}
	uint64_t next = UINT64_MAX, now = uv_hrtime();
	for (unsigned i = 0; i < cache.n; i++)
		if (cache.entries[i]->kept_until_ns < next)
			next = cache.entries[i]->kept_until_ns;
	uint64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
	uv_timer_start(cache.timer, on_age_timer, ms, 0);
}

static void timer_closed(uv_handle_t *h)
{
	free(h);
}

static void window_released(struct ruda_ref *ref)
{
	struct ruda_peer_window *w = (struct ruda_peer_window *)ref;
	if (w->lent) { /* back from the buffer it was lent as */
		w->lent = false;
		cache.live_bytes += w->size;
		cache.live++;
	}
	if (cache.closed || !w->from.device || !w->to.device || w->size > RUDA_PEER_CACHE_BYTES) {
		really_destroy(w);
		return;
	}
	while (cache.n && (cache.n == RUDA_PEER_CACHE_ENTRIES ||
			   cache.bytes + w->size > RUDA_PEER_CACHE_BYTES)) {
		struct ruda_peer_window *old = cache.entries[0];
		uncache(0);
		really_destroy(old);
	}
	ruda_ref_init(&w->ref, window_released);
	w->kept_until_ns = uv_hrtime() + w->from.device->allocator.keep_for_ns;
	cache.entries[cache.n++] = w;
	cache.bytes += w->size;
	arm_timer(w->from.device->async.loop);
}

void ruda__peer_window_lend(struct ruda_peer_window *w)
{
	w->lent = true;
	cache.live_bytes -= w->size;
	cache.live--;
}

/* An allocation found its heap full: the kept windows whose memory is on
 * it go (windows in use stay). */
static bool reclaim_windows(const struct ruda_heap_budget *budget)
{
	bool gave = false;
	for (unsigned i = cache.n; i-- > 0;) {
		struct ruda_peer_window *w = cache.entries[i];
		if (w->from.device && w->from.device->allocator.budget == budget) {
			log_debug("device %u -> %u: kept shared window of %llu bytes given back: "
				  "its heap is full", w->from.device->index, w->to.device->index,
				  (unsigned long long)w->size);
			uncache(i);
			really_destroy(w);
			gave = true;
		}
	}
	return gave;
}

void ruda__peer_window_cache_clear(void)
{
	cache.closed = true;
	if (cache.timer) {
		uv_close((uv_handle_t *)cache.timer, timer_closed);
		cache.timer = NULL;
	}
	while (cache.n) {
		struct ruda_peer_window *w = cache.entries[0];
		uncache(0);
		really_destroy(w);
	}
}

uint64_t ruda__peer_window_bytes(uint32_t *count)
{
	if (count)
		*count = cache.live;
	return cache.live_bytes;
}

/* The exporting half: a buffer on `from` with memory of its own, made
 * ahead in the thread pool (an exportable buffer of the window's size,
 * ruda__buffer_prepare) or here. */
static int make_home(struct ruda_peer_window *w, struct ruda_device *from)
{
	if (ruda__memory_buffer(&from->allocator, w->size, RUDA_ALLOCATION_DEDICATED, true,
				&w->from.buffer, &w->memory) != RUDA_OK)
		return -ENOMEM;
	if (vkBindBufferMemory(from->vk, w->from.buffer, w->memory.memory, w->memory.offset) !=
	    VK_SUCCESS)
		return -EIO;
	return 0;
}

/* The importing half: the same memory, as an identical buffer on `to`. */
static int import_into(struct ruda_peer_window *w, struct ruda_device *from,
		       struct ruda_device *to)
{
	VkMemoryGetFdInfoKHR get = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_GET_FD_INFO_KHR,
		.memory = w->memory.memory,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
	};
	int fd = -1;
	if (from->get_memory_fd(from->vk, &get, &fd) != VK_SUCCESS || fd < 0)
		return -EIO;
	w->to.buffer = ruda__memory_make_buffer(&to->allocator, w->size, true);
	if (!w->to.buffer) {
		close(fd);
		return -ENOMEM;
	}
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(to->vk, w->to.buffer, &req);
	if (req.size != w->memory.size || !(req.memoryTypeBits & (1u << to->allocator.type))) {
		close(fd);
		return -EIO;
	}
	VkMemoryDedicatedAllocateInfo dedicated = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
		.buffer = w->to.buffer,
	};
	VkImportMemoryFdInfoKHR import = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_FD_INFO_KHR,
		.pNext = &dedicated,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD_BIT,
		.fd = fd,
	};
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &import,
		.allocationSize = w->memory.size,
		.memoryTypeIndex = to->allocator.type,
	};
	/* a successful import owns the fd; a failed one leaves it ours */
	if (vkAllocateMemory(to->vk, &alloc, NULL, &w->imported) != VK_SUCCESS) {
		w->imported = VK_NULL_HANDLE;
		close(fd);
		return -EIO;
	}
	if (vkBindBufferMemory(to->vk, w->to.buffer, w->imported, 0) != VK_SUCCESS)
		return -EIO;
	return 0;
}

/* The index of a kept window from `from` into `to` for `size` bytes (at
 * most twice that), or -1. */
static int find_cached(const struct ruda_device *from, const struct ruda_device *to,
		       uint64_t size)
{
	for (unsigned i = cache.n; i-- > 0;) {
		struct ruda_peer_window *w = cache.entries[i];
		if (w->from.device == from && w->to.device == to && w->size >= size &&
		    w->size <= 2 * size)
			return (int)i;
	}
	return -1;
}

static struct ruda_peer_window *take_cached(struct ruda_device *from, struct ruda_device *to,
					    uint64_t size)
{
	int i = find_cached(from, to, size);
	if (i < 0)
		return NULL;
	struct ruda_peer_window *w = cache.entries[i];
	uncache((unsigned)i);
	return w;
}

bool ruda__peer_window_kept(const struct ruda_device *from, const struct ruda_device *to,
			    uint64_t size)
{
	return find_cached(from, to, ruda__peer_window_size(size)) >= 0;
}

uint64_t ruda__peer_window_size(uint64_t size)
{
	uint64_t want = WINDOW_MIN;
	while (want < size && want <= UINT64_MAX / 2)
		want *= 2;
	return want;
}

int ruda__peer_window_get(struct ruda_device *from, struct ruda_device *to, uint64_t size,
			  struct ruda_peer_window **out)
{
	const char *why;
	if (!ruda__peer_possible(from, to, &why))
		return -ENOTSUP;
	size = ruda__peer_window_size(size);
	struct ruda_peer_window *w = take_cached(from, to, size);
	if (w) {
		w->uses++;
		*out = w;
		return 0;
	}
	ruda__memory_set_reclaim(reclaim_windows);
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	ruda_ref_init(&w->ref, window_released);
	w->size = size;
	w->uses = 1;
	w->from.window = w->to.window = w;
	cache.live++;
	cache.live_bytes += size;
	int err = make_home(w, from);
	w->from.device = from; /* so that a failure below frees what was made */
	if (!err) {
		err = import_into(w, from, to);
		w->to.device = to;
	}
	if (err) {
		log_debug("device %u -> %u: no shared window of %llu bytes (%d)", from->index,
			  to->index, (unsigned long long)size, err);
		really_destroy(w);
		return err;
	}
	w->from.gone.notify = device_gone;
	w->to.gone.notify = device_gone;
	ruda__device_listen_destroy(from, &w->from.gone);
	ruda__device_listen_destroy(to, &w->to.gone);
	log_debug("device %u -> %u: shared window of %llu bytes", from->index, to->index,
		  (unsigned long long)size);
	*out = w;
	return 0;
}
