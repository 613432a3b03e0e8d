"""Issues 30's and 31's accuracy figures: the attention forward's output and the backward's
gradients (dQ, dK, dV) in bf16, tirx's and SDPA's cuDNN and flash backends', against a float32
reference on the same inputs (SDPA's math backend over the bf16 inputs widened to float32),
per shape (d × causal × seq, batch × heads 4 × 16); printed: each one's error relative to the reference's largest magnitude, the largest
(max |x − ref| / max |ref|) and the root-mean-square (‖x − ref‖ / ‖ref‖), and tirx's largest
÷ the best backend's (≤ 1: no worse than SDPA's own bf16 result).

    cd python/bench && python attention_error.py [--dims 64,128] [--seqs 1024,4096] [--json out.json]
"""

import argparse

import torch
from attention import backends, sdpa  # this directory
from accuracy import cell, errors, save  # this directory

import tirx.ops as ops


def case(seq, d, causal):
    from torch.nn.attention import SDPBackend

    b, h = 4, 16
    g = torch.Generator(device="cuda").manual_seed(seq + d + causal)
    q, k, v, do = (torch.randn(b, h, seq, d, device="cuda", dtype=torch.bfloat16, generator=g) for _ in range(4))
    ref_in = [t.float().requires_grad_() for t in (q, k, v)]
    ref_out = sdpa(SDPBackend.MATH)(*ref_in, causal)
    ref = [ref_out.detach(), *torch.autograd.grad(ref_out, ref_in, do.float())]
    runs = {"tirx": lambda q, k, v: ops.scaled_dot_product_attention(q, k, v, is_causal=causal)}
    runs.update({name: (lambda run: lambda q, k, v: run(q, k, v, causal))(sdpa(be)) for name, be in backends().items()})
    row = {"seq": seq, "d": d, "causal": causal, "batch_heads": [b, h]}
    for name, fn in runs.items():
        x = [t.detach().requires_grad_() for t in (q, k, v)]
        out = fn(*x)
        got = [out.detach(), *torch.autograd.grad(out, x, do)]
        row[name] = {what: errors(a, r) for what, a, r in zip(("out", "dq", "dk", "dv"), got, ref)}
    best = {what: min(row[n][what][0] for n in backends()) for what in ("out", "dq", "dk", "dv")}
    row["tirx_over_best"] = {what: row["tirx"][what][0] / best[what] for what in best}
    cells = " | ".join(f"{what} " + cell({n: row[n][what] for n in runs}, row["tirx_over_best"][what]) for what in best)
    print(f"d={d:3d} seq={seq:5d} causal={int(causal)}: {cells}", flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dims", default="64,128")
    p.add_argument("--seqs", default="1024,4096")
    p.add_argument("--json")
    a = p.parse_args()
    print(torch.cuda.get_device_name(), "torch", torch.__version__)
    print("largest / rms error relative to the float32 reference; (x: tirx's largest ÷ the best backend's)")
    rows = [case(s, d, c) for d in map(int, a.dims.split(",")) for c in (False, True) for s in map(int, a.seqs.split(","))]
    save(rows, a.json)


if __name__ == "__main__":
    main()
