/*
 * Runs a fuzz target on files without libFuzzer: each argument is a file
 * or a directory of files (not recursive). Built with gcc by `make check`
 * (through tests/unit/test_fuzz_corpus.c, which includes this file with
 * RUDA_REPLAY_NO_MAIN) and usable by hand to replay a crash under gdb or
 * valgrind:
 *
 *   cc ... tests/fuzz/replay.c tests/fuzz/fuzz_dispatch.c ... -o replay
 *   ./replay crash-0123abcd
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef int (*replay_fn)(const uint8_t *data, size_t size);

/* Run `one` on file `path`; returns 0, or -1 when it cannot be read. */
static int replay_file(const char *path, replay_fn one)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	size_t cap = 4096, len = 0;
	uint8_t *buf = malloc(cap);
	size_t n;
	while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
		len += n;
		if (len == cap) {
			uint8_t *bigger = realloc(buf, cap * 2);
			if (!bigger) {
				free(buf);
				buf = NULL;
				break;
			}
			buf = bigger;
			cap *= 2;
		}
	}
	fclose(f);
	if (!buf)
		return -1;
	/* an exact-size copy, so that ASan sees reads past the end */
	uint8_t *exact = malloc(len ? len : 1);
	if (!exact) {
		free(buf);
		return -1;
	}
	memcpy(exact, buf, len);
	free(buf);
	one(exact, len);
	free(exact);
	return 0;
}

static int replay_compare(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Run `one` on `path`, a file or every file of a directory in name order.
 * Returns the number of inputs run, or -1 when `path` cannot be read. */
static int replay_path(const char *path, replay_fn one)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return -1;
	if (!S_ISDIR(st.st_mode))
		return replay_file(path, one) < 0 ? -1 : 1;
	DIR *dir = opendir(path);
	if (!dir)
		return -1;
	char **names = NULL;
	size_t count = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(dir))) {
		if (e->d_name[0] == '.')
			continue;
		if (count == cap) {
			cap = cap ? cap * 2 : 64;
			char **more = realloc(names, cap * sizeof(*names));
			if (!more)
				break;
			names = more;
		}
		names[count++] = strdup(e->d_name);
	}
	closedir(dir);
	if (count)
		qsort(names, count, sizeof(*names), replay_compare);
	int run = 0;
	for (size_t i = 0; i < count; i++) {
		char file[4096];
		snprintf(file, sizeof(file), "%s/%s", path, names[i]);
		if (replay_file(file, one) == 0)
			run++;
		free(names[i]);
	}
	free(names);
	return run;
}

#ifndef RUDA_REPLAY_NO_MAIN
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	int total = 0;
	for (int i = 1; i < argc; i++) {
		int n = replay_path(argv[i], LLVMFuzzerTestOneInput);
		if (n < 0) {
			fprintf(stderr, "replay: cannot read %s\n", argv[i]);
			return 2;
		}
		total += n;
	}
	printf("replay: %d inputs ran\n", total);
	return 0;
}
#endif
