#include "device/deferred_free.h"
#include "common/pass_step.h"

#include <stdlib.h>

struct deferred {
	uv_work_t work;
	struct ruda_deferred_free *owner; /* borrowed: waits for us before it goes */
	void (*release)(void *arg);
	void (*then)(void *arg); /* on the loop, after release; or NULL */
	void *arg;
};

void ruda__deferred_free_init(struct ruda_deferred_free *f, uv_loop_t *loop)
{
	*f = (struct ruda_deferred_free){.loop = loop};
	pthread_mutex_init(&f->lock, NULL);
	pthread_cond_init(&f->idle, NULL);
}

void ruda__deferred_free_wait(struct ruda_deferred_free *f)
{
	pthread_mutex_lock(&f->lock);
	while (f->pending)
		pthread_cond_wait(&f->idle, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

void ruda__deferred_free_wait_zero(struct ruda_deferred_free *f, _Atomic uint64_t *count)
{
	pthread_mutex_lock(&f->lock);
	/* lowered before the job's broadcast, under this lock */
	while (atomic_load(count) && f->pending)
		pthread_cond_wait(&f->idle, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

void ruda__deferred_free_finish(struct ruda_deferred_free *f)
{
	ruda__deferred_free_wait(f);
	pthread_cond_destroy(&f->idle);
	pthread_mutex_destroy(&f->lock);
}

static void deferred_work(uv_work_t *work)
{
	struct deferred *d = work->data;
	d->release(d->arg);
	/* the last touch of the owner: it may go as soon as pending is 0 */
	struct ruda_deferred_free *f = d->owner;
	pthread_mutex_lock(&f->lock);
	f->pending--;
	pthread_cond_broadcast(&f->idle);
	pthread_mutex_unlock(&f->lock);
}

static void deferred_done(uv_work_t *work, int status)
{
	(void)status; /* never cancelled */
	struct deferred *d = work->data;
	if (d->then) {
		/* only allocations have a `then` (ruda__deferred_run) */
		struct ruda_step_mark step = ruda__pass_step_begin();
		d->then(d->arg);
		ruda__pass_step_end(step, "thread pool result", "device memory made");
	}
	free(d);
}

int ruda__deferred_run(struct ruda_deferred_free *f, void (*work)(void *arg),
		       void (*then)(void *arg), void *arg)
{
	struct deferred *d = f->loop ? malloc(sizeof(*d)) : NULL;
	if (!d)
		return -1;
	*d = (struct deferred){.owner = f, .release = work, .then = then, .arg = arg};
	d->work.data = d;
	pthread_mutex_lock(&f->lock);
	f->pending++;
	pthread_mutex_unlock(&f->lock);
	if (uv_queue_work(f->loop, &d->work, deferred_work, deferred_done) < 0) {
		pthread_mutex_lock(&f->lock);
		f->pending--;
		pthread_mutex_unlock(&f->lock);
		free(d);
		return -1;
	}
	return 0;
}

void ruda__deferred_free_run(struct ruda_deferred_free *f, void (*release)(void *arg),
			     void *arg)
{
	if (ruda__deferred_run(f, release, NULL, arg) < 0)
		release(arg);
}
