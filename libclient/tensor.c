/* libruda: tensors, their layouts and strided reads, built on the buffer
 * calls of client.c. */
#include "tensor.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "struct_size.h"
#include "gather_spv.h" /* generated from shaders/gather.comp */

/* Pitched rows are aligned to this many bytes (or the device's binding
 * alignment, if larger): the row pitch GPUs copy and load fastest. */
#define PITCH_ALIGNMENT 256u
/* Rows are pitched only when that adds at most 1/PITCH_MAX_WASTE to them. */
#define PITCH_MAX_WASTE 8u
/* Pitched uploads are assembled in host batches of about this size. */
#define PITCH_BATCH_BYTES (4u << 20)
/* What gather.comp handles. */
#define GATHER_MAX_RANK 4
#define GATHER_PUSH_SIZE 40u
#define GATHER_GROUP_SIZE 256u

struct shared_buffer {
	uint64_t id;
	uint64_t refs;
};

struct ruda_tensor_state {
	pthread_mutex_t lock;
	struct shared_buffer *shared;
	size_t count, cap;
	ruda_kernel gather; /* 0 = not registered yet */
};

struct ruda_tensor_state *ruda__tensor_state_new(void)
{
	struct ruda_tensor_state *t = calloc(1, sizeof(*t));
	if (t)
		pthread_mutex_init(&t->lock, NULL);
	return t;
}

void ruda__tensor_state_free(struct ruda_tensor_state *t)
{
	if (!t)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->shared);
	free(t);
}

static int share(struct ruda_tensor_state *t, uint64_t id, uint64_t refs)
{
	pthread_mutex_lock(&t->lock);
	int err = 0;
	if (t->count == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 16;
		struct shared_buffer *grown = realloc(t->shared, cap * sizeof(*grown));
		if (grown) {
			t->shared = grown;
			t->cap = cap;
		} else {
			err = -1;
		}
	}
	if (!err)
		t->shared[t->count++] = (struct shared_buffer){.id = id, .refs = refs};
	pthread_mutex_unlock(&t->lock);
	return err;
}

int ruda__tensor_release_shared(struct ruda_tensor_state *t, uint64_t id)
{
	int keep = 0;
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < t->count; i++) {
		if (t->shared[i].id != id)
			continue;
		if (--t->shared[i].refs > 0)
			keep = 1;
		else
			t->shared[i] = t->shared[--t->count];
		break;
	}
	pthread_mutex_unlock(&t->lock);
	return keep;
}

/* ---- layouts ------------------------------------------------------------ */

static uint64_t round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

static uint64_t element_count(uint32_t rank, const uint64_t *shape)
{
	uint64_t n = 1;
	for (uint32_t k = 0; k < rank; k++)
		n *= shape[k];
	return n;
}

static uint64_t binding_alignment(const ruda_client *c)
{
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(c, &p);
	return p.min_storage_buffer_offset_alignment > 16 ? p.min_storage_buffer_offset_alignment
							  : 16;
}

/* Whether every product and byte count of `d` fits 64 bits. */
static int layout_desc_valid(const ruda_layout_desc *d)
{
	if (d->rank < 1 || d->rank > RUDA_MAX_RANK || d->elem_size == 0)
		return 0;
	uint64_t n = d->elem_size;
	for (uint32_t k = 0; k < d->rank; k++) {
		if (d->shape[k] && n > UINT64_MAX / 2 / d->shape[k])
			return 0;
		n *= d->shape[k] ? d->shape[k] : 1;
	}
	return 1;
}

/* Choose the strides of `d`; returns the bytes it needs. */
static uint64_t choose_layout(const ruda_client *c, const ruda_layout_desc *d, ruda_layout *out)
{
	uint32_t last = d->rank - 1;
	uint64_t row_bytes = d->shape[last] * d->elem_size;
	uint64_t rows = element_count(last, d->shape);
	uint64_t pitch_align = binding_alignment(c);
	if (pitch_align < PITCH_ALIGNMENT)
		pitch_align = PITCH_ALIGNMENT;
	uint64_t pitch = round_up(row_bytes, pitch_align);
	int pitched = d->strategy == RUDA_LAYOUT_OPTIMIZED && d->rank >= 2 && rows > 1 &&
		      row_bytes && pitch != row_bytes && pitch_align % d->elem_size == 0 &&
		      (pitch - row_bytes) * PITCH_MAX_WASTE <= row_bytes;
	out->rank = d->rank;
	memset(out->strides, 0, sizeof(out->strides));
	out->strides[last] = 1;
	uint64_t stride = pitched ? pitch / d->elem_size : d->shape[last];
	for (uint32_t k = last; k-- > 0;) {
		out->strides[k] = stride;
		stride *= d->shape[k];
	}
	return pitched ? rows * pitch : rows * row_bytes;
}

/*
 * Whether the layout is rows lying at a pitch: the last dimension packed,
 * every other one packed over rows of *pitch elements (>= the row), as
 * choose_layout's pitched tensors are. A packed layout is the case pitch ==
 * the row. Dimensions of size 1 may have any stride.
 */
static int rows_at_pitch(uint32_t rank, const uint64_t *shape, const uint64_t *strides,
			 uint64_t *pitch)
{
	if (rank < 1 || rank > RUDA_MAX_RANK || !shape || !strides)
		return 0;
	uint32_t last = rank - 1;
	if (shape[last] != 1 && strides[last] != 1)
		return 0;
	/* the row pitch: the stride of the innermost outer dimension that has
	 * more than one element, or the row when there is none */
	*pitch = shape[last];
	for (uint32_t k = last; k-- > 0;)
		if (shape[k] != 1) {
			*pitch = strides[k];
			break;
		}
	if (*pitch < shape[last])
		return 0;
	uint64_t expected = *pitch;
	for (uint32_t k = last; k-- > 0;) {
		if (shape[k] != 1 && strides[k] != expected)
			return 0;
		if (shape[k] && expected > UINT64_MAX / shape[k])
			return 0;
		expected *= shape[k];
	}
	return 1;
}

int ruda_client_can_read_tensor(const ruda_client *c, uint32_t rank, const uint64_t *shape,
				const uint64_t *strides)
{
	(void)c;
	uint64_t pitch;
	return rows_at_pitch(rank, shape, strides, &pitch);
}

/* ---- create and empty --------------------------------------------------- */

/* Upload packed rows into a pitched tensor, a batch of rows at a time. */
static ruda_status upload_pitched(ruda_client *c, const ruda_layout_desc *d,
				  const ruda_layout *l, const uint8_t *src)
{
	uint32_t last = d->rank - 1;
	uint64_t row_bytes = d->shape[last] * d->elem_size;
	uint64_t pitch = l->strides[last - 1] * d->elem_size;
	uint64_t rows = element_count(last, d->shape);
	uint64_t batch = PITCH_BATCH_BYTES / pitch ? PITCH_BATCH_BYTES / pitch : 1;
	if (batch > rows)
		batch = rows;
	uint8_t *staging = calloc(batch, pitch); /* padding bytes are zeros */
	if (!staging)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda_status st = RUDA_OK;
	for (uint64_t row = 0; row < rows && st == RUDA_OK; row += batch) {
		uint64_t n = rows - row < batch ? rows - row : batch;
		for (uint64_t i = 0; i < n; i++)
			memcpy(staging + i * pitch, src + (row + i) * row_bytes, row_bytes);
		st = ruda_client_write(c, l->handle, row * pitch, staging, n * pitch);
	}
	free(staging);
	return st;
}

static ruda_status make_tensors(ruda_client *c, const ruda_layout_desc *descs,
				const void *const *data, size_t count, ruda_layout *out)
{
	if (!c || !out || (count && !descs))
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (!count)
		return RUDA_OK;
	uint64_t align = binding_alignment(c), total = 0;
	for (size_t i = 0; i < count; i++) {
		if (!layout_desc_valid(&descs[i]) || (data && !data[i] && element_count(
						descs[i].rank, descs[i].shape)))
			return RUDA_ERROR_INVALID_ARGUMENT;
		uint64_t bytes = choose_layout(c, &descs[i], &out[i]);
		total = round_up(total, align);
		if (total > UINT64_MAX / 2 - bytes)
			return RUDA_ERROR_TOO_LARGE;
		out[i].handle = (ruda_handle){.offset = total, .size = bytes};
		total += bytes;
	}
	ruda_handle buffer;
	ruda_status st = ruda_client_empty(c, total, &buffer);
	if (st != RUDA_OK)
		return st;
	if (count > 1 && share(ruda__client_tensor_state(c), buffer.id, count) < 0) {
		ruda_client_release(c, buffer);
		return RUDA_ERROR_OUT_OF_MEMORY;
	}
	for (size_t i = 0; i < count; i++)
		out[i].handle.id = buffer.id;
	for (size_t i = 0; data && i < count && st == RUDA_OK; i++) {
		const ruda_layout_desc *d = &descs[i];
		uint64_t packed = element_count(d->rank, d->shape) * d->elem_size;
		if (!packed)
			continue;
		uint64_t pitch;
		if (rows_at_pitch(d->rank, d->shape, out[i].strides, &pitch) &&
		    pitch == d->shape[d->rank - 1])
			st = ruda_client_write(c, out[i].handle, 0, data[i], packed);
		else
			st = upload_pitched(c, d, &out[i], data[i]);
	}
	if (st != RUDA_OK)
		for (size_t i = 0; i < count; i++)
			ruda_client_release(c, out[i].handle);
	return st;
}

/* make_tensors on the library's own copies of the caller's arrays, whose
 * elements may be of another size (struct_size.h). */
static ruda_status make_tensors_sized(ruda_client *c, const ruda_layout_desc *descs,
				      const void *const *data, size_t count, ruda_layout *out)
{
	if (!c || (count && (!descs || ruda__struct_out_ok(out, RUDA__MIN_LAYOUT) != RUDA_OK)))
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (!count)
		return RUDA_OK;
	void *in;
	ruda_status st = ruda__array_in(&in, sizeof(*descs), RUDA__MIN_LAYOUT_DESC, descs, count);
	if (st != RUDA_OK)
		return st;
	ruda_layout *layouts = calloc(count, sizeof(*layouts));
	st = layouts ? make_tensors(c, in, data, count, layouts) : RUDA_ERROR_OUT_OF_MEMORY;
	if (st == RUDA_OK) {
		for (size_t i = 0; i < count; i++)
			layouts[i].struct_size = sizeof(*layouts);
		ruda__array_out(out, layouts, sizeof(*layouts), count);
	}
	free(layouts);
	free(in);
	return st;
}

ruda_status ruda_client_create_tensors(ruda_client *c, const ruda_layout_desc *descs,
				       const void *const *data, size_t count, ruda_layout *out)
{
	if (!data && count)
		return RUDA_ERROR_INVALID_ARGUMENT;
	return make_tensors_sized(c, descs, data, count, out);
}

ruda_status ruda_client_create_tensor(ruda_client *c, const ruda_layout_desc *desc,
				      const void *data, ruda_layout *out)
{
	return ruda_client_create_tensors(c, desc, &data, 1, out);
}

ruda_status ruda_client_empty_tensors(ruda_client *c, const ruda_layout_desc *descs,
				      size_t count, ruda_layout *out)
{
	return make_tensors_sized(c, descs, NULL, count, out);
}

ruda_status ruda_client_empty_tensor(ruda_client *c, const ruda_layout_desc *desc,
				     ruda_layout *out)
{
	return make_tensors_sized(c, desc, NULL, 1, out);
}

/* ---- strided reads ------------------------------------------------------ */

/* A layout with dimensions of size 1 dropped and dimensions that lie
 * back to back merged: the fewest dimensions describing the same bytes. */
struct flat_layout {
	uint32_t rank;
	uint64_t shape[RUDA_MAX_RANK], strides[RUDA_MAX_RANK];
};

static void flatten(const ruda_copy_desc *d, struct flat_layout *f)
{
	f->rank = 0;
	for (uint32_t k = 0; k < d->rank; k++) {
		if (d->shape[k] == 1)
			continue;
		if (f->rank && f->strides[f->rank - 1] == d->strides[k] * d->shape[k]) {
			f->shape[f->rank - 1] *= d->shape[k];
			f->strides[f->rank - 1] = d->strides[k];
			continue;
		}
		f->shape[f->rank] = d->shape[k];
		f->strides[f->rank] = d->strides[k];
		f->rank++;
	}
}

/* Bytes from element 0 to the end of the last element; 0 when empty. */
static int copy_span(const ruda_copy_desc *d, uint64_t *span)
{
	uint64_t last = 0;
	for (uint32_t k = 0; k < d->rank; k++) {
		if (!d->shape[k]) {
			*span = 0;
			return 0;
		}
		if (d->strides[k] && d->shape[k] - 1 > (UINT64_MAX / 4 - last) / d->strides[k])
			return -1;
		last += (d->shape[k] - 1) * d->strides[k];
	}
	if (last + 1 > UINT64_MAX / 4 / d->elem_size)
		return -1;
	*span = (last + 1) * d->elem_size;
	return 0;
}

static ruda_status gather_kernel(ruda_client *c, ruda_kernel *out)
{
	struct ruda_tensor_state *t = ruda__client_tensor_state(c);
	pthread_mutex_lock(&t->lock);
	ruda_status st = RUDA_OK;
	if (!t->gather) {
		ruda_kernel_desc k = {
			.struct_size = sizeof(k),
			.spirv = ruda_gather_spv,
			.spirv_size = sizeof(ruda_gather_spv),
			.entry_point = "main",
			.binding_count = 2,
			.push_constant_size = GATHER_PUSH_SIZE,
		};
		st = ruda_client_kernel_register(c, &k, &t->gather);
	}
	*out = t->gather;
	pthread_mutex_unlock(&t->lock);
	return st;
}

/* Whether gather.comp can pack this layout on the device. */
static int device_gather_fits(const ruda_client *c, const ruda_copy_desc *d,
			      const struct flat_layout *f, uint64_t span)
{
	uint64_t n = element_count(d->rank, d->shape);
	return d->elem_size % 4 == 0 && d->elem_size <= 16 && f->rank <= GATHER_MAX_RANK &&
	       d->handle.offset % binding_alignment(c) == 0 && span / 4 < UINT32_MAX &&
	       n * (d->elem_size / 4) < UINT32_MAX;
}

static ruda_status read_gathered_on_device(ruda_client *c, const ruda_copy_desc *d,
					   const struct flat_layout *f, uint64_t span, void *dst)
{
	ruda_kernel gather;
	ruda_status st = gather_kernel(c, &gather);
	if (st != RUDA_OK)
		return st;
	uint64_t n = element_count(d->rank, d->shape);
	struct {
		uint32_t shape[4], strides[4], count, elem_words;
	} push = {.shape = {1, 1, 1, 1}, .count = (uint32_t)n,
		  .elem_words = (uint32_t)(d->elem_size / 4)};
	/* outermost first, innermost in the last of the four */
	for (uint32_t k = 0; k < f->rank; k++) {
		push.shape[GATHER_MAX_RANK - f->rank + k] = (uint32_t)f->shape[k];
		push.strides[GATHER_MAX_RANK - f->rank + k] = (uint32_t)f->strides[k];
	}
	ruda_handle packed;
	st = ruda_client_empty(c, n * d->elem_size, &packed);
	if (st != RUDA_OK)
		return st;
	uint64_t groups = (n + GATHER_GROUP_SIZE - 1) / GATHER_GROUP_SIZE;
	ruda_device_properties p = RUDA_DEVICE_PROPERTIES_INIT;
	ruda_client_properties(c, &p);
	uint64_t max_groups = p.max_workgroup_count[0] < 65535 ? p.max_workgroup_count[0] : 65535;
	if (groups > max_groups)
		groups = max_groups; /* the kernel strides over the rest */
	ruda_handle bind[2] = {{d->handle.id, d->handle.offset, span}, packed};
	st = ruda_client_launch(c, gather, (ruda_count){(uint32_t)groups, 1, 1}, bind, 2, &push,
				sizeof(push));
	if (st == RUDA_OK)
		st = ruda_client_read_one(c, packed, dst);
	ruda_client_release(c, packed);
	return st;
}

/* Read the tensor's byte span and pack it here. */
static ruda_status read_gathered_on_host(ruda_client *c, const ruda_copy_desc *d,
					 const struct flat_layout *f, uint64_t span, void *dst)
{
	uint8_t *bytes = malloc(span);
	if (!bytes)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda_status st = ruda_client_read_one(
		c, (ruda_handle){d->handle.id, d->handle.offset, span}, bytes);
	if (st == RUDA_OK) {
		uint64_t n = element_count(d->rank, d->shape);
		uint64_t index[RUDA_MAX_RANK] = {0}, offset = 0;
		uint8_t *out = dst;
		for (uint64_t i = 0; i < n; i++) {
			memcpy(out + i * d->elem_size, bytes + offset * d->elem_size, d->elem_size);
			/* step the innermost index, carrying outwards */
			for (uint32_t k = f->rank; k-- > 0;) {
				offset += f->strides[k];
				if (++index[k] < f->shape[k])
					break;
				offset -= f->strides[k] * f->shape[k];
				index[k] = 0;
			}
		}
	}
	free(bytes);
	return st;
}

/* Rows of `row` bytes every `pitch` bytes: read the span, drop the padding. */
static ruda_status read_rows(ruda_client *c, const ruda_copy_desc *d, uint64_t row,
			     uint64_t pitch, uint64_t span, void *dst)
{
	uint8_t *bytes = malloc(span);
	if (!bytes)
		return RUDA_ERROR_OUT_OF_MEMORY;
	ruda_status st = ruda_client_read_one(
		c, (ruda_handle){d->handle.id, d->handle.offset, span}, bytes);
	uint64_t rows = row ? element_count(d->rank, d->shape) * d->elem_size / row : 0;
	for (uint64_t i = 0; st == RUDA_OK && i < rows; i++)
		memcpy((uint8_t *)dst + i * row, bytes + i * pitch, row);
	free(bytes);
	return st;
}

static ruda_status read_tensor(ruda_client *c, const ruda_copy_desc *d, void *dst)
{
	uint64_t span;
	if (d->rank < 1 || d->rank > RUDA_MAX_RANK || !d->elem_size || copy_span(d, &span) < 0)
		return RUDA_ERROR_INVALID_ARGUMENT;
	if (span > d->handle.size)
		return RUDA_ERROR_OUT_OF_RANGE;
	if (!span)
		return RUDA_OK;
	if (!dst)
		return RUDA_ERROR_INVALID_ARGUMENT;
	uint64_t packed = element_count(d->rank, d->shape) * d->elem_size, pitch;
	if (rows_at_pitch(d->rank, d->shape, d->strides, &pitch)) {
		uint64_t row = d->shape[d->rank - 1];
		if (pitch == row)
			return ruda_client_read_one(
				c, (ruda_handle){d->handle.id, d->handle.offset, packed}, dst);
		return read_rows(c, d, row * d->elem_size, pitch * d->elem_size, span, dst);
	}
	struct flat_layout f;
	flatten(d, &f);
	if (device_gather_fits(c, d, &f, span))
		return read_gathered_on_device(c, d, &f, span, dst);
	return read_gathered_on_host(c, d, &f, span, dst);
}

ruda_status ruda_client_read_tensor(ruda_client *c, const ruda_copy_desc *descs, size_t count,
				    void *const *dst)
{
	if (!c || (count && (!descs || !dst)))
		return RUDA_ERROR_INVALID_ARGUMENT;
	ruda_copy_desc *in;
	ruda_status st = ruda__array_in((void **)&in, sizeof(*in), RUDA__MIN_COPY_DESC, descs,
					count);
	for (size_t i = 0; i < count && st == RUDA_OK; i++)
		st = read_tensor(c, &in[i], dst[i]);
	free(in);
	return st;
}
