/*
 * Collectives between the sessions of several devices: all-reduce, matched
 * by the daemon. Each device's session makes the same calls in the same
 * order; the k-th call of one device meets the k-th of the others. Data
 * moves device -> daemon host memory (imported into every device) -> CPU
 * reduction in the thread pool -> device, or, between logical devices of
 * one physical device, by device copies and a kernel (collective_peer.c);
 * never through a client.
 */
#ifndef RUDA_COLLECTIVE_H
#define RUDA_COLLECTIVE_H

#include "ruda.pb-c.h"

struct ruda_session;
struct ruda_session_context;

/* A collective still missing participants after this long fails. */
#define RUDA_COLLECTIVE_TIMEOUT_MS 60000u

void ruda__handle_collective_init(struct ruda_session *s, const Ruda__Request *req);
void ruda__handle_all_reduce(struct ruda_session *s, const Ruda__Request *req);
void ruda__handle_collective_sync(struct ruda_session *s, const Ruda__Request *req);

/* The session is going: fail the collectives waiting for it. */
void ruda__collective_session_gone(struct ruda_session *s);
/* Whether device-path all-reduce work (collective_peer.c) is in flight:
 * recovery waits before it destroys a lost device, whose memory that work
 * may use through a window. */
int ruda__collective_busy(const struct ruda_session_context *ctx);
/* Release the context's collective state (at shutdown). */
void ruda__collective_finish(struct ruda_session_context *ctx);


#endif
