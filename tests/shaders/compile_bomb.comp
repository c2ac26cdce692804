#version 450
// A compile bomb the checks at register cannot see: `n` is a
// specialization constant, so the module stays small and the loop stays a
// loop for spirv-opt; the driver, knowing n at pipeline creation, unrolls
// it as asked ([[unroll]]) into n copies of the body. n = 4 compiles in
// milliseconds on lavapipe, n = 10000 in seconds, n = 1000000 practically
// never.
#extension GL_EXT_control_flow_attributes : require
layout(local_size_x = 1) in;
layout(constant_id = 0) const uint n = 4u;
layout(std430, binding = 0) buffer Data { uint v[]; } data;
void main()
{
	uint x = data.v[0];
	[[unroll]] for (uint i = 0u; i < n; i++)
		x = x * (i + 3u) + (data.v[i & 7u] ^ x);
	data.v[0] = x;
}
