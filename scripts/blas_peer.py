#!/usr/bin/env python3
"""A blob's math against OpenBLAS, same machine, same run, same way timed.

blobflow's `asum_data`, `sumsq_data`, `update` and `scale_data` on N
floats (`examples/blob_ops.rs`) beside OpenBLAS's `sasum`, `sdot(x, x)`
(what Caffe's `sumsq_data` calls), `saxpy` in place (Caffe's `Update`)
and `sscal` (`scale_data`), through SciPy's OpenBLAS. Each figure is the
median over 7 batches of calls of at least 20 ms each; GB/s counts every
stream (asum and sumsq read one, update reads two and writes one, scale
reads and writes one). Each side runs alone with 1, then 2 threads
(RAYON_NUM_THREADS, OPENBLAS_NUM_THREADS), at 10^6, 10^7 and 10^8
floats, the two sides taking turns for --rounds rounds (default 3); the
figures are each side's median over the rounds, and the ratio is
blobflow's GB/s over OpenBLAS's. On a shared VM one round of each moved
a row by up to 0.4x between runs; turns and medians keep a neighbour's
burst from landing on one side only.

Needs numpy, scipy and threadpoolctl: installed under target/python-blas
if pip can; without them it says so and exits 0.

Run: python3 scripts/blas_peer.py [--quick] [--rounds R] [--blobflow PATH-TO-blob_ops]
  --quick: 10^5 floats, one thread, one round (a check that both sides run).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SITE = os.path.join(ROOT, "target", "python-blas")
STREAMS = {"asum": 1, "sumsq": 1, "update": 3, "scale": 2}


def load_peer():
    """numpy and scipy's BLAS, installed under target/ where missing."""
    try:
        import numpy  # noqa: F401
        import scipy.linalg.blas  # noqa: F401
    except ImportError:
        if not os.path.isdir(os.path.join(SITE, "scipy")):
            pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                   "--target", SITE, "numpy", "scipy", "threadpoolctl"]
            if subprocess.run(pip).returncode != 0:
                return False
        sys.path.insert(0, SITE)
    try:
        import numpy  # noqa: F401
        import scipy.linalg.blas  # noqa: F401
    except ImportError:
        return False
    return True


def seconds_per_call(f):
    """Median over 7 batches of at least 20 ms, as examples/blob_ops.rs."""
    f()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < 0.02:
        f()
        calls += 1
    calls = max(calls, 1)
    batches = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(calls):
            f()
        batches.append((time.perf_counter() - t) / calls)
    return statistics.median(batches)


def measure_openblas(n):
    """Runs in a child whose OPENBLAS_NUM_THREADS was set before import."""
    sys.path.insert(0, SITE)
    import numpy as np
    from scipy.linalg import blas

    x = np.full(n, 1e-9, dtype=np.float32)
    y = np.full(n, 0.5, dtype=np.float32)
    out = blas.saxpy(x, y, a=-1.0)
    if not np.shares_memory(out, y):
        raise SystemExit("saxpy copied y: not an in-place update")
    for op, f in [("asum", lambda: blas.sasum(y)), ("sumsq", lambda: blas.sdot(y, y)),
                  ("update", lambda: blas.saxpy(x, y, a=-1.0)), ("scale", lambda: blas.sscal(0.999999, y))]:
        print(json.dumps({"op": op, "n": n, "seconds": seconds_per_call(f)}))


def openblas_info():
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "OpenBLAS"
    for i in threadpool_info():
        if i.get("internal_api") == "openblas":
            return f"OpenBLAS {i.get('version')} ({i.get('architecture')})"
    return "OpenBLAS"


def run_json(cmd, env):
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stderr}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    if any(r.get("debug_build") for r in rows):
        print("(blobflow's side is a debug build: this checks that both sides run; its figures are not speed)")
    return {r["op"]: r["seconds"] for r in rows}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="turns each side takes (medians reported)")
    ap.add_argument("--blobflow", help="a built blob_ops example (default: cargo run --release)")
    ap.add_argument("--peer-child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.peer_child:
        measure_openblas(args.peer_child)
        return 0
    if not load_peer():
        print("blas_peer: numpy and scipy cannot be installed here; nothing compared")
        return 0
    ours = [args.blobflow] if args.blobflow else [
        "cargo", "run", "-q", "--release", "--example", "blob_ops", "--"]
    sizes = [100_000] if args.quick else [1_000_000, 10_000_000, 100_000_000]
    threads = [1] if args.quick else [1, 2]
    rounds = 1 if args.quick else max(1, args.rounds)
    print(f"{openblas_info()} against blobflow's blob ops, f32; GB/s counts every stream; "
          f"medians of {rounds} alternating round(s)")
    print(f"{'op':<8} {'n':>6} {'threads':>7} {'blobflow':>10} {'OpenBLAS':>10} {'ratio':>6}")
    worst = None
    for t in threads:
        env = dict(os.environ, RAYON_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                   PYTHONPATH=os.pathsep.join([SITE] + sys.path))
        for n in sizes:
            peers, mines = [], []
            for _ in range(rounds):
                peers.append(run_json([sys.executable, __file__, "--peer-child", str(n)], env))
                mines.append(run_json(ours + [str(n)], env))
            peer = {op: statistics.median(r[op] for r in peers) for op in STREAMS}
            mine = {op: statistics.median(r[op] for r in mines) for op in STREAMS}
            for op, streams in STREAMS.items():
                gb = streams * n * 4 / 1e9
                ratio = peer[op] / mine[op]
                worst = ratio if worst is None else min(worst, ratio)
                print(f"{op:<8} {n:>6.0e} {t:>7} {gb / mine[op]:>7.1f} GB/s {gb / peer[op]:>7.1f} GB/s {ratio:>5.2f}x")
    print(f"lowest ratio: {worst:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
