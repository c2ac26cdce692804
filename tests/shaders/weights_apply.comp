#version 450
// out[i] = w[i] * x[i] + out[i] for i < n (uint32, wrapping): the weights
// and the input are `readonly`, the output is read and written.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) readonly buffer W { uint w[]; };
layout(set = 0, binding = 1) readonly buffer X { uint x[]; };
layout(set = 0, binding = 2) buffer Out { uint o[]; };
layout(push_constant) uniform Push { uint n; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
		o[i] = w[i] * x[i] + o[i];
}
