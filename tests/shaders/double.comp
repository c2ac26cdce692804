#version 450
// Needs the Float64 capability: refused on a device without shaderFloat64.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Data { double values[]; };
void main() { values[gl_GlobalInvocationID.x] *= 2.0lf; }
