/*
 * What the host's memory gives the plain path's copy (issue #24): libruda's
 * parallel copy (libclient/parallel_copy.c, the helpers $RUDA_COPY_THREADS
 * asks for) between a large buffer of the caller's and a ring the size of a
 * session arena, a chunk at a time, as ruda_client_write and _read_one
 * copy; and one copy of the whole buffer at once, for the host's ceiling.
 * No device is involved: run it beside the transfers group to tell the
 * client's copy from the DMA.
 *
 *   host_copy [MIB [CHUNK_KIB [RING_MIB]]]   (defaults 1024, 4096, 16)
 *
 * Prints GB/s of bytes copied, the median of 5 rounds after one warm-up.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "parallel_copy.h"

#define ROUNDS 5

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

enum way { INTO_RING, FROM_RING, WHOLE };

static double one_round(enum way way, uint8_t *big, uint8_t *other, uint8_t *ring, size_t size,
			size_t chunk, size_t ring_size)
{
	double t0 = now_s();
	if (way == WHOLE) {
		ruda__parallel_copy(other, big, size);
		return now_s() - t0;
	}
	size_t at = 0;
	for (size_t done = 0; done < size; done += chunk) {
		size_t n = size - done < chunk ? size - done : chunk;
		if (at + n > ring_size)
			at = 0;
		if (way == INTO_RING)
			ruda__parallel_copy(ring + at, big + done, n);
		else
			ruda__parallel_copy(big + done, ring + at, n);
		at += n;
	}
	return now_s() - t0;
}

int main(int argc, char **argv)
{
	size_t size = (argc > 1 ? strtoull(argv[1], NULL, 10) : 1024) << 20;
	size_t chunk = (argc > 2 ? strtoull(argv[2], NULL, 10) : 4096) << 10;
	size_t ring_size = (argc > 3 ? strtoull(argv[3], NULL, 10) : 16) << 20;
	if (!size || !chunk || chunk > ring_size) {
		fprintf(stderr, "usage: host_copy [MIB [CHUNK_KIB [RING_MIB]]], a chunk within the ring\n");
		return 2;
	}
	uint8_t *big = malloc(size), *other = malloc(size), *ring = malloc(ring_size);
	if (!big || !other || !ring) {
		fprintf(stderr, "host_copy: out of memory\n");
		return 1;
	}
	/* every page touched before timing, as the caller's data would be */
	memset(big, 1, size);
	memset(other, 2, size);
	memset(ring, 3, ring_size);
	const char *threads = getenv("RUDA_COPY_THREADS");
	const char *spin = getenv("RUDA_COPY_SPIN_US");
	printf("host_copy: %zu MiB, %zu KiB chunks, %zu MiB ring, RUDA_COPY_THREADS=%s "
	       "RUDA_COPY_SPIN_US=%s:",
	       size >> 20, chunk >> 10, ring_size >> 20, threads ? threads : "(default)",
	       spin ? spin : "(default)");
	static const char *const names[] = {"into ring", "from ring", "whole"};
	for (int way = INTO_RING; way <= WHOLE; way++) {
		double t[ROUNDS];
		for (int r = -1; r < ROUNDS; r++) {
			double s = one_round((enum way)way, big, other, ring, size, chunk, ring_size);
			if (r >= 0)
				t[r] = s;
		}
		qsort(t, ROUNDS, sizeof(t[0]), by_value);
		printf("  %s %.1f GB/s", names[way], (double)size / t[ROUNDS / 2] / 1e9);
	}
	printf("\n");
	free(big);
	free(other);
	free(ring);
	return 0;
}
