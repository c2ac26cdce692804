#include "memory/host_staging.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "memory/arena.h"
#include "device/device.h"
#include "common/log.h"
#include "common/pass_step.h"

/* Mappings are rounded to this, a multiple of every driver's import
 * alignment seen so far (4 KiB on NVIDIA and lavapipe). */
#define STAGING_ALIGN (64u * 1024u)
/* Devices one staging can be imported into at least. */
#define STAGING_MIN_IMPORTS 8u

/* Released staging kept for the next transfer of a similar size: its
 * pages are faulted in and imported already (an import pins memory, which
 * costs milliseconds per hundred MiB on a GPU). */
#define CACHE_ENTRIES 4
#define CACHE_MAX_BYTES (4ull << 30)

/* The one piece of process-wide state here, on purpose: a staging is
 * imported into any of the daemon's devices and taken by any session's
 * transfer, so reuse works across all of them only with one cache, and
 * its bounds (CACHE_ENTRIES, CACHE_MAX_BYTES) are on host memory the
 * process keeps mapped and pinned, whatever the number of devices. A cache
 * per device would multiply the bound and miss every transfer between
 * two devices. Loop thread only (the thread pool never touches it);
 * `closed` at shutdown, when the devices are about to go. What is made
 * per device (the imports) goes with its device: a destroy listener. */
static struct {
	struct ruda_host_staging *entries[CACHE_ENTRIES]; /* oldest first */
	unsigned n;
	uint64_t bytes;
	bool closed;
} cache;
/* Its device is going (shut down or lost), the staging kept or still in
 * use: the import goes first. */
static void device_gone(struct ruda_device_listener *l, struct ruda_device *d)
{
	struct ruda_host_import *im = (struct ruda_host_import *)((char *)l -
		offsetof(struct ruda_host_import, device_gone));
	if (im->buffer)
		vkDestroyBuffer(d->vk, im->buffer, NULL);
	if (im->memory)
		vkFreeMemory(d->vk, im->memory, NULL);
	*im = (struct ruda_host_import){0};
}

/* On the loop: the import is freed with its device if that goes first. */
static void watch_device(struct ruda_host_import *im)
{
	im->device_gone.notify = device_gone;
	ruda__device_listen_destroy(im->device, &im->device_gone);
}

static void really_destroy(struct ruda_host_staging *st)
{
	for (uint32_t i = 0; i < st->nimports; i++) {
		struct ruda_host_import *im = &st->imports[i];
		if (!im->device)
			continue; /* its device went first */
		ruda__device_listener_remove(&im->device_gone);
		if (im->buffer)
			vkDestroyBuffer(im->device->vk, im->buffer, NULL);
		if (im->memory)
			vkFreeMemory(im->device->vk, im->memory, NULL);
	}
	if (st->map)
		munmap(st->map, st->mapped);
	free(st);
}

static void cache_drop_oldest(void)
{
	struct ruda_host_staging *old = cache.entries[0];
	memmove(cache.entries, cache.entries + 1, --cache.n * sizeof(cache.entries[0]));
	cache.bytes -= old->mapped;
	really_destroy(old);
}

static void staging_destroy(struct ruda_ref *ref)
{
	struct ruda_host_staging *st = (struct ruda_host_staging *)ref;
	if (cache.closed || st->mapped > CACHE_MAX_BYTES) {
		really_destroy(st);
		return;
	}
	while (cache.n && (cache.n == CACHE_ENTRIES || cache.bytes + st->mapped > CACHE_MAX_BYTES))
		cache_drop_oldest();
	ruda_ref_init(&st->ref, staging_destroy);
	cache.entries[cache.n++] = st;
	cache.bytes += st->mapped;
}

void ruda__host_staging_cache_clear(void)
{
	cache.closed = true;
	while (cache.n)
		cache_drop_oldest();
}

/* A new mapping (no import yet); any thread. */
static int alloc_new(uint64_t size, uint32_t max_devices, struct ruda_host_staging **out)
{
	if (max_devices < STAGING_MIN_IMPORTS)
		max_devices = STAGING_MIN_IMPORTS; /* so any later use can reuse it */
	struct ruda_host_staging *st =
		calloc(1, sizeof(*st) + max_devices * sizeof(struct ruda_host_import));
	if (!st)
		return -ENOMEM;
	ruda_ref_init(&st->ref, staging_destroy);
	st->max_imports = max_devices;
	st->size = size;
	st->mapped = (size + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
	if (!st->mapped)
		st->mapped = STAGING_ALIGN;
	void *map = mmap(NULL, st->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			 -1, 0);
	if (map == MAP_FAILED) {
		free(st);
		return -ENOMEM;
	}
	st->map = map;
	*out = st;
	return 0;
}

/* The index of a kept staging for `size` bytes (at most about twice
 * that) that at least `max_devices` may import and `devices` (n of them)
 * have imported already, or -1. */
static int find_cached(uint64_t size, uint32_t max_devices, struct ruda_device *const *devices,
		       uint32_t n)
{
	uint64_t mapped = (size + STAGING_ALIGN - 1) / STAGING_ALIGN * STAGING_ALIGN;
	for (unsigned i = cache.n; i-- > 0;) {
		struct ruda_host_staging *c = cache.entries[i];
		if (c->mapped < mapped || c->mapped > 2 * mapped + STAGING_ALIGN ||
		    c->max_imports < max_devices)
			continue;
		uint32_t have = 0;
		for (uint32_t k = 0; k < n; k++)
			for (uint32_t j = 0; j < c->nimports; j++)
				if (c->imports[j].device == devices[k] && c->imports[j].buffer) {
					have++;
					break;
				}
		if (have == n)
			return (int)i;
	}
	return -1;
}

/* Take that staging out of the cache, for `size` bytes. */
static struct ruda_host_staging *take_cached(uint64_t size, uint32_t max_devices,
					     struct ruda_device *const *devices, uint32_t n)
{
	int i = find_cached(size, max_devices, devices, n);
	if (i < 0)
		return NULL;
	struct ruda_host_staging *c = cache.entries[i];
	memmove(cache.entries + i, cache.entries + i + 1,
		(cache.n - (unsigned)i - 1) * sizeof(cache.entries[0]));
	cache.n--;
	cache.bytes -= c->mapped;
	c->size = size;
	return c;
}

bool ruda__host_staging_kept(uint64_t size, struct ruda_device *const *devices, uint32_t n)
{
	return find_cached(size, n, devices, n) >= 0;
}

struct ruda_host_staging *ruda__host_staging_cached(uint64_t size,
						    struct ruda_device *const *devices,
						    uint32_t n)
{
	return take_cached(size, n, devices, n);
}

static int import(struct ruda_host_staging *st, struct ruda_host_import *im)
{
	struct ruda_device *d = im->device;
	if (!d->get_memory_host_pointer_properties ||
	    (d->import_alignment && st->mapped % d->import_alignment))
		return -ENOTSUP;
	return ruda__host_import(d, st->map, st->mapped, &im->buffer, &im->memory);
}

VkBuffer ruda__host_staging_buffer(struct ruda_host_staging *st, struct ruda_device *d)
{
	for (uint32_t i = 0; i < st->nimports; i++)
		if (st->imports[i].device == d)
			return st->imports[i].buffer;
	if (st->nimports == st->max_imports)
		return VK_NULL_HANDLE;
	struct ruda_host_import *im = &st->imports[st->nimports++];
	im->device = d;
	watch_device(im);
	int err = import(st, im);
	if (err < 0) {
		log_error("device %u: cannot import %llu bytes of staging memory: %d", d->index,
			  (unsigned long long)st->mapped, err);
		/* the entry stays, empty, so destroy frees what was made */
		if (im->memory) {
			vkFreeMemory(d->vk, im->memory, NULL);
			im->memory = VK_NULL_HANDLE;
		}
		if (im->buffer) {
			vkDestroyBuffer(d->vk, im->buffer, NULL);
			im->buffer = VK_NULL_HANDLE;
		}
		return VK_NULL_HANDLE;
	}
	return im->buffer;
}

/* ---- made in the thread pool ------------------------------------------------ */

struct make_job {
	uv_work_t work;
	uint64_t size;
	uint32_t n;
	struct ruda_host_staging *st;
	int err;
	void (*done)(struct ruda_host_staging *st, void *data);
	void *data;
	struct ruda_device *devices[];
};

static void make_run(uv_work_t *work)
{
	struct make_job *j = work->data;
	j->err = alloc_new(j->size, j->n, &j->st);
	for (uint32_t i = 0; !j->err && i < j->n; i++) {
		struct ruda_host_import *im = &j->st->imports[j->st->nimports++];
		im->device = j->devices[i];
		j->err = import(j->st, im);
	}
}

static void make_done(uv_work_t *work, int status)
{
	struct ruda_step_mark step = ruda__pass_step_begin();
	struct make_job *j = work->data;
	if ((status || j->err) && j->st) {
		log_error("cannot import %llu bytes of staging memory: %d",
			  (unsigned long long)j->size, j->err ? j->err : status);
		really_destroy(j->st);
		j->st = NULL;
	}
	for (uint32_t i = 0; j->st && i < j->st->nimports; i++)
		watch_device(&j->st->imports[i]);
	j->done(j->st, j->data);
	free(j);
	ruda__pass_step_end(step, "thread pool result", "host staging made");
}

int ruda__host_staging_make(uv_loop_t *loop, uint64_t size, struct ruda_device *const *devices,
			    uint32_t n, void (*done)(struct ruda_host_staging *st, void *data),
			    void *data)
{
	struct make_job *j = calloc(1, sizeof(*j) + n * sizeof(j->devices[0]));
	if (!j)
		return -ENOMEM;
	j->work.data = j;
	j->size = size;
	j->n = n;
	j->done = done;
	j->data = data;
	memcpy(j->devices, devices, n * sizeof(j->devices[0]));
	int err = uv_queue_work(loop, &j->work, make_run, make_done);
	if (err)
		free(j);
	return err;
}
