#version 450
// dst[i] = src[i] for `count` 32-bit words (tails, and unaligned sizes).
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint count; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < count; i += stride)
		dst[i] = src[i];
}
