#include "device/free_ranges.h"

#include <stdlib.h>

struct ruda_free_range {
	struct ruda_free_range *next, *prev;
	uint64_t offset, size;
};

static void index_drop(struct ruda_handle_table *t, uint64_t key, struct ruda_free_range *r)
{
	if (ruda__handle_table_get(t, key) == r)
		ruda__handle_table_remove(t, key);
}

/* Index `r` under its bounds. Out of memory, it stays in the list (usable)
 * but unfound by its neighbours: it only coalesces less. */
static void index_add(struct ruda_free_ranges *f, struct ruda_free_range *r)
{
	(void)ruda__handle_table_insert(&f->starts, r->offset, r);
	(void)ruda__handle_table_insert(&f->ends, r->offset + r->size, r);
}

static struct ruda_free_range *range_add(struct ruda_free_ranges *f, uint64_t offset,
					 uint64_t size)
{
	struct ruda_free_range *r = malloc(sizeof(*r));
	if (!r)
		return NULL;
	*r = (struct ruda_free_range){.next = f->list, .offset = offset, .size = size};
	if (f->list)
		f->list->prev = r;
	f->list = r;
	index_add(f, r);
	return r;
}

static void range_remove(struct ruda_free_ranges *f, struct ruda_free_range *r)
{
	index_drop(&f->starts, r->offset, r);
	index_drop(&f->ends, r->offset + r->size, r);
	if (r->prev)
		r->prev->next = r->next;
	else
		f->list = r->next;
	if (r->next)
		r->next->prev = r->prev;
	free(r);
}

static void range_set(struct ruda_free_ranges *f, struct ruda_free_range *r, uint64_t offset,
		      uint64_t size)
{
	index_drop(&f->starts, r->offset, r);
	index_drop(&f->ends, r->offset + r->size, r);
	r->offset = offset;
	r->size = size;
	index_add(f, r);
}

void ruda__free_ranges_finish(struct ruda_free_ranges *f)
{
	while (f->list) {
		struct ruda_free_range *r = f->list;
		f->list = r->next;
		free(r);
	}
	ruda__handle_table_finish(&f->starts);
	ruda__handle_table_finish(&f->ends);
}

static uint64_t align_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

bool ruda__free_ranges_take(struct ruda_free_ranges *f, uint64_t size, uint64_t align,
			    uint64_t *offset)
{
	for (struct ruda_free_range *r = f->list; r; r = r->next) {
		uint64_t start = align_up(r->offset, align);
		if (start + size > r->offset + r->size)
			continue;
		uint64_t end = start + size, range_end = r->offset + r->size;
		if (start > r->offset && end < range_end) {
			/* split: keep the head here, the tail a range of its own.
			 * Shrink first: the tail takes over r's end key (added
			 * before, it was refused as a duplicate and the tail never
			 * merged with a buffer freed after it). */
			uint64_t head = r->offset;
			range_set(f, r, head, start - head);
			if (!range_add(f, end, range_end - end)) {
				range_set(f, r, head, range_end - head);
				return false;
			}
		} else if (start > r->offset) {
			range_set(f, r, r->offset, start - r->offset);
		} else if (end < range_end) {
			range_set(f, r, end, range_end - end);
		} else {
			range_remove(f, r);
		}
		*offset = start;
		return true;
	}
	return false;
}

bool ruda__free_ranges_give(struct ruda_free_ranges *f, uint64_t offset, uint64_t size)
{
	struct ruda_free_range *prev = ruda__handle_table_get(&f->ends, offset);
	struct ruda_free_range *next = ruda__handle_table_get(&f->starts, offset + size);
	if (prev && next) {
		uint64_t total = prev->size + size + next->size;
		range_remove(f, next);
		range_set(f, prev, prev->offset, total);
		return true;
	}
	if (prev) {
		range_set(f, prev, prev->offset, prev->size + size);
		return true;
	}
	if (next) {
		range_set(f, next, offset, next->size + size);
		return true;
	}
	return range_add(f, offset, size) != NULL;
}
