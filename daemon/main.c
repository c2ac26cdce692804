/* rudad: the ruda GPU compute daemon. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <uv.h>

#include "device.h"
#include "log.h"
#include "pipeline.h"
#include "server.h"

#ifndef RUDA_VERSION
#define RUDA_VERSION "0.0.0"
#endif

struct daemon {
	uv_loop_t *loop;
	struct ruda_vulkan vulkan;
	struct ruda_device *device;
	struct ruda_pipeline_registry pipelines;
	struct ruda_pipeline_registry *pipeline_list[1];
	struct ruda_server server;
	uv_signal_t sigint, sigterm;
	int stopping;
};

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: rudad [OPTION]...\n"
		"Share this machine's GPU among many processes.\n\n"
		"  -s, --socket=PATH        listen on PATH (default: $RUDA_SOCKET, else\n"
		"                           /run/ruda/rudad.sock for root, else\n"
		"                           $XDG_RUNTIME_DIR/ruda/rudad.sock)\n"
		"  -d, --device=SEL         Vulkan device: an index, or part of its name\n"
		"                           (default: the best one; a GPU before a CPU)\n"
		"      --arena-size=BYTES   shared memory per client (default 64M)\n"
		"      --max-clients=N      clients connected at once (default 1024)\n"
		"      --log-level=LEVEL    error, warning, notice, info or debug\n"
		"      --list-devices       print the Vulkan devices and exit\n"
		"  -h, --help               this help\n"
		"  -V, --version            the version\n");
}

/* "64M", "4096", "1G" -> bytes; 0 on error. */
static uint64_t parse_size(const char *text)
{
	char *end;
	errno = 0;
	unsigned long long n = strtoull(text, &end, 10);
	if (errno || end == text)
		return 0;
	switch (*end) {
	case 'k': case 'K': n <<= 10; end++; break;
	case 'm': case 'M': n <<= 20; end++; break;
	case 'g': case 'G': n <<= 30; end++; break;
	default: break;
	}
	return *end ? 0 : n;
}

static void on_signal(uv_signal_t *signal, int signum)
{
	struct daemon *d = signal->data;
	if (d->stopping)
		return;
	d->stopping = 1;
	log_notice("%s: shutting down", strsignal(signum));
	ruda__server_shutdown(&d->server);
	uv_close((uv_handle_t *)&d->sigint, NULL);
	uv_close((uv_handle_t *)&d->sigterm, NULL);
}

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
	enum { OPT_ARENA = 256, OPT_MAX_CLIENTS, OPT_LOG_LEVEL, OPT_LIST };
	static const struct option options[] = {
		{"socket", required_argument, NULL, 's'},
		{"device", required_argument, NULL, 'd'},
		{"arena-size", required_argument, NULL, OPT_ARENA},
		{"max-clients", required_argument, NULL, OPT_MAX_CLIENTS},
		{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
		{"list-devices", no_argument, NULL, OPT_LIST},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{0},
	};
	char socket_path[sizeof(((struct sockaddr_un *)0)->sun_path)] = "";
	const char *device_selector = NULL;
	struct ruda_server_options so = {
		.arena_size = 64ull << 20,
		.max_clients = 1024,
		.max_output = 1u << 20,
		.max_handles = 1u << 20,
	};
	int log_level = RUDA_LOG_INFO;
	int c;
	while ((c = getopt_long(argc, argv, "s:d:hV", options, NULL)) != -1) {
		switch (c) {
		case 's':
			snprintf(socket_path, sizeof(socket_path), "%s", optarg);
			break;
		case 'd':
			device_selector = optarg;
			break;
		case OPT_ARENA:
			so.arena_size = parse_size(optarg);
			if (so.arena_size < (1u << 20) || so.arena_size > (4ull << 30)) {
				fprintf(stderr, "rudad: --arena-size must be 1M..4G\n");
				return 2;
			}
			break;
		case OPT_MAX_CLIENTS:
			so.max_clients = (uint32_t)strtoul(optarg, NULL, 10);
			if (!so.max_clients) {
				fprintf(stderr, "rudad: --max-clients must be a positive number\n");
				return 2;
			}
			break;
		case OPT_LOG_LEVEL:
			log_level = ruda__log_level_parse(optarg);
			if (log_level < 0) {
				fprintf(stderr, "rudad: unknown log level '%s'\n", optarg);
				return 2;
			}
			break;
		case OPT_LIST:
			return list_devices();
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
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	ruda__log_init(log_level);
	if (!*socket_path && ruda__default_socket_path(socket_path, sizeof(socket_path)) < 0) {
		log_error("no socket path: pass --socket, or set RUDA_SOCKET or XDG_RUNTIME_DIR");
		return 1;
	}
	so.socket_path = socket_path;
	signal(SIGPIPE, SIG_IGN);

	static struct daemon d;
	d.loop = uv_default_loop();
	if (ruda__vulkan_init(&d.vulkan) < 0)
		return 1;
	int physical = ruda__vulkan_select(&d.vulkan, device_selector);
	if (physical < 0) {
		log_error("no Vulkan device %s%s", device_selector ? "matches " : "found",
			  device_selector ? device_selector : "");
		ruda__vulkan_finish(&d.vulkan);
		return 1;
	}
	if (ruda__device_create(&d.vulkan, (uint32_t)physical, 0, d.loop, &d.device) < 0) {
		ruda__vulkan_finish(&d.vulkan);
		return 1;
	}
	uv_unref((uv_handle_t *)&d.device->async);
	log_notice("device 0: %s", d.device->props.deviceName);
	int rc = 1;
	if (ruda__pipeline_registry_init(&d.pipelines, d.device, d.loop) < 0)
		goto out_device;
	d.pipeline_list[0] = &d.pipelines;
	if (ruda__server_init(&d.server, d.loop, &so, &d.device, d.pipeline_list, 1) < 0)
		goto out_pipelines;
	uv_signal_init(d.loop, &d.sigint);
	uv_signal_init(d.loop, &d.sigterm);
	d.sigint.data = d.sigterm.data = &d;
	uv_signal_start(&d.sigint, on_signal, SIGINT);
	uv_signal_start(&d.sigterm, on_signal, SIGTERM);
	log_notice("rudad %s ready", RUDA_VERSION);

	uv_run(d.loop, UV_RUN_DEFAULT);
	rc = 0;
out_pipelines:
	ruda__pipeline_registry_finish(&d.pipelines);
out_device:
	ruda__device_destroy(d.device);
	uv_run(d.loop, UV_RUN_DEFAULT); /* let closed handles finish */
	ruda__vulkan_finish(&d.vulkan);
	uv_loop_close(d.loop);
	return rc;
}
