"""Every kernel design of the memory-bound `tirx.ops` once on the GPU, at a small size, against
PyTorch: a CTA per row in registers, streamed through register tiles, lane groups, a cluster per
row (DSMEM, clusters of 2-16; each slice in registers or in shared memory), and the norms' backward with its partial sums in registers, shared memory and
global memory, with the next row prefetched (`cp.async`), and over a cluster; attention's schedules
(in turn, overlapped, ping-pong, FP8's, persistent), split-KV, packed sequences and KV caches. Meant to run under
compute-sanitizer (`scripts/gpu-sanitize-ops.sh`), where every launch is checked for
out-of-bounds accesses, races and barrier misuse; exits 1 on a wrong value. On a machine without
a GPU it runs in the simulator (CPU tensors).

    python python/bench/op_designs.py [--only rows,exchanges,cross_entropy,attention,gemm]

``gemm``: each GEMM kernel form of `tirx.ops` once (`_gemms`); ``cross_entropy``: its designs alone
(a subset of ``rows``).
"""

import sys

import torch

import tirx
import tirx.ops  # noqa: F401  (registers the modules below)

F = torch.nn.functional


def sdpa_reference(*args, **kwargs):
    """PyTorch's SDPA through its math backend: the f32 memory-efficient kernel it would pick has
    shared-memory races of its own that racecheck reports (`gpu-sanitize-ops.sh`), and only ours are
    under test."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(*args, **kwargs)


sm, nm = sys.modules["tirx.ops.softmax"], sys.modules["tirx.ops.norm"]
ce, nb = sys.modules["tirx.ops.cross_entropy"], sys.modules["tirx.ops.norm_backward"]
at, mm = sys.modules["tirx.ops.attention"], sys.modules["tirx.ops.matmul"]

# (design, row length, configuration)
DESIGNS = [
    ("registers", 1000, {"threads": 256}),
    ("streamed", 20000, {"threads": 256, "stream": True}),
    ("groups", 256, {"threads": 128, "tpr": 8}),
    ("cluster", 20000, {"threads": 512, "cluster": 4}),
    ("cluster, slices in shared memory", 16384, {"threads": 256, "cluster": 4, "shared": True}),
    ("cluster of 16, slices in shared memory", 65536, {"threads": 256, "cluster": 16, "shared": True}),
]
M = 5
failures = []


def check(name, got, want, tol=2e-2):
    err = float((got.float() - want.float()).abs().max())
    ok = err <= tol * max(1.0, float(want.float().abs().max()))
    print(f"{'ok ' if ok else 'BAD'} {name:55s} max error {err:.3g}", flush=True)
    if not ok:
        failures.append(name)


def run(factory, **kw):
    return tirx.compile(factory(**kw))


def main():
    dev, dt = ("cuda" if torch.cuda.is_available() else "cpu"), torch.bfloat16  # cpu: the simulator
    only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else ["rows", "attention", "gemm"]
    if "gemm" in only:
        _gemms(dev, dt)
    if "rows" in only:
        _rows(dev, dt)
    if "exchanges" in only and "rows" not in only:
        _exchanges(dev, dt)
    if "cross_entropy" in only and "rows" not in only:
        for design, n, cfg in DESIGNS:
            if not design.startswith("cluster"):
                _cross_entropy(design, n, cfg, torch.randn(M, n, device=dev, dtype=dt) * 2)
    if "attention" in only:
        _attention(dev, dt)
    print(f"{len(failures)} wrong: {failures}" if failures else "all designs match PyTorch")
    return 1 if failures else 0


def _gemms(dev, dt):
    """Each GEMM kernel form once, at a small ragged shape, through the ops (the autotuner's pick:
    under the sanitizers, the one the plain run cached): matmul (one kernel, a transposed A read in
    place, the two-kernel split-K, split-K over a cluster at a decode shape, a float32 output; the
    ping-pong design, not a candidate yet, run as itself; split-K over clusters in rounds, on 4 CTAs;
    stream-K on 5 CTAs),
    addmm (a bias row with an activation, a matrix), gated_mm, FP8 scaled_mm (per-tensor, row-wise,
    block scales), grouped_mm and scaled_grouped_mm (uneven groups, one empty)."""
    ops = tirx.ops
    g = torch.Generator(device=dev).manual_seed(0)

    def rand(*shape, dtype=dt):
        return torch.randn(*shape, device=dev, generator=g).to(dtype)

    m, n, k = 200, 136, 256
    a, b = rand(m, k), rand(k, n) / 16
    want = a.float() @ b.float()
    check("gemm matmul 200x136x256", ops.matmul(a, b), want)
    check("gemm matmul, A transposed in place", ops.matmul(a.t().contiguous().t(), b), want)
    check("gemm matmul split_k=2 (parts + finish kernel)", ops.matmul(a, b, split_k=2), want)
    check("gemm matmul out_dtype=float32", ops.matmul(a, b, out_dtype=torch.float32), want)
    c = torch.full((m, n), float("nan"), device=dev, dtype=dt)  # (ping-pong: not yet a candidate, run as a design)
    run(mm.matmul_kernel.factory, m=m, n=n, k=k, dtype="bfloat16", ctas=3, consumers=2, bn=128, pingpong=True)(a, b, c)
    check("gemm matmul ping-pong (a consumer's tiles each, in turns)", c, want)
    for mc_b in (True, False):  # (multicast pairs of a cluster: B's tile shared (a candidate), A's (a design))
        c = torch.full((m, n), float("nan"), device=dev, dtype=dt)
        run(mm.matmul_kernel.factory, m=m, n=n, k=k, dtype="bfloat16", ctas=4, consumers=2, bn=128, multicast=2, multicast_b=mc_b)(a, b, c)
        check(f"gemm matmul multicast pairs ({'B' if mc_b else 'A'} shared by a cluster's 2 CTAs, 4 CTAs)", c, want)
    c, w = torch.full((m, n), float("nan"), device=dev, dtype=dt), torch.full((1, m, n), float("nan"), device=dev)
    run(mm.matmul_kernel.factory, m=m, n=n, k=k, dtype="bfloat16", ctas=4, consumers=1, bn=64, cluster_k=2)(a, b, c, w)
    check("gemm matmul K over clusters of 2 in rounds (4 CTAs, 24 units)", c, want)
    c = torch.full((m, n), float("nan"), device=dev, dtype=dt)  # (stream-K: measured slower, a design)
    sk = run(mm.matmul_kernel.factory, m=m, n=n, k=k, dtype="bfloat16", ctas=5, consumers=1, bn=128, stream_k=True)
    sk(*mm._with_workspace(sk, (a, b, c)))
    check("gemm matmul stream-K (5 CTAs, the 32 K steps of 8 tiles)", c, want)
    ad, bd = rand(8, 1024), rand(1024, 256) / 32  # decode: split-K over a cluster among the tuner's candidates
    check("gemm matmul 8x256x1024 (decode)", ops.matmul(ad, bd), ad.float() @ bd.float())
    bias, mat = rand(n), rand(m, n)
    check("gemm addmm bias row, gelu", ops.addmm(bias, a, b, activation="gelu"), F.gelu(want + bias.float()))
    check("gemm addmm matrix, beta 0.5", ops.addmm(mat, a, b, beta=0.5), want + 0.5 * mat.float())
    wg, wu = rand(n, k) / 16, rand(n, k) / 16  # nn.Linear's (out, in)
    check("gemm gated_mm (SwiGLU)", ops.gated_mm(a, wg.t(), wu.t()), F.silu(a.float() @ wg.float().t()) * (a.float() @ wu.float().t()))
    if dev == "cuda":  # (FP8 and the grouped kernels: tensors the simulator runs too, but slowly)
        a8, b8 = (rand(m, k) / 2).to(torch.float8_e4m3fn), (rand(n + 8, k) / 2).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev)
        ref8 = a8.float() @ b8.float()
        check("gemm scaled_mm per-tensor", ops.scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16), ref8)
        sa, sb = torch.rand(m, 2, device=dev) + 0.5, torch.rand(2, 2, device=dev) + 0.5
        blocks = (a8.float().reshape(m, 2, 128) * sa[:, :, None]).reshape(m, k) @ (b8.float().t().reshape(n + 8, 2, 128) * sb.repeat_interleave(128, 0)[: n + 8, :, None]).reshape(n + 8, k).t()
        check("gemm scaled_mm block scales", ops.scaled_mm(a8, b8, sa, sb, out_dtype=torch.bfloat16), blocks)
        ra, rb = torch.rand(m, 1, device=dev) + 0.5, torch.rand(1, n + 8, device=dev) + 0.5
        check("gemm scaled_mm row-wise scales", ops.scaled_mm(a8, b8, ra, rb, out_dtype=torch.bfloat16), ref8 * ra * rb)
        offs = torch.tensor([70, 70, 190, 256], device=dev, dtype=torch.int32)
        n = 144  # (the FP8 grouped kernel's N: a multiple of 16)
        ag, bg = rand(256, k), rand(4, k, n) / 16
        wantg = torch.cat([ag[s:e].float() @ bg[i].float() for i, (s, e) in enumerate(zip([0, 70, 70, 190], offs.tolist()))])
        check("gemm grouped_mm (uneven, one empty group)", ops.grouped_mm(ag, bg, offs), wantg)
        ag8, bg8 = (ag / 2).to(torch.float8_e4m3fn), (bg.transpose(1, 2) * 8).contiguous().to(torch.float8_e4m3fn).transpose(1, 2)
        sag, sbg = torch.rand(256, device=dev) + 0.5, torch.rand(4, n, device=dev) + 0.5
        wants = torch.cat([(ag8[s:e].float() @ bg8[i].float()) * sag[s:e, None] * sbg[i][None] for i, (s, e) in enumerate(zip([0, 70, 70, 190], offs.tolist()))])
        check("gemm scaled_grouped_mm (row-wise scales)", ops.scaled_grouped_mm(ag8, bg8, sag, sbg, offs, out_dtype=torch.bfloat16), wants)


def _rows(dev, dt):
    for design, n, cfg in DESIGNS:
        x = torch.randn(M, n, device=dev, dtype=dt) * 2
        w = torch.rand(n, device=dev, dtype=dt) + 0.5
        b = torch.randn(n, device=dev, dtype=dt)
        r = torch.randn(M, n, device=dev, dtype=dt)
        dy = torch.randn(M, n, device=dev, dtype=dt)
        for log in (False, True):
            y = torch.empty_like(x)
            run(sm.softmax_kernel.factory, n=n, dtype="bfloat16", log=log, **cfg)(x, y, M)
            ref = F.log_softmax(x.float(), -1) if log else F.softmax(x.float(), -1)
            check(f"{'log_' if log else ''}softmax {design} {n}", y, ref)
            dx = torch.empty_like(x)
            run(sm.softmax_backward_kernel.factory, n=n, dtype="bfloat16", log=log, **cfg)(y, dy, dx, M)
            yf, g = y.float(), dy.float()
            want = g - yf.exp() * g.sum(-1, keepdim=True) if log else yf * (g - (g * yf).sum(-1, keepdim=True))
            check(f"{'log_' if log else ''}softmax backward {design} {n}", dx, want)
        _forward_norms(design, n, cfg, x, w, b, r)
        if not design.startswith("cluster"):
            _cross_entropy(design, n, cfg, x)
            _norm_backward(design, n, cfg, x, w, dy)
    _softmax_backward_one_slice(x, dy)
    # The norms' cluster designs over several rows per cluster (weight and bias slices copied once).
    for n, cfg in [
        (65536, {"threads": 256, "cluster": 8, "shared": True, "per_cta": 2}),
        (262144, {"threads": 256, "cluster": 16, "shared": True, "per_cta": 4}),
        (262144, {"threads": 1024, "cluster": 16, "shared": True, "per_cta": 8}),
        # (LayerNorm's only: its bias, or bias and weight, in registers)
        (262144, {"threads": 256, "cluster": 16, "shared": True, "per_cta": 4, "affine_regs": 1}),
        (65536, {"threads": 256, "cluster": 4, "shared": True, "per_cta": 2, "affine_regs": 2}),
        # (the rows per cluster a run-time argument, here 2: a last cluster of one row)
        (262144, {"threads": 512, "cluster": 8, "shared": True, "persist": True, "affine_regs": 2, "affine_once": True}),
    ]:
        xs, rs = torch.randn(M, n, device=dev, dtype=dt) * 2, torch.randn(M, n, device=dev, dtype=dt)
        ws, bs = torch.rand(n, device=dev, dtype=dt) + 0.5, torch.randn(n, device=dev, dtype=dt)
        name = f"cluster, {cfg.get('per_cta', 2)} rows per cluster" + (f", {cfg['affine_regs']} affine in registers" if "affine_regs" in cfg else "")
        extra = (2,) if cfg.get("persist") else ()
        _forward_norms(name, n, cfg, xs, ws, bs, rs, rms="affine_regs" not in cfg, extra=extra)
    x, dy = torch.randn(M, 20000, device=dev, dtype=dt), torch.randn(M, 20000, device=dev, dtype=dt)
    w = torch.rand(20000, device=dev, dtype=dt) + 0.5
    _norm_backward("streamed, partials in global memory", 20000, {"threads": 256, "stream": True, "shared_limit": 0}, x, w, dy)
    x, dy = torch.randn(M, 2048, device=dev, dtype=dt), torch.randn(M, 2048, device=dev, dtype=dt)
    _norm_backward("prefetch", 2048, {"threads": 256, "prefetch": True}, x, torch.rand(2048, device=dev, dtype=dt) + 0.5, dy)
    x, dy = torch.randn(M, 20480, device=dev, dtype=dt), torch.randn(M, 20480, device=dev, dtype=dt)
    w = torch.rand(20480, device=dev, dtype=dt) + 0.5
    _norm_backward("cluster, prefetch", 20480, {"threads": 256, "cluster": 4}, x, w, dy)  # slices of 5,120
    x, dy, w = x[:, :20000].contiguous(), dy[:, :20000].contiguous(), w[:20000].contiguous()
    _norm_backward("cluster", 20000, {"threads": 256, "cluster": 8}, x, w, dy)  # ragged slices
    x, dy = torch.randn(M, 16384, device=dev, dtype=dt), torch.randn(M, 16384, device=dev, dtype=dt)
    w = torch.rand(16384, device=dev, dtype=dt) + 0.5
    _norm_backward("cluster, slices in shared memory", 16384, {"threads": 256, "cluster": 4, "shared": True}, x, w, dy)
    _norm_backward("cluster, slices in shared memory, ring of 4", 16384, {"threads": 256, "cluster": 2, "shared": True, "ring": 4}, x, w, dy)
    _norm_backward("cluster, a slice of one tile held in registers", 16384, {"threads": 256, "cluster": 4, "shared": True, "hold": True}, x, w, dy)
    _norm_backward("cluster, slices in shared memory, ring of 1", 16384, {"threads": 256, "cluster": 4, "shared": True, "ring": 1}, x, w, dy)
    _norm_backward("streamed, dB in registers", 16384, {"threads": 1024, "stream": True}, x, w, dy)  # two tiles
    _norm_backward("streamed over whole tiles", 16384, {"threads": 256, "stream": True}, x, w, dy)  # LayerNorm: two passes
    _norm_backward("cluster, slices streamed", 16384, {"threads": 64, "cluster": 4, "stream": True}, x, w, dy)  # two tiles each
    _norm_backward("cluster, slices streamed, partials in global memory", 16384, {"threads": 64, "cluster": 2, "stream": True, "shared_limit": 0}, x, w, dy)
    _norm_backward("cluster, slices streamed, dB in registers", 16384, {"threads": 64, "cluster": 4, "stream": True, "shared_limit": 16384}, x, w, dy)
    x16, dy16 = torch.randn(M, 65536, device=dev, dtype=dt), torch.randn(M, 65536, device=dev, dtype=dt)
    w16 = torch.rand(65536, device=dev, dtype=dt) + 0.5
    _norm_backward("cluster of 16, slices in shared memory, ring of 1", 65536, {"threads": 256, "cluster": 16, "shared": True, "ring": 1}, x16, w16, dy16)
    _norm_backward("cluster of 16, slices streamed", 65536, {"threads": 64, "cluster": 16, "stream": True}, x16, w16, dy16)
    _exchanges(dev, dt, softmax=False)  # (DESIGNS ran softmax's one-row clusters)
    y, b = torch.empty_like(x), torch.randn(16384, device=dev, dtype=dt)
    run(nm.layer_norm_kernel.factory, h=16384, dtype="bfloat16", threads=256, stream=True)(x, w, b, y, M, 1e-5)
    check("layer_norm streamed over whole tiles 16384", y, F.layer_norm(x.float(), [16384], w.float(), b.float(), 1e-5))


def _exchanges(dev, dt, softmax=True):
    """The cluster designs whose exchange has no cluster barrier a row (``--only exchanges``, the
    subset racecheck covers in minutes): softmax's one-row clusters (a relaxed arrive closes each
    row; ``softmax``; the norms' one-row designs with their parameters in registers), the norms'
    forwards with the next row's moments sent ahead or several rows in flight, the norms'
    backward over chained slots."""
    if softmax:
        x = torch.randn(M, 16384, device=dev, dtype=dt) * 2
        y = torch.empty_like(x)
        run(sm.softmax_kernel.factory, n=16384, dtype="bfloat16", threads=256, cluster=4, shared=True)(x, y, M)
        check("softmax cluster, slices in shared memory (relaxed close) 16384", y, F.softmax(x.float(), -1))
    n = 262144
    xs, rs = torch.randn(M, n, device=dev, dtype=dt) * 2, torch.randn(M, n, device=dev, dtype=dt)
    ws, bs = torch.rand(n, device=dev, dtype=dt) + 0.5, torch.randn(n, device=dev, dtype=dt)
    # The next row's moments (RMSNorm: sum) sent before a row's output pass (``pipe``): all M rows
    # in one cluster, so its four slots are each used again.
    for t, cn in ((512, 16), (1024, 8)):  # (32 warps: `_common.cta_moments` across lanes)
        cfg = {"threads": t, "cluster": cn, "shared": True, "persist": True, "affine_regs": 2, "affine_once": True, "pipe": True}
        _forward_norms(f"cluster of {cn} x {t}, next row's moments sent ahead", 262144, cfg, xs, ws, bs, rs, rms=False, extra=(M,))
    y, hsum = torch.empty_like(xs), torch.empty_like(xs)
    cfg = {"threads": 1024, "cluster": 16, "shared": True, "per_cta": M, "pipe": True}
    run(nm.rms_norm_kernel.factory, h=262144, dtype="bfloat16", **cfg)(xs, ws, y, M, 1e-6)
    check("rms_norm cluster, next row's sum sent ahead 262144", y, F.rms_norm(xs.float(), [262144], ws.float(), 1e-6))
    run(nm.rms_norm_kernel.factory, h=262144, dtype="bfloat16", residual=True, **cfg)(xs, rs, ws, y, hsum, M, 1e-6)
    check("add_rms_norm cluster, next row's sum sent ahead 262144", y, F.rms_norm((xs + rs).float(), [262144], ws.float(), 1e-6))
    x16, dy16 = torch.randn(M, 65536, device=dev, dtype=dt), torch.randn(M, 65536, device=dev, dtype=dt)
    w16 = torch.rand(65536, device=dev, dtype=dt) + 0.5
    # Two and three rows in flight while one is computed (``ahead``: rings of four slices, each
    # slot refilled by its own threads without a barrier), all M rows in one cluster.
    r16, b16 = torch.randn_like(x16), torch.randn_like(w16)
    cfg = {"threads": 256, "cluster": 4, "shared": True, "per_cta": M, "affine_regs": 2, "ahead": 3}
    _forward_norms("cluster of 4, three rows in flight", 65536, {k: v for k, v in cfg.items() if k != "affine_regs"}, x16, w16, b16, r16)
    _forward_norms("cluster of 4, bias and weight in registers, three rows in flight", 65536, cfg, x16, w16, b16, r16, rms=False)
    cfg = {"threads": 256, "cluster": 4, "shared": True, "persist": True, "affine_regs": 2, "affine_once": True, "pipe": True, "ahead": 2}
    _forward_norms("cluster of 4, next row's moments sent ahead, two rows in flight", 65536, cfg, x16, w16, b16, r16, rms=False, extra=(M,))
    # The one-row designs (a relaxed arrive closes the row) with their parameters read into
    # registers with the row's slice.
    cfg = {"threads": 256, "cluster": 4, "shared": True}
    _forward_norms("cluster of 4, one row, bias and weight in registers", 65536, {**cfg, "affine_regs": 2}, x16, w16, b16, r16, rms=False)
    y = torch.empty_like(x16)
    run(nm.rms_norm_kernel.factory, h=65536, dtype="bfloat16", weight_regs=True, **cfg)(x16, w16, y, M, 1e-6)
    check("rms_norm cluster of 4, one row, weight in registers 65536", y, F.rms_norm(x16.float(), [65536], w16.float(), 1e-6))
    # The exchange over slots used in turn, no cluster barrier per row (RMSNorm; LayerNorm from saved
    # statistics).
    for design, cfg in [
        ("cluster, chained exchange", {"threads": 256, "cluster": 8, "chain": True}),
        ("cluster, slices in shared memory, chained exchange", {"threads": 256, "cluster": 16, "shared": True, "ring": 1, "chain": True}),
        ("cluster of 16, slices streamed, chained exchange", {"threads": 64, "cluster": 16, "stream": True, "chain": True}),
        ("cluster of 8, slices held in registers, chained exchange", {"threads": 256, "cluster": 8, "shared": True, "hold": True, "chain": True}),
        ("cluster of 8, partial sums in registers, chained exchange", {"threads": 256, "cluster": 8, "shared": True, "regs": True, "ring": 3, "chain": True}),
        ("cluster of 8, the next row's sums sent ahead", {"threads": 256, "cluster": 8, "shared": True, "regs": True, "ring": 3, "chain": True, "pipe": True}),
        ("cluster of 8, the weight's slice in float32", {"threads": 256, "cluster": 8, "shared": True, "regs": True, "chain": True, "w32": True}),
    ]:
        _norm_backward(design, 65536, cfg, x16, w16, dy16, cases=((False, False), (True, True)))


def _softmax_backward_one_slice(x, dy):
    """softmax's backward over a cluster with only ``y``'s slice in shared memory (``dy`` read twice)."""
    n = x.shape[1]
    y, dx = F.softmax(x.float(), -1).to(x.dtype), torch.empty_like(x)
    cfg = {"threads": 256, "cluster": 4, "shared": True, "slice_limit": 0}
    run(sm.softmax_backward_kernel.factory, n=n, dtype="bfloat16", **cfg)(y, dy, dx, M)
    yf, g = y.float(), dy.float()
    check(f"softmax backward cluster, y's slice in shared memory {n}", dx, yf * (g - (g * yf).sum(-1, keepdim=True)))


def _cross_entropy(design, n, cfg, x):
    t = torch.randint(0, n, (M,), device=x.device)
    t[1] = -100
    loss, lse = torch.empty(M, device=x.device), torch.empty(M, device=x.device)
    run(ce.cross_entropy_kernel.factory, v=n, dtype="bfloat16", smoothing=True, **cfg)(x, t, loss, lse, M, -100, 0.1)
    check(f"cross_entropy {design} {n}", loss, F.cross_entropy(x.float(), t, reduction="none", label_smoothing=0.1))
    # The "mean"/"sum" form: each CTA's summed loss and kept-row count, its first `sum_parts` rows.
    part = torch.full((M, 2), float("nan"), device=x.device)
    run(ce.cross_entropy_kernel.factory, v=n, dtype="bfloat16", smoothing=True, sums=True, **cfg)(x, t, part, M, -100, 0.1)
    kept = torch.tensor([float((t != -100).sum())], device=x.device)
    want = torch.cat([F.cross_entropy(x.float(), t, reduction="sum", label_smoothing=0.1).reshape(1), kept])
    check(f"cross_entropy per-CTA sums {design} {n}", part[: ce.sum_parts(cfg, M)].sum(0), want)
    g = torch.ones(M, device=x.device)
    dx = torch.empty_like(x)
    run(ce.cross_entropy_backward_kernel.factory, v=n, dtype="bfloat16", **cfg)(x, t, lse, g, dx, M, -100, 0.1)
    xr = x.float().requires_grad_()
    F.cross_entropy(xr, t, reduction="sum", label_smoothing=0.1).backward()
    check(f"cross_entropy backward {design} {n}", dx, xr.grad)


def _attention(dev, dt):
    """Attention's designs, small: each schedule over whole and ragged tiles, causal or not, split-KV,
    packed sequences and KV caches, against PyTorch's SDPA."""
    sq, sk, h = 200, 300, 2
    for d, cfg in [
        (64, {"consumers": 1, "bn": 64}),
        (128, {"consumers": 2, "bn": 128, "overlap": True}),
        (128, {"consumers": 2, "bn": 64, "overlap": True, "pingpong": True}),
        (64, {"consumers": 3, "bn": 128, "overlap": True, "pingpong": True}),
        (128, {"consumers": 2, "bn": 176, "overlap": True}),
        (128, {"consumers": 2, "bn": 64, "overlap": True, "pingpong": True, "persistent": True, "sms": 2}),
    ]:
        q = torch.randn(1, h, sq, d, device=dev, dtype=dt)
        k, v = torch.randn(1, h, sk, d, device=dev, dtype=dt), torch.randn(1, h, sk, d, device=dev, dtype=dt)
        for causal in (False, True):
            prim = at.attention_kernel.factory(
                heads=h, kv_heads=h, batch=1, seq_q=sq, seq_k=sk, d=d, dtype="bfloat16", causal=causal, scale=d**-0.5, lse=False,
                seq_major=False, **cfg,
            )
            o = torch.empty(h, sq, d, device=dev, dtype=dt)
            tirx.compile(prim)(q[0], k[0], v[0], o, torch.empty(h, at.lse_rows(sq), device=dev))
            check(f"attention {cfg} d={d} causal={causal}", o, sdpa_reference(q.float(), k.float(), v.float(), is_causal=causal)[0])
    _fp8_attention(dev, sq, sk, h)
    q = torch.randn(2, 8, 1, 128, device=dev, dtype=dt)
    k, v = torch.randn(2, 2, 700, 128, device=dev, dtype=dt), torch.randn(2, 2, 700, 128, device=dev, dtype=dt)
    got = at._run(q, k, v, False, None, True, False, splits=3)
    check("attention split-KV, grouped heads packed", got, sdpa_reference(q.float(), k.float(), v.float(), enable_gqa=True))
    lens = [130, 0, 70]
    cu = torch.tensor([0, 130, 130, 200], dtype=torch.int32, device=dev)
    qv, kv_ = torch.randn(200, 4, 64, device=dev, dtype=dt), torch.randn(200, 2, 64, device=dev, dtype=dt)
    vv = torch.randn_like(kv_)
    got = tirx.ops.varlen_attention(qv, kv_, vv, cu, cu, max(lens), is_causal=True)
    for i in (0, 2):
        a, e = int(cu[i]), int(cu[i + 1])
        want = sdpa_reference(
            qv[a:e].transpose(0, 1)[None].float(), kv_[a:e].transpose(0, 1)[None].float(), vv[a:e].transpose(0, 1)[None].float(),
            is_causal=True, enable_gqa=True,
        )
        check(f"varlen attention, sequence {i}", got[a:e], want[0].transpose(0, 1))
    qc = torch.randn(2, 1, 4, 64, device=dev, dtype=dt)
    kc, vc = torch.randn(2, 500, 2, 64, device=dev, dtype=dt), torch.randn(2, 500, 2, 64, device=dev, dtype=dt)
    cache = torch.tensor([500, 37], dtype=torch.int32, device=dev)
    got = tirx.ops.kvcache_attention(qc, kc, vc, cache)
    # A paged copy of the caches (16-row pages over 512 rows, the 500 padded), shuffled.
    kp = torch.zeros(2 * 32, 16, 2, 64, device=dev, dtype=dt)
    vp = torch.zeros_like(kp)
    table = torch.randperm(64, device=dev).int().reshape(2, 32)
    kp[table.flatten().long()] = torch.nn.functional.pad(kc, (0, 0, 0, 0, 0, 12)).reshape(64, 16, 2, 64)
    vp[table.flatten().long()] = torch.nn.functional.pad(vc, (0, 0, 0, 0, 0, 12)).reshape(64, 16, 2, 64)
    check("kvcache attention, paged (16-row pages)", tirx.ops.kvcache_attention(qc, kp, vp, cache, block_table=table), got)
    for i in range(2):
        n = int(cache[i])
        want = sdpa_reference(
            qc[i : i + 1].transpose(1, 2).float(), kc[i : i + 1, :n].transpose(1, 2).float(), vc[i : i + 1, :n].transpose(1, 2).float(), enable_gqa=True
        )
        check(f"kvcache attention, sequence {i}", got[i : i + 1].transpose(1, 2), want)
    # Split-KV with its combine in the same launch (the last split's tickets, between fences).
    prim = at.attention_kernel.factory(
        heads=2, kv_heads=2, batch=2, seq_q=2, seq_k=500, d=64, dtype="bfloat16", causal=False, scale=0.125, lse=False,
        seq_major=True, consumers=1, bn=128, overlap=True, splits=2, kv_lens=True, q_group=2, combine=True,
    )
    one = torch.empty_like(got)
    at._launcher(tirx.compile(prim), 2, 4, 2, 64, "bfloat16", False, 2, group=2, combined=True)((qc.reshape(4, 2, 64), kc, vc, cache), one, torch.empty(4, at.lse_rows(2), device=dev))
    check("kvcache attention, split-KV combined in one launch", one, got)


def _fp8_attention(dev, sq, sk, h):
    """FP8 attention's designs (e4m3, d = 128; seq-major Q and K where ``major``): one CTA a
    tile over 192 keys, and the tuner's persistent CTAs over 192 and 224 keys (2 CTAs: each takes
    several tiles, the next Q loaded during the last P V), also taking tiles from a counter
    (``dynamic``), two of them with the op's lazy rescale (``rescale_threshold``), and O through
    shared memory by TMA (``tma_epilogue``) one CTA a tile and persistent, against SDPA on the
    dequantised inputs, within P's rounding to e4m3 (2^-4 of a weight: of max |V| in O)."""
    d, f8 = 128, torch.float8_e4m3fn
    q, k, v = (torch.randn(1, h, n, d, device=dev).to(f8) for n in (sq, sk, sk))
    vt = at._fp8_values_on_device(v)
    for cfg, major in [
        ({"consumers": 2, "bn": 192, "overlap": True, "pingpong": True}, False),
        ({"consumers": 2, "bn": 192, "overlap": True, "pingpong": False, "persistent": True, "sms": 2}, True),
        ({"consumers": 2, "bn": 224, "overlap": True, "pingpong": False, "persistent": True, "sms": 2}, True),
        ({"consumers": 2, "bn": 192, "overlap": True, "pingpong": False, "persistent": True, "sms": 2, "dynamic": True}, True),
        ({"consumers": 2, "bn": 224, "overlap": True, "pingpong": True, "rescale_threshold": at.FP8_RESCALE_THRESHOLD}, False),
        ({"consumers": 2, "bn": 192, "overlap": True, "pingpong": False, "persistent": True, "sms": 2, "dynamic": True,
          "rescale_threshold": at.FP8_RESCALE_THRESHOLD}, True),
        ({"consumers": 2, "bn": 192, "overlap": True, "pingpong": True, "tma_epilogue": True}, False),
        ({"consumers": 2, "bn": 224, "overlap": True, "pingpong": False, "persistent": True, "sms": 2, "dynamic": True,
          "rescale_threshold": at.FP8_RESCALE_THRESHOLD, "tma_epilogue": True}, True),
    ]:
        qk = [t.transpose(1, 2).contiguous() for t in (q, k)] if major else [q[0], k[0]]
        for causal in (False, True):
            prim = at.attention_kernel.factory(
                heads=h, kv_heads=h, batch=1, seq_q=sq, seq_k=sk, d=d, dtype="float8_e4m3fn", causal=causal, scale=d**-0.5, lse=False,
                seq_major=major, **cfg,
            )
            o = torch.empty(h, sq, d, device=dev, dtype=torch.bfloat16)
            kern = tirx.compile(prim)
            kern(*at._with_counter(kern, (*qk, vt, torch.ones(h, 2, device=dev), o, torch.empty(h, at.lse_rows(sq), device=dev))))
            want = sdpa_reference(q.float(), k.float(), v.float(), is_causal=causal)[0]
            tol = (2.0**-4 * float(v.float().abs().max()) + 1e-2) / max(1.0, float(want.abs().max()))
            check(f"attention FP8 {cfg} seq_major={major} causal={causal}", o, want, tol)


def _forward_norms(design, n, cfg, x, w, b, r, rms=True, extra=()):
    """rms_norm and add_rms_norm (``rms``), layer_norm, add_layer_norm and layer_norm's statistics
    (``extra``: LayerNorm's arguments after ``eps``)."""
    dev = x.device
    y, hsum = torch.empty_like(x), torch.empty_like(x)
    if rms:
        run(nm.rms_norm_kernel.factory, h=n, dtype="bfloat16", **cfg)(x, w, y, M, 1e-6)
        check(f"rms_norm {design} {n}", y, F.rms_norm(x.float(), [n], w.float(), 1e-6))
        run(nm.rms_norm_kernel.factory, h=n, dtype="bfloat16", residual=True, **cfg)(x, r, w, y, hsum, M, 1e-6)
        check(f"add_rms_norm {design} {n}", y, F.rms_norm((x + r).float(), [n], w.float(), 1e-6))
    run(nm.layer_norm_kernel.factory, h=n, dtype="bfloat16", **cfg)(x, w, b, y, M, 1e-5, *extra)
    check(f"layer_norm {design} {n}", y, F.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5))
    mean, rstd = torch.empty(M, device=dev), torch.empty(M, device=dev)
    run(nm.layer_norm_kernel.factory, h=n, dtype="bfloat16", residual=True, stats=True, **cfg)(x, r, w, b, y, hsum, mean, rstd, M, 1e-5, *extra)
    check(f"add_layer_norm {design} {n}", y, F.layer_norm((x + r).float(), [n], w.float(), b.float(), 1e-5))
    run(nm.layer_norm_kernel.factory, h=n, dtype="bfloat16", stats=True, **cfg)(x, w, b, y, mean, rstd, M, 1e-5, *extra)
    _, want_mean, want_rstd = torch.ops.aten.native_layer_norm(x.float(), [n], None, None, 1e-5)
    check(f"layer_norm (mean, rstd) {design} {n}", torch.stack([mean, rstd]), torch.stack([want_mean[:, 0], want_rstd[:, 0]]))


def _norm_backward(design, n, cfg, x, w, dy, cases=((False, False), (True, False), (True, True))):
    """RMSNorm's and LayerNorm's (its statistics recomputed, then the forward's saved ones)."""
    for centered, saved in cases:
        ctas = max(8, cfg["cluster"]) if cfg.get("cluster") else 3
        dx = torch.empty_like(x)
        hp = nb._padded(n)
        dwp = torch.zeros(ctas, hp, device=x.device)
        dbp = torch.zeros(ctas, hp, device=x.device)
        tail = (1e-5,)
        if saved:
            xf = x.float()
            var, mean = torch.var_mean(xf, -1, correction=0)
            tail = (mean, torch.rsqrt(var + 1e-5))
        k = run(nb.norm_backward_kernel.factory, h=n, dtype="bfloat16", centered=centered, saved=saved, **cfg)
        k(x, w, dy, dx, dwp, dbp, M, ctas, *tail)
        xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
        if centered:
            out = F.layer_norm(xr, [n], wr, None, 1e-5)
        else:
            out = F.rms_norm(xr, [n], wr, 1e-5)
        out.backward(dy.float())
        name = ("layer_norm" if centered else "rms_norm") + (" (saved statistics)" if saved else "")
        check(f"{name} backward dx {design} {n}", dx, xr.grad)
        used = nb.partial_rows(cfg, ctas)
        check(f"{name} backward dw {design} {n}", dwp[:used].sum(0)[:n], wr.grad)
        if centered:
            check(f"{name} backward db {design} {n}", dbp[:used].sum(0)[:n], dy.float().sum(0))


if __name__ == "__main__":
    sys.exit(main())
