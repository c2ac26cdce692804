/* libruda: graphs captured and replayed by rudad (see <ruda/ruda.h>). */
#include <stdatomic.h>
#include <stdlib.h>

#include <ruda/ruda.h>

#include "client_private.h"
#include "ruda.pb-c.h"

struct ruda_graph {
	ruda_client *client; /* borrowed: graphs go before their client */
	uint64_t id;
};

/* Graph ids need only be unique per session; one counter serves every
 * client of the process. */
static _Atomic uint64_t next_graph = 1;

ruda_status ruda_client_graph_prepare(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__GraphPrepare body = RUDA__GRAPH_PREPARE__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_PREPARE;
	req.graph_prepare = &body;
	return ruda__client_call(c, &req, NULL);
}

ruda_status ruda_client_graph_start_capture(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__GraphStartCapture body = RUDA__GRAPH_START_CAPTURE__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_START_CAPTURE;
	req.graph_start_capture = &body;
	return ruda__client_call(c, &req, NULL);
}

ruda_status ruda_client_graph_stop_capture(ruda_client *c, ruda_graph **out)
{
	if (!c || !out)
		return RUDA_ERROR_INVALID_ARGUMENT;
	*out = NULL;
	ruda_graph *g = malloc(sizeof(*g));
	if (!g)
		return RUDA_ERROR_OUT_OF_MEMORY;
	g->client = c;
	g->id = atomic_fetch_add(&next_graph, 1);
	Ruda__GraphStopCapture body = RUDA__GRAPH_STOP_CAPTURE__INIT;
	body.graph = g->id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_STOP_CAPTURE;
	req.graph_stop_capture = &body;
	ruda_status st = ruda__client_call(c, &req, NULL);
	if (st != RUDA_OK) {
		free(g);
		return st;
	}
	*out = g;
	return RUDA_OK;
}

ruda_status ruda_client_graph_abort_capture(ruda_client *c)
{
	if (!c)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__GraphAbortCapture body = RUDA__GRAPH_ABORT_CAPTURE__INIT;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_ABORT_CAPTURE;
	req.graph_abort_capture = &body;
	return ruda__client_post(c, &req, 0);
}

ruda_status ruda_graph_replay(ruda_graph *g)
{
	if (!g)
		return RUDA_ERROR_INVALID_ARGUMENT;
	Ruda__GraphReplay body = RUDA__GRAPH_REPLAY__INIT;
	body.graph = g->id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_REPLAY;
	req.graph_replay = &body;
	return ruda__client_post(g->client, &req, 0);
}

void ruda_graph_release(ruda_graph *g)
{
	if (!g)
		return;
	Ruda__GraphRelease body = RUDA__GRAPH_RELEASE__INIT;
	body.graph = g->id;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_GRAPH_RELEASE;
	req.graph_release = &body;
	ruda__client_post(g->client, &req, 0);
	free(g);
}
