#include "socket_path.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int ruda__socket_path(const char *given, char *buf, size_t len)
{
	const char *env = getenv("RUDA_SOCKET");
	int n;
	if (given)
		n = snprintf(buf, len, "%s", given);
	else if (env && *env)
		n = snprintf(buf, len, "%s", env);
	else if (geteuid() == 0)
		n = snprintf(buf, len, "/run/ruda/rudad.sock");
	else {
		const char *xdg = getenv("XDG_RUNTIME_DIR");
		if (!xdg || !*xdg)
			return -ENOENT;
		n = snprintf(buf, len, "%s/ruda/rudad.sock", xdg);
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}
