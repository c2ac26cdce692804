#version 450
// Runs for a long time (`rounds` dependent steps per invocation): a
// submission that outlasts a short --submission-timeout.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { uint data[]; };
layout(push_constant) uniform Push { uint rounds; };
void main()
{
	uint x = gl_GlobalInvocationID.x;
	for (uint i = 0; i < rounds; i++)
		x = x * 1664525u + 1013904223u;
	data[gl_GlobalInvocationID.x] = x;
}
