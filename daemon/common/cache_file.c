#include "common/cache_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static int write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	while (len) {
		ssize_t n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ruda__cache_file_mkdir(const char *dir)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s", dir);
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			return -errno;
		*p = '/';
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int ruda__cache_file_write(const char *dir, const char *path, const void *head, size_t head_len,
			   const void *body, size_t body_len)
{
	char tmp[4200];
	int err = ruda__cache_file_mkdir(dir);
	if (err)
		return err;
	/* a unique name: a periodic save may still be writing its own */
	if (snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	int fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return -errno;
	err = fchmod(fd, 0644) < 0 ? -errno : 0;
	if (!err)
		err = write_all(fd, head, head_len);
	if (!err)
		err = write_all(fd, body, body_len);
	if (!err && fsync(fd) < 0)
		err = -errno;
	if (close(fd) < 0 && !err)
		err = -errno;
	if (!err && rename(tmp, path) < 0)
		err = -errno;
	if (err) {
		unlink(tmp);
		return err;
	}
	/* make the rename itself durable */
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
	return 0;
}

int ruda__cache_file_read(const char *path, size_t max, void **data, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	struct stat st;
	int err = 0;
	uint8_t *buf = NULL;
	if (fstat(fd, &st) < 0)
		err = -errno;
	else if ((uint64_t)st.st_size > max)
		err = -EFBIG;
	else if (!(buf = malloc(st.st_size ? (size_t)st.st_size : 1)))
		err = -ENOMEM;
	size_t got = 0;
	while (!err && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			err = n < 0 ? -errno : -EIO;
		else
			got += (size_t)n;
	}
	close(fd);
	if (err) {
		free(buf);
		return err;
	}
	*data = buf;
	*len = got;
	return 0;
}
