/* Tensors through rudad: the layouts create_tensor(s) chooses, allocations
 * shared by one call, and strided reads packed on the device or the host. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_tensor");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

static ruda_layout_desc desc2(ruda_layout_strategy strategy, uint64_t rows, uint64_t cols,
			      uint64_t elem_size)
{
	return (ruda_layout_desc){.struct_size = sizeof(ruda_layout_desc),
		.strategy = strategy, .rank = 2, .shape = {rows, cols},
				  .elem_size = elem_size};
}

/* The copy descriptor of a created tensor. */
static ruda_copy_desc copy_of(const ruda_layout_desc *d, const ruda_layout *l)
{
	ruda_copy_desc c = {.struct_size = sizeof(ruda_copy_desc),
		.handle = l->handle, .rank = d->rank, .elem_size = d->elem_size};
	memcpy(c.shape, d->shape, sizeof(c.shape));
	memcpy(c.strides, l->strides, sizeof(c.strides));
	return c;
}

/* Create a tensor from random bytes, read it back through its strides and
 * compare byte for byte; returns the layout chosen. */
static ruda_layout round_trip(const ruda_layout_desc *d, uint64_t seed)
{
	uint64_t bytes = d->elem_size;
	for (uint32_t k = 0; k < d->rank; k++)
		bytes *= d->shape[k];
	uint8_t *data = malloc(bytes), *back = malloc(bytes);
	test_fill_random(data, bytes, seed);
	ruda_layout l = RUDA_LAYOUT_INIT;
	ck_assert_int_eq(ruda_client_create_tensor(client, d, data, &l), RUDA_OK);
	ruda_copy_desc c = copy_of(d, &l);
	void *dst = back;
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_OK);
	ck_assert_int_eq(memcmp(data, back, bytes), 0);
	free(data);
	free(back);
	return l;
}

START_TEST(contiguous_tensor_round_trip)
{
	ruda_layout_desc d = {.struct_size = sizeof(ruda_layout_desc),
		.strategy = RUDA_LAYOUT_CONTIGUOUS, .rank = 3, .shape = {3, 5, 1001},
			      .elem_size = 4};
	ruda_layout l = round_trip(&d, 1);
	ck_assert_uint_eq(l.rank, 3);
	ck_assert_uint_eq(l.strides[0], 5 * 1001);
	ck_assert_uint_eq(l.strides[1], 1001);
	ck_assert_uint_eq(l.strides[2], 1);
	ck_assert_uint_eq(l.handle.size, 3 * 5 * 1001 * 4);
	ck_assert(ruda_client_can_read_tensor(client, 3, d.shape, l.strides));
}
END_TEST

/* Rows of 4004 bytes are pitched to 4096: the padding is small, the rows
 * aligned. The bytes lie where the strides say, and read back packed. */
START_TEST(optimized_pitches_rows)
{
	ruda_layout_desc d = desc2(RUDA_LAYOUT_OPTIMIZED, 37, 1001, 4);
	ruda_layout l = round_trip(&d, 2);
	ck_assert_uint_eq(l.strides[0], 1024);
	ck_assert_uint_eq(l.strides[1], 1);
	ck_assert_uint_eq(l.handle.size, 37 * 4096);
	/* rows at a pitch are read as they lie (the padding dropped on the
	 * host), so the layout create_tensor chose is readable; a pitch
	 * shorter than the row, or rows not packed over the pitch, are not */
	ck_assert(ruda_client_can_read_tensor(client, 2, d.shape, l.strides));
	const uint64_t short_pitch[2] = {1000, 1}, loose[3] = {1024 * 38, 1024, 1};
	ck_assert(!ruda_client_can_read_tensor(client, 2, d.shape, short_pitch));
	const uint64_t shape3[3] = {2, 37, 1001};
	ck_assert(!ruda_client_can_read_tensor(client, 3, shape3, loose));
	/* the raw buffer: row r starts at r * 4096 */
	uint8_t *data = malloc(37 * 4004), *raw = malloc(37 * 4096);
	test_fill_random(data, 37 * 4004, 2);
	ck_assert_int_eq(ruda_client_read_one(client, l.handle, raw), RUDA_OK);
	for (int r = 0; r < 37; r++)
		ck_assert_int_eq(memcmp(raw + r * 4096, data + r * 4004, 4004), 0);
	free(data);
	free(raw);
}
END_TEST

/* Where pitching would waste more than an eighth, Optimized stays packed;
 * rank-1 tensors are never pitched. */
START_TEST(optimized_stays_packed_where_pitch_would_waste)
{
	ruda_layout_desc d = desc2(RUDA_LAYOUT_OPTIMIZED, 300, 200, 4);
	ruda_layout l = round_trip(&d, 3);
	ck_assert_uint_eq(l.strides[0], 200);
	ruda_layout_desc v = {.struct_size = sizeof(ruda_layout_desc),
		.strategy = RUDA_LAYOUT_OPTIMIZED, .rank = 1, .shape = {4097},
			      .elem_size = 1};
	l = round_trip(&v, 4);
	ck_assert_uint_eq(l.strides[0], 1);
	/* an element size that does not divide the pitch alignment: packed */
	ruda_layout_desc odd = desc2(RUDA_LAYOUT_OPTIMIZED, 20, 1001, 3);
	l = round_trip(&odd, 5);
	ck_assert_uint_eq(l.strides[0], 1001);
}
END_TEST

/* Pitched tensors of 2-byte elements (read back through the host gather)
 * and of 16-byte elements (four words per element on the device). */
START_TEST(pitched_tensors_of_other_element_sizes)
{
	ruda_layout_desc h = desc2(RUDA_LAYOUT_OPTIMIZED, 10, 1500, 2);
	ruda_layout l = round_trip(&h, 6);
	ck_assert_uint_eq(l.strides[0], 1536);
	ruda_layout_desc v = desc2(RUDA_LAYOUT_OPTIMIZED, 5, 130, 16);
	l = round_trip(&v, 7);
	ck_assert_uint_eq(l.strides[0], 144);
	ruda_layout_desc e8 = {.struct_size = sizeof(ruda_layout_desc),
		.strategy = RUDA_LAYOUT_OPTIMIZED, .rank = 3,
			       .shape = {2, 3, 500}, .elem_size = 8};
	l = round_trip(&e8, 8);
	ck_assert_uint_eq(l.strides[1], 512);
	ck_assert_uint_eq(l.strides[0], 3 * 512);
}
END_TEST

/* A transposed view of a contiguous matrix, packed by the gather kernel. */
START_TEST(transposed_view_gathered)
{
	enum { ROWS = 64, COLS = 48 };
	uint32_t *m = malloc(ROWS * COLS * 4), *back = malloc(ROWS * COLS * 4);
	for (uint32_t i = 0; i < ROWS * COLS; i++)
		m[i] = i * 2654435761u;
	ruda_layout_desc d = desc2(RUDA_LAYOUT_CONTIGUOUS, ROWS, COLS, 4);
	ruda_layout l = RUDA_LAYOUT_INIT;
	ck_assert_int_eq(ruda_client_create_tensor(client, &d, m, &l), RUDA_OK);
	ruda_copy_desc t = {.struct_size = sizeof(ruda_copy_desc),
		.handle = l.handle, .rank = 2, .shape = {COLS, ROWS},
			    .strides = {1, COLS}, .elem_size = 4};
	ck_assert(!ruda_client_can_read_tensor(client, 2, t.shape, t.strides));
	void *dst = back;
	ck_assert_int_eq(ruda_client_read_tensor(client, &t, 1, &dst), RUDA_OK);
	for (uint32_t c = 0; c < COLS; c++)
		for (uint32_t r = 0; r < ROWS; r++)
			ck_assert_uint_eq(back[c * ROWS + r], m[r * COLS + c]);
	/* the same view with 1-byte elements goes through the host */
	uint8_t *bytes = (uint8_t *)back;
	ruda_copy_desc tb = {.struct_size = sizeof(ruda_copy_desc),
		.handle = l.handle, .rank = 2, .shape = {7, 5},
			     .strides = {1, 9}, .elem_size = 1};
	dst = bytes;
	ck_assert_int_eq(ruda_client_read_tensor(client, &tb, 1, &dst), RUDA_OK);
	for (uint32_t c = 0; c < 7; c++)
		for (uint32_t r = 0; r < 5; r++)
			ck_assert_uint_eq(bytes[c * 5 + r], ((uint8_t *)m)[r * 9 + c]);
	free(m);
	free(back);
}
END_TEST

/* Tensors of one call share one buffer at aligned offsets; it lives until
 * the last of them is released. */
START_TEST(tensors_of_one_call_share_a_buffer)
{
	ruda_layout_desc d[3] = {
		desc2(RUDA_LAYOUT_CONTIGUOUS, 3, 3, 4),
		desc2(RUDA_LAYOUT_OPTIMIZED, 17, 1001, 4),
		{.strategy = RUDA_LAYOUT_CONTIGUOUS, .rank = 1, .shape = {4097}, .elem_size = 1},
	};
	uint8_t *data[3], *back[3];
	uint64_t bytes[3] = {36, 17 * 4004, 4097};
	for (int i = 0; i < 3; i++) {
		data[i] = malloc(bytes[i]);
		back[i] = malloc(bytes[i]);
		test_fill_random(data[i], bytes[i], 10 + i);
	}
	ruda_layout l[3] = {RUDA_LAYOUT_INIT};
	ck_assert_int_eq(ruda_client_create_tensors(client, d, (const void *const *)data, 3, l),
			 RUDA_OK);
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &p);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(l[i].handle.id, l[0].handle.id);
		ck_assert_uint_eq(l[i].handle.offset % p.min_storage_buffer_offset_alignment, 0);
		if (i)
			ck_assert_uint_ge(l[i].handle.offset,
					  l[i - 1].handle.offset + l[i - 1].handle.size);
		ruda_copy_desc c = copy_of(&d[i], &l[i]);
		void *dst = back[i];
		ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_OK);
		ck_assert_int_eq(memcmp(data[i], back[i], bytes[i]), 0);
	}
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 1);
	ruda_client_release(client, l[0].handle);
	ruda_client_release(client, l[2].handle);
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 1);
	/* the survivor still reads */
	ruda_copy_desc c = copy_of(&d[1], &l[1]);
	void *dst = back[1];
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_OK);
	ck_assert_int_eq(memcmp(data[1], back[1], bytes[1]), 0);
	ruda_client_release(client, l[1].handle);
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0);
	for (int i = 0; i < 3; i++) {
		free(data[i]);
		free(back[i]);
	}
}
END_TEST

/* empty_tensors chooses the same layouts without uploading; a kernel-free
 * write through the strides reads back. */
START_TEST(empty_tensors_report_strides)
{
	ruda_layout_desc d[2] = {desc2(RUDA_LAYOUT_OPTIMIZED, 4, 1001, 4),
				 desc2(RUDA_LAYOUT_CONTIGUOUS, 4, 1001, 4)};
	ruda_layout l[2] = {RUDA_LAYOUT_INIT};
	ck_assert_int_eq(ruda_client_empty_tensors(client, d, 2, l), RUDA_OK);
	ck_assert_uint_eq(l[0].strides[0], 1024);
	ck_assert_uint_eq(l[1].strides[0], 1001);
	ck_assert_uint_eq(l[0].handle.id, l[1].handle.id);
	ruda_layout one = RUDA_LAYOUT_INIT;
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d[0], &one), RUDA_OK);
	ck_assert_uint_ne(one.handle.id, l[0].handle.id);
	uint32_t row[1001], back[4 * 1001];
	for (int i = 0; i < 1001; i++)
		row[i] = (uint32_t)i * 7u;
	for (int r = 0; r < 4; r++)
		ck_assert_int_eq(ruda_client_write(client, one.handle, r * 4096ull, row, sizeof(row)),
				 RUDA_OK);
	ruda_copy_desc c = copy_of(&d[0], &one);
	void *dst = back;
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_OK);
	for (int r = 0; r < 4; r++)
		ck_assert_int_eq(memcmp(back + r * 1001, row, sizeof(row)), 0);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

START_TEST(bad_tensor_arguments)
{
	ruda_layout l = RUDA_LAYOUT_INIT;
	ruda_layout_desc d = desc2(RUDA_LAYOUT_CONTIGUOUS, 2, 2, 4);
	d.rank = 0;
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_ERROR_INVALID_ARGUMENT);
	d.rank = RUDA_MAX_RANK + 1;
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_ERROR_INVALID_ARGUMENT);
	d = desc2(RUDA_LAYOUT_CONTIGUOUS, 2, 2, 0);
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_ERROR_INVALID_ARGUMENT);
	d = desc2(RUDA_LAYOUT_CONTIGUOUS, UINT64_MAX / 2, 4, 4);
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_ERROR_INVALID_ARGUMENT);
	d = desc2(RUDA_LAYOUT_CONTIGUOUS, 2, 2, 4);
	ck_assert_int_eq(ruda_client_create_tensor(client, &d, NULL, &l),
			 RUDA_ERROR_INVALID_ARGUMENT);
	/* a read whose strides reach past its buffer */
	ck_assert_int_eq(ruda_client_empty_tensor(client, &d, &l), RUDA_OK);
	ruda_copy_desc c = {.struct_size = sizeof(ruda_copy_desc),
		.handle = l.handle, .rank = 2, .shape = {2, 2}, .strides = {4, 1},
			    .elem_size = 4};
	uint8_t back[64];
	void *dst = back;
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst), RUDA_ERROR_OUT_OF_RANGE);
	c.elem_size = 0;
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst),
			 RUDA_ERROR_INVALID_ARGUMENT);
	c = (ruda_copy_desc){.struct_size = sizeof(ruda_copy_desc),
		.handle = l.handle, .rank = 9, .elem_size = 4};
	ck_assert_int_eq(ruda_client_read_tensor(client, &c, 1, &dst),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert(!ruda_client_can_read_tensor(client, 0, c.shape, c.strides));
	/* nothing asynchronous went wrong */
	ck_assert_int_eq(ruda_client_sync(client), RUDA_OK);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tensor");
	TCase *tc = tcase_create("tensor");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, contiguous_tensor_round_trip);
	tcase_add_test(tc, optimized_pitches_rows);
	tcase_add_test(tc, optimized_stays_packed_where_pitch_would_waste);
	tcase_add_test(tc, pitched_tensors_of_other_element_sizes);
	tcase_add_test(tc, transposed_view_gathered);
	tcase_add_test(tc, tensors_of_one_call_share_a_buffer);
	tcase_add_test(tc, empty_tensors_report_strides);
	tcase_add_test(tc, bad_tensor_arguments);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
