#include "launch_wire.h"

#include <string.h>

/* Field numbers (proto/ruda.proto). */
enum {
	REQUEST_ID = 1,
	REQUEST_LAUNCH = 9,
	REQUEST_STREAM = 40,
	LAUNCH_KERNEL = 1,
	LAUNCH_COUNT_X = 2,
	LAUNCH_BINDINGS = 5,
	LAUNCH_PUSH = 6,
	LAUNCH_UNCHECKED = 7,
	LAUNCH_DYNAMIC = 60,
	BINDING_HANDLE = 1,
	BINDING_OFFSET = 2,
	BINDING_SIZE = 3,
	DYNAMIC_HANDLE = 1,
	DYNAMIC_OFFSET = 2,
};

enum { VARINT = 0, LENGTH = 2 };

static size_t varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *varint(uint8_t *p, uint64_t v)
{
	while (v >= 0x80) {
		*p++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*p++ = (uint8_t)v;
	return p;
}

static size_t tag_size(uint32_t field)
{
	return varint_size((uint64_t)field << 3);
}

static uint8_t *tag(uint8_t *p, uint32_t field, int type)
{
	return varint(p, ((uint64_t)field << 3) | (uint64_t)type);
}

/* A proto3 scalar: left out when zero. */
static size_t scalar_size(uint32_t field, uint64_t v)
{
	return v ? tag_size(field) + varint_size(v) : 0;
}

static uint8_t *scalar(uint8_t *p, uint32_t field, uint64_t v)
{
	if (!v)
		return p;
	return varint(tag(p, field, VARINT), v);
}

/* A length-delimited field of `len` bytes, with its tag and length. */
static size_t delimited_size(uint32_t field, size_t len)
{
	return tag_size(field) + varint_size(len) + len;
}

static size_t binding_size(const ruda_handle *b)
{
	return scalar_size(BINDING_HANDLE, b->id) + scalar_size(BINDING_OFFSET, b->offset) +
	       scalar_size(BINDING_SIZE, b->size);
}

static size_t dynamic_size(const ruda_handle *d)
{
	return scalar_size(DYNAMIC_HANDLE, d->id) + scalar_size(DYNAMIC_OFFSET, d->offset);
}

static size_t launch_size(const struct ruda_launch_wire *w)
{
	size_t n = scalar_size(LAUNCH_KERNEL, w->kernel);
	for (int i = 0; i < 3; i++)
		n += scalar_size(LAUNCH_COUNT_X + (uint32_t)i, w->count[i]);
	for (size_t i = 0; i < w->nbindings; i++)
		n += delimited_size(LAUNCH_BINDINGS, binding_size(&w->bindings[i]));
	if (w->push_size)
		n += delimited_size(LAUNCH_PUSH, w->push_size);
	n += scalar_size(LAUNCH_UNCHECKED, w->unchecked ? 1 : 0);
	if (w->dynamic)
		n += delimited_size(LAUNCH_DYNAMIC, dynamic_size(w->dynamic));
	return n;
}

size_t ruda__launch_wire_size(const struct ruda_launch_wire *w)
{
	return scalar_size(REQUEST_ID, w->id) + delimited_size(REQUEST_LAUNCH, launch_size(w)) +
	       scalar_size(REQUEST_STREAM, w->stream);
}

void ruda__launch_wire_encode(const struct ruda_launch_wire *w, uint8_t *p)
{
	p = scalar(p, REQUEST_ID, w->id);
	p = varint(tag(p, REQUEST_LAUNCH, LENGTH), launch_size(w));
	p = scalar(p, LAUNCH_KERNEL, w->kernel);
	for (int i = 0; i < 3; i++)
		p = scalar(p, LAUNCH_COUNT_X + (uint32_t)i, w->count[i]);
	for (size_t i = 0; i < w->nbindings; i++) {
		const ruda_handle *b = &w->bindings[i];
		p = varint(tag(p, LAUNCH_BINDINGS, LENGTH), binding_size(b));
		p = scalar(p, BINDING_HANDLE, b->id);
		p = scalar(p, BINDING_OFFSET, b->offset);
		p = scalar(p, BINDING_SIZE, b->size);
	}
	if (w->push_size) {
		p = varint(tag(p, LAUNCH_PUSH, LENGTH), w->push_size);
		memcpy(p, w->push, w->push_size);
		p += w->push_size;
	}
	p = scalar(p, LAUNCH_UNCHECKED, w->unchecked ? 1 : 0);
	if (w->dynamic) {
		p = varint(tag(p, LAUNCH_DYNAMIC, LENGTH), dynamic_size(w->dynamic));
		p = scalar(p, DYNAMIC_HANDLE, w->dynamic->id);
		p = scalar(p, DYNAMIC_OFFSET, w->dynamic->offset);
	}
	scalar(p, REQUEST_STREAM, w->stream);
}
