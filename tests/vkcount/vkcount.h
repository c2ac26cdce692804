/*
 * Live Vulkan objects of a process, counted by tests/vkcount/vkcount.c
 * (LD_PRELOADed into rudad by the tests) in a shared file that a test maps
 * to read them while rudad runs: $RUDA_VK_COUNT_FILE holds one
 * struct vkcount.
 */
#ifndef RUDA_VKCOUNT_H
#define RUDA_VKCOUNT_H

#include <stdint.h>

enum vkcount_kind {
	VKCOUNT_DEVICE,
	VKCOUNT_BUFFER,
	VKCOUNT_MEMORY,
	VKCOUNT_PIPELINE,
	VKCOUNT_PIPELINE_LAYOUT,
	VKCOUNT_SET_LAYOUT,
	VKCOUNT_SHADER_MODULE,
	VKCOUNT_PIPELINE_CACHE,
	VKCOUNT_COMMAND_POOL,
	VKCOUNT_COMMAND_BUFFER,
	VKCOUNT_QUERY_POOL,
	VKCOUNT_SEMAPHORE,
	VKCOUNT_FENCE,
	VKCOUNT_DESCRIPTOR_POOL,
	VKCOUNT_DESCRIPTOR_SET,
	VKCOUNT_KINDS
};

static const char *const vkcount_names[VKCOUNT_KINDS] = {
	"devices",         "buffers",        "device memories", "pipelines",
	"pipeline layouts", "set layouts",   "shader modules",  "pipeline caches",
	"command pools",   "command buffers", "query pools",    "semaphores",
	"fences",          "descriptor pools", "descriptor sets",
};

struct vkcount {
	uint64_t magic; /* VKCOUNT_MAGIC once the counting library runs */
	int64_t live[VKCOUNT_KINDS];
};

#define VKCOUNT_MAGIC 0x746e756f636b7672ull /* "rvkcount" */

#endif
