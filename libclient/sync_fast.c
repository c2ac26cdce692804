#include "sync_fast.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Long enough for a small kernel's round trip on a GPU (tens of µs), short
 * enough that a long one costs little spinning before the client sleeps. */
#define DEFAULT_SPIN_US 200u
/* Then the client sleeps on the page (rudad wakes it at every completion)
 * rather than on the socket, which the reply reaches only through rudad's
 * loop; long enough for a large transfer, short enough that a daemon that
 * died is noticed soon on the socket. */
#define DEFAULT_SLEEP_MS 100u

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The environment's `name` as a number, or `fallback`. */
static uint64_t env_number(const char *name, uint64_t fallback)
{
	const char *env = getenv(name);
	if (!env || !*env)
		return fallback;
	char *end;
	unsigned long long v = strtoull(env, &end, 10);
	return *end ? fallback : v;
}

int ruda__sync_fast_init(struct ruda_sync_fast *f, int fd)
{
	f->page = NULL;
	f->spin_ns = env_number("RUDA_SYNC_SPIN_US", DEFAULT_SPIN_US) * 1000u;
	f->sleep_ns = env_number("RUDA_SYNC_SLEEP_MS", DEFAULT_SLEEP_MS) * 1000000u;
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < (off_t)RUDA_PROGRESS_PAGE_SIZE)
		return -1;
	const struct ruda_progress_page *page =
		mmap(NULL, RUDA_PROGRESS_PAGE_SIZE, PROT_READ, MAP_SHARED, fd, 0);
	if (page == MAP_FAILED)
		return -1;
	if (page->magic != RUDA_PROGRESS_MAGIC || page->version != RUDA_PROGRESS_VERSION) {
		munmap((void *)page, RUDA_PROGRESS_PAGE_SIZE);
		return -1;
	}
	f->page = page;
	return 0;
}

void ruda__sync_fast_finish(struct ruda_sync_fast *f)
{
	if (f->page)
		munmap((void *)f->page, RUDA_PROGRESS_PAGE_SIZE);
	f->page = NULL;
}

/* 1: done; 0: not yet; -1: the page will not say. */
static int look(const struct ruda_progress_page *page, struct ruda_arena_header *arena,
		uint32_t stream, uint64_t request)
{
	struct ruda_arena_sync_entry e;
	if (!ruda_arena_sync_read(arena, stream, &e) || e.stream != stream || e.request < request)
		return 0; /* rudad has not got to it yet */
	if (e.request > request || e.value == RUDA_ARENA_SYNC_REPLY_ONLY ||
	    e.queue >= RUDA_PROGRESS_QUEUES)
		return -1; /* another thread's later sync, or an error to hear */
	if (atomic_load_explicit(&page->completed[e.queue], memory_order_acquire) < e.value)
		return 0;
	/* a failure is marked before any later progress: work seen complete
	 * with no failure marked ended in time */
	return atomic_load_explicit(&page->failed, memory_order_acquire) ? -1 : 1;
}

int ruda__sync_fast_wait(const struct ruda_sync_fast *f, struct ruda_arena_header *arena,
			 uint32_t stream, uint64_t request)
{
	if (!f->page || (!f->spin_ns && !f->sleep_ns))
		return 0;
	uint64_t start = now_ns(), spin_until = start + f->spin_ns;
	for (unsigned i = 0; f->spin_ns; i++) {
		int r = look(f->page, arena, stream, request);
		if (r)
			return r > 0;
		if ((i & 15) == 15 && now_ns() > spin_until)
			break;
		/* rudad's loop and completion thread may need this core */
		sched_yield();
	}
	/* sleep on the page's seq: rudad bumps it, and wakes us, after every
	 * completion, failure and sync slot it writes; read it before looking,
	 * so a change in between makes FUTEX_WAIT return at once */
	_Atomic uint32_t *seq = (_Atomic uint32_t *)&f->page->seq;
	uint64_t until = spin_until + f->sleep_ns;
	for (;;) {
		uint32_t seen = atomic_load_explicit(seq, memory_order_seq_cst);
		int r = look(f->page, arena, stream, request);
		if (r)
			return r > 0;
		if (atomic_load_explicit(&f->page->failed, memory_order_acquire))
			return 0;
		uint64_t now = now_ns();
		if (now >= until)
			return 0;
		struct timespec left = {(time_t)((until - now) / 1000000000u),
					(long)((until - now) % 1000000000u)};
		if (syscall(SYS_futex, seq, FUTEX_WAIT, seen, &left, NULL, 0) < 0 &&
		    errno != EAGAIN && errno != EINTR && errno != ETIMEDOUT)
			return 0;
	}
}
