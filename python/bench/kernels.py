"""The flagship kernels on the GPU against PyTorch, in one process: row softmax, RMSNorm, the
tensor-core GEMM and the copy benches (examples/bench: tiled, ragged and TMA tiled copies), each
checked against PyTorch's result first, then timed with CUDA events (median of --iters launches
after --warmup). Memory-bound kernels report GB/s (bytes read + written) and the ratio to a
device-to-device copy of the same traffic measured in the same run; the GEMM reports TFLOP/s and
the ratio to torch.matmul (cuBLAS) on the same inputs. Each kernel and its baseline (the copy, or
torch.matmul) are timed in alternating rounds after 0.2 s of warm-up (`timed_pair`).

    python python/bench/kernels.py [--iters 50] [--only softmax,rmsnorm,gemm,copy] [--json out.json]
"""

import argparse
import json
import os
import re
import runpy
import statistics
import sys
import tempfile
import time

import torch

import tirx

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "python"))

from rmsnorm import rmsnorm  # noqa: E402
from softmax import softmax  # noqa: E402


def timed(fn, iters, warmup):
    """Median GPU time of one call, in ms. The calls are queued back to back (as `tirx bench`
    does) so that each pair of events brackets the kernel, not the CPU's launch of it."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    return statistics.median(samples(fn, iters))


def timed_pair(fa, fb, iters, warmup, rounds=5):
    """Median GPU times of fa and fb (ms), as `timed`, measured in alternating rounds after both
    have run for at least 0.2 s: the clocks settle first, and a drift of clock or power during the
    measurement touches both alike (two separate runs of one GEMM differ by up to 10% otherwise)."""
    start, n = time.perf_counter(), 0
    while n < warmup or time.perf_counter() - start < 0.2:
        fa()
        fb()
        torch.cuda.synchronize()
        n += 1
    ta, tb = [], []
    per = max(1, iters // rounds)
    for _ in range(rounds):
        ta += samples(fa, per)
        tb += samples(fb, per)
    return statistics.median(ta), statistics.median(tb)


def samples(fn, iters):
    """GPU times of iters back-to-back calls (ms each)."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for a, b in events:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in events]


def memcpy(nbytes):
    """A device-to-device copy moving nbytes in total (nbytes / 2 read, nbytes / 2 written)."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def close(got, want, rtol, atol, what):
    if not torch.allclose(got.float(), want.float(), rtol=rtol, atol=atol):
        err = (got.float() - want.float()).abs().max().item()
        raise SystemExit(f"{what}: result differs from PyTorch (max abs diff {err})")


def bench_softmax(args, rows):
    M, N = 16384, 8192
    # f32: PyTorch sums a row in another order; over 8192 terms the sums differ by ~sqrt(N) ulps.
    for dtype, tdt, tol in (("float32", torch.float32, 1e-5), ("bfloat16", torch.bfloat16, 1e-2)):
        k = tirx.compile(softmax(N, dtype))
        a = torch.randn(M, N, device="cuda", dtype=tdt) * 3
        b = torch.empty_like(a)
        k(a, b, M)
        close(b, torch.softmax(a.float(), dim=1).to(tdt), tol, tol * 1e-2, f"softmax {dtype}")
        traffic = 2 * a.numel() * a.element_size()
        t, tm = timed_pair(lambda: k(a, b, M), memcpy(traffic), args.iters, args.warmup)
        tt = timed(lambda: torch.softmax(a, dim=1), args.iters, args.warmup)
        rows.append(dict(kernel=f"softmax {dtype} {M}x{N}", ms=t, gbps=traffic / t / 1e6, memcpy_ratio=tm / t,
                         torch_ms=tt, vs_torch=tt / t))


def bench_rmsnorm(args, rows):
    M = 32768
    for H in (4096, 8192):
        k = tirx.compile(rmsnorm(H, "bfloat16"))
        x = torch.randn(M, H, device="cuda", dtype=torch.bfloat16)
        w = (torch.randn(H, device="cuda") * 0.5 + 1).to(torch.bfloat16)
        y = torch.empty_like(x)
        k(x, w, y, M, 1e-6)
        ref = torch.nn.functional.rms_norm(x.float(), (H,), w.float(), 1e-6).to(torch.bfloat16)
        close(y, ref, 1e-2, 1e-2, f"rmsnorm {H}")
        traffic = 2 * x.numel() * x.element_size() + w.numel() * w.element_size()
        t, tm = timed_pair(lambda: k(x, w, y, M, 1e-6), memcpy(traffic), args.iters, args.warmup)
        tt = timed(lambda: torch.nn.functional.rms_norm(x, (H,), w, 1e-6), args.iters, args.warmup)
        rows.append(dict(kernel=f"rmsnorm bf16 {M}x{H}", ms=t, gbps=traffic / t / 1e6, memcpy_ratio=tm / t,
                         torch_ms=tt, vs_torch=tt / t))


def gemm_kernel(example, M, N, K, **consts):
    """The GEMM example with its sizes set to M, N, K (the script's own sizes are small, for the
    simulator; the kernel takes any multiple of its tile) and its other top-level constants
    (`CTAS`, `dtype`) replaced by `consts`."""
    src = open(os.path.join(ROOT, "examples", example)).read()
    src, n = re.subn(r"^M, N, K = .*$", f"M, N, K = {M}, {N}, {K}", src, count=1, flags=re.M)
    assert n == 1, example
    for name, value in consts.items():
        src, n = re.subn(rf"^{name} = [^#\n]*", f"{name} = {value!r}", src, count=1, flags=re.M)
        assert n == 1, (example, name)
    d = tempfile.mkdtemp()
    path = os.path.join(d, example)
    with open(path, "w") as f:
        f.write(src)
    import tirx.compat  # noqa: F401  (the example imports tvm.script.tirx)

    g = runpy.run_path(path)
    return next(v for v in g.values() if isinstance(v, tirx.PrimFunc))


def bench_copy(args, rows):
    """examples/bench/{tiled,ragged,tma}_copy_*.py: B = A at the script's own size."""
    import tirx.compat  # noqa: F401  (the examples import tvm.script.tirx)

    bench = os.path.join(ROOT, "examples", "bench")
    names = sorted(f for f in os.listdir(bench) if re.match(r"(tiled|ragged|tma)_copy_.*\.py$", f))
    tdt = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
    for name in names:
        g = runpy.run_path(os.path.join(bench, name))
        k = tirx.compile(next(v for v in g.values() if isinstance(v, tirx.PrimFunc)))
        a = torch.randn(g["M"], g["N"], device="cuda").to(tdt[g["dtype"]])
        b = torch.zeros_like(a)
        k(a, b)
        if not torch.equal(a, b):
            raise SystemExit(f"{name}: B != A")
        traffic = 2 * a.numel() * a.element_size()
        t, tm = timed_pair(lambda: k(a, b), memcpy(traffic), args.iters, args.warmup)
        tt = timed(lambda: b.copy_(a), args.iters, args.warmup)
        rows.append(dict(kernel=f"{name[:-3]} {g['M']}x{g['N']}", ms=t, gbps=traffic / t / 1e6, memcpy_ratio=tm / t,
                         torch_ms=tt, vs_torch=tt / t))


def gemm_row(args, rows, k, label, shape, tin, tout):
    """C = A @ B by the compiled GEMM `k` on random inputs: checked against an f32 matmul, then
    timed against torch.matmul (alternating rounds); one row of TFLOP/s."""
    M, N, K = shape
    a = torch.randn(M, K, device="cuda", dtype=tin)
    b = torch.randn(K, N, device="cuda", dtype=tin)
    c = torch.empty(M, N, device="cuda", dtype=tout)
    k(a, b, c)
    close(c, torch.matmul(a.float(), b.float()), 2e-2, 2e-2 * K ** 0.5, label)
    t, tt = timed_pair(lambda: k(a, b, c), lambda: torch.matmul(a, b), args.iters, args.warmup)
    flops = 2 * M * N * K
    rows.append(dict(kernel=label, ms=t, tflops=flops / t / 1e9, torch_ms=tt, torch_tflops=flops / tt / 1e9,
                     vs_torch=tt / t))


def bench_gemm(args, rows):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    cases = [
        ("gemm_mma.py", torch.float16, torch.float32, {}),
        ("gemm_mma_bf16.py", torch.bfloat16, torch.bfloat16, {}),
        ("gemm_mma_pipelined.py", torch.float16, torch.float32, {}),
        ("gemm_mma_pipelined_bf16.py", torch.bfloat16, torch.float32, {}),
        ("gemm_mma_pipelined_bk64.py", torch.bfloat16, torch.bfloat16, {}),
        ("gemm_mma_pipelined_bk64.py", torch.float16, torch.float16, {"dtype": "float16"}),
    ]
    if torch.cuda.get_device_capability() >= (9, 0):  # TMA-fed, warp-specialised mma.sync (sm_90)
        cases += [
            ("gemm_mma_tma.py", torch.bfloat16, torch.bfloat16, {"CTAS": sms}),
            ("gemm_mma_tma.py", torch.float16, torch.float16, {"CTAS": sms, "dtype": "float16"}),
        ]
    for example, tin, tout, consts in cases:
        for size in (4096, 8192):
            k = tirx.compile(gemm_kernel(example, size, size, size, **consts))
            gemm_row(args, rows, k, f"{example[:-3]} {tin} -> {tout} {size}^3", (size, size, size), tin, tout)


def bench_hopper(args, rows):
    """The warp-specialised wgmma GEMM (examples/gemm_hopper.py): one persistent CTA per SM."""
    if torch.cuda.get_device_capability() < (9, 0):
        print("hopper: skipped (needs sm_90)")
        return
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for name, tin in (("bfloat16", torch.bfloat16), ("float16", torch.float16)):
        for M, N, K in ((4096, 4096, 4096), (8192, 8192, 8192), (128, 8192, 8192)):
            k = tirx.compile(gemm_kernel("gemm_hopper.py", M, N, K, CTAS=sms, dtype=name))
            gemm_row(args, rows, k, f"gemm_hopper {name} {M}x{N}x{K}", (M, N, K), tin, tin)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--only", default="softmax,rmsnorm,gemm,hopper,copy")
    ap.add_argument("--json")
    args = ap.parse_args()
    torch.manual_seed(0)
    rows = []
    for name in args.only.split(","):
        benches = {"softmax": bench_softmax, "rmsnorm": bench_rmsnorm, "gemm": bench_gemm, "hopper": bench_hopper,
                   "copy": bench_copy}
        benches[name](args, rows)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, median of {args.iters}")
    for r in rows:
        if "tflops" in r:
            print(f"{r['kernel']:<34} {r['ms']:8.3f} ms {r['tflops']:7.1f} TFLOP/s   torch {r['torch_tflops']:7.1f}   "
                  f"tirx/torch {r['vs_torch']:5.3f}")
        else:
            print(f"{r['kernel']:<34} {r['ms']:8.3f} ms {r['gbps']:7.0f} GB/s   of memcpy {r['memcpy_ratio']:5.3f}   "
                  f"torch {r['torch_ms']:7.3f} ms   torch/tirx {r['vs_torch']:5.3f}")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)


if __name__ == "__main__":
    main()
