"""ruda's exceptions: one class per ruda_status of <ruda/ruda.h>.

``Status`` mirrors enum Status of proto/ruda.proto, the codes' one
definition; python/tests/test_status.py checks it against the proto.

Every failed libruda call raises ``Error`` (or the subclass of its status)
carrying ``status`` (a ``Status``) and ``message``: the daemon's explanation
from ruda_client_last_error, else the status's ruda_strerror text.
"""

import enum


class Status(enum.IntEnum):
    """ruda_status values (the wire's ruda.Status)."""
    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_HANDLE = 2
    OUT_OF_MEMORY = 3
    TOO_LARGE = 4
    QUOTA = 5
    UNSUPPORTED = 6
    PROTOCOL = 7
    INVALID_KERNEL = 8
    DEVICE_LOST = 9
    TIMEOUT = 10
    DISCONNECTED = 11
    OUT_OF_RANGE = 12
    VERSION = 13
    PERMISSION = 14
    BUSY = 15
    INTERNAL = 16
    IO = 17
    LEASE_EXPIRED = 18


class Error(Exception):
    """A libruda call failed: ``status`` says how, ``message`` why."""
    status = None

    def __init__(self, status, message=""):
        try:
            status = Status(status)
        except ValueError:
            pass  # a newer libruda's status: keep the number
        self.status = status
        self.message = message
        super().__init__(status, message)

    def __str__(self):
        name = self.status.name if isinstance(self.status, Status) else str(self.status)
        return "%s: %s" % (name, self.message) if self.message else name


class InvalidArgument(Error):
    pass


class InvalidHandle(Error):
    pass


class OutOfMemory(Error):
    pass


class TooLarge(Error):
    pass


class Quota(Error):
    pass


class Unsupported(Error):
    pass


class ProtocolError(Error):
    pass


class InvalidKernel(Error):
    pass


class DeviceLost(Error):
    pass


class Timeout(Error):
    pass


class Disconnected(Error):
    pass


class OutOfRange(Error):
    pass


class VersionMismatch(Error):
    pass


class Permission(Error):
    pass


class Busy(Error):
    pass


class Internal(Error):
    pass


class IoError(Error):
    pass


class LeaseExpired(Error):
    """The exclusive lease ran out (max_exclusive_ms or the timeout asked)
    before exclusive_end: the work after that point did not run alone."""


class ClosedError(Disconnected, ValueError):
    """A call on a client (or its buffer, kernel, future) after close(): raised
    by Python, libruda is not called. Also a ValueError, as for a closed file."""

    def __init__(self, message="the client is closed"):
        super().__init__(Status.DISCONNECTED, message)


_BY_STATUS = {
    Status.INVALID_ARGUMENT: InvalidArgument,
    Status.INVALID_HANDLE: InvalidHandle,
    Status.OUT_OF_MEMORY: OutOfMemory,
    Status.TOO_LARGE: TooLarge,
    Status.QUOTA: Quota,
    Status.UNSUPPORTED: Unsupported,
    Status.PROTOCOL: ProtocolError,
    Status.INVALID_KERNEL: InvalidKernel,
    Status.DEVICE_LOST: DeviceLost,
    Status.TIMEOUT: Timeout,
    Status.DISCONNECTED: Disconnected,
    Status.OUT_OF_RANGE: OutOfRange,
    Status.VERSION: VersionMismatch,
    Status.PERMISSION: Permission,
    Status.BUSY: Busy,
    Status.INTERNAL: Internal,
    Status.IO: IoError,
    Status.LEASE_EXPIRED: LeaseExpired,
}


def error_class(status):
    """The exception class of a ruda_status value."""
    try:
        return _BY_STATUS.get(Status(status), Error)
    except ValueError:
        return Error


def make_error(status, message):
    return error_class(status)(status, message)
