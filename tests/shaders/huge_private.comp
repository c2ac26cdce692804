#version 450
// Refused: a 16 000-word private array per invocation, which stalls
// lavapipe's compiler for seconds.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Data { uint data[]; };
void main()
{
	float p[16000];
	for (uint k = 0u; k < 16000u; k++)
		p[k] = float(data[k]);
	data[0] = uint(p[data[1]]);
}
