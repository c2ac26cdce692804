/*
 * The host side of a collective: `n` arrays reduced element by element into
 * the first, run in the thread pool over daemon host memory (the staging
 * every device copies into and out of).
 */
#include "exec/reduce.h"

#include <stdint.h>
#include <string.h>

#include <ruda/common.h>
#include <ruda/status.h>

static float half_to_float(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
	uint32_t bits;
	if (exp == 0) {
		if (!mant) {
			bits = sign;
		} else { /* subnormal: normalise */
			exp = 127 - 15 + 1;
			while (!(mant & 0x400u)) {
				mant <<= 1;
				exp--;
			}
			bits = sign | exp << 23 | (mant & 0x3ffu) << 13;
		}
	} else if (exp == 31) {
		bits = sign | 0x7f800000u | mant << 13;
	} else {
		bits = sign | (exp + 127 - 15) << 23 | mant << 13;
	}
	float f;
	memcpy(&f, &bits, 4);
	return f;
}

/* Round to nearest even, as the GPU's conversions do. */
static uint16_t float_to_half(float f)
{
	uint32_t x;
	memcpy(&x, &f, 4);
	uint32_t sign = (x >> 16) & 0x8000u;
	int32_t exp = (int32_t)((x >> 23) & 0xffu) - 127 + 15;
	uint32_t mant = x & 0x7fffffu;
	if (((x >> 23) & 0xffu) == 0xffu)
		return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00u);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		mant |= 0x800000u;
		uint32_t shift = (uint32_t)(14 - exp);
		uint32_t h = mant >> shift, rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
		if (rest > half || (rest == half && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = (uint32_t)exp << 10 | mant >> 13, rest = mant & 0x1fffu;
	if (rest > 0x1000u || (rest == 0x1000u && (h & 1)))
		h++; /* may carry into the exponent, up to infinity: correct */
	return (uint16_t)(sign | h);
}

#define COMBINE(op, a, b)                                                              \
	((op) == RUDA_REDUCE_PROD ? (a) * (b)                                          \
	 : (op) == RUDA_REDUCE_MAX ? ((a) > (b) ? (a) : (b))                           \
	 : (op) == RUDA_REDUCE_MIN ? ((a) < (b) ? (a) : (b))                           \
				   : (a) + (b))

/* Whole arrays at a time where the type allows (f32 every op; 32-bit
 * integers but for means): the same operations per element, in the same
 * order, as the general loop below, in loops the compiler vectorises. */
#define REDUCE_ARRAYS(T, acc, v, count, op)                                        \
	do {                                                                       \
		switch (op) {                                                      \
		case RUDA_REDUCE_PROD:                                             \
			for (uint64_t k = 0; k < (count); k++)                     \
				(acc)[k] = (T)((acc)[k] * (v)[k]);                 \
			break;                                                     \
		case RUDA_REDUCE_MAX:                                              \
			for (uint64_t k = 0; k < (count); k++)                     \
				(acc)[k] = (acc)[k] > (v)[k] ? (acc)[k] : (v)[k];  \
			break;                                                     \
		case RUDA_REDUCE_MIN:                                              \
			for (uint64_t k = 0; k < (count); k++)                     \
				(acc)[k] = (acc)[k] < (v)[k] ? (acc)[k] : (v)[k];  \
			break;                                                     \
		default:                                                           \
			for (uint64_t k = 0; k < (count); k++)                     \
				(acc)[k] = (T)((acc)[k] + (v)[k]);                 \
		}                                                                  \
	} while (0)

static int reduce_fast(uint8_t *base, uint64_t stride, uint32_t n, uint64_t begin, uint64_t end,
		       uint32_t elem, uint32_t op)
{
	uint64_t count = end - begin;
	if (elem == RUDA_ELEM_F32) {
		float *acc = (float *)base + begin;
		for (uint32_t j = 1; j < n; j++)
			REDUCE_ARRAYS(float, acc, (const float *)(base + j * stride) + begin, count,
				      op);
		if (op == RUDA_REDUCE_MEAN)
			for (uint64_t k = 0; k < count; k++)
				acc[k] = acc[k] / (float)n;
		return 1;
	}
	if ((elem != RUDA_ELEM_I32 && elem != RUDA_ELEM_U32) || op == RUDA_REDUCE_MEAN)
		return 0;
	if (elem == RUDA_ELEM_I32 && (op == RUDA_REDUCE_MAX || op == RUDA_REDUCE_MIN)) {
		int32_t *acc = (int32_t *)base + begin;
		for (uint32_t j = 1; j < n; j++)
			REDUCE_ARRAYS(int32_t, acc, (const int32_t *)(base + j * stride) + begin,
				      count, op);
		return 1;
	}
	/* u32 every op; i32 sums and products wrap as u32 */
	uint32_t *acc = (uint32_t *)base + begin;
	for (uint32_t j = 1; j < n; j++)
		REDUCE_ARRAYS(uint32_t, acc, (const uint32_t *)(base + j * stride) + begin, count,
			      op);
	return 1;
}

void ruda__collective_reduce(uint8_t *base, uint64_t stride, uint32_t n, uint64_t begin,
			     uint64_t end, uint32_t elem, uint32_t op)
{
	if (reduce_fast(base, stride, n, begin, end, elem, op))
		return;
	for (uint64_t i = begin; i < end; i++) {
		switch (elem) {
		case RUDA_ELEM_F32: {
			float acc;
			memcpy(&acc, base + i * 4, 4);
			for (uint32_t j = 1; j < n; j++) {
				float v;
				memcpy(&v, base + j * stride + i * 4, 4);
				acc = COMBINE(op, acc, v);
			}
			if (op == RUDA_REDUCE_MEAN)
				acc = acc / (float)n;
			memcpy(base + i * 4, &acc, 4);
			break;
		}
		case RUDA_ELEM_F16: {
			uint16_t h;
			memcpy(&h, base + i * 2, 2);
			float acc = half_to_float(h);
			for (uint32_t j = 1; j < n; j++) {
				memcpy(&h, base + j * stride + i * 2, 2);
				float v = half_to_float(h);
				acc = COMBINE(op, acc, v);
			}
			if (op == RUDA_REDUCE_MEAN)
				acc = acc / (float)n;
			h = float_to_half(acc);
			memcpy(base + i * 2, &h, 2);
			break;
		}
		case RUDA_ELEM_I32: {
			int32_t v0;
			memcpy(&v0, base + i * 4, 4);
			/* sums and products wrap, as on the GPU */
			uint32_t wrap = (uint32_t)v0;
			int32_t acc = v0;
			int64_t sum = v0;
			for (uint32_t j = 1; j < n; j++) {
				int32_t v;
				memcpy(&v, base + j * stride + i * 4, 4);
				if (op == RUDA_REDUCE_SUM)
					wrap += (uint32_t)v;
				else if (op == RUDA_REDUCE_PROD)
					wrap *= (uint32_t)v;
				else if (op == RUDA_REDUCE_MEAN)
					sum += v;
				else
					acc = COMBINE(op, acc, v);
			}
			if (op == RUDA_REDUCE_SUM || op == RUDA_REDUCE_PROD)
				memcpy(&acc, &wrap, 4);
			else if (op == RUDA_REDUCE_MEAN)
				acc = (int32_t)(sum / (int64_t)n);
			memcpy(base + i * 4, &acc, 4);
			break;
		}
		default: { /* RUDA_ELEM_U32 */
			uint32_t acc;
			memcpy(&acc, base + i * 4, 4);
			uint64_t sum = acc;
			for (uint32_t j = 1; j < n; j++) {
				uint32_t v;
				memcpy(&v, base + j * stride + i * 4, 4);
				sum += v;
				acc = COMBINE(op, acc, v);
			}
			if (op == RUDA_REDUCE_MEAN)
				acc = (uint32_t)(sum / n);
			memcpy(base + i * 4, &acc, 4);
			break;
		}
		}
	}
}
