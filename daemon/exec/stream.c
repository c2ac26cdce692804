#include "exec/stream.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "memory/arena.h"
#include "memory/buffer.h"
#include "device/device.h"
#include "exec/copy_kernel.h"
#include "exec/indirect.h"
#include "common/log.h"
#include "exec/pipeline.h"

void ruda__stream_init(struct ruda_stream *s, struct ruda_device *device,
		       struct ruda_arena *arena, struct ruda_stream **dirty_list)
{
	*s = (struct ruda_stream){
		.device = device,
		.queue = ruda__device_next_queue(device),
		.arena = arena,
		.dirty_list = dirty_list,
	};
	s->caught_up_tail = &s->caught_up_waiters;
	s->lane = ruda__lane_of(device, s->queue);
}

static void undirty(struct ruda_stream *s)
{
	if (!s->dirty)
		return;
	struct ruda_stream **link = s->dirty_list;
	while (*link != s)
		link = &(*link)->dirty_next;
	*link = s->dirty_next;
	s->dirty = 0;
}

static void mark_dirty(struct ruda_stream *s)
{
	if (s->dirty)
		return;
	s->dirty_next = *s->dirty_list;
	*s->dirty_list = s;
	s->dirty = 1;
}

static struct ruda_buffer *take_pending(struct ruda_stream *s)
{
	struct ruda_buffer *list = s->zero_pending;
	s->zero_pending = NULL;
	for (struct ruda_buffer *b = list; b; b = b->zero_next)
		b->zero_stream = NULL;
	return list;
}

void ruda__stream_finish(struct ruda_stream *s)
{
	struct ruda_buffer *b = take_pending(s);
	while (b) {
		struct ruda_buffer *next = b->zero_next;
		b->zero_next = NULL;
		ruda__buffer_put(b);
		b = next;
	}
	undirty(s);
	if (s->lane)
		ruda__lane_leave(s); /* the recording is shared */
	else if (s->recording)
		ruda__submission_discard(s->recording, RUDA_ERROR_DISCONNECTED);
	s->recording = NULL;
	s->records_fills = 0;
	ruda__device_put_queue(s->device, s->queue);
}

void ruda__stream_fail(struct ruda_stream *s, ruda_status status, const char *fmt, ...)
{
	if (s->error != RUDA_OK)
		return;
	s->error = status;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(s->error_message, sizeof(s->error_message), fmt, ap);
	va_end(ap);
}

void ruda__stream_note_write(struct ruda_stream *s, uint64_t id)
{
	if (!s->rec_first_write)
		s->rec_first_write = id;
}

/* The timeline value ending submission number `seq` of `s`, or of a later
 * one of it when `seq` has left the ring of recent values (waiting for a
 * later one of the same stream only waits longer); 0 while `seq` is being
 * recorded, or was never submitted. */
static uint64_t submission_value(const struct ruda_stream *s, uint64_t seq)
{
	if (seq >= s->recent_next)
		return 0;
	if (s->recent_next - seq > RUDA_STREAM_MAX_INFLIGHT)
		seq = s->recent_next - RUDA_STREAM_MAX_INFLIGHT;
	return s->recent[seq % RUDA_STREAM_MAX_INFLIGHT];
}

void ruda__stream_note_use(struct ruda_stream *s, struct ruda_buffer *b)
{
	if (b->use_stream && b->use_stream != s) {
		/* the use it leaves behind on the other stream */
		uint64_t v = submission_value(b->use_stream, b->use_seq);
		uint32_t q = b->use_stream->queue;
		if (q < RUDA_MAX_QUEUES && v > b->use_value[q])
			b->use_value[q] = v;
		if (!v && ruda__stream_unsubmitted(b->use_stream) &&
		    b->use_seq == b->use_stream->recent_next)
			b->use_elsewhere = 1;
	}
	b->use_stream = s;
	b->use_seq = s->recent_next; /* the number the recording will have */
}

int ruda__stream_buffer_done_values(struct ruda_buffer *b, uint64_t *values)
{
	if (b->use_elsewhere)
		return -1;
	int n = 0;
	struct ruda_stream *s = b->use_stream;
	if (s) {
		if (b->use_seq == s->recent_next && ruda__stream_unsubmitted(s))
			ruda__stream_submit(s); /* the use is still being recorded */
		uint64_t v = submission_value(s, b->use_seq);
		if (v)
			values[n++] = v;
	}
	for (uint32_t q = 0; q < RUDA_MAX_QUEUES; q++)
		if (b->use_value[q])
			values[n++] = b->use_value[q];
	return n;
}

void ruda__record_barrier(VkCommandBuffer cmd)
{
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT |
				 VK_ACCESS_HOST_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
				 VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
	};
	vkCmdPipelineBarrier(cmd,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT |
				     VK_PIPELINE_STAGE_HOST_BIT,
			     VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0,
			     1, &barrier, 0, NULL, 0, NULL);
}

void ruda__record_copy_barrier(VkCommandBuffer cmd)
{
	VkPipelineStageFlags copies =
		VK_PIPELINE_STAGE_TRANSFER_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
	VkMemoryBarrier barrier = {
		.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
		.srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_SHADER_WRITE_BIT,
		.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_SHADER_READ_BIT,
	};
	vkCmdPipelineBarrier(cmd, copies, copies, 0, 1, &barrier, 0, NULL, 0, NULL);
}

/* The command buffer being recorded, begun if there is none. */
static VkCommandBuffer recording(struct ruda_stream *s)
{
	if (s->lane)
		return ruda__lane_join(s->lane, s);
	if (!s->recording) {
		s->recording = ruda__submission_begin_on(s->device, s->queue);
		if (!s->recording)
			return VK_NULL_HANDLE;
		s->recording->wait_queue = s->wait_queue;
		s->recording->wait_value = s->wait_value;
		s->wait_value = 0;
		if (ruda__submission_hold(s->recording, &s->arena->ref) < 0) {
			ruda__submission_discard(s->recording, RUDA_ERROR_OUT_OF_MEMORY);
			s->recording = NULL;
			return VK_NULL_HANDLE;
		}
		mark_dirty(s);
		s->bound.pipeline = NULL; /* a new command buffer has nothing bound */
	}
	return s->recording->cmd;
}

/* Record the zero fills waiting, but `skip`'s (about to be written).
 * 0, or -1 with the fills not recorded still waiting. */
static int record_fills(struct ruda_stream *s, struct ruda_buffer *skip)
{
	if (!s->zero_pending || (s->zero_pending == skip && !skip->zero_next))
		return 0;
	VkCommandBuffer cmd = recording(s);
	if (!cmd)
		return -1;
	/* the fills after whatever used the memory before; between them
	 * none is needed (different buffers) */
	ruda__record_barrier(cmd);
	struct ruda_buffer **link = &s->zero_pending;
	while (*link) {
		struct ruda_buffer *b = *link;
		if (b == skip) {
			link = &b->zero_next;
			continue;
		}
		if (ruda__submission_hold(s->recording, &b->ref) < 0)
			return -1;
		/* what the writes since it was made have not covered */
		vkCmdFillBuffer(cmd, b->vk, b->zero_from, VK_WHOLE_SIZE, 0);
		ruda__stream_note_use(s, b);
		s->device->stats.zero_filled_bytes += b->vk_size - b->zero_from;
		s->recording->commands++;
		s->lane_commands++;
		s->records_fills = 1;
		*link = b->zero_next;
		b->zero_next = NULL;
		b->zero_stream = NULL;
		ruda__buffer_put(b); /* the recording holds it */
	}
	return 0;
}

/* The command buffer to record into, after the zero fills waiting (but
 * `skip`'s), the stream's launches waiting in its lane, and a barrier that
 * orders the new command after everything before it on the queue. */
static VkCommandBuffer record_after_fills(struct ruda_stream *s, struct ruda_buffer *skip)
{
	if (record_fills(s, skip) < 0)
		return VK_NULL_HANDLE;
	if (s->lane && ruda__lane_catch_up(s->lane, s) != RUDA_OK)
		return VK_NULL_HANDLE;
	VkCommandBuffer cmd = recording(s);
	if (!cmd)
		return VK_NULL_HANDLE;
	ruda__record_barrier(cmd);
	s->recording->commands++;
	s->lane_commands++;
	return cmd;
}

/* What `s`'s recording has bound: the lane's, where streams share it. */
static struct ruda_bind_cache *bound(struct ruda_stream *s)
{
	return s->lane ? &s->lane->bound : &s->bound;
}

static VkCommandBuffer record(struct ruda_stream *s)
{
	return record_after_fills(s, NULL);
}

static ruda_status after_record(struct ruda_stream *s)
{
	if (s->recording->commands >= (s->batch ? s->batch : RUDA_STREAM_BATCH))
		return ruda__stream_submit(s);
	return RUDA_OK;
}

/* A copy between host memory (the arena or a staging region) and a buffer. */
static ruda_status copy(struct ruda_stream *s, VkBuffer src, uint64_t src_offset, VkBuffer dst,
			uint64_t dst_offset, uint64_t size, struct ruda_buffer *held,
			struct ruda_buffer *written_whole)
{
	VkCommandBuffer cmd = record_after_fills(s, written_whole);
	if (!cmd || ruda__submission_hold(s->recording, &held->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda__stream_note_use(s, held);
	if (size) {
		VkBufferCopy region = {.srcOffset = src_offset, .dstOffset = dst_offset, .size = size};
		vkCmdCopyBuffer(cmd, src, dst, 1, &region);
	}
	s->recording->host_bytes += size; /* every copy here has a host side */
	return after_record(s);
}

/* A copy from host memory into `dst`. A new buffer written in order from
 * its start (`create`, from the arena or a staging region, split or not)
 * needs zeros only after what was written, and none once it is written
 * whole; in words, as fills are (a buffer of an odd size is filled whole:
 * its VkBuffer is rounded up to a word). */
static ruda_status copy_in(struct ruda_stream *s, VkBuffer src, uint64_t src_offset,
			   struct ruda_buffer *dst, uint64_t offset, uint64_t size)
{
	int in_order = dst->zero_stream == s && dst->size % 4 == 0 && size % 4 == 0 &&
		       offset == dst->zero_from && size > 0;
	ruda_status st = copy(s, src, src_offset, dst->vk, offset, size, dst, in_order ? dst : NULL);
	if (st == RUDA_OK && in_order) {
		dst->zero_from += size;
		if (dst->zero_from == dst->size) {
			s->records_fills = 1; /* the writes stand for its fill */
			ruda__stream_forget_zero(dst);
		}
	}
	return st;
}

ruda_status ruda__stream_write(struct ruda_stream *s, struct ruda_buffer *dst, uint64_t offset,
			       uint64_t arena_offset, uint64_t size)
{
	ruda__arena_bounce_in(s->arena, arena_offset, size);
	return copy_in(s, s->arena->buffer, arena_offset, dst, offset, size);
}

void ruda__stream_zero(struct ruda_stream *s, struct ruda_buffer *buffer)
{
	buffer->zero_stream = s;
	buffer->zero_from = 0;
	buffer->zero_next = s->zero_pending;
	s->zero_pending = buffer;
	ruda_ref_get(&buffer->ref);
}

void ruda__stream_forget_zero(struct ruda_buffer *buffer)
{
	struct ruda_stream *s = buffer->zero_stream;
	if (!s)
		return;
	struct ruda_buffer **link = &s->zero_pending;
	while (*link != buffer)
		link = &(*link)->zero_next;
	*link = buffer->zero_next;
	buffer->zero_stream = NULL;
	buffer->zero_next = NULL;
	ruda__buffer_put(buffer);
}

ruda_status ruda__stream_read(struct ruda_stream *s, struct ruda_buffer *src, uint64_t offset,
			      uint64_t arena_offset, uint64_t size)
{
	return copy(s, src->vk, offset, s->arena->buffer, arena_offset, size, src, NULL);
}

ruda_status ruda__stream_copy_regions(struct ruda_stream *s, VkBuffer src, VkBuffer dst,
				      const VkBufferCopy *regions, uint32_t n,
				      bool device_local, struct ruda_ref *hold,
				      struct ruda_ref *hold2)
{
	/* record() orders it after the earlier commands by a barrier that
	 * covers a kernel copy as well, and the next command records one too */
	VkCommandBuffer cmd = record(s);
	if (!cmd || (hold && ruda__submission_hold(s->recording, hold) < 0) ||
	    (hold2 && ruda__submission_hold(s->recording, hold2) < 0))
		return RUDA_ERROR_OUT_OF_MEMORY;
	if (!device_local && n)
		vkCmdCopyBuffer(cmd, src, dst, n, regions);
	else if (ruda__device_copy_record(s->device, cmd, src, dst, regions, n))
		bound(s)->pipeline = NULL; /* the copy kernel is bound now */
	return after_record(s);
}

ruda_status ruda__stream_copy_region(struct ruda_stream *s, struct ruda_arena *region,
				     uint64_t region_offset, struct ruda_buffer *buffer,
				     uint64_t offset, uint64_t size, int to_buffer)
{
	/* held by the submission the copy goes into (copy() records into the
	 * open one, and may submit it only after recording); opened without
	 * recording the waiting fills, which copy_in may skip for `buffer` */
	if (!recording(s) || ruda__submission_hold(s->recording, &region->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	return to_buffer ? copy_in(s, region->buffer, region_offset, buffer, offset, size)
			 : copy(s, buffer->vk, offset, region->buffer, region_offset, size, buffer,
				NULL);
}

/* Whether `cache` shows `p` bound with these bindings; then it is kept,
 * else it is made to show them. */
static int bind_cached(struct ruda_bind_cache *cache, struct ruda_pipeline *p,
		       const struct ruda_binding *bindings, uint32_t nbindings)
{
	int same = cache->pipeline == p && cache->nbindings == nbindings;
	for (uint32_t i = 0; same && i < nbindings; i++)
		same = cache->bindings[i].buffer == bindings[i].buffer->vk &&
		       cache->bindings[i].offset == bindings[i].offset &&
		       cache->bindings[i].size == bindings[i].size;
	if (same)
		return 1;
	cache->pipeline = nbindings <= RUDA_BIND_CACHE_BINDINGS ? p : NULL;
	cache->nbindings = nbindings;
	for (uint32_t i = 0; cache->pipeline && i < nbindings; i++) {
		cache->bindings[i].buffer = bindings[i].buffer->vk;
		cache->bindings[i].offset = bindings[i].offset;
		cache->bindings[i].size = bindings[i].size;
	}
	return 0;
}

void ruda__record_dispatch(struct ruda_device *d, VkCommandBuffer cmd, uint32_t queue,
			   struct ruda_bind_cache *cache, struct ruda_pipeline *p,
			   const struct ruda_launch_count *count,
			   const struct ruda_binding *bindings, uint32_t nbindings,
			   const void *push, uint32_t push_size)
{
	if (count->buffer) { /* the caller has made d->indirect */
		ruda__indirect_record_clamp(d, d->indirect, cmd, count->buffer, count->offset,
					    queue);
		cache->pipeline = NULL; /* the clamp kernel is bound now */
	}
	if (!bind_cached(cache, p, bindings, nbindings)) {
		VkDescriptorBufferInfo infos[RUDA_PIPELINE_MAX_BINDINGS];
		for (uint32_t i = 0; i < nbindings; i++)
			infos[i] = (VkDescriptorBufferInfo){
				.buffer = bindings[i].buffer->vk,
				.offset = bindings[i].offset,
				.range = bindings[i].size,
			};
		vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p->vk);
		ruda__push_storage_buffers(d->cmd_push_descriptor_set, cmd, p->layout, infos,
					   nbindings);
	}
	if (push_size)
		vkCmdPushConstants(cmd, p->layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_size, push);
	if (count->buffer)
		vkCmdDispatchIndirect(cmd, d->indirect->counts->vk,
				      ruda__indirect_slot(d->indirect, queue));
	else if (count->count[0] && count->count[1] && count->count[2])
		vkCmdDispatch(cmd, count->count[0], count->count[1], count->count[2]);
}

/* Keep `ref` alive with the submission; launches in a row mostly use the
 * same kernel and buffers, which are then held once. */
static int hold_once(struct ruda_submission *sub, struct ruda_ref *ref)
{
	for (size_t i = sub->nrefs; i > 0 && i + 4 > sub->nrefs; i--)
		if (sub->refs[i - 1] == ref)
			return 0;
	return ruda__submission_hold(sub, ref);
}

ruda_status ruda__stream_launch(struct ruda_stream *s, struct ruda_pipeline *p,
				const struct ruda_launch_count *count,
				const struct ruda_binding *bindings,
				uint32_t nbindings, const void *push, uint32_t push_size)
{
	/* in a lane, a launch waits for a round (dynamic counts share the
	 * queue's indirect slot, so theirs are recorded at once) */
	if (s->lane && !count->buffer) {
		if (record_fills(s, NULL) < 0)
			return RUDA_ERROR_OUT_OF_MEMORY;
		return ruda__lane_defer(s, p, count, bindings, nbindings, push, push_size);
	}
	VkCommandBuffer cmd = record(s);
	if (!cmd || hold_once(s->recording, &p->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	for (uint32_t i = 0; i < nbindings; i++) {
		if (hold_once(s->recording, &bindings[i].buffer->ref) < 0)
			return RUDA_ERROR_OUT_OF_MEMORY;
		ruda__stream_note_use(s, bindings[i].buffer);
	}
	if (count->buffer && hold_once(s->recording, &count->buffer->ref) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	if (count->buffer)
		ruda__stream_note_use(s, count->buffer);
	ruda__record_dispatch(s->device, cmd, s->queue, bound(s), p, count, bindings, nbindings,
			      push, push_size);
	return after_record(s);
}

ruda_status ruda__stream_execute(struct ruda_stream *s, VkCommandBuffer secondary,
				 uint32_t commands, struct ruda_ref *hold)
{
	VkCommandBuffer cmd = record(s);
	if (!cmd || ruda__submission_hold(s->recording, hold) < 0)
		return RUDA_ERROR_OUT_OF_MEMORY;
	vkCmdExecuteCommands(cmd, 1, &secondary);
	bound(s)->pipeline = NULL; /* the primary's state is undefined after it */
	s->recording->commands += commands;
	return after_record(s);
}

ruda_status ruda__stream_submit_fills(struct ruda_stream *s)
{
	if (record_fills(s, NULL) < 0)
		ruda__stream_fail(s, RUDA_ERROR_OUT_OF_MEMORY, "out of memory for zero fills");
	return ruda__stream_submit(s);
}

void ruda__stream_after(struct ruda_stream *s, const struct ruda_stream *before)
{
	if (before->queue == s->queue || !before->last_value)
		return;
	if (s->recording) { /* not submitted yet: the whole batch waits */
		ruda__submission_wait_for(s->recording, before->queue, before->last_value);
	} else {
		s->wait_queue = before->queue;
		s->wait_value = before->last_value;
	}
}

void ruda__stream_fill_now(struct ruda_buffer *buffer)
{
	if (buffer->zero_stream)
		ruda__stream_submit_fills(buffer->zero_stream);
}

ruda_status ruda__stream_submit(struct ruda_stream *s)
{
	if (s->lane)
		return ruda__stream_unsubmitted(s) ? ruda__lane_submit(s->lane) : RUDA_OK;
	if (!s->recording)
		return RUDA_OK;
	struct ruda_submission *sub = s->recording;
	s->recording = NULL;
	undirty(s);
	uint64_t first_write = s->rec_first_write;
	s->rec_first_write = 0;
	s->records_fills = 0;
	if (ruda__submission_submit(sub) < 0) {
		ruda_status why = ruda__device_failure(s->device);
		if (why == RUDA_OK)
			why = RUDA_ERROR_DEVICE_LOST;
		ruda__stream_fail(s, why, "%s", why == RUDA_ERROR_TIMEOUT
						    ? "earlier work ran past the time limit"
						    : "the device refused a submission");
		return why;
	}
	s->last_value = sub->value;
	s->recent[s->recent_next++ % RUDA_STREAM_MAX_INFLIGHT] = sub->value;
	if (s->submitted)
		s->submitted(s->submitted_data, s, sub, first_write);
	s->lane_commands = 0;
	return RUDA_OK;
}

void ruda__stream_wait(struct ruda_stream *s, struct ruda_waiter *waiter)
{
	ruda__stream_submit(s);
	struct ruda_device *d = s->device;
	for (struct ruda_submission *sub = d->inflight; sub; sub = sub->next) {
		if (sub->value == s->last_value) {
			ruda__submission_add_waiter(sub, waiter);
			return;
		}
	}
	/* nothing of this stream in flight */
	waiter->done(waiter, ruda__device_failure(d));
}

void ruda__stream_wait_caught_up(struct ruda_stream *s, struct ruda_waiter *waiter)
{
	if (!s->lane || !ruda__stream_unsubmitted(s)) {
		ruda__stream_wait(s, waiter);
		return;
	}
	if (!s->ndeferred)
		s->lane->cut = true; /* its last launch is in the lane's recording */
	s->lane->awaited = true;
	waiter->next = NULL;
	*s->caught_up_tail = waiter;
	s->caught_up_tail = &waiter->next;
}

int ruda__stream_saturated(const struct ruda_stream *s)
{
	if (s->ndeferred >= RUDA_STREAM_BATCH)
		return 1; /* launches enough for a batch wait in its lane */
	/* the oldest of the last few submissions is still running (on its own
	 * queue: another queue's slower work does not hold this stream back) */
	uint64_t oldest = s->recent[s->recent_next % RUDA_STREAM_MAX_INFLIGHT];
	return !ruda__device_done(s->device, s->queue, oldest) && !atomic_load(&s->device->lost);
}

void ruda__stream_submit_dirty(struct ruda_stream **list)
{
	while (*list)
		ruda__stream_submit(*list); /* unlinks it */
}
