/* Several devices: one lavapipe device opened three times as separate
 * logical devices; device ids, properties, utilization, transfers between
 * clients inside rudad and all-reduce against a CPU reference. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define NDEV 3

static struct test_daemon daemon_;
static ruda_client *clients[NDEV];

static void setup(void)
{
	test_daemon_start(&daemon_, (const char *const[]){"--device", "0,0,0", NULL});
	for (uint32_t i = 0; i < NDEV; i++)
		clients[i] = test_connect_device(&daemon_, "test_devices", i);
}

static void teardown(void)
{
	for (uint32_t i = 0; i < NDEV; i++) {
		ruda_client_close(clients[i]);
		clients[i] = NULL;
	}
	test_daemon_stop(&daemon_);
}

/* ---- enumeration and properties ------------------------------------------ */

START_TEST(enumerate)
{
	ruda_device_id ids[8];
	ck_assert_uint_eq(ruda_client_device_count_total(clients[0]), NDEV);
	ck_assert_uint_eq(ruda_client_enumerate_all_devices(clients[0], ids, 8), NDEV);
	/* one physical device opened NDEV times: every one is of its type
	 * (CPU on lavapipe), indexed 0..NDEV-1 */
	ruda_device_type type = ids[0].type_id;
	ruda_device_type other = type == RUDA_DEVICE_CPU ? RUDA_DEVICE_DISCRETE_GPU : RUDA_DEVICE_CPU;
	for (uint32_t i = 0; i < NDEV; i++) {
		ck_assert_uint_eq(ids[i].type_id, type);
		ck_assert_uint_eq(ids[i].index_id, i);
		ruda_device_id mine = ruda_client_device_id(clients[i]);
		ck_assert_uint_eq(mine.type_id, type);
		ck_assert_uint_eq(mine.index_id, i);
	}
	ck_assert_uint_eq(ruda_client_device_count(clients[1], type), NDEV);
	ck_assert_uint_eq(ruda_client_device_count(clients[1], other), 0);
	ck_assert_uint_eq(ruda_client_enumerate_devices(clients[2], type, ids, 2), NDEV);
	ck_assert_uint_eq(ids[1].index_id, 1);
	ck_assert_int_eq(ruda_client_has_device_transport(clients[0]), 1);
}
END_TEST

START_TEST(connect_by_id)
{
	ruda_device_type type = ruda_client_device_id(clients[0]).type_id;
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = daemon_.socket_path, .client_name = "by id",
				  .use_device_id = 1,
				  .device_id = {.type_id = type, .index_id = 2}};
	ruda_client *c = NULL;
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_OK);
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(c, &p), RUDA_OK);
	ck_assert_uint_eq(p.index, 2);
	ck_assert_uint_eq(p.id.index_id, 2);
	ruda_client_close(c);

	o.device_id.index_id = NDEV; /* no such device */
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_ERROR_INVALID_ARGUMENT);
	o.device_id = (ruda_device_id){
		.type_id = type == RUDA_DEVICE_CPU ? RUDA_DEVICE_DISCRETE_GPU : RUDA_DEVICE_CPU,
		.index_id = 0};
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_connect_options byindex = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = daemon_.socket_path, .device_index = NDEV};
	ck_assert_int_eq(ruda_client_connect(&byindex, &c), RUDA_ERROR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(properties_values)
{
	ruda_device_properties p[NDEV];
	for (uint32_t i = 0; i < NDEV; i++) {
		p[i] = (ruda_device_properties)RUDA_DEVICE_PROPERTIES_INIT;
		ck_assert_int_eq(ruda_client_properties(clients[i], &p[i]), RUDA_OK);
		ck_assert_uint_eq(p[i].index, i);
		ck_assert_uint_eq(p[i].physical_index, p[0].physical_index);
		ck_assert_str_eq(p[i].name, p[0].name);
	}
	if (p[0].type == RUDA_DEVICE_CPU)
		ck_assert_ptr_nonnull(strstr(p[0].name, "llvmpipe"));
	ck_assert_uint_ge(p[0].subgroup_size, p[0].min_subgroup_size);
	ck_assert_uint_le(p[0].subgroup_size, p[0].max_subgroup_size);
	ck_assert_uint_gt(p[0].min_subgroup_size, 0);
	ck_assert_uint_ge(p[0].max_shared_memory, 16384); /* Vulkan's minimum */
	ck_assert_uint_ge(p[0].max_storage_buffers, 4);
	ck_assert_uint_ge(p[0].spirv_version, 0x00010500u);
	ck_assert_uint_gt(p[0].heap_count, 0);
	ck_assert_uint_gt(p[0].heaps[0].size, 0);
	uint32_t need = 1u << RUDA_ELEM_F32 | 1u << RUDA_ELEM_I32 | 1u << RUDA_ELEM_U32;
	ck_assert_uint_eq(p[0].features.elem_types & need, need);
	ck_assert_uint_ne(p[0].features.atomic_elem_types & (1u << RUDA_ELEM_U32), 0);
	ck_assert_uint_ne(p[0].features.subgroup_operations, 0);
	/* lavapipe has no tensor cores; a GPU's shapes are whole ones (an H200
	 * reports 10) */
	if (p[0].type == RUDA_DEVICE_CPU)
		ck_assert_uint_eq(p[0].features.coop_matrix_count, 0);
	ck_assert_uint_le(p[0].features.coop_matrix_count, RUDA_MAX_COOP_SHAPES);
	for (uint32_t i = 0; i < p[0].features.coop_matrix_count; i++)
		ck_assert(p[0].features.coop_matrix[i].m && p[0].features.coop_matrix[i].n &&
			  p[0].features.coop_matrix[i].k);
	ruda_features f = RUDA_FEATURES_INIT;
	ck_assert_int_eq(ruda_client_features(clients[0], &f), RUDA_OK);
	ck_assert_uint_eq(f.elem_types, p[0].features.elem_types);

	/* one hardware, three logical devices: one fingerprint */
	uint64_t fp = ruda_client_properties_fingerprint(clients[0]);
	ck_assert_uint_ne(fp, 0);
	ck_assert_uint_eq(ruda_client_properties_fingerprint(clients[1]), fp);
	ck_assert_uint_eq(ruda_client_properties_fingerprint(clients[2]), fp);

	/* another device's properties through any client */
	ruda_device_properties other = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_device_properties(clients[0], p[2].id, &other), RUDA_OK);
	ck_assert_uint_eq(other.index, 2);
	ck_assert_int_eq(ruda_client_device_properties(
				 clients[0], (ruda_device_id){RUDA_DEVICE_CPU, 9}, &other),
			 RUDA_ERROR_INVALID_ARGUMENT);

	/* properties_mut edits this client's copy only */
	ruda_device_properties *mut = ruda_client_properties_mut(clients[0]);
	mut->max_bindings = 3;
	mut->features.elem_types = 1u << RUDA_ELEM_F32;
	ck_assert_int_eq(ruda_client_properties(clients[0], &other), RUDA_OK);
	ck_assert_uint_eq(other.max_bindings, 3);
	ck_assert_int_eq(ruda_client_features(clients[0], &f), RUDA_OK);
	ck_assert_uint_eq(f.elem_types, 1u << RUDA_ELEM_F32);
	ck_assert_int_eq(ruda_client_properties(clients[1], &other), RUDA_OK);
	ck_assert_uint_eq(other.max_bindings, p[1].max_bindings);
	ck_assert_uint_eq(ruda_client_properties_fingerprint(clients[0]), fp);

	ruda_target_properties t = RUDA_TARGET_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_target_properties(clients[1], &t), RUDA_OK);
	ck_assert_uint_eq(t.subgroup_size, p[1].subgroup_size);
	ck_assert_uint_eq(t.max_shared_memory, p[1].max_shared_memory);
	ck_assert_uint_eq(t.max_workgroup_invocations, p[1].max_workgroup_invocations);

	uint32_t widths[8];
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 4, widths, 8), 3);
	ck_assert_uint_eq(widths[0], 4);
	ck_assert_uint_eq(widths[1], 2);
	ck_assert_uint_eq(widths[2], 1);
	/* Vulkan vectors have at most 4 components, whatever the element */
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 1, widths, 8), 3);
	ck_assert_uint_eq(widths[0], 4);
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 2, widths, 8), 3);
	ck_assert_uint_eq(widths[0], 4);
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 8, widths, 8), 2);
	ck_assert_uint_eq(widths[0], 2);
	ck_assert_uint_eq(widths[1], 1);
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 16, widths, 8), 1);
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(clients[0], 0, widths, 8), 0);
	ck_assert_uint_eq(ruda_client_io_optimized_vector_sizes(NULL, 4, widths, 8), 0);
}
END_TEST

START_TEST(utilization_counts_work)
{
	ruda_device_utilization u0 = RUDA_DEVICE_UTILIZATION_INIT;
	ruda_device_utilization u1 = RUDA_DEVICE_UTILIZATION_INIT;
	ck_assert_int_eq(ruda_client_utilization(clients[1], &u0), RUDA_OK);
	ck_assert(u0.recent >= 0 && u0.recent <= 1);
	ck_assert_uint_gt(u0.uptime_ns, 0);
	/* work on device 1: its busy time grows, device 2's does not */
	ruda_device_utilization other0 = RUDA_DEVICE_UTILIZATION_INIT;
	ruda_device_utilization other1 = RUDA_DEVICE_UTILIZATION_INIT;
	ck_assert_int_eq(ruda_client_utilization(clients[2], &other0), RUDA_OK);
	enum { SIZE = 8 << 20 };
	uint8_t *data = malloc(SIZE);
	test_fill_random(data, SIZE, 5);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(clients[1], data, SIZE, &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(clients[1], h, data), RUDA_OK);
	ck_assert_int_eq(ruda_client_utilization(clients[1], &u1), RUDA_OK);
	ck_assert_uint_gt(u1.busy_ns, u0.busy_ns);
	ck_assert_uint_ge(u1.uptime_ns, u0.uptime_ns);
	ck_assert_uint_ge(u1.bytes, SIZE);
	ck_assert(u1.recent >= 0 && u1.recent <= 1);
	ck_assert_int_eq(ruda_client_utilization(clients[2], &other1), RUDA_OK);
	ck_assert_uint_eq(other1.busy_ns, other0.busy_ns);
	ck_assert_uint_eq(other1.bytes, 0);
	free(data);
}
END_TEST

/* ---- to_client ---------------------------------------------------------------- */

static void check_to_client(ruda_client *from, ruda_client *to, size_t size, uint64_t seed)
{
	uint8_t *data = malloc(size), *back = malloc(size);
	test_fill_random(data, size, seed);
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_create(from, data, size, &src), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(from, src, to, RUDA_ELEM_U32, &dst), RUDA_OK);
	ck_assert_uint_eq(dst.size, size);
	/* the source may go at once; the copy is the target's */
	ck_assert_int_eq(ruda_client_release(from, src), RUDA_OK);
	memset(back, 0, size);
	ck_assert_int_eq(ruda_client_read_one(to, dst, back), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, size), 0);
	ck_assert_int_eq(ruda_client_release(to, dst), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(to), RUDA_OK);
	free(data);
	free(back);
}

START_TEST(to_client_between_devices)
{
	check_to_client(clients[0], clients[1], 4096, 1);
	check_to_client(clients[1], clients[2], (3 << 20) + 20, 2);
	check_to_client(clients[2], clients[0], 1, 3);
	/* two clients of one device: one device copy */
	ruda_client *again = test_connect_device(&daemon_, "second on device 1", 1);
	check_to_client(clients[1], again, 65536 + 4, 4);
	check_to_client(again, clients[1], 100, 5);
	ruda_client_close(again);
}
END_TEST

START_TEST(to_client_slice_and_tensor)
{
	/* a slice of a buffer */
	uint8_t data[1000], back[1000];
	test_fill_random(data, sizeof(data), 6);
	ruda_handle src, dst;
	ck_assert_int_eq(ruda_client_create(clients[0], data, sizeof(data), &src), RUDA_OK);
	ruda_handle slice = {src.id, 100, 300};
	ck_assert_int_eq(ruda_client_to_client(clients[0], slice, clients[2], RUDA_ELEM_U8, &dst),
			 RUDA_OK);
	ck_assert_uint_eq(dst.size, 300);
	ck_assert_int_eq(ruda_client_read_one(clients[2], dst, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, data + 100, 300), 0);

	/* the transpose of a 37 x 53 matrix of u32, packed on the other device */
	enum { ROWS = 37, COLS = 53 };
	uint32_t m[ROWS * COLS], t[ROWS * COLS];
	for (uint32_t i = 0; i < ROWS * COLS; i++)
		m[i] = i * 2654435761u;
	ruda_handle hm, ht;
	ck_assert_int_eq(ruda_client_create(clients[1], m, sizeof(m), &hm), RUDA_OK);
	uint64_t shape[2] = {COLS, ROWS}, strides[2] = {1, COLS};
	ck_assert_int_eq(ruda_client_to_client_tensor(clients[1], hm, shape, strides, 2, 4,
						      clients[0], RUDA_ELEM_U32, &ht),
			 RUDA_OK);
	ck_assert_uint_eq(ht.size, sizeof(m));
	ck_assert_int_eq(ruda_client_read_one(clients[0], ht, t), RUDA_OK);
	for (uint32_t c = 0; c < COLS; c++)
		for (uint32_t r = 0; r < ROWS; r++)
			ck_assert_uint_eq(t[c * ROWS + r], m[r * COLS + c]);
	/* rows of a row-major view with a padded pitch: every other row */
	uint64_t shape2[2] = {ROWS / 2, COLS}, strides2[2] = {2 * COLS, 1};
	ck_assert_int_eq(ruda_client_to_client_tensor(clients[1], hm, shape2, strides2, 2, 4,
						      clients[2], RUDA_ELEM_U32, &ht),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(clients[2], ht, t), RUDA_OK);
	for (uint32_t r = 0; r < ROWS / 2; r++)
		ck_assert_int_eq(memcmp(&t[r * COLS], &m[2 * r * COLS], COLS * 4), 0);
}
END_TEST

START_TEST(to_client_refusals)
{
	ruda_handle src, dst;
	uint8_t data[64] = {1};
	ck_assert_int_eq(ruda_client_create(clients[0], data, sizeof(data), &src), RUDA_OK);
	ruda_handle bad = {src.id + 1000, 0, 64};
	ck_assert_int_eq(ruda_client_to_client(clients[0], bad, clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_ERROR_INVALID_HANDLE);
	ruda_handle past = {src.id, 32, 64};
	ck_assert_int_eq(ruda_client_to_client(clients[0], past, clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_ERROR_OUT_OF_RANGE);
	uint64_t shape[2] = {4, 4}, strides[2] = {4, 1};
	ck_assert_int_eq(ruda_client_to_client_tensor(clients[0], src, shape, strides, 2, 8,
						      clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_ERROR_OUT_OF_RANGE);
	ck_assert_int_eq(ruda_client_to_client_tensor(clients[0], src, shape, strides, 2, 0,
						      clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_to_client(clients[0], src, NULL, RUDA_ELEM_U8, &dst),
			 RUDA_ERROR_INVALID_ARGUMENT);
	/* the connection is fine afterwards */
	ck_assert_int_eq(ruda_client_to_client(clients[0], src, clients[1], RUDA_ELEM_U8, &dst),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[0]), RUDA_OK);
}
END_TEST

/* Another process's session is out of reach, even by its id. */
START_TEST(to_client_other_process_refused)
{
	int ids[2], done[2];
	ck_assert_int_eq(pipe(ids), 0);
	ck_assert_int_eq(pipe(done), 0);
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
			.socket_path = daemon_.socket_path, .device_index = 1};
		ruda_client *c = NULL;
		uint64_t id = ruda_client_connect(&o, &c) == RUDA_OK ? ruda_client_session_id(c) : 0;
		if (write(ids[1], &id, sizeof(id)) != sizeof(id))
			_exit(1);
		char b;
		if (read(done[0], &b, 1) < 0)
			_exit(1);
		ruda_client_close(c);
		_exit(0);
	}
	uint64_t target = 0;
	ck_assert_int_eq(read(ids[0], &target, sizeof(target)), sizeof(target));
	ck_assert_uint_ne(target, 0);

	int fd = raw_connect(&daemon_);
	ck_assert_int_eq(raw_hello(fd, 1), RUDA_OK);
	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = 1;
	e.size = 64;
	e.reply = 1;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 2;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	Ruda__Reply *r = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_OK);
	ruda__reply__free_unpacked(r, NULL);
	Ruda__ToClient t = RUDA__TO_CLIENT__INIT;
	t.handle = 1;
	t.size = 64;
	t.target_session = target;
	t.target_handle = 7;
	req.id = 3;
	req.body_case = RUDA__REQUEST__BODY_TO_CLIENT;
	req.to_client = &t;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	r = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_ERROR_PERMISSION);
	ruda__reply__free_unpacked(r, NULL);
	/* and a session that does not exist */
	t.target_session = 999999;
	req.id = 4;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	r = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_ERROR_INVALID_ARGUMENT);
	ruda__reply__free_unpacked(r, NULL);
	close(fd);

	ck_assert_int_eq(write(done[1], "x", 1), 1);
	int status;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(ids[0]);
	close(ids[1]);
	close(done[0]);
	close(done[1]);
}
END_TEST

/* ToClient fields only the raw protocol can get wrong, sent to the raw
 * connection's own session (same process: allowed). */
static ruda_status raw_request(int fd, Ruda__Request *req)
{
	static uint64_t id = 10;
	req->id = ++id;
	ck_assert_int_eq(raw_send_request(fd, req), 0);
	Ruda__Reply *r = raw_recv_reply(fd, 10000, NULL);
	ck_assert_ptr_nonnull(r);
	ck_assert_uint_eq(r->id, req->id);
	ruda_status st = (ruda_status)r->status;
	ruda__reply__free_unpacked(r, NULL);
	return st;
}

START_TEST(to_client_bad_fields_raw)
{
	int fd = raw_connect(&daemon_);
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = RUDA_PROTOCOL_VERSION;
	h.client_name = "raw";
	h.device_index = 2;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;
	ck_assert_int_eq(raw_send_request(fd, &req), 0);
	int arena = -1;
	Ruda__Reply *r = raw_recv_reply(fd, 10000, &arena);
	ck_assert_ptr_nonnull(r);
	ck_assert_int_eq(r->status, RUDA_OK);
	uint64_t self = r->hello->session_id;
	ck_assert_uint_eq(r->hello->device_index, 2);
	ck_assert_uint_eq(r->hello->n_devices, NDEV);
	ck_assert_uint_eq(r->hello->devices[1]->type_index, 1);
	ck_assert_ptr_nonnull(r->hello->devices[1]->details);
	ruda__reply__free_unpacked(r, NULL);
	if (arena >= 0)
		close(arena);

	Ruda__Empty e = RUDA__EMPTY__INIT;
	e.handle = 1;
	e.size = 8 << 20;
	e.reply = 1;
	req = (Ruda__Request)RUDA__REQUEST__INIT;
	req.body_case = RUDA__REQUEST__BODY_EMPTY;
	req.empty = &e;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_OK);

	Ruda__ToClient t = RUDA__TO_CLIENT__INIT;
	uint64_t shape[9] = {2048, 2048, 1, 1, 1, 1, 1, 1, 1}, strides[9] = {1, 2048, 1, 1, 1, 1, 1, 1, 1};
	t.handle = 1;
	t.target_session = self;
	t.target_handle = 2;
	t.shape = shape;
	t.strides = strides;
	t.elem_size = 1;
	req.body_case = RUDA__REQUEST__BODY_TO_CLIENT;
	req.to_client = &t;
	/* strides and shape of different lengths */
	t.n_shape = 2;
	t.n_strides = 1;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_INVALID_ARGUMENT);
	/* more than 8 dimensions */
	t.n_shape = t.n_strides = 9;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_INVALID_ARGUMENT);
	/* an element of 17 bytes */
	t.n_shape = t.n_strides = 2;
	t.elem_size = 17;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_INVALID_ARGUMENT);
	/* 4 Mi single-element pieces: over the limit */
	t.elem_size = 1;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_TOO_LARGE);
	/* a size that overflows */
	shape[0] = shape[1] = 1ull << 40;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_TOO_LARGE);
	/* plain bytes: the target id in use, then a good copy to itself */
	t.n_shape = t.n_strides = 0;
	t.size = 4096;
	t.target_handle = 1;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_INVALID_HANDLE);
	t.target_handle = 2;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_OK);
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_INVALID_HANDLE);
	/* a source whose allocation failed reports that failure */
	Ruda__Empty huge = RUDA__EMPTY__INIT;
	huge.handle = 9;
	huge.size = UINT64_MAX / 2;
	Ruda__Request alloc = RUDA__REQUEST__INIT;
	alloc.body_case = RUDA__REQUEST__BODY_EMPTY;
	alloc.empty = &huge;
	ck_assert_int_eq(raw_send_request(fd, &alloc), 0);
	t.handle = 9;
	t.target_handle = 3;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_ERROR_TOO_LARGE);
	/* Utilization works on a raw session as well */
	Ruda__Utilization u = RUDA__UTILIZATION__INIT;
	req.body_case = RUDA__REQUEST__BODY_UTILIZATION;
	req.utilization = &u;
	ck_assert_int_eq(raw_request(fd, &req), RUDA_OK);
	close(fd);
}
END_TEST

/* ---- all-reduce --------------------------------------------------------------- */

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0 && !mant)
		bits = sign;
	else if (exp == 0) {
		exp = 127 - 15 + 1;
		while (!(mant & 0x400u)) {
			mant <<= 1;
			exp--;
		}
		bits = sign | exp << 23 | (mant & 0x3ffu) << 13;
	} else if (exp == 31)
		bits = sign | 0x7f800000u | mant << 13;
	else
		bits = sign | (exp + 127 - 15) << 23 | mant << 13;
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

static uint16_t float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u;
	int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
	uint32_t mant = x & 0x7fffffu;
	if (((x >> 23) & 0xffu) == 0xffu)
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = (uint32_t)exp << 10 | mant >> 13, rest = mant & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
		h++;
	return (uint16_t)(sign | h);
}

static const ruda_elem_type types[] = {RUDA_ELEM_F32, RUDA_ELEM_I32, RUDA_ELEM_U32,
				       RUDA_ELEM_F16};

/* Random inputs that keep every op in range: near 1 for products. */
static void fill_inputs(void *dst, size_t count, ruda_elem_type type, int op, uint64_t seed)
{
	uint32_t *raw = malloc(count * 4);
	test_fill_random(raw, count * 4, seed);
	for (size_t i = 0; i < count; i++) {
		double unit = (double)(raw[i] >> 8) / (double)(1u << 24); /* 0..1 */
		double v = op == RUDA_REDUCE_PROD ? 0.5 + unit : unit * 200.0 - 100.0;
		switch (type) {
		case RUDA_ELEM_F32: ((float *)dst)[i] = (float)v; break;
		case RUDA_ELEM_F16: ((uint16_t *)dst)[i] = float_to_half((float)v); break;
		case RUDA_ELEM_I32:
			((int32_t *)dst)[i] = op == RUDA_REDUCE_PROD ? (int32_t)(raw[i] % 7) - 3
								     : (int32_t)raw[i];
			break;
		default:
			((uint32_t *)dst)[i] = op == RUDA_REDUCE_PROD ? raw[i] % 5 : raw[i];
		}
	}
	free(raw);
}

/* The CPU reference: inputs combined in device order, as documented. */
static void reference(void *const *in, uint32_t n, size_t count, ruda_elem_type type, int op,
		      void *out)
{
	for (size_t i = 0; i < count; i++) {
		if (type == RUDA_ELEM_F32 || type == RUDA_ELEM_F16) {
			float acc = 0;
			for (uint32_t j = 0; j < n; j++) {
				float v = type == RUDA_ELEM_F32 ? ((float *)in[j])[i]
								: half_to_float(((uint16_t *)in[j])[i]);
				if (j == 0)
					acc = v;
				else if (op == RUDA_REDUCE_PROD)
					acc *= v;
				else if (op == RUDA_REDUCE_MAX)
					acc = acc > v ? acc : v;
				else if (op == RUDA_REDUCE_MIN)
					acc = acc < v ? acc : v;
				else
					acc += v;
			}
			if (op == RUDA_REDUCE_MEAN)
				acc /= (float)n;
			if (type == RUDA_ELEM_F32)
				((float *)out)[i] = acc;
			else
				((uint16_t *)out)[i] = float_to_half(acc);
		} else if (type == RUDA_ELEM_I32) {
			int64_t sum = 0;
			uint32_t wrap = 0;
			int32_t best = 0;
			for (uint32_t j = 0; j < n; j++) {
				int32_t v = ((int32_t *)in[j])[i];
				sum += v;
				wrap = j == 0 ? (uint32_t)v
				       : op == RUDA_REDUCE_PROD ? wrap * (uint32_t)v
								: wrap + (uint32_t)v;
				best = j == 0 ? v : op == RUDA_REDUCE_MAX ? (v > best ? v : best)
									   : (v < best ? v : best);
			}
			int32_t r;
			if (op == RUDA_REDUCE_MEAN)
				r = (int32_t)(sum / n);
			else if (op == RUDA_REDUCE_MAX || op == RUDA_REDUCE_MIN)
				r = best;
			else
				memcpy(&r, &wrap, 4);
			((int32_t *)out)[i] = r;
		} else {
			uint64_t sum = 0;
			uint32_t acc = 0;
			for (uint32_t j = 0; j < n; j++) {
				uint32_t v = ((uint32_t *)in[j])[i];
				sum += v;
				acc = j == 0 ? v
				      : op == RUDA_REDUCE_PROD ? acc * v
				      : op == RUDA_REDUCE_MAX  ? (v > acc ? v : acc)
				      : op == RUDA_REDUCE_MIN  ? (v < acc ? v : acc)
							       : acc + v;
			}
			((uint32_t *)out)[i] = op == RUDA_REDUCE_MEAN ? (uint32_t)(sum / n) : acc;
		}
	}
}

static void check_all_reduce(uint32_t n, ruda_elem_type type, int op, size_t count,
			     uint64_t seed)
{
	size_t esize = RUDA_ELEM_SIZE(type), bytes = count * esize;
	void *in[NDEV], *expect = malloc(bytes), *back = malloc(bytes);
	ruda_handle src[NDEV], dst[NDEV];
	ruda_device_id ids[NDEV];
	for (uint32_t j = 0; j < n; j++)
		ids[j] = ruda_client_device_id(clients[j]);
	for (uint32_t j = 0; j < n; j++) {
		in[j] = malloc(bytes);
		fill_inputs(in[j], count, type, op, seed * 31 + j);
		ck_assert_int_eq(ruda_client_create(clients[j], in[j], bytes, &src[j]), RUDA_OK);
		ck_assert_int_eq(ruda_client_empty(clients[j], bytes, &dst[j]), RUDA_OK);
		ck_assert_int_eq(ruda_client_ensure_init_collective(clients[j], ids, n), RUDA_OK);
	}
	/* the device list in another order still names the same set */
	ruda_device_id reversed[NDEV];
	for (uint32_t j = 0; j < n; j++)
		reversed[j] = ids[n - 1 - j];
	for (uint32_t j = 0; j < n; j++)
		ck_assert_int_eq(ruda_client_all_reduce(clients[j], src[j], dst[j], type,
							j % 2 ? reversed : ids, n,
							(ruda_reduce_op)op),
				 RUDA_OK);
	for (uint32_t j = 0; j < n; j++)
		ck_assert_int_eq(ruda_client_sync_collective(clients[j]), RUDA_OK);
	reference(in, n, count, type, op, expect);
	for (uint32_t j = 0; j < n; j++) {
		ck_assert_int_eq(ruda_client_read_one(clients[j], dst[j], back), RUDA_OK);
		ck_assert_msg(memcmp(back, expect, bytes) == 0,
			      "%u devices, type %d, op %d: device %u differs from the reference", n,
			      type, op, j);
		ruda_client_release(clients[j], src[j]);
		ruda_client_release(clients[j], dst[j]);
		free(in[j]);
	}
	free(expect);
	free(back);
}

START_TEST(all_reduce_two_devices)
{
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (int op = RUDA_REDUCE_SUM; op <= RUDA_REDUCE_MEAN; op++)
			check_all_reduce(2, types[t], op, 1000 + 37 * t, 10 * t + (uint64_t)op);
}
END_TEST

START_TEST(all_reduce_three_devices)
{
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (int op = RUDA_REDUCE_SUM; op <= RUDA_REDUCE_MEAN; op++)
			check_all_reduce(3, types[t], op, 4099 + 11 * t, 100 + 10 * t + (uint64_t)op);
	/* larger than one reduction job (4 Mi elements), in several */
	check_all_reduce(3, RUDA_ELEM_F32, RUDA_REDUCE_SUM, (5u << 20) + 3, 7);
}
END_TEST

/* Calls queue up: the k-th call of each device meets the k-th of the others. */
START_TEST(all_reduce_in_order)
{
	enum { COUNT = 256, CALLS = 4 };
	ruda_device_id ids[2] = {ruda_client_device_id(clients[0]), ruda_client_device_id(clients[1])};
	uint32_t in[2][CALLS][COUNT];
	ruda_handle src[2][CALLS], dst[2][CALLS];
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < CALLS; k++) {
			for (int i = 0; i < COUNT; i++)
				in[j][k][i] = (uint32_t)(1000 * k + 10 * j + i);
			ruda_client_create(clients[j], in[j][k], sizeof(in[j][k]), &src[j][k]);
			ruda_client_empty(clients[j], sizeof(in[j][k]), &dst[j][k]);
		}
	/* device 0 calls everything first, then device 1 */
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < CALLS; k++)
			ck_assert_int_eq(ruda_client_all_reduce(clients[j], src[j][k], dst[j][k],
								RUDA_ELEM_U32, ids, 2,
								RUDA_REDUCE_SUM),
					 RUDA_OK);
	for (int j = 0; j < 2; j++)
		ck_assert_int_eq(ruda_client_sync_collective(clients[j]), RUDA_OK);
	uint32_t back[COUNT];
	for (int j = 0; j < 2; j++)
		for (int k = 0; k < CALLS; k++) {
			ck_assert_int_eq(ruda_client_read_one(clients[j], dst[j][k], back), RUDA_OK);
			for (int i = 0; i < COUNT; i++)
				ck_assert_uint_eq(back[i], in[0][k][i] + in[1][k][i]);
		}
}
END_TEST

static void reduce_pair(ruda_handle s0, ruda_handle s1, ruda_elem_type t0, ruda_elem_type t1,
			int op0, int op1)
{
	ruda_handle d0, d1;
	ruda_client_empty(clients[0], s0.size, &d0);
	ruda_client_empty(clients[1], s1.size, &d1);
	ruda_device_id ids[2] = {ruda_client_device_id(clients[0]), ruda_client_device_id(clients[1])};
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], s0, d0, t0, ids, 2, op0), RUDA_OK);
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], s1, d1, t1, ids, 2, op1), RUDA_OK);
}

START_TEST(all_reduce_mismatch)
{
	char why[256];
	uint8_t data[64] = {0};
	ruda_handle a, b, big;
	ruda_client_create(clients[0], data, 64, &a);
	ruda_client_create(clients[1], data, 64, &b);
	ruda_client_create(clients[1], data, 32, &big);
	/* sizes differ */
	reduce_pair(a, big, RUDA_ELEM_F32, RUDA_ELEM_F32, RUDA_REDUCE_SUM, RUDA_REDUCE_SUM);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(clients[1], why, sizeof(why));
	ck_assert_msg(strstr(why, "differ"), "%s", why);
	/* types differ */
	reduce_pair(a, b, RUDA_ELEM_F32, RUDA_ELEM_I32, RUDA_REDUCE_SUM, RUDA_REDUCE_SUM);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_ARGUMENT);
	/* operations differ */
	reduce_pair(a, b, RUDA_ELEM_U32, RUDA_ELEM_U32, RUDA_REDUCE_MAX, RUDA_REDUCE_MIN);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_ARGUMENT);
	/* errors are cleared by the sync that reported them: a good call works */
	reduce_pair(a, b, RUDA_ELEM_U32, RUDA_ELEM_U32, RUDA_REDUCE_MAX, RUDA_REDUCE_MAX);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_OK);

	/* device sets differ: {0,1} against {0,1,2} */
	ruda_device_id all[NDEV];
	for (uint32_t j = 0; j < NDEV; j++)
		all[j] = ruda_client_device_id(clients[j]);
	ruda_handle d0, d1;
	ruda_client_empty(clients[0], 64, &d0);
	ruda_client_empty(clients[1], 64, &d1);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d0, RUDA_ELEM_F32, all, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], b, d1, RUDA_ELEM_F32, all, 3,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_client_last_error(clients[0], why, sizeof(why));
	ck_assert_msg(strstr(why, "device sets differ"), "%s", why);
}
END_TEST

START_TEST(all_reduce_bad_calls)
{
	uint8_t data[64] = {0};
	ruda_handle a, d;
	ruda_client_create(clients[0], data, 64, &a);
	ruda_client_empty(clients[0], 64, &d);
	ruda_device_id ids[3] = {ruda_client_device_id(clients[0]), ruda_client_device_id(clients[1])};
	/* a set without this client's device */
	ck_assert_int_eq(ruda_client_ensure_init_collective(clients[0], ids + 1, 1),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F32, ids + 1, 1,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	/* a device named twice, an unknown device */
	ruda_device_id twice[2] = {ids[0], ids[0]};
	ck_assert_int_eq(ruda_client_ensure_init_collective(clients[0], twice, 2),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ruda_device_id many[NDEV + 1] = {ids[0], ids[0], ids[0], ids[0]};
	ck_assert_int_eq(ruda_client_ensure_init_collective(clients[0], many, NDEV + 1),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F32, many, NDEV + 1,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_device_id unknown[2] = {ids[0], {RUDA_DEVICE_CPU, 7}};
	ck_assert_int_eq(ruda_client_ensure_init_collective(clients[0], unknown, 2),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F32, unknown, 2,
						RUDA_REDUCE_SUM),
			 RUDA_ERROR_INVALID_ARGUMENT);
	/* a single device reduces to a copy */
	float one[16];
	for (int i = 0; i < 16; i++)
		one[i] = (float)i;
	ruda_handle s1;
	ruda_client_create(clients[0], one, sizeof(one), &s1);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], s1, d, RUDA_ELEM_F32, ids, 1,
						RUDA_REDUCE_MEAN),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_OK);
	float back[16];
	ruda_handle dview = {d.id, 0, sizeof(back)};
	ck_assert_int_eq(ruda_client_read_one(clients[0], dview, back), RUDA_OK);
	ck_assert_int_eq(memcmp(back, one, sizeof(one)), 0);
	/* an element type without a reduction, a ragged size, a missing buffer:
	 * the other participant hears of it too */
	ruda_handle b, db;
	ruda_client_create(clients[1], data, 64, &b);
	ruda_client_empty(clients[1], 64, &db);
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F64, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], b, db, RUDA_ELEM_F64, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_UNSUPPORTED);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_UNSUPPORTED);
	ruda_handle ragged = {a.id, 0, 6};
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], ragged, d, RUDA_ELEM_F32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ruda_handle ragged1 = {b.id, 0, 6};
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], ragged1, db, RUDA_ELEM_F32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_handle missing = {a.id + 500, 0, 64};
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], missing, d, RUDA_ELEM_F32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], b, db, RUDA_ELEM_F32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_INVALID_HANDLE);
	ck_assert_int_eq(ruda_client_sync_collective(clients[1]), RUDA_ERROR_INVALID_HANDLE);
	/* nothing pending: sync answers at once */
	ck_assert_int_eq(ruda_client_sync_collective(clients[2]), RUDA_OK);
}
END_TEST

/* A participant that goes away fails the others instead of leaving them
 * waiting. */
START_TEST(all_reduce_participant_disconnects)
{
	uint8_t data[64] = {0};
	ruda_handle a, d;
	ruda_client_create(clients[0], data, 64, &a);
	ruda_client_empty(clients[0], 64, &d);
	/* the upload imports the arena first: done, the all-reduce below reaches
	 * rudad before the other participant's goodbye */
	ck_assert_int_eq(ruda_client_sync(clients[0]), RUDA_OK);
	ruda_device_id ids[2] = {ruda_client_device_id(clients[0]), ruda_client_device_id(clients[1])};
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F32, ids, 2,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ruda_client_close(clients[1]);
	clients[1] = NULL;
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_DISCONNECTED);
	char why[256];
	ruda_client_last_error(clients[0], why, sizeof(why));
	ck_assert_msg(strstr(why, "disconnected"), "%s", why);
	/* the connection still works */
	ck_assert_int_eq(ruda_client_sync(clients[0]), RUDA_OK);
	/* one that joined and then left: the other side fails as well */
	clients[1] = test_connect_device(&daemon_, "again", 1);
	ruda_handle b, db;
	ruda_client_create(clients[1], data, 64, &b);
	ruda_client_empty(clients[1], 64, &db);
	ruda_device_id three[3] = {ids[0], ids[1], ruda_client_device_id(clients[2])};
	ck_assert_int_eq(ruda_client_all_reduce(clients[1], b, db, RUDA_ELEM_F32, three, 3,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(clients[1]), RUDA_OK); /* the daemon has the call */
	ruda_client_close(clients[1]);
	clients[1] = NULL;
	ck_assert_int_eq(ruda_client_all_reduce(clients[0], a, d, RUDA_ELEM_F32, three, 3,
						RUDA_REDUCE_SUM),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_collective(clients[0]), RUDA_ERROR_DISCONNECTED);
}
END_TEST

/* The new buffer counts against the target client's quota. */
START_TEST(to_client_quota)
{
	struct test_daemon d;
	test_daemon_start(&d, (const char *const[]){"--device", "0,0", "--set",
						     "max_memory_per_client=5M", NULL});
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d.socket_path, .device_index = 0};
	ruda_client *a = NULL, *b = NULL;
	ck_assert_int_eq(ruda_client_connect(&o, &a), RUDA_OK);
	o.device_index = 1;
	ck_assert_int_eq(ruda_client_connect(&o, &b), RUDA_OK);
	ruda_handle big, held, moved;
	ck_assert_int_eq(ruda_client_empty(a, 4 << 20, &big), RUDA_OK);
	ck_assert_int_eq(ruda_client_empty(b, 3 << 20, &held), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(a, big, b, RUDA_ELEM_U8, &moved), RUDA_ERROR_QUOTA);
	char why[256];
	ruda_client_last_error(a, why, sizeof(why));
	ck_assert_msg(strstr(why, "quota"), "%s", why);
	/* b's id was not taken: a buffer it makes now works */
	ruda_handle small;
	ck_assert_int_eq(ruda_client_empty(b, 4096, &small), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(b, held), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	ck_assert_int_eq(ruda_client_to_client(a, big, b, RUDA_ELEM_U8, &moved), RUDA_OK);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(b, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 2);
	ck_assert_uint_ge(u.bytes_in_use, 4 << 20);
	ruda_client_close(a);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

/* Logical devices on one physical device share its heap: with device 0
 * holding the heap, device 1 is refused (each reserved up to the whole
 * heap of its own: 3.5 GiB of lavapipe's 2 GiB), and gets memory back once
 * device 0 releases, even memory device 0 kept for reuse. Buffers are made
 * with try_empty and never used, so no page is touched. */
START_TEST(logical_devices_share_the_heap)
{
	struct test_daemon d;
	test_daemon_start(&d, (const char *const[]){"--device", "0,0", "--set",
						     "max_memory_per_client=unlimited", "--set",
						     "max_memory_per_uid=unlimited", NULL});
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d.socket_path, .device_index = 0};
	ruda_client *a = NULL, *b = NULL;
	ck_assert_int_eq(ruda_client_connect(&o, &a), RUDA_OK);
	o.device_index = 1;
	ck_assert_int_eq(ruda_client_connect(&o, &b), RUDA_OK);
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(a, &p), RUDA_OK);
	/* 256 MiB, or a 64th of a larger heap (an H200's 140 GiB) */
	uint64_t heap = p.device_local_bytes, chunk = 256ull << 20;
	if (heap / 64 > chunk)
		chunk = heap / 64;
	if (chunk > p.max_buffer_size)
		chunk = p.max_buffer_size;
	enum { MAX = 512 };
	static ruda_handle h[MAX];
	int n = 0;
	ruda_status st;
	while (n < MAX && (st = ruda_client_try_empty(a, chunk, &h[n])) == RUDA_OK)
		n++;
	ck_assert_int_lt(n, MAX);
	ck_assert_int_eq(st, RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_uint_le(n * chunk, heap);
	ck_assert_uint_ge(n, 1);
	/* device 1 is refused: the heap is device 0's now */
	ruda_handle other;
	ck_assert_int_eq(ruda_client_try_empty(b, chunk, &other), RUDA_ERROR_OUT_OF_MEMORY);
	char why[256];
	ruda_client_last_error(b, why, sizeof(why));
	ck_assert_msg(strstr(why, "allocating"), "%s", why);
	ruda_memory_usage ua = RUDA_MEMORY_USAGE_INIT, ub = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(a, &ua), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(b, &ub), RUDA_OK);
	ck_assert_uint_le(ua.device_bytes_reserved + ub.device_bytes_reserved, heap);
	ck_assert_uint_eq(ub.allocations, 0);
	/* one released on device 0 (freed at once: never used) is kept there
	 * for reuse; device 1's allocation comes first and gets it */
	ck_assert_int_eq(ruda_client_release(a, h[--n]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_try_empty(b, chunk, &other), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(a, &ua), RUDA_OK);
	ck_assert_int_eq(ruda_client_memory_usage(b, &ub), RUDA_OK);
	ck_assert_uint_le(ua.device_bytes_reserved + ub.device_bytes_reserved, heap);
	ck_assert_uint_ge(ub.device_bytes_reserved, chunk);
	/* device 0 is refused in turn */
	ruda_handle again;
	ck_assert_int_eq(ruda_client_try_empty(a, chunk, &again), RUDA_ERROR_OUT_OF_MEMORY);
	/* with room again, device 1's data round-trips */
	ck_assert_int_eq(ruda_client_release(b, other), RUDA_OK);
	ck_assert_int_eq(ruda_client_release(a, h[--n]), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(a), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(b), RUDA_OK);
	uint8_t data[4096], back[4096];
	test_fill_random(data, sizeof(data), 5);
	ruda_handle small;
	ck_assert_int_eq(ruda_client_create(b, data, sizeof(data), &small), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(b, small, back), RUDA_OK);
	ck_assert_mem_eq(data, back, sizeof(data));
	ruda_client_close(a);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

Suite *devices_suite(void)
{
	Suite *s = suite_create("devices");
	TCase *tc = tcase_create("devices");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, enumerate);
	tcase_add_test(tc, connect_by_id);
	tcase_add_test(tc, properties_values);
	tcase_add_test(tc, utilization_counts_work);
	tcase_add_test(tc, to_client_between_devices);
	tcase_add_test(tc, to_client_slice_and_tensor);
	tcase_add_test(tc, to_client_refusals);
	tcase_add_test(tc, to_client_other_process_refused);
	tcase_add_test(tc, to_client_bad_fields_raw);
	tcase_add_test(tc, all_reduce_two_devices);
	tcase_add_test(tc, all_reduce_three_devices);
	tcase_add_test(tc, all_reduce_in_order);
	tcase_add_test(tc, all_reduce_mismatch);
	tcase_add_test(tc, all_reduce_bad_calls);
	tcase_add_test(tc, all_reduce_participant_disconnects);
	suite_add_tcase(s, tc);
	TCase *own = tcase_create("own daemon");
	tcase_set_timeout(own, 60);
	tcase_add_test(own, to_client_quota);
	tcase_add_test(own, logical_devices_share_the_heap);
	suite_add_tcase(s, own);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(devices_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
