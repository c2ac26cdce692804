/* Where rudad listens and its clients connect, shared by both sides. */
#ifndef RUDA_SOCKET_PATH_H
#define RUDA_SOCKET_PATH_H

#include <stddef.h>

/*
 * `given` if not NULL, else $RUDA_SOCKET, else /run/ruda/rudad.sock for
 * root, else $XDG_RUNTIME_DIR/ruda/rudad.sock, written into buf. 0, or
 * -ENOENT (no XDG_RUNTIME_DIR) or -ENAMETOOLONG.
 */
int ruda__socket_path(const char *given, char *buf, size_t len);

/*
 * One sentence for a connect(2) to rudad's socket `path` that failed with
 * errno `err`, naming the path and what to do (start rudad, join the
 * socket's group), written into buf.
 */
void ruda__socket_connect_error(const char *path, int err, char *buf, size_t len);

#endif
