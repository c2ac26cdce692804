/* What client.c offers the library's other files (graph.c, ...). */
#ifndef RUDA_CLIENT_INTERNAL_H
#define RUDA_CLIENT_INTERNAL_H

#include <ruda/ruda.h>

#include "ruda.pb-c.h"

/* Queue a request that needs no answer (sent at once when `now`); its id
 * and stream are filled in. */
ruda_status ruda__client_post(ruda_client *client, Ruda__Request *req, int now);
/* Send a request and wait for its reply's status. */
ruda_status ruda__client_call(ruda_client *client, Ruda__Request *req);

#endif
