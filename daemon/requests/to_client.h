/*
 * ToClient: a buffer (or a strided tensor, packed) of one session copied
 * into a new buffer of another session of the same process, on that
 * session's device, inside rudad: one device copy when both sessions use
 * the same device, else device -> daemon host memory (imported into both
 * devices) -> device. Never through a client.
 */
#ifndef RUDA_TO_CLIENT_H
#define RUDA_TO_CLIENT_H

#include "ruda.pb-c.h"

struct ruda_session;

/* Regions a ToClient may copy at most (rows of a strided tensor). */
#define RUDA_TO_CLIENT_MAX_REGIONS (1u << 20)

void ruda__handle_to_client(struct ruda_session *s, const Ruda__Request *req);

#endif
