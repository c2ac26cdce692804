/*
 * What a client asks of its share of the device: Stats, MemoryUsage,
 * MemoryCleanup, MemoryCompact, and exclusive leases (ExclusiveBegin,
 * ExclusiveEnd).
 */
#include <errno.h>
#include <stdint.h>

#include <ruda/status.h>

#include "common/log.h"
#include "device/device.h"
#include "exec/pipeline.h"
#include "exec/stream.h"
#include "requests/handlers.h"
#include "requests/reply.h"
#include "requests/session.h"
#include "ruda.pb-c.h"

void ruda__handle_memory_usage(struct ruda_session *s, const Ruda__Request *req)
{
	Ruda__MemoryUsageReply mu = RUDA__MEMORY_USAGE_REPLY__INIT;
	mu.allocations = s->buffers.count;
	mu.bytes_in_use = s->requested;
	mu.bytes_padding = s->bytes - s->requested;
	/* the seed's MemoryUsage is this client's memory: its buffers' share
	 * of the allocator, not the pages every client's buffers share */
	mu.bytes_reserved = s->bytes;
	mu.quota = s->quota;
	mu.uid_bytes = ruda__session_uid_bytes(s->ctx, s->uid);
	mu.pages = s->own_pages;
	mu.device_bytes_reserved = s->device->allocator.stats.reserved;
	mu.device_pages = s->device->allocator.stats.pages;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_MEMORY_USAGE;
	reply.memory_usage = &mu;
	ruda__reply_send(s->conn, &reply);
}

void ruda__handle_memory_cleanup(struct ruda_session *s, const Ruda__Request *req)
{
	(void)req;
	uint64_t freed = ruda__memory_cleanup(&s->device->allocator);
	if (freed)
		log_info("session %llu: memory cleanup gave back %llu bytes",
			 (unsigned long long)s->id, (unsigned long long)freed);
}

void ruda__handle_memory_compact(struct ruda_session *s, const Ruda__Request *req)
{
	/* free ranges coalesce as buffers go; nothing needs moving */
	ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

void ruda__handle_exclusive_begin(struct ruda_session *s, const Ruda__Request *req)
{
	if (!s->exclusive_allowed) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_PERMISSION,
				   "rudad's policy does not let uid %u hold the device alone "
				   "(exclusive_users, exclusive_groups)", s->uid);
		return;
	}
	/* work queued before the lease goes first */
	ruda__session_submit_all(s);
	ruda__session_exclusive_begin(s, req->id, req->exclusive_begin->timeout_ms);
}

void ruda__handle_exclusive_end(struct ruda_session *s, const Ruda__Request *req)
{
	ruda__session_submit_all(s);
	int rc = ruda__session_exclusive_end(s);
	if (rc == -ETIMEDOUT) {
		uint32_t limit = ruda__session_exclusive_limit_ms(s->ctx);
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_LEASE_EXPIRED,
				   "the exclusive lease expired after %u ms (%s %u ms); "
				   "work queued since then ran beside other clients",
				   s->lease_expired_ms,
				   s->lease_expired_ms < limit ? "the timeout asked; "
									 "max_exclusive_ms"
								       : "max_exclusive_ms",
				   limit);
		s->lease_expired_ms = 0;
	} else if (rc < 0) {
		ruda__reply_status(s->conn, req->id, RUDA_ERROR_INVALID_ARGUMENT,
				   "this session holds no exclusive lease");
	} else
		ruda__reply_status(s->conn, req->id, RUDA_OK, NULL);
}

void ruda__handle_stats(struct ruda_session *s, const Ruda__Request *req)
{
	struct ruda_session_context *ctx = s->ctx;
	Ruda__StatsReply sr = RUDA__STATS_REPLY__INIT;
	sr.sessions = (uint32_t)ctx->sessions.count;
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		struct ruda_device *d = ctx->devices[i];
		sr.device_bytes += d->stats.bytes;
		sr.device_buffers += d->stats.buffers;
		sr.submissions_in_flight += d->inflight_count;
		sr.kernels_compiled += d->stats.kernels_compiled;
		sr.pipelines += d->stats.pipelines;
	}
	for (uint32_t i = 0; i < ctx->ndevices; i++) {
		const struct ruda_pipeline_registry *reg = ctx->pipelines[i];
		sr.kernel_hits += reg->hits;
		sr.compile_time_us += reg->compile_ns / 1000;
		sr.modules += ruda__pipeline_registry_modules(reg);
		sr.cache_file_bytes += ctx->devices[i]->stats.cache_file_bytes;
	}
	sr.session_bytes = s->bytes;
	sr.session_gpu_time_ns = s->usage.gpu_time_ns;
	sr.session_launches = s->usage.launches;
	sr.session_buffers = s->buffers.count;
	Ruda__Reply reply = RUDA__REPLY__INIT;
	reply.id = req->id;
	reply.body_case = RUDA__REPLY__BODY_STATS;
	reply.stats = &sr;
	ruda__reply_send(s->conn, &reply);
}
