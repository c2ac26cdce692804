/* The admin requests behind rudactl: views of the whole daemon and
 * management commands, allowed by the daemon's policy. */
#ifndef RUDA_ADMIN_H
#define RUDA_ADMIN_H

#include <stddef.h>
#include <stdint.h>

#include "ruda.pb-c.h"

struct ruda_session;

/* Run the Admin request `req` of session `s` and reply to it. */
void ruda__admin_handle(struct ruda_session *s, const Ruda__Request *req);

/* For admin.c's table and its commands (admin_commands.c). */
struct ruda_session_context;
/* Answer `request` with `body`. */
void ruda__admin_reply(struct ruda_session *s, uint64_t request, Ruda__AdminReply *body);
/* The sessions, as an array (caller frees), sorted by id when `sorted`. */
struct ruda_session **ruda__admin_list_sessions(struct ruda_session_context *ctx, size_t *n,
						int sorted);
void ruda__admin_kill(struct ruda_session *s, uint64_t request, const Ruda__Admin *a);
void ruda__admin_cleanup(struct ruda_session *s, uint64_t request, const Ruda__Admin *a);
void ruda__admin_drain(struct ruda_session *s, uint64_t request, const Ruda__Admin *a);
void ruda__admin_shutdown(struct ruda_session *s, uint64_t request, const Ruda__Admin *a);
void ruda__admin_inject_device_loss(struct ruda_session *s, uint64_t request,
				    const Ruda__Admin *a);

#endif
