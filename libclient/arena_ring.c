#include "arena_ring.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Regions start on cache lines (and on SPIR-V word boundaries). */
#define REGION_ALIGN 64u

int ruda__arena_ring_init(struct ruda_arena_ring *r, uint64_t capacity)
{
	memset(r, 0, sizeof(*r));
	r->capacity = capacity / REGION_ALIGN * REGION_ALIGN;
	return 0;
}

void ruda__arena_ring_finish(struct ruda_arena_ring *r)
{
	free(r->regions);
	memset(r, 0, sizeof(*r));
}

/* Region ids are their monotonic index; the FIFO holds ids first..first+count. */
static struct ruda_arena_region *region_at(struct ruda_arena_ring *r, uint64_t id)
{
	if (id < r->first || id >= r->first + r->count)
		return NULL;
	return &r->regions[id % r->cap];
}

static int fifo_grow(struct ruda_arena_ring *r)
{
	size_t cap = r->cap ? r->cap * 2 : 64;
	struct ruda_arena_region *regions = malloc(cap * sizeof(*regions));
	if (!regions)
		return -ENOMEM;
	for (size_t i = 0; i < r->count; i++)
		regions[(r->first + i) % cap] = r->regions[(r->first + i) % r->cap];
	free(r->regions);
	r->regions = regions;
	r->cap = cap;
	return 0;
}

int ruda__arena_ring_alloc(struct ruda_arena_ring *r, uint64_t size, int client_owned,
			  uint64_t *offset, uint64_t *region)
{
	size = (size + REGION_ALIGN - 1) / REGION_ALIGN * REGION_ALIGN;
	if (size == 0)
		size = REGION_ALIGN;
	if (size > r->capacity)
		return -E2BIG;
	uint64_t start = r->head;
	uint64_t pos = start % r->capacity;
	if (pos + size > r->capacity) {
		start += r->capacity - pos; /* regions never wrap: skip the tail end */
		if (r->count == 0)
			r->tail = start; /* nothing is live: the skipped gap is free */
	}
	if (start + size - r->tail > r->capacity)
		return -EAGAIN;
	if (r->count == r->cap && fifo_grow(r) < 0)
		return -ENOMEM;
	uint64_t id = r->first + r->count++;
	r->regions[id % r->cap] = (struct ruda_arena_region){
		.end = start + size,
		.client_owned = client_owned,
	};
	r->head = start + size;
	*offset = start % r->capacity;
	*region = id;
	return 0;
}

void ruda__arena_ring_set_request(struct ruda_arena_ring *r, uint64_t region, uint64_t request)
{
	struct ruda_arena_region *g = region_at(r, region);
	if (g)
		g->request = request;
}

void ruda__arena_ring_release(struct ruda_arena_ring *r, uint64_t region)
{
	struct ruda_arena_region *g = region_at(r, region);
	if (g)
		g->released = 1;
}

void ruda__arena_ring_reclaim(struct ruda_arena_ring *r, uint64_t completed)
{
	while (r->count) {
		struct ruda_arena_region *g = &r->regions[r->first % r->cap];
		int done = g->client_owned ? g->released : g->request && g->request <= completed;
		if (!done)
			break;
		r->tail = g->end;
		r->first++;
		r->count--;
	}
	if (!r->count) {
		/* empty: start again at the beginning, on pages already touched */
		uint64_t lap = (r->head + r->capacity - 1) / r->capacity * r->capacity;
		r->head = r->tail = lap;
	}
}

int ruda__arena_ring_has_held(const struct ruda_arena_ring *r)
{
	for (size_t i = 0; i < r->count; i++) {
		const struct ruda_arena_region *g = &r->regions[(r->first + i) % r->cap];
		if (g->client_owned && !g->released)
			return 1;
	}
	return 0;
}

uint64_t ruda__arena_ring_oldest_request(const struct ruda_arena_ring *r)
{
	if (!r->count)
		return 0;
	const struct ruda_arena_region *g = &r->regions[r->first % r->cap];
	return g->client_owned ? 0 : g->request;
}
