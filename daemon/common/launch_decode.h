/*
 * Launch requests decoded without protobuf-c's reflection, for the launch
 * path. Only the canonical encoding is taken (what protobuf-c and libruda
 * write: known fields in number order, repeated bindings together, no
 * overlong values); anything else is left to ruda__request__unpack, so the
 * two always agree on what a frame means.
 */
#ifndef RUDA_LAUNCH_DECODE_H
#define RUDA_LAUNCH_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ruda.pb-c.h"

#define RUDA_LAUNCH_DECODE_BINDINGS 64u

/* A decoded Launch request; `request` points into the rest. */
struct ruda_launch_frame {
	Ruda__Request request;
	Ruda__Launch launch;
	Ruda__DynamicCount dynamic;
	Ruda__Binding bindings[RUDA_LAUNCH_DECODE_BINDINGS];
	Ruda__Binding *binding_ptrs[RUDA_LAUNCH_DECODE_BINDINGS];
};

/* True and `out` filled when `payload` is a canonically encoded Launch
 * request (push constants point into `payload`), else false. */
bool ruda__launch_decode(const uint8_t *payload, size_t len, struct ruda_launch_frame *out);

#endif
