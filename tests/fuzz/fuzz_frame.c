/*
 * libFuzzer target: the frame reader and the request decoder.
 *
 * Input: one byte that seeds how the rest is split, then the byte stream a
 * client would send. The stream is fed to a ruda_frame_reader in pieces of
 * pseudo-random sizes (as recvmsg would deliver them), every complete frame
 * is taken out and its payload unpacked as a ruda.Request through a capped
 * bump allocator like daemon/requests/dispatch.c's, packed again and unpacked again.
 *
 * Checked besides what the sanitizers see: feeding never fails while the
 * reader has room, a reader that is full always has a frame to give, a
 * decoded request packs again, and what that decodes to (when protobuf-c
 * takes it: see ff_decode) has the same id and request type.
 *
 * Built by `make fuzz` with clang -fsanitize=fuzzer,address,undefined, and
 * with gcc into tests/unit/test_fuzz_corpus.c, which replays the corpus.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/frame.h"
#include "ruda.pb-c.h"

/* as daemon/requests/dispatch.c: one scratch area, a hard cap on what a frame may
 * make the decoder allocate */
#define FF_SCRATCH_BYTES (1u << 20)

struct ff_scratch {
	uint8_t *base;
	size_t used;
};

static void *ff_scratch_alloc(void *data, size_t size)
{
	struct ff_scratch *sc = data;
	size_t start = (sc->used + 15) & ~(size_t)15;
	if (size > FF_SCRATCH_BYTES - start)
		return NULL;
	sc->used = start + size;
	return sc->base + start;
}

static void ff_scratch_free(void *data, void *pointer)
{
	(void)data;
	(void)pointer;
}

#define FF_CHECK(cond)                                                                      \
	do {                                                                                \
		if (!(cond)) {                                                              \
			fprintf(stderr, "fuzz_frame: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                            \
		}                                                                           \
	} while (0)

static void ff_decode(const struct ruda_frame *frame)
{
	static uint8_t *scratch;
	if (!scratch) {
		scratch = malloc(FF_SCRATCH_BYTES);
		FF_CHECK(scratch != NULL);
	}
	struct ff_scratch sc = {.base = scratch};
	ProtobufCAllocator allocator = {
		.alloc = ff_scratch_alloc, .free = ff_scratch_free, .allocator_data = &sc};
	Ruda__Request *req = ruda__request__unpack(&allocator, frame->length, frame->payload);
	if (!req)
		return; /* undecodable: the daemon disconnects the client */
	/* what was decoded packs again, and that decodes again */
	size_t size = ruda__request__get_packed_size(req);
	uint8_t *packed = malloc(size ? size : 1);
	FF_CHECK(packed != NULL);
	FF_CHECK(ruda__request__pack(req, packed) == size);
	Ruda__Request *again = ruda__request__unpack(NULL, size, packed);
	/* not always: protobuf-c keeps an unknown field of number 0 when
	 * decoding, then packs a tag it refuses to decode (rudad never packs
	 * a request, so this does not reach it) */
	if (again) {
		FF_CHECK(again->id == req->id && again->body_case == req->body_case);
		ruda__request__free_unpacked(again, NULL);
	}
	free(packed);
	/* nothing to free from the scratch area */
}

static uint64_t ff_next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint64_t rng = (uint64_t)data[0] * 0x9e3779b97f4a7c15ull + 1;
	int mode = data[0] & 3; /* 0: one piece, 1: bytes, 2: small, 3: any */
	data++;
	size--;
	struct ruda_frame_reader r;
	FF_CHECK(ruda__frame_reader_init(&r) == 0);
	size_t pos = 0;
	int broken = 0;
	while (!broken && pos < size) {
		size_t piece = size - pos;
		if (mode == 1)
			piece = 1;
		else if (mode == 2)
			piece = 1 + ff_next(&rng) % 16;
		else if (mode == 3)
			piece = 1 + ff_next(&rng) % (RUDA_FRAME_MAX_PAYLOAD + 64);
		if (piece > size - pos)
			piece = size - pos;
		size_t room = r.cap - ruda__frame_reader_pending(&r);
		if (piece > room)
			piece = room;
		if (piece == 0) {
			/* full: a whole frame must be waiting, or the reader is stuck */
			struct ruda_frame f;
			int n = ruda__frame_reader_next(&r, &f);
			FF_CHECK(n != 0);
			if (n < 0)
				break;
			ff_decode(&f);
			continue;
		}
		FF_CHECK(ruda__frame_reader_feed(&r, data + pos, piece) == 0);
		pos += piece;
		for (;;) {
			struct ruda_frame f;
			int n = ruda__frame_reader_next(&r, &f);
			if (n == 0)
				break;
			if (n < 0) {
				/* a bad header, or fds named that never came: the
				 * daemon disconnects here */
				broken = 1;
				break;
			}
			FF_CHECK(f.nfds == 0); /* none were queued */
			ff_decode(&f);
		}
	}
	ruda__frame_reader_finish(&r);
	return 0;
}
