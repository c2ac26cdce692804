/*
 * The reduction of a collective, on the host: no device, no session.
 */
#ifndef RUDA_REDUCE_H
#define RUDA_REDUCE_H

#include <stdint.h>

/* Reduce `n` arrays of elements [begin, end) lying `stride` bytes apart from
 * `base` into the first, in order (elem_type: RUDA_ELEM_*, op:
 * RUDA_REDUCE_*). */
void ruda__collective_reduce(uint8_t *base, uint64_t stride, uint32_t n, uint64_t begin,
			     uint64_t end, uint32_t elem_type, uint32_t op);

#endif
