#include "memory/client_arena.h"

#include <stdio.h>

#include "memory/arena.h"
#include "device/device.h"
#include "common/memfd_check.h"

ruda_status ruda__client_arena_adopt(struct ruda_device *d, int fd, uint64_t size,
				     struct ruda_arena **out, char *why, size_t why_len)
{
	struct ruda_memfd_rules rules = {
		.what = "client arena",
		.seals = F_SEAL_SHRINK,
		.no_seals = RUDA_MEMFD_WRITE_SEALS, /* rudad writes the header and downloads */
		.min_size = size,
		.size_note = "(client_arena_size declared)",
	};
	uint64_t held;
	ruda_status rs = ruda__memfd_check(fd, &rules, &held, why, why_len);
	if (rs != RUDA_OK)
		return rs;
	if (!size)
		size = held;
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
	if (err)
		return ruda__memfd_map_failed("client arena", -err, why, why_len);
	return RUDA_OK;
}
