/*
 * rudad's live Vulkan objects, counted by tests/vkcount (preloaded into
 * rudad): a client SIGKILLed at every stage of a transfer and of a launch
 * leaves no object, memory or fd behind, and a device loss's recovery
 * leaves the objects of a freshly started daemon.
 */
#include <check.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"
#include "vkcount/vkcount.h"

#define ck_assert_status(got, want) ck_assert_msg((got) == (want), "%s (%d), expected %s", \
						 ruda_strerror(got), (int)(got), ruda_strerror(want))

static char count_path[64];
static struct vkcount *counts;

/* Start rudad with the counting library preloaded (and `faults` for the
 * device-loss switch, with this user's group as administrators). */
static void start(struct test_daemon *d, int faults)
{
	snprintf(count_path, sizeof(count_path), "/tmp/ruda-vkcount-XXXXXX");
	int fd = mkstemp(count_path);
	ck_assert_int_ge(fd, 0);
	char preload[512];
	snprintf(preload, sizeof(preload), "%s", test_build_path("tests/libvkcount.so"));
	ck_assert_int_eq(access(preload, R_OK), 0);
	char *asan = getenv("ASAN_OPTIONS") ? strdup(getenv("ASAN_OPTIONS")) : NULL;
	char asan_preload[1024];
	/* ASan wants its runtime first; the preloaded library comes before it */
	snprintf(asan_preload, sizeof(asan_preload), "%s%sverify_asan_link_order=0",
		 asan ? asan : "", asan ? ":" : "");
	setenv("ASAN_OPTIONS", asan_preload, 1);
	setenv("LD_PRELOAD", preload, 1);
	setenv("RUDA_VK_COUNT_FILE", count_path, 1);
	static char admin[160];
	struct group *g = getgrgid(getegid());
	ck_assert_ptr_nonnull(g);
	snprintf(admin, sizeof(admin), "admin_group=%s", g->gr_name);
	const char *args[] = {"--set", admin, NULL};
	if (faults)
		setenv("RUDA_TEST_FAULTS", "1", 1);
	test_daemon_start(d, args);
	unsetenv("RUDA_TEST_FAULTS");
	unsetenv("LD_PRELOAD");
	unsetenv("RUDA_VK_COUNT_FILE");
	if (asan)
		setenv("ASAN_OPTIONS", asan, 1);
	else
		unsetenv("ASAN_OPTIONS");
	free(asan);
	counts = mmap(NULL, sizeof(*counts), PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert_ptr_ne(counts, MAP_FAILED);
	ck_assert_msg(__atomic_load_n(&counts->magic, __ATOMIC_ACQUIRE) == VKCOUNT_MAGIC,
		      "the counting library did not run in rudad");
}

static void stop(struct test_daemon *d)
{
	test_daemon_stop(d);
	/* every object destroyed by the end */
	for (int k = 0; k < VKCOUNT_KINDS; k++)
		ck_assert_msg(counts->live[k] == 0, "%lld %s left at exit",
			      (long long)counts->live[k], vkcount_names[k]);
	munmap(counts, sizeof(*counts));
	unlink(count_path);
}

static void snapshot(int64_t out[VKCOUNT_KINDS])
{
	for (int k = 0; k < VKCOUNT_KINDS; k++)
		out[k] = __atomic_load_n(&counts->live[k], __ATOMIC_RELAXED);
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	nanosleep(&ts, NULL);
}

/* Whether kind `k` is compared: command buffers are kept for reuse by the
 * device (one per submission it ever had in flight at once), so their
 * number follows the peak of concurrent work, not the clients alive. */
static int compared(int k, int with_pools)
{
	return with_pools || k != VKCOUNT_COMMAND_BUFFER;
}

/* Wait (up to 20 s) for the counts to come back to `base`; then they must
 * be equal (command buffers too when `with_pools`). */
static void assert_counts_pools(const int64_t base[VKCOUNT_KINDS], const char *when,
				int with_pools)
{
	int64_t now[VKCOUNT_KINDS];
	for (int i = 0; i < 400; i++) {
		snapshot(now);
		int same = 1;
		for (int k = 0; k < VKCOUNT_KINDS; k++)
			same &= !compared(k, with_pools) || now[k] == base[k];
		if (same)
			return;
		sleep_ms(50);
	}
	for (int k = 0; k < VKCOUNT_KINDS; k++)
		ck_assert_msg(!compared(k, with_pools) || now[k] == base[k],
			      "%s: %lld %s live, %lld before", when, (long long)now[k],
			      vkcount_names[k], (long long)base[k]);
}

static void assert_counts(const int64_t base[VKCOUNT_KINDS], const char *when)
{
	assert_counts_pools(base, when, 1);
}

/* ---- a client killed at every stage ------------------------------------- */

enum stage {
	CONNECTED,
	EMPTY_POSTED,
	WRITE_POSTED,
	WRITE_FLUSHED,
	READ_DONE,
	KERNEL_REGISTERED,
	LAUNCH_POSTED,
	LAUNCH_FLUSHED,
	LAUNCHES_IN_FLIGHT,
	PROFILE_OPEN,
	SYNCED,
	EXCLUSIVE_HELD,
	STAGES
};

static const char *const stage_names[STAGES] = {
	"connected",      "empty posted",       "write posted", "write flushed",
	"read done",      "kernel registered",  "launch posted", "launch flushed",
	"launches in flight", "profile open",   "synced",       "exclusive lease held",
};

#define DIE_AT(s)                                                                             \
	do {                                                                                  \
		if (stage == (s))                                                             \
			raise(SIGKILL);                                                       \
	} while (0)

/* The child: go as far as `stage`, then SIGKILL itself. */
static void client_until(const struct test_daemon *d, enum stage stage)
{
	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = d->socket_path, .client_name = "doomed"};
	ruda_client *c = NULL;
	if (ruda_client_connect(&o, &c) != RUDA_OK)
		_exit(2);
	DIE_AT(CONNECTED);
	const size_t size = 4u << 20;
	ruda_handle h;
	if (ruda_client_empty(c, size, &h) != RUDA_OK)
		_exit(3);
	DIE_AT(EMPTY_POSTED);
	uint8_t *data = malloc(size);
	memset(data, 0x5a, size);
	if (ruda_client_write(c, h, 0, data, size) != RUDA_OK)
		_exit(4);
	DIE_AT(WRITE_POSTED);
	ruda_client_flush(c);
	DIE_AT(WRITE_FLUSHED);
	if (ruda_client_read_one(c, h, data) != RUDA_OK || data[size - 1] != 0x5a)
		_exit(5);
	DIE_AT(READ_DONE);
	size_t spv_size;
	uint32_t *spv = test_load_spirv("fill", &spv_size);
	ruda_kernel_desc desc = {.struct_size = sizeof(ruda_kernel_desc),
		.spirv = spv, .spirv_size = spv_size, .entry_point = "main",
				 .binding_count = 1, .push_constant_size = 8};
	ruda_kernel k;
	if (ruda_client_kernel_register(c, &desc, &k) != RUDA_OK)
		_exit(6);
	DIE_AT(KERNEL_REGISTERED);
	uint32_t push[2] = {3, (uint32_t)(size / 4)};
	ruda_client_launch(c, k, (ruda_count){16, 1, 1}, &h, 1, push, 8);
	DIE_AT(LAUNCH_POSTED);
	ruda_client_flush(c);
	DIE_AT(LAUNCH_FLUSHED);
	for (int i = 0; i < 16; i++)
		ruda_client_launch(c, k, (ruda_count){64, 1, 1}, &h, 1, push, 8);
	ruda_client_flush(c);
	DIE_AT(LAUNCHES_IN_FLIGHT);
	ruda_profile_window w;
	if (ruda_client_profile_start(c, &w) != RUDA_OK)
		_exit(7);
	ruda_client_launch(c, k, (ruda_count){4, 1, 1}, &h, 1, push, 8);
	ruda_client_flush(c);
	DIE_AT(PROFILE_OPEN);
	if (ruda_client_sync(c) != RUDA_OK)
		_exit(8);
	DIE_AT(SYNCED);
	if (ruda_client_exclusive_begin(c, 10000) != RUDA_OK)
		_exit(9);
	DIE_AT(EXCLUSIVE_HELD);
	_exit(10);
}

/* The same work done to the end, so that the registry holds the kernel
 * and the arena pool its spares before the baseline is taken. */
static void warm_up(const struct test_daemon *d)
{
	ruda_client *c = test_connect(d, "warm-up");
	ruda_kernel k = test_register(c, "fill", 1, 8);
	ruda_handle h;
	ck_assert_status(ruda_client_empty(c, 4096, &h), RUDA_OK);
	uint32_t push[2] = {1, 1024}, out[1024];
	ruda_profile_window w;
	ck_assert_status(ruda_client_profile_start(c, &w), RUDA_OK);
	ck_assert_status(ruda_client_launch(c, k, (ruda_count){1, 1, 1}, &h, 1, push, 8), RUDA_OK);
	uint64_t ns;
	ck_assert_status(ruda_client_profile_end(c, w, &ns), RUDA_OK);
	ck_assert_status(ruda_client_read_one(c, h, out), RUDA_OK);
	ck_assert_uint_eq(out[1023], 1);
	ruda_client_close(c);
}

START_TEST(killed_at_every_stage)
{
	struct test_daemon d;
	start(&d, 0);
	warm_up(&d);
	ruda_client *watch = test_connect(&d, "watch");
	test_wait_for_stats(watch, 1, 0);
	int fds0 = test_settled_fds(d.pid);
	int64_t base[VKCOUNT_KINDS];
	snapshot(base);
	ck_assert_int_eq(base[VKCOUNT_DEVICE], 1);
	ck_assert_int_ge(base[VKCOUNT_PIPELINE], 1);
	/* twice: the pool of command buffers may grow in the first round, and
	 * must not in the second */
	int64_t after_first[VKCOUNT_KINDS];
	for (int round = 0; round < 2; round++)
	for (int stage = 0; stage < STAGES; stage++) {
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0)
			client_until(&d, (enum stage)stage);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
			      "stage %s: the client failed before it (exit %d)", stage_names[stage],
			      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		ruda_daemon_stats s = test_wait_for_stats(watch, 1, 0);
		ck_assert_msg(s.sessions == 1 && s.device_bytes == 0 && s.device_buffers == 0,
			      "stage %s: %u sessions, %llu bytes in %llu buffers remain",
			      stage_names[stage], s.sessions, (unsigned long long)s.device_bytes,
			      (unsigned long long)s.device_buffers);
		assert_counts_pools(base, stage_names[stage], 0);
		ck_assert_msg(test_settled_fds(d.pid) == fds0, "stage %s: fds %d, %d before",
			      stage_names[stage], test_settled_fds(d.pid), fds0);
		if (round == 0 && stage == STAGES - 1)
			snapshot(after_first);
	}
	/* everything but command buffers as after the first round; those may
	 * follow a higher peak of work in flight by a few, where one lost per
	 * killed client would be STAGES more */
	int64_t after_second[VKCOUNT_KINDS];
	snapshot(after_second);
	assert_counts_pools(after_first, "second round", 0);
	ck_assert_msg(after_second[VKCOUNT_COMMAND_BUFFER] <= after_first[VKCOUNT_COMMAND_BUFFER] + 3,
		      "second round: %lld command buffers, %lld after the first",
		      (long long)after_second[VKCOUNT_COMMAND_BUFFER],
		      (long long)after_first[VKCOUNT_COMMAND_BUFFER]);
	ruda_client_close(watch);
	stop(&d);
}
END_TEST

/* ---- device loss ---------------------------------------------------------- */

START_TEST(device_loss_leaves_nothing)
{
	struct test_daemon d;
	start(&d, 1);
	int fds0 = test_settled_fds(d.pid);
	int64_t fresh[VKCOUNT_KINDS];
	snapshot(fresh);
	ck_assert_int_eq(fresh[VKCOUNT_DEVICE], 1);
	ck_assert_int_eq(fresh[VKCOUNT_PIPELINE], 0);
	/* kernels compiled, buffers held, work in flight, a profile open */
	ruda_client *c = test_connect(&d, "victim");
	ruda_kernel k = test_register(c, "fill", 1, 8);
	ruda_handle h;
	ck_assert_status(ruda_client_empty(c, 1 << 20, &h), RUDA_OK);
	uint32_t push[2] = {2, 1 << 18};
	ruda_profile_window w;
	ck_assert_status(ruda_client_profile_start(c, &w), RUDA_OK);
	for (int i = 0; i < 8; i++)
		ruda_client_launch(c, k, (ruda_count){64, 1, 1}, &h, 1, push, 8);
	ruda_client_flush(c);
	/* a round trip: the buffer has been made (the arena, imported only at
	 * a first transfer, adds no VkBuffer here) */
	ruda_memory_usage mu = RUDA_MEMORY_USAGE_INIT;
	ck_assert_status(ruda_client_memory_usage(c, &mu), RUDA_OK);
	int64_t busy[VKCOUNT_KINDS];
	snapshot(busy);
	ck_assert_int_ge(busy[VKCOUNT_PIPELINE], 1);
	ck_assert_int_gt(busy[VKCOUNT_BUFFER], fresh[VKCOUNT_BUFFER]);

	ck_assert_status(test_inject_device_loss(&d, 0, NULL), RUDA_OK);
	ck_assert_status(ruda_client_sync(c), RUDA_ERROR_DEVICE_LOST);
	ruda_client_close(c);
	/* the re-created device holds what a fresh daemon's does */
	ruda_client *watch = test_connect(&d, "watch");
	test_wait_for_stats(watch, 1, 0);
	ruda_client_close(watch);
	assert_counts(fresh, "after the device's re-creation");
	ck_assert_int_eq(test_settled_fds(d.pid), fds0);
	stop(&d);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("vk_objects");
	TCase *t = tcase_create("vk_objects");
	tcase_set_timeout(t, 600);
	tcase_add_test(t, killed_at_every_stage);
	tcase_add_test(t, device_loss_leaves_nothing);
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
