/*
 * Hostile kernels (issue 26): workgroups and shared memory over the
 * device's limits, huge private arrays, compile bombs. Each is refused at
 * registration with RUDA_ERROR_INVALID_KERNEL and a reason naming the
 * limit, while another client's kernel keeps giving right answers and
 * rudad stays up.
 */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "spirv_calls.h"

static struct test_daemon daemon_;

static void setup(void)
{
	test_daemon_start(&daemon_, NULL);
}

static void teardown(void)
{
	test_daemon_stop(&daemon_);
}

/* Register and expect RUDA_ERROR_INVALID_KERNEL with every needle in the
 * reason. */
static void expect_refused(ruda_client *c, const uint32_t *spirv, size_t size, uint32_t bindings,
			   const ruda_spec_constant *spec, uint32_t nspec, const char *const *needles)
{
	ruda_kernel_desc desc = {sizeof(ruda_kernel_desc),
		spirv, size, "main", bindings, 0, spec, nspec};
	ruda_kernel k;
	ruda_status st = ruda_client_kernel_register(c, &desc, &k);
	char why[512] = "";
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(st == RUDA_ERROR_INVALID_KERNEL, "status %d (%s), expected INVALID_KERNEL",
		      st, why);
	for (; *needles; needles++)
		ck_assert_msg(strstr(why, *needles), "\"%s\" not in \"%s\"", *needles, why);
}

static void expect_refused_file(ruda_client *c, const char *name, const ruda_spec_constant *spec,
				uint32_t nspec, const char *const *needles)
{
	size_t size;
	uint32_t *spirv = test_load_spirv(name, &size);
	expect_refused(c, spirv, size, 1, spec, nspec, needles);
	free(spirv);
}

START_TEST(hostile_kernels_refused)
{
	struct test_good_client good;
	test_good_client_start(&daemon_, &good);
	ruda_client *c = test_connect(&daemon_, "hostile");

	/* 1024x1024x64: the driver segfaulted at the first launch */
	expect_refused_file(c, "tests/shaders/huge_workgroup", NULL, 0,
			    (const char *[]){"67108864 invocations",
					     "maxComputeWorkGroupInvocations", NULL});
	/* 2048 wide through a specialization constant (the WorkgroupSize builtin) */
	ruda_spec_constant wide = {.id = 0, .size = 4, .value = 2048};
	expect_refused_file(c, "tests/shaders/spec_limits", &wide, 1,
			    (const char *[]){"x = 2048", "maxComputeWorkGroupSize[0]", NULL});
	/* 64 MiB of shared memory */
	expect_refused_file(c, "tests/shaders/huge_shared", NULL, 0,
			    (const char *[]){"shared memory of 67108864 bytes",
					     "maxComputeSharedMemorySize", NULL});
	/* 16 000 floats per invocation: seconds of compiling */
	expect_refused_file(c, "tests/shaders/huge_private", NULL, 0,
			    (const char *[]){"private memory of 64000 bytes",
					     "limit of 16384", NULL});
	/* the compile bomb: 2^24 inlined calls in under 6 KB */
	size_t n;
	uint32_t *bomb = test_spirv_calls(24, 2, 0, &n);
	expect_refused(c, bomb, n * 4, 0, NULL, 0,
		       (const char *[]){"inlining would make", "limit 262144", NULL});
	free(bomb);
	uint32_t *deep = test_spirv_calls(1000, 1, 0, &n);
	expect_refused(c, deep, n * 4, 0, NULL, 0, (const char *[]){"calls nest", NULL});
	free(deep);

	/* the same session goes on: the module with sane values runs right */
	size_t size;
	uint32_t *spirv = test_load_spirv("tests/shaders/spec_limits", &size);
	ruda_spec_constant sane[] = {{0, 4, 64}, {2, 4, 64}};
	ruda_kernel_desc desc = {sizeof(ruda_kernel_desc), spirv, size, "main", 1, 0, sane, 2};
	ruda_kernel k;
	ck_assert_int_eq(ruda_client_kernel_register(c, &desc, &k), RUDA_OK);
	free(spirv);
	enum { N = 64 * 16 };
	static float data[N], back[N];
	for (int i = 0; i < N; i++)
		data[i] = (float)i * 0.5f;
	ruda_handle h;
	ck_assert_int_eq(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){16, 1, 1}, &h, 1, NULL, 0),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	for (int i = 0; i < N; i++)
		ck_assert_msg(back[i] == data[i] + 1.0f, "element %d: %f", i, back[i]);
	ruda_client_close(c);

	test_good_client_stop(&good);
	ck_assert(test_daemon_alive(&daemon_));
}
END_TEST

static int run_rudactl_cleanup(void)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY);
		dup2(null, 1);
		execl(test_build_path("rudactl"), "rudactl", "--socket", daemon_.socket_path,
		      "cleanup", (char *)NULL);
		_exit(127);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* 15 000 distinct specializations, then `rudactl cleanup`: 0 live pipelines
 * but 1.2 GB kept, because lavapipe frees a destroyed pipeline only at its
 * next queue submission and glibc kept the compile threads' arenas. */
START_TEST(dropped_pipelines_give_memory_back)
{
	if (RUDA_SAN_FLAGS[0]) {
		printf("SKIP dropped_pipelines_give_memory_back: a sanitizer's allocator keeps "
		       "freed memory (%s)\n", RUDA_SAN_FLAGS);
		return;
	}
	if (geteuid() != 0) {
		printf("SKIP dropped_pipelines_give_memory_back: rudactl cleanup needs root\n");
		return;
	}
	ruda_client *c = test_connect(&daemon_, "many");
	size_t size;
	uint32_t *spirv = test_load_spirv("tests/shaders/spec_fill", &size);
	ruda_handle h;
	ck_assert_int_eq(ruda_client_empty(c, 4096, &h), RUDA_OK);
	/* one compiled and launched first: the compiler's own start-up is
	 * not what is measured */
	ruda_spec_constant v = {.id = 0, .size = 4, .value = 7};
	ruda_kernel_desc desc = {sizeof(ruda_kernel_desc), spirv, size, "main", 1, 4, &v, 1};
	ruda_kernel k;
	ck_assert_int_eq(ruda_client_kernel_register(c, &desc, &k), RUDA_OK);
	uint32_t count = 64;
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, &count, 4),
			 RUDA_OK);
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	ck_assert_int_eq(ruda_client_kernel_release(c, k), RUDA_OK);
	long base = test_rss_kib(daemon_.pid);

	/* registered, never launched: nothing else submits meanwhile */
	for (uint32_t i = 0; i < 1500; i++) {
		v.value = 1000 + i;
		ck_assert_int_eq(ruda_client_kernel_register(c, &desc, &k), RUDA_OK);
		ck_assert_int_eq(ruda_client_kernel_release(c, k), RUDA_OK);
	}
	ck_assert_int_eq(ruda_client_sync(c), RUDA_OK);
	long peak = test_rss_kib(daemon_.pid);
	/* the daemon keeps up to 1024 pipelines nobody uses: on lavapipe
	 * about 90 MB */
	if (peak - base < 40 * 1024) {
		printf("SKIP dropped_pipelines_give_memory_back: pipelines take only %ld KiB "
		       "here, too little to measure\n", peak - base);
		ruda_client_close(c);
		free(spirv);
		return;
	}
	ck_assert_int_eq(run_rudactl_cleanup(), 0);
	/* back near the baseline: within a quarter of what the pipelines took
	 * (without the fix it stayed at the peak) */
	long limit = base + (peak - base) / 4 + 10 * 1024, now = 0;
	for (int i = 0; i < 100 && (now = test_rss_kib(daemon_.pid)) > limit; i++)
		usleep(100 * 1000);
	ck_assert_msg(now <= limit, "rudad's RSS %ld KiB after cleanup; baseline %ld, peak %ld",
		      now, base, peak);

	/* and it still works: a kernel it dropped compiles again and fills */
	v.value = 1234;
	ck_assert_int_eq(ruda_client_kernel_register(c, &desc, &k), RUDA_OK);
	ck_assert_int_eq(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, &count, 4),
			 RUDA_OK);
	uint32_t back[1024];
	ck_assert_int_eq(ruda_client_read_one(c, h, back), RUDA_OK);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(back[i], 1234);
	ruda_client_close(c);
	free(spirv);
	ck_assert(test_daemon_alive(&daemon_));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("kernel_limits");
	TCase *tc = tcase_create("limits");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, hostile_kernels_refused);
	tcase_add_test(tc, dropped_pipelines_give_memory_back);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed != 0;
}
