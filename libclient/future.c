/* libruda: ruda_future, a read that runs while the caller goes on. Each
 * future is a thread doing the blocking read on the (thread-safe) client. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <ruda/ruda.h>

struct ruda_future {
	pthread_t thread;
	ruda_client *client;
	size_t count;
	ruda_handle *handles;   /* a buffer read, or */
	ruda_copy_desc *descs;  /* a tensor read */
	void **dst;
	ruda_status status;
	atomic_int done;
};

static void *run(void *arg)
{
	struct ruda_future *f = arg;
	f->status = f->handles ? ruda_client_read(f->client, f->handles, f->count, f->dst)
			       : ruda_client_read_tensor(f->client, f->descs, f->count, f->dst);
	atomic_store_explicit(&f->done, 1, memory_order_release);
	return NULL;
}

static void future_free(struct ruda_future *f)
{
	free(f->handles);
	free(f->descs);
	free(f->dst);
	free(f);
}

/* Copy the caller's arrays (borrowed for the call only) and start. */
static ruda_status start(ruda_client *c, const ruda_handle *handles, const ruda_copy_desc *descs,
			 size_t count, void *const *dst, ruda_future **out)
{
	if (!c || !out || (count && !dst) || (count && !handles && !descs))
		return RUDA_ERROR_INVALID_ARGUMENT;
	struct ruda_future *f = calloc(1, sizeof(*f));
	if (!f)
		return RUDA_ERROR_OUT_OF_MEMORY;
	f->client = c;
	f->count = count;
	size_t n = count ? count : 1;
	f->dst = calloc(n, sizeof(*f->dst));
	if (handles)
		f->handles = calloc(n, sizeof(*f->handles));
	else
		f->descs = calloc(n, sizeof(*f->descs));
	if (!f->dst || (!f->handles && !f->descs)) {
		future_free(f);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	if (count) {
		memcpy(f->dst, dst, count * sizeof(*f->dst));
		if (handles)
			memcpy(f->handles, handles, count * sizeof(*handles));
		else
			memcpy(f->descs, descs, count * sizeof(*descs));
	}
	if (pthread_create(&f->thread, NULL, run, f) != 0) {
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
	static const ruda_handle none;
	return start(c, count ? handles : &none, NULL, count, dst, out);
}

ruda_status ruda_client_read_tensor_async(ruda_client *c, const ruda_copy_desc *descs,
					  size_t count, void *const *dst, ruda_future **out)
{
	if (count && !descs)
		return RUDA_ERROR_INVALID_ARGUMENT;
	static const ruda_copy_desc none;
	return start(c, NULL, count ? descs : &none, count, dst, out);
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
	future_free(f);
	return st;
}
