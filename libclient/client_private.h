/* What libruda's other files need of a connection (client.c). */
#ifndef RUDA_CLIENT_PRIVATE_H
#define RUDA_CLIENT_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/ruda.h>

#include "client_internal.h"
#include "ruda.pb-c.h"

/* The daemon's devices, as the handshake listed them (devices.c). */
struct ruda_client_devices {
	ruda_device_properties *list;
	size_t count;
	uint64_t fingerprint; /* of this client's device, as reported */
};

/* A round trip: send `req` (with what is queued) and wait for its reply;
 * *out (optional) receives it, owned by the caller. */
ruda_status ruda__client_call_reply(ruda_client *c, Ruda__Request *req, Ruda__Reply **out);
/* A new buffer id of this client. */
uint64_t ruda__client_new_handle(ruda_client *c);
void ruda__client_set_error(ruda_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
ruda_device_properties *ruda__client_props(ruda_client *c);
const struct ruda_client_devices *ruda__client_devices(const ruda_client *c);

/* devices.c */
void ruda__client_properties_extend(ruda_device_properties *p, const Ruda__DeviceInfo *d);
int ruda__client_devices_init(struct ruda_client_devices *devs, const Ruda__HelloReply *h,
			      void (*copy)(ruda_device_properties *, const Ruda__DeviceInfo *));
void ruda__client_devices_finish(struct ruda_client_devices *devs);
uint64_t ruda__client_devices_fingerprint(const ruda_device_properties *p);

#endif
