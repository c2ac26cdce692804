#include "parallel_copy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

/* Copies below this are one memcpy; parts are at least this large. */
#define PARALLEL_MIN_BYTES (1u << 20)
#define PART_MIN_BYTES (512u * 1024u)
/* Helpers by default at most (one fewer than the cores otherwise);
 * $RUDA_COPY_THREADS (0 = none) asks for up to MAX_HELPERS, for hosts
 * whose memory bandwidth one copy on 8 cores does not reach (issue #24). */
#define DEFAULT_HELPERS 7
#define MAX_HELPERS 31

static struct {
	pthread_once_t once;
	pthread_mutex_t busy; /* held by the thread whose copy is running */
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	int helpers;
	int stream; /* $RUDA_COPY_STREAM=1: non-temporal stores */
	uint64_t generation;
	/* the copy running */
	uint8_t *dst;
	const uint8_t *src;
	size_t size, part, parts;
	atomic_size_t next;
	size_t finished; /* parts done; under lock */
	int active;      /* helpers inside copy_parts; under lock */
} pool = {.once = PTHREAD_ONCE_INIT};

/*
 * A copy whose stores bypass the cache (x86 non-temporal stores): the
 * arena's bytes are next read by the device's DMA, not by this core, and a
 * plain store first reads each destination line in (a third of the memory
 * traffic). Off unless RUDA_COPY_STREAM=1 (issue #24: to be measured on
 * the H200; lavapipe's 2 shared cores cannot tell).
 */
static void copy_stream(uint8_t *d, const uint8_t *s, size_t n)
{
#ifdef __SSE2__
	size_t head = (16 - ((uintptr_t)d & 15)) & 15;
	if (head > n)
		head = n;
	memcpy(d, s, head);
	d += head;
	s += head;
	n -= head;
	for (; n >= 64; d += 64, s += 64, n -= 64) {
		__m128i a = _mm_loadu_si128((const __m128i *)s);
		__m128i b = _mm_loadu_si128((const __m128i *)(s + 16));
		__m128i c = _mm_loadu_si128((const __m128i *)(s + 32));
		__m128i e = _mm_loadu_si128((const __m128i *)(s + 48));
		_mm_stream_si128((__m128i *)d, a);
		_mm_stream_si128((__m128i *)(d + 16), b);
		_mm_stream_si128((__m128i *)(d + 32), c);
		_mm_stream_si128((__m128i *)(d + 48), e);
	}
	memcpy(d, s, n);
	_mm_sfence(); /* ordered before the part is counted done */
#else
	memcpy(d, s, n);
#endif
}

/* Copy parts until none is left; returns how many this thread did. */
static size_t copy_parts(void)
{
	size_t did = 0, i;
	while ((i = atomic_fetch_add(&pool.next, 1)) < pool.parts) {
		size_t at = i * pool.part;
		size_t n = pool.size - at < pool.part ? pool.size - at : pool.part;
		if (pool.stream)
			copy_stream(pool.dst + at, pool.src + at, n);
		else
			memcpy(pool.dst + at, pool.src + at, n);
		did++;
	}
	return did;
}

static void *helper(void *arg)
{
	(void)arg;
	uint64_t seen = 0;
	pthread_mutex_lock(&pool.lock);
	for (;;) {
		while (pool.generation == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		seen = pool.generation;
		pool.active++;
		pthread_mutex_unlock(&pool.lock);
		size_t did = copy_parts();
		pthread_mutex_lock(&pool.lock);
		pool.finished += did;
		pool.active--;
		if (pool.finished == pool.parts || !pool.active)
			pthread_cond_broadcast(&pool.done);
	}
	return NULL;
}

/* A forked child has none of the parent's helpers: it copies alone. */
static void in_child(void)
{
	pool.helpers = 0;
	pthread_mutex_init(&pool.busy, NULL);
	pthread_mutex_init(&pool.lock, NULL);
}

static void start(void)
{
	pthread_mutex_init(&pool.busy, NULL);
	pthread_mutex_init(&pool.lock, NULL);
	pthread_cond_init(&pool.wake, NULL);
	pthread_cond_init(&pool.done, NULL);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	int want = cpus > 1 ? (int)cpus - 1 : 0;
	if (want > DEFAULT_HELPERS)
		want = DEFAULT_HELPERS;
	const char *env = getenv("RUDA_COPY_THREADS");
	if (env && *env)
		want = atoi(env) < 0 ? 0 : atoi(env) > MAX_HELPERS ? MAX_HELPERS : atoi(env);
	const char *stream = getenv("RUDA_COPY_STREAM");
	pool.stream = stream && !strcmp(stream, "1");
	pthread_atfork(NULL, NULL, in_child);
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 64 * 1024);
	for (int i = 0; i < want; i++) {
		pthread_t t;
		if (pthread_create(&t, &attr, helper, NULL) != 0)
			break;
		pool.helpers++;
	}
	pthread_attr_destroy(&attr);
}

void ruda__parallel_copy(void *dst, const void *src, size_t n)
{
	if (n < PARALLEL_MIN_BYTES) {
		memcpy(dst, src, n);
		return;
	}
	pthread_once(&pool.once, start);
	if (!pool.helpers || pthread_mutex_trylock(&pool.busy) != 0) {
		if (pool.stream)
			copy_stream(dst, src, n);
		else
			memcpy(dst, src, n);
		return;
	}
	size_t parts = (size_t)pool.helpers + 1;
	if (n / parts < PART_MIN_BYTES)
		parts = n / PART_MIN_BYTES;
	pthread_mutex_lock(&pool.lock);
	/* a helper late for the last copy must leave before the fields change */
	while (pool.active)
		pthread_cond_wait(&pool.done, &pool.lock);
	pool.dst = dst;
	pool.src = src;
	pool.size = n;
	/* parts of whole cache lines */
	pool.part = ((n + parts - 1) / parts + 63) & ~(size_t)63;
	pool.parts = (n + pool.part - 1) / pool.part;
	atomic_store(&pool.next, 0);
	pool.finished = 0;
	pool.generation++;
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);
	size_t did = copy_parts();
	pthread_mutex_lock(&pool.lock);
	pool.finished += did;
	while (pool.finished < pool.parts)
		pthread_cond_wait(&pool.done, &pool.lock);
	pthread_mutex_unlock(&pool.lock);
	pthread_mutex_unlock(&pool.busy);
}
