"""Training through tirx.ops: causal self-attention blocks (x → q, k, v projections → attention →
output projection, a residual; ``--layers`` of them, two by default) trained on a random
regression target as mixed-precision training does it (float32 master weights updated by Adam,
bf16 copies in the blocks), three ways from the same weights: "tirx", `tirx.ops.matmul` and
`tirx.ops.scaled_dot_product_attention` (their backward kernels: `loss.backward()` runs them);
"attention", PyTorch's `torch.mm` with the tirx attention op (the attention op against SDPA
alone); and "torch", `torch.mm` and SDPA. On CPU tensors every tirx kernel runs in the simulator
(small sizes); on a GPU at model sizes, the step time of each is printed too.

    python examples/python/train_block.py [--steps 5] [--layers 2] [--device cpu|cuda] [--graph]
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


def train(steps, seq, dim, heads, ops, device, seed=0, lr=1e-3, layers=1, graph=False):
    """The losses of ``steps`` Adam steps (float32 master weights, bf16 weights and activations in
    the ``layers`` blocks), and the mean step time. ``graph`` (CUDA): after three eager steps
    (compiling and tuning), the whole step — forward, backward, Adam — captured once in a CUDA
    graph and replayed (what `torch.compile(mode="reduce-overhead")` does): the GPU's time per
    step, without the host's launches."""
    g = torch.Generator().manual_seed(seed)
    ws = [{n: (torch.randn(dim, dim, generator=g) / dim**0.5).to(device).requires_grad_() for n in "qkvo"} for _ in range(layers)]
    opt = torch.optim.Adam([p for w in ws for p in w.values()], lr=lr, capturable=graph)
    x = torch.randn(seq, dim, generator=g).to(device, torch.bfloat16)
    target = torch.randn(seq, dim, generator=g).to(device, torch.bfloat16)

    def step():
        y = x
        for w in ws:
            y = block(y, {n: p.to(torch.bfloat16) for n, p in w.items()}, heads, ops)  # (the cast is differentiable)
        loss = (y.float() - target.float()).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    losses, eager = [], 3 if graph else steps
    side = torch.cuda.Stream() if graph else None
    if graph:
        side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # (None: a no-op)
        t0 = None
        for i in range(min(steps, eager)):
            if i == 1:  # (the first step compiles and tunes)
                torch.cuda.synchronize() if device == "cuda" else None
                t0 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            losses.append(step().item())
    if device == "cuda":
        torch.cuda.synchronize()
    took = (time.perf_counter() - t0) / max(len(losses) - 1, 1) if t0 else float("nan")
    if graph and steps > eager:
        torch.cuda.current_stream().wait_stream(side)
        captured = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)  # (the gradients then live in the graph's memory)
        with torch.cuda.graph(captured):
            loss = step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(steps - eager):
            captured.replay()
            losses.append(loss.item())
        torch.cuda.synchronize()
        took = (time.perf_counter() - t0) / (steps - eager)
    return losses, took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--graph", action="store_true", help="CUDA: replay each way's whole step from a CUDA graph (the GPU's time)")
    args = ap.parse_args()
    if args.graph and args.device != "cuda":
        ap.error("--graph replays CUDA graphs: it needs --device cuda")
    seq, dim, heads = (4096, 2048, 16) if args.device == "cuda" else (128, 128, 2)
    runs = {ops: train(args.steps, seq, dim, heads, ops, args.device, layers=args.layers, graph=args.graph) for ops in WAYS}
    for i in range(args.steps):
        print(f"step {i}: loss " + " | ".join(f"{ops} {losses[i]:.5f}" for ops, (losses, _) in runs.items()))
    how = ", a CUDA graph per way" if args.graph else ""
    print("step time: " + " | ".join(f"{ops} {t * 1e3:.2f} ms" for ops, (_, t) in runs.items()) + f" ({args.device}, {args.layers} layers{how})")


if __name__ == "__main__":
    main()
