"""One design of a row op, timed on its own: the script to run under Nsight Compute when asking
what limits a design (README, the issue-33 sweep).

    cd python/bench && python row_design.py bwd H CENTERED '{"threads": 256, "cluster": 8, "shared": true}' [ROWS]
    ncu -k regex:norm_ -s 3 -c 1 --section SpeedOfLight --section WarpStateStats \\
        --section Occupancy --section MemoryWorkloadAnalysis python row_design.py ...

fwd: a norm's forward (`tirx.ops.norm`'s kernels, one launch over the rows); bwd: its backward on
its persistent grid; softmax: softmax's forward (`ncu -k regex:softmax_`). H: the row length;
CENTERED: 1 for LayerNorm, 0 for RMSNorm, 2 for LayerNorm's backward from the forward's saved mean
and rstd (as autograd runs it); for softmax 1 is log_softmax. bf16 rows: ROWS of them, or ~1 GiB of x."""

import json
import sys

import torch
from ops import copy_us  # this directory

import tirx
import tirx.ops  # noqa: F401  (loads the ops' modules)

c, nm, nb, sm = (sys.modules[f"tirx.ops.{m}"] for m in ("_common", "norm", "norm_backward", "softmax"))


def timed_ms(k, args) -> float:
    for _ in range(3):
        k(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        k(*args)
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 10


def forward(x, h, centered, cfg):
    m = x.shape[0]
    w = torch.rand(h, device="cuda", dtype=torch.bfloat16) + 0.5
    y = torch.empty_like(x)
    if centered:
        k = tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype="bfloat16", **cfg))
        args = (x, w, torch.randn_like(w), y, m, 1e-5)
    else:
        k = tirx.compile(nm.rms_norm_kernel.factory(h=h, dtype="bfloat16", **cfg))
        args = (x, w, y, m, 1e-5)
    args = c.persist_args(k, args)  # (a ``persist`` design's rows per cluster after them)
    ms = timed_ms(k, args)
    copy_ms = copy_us(2 * x.numel() * x.element_size()) / 1e3  # x read, y written
    print(
        f"h={h} {'layer' if centered else 'rms'}_norm forward {cfg}: {ms:.3f} ms ({copy_ms / ms:.2f} of a copy of the "
        f"bytes), resident {k.resident_ctas()} CTAs, shared memory {k.meta['dynamic_smem_bytes']} B"
    )


def softmax(x, h, log, cfg):
    k = tirx.compile(sm.softmax_kernel.factory(n=h, dtype="bfloat16", log=log, **cfg))
    ms = timed_ms(k, (x, torch.empty_like(x), x.shape[0]))
    copy_ms = copy_us(2 * x.numel() * x.element_size()) / 1e3  # x read, y written
    print(
        f"h={h} {'log_' if log else ''}softmax {cfg}: {ms:.3f} ms ({copy_ms / ms:.2f} of a copy of the bytes), "
        f"resident {k.resident_ctas()} CTAs, shared memory {k.meta['dynamic_smem_bytes']} B"
    )


def main():
    way, h, cfg = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[4])
    centered, saved = sys.argv[3] in "12", sys.argv[3] == "2"
    m = int(sys.argv[5]) if len(sys.argv) > 5 else (1 << 30) // (2 * h)
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    if way == "fwd":
        return forward(x, h, centered, cfg)
    if way == "softmax":
        return softmax(x, h, sys.argv[3] == "1", cfg)
    dy = torch.randn_like(x)
    w = torch.rand(h, device="cuda", dtype=torch.bfloat16) + 0.5
    dx = torch.empty_like(x)
    k = tirx.compile(nb.norm_backward_kernel.factory(h=h, dtype="bfloat16", centered=centered, saved=saved, **cfg))
    n = nb._grid(k, x, nb._most_ctas(x, m, h))
    dwp = torch.zeros(n, nb._padded(h), device="cuda")
    dbp = torch.zeros_like(dwp)
    tail = (1e-5,)
    if saved:
        var, mean = torch.var_mean(x.float(), -1, correction=0)
        tail = (mean, torch.rsqrt(var + 1e-5))
    ms = timed_ms(k, (x, w, dy, dx, dwp, dbp, m, n, *tail))
    copy_ms = copy_us(3 * x.numel() * x.element_size()) / 1e3  # x, dy read; dx written
    print(
        f"h={h} {'layer' if centered else 'rms'}_norm backward {cfg}: grid {n} (resident {k.resident_ctas()}), "
        f"{ms:.3f} ms ({copy_ms / ms:.2f} of a copy of the bytes), shared memory {k.meta['dynamic_smem_bytes']} B"
    )


if __name__ == "__main__":
    main()
