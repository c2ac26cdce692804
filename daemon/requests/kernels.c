/*
 * Kernel requests: KernelRegister (compiled in the thread pool, answered
 * once ready), KernelLookup, KernelRelease, and the measured throughputs
 * (ThroughputGet, ThroughputSet).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "common/handle_table.h"
#include "common/spirv.h"
#include "device/device.h"
#include "exec/pipeline.h"
#include "exec/stream.h"
#include "exec/throughput_cache.h"
#include "memory/arena.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

#define MAX_ENTRY_POINT 255u

struct kernel_waiter {
	struct ruda_pipeline_waiter base;
	struct ruda_session_context *ctx;
	uint64_t session, request, kernel;
	struct ruda_pipeline *pipeline; /* owned reference */
};

/* Give the session its kernel, or tell it why not. */
static void kernel_settle(struct ruda_session *s, struct kernel_waiter *w)
{
	struct ruda_pipeline *p = w->pipeline;
	if (p->state != RUDA_PIPELINE_READY) {
		ruda__reply_status(s->conn, w->request, p->status, "kernel %llu: %s",
				   (unsigned long long)w->kernel, p->error);
		ruda__pipeline_put(p);
		return;
	}
	struct ruda_session_kernel *k = malloc(sizeof(*k));
	int err = k ? ruda__handle_table_insert(&s->kernels, w->kernel, k) : -1;
	if (err) {
		free(k);
		ruda__pipeline_put(p);
		ruda__reply_status(s->conn, w->request,
				   err == -EEXIST ? RUDA_ERROR_INVALID_HANDLE
							  : RUDA_ERROR_OUT_OF_MEMORY,
				   "kernel %llu: %s", (unsigned long long)w->kernel,
				   err == -EEXIST ? "id already in use" : "out of memory");
		return;
	}
	k->pipeline = p;
	s->usage.kernels_registered++;
	ruda__reply_status(s->conn, w->request, RUDA_OK, NULL);
}

static void kernel_waiter_done(struct ruda_pipeline_waiter *base, struct ruda_pipeline *p)
{
	struct kernel_waiter *w = (struct kernel_waiter *)base;
	(void)p;
	struct ruda_session *s = ruda__handle_table_get(&w->ctx->sessions, w->session);
	if (s && s->state == RUDA_SESSION_READY)
		kernel_settle(s, w);
	else
		ruda__pipeline_put(w->pipeline);
	free(w);
}

/* Specialization constants of a request, checked: 4- or 8-byte values,
 * distinct ids. */
static ruda_status spec_constants(const Ruda__KernelRegister *k, ruda_spec_constant *out,
				  char *why, size_t why_len)
{
	if (k->n_specialization > RUDA_PIPELINE_MAX_SPEC_CONSTANTS) {
		snprintf(why, why_len, "%zu specialization constants; at most %u",
			 k->n_specialization, RUDA_PIPELINE_MAX_SPEC_CONSTANTS);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	for (size_t i = 0; i < k->n_specialization; i++) {
		const Ruda__SpecConstant *c = k->specialization[i];
		if (c->value.len != 4 && c->value.len != 8) {
			snprintf(why, why_len, "specialization constant %u: %zu bytes, not 4 or 8",
				 c->id, c->value.len);
			return RUDA_ERROR_INVALID_ARGUMENT;
		}
		for (size_t j = 0; j < i; j++)
			if (out[j].id == c->id) {
				snprintf(why, why_len, "specialization constant %u given twice", c->id);
				return RUDA_ERROR_INVALID_ARGUMENT;
			}
		out[i] = (ruda_spec_constant){.id = c->id, .size = (uint32_t)c->value.len};
		memcpy(&out[i].value, c->value.data, c->value.len); /* 4 or 8: never empty */
	}
	return RUDA_OK;
}

void ruda__handle_kernel_register(struct ruda_session *s, const Ruda__Request *req)
{
	const Ruda__KernelRegister *k = req->kernel_register;
	const VkPhysicalDeviceLimits *l = &s->device->props.limits;
	struct ruda_pipeline_registry *reg = s->ctx->pipelines[s->device->index];
	uint32_t max_bindings = s->device->max_push_descriptors < RUDA_PIPELINE_MAX_BINDINGS
					? s->device->max_push_descriptors
					: RUDA_PIPELINE_MAX_BINDINGS;
	ruda_spec_constant spec[RUDA_PIPELINE_MAX_SPEC_CONSTANTS];
	const uint32_t *spirv = NULL;
	size_t spirv_size = 0;
	ruda_status st = RUDA_ERROR_INVALID_ARGUMENT;
	char why[256] = "";
	if (ruda__handle_table_get(&s->kernels, k->kernel)) {
		st = RUDA_ERROR_INVALID_HANDLE;
		snprintf(why, sizeof(why), "id already in use");
	} else if (k->binding_count > max_bindings)
		snprintf(why, sizeof(why), "%u bindings; the device allows %u", k->binding_count,
			 max_bindings);
	else if (k->push_constant_size % 4 || k->push_constant_size > l->maxPushConstantsSize)
		snprintf(why, sizeof(why),
			 "push-constant size %u: must be a multiple of 4 and at most %u",
			 k->push_constant_size, l->maxPushConstantsSize);
	else if (!k->entry_point || !*k->entry_point || strlen(k->entry_point) > MAX_ENTRY_POINT)
		snprintf(why, sizeof(why), "entry point name missing or over %u bytes",
			 MAX_ENTRY_POINT);
	else if (k->size == 0) {
		/* by hash: the module must already be here */
		const struct ruda_pipeline *known =
			k->module_hash.len == RUDA_SHA256_SIZE
				? ruda__pipeline_registry_find_module(reg, k->module_hash.data)
				: NULL;
		if (known) {
			spirv = known->spirv;
			spirv_size = known->spirv_size;
			st = spec_constants(k, spec, why, sizeof(why));
		} else {
			st = RUDA_ERROR_INVALID_HANDLE;
			snprintf(why, sizeof(why), "no module with that SHA-256 in rudad");
		}
	} else if (k->size % 4 || k->size < 20) {
		st = RUDA_ERROR_INVALID_KERNEL;
		snprintf(why, sizeof(why), "SPIR-V size %llu is not a whole module",
			 (unsigned long long)k->size);
	} else if (k->size > (uint64_t)RUDA_SPIRV_MAX_WORDS * 4) {
		/* refused before it is copied, hashed or validated */
		st = RUDA_ERROR_INVALID_KERNEL;
		snprintf(why, sizeof(why), "SPIR-V of %llu words is over rudad's limit of %u words",
			 (unsigned long long)k->size / 4, RUDA_SPIRV_MAX_WORDS);
	} else if (!ruda__arena_contains(s->arena, k->arena_offset, k->size)) {
		st = RUDA_ERROR_OUT_OF_RANGE;
		snprintf(why, sizeof(why), "SPIR-V bytes %llu..%llu lie outside the arena",
			 (unsigned long long)k->arena_offset,
			 (unsigned long long)(k->arena_offset + k->size));
	} else {
		spirv = (const uint32_t *)(s->arena->map + k->arena_offset);
		spirv_size = k->size;
		st = spec_constants(k, spec, why, sizeof(why));
	}
	if (st != RUDA_OK) {
		ruda__session_arena_used(s, req->id);
		ruda__reply_status(s->conn, req->id, st, "kernel %llu: %s",
				   (unsigned long long)k->kernel, why);
		return;
	}

	struct kernel_waiter *w = calloc(1, sizeof(*w));
	if (!w) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
		return;
	}
	w->base.done = kernel_waiter_done;
	w->ctx = s->ctx;
	w->session = s->id;
	w->request = req->id;
	w->kernel = k->kernel;
	struct ruda_pipeline_key key = {
		.spirv = spirv,
		.spirv_size = spirv_size,
		.entry_point = k->entry_point,
		.binding_count = k->binding_count,
		.push_constant_size = k->push_constant_size,
		.spec = spec,
		.nspec = (uint32_t)k->n_specialization,
		.owner = s->id,
	};
	st = ruda__pipeline_acquire(reg, &key, &w->base, &w->pipeline);
	/* the module has been copied or compared: its arena bytes are free */
	ruda__session_arena_used(s, req->id);
	if (st != RUDA_OK) {
		free(w);
		ruda__reply_status(s->conn, req->id, st, "kernel %llu: cannot compile",
				   (unsigned long long)k->kernel);
		return;
	}
	if (w->pipeline->state != RUDA_PIPELINE_COMPILING) {
		kernel_settle(s, w);
		free(w);
	}
	/* else the waiter settles it when the compilation is done */
}

void ruda__handle_kernel_lookup(struct ruda_session *s, const Ruda__Request *req)
{
	const ProtobufCBinaryData *h = &req->kernel_lookup->module_hash;
	struct ruda_pipeline_registry *reg = s->ctx->pipelines[s->device->index];
	if (h->len == RUDA_SHA256_SIZE && ruda__pipeline_registry_find_module(reg, h->data))
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
	else
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "no module with that SHA-256 in rudad");
}

void ruda__handle_kernel_release(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_kernel *k =
		ruda__handle_table_remove(&s->kernels, req->kernel_release->kernel);
	if (!k) {
		ruda__stream_fail(s->current, RUDA_ERROR_INVALID_HANDLE,
				  "release: no kernel %llu in this session",
				  (unsigned long long)req->kernel_release->kernel);
		return;
	}
	ruda__pipeline_put(k->pipeline);
	free(k);
}

static struct ruda_throughput_cache *throughput_cache(struct ruda_session *s)
{
	struct ruda_session_context *ctx = s->ctx;
	return ctx->throughput_caches ? ctx->throughput_caches[s->device->index] : NULL;
}

void ruda__handle_throughput_get(struct ruda_session *s, const Ruda__Request *req)
{
	const char *key = req->throughput_get->key;
	struct ruda_throughput_cache *cache = throughput_cache(s);
	double value = 0;
	int err = cache ? ruda__throughput_cache_get(cache, key, &value) : -ENOMEM;
	if (err == -EINVAL) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput key empty or over %u bytes",
				   RUDA_THROUGHPUT_MAX_KEY);
		return;
	}
	if (err) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_HANDLE,
				   "no throughput measured for \"%s\" yet", key);
		return;
	}
	Ruda__ThroughputReply tr = RUDA__THROUGHPUT_REPLY__INIT;
	tr.value = value;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_THROUGHPUT;
	reply.throughput = &tr;
	ruda__reply_send(s->conn, &reply);
}

void ruda__handle_throughput_set(struct ruda_session *s, const Ruda__Request *req)
{
	const char *key = req->throughput_set->key;
	double value = req->throughput_set->value;
	struct ruda_throughput_cache *cache = throughput_cache(s);
	int err = cache ? ruda__throughput_cache_set(cache, key, value) : -ENOMEM;
	if (err == -EINVAL && !(key && *key && strlen(key) <= RUDA_THROUGHPUT_MAX_KEY))
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput key empty or over %u bytes",
				   RUDA_THROUGHPUT_MAX_KEY);
	else if (err == -EINVAL) /* every client reads what one sets */
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "throughput %g for \"%s\" is not a finite value above 0",
				   value, key);
	else if (err == -ENOSPC)
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_QUOTA,
				   "the throughput cache of device %u is full (%u keys): "
				   "\"%s\" is not recorded",
				   s->device->index, RUDA_THROUGHPUT_MAX, key);
	else if (err)
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_OUT_OF_MEMORY, "out of memory");
	else
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}
