"""Issue 33's accuracy figures: the row ops' outputs and gradients in bf16, tirx's and PyTorch
eager's, each against a float64 computation on the same inputs (PyTorch's own functions over the
inputs widened): softmax, log_softmax, rms_norm, layer_norm (weight and bias), cross_entropy (the
mean loss, and its gradient; vocabularies up to 256k), per row length of 256 to 262,144. Printed
per case: each one's error relative to the reference's largest magnitude, the largest (max |x -
ref| / max |ref|) and the root-mean-square (||x - ref|| / ||ref||), and tirx's largest ÷
PyTorch's (<= 1: no worse).

    cd python/bench && python rows_error.py [--lengths 256,4096,65536,262144] [--json out.json]
    cd python/bench && python rows_error.py --device cpu --lengths 256 --elements 1024   # (a check, simulated)
"""

import argparse

import torch
import torch.nn.functional as F
from accuracy import cell, errors, save  # this directory

import tirx.ops as ops

# Each op: (tirx's, PyTorch's; each taking (x, w, b, target) and returning the output whose
# gradient is taken), the parameters it differentiates besides x.
OPS = {
    "softmax": (lambda x, w, b, t: ops.softmax(x, -1), lambda x, w, b, t: torch.softmax(x, -1), ()),
    "log_softmax": (lambda x, w, b, t: ops.log_softmax(x, -1), lambda x, w, b, t: torch.log_softmax(x, -1), ()),
    "rms_norm": (lambda x, w, b, t: ops.rms_norm(x, [x.shape[-1]], w, 1e-6), lambda x, w, b, t: F.rms_norm(x, [x.shape[-1]], w, 1e-6), ("w",)),
    "layer_norm": (lambda x, w, b, t: ops.layer_norm(x, [x.shape[-1]], w, b, 1e-5), lambda x, w, b, t: F.layer_norm(x, [x.shape[-1]], w, b, 1e-5), ("w", "b")),
    "cross_entropy": (lambda x, w, b, t: ops.cross_entropy(x, t), lambda x, w, b, t: F.cross_entropy(x, t), ()),
}


def run(fn, inputs, names, dy):
    """``fn``'s output and the gradients of (output · dy) for ``names`` of ``inputs``."""
    leaves = {n: t.detach().requires_grad_() for n, t in inputs.items() if t is not None and t.is_floating_point()}
    args = {n: leaves.get(n, t) for n, t in inputs.items()}
    out = fn(args["x"], args["w"], args["b"], args["t"])
    grads = torch.autograd.grad(out, [leaves[n] for n in names], dy if out.dim() else None)
    return [out.detach(), *grads]


def case(op, n, rows, device="cuda", dtype=torch.bfloat16):
    g = torch.Generator(device=device).manual_seed(n)
    x = torch.randn(rows, n, device=device, dtype=dtype, generator=g) * (4 if op == "cross_entropy" else 1)
    w = (torch.rand(n, device=device, generator=g) + 0.5).to(dtype)
    b = (torch.randn(n, device=device, generator=g) / 4).to(dtype)
    t = torch.randint(0, n, (rows,), device=device, generator=g)
    ours, theirs, params = OPS[op]
    names = ("x",) + params
    dy = None if op == "cross_entropy" else torch.randn(rows, n, device=device, dtype=dtype, generator=g)
    inputs = {"x": x, "w": w, "b": b, "t": t}
    ref = run(theirs, {k: (v.double() if v.is_floating_point() else v) for k, v in inputs.items()}, names, None if dy is None else dy.double())
    got = {"tirx": run(ours, inputs, names, dy), "torch": run(theirs, inputs, names, dy)}
    what = ("out",) + tuple(f"d{p}" for p in names)
    row = {"op": op, "n": n, "rows": rows}
    for name, res in got.items():
        row[name] = {w_: errors(r, rf) for w_, r, rf in zip(what, res, ref)}
    row["tirx_over_torch"] = {w_: row["tirx"][w_][0] / max(row["torch"][w_][0], 1e-300) for w_ in what}
    cells = " | ".join(f"{w_} " + cell({n: row[n][w_] for n in got}, row["tirx_over_torch"][w_]) for w_ in what)
    print(f"{op:13s} n={n:6d} rows={rows:5d}: {cells}", flush=True)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lengths", default="256,4096,65536,262144")
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--elements", type=int, default=1 << 24, help="rows × length per case")
    p.add_argument("--device", default="cuda", help="cpu: tirx's kernels in the simulator (small sizes only)")
    p.add_argument("--json")
    a = p.parse_args()
    print(torch.cuda.get_device_name() if a.device == "cuda" else a.device, "torch", torch.__version__)
    print("largest / rms error relative to the float64 reference; (x: tirx's largest ÷ PyTorch eager's)")
    rows = [case(op, n, max(1, a.elements // n), a.device) for op in a.ops.split(",") for n in map(int, a.lengths.split(","))]
    save(rows, a.json)


if __name__ == "__main__":
    main()
