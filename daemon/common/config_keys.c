/* The table of rudad.conf's keys (name, type, where the value lives,
 * bounds, whether SIGHUP applies it), the defaults, and what works on a
 * configuration key by key: compare, copy, free. */
#include "common/config.h"
#include "common/config_keys.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

#define F(field) offsetof(struct ruda_config, field)
const struct key_info ruda__config_keys[RUDA_CONFIG_NKEYS] = {
	[RUDA_CONFIG_SOCKET] = {.name = "socket", .type = T_PATH, .offset = F(socket)},
	[RUDA_CONFIG_SOCKET_MODE] = {.name = "socket_mode", .type = T_MODE,
				     .offset = F(socket_mode)},
	[RUDA_CONFIG_SOCKET_GROUP] = {.name = "socket_group", .type = T_GROUP,
				      .offset = F(socket_group), .gid_offset = F(socket_gid)},
	[RUDA_CONFIG_DEVICES] = {.name = "devices", .type = T_SELECTOR, .offset = F(devices)},
	[RUDA_CONFIG_ARENA_SIZE] = {.name = "arena_size", .type = T_SIZE, .offset = F(arena_size),
				    .min = 1u << 20, .max = 4ull << 30, .reload = true},
	[RUDA_CONFIG_MAX_CLIENTS] = {.name = "max_clients", .type = T_COUNT,
				     .offset = F(max_clients), .min = 1, .max = 1u << 20,
				     .reload = true},
	[RUDA_CONFIG_MAX_REQUESTS_IN_FLIGHT] = {.name = "max_requests_in_flight",
						.type = T_COUNT,
						.offset = F(max_requests_in_flight), .min = 1,
						.max = 1u << 24},
	[RUDA_CONFIG_SUBMISSION_TIMEOUT_MS] = {.name = "submission_timeout_ms", .type = T_COUNT,
					       .offset = F(submission_timeout_ms), .min = 0,
					       .max = UINT32_MAX},
	[RUDA_CONFIG_LOG_LEVEL] = {.name = "log_level", .type = T_LEVEL, .offset = F(log_level),
				   .reload = true},
	[RUDA_CONFIG_CACHE_DIRECTORY] = {.name = "cache_directory", .type = T_PATH,
					 .offset = F(cache_directory)},
	[RUDA_CONFIG_ADMIN_GROUP] = {.name = "admin_group", .type = T_GROUP,
				     .offset = F(admin_group), .gid_offset = F(admin_gid),
				     .reload = true},
	[RUDA_CONFIG_READ_ONLY_VIEWS] = {.name = "read_only_views", .type = T_BOOL,
					 .offset = F(read_only_views), .reload = true},
	[RUDA_CONFIG_ALLOWED_USERS] = {.name = "allowed_users", .type = T_USERS,
				       .offset = F(allowed_users), .reload = true},
	[RUDA_CONFIG_ALLOWED_GROUPS] = {.name = "allowed_groups", .type = T_GROUPS,
					.offset = F(allowed_groups), .reload = true},
	[RUDA_CONFIG_UNCHECKED_LAUNCH_USERS] = {.name = "unchecked_launch_users", .type = T_USERS,
						.offset = F(unchecked_launch_users),
						.reload = true},
	[RUDA_CONFIG_UNCHECKED_LAUNCH_GROUPS] = {.name = "unchecked_launch_groups",
						 .type = T_GROUPS,
						 .offset = F(unchecked_launch_groups),
						 .reload = true},
	[RUDA_CONFIG_FORCE_CHECKED_LAUNCHES] = {.name = "force_checked_launches", .type = T_BOOL,
						.offset = F(force_checked_launches),
						.reload = true},
	/* devices enable the extension, or not, when they open */
	[RUDA_CONFIG_EXPORT_MEMORY] = {.name = "export_memory", .type = T_BOOL,
				       .offset = F(export_memory)},
	[RUDA_CONFIG_QUEUES] = {.name = "queues", .type = T_COUNT, .offset = F(queues),
				.min = 0, .max = 16},
	[RUDA_CONFIG_LANES] = {.name = "lanes", .type = T_SELECTOR, .offset = F(lanes)},
	[RUDA_CONFIG_PEER_REDUCE] = {.name = "peer_reduce", .type = T_SELECTOR,
				     .offset = F(peer_reduce)},
	[RUDA_CONFIG_MAX_MEMORY_PER_CLIENT] = {.name = "max_memory_per_client", .type = T_MEMORY,
					       .offset = F(max_memory_per_client),
					       .reload = true},
	[RUDA_CONFIG_MAX_MEMORY_PER_UID] = {.name = "max_memory_per_uid", .type = T_MEMORY,
					    .offset = F(max_memory_per_uid), .reload = true},
	[RUDA_CONFIG_MAX_STAGING_PER_CLIENT] = {.name = "max_staging_per_client", .type = T_MEMORY,
						.offset = F(max_staging_per_client),
						.reload = true},
	[RUDA_CONFIG_MAX_STAGING_PER_UID] = {.name = "max_staging_per_uid", .type = T_MEMORY,
					     .offset = F(max_staging_per_uid), .reload = true},
	/* devices' allocators take it when they open */
	[RUDA_CONFIG_FREED_MEMORY_KEEP_MS] = {.name = "freed_memory_keep_ms", .type = T_COUNT,
					      .offset = F(freed_memory_keep_ms), .min = 0,
					      .max = 3600000},
	[RUDA_CONFIG_MAX_PRIORITY] = {.name = "max_priority", .type = T_COUNT,
				      .offset = F(max_priority), .min = 1, .max = 7,
				      .reload = true},
	[RUDA_CONFIG_HIGH_PRIORITY_USERS] = {.name = "high_priority_users", .type = T_USERS,
					     .offset = F(high_priority_users), .reload = true},
	[RUDA_CONFIG_HIGH_PRIORITY_GROUPS] = {.name = "high_priority_groups", .type = T_GROUPS,
					      .offset = F(high_priority_groups),
					      .reload = true},
	[RUDA_CONFIG_PRIORITY_ANTICIPATION_US] = {.name = "priority_anticipation_us",
						  .type = T_COUNT,
						  .offset = F(priority_anticipation_us),
						  .min = 0, .max = 1000000, .reload = true},
	[RUDA_CONFIG_PRIORITY_MAX_WAIT_US] = {.name = "priority_max_wait_us", .type = T_COUNT,
					      .offset = F(priority_max_wait_us), .min = 0,
					      .max = 10000000, .reload = true},
	[RUDA_CONFIG_HANDSHAKE_TIMEOUT_MS] = {.name = "handshake_timeout_ms", .type = T_COUNT,
					      .offset = F(handshake_timeout_ms), .min = 0,
					      .max = 3600000, .reload = true},
	[RUDA_CONFIG_MAX_PENDING_PER_UID] = {.name = "max_pending_per_uid", .type = T_COUNT,
					     .offset = F(max_pending_per_uid), .min = 0,
					     .max = 1u << 20, .reload = true},
	[RUDA_CONFIG_ADMIN_RESERVED_CLIENTS] = {.name = "admin_reserved_clients",
						.type = T_COUNT,
						.offset = F(admin_reserved_clients), .min = 0,
						.max = 1u << 20, .reload = true},
	[RUDA_CONFIG_EXCLUSIVE_USERS] = {.name = "exclusive_users", .type = T_USERS,
					 .offset = F(exclusive_users), .reload = true},
	[RUDA_CONFIG_EXCLUSIVE_GROUPS] = {.name = "exclusive_groups", .type = T_GROUPS,
					  .offset = F(exclusive_groups), .reload = true},
	[RUDA_CONFIG_MAX_EXCLUSIVE_MS] = {.name = "max_exclusive_ms", .type = T_COUNT,
					  .offset = F(max_exclusive_ms), .min = 1,
					  .max = 3600000, .reload = true},
	[RUDA_CONFIG_EXCLUSIVE_SHARE] = {.name = "exclusive_share", .type = T_COUNT,
					 .offset = F(exclusive_share), .min = 1, .max = 100,
					 .reload = true},
	[RUDA_CONFIG_STOP_TIMEOUT_MS] = {.name = "stop_timeout_ms", .type = T_COUNT,
					 .offset = F(stop_timeout_ms), .min = 0, .max = 3600000,
					 .reload = true},
	[RUDA_CONFIG_COMPILE_TIMEOUT_MS] = {.name = "compile_timeout_ms", .type = T_COUNT,
					    .offset = F(compile_timeout_ms), .min = 0,
					    .max = 3600000, .reload = true},
	[RUDA_CONFIG_COMPILE_MEMORY_MAX] = {.name = "compile_memory_max", .type = T_SIZE,
					    .offset = F(compile_memory_max), .min = 0,
					    .max = 1ull << 50, .reload = true},
};
#undef F

const char *const ruda__config_level_names[RUDA_LOG_DEBUG + 1] = {
	[RUDA_LOG_ERROR] = "error", [RUDA_LOG_WARNING] = "warning", [RUDA_LOG_NOTICE] = "notice",
	[RUDA_LOG_INFO] = "info",   [RUDA_LOG_DEBUG] = "debug",
};

/* ---- defaults and lifetime --------------------------------------------- */

void ruda__config_init(struct ruda_config *c)
{
	memset(c, 0, sizeof(*c));
	c->socket_mode = 0660;
	c->socket_gid = (gid_t)-1;
	c->arena_size = 16ull << 20;
	c->freed_memory_keep_ms = RUDA_FREED_MEMORY_KEEP_MS;
	c->max_priority = 4; /* RUDA_PRIORITY_NORMAL */
	c->priority_anticipation_us = RUDA_PRIORITY_ANTICIPATION_US;
	c->priority_max_wait_us = RUDA_PRIORITY_MAX_WAIT_US;
	c->max_clients = 1024;
	c->handshake_timeout_ms = 5000;
	c->max_pending_per_uid = 64;
	c->admin_reserved_clients = 4;
	c->max_exclusive_ms = 10000;
	c->exclusive_share = 50;
	c->max_requests_in_flight = 1024;
	c->submission_timeout_ms = RUDA_SUBMISSION_TIMEOUT_MS;
	c->stop_timeout_ms = RUDA_STOP_TIMEOUT_MS;
	c->compile_timeout_ms = RUDA_COMPILE_TIMEOUT_MS;
	c->compile_memory_max = RUDA_COMPILE_MEMORY_MAX;
	c->log_level = RUDA_LOG_INFO;
	c->admin_gid = (gid_t)-1;
	c->read_only_views = true; /* as ps(1) shows processes to everyone */
	c->export_memory = true;
	c->max_memory_per_client = RUDA_QUOTA_AUTO;
	c->max_memory_per_uid = RUDA_QUOTA_AUTO;
	c->max_staging_per_client = RUDA_UNLIMITED;
	c->max_staging_per_uid = ruda__config_default_staging_per_uid();
}

uint64_t ruda__config_default_staging_per_uid(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	if (pages <= 0 || page <= 0)
		return RUDA_UNLIMITED;
	/* one user may pin up to half of it: the rest stays for everyone else */
	return (uint64_t)pages * (uint64_t)page / 2 >> 20 << 20;
}

void ruda__config_free_value(struct ruda_config *c, unsigned k)
{
	switch (ruda__config_keys[k].type) {
	case T_PATH:
	case T_SELECTOR:
	case T_GROUP:
		free(*FIELD(c, k, char *));
		*FIELD(c, k, char *) = NULL;
		break;
	case T_USERS:
	case T_GROUPS:
		free(FIELD(c, k, struct ruda_id_list)->ids);
		*FIELD(c, k, struct ruda_id_list) = (struct ruda_id_list){0};
		break;
	default:
		break;
	}
}

void ruda__config_finish(struct ruda_config *c)
{
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++)
		ruda__config_free_value(c, (enum ruda_config_key)k);
	free(c->quotas);
	memset(c, 0, sizeof(*c));
}

/* ---- keys --------------------------------------------------------------- */

const char *ruda__config_key_name(enum ruda_config_key k)
{
	return ruda__config_keys[k].name;
}

int ruda__config_key_lookup(const char *name)
{
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++)
		if (strcmp(ruda__config_keys[k].name, name) == 0)
			return k;
	return -ENOENT;
}

bool ruda__config_key_reloadable(enum ruda_config_key k)
{
	return ruda__config_keys[k].reload;
}

static size_t scalar_size(enum type t)
{
	switch (t) {
	case T_MODE: return sizeof(unsigned);
	case T_SIZE:
	case T_MEMORY: return sizeof(uint64_t);
	case T_COUNT: return sizeof(uint32_t);
	case T_BOOL: return sizeof(bool);
	case T_LEVEL: return sizeof(int);
	default: return 0;
	}
}

static bool str_equal(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

bool ruda__config_key_equal(const struct ruda_config *a, const struct ruda_config *b,
			    enum ruda_config_key k)
{
	const struct key_info *info = &ruda__config_keys[k];
	switch (info->type) {
	case T_PATH:
	case T_SELECTOR:
		return str_equal(*CFIELD(a, k, char *), *CFIELD(b, k, char *));
	case T_GROUP:
		return (*CFIELD(a, k, char *) == NULL) == (*CFIELD(b, k, char *) == NULL) &&
		       *(const gid_t *)((const char *)a + info->gid_offset) ==
			       *(const gid_t *)((const char *)b + info->gid_offset);
	case T_USERS:
	case T_GROUPS: {
		const struct ruda_id_list *x = CFIELD(a, k, struct ruda_id_list);
		const struct ruda_id_list *y = CFIELD(b, k, struct ruda_id_list);
		return x->count == y->count &&
		       (!x->count || memcmp(x->ids, y->ids, x->count * sizeof(*x->ids)) == 0);
	}
	default:
		return memcmp(CFIELD(a, k, char), CFIELD(b, k, char), scalar_size(info->type)) ==
		       0;
	}
}

int ruda__config_key_copy(struct ruda_config *dst, const struct ruda_config *src,
			  enum ruda_config_key k)
{
	const struct key_info *info = &ruda__config_keys[k];
	switch (info->type) {
	case T_PATH:
	case T_SELECTOR:
	case T_GROUP: {
		const char *s = *CFIELD(src, k, char *);
		char *copy = s ? strdup(s) : NULL;
		if (s && !copy)
			return -ENOMEM;
		ruda__config_free_value(dst, k);
		*FIELD(dst, k, char *) = copy;
		if (info->type == T_GROUP)
			*(gid_t *)((char *)dst + info->gid_offset) =
				*(const gid_t *)((const char *)src + info->gid_offset);
		break;
	}
	case T_USERS:
	case T_GROUPS: {
		const struct ruda_id_list *from = CFIELD(src, k, struct ruda_id_list);
		struct ruda_id_list list = {0};
		if (from->count) {
			list.ids = malloc(from->count * sizeof(*list.ids));
			if (!list.ids)
				return -ENOMEM;
			memcpy(list.ids, from->ids, from->count * sizeof(*list.ids));
			list.count = from->count;
		}
		ruda__config_free_value(dst, k);
		*FIELD(dst, k, struct ruda_id_list) = list;
		break;
	}
	default:
		memcpy(FIELD(dst, k, char), CFIELD(src, k, char), scalar_size(info->type));
		break;
	}
	dst->set = (dst->set & ~(1ull << k)) | (src->set & (1ull << k));
	return 0;
}

int ruda__config_override(struct ruda_config *dst, const struct ruda_config *src)
{
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++) {
		if (!(src->set & (1ull << k)))
			continue;
		int err = ruda__config_key_copy(dst, src, (enum ruda_config_key)k);
		if (err)
			return err;
	}
	return 0;
}

bool ruda__config_quotas_equal(const struct ruda_config *a, const struct ruda_config *b)
{
	if (a->nquotas != b->nquotas)
		return false;
	for (size_t i = 0; i < a->nquotas; i++) {
		const struct ruda_config_quota *x = &a->quotas[i], *y = &b->quotas[i];
		if (x->is_group != y->is_group || x->id != y->id ||
		    x->has_max_memory_per_client != y->has_max_memory_per_client ||
		    x->has_max_memory_per_uid != y->has_max_memory_per_uid ||
		    x->max_memory_per_client != y->max_memory_per_client ||
		    x->max_memory_per_uid != y->max_memory_per_uid)
			return false;
	}
	return true;
}
