"""Issue 32's sweep: `tirx.ops.matmul` (bf16) beside `torch.mm` (cuBLAS) in the same process, as
users call them from Python: squares 512–16384, the QKV / output / MLP projections of 7B- and
70B-class models at M = 1, 16, 128, 1024, 8192, 16384 tokens, and ragged sizes (M, N not
multiples of 128). Per point: TFLOP/s of each (host time per call, back to back: what an eager
model sees), their ratio, and where a call takes under 40 µs the ratio of device times too
(each call replayed from a CUDA graph: what a captured decode step sees); then the geometric
mean and the worst point of each.

    cd python/bench && python gemm_sweep.py [--only squares,llm,ragged,swiglu] [--tokens 1,16,...] [--json F]

``swiglu`` (not in the default): `tirx.ops.gated_mm` against PyTorch's gated MLP (`swiglu_point`).
"""

import argparse
import json
import math
import sys
import time

import torch
from ops import per_call_us  # this directory

import tirx.ops as ops

SQUARES = [512, 1024, 2048, 4096, 8192, 16384]
# (name, N, K) of y = x W: 7B (hidden 4096, MLP 11008, gate and up fused) and 70B (hidden 8192,
# grouped-query K/V heads: QKV 10240, MLP 28672).
PROJECTIONS = [
    ("7B qkv", 12288, 4096),
    ("7B out", 4096, 4096),
    ("7B gate+up", 22016, 4096),
    ("7B down", 4096, 11008),
    ("70B qkv", 10240, 8192),
    ("70B out", 8192, 8192),
    ("70B gate+up", 57344, 8192),
    ("70B down", 8192, 28672),
]
TOKENS = [1, 16, 128, 1024, 8192, 16384]
RAGGED = [(4000, 4000, 4096), (1000, 3000, 2048), (777, 1232, 4096), (3000, 5000, 1000), (100, 12344, 4096)]  # (N, K: multiples of 8, TMA's)


def graph_us(fn, calls=20):
    """Device time of one call: ``calls`` calls captured in a CUDA graph, the best of 5 replays."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, stream=s):
            for _ in range(calls):
                fn()
    torch.cuda.synchronize()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = math.inf
    for _ in range(5):
        e0.record()
        g.replay()
        e1.record()
        torch.cuda.synchronize()
        best = min(best, e0.elapsed_time(e1) * 1e3 / calls)
    return best


def timings(fns):
    """Each function's host time per call (µs), and where a call takes under 40 µs their device
    times too (graph-replayed; else None)."""
    t = {key: per_call_us(f) for key, f in fns.items()}
    return t, ({key: graph_us(f) for key, f in fns.items()} if min(t.values()) < 40 else None)


def point(name, m, n, k, rows):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
    t0 = time.perf_counter()
    got = ops.matmul(a, b)  # (compiles and tunes this shape)
    first = time.perf_counter() - t0
    want = torch.mm(a, b)
    err = (got.float() - want.float()).abs().max().item()
    t, dev_us = timings({"tirx": lambda: ops.matmul(a, b), "cublas": lambda: torch.mm(a, b)})
    r = {"name": name, "shape": [m, n, k], "us": t, "x_cublas": t["cublas"] / t["tirx"], "max_abs_diff": err, "first_call_s": first}
    if dev_us:
        r["device_us"], r["device_x_cublas"] = dev_us, dev_us["cublas"] / dev_us["tirx"]
    flop = 2 * m * n * k
    dev = f" | device x{r['device_x_cublas']:.2f}" if "device_x_cublas" in r else ""
    print(
        f"{name:12s} {m:6d}x{n:6d}x{k:6d}: tirx {flop / t['tirx'] / 1e6:7.1f} TFLOP/s ({t['tirx']:8.1f} µs) | torch.mm "
        f"{flop / t['cublas'] / 1e6:7.1f} | x{r['x_cublas']:.2f}{dev} | max |diff| {err:.3g}",
        flush=True,
    )
    rows.append(r)
    del a, b, got, want
    torch.cuda.empty_cache()


# (name, N, K) of the gated MLP's two projections: act(x Wg) * (x Wu), each K x N.
GATED = [("7B swiglu", 11008, 4096), ("70B swiglu", 28672, 8192)]
_compiled_glu = None


def swiglu_point(name, m, n, k, rows):
    """`tirx.ops.gated_mm` (one kernel: both products in one accumulator, the epilogue's
    silu(g) * u) beside PyTorch's sequence as models write it with gate and up merged
    (``h = x W_guᵀ; g, u = h.chunk(2); silu(g) * u``: one cuBLAS GEMM, h stored and reread),
    eager and under torch.compile (Inductor fuses the elementwise tail, not the GEMM)."""
    global _compiled_glu
    F = torch.nn.functional
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w_gu = torch.randn(2 * n, k, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)  # nn.Linear's (out, in)
    wg, wu = w_gu[:n], w_gu[n:]

    def torch_glu(x, w_gu):
        g, u = (x @ w_gu.t()).chunk(2, dim=-1)
        return F.silu(g) * u

    if _compiled_glu is None:
        _compiled_glu = torch.compile(torch_glu)
    got, want = ops.gated_mm(x, wg.t(), wu.t()), torch_glu(x, w_gu)
    err = (got.float() - want.float()).abs().max().item()
    fns = {"tirx": lambda: ops.gated_mm(x, wg.t(), wu.t()), "torch": lambda: torch_glu(x, w_gu), "compile": lambda: _compiled_glu(x, w_gu)}
    fns["compile"]()
    t, dev_us = timings(fns)
    r = {"name": name, "shape": [m, n, k], "us": t, "x_torch": t["torch"] / t["tirx"], "x_compile": t["compile"] / t["tirx"], "max_abs_diff": err}
    if dev_us:
        r["device_us"], r["device_x_torch"] = dev_us, dev_us["torch"] / dev_us["tirx"]
    flop = 4 * m * n * k
    dev = f" | device x{r['device_x_torch']:.2f}" if "device_x_torch" in r else ""
    print(
        f"{name:12s} {m:6d}x{n:6d}x{k:6d}: tirx {flop / t['tirx'] / 1e6:7.1f} TFLOP/s ({t['tirx']:8.1f} µs) | torch "
        f"{flop / t['torch'] / 1e6:7.1f} x{r['x_torch']:.2f} | compile {flop / t['compile'] / 1e6:7.1f} x{r['x_compile']:.2f}{dev} | max |diff| {err:.3g}",
        flush=True,
    )
    rows.append(r)
    torch.cuda.empty_cache()


def summary(rows, key):
    xs = [(r[key], r) for r in rows if key in r]
    if not xs:
        return
    geo = math.exp(sum(math.log(x) for x, _ in xs) / len(xs))
    worst, r = min(xs, key=lambda p: p[0])
    print(f"{key}: geometric mean {geo:.3f} over {len(xs)} points; worst {worst:.2f} at {r['name']} {r['shape']}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="squares,llm,ragged")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)))
    ap.add_argument("--json")
    args = ap.parse_args()
    only, tokens = args.only.split(","), [int(x) for x in args.tokens.split(",")]
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    rows = []
    if "squares" in only:
        for s in SQUARES:
            point("square", s, s, s, rows)
    if "llm" in only:
        for m in tokens:
            for name, n, k in PROJECTIONS:
                point(name, m, n, k, rows)
    if "ragged" in only:
        for m, n, k in RAGGED:
            point("ragged", m, n, k, rows)
    if "swiglu" in only:
        for m in tokens:
            for name, n, k in GATED:
                swiglu_point(name, m, n, k, rows)
    for key in ("x_cublas", "device_x_cublas", "x_torch", "x_compile", "device_x_torch"):
        summary(rows, key)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
