"""Every error ruda raises: the daemon's (a ruda.Error subclass with its
status and explanation) and the package's own argument checks, which must
fire before libruda is called."""

import os
import time

import numpy as np
import pytest

import ruda
import ruda.client
from conftest import CLIENT_QUOTA, Daemon


class Spy:
    """Stands in for the CDLL and records which libruda functions are called."""

    def __init__(self, lib):
        self._lib = lib
        self.called = []

    def __getattr__(self, name):
        fn = getattr(self._lib, name)

        def record(*args):
            self.called.append(name)
            return fn(*args)
        return record


@pytest.fixture
def spy(monkeypatch):
    s = Spy(ruda.client._L)
    monkeypatch.setattr(ruda.client, "_L", s)
    return s


# ---- errors from the daemon -----------------------------------------------------


def test_connect_missing_socket(tmp_path):
    path = str(tmp_path / "no" / "rudad.sock")
    with pytest.raises(ruda.Disconnected) as e:
        ruda.connect(path)
    assert e.value.status == ruda.Status.DISCONNECTED
    assert path in e.value.message and path in str(e.value)
    assert "no such socket" in e.value.message


def test_connect_bad_priority(daemon):
    with pytest.raises(ruda.InvalidArgument, match="priority 9"):
        ruda.connect(daemon.socket, priority=9)


def test_connect_path_too_long(tmp_path):
    with pytest.raises(ruda.InvalidArgument):
        ruda.connect("/tmp/" + "x" * 200)


def test_busy_at_max_clients():
    d = Daemon(["--max-clients=1"])
    try:
        # the fixture's own probe of the socket may still count for a moment
        deadline = time.monotonic() + 10
        while True:
            try:
                first = ruda.connect(d.socket, name="first")
                break
            except ruda.Busy:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        with first:
            with pytest.raises(ruda.Busy, match="max_clients"):
                ruda.connect(d.socket, name="second")
            # the one admitted still works
            assert np.array_equal(first.read(first.create(np.arange(5))), np.arange(5))
    finally:
        d.stop()


def test_released_buffer_is_invalid_handle(client):
    buf = client.create(np.arange(100, dtype=np.int32))
    keep = client.create(np.arange(100, dtype=np.int32))
    buf.release()
    with pytest.raises(ruda.InvalidHandle, match="no such buffer") as e:
        client.read(buf)
    assert e.value.status == ruda.Status.INVALID_HANDLE
    # a neighbour is unharmed and the client goes on
    assert np.array_equal(client.read(keep), np.arange(100, dtype=np.int32))


def test_forged_handle_is_invalid_handle(client):
    real = client.create(np.zeros(16, np.uint8))
    from ruda import _lib
    forged = ruda.Buffer(client, _lib.ruda_handle(real.id + 1000, 0, 16))
    with pytest.raises(ruda.InvalidHandle):
        client.read(forged)
    with pytest.raises(ruda.InvalidHandle):
        client.write(forged, np.zeros(16, np.uint8))
        client.sync()


def test_launch_with_released_buffer_fails_at_sync(client, add_spv):
    a = client.create(np.ones(256, np.float32))
    out = client.empty(1024, dtype=np.float32)
    k = client.kernel(add_spv, 3, push="I")
    a.release()
    client.launch(k, 1, [a, a, out], push=256)
    with pytest.raises(ruda.InvalidHandle):
        client.sync()
    client.sync()  # the error was reported once


def test_bad_kernel_bytes(client):
    junk = b"\x03\x02\x23\x07" + bytes(60)  # SPIR-V magic, nonsense after it
    with pytest.raises(ruda.InvalidKernel, match="SPIR-V") as e:
        client.kernel(junk, bindings=1)
    assert e.value.status == ruda.Status.INVALID_KERNEL
    with pytest.raises(ruda.InvalidKernel):
        client.kernel(os.urandom(64), bindings=1)


def test_group_count_over_device_limit(client, add_spv):
    a = client.create(np.ones(256, np.float32))
    out = client.empty(1024, dtype=np.float32)
    k = client.kernel(add_spv, 3, push="I")
    client.launch(k, (1 << 31,), [a, a, out], push=256)
    with pytest.raises(ruda.InvalidArgument, match="exceeds"):
        client.sync()
    # the buffers it bound carry the error on ...
    with pytest.raises(ruda.InvalidArgument, match="exceeds"):
        client.read(out)
    # ... and the client goes on with others
    b = client.create(np.ones(256, np.float32))
    out2 = client.empty(1024, dtype=np.float32)
    client.launch(k, 1, [b, b, out2], push=256)
    assert np.all(client.read(out2) == 2)


def test_quota_and_too_large(client):
    with pytest.raises(ruda.Quota):
        client.try_empty(CLIENT_QUOTA + (1 << 20))
    with pytest.raises((ruda.TooLarge, ruda.OutOfMemory)):
        client.try_empty(1 << 50)
    ok = client.try_empty(1 << 20)
    ok.release()


def test_exclusive_end_without_lease(client):
    from ruda import _lib
    with pytest.raises(ruda.InvalidArgument, match="holds no exclusive lease"):
        client._call(_lib.lib.ruda_client_exclusive_end)


def test_exclusive_lease_expired(client):
    from ruda import _lib
    client._call(_lib.lib.ruda_client_exclusive_begin, 50)
    time.sleep(0.3)
    with pytest.raises(ruda.LeaseExpired, match="expired after 50 ms") as e:
        client._call(_lib.lib.ruda_client_exclusive_end)
    assert e.value.status == ruda.Status.LEASE_EXPIRED
    assert ruda.error_class(18) is ruda.LeaseExpired
    # told once; then no lease is held
    with pytest.raises(ruda.InvalidArgument):
        client._call(_lib.lib.ruda_client_exclusive_end)


# ---- argument checks before libruda ---------------------------------------------


def bad_calls(client, other, add_spv):
    buf = client.create(np.arange(16, dtype=np.float32))
    k = client.kernel(add_spv, 3, push="I")
    foreign = other.create(np.arange(4, dtype=np.float32))
    return [
        (TypeError, lambda: client.create([1, 2, 3])),
        (TypeError, lambda: client.create(np.array([object()]))),
        (ValueError, lambda: client.create(np.zeros(0))),
        (TypeError, lambda: client.read(buf, dtype="not-a-dtype")),
        (TypeError, lambda: client.read(buf, dtype=object)),
        (TypeError, lambda: client.read(buf, np.float32, (2.5,))),
        (ValueError, lambda: client.read(buf, np.float32, (17,))),
        (ValueError, lambda: client.read(buf, np.float32, (-1,))),
        (ValueError, lambda: client.read(buf, np.float64, (8,), offset=8)),
        (ValueError, lambda: client.read(buf, np.dtype("V3"))),
        (TypeError, lambda: client.read("buffer")),
        (ValueError, lambda: client.read(foreign)),
        (ValueError, lambda: client.write(buf, np.zeros(17, np.float32))),
        (ValueError, lambda: client.write(buf, np.zeros(1, np.float32), offset=64)),
        (TypeError, lambda: client.write(buf, 3.0)),
        (ValueError, lambda: client.empty(0)),
        (TypeError, lambda: client.empty(1.5)),
        (ValueError, lambda: buf.slice(8, 60)),
        (ValueError, lambda: buf.slice(8).release()),
        (ValueError, lambda: client.read_async(buf, np.float32, (100,))),
        (ValueError, lambda: client.read_tensor(buf, np.float32, (4, 4), (4,))),
        (ValueError, lambda: client.read_tensor(buf, np.float32, (4, 4), (1, 5))),
        (TypeError, lambda: client.read_tensor(buf)),
        (ValueError, lambda: client.create_tensor(np.zeros((1,) * 9, np.float32))),
        (ValueError, lambda: client.create_tensor(np.zeros(4), layout="fancy")),
        (ValueError, lambda: client.kernel(b"\x03\x02\x23", 1)),
        (ValueError, lambda: client.kernel(b"", 1)),
        (TypeError, lambda: client.kernel(12345, 1)),
        (ValueError, lambda: client.kernel(add_spv, 3, push=300)),
        (ValueError, lambda: client.kernel(add_spv, 3, push="Z")),
        (TypeError, lambda: client.kernel(add_spv, 3, spec={0: "seven"})),
        (TypeError, lambda: client.kernel(add_spv, 3, spec={0.5: 1})),
        (ValueError, lambda: client.kernel(add_spv, 3, spec={0: np.uint8(1)})),
        (ValueError, lambda: client.launch(k, 1, [buf, buf])),
        (ValueError, lambda: client.launch(k, 1, [buf, buf, foreign], push=1)),
        (ValueError, lambda: client.launch(k, -1, [buf, buf, buf], push=1)),
        (ValueError, lambda: client.launch(k, (1, 1, 1, 1), [buf, buf, buf], push=1)),
        (ValueError, lambda: client.launch(k, 1 << 32, [buf, buf, buf], push=1)),
        (ValueError, lambda: client.launch(k, 1, [buf, buf, buf], push=(1, 2))),
        (ValueError, lambda: client.launch(k, 1, [buf, buf, buf], push=-1)),
        (ValueError, lambda: client.launch(k, 1, [buf, buf, buf], push=bytes(8))),
        (TypeError, lambda: client.launch(buf, 1, [buf, buf, buf])),
        (TypeError, lambda: client.launch(k, 1, [buf, buf, "x"], push=1)),
        (ValueError, lambda: client.exclusive(-1).__enter__()),
        (TypeError, lambda: client.exclusive(1.5).__enter__()),
        (TypeError, lambda: ruda.connect(socket=None, device=1.5)),
    ]


def test_bad_arguments_raise_before_libruda(client, daemon, add_spv, spy):
    with ruda.connect(daemon.socket, name="pytest-other") as other:
        calls = bad_calls(client, other, add_spv)
        for i, (exc, call) in enumerate(calls):
            spy.called.clear()
            try:
                call()
            except exc:
                pass
            else:
                pytest.fail("case %d raised nothing" % i)
            assert spy.called == [], "case %d called %s" % (i, spy.called)
    # nothing above hurt the client
    assert np.array_equal(client.read(client.create(np.arange(3))), np.arange(3))


# ---- after close ----------------------------------------------------------------


def test_use_after_close(daemon, add_spv, spy):
    c = ruda.connect(daemon.socket, name="pytest-closed")
    buf = c.create(np.arange(8, dtype=np.float32))
    k = c.kernel(add_spv, 3, push="I")
    c.close()
    assert c.closed and "closed" in repr(c)
    spy.called.clear()
    for call in (lambda: c.read(buf), lambda: c.create(np.zeros(4)), lambda: c.empty(16),
                 lambda: c.write(buf, np.zeros(8, np.float32)), lambda: c.sync(),
                 lambda: c.launch(k, 1, [buf, buf, buf], push=8), lambda: c.memory_usage(),
                 lambda: c.kernel(add_spv, 3), lambda: c.read_async(buf),
                 lambda: c.exclusive().__enter__(), lambda: c.profile_start(),
                 lambda: c.stream, lambda: c.session_id):
        with pytest.raises(ruda.ClosedError) as e:
            call()
        assert isinstance(e.value, ruda.Disconnected) and isinstance(e.value, ValueError)
    buf.release()  # the session freed it already: nothing to do
    k.release()
    c.close()      # a second close does nothing
    assert spy.called == []
