#include "server/server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../proto/frame.h"
#include "../../proto/socket_path.h"
#include "ruda.pb-c.h"
#include "memory/arena.h"
#include "common/config.h"
#include "device/device.h"
#include "common/log.h"
#include "common/policy.h"
#include "server/connection.h"
#include "server/recovery.h"
#include "exec/throughput_cache.h"

int ruda__default_socket_path(char *buf, size_t len)
{
	return ruda__socket_path(NULL, buf, len);
}

static void on_connection(uv_poll_t *poll, int status, int events);

/*
 * Tell a connection why it is refused, then close it: one Reply with id 0
 * (libruda's "the connection ends, this is why"), written without waiting;
 * a new socket's send buffer always has room for it.
 */
static void refuse(int fd, ruda_status status, const char *message)
{
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.status = (Ruda__Status)status;
	reply.message = (char *)message;
	uint8_t frame[RUDA_FRAME_HEADER_SIZE + 512];
	size_t length = ruda__reply__get_packed_size(&reply);
	if (length <= sizeof(frame) - RUDA_FRAME_HEADER_SIZE) {
		ruda__frame_header_encode(frame, (uint32_t)length, 0);
		ruda__reply__pack(&reply, frame + RUDA_FRAME_HEADER_SIZE);
		ssize_t n = send(fd, frame, RUDA_FRAME_HEADER_SIZE + length,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		(void)n; /* a client already gone needs no reason */
	}
	close(fd);
}

static void on_tick(uv_check_t *check)
{
	struct ruda_server *server = check->data;
	ruda__connection_tick(&server->ctx);
	/* a device being re-created: new clients wait in the backlog */
	int recovering = ruda__recovery_tick(&server->ctx) > 0;
	if (server->listen_fd >= 0 && recovering != server->accept_paused) {
		server->accept_paused = recovering;
		if (recovering)
			uv_poll_stop(&server->listen_poll);
		else
			uv_poll_start(&server->listen_poll, UV_READABLE, on_connection);
	}
	for (uint32_t i = 0; server->ctx.arena_pools && i < server->ctx.ndevices; i++)
		ruda__arena_pool_refill_idle(&server->ctx.arena_pools[i]);
	/* drained and the last client gone: stop as on SIGTERM */
	if (server->ctx.draining && !server->ctx.sessions.count && !server->stop_sent) {
		server->stop_sent = true;
		log_notice("drained: the last client has gone");
		uv_kill(getpid(), SIGTERM);
	}
}

static void on_device_progress(void *data)
{
	struct ruda_server *server = data;
	ruda__session_context_resume(&server->ctx);
}

/*
 * Whether a new connection may stay, decided at accept, before it has
 * said anything: the policy's allowed users (checked again at Hello, after
 * a reload), max_clients less the slots kept for administrators, and the
 * uid's connections that have not said Hello yet. Otherwise it is told
 * why and closed.
 */
static bool admit(struct ruda_server *server, int fd)
{
	struct ruda_session_context *ctx = &server->ctx;
	const struct ruda_config *c = ctx->policy ? ctx->policy->config : NULL;
	struct ucred cred = {.pid = 0, .uid = (uid_t)-1, .gid = (gid_t)-1};
	socklen_t len = sizeof(cred);
	getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	bool admin = cred.uid == 0;
	char why[256];
	if (ctx->policy) {
		struct ruda_rights rights;
		ruda__policy_check_peer(ctx->policy, fd, cred.uid, cred.gid, &rights);
		if (!rights.may_connect) {
			log_warn("connection (uid %u, pid %d): refused: %s", (unsigned)cred.uid,
				 (int)cred.pid, rights.why);
			snprintf(why, sizeof(why), "rudad's policy refuses this client: %s",
				 rights.why);
			refuse(fd, RUDA_ERROR_PERMISSION, why);
			return false;
		}
		admin = rights.admin;
	}
	/* rudactl must get in while others hold every ordinary slot */
	uint32_t reserved = c ? c->admin_reserved_clients : 0;
	if (reserved >= server->max_clients)
		reserved = server->max_clients - 1;
	uint32_t limit = admin ? server->max_clients : server->max_clients - reserved;
	if (ctx->sessions.count >= limit) {
		log_warn("refusing a client (uid %u, pid %d): %zu clients connected, %u the limit "
			 "(max_clients %u, of which %u for administrators)", (unsigned)cred.uid,
			 (int)cred.pid, ctx->sessions.count, limit, server->max_clients, reserved);
		if (admin || !reserved)
			snprintf(why, sizeof(why), "rudad serves %u clients already, its limit "
				 "(max_clients); try again when one leaves", server->max_clients);
		else
			snprintf(why, sizeof(why), "rudad serves %u clients already, its limit "
				 "(max_clients %u less admin_reserved_clients %u, kept for "
				 "administrators); try again when one leaves", limit,
				 server->max_clients, reserved);
		refuse(fd, RUDA_ERROR_BUSY, why);
		return false;
	}
	uint32_t max_pending = c ? c->max_pending_per_uid : 64;
	uint32_t pending = ruda__session_pending(ctx, cred.uid);
	if (!admin && max_pending && pending >= max_pending) {
		log_warn("refusing a client (uid %u, pid %d): the uid has %u connections that "
			 "have not said Hello (max_pending_per_uid)", (unsigned)cred.uid,
			 (int)cred.pid, pending);
		snprintf(why, sizeof(why), "uid %u has %u connections to rudad that have not said "
			 "Hello yet, its limit (max_pending_per_uid); try again when they have",
			 (unsigned)cred.uid, pending);
		refuse(fd, RUDA_ERROR_BUSY, why);
		return false;
	}
	return true;
}

static void on_connection(uv_poll_t *poll, int status, int events)
{
	struct ruda_server *server = poll->data;
	(void)events;
	if (status < 0)
		return;
	/* take a bounded number per wake-up so a connection storm cannot
	 * starve the clients already here */
	for (int i = 0; i < 64; i++) {
		int fd = accept4(server->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR)
				log_warn("accept: %s", strerror(errno));
			return;
		}
		if (!admit(server, fd))
			continue;
		struct ruda_session *session;
		uint64_t id = ++server->next_session_id;
		if (ruda__connection_create(&server->ctx, fd, id, &session) < 0) {
			log_error("cannot create a session: out of memory");
			close(fd);
		}
	}
}

static int make_parent_dir(const char *path)
{
	char dir[sizeof(((struct sockaddr_un *)0)->sun_path)];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (!slash || slash == dir)
		return 0;
	*slash = '\0';
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int listen_on(const char *path, const struct ruda_server_options *o)
{
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	int err = make_parent_dir(path);
	if (err)
		return err;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		if (errno != EADDRINUSE) {
			err = -errno;
			close(fd);
			return err;
		}
		/* a stale socket from a daemon that died, unless one answers */
		int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int alive = probe >= 0 && connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0;
		if (probe >= 0)
			close(probe);
		if (alive) {
			close(fd);
			return -EADDRINUSE;
		}
		unlink(path);
		if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
			err = -errno;
			close(fd);
			return err;
		}
	}
	/* before listen(), so no client can connect under looser permissions */
	int group_failed = o->has_socket_group && chown(path, (uid_t)-1, o->socket_gid) < 0;
	if (group_failed || (o->socket_mode && chmod(path, o->socket_mode) < 0)) {
		err = -errno;
		log_error("cannot set the %s of %s: %s",
			  group_failed ? "group (socket_group)" : "mode (socket_mode)", path,
			  strerror(-err));
		unlink(path);
		close(fd);
		return err;
	}
	if (listen(fd, 128) < 0) {
		err = -errno;
		unlink(path);
		close(fd);
		return err;
	}
	return fd;
}

/* An inherited socket (socket activation): it must listen, and rudad's
 * loop needs it non-blocking. */
static int adopt(int fd)
{
	int accepting = 0;
	socklen_t len = sizeof(accepting);
	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) < 0)
		return -errno;
	if (!accepting)
		return -EINVAL;
	int flags = fcntl(fd, F_GETFL);
	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return -errno;
	return fd;
}

int ruda__server_init(struct ruda_server *server, uv_loop_t *loop,
		      const struct ruda_server_options *o, struct ruda_device **devices,
		      struct ruda_pipeline_registry **pipelines, uint32_t ndevices)
{
	memset(server, 0, sizeof(*server));
	server->loop = loop;
	server->max_clients = o->max_clients;
	server->socket_path = strdup(o->socket_path);
	/* arenas for the first clients are made before anyone can connect */
	struct ruda_arena_pool *pools = calloc(ndevices, sizeof(*pools));
	if (!server->socket_path || !pools) {
		free(server->socket_path);
		free(pools);
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < ndevices; i++)
		ruda__arena_pool_init(&pools[i], loop, devices[i], o->arena_size);
	int fd = o->listen_fd > 0 ? adopt(o->listen_fd) : listen_on(o->socket_path, o);
	if (fd < 0) {
		if (o->listen_fd > 0)
			log_error("cannot use the socket passed as fd %d (%s): %s", o->listen_fd,
				  o->socket_path, strerror(-fd));
		else
			log_error("cannot listen on %s: %s", o->socket_path, strerror(-fd));
		free(server->socket_path);
		for (uint32_t i = 0; i < ndevices; i++)
			ruda__arena_pool_finish(&pools[i]);
		free(pools);
		return fd;
	}
	server->listen_fd = fd;
	server->owns_socket = o->listen_fd <= 0;
	server->ctx = (struct ruda_session_context){
		.loop = loop,
		.devices = devices,
		.ndevices = ndevices,
		.pipelines = pipelines,
		.arena_size = o->arena_size,
		.max_output = o->max_output,
		.max_handles = o->max_handles,
		.policy = o->policy,
	};
	ruda__handle_table_init(&server->ctx.sessions);
	/* the loop's idle time, for AdminStatus's loop_busy_ns: whether the
	 * one loop thread is what limits many clients */
	if (uv_loop_configure(loop, UV_METRICS_IDLE_TIME) == 0) {
		server->ctx.loop_start_ns = uv_hrtime();
		if (ruda__loop_watch_start(&server->watch, loop, &server->ctx) < 0)
			log_warn("the loop's passes are not timed");
	}
	const char *stall = getenv("RUDA_TEST_STALL_FLUSH_MS");
	server->ctx.test_stall_flush_ms = stall ? (uint32_t)atoi(stall) : 0;
	server->ctx.arena_pools = pools;
	server->ctx.throughput_caches = calloc(ndevices, sizeof(*server->ctx.throughput_caches));
	for (uint32_t i = 0; server->ctx.throughput_caches && i < ndevices; i++)
		server->ctx.throughput_caches[i] =
			ruda__throughput_cache_new(loop, devices[i], o->cache_dir);
	for (uint32_t i = 0; i < ndevices; i++) {
		devices[i]->on_progress = on_device_progress;
		devices[i]->progress_data = server;
	}
	uv_poll_init(loop, &server->listen_poll, fd);
	server->listen_poll.data = server;
	uv_poll_start(&server->listen_poll, UV_READABLE, on_connection);
	uv_check_init(loop, &server->tick);
	server->tick.data = server;
	uv_check_start(&server->tick, on_tick);
	/* the tick only matters while something else keeps the loop alive */
	uv_unref((uv_handle_t *)&server->tick);
	if (server->owns_socket)
		log_notice("listening on %s", o->socket_path);
	else
		log_notice("listening on %s (passed by the service manager)", o->socket_path);
	return 0;
}

/* Close the listening socket; remove the file we made (one the service
 * manager made stays: it still listens there). */
static void stop_listening(struct ruda_server *server)
{
	if (server->listen_fd < 0)
		return;
	uv_poll_stop(&server->listen_poll);
	uv_close((uv_handle_t *)&server->listen_poll, NULL);
	close(server->listen_fd);
	server->listen_fd = -1;
	if (server->owns_socket)
		unlink(server->socket_path);
}

void ruda__server_drain(struct ruda_server *server)
{
	log_notice("draining: no new clients; stopping once the %zu connected have gone",
		   server->ctx.sessions.count);
	stop_listening(server);
}

void ruda__server_shutdown(struct ruda_server *server)
{
	if (server->shut_down)
		return;
	server->shut_down = true;
	stop_listening(server);
	ruda__connection_tick(&server->ctx);
	struct ruda_session *s;
	while ((s = ruda__handle_table_pop(&server->ctx.sessions, NULL)))
		ruda__connection_end(s);
	ruda__connection_tick(&server->ctx);
	ruda__handle_table_finish(&server->ctx.sessions);
	ruda__connection_context_finish(&server->ctx);
	for (uint32_t i = 0; i < server->ctx.ndevices; i++)
		ruda__arena_pool_finish(&server->ctx.arena_pools[i]);
	for (uint32_t i = 0; i < server->ctx.ndevices; i++)
		server->ctx.devices[i]->on_progress = NULL;
	uv_check_stop(&server->tick);
	uv_close((uv_handle_t *)&server->tick, NULL);
	ruda__loop_watch_stop(&server->watch);
	free(server->socket_path);
	server->socket_path = NULL;
}

void ruda__server_finish(struct ruda_server *server)
{
	/* after the loop has run dry: no arena is being made any more */
	free(server->ctx.arena_pools);
	server->ctx.arena_pools = NULL;
}
