/* What libruda's other files (graph.c, staging.c, allocation.c, devices.c,
 * ...) need of a connection (client.c): requests with and without replies on
 * the client's connection and stream, ids, errors, the device list. */
#ifndef RUDA_CLIENT_PRIVATE_H
#define RUDA_CLIENT_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/ruda.h>

#include "ruda.pb-c.h"

/* Queue a request that needs no answer (sent at once when `now`); its id
 * and stream are filled in. */
ruda_status ruda__client_post(ruda_client *client, Ruda__Request *req, int now);
/* A round trip: send `req` (with what is queued) and wait for its reply;
 * *out (optional) receives it, owned by the caller. */
ruda_status ruda__client_call(ruda_client *client, Ruda__Request *req, Ruda__Reply **out);
/* A round trip in two halves: send `req` (with what is queued) now, wait
 * for its reply later, from any thread; *out is freed by the finish. */
struct ruda_pending;
ruda_status ruda__client_call_begin(ruda_client *client, Ruda__Request *req,
				    struct ruda_pending **out);
ruda_status ruda__client_call_finish(ruda_client *client, struct ruda_pending *pending);
/* A staging transfer of `bytes` with no answer, sent at once: the next
 * sync watches the progress page for as long as it takes to move. */
ruda_status ruda__client_post_transfer(ruda_client *client, Ruda__Request *req, uint64_t bytes);
/* A round trip whose work's end the client sees on the progress page,
 * watched as a sync is plus the time `bytes` of transfers take (rudad
 * publishes the work's timeline value for it: a Sync, or a Read into a
 * staging region). */
ruda_status ruda__client_watched_call(ruda_client *client, Ruda__Request *req, uint64_t bytes);
/* Send `req` with `fd` (borrowed) passed alongside; wait for the status. */
ruda_status ruda__client_call_with_fd(ruda_client *client, Ruda__Request *req, int fd);
/* A round trip whose reply (*out, the caller's) may carry an fd (*fd, or -1;
 * the caller's). */
ruda_status ruda__client_call_get_fd(ruda_client *client, Ruda__Request *req,
				     Ruda__Reply **out, int *fd);
/* Record `mode` as the client's allocation mode; returns the previous one. */
int ruda__client_swap_allocation_mode(ruda_client *client, int mode);
/* A fresh id for a buffer or a staging region. */
uint64_t ruda__client_next_id(ruda_client *client);

/* The daemon's devices, as the handshake listed them (devices.c). */
struct ruda_client_devices {
	ruda_device_properties *list;
	size_t count;
	uint64_t fingerprint; /* of this client's device, as reported */
};

void ruda__client_set_error(ruda_client *c, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
ruda_device_properties *ruda__client_props(ruda_client *c);
/* The plain path's transfer counters so far (transfer.h). */
struct ruda_transfer_counters;
void ruda__client_transfer_counters(ruda_client *c, struct ruda_transfer_counters *out);
const struct ruda_client_devices *ruda__client_devices(const ruda_client *c);

/* devices.c */
void ruda__client_properties_extend(ruda_device_properties *p, const Ruda__DeviceInfo *d);
int ruda__client_devices_init(struct ruda_client_devices *devs, const Ruda__HelloReply *h,
			      void (*copy)(ruda_device_properties *, const Ruda__DeviceInfo *));
void ruda__client_devices_finish(struct ruda_client_devices *devs);
uint64_t ruda__client_devices_fingerprint(const ruda_device_properties *p);

#endif
