/*
 * Launch: a kernel recorded on the current stream, or on the graph the
 * stream is capturing.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <ruda/status.h>

#include "common/handle_table.h"
#include "device/device.h"
#include "exec/graph.h"
#include "exec/indirect.h"
#include "exec/pipeline.h"
#include "exec/stream.h"
#include "memory/buffer.h"
#include "requests/handlers.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

static ruda_status launch_bindings(struct ruda_session *s, const Ruda__Launch *l,
				   struct ruda_binding *out, char *why, size_t why_len)
{
	const VkPhysicalDeviceLimits *lim = &s->device->props.limits;
	for (size_t i = 0; i < l->n_bindings; i++) {
		const Ruda__Binding *bd = l->bindings[i];
		const char *reason;
		ruda_status st = ruda__request_buffer_status(s, bd->handle, &reason);
		if (st != RUDA_OK) {
			snprintf(why, why_len, "binding %zu, buffer %llu: %s", i,
				 (unsigned long long)bd->handle, reason);
			return st;
		}
		struct ruda_buffer *b = ruda__request_buffer(s, bd->handle)->buffer;
		uint64_t size = bd->size ? bd->size : (bd->offset < b->size ? b->size - bd->offset : 0);
		if (!ruda__range_ok(bd->offset, size, b->size) || size == 0) {
			snprintf(why, why_len,
				 "binding %zu, buffer %llu: bytes %llu..%llu lie outside its %llu bytes",
				 i, (unsigned long long)bd->handle, (unsigned long long)bd->offset,
				 (unsigned long long)(bd->offset + size), (unsigned long long)b->size);
			return RUDA_ERROR_OUT_OF_RANGE;
		}
		if (bd->offset % lim->minStorageBufferOffsetAlignment) {
			snprintf(why, why_len, "binding %zu: offset %llu is not a multiple of %llu", i,
				 (unsigned long long)bd->offset,
				 (unsigned long long)lim->minStorageBufferOffsetAlignment);
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		if (size > lim->maxStorageBufferRange) {
			snprintf(why, why_len, "binding %zu: %llu bytes; the device binds at most %u",
				 i, (unsigned long long)size, lim->maxStorageBufferRange);
			return RUDA_ERROR_TOO_LARGE;
		}
		out[i] = (struct ruda_binding){.buffer = b, .offset = bd->offset, .size = size};
	}
	return RUDA_OK;
}

/* The buffer and offset of a launch's dynamic counts, checked: 12 bytes
 * inside the buffer at a multiple of 4. */
static ruda_status dynamic_count(struct ruda_session *s, const Ruda__DynamicCount *dc,
				 struct ruda_launch_count *out, char *why, size_t why_len)
{
	const char *reason;
	ruda_status st = ruda__request_buffer_status(s, dc->handle, &reason);
	if (st != RUDA_OK) {
		snprintf(why, why_len, "count buffer %llu: %s", (unsigned long long)dc->handle,
			 reason);
		return st;
	}
	struct ruda_buffer *b = ruda__request_buffer(s, dc->handle)->buffer;
	if (!ruda__range_ok(dc->offset, 12, b->size)) {
		snprintf(why, why_len, "count buffer %llu: bytes %llu..%llu lie outside its %llu bytes",
			 (unsigned long long)dc->handle, (unsigned long long)dc->offset,
			 (unsigned long long)dc->offset + 12, (unsigned long long)b->size);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	if (dc->offset % 4) {
		snprintf(why, why_len, "count buffer %llu: offset %llu is not a multiple of 4",
			 (unsigned long long)dc->handle, (unsigned long long)dc->offset);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (!ruda__indirect_get(s->device)) {
		snprintf(why, why_len, "dynamic counts are unavailable on this device");
		return RUDA_ERROR_UNSUPPORTED;
	}
	out->buffer = b;
	out->offset = dc->offset;
	return RUDA_OK;
}

/* Whether x*y*z workgroups stay below 2^32: drivers count them in 32 bits
 * (lavapipe ran 65535^3 as 196 607, 2^48 mod 2^32, and reported success),
 * and kernels that flatten gl_WorkGroupID into a uint wrap likewise. */
static bool count_product_fits(const uint32_t c[3])
{
	if (!c[0] || !c[1] || !c[2])
		return true; /* a no-op */
	uint64_t xy = (uint64_t)c[0] * c[1];
	return xy <= UINT32_MAX && xy * c[2] <= UINT32_MAX;
}

void ruda__handle_launch(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__Launch *l = req->launch;
	const VkPhysicalDeviceLimits *lim = &s->device->props.limits;
	struct ruda_session_kernel *k = ruda__handle_table_get(&s->kernels, l->kernel);
	struct ruda_binding bindings[RUDA_PIPELINE_MAX_BINDINGS];
	struct ruda_launch_count count = {.count = {l->count_x, l->count_y, l->count_z}};
	uint8_t push[256] = {0};
	char why[256] = "";
	ruda_status st = RUDA_ERROR_INVALID_ARGUMENT;
	if (l->unchecked && !s->unchecked_allowed) {
		st = RUDA_ERROR_PERMISSION;
		snprintf(why, sizeof(why),
			 "rudad's policy does not allow unchecked launches for uid %u", s->uid);
	} else if (!k) {
		st = RUDA_ERROR_INVALID_HANDLE;
		snprintf(why, sizeof(why), "no kernel %llu in this session",
			 (unsigned long long)l->kernel);
	} else if (l->n_bindings != k->pipeline->binding_count)
		snprintf(why, sizeof(why), "%zu bindings given; the kernel declares %u",
			 l->n_bindings, k->pipeline->binding_count);
	else if (l->push_constants.len > k->pipeline->push_constant_size)
		snprintf(why, sizeof(why), "%zu push-constant bytes; the kernel declares %u",
			 l->push_constants.len, k->pipeline->push_constant_size);
	else if (l->dynamic_count)
		st = dynamic_count(s, l->dynamic_count, &count, why, sizeof(why));
	else if (count.count[0] > lim->maxComputeWorkGroupCount[0] ||
		 count.count[1] > lim->maxComputeWorkGroupCount[1] ||
		 count.count[2] > lim->maxComputeWorkGroupCount[2])
		snprintf(why, sizeof(why), "count (%u, %u, %u) exceeds the device's (%u, %u, %u)",
			 count.count[0], count.count[1], count.count[2],
			 lim->maxComputeWorkGroupCount[0], lim->maxComputeWorkGroupCount[1],
			 lim->maxComputeWorkGroupCount[2]);
	else if (!count_product_fits(count.count))
		snprintf(why, sizeof(why),
			 "workgroup count product %u x %u x %u exceeds 2^32-1 (%u) workgroups",
			 count.count[0], count.count[1], count.count[2], UINT32_MAX);
	else
		st = RUDA_OK;
	if (st == RUDA_OK)
		st = launch_bindings(s, l, bindings, why, sizeof(why));
	if (st == RUDA_OK) {
		/* short push constants are zero-padded to the declared size */
		if (l->push_constants.len)
			memcpy(push, l->push_constants.data, l->push_constants.len);
		struct ruda_graph *capture = s->current->capture;
		st = capture ? ruda__graph_launch(capture, k->pipeline, &count, bindings,
						  (uint32_t)l->n_bindings, push,
						  k->pipeline->push_constant_size)
			     : ruda__stream_launch(s->current, k->pipeline, &count, bindings,
						   (uint32_t)l->n_bindings, push,
						   k->pipeline->push_constant_size);
		if (st != RUDA_OK)
			snprintf(why, sizeof(why), "%s", ruda_strerror(st));
	}
	if (st == RUDA_OK) {
		if (!s->current->capture)
			s->usage.launches++;
		return;
	}
	char message[320];
	snprintf(message, sizeof(message), "launch (request %llu): %s",
		 (unsigned long long)req->id, why);
	if (s->current->capture) {
		/* nothing ran: the capture is what failed */
		ruda__graph_fail(s->current->capture, st, "%s", message);
		return;
	}
	/* only what the kernel may write is wrong now: its read-only inputs
	 * (say, a model's weights) keep their bytes and stay readable */
	for (size_t i = 0; i < l->n_bindings; i++)
		if (ruda__pipeline_may_write(k ? k->pipeline : NULL, i))
			ruda__request_mark_failed(s, l->bindings[i]->handle, st, message);
	ruda__stream_fail(s->current, st, "%s", message);
}
