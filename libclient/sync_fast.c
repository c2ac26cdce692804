#include "sync_fast.h"

#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "transfer.h"

/* Long enough for a small kernel's round trip on a GPU (tens of µs), and
 * for one that shares the device with busy clients (H100, 8 busy clients:
 * 240 µs; a 200 µs watch ran out and the reply came through rudad's busy
 * loop, 347 µs); short enough that a long one costs little spinning before
 * the client sleeps. Hosts of few CPUs, where the watching client takes
 * cores from the device (lavapipe) and rudad, watch as before. */
#define DEFAULT_SPIN_US 1000u
#define FEW_CPUS_SPIN_US 200u
#define FEW_CPUS 8

int ruda__sync_fast_init(struct ruda_sync_fast *f, int fd)
{
	f->page = NULL;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	f->spin_ns = (uint64_t)(cpus >= FEW_CPUS ? DEFAULT_SPIN_US : FEW_CPUS_SPIN_US) * 1000u;
	const char *env = getenv("RUDA_SYNC_SPIN_US");
	if (env && *env) {
		char *end;
		unsigned long us = strtoul(env, &end, 10);
		if (!*end)
			f->spin_ns = (uint64_t)us * 1000u;
	}
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
			 uint32_t stream, uint64_t request, uint64_t bytes)
{
	if (!f->page || !f->spin_ns)
		return 0;
	/* lengthened by the time its transfers take */
	uint64_t watch = f->spin_ns + ruda_transfer_ns(bytes);
	uint64_t deadline = ruda__transfer_now_ns() + (watch < RUDA_TRANSFER_WATCH_MAX_NS ? watch
									 : RUDA_TRANSFER_WATCH_MAX_NS);
	for (unsigned i = 0;; i++) {
		int r = look(f->page, arena, stream, request);
		if (r)
			return r > 0;
		if ((i & 15) == 15 && ruda__transfer_now_ns() > deadline)
			return 0;
		/* rudad's loop and completion thread may need this core */
		sched_yield();
	}
}
