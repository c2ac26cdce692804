"""ruda: Python bindings of libruda, the client library of rudad (the ruda
GPU compute daemon). Pure Python over ctypes; arrays are numpy arrays.

    import numpy as np, ruda
    with ruda.connect("/tmp/rudad.sock") as client:
        a = client.create(np.arange(1024, dtype=np.float32))
        print(client.read(a))

docs/python.md describes every call.
"""

from ._lib import PROTOCOL_VERSION, path as library_path
from .client import (LAYOUTS, Buffer, Client, Future, Kernel, MemoryUsage, Profile, Tensor,
                     connect, pack_values, strerror)
from .errors import (Busy, ClosedError, DeviceLost, Disconnected, Error, Internal,
                     InvalidArgument, InvalidHandle, InvalidKernel, IoError, LeaseExpired,
                     OutOfMemory, OutOfRange, Permission, ProtocolError, Quota, Status, Timeout,
                     TooLarge, Unsupported, VersionMismatch, error_class)

__version__ = "0.1.0"

__all__ = [
    "Buffer", "Busy", "Client", "ClosedError", "DeviceLost", "Disconnected", "Error",
    "Future", "Internal", "InvalidArgument", "InvalidHandle", "InvalidKernel", "IoError",
    "Kernel", "LAYOUTS", "LeaseExpired", "MemoryUsage", "OutOfMemory", "OutOfRange",
    "PROTOCOL_VERSION", "Permission", "Profile", "ProtocolError", "Quota", "Status", "Tensor",
    "Timeout", "TooLarge", "Unsupported", "VersionMismatch", "connect", "error_class", "library_path",
    "pack_values", "strerror",
]
