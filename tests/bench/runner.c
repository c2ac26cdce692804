/*
 * A kernel runner: the same buffers and launches through libruda or with
 * plain Vulkan in this process (inproc.c), so the scaling, priority and
 * kernel-speed groups write their workloads once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define RUNNER_MAX 8

struct bench_runner {
	enum bench_runner_kind kind;
	struct bench_inproc_runner *inproc;
	ruda_client *c;
	ruda_kernel k[RUNNER_MAX];
	uint32_t knb[RUNNER_MAX];
	int nk;
	ruda_handle b[RUNNER_MAX];
	int nb;
};

static void ok(ruda_client *c, ruda_status st, const char *what)
{
	if (st == RUDA_OK)
		return;
	char why[512] = "";
	ruda_client_last_error(c, why, sizeof(why));
	bench_fail("%s: %s: %s", what, ruda_strerror(st), why);
}

struct bench_runner *bench_runner_open(const struct bench_runner_options *o)
{
	struct bench_runner *r = calloc(1, sizeof(*r));
	BENCH_CHECK(r, "out of memory");
	r->kind = o->kind;
	if (o->kind == BENCH_RUNNER_INPROC) {
		r->inproc = bench_inproc_runner_open();
		return r;
	}
	ruda_connect_options co = {
		.struct_size = sizeof(ruda_connect_options),
		.socket_path = o->socket_path,
		.client_name = o->name ? o->name : "bench",
		.priority = o->priority,
	};
	ruda_status st = ruda_client_connect(&co, &r->c);
	BENCH_CHECK(st == RUDA_OK, "connect: %s", ruda_strerror(st));
	return r;
}

int bench_runner_kernel(struct bench_runner *r, const char *spv, uint32_t nbindings,
			uint32_t push_size)
{
	if (r->inproc)
		return bench_inproc_runner_kernel(r->inproc, spv, nbindings, push_size);
	BENCH_CHECK(r->nk < RUNNER_MAX, "runner: too many kernels");
	size_t size;
	uint32_t *code = bench_read_file(bench_path(spv), &size);
	BENCH_CHECK(code, "cannot read %s", bench_path(spv));
	ruda_kernel_desc desc = {
		.struct_size = sizeof(ruda_kernel_desc),
		.spirv = code,
		.spirv_size = size,
		.entry_point = "main",
		.binding_count = nbindings,
		.push_constant_size = push_size,
	};
	ok(r->c, ruda_client_kernel_register(r->c, &desc, &r->k[r->nk]), "register");
	free(code);
	r->knb[r->nk] = nbindings;
	return r->nk++;
}

int bench_runner_buffer(struct bench_runner *r, uint64_t size, const void *init)
{
	if (r->inproc)
		return bench_inproc_runner_buffer(r->inproc, size, init);
	BENCH_CHECK(r->nb < RUNNER_MAX, "runner: too many buffers");
	if (init)
		ok(r->c, ruda_client_create(r->c, init, size, &r->b[r->nb]), "create");
	else
		ok(r->c, ruda_client_empty(r->c, size, &r->b[r->nb]), "empty");
	return r->nb++;
}

void bench_runner_launch(struct bench_runner *r, int kernel, uint32_t groups, const int *bufs,
			 const void *push, uint32_t push_size)
{
	if (r->inproc) {
		bench_inproc_runner_launch(r->inproc, kernel, groups, bufs, push, push_size);
		return;
	}
	ruda_handle h[4];
	for (uint32_t i = 0; i < r->knb[kernel] && i < 4; i++)
		h[i] = r->b[bufs[i]];
	ok(r->c, ruda_client_launch(r->c, r->k[kernel], (ruda_count){groups, 1, 1}, h,
				    r->knb[kernel], push, push_size),
	   "launch");
}

void bench_runner_set_stream(struct bench_runner *r, uint32_t stream)
{
	BENCH_CHECK(!r->inproc, "runner: streams are rudad's");
	ok(r->c, ruda_client_set_stream(r->c, stream), "set_stream");
}

void bench_runner_sync(struct bench_runner *r)
{
	if (r->inproc)
		bench_inproc_runner_sync(r->inproc);
	else
		ok(r->c, ruda_client_sync(r->c), "sync");
}

void bench_runner_read(struct bench_runner *r, int buf, void *dst)
{
	if (r->inproc)
		bench_inproc_runner_read(r->inproc, buf, dst);
	else
		ok(r->c, ruda_client_read_one(r->c, r->b[buf], dst), "read_one");
}

void bench_runner_close(struct bench_runner *r)
{
	if (r->inproc)
		bench_inproc_runner_close(r->inproc);
	else
		ruda_client_close(r->c);
	free(r);
}
