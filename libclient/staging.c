/* libruda: staging regions, shared memory the daemon copies from and into
 * directly (StagingAttach, and Write and Read naming a region). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <ruda/ruda.h>

#include "client_private.h"

/* Regions libruda makes are a multiple of this: the host-import granularity
 * of the devices rudad knows (4 KiB to 64 KiB). */
#define STAGING_GRANULARITY (64u * 1024u)

static ruda_status attach(ruda_client *c, int fd, size_t size, ruda_staging *out)
{
	Ruda__StagingAttach a = RUDA__STAGING_ATTACH__INIT;
	a.region = ruda__client_next_id(c);
	a.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_STAGING_ATTACH;
	req.staging_attach = &a;
	ruda_status st = ruda__client_call_with_fd(c, &req, fd);
	if (st != RUDA_OK)
		return st;
	void *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		Ruda__StagingDetach d = RUDA__STAGING_DETACH__INIT;
		d.region = a.region;
		req.body_case = RUDA__REQUEST__BODY_STAGING_DETACH;
		req.staging_detach = &d;
		ruda__client_post(c, &req, 0);
		return RUDA_ERROR_IO;
	}
	*out = (ruda_staging){.id = a.region, .data = map, .size = size};
	return RUDA_OK;
}

ruda_status ruda_client_staging_create(ruda_client *c, size_t size, ruda_staging *out)
{
	if (!c || !out || !size || size > SIZE_MAX - STAGING_GRANULARITY)
		return RUDA_ERROR_INVALID_ARGUMENT;
	size_t file_size = (size + STAGING_GRANULARITY - 1) / STAGING_GRANULARITY *
			   STAGING_GRANULARITY;
	int fd = memfd_create("ruda-staging", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (fd < 0)
		return RUDA_ERROR_IO;
	ruda_status st = RUDA_OK;
	if (ftruncate(fd, (off_t)file_size) < 0 ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0)
		st = errno == ENOMEM || errno == ENOSPC ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
	if (st == RUDA_OK)
		st = attach(c, fd, size, out);
	close(fd); /* both sides keep mappings, not the fd */
	return st;
}

ruda_status ruda_client_staging_attach(ruda_client *c, int fd, size_t size, ruda_staging *out)
{
	if (!c || !out || fd < 0)
		return RUDA_ERROR_INVALID_ARGUMENT;
	return attach(c, fd, size, out);
}

ruda_status ruda_client_staging_release(ruda_client *c, ruda_staging *s)
{
	if (!c || !s || !s->data)
		return RUDA_ERROR_INVALID_ARGUMENT;
	munmap(s->data, s->size);
	Ruda__StagingDetach d = RUDA__STAGING_DETACH__INIT;
	d.region = s->id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_STAGING_DETACH;
	req.staging_detach = &d;
	*s = (ruda_staging){0};
	return ruda__client_post(c, &req, 0);
}

static int region_range_ok(const ruda_staging *s, uint64_t offset, uint64_t size)
{
	return s && s->data && offset <= s->size && size <= s->size - offset;
}

ruda_status ruda_client_write_from_staging(ruda_client *c, ruda_handle h, uint64_t offset,
					   const ruda_staging *s, uint64_t staging_offset,
					   size_t size)
{
	if (!c || !region_range_ok(s, staging_offset, size) || offset > h.size ||
	    size > h.size - offset)
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (!size)
		return RUDA_OK;
	Ruda__Write w = RUDA__WRITE__INIT;
	w.handle = h.id;
	w.offset = h.offset + offset;
	w.region = s->id;
	w.arena_offset = staging_offset;
	w.size = size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_WRITE;
	req.write = &w;
	return ruda__client_post_transfer(c, &req, size);
}

ruda_status ruda_client_create_from_staging(ruda_client *c, const ruda_staging *s,
					    uint64_t offset, size_t size, ruda_handle *out)
{
	if (!c || !out || !region_range_ok(s, offset, size))
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_handle h;
	ruda_status st = ruda_client_empty(c, size, &h);
	if (st == RUDA_OK)
		st = ruda_client_write_from_staging(c, h, 0, s, offset, size);
	if (st == RUDA_OK)
		*out = h;
	return st;
}

ruda_status ruda_client_read_to_staging(ruda_client *c, ruda_handle h, const ruda_staging *s,
					uint64_t staging_offset)
{
	if (!c || !region_range_ok(s, staging_offset, h.size))
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__Read r = RUDA__READ__INIT;
	r.handle = h.id;
	r.offset = h.offset;
	r.region = s->id;
	r.arena_offset = staging_offset;
	r.size = h.size;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_READ;
	req.read = &r;
	return ruda__client_watched_call(c, &req, h.size);
}
