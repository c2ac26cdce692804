/* rudad.conf and --set: lines, sections, and each key's value parsed into
 * struct ruda_config, every error reported with its line. */
#include "common/config.h"
#include "common/config_keys.h"

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
	const struct key_info *info = &ruda__config_keys[k];
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
		if (k == RUDA_CONFIG_LANES && strcmp(value, "auto") != 0 &&
		    strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
			fail(p, "lanes: '%s' is not auto, on or off", value);
			return false;
		}
		if (k == RUDA_CONFIG_PEER_REDUCE && strcmp(value, "auto") != 0 &&
		    strcmp(value, "on") != 0 && strcmp(value, "off") != 0) {
			fail(p, "peer_reduce: '%s' is not auto, on or off", value);
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
		ruda__config_free_value(c, k);
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
		ruda__config_free_value(c, k);
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
		ruda__config_free_value(c, k);
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
		return -EINVAL;
	}
	return set_value(&p, c, (enum ruda_config_key)k, value) ? 0 : -EINVAL;
}
