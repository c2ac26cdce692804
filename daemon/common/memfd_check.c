#include "common/memfd_check.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The fd's link in /proc ("/memfd:name (deleted)", "pipe:[12]",
 * "anon_inode:[eventfd]"), or "" */
static const char *fd_link(int fd, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(path, buf, len - 1);
	buf[n < 0 ? 0 : n] = '\0';
	return buf;
}

/* Anonymous inodes have no file type in st_mode: their link names them. */
static const char *anon_kind(const char *name, char *buf, size_t len)
{
	static const struct {
		const char *name, *kind;
	} known[] = {
		{"[eventfd]", "an eventfd"},	 {"[timerfd]", "a timerfd"},
		{"[signalfd]", "a signalfd"},	 {"[eventpoll]", "an epoll fd"},
		{"[pidfd]", "a pidfd"},		 {"[io_uring]", "an io_uring fd"},
		{"[userfaultfd]", "a userfaultfd"}, {"inotify", "an inotify fd"},
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
		if (!strcmp(name, known[i].name))
			return known[i].kind;
	/* kernel-made names are short and printable; keep the message so */
	char clean[40];
	size_t j = 0;
	for (; name[j] && j + 1 < sizeof(clean); j++)
		clean[j] = name[j] >= 0x20 && name[j] < 0x7f ? name[j] : '?';
	clean[j] = '\0';
	snprintf(buf, len, "an anonymous inode (%s)", clean);
	return buf;
}

const char *ruda__memfd_fd_kind(int fd, char *buf, size_t len)
{
	struct stat st;
	char link[128];
	if (fstat(fd, &st) < 0)
		return "not an open file";
	fd_link(fd, link, sizeof(link));
	if (S_ISREG(st.st_mode))
		return strncmp(link, "/memfd:", 7) ? "a regular file" : "a memfd";
	if (S_ISFIFO(st.st_mode))
		return "a pipe";
	if (S_ISSOCK(st.st_mode))
		return "a socket";
	if (S_ISCHR(st.st_mode))
		return "a character device";
	if (S_ISDIR(st.st_mode))
		return "a directory";
	if (S_ISBLK(st.st_mode))
		return "a block device";
	if (!strncmp(link, "anon_inode:", 11))
		return anon_kind(link + 11, buf, len);
	return "a file of no known kind";
}

/* "F_SEAL_SHRINK (against shrinking)" for the lowest seal bit in `seals`. */
static const char *seal_name(unsigned seals)
{
	if (seals & F_SEAL_SHRINK)
		return "against shrinking (F_SEAL_SHRINK)";
	if (seals & F_SEAL_GROW)
		return "against growing (F_SEAL_GROW)";
	if (seals & F_SEAL_WRITE)
		return "against writing (F_SEAL_WRITE)";
	if (seals & F_SEAL_FUTURE_WRITE)
		return "against writing (F_SEAL_FUTURE_WRITE)";
	if (seals & F_SEAL_SEAL)
		return "against more seals (F_SEAL_SEAL)";
	return "with an unknown seal";
}

void (*ruda__memfd_check_between)(int fd, int step);

/*
 * The order is what makes this safe. Seals only ever get added, so once
 * F_SEAL_SHRINK is seen, a size read afterwards stays a floor for good; a
 * size read before it (as rudad once did) may be gone by the time the seal
 * is checked: truncated to 0, then sealed, a 1 MiB region passed and the
 * first transfer through it faulted rudad with SIGBUS. The kind comes
 * first: st_mode and the /proc link of an open file never change.
 */
ruda_status ruda__memfd_check(int fd, const struct ruda_memfd_rules *r, uint64_t *size,
			      char *why, size_t why_len)
{
	char kind_buf[64];
	const char *kind = ruda__memfd_fd_kind(fd, kind_buf, sizeof(kind_buf));
	if (strcmp(kind, "a memfd")) {
		snprintf(why, why_len, "%s: the fd is %s, not a memfd", r->what, kind);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (ruda__memfd_check_between)
		ruda__memfd_check_between(fd, 1);
	int seals = fcntl(fd, F_GET_SEALS);
	if (seals < 0) {
		snprintf(why, why_len, "%s: cannot read the memfd's seals: %s", r->what,
			 strerror(errno));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	unsigned missing = r->seals & ~(unsigned)seals;
	if (missing) {
		snprintf(why, why_len,
			 "%s: the memfd is not sealed %s; make it with MFD_ALLOW_SEALING and "
			 "add the seal before passing it%s",
			 r->what, seal_name(missing),
			 missing & F_SEAL_SHRINK
				 ? " (a shrink would leave rudad's mapping without pages)"
				 : "");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	unsigned refused = r->no_seals & (unsigned)seals;
	if (refused) {
		snprintf(why, why_len, "%s: the memfd is sealed %s; rudad writes into it", r->what,
			 seal_name(refused));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (ruda__memfd_check_between)
		ruda__memfd_check_between(fd, 2);
	struct stat st; /* after the seals, never before: see above */
	if (fstat(fd, &st) < 0) {
		snprintf(why, why_len, "%s: cannot inspect the memfd: %s", r->what,
			 strerror(errno));
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if ((uint64_t)st.st_size < r->min_size) {
		snprintf(why, why_len, "%s: the memfd is too small: it holds %llu bytes, fewer than "
				       "the %llu needed%s%s",
			 r->what, (unsigned long long)st.st_size, (unsigned long long)r->min_size,
			 r->size_note ? " " : "", r->size_note ? r->size_note : "");
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	if (size)
		*size = (uint64_t)st.st_size;
	return RUDA_OK;
}

ruda_status ruda__memfd_map_failed(const char *what, int err, char *why, size_t why_len)
{
	if (err == EPERM || err == EACCES) {
		snprintf(why, why_len,
			 "%s: cannot map the memfd: it was sealed against writing after it was "
			 "checked; rudad writes into it",
			 what);
		return RUDA_ERROR_INVALID_ARGUMENT;
	}
	snprintf(why, why_len, "%s: cannot map the memfd: %s", what, strerror(err));
	return err == ENOMEM ? RUDA_ERROR_OUT_OF_MEMORY : RUDA_ERROR_IO;
}
