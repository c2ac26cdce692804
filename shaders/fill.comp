#version 450
// Fill `count` 32-bit words of a buffer with `value`.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) writeonly buffer Out { uint data[]; };
layout(push_constant) uniform Push { uint value; uint count; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < count; i += stride)
		data[i] = value;
}
