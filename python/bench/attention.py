"""`tirx.ops.scaled_dot_product_attention` against PyTorch's SDPA backends in one process (issue
30's measurement): bf16 forward TFLOP/s (4 · seq_q · seq_k · d per head, halved for causal) for
d ∈ {64, 128} × causal over sequences of 1k-16k (batch × heads sized to ~16k tokens · 16 heads),
beside SDPA's cuDNN and flash backends; decoding (one query row, grouped-query heads, a long
cache) in GB/s of K and V read. Each tirx result is checked against the cuDNN backend's first;
the autotuner's choice is printed. Decoding: batches of 1-64 sequences over caches of 1k-128k
keys, contiguous and paged, as a fraction of a device copy of the same bytes, called eagerly and
replayed from a CUDA graph. ``--fp8``: also
FP8 (e4m3) prefill's TFLOP/s (V's transposition into the kernel's layout counted), its error
against the cuDNN backend on the dequantised inputs in bf16. ``--backward``: also the backward's
TFLOP/s (2.5 times the forward's FLOPs, as FlashAttention counts them: `torch.autograd.grad`
of one forward's output; dQ by TMA reductions), the same pipeline called directly (no autograd),
and its deterministic mode's (dQ by its own kernel) beside the cuDNN and flash backends' backward, and the gradients' largest difference
from cuDNN's.

    cd python/bench && python attention.py [--seqs 1024,2048,4096,8192,16384] [--dims 64,128] [--decode 1024,131072] [--batches 1,64] [--fp8] [--backward] [--json out.json]
"""

import argparse
import json
import math

import torch
from gemm_sweep import graph_us
from ops import per_call_us  # this directory

import tirx.ops as ops
from tirx.ops import attention as at

F = torch.nn.functional


def backends():
    from torch.nn.attention import SDPBackend

    return {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def sdpa(backend):
    from torch.nn.attention import sdpa_kernel

    def run(q, k, v, causal):
        with sdpa_kernel([backend]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    return run


def backward(q, k, v, causal, flops, row):
    """The backward's TFLOP/s of tirx and SDPA's backends (each from its own forward's graph)."""
    do = torch.randn_like(q)
    qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))
    runs = [("tirx", lambda: ops.scaled_dot_product_attention(qg, kg, vg, is_causal=causal))]
    runs += [(n, (lambda be: lambda: sdpa(be)(qg, kg, vg, causal))(be)) for n, be in backends().items()]
    grads = {}
    for name, fwd in runs:
        try:
            out = fwd()
            grads[name] = torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)
            row[name + "_bwd"] = 2.5 * flops / per_call_us(lambda: torch.autograd.grad(out, (qg, kg, vg), do, retain_graph=True)) / 1e6
        except RuntimeError as e:
            row[name + "_bwd"] = None
            row[name + "_bwd_error"] = str(e)[:100]
    # The default pipeline called directly (no autograd: what autograd's path adds, where the host
    # sets the pace), and deterministic mode (dQ by its own kernel, no reductions).
    out, lse = ops.scaled_dot_product_attention(q, k, v, is_causal=causal, return_lse=True)
    row["tirx_direct_bwd"] = 2.5 * flops / per_call_us(lambda: ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse, is_causal=causal)) / 1e6
    row["tirx_det_bwd"] = 2.5 * flops / per_call_us(lambda: ops.scaled_dot_product_attention_backward(do, q, k, v, out, lse, is_causal=causal, deterministic=True)) / 1e6
    if "cudnn" in grads:
        row["bwd_max_err_vs_cudnn"] = max((a.float() - b.float()).abs().max().item() for a, b in zip(grads["tirx"], grads["cudnn"]))
    row["bwd_config"] = backward_config(q, causal)
    return (
        f" | bwd {row['tirx_bwd'] or 0:6.1f} (direct {row['tirx_direct_bwd']:6.1f}, deterministic {row['tirx_det_bwd']:6.1f};"
        f" cudnn {row.get('cudnn_bwd') or 0:6.1f},"
        f" flash {row.get('flash_bwd') or 0:6.1f}, max |err| {row.get('bwd_max_err_vs_cudnn', 0):.3g}) {row['bwd_config']}"
    )


def backward_config(q, causal):
    """The default backward's pipeline and its dK / dV kernel's tuned configuration."""
    from tirx.ops import attention_backward as ab

    reduce, tuned = ab.dkv_kernel_for(q, q, causal)
    choice = tuned.configs[tuned.choice] if tuned.choice is not None else None
    return f"{'dQ reduced' if reduce else 'dQ kernel'}, dK/dV {choice}"


def forward_config(b, h, seq, d, causal, dtype, seq_major=False):
    """The forward kernel's tuned configuration for these [b, h, seq, d] operands (``seq_major``:
    [b, seq, h, d] in memory; None before a call)."""
    tuned = at.attention_kernel(
        heads=h, kv_heads=h, batch=b, seq_q=seq, seq_k=seq, d=d, dtype=dtype, causal=causal, scale=1.0 / math.sqrt(d), lse=False,
        seq_major=seq_major, splits=1, sms=torch.cuda.get_device_properties(0).multi_processor_count,
    )
    return tuned.configs[tuned.choice] if tuned.choice is not None else None


def prefill(seq, d, causal, results, fp8=False, bwd=False):
    tokens = 16384 * 16
    bh = max(1, tokens // seq)
    b, h = max(1, bh // 16), min(16, bh)
    q, k, v = (torch.randn(b, h, seq, d, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    flops = 4 * b * h * seq * seq * d / (2 if causal else 1)
    row = {"shape": [b, h, seq, d], "causal": causal}
    ref = sdpa(backends()["cudnn"])(q, k, v, causal)
    out = ops.scaled_dot_product_attention(q, k, v, is_causal=causal)
    err = (out.float() - ref.float()).abs().max().item()
    row["max_err_vs_cudnn"] = err
    for name, fn in [("tirx", lambda: ops.scaled_dot_product_attention(q, k, v, is_causal=causal))] + [
        (n, (lambda be: lambda: sdpa(be)(q, k, v, causal))(be)) for n, be in backends().items()
    ]:
        try:
            row[name] = flops / per_call_us(fn) / 1e6
        except RuntimeError as e:  # a backend that does not take the shape
            row[name] = None
            row[name + "_error"] = str(e)[:100]
    extra = ""  # (FP8's and the backward's columns)
    if fp8:  # e4m3 inputs with per-tensor descales; against cuDNN on the dequantised inputs
        q8, k8, v8 = (t.to(torch.float8_e4m3fn) for t in (q, k, v))
        deq = [t.to(torch.bfloat16) for t in (q8, k8, v8)]
        fp8_err = (ops.scaled_dot_product_attention(q8, k8, v8, is_causal=causal, q_descale=1.0, k_descale=1.0, v_descale=1.0).float() - sdpa(backends()["cudnn"])(*deq, causal).float()).abs().max().item()
        row["tirx_fp8"] = flops / per_call_us(lambda: ops.scaled_dot_product_attention(q8, k8, v8, is_causal=causal, q_descale=1.0, k_descale=1.0, v_descale=1.0)) / 1e6
        row["fp8_max_err_vs_cudnn"] = fp8_err
        row["fp8_config"] = forward_config(b, h, seq, d, causal, "float8_e4m3fn")
        extra = f" | fp8 {row['tirx_fp8']:6.1f} (max |err| {fp8_err:.3g}) {row['fp8_config']}"
    if bwd:
        extra += backward(q, k, v, causal, flops, row)
    row["config"] = forward_config(b, h, seq, d, causal, "bfloat16")
    results.append(row)
    best = max(row[n] or 0 for n in backends())
    print(
        f"{'causal' if causal else 'full  '} d={d:3d} seq={seq:5d} b×h={b}×{h}: tirx {row['tirx']:6.1f} TFLOP/s | cudnn {row['cudnn'] or 0:6.1f} | "
        f"flash {row['flash'] or 0:6.1f} | × best {row['tirx'] / best:.2f} | max |err| vs cudnn {err:.3g} | {row['config']}{extra}",
        flush=True,
    )


def decode(batch, cache, results):
    """One query row a sequence (32 query heads over 8 K/V heads, d = 128) over ``cache`` keys:
    GB/s of K and V read, beside SDPA and a device copy moving the same bytes (half read, half
    written); the cache contiguous ([batch, seq, heads, d], `kvcache_attention`), then paged
    (pages of 16 and 256 rows in a shuffled block table)."""
    b, h, hk, d = batch, 32, 8, 128
    q = torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16)
    kc, vc = (torch.randn(b, cache, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((b,), cache, dtype=torch.int32, device="cuda")
    nbytes = 2 * kc.numel() * 2
    row = {"batch": b, "cache": cache, "heads": [h, hk], "d": d}
    qt, kt, vt = (t.transpose(1, 2) for t in (q, kc, vc))
    runs = [
        ("tirx", lambda: ops.kvcache_attention(q, kc, vc, lens)),
        ("sdpa", lambda: F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True)),
    ]
    for page in (16, 256):
        n = b * cache // page
        table = torch.randperm(n, device="cuda").int().reshape(b, cache // page)
        kp, vp = (torch.empty(n, page, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        kp[table.flatten().long()], vp[table.flatten().long()] = kc.reshape(n, page, hk, d), vc.reshape(n, page, hk, d)
        runs.append((f"paged{page}", (lambda kp, vp, table: lambda: ops.kvcache_attention(q, kp, vp, lens, block_table=table))(kp, vp, table)))
    ref = F.scaled_dot_product_attention(qt, kt, vt, enable_gqa=True).transpose(1, 2).float()
    row["max_err_vs_sdpa"] = max((fn().float() - ref).abs().max().item() for name, fn in runs if name != "sdpa")
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    runs.append(("copy", lambda: dst.copy_(src)))
    for name, fn in runs:
        # GB/s: of the cache read (a copy: of the bytes moved, read + written); eager calls, then
        # replayed from a CUDA graph (as serving engines launch a decoding step)
        moved = 2 * nbytes if name == "copy" else nbytes
        row[name] = moved / per_call_us(fn) / 1e3
        row[name + "_graph"] = moved / graph_us(fn) / 1e3
    results.append(row)
    for how, sfx in (("eager", ""), ("graph", "_graph")):
        t, cp = row["tirx" + sfx], row["copy" + sfx]
        print(
            f"decode b={b:2d} cache={cache:6d} {how}: tirx {t:6.0f} GB/s ({t / cp:.2f} of copy {cp:.0f}) | paged16 {row['paged16' + sfx]:6.0f} | "
            f"paged256 {row['paged256' + sfx]:6.0f} | sdpa {row['sdpa' + sfx]:6.0f} ({t / row['sdpa' + sfx]:.2f}x) | max |err| vs sdpa {row['max_err_vs_sdpa']:.3g}",
            flush=True,
        )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seqs", default="1024,2048,4096,8192,16384", help="prefill lengths (empty: no prefill)")
    ap.add_argument("--dims", default="64,128")
    ap.add_argument("--decode", default="1024,8192,32768,131072", help="cache lengths (empty: no decoding)")
    ap.add_argument("--batches", default="1,8,64", help="decoding's batch sizes")
    ap.add_argument("--fp8", action="store_true", help="also FP8 (e4m3) prefill")
    ap.add_argument("--backward", action="store_true", help="also the backward (head dims 64, 96, 128)")
    ap.add_argument("--json")
    args = ap.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    results = []
    for d in map(int, args.dims.split(",")):
        for causal in (False, True):
            for seq in map(int, args.seqs.split(",")) if args.seqs else ():
                prefill(seq, d, causal, results, args.fp8, args.backward)
    for batch in map(int, args.batches.split(",")):
        for cache in map(int, args.decode.split(",")) if args.decode else ():
            if batch * cache <= 64 * 32768:  # (64 x 128k: 17 GB of cache, past the point)
                decode(batch, cache, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
