"""The ctypes structs against the layout of <ruda/ruda.h> (x86-64 / LP64
alignment), worked out by hand from the header: no C compiler needed."""

import ctypes

import pytest

import ruda
from ruda import _lib

# (struct, size, {field: offset}) with the arithmetic from ruda.h
LAYOUTS = [
    (_lib.ruda_handle, 3 * 8, {"id": 0, "offset": 8, "size": 16}),
    (_lib.ruda_count, 3 * 4, {"z": 8}),
    # uint16 type_id, 2 bytes of padding, uint32 index_id
    (_lib.ruda_device_id, 8, {"index_id": 4}),
    (_lib.ruda_coop_matrix_shape, 3 * 4 + 4 * 4, {"d": 24}),
    # 4 uint32, 32 shapes of 28 bytes
    (_lib.ruda_features, 16 + 32 * 28, {"coop_matrix": 16}),
    (_lib.ruda_memory_heap, 16, {"device_local": 8}),
    # index 0, name[256] 4, vendor 260, device 264, type 268, api 272,
    # driver 276, uuid[16] 280, max_buffer_size 296, range 304, align 312,
    # push 316, bindings 320, count[3] 324, size[3] 336, invocations 348,
    # subgroup 352, (pad) device_local_bytes 360, host_import 368, id 372,
    # physical_index 380 ... heap_count 412, heaps 416 (16 x 16),
    # features 672 (912)
    (_lib.ruda_device_properties, 672 + 912,
     {"name": 4, "pipeline_cache_uuid": 280, "max_buffer_size": 296,
      "max_workgroup_count": 324, "device_local_bytes": 360, "id": 372,
      "physical_index": 380, "heap_count": 412, "heaps": 416, "features": 672}),
    # two pointers, device_index 16, use_device_id 20, device_id 24,
    # priority 32, use_arena_fd 36, arena_fd 40, (pad) arena_size 48
    (_lib.ruda_connect_options, 56,
     {"client_name": 8, "device_id": 24, "priority": 32, "arena_fd": 40, "arena_size": 48}),
    (_lib.ruda_memory_usage, 9 * 8, {"pages": 48, "device_pages": 64}),
    (_lib.ruda_layout_desc, 4 + 4 + 8 * 8 + 8, {"shape": 8, "elem_size": 72}),
    # handle 24, rank, (pad) strides
    (_lib.ruda_layout, 24 + 8 + 8 * 8, {"rank": 24, "strides": 32}),
    (_lib.ruda_copy_desc, 24 + 8 + 64 + 64 + 8,
     {"rank": 24, "shape": 32, "strides": 96, "elem_size": 160}),
    (_lib.ruda_spec_constant, 16, {"size": 4, "value": 8}),
    # spirv*, spirv_size, entry_point*, binding_count, push_constant_size,
    # spec_constants*, spec_constant_count (+ pad)
    (_lib.ruda_kernel_desc, 48,
     {"spirv_size": 8, "entry_point": 16, "binding_count": 24, "push_constant_size": 28,
      "spec_constants": 32, "spec_constant_count": 40}),
    (_lib.ruda_daemon_stats, 8 + 13 * 8, {"device_bytes": 8, "session_launches": 104}),
    # double, 5 uint64, heap_count (+ pad), two uint64[16]
    (_lib.ruda_device_utilization, 56 + 2 * 128,
     {"heap_count": 48, "heap_usage": 56, "heap_budget": 184}),
]


@pytest.mark.parametrize("cls,size,offsets", LAYOUTS, ids=[c.__name__ for c, _, _ in LAYOUTS])
def test_struct_matches_header(cls, size, offsets):
    assert ctypes.sizeof(cls) == size
    for field, off in offsets.items():
        assert getattr(cls, field).offset == off, field


def test_every_function_is_declared():
    # an undeclared restype would truncate pointers and 64-bit ids to int
    for name in _lib._FUNCTIONS:
        f = getattr(_lib.lib, name)
        assert f.argtypes is not None, name
    assert _lib.lib.ruda_client_session_id.restype is ctypes.c_uint64


def test_status_classes():
    assert ruda.strerror(0)
    for st in ruda.Status:
        if st == ruda.Status.OK:
            continue
        cls = ruda.error_class(st)
        assert cls is not ruda.Error and issubclass(cls, ruda.Error), st
        e = cls(st, "why")
        assert e.status == st and e.message == "why" and st.name in str(e)
    assert ruda.error_class(ruda.Status.TIMEOUT) is ruda.Timeout
    assert ruda.error_class(ruda.Status.BUSY) is ruda.Busy
    assert ruda.error_class(99) is ruda.Error
    assert len({ruda.error_class(s) for s in ruda.Status if s}) == len(ruda.Status) - 1
    assert issubclass(ruda.ClosedError, ruda.Disconnected)
    assert issubclass(ruda.ClosedError, ValueError)


def test_pack_values():
    assert ruda.pack_values([7]) == (7).to_bytes(4, "little")
    assert ruda.pack_values([-1]) == b"\xff" * 4
    assert ruda.pack_values([1.5]) == bytes.fromhex("0000c03f")
    # a u8 then an f64: the f64 is aligned to 8
    import numpy as np
    b = ruda.pack_values([np.uint8(1), np.float64(2.0)])
    assert len(b) == 16 and b[0] == 1 and b[8:] == np.float64(2.0).tobytes()
    with pytest.raises(TypeError):
        ruda.pack_values(["x"])
    with pytest.raises(ValueError):
        ruda.pack_values([1 << 70])
