/*
 * The first-launch program through rudad: a new client process that
 * connects, registers tests/shaders/spec_fill.comp with VALUE = argv[3],
 * runs it once over 256 words, reads them back and checks them. Exits 0
 * only on a correct result. Same work as first_vk.c, through libruda.
 *
 *   first_client SOCKET SPIRV VALUE
 *
 * Prints the time of each phase on stdout for the bench's breakdown.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <ruda/ruda.h>

#define WORDS 256u

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int failed(ruda_client *c, const char *what, ruda_status st)
{
	char why[512] = "";
	if (c)
		ruda_client_last_error(c, why, sizeof(why));
	fprintf(stderr, "first_client: %s: %s: %s\n", what, ruda_strerror(st), why);
	return 1;
}

int main(int argc, char **argv)
{
	double t0 = now_ms();
	if (argc != 4) {
		fprintf(stderr, "usage: first_client SOCKET SPIRV VALUE\n");
		return 2;
	}
	uint32_t value = (uint32_t)strtoul(argv[3], NULL, 0);
	FILE *f = fopen(argv[2], "rb");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint32_t *code = malloc((size_t)len);
	if (!code || fread(code, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "first_client: cannot read %s\n", argv[2]);
		return 1;
	}
	fclose(f);

	ruda_connect_options o = {.struct_size = sizeof(ruda_connect_options),
		.socket_path = argv[1], .client_name = "first_client"};
	ruda_client *c = NULL;
	ruda_status st = ruda_client_connect(&o, &c);
	if (st != RUDA_OK)
		return failed(NULL, "connect", st);
	double t_connect = now_ms();

	ruda_spec_constant spec = {.id = 0, .size = 4, .value = value};
	ruda_kernel_desc desc = {
		.struct_size = sizeof(ruda_kernel_desc),
		.spirv = code,
		.spirv_size = (size_t)len,
		.entry_point = "main",
		.binding_count = 1,
		.push_constant_size = 4,
		.spec_constants = &spec,
		.spec_constant_count = 1,
	};
	ruda_kernel k;
	st = ruda_client_kernel_register(c, &desc, &k);
	if (st != RUDA_OK)
		return failed(c, "register", st);
	double t_register = now_ms();

	ruda_handle out;
	st = ruda_client_empty(c, WORDS * 4, &out);
	uint32_t count = WORDS;
	if (st == RUDA_OK)
		st = ruda_client_launch(c, k, (ruda_count){WORDS / 64, 1, 1}, &out, 1, &count,
					sizeof(count));
	uint32_t words[WORDS];
	memset(words, 0, sizeof(words));
	if (st == RUDA_OK)
		st = ruda_client_read_one(c, out, words);
	if (st != RUDA_OK)
		return failed(c, "launch and read", st);
	for (uint32_t i = 0; i < WORDS; i++)
		if (words[i] != value) {
			fprintf(stderr, "first_client: word %u is %u, expected %u\n", i, words[i],
				value);
			return 1;
		}
	double t_run = now_ms();
	ruda_client_close(c);
	free(code);
	double t_end = now_ms();
	printf("phases: connect %.2f register %.2f run %.2f close %.2f\n", t_connect - t0,
	       t_register - t_connect, t_run - t_register, t_end - t_run);
	return 0;
}
