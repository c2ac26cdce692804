#version 450
// y[i] = alpha * x[i] + y[i] for i < n (float32), in place.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer X { float x[]; };
layout(set = 0, binding = 1) buffer Y { float y[]; };
layout(push_constant) uniform Push { float alpha; uint n; };
void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < n; i += stride)
		y[i] = alpha * x[i] + y[i];
}
