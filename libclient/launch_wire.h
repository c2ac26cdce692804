/*
 * The Launch request encoded by hand: byte for byte what protobuf-c's
 * ruda__request__pack writes for it (fields in number order, proto3
 * defaults left out), without its reflection walks (a Request with a Launch
 * with bindings is measured three times over when packed). Launches are
 * the one request sent at high rates.
 */
#ifndef RUDA_LAUNCH_WIRE_H
#define RUDA_LAUNCH_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/ruda.h>

struct ruda_launch_wire {
	uint64_t id;
	uint32_t stream;
	uint64_t kernel;
	uint32_t count[3];
	const ruda_handle *bindings;
	size_t nbindings;
	const void *push;
	size_t push_size;
	int unchecked;
	const ruda_handle *dynamic; /* counts' buffer and offset, or NULL */
};

/* Bytes of the encoded Request. */
size_t ruda__launch_wire_size(const struct ruda_launch_wire *w);
/* Write it (ruda__launch_wire_size bytes) into `dst`. */
void ruda__launch_wire_encode(const struct ruda_launch_wire *w, uint8_t *dst);

#endif
