#include "exec/pipeline_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "../../proto/sha256.h"
#include "common/cache_file.h"
#include "device/device.h"
#include "common/log.h"
#include "exec/pipeline.h"

#define CACHE_MAGIC "RUDAPC01"
/* Larger files are not ours to load. */
#define MAX_CACHE_BYTES (512u << 20)

struct cache_header {
	char magic[8];
	uint32_t header_size;
	uint32_t vendor_id;
	uint32_t device_id;
	uint32_t driver_version;
	uint8_t uuid[VK_UUID_SIZE];
	uint64_t data_size;
	uint8_t sha256[RUDA_SHA256_SIZE];
};

int ruda__pipeline_cache_path(const struct ruda_device *d, const char *dir, char *buf, size_t len)
{
	char uuid[2 * VK_UUID_SIZE + 1];
	for (unsigned i = 0; i < VK_UUID_SIZE; i++)
		snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
	int n = snprintf(buf, len, "%s/pipelines-%04x-%04x-%s-%08x.bin", dir, d->props.vendorID,
			 d->props.deviceID, uuid, d->props.driverVersion);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

static void header_for(const struct ruda_device *d, struct cache_header *h)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, CACHE_MAGIC, sizeof(h->magic));
	h->header_size = sizeof(*h);
	h->vendor_id = d->props.vendorID;
	h->device_id = d->props.deviceID;
	h->driver_version = d->props.driverVersion;
	memcpy(h->uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE);
}

static int read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;
	while (len) {
		ssize_t n = read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int64_t ruda__pipeline_cache_load(struct ruda_device *d, const char *dir)
{
	char path[4096];
	if (ruda__pipeline_cache_path(d, dir, path, sizeof(path)) < 0)
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			log_warn("pipeline cache %s: %s; starting without it", path, strerror(errno));
		else
			log_info("pipeline cache %s: none yet", path);
		return 0;
	}
	struct cache_header want, got;
	header_for(d, &want);
	const char *why = NULL;
	uint8_t *data = NULL;
	struct stat st;
	if (fstat(fd, &st) < 0 || read_all(fd, &got, sizeof(got)) < 0)
		why = "truncated header";
	else if (memcmp(got.magic, CACHE_MAGIC, sizeof(got.magic)) != 0 ||
		 got.header_size != sizeof(got))
		why = "not a rudad pipeline cache";
	else if (got.vendor_id != want.vendor_id || got.device_id != want.device_id ||
		 got.driver_version != want.driver_version ||
		 memcmp(got.uuid, want.uuid, VK_UUID_SIZE) != 0)
		why = "written for another device or driver";
	else if (got.data_size > MAX_CACHE_BYTES ||
		 (uint64_t)st.st_size != sizeof(got) + got.data_size)
		why = "size does not match its header";
	else if (!(data = malloc(got.data_size ? got.data_size : 1)) ||
		 read_all(fd, data, got.data_size) < 0)
		why = "unreadable";
	else {
		uint8_t sha[RUDA_SHA256_SIZE];
		ruda__sha256(data, got.data_size, sha);
		if (memcmp(sha, got.sha256, sizeof(sha)) != 0)
			why = "checksum mismatch (corrupt)";
	}
	close(fd);
	int64_t loaded = 0;
	if (!why) {
		VkPipelineCacheCreateInfo info = {
			.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
			.initialDataSize = got.data_size,
			.pInitialData = data,
		};
		/* nothing is compiled yet at start-up: the loaded cache simply
		 * becomes the device's (some drivers ignore merged data) */
		VkPipelineCache loaded_cache;
		if (vkCreatePipelineCache(d->vk, &info, NULL, &loaded_cache) != VK_SUCCESS)
			why = "refused by the driver";
		else {
			vkDestroyPipelineCache(d->vk, d->pipeline_cache, NULL);
			d->pipeline_cache = loaded_cache;
		}
	}
	free(data);
	if (why) {
		log_warn("pipeline cache %s: %s; ignored", path, why);
		return 0;
	}
	loaded = (int64_t)st.st_size;
	d->stats.cache_file_bytes = (uint64_t)loaded;
	log_notice("pipeline cache %s: loaded %lld bytes", path, (long long)loaded);
	return loaded;
}

int64_t ruda__pipeline_cache_save(struct ruda_device *d, const char *dir)
{
	char path[4096];
	if (ruda__pipeline_cache_path(d, dir, path, sizeof(path)) < 0)
		return -ENAMETOOLONG;
	int err;
	size_t size = 0;
	if (vkGetPipelineCacheData(d->vk, d->pipeline_cache, &size, NULL) != VK_SUCCESS)
		return -EIO;
	uint8_t *data = malloc(size ? size : 1);
	if (!data)
		return -ENOMEM;
	/* the cache may have grown since the size query: take what fits */
	VkResult r = vkGetPipelineCacheData(d->vk, d->pipeline_cache, &size, data);
	if (r != VK_SUCCESS && r != VK_INCOMPLETE) {
		free(data);
		return -EIO;
	}
	struct cache_header h;
	header_for(d, &h);
	h.data_size = size;
	ruda__sha256(data, size, h.sha256);
	err = ruda__cache_file_write(dir, path, &h, sizeof(h), data, size);
	free(data);
	if (err)
		return err;
	return (int64_t)(sizeof(h) + size);
}

/* Free bytes under the cache directory below which the drivers' caches
 * are not used. */
#define DRIVER_CACHE_MIN_FREE (64ull * 1024 * 1024)

void ruda__pipeline_cache_setup_driver_caches(const char *dir)
{
	/* Mesa (lavapipe and the other Mesa drivers) and NVIDIA keep their own
	 * compiled-shader caches: keep them beside ours */
	char path[4096];
	snprintf(path, sizeof(path), "%s/driver", dir);
	/* NVIDIA's driver does not create the directory itself */
	ruda__cache_file_mkdir(path);
	setenv("MESA_SHADER_CACHE_DIR", path, 0);
	setenv("__GL_SHADER_DISK_CACHE_PATH", path, 0);
	/* Mesa maps its cache's index file and dies of SIGBUS when writing it
	 * on a full filesystem: with little room left, the drivers' caches are
	 * off for this run (ours only fails to save, which is harmless) */
	struct statvfs fs;
	if (statvfs(path, &fs) == 0 &&
	    (uint64_t)fs.f_bavail * fs.f_frsize < DRIVER_CACHE_MIN_FREE) {
		log_warn("%s: %llu KiB free: the drivers' own shader caches are off for this run",
			 path, (unsigned long long)((uint64_t)fs.f_bavail * fs.f_frsize / 1024));
		setenv("MESA_SHADER_CACHE_DISABLE", "true", 0);
		setenv("__GL_SHADER_DISK_CACHE", "0", 0);
		return;
	}
	setenv("__GL_SHADER_DISK_CACHE", "1", 0);
}

/* ---- saver -------------------------------------------------------------- */

static void save_work(uv_work_t *work)
{
	struct ruda_pipeline_cache_saver *s = work->data;
	s->result = ruda__pipeline_cache_save(s->device, s->dir);
}

static void save_done(uv_work_t *work, int status)
{
	struct ruda_pipeline_cache_saver *s = work->data;
	s->saving = 0;
	if (status < 0)
		return;
	if (s->result < 0)
		log_warn("pipeline cache: saving to %s failed: %s", s->dir, strerror((int)-s->result));
	else
		s->device->stats.cache_file_bytes = (uint64_t)s->result;
}

static void on_timer(uv_timer_t *timer)
{
	struct ruda_pipeline_cache_saver *s = timer->data;
	if (s->saving || s->registry->compiled == s->saved_compiled)
		return;
	s->saved_compiled = s->registry->compiled;
	s->work.data = s;
	if (uv_queue_work(timer->loop, &s->work, save_work, save_done) == 0)
		s->saving = 1;
}

int ruda__pipeline_cache_saver_init(struct ruda_pipeline_cache_saver *s, uv_loop_t *loop,
				    struct ruda_device *device,
				    struct ruda_pipeline_registry *registry, const char *dir,
				    uint64_t period_ms)
{
	memset(s, 0, sizeof(*s));
	s->device = device;
	s->registry = registry;
	s->dir = strdup(dir);
	if (!s->dir)
		return -ENOMEM;
	uv_timer_init(loop, &s->timer);
	s->timer.data = s;
	uv_timer_start(&s->timer, on_timer, period_ms, period_ms);
	/* the timer alone must not keep rudad running */
	uv_unref((uv_handle_t *)&s->timer);
	return 0;
}

void ruda__pipeline_cache_saver_finish(struct ruda_pipeline_cache_saver *s)
{
	if (!s->dir)
		return;
	uv_timer_stop(&s->timer);
	uv_close((uv_handle_t *)&s->timer, NULL);
	/* a periodic save still running finishes before the loop ends; this
	 * one is the last word */
	int64_t r = ruda__pipeline_cache_save(s->device, s->dir);
	if (r < 0)
		log_warn("pipeline cache: saving to %s failed: %s", s->dir, strerror((int)-r));
	else
		log_info("pipeline cache: saved %lld bytes", (long long)r);
	free(s->dir);
	s->dir = NULL;
}
