"""Steady-state GEMM throughput at the GPU's power cap: an mma.sync GEMM example
(examples/gemm_mma_pipelined_bk64.py, or --example gemm_mma_tma.py) and torch.matmul, each run back to back for --seconds, with
the SM clock and board power sampled by nvidia-smi while it runs. kernels.py times short
alternating rounds instead; this shows where each settles when it has the GPU to itself.
``--attention-fp8 D``: instead, `tirx.ops.scaled_dot_product_attention` on e4m3 inputs (16 heads
of --size queries and keys, head dim D, the tuner's choice), in bursts of 20 calls after an idle
second (as the tuner and short benchmarks time) and back to back for --seconds.

    python python/bench/sustained.py [--size 8192] [--seconds 3] [--dtype bfloat16] [--example gemm_mma_tma.py] [--attention-fp8 128]
"""

import argparse
import os
import subprocess
import sys
import threading
import time

import torch

import tirx

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernels import gemm_kernel  # noqa: E402


def sustained(label, fn, flops, seconds):
    fn()
    torch.cuda.synchronize()
    samples, stop = [], threading.Event()

    def poll():
        q = ["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits"]
        while not stop.is_set():
            samples.append(subprocess.run(q, capture_output=True, text=True).stdout.strip())
            time.sleep(0.2)

    th = threading.Thread(target=poll)
    th.start()
    start, n = time.time(), 0
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    while time.time() - start < seconds:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
        n += 10
    b.record()
    torch.cuda.synchronize()
    stop.set()
    th.join()
    ms = a.elapsed_time(b) / n
    late = samples[len(samples) // 2:]  # the second half: settled
    mhz = [float(s.split(",")[0]) for s in late if s]
    watts = [float(s.split(",")[1]) for s in late if s]
    print(f"{label:<34} {flops / ms / 1e9:7.1f} TFLOP/s over {seconds} s; SM clock {min(mhz):.0f}-{max(mhz):.0f} MHz, "
          f"{sum(watts) / len(watts):.0f} W")
    return ms


def burst(label, fn, flops, calls=20):
    """Throughput of ``calls`` back-to-back calls after an idle second (clocks at their boost)."""
    time.sleep(1.0)
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(calls):
        fn()
    b.record()
    torch.cuda.synchronize()
    ms = a.elapsed_time(b) / calls
    print(f"{label:<34} {flops / ms / 1e9:7.1f} TFLOP/s in a burst of {calls} calls after an idle second")
    return ms


def attention_fp8(seq, d, seconds):
    """FP8 attention (per-tensor descales 1), burst and sustained."""
    import tirx.ops as ops

    q, k, v = (torch.randn(1, 16, seq, d, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    fn = lambda: ops.scaled_dot_product_attention(q, k, v, q_descale=1.0, k_descale=1.0, v_descale=1.0)  # noqa: E731
    fn()  # (the tuner's choice)
    flops = 4 * 16 * seq * seq * d
    print(f"{torch.cuda.get_device_name()}, FP8 attention 16 heads x {seq} x {seq}, d = {d}")
    burst("tirx fp8 attention", fn, flops)
    sustained("tirx fp8 attention", fn, flops, seconds)
    burst("tirx fp8 attention", fn, flops)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float16"))
    ap.add_argument("--example", default="gemm_mma_pipelined_bk64.py",
                    choices=("gemm_mma_pipelined_bk64.py", "gemm_mma_tma.py"))
    ap.add_argument("--attention-fp8", type=int, metavar="D", help="FP8 attention of head dim D instead of the GEMMs")
    args = ap.parse_args()
    if args.attention_fp8:
        return attention_fp8(args.size, args.attention_fp8, args.seconds)
    n, dt = args.size, getattr(torch, args.dtype)
    consts = {"dtype": args.dtype}
    if args.example == "gemm_mma_tma.py":  # persistent: one CTA per SM
        consts["CTAS"] = torch.cuda.get_device_properties(0).multi_processor_count
    k = tirx.compile(gemm_kernel(args.example, n, n, n, **consts))
    a = torch.randn(n, n, device="cuda", dtype=dt)
    b = torch.randn(n, n, device="cuda", dtype=dt)
    c = torch.empty(n, n, device="cuda", dtype=dt)
    flops = 2 * n**3
    print(f"{torch.cuda.get_device_name()}, {args.dtype} {n}^3")
    t = sustained(args.example[:-3], lambda: k(a, b, c), flops, args.seconds)
    tt = sustained("torch.matmul", lambda: torch.matmul(a, b), flops, args.seconds)
    print(f"tirx/torch {tt / t:.3f}")


if __name__ == "__main__":
    main()
