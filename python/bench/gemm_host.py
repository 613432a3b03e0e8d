"""Where a small GEMM call's microseconds go, on the GPU: per shape, `tirx.ops.matmul` and
`torch.mm` back to back (host time per call), the host time to queue calls without waiting
(what the Python and the launch cost), the device time (CUDA graph), the eager kernels' own
durations and the idle gaps between them (torch.profiler); then, for the
first shape, the steps of the call timed alone and the Python profile of many calls.

    cd python/bench && python gemm_host.py [--shapes 128x4096x4096,100x12344x4096] [--profile]

(`TIRX_AUTOTUNE_VERBOSE=1` prints the designs tried and the choice.)
"""

import argparse
import cProfile
import math
import pstats
import time

import torch
from gemm_sweep import graph_us
from ops import per_call_us

import tirx.ops as ops
from tirx.ops import _common as c


def queue_us(fn, calls=64):
    """Host time to queue one call (no wait: fewer calls than the launch queue holds), best of 9."""
    best = math.inf
    for _ in range(9):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
    torch.cuda.synchronize()
    return best


def kernel_times(fn, calls=50):
    """(mean kernel µs, mean idle µs between consecutive kernels, kernels a call) in eager, back to back."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    ev = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA), key=lambda e: e.time_range.start)
    if not ev:
        return math.nan, math.nan, 0
    busy = sum(e.time_range.elapsed_us() for e in ev)
    gaps = [b.time_range.start - a.time_range.end for a, b in zip(ev, ev[1:])]
    return busy / calls, sum(gaps) / max(1, len(gaps)), len(ev) / calls


def shape_row(m, n, k):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
    ops.matmul(a, b)
    fns = {"tirx": lambda: ops.matmul(a, b), "torch.mm": lambda: torch.mm(a, b)}
    for name, f in fns.items():
        per, q, dev = per_call_us(f), queue_us(f), graph_us(f)
        kt, gap, per_call_kernels = kernel_times(f)
        print(
            f"{m}x{n}x{k} {name:9s}: per call {per:6.1f} µs | queue {q:5.1f} µs | graph {dev:6.1f} µs | "
            f"eager kernels {kt:6.1f} µs ({per_call_kernels:.0f} a call), gap {gap:5.1f} µs",
            flush=True,
        )
    return a, b


def steps(a, b):
    """The tirx call's steps, each alone (host time, queued)."""
    m, n = a.shape[0], b.shape[1]
    plan = c.signature_plan((a, b), ("mm", "", None, ""), lambda: None)
    out = a.new_empty((m, n))
    key = ("mm", "", None, "")
    rows = {
        "ops.matmul": lambda: ops.matmul(a, b),
        "plan(a, b)": lambda: plan(a, b),
        "signature lookup": lambda: c.signature_plan((a, b), key, lambda: None),
        "new_empty": lambda: a.new_empty((m, n)),
        "is_torch + compiling + wants_grad": lambda: (c.is_torch(a), c.compiling(), c.wants_grad(a), c.wants_grad(b)),
        "torch.empty((m, n))": lambda: torch.empty((m, n), device="cuda", dtype=a.dtype),
    }
    from tirx.ops.matmul import _ctas, _majors, _with_workspace, matmul_kernel

    a_major, b_major = _majors(a, b)
    tuned = matmul_kernel(m=m, n=n, k=a.shape[1], dtype="bfloat16", ctas=_ctas(a), activation="", a_major=a_major, b_major=b_major)
    kernel, launcher, fast = tuned.kernel, tuned.launcher(), tuned.kernel.launcher()
    fixed = tuned.launcher(fixed_signature=True)
    fixed(a, b, out)  # (its first call checked)
    if kernel is not None:
        args = _with_workspace(kernel, (a, b, out))
        dev = a.get_device()
        stream, ptrs = torch._C._cuda_getCurrentRawStream(dev), [x.data_ptr() for x in args]
        rows |= {
            "tuned launcher (out given)": lambda: launcher(a, b, out),
            "tuned launcher, fixed signature": lambda: fixed(a, b, out),
            "workspace (_with_workspace)": lambda: _with_workspace(kernel, (a, b, out)),
            "kernel launcher, args ready": lambda: fast(*args),
            "native call_torch, args ready": lambda: kernel._l.call_torch(args),
            "native launch, pointers ready": lambda: kernel._l.launch(dev, stream, ptrs),
            "data_ptr of each + raw stream": lambda: ([x.data_ptr() for x in args], torch._C._cuda_getCurrentRawStream(dev)),
            "new_empty, dtype given": lambda: a.new_empty((m, n), dtype=torch.bfloat16),
            "get_device + raw stream + capturing": lambda: (
                torch._C._cuda_getCurrentRawStream(a.get_device()),
                torch._C._cuda_isCurrentStreamCapturing(),
            ),
        }
    best = {name: min(queue_us(f, 200) for _ in range(3)) for name, f in rows.items()}  # (then again, in turn: drift)
    for _ in range(2):
        for name, f in rows.items():
            best[name] = min(best[name], queue_us(f, 200))
    for name, us in best.items():
        print(f"  step {name:36s} {us:6.2f} µs", flush=True)
    del out


def profile(a, b, calls=3000):
    pr = cProfile.Profile()
    torch.cuda.synchronize()
    pr.enable()
    for _ in range(calls):
        ops.matmul(a, b)
        if _ % 64 == 63:
            torch.cuda.synchronize()
    pr.disable()
    torch.cuda.synchronize()
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="1x4096x4096,16x4096x4096,128x4096x4096,100x12344x4096,512x512x512")
    p.add_argument("--profile", action="store_true")
    args = p.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    first = None
    for s in args.shapes.split(","):
        m, n, k = map(int, s.split("x"))
        ab = shape_row(m, n, k)
        first = first or ab
    steps(*first)
    if args.profile:
        profile(*first)


if __name__ == "__main__":
    main()
