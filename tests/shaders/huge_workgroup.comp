#version 450
// Refused: 1024x1024x64 invocations per workgroup, far over any device's
// maxComputeWorkGroupInvocations (each dimension alone is within GLSL's).
layout(local_size_x = 1024, local_size_y = 1024, local_size_z = 64) in;
layout(set = 0, binding = 0) buffer Out { uint data[]; };
void main() { data[gl_LocalInvocationIndex] = 1u; }
