#version 450
// Strided gather: packs a tensor of up to 4 dimensions, described by its
// shape and strides (in elements), into contiguous order. Elements are
// `elem_words` 32-bit words (1 to 4). Used to read tensors whose layout
// cannot be copied directly.
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uint src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push {
	uvec4 shape;   // unused dimensions are 1
	uvec4 strides; // elements; outermost first
	uint count;    // elements in all
	uint elem_words;
};
void main()
{
	uint grid = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < count; i += grid) {
		uint rest = i, offset = 0;
		for (int d = 3; d >= 0; d--) {
			offset += (rest % shape[d]) * strides[d];
			rest /= shape[d];
		}
		for (uint w = 0; w < elem_words; w++)
			dst[i * elem_words + w] = src[offset * elem_words + w];
	}
}
