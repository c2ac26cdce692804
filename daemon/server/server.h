/* The listening socket and the registry of sessions. */
#ifndef RUDA_SERVER_H
#define RUDA_SERVER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "requests/session.h"
#include "server/loop_watch.h"

struct ruda_policy;

struct ruda_server_options {
	const char *socket_path;
	/* a listening socket to use instead of binding (socket activation:
	 * fds from 3 up); 0: bind socket_path. socket_path then only names it */
	int listen_fd;
	/* when binding: permissions of the socket file (0: as the umask makes
	 * them) and its group (when has_socket_group) */
	unsigned socket_mode;
	bool has_socket_group;
	gid_t socket_gid;
	const struct ruda_policy *policy; /* borrowed; NULL: everyone may connect */
	const char *cache_dir; /* the throughput caches' files; NULL: memory only */
	uint64_t arena_size;
	uint32_t max_clients;
	size_t max_output;
	uint32_t max_handles;
};

struct ruda_server {
	uv_loop_t *loop;
	char *socket_path; /* owned */
	int listen_fd;
	bool owns_socket; /* created the socket file, so removes it at the end */
	uv_poll_t listen_poll;
	uv_check_t tick;
	struct ruda_loop_watch watch; /* times every pass of the loop */
	uint32_t max_clients;
	uint64_t next_session_id;
	bool shut_down; /* ruda__server_shutdown has run */
	bool stop_sent; /* drained: SIGTERM raised once the last client went */
	int accept_paused; /* a lost device is being re-created */
	struct ruda_session_context ctx;
};

/* Listen on options->listen_fd, or bind options->socket_path (creating
 * its directory) with the mode and group asked for. 0 or a negative errno. */
int ruda__server_init(struct ruda_server *server, uv_loop_t *loop,
		      const struct ruda_server_options *options, struct ruda_device **devices,
		      struct ruda_pipeline_registry **pipelines, uint32_t ndevices);
/* Stop accepting clients (rudactl drain); once the last one has gone the
 * daemon stops as on SIGTERM. */
void ruda__server_drain(struct ruda_server *server);
/* Stop listening, remove the socket file if it made it and close every
 * session. */
void ruda__server_shutdown(struct ruda_server *server);

/* Free what must outlive the loop's last callbacks (after uv_run). */
void ruda__server_finish(struct ruda_server *server);

/* The default socket path: $RUDA_SOCKET, /run/ruda/rudad.sock for root,
 * else $XDG_RUNTIME_DIR/ruda/rudad.sock. Writes into buf; 0, -ENOENT or
 * -ENAMETOOLONG. */
int ruda__default_socket_path(char *buf, size_t len);

#endif
