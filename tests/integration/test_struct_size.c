/*
 * The size rule of ruda.h's growing structs: struct_size below the first
 * published size (or 0: not initialised) is refused before anything is
 * done; a caller built against a newer, larger struct works when its new
 * fields are 0 (in) and gets them zeroed (out); arrays step by the first
 * element's struct_size.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_struct_size");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

/* What a caller compiled against a later ruda.h passes: the struct of
 * today, then fields this libruda does not know. */
struct newer_options {
	ruda_connect_options o;
	uint64_t later_field;
};

START_TEST(connect_options_sizes)
{
	ruda_client *c = NULL;
	ruda_connect_options o = RUDA_CONNECT_OPTIONS_INIT;
	o.socket_path = daemon_.socket_path;
	char msg[512];

	o.struct_size = 0; /* = {0}: never initialised */
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_null(c);
	ruda_client_last_error(NULL, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "RUDA_CONNECT_OPTIONS_INIT"), "%s", msg);
	o.struct_size = (uint32_t)offsetof(ruda_connect_options, arena_size); /* cut short */
	ck_assert_int_eq(ruda_client_connect(&o, &c), RUDA_ERROR_INVALID_ARGUMENT);

	struct newer_options n = {.o = RUDA_CONNECT_OPTIONS_INIT};
	n.o.socket_path = daemon_.socket_path;
	n.o.client_name = "newer";
	n.o.struct_size = sizeof(n);
	ck_assert_int_eq(ruda_client_connect(&n.o, &c), RUDA_OK);
	ruda_client_close(c);
	c = NULL;
	n.later_field = 1; /* asks for something this libruda cannot do */
	ck_assert_int_eq(ruda_client_connect(&n.o, &c), RUDA_ERROR_UNSUPPORTED);
	ck_assert_ptr_null(c);
	ruda_client_last_error(NULL, msg, sizeof(msg));
	ck_assert_msg(strstr(msg, "does not know"), "%s", msg);
}
END_TEST

START_TEST(out_structs_sizes)
{
	/* too small: nothing written */
	ruda_memory_usage u;
	memset(&u, 0xa5, sizeof(u));
	u.struct_size = 8;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_uint_eq(u.allocations, 0xa5a5a5a5a5a5a5a5ull);
	ruda_daemon_stats s = {0};
	ck_assert_int_eq(ruda_client_daemon_stats(client, &s), RUDA_ERROR_INVALID_ARGUMENT);
	ruda_device_properties p = {0};
	ck_assert_int_eq(ruda_client_properties(client, &p), RUDA_ERROR_INVALID_ARGUMENT);

	/* larger (a newer caller): the known fields, zeroes after them, and
	 * struct_size left as given */
	struct {
		ruda_device_properties p;
		uint8_t later[64];
	} big;
	memset(&big, 0xa5, sizeof(big));
	big.p.struct_size = sizeof(big);
	ck_assert_int_eq(ruda_client_properties(client, &big.p), RUDA_OK);
	ck_assert_uint_eq(big.p.struct_size, sizeof(big));
	ck_assert_uint_ne(big.p.max_buffer_size, 0);
	ck_assert_uint_eq(big.p.features.struct_size, sizeof(ruda_features));
	for (size_t i = 0; i < sizeof(big.later); i++)
		ck_assert_uint_eq(big.later[i], 0);
	ruda_device_properties same = RUDA_DEVICE_PROPERTIES_INIT;
	ck_assert_int_eq(ruda_client_properties(client, &same), RUDA_OK);
	ck_assert_int_eq(memcmp(&same.index, &big.p.index,
				sizeof(same) - offsetof(ruda_device_properties, index)),
			 0);
}
END_TEST

/* Layout descriptors and layouts of a larger (newer) size: the library
 * steps through both arrays by the caller's size. */
struct newer_desc {
	ruda_layout_desc d;
	uint32_t later;
};
struct newer_layout {
	ruda_layout l;
	uint64_t later[2];
};

START_TEST(arrays_step_by_struct_size)
{
	struct newer_desc d[2];
	memset(d, 0, sizeof(d));
	for (int i = 0; i < 2; i++) {
		d[i].d.strategy = RUDA_LAYOUT_CONTIGUOUS;
		d[i].d.rank = 2;
		d[i].d.shape[0] = 3 + (uint64_t)i;
		d[i].d.shape[1] = 5;
		d[i].d.elem_size = 4;
	}
	d[0].d.struct_size = sizeof(d[0]); /* the others' are not read */
	struct newer_layout l[2];
	memset(l, 0xa5, sizeof(l));
	l[0].l.struct_size = sizeof(l[0]);
	ck_assert_int_eq(ruda_client_empty_tensors(client, &d[0].d, 2, &l[0].l), RUDA_OK);
	for (int i = 0; i < 2; i++) {
		ck_assert_uint_eq(l[i].l.struct_size, sizeof(l[0]));
		ck_assert_uint_eq(l[i].l.rank, 2);
		ck_assert_uint_eq(l[i].l.strides[0], 5);
		ck_assert_uint_eq(l[i].l.strides[1], 1);
		ck_assert_uint_eq(l[i].l.handle.size, (3u + (unsigned)i) * 5 * 4);
		ck_assert_uint_eq(l[i].later[0], 0);
		ck_assert_uint_eq(l[i].later[1], 0);
	}
	ck_assert_uint_eq(l[0].l.handle.id, l[1].l.handle.id);

	/* and the data went where the strides say */
	float row[5] = {1, 2, 3, 4, 5};
	ck_assert_int_eq(ruda_client_write(client, l[1].l.handle, 4 * 5 * 3, row, sizeof(row)),
			 RUDA_OK);
	struct {
		ruda_copy_desc c;
		uint16_t later;
	} c = {.c = RUDA_COPY_DESC_INIT};
	c.c.struct_size = sizeof(c);
	c.c.handle = l[1].l.handle;
	c.c.rank = 2;
	c.c.shape[0] = 4;
	c.c.shape[1] = 5;
	c.c.strides[0] = 5;
	c.c.strides[1] = 1;
	c.c.elem_size = 4;
	float back[20];
	void *dst[] = {back};
	ck_assert_int_eq(ruda_client_read_tensor(client, &c.c, 1, dst), RUDA_OK);
	ck_assert_int_eq(memcmp(back + 15, row, sizeof(row)), 0);
	ruda_client_release(client, l[0].l.handle);
	ruda_client_release(client, l[1].l.handle);

	/* an element size below the first published one */
	d[0].d.struct_size = 8;
	ck_assert_int_eq(ruda_client_empty_tensors(client, &d[0].d, 2, &l[0].l),
			 RUDA_ERROR_INVALID_ARGUMENT);
	d[0].d.struct_size = sizeof(d[0]);
	l[0].l.struct_size = 0;
	ck_assert_int_eq(ruda_client_empty_tensors(client, &d[0].d, 2, &l[0].l),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ruda_memory_usage u = RUDA_MEMORY_USAGE_INIT;
	ck_assert_int_eq(ruda_client_memory_usage(client, &u), RUDA_OK);
	ck_assert_uint_eq(u.allocations, 0); /* nothing was allocated by the refusals */
}
END_TEST

START_TEST(kernel_desc_sizes)
{
	size_t size;
	uint32_t *spirv = test_load_spirv("fill", &size);
	ruda_kernel_desc k = {.struct_size = 4, .spirv = spirv, .spirv_size = size,
			      .entry_point = "main", .binding_count = 1, .push_constant_size = 8};
	ruda_kernel kernel;
	ck_assert_int_eq(ruda_client_kernel_register(client, &k, &kernel),
			 RUDA_ERROR_INVALID_ARGUMENT);
	k.struct_size = sizeof(k);
	ck_assert_int_eq(ruda_client_kernel_register(client, &k, &kernel), RUDA_OK);
	free(spirv);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("struct_size");
	TCase *tc = tcase_create("struct_size");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, connect_options_sizes);
	tcase_add_test(tc, out_structs_sizes);
	tcase_add_test(tc, arrays_step_by_struct_size);
	tcase_add_test(tc, kernel_desc_sizes);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
