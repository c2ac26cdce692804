#version 450
// One invocation doing `turns` x 256 atomic adds to count.adds: a kernel
// whose length a test chooses, longer than spin.comp on lavapipe (which
// ends any loop after 65535 turns); no compiler may drop the adds, and a
// body of 256 still compiles in about a second there. Counts its launches.
layout(local_size_x = 1) in;
layout(std430, binding = 0) coherent buffer Count { uint launches; uint adds; } count;
layout(push_constant) uniform Push { uint turns; } p;
#define A1 atomicAdd(count.adds, 1u);
#define A4 A1 A1 A1 A1
#define A16 A4 A4 A4 A4
#define A64 A16 A16 A16 A16
#define A256 A64 A64 A64 A64

void main()
{
	atomicAdd(count.launches, 1u);
	for (uint i = 0u; i < p.turns; i++) {
		A256
	}
}
