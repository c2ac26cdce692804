/* libruda: allocation modes and windows, and exported buffer memory. */
#include <string.h>
#include <unistd.h>

#include <ruda/ruda.h>

#include "client_private.h"
#include "struct_size.h"

static ruda_status send_mode(ruda_client *c, ruda_allocation_mode mode)
{
	Ruda__AllocationMode m = RUDA__ALLOCATION_MODE__INIT;
	m.mode = (Ruda__AllocationModeKind)mode;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_ALLOCATION_MODE;
	req.allocation_mode = &m;
	return ruda__client_post(c, &req, 0); /* ordered before the Empties after it */
}

ruda_status ruda_client_allocation_mode(ruda_client *c, ruda_allocation_mode mode)
{
	if (!c || mode < RUDA_ALLOCATION_AUTO || mode > RUDA_ALLOCATION_DEDICATED)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda__client_swap_allocation_mode(c, mode);
	return send_mode(c, mode);
}

ruda_status ruda_client_allocation_window(ruda_client *c, ruda_allocation_mode mode,
					  void (*task)(void *user), void *user)
{
	if (!c || !task || mode < RUDA_ALLOCATION_AUTO || mode > RUDA_ALLOCATION_DEDICATED)
		return RUDA_ERROR_INVALID_ARGUMENT;
	int before = ruda__client_swap_allocation_mode(c, mode);
	ruda_status st = send_mode(c, mode);
	if (st == RUDA_OK)
		task(user);
	ruda__client_swap_allocation_mode(c, before);
	ruda_status restored = send_mode(c, (ruda_allocation_mode)before);
	return st != RUDA_OK ? st : restored;
}

ruda_status ruda_client_get_resource(ruda_client *c, ruda_handle h, ruda_resource *given)
{
	if (!c || ruda__struct_out_ok(given, RUDA__MIN_RESOURCE) != RUDA_OK)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_resource res = RUDA_RESOURCE_INIT, *out = &res;
	Ruda__ExportResource e = RUDA__EXPORT_RESOURCE__INIT;
	e.handle = h.id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EXPORT_RESOURCE;
	req.export_resource = &e;
	Ruda__Reply *reply = NULL;
	int fd = -1;
	ruda_status st = ruda__client_call_get_fd(c, &req, &reply, &fd);
	if (st == RUDA_OK && (reply->body_case != RUDA__REPLY__BODY_RESOURCE || fd < 0))
		st = RUDA_ERROR_PROTOCOL;
	if (st == RUDA_OK) {
		const Ruda__ResourceReply *r = reply->resource;
		*out = (ruda_resource){
			.struct_size = sizeof(*out),
			.fd = fd,
			.memory_size = r->memory_size,
			.offset = r->offset,
			.size = r->size,
			.memory_type_index = r->memory_type_index,
			.dedicated = r->dedicated,
			.buffer_size = r->buffer_size,
			.buffer_usage = r->buffer_usage,
			.handle_type = r->handle_type,
			.memory_property_flags = r->memory_property_flags,
		};
		if (r->device_uuid.len == sizeof(out->device_uuid))
			memcpy(out->device_uuid, r->device_uuid.data, sizeof(out->device_uuid));
		if (r->driver_uuid.len == sizeof(out->driver_uuid))
			memcpy(out->driver_uuid, r->driver_uuid.data, sizeof(out->driver_uuid));
		ruda__struct_out(given, ruda__struct_size(given), &res, sizeof(res));
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	if (reply)
		ruda__reply__free_unpacked(reply, NULL);
	return st;
}
