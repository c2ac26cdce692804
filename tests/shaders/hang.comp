#version 450
// A kernel that does not end in any useful time: it waits for a word no
// one writes (word 0 to become 12345), each turn doing 1024 atomic adds
// (word 2 counts them). The word is read atomically and every turn writes,
// so no compiler may hoist the load or drop the loop as free of side
// effects. Lavapipe ends any loop after 65535 turns of one invocation;
// with 1024 adds a turn that is still minutes on a CPU, forever on a GPU.
// Word 1 counts the workgroups that started.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) coherent buffer Data { uint data[]; };
#define A1 atomicAdd(data[2], 1u);
#define A4 A1 A1 A1 A1
#define A16 A4 A4 A4 A4
#define A64 A16 A16 A16 A16
#define A256 A64 A64 A64 A64
#define A1024 A256 A256 A256 A256
void main()
{
	atomicAdd(data[1], 1u);
	while (atomicOr(data[0], 0u) != 12345u) {
		A1024
	}
}
