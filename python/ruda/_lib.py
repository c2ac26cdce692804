"""ctypes declarations of libruda (<ruda/ruda.h>), the contract this package
follows. Every struct mirrors the header field for field; every function used
has its argtypes and restype declared, so ctypes converts and checks them.

The library is found, in order: $RUDA_LIBRARY (a path), the in-tree build
(build/libruda.so.1 beside python/ when this package runs from the source
tree), else the dynamic linker's normal lookup of "libruda.so.1" (an
installed libruda).
"""

import ctypes
import os
from ctypes import (POINTER, Structure, c_char, c_char_p, c_double, c_int, c_size_t,
                    c_uint8, c_uint16, c_uint32, c_uint64, c_void_p)

SONAME = "libruda.so.1"

PROTOCOL_VERSION = 1
MAX_RANK = 8
MAX_COOP_SHAPES = 32
MAX_HEAPS = 16


def _candidates():
    env = os.environ.get("RUDA_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    tree = os.path.join(os.path.dirname(os.path.dirname(here)), "build", SONAME)
    # only a source tree has python/ruda next to build/
    if os.path.basename(os.path.dirname(here)) == "python" and os.path.exists(tree):
        return [tree]
    return [SONAME]


def _load():
    names = _candidates()
    try:
        return ctypes.CDLL(names[0]), names[0]
    except OSError as e:
        raise ImportError(
            "ruda: cannot load %s (%s); set RUDA_LIBRARY to libruda.so.1's path, build "
            "the tree with `make`, or install libruda" % (names[0], e)) from None


lib, path = _load()

# ---- types ----------------------------------------------------------------

ruda_status = c_int
ruda_kernel = c_uint64
ruda_stream = c_uint32
ruda_profile_window = c_uint64
ruda_client_p = c_void_p
ruda_future_p = c_void_p


class _Sized(Structure):
    """A struct of ruda.h that may grow: it starts with uint32_t struct_size,
    set here to this layout's size as RUDA_<NAME>_INIT does in C."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.struct_size = ctypes.sizeof(self)


class ruda_handle(Structure):
    _fields_ = [("id", c_uint64), ("offset", c_uint64), ("size", c_uint64)]


class ruda_count(Structure):
    _fields_ = [("x", c_uint32), ("y", c_uint32), ("z", c_uint32)]


class ruda_device_id(Structure):
    _fields_ = [("type_id", c_uint16), ("index_id", c_uint32)]


class ruda_coop_matrix_shape(Structure):
    _fields_ = [("m", c_uint32), ("n", c_uint32), ("k", c_uint32),
                ("a", c_int), ("b", c_int), ("c", c_int), ("d", c_int)]


class ruda_features(_Sized):
    _fields_ = [("struct_size", c_uint32), ("elem_types", c_uint32), ("atomic_elem_types", c_uint32),
                ("subgroup_operations", c_uint32), ("coop_matrix_count", c_uint32),
                ("coop_matrix", ruda_coop_matrix_shape * MAX_COOP_SHAPES)]


class ruda_memory_heap(Structure):
    _fields_ = [("size", c_uint64), ("device_local", c_int)]


class ruda_device_properties(_Sized):
    _fields_ = [("struct_size", c_uint32), 
        ("index", c_uint32),
        ("name", c_char * 256),
        ("vendor_id", c_uint32),
        ("device_id", c_uint32),
        ("type", c_int),
        ("api_version", c_uint32),
        ("driver_version", c_uint32),
        ("pipeline_cache_uuid", c_uint8 * 16),
        ("max_buffer_size", c_uint64),
        ("max_storage_buffer_range", c_uint64),
        ("min_storage_buffer_offset_alignment", c_uint32),
        ("max_push_constants_size", c_uint32),
        ("max_bindings", c_uint32),
        ("max_workgroup_count", c_uint32 * 3),
        ("max_workgroup_size", c_uint32 * 3),
        ("max_workgroup_invocations", c_uint32),
        ("subgroup_size", c_uint32),
        ("device_local_bytes", c_uint64),
        ("host_import", c_int),
        ("id", ruda_device_id),
        ("physical_index", c_uint32),
        ("min_subgroup_size", c_uint32),
        ("max_subgroup_size", c_uint32),
        ("max_shared_memory", c_uint32),
        ("max_storage_buffers", c_uint32),
        ("timestamp_period_ps", c_uint32),
        ("spirv_version", c_uint32),
        ("memory_budget", c_int),
        ("heap_count", c_uint32),
        ("heaps", ruda_memory_heap * MAX_HEAPS),
        ("features", ruda_features),
    ]


class ruda_connect_options(_Sized):
    _fields_ = [("struct_size", c_uint32), 
        ("socket_path", c_char_p),
        ("client_name", c_char_p),
        ("device_index", c_uint32),
        ("use_device_id", c_int),
        ("device_id", ruda_device_id),
        ("priority", c_uint32),
        ("use_arena_fd", c_int),
        ("arena_fd", c_int),
        ("arena_size", c_uint64),
    ]


class ruda_memory_usage(_Sized):
    _fields_ = [("struct_size", c_uint32), ("allocations", c_uint64), ("bytes_in_use", c_uint64),
                ("bytes_padding", c_uint64), ("bytes_reserved", c_uint64),
                ("quota", c_uint64), ("uid_bytes", c_uint64), ("pages", c_uint64),
                ("device_bytes_reserved", c_uint64), ("device_pages", c_uint64)]


class ruda_layout_desc(_Sized):
    _fields_ = [("struct_size", c_uint32), ("strategy", c_int), ("rank", c_uint32),
                ("shape", c_uint64 * MAX_RANK), ("elem_size", c_uint64)]


class ruda_layout(_Sized):
    _fields_ = [("struct_size", c_uint32), ("handle", ruda_handle), ("rank", c_uint32),
                ("strides", c_uint64 * MAX_RANK)]


class ruda_copy_desc(_Sized):
    _fields_ = [("struct_size", c_uint32), ("handle", ruda_handle), ("rank", c_uint32),
                ("shape", c_uint64 * MAX_RANK), ("strides", c_uint64 * MAX_RANK),
                ("elem_size", c_uint64)]


class ruda_spec_constant(Structure):
    _fields_ = [("id", c_uint32), ("size", c_uint32), ("value", c_uint64)]


class ruda_kernel_desc(_Sized):
    _fields_ = [("struct_size", c_uint32), 
        ("spirv", POINTER(c_uint32)),
        ("spirv_size", c_size_t),
        ("entry_point", c_char_p),
        ("binding_count", c_uint32),
        ("push_constant_size", c_uint32),
        ("spec_constants", POINTER(ruda_spec_constant)),
        ("spec_constant_count", c_uint32),
    ]


class ruda_daemon_stats(_Sized):
    _fields_ = [("struct_size", c_uint32), ("sessions", c_uint32)] + [(n, c_uint64) for n in (
        "device_bytes", "device_buffers", "session_bytes", "session_buffers",
        "submissions_in_flight", "kernels_compiled", "pipelines", "kernel_hits",
        "compile_time_us", "modules", "cache_file_bytes", "session_gpu_time_ns",
        "session_launches")]


class ruda_device_utilization(_Sized):
    _fields_ = [("struct_size", c_uint32), ("recent", c_double), ("window_ns", c_uint64), ("busy_ns", c_uint64),
                ("uptime_ns", c_uint64), ("inflight", c_uint64), ("bytes", c_uint64),
                ("heap_count", c_uint32), ("heap_usage", c_uint64 * MAX_HEAPS),
                ("heap_budget", c_uint64 * MAX_HEAPS)]


# ---- functions ----------------------------------------------------------------

_C = ruda_client_p
_H = ruda_handle
_PH = POINTER(ruda_handle)
_VPP = POINTER(c_void_p)  # void *const *dst

_FUNCTIONS = {
    "ruda_strerror": (c_char_p, [ruda_status]),
    "ruda_client_connect": (ruda_status, [POINTER(ruda_connect_options), POINTER(_C)]),
    "ruda_client_close": (None, [_C]),
    "ruda_client_last_error": (c_size_t, [_C, c_char_p, c_size_t]),
    "ruda_client_priority": (c_uint32, [_C]),
    "ruda_client_name": (c_char_p, [_C]),
    "ruda_client_session_id": (c_uint64, [_C]),
    "ruda_client_properties": (ruda_status, [_C, POINTER(ruda_device_properties)]),
    "ruda_client_create": (ruda_status, [_C, c_void_p, c_size_t, _PH]),
    "ruda_client_empty": (ruda_status, [_C, c_size_t, _PH]),
    "ruda_client_try_empty": (ruda_status, [_C, c_size_t, _PH]),
    "ruda_client_memory_usage": (ruda_status, [_C, POINTER(ruda_memory_usage)]),
    "ruda_client_memory_cleanup": (ruda_status, [_C]),
    "ruda_client_write": (ruda_status, [_C, _H, c_uint64, c_void_p, c_size_t]),
    "ruda_client_read": (ruda_status, [_C, _PH, c_size_t, _VPP]),
    "ruda_client_read_one": (ruda_status, [_C, _H, c_void_p]),
    "ruda_client_release": (ruda_status, [_C, _H]),
    "ruda_client_create_tensor": (ruda_status, [_C, POINTER(ruda_layout_desc), c_void_p,
                                                POINTER(ruda_layout)]),
    "ruda_client_empty_tensor": (ruda_status, [_C, POINTER(ruda_layout_desc),
                                               POINTER(ruda_layout)]),
    "ruda_client_can_read_tensor": (c_int, [_C, c_uint32, POINTER(c_uint64),
                                            POINTER(c_uint64)]),
    "ruda_client_read_tensor": (ruda_status, [_C, POINTER(ruda_copy_desc), c_size_t, _VPP]),
    "ruda_client_read_async": (ruda_status, [_C, _PH, c_size_t, _VPP, POINTER(ruda_future_p)]),
    "ruda_client_read_tensor_async": (ruda_status, [_C, POINTER(ruda_copy_desc), c_size_t,
                                                    _VPP, POINTER(ruda_future_p)]),
    "ruda_future_poll": (c_int, [ruda_future_p]),
    "ruda_future_wait": (ruda_status, [ruda_future_p]),
    "ruda_client_kernel_register": (ruda_status, [_C, POINTER(ruda_kernel_desc),
                                                  POINTER(ruda_kernel)]),
    "ruda_client_kernel_release": (ruda_status, [_C, ruda_kernel]),
    "ruda_client_launch": (ruda_status, [_C, ruda_kernel, ruda_count, _PH, c_size_t,
                                         c_void_p, c_size_t]),
    "ruda_client_execution_stream": (ruda_stream, [_C]),
    "ruda_client_set_stream": (ruda_status, [_C, ruda_stream]),
    "ruda_client_flush": (ruda_status, [_C]),
    "ruda_client_sync": (ruda_status, [_C]),
    "ruda_client_check": (ruda_status, [_C, _PH, c_size_t]),
    "ruda_client_sync_buffers": (ruda_status, [_C, _PH, c_size_t]),
    "ruda_client_profile_start": (ruda_status, [_C, POINTER(ruda_profile_window)]),
    "ruda_client_profile_end": (ruda_status, [_C, ruda_profile_window, POINTER(c_uint64)]),
    "ruda_client_profile_abandon": (ruda_status, [_C, ruda_profile_window]),
    "ruda_client_exclusive_begin": (ruda_status, [_C, c_uint32]),
    "ruda_client_exclusive_end": (ruda_status, [_C]),
    "ruda_client_daemon_stats": (ruda_status, [_C, POINTER(ruda_daemon_stats)]),
    "ruda_client_utilization": (ruda_status, [_C, POINTER(ruda_device_utilization)]),
}

for _name, (_res, _args) in _FUNCTIONS.items():
    _f = getattr(lib, _name)
    _f.restype = _res
    _f.argtypes = _args
