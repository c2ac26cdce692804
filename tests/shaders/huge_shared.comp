#version 450
// Refused: 64 MiB of shared memory (lavapipe allows 32 KiB).
layout(local_size_x = 64) in;
layout(set = 0, binding = 0) buffer Out { float data[]; };
shared float s[16 * 1024 * 1024];
void main()
{
	uint i = gl_LocalInvocationIndex;
	s[i * 4096u] = data[i];
	barrier();
	data[i] = s[(i + 1u) % 64u * 4096u];
}
