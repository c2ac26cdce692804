#version 450
// One workgroup of 64 invocations that spins `iterations` steps of an LCG
// (a kernel whose length the bench chooses), writes each lane's value and
// counts itself, so the bench can check every launch ran. The steps go 64
// to an iteration, written out: llvmpipe (lavapipe) stops a loop after
// 65535 iterations, counted over the whole kernel (nested loops too), which
// would cut a long one short there (the bench's calibration doubles up to
// 2^20 steps and more on a slow CPU).
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Out { uint v[]; } result;
layout(std430, binding = 1) buffer Count { uint launches; } count;
layout(push_constant) uniform Push { uint iterations; } p;

#define STEP x = x * 1664525u + 1013904223u;
#define STEP8 STEP STEP STEP STEP STEP STEP STEP STEP
#define STEP64 STEP8 STEP8 STEP8 STEP8 STEP8 STEP8 STEP8 STEP8

void main()
{
	uint x = gl_LocalInvocationID.x + 1u;
	uint i = 0u;
	for (; i + 64u <= p.iterations; i += 64u) {
		STEP64
	}
	for (; i < p.iterations; i++)
		STEP
	result.v[gl_LocalInvocationID.x] = x;
	if (gl_LocalInvocationID.x == 0u)
		atomicAdd(count.launches, 1u);
}
