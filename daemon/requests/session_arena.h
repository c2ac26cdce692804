/*
 * A session's arena and the device: its device side (the import, or the
 * bounce buffer) is made at the session's first transfer through it, and
 * dropped again once no transfer has used it for a while, so idle clients
 * pin nothing. docs/memory.md, "Session arenas".
 */
#ifndef RUDA_SESSION_ARENA_H
#define RUDA_SESSION_ARENA_H

struct ruda_arena;
struct ruda_session;
struct ruda_session_context;

/* How long an imported arena stays imported with no transfer through it
 * (RUDA_ARENA_RELEASE_MS in rudad's environment overrides; 0: forever). */
#define RUDA_ARENA_RELEASE_MS 30000u

/*
 * Before a transfer through the session's arena: 1 when its device side is
 * there; 0 when it is being made (the request waits: session->parked is
 * set, and process_frames runs it again once it is); a negative errno when
 * making it failed.
 */
int ruda__session_arena_ready(struct ruda_session *session);
/*
 * Before a transfer from or into staging region `region`: the same
 * answers. Its import starts at StagingAttach (ruda__staging_attach); a
 * request that finds it still running waits for it, as for the arena.
 */
int ruda__session_region_ready(struct ruda_session *session, struct ruda_arena *region);
/* Start importing `region` in the thread pool: 0, or a negative errno when
 * it could not be queued (the first transfer from it tries again). */
int ruda__session_region_import(struct ruda_session *session, struct ruda_arena *region);
/* Stop the release timer (at shutdown). */
void ruda__session_arenas_finish(struct ruda_session_context *ctx);

#endif
