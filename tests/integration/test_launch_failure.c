/* A failed launch marks only the bindings its kernel may write: inputs it
 * only reads (GLSL `readonly buffer`: NonWritable in SPIR-V) keep their
 * bytes and stay readable, so one bad launch does not make a client's
 * weights unreadable. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N 4096u

static struct test_daemon daemon_;
static ruda_client *client;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
	client = test_connect(&daemon_, "test_launch_failure");
}

static void teardown(void)
{
	ruda_client_close(client);
	test_daemon_stop(&daemon_);
}

struct model {
	uint32_t w[N], x[N], o[N];
	ruda_handle hw, hx, ho;
	ruda_kernel k; /* weights_apply: w, x readonly; o read and written */
};

static struct model *model_new(ruda_client *c, uint64_t seed)
{
	struct model *m = calloc(1, sizeof(*m));
	ck_assert_ptr_nonnull(m);
	test_fill_random(m->w, sizeof(m->w), seed);
	test_fill_random(m->x, sizeof(m->x), seed + 1);
	test_fill_random(m->o, sizeof(m->o), seed + 2);
	ck_assert_int_eq(ruda_client_create(c, m->w, sizeof(m->w), &m->hw), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, m->x, sizeof(m->x), &m->hx), RUDA_OK);
	ck_assert_int_eq(ruda_client_create(c, m->o, sizeof(m->o), &m->ho), RUDA_OK);
	m->k = test_register(c, "tests/shaders/weights_apply", 3, 4);
	return m;
}

/* `h` reads back as exactly `expect` and carries no error. */
static void expect_bytes(ruda_client *c, ruda_handle h, const uint32_t *expect, const char *what)
{
	uint32_t *back = malloc(N * 4);
	ck_assert_int_eq(ruda_client_check(c, &h, 1), RUDA_OK);
	ck_assert_int_eq(ruda_client_sync_buffers(c, &h, 1), RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	ck_assert_msg(memcmp(back, expect, N * 4) == 0, "%s: bytes changed", what);
	free(back);
}

/* `h` carries `status` with `substring` in its reason. */
static void expect_marked(ruda_client *c, ruda_handle h, ruda_status status,
			  const char *substring)
{
	uint32_t *back = malloc(N * 4);
	char why[512];
	ck_assert_int_eq(ruda_client_check(c, &h, 1), status);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), status);
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, substring), "reason \"%s\" lacks \"%s\"", why, substring);
	free(back);
}

/* The model still works: o' = w*x + o, checked against the CPU. */
static void expect_launch_works(ruda_client *c, struct model *m)
{
	ruda_handle out;
	ck_assert_int_eq(ruda_client_create(c, m->o, sizeof(m->o), &out), RUDA_OK);
	ruda_handle bind[] = {m->hw, m->hx, out};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(c, m->k, (ruda_count){8, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	uint32_t *back = malloc(N * 4);
	ck_assert_int_eq(ruda_client_read_one(c, out, back), RUDA_OK);
	for (uint32_t i = 0; i < N; i++)
		ck_assert_uint_eq(back[i], m->w[i] * m->x[i] + m->o[i]);
	free(back);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
}

/* The output bound outside its buffer: refused when the request is handled. */
START_TEST(output_out_of_range_spares_inputs)
{
	struct model *m = model_new(client, 1);
	ruda_handle bad = {.id = m->ho.id, .offset = 0, .size = N * 4 + 256};
	ruda_handle bind[] = {m->hw, m->hx, bad};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);
	expect_marked(client, m->ho, RUDA_ERROR_OUT_OF_RANGE, "outside");
	expect_bytes(client, m->hw, m->w, "weights");
	expect_bytes(client, m->hx, m->x, "input");
	expect_launch_works(client, m);
	free(m);
}
END_TEST

/* An input bound outside its buffer: the launch fails, the output carries
 * it, and the input itself keeps its bytes (nothing wrote it). */
START_TEST(input_out_of_range_marks_output_only)
{
	struct model *m = model_new(client, 2);
	ruda_handle bad = {.id = m->hx.id, .offset = 256, .size = N * 4};
	ruda_handle bind[] = {m->hw, bad, m->ho};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);
	expect_marked(client, m->ho, RUDA_ERROR_OUT_OF_RANGE, "binding 1");
	expect_bytes(client, m->hw, m->w, "weights");
	expect_bytes(client, m->hx, m->x, "input");
	expect_launch_works(client, m);
	free(m);
}
END_TEST

/* Too many push-constant bytes, and too few bindings: the kernel is known,
 * so only its writable binding is marked. */
START_TEST(bad_arguments_mark_output_only)
{
	struct model *m = model_new(client, 3);
	ruda_handle bind[] = {m->hw, m->hx, m->ho};
	uint32_t push[2] = {N, 0};
	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 3, push, 8),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	expect_marked(client, m->ho, RUDA_ERROR_INVALID_ARGUMENT, "push-constant");
	expect_bytes(client, m->hw, m->w, "weights");
	expect_bytes(client, m->hx, m->x, "input");

	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 2, push, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	char why[256];
	ruda_client_last_error(client, why, sizeof(why));
	ck_assert_ptr_nonnull(strstr(why, "bindings given"));
	expect_bytes(client, m->hw, m->w, "weights after a binding-count error");
	expect_bytes(client, m->hx, m->x, "input after a binding-count error");
	expect_launch_works(client, m);
	free(m);
}
END_TEST

/* A launch reading a buffer that carries an error fails with it: the error
 * flows to what the launch would have written, not to its other inputs. */
START_TEST(marked_input_flows_to_output_only)
{
	struct model *m = model_new(client, 5);
	/* mark x: a failed launch that writes it (fill's binding is written) */
	ruda_kernel fill = test_register(client, "fill", 1, 8);
	ruda_handle misaligned = {.id = m->hx.id, .offset = 3, .size = 16};
	uint32_t fill_push[2] = {7, 4};
	ck_assert_int_eq(ruda_client_launch(client, fill, (ruda_count){1, 1, 1}, &misaligned, 1,
					    fill_push, 8),
			 RUDA_OK);
	ruda_handle bind[] = {m->hw, m->hx, m->ho};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_ARGUMENT);
	expect_marked(client, m->hx, RUDA_ERROR_INVALID_ARGUMENT, "offset");
	expect_marked(client, m->ho, RUDA_ERROR_INVALID_ARGUMENT, "offset");
	expect_bytes(client, m->hw, m->w, "weights");
	free(m);
}
END_TEST

/* An unknown kernel: nothing says what it would write, so every binding
 * carries the error. */
START_TEST(unknown_kernel_marks_every_binding)
{
	struct model *m = model_new(client, 6);
	ruda_handle bind[] = {m->hw, m->hx, m->ho};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(client, m->k + 1000, (ruda_count){8, 1, 1}, bind, 3,
					    &n, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_INVALID_HANDLE);
	expect_marked(client, m->hw, RUDA_ERROR_INVALID_HANDLE, "no kernel");
	expect_marked(client, m->hx, RUDA_ERROR_INVALID_HANDLE, "no kernel");
	expect_marked(client, m->ho, RUDA_ERROR_INVALID_HANDLE, "no kernel");
	free(m);
}
END_TEST

/* A client beside the failing one is untouched. */
START_TEST(other_client_unaffected)
{
	ruda_client *other = test_connect(&daemon_, "test_launch_failure_other");
	struct model *good = model_new(other, 7);
	struct model *m = model_new(client, 8);
	ruda_handle bad = {.id = m->ho.id, .offset = 0, .size = N * 4 + 256};
	ruda_handle bind[] = {m->hw, m->hx, bad};
	uint32_t n = N;
	ck_assert_int_eq(ruda_client_launch(client, m->k, (ruda_count){8, 1, 1}, bind, 3, &n, 4),
			 RUDA_OK);
	expect_launch_works(other, good);
	ck_assert_int_eq(ruda_client_sync(client), RUDA_ERROR_OUT_OF_RANGE);
	expect_bytes(client, m->hw, m->w, "weights");
	expect_bytes(other, good->hw, good->w, "other's weights");
	ruda_client_close(other);
	free(m);
	free(good);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("launch_failure");
	TCase *tc = tcase_create("poison");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, output_out_of_range_spares_inputs);
	tcase_add_test(tc, input_out_of_range_marks_output_only);
	tcase_add_test(tc, bad_arguments_mark_output_only);
	tcase_add_test(tc, marked_input_flows_to_output_only);
	tcase_add_test(tc, unknown_kernel_marks_every_binding);
	tcase_add_test(tc, other_client_unaffected);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
