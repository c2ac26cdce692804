/*
 * Staging regions: shared memory a client passes in (a sealed memfd),
 * mapped and imported so uploads from it and downloads into it are one DMA
 * with no copy on either side. Kept per session, by client-chosen id.
 */
#ifndef RUDA_STAGING_H
#define RUDA_STAGING_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/status.h>

struct ruda_session;
struct ruda_arena;

/* Regions one session may hold at once. */
#define RUDA_STAGING_MAX_REGIONS 64u

/* Attach `fd` (borrowed) as region `id`. */
ruda_status ruda__staging_attach(struct ruda_session *s, uint64_t id, uint64_t size, int fd,
				 char *why, size_t why_len);
void ruda__staging_detach(struct ruda_session *s, uint64_t id);
/* Region `id`, or NULL. */
struct ruda_arena *ruda__staging_get(struct ruda_session *s, uint64_t id);
/* Drop every region of a session that ends. */
void ruda__staging_release_all(struct ruda_session *s);

#endif
