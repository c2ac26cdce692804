#include "socket_path.h"

#include <errno.h>
#include <grp.h>
#include <string.h>
#include <sys/stat.h>
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

/* The name of the group that owns `path`, for "join it" advice. */
static void socket_group(const char *path, char *name, size_t len)
{
	struct stat st;
	struct group gr, *found = NULL;
	char buf[1024];
	snprintf(name, len, "the socket's group");
	if (stat(path, &st) == 0 && getgrgid_r(st.st_gid, &gr, buf, sizeof(buf), &found) == 0 &&
	    found)
		snprintf(name, len, "%s", found->gr_name);
}

void ruda__socket_connect_error(const char *path, int err, char *buf, size_t len)
{
	char group[64];
	switch (err) {
	case ENOENT:
		snprintf(buf, len, "cannot connect to rudad at %s: no such socket (is rudad "
			 "running, and is this its socket? --socket and $RUDA_SOCKET choose)", path);
		break;
	case ECONNREFUSED:
		snprintf(buf, len, "cannot connect to rudad at %s: nothing listens there (rudad "
			 "stopped?)", path);
		break;
	case EACCES:
	case EPERM:
		socket_group(path, group, sizeof(group));
		snprintf(buf, len, "cannot connect to rudad at %s: permission denied; members of "
			 "group '%s' may connect (sudo usermod -aG %s $USER, then log in again)",
			 path, group, group);
		break;
	default:
		snprintf(buf, len, "cannot connect to rudad at %s: %s", path, strerror(err));
	}
}
