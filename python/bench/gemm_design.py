"""GEMM tile designs timed on their own, beside `torch.mm` (cuBLAS) in the same process: the
script for asking which design a shape wants, or what limits one (under Nsight Compute).

    cd python/bench && python gemm_design.py 100x12344x4096 '{"consumers": 2, "bn": 96}' '{"consumers": 1, "bn": 192}' [--sustained | --single] [--fp8 [--blocks]]
    ncu -k 'regex:matmul|scaled_mm' -s 3 -c 1 --section SpeedOfLight python gemm_design.py ...  (FP8: scaled_mm)

Each design is `matmul_kernel`'s configuration (`tirx.ops.matmul.CONFIGS`' keys, any tile width
the kernel takes); ``"splits": S`` runs split-K's two kernels (parts, then the finish). bf16
operands, row-major; ``--fp8``: e4m3 operands, both K-major, per-tensor scales, promoted to float32
every 128 of K, bf16 out, beside `torch._scaled_mm` (cuBLASLt); ``--blocks``: DeepGEMM's block scales
(a row and 128 of K; 128 x 128 of B) in place of the per-tensor ones, checked against the
dequantised product (timed beside the per-tensor `torch._scaled_mm`). Device time per call (CUDA events
behind an idle kernel, best of 3 × 50)."""

import json
import math
import sys

import torch

from accuracy import block_scaled_product  # this directory

import tirx
import tirx.ops  # noqa: F401  (loads the ops' modules)
from tirx.autotune import _cuda_time

mm = sys.modules["tirx.ops.matmul"]


SUSTAINED = "--sustained" in sys.argv
SINGLE = "--single" in sys.argv
FP8 = "--fp8" in sys.argv
BLOCKS = "--blocks" in sys.argv


def best_ms(fn, args):
    """Best of 3 x 50 launches behind an idle kernel (the tuner's timing); ``--sustained``: 100
    launches after ~30 ms of the same launches (the clocks a busy GPU holds); ``--single``: the
    best of 30 single launches."""
    if SINGLE:  # (one launch at a time: what back-to-back launches overlap or not)
        return min(_cuda_time(fn, args, 1, 1) for _ in range(30))
    if not SUSTAINED:
        return min(_cuda_time(fn, args, 5, 50) for _ in range(3))
    t = _cuda_time(fn, args, 5, 20)
    return _cuda_time(fn, args, max(5, int(30 / t)), 100)


def design(a, b, cfg, scales=()):
    """(launch, arguments) of one design: a compiled kernel, or split-K's two (``scales``: FP8's,
    ``b`` then K-major)."""
    (m, k), n = a.shape, (b.shape[0] if scales else b.shape[1])
    cfg = dict(cfg)
    splits = cfg.pop("splits", 1)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    ctas = cfg.pop("ctas", torch.cuda.get_device_properties(0).multi_processor_count)  # (a grid of fewer CTAs: "ctas")
    if scales and splits > 1:
        raise ValueError("split-K designs are timed for 16-bit operands here")
    if scales:
        cfg = dict(cfg, dtype="float8_e4m3fn", out_dtype="bfloat16", fast_accum=False, scales="block" if BLOCKS else "tensor")
    kern = tirx.compile(mm.matmul_kernel.factory(m=m, n=n, k=k, **{"dtype": "bfloat16", **cfg}, ctas=ctas, splits=splits))
    if splits == 1:
        return kern, mm._with_workspace(kern, (a, b, *scales, out)), out, kern.resident_ctas()  # (clusters, stream-K: their work buffers)
    finish = tirx.compile(mm.matmul_finish_kernel.factory(m=m, n=n, out_dtype="bfloat16", splits=splits))
    w = torch.empty(splits, m, n, device="cuda")

    def both(a, b, w, out):
        kern(a, b, w)
        finish(w, out)

    return both, (a, b, w, out), out, kern.resident_ctas()


def main():
    m, n, k = map(int, sys.argv[1].split("x"))
    if FP8:  # (B K-major, as `torch._scaled_mm` takes it: its transpose column-major)
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        scales = (torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda"))
        ref, ref_args, ref_name = (lambda a, bt, sa, sb: torch._scaled_mm(a, bt.t(), sa, sb, out_dtype=torch.bfloat16)), (a, b, *scales), "_scaled_mm"
    else:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / math.sqrt(k)
        scales, ref, ref_args, ref_name = (), torch.mm, (a, b), "torch.mm"
    want = ref(*ref_args)
    if FP8 and BLOCKS:  # (scales in [0.5, 2): the dequantised product the designs are checked against)
        kb, nb = -(-k // 128), -(-n // 128)
        scales = (torch.rand(m, kb, device="cuda") * 1.5 + 0.5, torch.rand(nb, kb, device="cuda") * 1.5 + 0.5)
        want = block_scaled_product(a, b.t(), *scales)
    base = best_ms(ref, ref_args)
    tflop = 2 * m * n * k / 1e9
    print(f"{torch.cuda.get_device_name()}  {m}x{n}x{k}: {ref_name} {base * 1e3:.1f} µs ({tflop / base:.0f} TFLOP/s)", flush=True)
    for text in (x for x in sys.argv[2:] if not x.startswith("--")):
        cfg = json.loads(text)
        try:
            fn, args, out, resident = design(a, b, cfg, scales)
        except ValueError as e:  # (a design the kernel refuses for this shape: said, and the next one timed)
            print(f"  {cfg}: not a design for this shape: {e}", flush=True)
            continue
        ms = best_ms(fn, args)
        err = (out.float() - want.float()).abs().max().item()
        print(f"  {cfg}: {ms * 1e3:.1f} µs ({tflop / ms:.0f} TFLOP/s, x{base / ms:.2f} {ref_name}), {resident} CTAs resident, max |diff| {err:.3g}", flush=True)


if __name__ == "__main__":
    main()
