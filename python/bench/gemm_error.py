"""Issue 32's accuracy figures: tirx's GEMMs and cuBLAS's (through PyTorch), each against a
float64 product of the same inputs (FP8: of the dequantised inputs). bf16 and f16 `matmul` beside
`torch.mm` over squares, LLM shapes at decode and prefill M, and ragged sizes; FP8 `scaled_mm`
with per-tensor scales beside `torch._scaled_mm` (with and without fast accumulation) and with
DeepGEMM's block scales (1 x 128 for A, 128 x 128 for B; no cuBLAS baseline: against the
reference alone); `grouped_mm` beside `torch._grouped_mm` over uneven groups. Printed per case:
each one's error relative to the reference's largest magnitude, the largest (max |x - ref| /
max |ref|) and the root-mean-square (||x - ref|| / ||ref||), and tirx's largest ÷ cuBLAS's
(<= 1: no worse).

    cd python/bench && python gemm_error.py [--json out.json]
    cd python/bench && python gemm_error.py --device cpu   # (a check, simulated at small sizes)
"""

import argparse

import torch
from accuracy import block_scaled_product, cell, errors, save  # this directory

import tirx.ops as ops

SHAPES = [
    (512, 512, 512),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (16, 12288, 4096),
    (128, 4096, 11008),
    (8192, 4096, 4096),
    (4000, 4096, 4096),
    (100, 12344, 4096),
    (1000, 3000, 2048),
]
FP8_SHAPES = [(4096, 4096, 4096), (128, 8192, 8192), (16384, 6144, 4096)]
GROUPED = [(8, 16384, 4096, 1792), (64, 32768, 2048, 1024)]
# `--device cpu`: tirx's kernels in the simulator, so sizes it runs in seconds (a check of this script).
SMALL = {"SHAPES": [(64, 128, 128), (100, 72, 64)], "FP8_SHAPES": [(64, 128, 256)], "GROUPED": [(3, 200, 128, 64)]}
DEVICE = "cuda"


def baseline(fn, ref):
    """cuBLAS's errors through PyTorch, or None where this PyTorch has no such op on the device."""
    try:
        return errors(fn(), ref)
    except (RuntimeError, NotImplementedError):
        return None


def report(rows, what, shape, results, baseline=None):
    """One case's line: each result's (largest, rms) and tirx's largest ÷ the baseline's."""
    results = {name: e for name, e in results.items() if e is not None}
    baseline = baseline if baseline in results else None
    row = {"case": what, "shape": list(shape), **{name: list(e) for name, e in results.items()}}
    if baseline is not None:
        row["tirx_over_cublas"] = results["tirx"][0] / results[baseline][0]
    cells = cell(results, row.get("tirx_over_cublas"))
    rows.append(row)
    print(f"{what} {'x'.join(map(str, shape))}: {cells}", flush=True)


def matmuls(rows):
    for dtype in (torch.bfloat16, torch.float16):
        for m, n, k in SHAPES:
            g = torch.Generator(device=DEVICE).manual_seed(m + n + k)
            a = torch.randn(m, k, device=DEVICE, dtype=dtype, generator=g)
            b = torch.randn(k, n, device=DEVICE, dtype=dtype, generator=g)
            ref = a.double() @ b.double()
            results = {"tirx": errors(ops.matmul(a, b), ref), "cublas": baseline(lambda: torch.mm(a, b), ref)}
            report(rows, f"matmul {str(dtype)[6:]}", (m, n, k), results, "cublas")


def scaled_mms(rows):
    for m, n, k in FP8_SHAPES:
        g = torch.Generator(device=DEVICE).manual_seed(m + n + k)
        a = (torch.randn(m, k, device=DEVICE, generator=g) / 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device=DEVICE, generator=g) / 2).to(torch.float8_e4m3fn).t()
        sa, sb = torch.tensor(0.5, device=DEVICE), torch.tensor(2.0, device=DEVICE)
        ref = (a.double() * 0.5) @ (b.double() * 2.0)
        for fast in (False, True):
            results = {
                "tirx": errors(ops.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast), ref),
                "cublas": baseline(lambda: torch._scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast), ref),
            }
            report(rows, f"scaled_mm e4m3 per-tensor{' fast' if fast else ''}", (m, n, k), results, "cublas")
        ba = torch.rand(m, k // 128, device=DEVICE, generator=g) + 0.5
        bb = torch.rand(n // 128, k // 128, device=DEVICE, generator=g) + 0.5
        want = block_scaled_product(a, b, ba, bb)
        report(rows, "scaled_mm e4m3 block scales", (m, n, k), {"tirx": errors(ops.scaled_mm(a, b, ba, bb, out_dtype=torch.bfloat16), want)})


def grouped(rows):
    for groups, tokens, k, n in GROUPED:
        g = torch.Generator(device=DEVICE).manual_seed(groups)
        sizes = torch.distributions.Dirichlet(torch.ones(groups)).sample() * tokens
        offs = torch.cumsum(sizes.int(), 0).int().to(DEVICE)
        m = int(offs[-1])
        a = torch.randn(tokens, k, device=DEVICE, dtype=torch.bfloat16, generator=g)
        b = torch.randn(groups, k, n, device=DEVICE, dtype=torch.bfloat16, generator=g)
        bt = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # (column-major, as torch._grouped_mm takes it)
        starts = [0] + offs.tolist()[:-1]
        ref = torch.cat([a[s:e].double() @ b[i].double() for i, (s, e) in enumerate(zip(starts, offs.tolist()))])
        results = {"tirx": errors(ops.grouped_mm(a, b, offs)[:m], ref), "cublas": baseline(lambda: torch._grouped_mm(a, bt, offs=offs)[:m], ref)}
        report(rows, f"grouped_mm bfloat16 {groups} groups", (tokens, n, k), results, "cublas")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="cpu: tirx's kernels in the simulator, small sizes (a check of this script)")
    p.add_argument("--json")
    a = p.parse_args()
    global DEVICE
    DEVICE = a.device
    if a.device == "cpu":
        globals().update(SMALL)
    torch.manual_seed(0)  # (the groups' sizes)
    print(torch.cuda.get_device_name() if a.device == "cuda" else a.device, "torch", torch.__version__)
    print("largest / rms error relative to the float64 reference; (x: tirx's largest ÷ cuBLAS's)")
    rows = []
    matmuls(rows)
    scaled_mms(rows)
    grouped(rows)
    save(rows, a.json)


if __name__ == "__main__":
    main()
