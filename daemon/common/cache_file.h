/*
 * Files of the cache directory (pipeline cache, throughput cache): written
 * atomically, so a crash or a full disk leaves the old file or the new one,
 * never half of one. Blocking: call from the thread pool or at start-up and
 * shutdown.
 */
#ifndef RUDA_CACHE_FILE_H
#define RUDA_CACHE_FILE_H

#include <stddef.h>

/* mkdir -p: `dir` and its parents, mode 0755. 0 or a negative errno. */
int ruda__cache_file_mkdir(const char *dir);

/* Write `head` then `body` to `path` in `dir` (made if missing): a
 * temporary file, fsync, rename over `path`, fsync of `dir`. Returns 0 or a
 * negative errno; on failure `path` is untouched. */
int ruda__cache_file_write(const char *dir, const char *path, const void *head, size_t head_len,
			   const void *body, size_t body_len);

/* Read all of `path` (at most `max` bytes) into a new buffer *data of *len
 * bytes. Returns 0, -ENOENT, -EFBIG over `max`, or another negative errno. */
int ruda__cache_file_read(const char *path, size_t max, void **data, size_t *len);

#endif
