/*
 * libruda: ruda_future, a read that runs while the caller goes on.
 *
 * The read is ordered at the call, as ErasedClient::read_async is: each
 * buffer (or tensor, packed) is copied on the device into a new buffer of
 * this session by a ToClient request sent before the call returns, so
 * writes, launches and releases made after it cannot change what it reads.
 * A thread of the future's own then waits for the copies, reads them into
 * the caller's memory (a blocking read on the thread-safe client) and
 * releases them.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/ruda.h>

#include "client_private.h"
#include "last_error.h"
#include "struct_size.h"

/* One buffer or tensor of the read: its device copy and where it goes. */
struct snapshot {
	struct ruda_pending *copied; /* the ToClient in flight, or NULL */
	ruda_status status;          /* of sending it */
	ruda_handle copy;            /* the new buffer, packed */
	void *dst;
};

struct ruda_future {
	pthread_t thread;
	ruda_client *client;
	size_t count;
	struct snapshot *parts;
	ruda_status status;
	char message[RUDA__LAST_ERROR_LEN]; /* the failure's, from the future's thread */
	atomic_int done;
};

static void *run(void *arg)
{
	struct ruda_future *f = arg;
	ruda_status first = RUDA_OK;
	for (size_t i = 0; i < f->count; i++) {
		struct snapshot *p = &f->parts[i];
		ruda_status st = p->status;
		if (p->copied) {
			st = ruda__client_call_finish(f->client, p->copied);
			if (st == RUDA_OK) {
				st = ruda_client_read_one(f->client, p->copy, p->dst);
				ruda_client_release(f->client, p->copy);
			}
		}
		if (first == RUDA_OK && st != RUDA_OK) {
			first = st;
			ruda_client_last_error(f->client, f->message, sizeof(f->message));
		}
	}
	f->status = first;
	atomic_store_explicit(&f->done, 1, memory_order_release);
	return NULL;
}

/* Send the device copy of one buffer (rank 0) or tensor into a new buffer
 * of this session; what the copy will hold is what the caller gets. */
static void snapshot_begin(ruda_client *c, ruda_handle src, const ruda_copy_desc *tensor,
			   struct snapshot *p)
{
	Ruda__ToClient t = RUDA__TO_CLIENT__INIT;
	t.handle = src.id;
	t.offset = src.offset;
	t.size = src.size;
	t.target_session = ruda_client_session_id(c);
	t.target_handle = ruda__client_next_id(c);
	uint64_t packed = src.size;
	if (tensor && tensor->rank) {
		t.n_shape = t.n_strides = tensor->rank;
		t.shape = (uint64_t *)tensor->shape;
		t.strides = (uint64_t *)tensor->strides;
		t.elem_size = (uint32_t)tensor->elem_size;
		packed = tensor->elem_size;
		for (uint32_t k = 0; k < tensor->rank; k++)
			packed *= tensor->shape[k];
	}
	if (!packed)
		return; /* nothing to read: RUDA_OK, dst untouched */
	if (tensor && (tensor->rank > RUDA_MAX_RANK || tensor->elem_size > UINT32_MAX)) {
		p->status = RUDA_ERROR_INVALID_ARGUMENT;
		return;
	}
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_TO_CLIENT;
	req.to_client = &t;
	p->copy = (ruda_handle){.id = t.target_handle, .offset = 0, .size = packed};
	p->status = ruda__client_call_begin(c, &req, &p->copied);
}

static void future_free(struct ruda_future *f)
{
	free(f->parts);
	free(f);
}

static ruda_status start(ruda_client *c, const ruda_handle *handles, const ruda_copy_desc *descs,
			 size_t count, void *const *dst, ruda_future **out)
{
	if (!c || !out || (count && !dst))
		return RUDA_ERROR_INVALID_ARGUMENT;
	struct ruda_future *f = calloc(1, sizeof(*f));
	if (!f || !(f->parts = calloc(count ? count : 1, sizeof(*f->parts)))) {
		free(f);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	f->client = c;
	f->count = count;
	for (size_t i = 0; i < count; i++) {
		f->parts[i].dst = dst[i];
		snapshot_begin(c, handles ? handles[i] : descs[i].handle, handles ? NULL : &descs[i],
			       &f->parts[i]);
	}
	if (pthread_create(&f->thread, NULL, run, f) != 0) {
		/* nothing may stay waiting for replies: finish here, then fail */
		run(f);
		future_free(f);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	*out = f;
	return RUDA_OK;
}

ruda_status ruda_client_read_async(ruda_client *c, const ruda_handle *handles, size_t count,
				   void *const *dst, ruda_future **out)
{
	if (count && !handles)
		return RUDA_ERROR_INVALID_ARGUMENT;
	return start(c, handles, NULL, count, dst, out);
}

ruda_status ruda_client_read_tensor_async(ruda_client *c, const ruda_copy_desc *descs,
					  size_t count, void *const *dst, ruda_future **out)
{
	if (count && !descs)
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_copy_desc *in; /* the caller's elements may be of another size */
	ruda_status st = ruda__array_in((void **)&in, sizeof(*in), RUDA__MIN_COPY_DESC, descs,
					count);
	if (st == RUDA_OK)
		st = start(c, NULL, in, count, dst, out);
	free(in);
	return st;
}

int ruda_future_poll(const ruda_future *f)
{
	return f ? atomic_load_explicit(&((ruda_future *)f)->done, memory_order_acquire) : 1;
}

ruda_status ruda_future_wait(ruda_future *f)
{
	if (!f)
		return RUDA_ERROR_INVALID_ARGUMENT;
	pthread_join(f->thread, NULL);
	ruda_status st = f->status;
	if (st != RUDA_OK && f->message[0]) /* the waiting thread's last error now */
		ruda__client_set_error(f->client, "%s", f->message);
	future_free(f);
	return st;
}
