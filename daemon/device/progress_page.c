#include "device/progress_page.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/log.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010
#endif

void ruda__progress_init(struct ruda_progress *p, uint32_t queues)
{
	p->fd = -1;
	p->page = NULL;
	int fd = memfd_create("rudad-progress", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	void *map = MAP_FAILED;
	if (fd >= 0 && ftruncate(fd, RUDA_PROGRESS_PAGE_SIZE) == 0)
		map = mmap(NULL, RUDA_PROGRESS_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	/* rudad's mapping stays writable; no client can make a writable one
	 * (F_SEAL_FUTURE_WRITE), so none can mislead the others */
	if (map == MAP_FAILED ||
	    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE |
					   F_SEAL_SEAL) < 0) {
		log_warn("no progress page (%s): clients wait for every reply", strerror(errno));
		if (map != MAP_FAILED)
			munmap(map, RUDA_PROGRESS_PAGE_SIZE);
		if (fd >= 0)
			close(fd);
		return;
	}
	p->fd = fd;
	p->page = map;
	p->page->magic = RUDA_PROGRESS_MAGIC;
	p->page->version = RUDA_PROGRESS_VERSION;
	p->page->queues = queues < RUDA_PROGRESS_QUEUES ? queues : RUDA_PROGRESS_QUEUES;
}

void ruda__progress_finish(struct ruda_progress *p)
{
	if (p->page)
		munmap(p->page, RUDA_PROGRESS_PAGE_SIZE);
	if (p->fd >= 0)
		close(p->fd);
	p->fd = -1;
	p->page = NULL;
}

int ruda__progress_dup(const struct ruda_progress *p)
{
	if (p->fd < 0)
		return -ENOENT;
	int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}
