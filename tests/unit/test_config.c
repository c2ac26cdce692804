/* rudad.conf: values, every error with its line, the command line on top,
 * and the round trip through --print-config's format. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/config.h"
#include "common/log.h"

struct errors {
	int count;
	char line[32][300];
};

static void collect(void *data, const char *path, unsigned line, const char *message)
{
	struct errors *e = data;
	if (e->count < 32)
		snprintf(e->line[e->count], sizeof(e->line[0]), "%s:%u: %s", path ? path : "-", line,
			 message);
	e->count++;
}

static int parse(struct ruda_config *c, const char *text, struct errors *e)
{
	memset(e, 0, sizeof(*e));
	ruda__config_init(c);
	int n = ruda__config_parse(c, "t.conf", text, strlen(text), collect, e);
	ck_assert_int_eq(n, e->count);
	return n;
}

/* Whether some error starts with `prefix` and contains `part`. */
static int has_error(const struct errors *e, const char *prefix, const char *part)
{
	for (int i = 0; i < e->count && i < 32; i++)
		if (strncmp(e->line[i], prefix, strlen(prefix)) == 0 && strstr(e->line[i], part))
			return 1;
	return 0;
}

static void dump(const struct errors *e)
{
	for (int i = 0; i < e->count && i < 32; i++)
		fprintf(stderr, "  %s\n", e->line[i]);
}

START_TEST(defaults)
{
	struct ruda_config c;
	ruda__config_init(&c);
	ck_assert_ptr_null(c.socket);
	ck_assert_uint_eq(c.socket_mode, 0660);
	ck_assert_ptr_null(c.socket_group);
	ck_assert_uint_eq(c.arena_size, 16u << 20);
	ck_assert_uint_eq(c.max_clients, 1024);
	/* one client's endless kernel cannot hold the device, nor a stop */
	ck_assert_uint_eq(c.submission_timeout_ms, 10000);
	ck_assert_uint_eq(c.stop_timeout_ms, 5000);
	ck_assert_uint_eq(c.compile_timeout_ms, 10000);
	ck_assert_uint_eq(c.compile_memory_max, 2ull << 30);
	ck_assert_int_eq(c.log_level, RUDA_LOG_INFO);
	ck_assert(c.read_only_views);
	ck_assert(!c.force_checked_launches);
	ck_assert(c.export_memory);
	ck_assert_uint_eq(c.allowed_users.count, 0);
	/* a share of the device's heap, so that one client leaves room */
	ck_assert(c.max_memory_per_client == RUDA_QUOTA_AUTO);
	ck_assert(c.max_memory_per_uid == RUDA_QUOTA_AUTO);
	ck_assert(c.max_staging_per_client == RUDA_UNLIMITED);
	ck_assert(c.max_staging_per_uid == ruda__config_default_staging_per_uid());
	ck_assert_uint_eq(c.set, 0);
	ruda__config_finish(&c);
}
END_TEST

START_TEST(good_file)
{
	static const char text[] =
		"# rudad.conf\n"
		"; also a comment\n"
		"\n"
		"  socket = /run/test/rudad.sock  \r\n"
		"socket_mode = 0666\n"
		"socket_group = root\n"
		"devices = llvmpipe\n"
		"arena_size = 128M\n"
		"max_clients = 64\n"
		"max_requests_in_flight = 256\n"
		"submission_timeout_ms = 5000\n"
		"log_level = debug\n"
		"cache_directory = \"/var/cache/ruda test\"\n"
		"admin_group = 0\n"
		"read_only_views = off\n"
		"allowed_users = root, 1000 1001\n"
		"allowed_groups = root\n"
		"unchecked_launch_users = 1000\n"
		"unchecked_launch_groups =\n"
		"force_checked_launches = on\n"
		"freed_memory_keep_ms = 250\n"
		"export_memory = no\n"
		"queues = 4\n"
		"lanes = on\n"
		"peer_reduce = off\n"
		"max_memory_per_client = 1GiB\n"
		"max_memory_per_uid = unlimited\n"
		"max_staging_per_client = 256M\n"
		"max_staging_per_uid = unlimited\n"
		"max_priority = 3\n"
		"high_priority_users = 1000\n"
		"high_priority_groups = root\n"
		"priority_anticipation_us = 0\n"
		"priority_max_wait_us = 5000\n"
		"handshake_timeout_ms = 300\n"
		"max_pending_per_uid = 8\n"
		"admin_reserved_clients = 2\n"
		"exclusive_users = 1000\n"
		"exclusive_groups = root\n"
		"max_exclusive_ms = 2000\n"
		"exclusive_share = 25\n"
		"stop_timeout_ms = 2500\n"
		"compile_timeout_ms = 3000\n"
		"compile_memory_max = 512M\n"
		"\n"
		"[user 1000]\n"
		"max_memory_per_client = 2G\n"
		"max_memory_per_uid = 4G\n"
		"[ group root ]\n"
		"max_memory_per_uid = 512M\n";
	struct ruda_config c;
	struct errors e;
	int n = parse(&c, text, &e);
	if (n)
		dump(&e);
	ck_assert_int_eq(n, 0);
	ck_assert_str_eq(c.socket, "/run/test/rudad.sock");
	ck_assert_uint_eq(c.socket_mode, 0666);
	ck_assert_str_eq(c.socket_group, "root");
	ck_assert_uint_eq(c.socket_gid, 0);
	ck_assert_str_eq(c.devices, "llvmpipe");
	ck_assert_uint_eq(c.arena_size, 128u << 20);
	ck_assert_uint_eq(c.max_clients, 64);
	ck_assert_uint_eq(c.max_requests_in_flight, 256);
	ck_assert_uint_eq(c.submission_timeout_ms, 5000);
	ck_assert_int_eq(c.log_level, RUDA_LOG_DEBUG);
	ck_assert_str_eq(c.cache_directory, "/var/cache/ruda test");
	ck_assert_uint_eq(c.admin_gid, 0);
	ck_assert(!c.read_only_views);
	ck_assert_uint_eq(c.allowed_users.count, 3);
	ck_assert_uint_eq(c.allowed_users.ids[0], 0);
	ck_assert_uint_eq(c.allowed_users.ids[1], 1000);
	ck_assert_uint_eq(c.allowed_users.ids[2], 1001);
	ck_assert_uint_eq(c.allowed_groups.count, 1);
	ck_assert_uint_eq(c.unchecked_launch_users.count, 1);
	ck_assert_uint_eq(c.unchecked_launch_groups.count, 0);
	ck_assert(c.force_checked_launches);
	ck_assert(!c.export_memory);
	ck_assert_uint_eq(c.queues, 4);
	ck_assert_str_eq(c.lanes, "on");
	ck_assert_str_eq(c.peer_reduce, "off");
	ck_assert_uint_eq(c.freed_memory_keep_ms, 250);
	ck_assert(c.max_memory_per_client == 1ull << 30);
	ck_assert(c.max_memory_per_uid == RUDA_UNLIMITED);
	ck_assert(c.max_staging_per_client == 256ull << 20);
	ck_assert(c.max_staging_per_uid == RUDA_UNLIMITED);
	ck_assert_uint_eq(c.nquotas, 2);
	ck_assert(!c.quotas[0].is_group);
	ck_assert_uint_eq(c.quotas[0].id, 1000);
	ck_assert_uint_eq(c.quotas[0].line, 46);
	ck_assert_uint_eq(c.max_priority, 3);
	ck_assert_uint_eq(c.high_priority_users.count, 1);
	ck_assert_uint_eq(c.high_priority_groups.count, 1);
	ck_assert_uint_eq(c.priority_anticipation_us, 0);
	ck_assert_uint_eq(c.priority_max_wait_us, 5000);
	ck_assert_uint_eq(c.handshake_timeout_ms, 300);
	ck_assert_uint_eq(c.max_pending_per_uid, 8);
	ck_assert_uint_eq(c.admin_reserved_clients, 2);
	ck_assert_uint_eq(c.exclusive_users.count, 1);
	ck_assert_uint_eq(c.exclusive_users.ids[0], 1000);
	ck_assert_uint_eq(c.exclusive_groups.count, 1);
	ck_assert_uint_eq(c.max_exclusive_ms, 2000);
	ck_assert_uint_eq(c.exclusive_share, 25);
	ck_assert_uint_eq(c.stop_timeout_ms, 2500);
	ck_assert_uint_eq(c.compile_timeout_ms, 3000);
	ck_assert_uint_eq(c.compile_memory_max, 512ull << 20);
	ck_assert(c.quotas[0].has_max_memory_per_client && c.quotas[0].has_max_memory_per_uid);
	ck_assert(c.quotas[0].max_memory_per_client == 2ull << 30);
	ck_assert(c.quotas[0].max_memory_per_uid == 4ull << 30);
	ck_assert(c.quotas[1].is_group);
	ck_assert_uint_eq(c.quotas[1].id, 0);
	ck_assert(!c.quotas[1].has_max_memory_per_client);
	ck_assert(c.quotas[1].max_memory_per_uid == 512ull << 20);
	ck_assert(c.set == (1ull << RUDA_CONFIG_NKEYS) - 1);
	ruda__config_finish(&c);
}
END_TEST

/* Every error of the file, each on its own line, in one pass. */
START_TEST(bad_file)
{
	static const char text[] =
		"socket = relative/path\n"             /* 1 */
		"socket_mode = 0999\n"                 /* 2 */
		"max_clients = 0\n"                    /* 3 */
		"arena_size = 12X\n"                   /* 4 */
		"log_level = loud\n"                   /* 5 */
		"read_only_views = maybe\n"            /* 6 */
		"allowed_users = root, no-such-user-x\n" /* 7 */
		"colour = blue\n"                      /* 8 */
		"just words\n"                         /* 9 */
		"max_clients = 10\n"                   /* 10: fine */
		"max_clients = 11\n"                   /* 11: twice */
		"[user no-such-user-x]\n"              /* 12 */
		"max_memory_per_client = 1G\n"         /* 13: checked, dropped */
		"[printer]\n"                          /* 14 */
		"[user 1000]\n"                        /* 15 */
		"socket = /x\n"                        /* 16: not per user */
		"max_memory_per_uid = lots\n"          /* 17 */
		"[user 1000]\n"                        /* 18: again */
		"[group root\n"                        /* 19 */
		"[global]\n"                           /* 20 */
		"arena_size = 1K\n"                    /* 21: out of range */
		"max_memory_per_uid = 99999999999T\n"  /* 22: overflows */
		"= 5\n"                                /* 23 */
		"priority_anticipation_us = 2000000\n" /* 24: out of range */
		"freed_memory_keep_ms = -1\n";         /* 25: not a number */
	struct ruda_config c;
	struct errors e;
	int n = parse(&c, text, &e);
	static const struct {
		const char *where, *what;
	} expected[] = {
		{"t.conf:1: ", "not an absolute path"},
		{"t.conf:2: ", "octal"},
		{"t.conf:3: ", "out of range"},
		{"t.conf:4: ", "not a size"},
		{"t.conf:5: ", "'loud'"},
		{"t.conf:6: ", "not yes or no"},
		{"t.conf:7: ", "no user named 'no-such-user-x'"},
		{"t.conf:8: ", "unknown key 'colour'"},
		{"t.conf:9: ", "expected 'key = value'"},
		{"t.conf:11: ", "already set on line 10"},
		{"t.conf:12: ", "no user named"},
		{"t.conf:14: ", "unknown section [printer]"},
		{"t.conf:16: ", "cannot be set per user"},
		{"t.conf:17: ", "not a size"},
		{"t.conf:18: ", "repeats the section on line 15"},
		{"t.conf:19: ", "must end with ']'"},
		{"t.conf:21: ", "out of range (1M to 4G)"},
		{"t.conf:22: ", "not a size"},
		{"t.conf:23: ", "key is missing"},
		{"t.conf:24: ", "priority_anticipation_us: 2000000 is out of range (0 to 1000000)"},
		{"t.conf:25: ", "freed_memory_keep_ms: '-1' is not a number"},
	};
	size_t want = sizeof(expected) / sizeof(expected[0]);
	for (size_t i = 0; i < want; i++)
		ck_assert_msg(has_error(&e, expected[i].where, expected[i].what),
			      "no error \"%s...%s\"", expected[i].where, expected[i].what);
	if ((size_t)n != want)
		dump(&e);
	ck_assert_int_eq(n, (int)want);
	ck_assert_uint_eq(c.max_clients, 10); /* the good line took effect */
	ruda__config_finish(&c);
}
END_TEST

/* A list of devices: repeats allowed (logical devices), empty items not. */
START_TEST(device_lists)
{
	struct ruda_config c;
	struct errors e;
	ck_assert_int_eq(parse(&c, "devices = 0, 0 ,llvmpipe\n", &e), 0);
	ck_assert_str_eq(c.devices, "0, 0 ,llvmpipe");
	ruda__config_finish(&c);
	static const char *const bad[] = {"devices = 0,,1\n", "devices = 0,\n",
					  "devices = , 0\n", "devices = 0, ,1\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_int_eq(parse(&c, bad[i], &e), 1);
		ck_assert_msg(has_error(&e, "t.conf:1: ", "empty item"), "%s", bad[i]);
		ruda__config_finish(&c);
	}
}
END_TEST

/* lanes: auto, on or off, and nothing else. */
START_TEST(lanes_values)
{
	struct ruda_config c;
	struct errors e;
	static const char *const good[] = {"auto", "on", "off"};
	for (size_t i = 0; i < 3; i++) {
		char line[64];
		snprintf(line, sizeof(line), "lanes = %s\n", good[i]);
		ck_assert_int_eq(parse(&c, line, &e), 0);
		ck_assert_str_eq(c.lanes, good[i]);
		ruda__config_finish(&c);
	}
	ck_assert_int_eq(parse(&c, "lanes = yes\n", &e), 1);
	ck_assert(has_error(&e, "t.conf:1: ", "lanes: 'yes' is not auto, on or off"));
	ruda__config_finish(&c);
}
END_TEST

/* peer_reduce: the same three. */
START_TEST(peer_reduce_values)
{
	struct ruda_config c;
	struct errors e;
	static const char *const good[] = {"auto", "on", "off"};
	for (size_t i = 0; i < 3; i++) {
		char line[64];
		snprintf(line, sizeof(line), "peer_reduce = %s\n", good[i]);
		ck_assert_int_eq(parse(&c, line, &e), 0);
		ck_assert_str_eq(c.peer_reduce, good[i]);
		ruda__config_finish(&c);
	}
	ck_assert_int_eq(parse(&c, "peer_reduce = gpu\n", &e), 1);
	ck_assert(has_error(&e, "t.conf:1: ", "peer_reduce: 'gpu' is not auto, on or off"));
	ruda__config_finish(&c);
}
END_TEST

START_TEST(long_lines_and_nul)
{
	size_t len = 5000;
	char *text = malloc(len + 64);
	memset(text, 'a', len);
	strcpy(text + len, "\nmax_clients = 7\n");
	struct ruda_config c;
	struct errors e;
	memset(&e, 0, sizeof(e));
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_parse(&c, "t.conf", text, strlen(text), collect, &e), 1);
	ck_assert(has_error(&e, "t.conf:1: ", "longer than"));
	ck_assert_uint_eq(c.max_clients, 7);
	ruda__config_finish(&c);
	free(text);

	static const char nul[] = "max_clients = 3\nlog\0_level = debug\n";
	memset(&e, 0, sizeof(e));
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_parse(&c, "t.conf", nul, sizeof(nul) - 1, collect, &e), 1);
	ck_assert(has_error(&e, "t.conf:2: ", "NUL"));
	ruda__config_finish(&c);
}
END_TEST

START_TEST(sizes)
{
	static const struct {
		const char *text;
		uint64_t bytes; /* 0: refused */
	} cases[] = {
		{"4096", 4096},         {"1K", 1024},          {"64M", 64ull << 20},
		{"1GiB", 1ull << 30},   {"2gb", 2ull << 30},   {"3T", 3ull << 40},
		{"100B", 100},          {"unlimited", RUDA_UNLIMITED},
		{"1.5G", 0},            {"-1", 0},             {"G", 0},
		{"12 M", 0},            {"99999999999T", 0},   {"1Q", 0},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ruda_config c;
		ruda__config_init(&c);
		int r = ruda__config_set(&c, "max_memory_per_client", cases[i].text, NULL, NULL);
		if (cases[i].bytes) {
			ck_assert_msg(r == 0, "%s refused", cases[i].text);
			ck_assert_msg(c.max_memory_per_client == cases[i].bytes, "%s", cases[i].text);
		} else {
			ck_assert_msg(r < 0, "%s accepted", cases[i].text);
		}
		ruda__config_finish(&c);
	}
	char buf[32];
	ck_assert_str_eq(ruda__config_format_size(2ull << 30, buf, sizeof(buf)), "2G");
	ck_assert_str_eq(ruda__config_format_size(1536ull << 20, buf, sizeof(buf)), "1536M");
	ck_assert_str_eq(ruda__config_format_size(1000, buf, sizeof(buf)), "1000");
	ck_assert_str_eq(ruda__config_format_size(RUDA_UNLIMITED, buf, sizeof(buf)), "unlimited");
}
END_TEST

/* The command line wins over the file; "" puts a default back. */
START_TEST(overrides)
{
	struct ruda_config file, cli;
	struct errors e;
	ck_assert_int_eq(parse(&file, "max_clients = 10\nlog_level = debug\n"
				      "allowed_users = root\nsocket = /a/b.sock\n",
			       &e),
			 0);
	ruda__config_init(&cli);
	ck_assert_int_eq(ruda__config_set(&cli, "max_clients", "20", NULL, NULL), 0);
	ck_assert_int_eq(ruda__config_set(&cli, "allowed_users", "", NULL, NULL), 0);
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(ruda__config_set(&cli, "no_such_key", "1", collect, &e), -EINVAL);
	ck_assert(has_error(&e, "-:0: ", "unknown key 'no_such_key'"));
	ck_assert_int_eq(ruda__config_override(&file, &cli), 0);
	ck_assert_uint_eq(file.max_clients, 20);
	ck_assert_uint_eq(file.allowed_users.count, 0);
	ck_assert_int_eq(file.log_level, RUDA_LOG_DEBUG); /* not on the command line */
	ck_assert_str_eq(file.socket, "/a/b.sock");
	ruda__config_finish(&file);
	ruda__config_finish(&cli);
}
END_TEST

START_TEST(keys_compare_and_copy)
{
	struct ruda_config a, b;
	struct errors e;
	ck_assert_int_eq(parse(&a, "allowed_users = 1, 2\nsocket_group = root\n", &e), 0);
	ck_assert_int_eq(parse(&b, "allowed_users = 1, 2\n", &e), 0);
	ck_assert(ruda__config_key_equal(&a, &b, RUDA_CONFIG_ALLOWED_USERS));
	ck_assert(!ruda__config_key_equal(&a, &b, RUDA_CONFIG_SOCKET_GROUP));
	ck_assert(ruda__config_key_equal(&a, &b, RUDA_CONFIG_MAX_CLIENTS));
	ck_assert_int_eq(ruda__config_key_copy(&b, &a, RUDA_CONFIG_SOCKET_GROUP), 0);
	ck_assert(ruda__config_key_equal(&a, &b, RUDA_CONFIG_SOCKET_GROUP));
	ck_assert_str_eq(b.socket_group, "root");
	ck_assert(ruda__config_key_reloadable(RUDA_CONFIG_ALLOWED_USERS));
	ck_assert(ruda__config_key_reloadable(RUDA_CONFIG_LOG_LEVEL));
	ck_assert(!ruda__config_key_reloadable(RUDA_CONFIG_SOCKET));
	ck_assert(!ruda__config_key_reloadable(RUDA_CONFIG_DEVICES));
	ck_assert_int_eq(ruda__config_key_lookup("max_memory_per_uid"),
			 RUDA_CONFIG_MAX_MEMORY_PER_UID);
	ck_assert_int_eq(ruda__config_key_lookup("nope"), -ENOENT);
	ruda__config_finish(&a);
	ruda__config_finish(&b);
}
END_TEST

/* What --print-config writes reads back as the same configuration. */
START_TEST(round_trip)
{
	static const char text[] = "socket = /x/y.sock\nsocket_mode = 600\nmax_clients = 3\n"
				   "allowed_users = root, 4242\nallowed_groups = root\n"
				   "read_only_views = no\nmax_memory_per_uid = 1536M\n"
				   "[user 4242]\nmax_memory_per_client = 1G\n"
				   "[group root]\nmax_memory_per_uid = unlimited\n";
	struct ruda_config a, b;
	struct errors e;
	ck_assert_int_eq(parse(&a, text, &e), 0);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	ruda__config_write(&a, f);
	fclose(f);
	int n = parse(&b, out, &e);
	if (n) {
		fprintf(stderr, "%s", out);
		dump(&e);
	}
	ck_assert_int_eq(n, 0);
	for (int k = 0; k < RUDA_CONFIG_NKEYS; k++)
		ck_assert_msg(ruda__config_key_equal(&a, &b, (enum ruda_config_key)k), "%s differs",
			      ruda__config_key_name((enum ruda_config_key)k));
	ck_assert(ruda__config_quotas_equal(&a, &b));
	ck_assert_ptr_nonnull(strstr(out, "[user 4242]\nmax_memory_per_client = 1G\n"));
	free(out);
	ruda__config_finish(&a);
	ruda__config_finish(&b);
}
END_TEST

START_TEST(files)
{
	char dir[] = "/tmp/ruda-config-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	char path[128];
	snprintf(path, sizeof(path), "%s/rudad.conf", dir);
	struct ruda_config c;
	struct errors e = {0};
	bool found = true;

	/* absent: fine unless asked for by name */
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_load(&c, path, false, &found, collect, &e), 0);
	ck_assert(!found);
	ck_assert_int_eq(ruda__config_load(&c, path, true, &found, collect, &e), 1);
	ck_assert(has_error(&e, path, "cannot open"));

	FILE *f = fopen(path, "w");
	fputs("max_clients = 5\n\narena_size = x\n", f);
	fclose(f);
	memset(&e, 0, sizeof(e));
	ck_assert_int_eq(ruda__config_load(&c, path, true, &found, collect, &e), 1);
	ck_assert(found);
	char where[160];
	snprintf(where, sizeof(where), "%s:3: ", path);
	ck_assert(has_error(&e, where, "not a size"));
	ruda__config_finish(&c);

	/* anyone could grant themselves unchecked launches */
	chmod(path, 0666);
	memset(&e, 0, sizeof(e));
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_load(&c, path, true, NULL, collect, &e), 1);
	ck_assert(has_error(&e, path, "writable by every user"));
	ruda__config_finish(&c);
	unlink(path);
	rmdir(dir);
}
END_TEST

START_TEST(cache_directory)
{
	char buf[256];
	setenv("CACHE_DIRECTORY", "/var/cache/ruda:/var/cache/other", 1);
	ck_assert_int_eq(ruda__config_default_cache_directory(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, "/var/cache/ruda");
	unsetenv("CACHE_DIRECTORY");
	setenv("XDG_CACHE_HOME", "/home/x/.cache", 1);
	ck_assert_int_eq(ruda__config_default_cache_directory(buf, sizeof(buf)), 0);
	ck_assert_str_eq(buf, geteuid() == 0 ? "/var/cache/ruda" : "/home/x/.cache/ruda");

	struct ruda_config c;
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_resolve(&c), 0);
	ck_assert_str_eq(c.cache_directory, buf);
	ruda__config_finish(&c);
	ruda__config_init(&c);
	ck_assert_int_eq(ruda__config_set(&c, "cache_directory", "/srv/ruda", NULL, NULL), 0);
	ck_assert_int_eq(ruda__config_resolve(&c), 0);
	ck_assert_str_eq(c.cache_directory, "/srv/ruda");
	ruda__config_finish(&c);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("config");
	tcase_set_timeout(tc, 10);
	tcase_add_test(tc, defaults);
	tcase_add_test(tc, good_file);
	tcase_add_test(tc, bad_file);
	tcase_add_test(tc, lanes_values);
	tcase_add_test(tc, peer_reduce_values);
	tcase_add_test(tc, device_lists);
	tcase_add_test(tc, long_lines_and_nul);
	tcase_add_test(tc, sizes);
	tcase_add_test(tc, overrides);
	tcase_add_test(tc, keys_compare_and_copy);
	tcase_add_test(tc, round_trip);
	tcase_add_test(tc, files);
	tcase_add_test(tc, cache_directory);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
