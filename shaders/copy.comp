#version 450
// dst[i] = src[i] for `count` 16-byte units: the bulk copy (uvec4 loads and
// stores, grid-stride). Byte offsets go in the bindings.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint count; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < count; i += stride)
		dst[i] = src[i];
}
