/*
 * A client's own memfd as its session's arena (Hello client_arena): what
 * rudad requires of it before mapping it, and the arena made from it.
 */
#ifndef RUDA_CLIENT_ARENA_H
#define RUDA_CLIENT_ARENA_H

#include <stddef.h>
#include <stdint.h>

#include <ruda/status.h>

struct ruda_device;
struct ruda_arena;

/*
 * Check `fd` (borrowed) and make it an arena of `size` bytes (0: the
 * memfd's size), rounded down to the device's import granularity: it must
 * be a memfd (not a regular file, pipe, socket or device), sealed with
 * F_SEAL_SHRINK and not against writing, hold `size` bytes, and `size` lie
 * within RUDA_ARENA_MIN_SIZE..RUDA_ARENA_MAX_SIZE. rudad adds F_SEAL_GROW
 * when the memfd still takes seals. RUDA_OK and *out, or the status with
 * the reason in `why` (the fd's checks are memfd_check.c's):
 * RUDA_ERROR_INVALID_ARGUMENT (the fd, or a write seal added meanwhile),
 * RUDA_ERROR_OUT_OF_RANGE (the size), RUDA_ERROR_IO / OUT_OF_MEMORY
 * (mapping it failed).
 */
ruda_status ruda__client_arena_adopt(struct ruda_device *device, int fd, uint64_t size,
				     struct ruda_arena **out, char *why, size_t why_len);

#endif
