/* A map from 64-bit ids to pointers (open addressing, linear probing). Used
 * for a session's buffers and kernels and for the server's sessions. */
#ifndef RUDA_HANDLE_TABLE_H
#define RUDA_HANDLE_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct ruda_handle_table {
	struct ruda_handle_slot {
		uint64_t key;
		void *value; /* NULL: free slot */
	} *slots;
	size_t cap, count;
	size_t low; /* no entry below this slot (pop starts here) */
};

void ruda__handle_table_init(struct ruda_handle_table *t);
void ruda__handle_table_finish(struct ruda_handle_table *t);
void *ruda__handle_table_get(const struct ruda_handle_table *t, uint64_t key);
/* 0, -EEXIST or -ENOMEM. `value` must not be NULL. */
int ruda__handle_table_insert(struct ruda_handle_table *t, uint64_t key, void *value);
/* The removed value, or NULL. */
void *ruda__handle_table_remove(struct ruda_handle_table *t, uint64_t key);
/* Remove and return any one entry (for teardown), or NULL when empty. */
void *ruda__handle_table_pop(struct ruda_handle_table *t, uint64_t *key);

#endif
