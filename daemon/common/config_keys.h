/*
 * What the files of rudad.conf's code share (config_parse.c parses,
 * config_keys.c holds the key table and works key by key, config_write.c
 * writes a configuration out): the key table and how a value is found in
 * struct ruda_config. Nothing outside common/config*.c includes it.
 */
#ifndef RUDA_CONFIG_KEYS_H
#define RUDA_CONFIG_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Forward only: the files that include this include config.h. */
struct ruda_config;

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

/* Indexed by enum ruda_config_key (RUDA_CONFIG_NKEYS of them). */
extern const struct key_info ruda__config_keys[];
/* Indexed by log level, up to RUDA_LOG_DEBUG. */
extern const char *const ruda__config_level_names[];

#define FIELD(config, k, T) ((T *)((char *)(config) + ruda__config_keys[k].offset))
#define CFIELD(config, k, T) ((const T *)((const char *)(config) + ruda__config_keys[k].offset))

/* Free key k's value (strings, id lists) and clear it. */
void ruda__config_free_value(struct ruda_config *c, unsigned k);

#endif
