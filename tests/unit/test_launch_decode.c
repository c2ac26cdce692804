/* rudad's launch decoder (daemon/common/launch_decode.c) against protobuf-c: it
 * takes what libruda and protobuf-c write, and whatever it takes means
 * what protobuf-c says it means. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../daemon/common/launch_decode.h"
#include "../../libclient/launch_wire.h"
#include "harness.h"

/* The fast decoding of `buf` agrees with protobuf-c's, when there is one. */
static int agrees(const uint8_t *buf, size_t len)
{
	struct ruda_launch_frame f;
	if (!ruda__launch_decode(buf, len, &f))
		return 0;
	Ruda__Request *r = ruda__request__unpack(NULL, len, buf);
	ck_assert_msg(r, "fast decoding took what protobuf-c refuses");
	ck_assert_int_eq(r->body_case, RUDA__REQUEST__BODY_LAUNCH);
	ck_assert_uint_eq(f.request.id, r->id);
	ck_assert_uint_eq(f.request.stream, r->stream);
	const Ruda__Launch *a = &f.launch, *b = r->launch;
	ck_assert_uint_eq(a->kernel, b->kernel);
	ck_assert_uint_eq(a->count_x, b->count_x);
	ck_assert_uint_eq(a->count_y, b->count_y);
	ck_assert_uint_eq(a->count_z, b->count_z);
	ck_assert_int_eq(a->unchecked, b->unchecked);
	ck_assert_uint_eq(a->push_constants.len, b->push_constants.len);
	if (a->push_constants.len)
		ck_assert(memcmp(a->push_constants.data, b->push_constants.data,
				 a->push_constants.len) == 0);
	ck_assert_uint_eq(a->n_bindings, b->n_bindings);
	for (size_t i = 0; i < a->n_bindings; i++) {
		ck_assert_uint_eq(a->bindings[i]->handle, b->bindings[i]->handle);
		ck_assert_uint_eq(a->bindings[i]->offset, b->bindings[i]->offset);
		ck_assert_uint_eq(a->bindings[i]->size, b->bindings[i]->size);
	}
	ck_assert_int_eq(!a->dynamic_count, !b->dynamic_count);
	if (a->dynamic_count) {
		ck_assert_uint_eq(a->dynamic_count->handle, b->dynamic_count->handle);
		ck_assert_uint_eq(a->dynamic_count->offset, b->dynamic_count->offset);
	}
	ruda__request__free_unpacked(r, NULL);
	return 1;
}

static size_t encode(const struct ruda_launch_wire *w, uint8_t *buf)
{
	size_t n = ruda__launch_wire_size(w);
	ruda__launch_wire_encode(w, buf);
	return n;
}

START_TEST(takes_what_libruda_writes)
{
	static uint8_t buf[4096];
	uint8_t push[256];
	memset(push, 0x11, sizeof(push));
	ruda_handle b[64];
	for (int i = 0; i < 64; i++)
		b[i] = (ruda_handle){.id = (uint64_t)i * 977, .offset = (uint64_t)i << 30, .size = (uint64_t)i};
	ruda_handle dyn = {.id = 3, .offset = 16};
	struct ruda_launch_wire w = {.id = 1, .kernel = 2, .count = {1, 1, 1}, .bindings = b,
				     .nbindings = 1, .push = push, .push_size = 8};
	ck_assert(agrees(buf, encode(&w, buf)));
	w.nbindings = 64;
	w.push_size = 256;
	w.unchecked = 1;
	w.stream = 64;
	w.dynamic = &dyn;
	w.id = UINT64_MAX;
	w.count[2] = UINT32_MAX;
	ck_assert(agrees(buf, encode(&w, buf)));
	struct ruda_launch_wire empty = {0};
	ck_assert(agrees(buf, encode(&empty, buf)));
}
END_TEST

/* Not canonical, or not a launch: left to protobuf-c. */
START_TEST(leaves_the_rest)
{
	static const uint8_t cases[][16] = {
		{0x4a, 0x02, 0x08, 0x00},       /* kernel 0 written out */
		{0x4a, 0x04, 0x10, 0x01, 0x08, 0x01}, /* fields out of order */
		{0x4a, 0x03, 0x08, 0x81, 0x00}, /* overlong varint */
		{0x4a, 0x02, 0x40, 0x01},       /* unknown field 8 */
		{0x4a, 0x02, 0x38, 0x02},       /* unchecked = 2 */
		{0x4a, 0x06, 0x10, 0x80, 0x80, 0x80, 0x80, 0x10}, /* count_x over 32 bits */
		{0x08, 0x01, 0x08, 0x02, 0x4a, 0x00}, /* id twice */
		{0x08, 0x01},                   /* no launch */
		{0x5a, 0x00},                   /* a Flush */
		{0x4a, 0x05, 0x2a, 0x02, 0x08}, /* binding cut short */
	};
	static const size_t lens[] = {4, 6, 5, 4, 4, 8, 6, 2, 2, 5};
	struct ruda_launch_frame f;
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		ck_assert_msg(!ruda__launch_decode(cases[i], lens[i], &f), "case %zu taken", i);
}
END_TEST

/* Every byte of an encoding changed every way: what the fast path takes,
 * protobuf-c reads the same. */
START_TEST(mutations_agree)
{
	static uint8_t good[1024], buf[1024];
	uint32_t push[4] = {1, 2, 3, 4};
	ruda_handle b[3] = {{1, 0, 0}, {2, 256, 1024}, {300, 5, 7}};
	ruda_handle dyn = {.id = 9, .offset = 4};
	struct ruda_launch_wire w = {.id = 1234, .stream = 2, .kernel = 7, .count = {3, 2, 1},
				     .bindings = b, .nbindings = 3, .push = push,
				     .push_size = sizeof(push), .unchecked = 1, .dynamic = &dyn};
	size_t n = encode(&w, good);
	int taken = 0;
	for (size_t i = 0; i < n; i++)
		for (int v = 0; v < 256; v++) {
			memcpy(buf, good, n);
			buf[i] = (uint8_t)v;
			taken += agrees(buf, n);
			taken += agrees(buf, i); /* cut short there */
		}
	ck_assert_int_gt(taken, 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("launch_decode");
	TCase *tc = tcase_create("launch_decode");
	tcase_set_timeout(tc, 60); /* a loaded machine; nothing here waits */
	tcase_add_test(tc, takes_what_libruda_writes);
	tcase_add_test(tc, leaves_the_rest);
	tcase_add_test(tc, mutations_agree);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
