"""Training through tirx.ops: causal self-attention blocks (x → q, k, v projections → attention →
output projection, a residual; ``--layers`` of them, two by default) trained on a random
regression target as mixed-precision training does it (float32 master weights updated by Adam,
bf16 copies in the blocks), three ways from the same weights: "tirx", `tirx.ops.matmul` and
`tirx.ops.scaled_dot_product_attention` (their backward kernels: `loss.backward()` runs them);
"attention", PyTorch's `torch.mm` with the tirx attention op (the attention op against SDPA
alone); and "torch", `torch.mm` and SDPA. On CPU tensors every tirx kernel runs in the simulator
(small sizes); on a GPU at model sizes, the step time of each is printed too.

    python examples/python/train_block.py [--steps 5] [--layers 2] [--device cpu|cuda]
"""

import argparse
import time

import torch
import torch.nn.functional as F

import tirx.ops

# What each way calls: (matmul, attention).
WAYS = {
    "tirx": (tirx.ops.matmul, tirx.ops.scaled_dot_product_attention),
    "attention": (torch.mm, tirx.ops.scaled_dot_product_attention),
    "torch": (torch.mm, F.scaled_dot_product_attention),
}


def block(x, w, heads, ops):
    """One causal self-attention block: ``x + (attn(x wq, x wk, x wv) wo)`` for ``x`` (seq, dim)."""
    mm, attention = WAYS[ops]
    seq, dim = x.shape
    q, k, v = (mm(x, w[name]).reshape(seq, heads, dim // heads).transpose(0, 1)[None] for name in ("q", "k", "v"))
    a = attention(q, k, v, is_causal=True)[0].transpose(0, 1).reshape(seq, dim)
    return x + mm(a.contiguous(), w["o"])


def train(steps, seq, dim, heads, ops, device, seed=0, lr=1e-3, layers=1):
    """The losses of ``steps`` Adam steps (float32 master weights, bf16 weights and activations in
    the ``layers`` blocks), and the mean step time."""
    g = torch.Generator().manual_seed(seed)
    ws = [{n: (torch.randn(dim, dim, generator=g) / dim**0.5).to(device).requires_grad_() for n in "qkvo"} for _ in range(layers)]
    opt = torch.optim.Adam([p for w in ws for p in w.values()], lr=lr)
    x = torch.randn(seq, dim, generator=g).to(device, torch.bfloat16)
    target = torch.randn(seq, dim, generator=g).to(device, torch.bfloat16)
    losses, t0 = [], None
    for step in range(steps):
        if step == 1:  # (the first step compiles and tunes)
            torch.cuda.synchronize() if device == "cuda" else None
            t0 = time.perf_counter()
        y = x
        for w in ws:
            y = block(y, {n: p.to(torch.bfloat16) for n, p in w.items()}, heads, ops)  # (the cast is differentiable)
        loss = (y.float() - target.float()).pow(2).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    if device == "cuda":
        torch.cuda.synchronize()
    return losses, (time.perf_counter() - t0) / max(steps - 1, 1) if t0 else float("nan")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    seq, dim, heads = (4096, 2048, 16) if args.device == "cuda" else (128, 128, 2)
    runs = {ops: train(args.steps, seq, dim, heads, ops, args.device, layers=args.layers) for ops in WAYS}
    for i in range(args.steps):
        print(f"step {i}: loss " + " | ".join(f"{ops} {losses[i]:.5f}" for ops, (losses, _) in runs.items()))
    print("step time: " + " | ".join(f"{ops} {t * 1e3:.2f} ms" for ops, (_, t) in runs.items()) + f" ({args.device}, {args.layers} layers)")


if __name__ == "__main__":
    main()
