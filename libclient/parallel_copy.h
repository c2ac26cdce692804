/*
 * memcpy for the large copies into and out of the arena, spread over a few
 * helper threads: one core's memcpy (6-8 GB/s) is far below what a PCIe or
 * NVLink host link moves. Small copies, and copies made while another is
 * using the helpers, are a plain memcpy.
 */
#ifndef RUDA_PARALLEL_COPY_H
#define RUDA_PARALLEL_COPY_H

#include <stddef.h>

void ruda__parallel_copy(void *dst, const void *src, size_t n);

#endif
