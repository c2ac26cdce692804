#version 450
// rudad's own kernel for dynamic counts: copy the three workgroup counts a
// client's buffer holds into the daemon's indirect buffer, each clamped to
// the device's limit, so that no count read from a client can exceed it.
// A product of the clamped counts that reaches 2^32 dispatches nothing, as
// a static Launch of it is refused: drivers count workgroups in 32 bits
// (lavapipe ran 65535^3 as 196 607).
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) readonly buffer Counts { uint counts[]; };
layout(set = 0, binding = 1) writeonly buffer Indirect { uint dispatch[3]; };
layout(push_constant) uniform Push { uint first; uint max_x; uint max_y; uint max_z; };
void main()
{
	uint x = min(counts[first], max_x);
	uint y = min(counts[first + 1], max_y);
	uint z = min(counts[first + 2], max_z);
	uint hi, xy, hi2, xyz;
	umulExtended(x, y, hi, xy);
	umulExtended(xy, z, hi2, xyz);
	// x*y over 32 bits with z == 0 is a no-op anyway: zeroing changes nothing
	bool over = hi != 0u || hi2 != 0u;
	dispatch[0] = over ? 0u : x;
	dispatch[1] = over ? 0u : y;
	dispatch[2] = over ? 0u : z;
}
