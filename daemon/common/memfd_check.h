/*
 * The one check of a memfd a client passes in (Hello client_arena,
 * StagingAttach) before rudad maps it: what kind of file it is, its seals,
 * then its size, in an order a client cannot race (see memfd_check.c).
 */
#ifndef RUDA_MEMFD_CHECK_H
#define RUDA_MEMFD_CHECK_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>

#include <ruda/status.h>

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

/* Seals that forbid rudad's shared writable mapping. */
#define RUDA_MEMFD_WRITE_SEALS (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)

struct ruda_memfd_rules {
	const char *what;      /* starts each message: "client arena", "staging region 3" */
	unsigned seals;        /* seals it must carry (F_SEAL_SHRINK at least) */
	unsigned no_seals;     /* seals it must not carry */
	uint64_t min_size;     /* bytes it must hold */
	const char *size_note; /* why min_size, for the message; may be NULL */
};

/*
 * Whether `fd` (borrowed) is a memfd that follows `rules`. RUDA_OK and
 * *size when `size` is not NULL (its size now, which can no longer drop when `rules->seals` holds
 * F_SEAL_SHRINK), or RUDA_ERROR_INVALID_ARGUMENT with the reason in `why`:
 * the kind of file it is instead ("an eventfd, not a memfd"), the seal it
 * lacks or carries by name, or both sizes.
 */
ruda_status ruda__memfd_check(int fd, const struct ruda_memfd_rules *rules, uint64_t *size,
			      char *why, size_t why_len);

/*
 * The status for mapping a checked memfd failing with errno `err`: a write seal
 * added since the check (EPERM) is the client's doing, INVALID_ARGUMENT;
 * ENOMEM is OUT_OF_MEMORY; anything else IO. The reason goes in `why`.
 */
ruda_status ruda__memfd_map_failed(const char *what, int err, char *why, size_t why_len);

/* Tests only: called between the checks (step 1: after the kind, 2: after
 * the seals), to play a client that changes the memfd meanwhile. */
extern void (*ruda__memfd_check_between)(int fd, int step);

/* What kind of file `fd` is, for a message: "a memfd", "a pipe", "an eventfd"… */
const char *ruda__memfd_fd_kind(int fd, char *buf, size_t len);

#endif
