/* The admin requests behind rudactl: views of the whole daemon and
 * management commands, allowed by the daemon's policy. */
#ifndef RUDA_ADMIN_H
#define RUDA_ADMIN_H

#include "ruda.pb-c.h"

struct ruda_session;

/* Run the Admin request `req` of session `s` and reply to it. */
void ruda__admin_handle(struct ruda_session *s, const Ruda__Request *req);

#endif
