/*
 * The fuzz corpora as a regression test: every file under
 * tests/fuzz/corpus/<target>/ (valid requests of every type, and every
 * input that once crashed a target) is run through the fuzz targets, built
 * here with gcc and without libFuzzer. A crash, a sanitizer report or a
 * failed invariant ends the test's forked process and fails it.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>

#define RUDA_REPLAY_NO_MAIN
#include "../fuzz/replay.c"

/* the targets define the libFuzzer entry points: give them names */
#define LLVMFuzzerTestOneInput fuzz_frame_one
#include "../fuzz/fuzz_frame.c"
#undef LLVMFuzzerTestOneInput

#define LLVMFuzzerTestOneInput fuzz_dispatch_one
#define LLVMFuzzerInitialize fuzz_dispatch_init
#include "../fuzz/fuzz_dispatch.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize

#define LLVMFuzzerTestOneInput fuzz_admin_one
#define LLVMFuzzerInitialize fuzz_admin_init
#include "../fuzz/fuzz_admin.c"
#undef LLVMFuzzerTestOneInput
#undef LLVMFuzzerInitialize

#ifndef RUDA_SOURCE_DIR
#define RUDA_SOURCE_DIR "."
#endif

static void run_corpus(const char *target, replay_fn one, int at_least)
{
	char dir[512];
	snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s", RUDA_SOURCE_DIR, target);
	int n = replay_path(dir, one);
	ck_assert_msg(n >= at_least, "%s: %d inputs ran; the corpus has at least %d", dir, n,
		      at_least);
}

START_TEST(frame_corpus)
{
	run_corpus("frame", fuzz_frame_one, 25);
}
END_TEST

START_TEST(dispatch_corpus)
{
	fuzz_dispatch_init(NULL, NULL);
	run_corpus("dispatch", fuzz_dispatch_one, 25);
	fd_teardown();
}
END_TEST

START_TEST(admin_corpus)
{
	fuzz_admin_init(NULL, NULL);
	run_corpus("admin", fuzz_admin_one, 10);
	fd_teardown();
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuzz_corpus");
	TCase *tc = tcase_create("replay");
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, frame_corpus);
	tcase_add_test(tc, dispatch_corpus);
	tcase_add_test(tc, admin_corpus);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
