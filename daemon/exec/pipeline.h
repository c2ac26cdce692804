/*
 * Compute pipelines, shared by every session of a device: a kernel that one
 * client registered is ready for every other client registering the same
 * module (same SPIR-V, entry point, layout and specialization).
 * Compilation runs in libuv's thread pool, after the compile worker
 * (compile_worker.h) compiled the kernel within rudad.conf's
 * compile_timeout_ms and compile_memory_max; a second request for a kernel
 * still compiling waits for that compilation instead of starting another.
 */
#ifndef RUDA_PIPELINE_H
#define RUDA_PIPELINE_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>
#include <vulkan/vulkan.h>

#include <ruda/common.h>
#include <ruda/status.h>

#include "../../proto/sha256.h"
#include "common/ref.h"
#include "exec/compile_worker.h"
#include "exec/pipeline_build.h" /* RUDA_PIPELINE_MAX_BINDINGS */

struct ruda_device;
struct ruda_pipeline;

enum ruda_pipeline_state {
	RUDA_PIPELINE_COMPILING,
	RUDA_PIPELINE_READY,
	RUDA_PIPELINE_FAILED,
};

/* Told when a pipeline it asked for has compiled or failed. */
struct ruda_pipeline_waiter {
	struct ruda_pipeline_waiter *next;
	/* Runs on the loop; frees the waiter. */
	void (*done)(struct ruda_pipeline_waiter *waiter, struct ruda_pipeline *pipeline);
};

struct ruda_pipeline_key {
	const uint32_t *spirv; /* borrowed */
	size_t spirv_size;     /* bytes */
	const char *entry_point;
	uint32_t binding_count;
	uint32_t push_constant_size;
	const ruda_spec_constant *spec; /* borrowed */
	uint32_t nspec;
	uint64_t owner; /* the session asking: the compile worker takes turns by it */
};

struct ruda_pipeline {
	struct ruda_ref ref;
	struct ruda_pipeline_registry *registry; /* borrowed */
	struct ruda_pipeline *hash_next;
	uint64_t hash;
	uint8_t module_sha[RUDA_SHA256_SIZE];
	uint32_t *spirv; /* owned copy: the key, and the compiler's input */
	size_t spirv_size;
	char *entry_point; /* owned */
	uint32_t binding_count;
	/* bit i: the module may write binding i (no NonWritable on it); only
	 * these carry the error of a launch that fails (when READY) */
	uint64_t writable;
	uint32_t push_constant_size;
	ruda_spec_constant *spec; /* owned */
	uint32_t nspec;

	enum ruda_pipeline_state state;
	ruda_status status;  /* when FAILED */
	char error[512];     /* when FAILED */
	uint64_t compile_ns; /* time the compilation took */
	struct ruda_pipeline_waiter *waiters;
	uv_work_t work;
	uint64_t owner;                /* who asked first */
	struct ruda_compile_job job;   /* in the compile worker (compile_worker.h) */

	VkShaderModule module;
	VkDescriptorSetLayout set_layout;
	VkPipelineLayout layout;
	VkPipeline vk;
};

struct ruda_pipeline_registry {
	struct ruda_device *device; /* borrowed */
	uv_loop_t *loop;
	struct ruda_pipeline **buckets;
	size_t nbuckets, count;
	uint64_t compiled;   /* compilations finished (misses) */
	uint64_t hits;       /* requests served by an existing pipeline */
	uint64_t compile_ns; /* total compilation time */
	size_t compiling;    /* compilations running */
	size_t dropped;      /* by the registry's own trim since memory was last released */
	/* compiles each new kernel first, in a process past whose bounds it
	 * is refused (compile_worker.h) */
	struct ruda_compile_pool workers;
};

int ruda__pipeline_registry_init(struct ruda_pipeline_registry *reg, struct ruda_device *device,
				 uv_loop_t *loop);
/* Drops the registry's references; call once no compilation is running. */
void ruda__pipeline_registry_finish(struct ruda_pipeline_registry *reg);

/*
 * Find or start compiling the pipeline for `key`. Returns a new reference
 * in *out. If it is still compiling, `waiter` is queued and told when it is
 * done (and owned by the pipeline until then); otherwise `waiter` is left
 * alone and the caller looks at (*out)->state at once.
 */
ruda_status ruda__pipeline_acquire(struct ruda_pipeline_registry *reg,
				   const struct ruda_pipeline_key *key,
				   struct ruda_pipeline_waiter *waiter, struct ruda_pipeline **out);

/* A module the registry holds with this SHA-256 (borrowed until the loop
 * next runs registry code), or NULL. */
const struct ruda_pipeline *ruda__pipeline_registry_find_module(
	const struct ruda_pipeline_registry *reg, const uint8_t sha[RUDA_SHA256_SIZE]);

/* Distinct SPIR-V modules held. */
size_t ruda__pipeline_registry_modules(const struct ruda_pipeline_registry *reg);

/* Drop cached pipelines no session uses until at most `keep` remain;
 * returns how many were dropped. */
size_t ruda__pipeline_registry_trim(struct ruda_pipeline_registry *reg, size_t keep);

/* Give the memory of destroyed pipelines back to the system: some drivers
 * (lavapipe) free a destroyed pipeline only at the next queue submission,
 * and glibc keeps what the compile threads freed in their arenas. Submits
 * an empty batch, then trims malloc's arenas in the thread pool. Loop
 * thread; call after dropping pipelines. */
void ruda__pipeline_registry_release_memory(struct ruda_pipeline_registry *reg);

/* Whether a launch of `p` may write its binding `i`: unknown kernels and
 * bindings it does not declare count as written. */
static inline bool ruda__pipeline_may_write(const struct ruda_pipeline *p, size_t i)
{
	if (!p || p->state != RUDA_PIPELINE_READY || i >= p->binding_count || i >= 64)
		return 1;
	return (int)(p->writable >> i & 1);
}

static inline void ruda__pipeline_put(struct ruda_pipeline *pipeline)
{
	ruda_ref_put(&pipeline->ref);
}

#endif
