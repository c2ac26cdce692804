/*
 * The README's example: add two vectors on the GPU through rudad.
 *
 *   cc -o example example.c $(pkg-config --cflags --libs ruda)
 *   ./example /path/to/add_f32.spv
 *
 * In a built source tree, before `make install`, PKG_CONFIG_PATH=build
 * finds build/ruda-uninstalled.pc (`make` builds build/example so too).
 */
#include <stdio.h>
#include <stdlib.h>

#include <ruda/ruda.h>

#define N 4096

static int fail(ruda_client *client, const char *what, ruda_status status)
{
	/* with client NULL (a failed connect) this is why the connect failed */
	char why[512] = "";
	ruda_client_last_error(client, why, sizeof(why));
	fprintf(stderr, "%s: %s%s%s\n", what, ruda_strerror(status), *why ? ": " : "", why);
	ruda_client_close(client);
	return 1;
}

/* SPIR-V words from a file; the caller frees them. */
static uint32_t *load_spirv(const char *path, size_t *size)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	rewind(f);
	uint32_t *words = len > 0 ? malloc((size_t)len) : NULL;
	if (words && fread(words, 1, (size_t)len, f) != (size_t)len) {
		free(words);
		words = NULL;
	}
	fclose(f);
	*size = (size_t)len;
	return words;
}

int main(int argc, char **argv)
{
	const char *spirv_path = argc > 1 ? argv[1] : "add_f32.spv";
	size_t spirv_size;
	uint32_t *spirv = load_spirv(spirv_path, &spirv_size);
	if (!spirv) {
		fprintf(stderr, "cannot read %s\n", spirv_path);
		return 1;
	}

	ruda_client *client;
	ruda_connect_options options = {.struct_size = sizeof(ruda_connect_options),
		.client_name = "example"};
	ruda_status st = ruda_client_connect(&options, &client);
	if (st != RUDA_OK) {
		free(spirv);
		return fail(NULL, "connect", st);
	}
	ruda_device_properties props = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(client, &props);
	printf("device: %s\n", props.name);

	static float a[N], b[N], sum[N];
	for (int i = 0; i < N; i++) {
		a[i] = (float)i;
		b[i] = 0.5f * (float)i;
	}
	ruda_handle ha, hb, hsum;
	ruda_client_create(client, a, sizeof(a), &ha);
	ruda_client_create(client, b, sizeof(b), &hb);
	ruda_client_empty(client, sizeof(sum), &hsum);

	ruda_kernel add;
	ruda_kernel_desc desc = {
		.struct_size = sizeof(ruda_kernel_desc),
		.spirv = spirv,
		.spirv_size = spirv_size,
		.entry_point = "main",
		.binding_count = 3,
		.push_constant_size = 4,
	};
	st = ruda_client_kernel_register(client, &desc, &add);
	free(spirv);
	if (st != RUDA_OK)
		return fail(client, "register", st);

	uint32_t n = N;
	ruda_handle bindings[] = {ha, hb, hsum};
	ruda_client_launch(client, add, (ruda_count){N / 256, 1, 1}, bindings, 3, &n, sizeof(n));
	st = ruda_client_read_one(client, hsum, sum);
	if (st != RUDA_OK)
		return fail(client, "read", st);

	for (int i = 0; i < N; i++)
		if (sum[i] != a[i] + b[i]) {
			fprintf(stderr, "wrong result at %d: %f\n", i, sum[i]);
			ruda_client_close(client);
			return 1;
		}
	printf("ok: %d sums correct\n", N);
	ruda_client_close(client);
	return 0;
}
