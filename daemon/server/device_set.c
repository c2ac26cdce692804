#include "server/device_set.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device/device_details.h"
#include "exec/combine.h"
#include "exec/copy_kernel.h"
#include "exec/indirect.h"
#include "common/log.h"

static int type_rank(VkPhysicalDeviceType type)
{
	switch (type) {
	case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 4;
	case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 3;
	case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
	case VK_PHYSICAL_DEVICE_TYPE_CPU: return 1;
	default: return 0;
	}
}

/* Every physical device, best type first (stable), leaving CPU devices
 * out when a GPU is there: a CPU rasterizer beside a GPU is rarely wanted. */
static uint32_t all_devices(const struct ruda_vulkan *vk, uint32_t *out, uint32_t max)
{
	uint32_t n = 0;
	int gpu = 0;
	for (uint32_t i = 0; i < vk->nphysical; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(vk->physical[i], &p);
		gpu |= type_rank(p.deviceType) >= 2;
	}
	for (int rank = 4; rank >= 0; rank--)
		for (uint32_t i = 0; i < vk->nphysical && n < max; i++) {
			VkPhysicalDeviceProperties p;
			vkGetPhysicalDeviceProperties(vk->physical[i], &p);
			if (type_rank(p.deviceType) == rank && (!gpu || rank >= 2))
				out[n++] = i;
		}
	return n;
}

int ruda__device_set_resolve(const struct ruda_vulkan *vk, const char *selectors, uint32_t *out,
			     uint32_t max)
{
	if (!selectors || !*selectors)
		return (int)all_devices(vk, out, max);
	uint32_t n = 0;
	const char *p = selectors;
	while (*p) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);
		char one[256];
		/* trim blanks around each item */
		while (len && (*p == ' ' || *p == '\t')) {
			p++;
			len--;
		}
		while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
			len--;
		snprintf(one, sizeof(one), "%.*s", (int)(len < sizeof(one) ? len : sizeof(one) - 1), p);
		if (!*one) {
			log_error("devices: an empty item in \"%s\"", selectors);
			return -ENODEV;
		}
		if (strcmp(one, "all") == 0) {
			n += all_devices(vk, out + n, max - n);
		} else {
			int i = ruda__vulkan_select(vk, one);
			if (i < 0) {
				log_error("devices: no Vulkan device matches \"%s\"", one);
				return -ENODEV;
			}
			if (n == max) {
				log_error("devices: more than %u devices", max);
				return -ENODEV;
			}
			out[n++] = (uint32_t)i;
		}
		p += len;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == ',')
			p++;
	}
	return (int)n;
}

int ruda__device_set_open(struct ruda_device_set *set, struct ruda_vulkan *vk,
			  const char *selectors, uv_loop_t *loop, uint64_t submission_timeout_ns,
			  const char *cache_dir, uint64_t cache_save_period_ms)
{
	memset(set, 0, sizeof(*set));
	uint32_t physical[RUDA_MAX_DEVICES];
	int n = ruda__device_set_resolve(vk, selectors, physical, RUDA_MAX_DEVICES);
	if (n <= 0) {
		if (n == 0)
			log_error("no Vulkan device found");
		return -ENODEV;
	}
	set->slots = calloc((size_t)n, sizeof(*set->slots));
	set->devices = calloc((size_t)n, sizeof(*set->devices));
	set->pipelines = calloc((size_t)n, sizeof(*set->pipelines));
	if (!set->slots || !set->devices || !set->pipelines)
		return -ENOMEM;
	for (uint32_t i = 0; i < (uint32_t)n; i++) {
		struct ruda_device *d;
		int err = ruda__device_create(vk, physical[i], i, loop, &d);
		if (err < 0) {
			return err;
		}
		set->devices[i] = d;
		set->count = i + 1;
		uv_unref((uv_handle_t *)&d->async);
		d->submission_timeout_ns = submission_timeout_ns;
		d->physical_index = physical[i];
		/* the seed's device id: its type and its rank among that type */
		for (uint32_t j = 0; j < i; j++)
			if (set->devices[j]->props.deviceType == d->props.deviceType)
				d->type_index++;
		d->opened_ns = uv_hrtime();
		if (ruda__device_details_query(d, vk->instance) < 0) {
			return -ENOMEM;
		}
		struct ruda_device_entry *slot = &set->slots[i];
		if (ruda__pipeline_registry_init(&slot->pipelines, d, loop) < 0) {
			return -ENOMEM;
		}
		slot->registry_ready = 1;
		set->pipelines[i] = &slot->pipelines;
		if (cache_dir) {
			ruda__pipeline_cache_load(d, cache_dir);
			ruda__pipeline_cache_saver_init(&slot->cache_saver, loop, d, &slot->pipelines,
							cache_dir, cache_save_period_ms);
		}
		ruda__device_build_own_kernels(d);
		log_notice("device %u: %s (physical device %u, %u queue%s of family %u)", i,
			   d->props.deviceName, physical[i], d->nqueues, d->nqueues == 1 ? "" : "s",
			   d->queue_family);
	}
	return 0;
}

void ruda__device_build_own_kernels(struct ruda_device *d)
{
	ruda__copy_kernel_get(d);
	if (d->props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
		return;
	ruda__indirect_build(d);
	ruda__combine_get(d, NULL);
}

void ruda__device_set_close(struct ruda_device_set *set)
{
	for (uint32_t i = 0; set->slots && i < set->count; i++) {
		struct ruda_device_entry *slot = &set->slots[i];
		ruda__pipeline_cache_saver_finish(&slot->cache_saver);
		if (slot->registry_ready)
			ruda__pipeline_registry_finish(&slot->pipelines);
	}
	/* everything in flight completes first, on every device: work on one
	 * may hold host memory imported into another */
	for (uint32_t i = 0; set->devices && i < set->count; i++)
		vkDeviceWaitIdle(set->devices[i]->vk);
	for (uint32_t i = 0; set->devices && i < set->count; i++) {
		struct ruda_device *d = set->devices[i];
		uint64_t value;
		if (ruda__device_read_completed(d, &value) == 0 &&
		    value > atomic_load(&d->completed))
			atomic_store(&d->completed, value);
		ruda__device_process_completions(d);
	}
	for (uint32_t i = 0; set->devices && i < set->count; i++) {
		ruda__device_details_free(set->devices[i]);
		ruda__device_destroy(set->devices[i]);
	}
	set->count = 0;
}

void ruda__device_set_adopt(struct ruda_device_set *set, uint32_t index,
			     const struct ruda_device *old_copy, struct ruda_device_details *details)
{
	struct ruda_device *d = set->devices[index];
	d->physical_index = old_copy->physical_index;
	d->type_index = old_copy->type_index;
	d->opened_ns = uv_hrtime();
	d->details = details;
	if (details) { /* a new device: busy time counts from 0 again */
		details->sample_ns = 0;
		details->sample_busy_ns = 0;
		details->recent = 0;
		details->window_ns = 0;
	}
}

void ruda__device_set_free(struct ruda_device_set *set)
{
	free(set->slots);
	free(set->devices);
	free(set->pipelines);
	memset(set, 0, sizeof(*set));
}
