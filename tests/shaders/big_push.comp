#version 450
// 64 bytes of push constants: refused when the kernel declares fewer.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { vec4 data[]; };
layout(push_constant) uniform Push { vec4 a; vec4 b; vec4 c; uint n; uint pad[3]; };
void main() { if (gl_GlobalInvocationID.x < n) data[gl_GlobalInvocationID.x] = a + b + c; }
