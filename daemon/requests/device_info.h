/* The several-devices parts of the handshake and of introspection: device
 * ids, details, the device a Hello names, utilization. */
#ifndef RUDA_DEVICE_INFO_H
#define RUDA_DEVICE_INFO_H

#include <stdint.h>

#include <ruda/status.h>

#include "ruda.pb-c.h"

struct ruda_device;
struct ruda_session;
struct ruda_session_context;

/* Storage for the details of one DeviceInfo. */
struct ruda_device_info_extra {
	Ruda__DeviceDetails details;
	Ruda__MemoryHeap heaps[16];
	Ruda__MemoryHeap *heap_ptrs[16];
	Ruda__CoopMatrixShape coop[32];
	Ruda__CoopMatrixShape *coop_ptrs[32];
};

/* Fill DeviceInfo's several-devices fields (ids, details) from `d`. */
void ruda__device_info_extend(Ruda__DeviceInfo *info, const struct ruda_device *d,
			      struct ruda_device_info_extra *extra);

/* The daemon device index a Hello names in *index; RUDA_ERROR_INVALID_ARGUMENT
 * with `why` filled when none. */
ruda_status ruda__device_info_resolve(const struct ruda_session_context *ctx, const Ruda__Hello *h,
				      uint32_t *index, char *why, size_t why_len);

/* Request handlers (dispatch.c's table). */
void ruda__handle_utilization(struct ruda_session *s, const Ruda__Request *req);

#endif
