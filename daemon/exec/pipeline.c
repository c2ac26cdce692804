#include "exec/pipeline.h"

#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "device/device.h"
#include "common/log.h"
#include "common/spirv.h"

/* Pipelines nobody uses are kept for later clients up to this many. */
#define REGISTRY_KEEP 1024u
/* ... and memory is given back after this many were dropped for room. */
#define RELEASE_EVERY 256u

static uint64_t fnv1a(uint64_t h, const void *data, size_t len)
{
	const uint8_t *p = data;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Bucket hash only: every candidate is compared in full. */
static uint64_t key_hash(const struct ruda_pipeline_key *k)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv1a(h, k->spirv, k->spirv_size);
	h = fnv1a(h, k->entry_point, strlen(k->entry_point) + 1);
	h = fnv1a(h, &k->binding_count, sizeof(k->binding_count));
	h = fnv1a(h, &k->push_constant_size, sizeof(k->push_constant_size));
	return k->nspec ? fnv1a(h, k->spec, k->nspec * sizeof(*k->spec)) : h;
}

static int key_matches(const struct ruda_pipeline *p, const struct ruda_pipeline_key *k,
		       uint64_t hash)
{
	return p->hash == hash && p->spirv_size == k->spirv_size &&
	       p->binding_count == k->binding_count &&
	       p->push_constant_size == k->push_constant_size &&
	       p->nspec == k->nspec && strcmp(p->entry_point, k->entry_point) == 0 &&
	       (!k->nspec || memcmp(p->spec, k->spec, k->nspec * sizeof(*k->spec)) == 0) &&
	       memcmp(p->spirv, k->spirv, k->spirv_size) == 0;
}

static void unlink_pipeline(struct ruda_pipeline *p)
{
	struct ruda_pipeline_registry *reg = p->registry;
	struct ruda_pipeline **link = &reg->buckets[p->hash % reg->nbuckets];
	while (*link && *link != p)
		link = &(*link)->hash_next;
	if (*link) {
		*link = p->hash_next;
		reg->count--;
	}
}

static void pipeline_destroy(struct ruda_ref *ref)
{
	struct ruda_pipeline *p = (struct ruda_pipeline *)ref;
	struct ruda_device *d = p->registry->device;
	if (p->vk)
		d->stats.pipelines--;
	struct ruda_pipeline_objects made = {
		.module = p->module,
		.set_layout = p->set_layout,
		.layout = p->layout,
		.pipeline = p->vk,
	};
	ruda__pipeline_objects_destroy(d->vk, &made);
	free(p->spirv);
	free(p->entry_point);
	free(p->spec);
	free(p);
}

static void compile(struct ruda_pipeline *p, struct ruda_device *d);
static int check(struct ruda_pipeline *p, struct ruda_device *d);

static uint64_t elapsed_ns(const struct timespec *start)
{
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	return (uint64_t)(end.tv_sec - start->tv_sec) * 1000000000u +
	       (uint64_t)(end.tv_nsec - start->tv_nsec);
}

/* Thread pool: everything here touches only `p` and thread-safe Vulkan. */
static void check_work(uv_work_t *work)
{
	struct ruda_pipeline *p = work->data;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	check(p, p->registry->device);
	p->compile_ns += elapsed_ns(&start);
}

static void compile_work(uv_work_t *work)
{
	struct ruda_pipeline *p = work->data;
	struct timespec start;
	clock_gettime(CLOCK_MONOTONIC, &start);
	compile(p, p->registry->device);
	p->compile_ns += elapsed_ns(&start);
}

/* The static checks at register (daemon/spirv.c); 0 when they pass. */
static int check(struct ruda_pipeline *p, struct ruda_device *d)
{
	const VkPhysicalDeviceLimits *dl = &d->props.limits;
	struct ruda_spirv_limits limits = {
		.max_workgroup_size = {dl->maxComputeWorkGroupSize[0], dl->maxComputeWorkGroupSize[1],
				       dl->maxComputeWorkGroupSize[2]},
		.max_workgroup_invocations = dl->maxComputeWorkGroupInvocations,
		.max_shared_bytes = dl->maxComputeSharedMemorySize,
		.max_private_bytes = RUDA_SPIRV_MAX_PRIVATE_BYTES,
		.max_words = RUDA_SPIRV_MAX_WORDS,
		.max_call_depth = RUDA_SPIRV_MAX_CALL_DEPTH,
		.max_inlined_instructions = RUDA_SPIRV_MAX_INLINED_INSTRUCTIONS,
	};
	struct ruda_spirv_layout expected = {
		.api_version = d->props.apiVersion,
		.entry_point = p->entry_point,
		.binding_count = p->binding_count,
		.push_constant_size = p->push_constant_size,
		.features = &d->spirv_features,
		.limits = &limits,
		.spec = p->spec,
		.nspec = p->nspec,
		.writable = &p->writable,
	};
	p->writable = UINT64_MAX; /* until the module says otherwise */
	if (ruda__spirv_check(p->spirv, p->spirv_size / 4, &expected, p->error,
			      sizeof(p->error)) < 0) {
		p->status = RUDA_ERROR_INVALID_KERNEL;
		return -1;
	}
	return 0;
}

/* What the kernel is compiled from, here and in the compile worker. */
static struct ruda_pipeline_source source_of(const struct ruda_pipeline *p)
{
	return (struct ruda_pipeline_source){
		.spirv = p->spirv,
		.spirv_size = p->spirv_size,
		.entry_point = p->entry_point,
		.binding_count = p->binding_count,
		.push_constant_size = p->push_constant_size,
		.spec = p->spec,
		.nspec = p->nspec,
	};
}

static void compile(struct ruda_pipeline *p, struct ruda_device *d)
{
	struct ruda_pipeline_source src = source_of(p);
	struct ruda_pipeline_objects made;
	VkResult r = ruda__pipeline_build(d->vk, d->pipeline_cache, &src, &made);
	/* kept even on failure: pipeline_destroy destroys what was made */
	p->module = made.module;
	p->set_layout = made.set_layout;
	p->layout = made.layout;
	p->vk = made.pipeline;
	if (r != VK_SUCCESS) {
		p->status = r == VK_ERROR_OUT_OF_HOST_MEMORY || r == VK_ERROR_OUT_OF_DEVICE_MEMORY
				    ? RUDA_ERROR_OUT_OF_MEMORY
				    : RUDA_ERROR_INVALID_KERNEL;
		snprintf(p->error, sizeof(p->error), "the driver refused the kernel (VkResult %d)",
			 r);
	}
}

static void compile_finish(struct ruda_pipeline *p)
{
	struct ruda_pipeline_registry *reg = p->registry;
	if (p->status == RUDA_OK) {
		p->state = RUDA_PIPELINE_READY;
		reg->device->stats.pipelines++;
	} else {
		p->state = RUDA_PIPELINE_FAILED;
		/* a refused module is not kept, so garbage never fills the table */
		unlink_pipeline(p);
		ruda_ref_put(&p->ref); /* the registry's; waiters hold their own */
	}
	reg->compiled++;
	reg->compiling--;
	reg->compile_ns += p->compile_ns;
	reg->device->stats.kernels_compiled++;
	struct ruda_pipeline_waiter *w = p->waiters;
	p->waiters = NULL;
	while (w) {
		struct ruda_pipeline_waiter *next = w->next;
		w->done(w, p);
		w = next;
	}
	ruda_ref_put(&p->ref); /* the compilation's own reference */
}

static void compile_done(uv_work_t *work, int status)
{
	struct ruda_pipeline *p = work->data;
	if (status < 0 && p->status == RUDA_OK) {
		p->status = RUDA_ERROR_INTERNAL;
		snprintf(p->error, sizeof(p->error), "compilation cancelled");
	}
	compile_finish(p);
}

/* In the thread pool, as every kernel compiled before the worker. */
static void compile_in_process(struct ruda_pipeline *p)
{
	if (uv_queue_work(p->registry->loop, &p->work, compile_work, compile_done) < 0) {
		p->status = RUDA_ERROR_INTERNAL;
		snprintf(p->error, sizeof(p->error), "compilation cancelled");
		compile_finish(p);
	}
}

static void worker_done(struct ruda_compile_job *job, enum ruda_compile_result result,
			ruda_status status, const char *message)
{
	struct ruda_pipeline *p = job->data;
	p->compile_ns += job->start_ns ? uv_hrtime() - job->start_ns : 0;
	if (result == RUDA_COMPILE_REFUSED) {
		p->status = status;
		snprintf(p->error, sizeof(p->error), "%s", message);
		compile_finish(p);
		return;
	}
	/* it compiled in bounds (the driver may still refuse it: the same
	 * error then comes from here), or there is no worker */
	compile_in_process(p);
}

static void check_done(uv_work_t *work, int status)
{
	struct ruda_pipeline *p = work->data;
	struct ruda_pipeline_registry *reg = p->registry;
	if (status < 0 && p->status == RUDA_OK) {
		p->status = RUDA_ERROR_INTERNAL;
		snprintf(p->error, sizeof(p->error), "compilation cancelled");
	}
	if (p->status != RUDA_OK) {
		compile_finish(p);
		return;
	}
	struct ruda_compile_request req = {.kernel = source_of(p), .owner = p->owner};
	ruda__compile_request_digest(&req, p->job.digest);
	/* a kernel that went past a bound before is not compiled again */
	ruda_status verdict =
		ruda__compile_pool_verdict(&reg->workers, p->job.digest, p->error, sizeof(p->error));
	if (verdict != RUDA_OK) {
		p->status = verdict;
		compile_finish(p);
		return;
	}
	int err = ruda__compile_pool_submit(&reg->workers, &p->job, &req, worker_done, p);
	if (err == -ENOMEM) {
		p->status = RUDA_ERROR_OUT_OF_MEMORY;
		snprintf(p->error, sizeof(p->error), "out of memory");
		compile_finish(p);
	} else if (err < 0) {
		compile_in_process(p);
	}
}

int ruda__pipeline_registry_init(struct ruda_pipeline_registry *reg, struct ruda_device *device,
				 uv_loop_t *loop)
{
	memset(reg, 0, sizeof(*reg));
	reg->device = device;
	reg->loop = loop;
	reg->nbuckets = 256;
	reg->buckets = calloc(reg->nbuckets, sizeof(*reg->buckets));
	ruda__compile_pool_init(&reg->workers, loop, device->physical_index, device->device_uuid);
	return reg->buckets ? 0 : -ENOMEM;
}

void ruda__pipeline_registry_finish(struct ruda_pipeline_registry *reg)
{
	for (size_t i = 0; i < reg->nbuckets; i++) {
		while (reg->buckets[i]) {
			struct ruda_pipeline *p = reg->buckets[i];
			reg->buckets[i] = p->hash_next;
			reg->count--;
			p->hash_next = NULL;
			ruda_ref_put(&p->ref);
		}
	}
	free(reg->buckets);
	reg->buckets = NULL;
	ruda__compile_pool_finish(&reg->workers);
}

size_t ruda__pipeline_registry_trim(struct ruda_pipeline_registry *reg, size_t keep)
{
	size_t dropped = 0;
	for (size_t i = 0; i < reg->nbuckets && reg->count > keep; i++) {
		struct ruda_pipeline **link = &reg->buckets[i];
		while (*link && reg->count > keep) {
			struct ruda_pipeline *p = *link;
			/* only the registry holds it, and no compilation runs */
			if (p->ref.count == 1 && p->state == RUDA_PIPELINE_READY) {
				*link = p->hash_next;
				reg->count--;
				dropped++;
				ruda_ref_put(&p->ref);
			} else {
				link = &p->hash_next;
			}
		}
	}
	return dropped;
}

const struct ruda_pipeline *ruda__pipeline_registry_find_module(
	const struct ruda_pipeline_registry *reg, const uint8_t sha[RUDA_SHA256_SIZE])
{
	for (size_t i = 0; i < reg->nbuckets; i++)
		for (const struct ruda_pipeline *p = reg->buckets[i]; p; p = p->hash_next)
			if (memcmp(p->module_sha, sha, RUDA_SHA256_SIZE) == 0)
				return p;
	return NULL;
}

size_t ruda__pipeline_registry_modules(const struct ruda_pipeline_registry *reg)
{
	/* quadratic, but bounded by the registry's size and asked rarely */
	size_t n = 0;
	for (size_t i = 0; i < reg->nbuckets; i++)
		for (const struct ruda_pipeline *p = reg->buckets[i]; p; p = p->hash_next)
			if (ruda__pipeline_registry_find_module(reg, p->module_sha) == p)
				n++;
	return n;
}

ruda_status ruda__pipeline_acquire(struct ruda_pipeline_registry *reg,
				   const struct ruda_pipeline_key *key,
				   struct ruda_pipeline_waiter *waiter, struct ruda_pipeline **out)
{
	uint64_t hash = key_hash(key);
	struct ruda_pipeline **bucket = &reg->buckets[hash % reg->nbuckets];
	for (struct ruda_pipeline *p = *bucket; p; p = p->hash_next) {
		if (!key_matches(p, key, hash))
			continue;
		reg->hits++;
		if (p->state == RUDA_PIPELINE_COMPILING) {
			waiter->next = p->waiters;
			p->waiters = waiter;
		}
		*out = (struct ruda_pipeline *)ruda_ref_get(&p->ref);
		return RUDA_OK;
	}

	struct ruda_pipeline *p = calloc(1, sizeof(*p));
	if (!p)
		return RUDA_ERROR_OUT_OF_MEMORY;
	p->spirv = malloc(key->spirv_size);
	p->entry_point = strdup(key->entry_point);
	p->spec = key->nspec ? malloc(key->nspec * sizeof(*p->spec)) : NULL;
	if (!p->spirv || !p->entry_point || (key->nspec && !p->spec)) {
		free(p->spirv);
		free(p->entry_point);
		free(p->spec);
		free(p);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(p->spirv, key->spirv, key->spirv_size);
	if (key->nspec)
		memcpy(p->spec, key->spec, key->nspec * sizeof(*p->spec));
	p->nspec = key->nspec;
	ruda__sha256(p->spirv, key->spirv_size, p->module_sha);
	p->spirv_size = key->spirv_size;
	p->binding_count = key->binding_count;
	p->push_constant_size = key->push_constant_size;
	p->hash = hash;
	p->registry = reg;
	p->state = RUDA_PIPELINE_COMPILING;
	p->status = RUDA_OK;
	p->owner = key->owner;
	ruda_ref_init(&p->ref, pipeline_destroy); /* the registry's */
	p->hash_next = *bucket;
	*bucket = p;
	reg->count++;

	p->work.data = p;
	ruda_ref_get(&p->ref); /* the compilation's */
	reg->compiling++;
	if (uv_queue_work(reg->loop, &p->work, check_work, check_done) < 0) {
		reg->compiling--;
		unlink_pipeline(p);
		ruda_ref_put(&p->ref);
		ruda_ref_put(&p->ref);
		return RUDA_ERROR_INTERNAL;
	}
	waiter->next = NULL;
	p->waiters = waiter;
	*out = (struct ruda_pipeline *)ruda_ref_get(&p->ref); /* the caller's */
	reg->dropped += ruda__pipeline_registry_trim(reg, REGISTRY_KEEP);
	/* a client registering without launching would otherwise leave every
	 * pipeline it pushed out queued for destruction in lavapipe */
	if (reg->dropped >= RELEASE_EVERY) {
		reg->dropped = 0;
		ruda__pipeline_registry_release_memory(reg);
	}
	return RUDA_OK;
}

/* ---- giving memory back ------------------------------------------------- */

struct release_memory {
	struct ruda_waiter waiter;
	uv_loop_t *loop;
	uv_work_t work;
};

static void trim_work(uv_work_t *work)
{
	(void)work;
#ifdef __GLIBC__
	/* every arena, not just the main one: compilations ran in the pool */
	malloc_trim(0);
#endif
}

static void trim_done(uv_work_t *work, int status)
{
	(void)status;
	free(work->data);
}

static void release_submitted(struct ruda_waiter *waiter, int status)
{
	struct release_memory *r = (struct release_memory *)waiter;
	(void)status; /* a failed device frees its pipelines all the same */
	r->work.data = r;
	if (uv_queue_work(r->loop, &r->work, trim_work, trim_done) < 0)
		free(r);
}

void ruda__pipeline_registry_release_memory(struct ruda_pipeline_registry *reg)
{
	struct release_memory *r = calloc(1, sizeof(*r));
	if (!r)
		return;
	r->loop = reg->loop;
	r->waiter.done = release_submitted;
	/* an empty batch: lavapipe destroys pipelines queued for destruction
	 * when it runs the next one */
	struct ruda_submission *sub =
		ruda__device_failure(reg->device) == RUDA_OK ? ruda__submission_begin(reg->device)
							     : NULL;
	if (!sub) {
		release_submitted(&r->waiter, RUDA_OK);
		return;
	}
	ruda__submission_add_waiter(sub, &r->waiter);
	/* on failure the waiter is told, and still trims */
	ruda__submission_submit(sub);
}
