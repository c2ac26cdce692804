#include "common/handle_table.h"

#include <errno.h>
#include <stdlib.h>

static size_t slot_of(const struct ruda_handle_table *t, uint64_t key)
{
	/* Fibonacci hashing spreads the sequential ids clients choose */
	return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 17) & (t->cap - 1);
}

void ruda__handle_table_init(struct ruda_handle_table *t)
{
	t->slots = NULL;
	t->cap = t->count = t->low = 0;
}

void ruda__handle_table_finish(struct ruda_handle_table *t)
{
	free(t->slots);
	ruda__handle_table_init(t);
}

static struct ruda_handle_slot *find(const struct ruda_handle_table *t, uint64_t key)
{
	if (!t->cap)
		return NULL;
	for (size_t i = slot_of(t, key);; i = (i + 1) & (t->cap - 1)) {
		struct ruda_handle_slot *s = &t->slots[i];
		if (!s->value)
			return NULL;
		if (s->key == key)
			return s;
	}
}

void *ruda__handle_table_get(const struct ruda_handle_table *t, uint64_t key)
{
	struct ruda_handle_slot *s = find(t, key);
	return s ? s->value : NULL;
}

static void place(struct ruda_handle_table *t, uint64_t key, void *value)
{
	size_t i = slot_of(t, key);
	while (t->slots[i].value)
		i = (i + 1) & (t->cap - 1);
	t->slots[i].key = key;
	t->slots[i].value = value;
}

static int grow(struct ruda_handle_table *t)
{
	size_t old_cap = t->cap;
	struct ruda_handle_slot *old = t->slots;
	size_t cap = old_cap ? old_cap * 2 : 16;
	struct ruda_handle_slot *slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	t->cap = cap;
	t->low = 0;
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].value)
			place(t, old[i].key, old[i].value);
	free(old);
	return 0;
}

int ruda__handle_table_insert(struct ruda_handle_table *t, uint64_t key, void *value)
{
	if (find(t, key))
		return -EEXIST;
	/* keep the load under 3/4 so probes stay short */
	if ((t->count + 1) * 4 > t->cap * 3 && grow(t) < 0)
		return -ENOMEM;
	place(t, key, value);
	t->count++;
	t->low = 0;
	return 0;
}

/* Backward-shift deletion: no tombstones, lookups stay exact. */
static void *remove_slot(struct ruda_handle_table *t, struct ruda_handle_slot *s)
{
	void *value = s->value;
	size_t hole = (size_t)(s - t->slots);
	s->value = NULL;
	t->count--;
	for (size_t i = (hole + 1) & (t->cap - 1); t->slots[i].value; i = (i + 1) & (t->cap - 1)) {
		size_t home = slot_of(t, t->slots[i].key);
		/* move the entry into the hole unless its home lies in (hole, i] */
		int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
		if (!stays) {
			t->slots[hole] = t->slots[i];
			t->slots[i].value = NULL;
			hole = i;
		}
	}
	return value;
}

void *ruda__handle_table_remove(struct ruda_handle_table *t, uint64_t key)
{
	struct ruda_handle_slot *s = find(t, key);
	return s ? remove_slot(t, s) : NULL;
}

/* Popping everything costs O(cap), not O(cap) per entry: removals never
 * move an entry below the first occupied slot (the one popped, whose
 * cluster cannot wrap into the empty slots before it), so the next pop
 * starts where this one found its entry. */
void *ruda__handle_table_pop(struct ruda_handle_table *t, uint64_t *key)
{
	for (size_t i = t->low; i < t->cap; i++)
		if (t->slots[i].value) {
			t->low = i;
			if (key)
				*key = t->slots[i].key;
			return remove_slot(t, &t->slots[i]);
		}
	return NULL;
}
