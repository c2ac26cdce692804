/*
 * Client-side state of the tensor calls: which buffers several tensors
 * share (freed when the last of them is released) and the gather kernel,
 * registered on first need.
 */
#ifndef RUDA_TENSOR_H
#define RUDA_TENSOR_H

#include <stdint.h>

#include <ruda/ruda.h>

struct ruda_tensor_state;

struct ruda_tensor_state *ruda__tensor_state_new(void);
void ruda__tensor_state_free(struct ruda_tensor_state *state);

/*
 * A release of buffer `id` asked for: 1 when other tensors still share it
 * (one reference dropped, nothing to send), 0 when it is to be released.
 */
int ruda__tensor_release_shared(struct ruda_tensor_state *state, uint64_t id);

/* The tensor state of a client (client.c). */
struct ruda_tensor_state *ruda__client_tensor_state(ruda_client *client);

#endif
