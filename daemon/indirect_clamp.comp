#version 450
// rudad's own kernel for dynamic counts: copy the three workgroup counts a
// client's buffer holds into the daemon's indirect buffer, each clamped to
// the device's limit, so that no count read from a client can exceed it.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) readonly buffer Counts { uint counts[]; };
layout(set = 0, binding = 1) writeonly buffer Indirect { uint dispatch[3]; };
layout(push_constant) uniform Push { uint first; uint max_x; uint max_y; uint max_z; };
void main()
{
	dispatch[0] = min(counts[first], max_x);
	dispatch[1] = min(counts[first + 1], max_y);
	dispatch[2] = min(counts[first + 2], max_z);
}
