#version 450
// Fills with a specialization constant: one module, several pipelines.
layout(local_size_x = 64) in;
layout(constant_id = 0) const uint VALUE = 1u;
layout(set = 0, binding = 0) buffer Out { uint data[]; };
layout(push_constant) uniform Push { uint count; };
void main() { if (gl_GlobalInvocationID.x < count) data[gl_GlobalInvocationID.x] = VALUE; }
