/* The kernel compilation cache: shared by clients, kept across restarts,
 * robust against bad files. */
#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char cache_dir[64];

static void setup(void)
{
	snprintf(cache_dir, sizeof(cache_dir), "/tmp/ruda-cache-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(cache_dir));
}

static void teardown(void)
{
	test_remove_tree(cache_dir);
}

static void start(struct test_daemon *d)
{
	const char *args[] = {"--cache-dir", cache_dir, NULL};
	test_daemon_start(d, args);
}

/* The one pipeline cache file in the directory, or "" */
static const char *cache_file(void)
{
	static char path[512];
	path[0] = '\0';
	DIR *dir = opendir(cache_dir);
	struct dirent *e;
	while (dir && (e = readdir(dir)))
		if (strncmp(e->d_name, "pipelines-", 10) == 0)
			snprintf(path, sizeof(path), "%s/%s", cache_dir, e->d_name);
	if (dir)
		closedir(dir);
	return path;
}

/* Register and run the fill kernel; the daemon's stats after. */
static ruda_daemon_stats use_kernel(struct test_daemon *d, const char *kernel)
{
	ruda_client *c = test_connect(d, "cache user");
	ruda_kernel k = test_register(c, kernel, 1, 8);
	ruda_handle h;
	ruda_client_empty(c, 1024, &h);
	uint32_t push[2] = {42, 256}, out[256];
	ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, push, 8);
	ck_assert_int_eq(ruda_client_read_one(c, h, out), RUDA_OK);
	for (int i = 0; i < 256; i++)
		ck_assert_uint_eq(out[i], 42);
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	ck_assert_int_eq(ruda_client_daemon_stats(c, &s), RUDA_OK);
	ruda_client_close(c);
	return s;
}

START_TEST(restart_loads_the_cache)
{
	struct test_daemon d;
	start(&d);
	ruda_daemon_stats first = use_kernel(&d, "fill");
	ck_assert_uint_eq(first.kernels_compiled, 1);
	ck_assert_uint_eq(first.cache_file_bytes, 0); /* nothing on disk yet */
	test_daemon_stop(&d); /* saves */
	const char *path = cache_file();
	ck_assert_str_ne(path, "");
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_gt(st.st_size, 64);

	start(&d);
	ruda_daemon_stats second = use_kernel(&d, "fill");
	ck_assert_uint_eq(second.cache_file_bytes, (uint64_t)st.st_size); /* loaded */
	test_daemon_stop(&d);
}
END_TEST

/* Corrupt, truncated and foreign files are ignored: rudad serves anyway. */
START_TEST(bad_cache_files_are_ignored)
{
	struct test_daemon d;
	start(&d);
	use_kernel(&d, "fill");
	test_daemon_stop(&d);
	char path[512];
	snprintf(path, sizeof(path), "%s", cache_file());
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);

	for (int variant = 0; variant < 4; variant++) {
		FILE *f = fopen(path, "r+b");
		ck_assert_ptr_nonnull(f);
		if (variant == 0) { /* flip a byte of the driver's data */
			fseek(f, st.st_size - 5, SEEK_SET);
			fputc(0x5a ^ 0xff, f);
		} else if (variant == 1) { /* another device's file */
			fseek(f, 16, SEEK_SET); /* vendor id in our header */
			fputc(0x77, f);
		} else if (variant == 2) { /* not ours at all */
			fwrite("garbage!", 1, 8, f);
		}
		fclose(f);
		if (variant == 3) /* truncated */
			ck_assert_int_eq(truncate(path, 20), 0);
		start(&d);
		ruda_daemon_stats s = use_kernel(&d, "fill");
		ck_assert_uint_eq(s.cache_file_bytes, 0); /* ignored */
		ck_assert_uint_eq(s.kernels_compiled, 1);
		test_daemon_stop(&d); /* and a good file is written again */
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_gt(st.st_size, 64);
	}
}
END_TEST

static int probe_calls;

static int probe(void *user, double *value)
{
	probe_calls++;
	*value = *(double *)user;
	return 0;
}

/* The file beside the pipeline cache whose name starts with `prefix`. */
static void file_named(const char *prefix, char *path, size_t len)
{
	path[0] = '\0';
	DIR *dir = opendir(cache_dir);
	struct dirent *e;
	while (dir && (e = readdir(dir)))
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			snprintf(path, len, "%s/%s", cache_dir, e->d_name);
	if (dir)
		closedir(dir);
}

/* measure_throughput's answers outlive rudad, as compiled kernels do: a
 * restarted daemon answers from the file without measuring again; a
 * corrupt file is ignored and written again. */
START_TEST(throughputs_survive_a_restart)
{
	struct test_daemon d;
	start(&d);
	ruda_client *c = test_connect(&d, "measure");
	double first = 321.25, second = 7.0, got = 0;
	probe_calls = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(c, "matmul/f16/128", probe, &first, &got),
			 RUDA_OK);
	ck_assert_int_eq(probe_calls, 1);
	ruda_client_close(c);
	test_daemon_stop(&d); /* saves */
	char path[512];
	file_named("throughputs-", path, sizeof(path));
	ck_assert_str_ne(path, "");

	start(&d);
	c = test_connect(&d, "after restart");
	got = 0;
	ck_assert_int_eq(ruda_client_measure_throughput(c, "matmul/f16/128", probe, &second, &got),
			 RUDA_OK);
	ck_assert_int_eq(probe_calls, 1); /* not measured again */
	ck_assert(got == 321.25);
	ruda_client_close(c);
	test_daemon_stop(&d);

	/* a flipped byte: the file is ignored, the value measured again */
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	FILE *f = fopen(path, "r+b");
	ck_assert_ptr_nonnull(f);
	fseek(f, st.st_size - 3, SEEK_SET);
	fputc(0xa5, f);
	fclose(f);
	start(&d);
	c = test_connect(&d, "corrupt file");
	ck_assert_int_eq(ruda_client_measure_throughput(c, "matmul/f16/128", probe, &second, &got),
			 RUDA_OK);
	ck_assert_int_eq(probe_calls, 2);
	ck_assert(got == 7.0);
	ruda_client_close(c);
	ck_assert(test_daemon_alive(&d));
	test_daemon_stop(&d);
}
END_TEST

/* An unwritable cache directory does not stop rudad. */
START_TEST(unwritable_cache_directory)
{
	struct test_daemon d;
	const char *args[] = {"--cache-dir", "/proc/ruda-cannot-write-here", NULL};
	test_daemon_start(&d, args);
	ruda_daemon_stats s = use_kernel(&d, "fill");
	ck_assert_uint_eq(s.kernels_compiled, 1);
	test_daemon_stop(&d);
}
END_TEST

/* Large modules go by hash once the daemon has them; a lookup says so. */
START_TEST(modules_known_by_hash)
{
	struct test_daemon d;
	start(&d);
	ruda_client *a = test_connect(&d, "a");
	size_t size;
	uint32_t *words = test_load_spirv("fill", &size);
	int held = -1;
	ck_assert_int_eq(ruda_client_kernel_lookup(a, words, size, &held), RUDA_OK);
	ck_assert_int_eq(held, 0);
	test_register(a, "fill", 1, 8);
	ruda_client *b = test_connect(&d, "b");
	ck_assert_int_eq(ruda_client_kernel_lookup(b, words, size, &held), RUDA_OK);
	ck_assert_int_eq(held, 1);
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	test_register(b, "fill", 1, 8);
	ck_assert_int_eq(ruda_client_daemon_stats(b, &s), RUDA_OK);
	ck_assert_uint_eq(s.kernels_compiled, 1);
	ck_assert_uint_ge(s.kernel_hits, 1);
	ck_assert_uint_eq(s.modules, 1);
	/* specialization makes another pipeline of the same module */
	ruda_spec_constant spec = {.id = 0, .size = 4, .value = 7};
	size_t spec_size;
	uint32_t *spec_words = test_load_spirv("tests/shaders/spec_fill", &spec_size);
	ruda_kernel_desc desc = {sizeof(ruda_kernel_desc),
		spec_words, spec_size, "main", 1, 4, &spec, 1};
	ruda_kernel k;
	ck_assert_int_eq(ruda_client_kernel_register(b, &desc, &k), RUDA_OK);
	ruda_handle h;
	ruda_client_empty(b, 256, &h);
	uint32_t count = 64, out[64];
	ruda_client_launch(b, k, (ruda_count){1, 1, 1}, &h, 1, &count, 4);
	ck_assert_int_eq(ruda_client_read_one(b, h, out), RUDA_OK);
	for (int i = 0; i < 64; i++)
		ck_assert_uint_eq(out[i], 7);
	free(words);
	free(spec_words);
	ruda_client_close(a);
	ruda_client_close(b);
	test_daemon_stop(&d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("cache");
	TCase *tc = tcase_create("cache");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, restart_loads_the_cache);
	tcase_add_test(tc, bad_cache_files_are_ignored);
	tcase_add_test(tc, throughputs_survive_a_restart);
	tcase_add_test(tc, unwritable_cache_directory);
	tcase_add_test(tc, modules_known_by_hash);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
