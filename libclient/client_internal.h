/* What client.c offers the library's other files (graph.c, staging.c,
 * allocation.c, ...): requests with and without replies, on the client's
 * connection and stream. */
#ifndef RUDA_CLIENT_INTERNAL_H
#define RUDA_CLIENT_INTERNAL_H

#include <stdint.h>

#include <ruda/ruda.h>

#include "ruda.pb-c.h"

/* Queue a request that needs no answer (sent at once when `now`); its id
 * and stream are filled in. */
ruda_status ruda__client_post(ruda_client *client, Ruda__Request *req, int now);
/* Send a request and wait for its reply's status. */
ruda_status ruda__client_call(ruda_client *client, Ruda__Request *req);
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

#endif
