#version 450
// out[i] = a[i] + b[i] for i < n (float32).
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer A { float a[]; };
layout(set = 0, binding = 1) readonly buffer B { float b[]; };
layout(set = 0, binding = 2) writeonly buffer Out { float result[]; };
layout(push_constant) uniform Push { uint n; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
		result[i] = a[i] + b[i];
}
