#version 450
// rudad's own kernel for an all-reduce between logical devices of one
// physical device (requests/collective_peer.c): acc[i] = acc[i] op in[i],
// run once per other member in member order, so the result is the host
// path's ((a0 op a1) op a2)... bit for bit (exec/reduce.c). Element types
// f32, i32, u32 and ops sum, prod, max, min (RUDA_ELEM_*, RUDA_REDUCE_*);
// f16 and mean stay on the host.
//
// The host keeps f32 subnormals; a device without
// shaderDenormPreserveFloat32 may flush them (read a subnormal operand as
// zero, write a subnormal result as zero). Sums, maxima and minima are the
// host's on either: no float operation of theirs has a subnormal operand or
// result where it would change the answer. Products are the host's only
// with KEEP_SUBNORMALS (DenormPreserve, for devices that have it). The
// build makes this kernel three times and combine.c picks: with
// KEEP_SUBNORMALS, without, and, for tests, with TEST_FLUSH, where every
// float operation flushes as such a device may, so that devices that keep
// subnormals (lavapipe does, though it does not say so) test the rest.
#ifdef KEEP_SUBNORMALS
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 32);
#endif

layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer Acc { uint acc[]; };
layout(set = 0, binding = 1) readonly buffer In { uint v[]; };
// count: elements of this slice; op: RUDA_REDUCE_*; type: RUDA_ELEM_*
layout(push_constant) uniform Push { uint count; uint op; uint type; };

const uint SUM = 0u, PROD = 1u, MAX = 2u, MIN = 3u;
const uint F32 = 0u, I32 = 1u, U32 = 2u;

#ifdef TEST_FLUSH
float ftz(float f)
{
	uint u = floatBitsToUint(f);
	return (u & 0x7f800000u) == 0u ? uintBitsToFloat(u & 0x80000000u) : f;
}
#define FADD(x, y) ftz(ftz(x) + ftz(y))
#define FMUL(x, y) ftz(ftz(x) * ftz(y))
#else
#define FADD(x, y) ((x) + (y))
#define FMUL(x, y) ((x) * (y))
#endif

// The value of a, less than 2^-100, times 2^64: exact, and a normal or a
// zero made without a float operation on a subnormal.
float times_2_64(uint a)
{
	if ((a & 0x7f800000u) != 0u)
		return uintBitsToFloat(a + (64u << 23));
	// a subnormal m 2^-149 is float(m) 2^-85, both factors normal
	precise float f = FMUL(float(a & 0x7fffffu), uintBitsToFloat(0x15000000u));
	return uintBitsToFloat(floatBitsToUint(f) | (a & 0x80000000u));
}

// The words of x + y, rounded as the host rounds it, subnormals kept.
uint sum_f32(uint a, uint b)
{
	// One of 2^-100 or more (inf, NaN): a subnormal beside it is less than
	// half its ulp (2^-124), so a flushed one changes nothing; and a sum of
	// normals is then zero or at least 2^-124, never subnormal.
	if (max(a >> 23 & 0xffu, b >> 23 & 0xffu) >= 27u) {
		precise float s = FADD(uintBitsToFloat(a), uintBitsToFloat(b));
		return floatBitsToUint(s);
	}
	// Both less: the same sum 2^64 times larger is one of normals or zeros,
	// rounded where the host rounds (a subnormal result is exact, a
	// multiple of 2^-85 here), zero's sign as the host's.
	precise float s = FADD(times_2_64(a), times_2_64(b));
	uint w = floatBitsToUint(s);
	if ((w >> 23 & 0xffu) >= 65u) // 2^-62 or more: still normal 2^64 smaller
		return w - (64u << 23);
	// k 2^-85 with k < 2^23: the subnormal k 2^-149, or a zero
	precise float k = FMUL(abs(s), uintBitsToFloat(0x6a000000u));
	return (w & 0x80000000u) | uint(k);
}

// Words in the order of their floats as unsigned integers (-0 just below +0).
uint order_key(uint a)
{
	return (a & 0x80000000u) != 0u ? ~a : a | 0x80000000u;
}

// x > y of the floats the words are, as the host compares them: false for
// a NaN, and -0 == +0. On the words: a flushing device would compare a
// subnormal as a zero.
bool greater_f32(uint a, uint b)
{
	uint ma = a & 0x7fffffffu, mb = b & 0x7fffffffu;
	if (ma > 0x7f800000u || mb > 0x7f800000u || (ma | mb) == 0u)
		return false;
	return order_key(a) > order_key(b);
}

void main()
{
	uint i = gl_GlobalInvocationID.x;
	if (i >= count)
		return;
	uint a = acc[i], b = v[i];
	uint r;
	if (type == F32) {
		// max and min choose between the words themselves as the C
		// expression x > y ? a : b does (a driver's fmax would differ for
		// NaN and signed zeros)
		if (op == SUM) {
			r = sum_f32(a, b);
		} else if (op == PROD) {
			precise float p = FMUL(uintBitsToFloat(a), uintBitsToFloat(b));
			r = floatBitsToUint(p);
		} else if (op == MAX) {
			r = greater_f32(a, b) ? a : b;
		} else {
			r = greater_f32(b, a) ? a : b;
		}
	} else if (type == I32 && (op == MAX || op == MIN)) {
		int x = int(a), y = int(b);
		r = op == MAX ? (x > y ? a : b) : (x < y ? a : b);
	} else {
		// u32 every op; i32 sums and products wrap as u32
		r = op == SUM ? a + b : op == PROD ? a * b : op == MAX ? (a > b ? a : b)
							  : (a < b ? a : b);
	}
	acc[i] = r;
}
