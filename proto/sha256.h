/* SHA-256 (FIPS 180-4), shared by rudad and libruda: kernels are named by
 * the SHA-256 of their SPIR-V, so a client can ask whether the daemon has a
 * module without sending it, and no client can forge another's module. */
#ifndef RUDA_SHA256_H
#define RUDA_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define RUDA_SHA256_SIZE 32u

struct ruda_sha256 {
	uint32_t state[8];
	uint64_t length; /* bytes hashed so far */
	uint8_t block[64];
	size_t used;
};

void ruda__sha256_init(struct ruda_sha256 *h);
void ruda__sha256_update(struct ruda_sha256 *h, const void *data, size_t len);
void ruda__sha256_final(struct ruda_sha256 *h, uint8_t out[RUDA_SHA256_SIZE]);
/* One-shot digest of `data`. */
void ruda__sha256(const void *data, size_t len, uint8_t out[RUDA_SHA256_SIZE]);

#endif
