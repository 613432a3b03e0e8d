"""FP8 (or, ``--dtype``, 16-bit) attention designs timed against each other in one process: each `attention_kernel`
design (consumers, K/V tile keys, ``fma_columns``: the keys whose exponentials run on the FMA
pipe, and optionally ping-pong (default true), persistent CTAs, one an SM (default false),
those taking their tiles from an atomic counter, ``dynamic`` (default false), and V transposed by
the kernel's producer warpgroup, ``transpose_v`` (default false; else the designs read the
transposed, permuted copy `fp8_values_kernel` makes, whose time is printed apart: the op's per call),
the lazy rescale's ``rescale_threshold`` (default 0: off), and O stored through shared memory by TMA,
``tma_epilogue`` (default false))
compiled directly (no tuner), a batch (``--batch``, default 2) x 16 heads over one sequence length, e4m3; per
design TFLOP/s in bursts (`sustained.burst`: 20 calls after an idle second; three rounds taken in
turn, so that the power-capped clock moves every design alike, the best kept) and sustained
(`sustained.sustained`: 3 s back to back, with the SM clock and power), and the largest
difference of its output from the first design's. ``--fa3 DIR``: FlashAttention-3's forward
(``DIR/fa3.py``, `fa3_compare.py`) timed beside them on the same inputs, seq-major copies (its layout).

    cd python/bench && python fp8_attention_designs.py 128 16384 "[(2, 224, 0), (2, 224, 16), (2, 192, 0, False, True), (2, 192, 0, False, True, True)]" [--causal] [--batch 8] [--fa3 fa3] [--dtype bfloat16]
"""

import argparse
import ast
import importlib
import sys

import torch
from sustained import burst, sustained  # this directory

import tirx
from tirx.ops import attention as at


def compiled(d, design, b, h, s, causal, dtype="float8_e4m3fn"):
    consumers, bn, fma_columns, pingpong, persistent, dynamic, transpose_v, threshold, tma_epilogue = (*design, *(True, False, False, False, 0.0, False)[len(design) - 3 :])
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=h, batch=b, seq_q=s, seq_k=s, d=d, dtype=dtype, causal=causal, scale=d**-0.5, lse=False,
        seq_major=False, consumers=consumers, bn=bn, overlap=True, pingpong=pingpong, fma_columns=fma_columns,
        persistent=persistent, sms=torch.cuda.get_device_properties(0).multi_processor_count, dynamic=dynamic,
        transpose_v=transpose_v, rescale_threshold=threshold, tma_epilogue=tma_epilogue,
    )
    return tirx.compile(prim)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("d", type=int)
    p.add_argument("seq", type=int)
    p.add_argument("designs", help='a Python list of (consumers, keys, fma_columns[, pingpong[, persistent[, dynamic[, transpose_v[, rescale_threshold[, tma_epilogue]]]]]]), e.g. "[(2, 224, 0), (2, 224, 16)]"')
    p.add_argument("--causal", action="store_true")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--fa3", help="the directory of FlashAttention-3's ctypes module fa3.py, timed beside the designs")
    p.add_argument("--dtype", default="float8_e4m3fn", help="float8_e4m3fn (default), or bfloat16 / float16: the 16-bit kernels' designs (V as it is, no descales)")
    a = p.parse_args()
    d, s, b, h = a.d, a.seq, a.batch, 16
    fp8 = a.dtype.startswith("float8")
    designs = [tuple(x) for x in ast.literal_eval(a.designs)]
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda").to(getattr(torch, a.dtype)) for _ in range(3))
    vt = at._fp8_values_on_device(v) if fp8 else v.view(-1, s, d)
    ds = (torch.ones(b * h, 2, device="cuda"),) if fp8 else ()
    lse = torch.empty(b * h, at.lse_rows(s), device="cuda")
    flops = 4 * s * s * d * b * h / (2 if a.causal else 1)
    kernels, outs, args = {}, {}, {}
    call = lambda x: lambda: kernels[x](*args[x])  # noqa: E731
    for x in designs:
        kernels[x] = compiled(d, x, b, h, s, a.causal, a.dtype)
        outs[x] = torch.empty(b * h, s, d, dtype=torch.bfloat16 if fp8 else q.dtype, device="cuda")
        v_in = v.view(-1, s, d) if len(x) > 6 and x[6] else vt  # (transpose_v: V as it is)
        args[x] = at._with_counter(kernels[x], (q.view(-1, s, d), k.view(-1, s, d), v_in, *ds, outs[x], lse))  # (dynamic: + its counter)
        call(x)()
    if a.fa3:  # (its [batch, seq, heads, d] copies; its O once, back in [batch x heads, seq, d])
        sys.path.insert(0, a.fa3)
        fa3 = importlib.import_module("fa3")
        qs, ks, vs = (t.transpose(1, 2).contiguous() for t in (q, k, v))
        outs["fa3"] = fa3.forward(qs, ks, vs, causal=a.causal)[0].transpose(1, 2).reshape(b * h, s, d)
        designs.append("fa3")
        ours = call
        call = lambda x: (lambda: fa3.forward(qs, ks, vs, causal=a.causal)) if x == "fa3" else ours(x)  # noqa: E731
    torch.cuda.synchronize()
    label = lambda x: "FlashAttention-3" if x == "fa3" else f"{x[0]} consumers, {x[1]} keys, fma_columns {x[2]}" + "".join(f", {n} {v}" for n, v in zip(("pingpong", "persistent", "dynamic", "transpose_v", "rescale_threshold", "tma_epilogue"), x[3:]))  # noqa: E731
    print(f"{torch.cuda.get_device_name()}, {a.dtype} attention {b} x 16 heads x {s} x {s}, d = {d}{', causal' if a.causal else ''}")
    best = dict.fromkeys(designs, float("inf"))
    for _ in range(3):
        for x in designs:
            best[x] = min(best[x], burst(label(x), call(x), flops))
    if fp8:
        values = lambda: at._fp8_values_on_device(v)  # noqa: E731 (what the designs without transpose_v need per call)
        print(f"V's transposition (fp8_values_kernel, per call): {min(burst('fp8_values_kernel', values, flops) for _ in range(3)):.4f} ms")
    first = outs[designs[0]].float()
    for x in designs:
        ms = sustained(label(x), call(x), flops, 3)
        print(
            f"{label(x)}: burst {flops / best[x] / 1e9:.0f} TFLOP/s (best of 3), sustained {flops / ms / 1e9:.0f}, "
            f"max |diff| from the first {(outs[x].float() - first).abs().max().item():.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
