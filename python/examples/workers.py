#!/usr/bin/env python3
"""Eight worker processes share one rudad.

Each worker connects on its own (a connection is never shared across
fork), compiles add_f32.spv (rudad compiles it once; the others get it from
its cache), adds random float32 vectors on the GPU, checks every result
against numpy and prints one line. Once all are connected they start
together, and the parent shows them at work with `rudactl clients` (they
stay connected until it has).

    python3 python/examples/workers.py --socket /tmp/rudad.sock

Options: --workers N, --rounds N, --size N (floats per vector), --spirv PATH.
Exit status: 0 when every result was right.
"""

import argparse
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
TREE = os.path.dirname(os.path.dirname(HERE))
# run from the source tree without installing: python/ is the package's home
sys.path.insert(0, os.path.dirname(HERE))

import ruda  # noqa: E402


def find(candidates):
    for c in candidates:
        if c and os.path.exists(c):
            return c
    return None


def worker(index, socket, spirv, rounds, size, connected, shown):
    with ruda.connect(socket, name="worker-%d" % index) as client:
        kernel = client.kernel(spirv, bindings=3, push="I")  # push: uint n
        rng = np.random.default_rng(index)
        connected.wait()  # all start together
        wrong = 0
        t0 = time.perf_counter()
        with client.profile() as gpu:
            for _ in range(rounds):
                a = rng.standard_normal(size, dtype=np.float32)
                b = rng.standard_normal(size, dtype=np.float32)
                with client.create(a) as A, client.create(b) as B, \
                        client.empty(a.nbytes, dtype=np.float32) as out:
                    # add_f32.comp: 256 invocations per workgroup
                    client.launch(kernel, -(-size // 256), [A, B, out], push=size)
                    wrong += not np.array_equal(client.read(out), a + b)
        wall = time.perf_counter() - t0
        shown.wait()  # stay connected until the parent has listed the clients
        line = "worker %d: pid %d, session %d: %d launches of %d floats, %s, %.0f ms " \
            "(profile window %.1f ms)\n" % (
                index, os.getpid(), client.session_id, rounds, size,
                "all correct" if not wrong else "%d WRONG" % wrong, wall * 1e3,
                gpu.duration_ns / 1e6)
        sys.stdout.flush()
        os.write(sys.stdout.fileno(), line.encode())  # one write: lines do not mix
    sys.exit(1 if wrong else 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--socket", default=None,
                   help="rudad's socket (default: $RUDA_SOCKET, else the system's)")
    p.add_argument("--workers", type=int, default=8)
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--size", type=int, default=1 << 16)
    p.add_argument("--spirv", default=find([
        os.path.join(TREE, "build", "shaders", "add_f32.spv"),
        "/usr/share/ruda/shaders/add_f32.spv", "/usr/local/share/ruda/shaders/add_f32.spv"]))
    args = p.parse_args()
    if not args.spirv:
        p.error("add_f32.spv not found: give --spirv PATH")

    # fail early, in one line, if there is no rudad to talk to
    try:
        with ruda.connect(args.socket, name="workers-probe") as probe:
            print("rudad at %s, device %s" % (
                args.socket or os.environ.get("RUDA_SOCKET", "the default socket"),
                probe.properties()["name"]), flush=True)
    except ruda.Error as e:
        sys.exit("workers.py: %s" % e)

    connected = mp.Barrier(args.workers + 1)
    shown = mp.Barrier(args.workers + 1)
    procs = [mp.Process(target=worker, args=(i, args.socket, args.spirv, args.rounds,
                                             args.size, connected, shown))
             for i in range(args.workers)]
    for proc in procs:
        proc.start()
    connected.wait(timeout=60)
    time.sleep(0.2)  # let them get going

    rudactl = find([os.path.join(TREE, "build", "rudactl"), shutil.which("rudactl")])
    if rudactl:
        cmd = [rudactl] + (["--socket", args.socket] if args.socket else []) + ["clients"]
        print("$ rudactl clients", flush=True)
        subprocess.run(cmd, check=False)
    else:
        print("(rudactl not found: `rudactl clients` in another terminal shows the workers)")
    sys.stdout.flush()
    shown.wait(timeout=600)

    for proc in procs:
        proc.join()
    failed = [i for i, proc in enumerate(procs) if proc.exitcode != 0]
    print("%d workers, %s" % (args.workers, "all results correct" if not failed
                              else "workers %s failed" % failed))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
