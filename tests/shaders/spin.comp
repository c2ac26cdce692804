#version 450
// One workgroup of 64 invocations that spins `iterations` steps of an LCG
// (a kernel whose length the bench chooses), writes each lane's value and
// counts itself, so the bench can check every launch ran.
layout(local_size_x = 64) in;
layout(std430, binding = 0) buffer Out { uint v[]; } result;
layout(std430, binding = 1) buffer Count { uint launches; } count;
layout(push_constant) uniform Push { uint iterations; } p;

void main()
{
	uint x = gl_LocalInvocationID.x + 1u;
	for (uint i = 0u; i < p.iterations; i++)
		x = x * 1664525u + 1013904223u;
	result.v[gl_LocalInvocationID.x] = x;
	if (gl_LocalInvocationID.x == 0u)
		atomicAdd(count.launches, 1u);
}
