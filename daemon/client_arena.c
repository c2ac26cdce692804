#include "client_arena.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "device.h"

/* What kind of file `mode` is, for a refusal message. */
static const char *file_kind(mode_t mode)
{
	if (S_ISFIFO(mode))
		return "a pipe";
	if (S_ISSOCK(mode))
		return "a socket";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISBLK(mode))
		return "a block device";
	return "a regular file";
}

/* Whether `fd` was made by memfd_create: its link in /proc names it so
 * (a regular file on tmpfs would pass every other test). */
static int is_memfd(int fd)
{
	char path[64], target[32];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, target, sizeof(target) - 1);
	if (n < 0)
		return 0;
	target[n] = '\0';
	return strncmp(target, "/memfd:", 7) == 0;
}

/* The kind and seals of the fd; RUDA_OK or INVALID_ARGUMENT. */
static ruda_status check_memfd(int fd, const struct stat *st, int seals, char *why,
			       size_t why_len)
{
	if (!S_ISREG(st->st_mode) || !is_memfd(fd)) {
		snprintf(why, why_len, "client arena: the fd is %s, not a memfd",
			 file_kind(st->st_mode));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(why, why_len,
			 "client arena: the memfd is not sealed against shrinking (F_SEAL_SHRINK; "
			 "make it with MFD_ALLOW_SEALING): a shrink would leave rudad's mapping "
			 "without pages");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (seals & (F_SEAL_WRITE | F_SEAL_FUTURE_WRITE)) {
		snprintf(why, why_len,
			 "client arena: the memfd is sealed against writing; rudad writes the "
			 "arena's header and downloads into it");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	return RUDA_OK;
}

ruda_status ruda__client_arena_adopt(struct ruda_device *d, int fd, uint64_t size,
				     struct ruda_arena **out, char *why, size_t why_len)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(why, why_len, "client arena: cannot inspect the fd: %s", strerror(errno));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	ruda_status rs = check_memfd(fd, &st, fcntl(fd, F_GET_SEALS), why, why_len);
	if (rs != RUDA_OK)
		return rs;
	uint64_t held = (uint64_t)st.st_size;
	if (!size)
		size = held;
	if (held < size) {
		snprintf(why, why_len,
			 "client arena: the memfd holds %llu bytes, fewer than the %llu declared",
			 (unsigned long long)held, (unsigned long long)size);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	uint64_t grain = ruda__arena_granularity(d);
	uint64_t used = size / grain * grain;
	if (used < RUDA_ARENA_MIN_SIZE || used > RUDA_ARENA_MAX_SIZE) {
		snprintf(why, why_len,
			 "client arena: %llu bytes (%llu usable in pieces of %llu) is outside "
			 "rudad's arena sizes, %llu to %llu bytes",
			 (unsigned long long)size, (unsigned long long)used,
			 (unsigned long long)grain, (unsigned long long)RUDA_ARENA_MIN_SIZE,
			 (unsigned long long)RUDA_ARENA_MAX_SIZE);
		return RUDA_ERROR_OUT_OF_RANGE;
	}
	/* growing cannot hurt rudad's mapping, but an arena keeps its size:
	 * seal it too while the memfd still takes seals (not F_SEAL_SEAL) */
	(void)fcntl(fd, F_ADD_SEALS, F_SEAL_GROW);
	int err = ruda__arena_map_fd(d, fd, used, out);
	if (err) {
		snprintf(why, why_len, "client arena: cannot map the memfd: %s", strerror(-err));
		return err == -ENOMEM ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
	}
	return RUDA_OK;
}
