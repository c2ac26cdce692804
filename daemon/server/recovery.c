#include "server/recovery.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/status.h>

#include "memory/arena.h"
#include "device/device.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "exec/pipeline_cache.h"
#include "requests/collective.h"
#include "requests/session.h"
#include "requests/reply.h"
#include "server/connection.h"
#include "server/device_set.h"

int ruda__recovery_close_sessions(struct ruda_session_context *ctx, uint32_t index)
{
	struct ruda_device *d = ctx->devices[index];
	const struct ruda_handle_table *t = &ctx->sessions;
	size_t n = 0;
	struct ruda_session **list = malloc((t->count ? t->count : 1) * sizeof(*list));
	if (!list)
		return -ENOMEM;
	/* collected first: destroying a session changes the table */
	for (size_t i = 0; i < t->cap; i++) {
		struct ruda_session *s = t->slots[i].value;
		if (s && s->device == d)
			list[n++] = s;
	}
	bool timeout = ruda__device_failure(d) == RUDA_ERROR_TIMEOUT;
	for (size_t i = 0; i < n; i++) {
		struct ruda_session *s = list[i];
		/* id 0 answers no request: libruda takes it as the reason the
		 * connection ends, and reports it from then on */
		if (timeout && s->id == d->timed_out_owner) {
			log_notice("session %llu (uid %u, pid %d, \"%s\"): closed: its submission ran "
				   "past submission_timeout_ms", (unsigned long long)s->id, s->uid,
				   s->pid, s->name);
			ruda__reply_status(
				s->conn, 0, RUDA_ERROR_TIMEOUT,
				"a submission of this connection ran past the time limit "
				"(submission_timeout_ms = %llu) on device %u (%s); the connection is "
				"closed and its buffers and kernels are gone",
				(unsigned long long)(d->submission_timeout_ns / 1000000u), index,
				d->props.deviceName);
		} else if (timeout) {
			log_notice("session %llu (uid %u, pid %d, \"%s\"): closed: device %u is "
				   "re-created after another session's timeout",
				   (unsigned long long)s->id, s->uid, s->pid, s->name, index);
			ruda__reply_status(
				s->conn, 0, RUDA_ERROR_DEVICE_LOST,
				"device %u (%s) was reset: another client's submission ran past the "
				"time limit; this connection's buffers and kernels are gone; connect "
				"again to use the re-created device", index, d->props.deviceName);
		} else {
			log_notice("session %llu (uid %u, pid %d, \"%s\"): closed: device %u was lost",
				   (unsigned long long)s->id, s->uid, s->pid, s->name, index);
			ruda__reply_status(
				s->conn, 0, RUDA_ERROR_DEVICE_LOST,
				"device %u (%s) was lost: this connection's buffers and kernels are "
				"gone; connect again to use the re-created device",
				index, d->props.deviceName);
		}
		ruda__connection_end(s);
	}
	free(list);
	return (int)n;
}

int ruda__recovery_tick(struct ruda_session_context *ctx)
{
	int pending = 0;
	if (!ctx->recreate_device)
		return 0;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		struct ruda_device *d = ctx->devices[i];
		uint64_t bit = 1ull << (i % 64);
		/* a timeout too: the device is replaced, and the old one kept
		 * while its work may still run (ruda__device_recreate) */
		if ((ctx->recreate_failed & bit) || ruda__device_failure(d) == RUDA_OK)
			continue;
		/* fail what is in flight now, before its sessions go */
		ruda__device_process_completions(d);
		/* no session may be left on the old device: try again later */
		int err = ruda__recovery_close_sessions(ctx, i) < 0 ? -EAGAIN : 0;
		/* nor a closed session's buffer or kernel (released in
		 * batches otherwise): all now, a loss is rare */
		if (!err) {
			ruda__session_remains_release(ctx, SIZE_MAX);
			err = ctx->recreate_device(ctx->hook_data, i);
		}
		if (err == -EAGAIN) {
			pending++;
		} else if (err < 0) {
			log_error("device %u: cannot be re-created (%d); it stays lost until rudad "
				  "restarts", i, err);
			ctx->recreate_failed |= bit;
		}
	}
	return pending;
}

static int physical_index(const struct ruda_vulkan *vk, const struct ruda_device *d)
{
	for (uint32_t i = 0; i < vk->nphysical; i++)
		if (vk->physical[i] == d->physical)
			return (int)i;
	/* a device re-created on an instance of its own (below): the same
	 * enumeration order */
	return d->physical_index < vk->nphysical ? (int)d->physical_index : -1;
}

/* Instances opened for devices that replace abandoned ones; kept until
 * rudad exits (reachable, so not reported as leaks). */
struct own_instance {
	struct ruda_vulkan vk;
	struct own_instance *next;
};
static struct own_instance *own_instances;

/* A Vulkan instance for a device that replaces one whose work never ends.
 * Drivers keep state per physical device within an instance (lavapipe: one
 * compute thread pool, whose dispatches wait behind the endless one), so a
 * new VkDevice on the same instance may never run either; a new instance
 * gets fresh driver state. NULL: use the shared one. */
static struct ruda_vulkan *fresh_instance(const struct ruda_vulkan *shared)
{
	struct own_instance *o = calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	if (ruda__vulkan_init(&o->vk) < 0 || o->vk.nphysical != shared->nphysical) {
		if (o->vk.instance)
			ruda__vulkan_finish(&o->vk);
		free(o);
		return NULL;
	}
	o->vk.no_export = shared->no_export;
	o->vk.max_queues = shared->max_queues;
	o->vk.lanes = shared->lanes;
	o->vk.test_flush_subnormals = shared->test_flush_subnormals;
	/* the same physical devices: their heaps' budgets stay shared with the
	 * other logical devices on them */
	free(o->vk.budgets);
	o->vk.budgets = shared->budgets;
	o->vk.budgets_borrowed = true;
	o->next = own_instances;
	own_instances = o;
	return &o->vk;
}

int ruda__device_recreate(struct ruda_session_context *ctx, uint32_t index,
			  const struct ruda_device_slot *slot)
{
	struct ruda_device *old = ctx->devices[index];
	struct ruda_arena_pool *pool = &ctx->arena_pools[index];
	/* compilations, a cache save or an arena import may still use the old
	 * device in the thread pool; their completion wakes the loop again */
	if (slot->pipelines->compiling || (slot->saver && slot->saver->saving) ||
	    ruda__arena_pool_busy(pool))
		return -EAGAIN;
	/* an all-reduce's copies or kernel on another device may still use
	 * memory this one lent (a window, emptied with its device): they are
	 * failed and end soon */
	if (ruda__collective_busy(ctx))
		return -EAGAIN;
	int physical = physical_index(slot->vulkan, old);
	if (physical < 0)
		return -ENODEV;
	/* work that ran past the limit may never end (a kernel that loops
	 * forever): waiting for the device to go idle would hang the loop, so
	 * the old device is abandoned, and the new one gets an instance of
	 * its own */
	bool timed_out = ruda__device_failure(old) == RUDA_ERROR_TIMEOUT;
	bool abandon = timed_out && !ruda__device_idle(old);
	struct ruda_vulkan *vk = abandon ? fresh_instance(slot->vulkan) : NULL;
	/* the new device first: if it cannot be opened, the old one stays */
	struct ruda_device *fresh;
	int err = ruda__device_create(vk ? vk : slot->vulkan, (uint32_t)physical, index, ctx->loop,
				      &fresh);
	if (err < 0)
		return err;
	uv_unref((uv_handle_t *)&fresh->async);
	fresh->submission_timeout_ns = old->submission_timeout_ns;
	ruda__memory_set_keep_for_ms(&fresh->allocator, old->allocator.keep_for_ns / 1000000u);
	fresh->on_progress = old->on_progress;
	fresh->progress_data = old->progress_data;

	/* the old one in the order of a shutdown: the cache is saved (it fails
	 * quietly if the driver cannot read it any more), then pipelines,
	 * spare arenas and the device with what failed work still holds */
	if (slot->saver && slot->saver->dir) {
		int64_t r = ruda__pipeline_cache_save(old, slot->saver->dir);
		if (r < 0)
			log_warn("pipeline cache: saving device %u's before re-creating it failed: %s",
				 index, strerror((int)-r));
	}
	ruda__pipeline_registry_finish(slot->pipelines);
	ruda__arena_pool_finish(pool);
	old->on_progress = NULL;
	if (abandon)
		ruda__device_abandon(old);
	else
		ruda__device_destroy(old);

	ctx->devices[index] = fresh;
	*slot->device = fresh;
	err = ruda__pipeline_registry_init(slot->pipelines, fresh, ctx->loop);
	if (slot->cache_dir)
		ruda__pipeline_cache_load(fresh, slot->cache_dir);
	ruda__device_build_own_kernels(fresh);
	if (slot->saver && slot->saver->dir) {
		/* its timer keeps running: only what it saves changes */
		slot->saver->device = fresh;
		slot->saver->saved_compiled = 0;
	}
	ruda__arena_pool_init(pool, ctx->loop, fresh, ctx->arena_size);
	log_notice("device %u: re-created after %s (%s)", index,
		   timed_out ? "a submission timeout" : "a device loss", fresh->props.deviceName);
	return err;
}
