"""FP8 attention designs timed against each other in one process: each `attention_kernel`
design (consumers, K/V tile keys, ``fma_columns``: the keys whose exponentials run on the FMA
pipe) compiled directly (no tuner), 2 batch x 16 heads over one sequence length, e4m3; per
design TFLOP/s in bursts (20 calls after an idle second, the best of three rounds taken in turn,
so that the power-capped clock moves every design alike) and sustained (3 s back to back), and
the largest difference of its output from the first design's.

    cd python/bench && python fp8_attention_designs.py 128 16384 "[(2, 224, 0), (2, 224, 16), (2, 192, 0)]" [--causal]
"""

import argparse
import ast
import time

import torch

import tirx
from tirx.ops import attention as at


def compiled(d, consumers, bn, fma_columns, b, h, s, causal):
    prim = at.attention_kernel.factory(
        heads=h, kv_heads=h, batch=b, seq_q=s, seq_k=s, d=d, dtype="float8_e4m3fn", causal=causal, scale=d**-0.5, lse=False,
        seq_major=False, consumers=consumers, bn=bn, overlap=True, pingpong=True, fma_columns=fma_columns,
    )
    return tirx.compile(prim)


def seconds_a_call(kernel, args, calls):
    e0, e1 = torch.cuda.Event(True), torch.cuda.Event(True)
    e0.record()
    for _ in range(calls):
        kernel(*args)
    e1.record()
    torch.cuda.synchronize()
    return e0.elapsed_time(e1) / calls * 1e-3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("d", type=int)
    p.add_argument("seq", type=int)
    p.add_argument("designs", help='a Python list of (consumers, keys, fma_columns), e.g. "[(2, 224, 0), (2, 224, 16)]"')
    p.add_argument("--causal", action="store_true")
    a = p.parse_args()
    d, s, b, h = a.d, a.seq, 2, 16
    designs = [tuple(x) for x in ast.literal_eval(a.designs)]
    torch.manual_seed(0)
    q, k, v = (torch.randn(b, h, s, d, device="cuda").to(torch.float8_e4m3fn) for _ in range(3))
    vt = at._fp8_values_on_device(v)
    ds = torch.ones(b * h, 2, device="cuda")
    lse = torch.empty(b * h, at.lse_rows(s), device="cuda")
    flops = 4 * s * s * d * b * h / (2 if a.causal else 1)
    kernels, outs = {}, {}
    for x in designs:
        kernels[x] = compiled(d, *x, b, h, s, a.causal)
        outs[x] = torch.empty(b * h, s, d, dtype=torch.bfloat16, device="cuda")
        kernels[x](q.view(-1, s, d), k.view(-1, s, d), vt, ds, outs[x], lse)
    torch.cuda.synchronize()
    args = lambda x: (q.view(-1, s, d), k.view(-1, s, d), vt, ds, outs[x], lse)  # noqa: E731
    burst = dict.fromkeys(designs, float("inf"))
    for _ in range(3):
        for x in designs:
            time.sleep(1.0)
            burst[x] = min(burst[x], seconds_a_call(kernels[x], args(x), 20))
    first = outs[designs[0]].float()
    for x in designs:
        total, n, t0 = 0.0, 0, time.perf_counter()
        while time.perf_counter() - t0 < 3.0:
            total, n = total + seconds_a_call(kernels[x], args(x), 10), n + 1
        time.sleep(2.0)
        print(
            f"d {d} seq {s}{' causal' if a.causal else ''} consumers {x[0]} keys {x[1]} fma_columns {x[2]}: "
            f"burst {flops / burst[x] / 1e12:.0f} TFLOP/s, sustained {flops / (total / n) / 1e12:.0f}, "
            f"max |diff| from the first {(outs[x].float() - first).abs().max().item():.4f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
