/* The hand-encoded Launch request (libclient/launch_wire.c) is byte for
 * byte what protobuf-c packs for the same request. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../libclient/launch_wire.h"
#include "harness.h"
#include "ruda.pb-c.h"

/* protobuf-c's bytes for `w`. */
static uint8_t *reference(const struct ruda_launch_wire *w, size_t *len)
{
	Ruda__Binding b[8];
	Ruda__Binding *bp[8];
	for (size_t i = 0; i < w->nbindings; i++) {
		ruda__binding__init(&b[i]);
		b[i].handle = w->bindings[i].id;
		b[i].offset = w->bindings[i].offset;
		b[i].size = w->bindings[i].size;
		bp[i] = &b[i];
	}
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = w->kernel;
	l.count_x = w->count[0];
	l.count_y = w->count[1];
	l.count_z = w->count[2];
	l.n_bindings = w->nbindings;
	l.bindings = bp;
	l.push_constants.data = (uint8_t *)w->push;
	l.push_constants.len = w->push_size;
	l.unchecked = w->unchecked;
	Ruda__DynamicCount dc = RUDA__DYNAMIC_COUNT__INIT;
	if (w->dynamic) {
		dc.handle = w->dynamic->id;
		dc.offset = w->dynamic->offset;
		l.dynamic_count = &dc;
	}
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = w->id;
	req.stream = w->stream;
	req.body_case = RUDA__REQUEST__BODY_LAUNCH;
	req.launch = &l;
	*len = ruda__request__get_packed_size(&req);
	uint8_t *buf = malloc(*len);
	ck_assert_uint_eq(ruda__request__pack(&req, buf), *len);
	return buf;
}

static void same_as_protobuf(const struct ruda_launch_wire *w)
{
	size_t len;
	uint8_t *want = reference(w, &len);
	ck_assert_uint_eq(ruda__launch_wire_size(w), len);
	uint8_t *got = malloc(len + 1);
	got[len] = 0xa5; /* not written past the end */
	ruda__launch_wire_encode(w, got);
	ck_assert_msg(memcmp(got, want, len) == 0, "encodings differ");
	ck_assert_uint_eq(got[len], 0xa5);
	Ruda__Request *back = ruda__request__unpack(NULL, len, got);
	ck_assert_ptr_nonnull(back);
	ck_assert_int_eq(back->body_case, RUDA__REQUEST__BODY_LAUNCH);
	ck_assert_uint_eq(back->launch->n_bindings, w->nbindings);
	ruda__request__free_unpacked(back, NULL);
	free(got);
	free(want);
}

START_TEST(typical_launches)
{
	uint32_t push[2] = {7, 256};
	ruda_handle b[3] = {{1, 0, 0}, {2, 256, 1024}, {3, 0, 4}};
	struct ruda_launch_wire w = {
		.id = 5, .kernel = 1, .count = {1, 1, 1}, .bindings = b, .nbindings = 1,
		.push = push, .push_size = sizeof(push),
	};
	same_as_protobuf(&w);
	w.nbindings = 3;
	w.stream = 3;
	same_as_protobuf(&w);
	w.unchecked = 1;
	same_as_protobuf(&w);
}
END_TEST

/* Zero fields are left out; big values take long varints. */
START_TEST(edge_values)
{
	uint8_t push[256];
	memset(push, 0x3c, sizeof(push));
	ruda_handle b[2] = {{0, 0, 0}, {UINT64_MAX, UINT64_MAX - 1, 1ull << 35}};
	ruda_handle dyn = {.id = 1ull << 40, .offset = 20};
	struct ruda_launch_wire w = {0};
	same_as_protobuf(&w); /* everything zero: an empty Launch */
	w = (struct ruda_launch_wire){
		.id = UINT64_MAX, .stream = UINT32_MAX, .kernel = 1ull << 62,
		.count = {0, 65535, UINT32_MAX}, .bindings = b, .nbindings = 2,
		.push = push, .push_size = sizeof(push), .dynamic = &dyn,
	};
	same_as_protobuf(&w);
	ruda_handle zero = {0};
	w.dynamic = &zero; /* an empty DynamicCount is still there */
	same_as_protobuf(&w);
	w.push_size = 127;
	same_as_protobuf(&w);
	w.push_size = 128;
	same_as_protobuf(&w);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("launch_wire");
	TCase *tc = tcase_create("launch_wire");
	tcase_add_test(tc, typical_launches);
	tcase_add_test(tc, edge_values);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
