/*
 * Test support: a real rudad on a temporary socket, SPIR-V from the build,
 * and raw protocol access for tests that play a misbehaving client.
 */
#ifndef RUDA_TEST_HARNESS_H
#define RUDA_TEST_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <ruda/ruda.h>

#include "ruda.pb-c.h"

struct test_daemon {
	pid_t pid;
	char dir[64];
	char socket_path[128];
	char log_path[128];
};

/* Start build/rudad on a fresh socket with `extra_args` (NULL-terminated,
 * may be NULL) and wait until it accepts connections. Aborts the test on
 * failure. */
void test_daemon_start(struct test_daemon *d, const char *const *extra_args);
/* The same on a socket path of the caller's choosing. */
void test_daemon_start_at(struct test_daemon *d, const char *socket_path,
			  const char *const *extra_args);
/* SIGTERM, wait, check it exited 0 and removed its socket; returns the
 * exit status as waitpid reports it. */
int test_daemon_stop(struct test_daemon *d);
/* Whether the daemon process is still alive. */
int test_daemon_alive(const struct test_daemon *d);

/* Connect a libruda client to the test daemon; aborts on failure. */
ruda_client *test_connect(const struct test_daemon *d, const char *name);
/* The same on the daemon's logical device `index`. */
ruda_client *test_connect_device(const struct test_daemon *d, const char *name, uint32_t index);

/* A client in a process of its own, to be killed: the child connects to
 * `d` as `name`, runs `work` (nonzero: it exits 1), says it is ready and
 * waits to be killed. A `work` that never returns calls test_fork_ready
 * itself first. Returns the child's pid once it is ready; aborts if it died
 * before. */
pid_t test_fork_client(const struct test_daemon *d, const char *name,
		       int (*work)(ruda_client *c, void *arg), void *arg);
/* In a test_fork_client child: tell the parent it is ready (once). */
void test_fork_ready(void);
/* SIGKILL `pid` and reap it. */
void test_kill(pid_t pid);

/* A well-behaved client in a process of its own, beside a hostile one:
 * connects to `d` as "good", registers add_f32 and launches it round after
 * round, each result checked against the CPU, until stopped. */
struct test_good_client {
	pid_t pid;
	int stop; /* write end of its pipe: closing it stops the client */
};
void test_good_client_start(const struct test_daemon *d, struct test_good_client *g);
/* Stop it and wait; fails the test unless every result it got was right
 * and it did at least one round. */
void test_good_client_stop(struct test_good_client *g);

/* Path of a built file: RUDA_BUILD_DIR "/" rel. */
const char *test_build_path(const char *rel);
/* Read build/shaders/<name>.spv, or build/<name>.spv when `name` has a
 * slash ("tests/shaders/x"); the caller frees it. */
uint32_t *test_load_spirv(const char *name, size_t *size);
/* Register build/shaders/<name>.spv's "main"; aborts on failure. */
ruda_kernel test_register(ruda_client *c, const char *name, uint32_t bindings,
			  uint32_t push_size);

/* For a forked client process, which must not abort through Check:
 * connect to `socket` as `name` and register add_f32 (3 bindings, 4 bytes
 * of push constants). Returns 0, 2 (no connection) or 3 (refused kernel),
 * for the process's exit status. */
int test_child_connect_add(const char *socket, const char *name, ruda_client **c,
			   ruda_kernel *add);

/* Poll the daemon's stats (through `c`) until `sessions` sessions remain
 * and device bytes equal `bytes`, or 10 s pass; returns the last stats. */
ruda_daemon_stats test_wait_for_stats(ruda_client *c, uint32_t sessions, uint64_t bytes);

/* Remove a directory and everything in it. */
void test_remove_tree(const char *dir);

/* The fd count of process `pid` once it holds still (rudad makes spare
 * arenas when idle). */
int test_settled_fds(pid_t pid);

/* Number of open fds of process `pid` (0 = self). */
int test_count_fds(pid_t pid);

/* Seconds on CLOCK_MONOTONIC. */
double test_now(void);
/* Resident memory of process `pid` in KiB (VmRSS of /proc/<pid>/status);
 * aborts the test when it cannot be read. */
long test_rss_kib(pid_t pid);

/* Deterministic pseudo-random bytes. */
void test_fill_random(void *dst, size_t size, uint64_t seed);

/* ---- raw protocol ----------------------------------------------------- */

/* A connected socket to the daemon, no handshake. */
int raw_connect(const struct test_daemon *d);
/* Send one frame: header + payload (+ fds). Returns 0 or -errno. */
int raw_send_frame(int fd, const void *payload, uint32_t len, const int *fds, int nfds);
/* Pack and send a request. */
int raw_send_request(int fd, const Ruda__Request *req);
/* Receive one reply (waits up to timeout_ms); NULL on EOF/timeout/garbage.
 * *fd_out (optional) gets a passed fd or -1. */
Ruda__Reply *raw_recv_reply(int fd, int timeout_ms, int *fd_out);
/* The same, keeping up to `max_fds` passed fds in fds_out (-1 for none). */
Ruda__Reply *raw_recv_reply_fds(int fd, int timeout_ms, int *fds_out, int max_fds);
/* Do the handshake; returns the hello reply's status. */
ruda_status raw_hello(int fd, uint64_t id);
/* The same, keeping the arena (fds[0]) and progress page (fds[1]) fds,
 * -1 where none came. */
ruda_status raw_hello_fds(int fd, uint64_t id, int fds[2]);
/* Whether the daemon has closed this connection (EOF within timeout_ms). */
int raw_closed_by_peer(int fd, int timeout_ms);

/* A float's bits, and the float of some bits (reference results compared
 * bit for bit). */
uint32_t test_f32_bits(float f);
float test_f32_of(uint32_t bits);

/* Lines of rudad's log (d->log_path) holding `needle`. */
int test_log_count(const struct test_daemon *d, const char *needle);

/* One admin request on a fresh raw session, answered RUDA_OK (asserted);
 * the reply (ruda__reply__free_unpacked it). */
Ruda__Reply *test_admin_call(const struct test_daemon *d, Ruda__Admin *admin);
/* AdminStatus, as test_admin_call; its status in reply->admin->status. */
Ruda__Reply *test_admin_status(const struct test_daemon *d);
/* AdminClients, as test_admin_call; the clients in reply->admin->clients. */
Ruda__Reply *test_admin_clients(const struct test_daemon *d);

/* Admin inject_device_loss for `device` over a raw connection (rudad
 * started with RUDA_TEST_FAULTS=1 and the caller an administrator);
 * returns the reply's status. When accepted, the same connection then
 * gets the device-lost notice and is closed (asserted here): it is on
 * device 0 too. *sessions (optional): the sessions the loss closes. */
ruda_status test_inject_device_loss(const struct test_daemon *d, uint32_t device,
				    uint32_t *sessions);

#endif
