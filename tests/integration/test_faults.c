/*
 * Faults against a real rudad: a device loss injected through the
 * test-only switch (RUDA_TEST_FAULTS=1), rudad SIGKILLed and restarted
 * with clients connected, and a full disk under the pipeline cache.
 */
#include <check.h>
#include <dirent.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define ck_assert_status(got, want) ck_assert_msg((got) == (want), "%s (%d), expected %s", \
						 ruda_strerror(got), (int)(got), ruda_strerror(want))

/* Start rudad with the fault switch on (or off) and the caller's group as
 * administrators, so that this unprivileged test may run admin commands. */
static void start_daemon(struct test_daemon *d, int faults)
{
	static char admin[160];
	struct group *g = getgrgid(getegid());
	ck_assert_ptr_nonnull(g);
	snprintf(admin, sizeof(admin), "admin_group=%s", g->gr_name);
	const char *args[] = {"--set", admin, NULL};
	if (faults)
		setenv("RUDA_TEST_FAULTS", "1", 1);
	else
		unsetenv("RUDA_TEST_FAULTS");
	test_daemon_start(d, args);
	unsetenv("RUDA_TEST_FAULTS");
}

/* out[i] = a[i] + b[i] on the device, compared with the CPU's sums. */
static void add_checked(ruda_client *c, uint32_t n, uint64_t seed)
{
	float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
	float *out = malloc(n * sizeof(float));
	for (uint32_t i = 0; i < n; i++) {
		a[i] = (float)((i * 7 + seed) % 1000) * 0.25f;
		b[i] = (float)((i * 13 + seed * 3) % 777) * 0.5f;
	}
	ruda_kernel add = test_register(c, "add_f32", 3, 4);
	ruda_handle h[3];
	ck_assert_status(ruda_client_create(c, a, n * sizeof(float), &h[0]), RUDA_OK);
	ck_assert_status(ruda_client_create(c, b, n * sizeof(float), &h[1]), RUDA_OK);
	ck_assert_status(ruda_client_empty(c, n * sizeof(float), &h[2]), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, add, (ruda_count){(n + 255) / 256, 1, 1}, h, 3, &n,
					    4),
			 RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h[2], out), RUDA_OK);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_msg(out[i] == a[i] + b[i], "element %u: %g, expected %g", i,
			      (double)out[i], (double)(a[i] + b[i]));
	for (int i = 0; i < 3; i++)
		ck_assert_status(ruda_client_release(c, h[i]), RUDA_OK);
	ck_assert_status(ruda_client_kernel_release(c, add), RUDA_OK);
	free(a);
	free(b);
	free(out);
}

/* A client's every call after the loss: the device-lost error and why. */
static void assert_lost(ruda_client *c, ruda_status st)
{
	ck_assert_status(st, RUDA_ERROR_DEVICE_LOST);
	char why[512];
	ruda_client_last_error(c, why, sizeof(why));
	ck_assert_msg(strstr(why, "was lost") && strstr(why, "connect again"), "error: %s", why);
}

START_TEST(device_loss_recreates_device)
{
	struct test_daemon d;
	start_daemon(&d, 1);
	/* counted with the device's compile worker running, as there is one
	 * for the re-created device at the end */
	ruda_client *first = test_connect(&d, "first");
	test_register(first, "fill", 1, 8);
	ruda_client_close(first);
	int fds0 = test_settled_fds(d.pid);
	/* twice: the re-created device can be lost and re-created again */
	for (int round = 0; round < 2; round++) {
		/* one client with work queued, one idle with a buffer */
		ruda_client *busy = test_connect(&d, "busy");
		ruda_client *idle = test_connect(&d, "idle");
		ruda_kernel fill = test_register(busy, "fill", 1, 8);
		ruda_handle hb, hi;
		ck_assert_status(ruda_client_empty(busy, 1 << 16, &hb), RUDA_OK);
		uint32_t push[2] = {7, 1 << 14};
		ck_assert_status(ruda_client_launch(busy, fill, (ruda_count){4, 1, 1}, &hb, 1, push,
						    8),
				 RUDA_OK);
		uint8_t data[256] = {1, 2, 3};
		ck_assert_status(ruda_client_create(idle, data, sizeof(data), &hi), RUDA_OK);
		ck_assert_status(ruda_client_sync(idle), RUDA_OK);
		for (int i = 0; i < 8; i++)
			ruda_client_launch(busy, fill, (ruda_count){64, 1, 1}, &hb, 1, push, 8);
		ruda_client_flush(busy);

		uint32_t sessions = 0;
		ck_assert_status(test_inject_device_loss(&d, 0, &sessions), RUDA_OK);
		ck_assert_uint_eq(sessions, 3); /* busy, idle and the asking one */

		/* old handles, old kernels, new requests: all fail the same way */
		static uint32_t words[1 << 14];
		assert_lost(busy, ruda_client_sync(busy));
		assert_lost(busy, ruda_client_read_one(busy, hb, words));
		assert_lost(busy, ruda_client_launch(busy, fill, (ruda_count){1, 1, 1}, &hb, 1, push,
						     8));
		ruda_handle more;
		assert_lost(busy, ruda_client_empty(busy, 64, &more));
		assert_lost(idle, ruda_client_read_one(idle, hi, data));
		assert_lost(idle, ruda_client_release(idle, hi));
		ruda_client_close(busy);
		ruda_client_close(idle);

		/* the re-created device serves new clients: a checked kernel */
		ruda_client *fresh = test_connect(&d, "after the loss");
		add_checked(fresh, 10000, (uint64_t)round);
		ruda_daemon_stats s = test_wait_for_stats(fresh, 1, 0);
		ck_assert_uint_eq(s.device_buffers, 0);
		ck_assert_uint_eq(s.sessions, 1);
		ruda_client_close(fresh);
	}
	/* nothing of the old devices is left: fds back to where they were */
	ck_assert_int_eq(test_settled_fds(d.pid), fds0);
	test_daemon_stop(&d);
}
END_TEST

/* An all-reduce (sum) between clients on devices 0 and 1, through host
 * staging imported into both, checked against the CPU's sums. */
static void all_reduce_checked(const struct test_daemon *d, uint32_t seed)
{
	enum { N = 4096 };
	ruda_client *c[2] = {test_connect_device(d, "staging", 0),
			     test_connect_device(d, "staging", 1)};
	ruda_device_id ids[2] = {ruda_client_device_id(c[0]), ruda_client_device_id(c[1])};
	static uint32_t in[2][N], back[N];
	ruda_handle src[2], dst[2];
	for (int j = 0; j < 2; j++) {
		for (uint32_t i = 0; i < N; i++)
			in[j][i] = i * 3u + seed * 7u + (uint32_t)j * 1000u;
		ck_assert_status(ruda_client_create(c[j], in[j], sizeof(in[j]), &src[j]), RUDA_OK);
		ck_assert_status(ruda_client_empty(c[j], sizeof(in[j]), &dst[j]), RUDA_OK);
		ck_assert_status(ruda_client_ensure_init_collective(c[j], ids, 2), RUDA_OK);
	}
	for (int j = 0; j < 2; j++)
		ck_assert_status(ruda_client_all_reduce(c[j], src[j], dst[j], RUDA_ELEM_U32, ids, 2,
							RUDA_REDUCE_SUM),
				 RUDA_OK);
	for (int j = 0; j < 2; j++)
		ck_assert_status(ruda_client_sync_collective(c[j]), RUDA_OK);
	for (int j = 0; j < 2; j++) {
		ck_assert_status(ruda_client_read_one(c[j], dst[j], back), RUDA_OK);
		for (uint32_t i = 0; i < N; i++)
			ck_assert_msg(back[i] == in[0][i] + in[1][i],
				      "device %d, element %u: %u, expected %u", j, i, back[i],
				      in[0][i] + in[1][i]);
		ruda_client_close(c[j]);
	}
}

/* Host staging imported into a device that is lost and re-created: the
 * imports go with the old device (its destroy listener), the staging kept
 * for reuse is never handed out with them, and the daemon's shutdown does
 * not free them a second time on a device that is gone. */
START_TEST(device_loss_frees_staging_imports)
{
	struct test_daemon d;
	static char admin[160];
	struct group *g = getgrgid(getegid());
	ck_assert_ptr_nonnull(g);
	snprintf(admin, sizeof(admin), "admin_group=%s", g->gr_name);
	setenv("RUDA_TEST_FAULTS", "1", 1);
	test_daemon_start(&d, (const char *const[]){"--device", "0,0", "--set", admin, NULL});
	unsetenv("RUDA_TEST_FAULTS");
	all_reduce_checked(&d, 1); /* its staging is kept, imported into both */
	ck_assert_status(test_inject_device_loss(&d, 0, NULL), RUDA_OK);
	all_reduce_checked(&d, 2); /* the re-created device 0 and device 1 */
	test_daemon_stop(&d); /* asserts a clean exit */
}
END_TEST

/* Without RUDA_TEST_FAULTS=1 at start the command does nothing. */
START_TEST(device_loss_needs_the_test_switch)
{
	struct test_daemon d;
	start_daemon(&d, 0);
	ruda_client *c = test_connect(&d, "bystander");
	ruda_handle h;
	uint8_t data[64] = {9};
	ck_assert_status(ruda_client_create(c, data, sizeof(data), &h), RUDA_OK);
	ck_assert_status(test_inject_device_loss(&d, 0, NULL), RUDA_ERROR_UNSUPPORTED);
	ck_assert_status(ruda_client_read_one(c, h, data), RUDA_OK);
	ck_assert_uint_eq(data[0], 9);
	ruda_client_close(c);
	test_daemon_stop(&d);

	start_daemon(&d, 1);
	ck_assert_status(test_inject_device_loss(&d, 7, NULL), RUDA_ERROR_INVALID_ARGUMENT);
	test_daemon_stop(&d);
}
END_TEST

/* ---- rudad killed and restarted ------------------------------------------ */

static char fault_dir[64];

static void fault_setup(void)
{
	snprintf(fault_dir, sizeof(fault_dir), "/tmp/ruda-faults-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(fault_dir));
}

static void fault_teardown(void)
{
	test_remove_tree(fault_dir);
}

/* The one pipeline cache file in `dir`, or "" */
static const char *cache_file(const char *dir)
{
	static char path[512];
	path[0] = '\0';
	DIR *dp = opendir(dir);
	struct dirent *e;
	while (dp && (e = readdir(dp)))
		if (strncmp(e->d_name, "pipelines-", 10) == 0)
			snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
	if (dp)
		closedir(dp);
	return path;
}

static void start_at(struct test_daemon *d, const char *socket_path, const char *cache_dir)
{
	const char *args[] = {"--cache-dir", cache_dir, NULL};
	test_daemon_start_at(d, socket_path, args);
}

static void kill_daemon(struct test_daemon *d)
{
	int status;
	ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(d->pid, &status, 0), d->pid);
	ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	test_remove_tree(d->dir);
}

START_TEST(killed_daemon_restarts_with_its_cache)
{
	/* a default SIGPIPE: libruda must not let a dead daemon kill us */
	signal(SIGPIPE, SIG_DFL);
	char sock[128], cache[128];
	snprintf(sock, sizeof(sock), "%s/rudad.sock", fault_dir);
	snprintf(cache, sizeof(cache), "%s/cache", fault_dir);
	struct test_daemon d;

	/* a first run compiles a kernel and saves the cache as it stops */
	start_at(&d, sock, cache);
	ruda_client *c = test_connect(&d, "first");
	add_checked(c, 1000, 1);
	ruda_client_close(c);
	test_daemon_stop(&d);
	struct stat saved;
	ck_assert_int_eq(stat(cache_file(cache), &saved), 0);

	/* a second run is SIGKILLed with clients connected, one of them
	 * with work queued */
	start_at(&d, sock, cache);
	ruda_client *busy = test_connect(&d, "busy");
	ruda_client *idle = test_connect(&d, "idle");
	ruda_kernel fill = test_register(busy, "fill", 1, 8);
	ruda_handle h;
	ck_assert_status(ruda_client_empty(busy, 1 << 20, &h), RUDA_OK);
	uint32_t push[2] = {5, 1 << 18};
	for (int i = 0; i < 16; i++)
		ruda_client_launch(busy, fill, (ruda_count){64, 1, 1}, &h, 1, push, 8);
	ruda_client_flush(busy);
	kill_daemon(&d);

	/* clients see a disconnection on every call, at once */
	static uint32_t words[1 << 18];
	ck_assert_status(ruda_client_sync(busy), RUDA_ERROR_DISCONNECTED);
	ck_assert_status(ruda_client_read_one(busy, h, words), RUDA_ERROR_DISCONNECTED);
	ck_assert_status(ruda_client_launch(busy, fill, (ruda_count){1, 1, 1}, &h, 1, push, 8),
			 RUDA_ERROR_DISCONNECTED);
	uint8_t data[64] = {1};
	ruda_handle h2;
	/* a posted request may be queued without an answer: the next round
	 * trip reports the disconnection */
	ruda_status st = ruda_client_create(idle, data, sizeof(data), &h2);
	ck_assert(st == RUDA_OK || st == RUDA_ERROR_DISCONNECTED);
	ck_assert_status(ruda_client_sync(idle), RUDA_ERROR_DISCONNECTED);
	ck_assert_status(ruda_client_read_one(idle, h2, data), RUDA_ERROR_DISCONNECTED);
	ruda_client_close(busy);
	ruda_client_close(idle);

	/* the cache file is the one saved before, whole; a restarted rudad on
	 * the same socket (left behind by the killed one) loads it */
	struct stat after;
	ck_assert_int_eq(stat(cache_file(cache), &after), 0);
	ck_assert_int_eq(after.st_size, saved.st_size);
	ck_assert_int_eq(after.st_mtime, saved.st_mtime);
	start_at(&d, sock, cache);
	c = test_connect(&d, "reconnected");
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	ck_assert_status(ruda_client_daemon_stats(c, &s), RUDA_OK);
	ck_assert_uint_eq(s.cache_file_bytes, (uint64_t)saved.st_size);
	add_checked(c, 1000, 2);
	ruda_client_close(c);
	test_daemon_stop(&d);
}
END_TEST

/* ---- full disk under the cache directory --------------------------------- */

/*
 * rudad runs in a user and mount namespace of its own (`unshare -rm`, no
 * privileges needed where the kernel allows unprivileged user namespaces)
 * with a 256 KiB tmpfs on its cache directory, holding a good cache file
 * and a filler that takes every free byte. Once rudad has exited, the
 * script records what the directory held and copies the cache file out,
 * before the namespace and its tmpfs go.
 */
static const char full_disk_script[] =
	"cache=$1 seed=$2 out=$3; shift 3\n"
	"mount -t tmpfs -o size=256k ruda-full \"$cache\" || exit 97\n"
	"cp \"$seed\" \"$cache/\" || exit 98\n"
	"dd if=/dev/zero of=\"$cache/filler\" bs=4096 2>/dev/null\n"
	"dd if=/dev/zero of=\"$cache/filler-tail\" bs=1 2>/dev/null\n"
	/* no MESA_SHADER_CACHE_DISABLE: rudad turns the drivers' caches off
	 * itself when the disk is (nearly) full, else Mesa's dies of SIGBUS */
	"\"$@\" & pid=$!\n"
	"trap 'kill -TERM $pid' TERM INT\n"
	"wait $pid; rc=$?\n"
	"if kill -0 $pid 2>/dev/null; then wait $pid; rc=$?; fi\n"
	"echo $rc > \"$out.rc\"\n"
	"ls -A \"$cache\" > \"$out.list\"\n"
	"cp \"$cache\"/pipelines-*.bin \"$out.bin\"\n"
	"exit $rc\n";

static int user_namespaces_work(void)
{
	return system("unshare -rm true >/dev/null 2>&1") == 0;
}

static int same_file_contents(const char *a, const char *b)
{
	char cmd[1200];
	snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", a, b);
	return system(cmd) == 0;
}

START_TEST(full_disk_keeps_the_old_cache)
{
	if (!user_namespaces_work()) {
		fprintf(stderr, "SKIP full_disk_keeps_the_old_cache: `unshare -rm` is not "
				"allowed here\n");
		return;
	}
	char seed_dir[128], seed[512], cache[128], script[128], out[128], wrapper[1024];
	snprintf(seed_dir, sizeof(seed_dir), "%s/seed", fault_dir);
	snprintf(cache, sizeof(cache), "%s/full", fault_dir);
	snprintf(script, sizeof(script), "%s/full-disk.sh", fault_dir);
	snprintf(out, sizeof(out), "%s/after", fault_dir);
	ck_assert_int_eq(mkdir(cache, 0755), 0);
	FILE *f = fopen(script, "w");
	ck_assert_ptr_nonnull(f);
	fputs(full_disk_script, f);
	fclose(f);

	/* a good cache file, from an ordinary run */
	struct test_daemon d;
	const char *seed_args[] = {"--cache-dir", seed_dir, NULL};
	test_daemon_start(&d, seed_args);
	ruda_client *c = test_connect(&d, "seed");
	add_checked(c, 1000, 3);
	ruda_client_close(c);
	test_daemon_stop(&d);
	snprintf(seed, sizeof(seed), "%s", cache_file(seed_dir));
	struct stat st;
	ck_assert_int_eq(stat(seed, &st), 0);

	/* rudad on the full disk, with the fault switch for a device loss,
	 * whose recovery saves the cache too */
	const char *old_wrapper = getenv("RUDA_TEST_WRAPPER");
	snprintf(wrapper, sizeof(wrapper), "unshare -rm sh '%s' '%s' '%s' '%s'", script, cache, seed,
		 out);
	setenv("RUDA_TEST_WRAPPER", wrapper, 1);
	setenv("RUDA_TEST_FAULTS", "1", 1);
	const char *args[] = {"--cache-dir", cache, NULL};
	test_daemon_start(&d, args);
	unsetenv("RUDA_TEST_FAULTS");
	if (old_wrapper)
		setenv("RUDA_TEST_WRAPPER", old_wrapper, 1);
	else
		unsetenv("RUDA_TEST_WRAPPER");

	c = test_connect(&d, "on a full disk");
	ruda_daemon_stats s = RUDA_DAEMON_STATS_INIT;
	ck_assert_status(ruda_client_daemon_stats(c, &s), RUDA_OK);
	ck_assert_uint_eq(s.cache_file_bytes, (uint64_t)st.st_size); /* loaded */
	/* new kernels to save: fill with a specialization the seed lacks */
	ruda_kernel fill = test_register(c, "fill", 1, 8);
	ruda_handle h;
	ck_assert_status(ruda_client_empty(c, 4096, &h), RUDA_OK);
	uint32_t push[2] = {11, 1024}, words[1024];
	ck_assert_status(ruda_client_launch(c, fill, (ruda_count){1, 1, 1}, &h, 1, push, 8),
			 RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h, words), RUDA_OK);
	ck_assert_uint_eq(words[1023], 11);
	ruda_client_close(c);
	/* a device loss: its recovery's save fails; rudad serves on */
	ck_assert_status(test_inject_device_loss(&d, 0, NULL), RUDA_OK);
	c = test_connect(&d, "after a failed save");
	add_checked(c, 1000, 4);
	ruda_client_close(c);
	char log[256];
	snprintf(log, sizeof(log), "%s", d.log_path);
	char cmd[512];
	snprintf(cmd, sizeof(cmd), "grep -q 'saving.*failed: No space left on device' '%s'", log);
	ck_assert_msg(system(cmd) == 0, "no ENOSPC logged; see %s", log);
	test_daemon_stop(&d); /* its last save fails too; exit status 0 */

	/* the old file is whole, and no temporary file is left */
	char list[160], after[160];
	snprintf(list, sizeof(list), "%s.list", out);
	snprintf(after, sizeof(after), "%s.bin", out);
	ck_assert(same_file_contents(seed, after));
	f = fopen(list, "r");
	ck_assert_ptr_nonnull(f);
	char line[512];
	int files = 0;
	while (fgets(line, sizeof(line), f)) {
		ck_assert_msg(!strstr(line, ".bin."), "a temporary file was left: %s", line);
		files += strncmp(line, "pipelines-", 10) == 0;
	}
	fclose(f);
	ck_assert_int_eq(files, 1);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("faults");
	TCase *t = tcase_create("device_loss");
	tcase_set_timeout(t, 240);
	tcase_add_test(t, device_loss_recreates_device);
	tcase_add_test(t, device_loss_needs_the_test_switch);
	tcase_add_test(t, device_loss_frees_staging_imports);
	suite_add_tcase(s, t);
	t = tcase_create("restart");
	tcase_set_timeout(t, 240);
	tcase_add_checked_fixture(t, fault_setup, fault_teardown);
	tcase_add_test(t, killed_daemon_restarts_with_its_cache);
	tcase_add_test(t, full_disk_keeps_the_old_cache);
	suite_add_tcase(s, t);
	return s;
}

int main(void)
{
	SRunner *r = srunner_create(suite());
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}
