#version 450
// Counts the workgroups that ran (word 0) and records the counts it saw
// (words 1..3): what a launch with dynamic counts dispatched.
layout(local_size_x = 1) in;
layout(set = 0, binding = 0) buffer Out { uint data[]; };
void main()
{
	atomicAdd(data[0], 1u);
	if (gl_WorkGroupID == uvec3(0)) {
		data[1] = gl_NumWorkGroups.x;
		data[2] = gl_NumWorkGroups.y;
		data[3] = gl_NumWorkGroups.z;
	}
}
