/*
 * The free ranges of a shared memory page: first fit to take, and a range
 * given back merges with its free neighbours. Each range is in a list (in
 * no particular order) and found by its first and its end offset, so that
 * a freed range meets its neighbours in O(1) however many ranges there are
 * (a session of 100 000 small buffers, freed in hash order, walked a sorted
 * list for each and stalled the loop for 11-15 s).
 */
#ifndef RUDA_FREE_RANGES_H
#define RUDA_FREE_RANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "common/handle_table.h"

struct ruda_free_range;

/* Zeroed: no range free. */
struct ruda_free_ranges {
	struct ruda_free_range *list;
	struct ruda_handle_table starts; /* offset -> free range starting there */
	struct ruda_handle_table ends;   /* offset -> free range ending there */
};

/* `size` bytes aligned to `align`: true and *offset set,
 * or false when no range holds them (or no memory to split one). */
bool ruda__free_ranges_take(struct ruda_free_ranges *f, uint64_t size, uint64_t align,
			    uint64_t *offset);
/* [offset, offset + size) free again, merged with its free neighbours;
 * false when out of memory (the range is then lost until the page goes). */
bool ruda__free_ranges_give(struct ruda_free_ranges *f, uint64_t offset, uint64_t size);
/* Every range freed; zeroed again. */
void ruda__free_ranges_finish(struct ruda_free_ranges *f);

#endif
