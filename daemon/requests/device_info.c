#include "requests/device_info.h"

#include <stdio.h>
#include <string.h>

#include "device/device.h"
#include "device/device_details.h"
#include "requests/reply.h"
#include "requests/session.h"

void ruda__device_info_extend(Ruda__DeviceInfo *info, const struct ruda_device *d,
			      struct ruda_device_info_extra *e)
{
	info->type_index = d->type_index;
	info->physical_index = d->physical_index;
	const struct ruda_device_details *x = d->details;
	Ruda__DeviceDetails *dd = &e->details;
	ruda__device_details__init(dd);
	uint32_t nheaps = d->memory.memoryHeapCount < 16 ? d->memory.memoryHeapCount : 16;
	for (uint32_t i = 0; i < nheaps; i++) {
		ruda__memory_heap__init(&e->heaps[i]);
		e->heaps[i].size = d->memory.memoryHeaps[i].size;
		e->heaps[i].device_local =
			(d->memory.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0;
		e->heap_ptrs[i] = &e->heaps[i];
	}
	dd->n_heaps = nheaps;
	dd->heaps = e->heap_ptrs;
	dd->max_memory_allocation = d->max_allocation_size;
	dd->max_compute_workgroup_invocations = d->props.limits.maxComputeWorkGroupInvocations;
	dd->max_compute_workgroup_size_x = d->props.limits.maxComputeWorkGroupSize[0];
	dd->queue_count = d->nqueues;
	if (x) {
		dd->min_subgroup_size = x->min_subgroup_size;
		dd->max_subgroup_size = x->max_subgroup_size;
		dd->subgroup_operations = x->subgroup_operations;
		dd->max_shared_memory = x->max_shared_memory;
		dd->elem_types = x->elem_types;
		dd->atomic_elem_types = x->atomic_elem_types;
		dd->timestamp_period_ps = x->timestamp_period_ps;
		dd->spirv_version = x->spirv_version;
		dd->memory_budget = x->memory_budget;
		dd->max_storage_buffers = x->max_storage_buffers;
		uint32_t n = x->ncoop < 32 ? x->ncoop : 32;
		for (uint32_t i = 0; i < n; i++) {
			Ruda__CoopMatrixShape *c = &e->coop[i];
			ruda__coop_matrix_shape__init(c);
			c->m = x->coop[i].m;
			c->n = x->coop[i].n;
			c->k = x->coop[i].k;
			c->a_type = x->coop[i].a;
			c->b_type = x->coop[i].b;
			c->c_type = x->coop[i].c;
			c->d_type = x->coop[i].d;
			e->coop_ptrs[i] = c;
		}
		dd->n_coop_matrix = n;
		dd->coop_matrix = e->coop_ptrs;
	}
	info->details = dd;
}

ruda_status ruda__device_info_resolve(const struct ruda_session_context *ctx, const Ruda__Hello *h,
				      uint32_t *index, char *why, size_t why_len)
{
	if (!h->by_device_id) {
		if (h->device_index < ctx->ndevices) {
			*index = h->device_index;
			return RUDA_OK;
		}
		snprintf(why, why_len, "no device %u (rudad has %u)", h->device_index,
			 ctx->ndevices);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		const struct ruda_device *d = ctx->devices[i];
		if ((uint32_t)d->props.deviceType == h->device_type_id &&
		    d->type_index == h->device_type_index) {
			*index = i;
			return RUDA_OK;
		}
	}
	snprintf(why, why_len, "no device of type %u and index %u", h->device_type_id,
		 h->device_type_index);
	return RUDA_ERROR_INVALID_ARGUMENT;
}

void ruda__handle_utilization(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_device *d = s->device;
	uint64_t usage[16], budget[16];
	Ruda__UtilizationReply ur = RUDA__UTILIZATION_REPLY__INIT;
	ur.busy_ns = ruda__device_busy_ns(d);
	uint64_t now = uv_hrtime();
	ur.uptime_ns = now > d->opened_ns ? now - d->opened_ns : 0;
	ur.recent = ruda__device_recent_utilization(d, &ur.window_ns);
	ur.inflight = d->inflight_count;
	ur.bytes = d->stats.bytes;
	uint32_t n = ruda__device_memory_budget(d, usage, budget, 16);
	ur.n_heap_usage = ur.n_heap_budget = n;
	ur.heap_usage = usage;
	ur.heap_budget = budget;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_UTILIZATION;
	reply.utilization = &ur;
	ruda__reply_send(s->conn, &reply);
}
