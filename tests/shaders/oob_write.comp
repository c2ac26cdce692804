#version 450
// Writes `count` words from index `first` whatever the binding's size:
// checked launches must keep the writes inside the binding.
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { uint data[]; };
layout(push_constant) uniform Push { uint first; uint count; uint value; };
void main()
{
	uint i = gl_GlobalInvocationID.x;
	if (i < count)
		data[first + i] = value;
}
