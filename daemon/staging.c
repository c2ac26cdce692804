#include "staging.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "arena.h"
#include "device.h"
#include "session.h"

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

/* Whether `fd` was made by memfd_create: its link in /proc names it so. */
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

ruda_status ruda__staging_check_fd(int fd, uint64_t size, uint64_t map_size, char *why,
				   size_t why_len)
{
	struct stat st;
	if (fstat(fd, &st) < 0) {
		snprintf(why, why_len, "cannot inspect the fd: %s", strerror(errno));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (!S_ISREG(st.st_mode) || !is_memfd(fd)) {
		snprintf(why, why_len, "the fd is %s, not a memfd", file_kind(st.st_mode));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
		snprintf(why, why_len,
			 "the memfd is not sealed against shrinking (F_SEAL_SHRINK): a shrink "
			 "would leave the daemon's mapping without pages");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (!size) {
		snprintf(why, why_len, "a region of 0 bytes");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if ((uint64_t)st.st_size < map_size) {
		snprintf(why, why_len,
			 "the memfd is too small: %llu bytes, a region of %llu bytes needs %llu "
			 "(the device's import granularity)",
			 (unsigned long long)st.st_size, (unsigned long long)size,
			 (unsigned long long)map_size);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	return RUDA_OK;
}

ruda_status ruda__staging_attach(struct ruda_session *s, uint64_t id, uint64_t size, int fd,
				 char *why, size_t why_len)
{
	struct ruda_device *d = s->device;
	if (!d->import_alignment) {
		snprintf(why, why_len, "device %u cannot import host memory", d->index);
		return RUDA_ERROR_UNSUPPORTED;
	}
	uint64_t align = d->import_alignment > 4096 ? d->import_alignment : 4096;
	uint64_t map_size = size > UINT64_MAX - align ? 0 : (size + align - 1) / align * align;
	ruda_status st = ruda__staging_check_fd(fd, size, map_size, why, why_len);
	if (st != RUDA_OK)
		return st;
	if (!id || ruda__handle_table_get(&s->staging, id)) {
		snprintf(why, why_len, "region id %llu is %s", (unsigned long long)id,
			 id ? "in use" : "reserved for the arena");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (s->staging.count >= RUDA_STAGING_MAX_REGIONS) {
		snprintf(why, why_len, "at most %u staging regions per client",
			 RUDA_STAGING_MAX_REGIONS);
		return RUDA_ERROR_BUSY;
	}
	struct ruda_arena *region;
	int err = ruda__arena_adopt(d, fd, map_size, &region);
	if (err) {
		snprintf(why, why_len, "cannot import the region: %s", strerror(-err));
		return err == -ENOMEM ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
	}
	if (ruda__handle_table_insert(&s->staging, id, region) < 0) {
		ruda_ref_put(&region->ref);
		snprintf(why, why_len, "out of memory");
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	return RUDA_OK;
}

struct ruda_arena *ruda__staging_get(struct ruda_session *s, uint64_t id)
{
	return ruda__handle_table_get(&s->staging, id);
}

void ruda__staging_detach(struct ruda_session *s, uint64_t id)
{
	struct ruda_arena *region = ruda__handle_table_remove(&s->staging, id);
	if (region)
		ruda_ref_put(&region->ref);
}

void ruda__staging_release_all(struct ruda_session *s)
{
	struct ruda_arena *region;
	while ((region = ruda__handle_table_pop(&s->staging, NULL)))
		ruda_ref_put(&region->ref);
	ruda__handle_table_finish(&s->staging);
}
