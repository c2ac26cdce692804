#version 450
// Workgroup size, shared and private memory all set by specialization
// constants: fine with the defaults, refused with hostile values.
// data[i] += 1 (p[] holds zeros the compiler cannot fold away).
layout(local_size_x_id = 0, local_size_y_id = 1) in;
layout(constant_id = 2) const uint SHARED = 64u; // floats, doubled below
layout(constant_id = 3) const uint PRIVATE = 4u; // floats
layout(set = 0, binding = 0) buffer Data { float data[]; };
shared float s[SHARED * 2u];
void main()
{
	float p[PRIVATE];
	uint i = gl_GlobalInvocationID.x;
	for (uint k = 0u; k < PRIVATE; k++)
		p[k] = data[k] - data[k];
	s[gl_LocalInvocationIndex % SHARED] = data[i] + 1.0 + p[i % PRIVATE];
	barrier();
	data[i] = s[gl_LocalInvocationIndex % SHARED];
}
