#version 450
// value = value * 3 + k: launches of it give the right result only in the
// order they were made (the test's check that one stream stays in order).
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Value { uint value; } v;
layout(push_constant) uniform Push { uint k; } p;

void main()
{
	v.value = v.value * 3u + p.k;
}
