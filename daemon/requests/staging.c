#include "requests/staging.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "memory/arena.h"
#include "device/device.h"
#include "common/log.h"
#include "common/memfd_check.h"
#include "requests/session.h"
#include "requests/session_arena.h"

/* "1.5 MiB" for a refusal message. */
static const char *human(uint64_t bytes, char *buf, size_t len)
{
	static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)bytes;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0])) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%llu bytes", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
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
	/* a size past the largest file asks for more than any memfd holds */
	uint64_t map_size =
		size > UINT64_MAX - align ? UINT64_MAX : (size + align - 1) / align * align;
	char what[48], note[96];
	snprintf(what, sizeof(what), "staging region %llu", (unsigned long long)id);
	snprintf(note, sizeof(note), "(a region of %llu bytes rounded up to the import granularity)",
		 (unsigned long long)size);
	struct ruda_memfd_rules rules = {
		.what = what,
		.seals = F_SEAL_SHRINK,
		.no_seals = RUDA_MEMFD_WRITE_SEALS, /* Read downloads into it */
		.min_size = map_size,
		.size_note = note,
	};
	ruda_status st = ruda__memfd_check(fd, &rules, NULL, why, why_len);
	if (st != RUDA_OK)
		return st;
	if (!size) {
		snprintf(why, why_len, "%s: a region of 0 bytes", what);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
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
	/* the pinned bytes are the mapped ones, granularity included */
	st = ruda__session_charge_staging(s, map_size);
	if (st != RUDA_OK) {
		char want[32], held[32], limit[32], uid_held[32], uid_limit[32];
		uint64_t uid_bytes = ruda__session_uid_staging(s->ctx, s->uid);
		snprintf(why, why_len,
			 "region %llu: %s would exceed the staging quota (this client holds %s of "
			 "%s; uid %u holds %s of %s): release a region, or raise "
			 "max_staging_per_client / max_staging_per_uid in rudad.conf",
			 (unsigned long long)id, human(map_size, want, sizeof(want)),
			 human(s->staging_bytes, held, sizeof(held)),
			 s->staging_quota ? human(s->staging_quota, limit, sizeof(limit))
					  : "unlimited",
			 (unsigned)s->uid, human(uid_bytes, uid_held, sizeof(uid_held)),
			 s->staging_uid_quota
				 ? human(s->staging_uid_quota, uid_limit, sizeof(uid_limit))
				 : "unlimited");
		if (st != RUDA_ERROR_QUOTA)
			snprintf(why, why_len, "out of memory");
		return st;
	}
	struct ruda_arena *region;
	int err = ruda__arena_map_region(d, fd, map_size, &region);
	if (!err && ruda__handle_table_insert(&s->staging, id, region) < 0) {
		ruda_ref_put(&region->ref);
		err = -ENOMEM;
	}
	if (err) {
		ruda__session_uncharge_staging(s, map_size);
		return ruda__memfd_map_failed(what, -err, why, why_len);
	}
	/* tests: a region of exactly RUDA_TEST_FAIL_STAGING_IMPORT bytes fails
	 * its first import, as when nothing more can be pinned */
	const char *fail = s->ctx->test_faults ? getenv("RUDA_TEST_FAIL_STAGING_IMPORT") : NULL;
	if (fail && *fail && strtoull(fail, NULL, 10) == map_size)
		region->fail_next_attach = 1;
	/* the import (pinning) runs in the thread pool; a request that uses
	 * the region before it is done waits for it, and one after a failed
	 * import is told why (ruda__session_region_ready) */
	err = ruda__session_region_import(s, region);
	if (err)
		log_warn("session %llu (uid %u): region %llu: import not started (%s); its first "
			 "use tries again", (unsigned long long)s->id, s->uid,
			 (unsigned long long)id, strerror(-err));
	return RUDA_OK;
}

struct ruda_arena *ruda__staging_get(struct ruda_session *s, uint64_t id)
{
	return ruda__handle_table_get(&s->staging, id);
}

/* The session lets go of `region`: its bytes are uncharged now; an import
 * still running finishes and then drops it, and copies in flight keep it
 * until they complete. */
static void drop(struct ruda_session *s, struct ruda_arena *region)
{
	ruda__session_uncharge_staging(s, region->size);
	ruda__arena_forget_waiter(region);
	ruda_ref_put(&region->ref);
}

void ruda__staging_detach(struct ruda_session *s, uint64_t id)
{
	struct ruda_arena *region = ruda__handle_table_remove(&s->staging, id);
	if (region)
		drop(s, region);
}

void ruda__staging_release_all(struct ruda_session *s)
{
	struct ruda_arena *region;
	while ((region = ruda__handle_table_pop(&s->staging, NULL)))
		drop(s, region);
	ruda__handle_table_finish(&s->staging);
}
