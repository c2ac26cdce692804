#version 450
// One workgroup of 64 invocations that spins `iterations` steps of an LCG
// (a kernel whose length the bench chooses), writes each lane's value and
// counts itself, so the bench can check every launch ran. The steps go 16
// to an iteration: llvmpipe (lavapipe) stops a loop after 65535 iterations,
// counted over the whole kernel, which would cut a long one short there.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Out { uint v[]; } result;
layout(std430, binding = 1) buffer Count { uint launches; } count;
layout(push_constant) uniform Push { uint iterations; } p;

void main()
{
	uint x = gl_LocalInvocationID.x + 1u;
	uint i = 0u;
	for (; i + 16u <= p.iterations; i += 16u)
		for (uint j = 0u; j < 16u; j++) /* unrolled: no iterations of its own */
			x = x * 1664525u + 1013904223u;
	for (; i < p.iterations; i++)
		x = x * 1664525u + 1013904223u;
	result.v[gl_LocalInvocationID.x] = x;
	if (gl_LocalInvocationID.x == 0u)
		atomicAdd(count.launches, 1u);
}
