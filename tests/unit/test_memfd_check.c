/* Unit tests for daemon/common/memfd_check.c: the one check of a client's memfd. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "common/memfd_check.h"

static int memfd(uint64_t size, unsigned seals)
{
	int fd = memfd_create("unit", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)size), 0);
	if (seals)
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, seals), 0);
	return fd;
}

static const struct ruda_memfd_rules rules = {
	.what = "thing",
	.seals = F_SEAL_SHRINK,
	.no_seals = RUDA_MEMFD_WRITE_SEALS,
	.min_size = 1 << 20,
	.size_note = "(a note)",
};

/* `fd` is refused with INVALID_ARGUMENT and `want` in the message; closed. */
static void refused(int fd, const struct ruda_memfd_rules *r, const char *want)
{
	char why[256] = "";
	uint64_t size = 12345;
	ck_assert_int_eq(ruda__memfd_check(fd, r, &size, why, sizeof(why)),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_msg(strstr(why, want), "\"%s\" does not say \"%s\"", why, want);
	ck_assert_msg(!strncmp(why, "thing: ", 7), "\"%s\" does not name what", why);
	ck_assert_uint_eq(size, 12345); /* untouched */
	close(fd);
}

START_TEST(accepts_and_reports_size)
{
	int fd = memfd(3 << 20, F_SEAL_SHRINK);
	char why[256];
	uint64_t size = 0;
	ck_assert_int_eq(ruda__memfd_check(fd, &rules, &size, why, sizeof(why)), RUDA_OK);
	ck_assert_uint_eq(size, 3 << 20);
	ck_assert_int_eq(ruda__memfd_check(fd, &rules, NULL, why, sizeof(why)), RUDA_OK);
	close(fd);
	/* every seal but the refused ones is fine */
	fd = memfd(1 << 20, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
	ck_assert_int_eq(ruda__memfd_check(fd, &rules, &size, why, sizeof(why)), RUDA_OK);
	close(fd);
}
END_TEST

START_TEST(names_the_missing_seal)
{
	refused(memfd(1 << 20, 0), &rules, "not sealed against shrinking (F_SEAL_SHRINK)");
	refused(memfd(1 << 20, F_SEAL_GROW), &rules, "F_SEAL_SHRINK");
	/* made without MFD_ALLOW_SEALING: it carries F_SEAL_SEAL only */
	int fd = memfd_create("unit", MFD_CLOEXEC);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	refused(fd, &rules, "MFD_ALLOW_SEALING");
	struct ruda_memfd_rules grow = rules;
	grow.seals |= F_SEAL_GROW;
	refused(memfd(1 << 20, F_SEAL_SHRINK), &grow, "F_SEAL_GROW");
}
END_TEST

START_TEST(names_the_refused_seal)
{
	refused(memfd(1 << 20, F_SEAL_SHRINK | F_SEAL_WRITE), &rules,
		"sealed against writing (F_SEAL_WRITE)");
	refused(memfd(1 << 20, F_SEAL_SHRINK | F_SEAL_FUTURE_WRITE), &rules,
		"sealed against writing (F_SEAL_FUTURE_WRITE)");
}
END_TEST

/* The size is read after the seals: a memfd truncated to nothing and then
 * sealed is too small, however large it was before. */
START_TEST(size_after_seals)
{
	int fd = memfd(1 << 20, 0);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	refused(fd, &rules, "too small: it holds 0 bytes, fewer than the 1048576 needed (a note)");
	refused(memfd((1 << 20) - 1, F_SEAL_SHRINK), &rules, "holds 1048575 bytes");
}
END_TEST

/* A client that changes the memfd between the checks, as one racing rudad
 * would: whatever it does, no verdict rests on a size that is gone. */
static int racing_step;
static void truncate_then_seal(int fd, int step)
{
	if (step != racing_step)
		return;
	int shrunk = ftruncate(fd, 0);
	if (step == 1) {
		/* before the seals are read: it still may shrink, and then seal */
		ck_assert_int_eq(shrunk, 0);
		ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	} else {
		/* after F_SEAL_SHRINK was seen: the kernel refuses the shrink */
		ck_assert_int_eq(shrunk, -1);
		ck_assert_int_eq(errno, EPERM);
	}
}

START_TEST(racing_client)
{
	ruda__memfd_check_between = truncate_then_seal;
	racing_step = 1;
	refused(memfd(1 << 20, 0), &rules, "holds 0 bytes");
	racing_step = 2;
	int fd = memfd(1 << 20, F_SEAL_SHRINK);
	char why[256];
	uint64_t size = 0;
	ck_assert_int_eq(ruda__memfd_check(fd, &rules, &size, why, sizeof(why)), RUDA_OK);
	ck_assert_uint_eq(size, 1 << 20);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	close(fd);
	ruda__memfd_check_between = NULL;
}
END_TEST

START_TEST(names_what_it_is_instead)
{
	refused(eventfd(0, EFD_CLOEXEC), &rules, "the fd is an eventfd, not a memfd");
	int p[2];
	ck_assert_int_eq(pipe(p), 0);
	close(p[1]);
	refused(p[0], &rules, "the fd is a pipe, not a memfd");
	int sv[2];
	ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	close(sv[1]);
	refused(sv[0], &rules, "the fd is a socket, not a memfd");
	refused(open("/dev/null", O_RDWR | O_CLOEXEC), &rules,
		"the fd is a character device, not a memfd");
	refused(open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC), &rules,
		"the fd is a directory, not a memfd");
	char path[] = "/tmp/ruda-memfd-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	unlink(path);
	ck_assert_int_eq(ftruncate(fd, 1 << 20), 0);
	refused(fd, &rules, "the fd is a regular file, not a memfd");
}
END_TEST

START_TEST(map_failures)
{
	char why[256];
	ck_assert_int_eq(ruda__memfd_map_failed("thing", EPERM, why, sizeof(why)),
			 RUDA_ERROR_INVALID_ARGUMENT);
	ck_assert_ptr_nonnull(strstr(why, "sealed against writing"));
	ck_assert_int_eq(ruda__memfd_map_failed("thing", ENOMEM, why, sizeof(why)),
			 RUDA_ERROR_OUT_OF_MEMORY);
	ck_assert_int_eq(ruda__memfd_map_failed("thing", EINVAL, why, sizeof(why)),
			 RUDA_ERROR_IO);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("memfd_check");
	TCase *tc = tcase_create("core");
	tcase_add_test(tc, accepts_and_reports_size);
	tcase_add_test(tc, names_the_missing_seal);
	tcase_add_test(tc, names_the_refused_seal);
	tcase_add_test(tc, size_after_seals);
	tcase_add_test(tc, racing_client);
	tcase_add_test(tc, names_what_it_is_instead);
	tcase_add_test(tc, map_failures);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
