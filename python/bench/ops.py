"""`tirx.ops` against PyTorch in one process, called from Python as users call them (each call
a new output, back to back; host time per call over batches that end in one synchronize, so a
call's launch cost counts where it exceeds the kernel): softmax, log_softmax, rms_norm and
layer_norm beside PyTorch eager and `torch.compile` at seven shapes (one of at most 64k elements,
ragged rows of 5120 and 32000, rows of 262144 streamed through the registers), with GB/s (bytes
read + written) and the ratio to a device copy of the same bytes; matmul beside `torch.mm` (cuBLAS)
in TFLOP/s, with the configuration the autotuner chose for each shape; addmm with a fused GELU
beside addmm + gelu (eager, compiled); FP8 `scaled_mm` beside torch._scaled_mm; `grouped_mm` beside
torch._grouped_mm, `scaled_grouped_mm` (FP8, row-wise scales) beside torch._scaled_grouped_mm. Each
result is checked against PyTorch's first.

    python python/bench/ops.py [--only softmax,log_softmax,rms_norm,layer_norm,backward,matmul,epilogue,scaled_mm,grouped,blocks] [--json out.json]

(``blocks``: block-scaled FP8 at DeepGEMM's shapes, not in the default set.)
"""

import argparse
import json
import sys
import time

import torch
from accuracy import block_scaled_product, errors  # this directory
from launch_overhead import per_call  # this directory

import tirx.ops as ops

ROW_SHAPES = [(16, 4096), (4096, 4096), (16384, 2048), (8192, 8192), (4096, 5120), (2048, 32000), (128, 262144)]
MM_SHAPES = [
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (128, 8192, 8192),
    (4000, 4096, 4096),
    (8, 4096, 4096),
    # decode-time shapes (split-K): 7B's QKV / MLP at 1 and 16 tokens, a small square with a long K
    (1, 4096, 4096),
    (16, 11008, 4096),
    (16, 4096, 11008),
    (1024, 1024, 8192),
]


def per_call_us(fn, batches=7):
    """Median host time of one call (µs), back to back, with enough calls per batch for ~20 ms."""
    fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    calls = max(5, min(2000, int(0.02 / max(time.perf_counter() - t0, 1e-6))))
    return per_call(fn, calls, batches)[0]


def copy_us(nbytes):
    """A device-to-device copy moving ``nbytes`` (half read, half written)."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return per_call_us(lambda: dst.copy_(src))


def row_ops():
    """Per op: (tirx, eager, compiled), each called as f(x, w) (softmax ignores w)."""

    def softmax(x, w):
        return torch.nn.functional.softmax(x, -1)

    def log_softmax(x, w):
        return torch.nn.functional.log_softmax(x, -1)

    def rms_norm(x, w):
        return torch.nn.functional.rms_norm(x, [x.shape[-1]], w, 1e-6)

    def layer_norm(x, w):
        return torch.nn.functional.layer_norm(x, [x.shape[-1]], w, w, 1e-5)

    return {
        "softmax": (lambda x, w: ops.softmax(x), softmax, torch.compile(softmax)),
        "log_softmax": (lambda x, w: ops.log_softmax(x), log_softmax, torch.compile(log_softmax)),
        "rms_norm": (lambda x, w: ops.rms_norm(x, [x.shape[-1]], w, 1e-6), rms_norm, torch.compile(rms_norm)),
        "layer_norm": (lambda x, w: ops.layer_norm(x, [x.shape[-1]], w, w, 1e-5), layer_norm, torch.compile(layer_norm)),
    }


def bench_rows(name, mine, eager, compiled, rows):
    for shape in ROW_SHAPES:
        x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
        w = torch.rand(shape[-1], device="cuda", dtype=torch.bfloat16) + 0.5
        want = eager(x.float(), w.float()).to(x.dtype)
        got = mine(x, w)
        torch.testing.assert_close(got, want, rtol=2**-7, atol=1e-6)
        nbytes = 2 * x.numel() * x.element_size()
        t = {"tirx": per_call_us(lambda: mine(x, w)), "eager": per_call_us(lambda: eager(x, w)), "compile": per_call_us(lambda: compiled(x, w))}
        t["copy"] = copy_us(nbytes)
        r = {"op": name, "shape": list(shape), "us": t, "gbps": {k: nbytes / v / 1e3 for k, v in t.items()}}
        r["vs_eager"], r["vs_compile"], r["of_copy"] = t["eager"] / t["tirx"], t["compile"] / t["tirx"], t["copy"] / t["tirx"]
        rows.append(r)
        print(
            f"{name:8s} {str(shape):14s} tirx {t['tirx']:8.1f} µs {r['gbps']['tirx']:7.0f} GB/s | eager {t['eager']:8.1f} | "
            f"compile {t['compile']:8.1f} | copy {t['copy']:8.1f} | x eager {r['vs_eager']:.2f} x compile {r['vs_compile']:.2f} "
            f"of copy {r['of_copy']:.2f}",
            flush=True,
        )


def bench_backward(rows):
    """softmax_backward / log_softmax_backward (read y and dy, write dx) beside PyTorch's own
    (`torch.ops.aten._softmax_backward_data`, `_log_softmax_backward_data`)."""
    aten = torch.ops.aten
    for name, mine, theirs, fwd in (
        ("softmax_bwd", ops.softmax_backward, aten._softmax_backward_data, torch.softmax),
        ("log_softmax_bwd", ops.log_softmax_backward, aten._log_softmax_backward_data, torch.log_softmax),
    ):
        for shape in ROW_SHAPES[1:]:
            x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
            y = fwd(x, -1)
            dy = torch.randn_like(x)
            got = mine(dy, y)
            want = theirs(dy.float(), y.float(), -1, torch.float32).to(x.dtype)
            torch.testing.assert_close(got, want, rtol=2**-6, atol=2**-7)
            nbytes = 3 * x.numel() * x.element_size()
            t = {"tirx": per_call_us(lambda: mine(dy, y)), "eager": per_call_us(lambda: theirs(dy, y, -1, x.dtype))}
            t["copy"] = copy_us(nbytes)
            r = {"op": name, "shape": list(shape), "us": t, "gbps": {k: nbytes / v / 1e3 for k, v in t.items()}}
            r["vs_eager"], r["of_copy"] = t["eager"] / t["tirx"], t["copy"] / t["tirx"]
            rows.append(r)
            print(
                f"{name:15s} {str(shape):14s} tirx {t['tirx']:8.1f} µs {r['gbps']['tirx']:7.0f} GB/s | eager {t['eager']:8.1f} | "
                f"copy {t['copy']:8.1f} | x eager {r['vs_eager']:.2f} of copy {r['of_copy']:.2f}",
                flush=True,
            )


def bench_matmul(rows):
    mod = sys.modules["tirx.ops.matmul"]
    for m, n, k in MM_SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        t0 = time.perf_counter()
        got = ops.matmul(a, b)  # compiles and autotunes this shape
        first = time.perf_counter() - t0
        torch.testing.assert_close(got, torch.mm(a, b), rtol=2**-6, atol=0.5)
        tuned = mod.matmul_kernel(m=m, n=n, k=k, dtype="bfloat16", ctas=mod._ctas(a))
        t = {"tirx": per_call_us(lambda: ops.matmul(a, b)), "cublas": per_call_us(lambda: torch.mm(a, b))}
        splits = 4 if m <= 1024 and k // 64 % 4 == 0 else 1  # (split-K, opt-in: its calls timed beside)
        if splits > 1:
            t["tirx_split_k"] = per_call_us(lambda: ops.matmul(a, b, split_k=splits))
        flop = 2 * m * n * k
        r = {"op": "matmul", "shape": [m, n, k], "us": t, "tflops": {key: flop / v / 1e6 for key, v in t.items()}}
        r["vs_cublas"], r["first_call_s"], r["autotune"], r["splits"] = t["cublas"] / t["tirx"], first, tuned.explain(), splits
        rows.append(r)
        print(
            f"matmul {m}x{n}x{k}: tirx {r['tflops']['tirx']:6.1f} TFLOP/s ({t['tirx']:.1f} µs) | torch.mm "
            f"{r['tflops']['cublas']:6.1f} | x cuBLAS {r['vs_cublas']:.2f} | split_k={splits} {r['tflops'].get('tirx_split_k', 0):6.1f} | first call (compile + tune) {first:.1f} s",
            flush=True,
        )
        print("  " + tuned.explain().replace("\n", "\n  "), flush=True)


def bench_epilogue(rows):
    """addmm with a fused GELU (tanh form) beside PyTorch's addmm then gelu, eager and compiled."""
    act = lambda bias, a, b: torch.nn.functional.gelu(torch.addmm(bias, a, b), approximate="tanh")  # noqa: E731
    compiled = torch.compile(act)
    for m, n, k in [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 6144, 4096)]:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / 64
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        got = ops.addmm(bias, a, b, activation="gelu_tanh")
        torch.testing.assert_close(got.float(), act(bias, a, b).float(), rtol=2**-6, atol=2**-5)
        t = {"tirx": per_call_us(lambda: ops.addmm(bias, a, b, activation="gelu_tanh")), "eager": per_call_us(lambda: act(bias, a, b))}
        t["compile"] = per_call_us(lambda: compiled(bias, a, b))
        flop = 2 * m * n * k
        r = {"op": "addmm_gelu", "shape": [m, n, k], "us": t, "tflops": {key: flop / v / 1e6 for key, v in t.items()}}
        rows.append(r)
        print(f"addmm+gelu {m}x{n}x{k}: " + " | ".join(f"{key} {v:6.1f}" for key, v in r["tflops"].items()) + " TFLOP/s", flush=True)


def bench_scaled_mm(rows):
    """FP8 e4m3 `scaled_mm` (per-tensor scales; DeepGEMM's block scales) beside torch._scaled_mm
    (cuBLASLt), with and without fast accumulation; bf16 out."""
    for m, n, k in [(4096, 4096, 4096), (8192, 8192, 8192), (16384, 6144, 4096), (128, 8192, 8192), (16, 8192, 8192)]:
        a = (torch.randn(m, k, device="cuda") / 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") / 2).to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
        ba = torch.rand(m, k // 128, device="cuda") + 0.5
        bb = torch.rand(n // 128, k // 128, device="cuda") + 0.5
        t, err = {}, {}
        for fast in (False, True):
            want = torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
            got = ops.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)
            err[fast] = (got.float() - want.float()).abs().max().item()
            t[f"tirx{'_fast' if fast else ''}"] = per_call_us(lambda: ops.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
            t[f"cublas{'_fast' if fast else ''}"] = per_call_us(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast))
        ops.scaled_mm(a, b, ba, bb, out_dtype=torch.bfloat16)
        t["tirx_blocks"] = per_call_us(lambda: ops.scaled_mm(a, b, ba, bb, out_dtype=torch.bfloat16))
        flop = 2 * m * n * k
        r = {"op": "scaled_mm", "shape": [m, n, k], "us": t, "tflops": {key: flop / v / 1e6 for key, v in t.items()}, "max_err": err}
        line = " | ".join(f"{key} {v:6.1f}" for key, v in r["tflops"].items())
        if min(t.values()) < 60:  # (host-bound calls: the device's times too, each call replayed from a CUDA graph)
            from gemm_sweep import graph_us  # this directory

            dev = {
                f"tirx{'_fast' if fast else ''}": graph_us(lambda: ops.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)) for fast in (False, True)
            }
            dev.update({f"cublas{'_fast' if fast else ''}": graph_us(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)) for fast in (False, True)})
            r["device_us"] = dev
            line += " | device µs " + " ".join(f"{key} {v:.1f}" for key, v in dev.items())
        rows.append(r)
        print(f"scaled_mm {m}x{n}x{k}: {line} TFLOP/s | max |err| {err}", flush=True)


# DeepGEMM's shapes (M, N, K) and its published block-scaled FP8 TFLOP/s on an H800 (its README's
# table when it had one): figures of another card, not measured here.
DEEPGEMM = [
    (64, 2112, 7168, 206),
    (64, 7168, 16384, 336),
    (128, 7168, 16384, 645),
    (128, 4096, 7168, 533),
    (4096, 2112, 7168, 1058),
    (4096, 24576, 1536, 990),
    (4096, 32768, 512, 590),
    (4096, 7168, 16384, 1358),
    (4096, 4096, 7168, 1304),
    (4096, 7168, 2048, 1025),
]


def _torch_blockwise(a, b, ba, bb, want):
    """torch._scaled_mm with DeepGEMM's block scales (cuBLASLt's 1 x 128 and 128 x 128 scaling,
    where this PyTorch takes them), in the scales' layouts it may ask for: a call and the layout it
    took, or None and why."""
    bbt = bb.t()  # (K / 128, N / 128): b is (K, N), column-major
    for sa_, sb_ in ((ba, bbt), (ba.t().contiguous().t(), bbt.contiguous()), (ba.t().contiguous().t(), bbt), (ba, bbt.contiguous())):
        try:
            got = torch._scaled_mm(a, b, sa_, sb_, out_dtype=torch.bfloat16)
        except (RuntimeError, ValueError) as e:
            why = str(e).splitlines()[0][:160]
            continue
        err = errors(got, want)[0]
        if err < 2e-2:  # (bf16's rounding: ~4e-3; scales read in another layout: ~1)
            layout = f"scales {tuple(sa_.shape)}:{sa_.stride()}, {tuple(sb_.shape)}:{sb_.stride()}; rel err {err:.2g}"
            return (lambda: torch._scaled_mm(a, b, sa_, sb_, out_dtype=torch.bfloat16)), layout
        why = f"ran, but not as block scales (relative error {err:.2g} against the dequantised product)"
    return None, why


def bench_blocks(rows):
    """FP8 e4m3 `scaled_mm` with DeepGEMM's block scales (a row's per 128 of K; a 128 x 128 block's
    of B) at DeepGEMM's shapes, per call and device time (CUDA graph), against the dequantised
    product (`accuracy.block_scaled_product`); beside torch._scaled_mm per tensor (cuBLASLt, the same operands) and, where
    this PyTorch takes block scales, torch._scaled_mm with them; DeepGEMM's published H800 figure
    for reference (another card, another process: not a ratio measured here)."""
    from gemm_sweep import graph_us  # this directory

    for m, n, k, theirs in DEEPGEMM:
        g = torch.Generator(device="cuda").manual_seed(m + n + k)
        a = (torch.randn(m, k, device="cuda", generator=g) / 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda", generator=g) / 2).to(torch.float8_e4m3fn).t()
        ba = torch.rand(m, k // 128, device="cuda", generator=g) + 0.5
        bb = torch.rand(-(-n // 128), k // 128, device="cuda", generator=g) + 0.5
        sa, sb = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
        want = block_scaled_product(a, b, ba, bb)
        err = errors(ops.scaled_mm(a, b, ba, bb, out_dtype=torch.bfloat16), want)[0]
        calls = {"tirx_blocks": lambda: ops.scaled_mm(a, b, ba, bb, out_dtype=torch.bfloat16)}
        calls["cublas_tensor"] = lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        blockwise, how = _torch_blockwise(a, b, ba, bb, want)
        if blockwise is not None:
            calls["cublas_blocks"] = blockwise
        flop = 2 * m * n * k
        t = {key: per_call_us(f) for key, f in calls.items()}
        dev = {key: graph_us(f) for key, f in calls.items()}
        r = {"op": "scaled_mm_blocks", "shape": [m, n, k], "us": t, "device_us": dev, "tflops": {key: flop / v / 1e6 for key, v in t.items()},
             "device_tflops": {key: flop / v / 1e6 for key, v in dev.items()}, "deepgemm_h800": theirs, "max_rel_err": err, "torch_blocks": how}
        rows.append(r)
        line = " | ".join(f"{key} {r['tflops'][key]:6.1f} ({r['device_tflops'][key]:6.1f})" for key in t)
        print(f"blocks {m}x{n}x{k}: {line} TFLOP/s per call (device) | DeepGEMM H800 {theirs} | tirx/DeepGEMM {r['device_tflops']['tirx_blocks'] / theirs:.2f} | rel err {err:.2g}"
              + f" | torch blocks: {how}", flush=True)


def bench_grouped(rows):
    """`grouped_mm` (b row-major, and column-major as torch._grouped_mm takes it) beside
    torch._grouped_mm over uneven groups (three draws of the groups' sizes each, seeded)."""
    for (g, tokens, k, n), seed in [(shape, seed) for shape in [(8, 16384, 4096, 1792), (64, 32768, 2048, 1024)] for seed in (0, 1, 2)]:
        torch.manual_seed(seed)
        sizes = torch.distributions.Dirichlet(torch.ones(g)).sample() * tokens
        offs = torch.cumsum(sizes.int(), 0).int().cuda()
        a = torch.randn(tokens, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(g, k, n, device="cuda", dtype=torch.bfloat16)
        bt = b.transpose(-2, -1).contiguous().transpose(-2, -1)
        got, want = ops.grouped_mm(a, b, offs), torch._grouped_mm(a, bt, offs=offs)
        m = int(offs[-1])
        err = (got[:m].float() - want[:m].float()).abs().max().item()
        t = {"tirx": per_call_us(lambda: ops.grouped_mm(a, b, offs)), "tirx_colmajor_b": per_call_us(lambda: ops.grouped_mm(a, bt, offs))}
        t["torch"] = per_call_us(lambda: torch._grouped_mm(a, bt, offs=offs))
        flop = 2 * m * n * k
        r = {"op": "grouped_mm", "shape": [g, tokens, k, n], "seed": seed, "us": t, "tflops": {key: flop / v / 1e6 for key, v in t.items()}, "max_err": err}
        rows.append(r)
        print(f"grouped_mm {g} groups {tokens}x{n}x{k} (seed {seed}, rows {int(sizes.min())}-{int(sizes.max())}): " + " | ".join(f"{key} {v:6.1f}" for key, v in r["tflops"].items()) + f" TFLOP/s | max |err| {err:.3g}", flush=True)
        # FP8 with row-wise scales beside torch._scaled_grouped_mm (where this PyTorch has it)
        a8, b8 = a.to(torch.float8_e4m3fn), bt.to(torch.float8_e4m3fn)  # (b column-major, as both take it)
        sa, sb = torch.rand(tokens, device="cuda") + 0.5, torch.rand(g, n, device="cuda") + 0.5
        t = {mode: per_call_us(lambda fast=fast: ops.scaled_grouped_mm(a8, b8, sa, sb, offs, use_fast_accum=fast)) for mode, fast in (("tirx", False), ("tirx_fast", True))}
        err = None
        if hasattr(torch, "_scaled_grouped_mm"):
            theirs = lambda: torch._scaled_grouped_mm(a8[:m], b8, sa[:m], sb, offs=offs, out_dtype=torch.bfloat16)  # noqa: E731
            t["torch"] = per_call_us(theirs)
            err = (ops.scaled_grouped_mm(a8, b8, sa, sb, offs)[:m].float() - theirs().float()).abs().max().item()
        r = {"op": "scaled_grouped_mm", "shape": [g, tokens, k, n], "us": t, "tflops": {key: flop / v / 1e6 for key, v in t.items()}, "max_err": err}
        rows.append(r)
        print(f"scaled_grouped_mm {g} groups {tokens}x{n}x{k}: " + " | ".join(f"{key} {v:6.1f}" for key, v in r["tflops"].items()) + f" TFLOP/s | max |err| vs torch {err}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="softmax,log_softmax,rms_norm,layer_norm,backward,matmul,epilogue,scaled_mm,grouped")
    ap.add_argument("--json")
    args = ap.parse_args()
    only = args.only.split(",")
    rows = []
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    for name, fns in row_ops().items():
        if name in only:
            bench_rows(name, *fns, rows)
    if "backward" in only:
        bench_backward(rows)
    if "matmul" in only:
        bench_matmul(rows)
    if "epilogue" in only:
        bench_epilogue(rows)
    if "scaled_mm" in only:
        bench_scaled_mm(rows)
    if "grouped" in only:
        bench_grouped(rows)
    if "blocks" in only:
        bench_blocks(rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
