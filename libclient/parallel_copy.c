#include "parallel_copy.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "transfer.h"

/* Copies below this are one memcpy; parts are at least this large. */
#define PARALLEL_MIN_BYTES (1u << 20)
#define PART_MIN_BYTES (512u * 1024u)
/* Helpers by default at most (one fewer than the cores otherwise);
 * $RUDA_COPY_THREADS (0 = none) asks for up to MAX_HELPERS, for hosts
 * whose memory bandwidth one copy on 8 cores does not reach (issue #24). */
#define DEFAULT_HELPERS 7
#define MAX_HELPERS 31
/* How long a helper, and a caller waiting for its parts, watch for the
 * next step before sleeping: a large transfer's chunks come every ~100 µs,
 * less than a sleeping thread takes to wake. Only where the helpers have
 * cores of their own (SPIN_MIN_CPUS); $RUDA_COPY_SPIN_US overrides. */
#define DEFAULT_SPIN_US 200
#define SPIN_MIN_CPUS 8

static struct {
	pthread_once_t once;
	pthread_mutex_t busy; /* held by the thread whose copy is running */
	pthread_mutex_t lock;
	pthread_cond_t wake, done;
	int helpers;
	int stream; /* $RUDA_COPY_STREAM=1: non-temporal stores */
	uint64_t spin_ns;
	atomic_uint_fast64_t generation; /* changed under lock, watched without */
	/* the copy running */
	uint8_t *dst;
	const uint8_t *src;
	size_t size, part, parts;
	atomic_size_t next;
	atomic_size_t copied; /* parts whose bytes are in place */
	size_t finished; /* parts done and counted; under lock */
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
		atomic_fetch_add_explicit(&pool.copied, 1, memory_order_release);
		did++;
	}
	return did;
}

static void pause_briefly(void)
{
#ifdef __SSE2__
	_mm_pause();
#endif
}

/* Whether a copy came after generation `seen` (a helper's wait). */
static bool next_copy_came(uint64_t seen)
{
	return atomic_load_explicit(&pool.generation, memory_order_relaxed) != seen;
}

/* Whether all `parts` of the copy running are copied (the caller's wait). */
static bool all_parts_copied(uint64_t parts)
{
	return atomic_load_explicit(&pool.copied, memory_order_acquire) >= parts;
}

/* Watch for `ready(arg)` for up to the spin time; whether it came. */
static bool spin_until(bool (*ready)(uint64_t), uint64_t arg)
{
	if (!pool.spin_ns)
		return false;
	uint64_t end = ruda__transfer_now_ns() + pool.spin_ns;
	for (unsigned i = 0;; i++) {
		if (ready(arg))
			return true;
		if ((i & 63) == 63 && ruda__transfer_now_ns() > end)
			return false;
		pause_briefly();
	}
}

static void *helper(void *arg)
{
	(void)arg;
	uint64_t seen = 0;
	for (;;) {
		spin_until(next_copy_came, seen);
		pthread_mutex_lock(&pool.lock);
		while (atomic_load(&pool.generation) == seen)
			pthread_cond_wait(&pool.wake, &pool.lock);
		seen = atomic_load(&pool.generation);
		pool.active++;
		pthread_mutex_unlock(&pool.lock);
		size_t did = copy_parts();
		pthread_mutex_lock(&pool.lock);
		pool.finished += did;
		pool.active--;
		if (pool.finished == pool.parts || !pool.active)
			pthread_cond_broadcast(&pool.done);
		pthread_mutex_unlock(&pool.lock);
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
	pool.spin_ns = cpus >= SPIN_MIN_CPUS ? DEFAULT_SPIN_US * 1000ull : 0;
	const char *spin = getenv("RUDA_COPY_SPIN_US");
	if (spin && *spin)
		pool.spin_ns = strtoull(spin, NULL, 10) * 1000ull;
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
	atomic_store(&pool.copied, 0);
	pool.finished = 0;
	atomic_fetch_add(&pool.generation, 1);
	pthread_cond_broadcast(&pool.wake);
	pthread_mutex_unlock(&pool.lock);
	size_t did = copy_parts();
	/* the bytes are in place once every part is copied; the helpers'
	 * counting under the lock may come later (the next copy waits for it) */
	if (!spin_until(all_parts_copied, pool.parts)) {
		pthread_mutex_lock(&pool.lock);
		pool.finished += did;
		did = 0;
		while (pool.finished < pool.parts)
			pthread_cond_wait(&pool.done, &pool.lock);
		pthread_mutex_unlock(&pool.lock);
	}
	if (did) {
		pthread_mutex_lock(&pool.lock);
		pool.finished += did;
		pthread_mutex_unlock(&pool.lock);
	}
	pthread_mutex_unlock(&pool.busy);
}
