/*
 * libFuzzer target: bytes -> framing -> protobuf-c -> the request handlers,
 * against a real daemon state on the machine's Vulkan device (lavapipe
 * without a GPU).
 *
 * One device, pipeline registry, arena pool and session context live for
 * the whole process (made once, in LLVMFuzzerInitialize); every input gets
 * a fresh session bound to one end of a socketpair, a valid Hello, and a
 * real kernel (build/shaders/fill.spv) copied into its arena at the first
 * data byte, so that KernelRegister and Launch reach the compiler and the
 * device. The input is then the byte stream the client sends: each frame
 * the reader takes out goes through ruda__dispatch_frame exactly as
 * daemon/server/connection.c would pass it, with the server's end-of-iteration tick
 * and loop turns in between; replies are read from the other end and
 * thrown away. At the end the session is killed and the loop turned until
 * the device and the compiler are idle.
 *
 * Two kinds of request are skipped rather than run, because lavapipe runs
 * on the CPU: launches of more than 4096 workgroups or whose second
 * push-constant word (fill's count) is over 2^22, and buffers of more than
 * 256 MiB that the device would accept. Their refusals (counts over the
 * device's limits, sizes over its largest allocation) still run.
 */
#define RUDA_FUZZ_DISPATCH_C 1
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../proto/frame.h"
#include "memory/arena.h"
#include "device/device.h"
#include "requests/dispatch.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "ruda.pb-c.h"
#include "requests/session.h"
#include "server/connection.h"

#ifndef RUDA_BUILD_DIR
#define RUDA_BUILD_DIR "build"
#endif

#define FD_ARENA_SIZE (1u << 20)
#define FD_QUOTA (256ull << 20)
#define FD_MAX_GROUPS 4096u
#define FD_MAX_COUNT_WORD (1u << 22)

#define FD_CHECK(cond)                                                                        \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "fuzz_dispatch: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                              \
		}                                                                             \
	} while (0)

static struct {
	int ready;
	uv_loop_t loop;
	struct ruda_vulkan vk;
	struct ruda_device *devices[1];
	struct ruda_pipeline_registry registry;
	struct ruda_pipeline_registry *registries[1];
	struct ruda_arena_pool pool;
	struct ruda_session_context ctx;
	uint64_t next_id;
	uint8_t *spirv;
	size_t spirv_size;
} fd_state;

/* fuzz_admin: the session is root's, so that admin commands run too */
static int fd_as_admin;

static void fd_sleep_us(long us)
{
	struct timespec ts = {.tv_sec = us / 1000000, .tv_nsec = (us % 1000000) * 1000};
	nanosleep(&ts, NULL);
}

static void fd_on_progress(void *data)
{
	ruda__session_context_resume(data);
}

static void fd_load_kernel(void)
{
	const char *dir = getenv("RUDA_BUILD_DIR");
	char path[512];
	snprintf(path, sizeof(path), "%s/shaders/fill.spv", dir && *dir ? dir : RUDA_BUILD_DIR);
	FILE *f = fopen(path, "rb");
	if (!f) {
		fprintf(stderr, "fuzz_dispatch: no %s: KernelRegister will see zeros\n", path);
		return;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	if (len > 0 && len < FD_ARENA_SIZE / 2 && (fd_state.spirv = malloc((size_t)len)) &&
	    fread(fd_state.spirv, 1, (size_t)len, f) == (size_t)len)
		fd_state.spirv_size = (size_t)len;
	fclose(f);
}

static void fd_setup(void)
{
	if (fd_state.ready)
		return;
	ruda__log_init(getenv("RUDA_FUZZ_LOG") ? RUDA_LOG_DEBUG : RUDA_LOG_ERROR - 1);
	FD_CHECK(uv_loop_init(&fd_state.loop) == 0);
	FD_CHECK(ruda__vulkan_init(&fd_state.vk) == 0);
	int physical = ruda__vulkan_select(&fd_state.vk, NULL);
	FD_CHECK(physical >= 0);
	struct ruda_device *d;
	FD_CHECK(ruda__device_create(&fd_state.vk, (uint32_t)physical, 0, &fd_state.loop, &d) == 0);
	/* the async stays referenced (rudad unrefs it, its listening socket
	 * keeps the loop alive): uv_run does nothing on a loop with nothing
	 * referenced, and completions would never be seen once the session's
	 * socket is closed */
	d->submission_timeout_ns = 20ull * 1000 * 1000 * 1000;
	fd_state.devices[0] = d;
	FD_CHECK(ruda__pipeline_registry_init(&fd_state.registry, d, &fd_state.loop) == 0);
	fd_state.registries[0] = &fd_state.registry;
	ruda__arena_pool_init(&fd_state.pool, &fd_state.loop, d, FD_ARENA_SIZE);
	fd_state.ctx = (struct ruda_session_context){
		.loop = &fd_state.loop,
		.devices = fd_state.devices,
		.ndevices = 1,
		.pipelines = fd_state.registries,
		.arena_pools = &fd_state.pool,
		.arena_size = FD_ARENA_SIZE,
		.max_output = 1u << 20,
		.max_handles = 4096,
	};
	ruda__handle_table_init(&fd_state.ctx.sessions);
	d->on_progress = fd_on_progress;
	d->progress_data = &fd_state.ctx;
	fd_load_kernel();
	fd_state.ready = 1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	fd_setup();
	return 0;
}

/* The client's end: replies are read, checked to be whole frames that
 * decode, and dropped (RUDA_FUZZ_LOG=1 prints them). */
static struct ruda_frame_reader fd_replies;

static void fd_drain_replies(int fd)
{
	for (;;) {
		size_t room = fd_replies.cap - ruda__frame_reader_pending(&fd_replies);
		FD_CHECK(room > 0);
		uint8_t buf[16384];
		union {
			struct cmsghdr align;
			char c[CMSG_SPACE(sizeof(int) * RUDA_FRAME_QUEUED_FDS)];
		} control;
		struct iovec iov = {.iov_base = buf, .iov_len = room < sizeof(buf) ? room : sizeof(buf)};
		struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.c,
				     .msg_controllen = sizeof(control.c)};
		ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n <= 0)
			return;
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
				continue;
			size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			int fds[RUDA_FRAME_QUEUED_FDS];
			memcpy(fds, CMSG_DATA(c), k * sizeof(int));
			for (size_t i = 0; i < k; i++) {
				close(fds[i]);
				/* counted for the frame that names it */
				FD_CHECK(fd_replies.nfds < RUDA_FRAME_QUEUED_FDS);
				fd_replies.fds[fd_replies.nfds++] = -1;
			}
		}
		FD_CHECK(ruda__frame_reader_feed(&fd_replies, buf, (size_t)n) == 0);
		struct ruda_frame f;
		int got;
		while ((got = ruda__frame_reader_next(&fd_replies, &f)) != 0) {
			FD_CHECK(got > 0);
			Ruda__Reply *reply = ruda__reply__unpack(NULL, f.length, f.payload);
			FD_CHECK(reply != NULL);
			if (getenv("RUDA_FUZZ_LOG"))
				fprintf(stderr, "reply %llu: status %d%s%s\n",
					(unsigned long long)reply->id, (int)reply->status,
					reply->message && *reply->message ? ": " : "",
					reply->message ? reply->message : "");
			ruda__reply__free_unpacked(reply, NULL);
		}
	}
}

/* Destroy what fd_setup made, in the order of rudad's shutdown, so that a
 * leak check at exit sees only what was lost: the corpus replay calls it
 * (libFuzzer never returns to). Without it, LeakSanitizer reports memory
 * lavapipe holds for the live pipelines as leaked, since what refers to
 * it lives where LSan does not look (docs/reliability.md, finding 2). */
__attribute__((unused)) static void fd_teardown(void)
{
	if (!fd_state.ready)
		return;
	ruda__connection_tick(&fd_state.ctx);
	/* the pool may be making or importing an arena in the thread pool */
	for (int i = 0; i < 200000 && (ruda__arena_pool_busy(&fd_state.pool) ||
				       fd_state.registry.compiling); i++) {
		fd_sleep_us(100);
		uv_run(&fd_state.loop, UV_RUN_NOWAIT);
	}
	ruda__handle_table_finish(&fd_state.ctx.sessions);
	ruda__connection_context_finish(&fd_state.ctx);
	ruda__arena_pool_finish(&fd_state.pool);
	ruda__pipeline_registry_finish(&fd_state.registry);
	fd_state.devices[0]->on_progress = NULL;
	ruda__device_destroy(fd_state.devices[0]);
	uv_run(&fd_state.loop, UV_RUN_DEFAULT);
	FD_CHECK(uv_loop_close(&fd_state.loop) == 0);
	ruda__vulkan_finish(&fd_state.vk);
	free(fd_state.spirv);
	memset(&fd_state, 0, sizeof(fd_state));
}

/* One turn of the server: the end-of-iteration tick, then whatever the
 * loop has ready (completions, compilations, writable sockets). */
static void fd_turn(int client)
{
	ruda__connection_tick(&fd_state.ctx);
	uv_run(&fd_state.loop, UV_RUN_NOWAIT);
	fd_drain_replies(client);
}

static int fd_busy(void)
{
	struct ruda_device *d = fd_state.devices[0];
	return d->inflight_count || fd_state.registry.compiling || fd_state.ctx.dead;
}

/* Requests lavapipe would take minutes over: see the top of the file. */
static int fd_skip(const struct ruda_frame *frame)
{
	Ruda__Request *req = ruda__request__unpack(NULL, frame->length, frame->payload);
	if (!req)
		return 0;
	int skip = 0;
	const struct ruda_device *d = fd_state.devices[0];
	if (req->body_case == RUDA__REQUEST__BODY_LAUNCH) {
		const Ruda__Launch *l = req->launch;
		const uint32_t *max = d->props.limits.maxComputeWorkGroupCount;
		int refused = l->count_x > max[0] || l->count_y > max[1] || l->count_z > max[2];
		uint64_t groups = (uint64_t)l->count_x * l->count_y * l->count_z;
		uint32_t count = 0;
		if (l->push_constants.len >= 8)
			memcpy(&count, l->push_constants.data + 4, 4);
		skip = !refused && (groups > FD_MAX_GROUPS || count > FD_MAX_COUNT_WORD);
	} else if (req->body_case == RUDA__REQUEST__BODY_EMPTY) {
		skip = req->empty->size > (256u << 20) && req->empty->size <= d->max_allocation_size;
	}
	ruda__request__free_unpacked(req, NULL);
	return skip;
}

/* The session still exists (a turn may have destroyed and freed it) and
 * takes requests. */
static int fd_alive(uint64_t id, struct ruda_session *s)
{
	return ruda__handle_table_get(&fd_state.ctx.sessions, id) == s &&
	       s->state == RUDA_SESSION_READY;
}

static void fd_hello(struct ruda_session *s)
{
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "fuzz";
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	uint8_t buf[256];
	size_t n = ruda__request__get_packed_size(&req);
	FD_CHECK(n <= sizeof(buf));
	ruda__request__pack(&req, buf);
	struct ruda_frame frame = {.payload = buf, .length = (uint32_t)n};
	ruda__dispatch_frame(s, &frame);
	FD_CHECK(s->state == RUDA_SESSION_READY);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fd_setup();
	int sv[2];
	FD_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
	FD_CHECK(ruda__frame_reader_init(&fd_replies) == 0);
	struct ruda_session *s;
	uint64_t id = ++fd_state.next_id;
	FD_CHECK(ruda__connection_create(&fd_state.ctx, sv[0], id, &s) == 0);
	fd_hello(s);
	if (fd_as_admin)
		s->uid = 0;
	s->quota = FD_QUOTA;
	if (fd_state.spirv_size)
		memcpy(s->arena->map + RUDA_ARENA_DATA_OFFSET, fd_state.spirv, fd_state.spirv_size);
	fd_turn(sv[1]);

	struct ruda_frame_reader r;
	FD_CHECK(ruda__frame_reader_init(&r) == 0);
	size_t pos = 0;
	/* as connection.c: frames while the session lives and is not closing */
	while (pos < size && fd_alive(id, s)) {
		size_t piece = size - pos;
		size_t room = r.cap - ruda__frame_reader_pending(&r);
		if (piece > room)
			piece = room;
		FD_CHECK(piece > 0 && ruda__frame_reader_feed(&r, data + pos, piece) == 0);
		pos += piece;
		struct ruda_frame frame;
		int n = 0;
		while (fd_alive(id, s) && (n = ruda__frame_reader_next(&r, &frame)) != 0) {
			if (n < 0) {
				ruda__session_violation(s, "malformed frame header");
				break;
			}
			if (fd_skip(&frame))
				continue;
			ruda__dispatch_frame(s, &frame);
			/* as connection.c: a transfer that waits for the arena's
			 * import runs again once it is done */
			while (fd_alive(id, s) && s->parked) {
				s->parked = 0;
				for (int i = 0; ruda__arena_attaching(s->arena); i++) {
					FD_CHECK(i < 200000);
					fd_sleep_us(100);
					fd_turn(sv[1]);
				}
				ruda__dispatch_frame(s, &frame);
			}
			fd_turn(sv[1]);
			/* backpressure: connection.c stops reading until the GPU
			 * catches up; so does this loop */
			for (int i = 0; fd_alive(id, s) && ruda__stream_saturated(&s->stream); i++) {
				FD_CHECK(i < 200000); /* 20 s: the device never finished */
				fd_sleep_us(100);
				fd_turn(sv[1]);
			}
		}
		if (n == 0 && ruda__frame_reader_pending(&r) == r.cap)
			break; /* cannot happen: a full reader holds a frame */
	}
	ruda__frame_reader_finish(&r);

	/* the client goes away: let its replies out, then end it */
	for (int i = 0; i < 50 && fd_alive(id, s) && fd_busy(); i++) {
		fd_sleep_us(100);
		fd_turn(sv[1]);
	}
	if (ruda__handle_table_get(&fd_state.ctx.sessions, id) == s)
		ruda__session_kill(s);
	fd_turn(sv[1]);
	for (int i = 0; fd_busy(); i++) {
		if (i == 200000) /* 20 s */
			fprintf(stderr, "fuzz_dispatch: still busy: %zu submissions in flight "
				"(completed %llu of %llu), %zu compiling, dead sessions %d\n",
				fd_state.devices[0]->inflight_count,
				(unsigned long long)atomic_load(&fd_state.devices[0]->completed),
				(unsigned long long)fd_state.devices[0]->submitted,
				fd_state.registry.compiling, fd_state.ctx.dead != NULL);
		FD_CHECK(i < 200000);
		fd_sleep_us(100);
		fd_turn(sv[1]);
	}
	close(sv[1]);
	ruda__frame_reader_finish(&fd_replies);
	/* keep the compiled pipelines bounded across inputs */
	ruda__pipeline_registry_trim(&fd_state.registry, 8);
	uv_run(&fd_state.loop, UV_RUN_NOWAIT);
	return 0;
}
