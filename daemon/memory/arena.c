#include "memory/arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "device/device.h"
#include "common/log.h"
#include "common/pass_step.h"

/* Unpinning an import and unmapping the client's pages take long (a
 * 16 MiB arena: ms), so they run in the thread pool; nothing else refers
 * to the arena any more. */
static void arena_release(void *arg)
{
	struct ruda_arena *a = arg;
	VkDevice vk = a->device->vk;
	if (a->buffer)
		vkDestroyBuffer(vk, a->buffer, NULL);
	if (a->memory)
		vkFreeMemory(vk, a->memory, NULL);
	if (a->map)
		munmap(a->map, a->size);
	if (a->fd >= 0)
		close(a->fd);
	free(a);
}

static void arena_destroy(struct ruda_ref *ref)
{
	struct ruda_arena *a = (struct ruda_arena *)ref;
	ruda__deferred_free_run(&a->device->frees, arena_release, a);
}

int ruda__host_import(struct ruda_device *d, void *map, uint64_t size, VkBuffer *buffer,
		      VkDeviceMemory *memory)
{
	VkMemoryHostPointerPropertiesEXT host = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_HOST_POINTER_PROPERTIES_EXT,
	};
	VkResult r = d->get_memory_host_pointer_properties(
		d->vk, VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT, map, &host);
	if (r != VK_SUCCESS)
		return -EIO;
	VkExternalMemoryBufferCreateInfo external = {
		.sType = VK_STRUCTURE_TYPE_EXTERNAL_MEMORY_BUFFER_CREATE_INFO,
		.handleTypes = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
	};
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.pNext = &external,
		.size = size,
		.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	if (vkCreateBuffer(d->vk, &info, NULL, buffer) != VK_SUCCESS)
		return -EIO;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->vk, *buffer, &req);
	int type = ruda__memory_type(&d->memory, req.memoryTypeBits & host.memoryTypeBits,
				     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
					     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
				     0);
	if (type < 0)
		return -ENOTSUP;
	VkImportMemoryHostPointerInfoEXT import = {
		.sType = VK_STRUCTURE_TYPE_IMPORT_MEMORY_HOST_POINTER_INFO_EXT,
		.handleType = VK_EXTERNAL_MEMORY_HANDLE_TYPE_HOST_ALLOCATION_BIT_EXT,
		.pHostPointer = map,
	};
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.pNext = &import,
		.allocationSize = size,
		.memoryTypeIndex = (uint32_t)type,
	};
	if (vkAllocateMemory(d->vk, &alloc, NULL, memory) != VK_SUCCESS)
		return -ENOMEM;
	if (vkBindBufferMemory(d->vk, *buffer, *memory, 0) != VK_SUCCESS)
		return -EIO;
	return 0;
}

static int arena_import(struct ruda_arena *a)
{
	return ruda__host_import(a->device, a->map, a->size, &a->buffer, &a->memory);
}

/* A host-visible buffer the size of the arena, for devices without host
 * import: one memcpy in rudad per transfer, then the same device copy. */
static int arena_bounce(struct ruda_arena *a)
{
	struct ruda_device *d = a->device;
	VkBufferCreateInfo info = {
		.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
		.size = a->size,
		.usage = VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT,
		.sharingMode = VK_SHARING_MODE_EXCLUSIVE,
	};
	if (vkCreateBuffer(d->vk, &info, NULL, &a->buffer) != VK_SUCCESS)
		return -EIO;
	VkMemoryRequirements req;
	vkGetBufferMemoryRequirements(d->vk, a->buffer, &req);
	int type = ruda__memory_type(&d->memory, req.memoryTypeBits,
				     VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
					     VK_MEMORY_PROPERTY_HOST_COHERENT_BIT,
				     0);
	if (type < 0)
		return -ENOTSUP;
	VkMemoryAllocateInfo alloc = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO,
		.allocationSize = req.size,
		.memoryTypeIndex = (uint32_t)type,
	};
	void *map;
	if (vkAllocateMemory(d->vk, &alloc, NULL, &a->memory) != VK_SUCCESS)
		return -ENOMEM;
	if (vkBindBufferMemory(d->vk, a->buffer, a->memory, 0) != VK_SUCCESS ||
	    vkMapMemory(d->vk, a->memory, 0, VK_WHOLE_SIZE, 0, &map) != VK_SUCCESS)
		return -EIO;
	a->bounce = map;
	return 0;
}

void ruda__arena_bounce_in(struct ruda_arena *a, uint64_t offset, uint64_t size)
{
	if (a->bounce && size)
		memcpy(a->bounce + offset, a->map + offset, size);
}

void ruda__arena_bounce_out(struct ruda_arena *a, uint64_t offset, uint64_t size)
{
	if (a->bounce && size)
		memcpy(a->map + offset, a->bounce + offset, size);
}

uint64_t ruda__arena_granularity(const struct ruda_device *d)
{
	return d->import_alignment > 4096 ? d->import_alignment : 4096;
}

/* The header the client checks, written once the arena is mapped. */
static void write_header(struct ruda_arena *a)
{
	/* a client's memfd may hold anything there: every slot starts empty */
	memset(a->map, 0, RUDA_ARENA_DATA_OFFSET);
	struct ruda_arena_header *h = ruda__arena_header(a);
	h->magic = RUDA_ARENA_MAGIC;
	h->version = RUDA_ARENA_VERSION;
	atomic_store(&h->completed_request, 0);
}

static struct ruda_arena *arena_new(struct ruda_device *d, uint64_t size)
{
	struct ruda_arena *a = calloc(1, sizeof(*a));
	if (!a)
		return NULL;
	a->device = d;
	a->size = size;
	a->fd = -1;
	ruda_ref_init(&a->ref, arena_destroy);
	return a;
}

/* Map `size` bytes of `fd`, shared: page aligned, as the import requires. */
static int arena_map(struct ruda_arena *a, int fd)
{
	void *map = mmap(NULL, a->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED)
		return -errno;
	a->map = map;
	return 0;
}

int ruda__arena_create(struct ruda_device *d, uint64_t size, struct ruda_arena **out)
{
	uint64_t align = ruda__arena_granularity(d);
	size = (size + align - 1) / align * align;
	struct ruda_arena *a = arena_new(d, size);
	if (!a)
		return -ENOMEM;
	a->fd = memfd_create("ruda-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	int err = 0;
	if (a->fd < 0 || ftruncate(a->fd, (off_t)size) < 0 ||
	    fcntl(a->fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		err = -errno;
	if (!err)
		err = arena_map(a, a->fd);
	if (err) {
		log_error("device %u: cannot create a %llu-byte arena: %d", d->index,
			  (unsigned long long)size, err);
		arena_release(a); /* at once: this may be a thread of the pool */
		return err;
	}
	/* no import here: it pins every page, and waits for the first transfer */
	write_header(a);
	*out = a;
	return 0;
}

int ruda__arena_map_fd(struct ruda_device *d, int fd, uint64_t size, struct ruda_arena **out)
{
	struct ruda_arena *a = arena_new(d, size);
	if (!a)
		return -ENOMEM;
	int err = arena_map(a, fd); /* the mapping keeps the memory; the fd is the client's */
	if (err) {
		arena_release(a);
		return err;
	}
	a->client = size;
	write_header(a);
	*out = a;
	return 0;
}

/* ---- the device side, made on first use ------------------------------- */

/* Undo a failed attach: what it made goes, the arena is host memory again. */
static void drop_device_side(struct ruda_arena *a)
{
	VkDevice vk = a->device->vk;
	if (a->buffer)
		vkDestroyBuffer(vk, a->buffer, NULL);
	if (a->memory)
		vkFreeMemory(vk, a->memory, NULL);
	a->buffer = VK_NULL_HANDLE;
	a->memory = VK_NULL_HANDLE;
	a->bounce = NULL;
}

static void attach_work(uv_work_t *work)
{
	struct ruda_arena *a = work->data;
	if (a->fail_next_attach) {
		a->attach_result = -ENOMEM;
		return;
	}
	a->attach_result = a->device->import_alignment ? arena_import(a) : arena_bounce(a);
}

static void attach_done(uv_work_t *work, int status)
{
	struct ruda_step_mark step = ruda__pass_step_begin();
	struct ruda_arena *a = work->data;
	int err = status < 0 ? -ECANCELED : a->attach_result;
	a->fail_next_attach = 0;
	a->pool->attaching--;
	a->pool = NULL;
	if (err) {
		log_warn("device %u: cannot %s a %llu-byte arena: %s", a->device->index,
			 a->device->import_alignment ? "import" : "make the bounce buffer of",
			 (unsigned long long)a->size, strerror(-err));
		drop_device_side(a);
		a->attach_error = err;
		a->state = RUDA_ARENA_HOST;
	} else {
		a->state = RUDA_ARENA_ATTACHED;
	}
	void (*done)(void *) = a->attached;
	a->attached = NULL;
	if (done)
		done(a->attached_data);
	ruda_ref_put(&a->ref); /* the work's */
	ruda__pass_step_end(step, "thread pool result", "arena imported");
}

int ruda__arena_attach(struct ruda_arena_pool *pool, struct ruda_arena *a,
		       void (*done)(void *data), void *data)
{
	if (a->state == RUDA_ARENA_ATTACHED)
		return 1;
	if (a->state == RUDA_ARENA_HOST && a->attach_error) {
		int err = a->attach_error;
		a->attach_error = 0;
		return err;
	}
	a->attached = done;
	a->attached_data = data;
	if (a->state == RUDA_ARENA_ATTACHING)
		return 0;
	/* pinning costs ~0.45 ms a MiB on a GPU: never on the loop */
	a->work.data = a;
	ruda_ref_get(&a->ref);
	if (uv_queue_work(pool->loop, &a->work, attach_work, attach_done) < 0) {
		a->attached = NULL;
		ruda_ref_put(&a->ref);
		return -EAGAIN;
	}
	a->state = RUDA_ARENA_ATTACHING;
	a->pool = pool;
	pool->attaching++;
	return 0;
}

int ruda__arena_attach_now(struct ruda_arena *a)
{
	if (a->state == RUDA_ARENA_ATTACHED)
		return 0;
	if (a->state != RUDA_ARENA_HOST)
		return -EBUSY;
	int err = a->device->import_alignment ? arena_import(a) : arena_bounce(a);
	if (err)
		drop_device_side(a);
	else
		a->state = RUDA_ARENA_ATTACHED;
	return err;
}

bool ruda__arena_detach(struct ruda_arena *a)
{
	if (a->state != RUDA_ARENA_ATTACHED || a->ref.count != 1)
		return false;
	drop_device_side(a);
	a->state = RUDA_ARENA_HOST;
	return true;
}

void ruda__arena_forget_waiter(struct ruda_arena *a)
{
	a->attached = NULL;
	a->attached_data = NULL;
}

int ruda__arena_map_region(struct ruda_device *d, int fd, uint64_t size,
			   struct ruda_arena **out)
{
	struct ruda_arena *a = arena_new(d, size);
	if (!a)
		return -ENOMEM;
	/* the mapping keeps the memory; the fd is the caller's. No import
	 * here: pinning costs ~0.45 ms a MiB, the thread pool does it */
	int err = arena_map(a, fd);
	if (err) {
		ruda_ref_put(&a->ref);
		return err;
	}
	*out = a;
	return 0;
}

bool ruda__arena_contains(const struct ruda_arena *a, uint64_t offset, uint64_t size)
{
	return offset >= RUDA_ARENA_DATA_OFFSET && offset <= a->size && size <= a->size - offset;
}

void ruda__arena_publish(struct ruda_arena *a, uint64_t request)
{
	struct ruda_arena_header *h = ruda__arena_header(a);
	uint64_t old = atomic_load_explicit(&h->completed_request, memory_order_relaxed);
	if (request > old)
		atomic_store_explicit(&h->completed_request, request, memory_order_release);
}

/* ---- pool ---------------------------------------------------------------- */

static void make_work(uv_work_t *work)
{
	struct ruda_arena_pool *pool = work->data;
	if (ruda__arena_create(pool->device, pool->size, &pool->made) < 0)
		pool->made = NULL;
}

static void refill(struct ruda_arena_pool *pool);

static void make_done(uv_work_t *work, int status)
{
	struct ruda_arena_pool *pool = work->data;
	pool->making = 0;
	struct ruda_arena *a = pool->made;
	pool->made = NULL;
	if (!a)
		return; /* logged; the next take makes one itself */
	if (status < 0 || pool->closing ||
	    pool->count == sizeof(pool->spare) / sizeof(pool->spare[0])) {
		ruda_ref_put(&a->ref);
		return;
	}
	pool->spare[pool->count++] = a;
	ruda__arena_pool_refill_idle(pool);
}

static void refill(struct ruda_arena_pool *pool)
{
	if (pool->making || pool->closing ||
	    pool->count == sizeof(pool->spare) / sizeof(pool->spare[0]))
		return;
	pool->work.data = pool;
	if (uv_queue_work(pool->loop, &pool->work, make_work, make_done) == 0)
		pool->making = 1;
}

void ruda__arena_pool_init(struct ruda_arena_pool *pool, uv_loop_t *loop,
			   struct ruda_device *device, uint64_t size)
{
	memset(pool, 0, sizeof(*pool));
	pool->loop = loop;
	pool->device = device;
	pool->size = size;
	/* the first clients find them ready: make them before rudad listens */
	while (pool->count < sizeof(pool->spare) / sizeof(pool->spare[0]) &&
	       ruda__arena_create(device, size, &pool->spare[pool->count]) == 0)
		pool->count++;
}

int ruda__arena_pool_take(struct ruda_arena_pool *pool, struct ruda_arena **out)
{
	int err = 0;
	if (pool->count)
		*out = pool->spare[--pool->count];
	else
		err = ruda__arena_create(pool->device, pool->size, out);
	/* no refill now: ruda__arena_pool_refill_idle makes one when the loop
	 * is about to sleep (a memfd and a mapping; the import waits for the
	 * session's first transfer) */
	return err;
}

void ruda__arena_pool_refill_idle(struct ruda_arena_pool *pool)
{
	if (pool->device->inflight_count == 0)
		refill(pool);
}

void ruda__arena_pool_finish(struct ruda_arena_pool *pool)
{
	pool->closing = 1;
	while (pool->count)
		ruda_ref_put(&pool->spare[--pool->count]->ref);
}
