/* libruda: the daemon's devices, properties, utilization, transfers
 * between clients and collectives. */
#include <stdlib.h>
#include <string.h>

#include <ruda/ruda.h>

#include "client_private.h"
#include "struct_size.h"
#include "ruda.pb-c.h"

/* ---- properties ------------------------------------------------------------ */

void ruda__client_properties_extend(ruda_device_properties *p, const Ruda__DeviceInfo *d)
{
	p->id.type_id = (uint16_t)d->type;
	p->id.index_id = d->type_index;
	p->physical_index = d->physical_index;
	const Ruda__DeviceDetails *x = d->details;
	if (!x)
		return;
	p->min_subgroup_size = x->min_subgroup_size;
	p->max_subgroup_size = x->max_subgroup_size;
	p->max_shared_memory = x->max_shared_memory;
	p->max_storage_buffers = x->max_storage_buffers;
	p->timestamp_period_ps = x->timestamp_period_ps;
	p->spirv_version = x->spirv_version;
	p->memory_budget = x->memory_budget;
	p->heap_count = x->n_heaps < RUDA_MAX_HEAPS ? (uint32_t)x->n_heaps : RUDA_MAX_HEAPS;
	for (uint32_t i = 0; i < p->heap_count; i++) {
		p->heaps[i].size = x->heaps[i]->size;
		p->heaps[i].device_local = x->heaps[i]->device_local;
	}
	ruda_features *f = &p->features;
	f->elem_types = x->elem_types;
	f->atomic_elem_types = x->atomic_elem_types;
	f->subgroup_operations = x->subgroup_operations;
	f->coop_matrix_count = x->n_coop_matrix < RUDA_MAX_COOP_SHAPES
				       ? (uint32_t)x->n_coop_matrix
				       : RUDA_MAX_COOP_SHAPES;
	for (uint32_t i = 0; i < f->coop_matrix_count; i++) {
		const Ruda__CoopMatrixShape *c = x->coop_matrix[i];
		f->coop_matrix[i] = (ruda_coop_matrix_shape){
			.m = c->m, .n = c->n, .k = c->k,
			.a = (ruda_elem_type)c->a_type, .b = (ruda_elem_type)c->b_type,
			.c = (ruda_elem_type)c->c_type, .d = (ruda_elem_type)c->d_type,
		};
	}
}

int ruda__client_devices_init(struct ruda_client_devices *devs, const Ruda__HelloReply *h,
			      void (*copy)(ruda_device_properties *, const Ruda__DeviceInfo *))
{
	devs->list = calloc(h->n_devices ? h->n_devices : 1, sizeof(*devs->list));
	if (!devs->list)
		return -1;
	devs->count = h->n_devices;
	for (size_t i = 0; i < h->n_devices; i++)
		copy(&devs->list[i], h->devices[i]);
	return 0;
}

void ruda__client_devices_finish(struct ruda_client_devices *devs)
{
	free(devs->list);
	devs->list = NULL;
	devs->count = 0;
}

/* FNV-1a over the fields that describe the hardware and its limits (not
 * the index or the id, which only say where the device sits). */
static uint64_t fnv(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

uint64_t ruda__client_devices_fingerprint(const ruda_device_properties *p)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv(h, p->name, strnlen(p->name, sizeof(p->name)));
	h = fnv(h, &p->vendor_id, sizeof(p->vendor_id));
	h = fnv(h, &p->device_id, sizeof(p->device_id));
	h = fnv(h, &p->type, sizeof(p->type));
	h = fnv(h, &p->api_version, sizeof(p->api_version));
	h = fnv(h, &p->driver_version, sizeof(p->driver_version));
	h = fnv(h, p->pipeline_cache_uuid, sizeof(p->pipeline_cache_uuid));
	h = fnv(h, &p->max_buffer_size, sizeof(p->max_buffer_size));
	h = fnv(h, &p->max_storage_buffer_range, sizeof(p->max_storage_buffer_range));
	h = fnv(h, &p->min_storage_buffer_offset_alignment, sizeof(uint32_t));
	h = fnv(h, &p->max_push_constants_size, sizeof(uint32_t));
	h = fnv(h, &p->max_bindings, sizeof(uint32_t));
	h = fnv(h, p->max_workgroup_count, sizeof(p->max_workgroup_count));
	h = fnv(h, p->max_workgroup_size, sizeof(p->max_workgroup_size));
	h = fnv(h, &p->max_workgroup_invocations, sizeof(uint32_t));
	h = fnv(h, &p->subgroup_size, sizeof(uint32_t));
	h = fnv(h, &p->min_subgroup_size, sizeof(uint32_t));
	h = fnv(h, &p->max_subgroup_size, sizeof(uint32_t));
	h = fnv(h, &p->max_shared_memory, sizeof(uint32_t));
	h = fnv(h, &p->features.elem_types, sizeof(uint32_t));
	h = fnv(h, &p->features.atomic_elem_types, sizeof(uint32_t));
	h = fnv(h, &p->features.subgroup_operations, sizeof(uint32_t));
	for (uint32_t i = 0; i < p->features.coop_matrix_count; i++)
		h = fnv(h, &p->features.coop_matrix[i], sizeof(p->features.coop_matrix[i]));
	return h;
}

ruda_device_id ruda_client_device_id(const ruda_client *c)
{
	ruda_device_properties *p = ruda__client_props((ruda_client *)c);
	return p->id;
}

size_t ruda_client_enumerate_devices(const ruda_client *c, uint16_t type_id, ruda_device_id *out,
				     size_t max)
{
	const struct ruda_client_devices *d = ruda__client_devices(c);
	size_t n = 0;
	for (size_t i = 0; i < d->count; i++) {
		if (d->list[i].id.type_id != type_id)
			continue;
		if (out && n < max)
			out[n] = d->list[i].id;
		n++;
	}
	return n;
}

size_t ruda_client_enumerate_all_devices(const ruda_client *c, ruda_device_id *out, size_t max)
{
	const struct ruda_client_devices *d = ruda__client_devices(c);
	for (size_t i = 0; out && i < d->count && i < max; i++)
		out[i] = d->list[i].id;
	return d->count;
}

size_t ruda_client_device_count(const ruda_client *c, uint16_t type_id)
{
	return ruda_client_enumerate_devices(c, type_id, NULL, 0);
}

size_t ruda_client_device_count_total(const ruda_client *c)
{
	return ruda__client_devices(c)->count;
}

/* The daemon's index of device `id`, or -1. */
static int device_index(const ruda_client *c, ruda_device_id id)
{
	const struct ruda_client_devices *d = ruda__client_devices(c);
	for (size_t i = 0; i < d->count; i++)
		if (d->list[i].id.type_id == id.type_id && d->list[i].id.index_id == id.index_id)
			return (int)d->list[i].index;
	return -1;
}

ruda_status ruda_client_device_properties(const ruda_client *c, ruda_device_id id,
					  ruda_device_properties *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_DEVICE_PROPERTIES) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	const struct ruda_client_devices *d = ruda__client_devices(c);
	for (size_t i = 0; i < d->count; i++)
		if (d->list[i].id.type_id == id.type_id && d->list[i].id.index_id == id.index_id) {
			ruda__struct_out(out, ruda__struct_size(out), &d->list[i],
					 sizeof(d->list[i]));
			return RUDA_OK;
		}
	return RUDA_ERROR_INVALID_ARGUMENT;
}

ruda_status ruda_client_features(const ruda_client *c, ruda_features *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_FEATURES) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	const ruda_features *f = &ruda__client_props((ruda_client *)c)->features;
	ruda__struct_out(out, ruda__struct_size(out), f, sizeof(*f));
	return RUDA_OK;
}

ruda_device_properties *ruda_client_properties_mut(ruda_client *c)
{
	return c ? ruda__client_props(c) : NULL;
}

uint64_t ruda_client_properties_fingerprint(const ruda_client *c)
{
	return ruda__client_devices(c)->fingerprint;
}

ruda_status ruda_client_target_properties(const ruda_client *c, ruda_target_properties *out)
{
	if (!c || ruda__struct_out_ok(out, RUDA__MIN_TARGET_PROPERTIES) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	const ruda_device_properties *p = ruda__client_props((ruda_client *)c);
	ruda_target_properties t = {
		.spirv_version = p->spirv_version,
		.subgroup_size = p->subgroup_size,
		.min_subgroup_size = p->min_subgroup_size,
		.max_subgroup_size = p->max_subgroup_size,
		.max_workgroup_invocations = p->max_workgroup_invocations,
		.max_shared_memory = p->max_shared_memory,
		.min_storage_buffer_offset_alignment = p->min_storage_buffer_offset_alignment,
		.max_bindings = p->max_bindings,
		.max_push_constants_size = p->max_push_constants_size,
		.coop_matrix_count = p->features.coop_matrix_count,
	};
	ruda__struct_out(out, ruda__struct_size(out), &t, sizeof(t));
	return RUDA_OK;
}

size_t ruda_client_io_optimized_vector_sizes(const ruda_client *c, size_t elem_size,
					     uint32_t *out, size_t max)
{
	if (!c || !elem_size || elem_size > 16)
		return 0;
	/* Vulkan vectors have 2 to 4 components, and a load or store of up to
	 * 16 bytes is one access on every device rudad drives */
	uint32_t widest = 16 / elem_size < 4 ? (uint32_t)(16 / elem_size) : 4;
	size_t n = 0;
	for (uint32_t width = widest; width >= 1; width /= 2) {
		if (width & (width - 1))
			continue; /* 3: not a power of two */
		if (out && n < max)
			out[n] = width;
		n++;
	}
	return n;
}

ruda_status ruda_client_utilization(ruda_client *c, ruda_device_utilization *given)
{
	if (!c || ruda__struct_out_ok(given, RUDA__MIN_DEVICE_UTILIZATION) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_device_utilization util = RUDA_DEVICE_UTILIZATION_INIT, *out = &util;
	Ruda__Utilization u = RUDA__UTILIZATION__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_UTILIZATION;
	req.utilization = &u;
	Ruda__Reply *reply = NULL;
	ruda_status st = ruda__client_call(c, &req, &reply);
	if (st == RUDA_OK && reply->body_case != RUDA__REPLY__BODY_UTILIZATION)
		st = RUDA_ERROR_PROTOCOL;
	if (st == RUDA_OK) {
		const Ruda__UtilizationReply *r = reply->utilization;
		out->recent = r->recent;
		out->window_ns = r->window_ns;
		out->busy_ns = r->busy_ns;
		out->uptime_ns = r->uptime_ns;
		out->inflight = r->inflight;
		out->bytes = r->bytes;
		size_t n = r->n_heap_usage < r->n_heap_budget ? r->n_heap_usage : r->n_heap_budget;
		out->heap_count = n < RUDA_MAX_HEAPS ? (uint32_t)n : RUDA_MAX_HEAPS;
		for (uint32_t i = 0; i < out->heap_count; i++) {
			out->heap_usage[i] = r->heap_usage[i];
			out->heap_budget[i] = r->heap_budget[i];
		}
		ruda__struct_out(given, ruda__struct_size(given), &util, sizeof(util));
	}
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}

int ruda_client_has_device_transport(const ruda_client *c)
{
	(void)c;
	return 1;
}

/* ---- transfers between clients ---------------------------------------------- */

static ruda_status to_client(ruda_client *c, ruda_handle src, const uint64_t *shape,
			     const uint64_t *strides, size_t rank, size_t elem_size,
			     ruda_client *dst, ruda_handle *out)
{
	if (!c || !dst || !out || (rank && (!shape || !strides)) || rank > 8)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__ToClient t = RUDA__TO_CLIENT__INIT;
	t.handle = src.id;
	t.offset = src.offset;
	t.size = src.size;
	t.target_session = ruda_client_session_id(dst);
	/* the id is the target's: it names the buffer from now on */
	t.target_handle = ruda__client_next_id(dst);
	uint64_t packed = src.size;
	if (rank) {
		t.n_shape = t.n_strides = rank;
		t.shape = (uint64_t *)shape;
		t.strides = (uint64_t *)strides;
		t.elem_size = (uint32_t)elem_size;
		packed = elem_size;
		for (size_t i = 0; i < rank; i++)
			packed *= shape[i];
	}
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_TO_CLIENT;
	req.to_client = &t;
	/* the target's queued requests go first (a release of the id's
	 * previous holder, say) */
	ruda_client_flush(dst);
	ruda_status st = ruda__client_call(c, &req, NULL);
	if (st == RUDA_OK)
		*out = (ruda_handle){.id = t.target_handle, .offset = 0, .size = packed};
	return st;
}

ruda_status ruda_client_to_client(ruda_client *c, ruda_handle src, ruda_client *dst,
				  ruda_elem_type dtype, ruda_handle *out)
{
	(void)dtype; /* bytes are bytes */
	return to_client(c, src, NULL, NULL, 0, 0, dst, out);
}

ruda_status ruda_client_to_client_tensor(ruda_client *c, ruda_handle src, const uint64_t *shape,
					 const uint64_t *strides, size_t rank, size_t elem_size,
					 ruda_client *dst, ruda_elem_type dtype, ruda_handle *out)
{
	(void)dtype;
	if (!rank)
		return RUDA_ERROR_INVALID_ARGUMENT;
	return to_client(c, src, shape, strides, rank, elem_size, dst, out);
}

/* ---- collectives --------------------------------------------------------------- */

/* Daemon indices of `devices`; RUDA_ERROR_INVALID_ARGUMENT for an unknown one. */
static ruda_status indices(ruda_client *c, const ruda_device_id *devices, size_t count,
			   uint32_t *out)
{
	for (size_t i = 0; i < count; i++) {
		int index = device_index(c, devices[i]);
		if (index < 0) {
			ruda__client_set_error(c, "no device of type %u and index %u",
					       devices[i].type_id, devices[i].index_id);
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		out[i] = (uint32_t)index;
	}
	return RUDA_OK;
}

ruda_status ruda_client_ensure_init_collective(ruda_client *c, const ruda_device_id *devices,
					       size_t count)
{
	if (!c || !devices || !count || count > 1024)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint32_t idx[count];
	ruda_status st = indices(c, devices, count, idx);
	if (st != RUDA_OK)
		return st;
	Ruda__CollectiveInit ci = RUDA__COLLECTIVE_INIT__INIT;
	ci.n_devices = count;
	ci.devices = idx;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_COLLECTIVE_INIT;
	req.collective_init = &ci;
	return ruda__client_call(c, &req, NULL);
}

ruda_status ruda_client_all_reduce(ruda_client *c, ruda_handle src, ruda_handle dst,
				   ruda_elem_type dtype, const ruda_device_id *devices,
				   size_t count, ruda_reduce_op op)
{
	if (!c || !devices || !count || count > 1024)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint32_t idx[count];
	ruda_status st = indices(c, devices, count, idx);
	if (st != RUDA_OK)
		return st;
	Ruda__AllReduce a = RUDA__ALL_REDUCE__INIT;
	a.src = src.id;
	a.src_offset = src.offset;
	a.dst = dst.id;
	a.dst_offset = dst.offset;
	a.size = src.size;
	a.elem_type = (uint32_t)dtype;
	a.op = (Ruda__ReduceOp)op;
	a.n_devices = count;
	a.devices = idx;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_ALL_REDUCE;
	req.all_reduce = &a;
	/* sent now: the other participants may be waiting for it */
	return ruda__client_post(c, &req, 1);
}

ruda_status ruda_client_sync_collective(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__CollectiveSync cs = RUDA__COLLECTIVE_SYNC__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_COLLECTIVE_SYNC;
	req.collective_sync = &cs;
	return ruda__client_call(c, &req, NULL);
}
