"""Launch overhead of a tiny kernel called from Python on PyTorch CUDA tensors, against a
PyTorch op on tensors of the same size, measured in the same process: host time per call
(median over batches of calls, each batch followed by one synchronize), microseconds.

    python python/bench/launch_overhead.py [--calls N] [--batches N]
"""

import argparse
import statistics
import time

import torch

import tirx
from tirx import T, Tx


def tiny():
    @T.prim_func
    def add_one(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (32,), "float32")
        B = T.match_buffer(B_ptr, (32,), "float32")
        T.device_entry()
        T.cta_id([1])
        T.lane_id([32])
        tid = T.thread_id([32])
        B[tid] = A[tid] + 1.0

    return tirx.compile(add_one)


def per_call(fn, calls, batches):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out), min(out), max(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--batches", type=int, default=20)
    args = ap.parse_args()
    k = tiny()
    a = torch.randn(32, device="cuda")
    b = torch.empty_like(a)
    k(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a + 1)
    rows = [
        ("tirx kernel(a, b)", per_call(lambda: k(a, b), args.calls, args.batches)),
        ("torch.add(a, 1, out=b)", per_call(lambda: torch.add(a, 1, out=b), args.calls, args.batches)),
        ("torch: b = a + 1", per_call(lambda: a + 1, args.calls, args.batches)),
    ]
    print(f"{torch.cuda.get_device_name()}; {args.batches} batches of {args.calls} calls; µs per call (median, min, max)")
    for name, (med, lo, hi) in rows:
        print(f"{name:<26} {med:7.2f}  {lo:7.2f}  {hi:7.2f}")


if __name__ == "__main__":
    main()
