#version 450
// One pass of a reduction: each workgroup reduces its share of `count`
// inputs to one output. Run it on the data, then on the partial results with
// one workgroup, to reduce everything to out[0]; `finalize` divides by
// `divisor` on the last pass of a mean.
//
// Built once per element type (T_F32, T_I32, T_U32, T_F16) and operation
// (OP 0 sum, 1 prod, 2 max, 3 min, 4 mean) by the Makefile.
#if defined(T_F16)
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#define T float16_t
#define ACC float
#define LOWEST (-65504.0)
#define HIGHEST 65504.0
#elif defined(T_F32)
#define T float
#define ACC float
#define LOWEST (-3.402823466e38)
#define HIGHEST 3.402823466e38
#elif defined(T_I32)
#define T int
#define ACC int
#define LOWEST (-2147483647 - 1)
#define HIGHEST 2147483647
#else
#define T uint
#define ACC uint
#define LOWEST 0u
#define HIGHEST 0xffffffffu
#endif

#define GROUP 256
layout(local_size_x = GROUP) in;
layout(set = 0, binding = 0) readonly buffer In { T values[]; };
layout(set = 0, binding = 1) writeonly buffer Out { T partial[]; };
layout(push_constant) uniform Push {
	uint count;
	uint finalize;
	float divisor;
};

shared ACC scratch[GROUP];

ACC identity()
{
#if OP == 1
	return ACC(1);
#elif OP == 2
	return ACC(LOWEST);
#elif OP == 3
	return ACC(HIGHEST);
#else
	return ACC(0);
#endif
}

ACC combine(ACC a, ACC b)
{
#if OP == 1
	return a * b;
#elif OP == 2
	return max(a, b);
#elif OP == 3
	return min(a, b);
#else
	return a + b;
#endif
}

void main()
{
	// each workgroup takes a contiguous slice
	uint groups = gl_NumWorkGroups.x;
	uint per_group = (count + groups - 1) / groups;
	uint begin = gl_WorkGroupID.x * per_group;
	uint end = min(begin + per_group, count);
	ACC acc = identity();
	for (uint i = begin + gl_LocalInvocationID.x; i < end; i += GROUP)
		acc = combine(acc, ACC(values[i]));
	scratch[gl_LocalInvocationID.x] = acc;
	barrier();
	for (uint width = GROUP / 2; width > 0; width /= 2) {
		if (gl_LocalInvocationID.x < width)
			scratch[gl_LocalInvocationID.x] = combine(
				scratch[gl_LocalInvocationID.x],
				scratch[gl_LocalInvocationID.x + width]);
		barrier();
	}
	if (gl_LocalInvocationID.x == 0) {
		ACC result = scratch[0];
#if OP == 4
		if (finalize != 0)
			result = ACC(float(result) / divisor);
#endif
		partial[gl_WorkGroupID.x] = T(result);
	}
}
