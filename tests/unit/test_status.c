/*
 * Unit tests for the status codes generated from enum Status of
 * proto/ruda.proto (proto/gen_status.awk): <ruda/status.h> and the table
 * behind ruda_strerror. protoc-c's descriptor of the same enum is an
 * independent reading of the proto to compare against.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ruda/status.h>

#include "harness.h"
#include "ruda.pb-c.h"

#include "../../proto/status_table.h"

/* The values as released: ABI and wire protocol, never to change. */
static const struct {
	ruda_status status;
	const char *name;
	int value;
} released[] = {
	{RUDA_OK, "OK", 0},
	{RUDA_ERROR_INVALID_ARGUMENT, "ERROR_INVALID_ARGUMENT", 1},
	{RUDA_ERROR_INVALID_HANDLE, "ERROR_INVALID_HANDLE", 2},
	{RUDA_ERROR_OUT_OF_MEMORY, "ERROR_OUT_OF_MEMORY", 3},
	{RUDA_ERROR_TOO_LARGE, "ERROR_TOO_LARGE", 4},
	{RUDA_ERROR_QUOTA, "ERROR_QUOTA", 5},
	{RUDA_ERROR_UNSUPPORTED, "ERROR_UNSUPPORTED", 6},
	{RUDA_ERROR_PROTOCOL, "ERROR_PROTOCOL", 7},
	{RUDA_ERROR_INVALID_KERNEL, "ERROR_INVALID_KERNEL", 8},
	{RUDA_ERROR_DEVICE_LOST, "ERROR_DEVICE_LOST", 9},
	{RUDA_ERROR_TIMEOUT, "ERROR_TIMEOUT", 10},
	{RUDA_ERROR_DISCONNECTED, "ERROR_DISCONNECTED", 11},
	{RUDA_ERROR_OUT_OF_RANGE, "ERROR_OUT_OF_RANGE", 12},
	{RUDA_ERROR_VERSION, "ERROR_VERSION", 13},
	{RUDA_ERROR_PERMISSION, "ERROR_PERMISSION", 14},
	{RUDA_ERROR_BUSY, "ERROR_BUSY", 15},
	{RUDA_ERROR_INTERNAL, "ERROR_INTERNAL", 16},
	{RUDA_ERROR_IO, "ERROR_IO", 17},
	{RUDA_ERROR_LEASE_EXPIRED, "ERROR_LEASE_EXPIRED", 18},
};
#define N_RELEASED (sizeof(released) / sizeof(released[0]))

START_TEST(released_values_unchanged)
{
	for (size_t i = 0; i < N_RELEASED; i++) {
		ck_assert_msg((int)released[i].status == released[i].value, "%s is %d, was %d",
			      released[i].name, (int)released[i].status, released[i].value);
		ck_assert_ptr_nonnull(ruda__status_name(released[i].value));
		ck_assert_str_eq(ruda__status_name(released[i].value), released[i].name);
	}
}
END_TEST

/* Every value of the proto's enum (as protoc-c read it) has a name and a
 * text of its own in the table, and the table has nothing else. */
START_TEST(every_value_has_a_string)
{
	const ProtobufCEnumDescriptor *d = &ruda__status__descriptor;
	ck_assert_uint_ge(d->n_values, N_RELEASED);
	int named = 0;
	for (int v = 0; v < ruda__status_limit(); v++)
		named += ruda__status_name(v) != NULL;
	ck_assert_int_eq(named, (int)d->n_values);
	for (unsigned i = 0; i < d->n_values; i++) {
		int v = d->values[i].value;
		const char *name = ruda__status_name(v), *text = ruda_strerror((ruda_status)v);
		ck_assert_msg(name && strcmp(name, d->values[i].name) == 0, "value %d: %s, proto %s",
			      v, name ? name : "(none)", d->values[i].name);
		ck_assert_msg(v < ruda__status_limit(), "%s = %d past the table", name, v);
		ck_assert_msg(text && *text && strcmp(text, "unknown status") != 0,
			      "%s has no text", name);
		for (unsigned j = 0; j < i; j++)
			ck_assert_msg(strcmp(text, ruda_strerror((ruda_status)d->values[j].value)) != 0,
				      "%s and %s share the text \"%s\"", name, d->values[j].name, text);
	}
}
END_TEST

START_TEST(unknown_values)
{
	int limit = ruda__status_limit();
	const int bad[] = {limit, limit + 1, 1000, -1, -1000};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_str_eq(ruda_strerror((ruda_status)bad[i]), "unknown status");
		ck_assert_ptr_null(ruda__status_name(bad[i]));
	}
	ck_assert_str_eq(ruda_strerror(RUDA_OK), "success");
	ck_assert_str_eq(ruda_strerror(RUDA_ERROR_LEASE_EXPIRED), "the exclusive lease expired");
}
END_TEST

/* proto/gen_status.awk on `body` as enum Status: its exit status. */
static int generate(const char *body, const char *what)
{
	char path[] = "/tmp/ruda-test-status-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	FILE *f = fdopen(fd, "w");
	ck_assert_ptr_nonnull(f);
	fprintf(f, "syntax = \"proto3\";\n\nenum Status {\n%s}\n", body);
	ck_assert_int_eq(fclose(f), 0);
	char cmd[1024];
	snprintf(cmd, sizeof(cmd), "awk -v what=%s -f '%s/proto/gen_status.awk' '%s' >/dev/null 2>&1",
		 what, RUDA_SOURCE_DIR, path);
	int rc = system(cmd);
	unlink(path);
	return rc;
}

/* A value without its text cannot be added: the build fails. */
START_TEST(generator_refuses_incomplete_enum)
{
	const char *good = "  // \"success\": no error\n  OK = 0;\n"
			   "  // \"bad\": it is bad\n  ERROR_BAD = 1;\n";
	ck_assert_int_eq(generate(good, "header"), 0);
	ck_assert_int_eq(generate(good, "table"), 0);
	ck_assert_int_ne(generate(good, "other"), 0);
	/* no comment line above a value */
	ck_assert_int_ne(generate("  // \"success\": no error\n  OK = 0;\n  ERROR_BAD = 1;\n",
				  "table"), 0);
	/* a plain comment (no quoted text) */
	ck_assert_int_ne(generate("  // no error\n  OK = 0;\n", "header"), 0);
	/* a value twice */
	ck_assert_int_ne(generate("  // \"a\": a\n  OK = 0;\n  // \"b\": b\n  ERROR_B = 0;\n",
				  "table"), 0);
	/* no enum at all */
	ck_assert_int_ne(generate("", "table"), 0);
}
END_TEST

static Suite *status_suite(void)
{
	Suite *s = suite_create("status");
	TCase *t = tcase_create("table");
	tcase_add_test(t, released_values_unchanged);
	tcase_add_test(t, every_value_has_a_string);
	tcase_add_test(t, unknown_values);
	tcase_add_test(t, generator_refuses_incomplete_enum);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(status_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
