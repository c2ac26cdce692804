/*
 * libFuzzer target: the admin protocol (what rudactl sends). The input is
 * the bytes of one ruda.Admin message; it reaches the daemon as the body
 * of a Request in a frame, through fuzz_dispatch's harness (a real device,
 * a fresh session per input, replies decoded), from a session that counts
 * as root's so that commands run as well as views. Drain and shutdown have
 * no hooks in that harness and are refused as unsupported;
 * inject_device_loss is refused because RUDA_TEST_FAULTS is not set there.
 */
#include <stdint.h>
#include <string.h>

#ifndef RUDA_FUZZ_DISPATCH_C
#define LLVMFuzzerTestOneInput fuzz_dispatch_one
#define LLVMFuzzerInitialize fuzz_dispatch_init
#include "fuzz_dispatch.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize
#endif

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fd_as_admin = 1;
	return fuzz_dispatch_init(argc, argv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t frame[RUDA_FRAME_HEADER_SIZE + RUDA_FRAME_MAX_PAYLOAD];
	if (size > RUDA_FRAME_MAX_PAYLOAD - 16)
		return 0;
	fd_as_admin = 1;
	uint8_t *p = frame + RUDA_FRAME_HEADER_SIZE;
	size_t n = 0;
	p[n++] = 0x08; /* id: 2, after the harness's Hello */
	p[n++] = 0x02;
	p[n++] = 0x82; /* field 16, admin: length-delimited */
	p[n++] = 0x01;
	size_t len = size;
	do {
		uint8_t b = len & 0x7f;
		len >>= 7;
		p[n++] = (uint8_t)(b | (len ? 0x80 : 0));
	} while (len);
	memcpy(p + n, data, size);
	n += size;
	ruda__frame_header_encode(frame, (uint32_t)n, 0);
	return fuzz_dispatch_one(frame, RUDA_FRAME_HEADER_SIZE + n);
}
