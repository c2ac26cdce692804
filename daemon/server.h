/* The listening socket and the registry of sessions. */
#ifndef RUDA_SERVER_H
#define RUDA_SERVER_H

#include <stdint.h>
#include <uv.h>

#include "session.h"

struct ruda_server_options {
	const char *socket_path;
	uint64_t arena_size;
	uint32_t max_clients;
	size_t max_output;
	uint32_t max_handles;
};

struct ruda_server {
	uv_loop_t *loop;
	char *socket_path; /* owned */
	int listen_fd;
	uv_poll_t listen_poll;
	uv_check_t tick;
	uint32_t max_clients;
	uint64_t next_session_id;
	struct ruda_session_context ctx;
};

/* Bind and listen on options->socket_path (creating its directory). */
int ruda__server_init(struct ruda_server *server, uv_loop_t *loop,
		      const struct ruda_server_options *options, struct ruda_device **devices,
		      struct ruda_pipeline_registry **pipelines, uint32_t ndevices);
/* Stop listening, remove the socket and close every session. */
void ruda__server_shutdown(struct ruda_server *server);

/* The default socket path: $RUDA_SOCKET, /run/ruda/rudad.sock for root,
 * else $XDG_RUNTIME_DIR/ruda/rudad.sock. Writes into buf. */
int ruda__default_socket_path(char *buf, size_t len);

#endif
