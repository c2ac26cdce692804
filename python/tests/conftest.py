"""A real rudad for the suite: started once per session on a socket in a
temporary directory, stopped with SIGTERM at the end (and it must exit 0
and remove its socket)."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("RUDA_BUILD_DIR", os.path.join(ROOT, "build"))
sys.path.insert(0, os.path.join(ROOT, "python"))

import ruda  # noqa: E402

# what the quota test asks beyond
CLIENT_QUOTA = 64 << 20


def build_path(*parts):
    p = os.path.join(BUILD, *parts)
    if not os.path.exists(p):
        pytest.fail("%s is missing: run `make all tests` first" % p)
    return p


class Daemon:
    def __init__(self, extra=()):
        self.dir = tempfile.mkdtemp(prefix="ruda-pytest-")
        self.socket = os.path.join(self.dir, "rudad.sock")
        self.log = os.path.join(self.dir, "rudad.log")
        argv = [build_path("rudad"), "--socket", self.socket, "--log-level", "info",
                "--cache-dir", os.path.join(self.dir, "cache"), *extra]
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while True:
            if self.proc.poll() is not None:
                pytest.fail("rudad exited during start-up (%d); see %s"
                            % (self.proc.returncode, self.log))
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(self.socket)
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    pytest.fail("rudad did not listen within 30 s; see %s" % self.log)
                time.sleep(0.05)
            finally:
                s.close()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("rudad did not stop within 30 s of SIGTERM; see %s" % self.log)
        assert rc == 0, "rudad exited with %d; see %s" % (rc, self.log)
        assert not os.path.exists(self.socket), "rudad left its socket behind"
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def daemon():
    d = Daemon(["--set", "max_memory_per_client=%d" % CLIENT_QUOTA])
    yield d
    d.stop()


@pytest.fixture
def client(daemon):
    with ruda.connect(daemon.socket, name="pytest") as c:
        yield c


@pytest.fixture(scope="session")
def add_spv():
    return build_path("shaders", "add_f32.spv")


@pytest.fixture(scope="session")
def spec_fill_spv():
    return build_path("tests", "shaders", "spec_fill.spv")
