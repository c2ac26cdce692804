/*
 * The size rule of ruda.h's growing structs (its top comment): a leading
 * uint32_t size, read and written only up to it. Each function checks the
 * caller's size against the struct's first published size (`min`, see
 * RUDA__V1) and returns RUDA_ERROR_INVALID_ARGUMENT below it.
 */
#ifndef RUDA_STRUCT_SIZE_H
#define RUDA_STRUCT_SIZE_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/ruda.h>

/* The first published size of `type`: up to the end of `last`, its last
 * field in libruda.so.1. Stays right when fields are appended later. */
#define RUDA__V1(type, last) (offsetof(type, last) + sizeof(((type *)0)->last))

#define RUDA__MIN_FEATURES RUDA__V1(ruda_features, coop_matrix)
#define RUDA__MIN_DEVICE_PROPERTIES RUDA__V1(ruda_device_properties, features)
#define RUDA__MIN_CONNECT_OPTIONS RUDA__V1(ruda_connect_options, arena_size)
#define RUDA__MIN_MEMORY_USAGE RUDA__V1(ruda_memory_usage, device_pages)
#define RUDA__MIN_LAYOUT_DESC RUDA__V1(ruda_layout_desc, elem_size)
#define RUDA__MIN_LAYOUT RUDA__V1(ruda_layout, strides)
#define RUDA__MIN_COPY_DESC RUDA__V1(ruda_copy_desc, elem_size)
#define RUDA__MIN_RESOURCE RUDA__V1(ruda_resource, memory_property_flags)
#define RUDA__MIN_KERNEL_DESC RUDA__V1(ruda_kernel_desc, spec_constant_count)
#define RUDA__MIN_DAEMON_STATS RUDA__V1(ruda_daemon_stats, session_launches)
#define RUDA__MIN_TARGET_PROPERTIES RUDA__V1(ruda_target_properties, coop_matrix_count)
#define RUDA__MIN_DEVICE_UTILIZATION RUDA__V1(ruda_device_utilization, heap_budget)

/* The caller's size of the struct at `s`. */
uint32_t ruda__struct_size(const void *s);

/* Copy the caller's in-struct `given` (of `size` bytes) into `local`
 * (`known` bytes, holding the defaults beforehand); local's size becomes
 * `known`. RUDA_ERROR_UNSUPPORTED for a non-zero byte past `known`. */
ruda_status ruda__struct_in(void *local, size_t known, size_t min, const void *given,
			    size_t size);

/* Whether the caller's out-struct `out` may be written (size >= min). */
ruda_status ruda__struct_out_ok(const void *out, size_t min);

/* Copy `local` (`known` bytes) into the caller's `out` of `size` bytes:
 * up to its size, zeroes past `known`; out's size becomes `size`. */
void ruda__struct_out(void *out, size_t size, const void *local, size_t known);

/* An in-array of `count` elements (stride: the first one's size) copied
 * into *local (malloc'd, `known` bytes each; defaults: zero). */
ruda_status ruda__array_in(void **local, size_t known, size_t min, const void *given,
			   size_t count);

/* Copy `count` elements of `local` (`known` bytes each) into the caller's
 * out-array `out` (stride: the first element's size, checked by
 * ruda__struct_out_ok beforehand). */
void ruda__array_out(void *out, const void *local, size_t known, size_t count);

#endif
