/*
 * The first page of a session's shared-memory arena, written by rudad and
 * read by the client. Everything after `RUDA_ARENA_DATA_OFFSET` is data
 * space that the client allocates from.
 */
#ifndef RUDA_ARENA_HEADER_H
#define RUDA_ARENA_HEADER_H

#include <stdatomic.h>
#include <stdint.h>

#define RUDA_ARENA_MAGIC 0x41445552u /* "RUDA" */
#define RUDA_ARENA_VERSION 1u
#define RUDA_ARENA_DATA_OFFSET 4096u

struct ruda_arena_header {
	uint32_t magic;
	uint32_t version;
	/* Every request with an id up to this one has finished with its arena
	 * bytes (uploads copied, kernels read); the client may reuse them. */
	_Atomic uint64_t completed_request;
};

#endif
