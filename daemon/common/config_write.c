/* Values derived from a configuration (the cache directory) and the
 * configuration written back as rudad.conf text (rudad --print-config). */
#include "common/config.h"
#include "common/config_keys.h"
#include "common/log.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
		const struct key_info *info = &ruda__config_keys[k];
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
						    ? ruda__config_level_names[level]
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
