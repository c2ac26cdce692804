/* Unit tests for the generated wire messages (proto/ruda.proto via
 * protobuf-c): round trips, unknown fields, truncation. */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#include "ruda.pb-c.h"

/* Packed bytes of a request; *len gets the size. */
static uint8_t *pack_request(const Ruda__Request *req, size_t *len)
{
	*len = ruda__request__get_packed_size(req);
	uint8_t *buf = malloc(*len ? *len : 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(ruda__request__pack(req, buf), *len);
	return buf;
}

static uint8_t *pack_reply(const Ruda__Reply *rep, size_t *len)
{
	*len = ruda__reply__get_packed_size(rep);
	uint8_t *buf = malloc(*len ? *len : 1);
	ck_assert_ptr_nonnull(buf);
	ck_assert_uint_eq(ruda__reply__pack(rep, buf), *len);
	return buf;
}

static Ruda__Request *round_trip_request(const Ruda__Request *req)
{
	size_t len;
	uint8_t *buf = pack_request(req, &len);
	Ruda__Request *out = ruda__request__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(out);
	return out;
}

/* Bytes of a request carrying only `id`: where the body starts. */
static size_t id_only_size(uint64_t id)
{
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = id;
	return ruda__request__get_packed_size(&req);
}

START_TEST(request_hello)
{
	Ruda__Hello h = RUDA__HELLO__INIT;
	h.protocol_version = 3;
	h.client_name = "unit-test client";
	h.device_index = 2;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1;
	req.body_case = RUDA__REQUEST__BODY_HELLO;
	req.hello = &h;

	Ruda__Request *out = round_trip_request(&req);
	ck_assert_uint_eq(out->id, 1);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY_HELLO);
	ck_assert_ptr_nonnull(out->hello);
	ck_assert_uint_eq(out->hello->protocol_version, 3);
	ck_assert_str_eq(out->hello->client_name, "unit-test client");
	ck_assert_uint_eq(out->hello->device_index, 2);
	ruda__request__free_unpacked(out, NULL);
}
END_TEST

START_TEST(request_write)
{
	Ruda__Write w = RUDA__WRITE__INIT;
	w.handle = UINT64_MAX; /* full 64-bit range survives the varints */
	w.offset = 1ull << 40;
	w.arena_offset = 4096;
	w.size = 123456789;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 0xfedcba9876543210ull;
	req.body_case = RUDA__REQUEST__BODY_WRITE;
	req.write = &w;

	Ruda__Request *out = round_trip_request(&req);
	ck_assert_uint_eq(out->id, 0xfedcba9876543210ull);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY_WRITE);
	ck_assert_uint_eq(out->write->handle, UINT64_MAX);
	ck_assert_uint_eq(out->write->offset, 1ull << 40);
	ck_assert_uint_eq(out->write->arena_offset, 4096);
	ck_assert_uint_eq(out->write->size, 123456789);
	ruda__request__free_unpacked(out, NULL);
}
END_TEST

START_TEST(request_launch)
{
	Ruda__Binding b[3] = {RUDA__BINDING__INIT, RUDA__BINDING__INIT, RUDA__BINDING__INIT};
	Ruda__Binding *bp[3] = {&b[0], &b[1], &b[2]};
	for (int i = 0; i < 3; i++) {
		b[i].handle = 10 + (uint64_t)i;
		b[i].offset = 256 * (uint64_t)i;
		b[i].size = i == 1 ? 0 : 1024; /* 0 = to the end, a default on the wire */
	}
	uint8_t push[20];
	test_fill_random(push, sizeof(push), 5);
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = 7;
	l.count_x = 65535;
	l.count_y = 2;
	l.count_z = 1;
	l.n_bindings = 3;
	l.bindings = bp;
	l.push_constants.len = sizeof(push);
	l.push_constants.data = push;
	l.unchecked = 1;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 99;
	req.body_case = RUDA__REQUEST__BODY_LAUNCH;
	req.launch = &l;

	Ruda__Request *out = round_trip_request(&req);
	ck_assert_uint_eq(out->id, 99);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY_LAUNCH);
	const Ruda__Launch *o = out->launch;
	ck_assert_uint_eq(o->kernel, 7);
	ck_assert_uint_eq(o->count_x, 65535);
	ck_assert_uint_eq(o->count_y, 2);
	ck_assert_uint_eq(o->count_z, 1);
	ck_assert_int_eq(o->unchecked, 1);
	ck_assert_uint_eq(o->n_bindings, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(o->bindings[i]->handle, 10 + (uint64_t)i);
		ck_assert_uint_eq(o->bindings[i]->offset, 256 * (uint64_t)i);
		ck_assert_uint_eq(o->bindings[i]->size, i == 1 ? 0 : 1024);
	}
	ck_assert_uint_eq(o->push_constants.len, sizeof(push));
	ck_assert_mem_eq(o->push_constants.data, push, sizeof(push));
	ruda__request__free_unpacked(out, NULL);

	/* no bindings, no push constants: empty repeated/bytes come back empty */
	Ruda__Launch e = RUDA__LAUNCH__INIT;
	e.kernel = 1;
	req.launch = &e;
	out = round_trip_request(&req);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY_LAUNCH);
	ck_assert_uint_eq(out->launch->n_bindings, 0);
	ck_assert_uint_eq(out->launch->push_constants.len, 0);
	ck_assert_int_eq(out->launch->unchecked, 0);
	ruda__request__free_unpacked(out, NULL);
}
END_TEST

START_TEST(reply_hello)
{
	uint8_t uuid[16];
	test_fill_random(uuid, sizeof(uuid), 9);
	uint32_t wg_count[3] = {65535, 65535, 65535}, wg_size[3] = {1024, 1024, 64};
	Ruda__DeviceInfo d = RUDA__DEVICE_INFO__INIT;
	d.index = 1;
	d.name = "Test GPU";
	d.vendor_id = 0x10de;
	d.device_id = 0x2335;
	d.type = RUDA__DEVICE_TYPE__DEVICE_DISCRETE_GPU;
	d.api_version = (1u << 22) | (3u << 12) | 280u;
	d.driver_version = 0x8a3f0000u;
	d.pipeline_cache_uuid.len = sizeof(uuid);
	d.pipeline_cache_uuid.data = uuid;
	d.max_buffer_size = 1ull << 36;
	d.max_storage_buffer_range = UINT32_MAX;
	d.min_storage_buffer_offset_alignment = 16;
	d.max_push_constants_size = 256;
	d.max_bindings = 8;
	d.n_max_workgroup_count = 3;
	d.max_workgroup_count = wg_count;
	d.n_max_workgroup_size = 3;
	d.max_workgroup_size = wg_size;
	d.max_workgroup_invocations = 1024;
	d.subgroup_size = 32;
	d.device_local_bytes = 141ull << 30;
	d.host_import = 1;
	Ruda__DeviceInfo *dp[1] = {&d};
	Ruda__HelloReply h = RUDA__HELLO_REPLY__INIT;
	h.protocol_version = 3;
	h.daemon_version = "0.1.0";
	h.session_id = 77;
	h.n_devices = 1;
	h.devices = dp;
	h.device_index = 1;
	h.arena_size = 64ull << 20;
	h.arena_data_offset = 4096;
	h.max_frame_size = 65536;
	h.max_fds_per_frame = 4;
	h.max_buffer_size = 1ull << 36;
	Ruda__Reply rep = RUDA__REPLY__INIT;
	rep.id = 1;
	rep.status = RUDA__STATUS__OK;
	rep.body_case = RUDA__REPLY__BODY_HELLO;
	rep.hello = &h;

	size_t len;
	uint8_t *buf = pack_reply(&rep, &len);
	Ruda__Reply *out = ruda__reply__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(out->id, 1);
	ck_assert_int_eq(out->status, RUDA__STATUS__OK);
	ck_assert_str_eq(out->message, "");
	ck_assert_int_eq(out->body_case, RUDA__REPLY__BODY_HELLO);
	const Ruda__HelloReply *oh = out->hello;
	ck_assert_uint_eq(oh->protocol_version, 3);
	ck_assert_str_eq(oh->daemon_version, "0.1.0");
	ck_assert_uint_eq(oh->session_id, 77);
	ck_assert_uint_eq(oh->device_index, 1);
	ck_assert_uint_eq(oh->arena_size, 64ull << 20);
	ck_assert_uint_eq(oh->arena_data_offset, 4096);
	ck_assert_uint_eq(oh->max_frame_size, 65536);
	ck_assert_uint_eq(oh->max_fds_per_frame, 4);
	ck_assert_uint_eq(oh->max_buffer_size, 1ull << 36);
	ck_assert_uint_eq(oh->n_devices, 1);
	const Ruda__DeviceInfo *od = oh->devices[0];
	ck_assert_uint_eq(od->index, 1);
	ck_assert_str_eq(od->name, "Test GPU");
	ck_assert_uint_eq(od->vendor_id, 0x10de);
	ck_assert_uint_eq(od->device_id, 0x2335);
	ck_assert_int_eq(od->type, RUDA__DEVICE_TYPE__DEVICE_DISCRETE_GPU);
	ck_assert_uint_eq(od->api_version, d.api_version);
	ck_assert_uint_eq(od->driver_version, 0x8a3f0000u);
	ck_assert_uint_eq(od->pipeline_cache_uuid.len, sizeof(uuid));
	ck_assert_mem_eq(od->pipeline_cache_uuid.data, uuid, sizeof(uuid));
	ck_assert_uint_eq(od->max_buffer_size, 1ull << 36);
	ck_assert_uint_eq(od->max_storage_buffer_range, UINT32_MAX);
	ck_assert_uint_eq(od->min_storage_buffer_offset_alignment, 16);
	ck_assert_uint_eq(od->max_push_constants_size, 256);
	ck_assert_uint_eq(od->max_bindings, 8);
	ck_assert_uint_eq(od->n_max_workgroup_count, 3);
	ck_assert_uint_eq(od->n_max_workgroup_size, 3);
	for (int i = 0; i < 3; i++) {
		ck_assert_uint_eq(od->max_workgroup_count[i], wg_count[i]);
		ck_assert_uint_eq(od->max_workgroup_size[i], wg_size[i]);
	}
	ck_assert_uint_eq(od->max_workgroup_invocations, 1024);
	ck_assert_uint_eq(od->subgroup_size, 32);
	ck_assert_uint_eq(od->device_local_bytes, 141ull << 30);
	ck_assert_int_eq(od->host_import, 1);
	ruda__reply__free_unpacked(out, NULL);
}
END_TEST

START_TEST(reply_error_status)
{
	/* non-OK status and message travel with no body */
	Ruda__Reply rep = RUDA__REPLY__INIT;
	rep.id = 12;
	rep.status = RUDA__STATUS__ERROR_INVALID_KERNEL;
	rep.message = "no GLCompute entry point named \"x\"";
	size_t len;
	uint8_t *buf = pack_reply(&rep, &len);
	Ruda__Reply *out = ruda__reply__unpack(NULL, len, buf);
	free(buf);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(out->id, 12);
	ck_assert_int_eq(out->status, RUDA__STATUS__ERROR_INVALID_KERNEL);
	ck_assert_str_eq(out->message, "no GLCompute entry point named \"x\"");
	ck_assert_int_eq(out->body_case, RUDA__REPLY__BODY__NOT_SET);
	ruda__reply__free_unpacked(out, NULL);
}
END_TEST

static size_t put_varint(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	do {
		p[n] = (uint8_t)(v & 0x7f);
		v >>= 7;
		if (v)
			p[n] |= 0x80;
		n++;
	} while (v);
	return n;
}

START_TEST(request_unknown_field)
{
	/* A newer client's request: id, then a body in a field number this
	 * schema does not have, then an unknown varint field. An older daemon
	 * must see the id and no body, not fail to parse. Field numbers are
	 * taken past the schema's highest so the test survives new fields. */
	const ProtobufCMessageDescriptor *desc = &ruda__request__descriptor;
	uint32_t top = desc->fields[desc->n_fields - 1].id; /* sorted by number */
	uint32_t body_field = top + 1, varint_field = top + 85;
	ck_assert_ptr_null(protobuf_c_message_descriptor_get_field(desc, body_field));
	ck_assert_ptr_null(protobuf_c_message_descriptor_get_field(desc, varint_field));

	uint8_t extra[32];
	size_t e = put_varint(extra, (uint64_t)body_field << 3 | 2); /* length-delimited */
	const uint8_t nested[] = {0x08, 0x2a, 0x10, 0x00};	     /* {1: 42, 2: 0} */
	extra[e++] = sizeof(nested);
	memcpy(extra + e, nested, sizeof(nested));
	e += sizeof(nested);
	size_t varint_at = e;
	e += put_varint(extra + e, (uint64_t)varint_field << 3 | 0);
	extra[e++] = 5;
	size_t varint_len = e - varint_at;

	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 300;
	size_t n;
	uint8_t *known = pack_request(&req, &n);
	uint8_t buf[96];
	ck_assert_uint_le(n + e, sizeof(buf));
	memcpy(buf, known, n);
	free(known);
	memcpy(buf + n, extra, e);

	Ruda__Request *out = ruda__request__unpack(NULL, n + e, buf);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(out->id, 300);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY__NOT_SET);
	ruda__request__free_unpacked(out, NULL);

	/* an unknown field after a known body leaves the body alone */
	Ruda__Sync s = RUDA__SYNC__INIT;
	req.body_case = RUDA__REQUEST__BODY_SYNC;
	req.sync = &s;
	known = pack_request(&req, &n);
	ck_assert_uint_le(n + varint_len, sizeof(buf));
	memcpy(buf, known, n);
	free(known);
	memcpy(buf + n, extra + varint_at, varint_len);
	out = ruda__request__unpack(NULL, n + varint_len, buf);
	ck_assert_ptr_nonnull(out);
	ck_assert_uint_eq(out->id, 300);
	ck_assert_int_eq(out->body_case, RUDA__REQUEST__BODY_SYNC);
	ruda__request__free_unpacked(out, NULL);
}
END_TEST

START_TEST(request_truncated)
{
	/* Any cut inside the body (a length-delimited field) must fail; a cut
	 * right after the id is a legal shorter message, so start after it. */
	Ruda__Binding b = RUDA__BINDING__INIT;
	b.handle = 5;
	b.size = 64;
	Ruda__Binding *bp[1] = {&b};
	uint8_t push[8] = {1, 2, 3, 4, 5, 6, 7, 8};
	Ruda__Launch l = RUDA__LAUNCH__INIT;
	l.kernel = 3;
	l.count_x = 4;
	l.n_bindings = 1;
	l.bindings = bp;
	l.push_constants.len = sizeof(push);
	l.push_constants.data = push;
	Ruda__Request req = RUDA__REQUEST__INIT;
	req.id = 1234;
	req.body_case = RUDA__REQUEST__BODY_LAUNCH;
	req.launch = &l;
	size_t len;
	uint8_t *buf = pack_request(&req, &len);
	size_t body = id_only_size(req.id);
	ck_assert_uint_lt(body + 2, len);
	for (size_t cut = body + 1; cut < len; cut++) {
		Ruda__Request *out = ruda__request__unpack(NULL, cut, buf);
		ck_assert_msg(out == NULL, "%zu of %zu bytes unpacked", cut, len);
	}
	/* the whole thing still parses */
	Ruda__Request *out = ruda__request__unpack(NULL, len, buf);
	ck_assert_ptr_nonnull(out);
	ruda__request__free_unpacked(out, NULL);
	free(buf);

	/* a cut inside a multi-byte varint */
	Ruda__Request big = RUDA__REQUEST__INIT;
	big.id = UINT64_MAX;
	buf = pack_request(&big, &len);
	ck_assert_uint_eq(len, 11); /* tag + 10-byte varint */
	for (size_t cut = 1; cut < len; cut++)
		ck_assert_ptr_null(ruda__request__unpack(NULL, cut, buf));
	free(buf);
}
END_TEST

START_TEST(reply_truncated)
{
	Ruda__DeviceInfo d = RUDA__DEVICE_INFO__INIT;
	d.name = "gpu";
	Ruda__DeviceInfo *dp[1] = {&d};
	Ruda__HelloReply h = RUDA__HELLO_REPLY__INIT;
	h.daemon_version = "0.1.0";
	h.n_devices = 1;
	h.devices = dp;
	Ruda__Reply rep = RUDA__REPLY__INIT;
	rep.id = 1;
	rep.body_case = RUDA__REPLY__BODY_HELLO;
	rep.hello = &h;
	size_t len;
	uint8_t *buf = pack_reply(&rep, &len);
	/* id 1 is 2 bytes (tag, value); the hello body follows */
	for (size_t cut = 3; cut < len; cut++)
		ck_assert_msg(ruda__reply__unpack(NULL, cut, buf) == NULL, "%zu of %zu bytes unpacked",
			      cut, len);
	free(buf);
}
END_TEST

static Suite *proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *rt = tcase_create("round_trip");
	tcase_add_test(rt, request_hello);
	tcase_add_test(rt, request_write);
	tcase_add_test(rt, request_launch);
	tcase_add_test(rt, reply_hello);
	tcase_add_test(rt, reply_error_status);
	suite_add_tcase(s, rt);

	TCase *bad = tcase_create("robustness");
	tcase_add_test(bad, request_unknown_field);
	tcase_add_test(bad, request_truncated);
	tcase_add_test(bad, reply_truncated);
	suite_add_tcase(s, bad);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(proto_suite());
	/* CK_FORK by default (each test in its own process); CK_FORK=no for debugging */
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
