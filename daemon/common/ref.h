/* Reference counts for objects that in-flight GPU work may outlive their
 * owner's interest in (buffers, pipelines, arenas). Loop thread only. */
#ifndef RUDA_REF_H
#define RUDA_REF_H

#include <assert.h>

struct ruda_ref {
	unsigned count;
	void (*destroy)(struct ruda_ref *ref);
};

static inline void ruda_ref_init(struct ruda_ref *ref, void (*destroy)(struct ruda_ref *))
{
	ref->count = 1;
	ref->destroy = destroy;
}

static inline struct ruda_ref *ruda_ref_get(struct ruda_ref *ref)
{
	ref->count++;
	return ref;
}

static inline void ruda_ref_put(struct ruda_ref *ref)
{
	assert(ref->count > 0);
	if (--ref->count == 0)
		ref->destroy(ref);
}

#endif
