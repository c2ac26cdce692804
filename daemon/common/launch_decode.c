#include "common/launch_decode.h"

#include <stdbool.h>
#include <string.h>

struct reader {
	const uint8_t *p, *end;
};

/* A varint of at most 10 bytes whose value fits 64 bits and uses no
 * redundant bytes (a longer form than needed is not canonical). */
static bool varint(struct reader *r, uint64_t *out)
{
	uint64_t v = 0;
	for (unsigned shift = 0; shift < 64 && r->p < r->end; shift += 7) {
		uint8_t byte = *r->p++;
		if (shift == 63 && byte > 1)
			return false;
		v |= (uint64_t)(byte & 0x7f) << shift;
		if (!(byte & 0x80)) {
			if (byte == 0 && shift)
				return false; /* overlong */
			*out = v;
			return true;
		}
	}
	return false;
}

/* The next field's number and wire type; false at the end or on error. */
static bool field(struct reader *r, uint32_t *number, unsigned *type)
{
	uint64_t tag;
	if (r->p >= r->end || !varint(r, &tag) || (tag >> 3) > UINT32_MAX)
		return false;
	*number = (uint32_t)(tag >> 3);
	*type = (unsigned)(tag & 7);
	return true;
}

/* A length-delimited field's contents. */
static bool delimited(struct reader *r, struct reader *inner)
{
	uint64_t len;
	if (!varint(r, &len) || len > (uint64_t)(r->end - r->p))
		return false;
	inner->p = r->p;
	inner->end = r->p + len;
	r->p += len;
	return true;
}

/* Scalar fields of a message, numbers strictly increasing, each in
 * 1..nfields: out[number - 1] set, everything else 0. Proto3 leaves zeros
 * out: a zero written explicitly is not canonical. */
static bool scalars(struct reader r, uint64_t *out, uint32_t nfields)
{
	uint32_t last = 0, number;
	unsigned type;
	memset(out, 0, nfields * sizeof(*out));
	while (r.p < r.end) {
		if (!field(&r, &number, &type) || type != 0 || number <= last || number > nfields ||
		    !varint(&r, &out[number - 1]) || out[number - 1] == 0)
			return false;
		last = number;
	}
	return true;
}

static bool uint32_field(uint64_t v, uint32_t *out)
{
	*out = (uint32_t)v;
	return v <= UINT32_MAX;
}

static bool launch(struct reader r, struct ruda_launch_frame *out)
{
	Ruda__Launch *l = &out->launch;
	ruda__launch__init(l);
	uint32_t last = 0, number;
	unsigned type;
	uint64_t v;
	while (r.p < r.end) {
		if (!field(&r, &number, &type))
			return false;
		if (number < last || (number == last && number != 5))
			return false;
		last = number;
		if (number >= 1 && number <= 4) {
			if (type != 0 || !varint(&r, &v) || v == 0)
				return false;
			if (number == 1)
				l->kernel = v;
			else if (!uint32_field(v, number == 2   ? &l->count_x
						  : number == 3 ? &l->count_y
								: &l->count_z))
				return false;
		} else if (number == 5) {
			struct reader inner;
			uint64_t b[3];
			if (type != 2 || l->n_bindings == RUDA_LAUNCH_DECODE_BINDINGS ||
			    !delimited(&r, &inner) || !scalars(inner, b, 3))
				return false;
			Ruda__Binding *bd = &out->bindings[l->n_bindings];
			ruda__binding__init(bd);
			bd->handle = b[0];
			bd->offset = b[1];
			bd->size = b[2];
			out->binding_ptrs[l->n_bindings++] = bd;
		} else if (number == 6) {
			struct reader inner;
			if (type != 2 || !delimited(&r, &inner) || inner.p == inner.end)
				return false;
			l->push_constants.data = (uint8_t *)inner.p;
			l->push_constants.len = (size_t)(inner.end - inner.p);
		} else if (number == 7) {
			if (type != 0 || !varint(&r, &v) || v != 1)
				return false;
			l->unchecked = 1;
		} else if (number == 60) {
			struct reader inner;
			uint64_t d[2];
			if (type != 2 || !delimited(&r, &inner) || !scalars(inner, d, 2))
				return false;
			ruda__dynamic_count__init(&out->dynamic);
			out->dynamic.handle = d[0];
			out->dynamic.offset = d[1];
			l->dynamic_count = &out->dynamic;
		} else {
			return false;
		}
	}
	l->bindings = l->n_bindings ? out->binding_ptrs : NULL;
	return true;
}

bool ruda__launch_decode(const uint8_t *payload, size_t len, struct ruda_launch_frame *out)
{
	struct reader r = {payload, payload + len};
	Ruda__Request *req = &out->request;
	ruda__request__init(req);
	uint32_t last = 0, number;
	unsigned type;
	uint64_t v;
	int have_launch = 0;
	while (r.p < r.end) {
		if (!field(&r, &number, &type) || number <= last)
			return false;
		last = number;
		if (number == 1 && type == 0) {
			if (!varint(&r, &v) || v == 0)
				return false;
			req->id = v;
		} else if (number == 9 && type == 2) {
			struct reader inner;
			if (!delimited(&r, &inner) || !launch(inner, out))
				return false;
			have_launch = 1;
		} else if (number == 40 && type == 0) {
			if (!varint(&r, &v) || v == 0 || !uint32_field(v, &req->stream))
				return false;
		} else {
			return false;
		}
	}
	if (!have_launch)
		return false;
	req->body_case = RUDA__REQUEST__BODY_LAUNCH;
	req->launch = &out->launch;
	return true;
}
