"""Issue 31's backward figures timed in rounds: per shape (d × causal × seq 1k / 4k / 16k, the
batch × heads of `attention.py`), the tirx backward through autograd, the tirx backward called
directly (`scaled_dot_product_attention_backward`) and SDPA's cuDNN backward through autograd,
one after another, ``--rounds`` times in one process; printed: every round's TFLOP/s (2.5 times
the forward's FLOPs) and the ratios of the medians to cuDNN's. Timed in turn because the H200's
clock moves under this load (1.73-1.98 GHz, power-capped), which moves a single pass by ±5 %.

    cd python/bench && python attention_rounds.py [--dims 128,64] [--seqs 1024,4096,16384] [--causal both|yes|no] [--rounds 3]
"""

import argparse

import torch
from attention import backends, sdpa  # this directory
from ops import per_call_us

import tirx.ops as ops


def case(seq, d, causal, rounds):
    bh = 16384 * 16 // seq
    b, h = max(1, bh // 16), min(16, bh)
    q, k, v = (torch.randn(b, h, seq, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    do = torch.randn_like(q)
    flops = 2.5 * 4 * b * h * seq * seq * d / (2 if causal else 1)
    o_t = ops.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o_c = sdpa(backends()["cudnn"])(q, k, v, causal)
    qd, kd, vd = (t.detach() for t in (q, k, v))
    out, lse = ops.scaled_dot_product_attention(qd, kd, vd, is_causal=causal, return_lse=True)
    fns = {
        "tirx_ag": lambda: torch.autograd.grad(o_t, (q, k, v), do, retain_graph=True),
        "tirx_dir": lambda: ops.scaled_dot_product_attention_backward(do, qd, kd, vd, out, lse, is_causal=causal),
        "cudnn_ag": lambda: torch.autograd.grad(o_c, (q, k, v), do, retain_graph=True),
    }
    res = {n: [] for n in fns}
    for _ in range(rounds):
        for n, f in fns.items():
            res[n].append(flops / per_call_us(f) / 1e6)
    rounds_s = " ".join(f"{n} " + "/".join(f"{x:.0f}" for x in xs) for n, xs in res.items())
    med = {n: sorted(xs)[len(xs) // 2] for n, xs in res.items()}
    print(
        f"seq {seq} d {d} causal {causal}: {rounds_s} | med ratio ag {med['tirx_ag'] / med['cudnn_ag']:.3f} dir {med['tirx_dir'] / med['cudnn_ag']:.3f}",
        flush=True,
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dims", default="128,64")
    p.add_argument("--seqs", default="1024,4096,16384")
    p.add_argument("--causal", default="both", choices=("both", "yes", "no"))
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    masks = {"both": (False, True), "yes": (True,), "no": (False,)}[a.causal]
    for d in (int(x) for x in a.dims.split(",")):
        for causal in masks:
            for seq in (int(x) for x in a.seqs.split(",")):
                case(seq, d, causal, a.rounds)


if __name__ == "__main__":
    main()
