#include "exec/throughput_cache.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../proto/sha256.h"
#include "common/cache_file.h"
#include "device/device.h"
#include "common/log.h"

#define FILE_MAGIC "RUDATP01"
#define SAVE_DELAY_MS 1000

/* One measurement, found by the hash of its key (and its key). */
struct throughput {
	struct throughput *next; /* same hash */
	double value;
	char key[];
};

struct file_header {
	char magic[8];
	uint32_t header_size;
	uint32_t vendor_id;
	uint32_t device_id;
	uint32_t driver_version;
	uint8_t uuid[VK_UUID_SIZE];
	uint32_t count;
	uint64_t body_size;
	uint8_t sha256[RUDA_SHA256_SIZE];
};

struct ruda_throughput_cache {
	struct ruda_handle_table table; /* key hash -> struct throughput chain */
	size_t count;
	char *dir, *path;         /* NULL: memory only */
	struct file_header identity; /* of the device, for the file's header */
	uv_timer_t *timer;        /* a save a second after a change */
	bool dirty;               /* changed since the last snapshot */
	bool saving;              /* a snapshot is being written in the pool */
	bool released;            /* freed while saving: the save's end frees it */
	uv_work_t work;
	uint8_t *snapshot;        /* header + body being written */
	size_t snapshot_len;
	int result;
};

static uint64_t key_hash64(const char *key)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *key; key++) {
		h ^= (uint8_t)*key;
		h *= 0x100000001b3ull;
	}
	return h;
}

static int key_ok(const char *key)
{
	return key && *key && strlen(key) <= RUDA_THROUGHPUT_MAX_KEY;
}

static struct throughput *find(const struct ruda_throughput_cache *c, const char *key)
{
	struct throughput *e = ruda__handle_table_get(&c->table, key_hash64(key));
	while (e && strcmp(e->key, key) != 0)
		e = e->next;
	return e;
}

/* Add without the checks set makes (the load's entries are checked). */
static int insert(struct ruda_throughput_cache *c, const char *key, size_t len, double value)
{
	struct throughput *e = malloc(sizeof(*e) + len + 1);
	if (!e)
		return -ENOMEM;
	memcpy(e->key, key, len);
	e->key[len] = '\0';
	e->value = value;
	uint64_t h = key_hash64(e->key);
	e->next = ruda__handle_table_remove(&c->table, h);
	if (ruda__handle_table_insert(&c->table, h, e) < 0) {
		if (e->next)
			ruda__handle_table_insert(&c->table, h, e->next);
		free(e);
		return -ENOMEM;
	}
	c->count++;
	return 0;
}

/* Forget every measurement. */
static void clear(struct ruda_throughput_cache *c)
{
	struct throughput *e;
	while ((e = ruda__handle_table_pop(&c->table, NULL)))
		while (e) {
			struct throughput *next = e->next;
			free(e);
			e = next;
		}
	c->count = 0;
}

int ruda__throughput_cache_path(const struct ruda_device *d, const char *dir, char *buf,
				size_t len)
{
	char uuid[2 * VK_UUID_SIZE + 1];
	for (unsigned i = 0; i < VK_UUID_SIZE; i++)
		snprintf(uuid + 2 * i, 3, "%02x", d->props.pipelineCacheUUID[i]);
	int n = snprintf(buf, len, "%s/throughputs-%04x-%04x-%s-%08x.bin", dir, d->props.vendorID,
			 d->props.deviceID, uuid, d->props.driverVersion);
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* ---- the file: header, then per measurement u16 key length, key, f64 ---- */

static int snapshot(struct ruda_throughput_cache *c)
{
	size_t body = 0;
	for (size_t i = 0; i < c->table.cap; i++)
		for (struct throughput *e = c->table.slots[i].value; e; e = e->next)
			body += 2 + strlen(e->key) + sizeof(double);
	uint8_t *buf = malloc(sizeof(struct file_header) + body);
	if (!buf)
		return -ENOMEM;
	struct file_header h = c->identity;
	h.count = (uint32_t)c->count;
	h.body_size = body;
	uint8_t *p = buf + sizeof(h);
	for (size_t i = 0; i < c->table.cap; i++)
		for (struct throughput *e = c->table.slots[i].value; e; e = e->next) {
			uint16_t len = (uint16_t)strlen(e->key);
			memcpy(p, &len, 2);
			memcpy(p + 2, e->key, len);
			memcpy(p + 2 + len, &e->value, sizeof(double));
			p += 2 + len + sizeof(double);
		}
	ruda__sha256(buf + sizeof(h), body, h.sha256);
	memcpy(buf, &h, sizeof(h));
	c->snapshot = buf;
	c->snapshot_len = sizeof(h) + body;
	c->dirty = false;
	return 0;
}

static int write_snapshot(struct ruda_throughput_cache *c)
{
	int err = ruda__cache_file_write(c->dir, c->path, c->snapshot, sizeof(struct file_header),
					 c->snapshot + sizeof(struct file_header),
					 c->snapshot_len - sizeof(struct file_header));
	free(c->snapshot);
	c->snapshot = NULL;
	return err;
}

/* Why the file cannot be used, or NULL; its entries are added. */
static const char *load(struct ruda_throughput_cache *c, const uint8_t *data, size_t len)
{
	struct file_header h;
	if (len < sizeof(h))
		return "truncated header";
	memcpy(&h, data, sizeof(h));
	if (memcmp(h.magic, FILE_MAGIC, sizeof(h.magic)) != 0 || h.header_size != sizeof(h))
		return "not a rudad throughput cache";
	if (h.vendor_id != c->identity.vendor_id || h.device_id != c->identity.device_id ||
	    h.driver_version != c->identity.driver_version ||
	    memcmp(h.uuid, c->identity.uuid, VK_UUID_SIZE) != 0)
		return "written for another device or driver";
	if (h.body_size != len - sizeof(h) || h.count > RUDA_THROUGHPUT_MAX)
		return "size does not match its header";
	uint8_t sha[RUDA_SHA256_SIZE];
	ruda__sha256(data + sizeof(h), h.body_size, sha);
	if (memcmp(sha, h.sha256, sizeof(sha)) != 0)
		return "checksum mismatch (corrupt)";
	const uint8_t *p = data + sizeof(h), *end = data + len;
	for (uint32_t i = 0; i < h.count; i++) {
		uint16_t klen;
		double value;
		if (end - p < 2)
			return "truncated entry";
		memcpy(&klen, p, 2);
		if ((size_t)(end - p) < 2u + klen + sizeof(double))
			return "truncated entry";
		char key[RUDA_THROUGHPUT_MAX_KEY + 1];
		if (!klen || klen > RUDA_THROUGHPUT_MAX_KEY || memchr(p + 2, 0, klen))
			return "a bad key";
		memcpy(key, p + 2, klen);
		key[klen] = '\0';
		memcpy(&value, p + 2 + klen, sizeof(double));
		if (!isfinite(value) || value <= 0)
			return "a bad value";
		if (!find(c, key) && insert(c, key, klen, value) < 0)
			return "out of memory";
		p += 2 + klen + sizeof(double);
	}
	return p == end ? NULL : "bytes after the last entry";
}

/* ---- saving in the thread pool ------------------------------------------ */

static void drop(struct ruda_throughput_cache *c);

static void save_work(uv_work_t *work)
{
	struct ruda_throughput_cache *c = work->data;
	c->result = write_snapshot(c);
}

static void on_save_timer(uv_timer_t *timer);

static void save_done(uv_work_t *work, int status)
{
	struct ruda_throughput_cache *c = work->data;
	c->saving = false;
	if (status < 0) { /* cancelled: the snapshot was not written */
		free(c->snapshot);
		c->snapshot = NULL;
		c->dirty = true;
	} else if (c->result < 0) {
		log_warn("throughput cache %s: %s; kept in memory", c->path, strerror(-c->result));
	}
	if (c->released)
		drop(c);
	else if (c->dirty)
		uv_timer_start(c->timer, on_save_timer, SAVE_DELAY_MS, 0);
}

static void on_save_timer(uv_timer_t *timer)
{
	struct ruda_throughput_cache *c = timer->data;
	if (c->saving || !c->dirty)
		return; /* save_done starts the timer again if needed */
	if (snapshot(c) < 0) {
		uv_timer_start(c->timer, on_save_timer, SAVE_DELAY_MS, 0);
		return;
	}
	c->work.data = c;
	c->saving = true;
	if (uv_queue_work(timer->loop, &c->work, save_work, save_done) < 0) {
		c->saving = false;
		free(c->snapshot);
		c->snapshot = NULL;
		c->dirty = true;
	}
}

/* ---- the cache ---------------------------------------------------------- */

struct ruda_throughput_cache *ruda__throughput_cache_new(uv_loop_t *loop,
							 const struct ruda_device *d,
							 const char *dir)
{
	struct ruda_throughput_cache *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	ruda__handle_table_init(&c->table);
	memcpy(c->identity.magic, FILE_MAGIC, sizeof(c->identity.magic));
	c->identity.header_size = sizeof(c->identity);
	c->identity.vendor_id = d->props.vendorID;
	c->identity.device_id = d->props.deviceID;
	c->identity.driver_version = d->props.driverVersion;
	memcpy(c->identity.uuid, d->props.pipelineCacheUUID, VK_UUID_SIZE);
	if (!dir || !loop)
		return c;
	char path[4096];
	c->timer = malloc(sizeof(*c->timer));
	if (ruda__throughput_cache_path(d, dir, path, sizeof(path)) < 0 || !c->timer ||
	    !(c->dir = strdup(dir)) || !(c->path = strdup(path))) {
		free(c->timer);
		free(c->dir);
		c->timer = NULL;
		c->dir = NULL;
		return c; /* in memory only */
	}
	uv_timer_init(loop, c->timer);
	c->timer->data = c;
	void *data = NULL;
	size_t len = 0;
	int err = ruda__cache_file_read(path, sizeof(struct file_header) +
						    (size_t)RUDA_THROUGHPUT_MAX *
							    (2 + RUDA_THROUGHPUT_MAX_KEY + 8),
					&data, &len);
	const char *why = err == -ENOENT ? NULL : err < 0 ? strerror(-err) : load(c, data, len);
	free(data);
	if (why) {
		log_warn("throughput cache %s: %s; starting without it", path, why);
		/* what a bad file held in part is not to be trusted either */
		clear(c);
	} else if (c->count) {
		log_info("throughput cache %s: %zu measurements", path, c->count);
	}
	return c;
}

static void on_timer_closed(uv_handle_t *h)
{
	free(h);
}

/* Free what is left; the timer is closed already. */
static void drop(struct ruda_throughput_cache *c)
{
	clear(c);
	ruda__handle_table_finish(&c->table);
	free(c->snapshot);
	free(c->dir);
	free(c->path);
	free(c);
}

void ruda__throughput_cache_free(struct ruda_throughput_cache *c)
{
	if (!c)
		return;
	if (c->timer) {
		uv_timer_stop(c->timer);
		uv_close((uv_handle_t *)c->timer, on_timer_closed);
		c->timer = NULL;
	}
	/* the last changes, now: rudad is stopping */
	if (c->path && c->dirty && !c->saving && snapshot(c) == 0) {
		int err = write_snapshot(c);
		if (err < 0)
			log_warn("throughput cache %s: %s", c->path, strerror(-err));
	}
	if (c->saving)
		c->released = true; /* save_done frees it */
	else
		drop(c);
}

int ruda__throughput_cache_get(const struct ruda_throughput_cache *c, const char *key,
			       double *value)
{
	if (!key_ok(key))
		return -EINVAL;
	struct throughput *e = find(c, key);
	if (!e)
		return -ENOENT;
	*value = e->value;
	return 0;
}

int ruda__throughput_cache_set(struct ruda_throughput_cache *c, const char *key, double value)
{
	if (!key_ok(key) || !isfinite(value) || value <= 0)
		return -EINVAL;
	if (find(c, key))
		return 0; /* the first measurement stays */
	if (c->count >= RUDA_THROUGHPUT_MAX)
		return -ENOSPC;
	int err = insert(c, key, strlen(key), value);
	if (err)
		return err;
	c->dirty = true;
	if (c->timer && !c->saving && !uv_is_active((uv_handle_t *)c->timer))
		uv_timer_start(c->timer, on_save_timer, SAVE_DELAY_MS, 0);
	return 0;
}

size_t ruda__throughput_cache_count(const struct ruda_throughput_cache *c)
{
	return c->count;
}
