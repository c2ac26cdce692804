#include "common/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/log.h"

#define MAX_LINE 4096
#define MAX_FILE (1u << 20)

/* How a key's value is written and stored. */
enum type {
	T_PATH,     /* char *, absolute */
	T_SELECTOR, /* char *, any text */
	T_MODE,     /* unsigned, octal */
	T_GROUP,    /* char * name and gid_t */
	T_SIZE,     /* uint64_t, K/M/G/T suffixes */
	T_MEMORY,   /* uint64_t, a size or "unlimited" */
	T_COUNT,    /* uint32_t */
	T_BOOL,     /* bool */
	T_LEVEL,    /* int, a log level name */
	T_USERS,    /* struct ruda_id_list of uids */
	T_GROUPS,   /* struct ruda_id_list of gids */
};

struct key_info {
	const char *name;
	enum type type;
	size_t offset;     /* of the value in struct ruda_config */
	size_t gid_offset; /* T_GROUP: of its gid */
	uint64_t min, max; /* T_SIZE, T_COUNT */
	bool reload;       /* SIGHUP applies it */
};

/* `devices` is a comma-separated list of selectors, none empty (which
 * device each names is known only once Vulkan is up). */
static bool devices_list_ok(const char *value)
{
	const char *item = value;
	for (;;) {
		const char *end = strchr(item, ',');
		size_t len = end ? (size_t)(end - item) : strlen(item);
		size_t blank = strspn(item, " \t");
		if (blank >= len)
			return false;
		if (!end)
			return true;
		item = end + 1;
	}
}

#define F(field) offsetof(struct ruda_config, field)
static const struct key_info keys[RUDA_CONFIG_NKEYS] = {
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
};
#undef F

static const char *const level_names[] = {
	[RUDA_LOG_ERROR] = "error", [RUDA_LOG_WARNING] = "warning", [RUDA_LOG_NOTICE] = "notice",
	[RUDA_LOG_INFO] = "info",   [RUDA_LOG_DEBUG] = "debug",
};

#define FIELD(config, k, T) ((T *)((char *)(config) + keys[k].offset))
#define CFIELD(config, k, T) ((const T *)((const char *)(config) + keys[k].offset))

/* ---- reporting ---------------------------------------------------------- */

struct parser {
	struct ruda_config *config;
	const char *path; /* NULL: the command line */
	unsigned line;
	ruda_config_report_fn *report;
	void *data;
	int errors;
	unsigned key_line[RUDA_CONFIG_NKEYS]; /* where each top-level key was set */
};

__attribute__((format(printf, 2, 3))) static void fail(struct parser *p, const char *fmt, ...)
{
	char message[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	p->errors++;
	if (p->report)
		p->report(p->data, p->path, p->line, message);
}

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

static void free_value(struct ruda_config *c, enum ruda_config_key k)
{
	switch (keys[k].type) {
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
		free_value(c, (enum ruda_config_key)k);
	free(c->quotas);
	memset(c, 0, sizeof(*c));
}

/* ---- values ------------------------------------------------------------- */

static bool parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"yes", "true", "on", "1"};
	static const char *const no[] = {"no", "false", "off", "0"};
	for (size_t i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0)
			return *out = true, true;
		if (strcasecmp(s, no[i]) == 0)
			return *out = false, true;
	}
	return false;
}

/* Decimal digits only, so "-1" and " 5" are not numbers. */
static bool parse_u64(const char *s, const char **end, uint64_t *out)
{
	if (!isdigit((unsigned char)*s))
		return false;
	uint64_t n = 0;
	for (; isdigit((unsigned char)*s); s++) {
		unsigned digit = (unsigned)(*s - '0');
		if (n > (UINT64_MAX - digit) / 10)
			return false;
		n = n * 10 + digit;
	}
	*end = s;
	*out = n;
	return true;
}

/* "64M", "1GiB", "4096": suffixes are powers of 1024. */
static bool parse_size(const char *s, uint64_t *out)
{
	uint64_t n;
	const char *end;
	if (!parse_u64(s, &end, &n))
		return false;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	default: break;
	}
	if (shift) {
		end++;
		if (strcasecmp(end, "iB") == 0 || strcasecmp(end, "B") == 0)
			end += strlen(end);
	} else if (strcasecmp(end, "B") == 0) {
		end++;
	}
	if (*end || (shift && n > (UINT64_MAX >> shift)))
		return false;
	*out = n << shift;
	return true;
}

static bool parse_memory(const char *s, uint64_t *out)
{
	if (strcasecmp(s, "unlimited") == 0 || strcasecmp(s, "infinity") == 0) {
		*out = RUDA_UNLIMITED;
		return true;
	}
	if (strcasecmp(s, "auto") == 0) {
		*out = RUDA_QUOTA_AUTO;
		return true;
	}
	return parse_size(s, out);
}

const char *ruda__config_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const char suffix[] = "KMGT";
	if (bytes == RUDA_UNLIMITED) {
		snprintf(buf, len, "unlimited");
		return buf;
	}
	if (bytes == RUDA_QUOTA_AUTO) {
		snprintf(buf, len, "auto");
		return buf;
	}
	int unit = -1;
	while (unit < 3 && bytes && bytes % 1024 == 0) {
		bytes /= 1024;
		unit++;
	}
	if (unit < 0)
		snprintf(buf, len, "%llu", (unsigned long long)bytes);
	else
		snprintf(buf, len, "%llu%c", (unsigned long long)bytes, suffix[unit]);
	return buf;
}

/* A number is an id as is (like chown); a name must exist. */
static bool lookup_id(const char *name, bool group, uint32_t *id)
{
	uint64_t n;
	const char *end;
	if (parse_u64(name, &end, &n)) {
		if (*end || n >= UINT32_MAX) /* (uid_t)-1 means "no id" */
			return false;
		*id = (uint32_t)n;
		return true;
	}
	char buf[16384];
	if (group) {
		struct group gr, *found = NULL;
		if (getgrnam_r(name, &gr, buf, sizeof(buf), &found) != 0 || !found)
			return false;
		*id = found->gr_gid;
	} else {
		struct passwd pw, *found = NULL;
		if (getpwnam_r(name, &pw, buf, sizeof(buf), &found) != 0 || !found)
			return false;
		*id = found->pw_uid;
	}
	return true;
}

/* The name of an id when it has one, else the number. */
static const char *id_name(uint32_t id, bool group, char *out, size_t len)
{
	char buf[16384];
	const char *name = NULL;
	if (group) {
		struct group gr, *found = NULL;
		if (getgrgid_r(id, &gr, buf, sizeof(buf), &found) == 0 && found)
			name = found->gr_name;
	} else {
		struct passwd pw, *found = NULL;
		if (getpwuid_r(id, &pw, buf, sizeof(buf), &found) == 0 && found)
			name = found->pw_name;
	}
	if (name)
		snprintf(out, len, "%s", name);
	else
		snprintf(out, len, "%u", id);
	return out;
}

/* "alice, bob 1000": commas and/or blanks between entries. Reports every
 * unknown entry. */
static bool parse_ids(struct parser *p, const char *key, const char *s, bool group,
		      struct ruda_id_list *out)
{
	struct ruda_id_list list = {0};
	bool ok = true;
	char word[256];
	while (*s) {
		size_t n = strcspn(s, ", \t");
		if (n == 0) {
			s++;
			continue;
		}
		if (n >= sizeof(word)) {
			fail(p, "%s: name too long", key);
			ok = false;
			s += n;
			continue;
		}
		memcpy(word, s, n);
		word[n] = '\0';
		s += n;
		uint32_t id;
		if (!lookup_id(word, group, &id)) {
			fail(p, "%s: no %s named '%s'", key, group ? "group" : "user", word);
			ok = false;
			continue;
		}
		uint32_t *ids = realloc(list.ids, (list.count + 1) * sizeof(*ids));
		if (!ids) {
			fail(p, "out of memory");
			ok = false;
			break;
		}
		list.ids = ids;
		list.ids[list.count++] = id;
	}
	if (!ok) {
		free(list.ids);
		return false;
	}
	*out = list;
	return true;
}

/* Parse `value` for top-level key k into c. "" sets the default back. */
static bool set_value(struct parser *p, struct ruda_config *c, enum ruda_config_key k,
		      const char *value)
{
	const struct key_info *info = &keys[k];
	if (!*value) {
		struct ruda_config defaults;
		ruda__config_init(&defaults);
		uint64_t set = c->set;
		int err = ruda__config_key_copy(c, &defaults, k);
		c->set = set | (1ull << k);
		if (err)
			fail(p, "out of memory");
		return !err;
	}
	switch (info->type) {
	case T_PATH:
	case T_SELECTOR: {
		if (info->type == T_PATH && value[0] != '/') {
			fail(p, "%s: '%s' is not an absolute path", info->name, value);
			return false;
		}
		if (k == RUDA_CONFIG_SOCKET &&
		    strlen(value) >= sizeof(((struct sockaddr_un *)0)->sun_path)) {
			fail(p, "socket: path longer than %zu bytes",
			     sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
			return false;
		}
		if (k == RUDA_CONFIG_DEVICES && !devices_list_ok(value)) {
			fail(p, "devices: '%s' has an empty item (a list is "
				"\"0,1\"; a device named twice is opened twice)", value);
			return false;
		}
		char *copy = strdup(value);
		if (!copy) {
			fail(p, "out of memory");
			return false;
		}
		free_value(c, k);
		*FIELD(c, k, char *) = copy;
		break;
	}
	case T_MODE: {
		size_t n = strlen(value);
		unsigned mode = 0;
		bool ok = n >= 1 && n <= 4;
		for (size_t i = 0; ok && i < n; i++) {
			ok = value[i] >= '0' && value[i] <= '7';
			mode = mode * 8 + (unsigned)(value[i] - '0');
		}
		if (!ok || mode > 0777) {
			fail(p, "%s: '%s' is not an octal permission mode like 0660", info->name,
			     value);
			return false;
		}
		*FIELD(c, k, unsigned) = mode;
		break;
	}
	case T_GROUP: {
		uint32_t gid;
		if (!lookup_id(value, true, &gid)) {
			fail(p, "%s: no group named '%s'", info->name, value);
			return false;
		}
		char *copy = strdup(value);
		if (!copy) {
			fail(p, "out of memory");
			return false;
		}
		free_value(c, k);
		*FIELD(c, k, char *) = copy;
		*(gid_t *)((char *)c + info->gid_offset) = gid;
		break;
	}
	case T_SIZE:
	case T_MEMORY: {
		uint64_t n;
		bool ok = info->type == T_SIZE ? parse_size(value, &n) : parse_memory(value, &n);
		/* auto is a share of the device's heap: the staging quotas are of
		 * the host's memory */
		bool staging = k == RUDA_CONFIG_MAX_STAGING_PER_CLIENT ||
			       k == RUDA_CONFIG_MAX_STAGING_PER_UID;
		if (!ok || (staging && n == RUDA_QUOTA_AUTO)) {
			fail(p, "%s: '%s' is not a size (a number of bytes, with K, M, G or T%s)",
			     info->name, value,
			     info->type != T_MEMORY ? "" : staging ? ", or unlimited"
								   : ", unlimited or auto");
			return false;
		}
		if (info->max && (n < info->min || n > info->max)) {
			char lo[32], hi[32];
			fail(p, "%s: %s is out of range (%s to %s)", info->name, value,
			     ruda__config_format_size(info->min, lo, sizeof(lo)),
			     ruda__config_format_size(info->max, hi, sizeof(hi)));
			return false;
		}
		*FIELD(c, k, uint64_t) = n;
		break;
	}
	case T_COUNT: {
		uint64_t n;
		const char *end;
		if (!parse_u64(value, &end, &n) || *end) {
			fail(p, "%s: '%s' is not a number", info->name, value);
			return false;
		}
		if (n < info->min || n > info->max) {
			fail(p, "%s: %s is out of range (%llu to %llu)", info->name, value,
			     (unsigned long long)info->min, (unsigned long long)info->max);
			return false;
		}
		*FIELD(c, k, uint32_t) = (uint32_t)n;
		break;
	}
	case T_BOOL:
		if (!parse_bool(value, FIELD(c, k, bool))) {
			fail(p, "%s: '%s' is not yes or no", info->name, value);
			return false;
		}
		break;
	case T_LEVEL: {
		int level = ruda__log_level_parse(value);
		if (level < 0) {
			fail(p, "%s: '%s' is not error, warning, notice, info or debug", info->name,
			     value);
			return false;
		}
		*FIELD(c, k, int) = level;
		break;
	}
	case T_USERS:
	case T_GROUPS: {
		struct ruda_id_list list;
		if (!parse_ids(p, info->name, value, info->type == T_GROUPS, &list))
			return false;
		free_value(c, k);
		*FIELD(c, k, struct ruda_id_list) = list;
		break;
	}
	}
	c->set |= 1ull << k;
	return true;
}

/* ---- the file ----------------------------------------------------------- */

static char *trim(char *s)
{
	while (*s == ' ' || *s == '\t')
		s++;
	size_t n = strlen(s);
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
		s[--n] = '\0';
	return s;
}

/* Section the following keys go to: SECTION_GLOBAL, SECTION_DISCARD (a bad
 * header: keys are still checked, then dropped) or a quota index. */
enum { SECTION_GLOBAL = -1, SECTION_DISCARD = -2 };

static int section_header(struct parser *p, char *text)
{
	size_t n = strlen(text);
	if (n < 2 || text[n - 1] != ']') {
		fail(p, "a section header must end with ']'");
		return SECTION_DISCARD;
	}
	text[n - 1] = '\0';
	char *inner = trim(text + 1);
	char *arg = inner + strcspn(inner, " \t");
	if (*arg)
		*arg++ = '\0';
	arg = trim(arg);
	if (strcmp(inner, "global") == 0 && !*arg)
		return SECTION_GLOBAL;
	bool group = strcmp(inner, "group") == 0;
	if (!group && strcmp(inner, "user") != 0) {
		fail(p, "unknown section [%s%s%s]; sections are [global], [user NAME] and "
			"[group NAME]", inner, *arg ? " " : "", arg);
		return SECTION_DISCARD;
	}
	if (!*arg || arg[strcspn(arg, " \t")]) {
		fail(p, "[%s] takes one %s name or id", inner, inner);
		return SECTION_DISCARD;
	}
	uint32_t id;
	if (!lookup_id(arg, group, &id)) {
		fail(p, "[%s %s]: no %s named '%s'", inner, arg, inner, arg);
		return SECTION_DISCARD;
	}
	struct ruda_config *c = p->config;
	for (size_t i = 0; i < c->nquotas; i++) {
		if (c->quotas[i].is_group == group && c->quotas[i].id == id) {
			fail(p, "[%s %s] repeats the section on line %u", inner, arg,
			     c->quotas[i].line);
			return SECTION_DISCARD;
		}
	}
	struct ruda_config_quota *q = realloc(c->quotas, (c->nquotas + 1) * sizeof(*q));
	if (!q) {
		fail(p, "out of memory");
		return SECTION_DISCARD;
	}
	c->quotas = q;
	c->quotas[c->nquotas] = (struct ruda_config_quota){
		.is_group = group,
		.id = id,
		.line = p->line,
		.max_memory_per_client = RUDA_UNLIMITED,
		.max_memory_per_uid = RUDA_UNLIMITED,
	};
	return (int)c->nquotas++;
}

static void section_key(struct parser *p, int section, const char *key, const char *value)
{
	bool per_client = strcmp(key, "max_memory_per_client") == 0;
	if (!per_client && strcmp(key, "max_memory_per_uid") != 0) {
		if (ruda__config_key_lookup(key) >= 0)
			fail(p, "'%s' cannot be set per user or group (only max_memory_per_client "
				"and max_memory_per_uid can); put it before the first section or "
				"under [global]", key);
		else
			fail(p, "unknown key '%s'", key);
		return;
	}
	uint64_t n;
	if (!parse_memory(value, &n)) {
		fail(p, "%s: '%s' is not a size (a number of bytes, with K, M, G or T, "
			"unlimited or auto)", key, value);
		return;
	}
	if (section == SECTION_DISCARD)
		return;
	struct ruda_config_quota *q = &p->config->quotas[section];
	bool *has = per_client ? &q->has_max_memory_per_client : &q->has_max_memory_per_uid;
	if (*has) {
		fail(p, "'%s' is set twice in this section", key);
		return;
	}
	*has = true;
	*(per_client ? &q->max_memory_per_client : &q->max_memory_per_uid) = n;
}

static void parse_line(struct parser *p, char *line, int *section)
{
	char *s = trim(line);
	if (!*s || *s == '#' || *s == ';')
		return;
	if (*s == '[') {
		*section = section_header(p, s);
		return;
	}
	char *eq = strchr(s, '=');
	if (!eq) {
		fail(p, "expected 'key = value', a [section] or a # comment");
		return;
	}
	*eq = '\0';
	char *key = trim(s);
	char *value = trim(eq + 1);
	/* quotes keep blanks at the ends; nothing inside is special */
	size_t vn = strlen(value);
	if (vn >= 2 && value[0] == '"' && value[vn - 1] == '"') {
		value[vn - 1] = '\0';
		value++;
	}
	if (!*key) {
		fail(p, "a key is missing before '='");
		return;
	}
	if (*section != SECTION_GLOBAL) {
		section_key(p, *section, key, value);
		return;
	}
	int k = ruda__config_key_lookup(key);
	if (k < 0) {
		fail(p, "unknown key '%s'", key);
		return;
	}
	if (p->key_line[k]) {
		fail(p, "'%s' is already set on line %u", key, p->key_line[k]);
		return;
	}
	if (set_value(p, p->config, (enum ruda_config_key)k, value))
		p->key_line[k] = p->line;
}

int ruda__config_parse(struct ruda_config *c, const char *path, const char *text, size_t len,
		       ruda_config_report_fn *report, void *data)
{
	struct parser p = {.config = c, .path = path, .report = report, .data = data};
	int section = SECTION_GLOBAL;
	char line[MAX_LINE + 1];
	size_t pos = 0;
	while (pos < len) {
		p.line++;
		const char *nl = memchr(text + pos, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - (text + pos)) : len - pos;
		if (n > MAX_LINE)
			fail(&p, "line longer than %u bytes", MAX_LINE);
		else if (memchr(text + pos, '\0', n))
			fail(&p, "a NUL byte in the line");
		else {
			memcpy(line, text + pos, n);
			line[n] = '\0';
			parse_line(&p, line, &section);
		}
		pos += n + (nl ? 1 : 0);
	}
	return p.errors;
}

int ruda__config_load(struct ruda_config *c, const char *path, bool must_exist, bool *found,
		      ruda_config_report_fn *report, void *data)
{
	struct parser p = {.config = c, .path = path, .report = report, .data = data};
	if (found)
		*found = false;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		if (errno == ENOENT && !must_exist)
			return 0;
		fail(&p, "cannot open: %s", strerror(errno));
		return p.errors;
	}
	if (found)
		*found = true;
	struct stat st;
	char *text = NULL;
	if (fstat(fd, &st) < 0) {
		fail(&p, "cannot read: %s", strerror(errno));
	} else if (!S_ISREG(st.st_mode)) {
		fail(&p, "not a regular file");
	} else if (st.st_mode & S_IWOTH) {
		/* it says who may run unchecked kernels: never let anyone edit it */
		fail(&p, "writable by every user (mode %04o); refusing to use it",
		     (unsigned)(st.st_mode & 07777));
	} else if (st.st_size > MAX_FILE) {
		fail(&p, "larger than %u bytes", MAX_FILE);
	} else if (!(text = malloc((size_t)st.st_size + 1))) {
		fail(&p, "out of memory");
	} else {
		size_t used = 0;
		while (used < (size_t)st.st_size) {
			ssize_t n = read(fd, text + used, (size_t)st.st_size - used);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			used += (size_t)n;
		}
		if (used == (size_t)st.st_size)
			p.errors += ruda__config_parse(c, path, text, used, report, data);
		else
			fail(&p, "cannot read: %s", used ? "the file shrank" : strerror(errno));
	}
	free(text);
	close(fd);
	return p.errors;
}

int ruda__config_set(struct ruda_config *c, const char *key, const char *value,
		     ruda_config_report_fn *report, void *data)
{
	struct parser p = {.config = c, .report = report, .data = data};
	int k = ruda__config_key_lookup(key);
	if (k < 0) {
		fail(&p, "unknown key '%s'", key);
		return -1;
	}
	return set_value(&p, c, (enum ruda_config_key)k, value) ? 0 : -1;
}

/* ---- keys --------------------------------------------------------------- */

const char *ruda__config_key_name(enum ruda_config_key k)
{
	return keys[k].name;
}

int ruda__config_key_lookup(const char *name)
{
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++)
		if (strcmp(keys[k].name, name) == 0)
			return k;
	return -1;
}

bool ruda__config_key_reloadable(enum ruda_config_key k)
{
	return keys[k].reload;
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
	const struct key_info *info = &keys[k];
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
	const struct key_info *info = &keys[k];
	switch (info->type) {
	case T_PATH:
	case T_SELECTOR:
	case T_GROUP: {
		const char *s = *CFIELD(src, k, char *);
		char *copy = s ? strdup(s) : NULL;
		if (s && !copy)
			return -ENOMEM;
		free_value(dst, k);
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
		free_value(dst, k);
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

/* ---- derived values and output ----------------------------------------- */

int ruda__config_default_cache_directory(char *buf, size_t len)
{
	const char *env = getenv("CACHE_DIRECTORY");
	int n;
	if (env && *env) {
		/* systemd lists one path per CacheDirectory= entry */
		n = snprintf(buf, len, "%.*s", (int)strcspn(env, ":"), env);
	} else if (geteuid() == 0) {
		n = snprintf(buf, len, "/var/cache/ruda");
	} else if ((env = getenv("XDG_CACHE_HOME")) && env[0] == '/') {
		n = snprintf(buf, len, "%s/ruda", env);
	} else if ((env = getenv("HOME")) && env[0] == '/') {
		n = snprintf(buf, len, "%s/.cache/ruda", env);
	} else {
		return -ENOENT;
	}
	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int ruda__config_resolve(struct ruda_config *c)
{
	if (c->cache_directory)
		return 0;
	char dir[4096];
	int err = ruda__config_default_cache_directory(dir, sizeof(dir));
	if (err)
		return err;
	c->cache_directory = strdup(dir);
	return c->cache_directory ? 0 : -ENOMEM;
}

static void write_ids(const struct ruda_id_list *list, bool group, FILE *out)
{
	for (size_t i = 0; i < list->count; i++) {
		char name[256];
		fprintf(out, "%s%s", i ? ", " : " ", id_name(list->ids[i], group, name, sizeof(name)));
	}
}

void ruda__config_write(const struct ruda_config *c, FILE *out)
{
	char size[32];
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++) {
		const struct key_info *info = &keys[k];
		fprintf(out, "%s =", info->name);
		switch (info->type) {
		case T_PATH:
		case T_SELECTOR:
		case T_GROUP: {
			const char *s = *CFIELD(c, k, char *);
			if (s)
				fprintf(out, " %s", s);
			break;
		}
		case T_MODE:
			fprintf(out, " %04o", *CFIELD(c, k, unsigned));
			break;
		case T_SIZE:
		case T_MEMORY:
			fprintf(out, " %s",
				ruda__config_format_size(*CFIELD(c, k, uint64_t), size, sizeof(size)));
			break;
		case T_COUNT:
			fprintf(out, " %u", *CFIELD(c, k, uint32_t));
			break;
		case T_BOOL:
			fprintf(out, " %s", *CFIELD(c, k, bool) ? "yes" : "no");
			break;
		case T_LEVEL: {
			int level = *CFIELD(c, k, int);
			fprintf(out, " %s", level >= RUDA_LOG_ERROR && level <= RUDA_LOG_DEBUG
						    ? level_names[level]
						    : "info");
			break;
		}
		case T_USERS:
		case T_GROUPS:
			write_ids(CFIELD(c, k, struct ruda_id_list), info->type == T_GROUPS, out);
			break;
		}
		fputc('\n', out);
	}
	for (size_t i = 0; i < c->nquotas; i++) {
		const struct ruda_config_quota *q = &c->quotas[i];
		char name[256];
		fprintf(out, "\n[%s %s]\n", q->is_group ? "group" : "user",
			id_name(q->id, q->is_group, name, sizeof(name)));
		if (q->has_max_memory_per_client)
			fprintf(out, "max_memory_per_client = %s\n",
				ruda__config_format_size(q->max_memory_per_client, size,
							 sizeof(size)));
		if (q->has_max_memory_per_uid)
			fprintf(out, "max_memory_per_uid = %s\n",
				ruda__config_format_size(q->max_memory_per_uid, size,
							 sizeof(size)));
	}
}
