#version 450
// rudad's own kernel for an all-reduce between logical devices of one
// physical device (requests/collective_peer.c): acc[i] = acc[i] op in[i],
// run once per other member in member order, so the result is the host
// path's ((a0 op a1) op a2)... bit for bit (exec/reduce.c). Element types
// f32, i32, u32 and ops sum, prod, max, min (RUDA_ELEM_*, RUDA_REDUCE_*);
// f16 and mean stay on the host. Floats: `precise` (no contraction nor
// reassociation); with KEEP_SUBNORMALS, subnormals kept as the host keeps
// them (DenormPreserve, for devices with shaderDenormPreserveFloat32; the
// build makes both, combine.c picks); max and min choose between the words
// themselves as the C expression a > b ? a : b does (a driver's fmax would
// differ for NaN and signed zeros).
#ifdef KEEP_SUBNORMALS
#extension GL_EXT_spirv_intrinsics : require
spirv_execution_mode(extensions = ["SPV_KHR_float_controls"], capabilities = [4464], 4459, 32);
#endif

layout(local_size_x = 256) in;
layout(set = 0, binding = 0) buffer Acc { uint acc[]; };
layout(set = 0, binding = 1) readonly buffer In { uint v[]; };
// count: elements of this slice; op: RUDA_REDUCE_*; type: RUDA_ELEM_*
layout(push_constant) uniform Push { uint count; uint op; uint type; };

const uint SUM = 0u, PROD = 1u, MAX = 2u, MIN = 3u;
const uint F32 = 0u, I32 = 1u, U32 = 2u;

void main()
{
	uint i = gl_GlobalInvocationID.x;
	if (i >= count)
		return;
	uint a = acc[i], b = v[i];
	uint r;
	if (type == F32) {
		float x = uintBitsToFloat(a), y = uintBitsToFloat(b);
		if (op == SUM) {
			precise float s = x + y;
			r = floatBitsToUint(s);
		} else if (op == PROD) {
			precise float p = x * y;
			r = floatBitsToUint(p);
		} else if (op == MAX) {
			r = x > y ? a : b;
		} else {
			r = x < y ? a : b;
		}
	} else if (type == I32 && (op == MAX || op == MIN)) {
		int x = int(a), y = int(b);
		r = op == MAX ? (x > y ? a : b) : (x < y ? a : b);
	} else {
		// u32 every op; i32 sums and products wrap as u32
		r = op == SUM ? a + b : op == PROD ? a * b : op == MAX ? (a > b ? a : b)
							  : (a < b ? a : b);
	}
	acc[i] = r;
}
