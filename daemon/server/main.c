/* rudad: the ruda GPU compute daemon. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include <systemd/sd-daemon.h>
#include <uv.h>

#include "common/config.h"
#include "exec/compile_worker.h"
#include "device/device.h"
#include "server/device_set.h"
#include "common/log.h"
#include "exec/pipeline.h"
#include "exec/pipeline_cache.h"
#include "common/policy.h"
#include "server/recovery.h"
#include "server/server.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

/* How often the pipeline cache is saved when new kernels were compiled. */
#define CACHE_SAVE_PERIOD_MS 60000u

/* How often systemd hears how busy rudad is (STATUS=), at most. */
#define STATUS_PERIOD_MS 5000

struct daemon {
	uv_loop_t *loop;
	struct ruda_vulkan vulkan;
	struct ruda_device_set devices;
	struct ruda_server server;
	struct ruda_config config; /* running: the file, then the command line */
	struct ruda_config cli;    /* the command line alone, applied on every reload */
	const char *config_path;
	bool config_explicit; /* --config: the file must exist */
	struct ruda_policy policy;
	uv_signal_t sigint, sigterm, sighup;
	uv_timer_t service_timer; /* watchdog pings and STATUS= for systemd */
	bool service_timer_on;
	uint64_t watchdog_usec;
	char status[512]; /* the last STATUS= sent */
	int stopping;
};

/* The server's recreate_device hook: device `index` was lost. */
static int recreate_device(void *data, uint32_t index)
{
	struct daemon *d = data;
	struct ruda_device_entry *entry = &d->devices.slots[index];
	struct ruda_device_slot slot = {
		.vulkan = &d->vulkan,
		.device = &d->devices.devices[index],
		.pipelines = &entry->pipelines,
		.saver = entry->cache_saver.dir ? &entry->cache_saver : NULL,
		.cache_dir = entry->cache_saver.dir,
	};
	/* what rudad keeps about the device beyond Vulkan moves to the new one */
	struct ruda_device *old = d->devices.devices[index];
	struct ruda_device old_copy = {.physical_index = old->physical_index,
				       .type_index = old->type_index};
	struct ruda_device_details *details = old->details;
	int err = ruda__device_recreate(&d->server.ctx, index, &slot);
	if (d->devices.devices[index] != old)
		ruda__device_set_adopt(&d->devices, index, &old_copy, details);
	return err;
}

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: rudad [OPTION]...\n"
		"Share this machine's GPU among many processes.\n\n"
		"  -c, --config=PATH        configuration file (default " RUDA_CONFIG_PATH ";\n"
		"                           see rudad.conf(5)); options below override it\n"
		"      --check-config       check the configuration and exit: 0 if valid,\n"
		"                           1 with each error as PATH:LINE: message\n"
		"      --print-config       print the configuration in effect and exit\n"
		"  -s, --socket=PATH        listen on PATH (default: $RUDA_SOCKET, else\n"
		"                           /run/ruda/rudad.sock for root, else\n"
		"                           $XDG_RUNTIME_DIR/ruda/rudad.sock); a socket\n"
		"                           passed by systemd is used instead\n"
		"  -d, --device=SEL,...     Vulkan devices to open: indices or parts of\n"
		"                           names, each opened once per mention (0,0 opens\n"
		"                           device 0 twice, as two logical devices);\n"
		"                           default: all (GPUs only when there are any)\n"
		"      --arena-size=BYTES   shared memory per client (default 16M)\n"
		"      --max-clients=N      clients connected at once (default 1024)\n"
		"      --log-level=LEVEL    error, warning, notice, info or debug\n"
		"      --cache-dir=DIR      where compiled kernels are kept across restarts\n"
		"      --set=KEY=VALUE      set any key of rudad.conf(5), e.g.\n"
		"                           --set socket_mode=0666\n"
		"      --list-devices       print the Vulkan devices and exit\n"
		"  -h, --help               this help\n"
		"  -V, --version            the version\n");
}

/* ---- configuration errors ------------------------------------------------ */

static void format_error(char *buf, size_t len, const char *path, unsigned line,
			 const char *message)
{
	if (path && line)
		snprintf(buf, len, "%s:%u: %s", path, line, message);
	else if (path)
		snprintf(buf, len, "%s: %s", path, message);
	else
		snprintf(buf, len, "rudad: %s", message);
}

/* --check-config and the command line: plain lines on stderr. */
static void report_stderr(void *data, const char *path, unsigned line, const char *message)
{
	(void)data;
	char text[768];
	format_error(text, sizeof(text), path, line, message);
	fprintf(stderr, "%s\n", text);
}

/* A running daemon: log lines, so journald keeps them with their priority. */
static void report_log(void *data, const char *path, unsigned line, const char *message)
{
	(void)data;
	char text[768];
	format_error(text, sizeof(text), path, line, message);
	log_error("%s", text);
}

/* The file, then the command line over it. Returns the number of errors. */
static int read_config(struct daemon *d, struct ruda_config *out, ruda_config_report_fn *report,
		       bool *found)
{
	ruda__config_init(out);
	int errors = ruda__config_load(out, d->config_path, d->config_explicit, found, report, NULL);
	if (!errors && (ruda__config_override(out, &d->cli) < 0 ||
			ruda__config_resolve(out) == -ENOMEM)) {
		report(NULL, d->config_path, 0, "out of memory");
		errors++;
	}
	return errors;
}

/* ---- systemd -------------------------------------------------------------- */

static void notify_status(struct daemon *d, const char *extra)
{
	char status[sizeof(d->status)];
	uint64_t bytes = 0, buffers = 0;
	for (uint32_t i = 0; i < d->devices.count; i++) {
		bytes += d->devices.devices[i]->stats.bytes;
		buffers += d->devices.devices[i]->stats.buffers;
	}
	char on[300];
	if (d->devices.count == 1)
		snprintf(on, sizeof(on), "%s", d->devices.devices[0]->props.deviceName);
	else
		snprintf(on, sizeof(on), "%u devices", d->devices.count);
	snprintf(status, sizeof(status), "%u clients, %llu MiB in %llu buffers on %s",
		 (unsigned)d->server.ctx.sessions.count, (unsigned long long)(bytes >> 20),
		 (unsigned long long)buffers, on);
	if (!extra && strcmp(status, d->status) == 0)
		return;
	snprintf(d->status, sizeof(d->status), "%s", status);
	sd_notifyf(0, "%s%sSTATUS=%s", extra ? extra : "", extra ? "\n" : "", status);
}

static void on_service_timer(uv_timer_t *timer)
{
	struct daemon *d = timer->data;
	/* from the loop thread, so a stuck loop stops the pings */
	if (d->watchdog_usec)
		sd_notify(0, "WATCHDOG=1");
	notify_status(d, NULL);
}

/* Pings for WatchdogSec= and STATUS= updates, when systemd listens. */
static void start_service_timer(struct daemon *d)
{
	const char *socket = getenv("NOTIFY_SOCKET");
	if (!socket || !*socket)
		return;
	uint64_t usec = 0;
	if (sd_watchdog_enabled(0, &usec) > 0)
		d->watchdog_usec = usec;
	uint64_t period = STATUS_PERIOD_MS;
	if (d->watchdog_usec && d->watchdog_usec / 2000 < period)
		period = d->watchdog_usec / 2000 ? d->watchdog_usec / 2000 : 1;
	uv_timer_init(d->loop, &d->service_timer);
	d->service_timer.data = d;
	uv_timer_start(&d->service_timer, on_service_timer, period, period);
	uv_unref((uv_handle_t *)&d->service_timer);
	d->service_timer_on = true;
	if (d->watchdog_usec)
		log_info("watchdog: pinging systemd every %llu ms", (unsigned long long)period);
}

/* The socket systemd passed (socket activation): 0 when there is none,
 * its fd, or -1 after logging why it cannot be used. */
static int activation_socket(char *path, size_t len)
{
	int n = sd_listen_fds(1);
	if (n < 0) {
		log_error("cannot read the sockets systemd passed: %s", strerror(-n));
		return -1;
	}
	if (n == 0)
		return 0;
	if (n > 1) {
		log_error("systemd passed %d sockets; rudad listens on one (one ListenStream=)", n);
		return -1;
	}
	int fd = SD_LISTEN_FDS_START;
	if (sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0) <= 0) {
		log_error("the socket systemd passed is not a listening AF_UNIX stream socket");
		return -1;
	}
	struct sockaddr_un addr = {0};
	socklen_t alen = sizeof(addr);
	if (getsockname(fd, (struct sockaddr *)&addr, &alen) == 0 && addr.sun_path[0])
		snprintf(path, len, "%.*s", (int)sizeof(addr.sun_path), addr.sun_path);
	else
		snprintf(path, len, "fd %d", fd);
	return fd;
}

/* ---- signals --------------------------------------------------------------- */

static void append_key(char *list, size_t len, const char *name)
{
	size_t used = strlen(list);
	snprintf(list + used, len - used, "%s%s", used ? ", " : "", name);
}

/* Each client holds two descriptors (its socket and its arena): raise the
 * soft limit (1024 by default) towards max_clients' needs, up to the hard
 * limit. */
static void raise_fd_limit(uint32_t max_clients)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	rlim_t want = (rlim_t)max_clients * 2 + 64;
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
		rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want)
		log_warn("open files limited to %llu: fewer than max_clients = %u clients fit",
			 (unsigned long long)rl.rlim_cur, max_clients);
}

/* SIGHUP: read the file again; apply what can change while running, keep
 * the rest (and say so). */
static void reload(struct daemon *d)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=Reloading %s",
		   (unsigned long long)now.tv_sec * 1000000ull +
			   (unsigned long long)now.tv_nsec / 1000,
		   d->config_path);
	struct ruda_config next;
	bool found;
	int errors = read_config(d, &next, report_log, &found);
	if (errors) {
		log_error("%s: %d error%s; the running configuration stays", d->config_path,
			  errors, errors == 1 ? "" : "s");
		ruda__config_finish(&next);
		notify_status(d, "READY=1");
		return;
	}
	char changed[1024] = "", restart[1024] = "";
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++) {
		enum ruda_config_key key = (enum ruda_config_key)k;
		if (ruda__config_key_equal(&d->config, &next, key))
			continue;
		if (ruda__config_key_reloadable(key)) {
			append_key(changed, sizeof(changed), ruda__config_key_name(key));
		} else {
			append_key(restart, sizeof(restart), ruda__config_key_name(key));
			/* the running value stays what it really is */
			if (ruda__config_key_copy(&next, &d->config, key) < 0) {
				log_error("reload of %s: out of memory; the running configuration "
					  "stays", d->config_path);
				ruda__config_finish(&next);
				notify_status(d, "READY=1");
				return;
			}
		}
	}
	if (!ruda__config_quotas_equal(&d->config, &next))
		append_key(changed, sizeof(changed), "[user]/[group] sections");
	/* the policy reads d->config, so this swap applies the new rules */
	ruda__config_finish(&d->config);
	d->config = next;
	ruda__log_init(d->config.log_level);
	ruda__compile_worker_set_bounds(d->config.compile_timeout_ms, d->config.compile_memory_max);
	if (d->config.max_clients > d->server.max_clients)
		raise_fd_limit(d->config.max_clients);
	d->server.max_clients = d->config.max_clients;
	d->server.ctx.arena_size = d->config.arena_size;
	log_notice("reloaded %s%s: %s", d->config_path, found ? "" : " (absent: defaults)",
		   *changed ? changed : "nothing changed");
	if (*restart)
		log_warn("%s: %s changed; a restart applies %s", d->config_path, restart,
			 strchr(restart, ',') ? "them" : "it");
	notify_status(d, "READY=1");
}

/* The stop took longer than stop_timeout_ms: a thread is stuck in the
 * driver (device work that does not end, with no submission timeout to
 * replace the device). The socket is already gone and the clients were
 * told; exit without waiting (async-signal-safe only). */
static void on_stop_timeout(int signum)
{
	(void)signum;
	static const char msg[] = "rudad: the stop did not finish within stop_timeout_ms (device "
				  "work still running); exiting without waiting for it\n";
	ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
	(void)n;
	_exit(RUDA_EXIT_STOP_TIMEOUT);
}

/* Bound the stop: a timer signal, which fires whatever thread is stuck. */
static void arm_stop_timeout(uint32_t ms)
{
	if (!ms)
		return;
	struct sigaction sa = {.sa_handler = on_stop_timeout};
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	struct itimerval t = {.it_value = {.tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000}};
	setitimer(ITIMER_REAL, &t, NULL);
}

static void on_signal(uv_signal_t *handle, int signum)
{
	struct daemon *d = handle->data;
	if (d->stopping)
		return;
	if (signum == SIGHUP) {
		reload(d);
		return;
	}
	d->stopping = 1;
	log_notice("%s: shutting down", strsignal(signum));
	arm_stop_timeout(d->config.stop_timeout_ms);
	sd_notify(0, "STOPPING=1\nSTATUS=Shutting down");
	ruda__server_shutdown(&d->server);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
	uv_close((uv_handle_t *)&d->sighup, NULL);
	/* libuv put the default actions back: a repeated SIGTERM or a late
	 * reload must not kill rudad halfway through its shutdown (a second
	 * Ctrl-C still does) */
	signal(SIGTERM, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	if (d->service_timer_on) {
		uv_timer_stop(&d->service_timer);
		uv_close((uv_handle_t *)&d->service_timer, NULL);
		d->service_timer_on = false;
	}
}

/* rudactl shutdown: the same orderly stop as SIGTERM, after the reply. */
static void admin_shutdown(void *data)
{
	(void)data;
	uv_kill(getpid(), SIGTERM);
}

/* rudactl drain: no new clients; SIGTERM once the last one has gone. */
static void admin_drain(void *data)
{
	struct daemon *d = data;
	ruda__server_drain(&d->server);
	sd_notify(0, "STATUS=Draining: no new clients");
}

/* ---- start-up ---------------------------------------------------------------- */

static int list_devices(void)
{
	struct ruda_vulkan vk;
	if (ruda__vulkan_init(&vk) < 0)
		return 1;
	int best = ruda__vulkan_select(&vk, NULL);
	for (uint32_t i = 0; i < vk.nphysical; i++) {
		VkPhysicalDeviceProperties p;
		vkGetPhysicalDeviceProperties(vk.physical[i], &p);
		printf("%u%s %s (vendor 0x%04x, device 0x%04x, Vulkan %u.%u)\n", i,
		       (int)i == best ? "*" : " ", p.deviceName, p.vendorID, p.deviceID,
		       VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
	}
	ruda__vulkan_finish(&vk);
	return 0;
}

int main(int argc, char **argv)
{
	enum {
		OPT_ARENA = 256,
		OPT_MAX_CLIENTS,
		OPT_LOG_LEVEL,
		OPT_LIST,
		OPT_CHECK,
		OPT_PRINT,
		OPT_SET,
		OPT_CACHE_DIR,
	};
	static const struct option options[] = {
		{"config", required_argument, NULL, 'c'},
		{"check-config", no_argument, NULL, OPT_CHECK},
		{"print-config", no_argument, NULL, OPT_PRINT},
		{"socket", required_argument, NULL, 's'},
		{"device", required_argument, NULL, 'd'},
		{"arena-size", required_argument, NULL, OPT_ARENA},
		{"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
		{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
		{"set", required_argument, NULL, OPT_SET},
		{"cache-dir", required_argument, NULL, OPT_CACHE_DIR},
		{"list-devices", no_argument, NULL, OPT_LIST},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	/* rudad run again by itself to compile kernels (compile_worker.h) */
	if (argc > 1 && strcmp(argv[1], RUDA_COMPILE_WORKER_ARG) == 0)
		return ruda__compile_worker_main(argc, argv);
	static struct daemon d;
	d.config_path = RUDA_CONFIG_PATH;
	ruda__config_init(&d.cli);
	bool check = false, print = false, list = false;
	int c, bad = 0;
	while ((c = getopt_long(argc, argv, "c:s:d:hV", options, NULL)) != -1) {
		const char *key = NULL, *value = optarg;
		char set[512];
		switch (c) {
		case 'c':
			d.config_path = optarg;
			d.config_explicit = true;
			break;
		case OPT_CHECK: check = true; break;
		case OPT_PRINT: print = true; break;
		case 's': key = "socket"; break;
		case 'd': key = "devices"; break;
		case OPT_ARENA: key = "arena_size"; break;
		case OPT_MAX_CLIENTS: key = "max_clients"; break;
		case OPT_LOG_LEVEL: key = "log_level"; break;
		case OPT_CACHE_DIR: key = "cache_directory"; break;
		case OPT_SET: {
			const char *eq = strchr(optarg, '=');
			if (!eq || eq == optarg || (size_t)(eq - optarg) >= sizeof(set)) {
				fprintf(stderr, "rudad: --set takes KEY=VALUE\n");
				return 2;
			}
			snprintf(set, sizeof(set), "%.*s", (int)(eq - optarg), optarg);
			key = set;
			value = eq + 1;
			break;
		}
		case OPT_LIST: list = true; break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("rudad %s\n", RUDA_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (key && ruda__config_set(&d.cli, key, value, report_stderr, NULL) < 0)
			bad = 1;
	}
	if (bad)
		return 2;
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (list)
		return list_devices();

	ruda__log_init(RUDA_LOG_INFO); /* for errors in the file, until it says */
	bool found;
	if (read_config(&d, &d.config, check || print ? report_stderr : report_log, &found)) {
		if (!check && !print)
			fprintf(stderr, "rudad: %s has errors; not starting\n", d.config_path);
		ruda__config_finish(&d.config);
		ruda__config_finish(&d.cli);
		return 1;
	}
	if (check)
		fprintf(stderr, found ? "%s: ok\n" : "%s: absent; the defaults apply\n",
			d.config_path);
	if (print)
		ruda__config_write(&d.config, stdout);
	if (check || print) {
		ruda__config_finish(&d.config);
		ruda__config_finish(&d.cli);
		return 0;
	}
	ruda__log_init(d.config.log_level);
	if (found)
		log_info("configuration: %s", d.config_path);

	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)] = "";
	int listen_fd = activation_socket(socket_path, sizeof(socket_path));
	if (listen_fd < 0)
		return 1;
	if (listen_fd > 0 && d.config.socket && strcmp(d.config.socket, socket_path) != 0)
		log_notice("socket = %s is not used: systemd passed %s", d.config.socket, socket_path);
	if (!listen_fd) {
		if (d.config.socket)
			snprintf(socket_path, sizeof(socket_path), "%s", d.config.socket);
		else if (ruda__default_socket_path(socket_path, sizeof(socket_path)) < 0) {
			log_error("no socket path: set socket in %s, pass --socket, or set "
				  "RUDA_SOCKET or XDG_RUNTIME_DIR", d.config_path);
			return 1;
		}
	}
	struct ruda_server_options so = {
		.socket_path = socket_path,
		.listen_fd = listen_fd,
		.socket_mode = d.config.socket_mode,
		.has_socket_group = d.config.socket_group != NULL,
		.socket_gid = d.config.socket_gid,
		.policy = &d.policy,
		.arena_size = d.config.arena_size,
		.max_clients = d.config.max_clients,
		.max_output = 1u << 20,
		.max_handles = 1u << 20,
	};
	ruda__policy_init(&d.policy, &d.config);
	signal(SIGPIPE, SIG_IGN);
	raise_fd_limit(d.config.max_clients);

	/* the thread pool compiles kernels and reduces all-reduce data: a
	 * thread per core (libuv's default is 4) unless the environment says */
	if (!getenv("UV_THREADPOOL_SIZE")) {
		long cores = sysconf(_SC_NPROCESSORS_ONLN);
		char threads[16];
		snprintf(threads, sizeof(threads), "%ld", cores < 4 ? 4 : cores > 64 ? 64 : cores);
		setenv("UV_THREADPOOL_SIZE", threads, 0);
	}
	d.loop = uv_default_loop();
	ruda__compile_worker_enable(d.config.compile_timeout_ms, d.config.compile_memory_max);
	const char *cache_dir = d.config.cache_directory;
	if (cache_dir)
		ruda__pipeline_cache_setup_driver_caches(cache_dir);
	/* test-only commands and behaviours: never set by the service units */
	const char *faults = getenv("RUDA_TEST_FAULTS");
	bool test_faults = faults && strcmp(faults, "1") == 0;
	if (ruda__vulkan_init(&d.vulkan) < 0)
		return 1;
	d.vulkan.no_export = !d.config.export_memory;
	d.vulkan.max_queues = d.config.queues;
	d.vulkan.lanes = !d.config.lanes || !strcmp(d.config.lanes, "auto") ? RUDA_LANES_AUTO
			 : !strcmp(d.config.lanes, "on")			   ? RUDA_LANES_ON
										   : RUDA_LANES_OFF;
	/* the combine kernel that flushes f32 subnormals, on devices that keep
	 * them, for its tests */
	const char *flush = test_faults ? getenv("RUDA_TEST_FLUSH_SUBNORMALS") : NULL;
	d.vulkan.test_flush_subnormals = flush && strcmp(flush, "1") == 0;
	int rc = 1;
	if (ruda__device_set_open(&d.devices, &d.vulkan, d.config.devices, d.loop,
				  (uint64_t)d.config.submission_timeout_ms * 1000000u, cache_dir,
				  CACHE_SAVE_PERIOD_MS) < 0)
		goto out_devices;
	for (uint32_t i = 0; i < d.devices.count; i++)
		ruda__memory_set_keep_for_ms(&d.devices.devices[i]->allocator,
					     d.config.freed_memory_keep_ms);
	so.cache_dir = cache_dir;
	if (ruda__server_init(&d.server, d.loop, &so, d.devices.devices, d.devices.pipelines,
			      d.devices.count) < 0)
		goto out_devices;
	d.server.ctx.drain = admin_drain;
	d.server.ctx.shutdown = admin_shutdown;
	d.server.ctx.hook_data = &d;
	d.server.ctx.recreate_device = recreate_device;
	d.server.ctx.peer_reduce =
		!d.config.peer_reduce || !strcmp(d.config.peer_reduce, "auto") ? RUDA_PEER_REDUCE_AUTO
		: !strcmp(d.config.peer_reduce, "on")				 ? RUDA_PEER_REDUCE_ON
										 : RUDA_PEER_REDUCE_OFF;
	d.server.ctx.test_faults = test_faults;
	if (d.server.ctx.test_faults)
		log_warn("RUDA_TEST_FAULTS=1: test-only fault injection is enabled");
	if (d.vulkan.test_flush_subnormals)
		log_warn("RUDA_TEST_FLUSH_SUBNORMALS=1: all-reduce kernels flush f32 subnormals");
	uv_signal_init(d.loop, &d.sigint);
	uv_signal_init(d.loop, &d.sigterm);
	uv_signal_init(d.loop, &d.sighup);
	d.sigint.data = d.sigterm.data = d.sighup.data = &d;
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	uv_signal_start(&d.sighup, on_signal, SIGHUP);
	start_service_timer(&d);
	log_notice("rudad %s ready on %s", RUDA_VERSION, socket_path);
	notify_status(&d, "READY=1");

	uv_run(d.loop, UV_RUN_DEFAULT);
	ruda__server_finish(&d.server);
	rc = 0;
out_devices:
	ruda__device_set_close(&d.devices);
	uv_run(d.loop, UV_RUN_DEFAULT); /* let closed handles finish */
	ruda__device_set_free(&d.devices);
	if (ruda__device_abandoned_count()) {
		/* a timed-out kernel still runs in a driver thread of a replaced
		 * device: destroying the instance (or exit's handlers) would wait
		 * for it forever */
		log_warn("%u replaced device%s still running timed-out work: exiting without "
			 "releasing %s", ruda__device_abandoned_count(),
			 ruda__device_abandoned_count() == 1 ? "" : "s",
			 ruda__device_abandoned_count() == 1 ? "it" : "them");
		ruda__config_finish(&d.config);
		ruda__config_finish(&d.cli);
		_exit(rc);
	}
	ruda__vulkan_finish(&d.vulkan);
	uv_loop_close(d.loop);
	ruda__config_finish(&d.config);
	ruda__config_finish(&d.cli);
	return rc;
}
