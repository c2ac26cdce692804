#version 450
// rudad's own copy between device-local buffers (exec/copy_kernel.c):
// dst[i] = src[i] for `count` 16-byte units, uvec4 loads and stores,
// grid-stride so that a dispatch of a bounded number of groups covers any
// slice. The byte offsets go in the bindings (push descriptors).
//
// Why a kernel for what vkCmdCopyBuffer does: on the H200 the driver runs
// vkCmdCopyBuffer on a copy engine, 119 GB/s for 1 GiB, where this loop
// copies about 2 TB/s (docs/design.md, "Several devices").
layout(local_size_x = 256) in;
layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uvec4 dst[]; };
layout(push_constant) uniform Push { uint count; };

void main()
{
	uint stride = gl_NumWorkGroups.x * gl_WorkGroupSize.x;
	for (uint i = gl_GlobalInvocationID.x; i < count; i += stride)
		dst[i] = src[i];
}
