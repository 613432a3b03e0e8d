"""In-process compile latency from Python, per bundled example: decoration (evaluating the
function, writing and checking the script) and decoration -> CUDA text (lowering and
generating CUDA as well). Medians of many repetitions, microseconds.

    python python/bench/compile_latency.py [--reps N]
"""

import argparse
import glob
import os
import statistics
import sys
import time
import types

import tirx
import tirx.compat  # noqa: F401  (the examples import `tvm.script.tirx`)
from tirx.script.frontend import PrimFunc

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def load(path):
    """The example as a module whose kernel can be rebuilt: its source is compiled once."""
    code = compile(open(path).read(), path, "exec")
    return code


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.py")) + glob.glob(os.path.join(ROOT, "examples", "bench", "*.py")))
    rows = []
    for path in paths:
        code = load(path)
        ns = {"__name__": "example", "__file__": path}
        exec(code, ns)
        kernel = next(v for v in ns.values() if isinstance(v, PrimFunc))
        func = kernel.__wrapped__
        decorate, full = [], []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            k = tirx.T.prim_func(func)
            t1 = time.perf_counter()
            src = k._parsed.lower("sm_90a").cuda_source
            t2 = time.perf_counter()
            assert src
            decorate.append(t1 - t0)
            full.append(t2 - t0)
        rows.append((os.path.relpath(path, ROOT), statistics.median(decorate) * 1e6, statistics.median(full) * 1e6))
    w = max(len(r[0]) for r in rows)
    print(f"{'example':<{w}}  decorate µs  -> CUDA µs")
    for name, d, f in rows:
        print(f"{name:<{w}}  {d:11.0f}  {f:9.0f}")
    print(f"{'median':<{w}}  {statistics.median(r[1] for r in rows):11.0f}  {statistics.median(r[2] for r in rows):9.0f}")
    print(f"{'max':<{w}}  {max(r[1] for r in rows):11.0f}  {max(r[2] for r in rows):9.0f}")


if __name__ == "__main__":
    main()
