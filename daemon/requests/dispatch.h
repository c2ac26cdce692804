/* Decoding and running one request of a session. */
#ifndef RUDA_DISPATCH_H
#define RUDA_DISPATCH_H

#include "../../proto/frame.h"

struct ruda_session;

/* Unpack `frame` and run its request; closes the frame's fds. A protocol
 * violation kills the session. */
void ruda__dispatch_frame(struct ruda_session *session, struct ruda_frame *frame);

#endif
