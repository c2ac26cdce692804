"""ruda against a real rudad: results checked against numpy, bytes checked
byte for byte, and every error the package raises."""

import os
import threading
import time

import numpy as np
import pytest

import ruda

RNG = np.random.default_rng(25)


def add(client, spv, a, b, groups=None):
    A, B = client.create(a), client.create(b)
    out = client.empty(a.nbytes, dtype=np.float32)
    k = client.kernel(spv, bindings=3, push="I")
    client.launch(k, groups or -(-a.size // 256), [A, B, out], push=a.size)
    return client.read(out)


# ---- kernels --------------------------------------------------------------------


@pytest.mark.parametrize("n,groups", [(10000, None), (4096, 16), (100003, 3), (1, 1)])
def test_add_f32_matches_numpy(client, add_spv, n, groups):
    a = RNG.standard_normal(n, dtype=np.float32)
    b = RNG.standard_normal(n, dtype=np.float32)
    got = add(client, add_spv, a, b, groups)
    assert got.dtype == np.float32 and got.shape == (n,)
    # one IEEE addition per element: the device must give numpy's bytes
    assert np.array_equal(got, a + b)


def test_push_constants_forms(client, add_spv):
    n = 1000
    a = np.arange(n, dtype=np.float32)
    A = client.create(a)
    k = client.kernel(add_spv, 3, push=4)  # a size, no format
    for push in (n, np.uint32(n), (n,), np.array([n], np.uint32), n.to_bytes(4, "little")):
        out = client.create(np.full(n, -1, np.float32))
        client.launch(k, 4, [A, A, out], push=push)
        assert np.array_equal(client.read(out), 2 * a), push
    # a smaller count leaves the rest alone: n reached the kernel
    out = client.create(np.full(n, -1, np.float32))
    client.launch(k, 4, [A, A, out], push=10)
    r = client.read(out)
    assert np.array_equal(r[:10], 2 * a[:10]) and np.all(r[10:] == -1)


def test_spec_constants(client, spec_fill_spv):
    n = 300
    results = {}
    for spec in (None, {0: 42}, {0: 7}, {0: np.uint32(0xDEADBEEF)}, {0: (5, "I")}):
        k = client.kernel(spec_fill_spv, bindings=1, push="I", spec=spec)
        out = client.create(np.zeros(n, np.uint32))
        client.launch(k, -(-n // 64), [out], push=n)
        results[repr(spec)] = client.read(out)
    # VALUE defaults to 1 in the shader
    assert np.all(results["None"] == 1)
    assert np.all(results["{0: 42}"] == 42)
    assert np.all(results["{0: 7}"] == 7)
    assert np.all(results[repr({0: np.uint32(0xDEADBEEF)})] == 0xDEADBEEF)
    assert np.all(results["{0: (5, 'I')}"] == 5)


def test_kernel_from_bytes_and_words(client, add_spv):
    with open(add_spv, "rb") as f:
        code = f.read()
    a = np.arange(256, dtype=np.float32)
    for spirv in (code, bytearray(code), np.frombuffer(code, np.uint32)):
        k = client.kernel(spirv, 3, push="I")
        A = client.create(a)
        out = client.empty(a.nbytes, dtype=np.float32)
        client.launch(k, 1, [A, A, out], push=256)
        assert np.array_equal(client.read(out), a + a)
        k.release()


# ---- memory ---------------------------------------------------------------------

DTYPES = [np.uint8, np.int8, np.int16, np.uint16, np.float16, np.int32, np.uint32, np.float32,
          np.int64, np.uint64, np.float64, np.complex64, np.complex128, np.bool_,
          np.dtype([("x", "<u2"), ("y", "<f8")])]
SIZES = [1, 7, 4096, (1 << 20) + 3]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).str)
def test_round_trip_bytes(client, dtype, size):
    dt = np.dtype(dtype)
    raw = RNG.integers(0, 256, size * dt.itemsize, dtype=np.uint8)
    if dt == np.bool_:
        raw &= 1
    arr = raw.view(dt)
    buf = client.create(arr)
    assert buf.size == arr.nbytes and buf.dtype == dt and buf.shape == (size,)
    back = client.read(buf)
    assert back.dtype == dt and back.shape == (size,)
    assert back.tobytes() == arr.tobytes()  # NaNs included: bytes, not values
    assert client.read(buf, np.uint8).tobytes() == arr.tobytes()
    buf.release()


def test_round_trip_shapes_and_layouts(client):
    a = RNG.standard_normal((6, 5, 4))
    buf = client.create(a)
    assert np.array_equal(client.read(buf), a)
    assert np.array_equal(client.read(buf, np.float64, (30, 4)), a.reshape(30, 4))
    # non-contiguous and Fortran-ordered arrays are uploaded as C-contiguous copies
    t = a[:, ::2, 1]
    assert np.array_equal(client.read(client.create(t)), t)
    f = np.asfortranarray(a)
    assert np.array_equal(client.read(client.create(f)), a)
    # bytes and numpy scalars
    assert client.read(client.create(b"hello!!!")).tobytes() == b"hello!!!"
    assert client.read(client.create(np.float64(2.5)), np.float64)[0] == 2.5


def test_write_and_offsets(client):
    buf = client.empty(64)
    client.write(buf, np.arange(16, dtype=np.uint32))
    client.write(buf, np.array([100, 101], np.uint32), offset=8)
    want = np.arange(16, dtype=np.uint32)
    want[2:4] = [100, 101]
    assert np.array_equal(client.read(buf, np.uint32), want)
    assert np.array_equal(client.read(buf, np.uint32, (4,), offset=16), want[4:8])
    s = buf.slice(32, 16, dtype=np.uint32)
    assert np.array_equal(client.read(s), want[8:12])


def test_empty_by_shape(client):
    buf = client.empty(None, dtype=np.int16, shape=(3, 5))
    assert buf.size == 30 and buf.shape == (3, 5)
    client.write(buf, np.arange(15, dtype=np.int16).reshape(3, 5))
    assert np.array_equal(client.read(buf), np.arange(15, dtype=np.int16).reshape(3, 5))


def test_memory_usage_and_release(client):
    before = client.memory_usage()
    assert isinstance(before, ruda.MemoryUsage)
    assert before.quota == 64 << 20
    buf = client.create(np.zeros(100000, np.uint8))
    during = client.memory_usage()
    assert during.allocations == before.allocations + 1
    assert during.bytes_in_use == before.bytes_in_use + 100000
    buf.release()
    buf.release()  # a second release does nothing
    client.sync()
    after = client.memory_usage()
    assert after.allocations == before.allocations
    assert after.bytes_in_use == before.bytes_in_use


def test_buffer_context_manager(client):
    before = client.memory_usage().allocations
    with client.create(np.ones(10)) as buf:
        assert client.memory_usage().allocations == before + 1
    assert buf.released
    client.sync()
    assert client.memory_usage().allocations == before


# ---- tensors --------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["contiguous", "optimized"])
def test_tensor_transposed_read(client, layout):
    a = RNG.standard_normal((37, 53), dtype=np.float32)
    t = client.create_tensor(a, layout=layout)
    assert t.shape == a.shape and t.dtype == np.float32
    pitch = t.strides[0]
    assert t.strides[1] == 1 and pitch >= 53
    assert np.array_equal(client.read_tensor(t), a)
    assert np.array_equal(client.read(t), a)
    got = client.read_tensor(t, shape=(53, 37), strides=(1, pitch))
    assert np.array_equal(got, a.T)
    # every other row of a column block
    got = client.read_tensor(t, shape=(10, 4), strides=(2 * pitch, 1), offset=4 * 5)
    assert np.array_equal(got, a[0:20:2, 5:9])


def test_tensor_3d_permuted(client):
    a = RNG.integers(-1000, 1000, (4, 5, 6), dtype=np.int64)
    t = client.create_tensor(a)
    assert t.strides == (30, 6, 1)
    got = client.read_tensor(t, shape=(6, 4, 5), strides=(1, 30, 6))
    assert np.array_equal(got, a.transpose(2, 0, 1))
    fut = client.read_tensor_async(t, shape=(5, 4), strides=(6, 30))
    assert np.array_equal(fut.result(), a[:, :, 0].T)


def test_tensor_of_plain_buffer_and_can_read(client):
    a = np.arange(24, dtype=np.int32)
    buf = client.create(a)
    got = client.read_tensor(buf, shape=(6, 4), strides=(1, 6))
    assert np.array_equal(got, a.reshape(4, 6).T)
    assert client.can_read_tensor((4, 6), (6, 1))
    assert not client.can_read_tensor((6, 4), (1, 6))
    e = client.empty_tensor((3, 3), np.float32)
    client.write(e, np.eye(3, dtype=np.float32))
    assert np.array_equal(client.read_tensor(e), np.eye(3, dtype=np.float32))


# ---- asynchronous reads ---------------------------------------------------------


def test_read_async_sees_work_before_not_after(client, add_spv):
    n = 50000
    a = RNG.standard_normal(n, dtype=np.float32)
    b = RNG.standard_normal(n, dtype=np.float32)
    A, B = client.create(a), client.create(b)
    out = client.empty(a.nbytes, dtype=np.float32)
    k = client.kernel(add_spv, 3, push="I")
    client.launch(k, 64, [A, B, out], push=n)
    first = client.read_async(out)         # after the launch: sees a + b
    client.write(A, np.zeros(n, np.float32))
    client.launch(k, 64, [A, B, out], push=n)  # out = b
    second = client.read_async(out)
    client.write(out, np.full(n, 3, np.float32))
    third = client.read_async(out)
    assert np.array_equal(third.result(), np.full(n, 3, np.float32))
    assert np.array_equal(first.result(), a + b)
    assert np.array_equal(second.result(), b)
    assert first.done() and first.result() is first.result()


def test_read_async_many_and_poll(client):
    bufs = [client.create(np.full(1000, i, np.int32)) for i in range(20)]
    futs = [client.read_async(b) for b in bufs]
    deadline = time.monotonic() + 30
    while not all(f.done() for f in futs):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    for i, f in enumerate(futs):
        assert np.all(f.result(timeout=5) == i)


def test_read_async_error_and_close_waits(daemon):
    c = ruda.connect(daemon.socket, name="pytest-async")
    buf = c.create(np.arange(10, dtype=np.float64))
    buf.release()
    bad = c.read_async(buf, np.float64, (10,))
    with pytest.raises(ruda.InvalidHandle):
        bad.result()
    with pytest.raises(ruda.InvalidHandle):  # the same error again
        bad.result()
    good = c.read_async(c.create(np.arange(1 << 16, dtype=np.float64)))
    c.close()  # waits for the pending future first
    assert good.done()
    assert np.array_equal(good.result(), np.arange(1 << 16, dtype=np.float64))


# ---- execution ------------------------------------------------------------------


def test_streams(client, add_spv):
    assert client.stream == 0
    a = np.arange(1024, dtype=np.float32)
    with client.on_stream(3):
        assert client.stream == 3
        got = add(client, add_spv, a, a)
        client.sync()
    assert client.stream == 0
    assert np.array_equal(got, a + a)
    client.stream = 1
    assert client.stream == 1
    client.stream = 0


def test_profile(client, add_spv):
    n = 1 << 18
    a = np.ones(n, np.float32)
    A = client.create(a)
    out = client.empty(a.nbytes, dtype=np.float32)
    k = client.kernel(add_spv, 3, push="I")
    with client.profile() as p:
        assert p.duration_ns is None
        client.launch(k, 256, [A, A, out], push=n)
    assert isinstance(p.duration_ns, int) and p.duration_ns > 0
    assert p.seconds == p.duration_ns / 1e9
    w = client.profile_start()
    client.launch(k, 256, [A, A, out], push=n)
    assert client.profile_end(w) > 0
    client.profile_abandon(client.profile_start())
    assert np.all(client.read(out) == 2)


def test_exclusive_holds_other_clients(client, daemon, add_spv):
    other = ruda.connect(daemon.socket, name="pytest-other")
    try:
        x = np.arange(1000, dtype=np.float32)
        B = other.create(x)
        out = other.empty(x.nbytes, dtype=np.float32)
        k = other.kernel(add_spv, 3, push="I")
        other.sync()
        finished = threading.Event()
        result = {}

        def work():
            other.launch(k, 4, [B, B, out], push=1000)
            result["r"] = other.read(out)
            finished.set()

        with client.exclusive(10000):
            t = threading.Thread(target=work)
            t.start()
            # the other client's launch waits for the lease
            assert not finished.wait(0.5)
            mine = client.read(client.create(x))
        t.join(30)
        assert finished.is_set()
        assert np.array_equal(result["r"], 2 * x)
        assert np.array_equal(mine, x)
    finally:
        other.close()


def test_exclusive_lease_timeout(client):
    with pytest.raises(ruda.LeaseExpired, match="expired after 50 ms"):
        with client.exclusive(50):
            time.sleep(0.5)
    with client.exclusive(5000):  # and a new lease is granted afterwards
        pass


def test_threads_share_a_client(client, add_spv):
    k = client.kernel(add_spv, 3, push="I")
    errors = []

    def worker(i):
        try:
            for _ in range(5):
                a = np.full(2048, i, np.float32)
                A = client.create(a)
                out = client.empty(a.nbytes, dtype=np.float32)
                client.launch(k, 8, [A, A, out], push=2048)
                assert np.array_equal(client.read(out), 2 * a)
                A.release()
                out.release()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_introspection(client):
    props = client.properties()
    assert props["name"] and props["max_push_constants_size"] >= 128
    assert client.session_id > 0 and 1 <= client.priority <= 7
    assert client.runtime_name == "ruda"
    stats = client.daemon_stats()
    assert stats["sessions"] >= 1
    assert 0.0 <= client.utilization()["recent"] <= 1.0
    assert "closed" not in repr(client)


def test_workers_example(daemon):
    import subprocess
    import sys
    example = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "examples", "workers.py")
    r = subprocess.run([sys.executable, example, "--socket", daemon.socket, "--workers", "3",
                        "--rounds", "3", "--size", "1000"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("worker ")]
    assert len(lines) == 3 and all("all correct" in line for line in lines), r.stdout
    assert "worker-2" in r.stdout  # rudactl clients listed them
    assert "3 workers, all results correct" in r.stdout


def test_tensor_release_frees(client):
    client.sync()
    before = client.memory_usage().allocations
    t = client.create_tensor(np.ones((8, 8), np.float32))
    assert client.memory_usage().allocations == before + 1
    t.release()
    client.sync()
    assert client.memory_usage().allocations == before


def test_future_result_from_two_threads(client):
    big = np.arange(1 << 20, dtype=np.float64)
    fut = client.read_async(client.create(big))
    got = []
    threads = [threading.Thread(target=lambda: got.append(fut.result())) for _ in range(4)]
    for t in threads:
        t.start()
    fut.done()  # never blocks, whoever waits
    for t in threads:
        t.join()
    assert len(got) == 4 and all(g is got[0] for g in got)
    assert np.array_equal(got[0], big)


def test_library_lookup_order(tmp_path):
    import subprocess
    import sys
    python_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = "import ruda; print(ruda.library_path)"
    env = dict(os.environ, PYTHONPATH=python_dir)
    env.pop("RUDA_LIBRARY", None)
    # from the tree: the in-tree build
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == os.path.join(os.path.dirname(python_dir), "build",
                                            "libruda.so.1")
    # $RUDA_LIBRARY first, and a missing one is named
    env["RUDA_LIBRARY"] = str(tmp_path / "libruda-missing.so")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "libruda-missing.so" in r.stderr and "ImportError" in r.stderr
    # a copy of the package outside a tree: the dynamic linker's lookup
    import shutil
    shutil.copytree(os.path.join(python_dir, "ruda"), tmp_path / "site" / "ruda")
    env.pop("RUDA_LIBRARY")
    env["PYTHONPATH"] = str(tmp_path / "site")
    env["LD_LIBRARY_PATH"] = os.path.join(os.path.dirname(python_dir), "build")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "libruda.so.1", r.stderr
