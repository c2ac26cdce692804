#version 450
// Refused by rudad: binding 0 is a uniform buffer, kernels bind storage buffers.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) uniform Params { uint n; };
layout(set = 0, binding = 1) buffer Out { uint data[]; };
void main() { if (gl_GlobalInvocationID.x < n) data[gl_GlobalInvocationID.x] = n; }
