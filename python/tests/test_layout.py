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
    # The structs that may grow start with uint32 struct_size (ruda.h's top
    # comment); checked against sizeof/offsetof of a C build of ruda.h.
    # struct_size, 4 uint32, 32 shapes of 28 bytes
    (_lib.ruda_features, 4 + 16 + 32 * 28, {"elem_types": 4, "coop_matrix": 20}),
    (_lib.ruda_memory_heap, 16, {"device_local": 8}),
    # struct_size 0, index 4, name[256] 8, ... uuid[16] 284, (pad)
    # max_buffer_size 304, count[3] 332, device_local_bytes 368, id 380,
    # physical_index 388 ... heap_count 420, heaps 424 (16 x 16),
    # features 680 (916, + 4 pad)
    (_lib.ruda_device_properties, 1600,
     {"index": 4, "name": 8, "pipeline_cache_uuid": 284, "max_buffer_size": 304,
      "max_workgroup_count": 332, "device_local_bytes": 368, "id": 380,
      "physical_index": 388, "heap_count": 420, "heaps": 424, "features": 680}),
    # struct_size (+ pad), two pointers 8, device_index 24, use_device_id 28,
    # device_id 32, priority 40, use_arena_fd 44, arena_fd 48, (pad) arena_size 56
    (_lib.ruda_connect_options, 64,
     {"socket_path": 8, "client_name": 16, "device_id": 32, "priority": 40, "arena_fd": 48,
      "arena_size": 56}),
    (_lib.ruda_memory_usage, 8 + 9 * 8, {"allocations": 8, "pages": 56, "device_pages": 72}),
    (_lib.ruda_layout_desc, 4 + 4 + 4 + 4 + 8 * 8 + 8,
     {"strategy": 4, "shape": 16, "elem_size": 80}),
    # struct_size (+ pad), handle 24, rank, (pad) strides
    (_lib.ruda_layout, 8 + 24 + 8 + 8 * 8, {"handle": 8, "rank": 32, "strides": 40}),
    (_lib.ruda_copy_desc, 8 + 24 + 8 + 64 + 64 + 8,
     {"handle": 8, "rank": 32, "shape": 40, "strides": 104, "elem_size": 168}),
    (_lib.ruda_spec_constant, 16, {"size": 4, "value": 8}),
    # struct_size (+ pad), spirv*, spirv_size, entry_point*, binding_count,
    # push_constant_size, spec_constants*, spec_constant_count (+ pad)
    (_lib.ruda_kernel_desc, 56,
     {"spirv": 8, "spirv_size": 16, "entry_point": 24, "binding_count": 32,
      "push_constant_size": 36, "spec_constants": 40, "spec_constant_count": 48}),
    # struct_size and sessions share the first 8 bytes
    (_lib.ruda_daemon_stats, 8 + 13 * 8,
     {"sessions": 4, "device_bytes": 8, "session_launches": 104}),
    # struct_size (+ pad), double, 5 uint64, heap_count (+ pad), two uint64[16]
    (_lib.ruda_device_utilization, 8 + 56 + 2 * 128,
     {"recent": 8, "heap_count": 56, "heap_usage": 64, "heap_budget": 192}),
]


@pytest.mark.parametrize("cls,size,offsets", LAYOUTS, ids=[c.__name__ for c, _, _ in LAYOUTS])
def test_struct_matches_header(cls, size, offsets):
    assert ctypes.sizeof(cls) == size
    if issubclass(cls, _lib._Sized):
        assert cls.struct_size.offset == 0
        assert cls().struct_size == size  # set as RUDA_<NAME>_INIT does
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
