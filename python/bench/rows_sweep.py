"""Issue 33's sweep: the memory-bound `tirx.ops` over rows of 256 to 262,144 elements (bf16), the
number of rows sized so that the input is ~``--gb`` GB (far past the 50 MB L2: no flush needed),
each beside PyTorch eager, `torch.compile` and a device copy of the same bytes (bytes read +
written once), in one process, called from Python as users call them (`ops.py`'s timing: host
time per call over back-to-back batches). Forward: softmax, log_softmax, rms_norm, layer_norm,
add_rms_norm and add_layer_norm (the residual add fused: read x and r, write y and h),
cross_entropy (reads the logits, writes a float per row); backward: softmax and log_softmax
(read y and dy, write dx), cross_entropy's (the registered backward: reads the logits, writes
their gradient) beside PyTorch's autograd of its own loss, rms_norm's and layer_norm's (read x
and dy, write dx; dW and dB summed over rows) beside PyTorch's autograd. Each result is checked first.

    python python/bench/rows_sweep.py [--gb 1] [--only softmax,...] [--lengths 256,1024,...] [--json out.json]
"""

import argparse
import json

import torch
from ops import copy_us, per_call_us  # this directory

import tirx.ops as ops

F = torch.nn.functional
LENGTHS = (256, 1024, 4096, 16384, 65536, 262144)


def _ce_backward_parts(x, t):
    """Ours: the registered backward from the forward's lse; PyTorch's: autograd of its loss."""
    _, lse = torch.ops.tirx.cross_entropy_rows(x, t, None, -100, 0.0)
    g = torch.full((x.shape[0],), 1.0 / x.shape[0], device=x.device)
    mine = lambda: torch.ops.tirx.cross_entropy_backward(x, t, lse, g, None, -100, 0.0)  # noqa: E731
    xr = x.detach().requires_grad_()
    loss = F.cross_entropy(xr, t)
    eager = lambda: torch.autograd.grad(loss, xr, retain_graph=True)[0]  # noqa: E731
    cl = torch.compile(lambda x, t: F.cross_entropy(x, t))(xr, t)
    compiled = lambda: torch.autograd.grad(cl, xr, retain_graph=True)[0]  # noqa: E731
    return mine, eager, compiled


def _norm_backward_parts(x, w, centered):
    """Ours: the registered backward (dx, dW, dB; LayerNorm's from its forward's saved mean and
    rstd, as autograd calls it); PyTorch's: autograd of its own norm."""
    dy = torch.randn_like(x)
    eps = 1e-5
    mean = rstd = None
    if centered:
        _, mean, rstd = torch.ops.tirx.layer_norm(x, [x.shape[-1]], w, w, eps)
    mine = lambda: torch.ops.tirx.norm_backward(dy, x, w, mean, rstd, eps, centered, 1)  # noqa: E731
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    if centered:
        f = lambda x, w: F.layer_norm(x.to(w.dtype), [x.shape[-1]], w, w, eps).to(x.dtype)  # noqa: E731
    else:
        f = lambda x, w: F.rms_norm(x.to(w.dtype), [x.shape[-1]], w, eps).to(x.dtype)  # noqa: E731
    y, yc = f(xr, wr), torch.compile(f)(xr, wr)
    eager = lambda: torch.autograd.grad(y, (xr, wr), dy, retain_graph=True)  # noqa: E731
    compiled = lambda: torch.autograd.grad(yc, (xr, wr), dy, retain_graph=True)  # noqa: E731
    return mine, eager, compiled


def cases():
    """name -> (bytes per element moved, build(x, w, t) -> (mine, eager, compiled, check))."""
    aten = torch.ops.aten
    sm_c = torch.compile(lambda x: F.softmax(x, -1))
    lsm_c = torch.compile(lambda x: F.log_softmax(x, -1))
    rms_c = torch.compile(lambda x, w: F.rms_norm(x.to(w.dtype), [x.shape[-1]], w, 1e-6).to(x.dtype))
    ln_c = torch.compile(lambda x, w: F.layer_norm(x.to(w.dtype), [x.shape[-1]], w, w, 1e-5).to(x.dtype))
    ce_c = torch.compile(lambda x, t: F.cross_entropy(x, t))
    smb_c = torch.compile(lambda dy, y: aten._softmax_backward_data(dy, y, -1, y.dtype))
    lsmb_c = torch.compile(lambda dy, y: aten._log_softmax_backward_data(dy, y, -1, y.dtype))

    def add_rms(x, r, w):
        h = x + r
        return F.rms_norm(h.to(w.dtype), [x.shape[-1]], w, 1e-6).to(h.dtype), h

    def add_ln(x, r, w):
        h = x + r
        return F.layer_norm(h.to(w.dtype), [x.shape[-1]], w, w, 1e-5).to(h.dtype), h

    add_rms_c, add_ln_c = torch.compile(add_rms), torch.compile(add_ln)

    def fwd(mine, eager, compiled):
        return lambda x, w, t: (lambda: mine(x, w, t), lambda: eager(x, w, t), lambda: compiled(x, w, t))

    def fused(mine, eager, compiled):  # the residual add fused: reads x and r, writes y and h
        def build(x, w, t):
            r = torch.randn_like(x)
            return lambda: mine(x, r, w), lambda: eager(x, r, w), lambda: compiled(x, r, w)

        return build

    def bwd(op, theirs, compiled, fwd_fn):
        def build(x, w, t):
            y = fwd_fn(x, -1)
            dy = torch.randn_like(x)
            return lambda: op(dy, y), lambda: theirs(dy, y, -1, y.dtype), lambda: compiled(dy, y)

        return build

    return {
        "softmax": (2, fwd(lambda x, w, t: ops.softmax(x), lambda x, w, t: F.softmax(x, -1), lambda x, w, t: sm_c(x))),
        "log_softmax": (2, fwd(lambda x, w, t: ops.log_softmax(x), lambda x, w, t: F.log_softmax(x, -1), lambda x, w, t: lsm_c(x))),
        "rms_norm": (
            2,
            fwd(
                lambda x, w, t: ops.rms_norm(x, [x.shape[-1]], w, 1e-6),
                lambda x, w, t: F.rms_norm(x.to(w.dtype), [x.shape[-1]], w, 1e-6).to(x.dtype),
                lambda x, w, t: rms_c(x, w),
            ),
        ),
        "layer_norm": (
            2,
            fwd(
                lambda x, w, t: ops.layer_norm(x, [x.shape[-1]], w, w, 1e-5),
                lambda x, w, t: F.layer_norm(x.to(w.dtype), [x.shape[-1]], w, w, 1e-5).to(x.dtype),
                lambda x, w, t: ln_c(x, w),
            ),
        ),
        "add_rms_norm": (4, fused(lambda x, r, w: ops.add_rms_norm(x, r, [x.shape[-1]], w, 1e-6), add_rms, add_rms_c)),
        "add_layer_norm": (4, fused(lambda x, r, w: ops.add_layer_norm(x, r, [x.shape[-1]], w, w, 1e-5), add_ln, add_ln_c)),
        "cross_entropy": (
            1,
            fwd(lambda x, w, t: ops.cross_entropy(x, t), lambda x, w, t: F.cross_entropy(x, t), lambda x, w, t: ce_c(x, t)),
        ),
        "softmax_bwd": (3, bwd(ops.softmax_backward, aten._softmax_backward_data, smb_c, torch.softmax)),
        "log_softmax_bwd": (3, bwd(ops.log_softmax_backward, aten._log_softmax_backward_data, lsmb_c, torch.log_softmax)),
        "cross_entropy_bwd": (2, lambda x, w, t: _ce_backward_parts(x, t)),
        "rms_norm_bwd": (3, lambda x, w, t: _norm_backward_parts(x, w, False)),
        "layer_norm_bwd": (3, lambda x, w, t: _norm_backward_parts(x, w, True)),
    }


def _check(name, mine, eager):
    got, want = mine(), eager()
    if isinstance(got, tuple):  # dx; the norms' dW too (summed over the rows in another order)
        if name.endswith("norm_bwd"):
            # Sums over up to millions of rows: PyTorch's bf16 products are rounded before the sum,
            # so compare the vectors as a whole.
            mine_w = got[1].float() + (got[2].float() if name == "layer_norm_bwd" else 0)  # weight = bias here
            err = float((mine_w - want[1].float()).norm() / want[1].float().norm())
            assert err < 2**-6, (name, err)
        got, want = got[0], want[0]
    tol = dict(rtol=2**-6, atol=2**-7) if "bwd" in name else dict(rtol=2**-7, atol=1e-5)
    if name == "cross_entropy_bwd":
        tol = dict(rtol=2**-6, atol=2**-20)
    torch.testing.assert_close(got.float(), want.float(), **tol)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.0)
    ap.add_argument("--only")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--json")
    ap.add_argument("--w-dtype", default="bfloat16", help="the norms' weight: bfloat16, or float32 (PyTorch's mixed precision)")
    args = ap.parse_args()
    torch._dynamo.config.cache_size_limit = 64
    torch._functorch.config.donated_buffer = False  # the compiled backward is timed repeatedly
    table = cases()
    names = args.only.split(",") if args.only else list(table)
    results = []
    print(torch.cuda.get_device_name(), "torch", torch.__version__, flush=True)
    for n in map(int, args.lengths.split(",")):
        m = max(1, int(args.gb * 2**30) // (2 * n))
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 3
        w = torch.rand(n, device="cuda", dtype=getattr(torch, args.w_dtype)) + 0.5
        t = torch.randint(0, n, (m,), device="cuda")
        for name in names:
            per_elem, build = table[name]
            mine, eager, compiled = build(x, w, t)
            _check(name, mine, eager)
            nbytes = per_elem * x.numel() * x.element_size()
            us = {"tirx": per_call_us(mine), "eager": per_call_us(eager), "compile": per_call_us(compiled)}
            us["copy"] = copy_us(nbytes)
            r = {"op": name, "shape": [m, n], "us": us, "gbps": {k: nbytes / v / 1e3 for k, v in us.items()}}
            r["of_copy"], r["vs_eager"], r["vs_compile"] = us["copy"] / us["tirx"], us["eager"] / us["tirx"], us["compile"] / us["tirx"]
            results.append(r)
            if args.json:  # after every point: a run cut short keeps what it measured
                with open(args.json, "w") as f:
                    json.dump(results, f, indent=1)
            g = r["gbps"]
            print(
                f"{name:18s} {m:8d} x {n:<6d} tirx {g['tirx']:6.0f} GB/s ({r['of_copy']:.2f} of copy {g['copy']:.0f}) | "
                f"eager {g['eager']:6.0f} | compile {g['compile']:6.0f} | x compile {r['vs_compile']:.2f}",
                flush=True,
            )
        del x, w, t
        torch.cuda.empty_cache()
    worst = min(results, key=lambda r: r["of_copy"])
    print(f"worst: {worst['op']} {worst['shape']} at {worst['of_copy']:.2f} of copy", flush=True)


if __name__ == "__main__":
    main()
