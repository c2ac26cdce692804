/* The size rule of ruda.h's growing structs (struct_size.h). */
#include "struct_size.h"

#include <stdlib.h>
#include <string.h>

uint32_t ruda__struct_size(const void *s)
{
	uint32_t size;
	memcpy(&size, s, sizeof(size));
	return size;
}

static void set_size(void *s, size_t size)
{
	uint32_t v = (uint32_t)size;
	memcpy(s, &v, sizeof(v));
}

ruda_status ruda__struct_in(void *local, size_t known, size_t min, const void *given,
			    size_t size)
{
	if (size < min)
		return RUDA_ERROR_INVALID_ARGUMENT;
	const uint8_t *g = given;
	for (size_t i = known; i < size; i++)
		if (g[i])
			return RUDA_ERROR_UNSUPPORTED;
	memcpy(local, given, size < known ? size : known);
	set_size(local, known);
	return RUDA_OK;
}

ruda_status ruda__struct_out_ok(const void *out, size_t min)
{
	return out && ruda__struct_size(out) >= min ? RUDA_OK : RUDA_ERROR_INVALID_ARGUMENT;
}

void ruda__struct_out(void *out, size_t size, const void *local, size_t known)
{
	uint8_t *o = out;
	const uint8_t *l = local;
	size_t n = size < known ? size : known;
	memcpy(o + sizeof(uint32_t), l + sizeof(uint32_t), n - sizeof(uint32_t));
	if (size > known)
		memset(o + known, 0, size - known);
	set_size(out, size);
}

ruda_status ruda__array_in(void **local, size_t known, size_t min, const void *given,
			   size_t count)
{
	*local = NULL;
	if (!count)
		return RUDA_OK;
	size_t stride = ruda__struct_size(given);
	if (stride < min || count > SIZE_MAX / known)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint8_t *l = calloc(count, known);
	if (!l)
		return RUDA_ERROR_OUT_OF_MEMORY;
	for (size_t i = 0; i < count; i++) {
		ruda_status st = ruda__struct_in(l + i * known, known, min,
						 (const uint8_t *)given + i * stride, stride);
		if (st != RUDA_OK) {
			free(l);
			return st;
		}
	}
	*local = l;
	return RUDA_OK;
}

void ruda__array_out(void *out, const void *local, size_t known, size_t count)
{
	size_t stride = count ? ruda__struct_size(out) : 0;
	for (size_t i = 0; i < count; i++)
		ruda__struct_out((uint8_t *)out + i * stride, stride,
				 (const uint8_t *)local + i * known, known);
}
