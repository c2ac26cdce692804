/*
 * A transfer between two logical devices of one physical device through a
 * shared window (memory/peer_window.h), in chunks: the source device copies
 * a chunk into one half of the window, the target device copies it out
 * once that copy is done (the two VkDevices share no semaphore: the loop
 * hears the first copy's completion through a waiter, then submits the
 * second), while the source fills the other half. The window stays small
 * whatever the size; every copy is a submission of its own (exec/copy.c).
 */
#ifndef RUDA_PEER_COPY_H
#define RUDA_PEER_COPY_H

#include <stdbool.h>
#include <stdint.h>

struct ruda_buffer;
struct ruda_peer_window;

/* The bytes of one chunk (half a window of a chunked transfer): 64 MiB, or
 * RUDA_PEER_CHUNK (bytes, a multiple of 4 KiB at least 4 KiB, for tests),
 * read once. */
uint64_t ruda__peer_chunk(void);
/* Whether RUDA_PEER_CHUNK chose the chunk (tests: callers that would
 * otherwise take one chunk of a call's size take chunks of it). */
bool ruda__peer_chunk_forced(void);

/* The chunk of an all-reduce of `size` bytes over `members` logical devices
 * of one physical device (collective_peer.c): the call's size while its
 * windows (one per member past the first, a power of two each) can all be
 * kept (RUDA_PEER_CACHE_BYTES); past that the largest power of two from
 * the default chunk whose windows of two chunks can; RUDA_PEER_CHUNK when
 * set. A size at most the chunk's is one chunk either way. */
uint64_t ruda__peer_reduce_chunk(uint64_t size, uint32_t members);

/*
 * Copy `size` bytes from `src` (on window->from.device; nothing writes it
 * meanwhile) into `dst` at `dst_offset` (on window->to.device), through
 * `window` (at least 2 chunks, or `size`, of bytes). With `zero_tail`, dst
 * is zeroed from `zero_from` to its end before the last chunk lands (the
 * word a copy does not reach). References to the window and both buffers
 * are held until the last copy is done; then `done` runs on the loop with
 * RUDA_OK or the first failure, once. 0, or a negative errno (nothing was
 * started, `done` never runs).
 */
int ruda__peer_copy_start(struct ruda_peer_window *window, struct ruda_buffer *src,
			  struct ruda_buffer *dst, uint64_t dst_offset, uint64_t size,
			  int zero_tail, uint64_t zero_from,
			  void (*done)(void *data, int status), void *data);

#endif
