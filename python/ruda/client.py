"""Client, Buffer, Tensor, Kernel, Future: libruda's calls over ctypes.

Arguments are checked here before libruda is called (TypeError for a wrong
kind of value, ValueError for a wrong size, shape or owner); what only the
daemon can judge comes back as a ruda.Error subclass with its explanation.
"""

import contextlib
import ctypes
import dataclasses
import math
import numbers
import os
import struct
import sys
import threading
import time

import numpy as np

from . import _lib
from .errors import ClosedError, Status, make_error

_L = _lib.lib

LAYOUTS = {"contiguous": 0, "optimized": 1}
MAX_PUSH_BYTES = 256


def strerror(status):
    """ruda_strerror: the static description of a status."""
    return _L.ruda_strerror(int(status)).decode()


def _raise(status, client_ptr=None):
    buf = ctypes.create_string_buffer(512)
    _L.ruda_client_last_error(client_ptr, buf, len(buf))
    message = buf.value.decode(errors="replace") or strerror(status)
    raise make_error(status, message)


# ---- argument checks ------------------------------------------------------------


def _dtype(dtype):
    try:
        dt = np.dtype(dtype)
    except TypeError as e:
        raise TypeError("not a numpy dtype: %r (%s)" % (dtype, e)) from None
    if dt.hasobject:
        raise TypeError("dtype %s holds Python objects, not bytes" % dt)
    if dt.itemsize == 0:
        raise TypeError("dtype %s has no size" % dt)
    return dt


def _int(value, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError("%s must be an integer, not %s" % (what, type(value).__name__))
    value = int(value)
    if value < 0:
        raise ValueError("%s must not be negative (%d)" % (what, value))
    return value


def _shape(shape, what="shape"):
    if isinstance(shape, numbers.Integral) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise TypeError("%s must be an integer or a tuple of integers, not %s"
                        % (what, type(shape).__name__))
    return tuple(_int(d, what) for d in shape)


def _host_array(data):
    """The C-contiguous bytes of a numpy array, numpy scalar or bytes-like."""
    if isinstance(data, (np.ndarray, np.generic)):
        arr = np.ascontiguousarray(data)
        if arr.dtype.hasobject:
            raise TypeError("an array of Python objects has no bytes to send")
        return arr
    if isinstance(data, (bytes, bytearray, memoryview)):
        return np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    raise TypeError("expected a numpy array or bytes, not %s (make one with np.asarray "
                    "and the dtype the kernel expects)" % type(data).__name__)


def _ptr(arr):
    return ctypes.c_void_p(arr.ctypes.data)


# ---- packing push constants and specialization constants -------------------------

_SCALAR_TYPES = (numbers.Number, np.generic)


def _default_scalar(value):
    """The bytes of a Python value as a kernel most likely declares it."""
    if isinstance(value, np.generic):
        dt = value.dtype
        if dt.kind not in "biuf" or dt.itemsize not in (1, 2, 4, 8):
            raise TypeError("cannot pack a %s" % dt)
        return value.astype(dt.newbyteorder("<")).tobytes()
    if isinstance(value, bool):
        return struct.pack("<I", int(value))
    if isinstance(value, numbers.Integral):
        value = int(value)
        if 0 <= value < 1 << 32:
            return struct.pack("<I", value)
        if -(1 << 31) <= value < 0:
            return struct.pack("<i", value)
        if 0 <= value < 1 << 64:
            return struct.pack("<Q", value)
        if -(1 << 63) <= value < 0:
            return struct.pack("<q", value)
        raise ValueError("%d does not fit in 64 bits" % value)
    if isinstance(value, numbers.Real):
        return struct.pack("<f", float(value))
    raise TypeError("cannot pack a %s; pass bytes, a numpy array or scalar, an int or a "
                    "float" % type(value).__name__)


def pack_values(values):
    """Pack Python values one after another, each aligned to its own size
    (the std430 layout of scalar members): int -> u32 (i32 when negative;
    64 bits when it does not fit in 32), float -> f32, bool -> u32, a numpy
    scalar -> its own type. Returns bytes padded to a multiple of 4."""
    out = bytearray()
    for v in values:
        b = _default_scalar(v)
        out += bytes(-len(out) % len(b))
        out += b
    out += bytes(-len(out) % 4)
    return bytes(out)


def _push_bytes(push, fmt):
    if push is None:
        return b""
    if isinstance(push, (bytes, bytearray, memoryview)):
        return bytes(memoryview(push).cast("B"))
    if isinstance(push, np.ndarray):
        return _host_array(push).tobytes()
    if fmt is not None:
        values = push if isinstance(push, (tuple, list)) else (push,)
        try:
            return struct.pack(fmt, *values)
        except struct.error as e:
            raise ValueError("push constants %r do not match the kernel's format %r: %s"
                             % (push, fmt, e)) from None
    if isinstance(push, (tuple, list)):
        return pack_values(push)
    if isinstance(push, _SCALAR_TYPES):
        return pack_values((push,))
    raise TypeError("push constants must be bytes, a numpy array, a scalar or a tuple of "
                    "scalars, not %s" % type(push).__name__)


def _spec_constant(cid, value):
    cid = _int(cid, "specialization constant id")
    if cid >= 1 << 32:
        raise ValueError("specialization constant id %d does not fit in 32 bits" % cid)
    if isinstance(value, tuple):
        if len(value) != 2 or not isinstance(value[1], str):
            raise TypeError("a specialization constant with a format is (value, 'f'), "
                            "not %r" % (value,))
        try:
            raw = struct.pack("<" + value[1], value[0])
        except struct.error as e:
            raise ValueError("specialization constant %d: %s" % (cid, e)) from None
    elif isinstance(value, (bytes, bytearray)):
        raw = bytes(value)
    elif isinstance(value, _SCALAR_TYPES):
        raw = _default_scalar(value)
    else:
        raise TypeError("specialization constant %d: cannot pack a %s"
                        % (cid, type(value).__name__))
    if len(raw) not in (4, 8):
        raise ValueError("specialization constant %d is %d bytes; SPIR-V's are 4 or 8 "
                         "(bools are 4)" % (cid, len(raw)))
    return _lib.ruda_spec_constant(cid, len(raw), int.from_bytes(raw.ljust(8, b"\0"), "little"))


def _spirv_bytes(spirv):
    if isinstance(spirv, (str, os.PathLike)):
        with open(spirv, "rb") as f:
            return f.read()
    if isinstance(spirv, np.ndarray):
        return np.ascontiguousarray(spirv).tobytes()
    if isinstance(spirv, (bytes, bytearray, memoryview)):
        return bytes(memoryview(spirv).cast("B"))
    raise TypeError("SPIR-V must be bytes, a numpy array or a file path, not %s"
                    % type(spirv).__name__)


def _struct_dict(s):
    out = {}
    for name, ctype in s._fields_:
        if name == "struct_size":  # the ABI's, not the device's
            continue
        v = getattr(s, name)
        if isinstance(v, bytes):
            v = v.decode(errors="replace")
        elif isinstance(v, ctypes.Structure):
            v = _struct_dict(v)
        elif isinstance(v, ctypes.Array):
            v = [_struct_dict(x) if isinstance(x, ctypes.Structure) else x for x in v]
        out[name] = v
    return out


# ---- value types -----------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class MemoryUsage:
    """ruda_memory_usage: allocator accounting (bytes). This client's own,
    but uid_bytes (its user's) and device_* (the whole device's)."""
    allocations: int     # this client's buffers
    bytes_in_use: int    # bytes they asked for
    bytes_padding: int   # reserved for them beyond that
    bytes_reserved: int  # device memory its buffers occupy: in use + padding
    quota: int           # this client's limit, 0 = none
    uid_bytes: int       # held by all clients of this user
    pages: int           # its buffers with a device allocation of their own
    device_bytes_reserved: int  # device memory rudad holds, for all clients
    device_pages: int           # device allocations rudad holds, for all clients


class Profile:
    """What ``with client.profile() as p:`` measures: ``p.duration_ns`` (device
    time of the work queued inside the block) is set when the block ends."""
    duration_ns = None

    @property
    def seconds(self):
        return None if self.duration_ns is None else self.duration_ns / 1e9

    def __repr__(self):
        return "<ruda.Profile duration_ns=%r>" % self.duration_ns


class Buffer:
    """Device memory of one client: ``size`` bytes of allocation ``id`` from
    ``offset``. ``dtype`` and ``shape`` remember what it was made from; reads
    default to them. Freed by ``release()``, leaving a ``with`` block, or
    closing its client (not by garbage collection: slices share the memory)."""

    def __init__(self, client, handle, dtype=np.dtype(np.uint8), shape=None, parent=None):
        self._client = client
        self.id = handle.id
        self.offset = handle.offset
        self.size = handle.size
        self.dtype = dtype
        self.shape = shape if shape is not None else (handle.size // dtype.itemsize,)
        self._parent = parent
        self._released = False

    @property
    def nbytes(self):
        return self.size

    @property
    def client(self):
        return self._client

    @property
    def released(self):
        return self._released or (self._parent is not None and self._parent.released)

    def _handle(self, offset=0, size=None):
        return _lib.ruda_handle(self.id, self.offset + offset,
                                self.size - offset if size is None else size)

    def slice(self, offset, size=None, dtype=None):
        """A view of ``size`` bytes (default: to the end) from byte ``offset``:
        the same memory, bindable and readable on its own. Released with its
        parent."""
        offset = _int(offset, "offset")
        size = self.size - offset if size is None else _int(size, "size")
        if offset + size > self.size:
            raise ValueError("slice [%d, %d) is outside the buffer's %d bytes"
                             % (offset, offset + size, self.size))
        dt = _dtype(dtype) if dtype is not None else np.dtype(np.uint8)
        return Buffer(self._client, self._handle(offset, size), dt, None,
                      self._parent or self)

    def release(self):
        """Drop the buffer; rudad frees it when work using it is done. A second
        call, or one after the client closed, does nothing."""
        if self._parent is not None:
            raise ValueError("a slice is released with the buffer it was cut from")
        if self._released or self._client._ptr is None:
            self._released = True
            return
        self._released = True
        self._client._call(_L.ruda_client_release, self._handle())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self._parent is None:
            self.release()

    def __repr__(self):
        return "<ruda.%s id=%d offset=%d size=%d dtype=%s shape=%s%s>" % (
            type(self).__name__, self.id, self.offset, self.size, self.dtype, self.shape,
            " released" if self.released else "")


class Tensor(Buffer):
    """A buffer holding a tensor: ``shape`` and the ``strides`` rudad chose
    (in elements, outermost first). read_tensor() returns it packed."""

    def __init__(self, client, layout, dtype, shape):
        super().__init__(client, layout.handle, dtype, tuple(shape))
        self.strides = tuple(layout.strides[i] for i in range(layout.rank))


class Kernel:
    """A compiled kernel of one client: ``bindings`` storage buffers,
    ``push_size`` bytes of push constants (packed by ``push_format`` when one
    was given)."""

    def __init__(self, client, kid, bindings, push_size, push_format):
        self._client = client
        self.id = kid
        self.bindings = bindings
        self.push_size = push_size
        self.push_format = push_format
        self._released = False

    def release(self):
        if not self._released and self._client._ptr is not None:
            self._client._call(_L.ruda_client_kernel_release, self.id)
        self._released = True

    def __repr__(self):
        return "<ruda.Kernel id=%d bindings=%d push_size=%d>" % (
            self.id, self.bindings, self.push_size)


class Future:
    """A read in progress (read_async / read_tensor_async). It reads what the
    buffers held at the call. ``done()`` does not block; ``result()`` waits
    and returns the numpy array (or raises the read's error), as often as
    asked."""

    def __init__(self, client, ptr, array, keep):
        self._client = client
        self._ptr = ptr
        self._array = array
        self._keep = keep  # descriptors and dst pointers, alive until the wait
        self._error = None
        self._lock = threading.Lock()

    def done(self):
        # another thread inside result() holds the lock: not over yet, and
        # done() must not wait for it
        if not self._lock.acquire(blocking=False):
            return False
        try:
            return self._ptr is None or bool(_L.ruda_future_poll(self._ptr))
        finally:
            self._lock.release()

    def _wait(self):
        # with the lock held
        if self._ptr is None:
            return
        st = _L.ruda_future_wait(self._ptr)
        self._ptr = None
        self._keep = None
        self._client._futures.discard(self)
        if st != Status.OK:
            buf = ctypes.create_string_buffer(512)
            if self._client._ptr is not None:
                _L.ruda_client_last_error(self._client._ptr, buf, len(buf))
            self._error = make_error(st, buf.value.decode(errors="replace") or strerror(st))

    def result(self, timeout=None):
        """The array read. ``timeout`` (seconds): raise TimeoutError if the
        read is not over by then (the future stays usable)."""
        if timeout is not None:
            deadline = time.monotonic() + timeout
            while not self.done():
                if time.monotonic() >= deadline:
                    raise TimeoutError("the read is not over after %g s" % timeout)
                time.sleep(0.0005)
        with self._lock:
            self._wait()
        if self._error is not None:
            raise self._error
        return self._array

    def __repr__(self):
        return "<ruda.Future %s>" % ("done" if self.done() else "pending")


# ---- the client ------------------------------------------------------------------


class Client:
    """One connection to rudad and one session there (ruda_client). Usable
    from several threads; close() it (or leave its ``with`` block) once no
    thread uses it any more. Do not use one across fork(): connect in each
    process."""

    def __init__(self, ptr, socket):
        self._ptr = ptr
        self.socket = socket
        self._futures = set()
        self._close_lock = threading.Lock()

    # -- plumbing

    def _p(self):
        p = self._ptr
        if p is None:
            raise ClosedError()
        return p

    def _call(self, fn, *args):
        p = self._p()
        st = fn(p, *args)
        if st != Status.OK:
            _raise(st, p)

    def _own(self, obj, cls=Buffer, what="buffer"):
        if not isinstance(obj, cls):
            raise TypeError("expected a ruda.%s, not %s" % (cls.__name__, type(obj).__name__))
        if obj._client is not self:
            raise ValueError("this %s belongs to another client" % what)
        self._p()
        return obj

    # -- connection

    def close(self):
        """Wait for pending futures, release everything the session holds and
        disconnect. A second call does nothing."""
        with self._close_lock:
            if self._ptr is None:
                return
            for f in list(self._futures):
                with f._lock:
                    f._wait()
            p, self._ptr = self._ptr, None
            _L.ruda_client_close(p)

    @property
    def closed(self):
        return self._ptr is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may be gone
            pass

    def __repr__(self):
        if self._ptr is None:
            return "<ruda.Client closed>"
        return "<ruda.Client session=%d socket=%r>" % (self.session_id, self.socket)

    @property
    def session_id(self):
        return _L.ruda_client_session_id(self._p())

    @property
    def priority(self):
        return _L.ruda_client_priority(self._p())

    @property
    def runtime_name(self):
        return _L.ruda_client_name(self._p()).decode()

    def last_error(self):
        """The message of this thread's last failed call on this client
        (per thread, as ruda_client_last_error; "" when none)."""
        buf = ctypes.create_string_buffer(512)
        _L.ruda_client_last_error(self._p(), buf, len(buf))
        return buf.value.decode(errors="replace")

    def properties(self):
        """ruda_device_properties as a dict (name, limits, heaps, features)."""
        out = _lib.ruda_device_properties()
        self._call(_L.ruda_client_properties, ctypes.byref(out))
        return _struct_dict(out)

    def daemon_stats(self):
        out = _lib.ruda_daemon_stats()
        self._call(_L.ruda_client_daemon_stats, ctypes.byref(out))
        return _struct_dict(out)

    def utilization(self):
        out = _lib.ruda_device_utilization()
        self._call(_L.ruda_client_utilization, ctypes.byref(out))
        return _struct_dict(out)

    # -- memory

    def create(self, data):
        """A new buffer holding a copy of ``data`` (a numpy array of any dtype,
        a numpy scalar or bytes), uploaded C-contiguous on the current stream
        (sync() before another stream uses it)."""
        arr = _host_array(data)
        if arr.nbytes == 0:
            raise ValueError("cannot create a buffer of 0 bytes")
        h = _lib.ruda_handle()
        self._call(_L.ruda_client_create, _ptr(arr), arr.nbytes, ctypes.byref(h))
        return Buffer(self, h, arr.dtype, arr.shape)

    def empty(self, nbytes, dtype=None, shape=None):
        """A new buffer of ``nbytes`` uninitialised bytes. ``empty(shape=(4, 4),
        dtype=np.float32)`` sizes it from a shape instead."""
        dt = _dtype(dtype) if dtype is not None else np.dtype(np.uint8)
        if nbytes is None:
            if shape is None:
                raise TypeError("empty() needs nbytes or a shape")
            shape = _shape(shape)
            nbytes = math.prod(shape) * dt.itemsize
        else:
            nbytes = _int(nbytes, "nbytes")
            shape = _shape(shape) if shape is not None else None
        if nbytes == 0:
            raise ValueError("cannot create a buffer of 0 bytes")
        h = _lib.ruda_handle()
        self._call(_L.ruda_client_empty, nbytes, ctypes.byref(h))
        return Buffer(self, h, dt, shape)

    def try_empty(self, nbytes):
        """As empty(), but failing at once: OutOfMemory, TooLarge or Quota."""
        nbytes = _int(nbytes, "nbytes")
        h = _lib.ruda_handle()
        self._call(_L.ruda_client_try_empty, nbytes, ctypes.byref(h))
        return Buffer(self, h)

    def _read_args(self, buf, dtype, shape, offset):
        self._own(buf)
        offset = _int(offset, "offset")
        dt = _dtype(dtype) if dtype is not None else buf.dtype
        if shape is None:
            if dtype is None and offset == 0:
                shape = buf.shape
            else:
                avail = buf.size - offset
                if avail < 0 or avail % dt.itemsize:
                    raise ValueError("%d bytes from offset %d are not a whole number of "
                                     "%s elements; give a shape" % (avail, offset, dt))
                shape = (avail // dt.itemsize,)
        shape = _shape(shape)
        nbytes = math.prod(shape) * dt.itemsize
        if offset + nbytes > buf.size:
            raise ValueError("reading %s of %s (%d bytes) from offset %d overruns the "
                             "buffer's %d bytes" % (shape, dt, nbytes, offset, buf.size))
        return np.empty(shape, dt), buf._handle(offset, nbytes)

    def read(self, buf, dtype=None, shape=None, offset=0):
        """The buffer's bytes as a new numpy array of ``dtype`` and ``shape``
        (default: what it was created from; else all of it as 1-D), from byte
        ``offset``. Waits for the work that writes it. A Tensor read with no
        arguments is read_tensor(tensor)."""
        if isinstance(buf, Tensor) and dtype is None and shape is None and offset == 0:
            return self.read_tensor(buf)
        out, h = self._read_args(buf, dtype, shape, offset)
        if out.nbytes:
            self._call(_L.ruda_client_read_one, h, _ptr(out))
        return out

    def read_async(self, buf, dtype=None, shape=None, offset=0):
        """As read(), without waiting: a Future whose result() is the array."""
        out, h = self._read_args(buf, dtype, shape, offset)
        handles = (_lib.ruda_handle * 1)(h)
        dst = (ctypes.c_void_p * 1)(out.ctypes.data)
        fut = _lib.ruda_future_p()
        self._call(_L.ruda_client_read_async, handles, 1, dst, ctypes.byref(fut))
        f = Future(self, fut, out, (handles, dst))
        self._futures.add(f)
        return f

    def write(self, buf, data, offset=0):
        """Copy ``data`` (numpy array, scalar or bytes) into the buffer at byte
        ``offset``, on the current stream (sync() before another stream uses
        the buffer)."""
        self._own(buf)
        offset = _int(offset, "offset")
        arr = _host_array(data)
        if offset + arr.nbytes > buf.size:
            raise ValueError("writing %d bytes at offset %d overruns the buffer's %d bytes"
                             % (arr.nbytes, offset, buf.size))
        if arr.nbytes:
            self._call(_L.ruda_client_write, buf._handle(), offset, _ptr(arr), arr.nbytes)

    def memory_usage(self):
        out = _lib.ruda_memory_usage()
        self._call(_L.ruda_client_memory_usage, ctypes.byref(out))
        return MemoryUsage(*(getattr(out, f) for f, _ in out._fields_[1:]))  # [0]: struct_size

    def memory_cleanup(self):
        """Give back device memory no buffer uses."""
        self._call(_L.ruda_client_memory_cleanup)

    # -- tensors

    def _layout_desc(self, shape, dt, layout):
        if layout not in LAYOUTS:
            raise ValueError("layout must be one of %s, not %r" % (sorted(LAYOUTS), layout))
        if not 1 <= len(shape) <= _lib.MAX_RANK:
            raise ValueError("a tensor has 1 to %d dimensions, not %d"
                             % (_lib.MAX_RANK, len(shape)))
        d = _lib.ruda_layout_desc()
        d.strategy = LAYOUTS[layout]
        d.rank = len(shape)
        for i, n in enumerate(shape):
            d.shape[i] = n
        d.elem_size = dt.itemsize
        return d

    def create_tensor(self, array, layout="contiguous"):
        """A tensor holding ``array`` (1 to 8 dimensions). layout="optimized"
        lets rudad pitch the rows; the Tensor's ``strides`` say how."""
        arr = _host_array(array)
        d = self._layout_desc(arr.shape, arr.dtype, layout)
        out = _lib.ruda_layout()
        self._call(_L.ruda_client_create_tensor, ctypes.byref(d), _ptr(arr), ctypes.byref(out))
        return Tensor(self, out, arr.dtype, arr.shape)

    def empty_tensor(self, shape, dtype, layout="contiguous"):
        dt = _dtype(dtype)
        shape = _shape(shape)
        d = self._layout_desc(shape, dt, layout)
        out = _lib.ruda_layout()
        self._call(_L.ruda_client_empty_tensor, ctypes.byref(d), ctypes.byref(out))
        return Tensor(self, out, dt, shape)

    def _copy_desc(self, buf, dtype, shape, strides, offset):
        self._own(buf)
        offset = _int(offset, "offset")
        dt = _dtype(dtype) if dtype is not None else buf.dtype
        if shape is None:
            if not isinstance(buf, Tensor):
                raise TypeError("read_tensor of a plain buffer needs a shape")
            shape = buf.shape
            if strides is None and dt.itemsize == buf.dtype.itemsize:
                strides = buf.strides
        shape = _shape(shape)
        if not 1 <= len(shape) <= _lib.MAX_RANK:
            raise ValueError("a tensor has 1 to %d dimensions, not %d"
                             % (_lib.MAX_RANK, len(shape)))
        if strides is None:
            strides, acc = [], 1
            for n in reversed(shape):
                strides.insert(0, acc)
                acc *= n
        strides = _shape(strides, "strides")
        if len(strides) != len(shape):
            raise ValueError("%d strides for %d dimensions" % (len(strides), len(shape)))
        out = np.empty(shape, dt)
        if out.size:
            last = sum((n - 1) * s for n, s in zip(shape, strides))
            if offset + (last + 1) * dt.itemsize > buf.size:
                raise ValueError("shape %s with strides %s (elements of %d bytes) from "
                                 "offset %d reaches past the buffer's %d bytes"
                                 % (shape, strides, dt.itemsize, offset, buf.size))
        d = _lib.ruda_copy_desc()
        d.handle = buf._handle(offset)
        d.rank = len(shape)
        for i in range(len(shape)):
            d.shape[i] = shape[i]
            d.strides[i] = strides[i]
        d.elem_size = dt.itemsize
        return out, d

    def read_tensor(self, buf, dtype=None, shape=None, strides=None, offset=0):
        """Elements (i0, i1, ...) at byte offset + itemsize * sum(ik * strides[k])
        of the buffer, as a packed numpy array of ``shape``. For a Tensor the
        defaults are its own dtype, shape and strides; strides are in
        elements (a transposed read of an (m, n) tensor: shape=(n, m),
        strides=(1, n))."""
        out, d = self._copy_desc(buf, dtype, shape, strides, offset)
        if out.size:
            dst = (ctypes.c_void_p * 1)(out.ctypes.data)
            self._call(_L.ruda_client_read_tensor, ctypes.byref(d), 1, dst)
        return out

    def read_tensor_async(self, buf, dtype=None, shape=None, strides=None, offset=0):
        out, d = self._copy_desc(buf, dtype, shape, strides, offset)
        dst = (ctypes.c_void_p * 1)(out.ctypes.data)
        fut = _lib.ruda_future_p()
        self._call(_L.ruda_client_read_tensor_async, ctypes.byref(d), 1, dst,
                   ctypes.byref(fut))
        f = Future(self, fut, out, (d, dst))
        self._futures.add(f)
        return f

    def can_read_tensor(self, shape, strides):
        shape, strides = _shape(shape), _shape(strides, "strides")
        if len(shape) != len(strides):
            raise ValueError("%d strides for %d dimensions" % (len(strides), len(shape)))
        n = len(shape)
        return bool(_L.ruda_client_can_read_tensor(self._p(), n, (ctypes.c_uint64 * n)(*shape),
                                                   (ctypes.c_uint64 * n)(*strides)))

    # -- kernels

    def kernel(self, spirv, bindings, push=0, spec=None, entry="main"):
        """Compile a kernel (ruda_client_kernel_register).

        spirv: SPIR-V as bytes, a numpy uint32 array or a file path.
        bindings: how many storage buffers (set 0, bindings 0..n-1).
        push: the push-constant block: its size in bytes, or a struct format
            string (e.g. "I" or "<If") that launch() packs values with.
        spec: {constant_id: value}: an int is a u32 (i32 when negative, 64
            bits when it needs them), a float an f32, a bool 4 bytes, a numpy
            scalar its own type, (value, "d") packs with a struct code.
        """
        code = _spirv_bytes(spirv)
        if not code or len(code) % 4:
            raise ValueError("SPIR-V is 32-bit words; %d bytes is not" % len(code))
        bindings = _int(bindings, "bindings")
        fmt = None
        if isinstance(push, str):
            fmt = push
            try:
                push_size = struct.calcsize(fmt)
            except struct.error as e:
                raise ValueError("bad push-constant format %r: %s" % (fmt, e)) from None
        else:
            push_size = _int(push, "push")
        push_size += -push_size % 4
        if push_size > MAX_PUSH_BYTES:
            raise ValueError("%d push-constant bytes; at most %d" % (push_size, MAX_PUSH_BYTES))
        specs = [_spec_constant(k, v) for k, v in (spec or {}).items()]
        words = (ctypes.c_uint32 * (len(code) // 4)).from_buffer_copy(code)
        spec_arr = (_lib.ruda_spec_constant * max(1, len(specs)))(*specs)
        d = _lib.ruda_kernel_desc()
        d.spirv = ctypes.cast(words, ctypes.POINTER(ctypes.c_uint32))
        d.spirv_size = len(code)
        d.entry_point = entry.encode()
        d.binding_count = bindings
        d.push_constant_size = push_size
        d.spec_constants = ctypes.cast(spec_arr, ctypes.POINTER(_lib.ruda_spec_constant)) \
            if specs else None
        d.spec_constant_count = len(specs)
        k = _lib.ruda_kernel()
        self._call(_L.ruda_client_kernel_register, ctypes.byref(d), ctypes.byref(k))
        return Kernel(self, k.value, bindings, push_size, fmt)

    def launch(self, kernel, groups, buffers=(), push=None):
        """Queue ``kernel`` over ``groups`` workgroups (an int or 1 to 3 ints)
        with ``buffers`` bound in order and ``push`` constants (bytes, a
        numpy array or scalar, or values: packed with the kernel's format,
        else by pack_values()). Errors the daemon finds come from sync() or a
        read of a buffer it writes."""
        self._own(kernel, Kernel, "kernel")
        g = _shape(groups, "groups")
        if not 1 <= len(g) <= 3:
            raise ValueError("groups is 1 to 3 counts, not %d" % len(g))
        if any(n >= 1 << 32 for n in g):
            raise ValueError("group counts are 32-bit: %s" % (g,))
        g = g + (1,) * (3 - len(g))
        buffers = list(buffers)
        if len(buffers) != kernel.bindings:
            raise ValueError("%d buffers given; the kernel binds %d"
                             % (len(buffers), kernel.bindings))
        for b in buffers:
            self._own(b)
        data = _push_bytes(push, kernel.push_format)
        if len(data) > kernel.push_size:
            raise ValueError("%d push-constant bytes; the kernel was registered with %d"
                             % (len(data), kernel.push_size))
        n = len(buffers)
        hs = (_lib.ruda_handle * max(1, n))(*(b._handle() for b in buffers))
        pbuf = ctypes.create_string_buffer(data, len(data)) if data else None
        self._call(_L.ruda_client_launch, kernel.id, _lib.ruda_count(*g), hs, n, pbuf, len(data))

    # -- execution

    def flush(self):
        """Send queued requests; no wait."""
        self._call(_L.ruda_client_flush)

    def sync(self):
        """Wait for the current stream's work; raise its first error."""
        self._call(_L.ruda_client_sync)

    def _handles(self, buffers):
        buffers = [self._own(b) for b in buffers]
        return (_lib.ruda_handle * max(1, len(buffers)))(*(b._handle() for b in buffers)), \
            len(buffers)

    def check(self, buffers):
        """Raise the error recorded against any of ``buffers``, without waiting."""
        self._call(_L.ruda_client_check, *self._handles(buffers))

    def sync_buffers(self, buffers):
        """Wait for the work touching ``buffers``, then raise their errors."""
        self._call(_L.ruda_client_sync_buffers, *self._handles(buffers))

    @property
    def stream(self):
        """The stream this client's requests go to (0 at first; set it to 0..64).
        Streams are unordered: before another stream uses a buffer created
        or written on this one, sync() here."""
        return _L.ruda_client_execution_stream(self._p())

    @stream.setter
    def stream(self, value):
        self._call(_L.ruda_client_set_stream, _int(value, "stream"))

    @contextlib.contextmanager
    def on_stream(self, stream):
        """Send requests to ``stream`` inside the block, then to the one before."""
        before = self.stream
        self.stream = stream
        try:
            yield self
        finally:
            if self._ptr is not None:
                self.stream = before

    # -- profiling and exclusive access

    def profile_start(self):
        w = _lib.ruda_profile_window()
        self._call(_L.ruda_client_profile_start, ctypes.byref(w))
        return w.value

    def profile_end(self, window):
        """Close a window and wait for its device time, in nanoseconds."""
        ns = ctypes.c_uint64()
        self._call(_L.ruda_client_profile_end, _int(window, "window"), ctypes.byref(ns))
        return ns.value

    def profile_abandon(self, window):
        self._call(_L.ruda_client_profile_abandon, _int(window, "window"))

    @contextlib.contextmanager
    def profile(self):
        """``with client.profile() as p:`` ... then ``p.duration_ns``: the device
        time of the work queued inside the block (waits for it at the end)."""
        p = Profile()
        w = self.profile_start()
        try:
            yield p
        except BaseException:
            if self._ptr is not None:
                with contextlib.suppress(Exception):
                    self.profile_abandon(w)
            raise
        p.duration_ns = self.profile_end(w)

    @contextlib.contextmanager
    def exclusive(self, timeout_ms=0):
        """Hold the device alone inside the block: other clients' requests wait
        until it ends or ``timeout_ms`` passes (0: rudad's limit). Blocks
        until granted. Leaving the block after the lease expired raises
        LeaseExpired (the work inside ran, but not all of it alone)."""
        self._call(_L.ruda_client_exclusive_begin, _int(timeout_ms, "timeout_ms"))
        try:
            yield self
        except BaseException:
            if self._ptr is not None:
                _L.ruda_client_exclusive_end(self._ptr)
            raise
        self._call(_L.ruda_client_exclusive_end)


def _default_name():
    argv0 = sys.argv[0] if sys.argv and sys.argv[0] not in ("", "-c", "-m") else ""
    return os.path.basename(argv0) or None


def connect(socket=None, name=None, device=0, priority=0):
    """Connect to rudad and open a session.

    socket: the socket's path; None: $RUDA_SOCKET, else /run/ruda/rudad.sock
        for root, else $XDG_RUNTIME_DIR/ruda/rudad.sock.
    name: shown by rudactl; None: the script's file name.
    device: the daemon's device index, or a (type_id, index_id) pair.
    priority: 1 (lowest) to 7 (highest); 0: the daemon's default.

    Raises Disconnected (no rudad there; the message names the socket),
    Permission, Busy, InvalidArgument, VersionMismatch.
    """
    o = _lib.ruda_connect_options()
    path = os.fsencode(socket) if socket is not None else None
    o.socket_path = path
    name = name if name is not None else _default_name()
    o.client_name = name.encode() if name is not None else None
    if isinstance(device, tuple):
        if len(device) != 2:
            raise ValueError("device is an index or a (type_id, index_id) pair")
        o.use_device_id = 1
        o.device_id = _lib.ruda_device_id(_int(device[0], "type_id"), _int(device[1], "index_id"))
    else:
        o.device_index = _int(device, "device")
    o.priority = _int(priority, "priority")
    p = _lib.ruda_client_p()
    st = _L.ruda_client_connect(ctypes.byref(o), ctypes.byref(p))
    if st != Status.OK:
        _raise(st, None)  # this thread's last failed connect
    return Client(p.value, os.fsdecode(socket) if socket is not None else None)
