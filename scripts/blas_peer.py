#!/usr/bin/env python3
"""OpenBLAS's saxpy and sscal on N floats (10^7 unless given): the peer of
`update` and `scale_data` in `cargo bench --bench runtime`, which measures
them on 10^7 and 10^8 floats; compare at 10^8, beyond the cache.

Uses SciPy's BLAS (an OpenBLAS build, threaded over every core unless
OPENBLAS_NUM_THREADS says otherwise) and prints GB/s counted as the
runtime bench counts them: saxpy as update (read x and y, write y: three
streams), sscal as scale_data (two). Median of 15, as there. Without SciPy
it says so and exits 0.

Run: python3 scripts/blas_peer.py 100000000   (and cargo bench --bench runtime)
"""
import statistics
import sys
import time

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000_000


def median_time(f, reps=15):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    try:
        import numpy as np
        from scipy.linalg import blas
    except ImportError as e:
        print(f"no SciPy BLAS: {e}")
        return 0
    try:
        from threadpoolctl import threadpool_info

        for i in threadpool_info():
            if i.get("internal_api") == "openblas":
                print(f"OpenBLAS {i.get('version')}, {i.get('num_threads')} threads, {i.get('architecture')}")
    except ImportError:
        print("OpenBLAS (threadpoolctl not installed: thread count not shown)")
    x = np.full(N, 0.5, dtype=np.float32)
    y = np.full(N, 1.0, dtype=np.float32)
    gb = N * 4 / 1e9
    # overwrite_y: in place, as update is (saxpy returns y itself).
    out = blas.saxpy(x, y, a=-1e-6)
    if out is not y and not np.shares_memory(out, y):
        print("saxpy copied y: not an in-place update")
        return 1
    t = median_time(lambda: blas.saxpy(x, y, a=-1e-6))
    print(f"  OpenBLAS saxpy (3 streams): {3 * gb / t:>7.2f} GB/s")
    t = median_time(lambda: blas.sscal(0.999999, y))
    print(f"  OpenBLAS sscal (2 streams): {2 * gb / t:>7.2f} GB/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
