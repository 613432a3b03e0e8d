"""`tirx.ops.cross_entropy` (issue 33 item 3): loss and gradient against NumPy in float64 (the
simulator) over vocabularies in registers and streamed, label smoothing, ignore_index and
all-ignored rows, PyTorch's shapes and errors; autograd through the registered op (eager and
torch.compile) against PyTorch's; on the GPU against PyTorch at vocab 256k."""

import sys

import numpy as np
import pytest

import tirx.ops as ops
from tirx.runtime import numpy_dtype

F64 = np.float64
ce_module = sys.modules["tirx.ops.cross_entropy"]


def _ref(x, t, ignore_index=-100, ls=0.0):
    """Per-row losses and the gradient of their sum, in float64."""
    x = x.astype(F64)
    v = x.shape[1]
    m = x.max(1, keepdims=True)
    e = np.exp(x - m)
    lse = (m + np.log(e.sum(1, keepdims=True)))[:, 0]
    keep = t != ignore_index
    tt = np.where(keep, t, 0)
    rows = np.arange(len(t))
    loss = np.where(keep, lse - (1 - ls) * x[rows, tt] - ls / v * x.sum(1), 0.0)
    onehot = np.zeros_like(x)
    onehot[rows, tt] = 1.0
    grad = (e / e.sum(1, keepdims=True) - ls / v - (1 - ls) * onehot) * keep[:, None]
    return loss, grad


def _inputs(rows, v, dtype, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, v)) * 4).astype(numpy_dtype(dtype))
    t = rng.integers(0, v, rows)
    t[1 % rows] = -100  # an ignored row
    return x, t


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("v", [1, 7, 1000, 5000, 70001])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_loss_and_gradient_match_float64(dtype, v, ls):
    x, t = _inputs(3, v, dtype)
    loss, grad = _ref(x, t, ls=ls)
    # float32 throughout; 16-bit logits are read exactly, the loss and gradient rounded once.
    got = ops.cross_entropy(x, t, label_smoothing=ls, reduction="none")
    assert got.dtype == x.dtype and got.shape == (3,)
    rtol = 1e-5 if dtype == "float32" else 2.0**-7
    np.testing.assert_allclose(got.astype(F64), loss, rtol=rtol, atol=1e-5)
    for reduction, scale in (("sum", 1.0), ("mean", 0.5)):
        want = loss.sum() * scale
        np.testing.assert_allclose(float(ops.cross_entropy(x, t, label_smoothing=ls, reduction=reduction)), want, rtol=rtol, atol=1e-5)
        dx = ops.cross_entropy_backward(x, t, np.float32(2.0), label_smoothing=ls, reduction=reduction)
        assert dx.dtype == x.dtype and dx.shape == x.shape
        np.testing.assert_allclose(dx.astype(F64), 2.0 * scale * grad, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-4)
    g_rows = np.arange(1, 4, dtype=np.float32)
    dx = ops.cross_entropy_backward(x, t, g_rows, label_smoothing=ls, reduction="none")
    np.testing.assert_allclose(dx.astype(F64), grad * g_rows[:, None], rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-4)


def test_ignored_rows_shapes_and_targets():
    x, t = _inputs(4, 300, "float32", seed=3)
    # Every row ignored: "none" and "sum" are 0, "mean" 0 / 0 (NaN), as PyTorch's.
    all_ignored = np.full(4, 7)
    assert (ops.cross_entropy(x, all_ignored, ignore_index=7, reduction="none") == 0).all()
    assert ops.cross_entropy(x, all_ignored, ignore_index=7, reduction="sum") == 0
    assert np.isnan(ops.cross_entropy(x, all_ignored, ignore_index=7))
    assert (ops.cross_entropy_backward(x, all_ignored, np.float32(1), ignore_index=7, reduction="sum") == 0).all()
    # A class index as ignore_index: rows of that target are skipped, others keep it.
    t2 = np.array([5, 9, 5, 0])
    loss, _ = _ref(x, t2, ignore_index=5)
    np.testing.assert_allclose(ops.cross_entropy(x, t2, ignore_index=5, reduction="none"), loss, rtol=1e-5, atol=1e-6)
    # (C,) with a 0-d target; int32 targets.
    one = ops.cross_entropy(x[0], np.int64(t2[0]), reduction="none")
    assert one.shape == ()
    np.testing.assert_allclose(float(one), _ref(x[:1], t2[:1])[0][0], rtol=1e-5)
    np.testing.assert_allclose(ops.cross_entropy(x, t2.astype(np.int32), reduction="sum"), _ref(x, t2)[0].sum(), rtol=1e-5)
    # (N, C, d1, d2): the class dim is dim 1, as PyTorch's.
    rng = np.random.default_rng(4)
    xk = rng.standard_normal((2, 5, 3, 2)).astype(np.float32)
    tk = rng.integers(0, 5, (2, 3, 2))
    flat_x = np.moveaxis(xk, 1, -1).reshape(-1, 5)
    loss, grad = _ref(flat_x, tk.reshape(-1))
    got = ops.cross_entropy(xk, tk, reduction="none")
    assert got.shape == (2, 3, 2)
    np.testing.assert_allclose(got.reshape(-1), loss, rtol=1e-5, atol=1e-6)
    dx = ops.cross_entropy_backward(xk, tk, np.float32(1), reduction="sum")
    assert dx.shape == xk.shape
    np.testing.assert_allclose(np.moveaxis(dx, 1, -1).reshape(-1, 5), grad, rtol=1e-5, atol=1e-6)


def test_errors():
    x = np.zeros((2, 10), np.float32)
    with pytest.raises(IndexError, match="target 10 of row 1 is out of range for 10 classes"):
        ops.cross_entropy(x, np.array([0, 10]))
    with pytest.raises(TypeError, match="class probabilities are not supported"):
        ops.cross_entropy(x, np.zeros((2, 10), np.float32))
    with pytest.raises(ValueError, match="reduction='avg'"):
        ops.cross_entropy(x, np.array([0, 1]), reduction="avg")
    with pytest.raises(ValueError, match="label_smoothing=1.5"):
        ops.cross_entropy(x, np.array([0, 1]), label_smoothing=1.5)
    with pytest.raises(ValueError, match=r"target of shape \[3\] for logits \[2, 10\]; expected \[2\]"):
        ops.cross_entropy(x, np.array([0, 1, 2]))
    with pytest.raises(TypeError, match="int32 input"):
        ops.cross_entropy(np.zeros((2, 10), np.int32), np.array([0, 1]))


def _weighted_ref(x, t, w, ignore_index=-100, ls=0.0):
    """Per-row losses with class weights ``w`` (PyTorch's: the target's weight, and each class's
    in the smoothing term), the gradient of their sum, and "mean"'s divisor, in float64."""
    x, w = x.astype(F64), w.astype(F64)
    v = x.shape[1]
    m = x.max(1, keepdims=True)
    e = np.exp(x - m)
    p = e / e.sum(1, keepdims=True)
    lse = (m + np.log(e.sum(1, keepdims=True)))[:, 0]
    keep = t != ignore_index
    tt = np.where(keep, t, 0)
    rows = np.arange(len(t))
    w_t = w[tt]
    loss = (1 - ls) * w_t * (lse - x[rows, tt]) + ls / v * (lse * w.sum() - x @ w)
    onehot = np.zeros_like(x)
    onehot[rows, tt] = 1.0
    grad = p * ((1 - ls) * w_t + ls / v * w.sum())[:, None] - ls / v * w[None, :] - (1 - ls) * w_t[:, None] * onehot
    return np.where(keep, loss, 0.0), grad * keep[:, None], (w_t * keep).sum()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("v", [7, 1000, 70001])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_class_weights_match_float64(dtype, v, ls):
    """``weight=`` (PyTorch's): without label smoothing the unweighted kernels' rows scaled by
    their targets' weights, with it the weighted kernels (a row in registers and streamed); the
    losses, "mean" (divided by the targets' weights) and "sum", and the gradient, against float64."""
    x, t = _inputs(4, v, dtype, seed=v)
    w = np.random.default_rng(1).uniform(0.2, 2.0, v).astype(numpy_dtype(dtype))
    loss, grad, divisor = _weighted_ref(x, t, w, ls=ls)
    rtol = 1e-5 if dtype == "float32" else 2.0**-7
    got = ops.cross_entropy(x, t, weight=w, label_smoothing=ls, reduction="none")
    np.testing.assert_allclose(got.astype(F64), loss, rtol=rtol, atol=1e-5)
    for reduction, scale in (("sum", 1.0), ("mean", 1.0 / divisor)):
        np.testing.assert_allclose(float(ops.cross_entropy(x, t, w, label_smoothing=ls, reduction=reduction)), loss.sum() * scale, rtol=rtol, atol=1e-5)
        dx = ops.cross_entropy_backward(x, t, np.float32(2.0), w, label_smoothing=ls, reduction=reduction)
        np.testing.assert_allclose(dx.astype(F64), 2.0 * scale * grad, rtol=rtol, atol=1e-6 if dtype == "float32" else 1e-4)


@pytest.mark.parametrize("m,v,threads,tpr", [(5, 256, 128, 8), (37, 100, 128, 4)])
def test_weighted_row_groups_match_float64(m, v, threads, tpr):
    """The weighted kernels in lane groups (short vocabularies; the weights by scalar loads, 0 past
    the row): loss and gradient against float64."""
    import tirx

    x, t = _inputs(m, v, "float32", seed=m)
    w = np.random.default_rng(2).uniform(0.2, 2.0, v).astype(np.float32)
    k = tirx.compile(ce_module.cross_entropy_kernel.factory(v=v, dtype="float32", threads=threads, tpr=tpr, smoothing=True, weighted=True))
    loss, lse = np.full(m, 7, np.float32), np.full(m, 7, np.float32)
    k(x, t, w, loss, lse, m, -100, 0.1)
    want, grad, _ = _weighted_ref(x, t, w, ls=0.1)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-5)
    kb = tirx.compile(ce_module.cross_entropy_backward_kernel.factory(v=v, dtype="float32", threads=threads, tpr=tpr, weighted=True))
    g = np.arange(1, m + 1, dtype=np.float32)
    keep = t != -100
    w_t = w[np.where(keep, t, 0)]
    gp = (g * (0.9 * w_t + 0.1 / v * w.sum())).astype(np.float32)
    dx = np.full_like(x, 7)
    kb(x, t, lse, g, gp, w, dx, m, -100, 0.1)
    np.testing.assert_allclose(dx.astype(F64), grad * g[:, None], rtol=1e-5, atol=1e-6)


def test_class_weight_errors():
    x, t = _inputs(2, 10, "float32")
    with pytest.raises(ValueError, match=r"weight of shape \[9\] for logits \[2, 10\]; expected one weight per class, \[10\]"):
        ops.cross_entropy(x, t, weight=np.ones(9, np.float32))
    with pytest.raises(TypeError, match="weight is int64; expected the logits' dtype"):
        ops.cross_entropy(x, t, weight=np.ones(10, np.int64))
    with pytest.raises(ValueError, match="weighted=True is the label-smoothing kernel's"):
        ce_module.cross_entropy_kernel.factory(v=10, dtype="float32", threads=32, weighted=True)
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError, match="weight requires grad; its gradient is not computed"):
        ops.cross_entropy(torch.from_numpy(x), torch.from_numpy(t), weight=torch.ones(10, requires_grad=True))


def test_out_of_range_targets_give_nan_rows_on_tensors():
    """A tensor's targets are not read back to the host (a sync per call): a target outside
    [0, C) that is not ignore_index makes its row's loss and gradient NaN, the others exact."""
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 50)
    t = torch.tensor([3, 50, -1])
    loss = ops.cross_entropy(x, t, reduction="none")
    assert torch.isnan(loss[1:]).all() and not torch.isnan(loss[0])
    x.requires_grad_()
    ops.cross_entropy(x, t, reduction="sum").backward()
    assert torch.isnan(x.grad[1:]).all() and not torch.isnan(x.grad[0]).any()


def test_autograd_and_compile_against_pytorch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        for reduction in ("mean", "sum", "none"):
            x0 = torch.randn(6, 3000, device=dev) * 3
            t = torch.randint(0, 3000, (6,), device=dev)
            t[2] = -100
            w = torch.rand(6, device=dev) if reduction == "none" else torch.tensor(1.5, device=dev)

            def run(f, x):
                x = x.detach().requires_grad_()
                loss = f(x, t, label_smoothing=0.05, reduction=reduction)
                (loss * w).sum().backward()
                return loss.detach(), x.grad

            want_loss, want_grad = run(F.cross_entropy, x0.double())
            loss, grad = run(ops.cross_entropy, x0)
            torch.testing.assert_close(loss.double(), want_loss, rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(grad.double(), want_grad, rtol=1e-5, atol=1e-7)
        # class weights, with and without label smoothing, eager and under torch.compile
        x0 = torch.randn(6, 3000, device=dev) * 3
        t = torch.randint(0, 3000, (6,), device=dev)
        t[2] = -100
        cw = torch.rand(3000, device=dev) + 0.5
        for ls in (0.0, 0.05):
            for f in (ops.cross_entropy, torch.compile(ops.cross_entropy, fullgraph=True)):
                loss, grad = (lambda x: (f(x, t, weight=cw, label_smoothing=ls), x))(x0.clone().requires_grad_())
                loss.backward()
                want = x0.double().requires_grad_()
                want_loss = F.cross_entropy(want, t, weight=cw.double(), label_smoothing=ls)
                want_loss.backward()
                torch.testing.assert_close(loss.double(), want_loss.detach(), rtol=1e-5, atol=1e-5)
                torch.testing.assert_close(grad.grad.double(), want.grad, rtol=1e-5, atol=1e-7)
        x = (torch.randn(8, 3000, device=dev) * 3).requires_grad_()
        t = torch.randint(0, 3000, (8,), device=dev)
        f = torch.compile(lambda x, t: ops.cross_entropy(x, t, label_smoothing=0.1), fullgraph=True)
        f(x, t).backward()
        want = x.detach().clone().requires_grad_()
        F.cross_entropy(want, t, label_smoothing=0.1).backward()
        torch.testing.assert_close(x.grad, want.grad, rtol=1e-5, atol=1e-7)


def test_inference_reductions_on_tensors_against_pytorch():
    """Outside autograd, "mean" and "sum" reduce the kernel's per-CTA sums (`_forward_sums`):
    against PyTorch's cross_entropy of the same tensors, over a lane-group vocabulary and a CTA
    per row, with label smoothing and ignored rows, every row ignored ("mean": NaN); on the CPU
    (the simulator) and on a GPU when there is one (a batch of CTAs past the tuner's timing)."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    for dev, m in [("cpu", 37)] + ([("cuda", 100_003)] if torch.cuda.is_available() else []):
        for v in (256, 3000):
            x = (torch.randn(m, v, device=dev) * 3).bfloat16()
            t = torch.randint(0, v, (m,), device=dev)
            t[::7] = -100
            for reduction in ("mean", "sum"):
                for ls in (0.0, 0.1):
                    got = ops.cross_entropy(x, t, label_smoothing=ls, reduction=reduction)
                    want = F.cross_entropy(x.double(), t, label_smoothing=ls, reduction=reduction)
                    assert got.dtype == torch.bfloat16 and got.shape == ()
                    torch.testing.assert_close(got.double(), want, rtol=2**-7, atol=1e-5)
            assert torch.isnan(ops.cross_entropy(x, torch.full_like(t, -100)))
    # Through the plan of each call signature: each call's own values; PyTorch's other forms (a
    # (N, C, d) input, int32 targets, no rows) by the general path; a bad call's error every time.
    for seed in range(2):
        g = torch.Generator().manual_seed(seed)
        x = (torch.randn(5, 300, generator=g) * 3).bfloat16()
        t = torch.randint(0, 300, (5,), generator=g)
        torch.testing.assert_close(ops.cross_entropy(x, t).double(), F.cross_entropy(x.double(), t), rtol=2**-7, atol=1e-5)
        x3 = (torch.randn(2, 300, 3, generator=g) * 3).bfloat16()
        t3 = torch.randint(0, 300, (2, 3), generator=g).int()
        torch.testing.assert_close(ops.cross_entropy(x3, t3, reduction="sum").double(), F.cross_entropy(x3.double(), t3.long(), reduction="sum"), rtol=2**-7, atol=1e-5)
    assert torch.isnan(ops.cross_entropy(torch.empty(0, 300).bfloat16(), torch.empty(0, dtype=torch.long)))
    assert ops.cross_entropy(torch.empty(0, 300).bfloat16(), torch.empty(0, dtype=torch.long), reduction="sum") == 0
    for _ in range(2):
        with pytest.raises(ValueError, match="target of shape \\[4\\] for logits \\[5, 300\\]"):
            ops.cross_entropy(x, t[:4])


def test_vocab_256k_on_the_gpu():
    """The issue's accuracy point: bf16 logits over a 256k vocabulary (a row streamed), loss and
    gradient against float64 no worse than PyTorch's bf16 cross_entropy on the same inputs."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    F = torch.nn.functional
    x0 = (torch.randn(16, 262144, device="cuda") * 4).bfloat16()
    t = torch.randint(0, 262144, (16,), device="cuda")
    t[3] = -100

    def run(f, x):
        x = x.detach().requires_grad_()
        loss = f(x, t, label_smoothing=0.1)
        loss.backward()
        return loss.detach().double(), x.grad.double()

    truth_loss, truth_grad = run(F.cross_entropy, x0.double())
    theirs = run(F.cross_entropy, x0)
    mine = run(ops.cross_entropy, x0)
    err = [(abs(float(l - truth_loss)), float((g - truth_grad).norm() / truth_grad.norm())) for l, g in (mine, theirs)]
    assert err[0][0] <= max(err[1][0], 1e-3 * float(truth_loss)), err
    assert err[0][1] <= 1.25 * err[1][1] + 1e-4, err


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,v,threads,tpr", [(5, 256, 128, 8), (37, 100, 128, 4), (3, 1000, 256, 32)])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_row_groups_match_float64(dtype, m, v, threads, tpr, ls):
    """Short vocabularies, a group of `tpr` lanes per row (the last CTA's rows past `m`
    clipped): loss, lse and gradient against float64, ignored rows 0."""
    import tirx

    x, t = _inputs(m, v, dtype, seed=m)
    k = tirx.compile(ce_module.cross_entropy_kernel.factory(v=v, dtype=dtype, threads=threads, tpr=tpr, smoothing=ls > 0))
    loss, lse = np.full(m, 7, np.float32), np.full(m, 7, np.float32)
    k(x, t, loss, lse, m, -100, ls)
    want, grad = _ref(x, t, ls=ls)
    np.testing.assert_allclose(loss, want, rtol=1e-5, atol=1e-5)
    kb = tirx.compile(ce_module.cross_entropy_backward_kernel.factory(v=v, dtype=dtype, threads=threads, tpr=tpr))
    g = np.arange(1, m + 1, dtype=np.float32)
    dx = np.full_like(x, 7)
    kb(x, t, lse, g, dx, m, -100, ls)
    rtol, atol = (1e-5, 1e-6) if dtype == "float32" else (2.0**-7, 2.0**-7 * g[-1] * 2.0**-8)
    np.testing.assert_allclose(dx.astype(F64), grad * g[:, None], rtol=rtol, atol=max(atol, 1e-6))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize(
    "m,v,design",
    [
        (6, 1000, {"threads": 128}),
        (3, 5000, {"threads": 64, "stream": True}),
        (37, 256, {"threads": 128, "tpr": 8}),
        (37, 100, {"threads": 128, "tpr": 4}),
        (70, 16, {"threads": 256, "tpr": 2}),
    ],
    ids=str,
)
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_sums_per_cta_match_the_rows(dtype, m, v, design, ls):
    """The forward's ``sums`` form (what "mean" and "sum" reduce, no row's loss written): each
    CTA's sum of its rows' losses and count of rows not ignored, against the rows' losses in
    float64 (a CTA per row: each row's; lane groups: ``threads // tpr`` rows a CTA, the last
    CTA's rows past ``m`` adding nothing); nothing written past `sum_parts`'s rows; a target out
    of range makes its CTA's sum NaN; refused with class weights."""
    import tirx

    x, t = _inputs(m, v, dtype, seed=m + v)
    t[-1] = -100  # (the last CTA's last row ignored too)
    k = tirx.compile(ce_module.cross_entropy_kernel.factory(v=v, dtype=dtype, smoothing=ls > 0, sums=True, **design))
    part = np.full((m, 2), 7, np.float32)
    k(x, t, part, m, -100, ls)
    per = design["threads"] // design["tpr"] if "tpr" in design else 1
    n = -(-m // per)
    want, _ = _ref(x, t, ls=ls)
    keep = (t != -100).astype(F64)
    pad = n * per - m
    np.testing.assert_allclose(part[:n, 0], np.pad(want, (0, pad)).reshape(n, per).sum(1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(part[:n, 1], np.pad(keep, (0, pad)).reshape(n, per).sum(1))
    assert (part[n:] == 7).all()
    bad = t.copy()
    bad[0] = v  # out of range: its CTA's sum NaN (PyTorch stops the device)
    k(x, bad, part, m, -100, ls)
    assert np.isnan(part[0, 0]) and not np.isnan(part[1:n, 0]).any()
    with pytest.raises(ValueError, match="sums: the unweighted kernel's"):
        ce_module.cross_entropy_kernel.factory(v=v, dtype=dtype, smoothing=True, weighted=True, sums=True, **design)


@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_reductions_from_the_kernels_sums(reduction):
    """``cross_entropy(..., reduction="mean" | "sum")`` without class weights and outside
    autograd reduces the kernel's per-CTA sums (`sum_parts` of them): the same value as the
    rows' losses reduced (float64 reference), NaN where every row is ignored ("mean"; "sum" 0),
    an out-of-range target an IndexError on NumPy arrays; with class weights and with
    reduction="none" the rows' losses as before."""
    x, t = _inputs(37, 256, "bfloat16", seed=5)
    want, _ = _ref(x, t)
    keep = t != -100
    got = ops.cross_entropy(x, t, reduction=reduction)
    assert got.dtype == x.dtype and got.shape == ()
    np.testing.assert_allclose(float(got), want.sum() / (keep.sum() if reduction == "mean" else 1), rtol=2.0**-7)
    ignored = np.full_like(t, -100)
    with np.errstate(invalid="ignore"):
        none_kept = float(ops.cross_entropy(x, ignored, reduction=reduction))
    assert np.isnan(none_kept) if reduction == "mean" else none_kept == 0.0
    bad = t.copy()
    bad[3] = 256
    with pytest.raises(IndexError, match="target 256 of row 3 is out of range for 256 classes"):
        ops.cross_entropy(x, bad, reduction=reduction)
    w = np.linspace(0.5, 1.5, 256).astype(np.float32)
    weighted = ops.cross_entropy(x, t, weight=w, reduction=reduction)
    wt = np.where(keep, w[np.where(keep, t, 0)], 0.0)
    np.testing.assert_allclose(float(weighted), (want * wt).sum() / (wt.sum() if reduction == "mean" else 1), rtol=2.0**-6)
