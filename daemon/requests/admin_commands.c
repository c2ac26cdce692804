/*
 * The admin commands, which change the daemon (administrators only; the
 * rights are checked by admin.c's table): kill, cleanup, drain, shutdown,
 * inject_device_loss.
 */
#include "requests/admin.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "../../proto/frame.h"
#include "memory/arena.h"
#include "common/config.h"
#include "device/device.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "exec/pipeline_cache.h"
#include "common/policy.h"
#include "requests/reply.h"
#include "requests/session.h"

void ruda__admin_kill(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	uint64_t id = a->kill->client;
	struct ruda_session *t = ruda__handle_table_get(&s->ctx->sessions, id);
	if (!t || t->state == RUDA_SESSION_DEAD) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_INVALID_ARGUMENT,
				   "no client %llu is connected", (unsigned long long)id);
		return;
	}
	if (t == s) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_INVALID_ARGUMENT,
				   "client %llu is the connection asking",
				   (unsigned long long)id);
		return;
	}
	log_notice("session %llu (uid %u, pid %d, \"%s\"): killed by session %llu (uid %u, "
		   "pid %d); %llu buffers, %llu bytes to release",
		   (unsigned long long)t->id, t->uid, t->pid, t->name, (unsigned long long)s->id,
		   s->uid, s->pid, (unsigned long long)t->buffers.count,
		   (unsigned long long)t->bytes);
	Ruda__AdminKillReply kr = RUDA__ADMIN_KILL_REPLY__INIT;
	kr.client = t->id;
	kr.name = t->name;
	kr.pid = (int32_t)t->pid;
	kr.uid = t->uid;
	kr.buffers = t->buffers.count;
	kr.bytes = t->bytes;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_KILL;
	body.kill = &kr;
	ruda__admin_reply(s, request, &body);
	/* destroyed at the end of this loop iteration; its memory goes once
	 * its submitted work completes */
	ruda__session_kill(t);
}

void ruda__admin_cleanup(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	(void)a;
	Ruda__AdminCleanupReply cr = RUDA__ADMIN_CLEANUP_REPLY__INIT;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		size_t dropped = ruda__pipeline_registry_trim(ctx->pipelines[i], 0);
		/* without this, 15 000 dropped pipelines kept 1.2 GB (issue 26) */
		if (dropped)
			ruda__pipeline_registry_release_memory(ctx->pipelines[i]);
		cr.pipelines_dropped += dropped;
		cr.bytes_freed += ruda__memory_cleanup(&ctx->devices[i]->allocator);
	}
	log_notice("session %llu (uid %u, pid %d): cleanup: %llu unused pipelines dropped, "
		   "%llu bytes of empty memory pages freed",
		   (unsigned long long)s->id, s->uid, s->pid,
		   (unsigned long long)cr.pipelines_dropped, (unsigned long long)cr.bytes_freed);
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_CLEANUP;
	body.cleanup = &cr;
	ruda__admin_reply(s, request, &body);
}

void ruda__admin_drain(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	(void)a;
	if (!ctx->drain) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_UNSUPPORTED,
				   "this rudad cannot drain (no drain hook)");
		return;
	}
	if (!ctx->draining)
		log_notice("session %llu (uid %u, pid %d): drain: no new clients; %u connected",
			   (unsigned long long)s->id, s->uid, s->pid,
			   (unsigned)ctx->sessions.count);
	Ruda__AdminDrainReply dr = RUDA__ADMIN_DRAIN_REPLY__INIT;
	dr.sessions = (uint32_t)ctx->sessions.count;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_DRAIN;
	body.drain = &dr;
	/* stop listening first: once the asker reads the reply, the socket
	 * path is gone and another rudad may start there */
	if (!ctx->draining) {
		ctx->draining = 1;
		ctx->drain(ctx->hook_data);
	}
	ruda__admin_reply(s, request, &body);
}

void ruda__admin_shutdown(struct ruda_session *s, uint64_t request, const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	(void)a;
	if (!ctx->shutdown) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_UNSUPPORTED,
				   "this rudad cannot be shut down this way (no shutdown "
				   "hook); send it SIGTERM");
		return;
	}
	log_notice("session %llu (uid %u, pid %d): shutdown requested",
		   (unsigned long long)s->id, s->uid, s->pid);
	Ruda__AdminShutdownReply sr = RUDA__ADMIN_SHUTDOWN_REPLY__INIT;
	sr.sessions = (uint32_t)ctx->sessions.count;
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_SHUTDOWN;
	body.shutdown = &sr;
	ruda__admin_reply(s, request, &body);
	/* may close every session, this one included: `s` is not used after */
	ctx->shutdown(ctx->hook_data);
}

/* Test-only (RUDA_TEST_FAULTS=1 at start): fail a device as the driver
 * would; recovery runs at the end of this loop iteration. */
void ruda__admin_inject_device_loss(struct ruda_session *s, uint64_t request,
				    const Ruda__Admin *a)
{
	struct ruda_session_context *ctx = s->ctx;
	uint32_t index = a->inject_device_loss->device;
	if (!ctx->test_faults) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_UNSUPPORTED,
				   "fault injection is for tests: rudad was not started "
				   "with RUDA_TEST_FAULTS=1");
		return;
	}
	if (index >= ctx->ndevices) {
		ruda__reply_status(s->conn, request, RUDA_ERROR_INVALID_ARGUMENT, "no device %u",
				   index);
		return;
	}
	log_notice("session %llu (uid %u, pid %d): injecting a loss of device %u",
		   (unsigned long long)s->id, s->uid, s->pid, index);
	Ruda__AdminInjectDeviceLossReply lr = RUDA__ADMIN_INJECT_DEVICE_LOSS_REPLY__INIT;
	lr.device = index;
	size_t n;
	struct ruda_session **list = ruda__admin_list_sessions(ctx, &n, 0);
	for (size_t i = 0; list && i < n; i++)
		lr.sessions += list[i]->device == ctx->devices[index];
	free(list);
	Ruda__AdminReply body = RUDA__ADMIN_REPLY__INIT;
	body.body_case = RUDA__ADMIN_REPLY__BODY_INJECT_DEVICE_LOSS;
	body.inject_device_loss = &lr;
	ruda__admin_reply(s, request, &body);
	ruda__device_inject_loss(ctx->devices[index]);
}
