"""`tirx.ops` (issue 28 item 4): softmax, rms_norm and matmul against NumPy in float64
(simulator, on NumPy arrays and CPU tensors), PyTorch's semantics (shapes, dims, defaults,
errors), the registered ops under torch.compile, and on the GPU against PyTorch."""

import math
import re
import sys

import numpy as np
import pytest

import tirx
import tirx.ops as ops
from tirx.device import _host_array  # (a CPU tensor as NumPy, bf16 included)
from tirx.runtime import numpy_dtype

matmul_module = sys.modules["tirx.ops.matmul"]  # `tirx.ops.matmul` is the function
common = sys.modules["tirx.ops._common"]
# The tile configurations of 16-bit operands (promote_ahead is FP8's: test_fp8_promoted_ahead_matches_float64),
# one CTA a tile and K over a cluster's CTAs (test_every_cluster_configuration_matches_float64).
# (The multicast candidate has tests of its own: `test_multicast_*`.)
TILES_16 = [c for c in matmul_module.CONFIGS if not c.get("promote_ahead") and not c.get("whole_epilogue") and "cluster_k" not in c and "multicast" not in c]
CLUSTERED_16 = [c for c in matmul_module.CONFIGS if not c.get("promote_ahead") and "cluster_k" in c]

F64 = np.float64


def _softmax_ref(x, dim=-1):
    x = x.astype(F64)
    e = np.exp(x - x.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _rms_ref(x, w, eps):
    x = x.astype(F64)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w.astype(F64)


def _close(got, want, dtype):
    # f32: the fold's rounding and exp2f (docs/numerics.md); 16-bit: one rounding of the f32 result.
    rtol = 1e-5 if dtype == "float32" else (2.0**-8 if dtype == "float16" else 2.0**-7)
    np.testing.assert_allclose(got.astype(F64), want, rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(3, 1024), (2, 3, 2048), (1, 256), (3, 1), (2, 1000), (2, 32000), (1, 70001)])
def test_softmax_matches_float64(dtype, shape):
    x = (np.random.default_rng(0).standard_normal(shape) * 3).astype(numpy_dtype(dtype))
    y = ops.softmax(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    _close(y, _softmax_ref(x), dtype)
    np.testing.assert_array_equal(ops.softmax(x, dim=x.ndim - 1), y)


@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
@pytest.mark.parametrize(
    "design,n,m",
    [({"threads": 256}, 1000, 3), ({"threads": 64, "stream": True}, 4196, 2), ({"threads": 128, "tpr": 8}, 256, 37),
     ({"threads": 256, "cluster": 4}, 9000, 3), ({"threads": 32, "cluster": 4, "shared": True}, 4096, 3)],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_softmax_designs_store_float32_of_bfloat16_rows(design, n, m, log):
    """Every softmax design with ``out_dtype="float32"`` (``dtype=torch.float32`` of bfloat16 rows):
    the float32 results stored as they are, against float64, nothing past the rows."""
    sm = sys.modules["tirx.ops.softmax"]
    x = (np.random.default_rng(n + m).standard_normal((m, n)) * 3).astype(numpy_dtype("bfloat16"))
    y = np.full((m, n), np.nan, np.float32)
    tirx.compile(sm.softmax_kernel.factory(n=n, dtype="bfloat16", log=log, out_dtype="float32", **design))(x, y, m)
    want = (_log_softmax_ref if log else _softmax_ref)(x)
    np.testing.assert_allclose(y.astype(F64), want, rtol=1e-5, atol=2e-6 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("od", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize(
    "design,n", [({"threads": 64, "stream": True}, 4196), ({"threads": 32, "cluster": 4, "shared": True}, 4096)], ids=lambda v: str(v).replace(" ", "")
)
def test_softmax_keeps_subnormal_outputs(design, n, od):
    """The exponentials' forms (`_common.exp2_output_form`): bfloat16 outputs from ex2.ftz of the
    lifted exponent keep their subnormal values (2^-133 .. 2^-126) as PyTorch's do, float32 ones
    (`exp2f`) theirs, float16 ones round below 2^-24 to 0 either way; the sums' flushed terms
    change nothing. A row of 0 and values e^-86 .. e^-93 below it."""
    sm = sys.modules["tirx.ops.softmax"]
    dtype = "float16" if od == "float16" else "bfloat16"
    x = np.zeros((2, n))
    x[:, 1:] = -np.linspace(86.0, 93.0, n - 1)
    x[1] = x[1][::-1] * 0.2  # (a second row of ordinary values)
    x = x.astype(numpy_dtype(dtype))
    y = np.full((2, n), np.nan, numpy_dtype(od))
    tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, log=False, out_dtype=od, **design))(x, y, 2)
    want = _softmax_ref(x)
    tiny = 2.0**-149 if od == "float32" else 2.0**-133 if od == "bfloat16" else 2.0**-24  # the least subnormal
    np.testing.assert_allclose(y.astype(F64), want, rtol=2.0**-7, atol=tiny)
    if od != "float16":
        assert (y[0, 1:] > 0).sum() > (n - 1) * 0.7  # (the subnormal outputs kept, not flushed)
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():  # MUFU.EX2's own flush and rounding
        xt = torch.from_numpy(x.astype(np.float32)).cuda().to(getattr(torch, dtype))
        yt = torch.empty(2, n, device="cuda", dtype=getattr(torch, od))
        tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, log=False, out_dtype=od, **design))(xt, yt, 2)
        got = yt.double().cpu().numpy()
        np.testing.assert_allclose(got, want, rtol=2.0**-7, atol=tiny)
        torch.testing.assert_close(yt, torch.softmax(xt.float(), -1).to(yt.dtype), rtol=2.0**-7, atol=tiny)


@pytest.mark.parametrize("shape", [(3, 1000), (37, 256), (2, 40000)], ids=str)
def test_softmax_dtype_as_pytorch(shape):
    """``dtype=`` as PyTorch's: as if the input were cast first. float32 of bfloat16 rows is
    fused (the kernels' ``out_dtype``: read as they are, the float32 results stored as they are),
    every design's size class; float32 → bfloat16 casts first; the same dtype is nothing; others
    refused. Autograd: the gradient in the input's dtype, eager and under torch.compile."""
    x = (np.random.default_rng(3).standard_normal(shape) * 3).astype(numpy_dtype("bfloat16"))
    for op, ref in ((ops.softmax, _softmax_ref), (ops.log_softmax, _log_softmax_ref)):
        y = op(x, -1, dtype="float32")
        assert y.dtype == np.float32
        want = ref(x)
        np.testing.assert_allclose(y.astype(F64), want, rtol=1e-5, atol=2e-6 * max(1.0, np.abs(want).max()))
        np.testing.assert_array_equal(op(x, dtype="bfloat16"), op(x))
        x32 = x.astype(np.float32)
        np.testing.assert_array_equal(op(x32, dtype="bfloat16"), op(x))  # (cast first: the bfloat16 rows)
        with pytest.raises(TypeError, match="float32, float16 or bfloat16"):
            op(x, dtype="int32")
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(x.astype(np.float32)).bfloat16().requires_grad_()
    g = torch.randn(shape)
    ref_t = t.detach().double().requires_grad_()
    torch.softmax(ref_t, -1).backward(g.double())
    for fn in (ops.softmax, torch.compile(ops.softmax, fullgraph=True)):
        t.grad = None
        y = fn(t, -1, dtype=torch.float32)
        assert y.dtype == torch.float32
        y.backward(g)
        assert t.grad.dtype == torch.bfloat16
        torch.testing.assert_close(t.grad.double(), ref_t.grad, rtol=2**-7, atol=2**-7 * ref_t.grad.abs().max().item())


def _log_softmax_ref(x):
    x = x.astype(F64)
    m = x.max(axis=-1, keepdims=True)
    return (x - m) - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("shape", [(3, 1024), (2, 3, 1000), (3, 1), (1, 40000)])
def test_log_softmax_matches_float64(dtype, shape):
    x = (np.random.default_rng(7).standard_normal(shape) * 3).astype(numpy_dtype(dtype))
    y = ops.log_softmax(x)
    assert y.shape == x.shape and y.dtype == x.dtype
    want = _log_softmax_ref(x)
    # f32: exp2f/logf and the sum's order, relative to the row's scale; 16-bit: one rounding.
    rtol = 1e-5 if dtype == "float32" else (2.0**-8 if dtype == "float16" else 2.0**-7)
    np.testing.assert_allclose(y.astype(F64), want, rtol=rtol, atol=2e-6 * max(1.0, np.abs(want).max()))
    if shape[-1] > 1:  # a masked first element: -inf there (a row all -inf is NaN, as PyTorch's)
        x[..., 0] = -np.inf
        got = ops.log_softmax(x)
        assert np.isneginf(got[..., 0].astype(F64)).all() and np.isfinite(got[..., 1:].astype(F64)).all()


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("h", [4096, 5120, 1, 1000, 70001])
def test_rms_norm_matches_float64(dtype, h):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, h)).astype(numpy_dtype(dtype))
    w = (rng.standard_normal(h) * 0.5 + 1).astype(numpy_dtype(dtype))
    y = ops.rms_norm(x, (h,), w, eps=1e-6)
    _close(y, _rms_ref(x, w, 1e-6), dtype)
    # No weight, PyTorch's default eps (the dtype's machine epsilon), an int normalized_shape.
    eps = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    _close(ops.rms_norm(x, h), _rms_ref(x, np.ones(h), eps), dtype)


@pytest.mark.parametrize("h", [256, 4096, 20000])
def test_norms_take_float32_parameters_beside_16_bit_rows(h):
    """PyTorch's mixed-precision norms (F.layer_norm / F.rms_norm of a bfloat16 input with float32
    weight and bias): the output of the input's dtype, computed with the float32 parameters as
    they are; gradients of each tensor's own dtype (dW, dB float32), as PyTorch's, against float64;
    a float32 bias alone, and parameters of two dtypes refused."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    torch.manual_seed(h)
    x = torch.randn(3, h).bfloat16().requires_grad_()
    w, b = (torch.randn(h) * 0.5 + 1).requires_grad_(), torch.randn(h).requires_grad_()
    g = torch.randn(3, h).bfloat16()
    for ours, theirs, params in [
        (lambda x, w, b: ops.layer_norm(x, (h,), w, b), lambda x, w, b: F.layer_norm(x, (h,), w, b), (w, b)),
        (lambda x, w: ops.rms_norm(x, (h,), w, eps=1e-6), lambda x, w: F.rms_norm(x, (h,), w, eps=1e-6), (w,)),
        (lambda x, w: ops.add_rms_norm(x, x, (h,), w, eps=1e-6)[0], lambda x, w: F.rms_norm(x + x, (h,), w, eps=1e-6), (w,)),
        (lambda x, b: ops.layer_norm(x, (h,), None, b), lambda x, b: F.layer_norm(x, (h,), None, b), (b,)),
    ]:
        ts = (x,) + params
        for t in ts:
            t.grad = None
        y = ours(*ts)
        assert y.dtype == torch.bfloat16
        y.backward(g)
        ref = [t.detach().double().requires_grad_() for t in ts]
        want = theirs(*ref)
        want.backward(g.double())
        torch.testing.assert_close(y.double(), want, rtol=2**-7, atol=2**-7 * want.abs().max().item())
        for t, r in zip(ts, ref):
            assert t.grad.dtype == t.dtype
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2**-6, atol=2**-6 * r.grad.abs().max().item())
    with pytest.raises(TypeError, match="weight and bias of one dtype"):
        ops.layer_norm(x, (h,), w, b.bfloat16())
    with pytest.raises(TypeError, match=r"parameters of the input's dtype, or all float32"):
        ops.rms_norm(x, (h,), w.half())


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [(3, 1000), (2, 2, 4096), (3, 1), (1, 40000)])
def test_softmax_backward_matches_float64(dtype, shape):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 2).astype(numpy_dtype(dtype))
    dy = rng.standard_normal(shape).astype(numpy_dtype(dtype))
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=2.0**-7, atol=2.0**-8)
    y = ops.softmax(x)
    yf, dyf = y.astype(F64), dy.astype(F64)
    want = yf * (dyf - (dyf * yf).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(ops.softmax_backward(dy, y).astype(F64), want, **tol)
    ly = ops.log_softmax(x)
    want = dyf - np.exp(ly.astype(F64)) * dyf.sum(axis=-1, keepdims=True)
    scale = max(1.0, np.abs(want).max())
    np.testing.assert_allclose(ops.log_softmax_backward(dy, ly).astype(F64), want, rtol=tol["rtol"], atol=tol["atol"] * scale)


def test_autograd_through_the_row_ops():
    """`loss.backward()` through softmax and log_softmax (the registered ops' backward), eager and
    under torch.compile, against PyTorch's gradients; on CPU tensors (the simulator) and CUDA."""
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        x0 = torch.randn(4, 1000, device=dev) * 2
        w = torch.randn(4, 1000, device=dev)

        def grad(f, x):
            x = x.detach().requires_grad_()
            (f(x).double() * w).sum().backward()
            return x.grad.double()

        for mine, theirs in ((ops.softmax, torch.softmax), (ops.log_softmax, torch.log_softmax)):
            truth = grad(lambda x: theirs(x, -1), x0.double())
            # float32: PyTorch's gradient to rounding; bfloat16: no less accurate than PyTorch's
            # own bf16 autograd (both take the gradient from the forward's rounded output).
            torch.testing.assert_close(grad(mine, x0), truth, rtol=1e-5, atol=1e-6)
            for_dtype = [grad(f, x0.bfloat16()) - truth for f in (mine, lambda x: theirs(x, -1))]
            ours, torchs = (float(e.norm() / truth.norm()) for e in for_dtype)
            assert ours <= 1.25 * torchs + 1e-4, (mine.__name__, dev, ours, torchs)
        x = (torch.randn(4, 1000, device=dev) * 2).requires_grad_()
        w = torch.randn(4, 1000, device=dev)
        ops.log_softmax(x)  # registers the ops outside the compiled function
        f = torch.compile(lambda x, w: (ops.log_softmax(x) * w).sum(), fullgraph=True)
        f(x, w).backward()
        # Against float64, as the eager checks above: PyTorch's float32 gradient is itself off by
        # up to ~4e-6 on such inputs, so two float32 gradients need not agree to 1e-6.
        want = x.detach().double().requires_grad_()
        (torch.log_softmax(want, -1) * w.double()).sum().backward()
        torch.testing.assert_close(x.grad.double(), want.grad, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("h", [1000, 5120, 70001])
def test_add_rms_norm_is_the_unfused_pair(dtype, h):
    """The residual add fused into RMSNorm: h = x + residual rounded as the add alone would be,
    and rms_norm(h), bit for bit (one pass over memory instead of three)."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, h)).astype(numpy_dtype(dtype))
    res = rng.standard_normal((2, 3, h)).astype(numpy_dtype(dtype))
    w = (rng.standard_normal(h) * 0.5 + 1).astype(numpy_dtype(dtype))
    y, summed = ops.add_rms_norm(x, res, (h,), w, eps=1e-6)
    want_h = (x.astype(np.float32) + res.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    np.testing.assert_array_equal(y, ops.rms_norm(want_h, (h,), w, eps=1e-6))
    with pytest.raises(ValueError, match="residual"):
        ops.add_rms_norm(x, res[..., :-1], (h,), w)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("h", [1000, 5120, 70001])
def test_add_layer_norm_is_the_unfused_pair(dtype, h):
    """The residual add fused into LayerNorm (GPT-2 and BERT blocks): h = x + residual rounded as
    the add alone would be, and layer_norm(h), bit for bit; bias and weight optional."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, h)).astype(numpy_dtype(dtype))
    res = (rng.standard_normal((2, 3, h)) + 2).astype(numpy_dtype(dtype))
    w = (rng.standard_normal(h) * 0.5 + 1).astype(numpy_dtype(dtype))
    b = rng.standard_normal(h).astype(numpy_dtype(dtype))
    want_h = (x.astype(np.float32) + res.astype(np.float32)).astype(x.dtype)
    for wb in ((w, b), (None, None)):
        y, summed = ops.add_layer_norm(x, res, (h,), *wb, eps=1e-5)
        np.testing.assert_array_equal(summed, want_h)
        np.testing.assert_array_equal(y, ops.layer_norm(want_h, (h,), *wb, eps=1e-5))
    with pytest.raises(ValueError, match="residual"):
        ops.add_layer_norm(x, res[..., :-1], (h,), w, b)


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
@pytest.mark.parametrize("h,threads", [(8192, 64), (4100, 64)])
def test_add_layer_norm_streamed_rows(dtype, h, threads):
    """A streamed row with the residual: over whole tiles (its mean and squared deviations in the
    first pass, Chan et al.) and ragged (three passes, the later two reading the new residual
    back), against float64, the statistics written."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(h)
    m = 3
    x = (rng.standard_normal((m, h)) * 3 + 1).astype(numpy_dtype(dtype))
    r = rng.standard_normal((m, h)).astype(x.dtype)
    w, b = (rng.random(h) + 0.5).astype(x.dtype), rng.standard_normal(h).astype(x.dtype)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype=dtype, threads=threads, stream=True, residual=True, stats=True))
    y, summed = np.zeros_like(x), np.zeros_like(x)
    mean, rstd = np.zeros(m, np.float32), np.zeros(m, np.float32)
    k(x, r, w, b, y, summed, mean, rstd, m, 1e-5)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    hd = want_h.astype(F64)
    np.testing.assert_allclose(mean, hd.mean(-1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(hd.var(-1) + 1e-5), rtol=1e-5)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=2.0**-7, atol=2.0**-6)
    np.testing.assert_allclose(y.astype(F64), _layer_norm_ref(want_h, w, b, 1e-5), **tol)


def _layer_norm_ref(x, w, b, eps):
    x = x.astype(F64)
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w.astype(F64) + b.astype(F64)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("h", [4096, 5120, 1, 1000, 70001])
def test_layer_norm_matches_float64(dtype, h):
    rng = np.random.default_rng(2)
    # An offset mean: the variance is taken about it (two passes), not as E[x^2] - mean^2.
    x = (rng.standard_normal((2, 3, h)) * 2 + 8).astype(numpy_dtype(dtype))
    w = (rng.standard_normal(h) * 0.5 + 1).astype(numpy_dtype(dtype))
    b = rng.standard_normal(h).astype(numpy_dtype(dtype))
    y = ops.layer_norm(x, (h,), w, b, eps=1e-5)
    assert y.shape == x.shape and y.dtype == x.dtype
    want = _layer_norm_ref(x, w, b, 1e-5)
    rtol = 1e-5 if dtype == "float32" else (2.0**-8 if dtype == "float16" else 2.0**-7)
    np.testing.assert_allclose(y.astype(F64), want, rtol=rtol, atol=1e-4 if dtype == "float32" else 2.0**-6)
    # No weight or bias, PyTorch's default eps, an int normalized_shape.
    want = _layer_norm_ref(x, np.ones(h), np.zeros(h), 1e-5)
    np.testing.assert_allclose(ops.layer_norm(x, h).astype(F64), want, rtol=rtol, atol=1e-4 if dtype == "float32" else 2.0**-6)


def test_edge_shapes_and_errors():
    assert ops.softmax(np.float32(3.0) * np.ones((), np.float32)) == 1.0
    assert ops.softmax(np.zeros((0, 1024), np.float32)).shape == (0, 1024)
    x = np.ones((4, 1024), np.float32)
    _close(ops.softmax(x * np.arange(4, dtype=np.float32)[:, None], dim=0), _softmax_ref(x * np.arange(4)[:, None], 0), "float32")
    with pytest.raises(IndexError, match="dim 2 out of range"):
        ops.softmax(x, dim=2)
    with pytest.raises(TypeError, match="int32 input"):
        ops.softmax(np.ones((2, 1024), np.int32))
    with pytest.raises(ValueError, match=r"normalized_shape \[512\] is not the last dims"):
        ops.rms_norm(x, (512,))
    with pytest.raises(ValueError, match="weight of shape"):
        ops.rms_norm(x, (1024,), np.ones(512, np.float32))
    with pytest.raises(ValueError, match=r"layer_norm: bias of shape \[512\]"):
        ops.layer_norm(x, (1024,), None, np.ones(512, np.float32))
    with pytest.raises(TypeError, match="layer_norm: weight is float16"):
        ops.layer_norm(x, 1024, np.ones(1024, np.float16))
    # A non-contiguous input is read through a contiguous copy: the same values.
    xt = np.random.default_rng(2).standard_normal((1024, 4)).astype(np.float32).T
    _close(ops.softmax(xt), _softmax_ref(xt), "float32")


def test_torch_tensors_the_registered_ops_and_compile():
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        x = torch.randn(4, 2048, device=dev, dtype=torch.bfloat16)
        w = torch.rand(2048, device=dev, dtype=torch.bfloat16) + 0.5
        y = ops.softmax(x)
        torch.testing.assert_close(y, torch.softmax(x.float(), -1).to(x.dtype), rtol=2**-7, atol=1e-6)
        r = ops.rms_norm(x, [2048], w, 1e-6)
        want = torch.nn.functional.rms_norm(x.float(), [2048], w.float(), 1e-6).to(x.dtype)
        torch.testing.assert_close(r, want, rtol=2**-7, atol=1e-6)
        assert torch.ops.tirx.softmax.default is not None
        ops.log_softmax(x)  # registers the ops (tirx.ops was imported before torch here)
        ops.layer_norm(x, [2048], w)
        ops.add_rms_norm(x, x, [2048], w)
        af = torch.compile(lambda x, r, w: ops.add_rms_norm(x, r, [2048], w, 1e-6), fullgraph=True)
        y, summed = af(x, x, w)
        assert torch.equal(summed, x + x)
        # Not bit-equal to ops.rms_norm(x + x): the autotuner may time another thread count for
        # each kernel, and the sum of squares is reduced in that count's order.
        want = torch.nn.functional.rms_norm((x + x).float(), [2048], w.float(), 1e-6).to(x.dtype)
        torch.testing.assert_close(y, want, rtol=2**-7, atol=1e-6)
        ops.add_layer_norm(x, x, [2048], w)
        alf = torch.compile(lambda x, r, w: ops.add_layer_norm(x, r, [2048], w, None, 1e-5), fullgraph=True)
        y, summed = alf(x, x, w)
        assert torch.equal(summed, x + x)
        want = torch.nn.functional.layer_norm((x + x).float(), [2048], w.float(), None, 1e-5).to(x.dtype)
        torch.testing.assert_close(y, want, rtol=2**-7, atol=2**-6)
        nf = torch.compile(lambda x, w: ops.layer_norm(x, [2048], w) + 1, fullgraph=True)
        want = torch.nn.functional.layer_norm(x.float(), [2048], w.float()).to(x.dtype) + 1
        torch.testing.assert_close(nf(x, w), want, rtol=2**-7, atol=2**-6)
        lf = torch.compile(lambda x: ops.log_softmax(x) * 2, fullgraph=True)
        torch.testing.assert_close(lf(x), torch.log_softmax(x.float(), -1).to(x.dtype) * 2, rtol=2**-7, atol=2**-6)

        @torch.compile(fullgraph=True)
        def block(x, w):
            return ops.rms_norm(ops.softmax(x) * 2, [2048], w, 1e-6)

        torch.testing.assert_close(block(x, w), ops.rms_norm(ops.softmax(x) * 2, [2048], w, 1e-6))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_ragged_and_wide_rows_on_the_gpu(dtype):
    """Issue 29 item 3 on the GPU: rows of 1, 1000, 5120, 32000 and 70001 elements (ragged
    tails, a row streamed through tiles) against PyTorch, with the tail's neighbours intact."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    tdt = getattr(torch, dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=2**-7, atol=1e-6)
    for n in (1, 1000, 5120, 32000, 70001):
        x = torch.randn(5, n, device="cuda", dtype=tdt) * 3
        torch.testing.assert_close(ops.softmax(x), torch.softmax(x.float(), -1).to(tdt), **tol)
        ltol = tol if dtype == "float32" else dict(rtol=2**-7, atol=2**-7)
        torch.testing.assert_close(ops.log_softmax(x), torch.log_softmax(x.float(), -1).to(tdt), **ltol)
        w = torch.rand(n, device="cuda", dtype=tdt) + 0.5
        want = torch.nn.functional.rms_norm(x.float(), [n], w.float(), 1e-6).to(tdt)
        torch.testing.assert_close(ops.rms_norm(x, [n], w, 1e-6), want, **tol)
        b = torch.randn(n, device="cuda", dtype=tdt)
        want = torch.nn.functional.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5).to(tdt)
        res = torch.randn_like(x)
        y, summed = ops.add_rms_norm(x, res, [n], w, 1e-6)
        assert torch.equal(summed, x + res)
        # Against PyTorch on the new residual, not bit-equal to ops.rms_norm: the two kernels may be
        # tuned to different thread counts, hence different reduction orders.
        want_h = torch.nn.functional.rms_norm(summed.float(), [n], w.float(), 1e-6).to(tdt)
        torch.testing.assert_close(y, want_h, **tol)
        ntol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else ltol  # sums in another order
        torch.testing.assert_close(ops.layer_norm(x, [n], w, b, 1e-5), want, **ntol)
        y, summed = ops.add_layer_norm(x, res, [n], w, b, 1e-5)
        assert torch.equal(summed, x + res)
        want_h = torch.nn.functional.layer_norm(summed.float(), [n], w.float(), b.float(), 1e-5).to(tdt)
        torch.testing.assert_close(y, want_h, **ntol)
        # Into 5 rows of a larger buffer, from its first row that starts on 16 bytes (a launch
        # refuses a view starting elsewhere): the kernel writes those rows and nothing past them.
        kernel = sys.modules["tirx.ops.softmax"].softmax_kernel(n=n, dtype=dtype)
        r0 = 16 // math.gcd(16, n * x.element_size())
        big = torch.full((r0 + 6, n), 5.0, device="cuda", dtype=tdt)
        if r0 > 1:
            with pytest.raises(ValueError, match="not on 16 bytes"):
                kernel(x, big[1:6], 5)
        kernel(x, big[r0 : r0 + 5], 5)
        torch.testing.assert_close(big[r0 : r0 + 5], torch.softmax(x.float(), -1).to(tdt), **tol)
        assert torch.equal(big[:r0], torch.full_like(big[:r0], 5.0)) and torch.equal(big[-1], big[0])


def test_the_ops_are_registered_at_import_when_torch_is_loaded():
    # A first call inside torch.compile: Dynamo cannot trace a registration, so `tirx.ops`
    # registers its ops when imported after torch (and says what to do otherwise).
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys

    code = (
        "import torch, tirx.ops as ops\n"
        "f = torch.compile(lambda x: ops.softmax(x) * 2, fullgraph=True)\n"
        "x = torch.randn(2, 1024)\n"
        "print(torch.allclose(f(x), torch.softmax(x, -1) * 2, atol=1e-5))\n"
    )
    env = dict(os.environ, TIRX_DEVICE="sim")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0 and r.stdout.strip().endswith("True"), r.stdout + r.stderr[-2000:]
    code = (
        "import tirx.ops as ops, torch\n"
        "f = torch.compile(lambda x: ops.softmax(x), fullgraph=True)\n"
        "try:\n    f(torch.randn(2, 1024))\nexcept Exception as e:\n    print('import torch before tirx.ops' in str(e))\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=env)
    assert r.stdout.strip().endswith("True"), r.stdout + r.stderr[-2000:]


def _mm_inputs(m, n, k, dtype, seed=3):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(numpy_dtype(dtype))
    b = rng.standard_normal((k, n)).astype(numpy_dtype(dtype))
    return a, b, a.astype(F64) @ b.astype(F64)


def _block_scaled_product(a, b, sa, sb):
    """The float64 product of FP8 ``a`` (m x k) and ``b`` (k x n) dequantised by DeepGEMM's block
    scales: ``sa`` a scale per row of a and 128 of K, ``sb`` per 128 x 128 block of b."""
    (m, k), n = a.shape, b.shape[1]
    deq_a = a.astype(F64) * np.repeat(sa, 128, axis=1)[:, :k]
    deq_b = b.astype(F64) * np.repeat(np.repeat(sb.T, 128, axis=0), 128, axis=1)[:k, :n]
    return deq_a @ deq_b


@pytest.mark.parametrize("splits", [2, 4])
@pytest.mark.parametrize("cfg", [{"consumers": 1, "bn": 128}, {"consumers": 2, "bn": 256}], ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_split_k_matches_float64(cfg, splits):
    """Split-K (shapes whose tiles do not fill the GPU): each tile's K steps in equal parts, each
    part's float32 sums stored whole in its slice of the workspace (two CTAs taking units in
    turn, the stage ring running on across them; the workspace poisoned with NaN: every element
    written), then the finish kernel's sum of the parts in order, its epilogue (a bias row,
    alpha and beta, GELU) and its one rounding; ragged M, N and K."""
    m, n, k = 70, 200, 1000  # (16 K steps)
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=splits)
    bf = numpy_dtype("bfloat16")
    w = np.full((splits, m, n), np.nan, np.float32)
    tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, splits=splits, **cfg))(a, b, w)
    np.testing.assert_allclose(w.sum(0, dtype=F64), want, rtol=1e-5, atol=1e-3)
    steps = 16 // splits  # (part p: K steps p * steps ... its own products, nothing else)
    part = [a[:, p * steps * 64 : (p + 1) * steps * 64].astype(F64) @ b[p * steps * 64 : (p + 1) * steps * 64].astype(F64) for p in range(splits)]
    np.testing.assert_allclose(w, np.stack(part), rtol=1e-5, atol=1e-3)
    bias = np.random.default_rng(1).standard_normal((1, n)).astype(bf)
    finish = matmul_module.matmul_finish_kernel.factory(m=m, n=n, out_dtype="bfloat16", splits=splits, bias="row", alpha=0.5, beta=2.0, activation="gelu")
    out = np.full((m, n), np.nan, bf)
    tirx.compile(finish)(w, bias, out)
    z = 0.5 * want + 2.0 * bias.astype(F64)
    np.testing.assert_allclose(out.astype(F64), matmul_module._host_activation(z, "gelu"), rtol=2.0**-7, atol=2.0**-7)
    with pytest.raises(ValueError, match="a divisor of the 16 K steps"):
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, splits=3, **cfg)
    with pytest.raises(ValueError, match="bias, alpha, beta and the activation are matmul_finish_kernel's"):
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, splits=2, activation="relu", **cfg)


@pytest.mark.parametrize(
    "cfg",
    [{"consumers": 1, "bn": 64}, {"consumers": 2, "bn": 64, "pingpong": True}, {"consumers": 1, "bn": 64, "splits": 2}, {"consumers": 1, "bn": 64, "multicast": 2}],
    ids=["one", "pingpong", "split", "multicast"],
)
def test_fewer_units_than_ctas_spread_over_the_grid(cfg):
    """Units fewer than CTAs go to CTAs spread over the grid (unit j on CTA floor(j * 11 / units);
    multicast: pair j on cluster floor(j * 5 / pairs)), each tile computed once, every element
    written (the output poisoned with NaN; split-K's parts in their slices), ragged M, N and K;
    the same values as the first CTAs taking them."""
    m, n, k = 100, 152, 200  # (2 x 3 tiles of 64 x 64 over 11 CTAs; split: 12 units over 13; multicast: 4 pairs over 5 clusters)
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=5)
    cfg, splits = dict(cfg), cfg.get("splits", 1)
    ctas = 13 if splits > 1 else 11
    outs = []
    for spread in (True, False):
        f = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, spread_units=spread, **cfg)
        c = np.full((splits, m, n) if splits > 1 else (m, n), np.nan, np.float32 if splits > 1 else numpy_dtype("bfloat16"))
        tirx.compile(f)(a, b, c)
        outs.append(c.astype(F64))
    got = outs[0].sum(0) if splits > 1 else outs[0]
    np.testing.assert_allclose(got, want, rtol=2.0**-8, atol=1e-3)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_tiles_of_several_consumers_where_m_reaches_their_last_rows():
    """A tile of two consumers (128 rows) is a candidate once M passes 64 (ragged, its second
    consumer's rows partly outside A: TMA's zeros), of three once M passes 128 (FP8 promoted)."""

    def rows(m, dtype="bfloat16", **kw):
        cfgs = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=m, n=12344, k=4096, dtype=dtype, **kw)
        return sorted({c["consumers"] for c in cfgs})

    assert rows(64) == [1] and rows(65) == rows(100) == [1, 2]
    assert rows(128, dtype="float8_e4m3fn", fast_accum=False) == [1, 2] and rows(129, dtype="float8_e4m3fn", fast_accum=False) == [1, 2, 3]


def test_narrow_tiles_among_the_candidates_where_wider_ones_leave_sms_idle():
    """Tiles of 96, 64 and 32 columns are timed where a tile twice as wide leaves CTAs idle
    (decode's N over every SM: 16 x 12288 x 4096 in 96-column tiles is 128 tiles), not where
    the 128-column tiles already take a round or more, nor with block scales or split-K's parts."""

    def widths(m, n, **kw):
        cfgs = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=m, n=n, k=4096, dtype="bfloat16", **kw)
        return sorted({c["bn"] for c in cfgs if c["consumers"] == 1 and "cluster_k" not in c})

    assert widths(16, 12288) == [64, 96, 128, 256]  # (32: 64-column tiles already fill the SMs)
    assert widths(16, 30000) == [128, 256]  # (235 tiles of 128)
    assert widths(16, 12288, splits=2) == [128, 192, 256]  # (K in two parts: 192 units of 128 columns, 128 of 192)
    # Two consumers' 128 x 192 tiles wherever they take one round (100 x 12344: 65 tiles, 97 of 128 x 128).
    two = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=100, n=12344, k=4096, dtype="bfloat16")
    assert {"consumers": 2, "bn": 192} in two
    assert {"consumers": 2, "bn": 192} not in matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=1000, n=12344, k=4096, dtype="bfloat16")


def test_multicast_among_the_candidates_where_its_tiles_take_more_than_a_round():
    """B multicast to a cluster's two CTAs is timed in 128 x 256 tiles where those outnumber the
    SMs (3000 x 5000 x 1000: 480 tiles), in 128 x 192 tiles where those are candidates (one round
    of them, 128-column ones more: 1000 x 3000), for 16-bit operands, a K-major A and two tile
    rows or more, not with split-K's parts, a gated product or FP8."""

    def multicast(m, n, dtype="bfloat16", **kw):
        cfgs = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=m, n=n, k=1024, dtype=dtype, **kw)
        return [c for c in cfgs if c.get("multicast")]

    pair = {"multicast": 2, "multicast_b": True}
    assert multicast(3000, 5000) == [{"consumers": 2, "bn": 256, **pair}] == multicast(3000, 5000, dtype="float16")
    assert multicast(1000, 3000) == [{"consumers": 2, "bn": 192, **pair}]  # (96 tiles of 256 columns, 128 of 192)
    assert len(multicast(1152, 4096)) == 1 and not multicast(1152, 4096, ctas=144)  # (144 tiles)
    assert not multicast(128, 22016)  # (one tile row: 128 x 192 tiles are candidates, a pair's second tile would be empty)
    for kw in ({"a_major": "m"}, {"splits": 2}, {"gated": True}, {"dtype": "float8_e4m3fn"}):
        assert not multicast(3000, 5000, **kw) and not multicast(1000, 3000, **kw), kw


# (m, n, k, consumers, bn, CTAs): ragged M and N, an odd last pair (its second tile outside C),
# K a multiple of 64 or not, grids of one to three clusters of two.
MULTICAST_SHAPES = [(128, 384, 256, 2, 128, 4), (100, 200, 136, 2, 64, 2), (64, 640, 192, 1, 128, 6), (200, 336, 200, 2, 64, 4), (130, 136, 8, 1, 64, 4)]


@pytest.mark.parametrize("shape", MULTICAST_SHAPES, ids=str)
def test_multicast_tiles_match_float64(shape):
    """A's tile loaded once per cluster of two CTAs (`multicast=2`): the cluster's CTAs compute
    neighbouring tiles of one tile row, each producer loading half of the A tile's rows into both
    CTAs' stage, each consumer freeing a stage in its CTA and its peer's (a remote arrive at CTA
    scope: no fence in the CUDA); an odd last pair's second tile lies outside C (its B loads
    TMA's zeros, its stores clipped). Every element written (C poisoned with NaN), no race in the
    simulator."""
    m, n, k, consumers, bn, ctas = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, consumers=consumers, bn=bn, multicast=2))
    src = kern.cuda_source
    assert kern.cluster_size == 2 and "mbarrier.arrive.shared::cluster.b64" in src and "release.cluster.shared::cluster" not in src
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


# (m, n, k, consumers, bn, CTAs, B K-major): ragged M and N, an odd last pair (its second tile
# below C), K a multiple of 64 or not, B row-major (each CTA half of a step's K rows) or K-major
# (half of the tile's columns), grids of one to three clusters of two.
MULTICAST_B_SHAPES = [
    (256, 128, 256, 2, 128, 4, False),
    (100, 200, 136, 2, 64, 2, False),
    (200, 64, 192, 1, 128, 6, False),
    (330, 136, 200, 2, 64, 4, True),
    (130, 136, 8, 1, 64, 4, False),
    (200, 200, 256, 1, 192, 2, True),
]


@pytest.mark.parametrize("shape", MULTICAST_B_SHAPES, ids=str)
def test_multicast_b_tiles_match_float64(shape):
    """B's tile loaded once per cluster of two CTAs (`multicast=2, multicast_b=True`): the
    cluster's CTAs compute neighbouring tiles of one tile column, each producer loading half of
    the B tile into both CTAs' stage (half of a K step's rows; K-major B: half of the tile's
    columns), each consumer freeing a stage in its CTA and its peer's; an odd last pair's second
    tile lies below C (its A loads TMA's zeros, its stores clipped). Every element written (C
    poisoned with NaN), no race in the simulator."""
    m, n, k, consumers, bn, ctas, b_k = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    f = matmul_module.matmul_kernel.factory
    kern = tirx.compile(f(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, consumers=consumers, bn=bn, multicast=2, multicast_b=True, b_major="k" if b_k else "n"))
    assert kern.cluster_size == 2 and "mbarrier.arrive.shared::cluster.b64" in kern.cuda_source
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, np.ascontiguousarray(b.T) if b_k else b, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


def test_multicast_b_spread_and_epilogue_match_float64():
    """B multicast with pairs fewer than the clusters (spread over them), addmm's bias column and
    an activation; and the refusal without ``multicast=2``."""
    m, n, k = 200, 152, 136  # (4 tile rows of 64: 2 pairs a tile column, 3 columns: 6 pairs over 7 clusters)
    a, b, prod = _mm_inputs(m, n, k, "bfloat16")
    bias = np.random.default_rng(7).standard_normal((m, 1)).astype(a.dtype)
    f = matmul_module.matmul_kernel.factory
    outs = []
    for spread in (True, False):
        kern = tirx.compile(
            f(m=m, n=n, k=k, dtype="bfloat16", ctas=14, consumers=1, bn=64, multicast=2, multicast_b=True, spread_units=spread, bias="column", activation="gelu")
        )
        c = np.full((m, n), np.nan, a.dtype)
        kern(a, b, bias, c)
        outs.append(c)
    np.testing.assert_allclose(outs[0].astype(F64), matmul_module._host_activation(prod + bias.astype(F64), "gelu"), rtol=2.0**-7, atol=2.0**-7)
    np.testing.assert_array_equal(outs[0], outs[1])
    with pytest.raises(ValueError, match="multicast_b: with multicast=2"):
        f(m=m, n=n, k=k, dtype="bfloat16", ctas=4, consumers=1, bn=64, multicast_b=True)


def test_multicast_epilogues_fp16_and_fp8_match_float64():
    """The multicast design with addmm's bias row and an activation, float16 operands, and FP8 with
    fast accumulation (B K-major) and its per-tensor scales."""
    m, n, k = 130, 200, 136
    a, b, prod = _mm_inputs(m, n, k, "bfloat16")
    bias = np.random.default_rng(5).standard_normal((1, n)).astype(a.dtype)
    kern = tirx.compile(
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=4, consumers=2, bn=64, multicast=2, bias="row", activation="relu")
    )
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, bias, c)
    np.testing.assert_allclose(c.astype(F64), np.maximum(prod + bias.astype(F64), 0), rtol=2.0**-8, atol=1e-2)
    a16, b16, p16 = _mm_inputs(m, n, k, "float16")
    c16 = np.full((m, n), np.nan, a16.dtype)
    tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float16", ctas=2, consumers=2, bn=128, multicast=2))(a16, b16, c16)
    np.testing.assert_allclose(c16.astype(F64), p16, rtol=2.0**-11, atol=1e-3)
    f8 = numpy_dtype("float8_e4m3fn")
    rng = np.random.default_rng(6)
    a8, b8 = rng.standard_normal((m, 256)).astype(f8), rng.standard_normal((256, n)).astype(f8)
    prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=256, dtype="float8_e4m3fn", ctas=4, consumers=2, bn=128, out_dtype="bfloat16", multicast=2)
    c8 = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a8, np.ascontiguousarray(b8.T), np.float32([0.5]), np.float32([2.0]), c8)
    np.testing.assert_allclose(c8.astype(F64), a8.astype(F64) @ b8.astype(F64), rtol=2.0**-7, atol=1e-2)


def test_multicast_without_the_remote_release_is_a_race(tmp_path):
    """The multicast design with each consumer freeing a stage in its own CTA only (and the
    barriers counting those): the peer's producer refills this CTA's half of A (``multicast_b``:
    of B) while its consumers may still read it — reported by the simulator."""
    import planting

    free = "                if mc:  # (CTA scope: the stage's reads are done, nothing to publish; no fence)\n                    empty.arrive((i - 1) % stages, cta_id=1 - rank, scope=\"cta\")\n"  # (`mma_step`)
    last = "            if mc:\n                empty.arrive(i % stages, cta_id=1 - rank, scope=\"cta\")\n"  # (`mma_done`)
    planted = planting.planted(matmul_module, free, "", tmp_path)
    planted = planting.planted(planted, last, "", tmp_path)
    planted = planting.planted(planted, "        empty.init(1 if pingpong else consumers * multicast)", "        empty.init(consumers)", tmp_path)
    m, n, k = 128, 256, 64 * 12
    a, b, _ = _mm_inputs(m, n, k, "bfloat16")
    prim = planted.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, consumers=2, bn=128, multicast=2)
    with pytest.raises(tirx.TirxError, match=r"data race: `A_s` .* a multicast TMA load by thread 0 of CTA rank \d writes it into CTA"):
        tirx.compile(prim, "sm_90a")(a, b, np.zeros((m, n), a.dtype))
    # (B multicast: the peer's refill of this CTA's half of B)
    a, b, _ = _mm_inputs(n, m, k, "bfloat16")
    prim = planted.matmul_kernel.factory(m=n, n=m, k=k, dtype="bfloat16", ctas=2, consumers=2, bn=128, multicast=2, multicast_b=True)
    with pytest.raises(tirx.TirxError, match=r"data race: `B_s` .* a multicast TMA load by thread 0 of CTA rank \d writes it into CTA"):
        tirx.compile(prim, "sm_90a")(a, b, np.zeros((n, m), a.dtype))


@pytest.mark.parametrize(
    "shape,scales,ahead,mc_b",
    [((300, 256, 128 * 5, 4), "tensor", True, True), ((200, 136, 144, 2), "block", True, True), ((256, 296, 128 * 3, 6), "tensor", False, False), ((130, 256, 384, 2), "block", False, True)],
    ids=str,
)
def test_fp8_promoted_multicast_matches_float64(shape, scales, ahead, mc_b):
    """FP8 promoted to float32 every 128 of K (tensor or DeepGEMM's block scales; each step
    issued ahead or waited for) in multicast pairs (B's or A's tile shared): each consumer frees a
    promoted step's stage in both CTAs. Ragged M, N and K, odd pairs; every element written."""
    (m, n, k, ctas) = shape
    rng = np.random.default_rng(m + n)
    f8 = numpy_dtype("float8_e4m3fn")
    a, b = (rng.standard_normal((m, k)) * 2).astype(f8), (rng.standard_normal((k, n)) * 2).astype(f8)
    kb = -(-k // 128)
    if scales == "block":
        sa = rng.uniform(0.5, 2, (m, kb)).astype(np.float32)
        sb = rng.uniform(0.5, 2, (-(-n // 128), kb)).astype(np.float32)
        want = _block_scaled_product(a, b, sa, sb)
    else:
        sa, sb = np.float32([0.5]), np.float32([1.5])
        want = (a.astype(F64) * 0.5) @ (b.astype(F64) * 1.5)
    kern = tirx.compile(
        matmul_module.matmul_kernel.factory(
            m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=ctas, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False,
            scales=scales, promote_ahead=ahead, multicast=2, multicast_b=mc_b,
        )
    )
    assert kern.cluster_size == 2
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    kern(a, np.ascontiguousarray(b.T), sa, sb, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)


def test_fp8_multicast_is_not_a_candidate_and_three_promoting_consumers_refuse_it():
    """FP8's multicast runs (`test_fp8_promoted_multicast_matches_float64`) but was slower than one
    CTA a tile wherever timed: no FP8 configuration of the tuner's multicasts."""
    for fast in (True, False):
        cfgs = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=8192, n=8192, k=4096, dtype="float8_e4m3fn", fast_accum=fast)
        assert cfgs and not [c for c in cfgs if c.get("multicast")]
    with pytest.raises(ValueError, match="multicast=2"):  # (three consumers' promotion: not with multicast)
        matmul_module.matmul_kernel.factory(m=384, n=128, k=128, dtype="float8_e4m3fn", ctas=2, consumers=3, bn=64, out_dtype="bfloat16", fast_accum=False, multicast=2)


def test_multicast_without_the_producer_tail_is_reported(tmp_path):
    """The multicast design without its producer's tail (and no cluster barrier at the end): the
    last remote arrives on the peer's stages may reach it after it exited — reported."""
    import planting

    tail = "                if mc:\n                    producer_tail(bx)\n"
    planted = planting.planted(matmul_module, tail, "", tmp_path)
    m, n, k = 256, 128, 64 * 6
    a, b, _ = _mm_inputs(m, n, k, "bfloat16")
    prim = planted.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, consumers=2, bn=128, multicast=2, multicast_b=True)
    with pytest.raises(tirx.TirxError, match=r"arrives on `empty\[\d\]` of CTA rank \d \(remote\).* may exit before the arrive reaches"):
        tirx.compile(prim, "sm_90a")(a, b, np.zeros((m, n), a.dtype))


def test_multicast_refusals():
    f = matmul_module.matmul_kernel.factory
    for kw in ({"splits": 2}, {"cluster_k": 2}, {"a_major": "m"}, {"multicast": 3}):
        with pytest.raises(ValueError, match="multicast="):
            f(m=128, n=256, k=256, dtype="bfloat16", ctas=4, consumers=2, bn=128, **{"multicast": 2, **kw})
    with pytest.raises(ValueError, match="multicast="):  # (M = 5 in one 64-row tile: A's box is M's rows only)
        f(m=5, n=256, k=256, dtype="bfloat16", ctas=4, consumers=1, bn=128, multicast=2)


# (m, n, k, bn, CTAs): a CTA's units alternating between the two consumers, an odd count (the first
# consumer's one more), one unit (the second consumer idle), ragged M, N and K, K in one step over
# eight units (each stage refilled while the other consumer waits on it).
PINGPONG_SHAPES = [(128, 384, 256, 128, 2), (100, 200, 136, 64, 3), (64, 256, 640, 256, 1), (200, 136, 200, 128, 2), (256, 256, 64, 128, 1)]


@pytest.mark.parametrize("shape", PINGPONG_SHAPES, ids=str)
def test_pingpong_tiles_match_float64(shape):
    """The ping-pong schedule (`pingpong=True`): each consumer warpgroup on 64 x bn tiles of its
    own, the CTA's units alternating between them, the consumers taking turns through their K
    loops (named barriers). Every element written (C poisoned with NaN), no race in the simulator."""
    m, n, k, bn, ctas = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, consumers=2, bn=bn, pingpong=True))
    # (the turns: each consumer waits on its own named barrier, the other arrives on it)
    if -(-m // 64) * -(-n // bn) > ctas:  # (a CTA of one unit: no turns)
        assert all(f"bar.{op} {b}, 256;" in kern.cuda_source for op in ("sync", "arrive") for b in (9, 10))
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


def test_pingpong_epilogues_operand_majors_and_fp8_match_float64():
    """Ping-pong with addmm's bias row and an activation, A read transposed (M-major) and B
    K-major, SwiGLU's gated pair, float16 operands, and FP8 with fast accumulation and its
    per-tensor scales."""
    m, n, k = 130, 200, 136
    f = matmul_module.matmul_kernel.factory
    a, b, prod = _mm_inputs(m, n, k, "bfloat16")
    bias = np.random.default_rng(5).standard_normal((1, n)).astype(a.dtype)
    c = np.full((m, n), np.nan, a.dtype)
    tirx.compile(f(m=m, n=n, k=k, dtype="bfloat16", ctas=3, consumers=2, bn=128, pingpong=True, bias="row", activation="relu"))(a, b, bias, c)
    np.testing.assert_allclose(c.astype(F64), np.maximum(prod + bias.astype(F64), 0), rtol=2.0**-8, atol=1e-2)
    m2, k2 = 136, 192  # (At: M a multiple of 8)
    a, b, prod = _mm_inputs(m2, n, k2, "bfloat16")
    c = np.full((m2, n), np.nan, a.dtype)
    tirx.compile(f(m=m2, n=n, k=k2, dtype="bfloat16", ctas=2, consumers=2, bn=128, pingpong=True, a_major="m", b_major="k"))(
        np.ascontiguousarray(a.T), np.ascontiguousarray(b.T), c
    )
    np.testing.assert_allclose(c.astype(F64), prod, rtol=2.0**-8, atol=1e-3)
    a, g, _ = _mm_inputs(m, 192, k, "bfloat16")  # SwiGLU's pair (gated): each tile half the gate's columns, half the up projection's
    u = (np.random.default_rng(8).standard_normal((k, 192)) / 8).astype(a.dtype)
    c = np.full((m, 192), np.nan, a.dtype)
    tirx.compile(f(m=m, n=192, k=k, dtype="bfloat16", ctas=3, consumers=2, bn=128, gated=True, activation="silu", pingpong=True))(a, g, u, c)
    x, y = a.astype(F64) @ g.astype(F64), a.astype(F64) @ u.astype(F64)
    np.testing.assert_allclose(c.astype(F64), x / (1 + np.exp(-x)) * y, rtol=2.0**-7, atol=2e-2)
    a16, b16, p16 = _mm_inputs(m, n, k, "float16")
    c16 = np.full((m, n), np.nan, a16.dtype)
    tirx.compile(f(m=m, n=n, k=k, dtype="float16", ctas=2, consumers=2, bn=256, pingpong=True))(a16, b16, c16)
    np.testing.assert_allclose(c16.astype(F64), p16, rtol=2.0**-11, atol=1e-3)
    f8 = numpy_dtype("float8_e4m3fn")
    rng = np.random.default_rng(6)
    a8, b8 = rng.standard_normal((m, 256)).astype(f8), rng.standard_normal((256, n)).astype(f8)
    c8 = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    prim = f(m=m, n=n, k=256, dtype="float8_e4m3fn", ctas=3, consumers=2, bn=128, out_dtype="bfloat16", pingpong=True)
    tirx.compile(prim)(a8, np.ascontiguousarray(b8.T), np.float32([0.5]), np.float32([2.0]), c8)
    np.testing.assert_allclose(c8.astype(F64), a8.astype(F64) @ b8.astype(F64), rtol=2.0**-7, atol=1e-2)


def test_pingpong_refusals():
    f = matmul_module.matmul_kernel.factory
    for kw in ({"consumers": 1}, {"splits": 2}, {"cluster_k": 2}, {"multicast": 2}):
        with pytest.raises(ValueError, match="pingpong:"):
            f(m=128, n=256, k=256, dtype="bfloat16", ctas=4, bn=128, **{"consumers": 2, "pingpong": True, **kw})
    with pytest.raises(ValueError, match="pingpong:"):  # (FP8 promoted)
        f(m=128, n=256, k=256, dtype="float8_e4m3fn", ctas=4, consumers=2, bn=128, out_dtype="bfloat16", fast_accum=False, pingpong=True)


def test_cluster_designs_among_the_candidates():
    """K split over a cluster's 2 or 4 CTAs is timed beside the one-CTA tiles only where the
    128 x 128 tiles keep at most half the SMs busy, every cluster runs in one round (over several
    the design runs but lost where measured), each part holds 4 K steps at least, and the call
    asks for no split of its own (nor a gated product)."""

    def parts(m, n, k, ctas=132, **kw):
        cfgs = matmul_module._prune([dict(c) for c in matmul_module.CONFIGS], m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, **kw)
        assert any("cluster_k" not in c for c in cfgs)  # (the one-CTA tiles always)
        return sorted({c.get("cluster_k", 1) for c in cfgs})

    assert parts(1, 4096, 4096) == [1, 2]  # (32 tiles: 128 CTAs in clusters of 4 take two waves)
    assert parts(1, 2048, 4096) == [1, 2, 4]
    assert parts(128, 4096, 4096) == [1, 2]  # (32 tiles of 128 x 128: 128 CTAs in fours exceed the 115 that fit)
    assert parts(128, 8192, 8192) == [1, 2]  # (64 tiles: two consumers' 128 x 128 in pairs)
    assert parts(128, 12288, 4096) == [1]  # (96 tiles)
    assert parts(100, 12344, 4096) == parts(1000, 3000, 2048) == [1]  # (rounds of clusters: not candidates)
    assert parts(1, 4096, 256) == [1]  # (4 K steps)
    assert parts(1, 4096, 512) == [1, 2]
    assert parts(1, 4096, 4096, splits=2) == [1]
    assert parts(1, 4096, 4096, clusters=False) == [1]
    assert parts(16, 4096, 4096, gated=True, activation="silu") == [1]


@pytest.mark.parametrize("cfg", CLUSTERED_16, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}_k{c['cluster_k']}")
def test_every_cluster_configuration_matches_float64(cfg):
    """Each split-K-over-a-cluster candidate of 16-bit operands (the tuner's), ragged M and N,
    two tiles, K's 16 steps in its parts; the workspace poisoned with NaN."""
    parts, bm, bn = cfg["cluster_k"], 64 * cfg["consumers"], cfg["bn"]
    m, n, k = bm - 3, bn + 8, 64 * 16
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=parts)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2 * parts, **cfg))
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c, np.full((parts - 1, m, n), np.nan, np.float32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


# (m, n, k, CTAs): K over clusters in several rounds (fewer CTAs than units): the storing CTAs
# go on to their next unit before the first has read their parts; ragged M, N; a partial last round.
CLUSTER_ROUNDS = [(100, 264, 64 * 8, 2), (200, 136, 64 * 8, 4), (70, 200, 64 * 4, 6)]


@pytest.mark.parametrize("cfg", [{"consumers": 1, "bn": 128, "cluster_k": 2}, {"consumers": 2, "bn": 64, "cluster_k": 4}, {"consumers": 1, "bn": 64, "cluster_k": 2}], ids=str)
@pytest.mark.parametrize("shape", CLUSTER_ROUNDS, ids=str)
def test_cluster_split_over_several_rounds_matches_float64(cfg, shape):
    """Split-K over a cluster's CTAs where the units outnumber the CTAs: a cluster barrier phase a
    round, each storing CTA arriving and going on, waiting for a phase only before its next
    arrival (the simulator reports a part read before its phase, or a thread arriving twice)."""
    m, n, k, ctas = shape
    parts = cfg["cluster_k"]
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=parts)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, **cfg))
    assert kern.meta["grid"][0] < -(-m // (64 * cfg["consumers"])) * -(-n // cfg["bn"]) * parts  # (several rounds)
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c, np.full((parts - 1, m, n), np.nan, np.float32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


# Mistakes planted in the rounds of K over clusters, each reported by the simulator: the producer
# warpgroup's arrival from its loading thread only (the barrier is `.aligned`: a warp's lanes at
# one instruction, or the GPU hangs), and a storing CTA's part stored after its arrival.
CLUSTER_ROUND_MISTAKES = [
    (
        """                        if tid == 0:
                            load_round(r, bx)
                        cluster_round(r)""",
        """                        if tid == 0:
                            load_round(r, bx)
                            if r > 0:
                                T.ptx.barrier.cluster.wait()
                            T.ptx.barrier.cluster.arrive()
                        else:
                            if r > 0:
                                T.ptx.barrier.cluster.wait()
                            T.ptx.barrier.cluster.arrive()""",
        r"barrier divergence: .* reaches `barrier.cluster.arrive` .* at another instruction than lane",
    ),
    (
        """                    clip=True,
                )
                if r > 0:  # (a thread arrives once a phase: the round before's waited for first)
                    T.ptx.barrier.cluster.wait()
                T.ptx.barrier.cluster.arrive()""",
        """                    clip=True,
                )
                if r > 0:
                    T.ptx.barrier.cluster.wait()
                T.ptx.barrier.cluster.arrive()
                Tx.warpgroup.copy(
                    W[part_of(r, bx) - 1, out_row(r, bx, cw) : out_row(r, bx, cw) + 64, tile_n(r, bx) * bn : tile_n(r, bx) * bn + bn],
                    acc[0:64, 0:bn],
                    clip=True,
                )""",
        r"data race: `W` .* no cluster barrier orders the two",
    ),
]


@pytest.mark.parametrize("mistake", CLUSTER_ROUND_MISTAKES, ids=["arrive_from_one_lane", "part_stored_after_arrive"])
def test_cluster_round_mistakes_are_reported(mistake, tmp_path):
    import planting

    old, new, message = mistake
    planted = planting.planted(matmul_module, old, new, tmp_path)
    m, n, k = 100, 264, 64 * 8
    a, b, _ = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(planted.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, consumers=1, bn=128, cluster_k=2))
    with pytest.raises(tirx.TirxError, match=message):
        kern(a, b, np.zeros((m, n), a.dtype), np.zeros((1, m, n), np.float32))


# (m, n, k, CTAs): stream-K's pieces — a CTA's range inside one tile (three CTAs a tile), ranges
# across tile ends, whole tiles among pieces; ragged M, N and K.
STREAM_K_SHAPES = [(100, 264, 64 * 8, 5), (70, 200, 1000, 5), (200, 264, 64 * 8, 7), (130, 136, 64 * 3, 4), (64, 128, 64 * 9, 2)]


@pytest.mark.parametrize("cfg", [{"consumers": 1, "bn": 128}, {"consumers": 2, "bn": 256}, {"consumers": 2, "bn": 64}], ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
@pytest.mark.parametrize("shape", STREAM_K_SHAPES, ids=str)
def test_stream_k_matches_float64(cfg, shape):
    """Stream-K: all tiles' K steps shared out evenly over the CTAs of a cooperative grid, a
    tile's later pieces' float32 sums stored (the workspace poisoned with NaN), added by the
    tile's first CTA after the grid group barrier; C poisoned too (every element written)."""
    m, n, k, ctas = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=ctas)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, stream_k=True, **cfg))
    assert kern.meta["grid"][0] == ctas
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c, np.full((ctas, 64 * cfg["consumers"], cfg["bn"]), np.nan, np.float32), np.zeros(1, np.int32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


@pytest.mark.parametrize(
    "form",
    [
        dict(bias="row", activation="gelu", alpha=0.5, beta=2.0),
        dict(bias="column", activation="relu"),
        dict(a_major="m"),
        dict(b_major="k"),
        dict(out_dtype="float32"),
    ],
    ids=["bias_row_gelu", "bias_column_relu", "At", "Bt", "f32_out"],
)
def test_stream_k_epilogues_and_operand_forms_match_float64(form):
    """Stream-K with the epilogue's forms (applied once, by the tile's first CTA, after the sums of
    the others) and both operands' transposed forms; 5 CTAs over 2 x 3 tiles of 8 K steps."""
    form = dict(form)
    m, n, k, ctas = 104 if form.get("a_major") else 100, 264, 64 * 8, 5  # (At's rows: 16-byte strides)
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=11)
    args_a = np.ascontiguousarray(a.T) if form.get("a_major") == "m" else a
    args_b = np.ascontiguousarray(b.T) if form.get("b_major") == "k" else b
    extra = ()
    if form.get("bias"):
        rng = np.random.default_rng(5)
        shape = (1, n) if form["bias"] == "row" else (m, 1)
        i = rng.standard_normal(shape).astype(a.dtype)
        z = form.get("alpha", 1.0) * want + form.get("beta", 1.0) * i.astype(F64)
        want = {"gelu": lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))), "relu": lambda x: np.maximum(x, 0)}[form["activation"]](z)
        extra = (i,)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, stream_k=True, consumers=1, bn=128, **form))
    c = np.full((m, n), np.nan, np.float32 if form.get("out_dtype") else a.dtype)
    kern(args_a, args_b, *extra, c, np.full((ctas, 64, 128), np.nan, np.float32), np.zeros(1, np.int32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=2e-3)


def test_stream_k_fp8_matches_float64():
    """Stream-K of FP8 operands with fast accumulation, per-tensor scales, ragged M and N."""
    m, n, k, ctas = 100, 264, 128 * 6, 4
    rng = np.random.default_rng(9)
    f8 = numpy_dtype("float8_e4m3fn")
    a, b = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((k, n)).astype(f8)
    want = a.astype(F64) @ b.astype(F64) * 0.375
    prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=ctas, out_dtype="bfloat16", stream_k=True, consumers=1, bn=128)
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a, np.ascontiguousarray(b.T), np.float32([0.5]), np.float32([0.75]), c, np.full((ctas, 64, 128), np.nan, np.float32), np.zeros(1, np.int32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)


def test_stream_k_refusals():
    """Stream-K's refusals: fewer K steps than CTAs, and the designs it does not combine with."""
    with pytest.raises(ValueError, match="at least a K step per CTA"):
        matmul_module.matmul_kernel.factory(m=64, n=128, k=64 * 3, dtype="bfloat16", ctas=4, consumers=1, bn=128, stream_k=True)
    for other in (dict(splits=2), dict(cluster_k=2), dict(pingpong=True, consumers=2), dict(gated=True, activation="silu")):
        with pytest.raises(ValueError, match="stream_k|gated"):
            matmul_module.matmul_kernel.factory(m=256, n=256, k=64 * 8, dtype="bfloat16", ctas=4, **{"consumers": 1, "bn": 128, **other}, stream_k=True)


# Stream-K's mistake planted, reported by the simulator: the grid group barrier left out (a later
# piece's sums read by the tile's first CTA, unordered).
STREAM_K_MISTAKES = [
    (
        """        T.cuda.grid_group_sync(G.ptr_to([0]), grid)
""",
        """        T.cuda.warp_sync()
""",
        r"data race: `W`",
    ),
]


@pytest.mark.parametrize("mistake", STREAM_K_MISTAKES, ids=["no_grid_barrier"])
def test_stream_k_mistakes_are_reported(mistake, tmp_path):
    import planting

    old, new, message = mistake
    planted = planting.planted(matmul_module, old, new, tmp_path)
    m, n, k, ctas = 70, 200, 1000, 5
    a, b, _ = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(planted.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, consumers=1, bn=128, stream_k=True))
    with pytest.raises(tirx.TirxError, match=message):
        kern(a, b, np.zeros((m, n), a.dtype), np.zeros((ctas, 64, 128), np.float32), np.zeros(1, np.int32))


# FP8 promoted to float32 over a cluster: the candidates only FP8 takes (three consumers, promote_ahead).
CLUSTERED_FP8 = [
    c for c in matmul_module.CONFIGS if "cluster_k" in c and (c["consumers"] == 3 or (c.get("promote_ahead") and matmul_module.promote_fits(c["consumers"], c["bn"], partials=2)))
]


@pytest.mark.parametrize("cfg", CLUSTERED_FP8, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}_k{c['cluster_k']}" + ("_ahead" if c.get("promote_ahead") else ""))
def test_fp8_promoted_over_a_cluster_matches_float64(cfg):
    """The FP8 candidates promoted to float32 that split K over a cluster, per-tensor scales, ragged
    M and N (two tiles), K's 8 steps of 128 in the cluster's parts; the workspace poisoned with NaN."""
    parts, bm = cfg["cluster_k"], 64 * cfg["consumers"]
    m, n, k = bm - 5, cfg["bn"] + 8, 1024
    rng = np.random.default_rng(parts + bm)
    f8 = numpy_dtype("float8_e4m3fn")
    a, b = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((k, n)).astype(f8)
    want = a.astype(F64) @ b.astype(F64) * 0.375
    prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=2 * parts, out_dtype="bfloat16", fast_accum=False, **cfg)
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a, np.ascontiguousarray(b.T), np.float32([0.5]), np.float32([0.75]), c, np.full((parts - 1, m, n), np.nan, np.float32))
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)


def test_work_buffers_are_views_of_one_buffer_per_stream(monkeypatch):
    """`_common.scratch` on a CUDA device (faked here: a tensor that says so, one stream, no
    capture): calls of any shape in turn get views of one flat buffer per stream and dtype, grown
    where a call needs more, so the memory held is the largest call's, not a buffer per shape;
    another stream, dtype or role (``held``) has its own; NumPy arrays get new ones."""
    torch = pytest.importorskip("torch")

    class OnCuda(torch.Tensor):
        is_cuda = property(lambda self: True)

        def get_device(self):
            return 0

    stream = [7]
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: stream[0])
    like, held, other = torch.zeros(1).as_subclass(OnCuda), {}, {}
    a = common.scratch(like, (2, 3), "float32", held)
    b = common.scratch(like, (3, 2), "float32", held)
    assert a.shape == (2, 3) and b.shape == (3, 2) and a.data_ptr() == b.data_ptr() and a.is_contiguous()
    grown = common.scratch(like, (4, 4), "float32", held)
    assert grown.data_ptr() != a.data_ptr() and common.scratch(like, (1, 5), "float32", held).data_ptr() == grown.data_ptr()
    assert common.scratch(like, (2, 3), "float32", other).data_ptr() != grown.data_ptr()  # (another role)
    assert common.scratch(like, (2, 3), "int32", held).dtype == torch.int32
    stream[0] = 8
    assert common.scratch(like, (2, 3), "float32", held).data_ptr() != grown.data_ptr()
    assert len(held) == 3 and held[(0, 7, "float32")][0].numel() == 16
    stream[0] = 7
    assert common.scratch(like, (1, 5), "float32", held) is common.scratch(like, [1, 5], "float32", held)  # (a view per shape, kept)
    x = np.zeros(3, np.float32)
    assert common.scratch(x, (2,), "float32", held) is not common.scratch(x, (2,), "float32", held)


def test_absent_norm_parameters_are_kept_filled_vectors(monkeypatch):
    """`_common.constant_vector` (an absent weight's ones, bias's zeros) on a CUDA device (faked
    as above): one filled buffer per stream, dtype and value, a view kept per length, grown where
    a call needs more; none kept while a CUDA graph is being captured, nor for NumPy arrays."""
    torch = pytest.importorskip("torch")

    class OnCuda(torch.Tensor):
        is_cuda = property(lambda self: True)

        def get_device(self):
            return 0

    stream, capturing = [7], [False]
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: capturing[0])
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda dev: stream[0])
    monkeypatch.setattr(common, "_CONSTANTS", {})
    like = torch.zeros(1).as_subclass(OnCuda)
    ones = common.constant_vector(like, 6, "bfloat16", 1.0)
    assert ones is common.constant_vector(like, 6, "bfloat16", 1.0) and ones.dtype == torch.bfloat16
    assert (ones.float() == 1).all() and (common.constant_vector(like, 4, "bfloat16", 0.0).float() == 0).all()
    assert common.constant_vector(like, 4, "bfloat16", 1.0).data_ptr() == ones.data_ptr()  # (a view of the same)
    grown = common.constant_vector(like, 9, "bfloat16", 1.0)
    assert grown.shape == (9,) and grown.data_ptr() != ones.data_ptr() and (grown.float() == 1).all()
    assert common.constant_vector(like, 6, "float32", 1.0).dtype == torch.float32
    stream[0] = 8
    assert common.constant_vector(like, 6, "bfloat16", 1.0).data_ptr() != grown.data_ptr()
    capturing[0] = True
    assert common.constant_vector(like, 6, "bfloat16", 1.0) is not common.constant_vector(like, 6, "bfloat16", 1.0)
    x = np.zeros(3, np.float32)
    assert common.constant_vector(x, 2, "float32", 1.0) is not common.constant_vector(x, 2, "float32", 1.0)


def test_a_cluster_design_takes_its_workspace():
    """A tuned call whose chosen design splits K over a cluster gets its float32 workspace after
    the call's arguments (`_with_workspace`, the tuner's ``launch_args``); other designs the call's
    arguments as they are."""
    m, n, k = 5, 200, 1000
    factory = matmul_module.matmul_kernel.factory
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=3)
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    for cluster_k in (1, 2, 4):
        kern = tirx.compile(factory(m=m, n=n, k=k, dtype="bfloat16", ctas=16, consumers=1, bn=128, cluster_k=cluster_k))
        args = matmul_module._with_workspace(kern, (a, b, c))
        assert len(args) == (3 if cluster_k == 1 else 4)
        # (the tuner's launcher adapts the arguments of exactly these designs)
        assert matmul_module.matmul_kernel.adapts({"consumers": 1, "bn": 128, "cluster_k": cluster_k}) == (cluster_k > 1)
        if cluster_k > 1:
            assert args[3].shape == (cluster_k - 1, m, n) and args[3].dtype == np.float32
        c[...] = np.nan
        kern(*args)
        np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)
    with pytest.raises(ValueError, match="clusters=False"):
        factory(m=m, n=n, k=k, dtype="bfloat16", ctas=16, consumers=1, bn=128, cluster_k=2, clusters=False)


@pytest.mark.parametrize("bn", [64, 32])
def test_fp8_at_decode_shapes_in_skinny_tiles(bn):
    """FP8 in the decode tiles (64 x 64, 64 x 32; A's box of M's rows, the rest zeroed once):
    wgmma accumulating all of K, and each step promoted to float32."""
    m, n, k = 5, 200, 1024
    f8, bf = numpy_dtype("float8_e4m3fn"), numpy_dtype("bfloat16")
    rng = np.random.default_rng(bn)
    a8, b8 = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((k, n)).astype(f8)
    want = a8.astype(F64) @ b8.astype(F64) * 0.125
    bt = np.ascontiguousarray(b8.T)
    for fast in (True, False):
        prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=2, consumers=1, bn=bn, out_dtype="bfloat16", fast_accum=fast)
        c = np.full((m, n), np.nan, bf)
        tirx.compile(prim)(a8, bt, np.float32([0.5]), np.float32([0.25]), c)
        np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max())


@pytest.mark.parametrize("cluster_k", [2, 4])
def test_split_k_over_a_cluster_matches_float64(cluster_k):
    """Split-K in one launch: a tile's parts the CTAs of a cluster, ranks past the first storing
    their float32 sums (rows past M clipped; the workspace poisoned with NaN) before a cluster
    barrier, the first adding them in rank order and applying the epilogue; matmul in tiles of
    128 and 64 columns, addmm with a bias row and an activation, FP8 with per-tensor scales
    (accumulated by wgmma, and promoted; the epilogue's and promoted FP8's also over fewer CTAs
    than units, in rounds); ragged M, N, K; the simulator's race checks on."""
    m, n, k = 5, 200, 1000  # (16 K steps, two tiles)
    factory = matmul_module.matmul_kernel.factory
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=cluster_k)
    bf = numpy_dtype("bfloat16")

    def run(prim, *inputs):
        c = np.full((m, n), np.nan, bf)
        tirx.compile(prim)(*inputs, c, np.full((cluster_k - 1, m, n), np.nan, np.float32))
        return c.astype(F64)

    for bn in (128, 64):  # (64: a decode tile, its epilogue a store of 64 columns)
        got = run(factory(m=m, n=n, k=k, dtype="bfloat16", ctas=16, consumers=1, bn=bn, cluster_k=cluster_k), a, b)
        np.testing.assert_allclose(got, want, rtol=2.0**-8, atol=1e-3)
    bias = np.random.default_rng(1).standard_normal((1, n)).astype(bf)
    # (3 CTAs: one cluster, the tiles' units in two rounds)
    prim = factory(m=m, n=n, k=k, dtype="bfloat16", ctas=3, consumers=1, bn=128, cluster_k=cluster_k, bias="row", alpha=0.5, beta=2.0, activation="gelu")
    z = 0.5 * want + 2.0 * bias.astype(F64)
    np.testing.assert_allclose(run(prim, a, b, bias), matmul_module._host_activation(z, "gelu"), rtol=2.0**-7, atol=2.0**-7)
    f8 = numpy_dtype("float8_e4m3fn")
    k8 = 1024  # (8 steps of 128)
    rng = np.random.default_rng(6)
    a8, b8 = rng.standard_normal((m, k8)).astype(f8), rng.standard_normal((k8, n)).astype(f8)
    want8 = a8.astype(F64) @ b8.astype(F64)
    bt = np.ascontiguousarray(b8.T)
    for fast in (True, False):
        prim = factory(m=m, n=n, k=k8, dtype="float8_e4m3fn", ctas=8 if fast else 3, consumers=1, bn=128, cluster_k=cluster_k, out_dtype="bfloat16", fast_accum=fast)
        got = run(prim, a8, bt, np.float32([0.5]), np.float32([0.25]))
        np.testing.assert_allclose(got, want8 / 8, rtol=2.0**-7, atol=2.0**-7 * np.abs(want8).max() / 8)


def test_split_k_part_counts_timed_where_the_last_round_of_tiles_leaves_sms_idle():
    """`matmul.split_ways`: split-K's part counts timed beside the one-kernel choice — where 128 x
    128 tiles leave the last round part idle and parts of 8 steps or more cut the busiest SM's
    steps to `SPLIT_GAIN` or less; none where K over a cluster is a candidate (tiles for half
    the SMs), where the tiles fill their rounds, for FP8, gated products or ``split_k=1``."""
    ways = matmul_module.split_ways
    assert ways(100, 12344, 4096, "bfloat16", 132) == [4, 8]  # (97 tiles: 64 steps, in 4 parts 3 rounds of 16)
    assert ways(1000, 3000, 2048, "bfloat16", 132) == [2, 4]  # (192 tiles: 2 rounds of 32 steps; 3 of 16)
    assert ways(777, 1232, 4096, "float16", 132) == [8, 4]
    assert ways(8, 4096, 4096, "bfloat16", 132) == []  # (32 tiles: K over a cluster's CTAs)
    assert ways(3000, 5000, 1000, "bfloat16", 132) == ways(4096, 4096, 4096, "bfloat16", 132) == []
    assert ways(100, 12344, 4096, "float8_e4m3fn", 132) == ways(100, 12344, 4096, "bfloat16", 132, gated=True) == []
    assert ways(100, 12344, 4096, "bfloat16", 132, clusters=False) == []
    assert ways(100, 12344, 256, "bfloat16", 132) == []  # (4 steps: no parts of 8)


def test_split_k_chosen_by_timing_runs_both_kernels(tmp_path, monkeypatch):
    """Where `split_ways` offers split-K, the first call times it beside the one-kernel choice
    (`autotune.choose`, a given timer here: the simulator is never timed) and keeps the faster:
    split-K's two kernels (parts, then the finish with addmm's epilogue) or the one; either way
    against float64, and a later call of the shape takes the kept choice untimed (split-K's
    workspace taken, or not)."""
    at = sys.modules["tirx.autotune"]

    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_memory", {})
    monkeypatch.setattr(matmul_module, "_SPLIT_CHOICES", {})
    m, n, k = 128, 384, 1024  # (3 tiles on the simulator's 2 CTAs: 16 steps on one; in 2 parts 3 rounds of 8)
    assert matmul_module.split_ways(m, n, k, "bfloat16", 2) == [2]
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=7)
    timed, fastest = [], ["split_k=2"]

    def timer(option, run):
        run()
        timed.append(option)
        return 1.0 if option == fastest[0] else 2.0

    monkeypatch.setattr(matmul_module, "SPLIT_TIMER", timer)
    workspaces, scratch = [], matmul_module.c.scratch  # (split-K's parts: the workspace each run takes)
    monkeypatch.setattr(matmul_module.c, "scratch", lambda like, shape, *rest, **kw: (workspaces.append(tuple(shape)), scratch(like, shape, *rest, **kw))[1])
    tol = dict(rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)
    np.testing.assert_allclose(ops.matmul(a, b).astype(F64), want, **tol)
    assert timed == ["one kernel", "split_k=2"]
    workspaces.clear()
    np.testing.assert_allclose(ops.matmul(a, b).astype(F64), want, **tol)
    assert timed == ["one kernel", "split_k=2"] and workspaces == [(2, m, n)]  # (kept: split-K, untimed)
    i = np.random.default_rng(8).standard_normal((1, n)).astype(a.dtype)
    z = 0.5 * i.astype(F64) + 2.0 * want
    fastest[0] = "one kernel"
    for _ in range(2):  # (timed, then kept)
        workspaces.clear()
        got = ops.addmm(i, a, b, beta=0.5, alpha=2.0, activation="relu")
        np.testing.assert_allclose(got.astype(F64), np.maximum(z, 0), rtol=2.0**-7, atol=2.0**-7 * np.abs(z).max() / 8)
    assert timed[2:] == ["one kernel", "split_k=2"] and workspaces == []  # (the one kernel)


def test_split_k_through_the_ops():
    """``split_k=`` through the ops: matmul, addmm with a matrix input and an activation, FP8
    scaled_mm with per-tensor scales and a bias and with block scales (applied as each step is
    promoted, before the sum); a count that does not divide K's steps refused."""
    m, n, k = 8, 128, 1024
    a, b, want = _mm_inputs(m, n, k, "bfloat16", seed=5)
    np.testing.assert_allclose(ops.matmul(a, b, split_k=4).astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)
    with pytest.raises(ValueError, match=r"split_k=3; K = 1024 is 16 steps of the kernel's K tile: split_k one of \[1, 2, 4, 8, 16\]"):
        ops.matmul(a, b, split_k=3)
    i = np.random.default_rng(2).standard_normal((m, n)).astype(numpy_dtype("bfloat16"))
    got = ops.addmm(i, a, b, beta=0.5, alpha=2.0, activation="silu", split_k=2)
    z = 0.5 * i.astype(F64) + 2.0 * want
    np.testing.assert_allclose(got.astype(F64), matmul_module._host_activation(z, "silu"), rtol=2.0**-7, atol=2.0**-7 * np.abs(z).max() / 8)
    f8 = numpy_dtype("float8_e4m3fn")
    rng = np.random.default_rng(6)
    a8, b8 = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((k, n)).astype(f8)
    want8 = a8.astype(F64) @ b8.astype(F64)
    bias = rng.standard_normal(n).astype(np.float16)
    got = ops.scaled_mm(a8, b8, np.float32(0.5), np.float32(0.25), bias, out_dtype="float16", split_k=2)
    z = want8 * 0.125 + bias.astype(F64)
    np.testing.assert_allclose(got.astype(F64), z, rtol=2.0**-10, atol=2.0**-10 * np.abs(z).max() / 8)
    sa = rng.uniform(0.5, 2, (m, k // 128)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (1, k // 128)).astype(np.float32)
    deq = (a8.astype(F64) * np.repeat(sa, 128, axis=1)) @ (b8.astype(F64) * np.repeat(sb.T, 128, axis=0))
    got = ops.scaled_mm(a8, b8, sa, sb, out_dtype="bfloat16", split_k=8)
    np.testing.assert_allclose(got.astype(F64), deq, rtol=2.0**-7, atol=2.0**-7 * np.abs(deq).max() / 8)
    torch = pytest.importorskip("torch")
    with pytest.raises(NotImplementedError, match="split_k=2 is for eager calls without autograd"):
        ops.matmul(torch.ones(8, 64, dtype=torch.bfloat16, requires_grad=True), torch.ones(64, 64, dtype=torch.bfloat16), split_k=2)
    # split_k=1 (none) keeps the gradient: the autograd path, whose choice is automatic
    x = torch.ones(8, 64, dtype=torch.bfloat16, requires_grad=True)
    y = ops.matmul(x, torch.ones(64, 64, dtype=torch.bfloat16), split_k=1)
    assert y.requires_grad and y.grad_fn is not None
    assert ops.matmul(a, b, split_k=1).shape == (m, n)


@pytest.mark.parametrize("cfg", TILES_16, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_every_matmul_tile_configuration_matches_float64(cfg):
    # Each configuration the autotuner may pick, at a size where its persistent tile loop takes
    # several rounds on two CTAs and the K loop wraps the stages.
    m, n, k = 64 * cfg["consumers"] * 2, cfg["bn"] * 2, 64 * 9
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, **cfg))
    c = np.empty((m, n), a.dtype)
    kern(a, b, c)
    # f32 accumulation of exact bf16 products, then one rounding to bf16.
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


@pytest.mark.parametrize("shape", [(200, 320, 200), (72, 136, 8), (1, 8, 72), (130, 200, 136)])
@pytest.mark.parametrize("cfg", TILES_16, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_matmul_tiles_cover_ragged_shapes(cfg, shape):
    # TMA fills what the last tiles read outside A and B with zeros and clips what they write
    # outside C (poisoned with NaN here: every element is written, none outside).
    m, n, k = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, **cfg))
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


@pytest.mark.parametrize("shape", [(136, 200, 136), (256, 128, 72)], ids=str)
@pytest.mark.parametrize("majors", [("m", "n"), ("k", "k"), ("m", "k")], ids=lambda m: f"a_{m[0]}-b_{m[1]}")
@pytest.mark.parametrize("cfg", TILES_16, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_matmul_reads_transposed_operands_in_place(cfg, majors, shape):
    """A given as At (k x m: an M-major A, read transposed by the tensor cores) and B as Bt (n x k:
    K-major), as a transposed view stores them; ragged shapes (M a multiple of 8: At's rows
    16-byte aligned), every element written (C poisoned with NaN)."""
    m, n, k = shape
    a_major, b_major = majors
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    at = np.ascontiguousarray(a.T) if a_major == "m" else a
    bt = np.ascontiguousarray(b.T) if b_major == "k" else b
    factory = matmul_module.matmul_kernel.factory
    kern = tirx.compile(factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, a_major=a_major, b_major=b_major, **cfg))
    c = np.full((m, n), np.nan, a.dtype)
    kern(at, bt, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


@pytest.mark.parametrize("shape", [(136, 200, 5), (64, 128, 100), (8, 8, 1)], ids=str)
@pytest.mark.parametrize("cfg", [{"consumers": 1, "bn": 128}, {"consumers": 2, "bn": 256}], ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_matmul_takes_any_k_through_a_transposed(cfg, shape):
    """K no multiple of 8 (the weight gradient Aᵀ dC of a ragged number of rows): A read as At
    (k x m, rows of M elements), its K tail and B's TMA's zeros; every element written."""
    m, n, k = shape
    a, b, want = _mm_inputs(m, n, k, "bfloat16")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, a_major="m", **cfg))
    c = np.full((m, n), np.nan, a.dtype)
    kern(np.ascontiguousarray(a.T), b, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)


def test_matmul_ranks_as_torch_matmul():
    """`torch.matmul`'s ranks: a stack of rows times a matrix (M folded), a vector on either side,
    batches of matrices broadcast (`grouped_mm`), against float64; two vectors and batched
    activations refused with the fix."""
    rng = np.random.default_rng(5)

    def r(*shape):
        return rng.standard_normal(shape).astype(np.float16)

    for a, b in [(r(2, 24, 32), r(32, 48)), (r(24, 32), r(32)), (r(7, 32), r(32)), (r(2, 24, 32), r(32)), (r(32), r(32, 48)), (r(32), r(2, 32, 48)),
                 (r(2, 24, 32), r(2, 32, 48)), (r(3, 1, 24, 32), r(2, 32, 48)), (r(24, 32), r(2, 32, 48))]:
        want = np.matmul(a.astype(F64), b.astype(F64))
        got = ops.matmul(a, b)
        assert got.shape == want.shape and got.dtype == a.dtype, (a.shape, b.shape)
        np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-9, atol=2.0**-9 * np.abs(want).max(), err_msg=str((a.shape, b.shape)))
    with pytest.raises(ValueError, match=r"two vectors .*\(a \* b\)\.sum\(\)"):
        ops.matmul(r(32), r(32))
    with pytest.raises(ValueError, match="without activation=, split_k= or a float32 out_dtype="):
        ops.matmul(r(2, 24, 32), r(2, 32, 48), activation="relu")
    with pytest.raises(ValueError, match="without activation=, split_k= or a float32 out_dtype="):
        ops.matmul(r(2, 24, 32), r(2, 32, 48), out_dtype="float32")
    assert ops.matmul(r(2, 24, 32), r(32, 48), out_dtype="float32").dtype == np.float32  # (a stack of rows: the 2-D kernel's)
    for a, b, shape in [(r(0, 8, 16), r(0, 16, 8), (0, 8, 8)), (r(2, 8, 0), r(2, 0, 8), (2, 8, 8)), (r(8, 0), r(0), (8,)), (r(2, 3, 0), r(0, 8), (2, 3, 8))]:
        got = ops.matmul(a, b)  # (empty batches, and sums of no terms: 0)
        assert got.shape == shape and not got.astype(F64).any()
    with pytest.raises(ValueError, match=r"cannot be multiplied \(24x32 and 16x48\)"):
        ops.matmul(r(2, 24, 32), r(2, 16, 48))


def test_linear_as_torch_nn_functional_linear():
    """`linear(input, weight, bias)` as F.linear: any rank of input (a vector too), an nn.Linear's
    (out, in) weight read in place, the bias and an activation in the epilogue; forward and the
    three gradients against float64, eager and under torch.compile; shape errors name the operand."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    torch.manual_seed(3)
    for shape, bias in [((2, 5, 32), True), ((7, 32), False), ((32,), True)]:
        x = torch.randn(shape).bfloat16().requires_grad_()
        w = torch.randn(48, 32).bfloat16().requires_grad_()
        b = torch.randn(48).bfloat16().requires_grad_() if bias else None
        ts = [t for t in (x, w, b) if t is not None]
        ref = [t.detach().double().requires_grad_() for t in ts]
        want = F.gelu(F.linear(ref[0], ref[1], ref[2] if bias else None))
        dy = torch.randn(want.shape).bfloat16()
        want.backward(dy.double())
        for fn in (ops.linear, torch.compile(ops.linear, fullgraph=True)):
            for t in ts:
                t.grad = None
            y = fn(x, w, b, activation="gelu")
            torch.testing.assert_close(y.double(), want.detach(), rtol=2**-7, atol=2**-7 * want.abs().max().item())
            y.backward(dy)
            for t, r in zip(ts, ref):
                torch.testing.assert_close(t.grad.double(), r.grad, rtol=2**-6, atol=2**-6 * r.grad.abs().max().item())
    x = np.ones((3, 4, 32), np.float16)
    assert ops.linear(x, np.ones((24, 32), np.float16)).shape == (3, 4, 24)
    with pytest.raises(ValueError, match=r"the input's last dim must be in_features \(16\)"):
        ops.linear(x, np.ones((24, 16), np.float16))
    with pytest.raises(ValueError, match=r"bias of shape \[16\]; expected \(24,\)"):
        ops.linear(x, np.ones((24, 32), np.float16), np.ones(16, np.float16))


def test_matmul_backward_of_any_rows_and_ranks():
    """The backward of a product of 5 rows (dB = Aᵀ dC: K = 5, A read transposed), of one row
    (a decode step), of a stack of rows and of batched matrices, against float64, eager and
    under torch.compile."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    for sa, sb in [((5, 32), (32, 48)), ((1, 40), (40, 16)), ((2, 3, 32), (32, 48)), ((2, 5, 32), (2, 32, 48)), ((24, 32), (32,)), ((7, 32), (32,))]:
        a = torch.randn(sa).bfloat16().requires_grad_()
        b = torch.randn(sb).bfloat16().requires_grad_()
        ref = [t.detach().double().requires_grad_() for t in (a, b)]
        dc = torch.randn(torch.matmul(*ref).shape).bfloat16()
        torch.matmul(*ref).backward(dc.double())
        for fn in (ops.matmul, torch.compile(ops.matmul, fullgraph=True)):  # (the ranks' reshapes traced too)
            a.grad = b.grad = None
            fn(a, b).backward(dc)
            for t, w in zip((a, b), ref):
                torch.testing.assert_close(t.grad.double(), w.grad, rtol=2**-6, atol=2**-6 * w.grad.abs().max().item(), msg=str((sa, sb)))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_matmul_op_and_its_errors(dtype):
    a, b, want = _mm_inputs(128, 256, 128, dtype)
    c = ops.matmul(a, b)
    assert c.shape == (128, 256) and c.dtype == a.dtype
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-8, atol=1e-3)
    # Column-major operands (transposed views) are read in place, others through row-major copies.
    assert [m for m in matmul_module._operands(np.asfortranarray(a), np.asfortranarray(b))[1::2]] == ["m", "k"]
    np.testing.assert_array_equal(ops.matmul(np.asfortranarray(a), b), c)
    np.testing.assert_array_equal(ops.matmul(a, np.asfortranarray(b)), c)
    assert ops.matmul(a[:0], b).shape == (0, 256)
    np.testing.assert_array_equal(ops.matmul(a[:, :0], b[:0]), np.zeros((128, 256), a.dtype))
    with pytest.raises(ValueError, match=r"cannot be multiplied \(128x128 and 256x256\)"):
        ops.matmul(a, np.ones((256, 256), a.dtype))
    with pytest.raises(ValueError, match="N a multiple of 8, and K or M"):
        ops.matmul(a[:100, :100], b[:100])
    with pytest.raises(ValueError, match="N a multiple of 8, and K or M"):
        ops.matmul(a, b[:, :100])
    np.testing.assert_allclose(ops.matmul(a[:100], b).astype(F64), want[:100], rtol=2.0**-8, atol=1e-3)
    np.testing.assert_allclose(ops.matmul(a[:, :100], b[:100]).astype(F64), a[:, :100].astype(F64) @ b[:100].astype(F64), rtol=2.0**-8, atol=1e-3)
    with pytest.raises(TypeError, match="float32 operands"):
        ops.matmul(a.astype(np.float32), b.astype(np.float32))
    with pytest.raises(TypeError, match="one dtype"):
        ops.matmul(a, b.astype(np.float32))


def test_matmul_float32_output():
    """``out_dtype=float32`` (``torch.mm(a, b, out_dtype=torch.float32)``): the float32 sums
    stored unrounded, through one kernel, split-K's finish kernel and an activation; within
    float32 accumulation of the float64 product."""
    a, b, want = _mm_inputs(70, 96, 256, "bfloat16")
    bound = 256 * 2.0**-23 * (np.abs(a.astype(F64)) @ np.abs(b.astype(F64))).max()
    for kw in ({}, {"split_k": 2}, {"activation": "relu"}):
        got = ops.matmul(a, b, out_dtype="float32", **kw)
        assert got.dtype == np.float32 and got.shape == (70, 96)
        ref = np.maximum(want, 0) if kw.get("activation") else want
        assert np.abs(got - ref).max() <= bound, kw
    np.testing.assert_array_equal(ops.matmul(a, b, out_dtype="bfloat16"), ops.matmul(a, b))
    with pytest.raises(TypeError, match="their own dtype or float32"):
        ops.matmul(a, b, out_dtype="float16")
    # addmm: a float32 (or bfloat16) input, float32 output, through one kernel and split-K's finish.
    rows = np.random.default_rng(4).standard_normal(96).astype(np.float32)
    for inp, kw in ((rows, {}), (rows.astype(a.dtype), {"split_k": 2}), (np.ones((70, 96), np.float32), {"activation": "silu"})):
        z = 0.5 * inp.astype(F64) + 2.0 * want
        ref = z / (1 + np.exp(-z)) if kw.get("activation") else z
        got = ops.addmm(inp, a, b, beta=0.5, alpha=2.0, out_dtype="float32", **kw)
        assert got.dtype == np.float32 and np.abs(got - ref).max() <= 2 * bound, kw
    with pytest.raises(TypeError, match="a float32 input with out_dtype float32"):
        ops.addmm(rows, a, b)
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        m, n, k = (64, 128, 128) if dev == "cpu" else (4000, 776, 520)
        x = torch.randn(m, k, device=dev, dtype=torch.bfloat16, requires_grad=True)
        y = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        exact = x.double() @ y.double()
        for fn in (ops.matmul, torch.compile(ops.matmul, fullgraph=True)):
            got = fn(x, y, out_dtype=torch.float32)
            assert got.dtype == torch.float32
            assert (got.double() - exact).abs().max().item() <= k * 2.0**-23 * (x.double().abs() @ y.double().abs()).max().item()
        got.sum().backward()  # (the float32 gradient rounded to bfloat16 once, then dC Bᵀ)
        torch.testing.assert_close(x.grad.double(), torch.ones(m, n, device=dev).double() @ y.double().t(), rtol=2**-7, atol=0.05)
        bias = torch.randn(n, device=dev, requires_grad=True)
        got = ops.addmm(bias, x.detach(), y, out_dtype=torch.float32)
        assert got.dtype == torch.float32
        assert (got.double() - exact - bias.double()).abs().max().item() <= 2 * k * 2.0**-23 * (x.double().abs() @ y.double().abs()).max().item()
        got.sum().backward()
        torch.testing.assert_close(bias.grad, torch.full((n,), float(m), device=dev))


def _glu(zg, zu, activation):
    return matmul_module._host_activation(zg, activation) * zu


@pytest.mark.parametrize(
    "cfg, b_major",
    [(c, "n") for c in TILES_16 if c["bn"] % 128 == 0] + [(c, "k") for c in TILES_16 if c["consumers"] < 3],
    ids=lambda x: f"{64 * x['consumers']}x{x['bn']}" if isinstance(x, dict) else x,
)
def test_gated_mm_kernel_matches_float64(cfg, b_major):
    """The gated kernel (two B matrices, a tile's columns half each, the epilogue's act(gate) *
    up in float32, one rounding) at a ragged shape, for either B major, every tile it takes (a
    K-major B: any, its halves runs of rows; 192 columns: halves of 96, stored 32 at a time)."""
    m, n, k = 130, 200, 192
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(numpy_dtype("bfloat16"))
    g, u = (rng.standard_normal((k, n)).astype(a.dtype) for _ in range(2))
    tk = matmul_module.matmul_kernel(m=m, n=n, k=k, dtype="bfloat16", ctas=2, activation="silu", b_major=b_major, gated=True)
    kernel = tirx.compile(tk.tuner.factory(**tk.key_values, **cfg))
    out = np.zeros((m, n), a.dtype)
    kernel(a, *((g, u) if b_major == "n" else (np.ascontiguousarray(g.T), np.ascontiguousarray(u.T))), out)
    want = _glu(a.astype(F64) @ g.astype(F64), a.astype(F64) @ u.astype(F64), "silu")
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)


def test_gated_mm_op_autograd_and_errors():
    """``gated_mm``: SwiGLU / GeGLU against float64 (NumPy: the simulator), nn.Linear weights
    (``w.t()``) read in place, eager and compiled autograd (the backward recomputes both
    products) within bf16 rounding of float64's gradients, and its errors."""
    a, g, zg = _mm_inputs(72, 96, 128, "bfloat16", seed=5)
    u = np.random.default_rng(6).standard_normal(g.shape).astype(g.dtype)
    zu = a.astype(F64) @ u.astype(F64)
    for act in ("silu", "gelu", "gelu_tanh"):
        got = ops.gated_mm(a, g, u, activation=act)
        want = _glu(zg, zu, act)
        assert got.dtype == a.dtype
        np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)
    np.testing.assert_array_equal(ops.gated_mm(a, np.asfortranarray(g), np.asfortranarray(u)), ops.gated_mm(a, g, u))
    with pytest.raises(ValueError, match="one shape and dtype"):
        ops.gated_mm(a, g, u[:, :64])
    with pytest.raises(ValueError, match="'silu' \\(SwiGLU\\)"):
        ops.gated_mm(a, g, u, activation="relu")
    torch = pytest.importorskip("torch")
    for register in ("register_gated_torch_op", "register_torch_op", "register_addmm_torch_op"):  # (the backward's ops too)
        getattr(sys.modules["tirx.ops.matmul"], register)()
    x = torch.tensor(a.astype(np.float32)).bfloat16().requires_grad_()
    wg, wu = (torch.tensor(w.astype(np.float32).T.copy()).bfloat16().requires_grad_() for w in (g, u))  # nn.Linear's (n, k)
    dy = torch.randn(72, 96).bfloat16()
    ref = [t.detach().double().requires_grad_() for t in (x, wg, wu)]
    (torch.nn.functional.silu(ref[0] @ ref[1].t()) * (ref[0] @ ref[2].t())).backward(dy.double())
    for fn in (ops.gated_mm, torch.compile(ops.gated_mm, fullgraph=True)):
        for t in (x, wg, wu):
            t.grad = None
        fn(x, wg.t(), wu.t()).backward(dy)
        for t, r in zip((x, wg, wu), ref):
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2**-6, atol=2**-6 * r.grad.abs().max().item())


def test_products_keep_their_operands_not_their_results_for_backward():
    """As torch.mm's, a product's backward keeps its operands, not its result (a training step's
    activation memory): matmul, addmm (nor its input) and an activation that is recomputed;
    relu keeps its output (its gradient's mask), an activation recomputed keeps addmm's input."""
    torch = pytest.importorskip("torch")
    a = torch.randn(16, 64).bfloat16().requires_grad_()
    b = torch.randn(64, 32).bfloat16().requires_grad_()
    bias = torch.randn(32).bfloat16().requires_grad_()
    products = {  # name: (product, its output kept, addmm's input kept)
        "matmul": (lambda: ops.matmul(a, b), False, False),
        "addmm": (lambda: ops.addmm(bias, a, b), False, False),
        "matmul gelu": (lambda: ops.matmul(a, b, activation="gelu"), False, False),
        "addmm silu": (lambda: ops.addmm(bias, a, b, activation="silu"), False, True),
        "addmm relu": (lambda: ops.addmm(bias, a, b, activation="relu"), True, False),
    }
    for name, (product, out_kept, input_kept) in products.items():
        y = product()
        saved = [t.data_ptr() for t in y.grad_fn.saved_tensors if t is not None]
        assert (y.data_ptr() in saved) == out_kept, name
        assert (bias.data_ptr() in saved) == input_kept, name
        assert a.data_ptr() in saved and b.data_ptr() in saved, name
        a.grad = b.grad = None
        y.float().sum().backward()
        assert a.grad is not None and b.grad is not None, name


def test_torch_plans_read_each_operand_as_stored():
    """A plan per call signature decides once how it reads each operand (`_view`: a transposed
    view in place, the tensor itself where contiguous, else a copy per call): sliced rows, a
    column-major B, and gated_mm's gate and up matrices stored differently, each against the
    NumPy path bit for bit, twice per signature (other values the second time)."""
    torch = pytest.importorskip("torch")

    def as_numpy(t):
        return _host_array(t.contiguous())

    for seed in (0, 1):
        g = torch.Generator().manual_seed(seed)
        base = torch.randn(72, 256, generator=g).bfloat16()
        b = torch.randn(128, 96, generator=g).bfloat16()
        bt = torch.randn(96, 128, generator=g).bfloat16().t()
        for a_, b_ in ((base[:, ::2], b), (base[:, ::2], bt), (base[:, :128], bt), (base[:, 128:].t().contiguous().t(), b)):
            np.testing.assert_array_equal(as_numpy(ops.matmul(a_, b_)), ops.matmul(as_numpy(a_), as_numpy(b_)))
        for gate, up in ((b, bt), (bt, b), (bt, bt)):
            want = ops.gated_mm(as_numpy(base[:, :128]), as_numpy(gate), as_numpy(up))
            np.testing.assert_array_equal(as_numpy(ops.gated_mm(base[:, :128], gate, up)), want)


def test_gated_mm_on_the_gpu_against_the_unfused_sequence():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    F = torch.nn.functional
    for m, n, k in [(1, 11008, 4096), (16, 11008, 4096), (1000, 2816, 1032), (4096, 1536, 1024)]:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        wg, wu = (torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k**0.5 for _ in range(2))
        exact = F.silu(x.double() @ wg.double().t()) * (x.double() @ wu.double().t())
        theirs = F.silu(x @ wg.t()) * (x @ wu.t())
        got = ops.gated_mm(x, wg.t(), wu.t())
        # no further from float64 than PyTorch's unfused bf16 sequence (which rounds g and u too)
        assert (got.double() - exact).abs().max().item() <= (theirs.double() - exact).abs().max().item() + 2.0**-8 * exact.abs().max().item(), (m, n, k)


@pytest.mark.parametrize("cfg", TILES_16, ids=lambda c: f"{64 * c['consumers']}x{c['bn']}")
def test_addmm_epilogue_matches_float64(cfg):
    """PyTorch's addmm: a bias row (loaded into a layout replicated over the accumulator's rows),
    a bias column (each row's value, in the rows' layout) or a whole matrix (staged in the
    output's registers) added in the epilogue, alpha and beta in float32, one rounding; ragged
    shapes, every element written (C poisoned with NaN)."""
    m, n, k = 130, 200, 136
    a, b, prod = _mm_inputs(m, n, k, "bfloat16")
    rng = np.random.default_rng(4)
    inputs = (("row", rng.standard_normal((1, n)), 1.0, 1.0), ("column", rng.standard_normal((m, 1)), 1.5, 0.5), ("matrix", rng.standard_normal((m, n)), 0.5, 2.0))
    for kind, i, alpha, beta in inputs:
        i = i.astype(a.dtype)
        kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, bias=kind, alpha=alpha, beta=beta, **cfg))
        c = np.full((m, n), np.nan, a.dtype)
        kern(a, b, i, c)
        np.testing.assert_allclose(c.astype(F64), alpha * prod + beta * i.astype(F64), rtol=2.0**-8, atol=1e-2)


def test_addmm_op_and_its_errors():
    a, b, prod = _mm_inputs(100, 136, 72, "bfloat16")
    bias = np.random.default_rng(5).standard_normal(136).astype(a.dtype)
    np.testing.assert_allclose(ops.addmm(bias, a, b).astype(F64), prod + bias.astype(F64), rtol=2.0**-8, atol=1e-2)
    full = np.random.default_rng(6).standard_normal((100, 136)).astype(a.dtype)
    got = ops.addmm(full, a, b, beta=0.5, alpha=2.0)
    np.testing.assert_allclose(got.astype(F64), 2.0 * prod + 0.5 * full.astype(F64), rtol=2.0**-8, atol=2e-2)
    np.testing.assert_allclose(ops.addmm(bias, a[:, :0], b[:0], beta=2.0).astype(F64), np.broadcast_to(2.0 * bias.astype(F64), (100, 136)), rtol=2.0**-8)
    # PyTorch's broadcasting: a column, a number; through split-K's finish kernel and a cluster's parts too
    col = np.random.default_rng(7).standard_normal((100, 1)).astype(a.dtype)
    for i in (col, np.array(1.5, a.dtype), np.array([0.25], a.dtype), np.array([[-2.0]], a.dtype)):
        want = 2.0 * prod + 0.5 * np.broadcast_to(i.astype(F64), prod.shape)
        for split in (None, 2):
            got = ops.addmm(i, a, b, beta=0.5, alpha=2.0, split_k=split)
            np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-8, atol=2e-2, err_msg=f"{i.shape} split_k={split}")
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=100, n=136, k=72, dtype="bfloat16", ctas=12, consumers=1, bn=64, bias="column", cluster_k=2))
    c = np.full((100, 136), np.nan, a.dtype)
    kern(a, b, col, c, np.full((1, 100, 136), np.nan, np.float32))
    np.testing.assert_allclose(c.astype(F64), prod + col.astype(F64), rtol=2.0**-8, atol=2e-2)
    with pytest.raises(ValueError, match=r"input of shape \[100\] does not broadcast to the 100x136 product; .* a column \(100, 1\)"):
        ops.addmm(bias[:100], a, b)
    with pytest.raises(TypeError, match="input is float32, the matrices bfloat16"):
        ops.addmm(bias.astype(np.float32), a, b)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_epilogue_activations_match_float64(activation):
    """matmul and addmm with an activation fused into the epilogue: applied to the float32 sums
    (after the bias, alpha and beta), rounded once; ragged shapes; NaN through relu stays NaN;
    k = 0 computed on the host."""
    from tirx.ops.matmul import _host_activation

    m, n, k = 130, 200, 136
    a, b, prod = _mm_inputs(m, n, k, "bfloat16")
    rng = np.random.default_rng(7)
    bias = rng.standard_normal(n).astype(a.dtype)
    full = rng.standard_normal((m, n)).astype(a.dtype)
    cases = [
        (ops.matmul(a, b, activation=activation), prod),
        (ops.addmm(bias, a, b, activation=activation), prod + bias.astype(F64)),
        (ops.addmm(full, a, b, beta=0.5, alpha=2.0, activation=activation), 2.0 * prod + 0.5 * full.astype(F64)),
    ]
    for got, pre in cases:
        np.testing.assert_allclose(got.astype(F64), _host_activation(pre, activation), rtol=2.0**-7, atol=2e-2)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, consumers=1, bn=128, activation=activation))
    c = np.full((m, n), np.nan, a.dtype)
    kern(a, b, c)
    np.testing.assert_allclose(c.astype(F64), _host_activation(prod, activation), rtol=2.0**-7, atol=2e-2)
    np.testing.assert_allclose(
        ops.addmm(bias, a[:, :0], b[:0], beta=2.0, activation=activation).astype(F64),
        np.broadcast_to(_host_activation(2.0 * bias.astype(F64), activation), (m, n)),
        rtol=2.0**-7,
        atol=1e-2,
    )
    if activation == "relu":
        nan_a = a.copy()
        nan_a[3, 5] = np.nan
        assert np.isnan(ops.matmul(nan_a, b, activation="relu")[3]).all()


def test_epilogue_activation_errors():
    a, b, _ = _mm_inputs(64, 64, 64, "bfloat16")
    with pytest.raises(ValueError, match="activation='tanh'; one of 'relu', 'gelu', 'gelu_tanh', 'silu' or None"):
        ops.matmul(a, b, activation="tanh")


@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
@pytest.mark.parametrize(
    "cfg",
    [
        {"consumers": 1, "bn": 128},
        {"consumers": 2, "bn": 128},
        {"consumers": 3, "bn": 128},
        {"consumers": 2, "bn": 192},
        {"consumers": 2, "bn": 192, "whole_epilogue": True},
        {"consumers": 2, "bn": 208, "whole_epilogue": True},
        {"consumers": 2, "bn": 256, "fast_accum": True},
    ],
)
def test_scaled_mm_matches_float64(dtype, cfg):
    """FP8 GEMM with per-tensor scales (torch._scaled_mm's contract): both operands K-major for
    wgmma (b column-major: its transpose read row by row), each K step promoted into a float32
    accumulator (or, fast_accum, wgmma accumulating all of K), the scales applied in float32, one
    rounding to bfloat16; ragged M and N, three K steps, every element written."""
    m, n, k = 150, 200, 272
    rng = np.random.default_rng(len(dtype) + cfg["bn"])
    f8 = numpy_dtype(dtype)
    a = (rng.standard_normal((m, k)) * 3).astype(f8)
    b = (rng.standard_normal((k, n)) * 3).astype(f8)
    kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype=dtype, ctas=2, out_dtype="bfloat16", **{"fast_accum": False, **cfg}))
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    kern(a, np.ascontiguousarray(b.T), np.array([0.5], np.float32), np.array([0.75], np.float32), c)
    want = a.astype(F64) @ b.astype(F64) * 0.375
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    got = ops.scaled_mm(a, b, np.float32(0.5), np.array([0.75], np.float32), out_dtype="float16", use_fast_accum=cfg.get("fast_accum", False))
    assert got.dtype == np.float16
    np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-10, atol=2.0**-10 * np.abs(want).max() / 64)
    bias = rng.standard_normal(n).astype(np.float16) * 4
    got = ops.scaled_mm(a, b, np.float32(0.5), np.float32(0.75), bias, out_dtype="float16", use_fast_accum=cfg.get("fast_accum", False))
    np.testing.assert_allclose(got.astype(F64), want + bias.astype(F64), rtol=2.0**-10, atol=2.0**-10 * np.abs(want).max() / 64)


@pytest.mark.parametrize(
    "cfg, scales",
    [
        ({"consumers": 1, "bn": 128}, "tensor"),
        ({"consumers": 2, "bn": 64}, "tensor"),
        ({"consumers": 1, "bn": 32}, "tensor"),
        ({"consumers": 2, "bn": 128}, "tensor"),
        ({"consumers": 1, "bn": 128}, "block"),
        ({"consumers": 2, "bn": 128}, "block"),
    ],
)
def test_fp8_promoted_ahead_matches_float64(cfg, scales):
    """FP8 promoted with the next K step in flight during each add (`promote_ahead`): runs of
    four steps into two partials in turn and a tail run of three (K = 784: seven steps, the last
    partial), per-tensor and DeepGEMM's block scales; ragged M and N, every element written; and
    the same bits as the form that waits for each step (the adds in the same order)."""
    m, n, k = 150, 200, 784
    rng = np.random.default_rng(cfg["bn"] + len(scales))
    f8 = numpy_dtype("float8_e4m3fn")
    a = (rng.standard_normal((m, k)) * 2).astype(f8)
    b = (rng.standard_normal((k, n)) * 2).astype(f8)
    if scales == "block":
        sa = rng.uniform(0.5, 2, (m, 7)).astype(np.float32)
        sb = rng.uniform(0.5, 2, (2, 7)).astype(np.float32)
        want = _block_scaled_product(a, b, sa, sb)
    else:
        sa, sb = np.float32([0.5]), np.float32([0.75])
        want = a.astype(F64) @ b.astype(F64) * 0.375
    got = {}
    for ahead in (True, False):
        prim = matmul_module.matmul_kernel.factory(
            m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=2, out_dtype="bfloat16", fast_accum=False, scales=scales, promote_ahead=ahead, **cfg
        )
        got[ahead] = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
        tirx.compile(prim)(a, np.ascontiguousarray(b.T), sa, sb, got[ahead])
    np.testing.assert_allclose(got[True].astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    np.testing.assert_array_equal(got[True].view(np.uint16), got[False].view(np.uint16))


# Mistakes planted in FP8's promoted-ahead pipeline (`matmul_kernel`), each reported by the simulator.
AHEAD_GEMM = (
    "        Tx.warpgroup.gemm_async(now[0:64, 0:bn], A_s[(r * kps + kt) % stages, cw * 64 : cw * 64 + 64, 0:bk], "
    "B_s[(r * kps + kt) % stages, 0:bn, 0:bk], accum=False)\n"
)
AHEAD_PROMOTE = (
    "        promoted(acc, done)\n"
)
AHEAD_FREE = (
    "        if tid % 128 == 0:\n            empty.arrive((r * kps + kt) % stages)\n"
    "            if mc:  # (in the peer too, at CTA scope: `mma_step`'s)\n"
    '                empty.arrive((r * kps + kt) % stages, cta_id=1 - rank, scope="cta")\n'
)
AHEAD_PLANTED = {
    # the step before read while both steps' wgmmas may still run
    "wait": (
        "                fetch_scales(1, r, bx, k0 + j, cw)\n                T.ptx.wgmma.wait_group(1)",
        "                fetch_scales(1, r, bx, k0 + j, cw)\n                T.ptx.wgmma.wait_group(2)",
        "reads register `part[0]` while the wgmma.mma_async that accumulates into it has not been waited for",
    ),
    # a run's first partial cleared after its wgmma is issued
    "fill": (
        "        Tx.warpgroup.fill(part[0:64, 0:bn], 0.0)\n        issue_step(part, r, k0, cw)",
        "        issue_step(part, r, k0, cw)\n        Tx.warpgroup.fill(part[0:64, 0:bn], 0.0)",
        "writes register `part[0]` while the wgmma.mma_async that accumulates into it has not been waited for",
    ),
    # a stage freed as its wgmma is issued, not once it is waited for: the producer's refill races its reads
    "free": (
        AHEAD_GEMM + "\n    @T.macro(hygienic=False)\n    def promote_step(done, r, kt):\n"
        "        # Step kt's product (``done``, waited for; its scales in srow) promoted, its stage freed.\n" + AHEAD_PROMOTE + AHEAD_FREE,
        AHEAD_GEMM + AHEAD_FREE + "\n    @T.macro(hygienic=False)\n    def promote_step(done, r, kt):\n"
        "        # Step kt's product (``done``, waited for; its scales in srow) promoted, its stage freed.\n" + AHEAD_PROMOTE,
        "data race",
    ),
}


@pytest.mark.parametrize("mistake", sorted(AHEAD_PLANTED))
def test_promote_ahead_planted_mistakes_are_reported(mistake, tmp_path):
    """FP8 promoted ahead with a mistake planted in its source (40 K steps: the ring of stages
    wraps): a partial read before its wait, a partial cleared after its wgmma is issued, a stage
    freed before its wgmma is waited for; each an error of the simulator."""
    import planting

    old, new, words = AHEAD_PLANTED[mistake]
    planted = planting.planted(matmul_module, old, new, tmp_path)
    m, n, k = 130, 64, 128 * 40
    rng = np.random.default_rng(0)
    f8 = numpy_dtype("float8_e4m3fn")
    a, bt = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((n, k)).astype(f8)
    prim = planted.matmul_kernel.factory(
        m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=2, consumers=1, bn=64, out_dtype="bfloat16", fast_accum=False, promote_ahead=True
    )
    c = np.zeros((m, n), numpy_dtype("bfloat16"))
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        tirx.compile(prim, "sm_90a")(a, bt, np.float32([1]), np.float32([1]), c)


def test_promote_ahead_errors():
    with pytest.raises(ValueError, match=r"promote_ahead: FP8 promoted to float32 \(fast_accum=False\)"):
        matmul_module.matmul_kernel.factory(m=64, n=64, k=64, dtype="bfloat16", ctas=2, consumers=1, bn=64, promote_ahead=True)
    with pytest.raises(ValueError, match=r"registers \(bn=128, consumers=3: 232 with addresses and the loop, 160 a thread\)"):
        matmul_module.matmul_kernel.factory(
            m=192, n=128, k=128, dtype="float8_e4m3fn", ctas=2, consumers=3, bn=128, out_dtype="bfloat16", fast_accum=False, promote_ahead=True
        )
    assert matmul_module.promote_fits(2, 128, partials=2) and matmul_module.promote_fits(3, 64, partials=2) and not matmul_module.promote_fits(3, 128, partials=2)


def test_promoted_tiles_fit_the_registers():
    """FP8 promoted to float32 takes any tile whose accumulator and partial fit a consumer's
    registers (128 x 192 over two consumers a candidate at every shape and with every form of
    scales; 128 x 208 not with block scales) and refuses the rest, saying what they need."""
    with pytest.raises(ValueError, match=r"fast_accum=False: a step's partial beside the accumulator in a consumer's registers \(bn=256, consumers=2: 288"):
        matmul_module.matmul_kernel.factory(m=128, n=256, k=128, dtype="float8_e4m3fn", ctas=2, consumers=2, bn=256, out_dtype="bfloat16", fast_accum=False)
    assert matmul_module.promote_fits(2, 192) and matmul_module.promote_fits(3, 128) and not matmul_module.promote_fits(3, 192)
    fp8 = dict(dtype="float8_e4m3fn", fast_accum=False)
    for scales, wider in (("tensor", True), ("row", True), ("block", False)):
        picked = matmul_module._prune(matmul_module.CONFIGS, 8192, 8192, 8192, scales=scales, **fp8)
        assert {"consumers": 2, "bn": 192, "whole_epilogue": True} in picked, scales  # (block scales: three runs of 64 columns)
        assert ({"consumers": 2, "bn": 208, "whole_epilogue": True} in picked) == wider, scales
        assert all(matmul_module.promote_fits(c["consumers"], c["bn"]) for c in picked)
    small = matmul_module._prune(matmul_module.CONFIGS, 300, 1000, 1024, scales="block", **fp8)  # (one round of 192-column tiles)
    assert small and all(c["bn"] in (128, 192) for c in small)
    with pytest.raises(ValueError, match=r"'block' with FP8 operands promoted \(fast_accum=False\) in tiles of 128 or 192 columns"):
        matmul_module.matmul_kernel.factory(m=128, n=256, k=128, dtype="float8_e4m3fn", ctas=2, consumers=2, bn=208, out_dtype="bfloat16", fast_accum=False, scales="block")
    assert not any(c.get("whole_epilogue") for c in matmul_module._prune(matmul_module.CONFIGS, 8192, 8192, 8192, dtype="bfloat16"))
    assert not any(c.get("whole_epilogue") for c in matmul_module._prune(matmul_module.CONFIGS, 8192, 8192, 8192, dtype="float8_e4m3fn", fast_accum=True))


# Mistakes planted in the whole-tile epilogue (`matmul_kernel`'s ``whole_epilogue``), each reported by the simulator.
WHOLE_EPILOGUE_MISTAKES = {
    # the tile before's stores not waited for: the next tile's epilogue writes C_s under their reads
    "no_wait": (
        "            if h == 0 or buffers == 1:\n                if tid % 128 == 0:\n"
        "                    T.ptx.cp_async.bulk.wait_group_read(0)  # the last stores have read C_s[cw]\n",
        "            if h == 0 or buffers == 1:\n",
    ),
    # the stores issued without the barrier after the buffers' writes: thread 0's TMA reads what other threads still write
    "no_barrier": (
        "        T.ptx.fence.proxy.async_.shared__cta()\n        T.ptx.bar.sync(EPILOGUE_BARRIER + cw, 128)\n        if tid % 128 == 0:\n            for h in hs:\n",
        "        T.ptx.fence.proxy.async_.shared__cta()\n        if tid % 128 == 0:\n            for h in hs:\n",
    ),
}


@pytest.mark.parametrize("mistake", sorted(WHOLE_EPILOGUE_MISTAKES))
def test_whole_epilogue_planted_mistakes_are_reported(mistake, tmp_path):
    """The whole-tile epilogue with a mistake planted in its source (a CTA walking several tiles):
    no wait for the tile before's stores, or the stores issued without the barrier after the
    buffers' writes; each a data race the simulator reports."""
    import planting

    old, new = WHOLE_EPILOGUE_MISTAKES[mistake]
    planted = planting.planted(matmul_module, old, new, tmp_path)
    m, n, k = 150, 384, 128
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype(numpy_dtype("bfloat16"))
    b = rng.standard_normal((k, n)).astype(numpy_dtype("bfloat16"))
    kern = tirx.compile(planted.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, consumers=1, bn=192, whole_epilogue=True))
    with pytest.raises(tirx.TirxError, match="data race"):
        kern(a, b, np.zeros((m, n), a.dtype))


@pytest.mark.parametrize("cfg", [{"consumers": 2, "bn": 256}, {"consumers": 1, "bn": 192}, {"consumers": 2, "bn": 96}], ids=str)
def test_whole_epilogue_matches_one_buffer(cfg):
    """``whole_epilogue``: each epilogue store a buffer of its own, all written before the stores are
    issued (one wait for the last tile's stores a tile): the same bits as one buffer waited for
    before each store is written, over two CTAs walking several tiles, ragged M, N (boxes per
    swizzle atom) and K."""
    m, n, k = 150, 296, 200
    rng = np.random.default_rng(cfg["bn"])
    a = rng.standard_normal((m, k)).astype(numpy_dtype("bfloat16"))
    b = rng.standard_normal((k, n)).astype(numpy_dtype("bfloat16"))
    got = {}
    for whole in (True, False):
        got[whole] = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
        tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=2, whole_epilogue=whole, **cfg))(a, b, got[whole])
    want = a.astype(F64) @ b.astype(F64)
    np.testing.assert_allclose(got[True].astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    np.testing.assert_array_equal(got[True].view(np.uint16), got[False].view(np.uint16))


@pytest.mark.parametrize("cfg", [{"consumers": 1}, {"consumers": 2}, {"consumers": 3}])
def test_block_scaled_mm_matches_float64(cfg):
    """DeepGEMM's FP8 recipe: a scale per row and 128 of K for a, per 128 x 128 block for b,
    applied to each K step's partial as it is promoted to the float32 accumulator; ragged M, N
    and K (the last K step partial, its scales' block still counted)."""
    m, n, k = 150, 200, 272
    rng = np.random.default_rng(cfg["consumers"])
    f8 = numpy_dtype("float8_e4m3fn")
    a = (rng.standard_normal((m, k)) * 2).astype(f8)
    b = (rng.standard_normal((k, n)) * 2).astype(f8)
    kb, nb = 3, 2
    sa = rng.uniform(0.5, 2, (m, kb)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (nb, kb)).astype(np.float32)
    want = _block_scaled_product(a, b, sa, sb)
    kern = tirx.compile(
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=2, bn=128, out_dtype="bfloat16", fast_accum=False, scales="block", **cfg)
    )
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    kern(a, np.ascontiguousarray(b.T), sa, sb, c)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    got = ops.scaled_mm(a, b, sa, sb, out_dtype="bfloat16")
    np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    with pytest.raises(ValueError, match="block scales apply as each 128 of K is promoted: use_fast_accum=False"):
        ops.scaled_mm(a, b, sa, sb, out_dtype="bfloat16", use_fast_accum=True)
    with pytest.raises(ValueError, match=r"or DeepGEMM's blocks: scale_a \(150, 3\)"):
        ops.scaled_mm(a, b, sa[:, :2], sb, out_dtype="bfloat16")


@pytest.mark.parametrize(
    "cfg, ctas",
    [({"consumers": 2, "bn": 192, "whole_epilogue": True}, 2), ({"consumers": 2, "bn": 192}, 3), ({"consumers": 1, "bn": 192}, 2)],
    ids=str,
)
def test_block_scales_in_192_column_tiles(cfg, ctas):
    """DeepGEMM's block scales in tiles of 192 columns: each run of 64 columns inside one block of
    B's scales, times its own (tiles starting on a block and half-way into one, the last tile's
    runs past N reading the last block's, never stored), as each K step is promoted; the same
    bits as 128-column tiles and within bf16's rounding of the dequantised float64 product."""
    m, n, k = 150, 440, 400
    rng = np.random.default_rng(ctas)
    f8 = numpy_dtype("float8_e4m3fn")
    a = (rng.standard_normal((m, k)) * 2).astype(f8)
    b = (rng.standard_normal((k, n)) * 2).astype(f8)
    kb, nb = -(-k // 128), -(-n // 128)
    sa = rng.uniform(0.5, 2, (m, kb)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (nb, kb)).astype(np.float32)
    want = _block_scaled_product(a, b, sa, sb)
    got = {}
    for c in (cfg, {"consumers": 1, "bn": 128}):
        prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=ctas, out_dtype="bfloat16", fast_accum=False, scales="block", **c)
        got[str(c)] = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
        tirx.compile(prim)(a, np.ascontiguousarray(b.T), sa, sb, got[str(c)])
    wide = got[str(cfg)]
    np.testing.assert_allclose(wide.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    np.testing.assert_array_equal(wide.view(np.uint16), got[str({"consumers": 1, "bn": 128})].view(np.uint16))


@pytest.mark.parametrize(
    "cfg",
    [
        {"consumers": 1, "bn": 128, "fast_accum": False},
        {"consumers": 2, "bn": 192, "fast_accum": False, "whole_epilogue": True},
        {"consumers": 2, "bn": 256, "fast_accum": True},
        {"consumers": 2, "bn": 128, "fast_accum": True, "pingpong": True},
    ],
    ids=str,
)
def test_rowwise_scaled_mm_matches_float64(cfg):
    """torch._scaled_mm's row-wise scales (`scales="row"`): ``(a @ b) * scale_a * scale_b`` with
    scale_a (m, 1) per row of a and scale_b (1, n) per column of b, applied in float32 in the
    epilogue (split-K: in the finishing kernel); ragged M, N and K (the scales past M and N never
    read into a stored element), the bias row after them, and the op's form and refusals."""
    m, n, k = 150, 200, 272
    rng = np.random.default_rng(7)
    f8 = numpy_dtype("float8_e4m3fn")
    a = (rng.standard_normal((m, k)) * 2).astype(f8)
    b = (rng.standard_normal((k, n)) * 2).astype(f8)
    sa = rng.uniform(0.5, 2, (m, 1)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (1, n)).astype(np.float32)
    want = (a.astype(F64) @ b.astype(F64)) * sa * sb
    tol = dict(rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=3, out_dtype="bfloat16", scales="row", **cfg)
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a, np.ascontiguousarray(b.T), sa, sb, c)
    np.testing.assert_allclose(c.astype(F64), want, **tol)
    if cfg.get("pingpong"):
        return
    got = ops.scaled_mm(a, b, sa, sb, out_dtype="bfloat16", use_fast_accum=cfg["fast_accum"])
    np.testing.assert_allclose(got.astype(F64), want, **tol)
    bias = rng.standard_normal(n).astype(numpy_dtype("bfloat16"))
    got = ops.scaled_mm(a, b, sa, sb, bias, out_dtype="bfloat16", use_fast_accum=cfg["fast_accum"])
    np.testing.assert_allclose(got.astype(F64), want + bias.astype(F64), **tol)
    got = ops.scaled_mm(a, b, sa, sb, bias, out_dtype="bfloat16", use_fast_accum=cfg["fast_accum"], split_k=3)  # (scaled by the finishing kernel)
    np.testing.assert_allclose(got.astype(F64), want + bias.astype(F64), **tol)
    with pytest.raises(ValueError, match=r"row-wise \(scale_a \(150, 1\) a row of a, scale_b \(1, 200\)"):
        ops.scaled_mm(a, b, sa, sb.T, out_dtype="bfloat16")
    with pytest.raises(ValueError, match="scales='row'"):
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=3, consumers=2, bn=128, scales="row")


@pytest.mark.parametrize("cluster_k", [2, 4])
def test_rowwise_scales_over_a_cluster_match_float64(cluster_k):
    """Row-wise scales where K is split over a cluster's CTAs (decode's M): the first CTA sums the
    parts, then scales each row and column in its epilogue."""
    m, n, k = 16, 256, 1024
    rng = np.random.default_rng(cluster_k)
    f8 = numpy_dtype("float8_e4m3fn")
    a, b = rng.standard_normal((m, k)).astype(f8), rng.standard_normal((k, n)).astype(f8)
    sa, sb = rng.uniform(0.5, 2, (m, 1)).astype(np.float32), rng.uniform(0.5, 2, (1, n)).astype(np.float32)
    prim = matmul_module.matmul_kernel.factory(
        m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=8, consumers=1, bn=128, out_dtype="bfloat16", fast_accum=cluster_k == 4, scales="row", cluster_k=cluster_k
    )
    c = np.full((m, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a, np.ascontiguousarray(b.T), sa, sb, c, np.zeros((cluster_k - 1, m, n), np.float32))
    want = (a.astype(F64) @ b.astype(F64)) * sa * sb
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)


@pytest.mark.parametrize("types", [("float8_e4m3fn", "float8_e5m2"), ("float8_e5m2", "float8_e4m3fn"), ("float8_e5m2", "float8_e5m2")], ids=str)
def test_mixed_fp8_scaled_mm_matches_float64(types):
    """FP8 operands of two types (e4m3 times e5m2, as a backward pass's gradients meet the
    weights; wgmma mixes them: `matmul_kernel`'s ``b_dtype``), per-tensor and row-wise scales,
    promoted and fast accumulation, over a cluster's CTAs too; a 16-bit A with an FP8 B refused."""
    ta, tb = types
    m, n, k = 150, 200, 272
    rng = np.random.default_rng(11)
    a = rng.standard_normal((m, k)).astype(numpy_dtype(ta))
    b = rng.standard_normal((k, n)).astype(numpy_dtype(tb))
    exact = a.astype(F64) @ b.astype(F64)
    sa, sb = rng.uniform(0.5, 2, (m, 1)).astype(np.float32), rng.uniform(0.5, 2, (1, n)).astype(np.float32)
    for scales, fast, want in (((np.float32(0.5), np.float32(2.0)), False, exact), ((sa, sb), True, exact * sa * sb)):
        got = ops.scaled_mm(a, b, *scales, out_dtype="bfloat16", use_fast_accum=fast)
        np.testing.assert_allclose(got.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    prim = matmul_module.matmul_kernel.factory(
        m=16, n=n, k=1024, dtype=ta, b_dtype=tb, ctas=8, consumers=1, bn=128, out_dtype="bfloat16", fast_accum=False, cluster_k=2
    )
    a16, b16 = a[:16].repeat(4, axis=1)[:, :1024], b.repeat(4, axis=0)[:1024]
    c = np.full((16, n), np.nan, numpy_dtype("bfloat16"))
    tirx.compile(prim)(a16, np.ascontiguousarray(b16.T), np.float32([1.0]), np.float32([1.0]), c, np.zeros((1, 16, n), np.float32))
    want = a16.astype(F64) @ b16.astype(F64)
    np.testing.assert_allclose(c.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 64)
    with pytest.raises(ValueError, match="b_dtype='float8_e5m2' with bfloat16 A"):
        matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", b_dtype="float8_e5m2", ctas=3, consumers=2, bn=128)


def test_rowwise_scaled_mm_on_tensors_against_torch():
    """Row-wise scales on torch tensors, e4m3 and e5m2 times e4m3 (CPU: the simulator; CUDA:
    beside torch._scaled_mm's own row-wise product, no further from the float64 one) and under
    torch.compile."""
    torch = pytest.importorskip("torch")
    sys.modules["tirx.ops.matmul"].register_scaled_mm_torch_op()
    for dev in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        m, n, k = (128, 136, 128) if dev == "cpu" else (4000, 784, 528)
        x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major (k x n)
        sa, sb = torch.rand(m, 1, device=dev) + 0.5, torch.rand(1, n, device=dev) + 0.5
        for a in (x, x.to(torch.float8_e5m2)):  # (then e5m2 times e4m3: a gradient meeting the weights)
            exact = (a.double() @ w.double()) * sa.double() * sb.double()
            got = ops.scaled_mm(a, w, sa, sb, out_dtype=torch.bfloat16)
            if dev == "cpu":
                torch.testing.assert_close(got, exact.to(torch.bfloat16), rtol=2**-7, atol=5e-2)
            else:
                theirs = torch._scaled_mm(a, w, sa, sb, out_dtype=torch.bfloat16)
                ours_err, their_err = ((t.double() - exact).abs().max().item() for t in (got, theirs))
                assert ours_err <= max(their_err, 5e-2), (ours_err, their_err)
        f = torch.compile(lambda x, w: ops.scaled_mm(x, w, sa, sb, out_dtype=torch.bfloat16) * 2, fullgraph=True)
        torch.testing.assert_close(f(x, w), ops.scaled_mm(x, w, sa, sb, out_dtype=torch.bfloat16) * 2)


def test_scaled_mm_errors_and_torch():
    f8 = numpy_dtype("float8_e4m3fn")
    a, b = np.zeros((32, 64), f8), np.zeros((64, 48), f8)
    one = np.float32(1.0)
    with pytest.raises(TypeError, match="give out_dtype"):
        ops.scaled_mm(a, b, one, one)
    with pytest.raises(TypeError, match="a is float8_e4m3fn, b bfloat16"):
        ops.scaled_mm(a, b.astype(numpy_dtype("bfloat16")), one, one, out_dtype="bfloat16")
    with pytest.raises(ValueError, match=r"scale_a of shape \[2\] \(float32\), scale_b \[\] \(float32\); float32, per tensor"):
        ops.scaled_mm(a, b, np.ones(2, np.float32), one, out_dtype="bfloat16")
    with pytest.raises(ValueError, match="K a multiple of 16"):
        ops.scaled_mm(a[:, :40], b[:40], one, one, out_dtype="bfloat16")
    torch = pytest.importorskip("torch")
    sys.modules["tirx.ops.matmul"].register_scaled_mm_torch_op()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        m, n, k = (128, 128, 128) if dev == "cpu" else (4000, 776, 528)
        x = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major (k x n)
        sa, sb = torch.tensor(0.5, device=dev), torch.tensor(2.0, device=dev)
        with pytest.raises(ValueError, match="b must be column-major"):
            ops.scaled_mm(x, w.contiguous(), sa, sb, out_dtype=torch.bfloat16)
        exact = x.double() @ w.double()  # (scale_a * scale_b = 1)
        got = ops.scaled_mm(x, w, sa, sb, out_dtype=torch.bfloat16)
        if dev == "cpu":  # the simulator adds the products in float32
            torch.testing.assert_close(got, exact.to(torch.bfloat16), rtol=2**-7, atol=2e-2)
        else:  # the tensor cores add FP8 products in less than float32 within a 128-K block, as for
            # PyTorch's own FP8 GEMM (cuBLASLt, on the columns it takes: N a multiple of 16): no
            # further from the exact product
            theirs = torch._scaled_mm(x, w[:, : n // 16 * 16], sa, sb, out_dtype=torch.bfloat16)
            ours_err = (got.double() - exact).abs().max().item()
            their_err = (theirs.double() - exact[:, : n // 16 * 16]).abs().max().item()
            assert ours_err <= max(their_err, 2e-2), (ours_err, their_err)
        f = torch.compile(lambda x, w: ops.scaled_mm(x, w, sa, sb, out_dtype=torch.bfloat16) * 2, fullgraph=True)
        torch.testing.assert_close(f(x, w), got * 2)
        # DeepGEMM's block scales on tensors: against the dequantised product
        kb, nb = -(-k // 128), -(-n // 128)
        sa_b, sb_b = torch.rand(m, kb, device=dev) + 0.5, torch.rand(nb, kb, device=dev) + 0.5
        deq_x = x.double() * sa_b.double().repeat_interleave(128, 1)[:, :k]
        deq_w = w.double() * sb_b.double().t().repeat_interleave(128, 0).repeat_interleave(128, 1)[:k, :n]
        want = (deq_x @ deq_w).to(torch.bfloat16)
        torch.testing.assert_close(ops.scaled_mm(x, w, sa_b, sb_b, out_dtype=torch.bfloat16), want, rtol=2**-7, atol=0.1)
        bias = torch.randn(n, device=dev, dtype=torch.bfloat16)
        want = (x.double() @ w.double() + bias.double()).to(torch.bfloat16)
        torch.testing.assert_close(ops.scaled_mm(x, w, sa, sb, bias, out_dtype=torch.bfloat16), want, rtol=2**-7, atol=0.1)
        with pytest.raises(ValueError, match="bias of shape"):
            ops.scaled_mm(x, w, sa, sb, bias.float(), out_dtype=torch.bfloat16)


def test_addmm_on_torch_tensors_and_under_compile():
    torch = pytest.importorskip("torch")
    sys.modules["tirx.ops.matmul"].register_addmm_torch_op()  # (tirx.ops may have been imported before torch)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        m, n, k = (128, 256, 128) if dev == "cpu" else (4000, 776, 520)
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        bias = torch.randn(n, device=dev, dtype=torch.bfloat16)
        want = (bias.double() + a.double() @ b.double()).to(torch.bfloat16)
        torch.testing.assert_close(ops.addmm(bias, a, b), want, rtol=2**-7, atol=2e-2)
        f = torch.compile(lambda bias, a, b: ops.addmm(bias, a, b) * 2, fullgraph=True)
        torch.testing.assert_close(f(bias, a, b), ops.addmm(bias, a, b) * 2)
        # a fused activation, directly and traced
        want = torch.nn.functional.gelu(bias.double() + a.double() @ b.double(), approximate="tanh").to(torch.bfloat16)
        torch.testing.assert_close(ops.addmm(bias, a, b, activation="gelu_tanh"), want, rtol=2**-7, atol=2e-2)
        f = torch.compile(lambda bias, a, b: ops.addmm(bias, a, b, activation="silu") * 2, fullgraph=True)
        torch.testing.assert_close(f(bias, a, b), ops.addmm(bias, a, b, activation="silu") * 2)


def test_matmul_on_torch_tensors_and_under_compile():
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        m, n, k = (128, 256, 128) if dev == "cpu" else (4000, 776, 520)  # ragged on the GPU
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        want = (a.double() @ b.double()).to(torch.bfloat16)
        torch.testing.assert_close(ops.matmul(a, b), want, rtol=2**-7, atol=1e-2)
        # transposed views (column-major) read in place
        torch.testing.assert_close(ops.matmul(a.t().contiguous().t(), b.t().contiguous().t()), ops.matmul(a, b), rtol=0, atol=0)
        f = torch.compile(lambda a, b: ops.matmul(a, b) * 2, fullgraph=True)
        torch.testing.assert_close(f(a, b), ops.matmul(a, b) * 2)


def _on_the_gpu():
    """(torch, the GPU's SMs) for a GPU test (skipped without torch or a GPU), torch's seed set."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    return torch, torch.cuda.get_device_properties(0).multi_processor_count


def _gpu_product(torch, m, n, k):
    """bf16 operands of an m x n x k product on the GPU, their float64 product, and the error a
    design may make: cuBLAS's (torch.mm) on the same inputs + one bf16 rounding of the product."""
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
    exact = a.double() @ b.double()
    return a, b, exact, (torch.mm(a, b).double() - exact).abs().max().item() + 2.0**-7 * exact.abs().max().item()


def test_pingpong_and_multicast_designs_on_the_gpu_against_torch():
    """The designs not yet among the autotuner's candidates, launched as themselves on the GPU
    (`matmul_kernel`'s ``pingpong`` and ``multicast=2``) at a square, an LLM shape and ragged ones,
    against torch.mm: no further from the float64 product than cuBLAS's result (+ one bf16
    rounding of it), every element written (C poisoned with NaN)."""
    torch, ctas = _on_the_gpu()
    for m, n, k in [(4096, 4096, 4096), (1000, 3000, 2048), (100, 12344, 4096), (777, 1232, 4096)]:
        a, b, exact, bound = _gpu_product(torch, m, n, k)
        designs = [{"consumers": 2, "bn": 256, "pingpong": True}, {"consumers": 2, "bn": 128, "pingpong": True}]
        designs += [{"consumers": 2, "bn": bn, "multicast": 2} for bn in (128, 192, 256)]
        designs += [{"consumers": 2, "bn": bn, "multicast": 2, "multicast_b": True} for bn in (128, 192)]
        for design in designs:
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, **design))(a, b, c)
            assert (c.double() - exact).abs().max().item() <= bound, (m, n, k, design)


def test_units_spread_over_the_grid_on_the_gpu_against_torch():
    """Shapes of fewer tiles than SMs, their tiles on CTAs spread over the grid (the default) and on
    its first CTAs, against torch.mm: no further from the float64 product than cuBLAS's result
    (+ one bf16 rounding of it), every element written (C poisoned with NaN), both the same."""
    torch, ctas = _on_the_gpu()
    cases = [
        ((100, 12344, 4096), {"consumers": 2, "bn": 128}),
        ((777, 1232, 4096), {"consumers": 2, "bn": 96}),
        ((128, 22016, 4096), {"consumers": 2, "bn": 192}),
        ((16, 12288, 4096), {"consumers": 1, "bn": 96}),
        ((100, 12344, 4096), {"consumers": 2, "bn": 128, "multicast": 2}),
        ((1000, 3000, 2048), {"consumers": 2, "bn": 192, "multicast": 2}),
    ]
    for (m, n, k), design in cases:
        a, b, exact, bound = _gpu_product(torch, m, n, k)
        outs = []
        for spread in (True, False):
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, spread_units=spread, **design))(a, b, c)
            assert (c.double() - exact).abs().max().item() <= bound, (m, n, k, design, spread)
            outs.append(c)
        assert torch.equal(outs[0], outs[1]), (m, n, k, design)


def test_cluster_split_in_rounds_on_the_gpu_against_torch():
    """K over a cluster's CTAs in several rounds (not the autotuner's candidates: measured
    slower, `cluster_fits`), launched as themselves at ragged and decode shapes on all SMs,
    against torch.mm: no further from the float64 product than cuBLAS's result
    (+ one bf16 rounding of it), every element written (C and the workspace poisoned with NaN)."""
    torch, ctas = _on_the_gpu()
    cases = [
        ((100, 12344, 4096), {"consumers": 1, "bn": 128, "cluster_k": 2}),
        ((1000, 3000, 2048), {"consumers": 2, "bn": 128, "cluster_k": 2}),
        ((777, 1232, 4096), {"consumers": 2, "bn": 64, "cluster_k": 4}),
        ((777, 1232, 4096), {"consumers": 1, "bn": 96, "cluster_k": 2}),
        ((1, 4096, 4096), {"consumers": 1, "bn": 128, "cluster_k": 4}),
    ]
    for (m, n, k), design in cases:
        a, b, exact, bound = _gpu_product(torch, m, n, k)
        kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, **design))
        parts = design["cluster_k"]
        assert kern.meta["grid"][0] < -(-m // (64 * design["consumers"])) * -(-n // design["bn"]) * parts  # (rounds)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        kern(a, b, c, torch.full((parts - 1, m, n), float("nan"), device="cuda"))
        assert (c.double() - exact).abs().max().item() <= bound, (m, n, k, design)


def test_stream_k_on_the_gpu_against_torch():
    """Stream-K (a cooperative grid of all SMs, the K steps shared out evenly) at the ragged and
    decode shapes it is for, launched as itself (`_with_workspace`: its workspace and barrier
    word, reused across launches) twice each, against torch.mm: no further from the float64
    product than cuBLAS's result (+ one bf16 rounding of it), every element written."""
    torch, ctas = _on_the_gpu()
    cases = [
        ((100, 12344, 4096), {"consumers": 2, "bn": 128}),
        ((1000, 3000, 2048), {"consumers": 2, "bn": 256}),
        ((777, 1232, 4096), {"consumers": 2, "bn": 128}),
        ((16, 4096, 4096), {"consumers": 1, "bn": 128}),
        ((3000, 5000, 1000), {"consumers": 2, "bn": 256}),
    ]
    for (m, n, k), design in cases:
        a, b, exact, bound = _gpu_product(torch, m, n, k)
        kern = tirx.compile(matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="bfloat16", ctas=ctas, stream_k=True, **design))
        for _ in range(2):
            c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            kern(*matmul_module._with_workspace(kern, (a, b, c)))
            assert (c.double() - exact).abs().max().item() <= bound, (m, n, k, design)


def test_split_k_on_the_gpu_against_torch():
    """Skinny and small shapes with ``split_k`` (each part's sums in its slice of the workspace,
    then the finish kernel's ordered sum), and without it (the autotuner's choice, the skinny
    tiles' A boxes of M's rows only), against torch.mm / addmm / _scaled_mm on the GPU: no
    further from the float64 product than cuBLAS's result (+ one bf16 rounding of it)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    for (m, n, k), s in zip([(1, 4096, 4096), (16, 11008, 4096), (100, 1000, 8192), (512, 512, 8192)], (4, 2, 8, 4)):
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
        bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        col = torch.randn(m, 1, device="cuda", dtype=torch.bfloat16)
        exact = a.double() @ b.double()
        for got, theirs, want in [
            (ops.matmul(a, b, split_k=s), torch.mm(a, b), exact),
            (ops.matmul(a, b), torch.mm(a, b), exact),
            (ops.addmm(bias, a, b), torch.addmm(bias, a, b), exact + bias.double()),
            (ops.addmm(col, a, b), torch.addmm(col, a, b), exact + col.double()),
            (ops.addmm(col, a, b, split_k=s), torch.addmm(col, a, b), exact + col.double()),
            (ops.addmm(bias, a, b, activation="relu", split_k=s), torch.relu(torch.addmm(bias, a, b)), torch.relu(exact + bias.double())),
        ]:
            bound = (theirs.double() - want).abs().max().item() + 2.0**-7 * want.abs().max().item()
            assert (got.double() - want).abs().max().item() <= bound, (m, n, k)
        a8 = (torch.randn(m, k, device="cuda") / 2).to(torch.float8_e4m3fn)
        b8 = (torch.randn(n, k, device="cuda") / 2).to(torch.float8_e4m3fn).t()
        one = torch.tensor(1.0, device="cuda")
        want = a8.double() @ b8.double()
        for got in (ops.scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16, split_k=2), ops.scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)):
            if n % 16 == 0:  # (cuBLASLt's FP8 wants N a multiple of 16)
                theirs = torch._scaled_mm(a8, b8, one, one, out_dtype=torch.bfloat16)
                bound = (theirs.double() - want).abs().max().item() + 2.0**-7 * want.abs().max().item()
                assert (got.double() - want).abs().max().item() <= bound, (m, n, k)


def test_a_known_signature_goes_straight_to_its_plan_only_in_plain_eager_calls():
    """`matmul`'s fast path (an eager call of a signature met before, without out_dtype,
    activation or split_k, straight to the plan): each call's own product; a call of the same
    signature that autograd records, or with out_dtype or split_k, takes its own path."""
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    a, b = torch.randn(70, 136).bfloat16(), torch.randn(136, 200).bfloat16()
    a2 = torch.randn(70, 136).bfloat16()
    first, second = ops.matmul(a, b), ops.matmul(a2, b)
    for x, got in ((a, first), (a2, second)):
        want = x.double() @ b.double()
        torch.testing.assert_close(got.double(), want, rtol=2.0**-8, atol=1e-3)
    assert torch.equal(ops.matmul(a, b), first)
    g = a.clone().requires_grad_()
    y = ops.matmul(g, b)
    assert y.grad_fn is not None and torch.equal(y.detach(), first)
    y.sum().backward()
    torch.testing.assert_close(g.grad.double(), b.double().sum(1).expand(70, 136), rtol=2.0**-7, atol=1e-2)
    f32 = ops.matmul(a, b, out_dtype=torch.float32)
    assert f32.dtype == torch.float32
    torch.testing.assert_close(f32.double(), a.double() @ b.double(), rtol=1e-6, atol=1e-5)
    assert torch.equal(ops.matmul(a, b, split_k=1), first)


def test_a_plans_later_calls_launch_on_their_own_tensors_on_the_gpu():
    """A plan's calls after its first launch from their tensors' pointers, unchecked
    (`Kernel.launcher(fixed_signature=True)`): each call of one signature with new operands, on
    another stream and in a CUDA graph, through one tile, K split over a cluster, split-K's two
    kernels, addmm's bias and FP8's scales, gets its own product (bit-equal to the first call's
    design on the same operands)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    half, two = torch.tensor(0.5, device="cuda"), torch.tensor(2.0, device="cuda")
    calls = {
        "one tile": lambda a, b, bias: ops.matmul(a, b),
        "split-K": lambda a, b, bias: ops.matmul(a, b, split_k=2),
        "addmm": lambda a, b, bias: ops.addmm(bias, a, b),
        "scaled_mm": lambda a, b, bias: ops.scaled_mm(
            a.to(torch.float8_e4m3fn), b.t().contiguous().t().to(torch.float8_e4m3fn), half, two, out_dtype=torch.bfloat16
        ),
    }
    for m, n, k in [(256, 384, 512), (16, 1024, 4096)]:  # (the second: K over a cluster's CTAs where the tuner takes it)
        inputs = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16), torch.randn(k, n, device="cuda", dtype=torch.bfloat16), torch.randn(n, device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
        for name, f in calls.items():
            first = [f(*x) for x in inputs]  # (the first call of the signature checked, the later ones not)
            again = [f(*x) for x in reversed(inputs)][::-1]
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                on_side = [f(*x) for x in inputs]
            torch.cuda.current_stream().wait_stream(side)
            g, static = torch.cuda.CUDAGraph(), [tuple(t.clone() for t in x) for x in inputs[:1]]
            with torch.cuda.graph(g):
                captured = f(*static[0])
            for t, x in zip(static[0], inputs[2]):
                t.copy_(x)
            g.replay()
            for i, x in enumerate(inputs):
                a, b, bias = x
                want = a.double() @ b.double() + (bias.double() if name == "addmm" else 0)
                assert (first[i].double() - want).abs().max().item() <= 2.0**-6 * want.abs().max().item() or name == "scaled_mm", (name, m, i)
                assert torch.equal(again[i], first[i]) and torch.equal(on_side[i], first[i]), (name, m, i)
            assert torch.equal(captured, first[2]), (name, m)


def test_matmul_ranks_and_ragged_backward_on_the_gpu():
    """`torch.matmul`'s ranks (a stack of rows, vectors, broadcast batches) and the backward of
    ragged and single rows (dB = Aᵀ dC with K = 5 or 1: A read transposed) on the GPU, against
    torch.matmul in float64 and no further from it than PyTorch's bf16 result (+ a rounding)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(2)
    for sa, sb in [((5, 4096), (4096, 1024)), ((1, 4096), (4096, 1024)), ((4, 77, 512), (512, 768)), ((1024,), (1024, 256)),
                   ((3, 200, 512), (3, 512, 264)), ((2, 1, 64, 128), (4, 128, 64)), ((256, 128), (128,)), ((77, 128), (128,))]:
        a = torch.randn(sa, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        b = torch.randn(sb, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        ref = [t.detach().double().requires_grad_() for t in (a, b)]
        want = torch.matmul(*ref)
        dc = torch.randn(want.shape, device="cuda", dtype=torch.bfloat16)
        want.backward(dc.double())
        theirs = torch.matmul(a, b)
        theirs.backward(dc)
        their_grads = [t.grad.double() for t in (a, b)]
        a.grad = b.grad = None
        got = ops.matmul(a, b)
        got.backward(dc)
        for mine, cublas, exact in [(got.double(), theirs.double(), want.detach())] + list(zip((a.grad.double(), b.grad.double()), their_grads, (ref[0].grad, ref[1].grad))):
            bound = (cublas - exact).abs().max().item() + 2.0**-7 * exact.abs().max().item()
            assert mine.shape == exact.shape and (mine - exact).abs().max().item() <= bound, (sa, sb)
    # F.linear with a bias: an nn.Linear's weight read in place, a stack of 77 rows
    x = torch.randn(4, 77, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 512, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(768, device="cuda", dtype=torch.bfloat16)
    exact = torch.nn.functional.linear(x.double(), w.double(), bias.double())
    bound = (torch.nn.functional.linear(x, w, bias).double() - exact).abs().max().item() + 2.0**-7 * exact.abs().max().item()
    assert (ops.linear(x, w, bias).double() - exact).abs().max().item() <= bound


def test_mixed_precision_norms_on_the_gpu():
    """Float32 weight and bias beside bfloat16 rows on the GPU (the tuned designs at short, medium
    and cluster-wide rows), forward and backward against float64, no further than PyTorch's own."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    F = torch.nn.functional
    torch.manual_seed(4)
    for rows, h in [(4096, 256), (512, 4096), (64, 65536)]:
        x = torch.randn(rows, h, device="cuda").bfloat16().requires_grad_()
        w = (torch.randn(h, device="cuda") * 0.5 + 1).requires_grad_()
        b = torch.randn(h, device="cuda").requires_grad_()
        g = torch.randn(rows, h, device="cuda").bfloat16()
        # PyTorch's CUDA norms take one dtype: its way is rows in the weight's dtype, rounded back after.
        for ours, theirs, params in [
            (
                lambda x, w, b: ops.layer_norm(x, (h,), w, b),
                lambda x, w, b: F.layer_norm(x.to(w.dtype), (h,), w, b).to(x.dtype),
                (w, b),
            ),
            (
                lambda x, w: ops.rms_norm(x, (h,), w, eps=1e-6),
                lambda x, w: F.rms_norm(x.to(w.dtype), (h,), w, eps=1e-6).to(x.dtype),
                (w,),
            ),
        ]:
            ts = (x,) + params
            results = []
            for fn in (ours, theirs):
                for t in ts:
                    t.grad = None
                y = fn(*ts)
                y.backward(g)
                results.append([y.double()] + [t.grad.double() for t in ts])
            ref = [t.detach().double().requires_grad_() for t in ts]
            want = theirs(*ref)
            want.backward(g.double())
            for mine, pt, exact in zip(*results, [want.detach()] + [r.grad for r in ref]):
                bound = 2 * (pt - exact).abs().max().item() + 2.0**-8 * exact.abs().max().item()
                assert (mine - exact).abs().max().item() <= bound, (rows, h)


def _fp8_gpu_operands(torch, m, n, k, scales):
    """Random e4m3 ``a`` (m x k) and ``bt`` (n x k, K-major) on the GPU and their float32 scales:
    per tensor (0.5, 2.0), or row-wise ((m, 1), (1, n)) or DeepGEMM's blocks, those in [0.5, 1.5)."""
    a = (torch.randn(m, k, device="cuda") / 2).to(torch.float8_e4m3fn)
    bt = (torch.randn(n, k, device="cuda") / 2).to(torch.float8_e4m3fn)
    if scales == "row":
        return a, bt, torch.rand(m, 1, device="cuda") + 0.5, torch.rand(1, n, device="cuda") + 0.5
    if scales == "block":
        return a, bt, torch.rand(m, -(-k // 128), device="cuda") + 0.5, torch.rand(-(-n // 128), -(-k // 128), device="cuda") + 0.5
    return a, bt, torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda")


def test_fp8_promoted_ahead_on_the_gpu():
    """FP8 promoted ahead (the next K step's wgmmas in flight during each float32 add) on the GPU:
    the same bits as the form that waits for each step, per-tensor (ragged, decode and a K of
    several runs) and block-scaled; within cuBLASLt's distance of the float64 product."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    for (m, n, k), scales in [((150, 208, 784), "tensor"), ((16, 4096, 4096), "tensor"), ((128, 1024, 2048), "tensor"), ((256, 1024, 1024), "block")]:
        a, bt, sa, sb = _fp8_gpu_operands(torch, m, n, k, scales)
        for cfg in [{"consumers": 1, "bn": 128}, {"consumers": 2, "bn": 128}, {"consumers": 1, "bn": 32}, {"consumers": 2, "bn": 64}][: 2 if scales == "block" else 4]:
            if cfg["consumers"] * 64 > m:
                continue
            got = {}
            for ahead in (True, False):
                prim = matmul_module.matmul_kernel.factory(
                    m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=132, out_dtype="bfloat16", fast_accum=False, scales=scales, promote_ahead=ahead, **cfg
                )
                got[ahead] = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
                tirx.compile(prim)(a, bt, sa, sb, got[ahead])
            assert torch.equal(got[True], got[False]), (m, n, k, scales, cfg)
            if scales == "tensor":
                want = a.double() @ bt.double().t() * 1.0
                theirs = torch._scaled_mm(a, bt.t(), sa[0], sb[0], out_dtype=torch.bfloat16)
                bound = (theirs.double() - want).abs().max().item() + 2.0**-7 * want.abs().max().item()
                assert (got[True].double() - want).abs().max().item() <= bound, (m, n, k, cfg)


def test_fp8_promoted_wide_tiles_on_the_gpu():
    """FP8 promoted in two consumers' tiles of 192 and 208 columns (`whole_epilogue`), per-tensor,
    row-wise and (192 columns) block scales, on the GPU: the same bits as 128 x 128 tiles promoted
    ahead (the same partials added in the same order), over ragged M and N (several tiles a CTA:
    a grid of 4); ``torch._scaled_mm``'s within its distance of the float64 product (block
    scales: within bf16's rounding of the dequantised product)."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(0)
    for (m, n, k), scales in [((700, 1000, 1024), "tensor"), ((300, 1240, 512), "row"), ((1024, 2048, 2048), "tensor"), ((1000, 1240, 1024), "block")]:
        a, bt, sa, sb = _fp8_gpu_operands(torch, m, n, k, scales)
        got = {}
        cfgs = [{"bn": 128, "promote_ahead": True}, {"bn": 192, "whole_epilogue": True}, {"bn": 208, "whole_epilogue": True}, {"bn": 192}]
        for cfg in [c for c in cfgs if scales != "block" or c["bn"] in matmul_module.BLOCK_TILES]:
            prim = matmul_module.matmul_kernel.factory(
                m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=4, consumers=2, out_dtype="bfloat16", fast_accum=False, scales=scales, **cfg
            )
            out = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            tirx.compile(prim)(a, bt, sa, sb, out)
            got[str(cfg)] = out
        first = next(iter(got.values()))
        for cfg, out in got.items():
            assert torch.equal(out, first), (m, n, k, scales, cfg)
        if scales == "block":  # (against the dequantised product)
            deq_a = a.double() * sa.double().repeat_interleave(128, 1)[:, :k]
            deq_b = bt.double() * sb.double().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)[:, :k]
            want = deq_a @ deq_b.t()
            assert (first.double() - want).abs().max().item() <= 2.0**-7 * want.abs().max().item(), (m, n, k)
            continue
        want = (a.double() @ bt.double().t()) * (sa.double() * sb.double())
        n16 = n // 16 * 16  # (cuBLASLt takes N a multiple of 16)
        theirs = torch._scaled_mm(a, bt[:n16].t(), sa, sb[:, :n16] if scales == "row" else sb, out_dtype=torch.bfloat16)
        bound = (theirs.double() - want[:, :n16]).abs().max().item() + 2.0**-7 * want.abs().max().item()
        assert (first.double() - want).abs().max().item() <= bound, (m, n, k, scales)


def test_fp8_over_a_cluster_on_the_gpu():
    """The FP8 candidates promoted to float32 that split K over a cluster (three consumers, and
    promoted ahead) on the GPU, per-tensor scales, ragged M and N over several tiles, the
    workspace poisoned with NaN: within cuBLASLt's distance of the float64 product."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    torch.manual_seed(1)
    for cfg in CLUSTERED_FP8:
        parts, bm = cfg["cluster_k"], 64 * cfg["consumers"]
        m, n, k = 2 * bm - 5, 3 * cfg["bn"] + 16, 4096  # (N: whole 16s, as torch._scaled_mm takes it)
        a = (torch.randn(m, k, device="cuda") / 2).to(torch.float8_e4m3fn)
        bt = (torch.randn(n, k, device="cuda") / 2).to(torch.float8_e4m3fn)
        sa, sb = torch.tensor([0.5], device="cuda"), torch.tensor([2.0], device="cuda")
        prim = matmul_module.matmul_kernel.factory(m=m, n=n, k=k, dtype="float8_e4m3fn", ctas=8 * parts, out_dtype="bfloat16", fast_accum=False, **cfg)
        c = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        tirx.compile(prim)(a, bt, sa, sb, c, torch.full((parts - 1, m, n), float("nan"), device="cuda"))
        want = a.double() @ bt.double().t()
        theirs = torch._scaled_mm(a, bt.t(), sa[0], sb[0], out_dtype=torch.bfloat16)
        bound = (theirs.double() - want).abs().max().item() + 2.0**-7 * want.abs().max().item()
        assert (c.double() - want).abs().max().item() <= bound, cfg


def test_matmul_and_addmm_autograd_and_the_ops_without_backward():
    """matmul and addmm are differentiable (dA = dC Bᵀ, dB = Aᵀ dC by the same kernel; addmm's
    input gradient beta dC, summed over the rows for a bias row; with an activation, its gradient
    at the recomputed pre-activation), eager and under torch.compile; the ops without a backward
    (FP8 scaled_mm, KV-cache attention) refuse tensors that need one rather than
    return a result without gradient."""
    torch = pytest.importorskip("torch")
    sys.modules["tirx.ops.matmul"].register_torch_op()
    sys.modules["tirx.ops.matmul"].register_addmm_torch_op()
    torch.manual_seed(0)
    a = torch.randn(64, 128).bfloat16().requires_grad_()
    b = torch.randn(128, 192).bfloat16().requires_grad_()
    bias = torch.randn(192).bfloat16().requires_grad_()
    dc = torch.randn(64, 192).bfloat16()
    for inp in (bias, torch.randn(64, 1).bfloat16().requires_grad_(), torch.tensor(0.5).bfloat16().requires_grad_()):  # (row, column, number)
        ref = [t.detach().double().requires_grad_() for t in (inp, a, b)]
        torch.addmm(*ref, beta=0.5, alpha=2.0).backward(dc.double())
        for fn in (ops.addmm, torch.compile(ops.addmm, fullgraph=True)):
            for t in (inp, a, b):
                t.grad = None
            fn(inp, a, b, beta=0.5, alpha=2.0).backward(dc)
            for t, r in zip((inp, a, b), ref):
                assert t.grad.shape == r.grad.shape
                torch.testing.assert_close(t.grad.double(), r.grad, rtol=2**-6, atol=2**-6 * r.grad.abs().max().item())
    for t in (a, b):
        t.grad = None
    ops.matmul(a, b).backward(dc)
    torch.testing.assert_close(a.grad.double(), dc.double() @ b.double().t(), rtol=2**-6, atol=0.1)
    torch.testing.assert_close(b.grad.double(), a.double().t() @ dc.double(), rtol=2**-6, atol=0.1)
    F = torch.nn.functional
    acts = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"), "silu": F.silu}
    for name, act in acts.items():  # the activations' backward (at the recomputed pre-activation)
        ref = [t.detach().double().requires_grad_() for t in (bias, a, b)]
        act(torch.addmm(*ref)).backward(dc.double())
        for t in (bias, a, b):
            t.grad = None
        ops.addmm(bias, a, b, activation=name).backward(dc)
        for t, r in zip((bias, a, b), ref):
            torch.testing.assert_close(t.grad.double(), r.grad, rtol=2**-5, atol=2**-5 * r.grad.abs().max().item(), msg=name)
    q = torch.randn(10, 2, 64).bfloat16().requires_grad_()
    with pytest.raises(NotImplementedError, match="tirx.ops.kvcache_attention: no backward yet"):
        ops.kvcache_attention(q[None], q[None], q[None], torch.tensor([10], dtype=torch.int32))
    with torch.no_grad():  # (no gradient wanted: runs)
        assert ops.grouped_mm(a, b.reshape(1, 128, 192), torch.tensor([64], dtype=torch.int32)).shape == (64, 192)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,n,threads,tpr", [(5, 256, 128, 8), (37, 100, 128, 4), (3, 1000, 256, 32), (70, 16, 256, 2)])
def test_row_groups_match_float64(dtype, m, n, threads, tpr):
    """Issue 33 item 5, short rows: a group of `tpr` lanes per row, many rows per CTA (the last
    CTA's rows past `m` clipped): softmax, log_softmax and their backward against float64, and
    nothing written outside the rows."""
    sm = sys.modules["tirx.ops.softmax"]
    rng = np.random.default_rng(m)
    x = (rng.standard_normal((m, n)) * 3).astype(numpy_dtype(dtype))
    dy = rng.standard_normal((m, n)).astype(x.dtype)
    want = _softmax_ref(x)
    for log in (False, True):
        k = tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, threads=threads, log=log, tpr=tpr))
        big = np.full((m + 2, n), 7, x.dtype)
        k(x, big[1 : m + 1], m)
        assert (big[0] == 7).all() and (big[-1] == 7).all()
        y = big[1 : m + 1]
        ref = np.log(want) if log else want
        rtol = 1e-5 if dtype == "float32" else 2.0**-7
        np.testing.assert_allclose(y.astype(F64), ref, rtol=rtol, atol=1e-6 if dtype == "float32" else 2.0**-6)
        yd = y.astype(F64)
        g = dy.astype(F64)
        grad = g - np.exp(yd) * g.sum(-1, keepdims=True) if log else yd * (g - (g * yd).sum(-1, keepdims=True))
        kb = tirx.compile(sm.softmax_backward_kernel.factory(n=n, dtype=dtype, threads=threads, log=log, tpr=tpr))
        dx = np.zeros_like(x)
        kb(y, dy, dx, m)
        np.testing.assert_allclose(dx.astype(F64), grad, rtol=1e-5 if dtype == "float32" else 2.0**-6, atol=1e-5 if dtype == "float32" else 2.0**-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_streamed_layer_norm_over_whole_tiles_in_two_passes(dtype):
    """LayerNorm streamed over whole tiles (four here): the mean and the squared deviations in one
    pass (each thread's combined tile by tile, then over the threads, as Chan et al. do), the
    output in a second; a row shifted far from 0 (mean 300) against float64."""
    nm = sys.modules["tirx.ops.norm"]
    n, m = 4 * 64 * 32, 3
    rng = np.random.default_rng(6)
    x = (rng.standard_normal((m, n)) + 300).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=64, stream=True))
    y = np.zeros_like(x)
    k(x, w, b, y, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    # float32: x itself is exact to 2^-15 at 300, so (x - mean) to ~3e-5 of its deviation of 1
    np.testing.assert_allclose(y.astype(F64), want, rtol=1e-4 if dtype == "float32" else 2.0**-7, atol=1e-4 if dtype == "float32" else 2.0**-6)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_streamed_rows_last_tile_first(dtype):
    """The streamed design at a row of three tiles (the last ragged), forced with `stream=True`
    where the autotuner would pick it only on a GPU: the second pass runs last tile first."""
    sm, nm = sys.modules["tirx.ops.softmax"], sys.modules["tirx.ops.norm"]
    ce = sys.modules["tirx.ops.cross_entropy"]
    n, m = 2 * 256 * 32 + 1000, 2
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((m, n)) * 3).astype(numpy_dtype(dtype))
    w = (rng.random(n) + 0.5).astype(x.dtype)
    tol = dict(rtol=1e-5, atol=1e-6) if dtype == "float32" else dict(rtol=2.0**-7, atol=2.0**-7)
    for log in (False, True):
        k = tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, threads=256, log=log, stream=True))
        y = np.zeros_like(x)
        k(x, y, m)
        want = _softmax_ref(x)
        np.testing.assert_allclose(y.astype(F64), np.log(want) if log else want, **tol)
        dy = rng.standard_normal((m, n)).astype(x.dtype)
        kb = tirx.compile(sm.softmax_backward_kernel.factory(n=n, dtype=dtype, threads=256, log=log, stream=True))
        dx = np.zeros_like(x)
        kb(y, dy, dx, m)
        yd, g = y.astype(F64), dy.astype(F64)
        grad = g - np.exp(yd) * g.sum(-1, keepdims=True) if log else yd * (g - (g * yd).sum(-1, keepdims=True))
        np.testing.assert_allclose(dx.astype(F64), grad, rtol=tol["rtol"], atol=1e-5 if dtype == "float32" else 2.0**-6)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=256, stream=True))
    y = np.zeros_like(x)
    k(x, w, y, m, 1e-6)
    np.testing.assert_allclose(y.astype(F64), _rms_ref(x, w, 1e-6), **tol)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=256, stream=True))
    k(x, w, w, y, m, 1e-5)
    xd = x.astype(F64)
    ln = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + w.astype(F64)
    np.testing.assert_allclose(y.astype(F64), ln, rtol=tol["rtol"], atol=1e-5 if dtype == "float32" else 2.0**-6)
    t = np.array([3, n - 1])
    k = tirx.compile(ce.cross_entropy_kernel.factory(v=n, dtype=dtype, threads=256, smoothing=True, stream=True))
    loss, lse = np.zeros(m, np.float32), np.zeros(m, np.float32)
    k(x, t, loss, lse, m, -100, 0.1)
    p = _softmax_ref(x)
    want = -(0.9 * np.log(p[np.arange(m), t]) + 0.1 * np.log(p).mean(-1))
    np.testing.assert_allclose(loss, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,h,threads,tpr", [(5, 256, 128, 8), (37, 100, 128, 4), (3, 1000, 256, 32)])
def test_norm_row_groups_match_float64(dtype, m, h, threads, tpr):
    """Short rows of the norms held by lane groups, the weight and bias read by scalar loads
    into each lane's registers: rms_norm, add_rms_norm and layer_norm against float64."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(h)
    x = (rng.standard_normal((m, h)) * 3 + 1).astype(numpy_dtype(dtype))
    w, b = (rng.random(h) + 0.5).astype(x.dtype), rng.standard_normal(h).astype(x.dtype)
    r = rng.standard_normal((m, h)).astype(x.dtype)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=h, dtype=dtype, threads=threads, tpr=tpr))
    y = np.zeros_like(x)
    k(x, w, y, m, 1e-6)
    _close(y, _rms_ref(x, w, 1e-6), dtype)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=h, dtype=dtype, threads=threads, tpr=tpr, residual=True))
    summed = np.zeros_like(x)
    k(x, r, w, y, summed, m, 1e-6)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y, _rms_ref(want_h, w, 1e-6), dtype)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype=dtype, threads=threads, tpr=tpr))
    k(x, w, b, y, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    np.testing.assert_allclose(y.astype(F64), want, rtol=1e-5 if dtype == "float32" else 2.0**-7, atol=1e-5 if dtype == "float32" else 2.0**-6)
    _check_add_layer_norm(dict(h=h, dtype=dtype, threads=threads, tpr=tpr, residual=True), x, r, w, b)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("n,threads,cluster", [(20000, 512, 4), (33001, 512, 8), (9000, 512, 8)])
def test_rows_split_over_a_cluster(dtype, n, threads, cluster):
    """Issue 33 item 5, wide rows: a cluster of CTAs per row, each holding a slice in registers,
    the slices' statistics exchanged through distributed shared memory (at 9,000 over eight
    CTAs of 2,048+ columns the last slices are all padding): softmax, log_softmax, their
    backward, rms_norm, add_rms_norm and layer_norm (a shifted row: the slices' variances
    combined about the row's mean) against float64, nothing written outside the rows."""
    sm, nm = sys.modules["tirx.ops.softmax"], sys.modules["tirx.ops.norm"]
    m = 3
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    dy = rng.standard_normal((m, n)).astype(x.dtype)
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    f32 = dtype == "float32"
    tol = dict(rtol=1e-5, atol=1e-6) if f32 else dict(rtol=2.0**-7, atol=2.0**-7)
    for log in (False, True):
        k = tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, threads=threads, log=log, cluster=cluster))
        big = np.full((m + 2, n), 7, x.dtype)
        k(x, big[1 : m + 1], m)
        assert (big[0] == 7).all() and (big[-1] == 7).all()
        y = big[1 : m + 1]
        want = _softmax_ref(x)
        np.testing.assert_allclose(y.astype(F64), np.log(want) if log else want, rtol=tol["rtol"], atol=1e-5 if f32 else 2.0**-6)
        kb = tirx.compile(sm.softmax_backward_kernel.factory(n=n, dtype=dtype, threads=threads, log=log, cluster=cluster))
        dx = np.zeros_like(x)
        kb(y, dy, dx, m)
        yd, g = y.astype(F64), dy.astype(F64)
        grad = g - np.exp(yd) * g.sum(-1, keepdims=True) if log else yd * (g - (g * yd).sum(-1, keepdims=True))
        np.testing.assert_allclose(dx.astype(F64), grad, rtol=tol["rtol"], atol=1e-5 if f32 else 2.0**-6)
    y = np.zeros_like(x)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=threads, cluster=cluster))
    k(x, w, y, m, 1e-6)
    _close(y, _rms_ref(x, w, 1e-6), dtype)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=threads, cluster=cluster, residual=True))
    summed = np.zeros_like(x)
    k(x, r, w, y, summed, m, 1e-6)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y, _rms_ref(want_h, w, 1e-6), dtype)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=threads, cluster=cluster))
    k(x, w, b, y, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    np.testing.assert_allclose(y.astype(F64), want, rtol=tol["rtol"], atol=1e-5 if f32 else 2.0**-6)
    _check_add_layer_norm(dict(h=n, dtype=dtype, threads=threads, cluster=cluster, residual=True), x, r, w, b)


@pytest.mark.parametrize("prefetch", [False, True])
@pytest.mark.parametrize("dtype,n,threads,group,groups,m", [("float32", 1000, 64, 4, 3, 7), ("bfloat16", 9000, 128, 8, 2, 5), ("float16", 4096, 128, 2, 4, 3)])
def test_layer_norm_rows_split_over_a_group_of_a_cooperative_grid(dtype, n, threads, group, groups, m, prefetch):
    """Issue 33's design under measurement (`layer_norm_grid_kernel`): rows split over groups of
    CTAs exchanging their slices' statistics through global memory at a grid group barrier,
    persistent over the rows (more rows than groups, uneven; ragged last slices: 1,000 over 4, 9,000
    over 8 CTAs), against float64; the barrier words end with their top bit set after an odd number
    of phases; without the barrier, a race. With ``prefetch``, each CTA's next row loaded into
    registers before this row's exchange."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(n)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    y = np.zeros_like(x)
    p, words = np.zeros((2 * groups * group, 2), np.float32), np.zeros(groups, np.int32)
    k = nm.layer_norm_grid_kernel(n, dtype, threads, group, groups, prefetch)
    tirx.compile(k)(x, w, b, y, p, words, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    f32 = dtype == "float32"
    np.testing.assert_allclose(y.astype(F64), want, rtol=1e-5 if f32 else 2.0**-7, atol=1e-5 if f32 else 2.0**-6)
    phases = [len(range(g, m, groups)) for g in range(groups)]
    assert list(words.view(np.uint32)) == [0x80000000 * (q % 2) for q in phases]
    src = k.source.replace(f"T.cuda.grid_group_sync(WORDS.ptr_to([grp]), {group})", "pass")
    assert src != k.source
    with pytest.raises(tirx.TirxError, match="data race"):
        tirx.compile(tirx.from_script(src))(x, w, b, np.zeros_like(x), p, np.zeros(groups, np.int32), m, 1e-5)


@pytest.mark.parametrize("dtype,n,cluster", [("float32", 4096, 2), ("bfloat16", 16384, 4), ("float16", 2048, 8), ("bfloat16", 8192, 16)])
def test_rows_split_over_a_cluster_in_shared_memory(dtype, n, cluster):
    """Issue 33 item 5, wide rows with the slices in shared memory (`SharedSlice`: copied by
    `cp.async`, read in register tiles; 2, 4, 1 and 2 tiles per slice here; 16 CTAs: Hopper's
    non-portable cluster): softmax, log_softmax,
    their backward (softmax's with both slices held, and with ``y``'s only: ``dy`` read twice),
    rms_norm, add_rms_norm (the rounded sum written back over the slice) and layer_norm against
    float64, nothing written outside the rows."""
    sm, nm = sys.modules["tirx.ops.softmax"], sys.modules["tirx.ops.norm"]
    m, threads = 3, 32
    rng = np.random.default_rng(n + cluster)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    dy = rng.standard_normal((m, n)).astype(x.dtype)
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    f32 = dtype == "float32"
    rtol, atol = (1e-5, 1e-5) if f32 else (2.0**-7, 2.0**-6)
    design = dict(threads=threads, cluster=cluster, shared=True)
    for log in (False, True):
        k = tirx.compile(sm.softmax_kernel.factory(n=n, dtype=dtype, log=log, **design))
        big = np.full((m + 2, n), 7, x.dtype)
        k(x, big[1 : m + 1], m)
        assert (big[0] == 7).all() and (big[-1] == 7).all()
        y = big[1 : m + 1]
        want = _softmax_ref(x)
        np.testing.assert_allclose(y.astype(F64), np.log(want) if log else want, rtol=rtol, atol=atol)
        yd, g = y.astype(F64), dy.astype(F64)
        grad = g - np.exp(yd) * g.sum(-1, keepdims=True) if log else yd * (g - (g * yd).sum(-1, keepdims=True))
        for limit in (1 << 20, 0):
            kb = tirx.compile(sm.softmax_backward_kernel.factory(n=n, dtype=dtype, log=log, slice_limit=limit, **design))
            dx = np.zeros_like(x)
            kb(y, dy, dx, m)
            np.testing.assert_allclose(dx.astype(F64), grad, rtol=rtol, atol=atol)
    y = np.zeros_like(x)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, **design))
    k(x, w, y, m, 1e-6)
    _close(y, _rms_ref(x, w, 1e-6), dtype)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, residual=True, **design))
    summed = np.zeros_like(x)
    k(x, r, w, y, summed, m, 1e-6)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y, _rms_ref(want_h, w, 1e-6), dtype)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, **design))
    k(x, w, b, y, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    np.testing.assert_allclose(y.astype(F64), want, rtol=rtol, atol=atol)
    _check_add_layer_norm(dict(h=n, dtype=dtype, residual=True, **design), x, r, w, b)


@pytest.mark.parametrize(
    "dtype,n,cluster,per_cta,m,ahead",
    [
        ("float32", 4096, 2, 2, 5, 1),
        ("bfloat16", 8192, 4, 3, 7, 1),
        ("float16", 8192, 16, 4, 2, 1),
        # (two and three rows in flight: a ring of three and four slices)
        ("float32", 4096, 2, 4, 9, 2),
        ("bfloat16", 8192, 4, 5, 7, 3),
    ],
)
def test_rows_split_over_a_cluster_several_per_cluster(dtype, n, cluster, per_cta, m, ahead):
    """The norms' cluster designs over ``per_cta`` rows per cluster (the weight's and bias's
    slices copied once, a ring of ``ahead`` + 1 rows' slices, the statistics exchanged over slots
    used in turn: the simulator's race check follows the chain across rows; a last cluster with
    fewer rows than ``per_cta``): rms_norm, add_rms_norm, layer_norm with and without its
    statistics and add_layer_norm against float64, nothing written outside the rows; ``ahead``
    past 3, or without several rows, refused."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(n + per_cta)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    design = dict(threads=32, cluster=cluster, shared=True, per_cta=per_cta, ahead=ahead)
    big = np.full((m + 2, n), 7, x.dtype)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, **design))(x, w, big[1 : m + 1], m, 1e-6)
    assert (big[0] == 7).all() and (big[-1] == 7).all()
    _close(big[1 : m + 1], _rms_ref(x, w, 1e-6), dtype)
    y, summed = np.zeros_like(x), np.zeros_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, residual=True, **design))(x, r, w, y, summed, m, 1e-6)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y, _rms_ref(want_h, w, 1e-6), dtype)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    atol = 1e-5 if dtype == "float32" else 2.0**-6
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, **design))(x, w, b, y, m, 1e-5)
    np.testing.assert_allclose(y.astype(F64), want, rtol=1e-5 if dtype == "float32" else 2.0**-7, atol=atol)
    mean, rstd = np.zeros(m, np.float32), np.zeros(m, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, stats=True, **design))(x, w, b, y, mean, rstd, m, 1e-5)
    np.testing.assert_allclose(mean, xd.mean(-1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=1e-5)
    _check_add_layer_norm(dict(h=n, dtype=dtype, residual=True, **design), x, r, w, b)
    with pytest.raises(ValueError, match="per_cta, persist: the cluster design with its slices in shared memory"):
        nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=cluster, per_cta=per_cta)
    for factory in (nm.rms_norm_kernel.factory, nm.layer_norm_kernel.factory):
        with pytest.raises(ValueError, match="ahead: 4 rows in flight; the several-rows cluster designs hold 1, 2 or 3"):
            factory(h=n, dtype=dtype, **{**design, "ahead": 4})
        with pytest.raises(ValueError, match="ahead: rows in flight while one is computed, of the several-rows cluster design"):
            factory(h=n, dtype=dtype, threads=32, cluster=cluster, shared=True, ahead=2)


@pytest.mark.parametrize("dtype,affine_regs", [("float32", 1), ("bfloat16", 2), ("float16", 1)])
def test_layer_norm_several_rows_per_cluster_affine_in_registers(dtype, affine_regs):
    """LayerNorm's several-rows cluster design with the bias's slice (``affine_regs=1``), or the
    bias's and the weight's (2), read into registers each row while its moments travel, not held
    in shared memory: layer_norm with its statistics and add_layer_norm against float64 (two tiles
    a thread: the output pass unrolled over them; a last cluster of fewer rows); any other
    ``affine_regs``, or one without ``per_cta``, refused."""
    nm = sys.modules["tirx.ops.norm"]
    n, m = 8192, 7
    rng = np.random.default_rng(affine_regs)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    design = dict(threads=32, cluster=4, shared=True, per_cta=3, affine_regs=affine_regs)
    assert sys.modules["tirx.ops._common"].SharedSlice(n, dtype, 32, 4).chunks > 1
    y, mean, rstd = np.zeros_like(x), np.zeros(m, np.float32), np.zeros(m, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, stats=True, **design))(x, w, b, y, mean, rstd, m, 1e-5)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    tol = 1e-5 if dtype == "float32" else 2.0**-7
    np.testing.assert_allclose(y.astype(F64), want, rtol=tol, atol=1e-5 if dtype == "float32" else 2.0**-6)
    np.testing.assert_allclose(mean, xd.mean(-1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=1e-5)
    _check_add_layer_norm(dict(h=n, dtype=dtype, residual=True, **design), x, r, w, b)
    for bad in ({**design, "affine_regs": 3}, {**design, "per_cta": 1, "shared": False}):
        with pytest.raises(ValueError, match="affine_regs: 1 .the bias. or 2"):
            nm.layer_norm_kernel.factory(h=n, dtype=dtype, **bad)


@pytest.mark.parametrize("dtype,n,cluster,affine_regs", [("float32", 4096, 2, 1), ("bfloat16", 16384, 4, 2), ("float16", 8192, 16, 2)])
def test_norms_one_row_per_cluster_parameters_in_registers(dtype, n, cluster, affine_regs):
    """The norms' one-row cluster designs (slices in shared memory) with LayerNorm's bias's slice,
    or the bias's and the weight's, read into registers with the row's slice (``affine_regs``; 2,
    4 and 1 tiles a thread here: the output pass unrolled over them), and RMSNorm's weight's
    (``weight_regs``): layer_norm with and without its statistics, add_layer_norm, rms_norm and
    add_rms_norm against float64, nothing written past the rows; float32 parameters beside
    16-bit rows refused (their registers are of the rows' dtype), as is ``weight_regs`` over
    several rows; the tuner keeps the designs only where the registers fit `AFFINE_REGISTERS`."""
    nm = sys.modules["tirx.ops.norm"]
    m = 3
    rng = np.random.default_rng(n + affine_regs)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    design = dict(threads=32, cluster=cluster, shared=True, affine_regs=affine_regs)
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == "float32" else dict(rtol=2.0**-7, atol=2.0**-6)
    y = np.full((m + 1, n), 7, x.dtype)
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, **design))(x, w, b, y[:m], m, 1e-5)
    assert (y[m] == 7).all()
    np.testing.assert_allclose(y[:m].astype(F64), want, **tol)
    mean, rstd = np.zeros(m, np.float32), np.zeros(m, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, stats=True, **design))(x, w, b, y[:m], mean, rstd, m, 1e-5)
    np.testing.assert_allclose(y[:m].astype(F64), want, **tol)
    np.testing.assert_allclose(mean, xd.mean(-1), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=1e-5)
    _check_add_layer_norm(dict(h=n, dtype=dtype, residual=True, **design), x, r, w, b)
    rms = dict(threads=32, cluster=cluster, shared=True, weight_regs=True)
    y = np.full((m + 1, n), 7, x.dtype)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, **rms))(x, w, y[:m], m, 1e-6)
    assert (y[m] == 7).all()
    _close(y[:m], _rms_ref(x, w, 1e-6), dtype)
    summed = np.zeros_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, residual=True, **rms))(x, r, w, y[:m], summed, m, 1e-6)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y[:m], _rms_ref(want_h, w, 1e-6), dtype)
    if dtype != "float32":
        with pytest.raises(ValueError, match="affine_regs: the bias's .and weight's. registers of the rows' dtype"):
            nm.layer_norm_kernel.factory(h=n, dtype=dtype, w_dtype="float32", **design)
        with pytest.raises(ValueError, match="weight_regs: the weight's slice in registers of the rows' dtype"):
            nm.rms_norm_kernel.factory(h=n, dtype=dtype, w_dtype="float32", **rms)
    with pytest.raises(ValueError, match="weight_regs: .*no per_cta or persist"):
        nm.rms_norm_kernel.factory(h=n, dtype=dtype, per_cta=2, **rms)
    key = dict(h=65536, residual=False, w_dtype="")
    kept = nm.layer_norm_kernel.prune([dict(c) for c in nm.LAYER_NORM_AFFINE_CONFIGS], "bfloat16", stats=False, **key)
    assert sorted(c["cluster"] for c in kept if "per_cta" not in c) == [4, 8, 16]  # (2: 128 registers a thread)
    kept = nm.rms_norm_kernel.prune([dict(c) for c in nm.RMS_WEIGHT_CONFIGS], "bfloat16", **key)
    assert sorted(c["cluster"] for c in kept) == [4, 8, 16]
    assert nm.rms_norm_kernel.prune([dict(c) for c in nm.RMS_WEIGHT_CONFIGS], "bfloat16", **{**key, "w_dtype": "float32"}) == []


@pytest.mark.parametrize(
    "dtype,cfg",
    [
        ("bfloat16", {"affine_regs": 2, "affine_once": True}),
        ("float32", {"affine_regs": 1}),
        ("float16", {"affine_regs": 2, "affine_once": True}),
        # (the next row's moments sent before a row's output pass: a ring of three, three slots)
        ("bfloat16", {"affine_regs": 2, "affine_once": True, "pipe": True}),
        ("float32", {"affine_regs": 1, "affine_once": True, "pipe": True}),
        # (two and three rows in flight: a ring of four with ``pipe``, of four without)
        ("bfloat16", {"affine_regs": 2, "affine_once": True, "pipe": True, "ahead": 2}),
        ("float32", {"affine_regs": 1, "ahead": 3}),
    ],
)
def test_layer_norm_persistent_rows_per_cluster(dtype, cfg):
    """LayerNorm's several-rows cluster design with its rows per cluster a run-time argument
    (``persist``: ``per_cluster`` after ``eps``), the bias's (and weight's) registers read each
    row or once (``affine_once``): per_cluster 1, 3 (a last cluster of fewer rows), the rows
    whole and past them, and 0 (taken as 1), with and without the statistics and add_layer_norm,
    against float64, nothing written past the rows; the tuner's launch appends the rows spread
    over `SIM_CLUSTERS` clusters; ``persist`` without the shared cluster design, and
    ``affine_once`` without ``affine_regs``, refused."""
    nm, cm = sys.modules["tirx.ops.norm"], sys.modules["tirx.ops._common"]
    n, m = 8192, 7
    rng = np.random.default_rng(n + len(cfg))
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, b = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal(n).astype(x.dtype)
    r = rng.standard_normal((m, n)).astype(x.dtype)
    design = dict(threads=32, cluster=4, shared=True, persist=True, **cfg)
    assert cm.SharedSlice(n, dtype, 32, 4).chunks > 1
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, stats=True, **design))
    assert [p.name for p in k.params][-3:] == ["m", "eps", "per_cluster"]
    xd = x.astype(F64)
    want = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5) * w.astype(F64) + b.astype(F64)
    tol = 1e-5 if dtype == "float32" else 2.0**-7
    for per_cluster in (1, 3, m, m + 2, 0):
        y, mean, rstd = np.full((m + 1, n), 7, x.dtype), np.zeros(m, np.float32), np.zeros(m, np.float32)
        k(x, w, b, y[:m], mean, rstd, m, 1e-5, per_cluster)
        assert (y[m] == 7).all(), per_cluster
        np.testing.assert_allclose(y[:m].astype(F64), want, rtol=tol, atol=1e-5 if dtype == "float32" else 2.0**-6)
        np.testing.assert_allclose(mean, xd.mean(-1), rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=1e-5)
    _check_add_layer_norm(dict(h=n, dtype=dtype, residual=True, **design), x, r, w, b, 3)
    plain = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, **design))
    args = (x, w, b, np.zeros_like(x), m, 1e-5)
    assert cm.persist_args(plain, args)[-1] == -(-m // cm.SIM_CLUSTERS)
    assert cm.persist_args(tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=32)), args) == args
    with pytest.raises(ValueError, match="per_cta, persist: the cluster design with its slices in shared memory"):
        nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=4, persist=True)
    with pytest.raises(ValueError, match="affine_once: the bias's"):
        nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=4, shared=True, persist=True, affine_once=True)
    with pytest.raises(ValueError, match="pipe: the rows' moments sent a row ahead, of the affine_once design"):
        nm.layer_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=4, shared=True, persist=True, affine_regs=1, pipe=True)


@pytest.mark.parametrize("pipe,ahead", [(False, 1), (True, 1), (True, 2)], ids=["", "pipe", "pipe-ahead2"])
@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_rms_norm_persistent_rows_per_cluster(dtype, pipe, ahead):
    """RMSNorm's several-rows cluster design with its rows per cluster a run-time argument
    (``persist``: ``per_cluster`` after ``eps``): per_cluster 1, 3, the rows whole and past them,
    and 0 (taken as 1), rms_norm and add_rms_norm against float64, nothing written past the rows;
    the tuner's launch appends the rows spread over `SIM_CLUSTERS` clusters. ``pipe``: the next
    row's sum sent before a row's output pass (seven rows a cluster: the four slots' chain);
    ``ahead``: that many rows in flight besides."""
    nm, cm = sys.modules["tirx.ops.norm"], sys.modules["tirx.ops._common"]
    n, m = 8192, 7
    rng = np.random.default_rng(n + m)
    x = (rng.standard_normal((m, n)) * 3 + 2).astype(numpy_dtype(dtype))
    w, r = (rng.random(n) + 0.5).astype(x.dtype), rng.standard_normal((m, n)).astype(x.dtype)
    design = dict(threads=32, cluster=4, shared=True, persist=True, pipe=pipe, ahead=ahead)
    k = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, **design))
    assert [p.name for p in k.params][-1] == "per_cluster"
    for per_cluster in (1, 3, m, m + 2, 0):
        y = np.full((m + 1, n), 7, x.dtype)
        k(x, w, y[:m], m, 1e-6, per_cluster)
        assert (y[m] == 7).all(), per_cluster
        _close(y[:m], _rms_ref(x, w, 1e-6), dtype)
    y, summed = np.zeros_like(x), np.zeros_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype=dtype, residual=True, **design))(x, r, w, y, summed, m, 1e-6, 3)
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    _close(y, _rms_ref(want_h, w, 1e-6), dtype)
    assert cm.persist_args(k, (x, w, y, m, 1e-6))[-1] == -(-m // cm.SIM_CLUSTERS)
    with pytest.raises(ValueError, match="per_cta, persist: the cluster design with its slices in shared memory"):
        nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=4, persist=True)
    with pytest.raises(ValueError, match="pipe: the rows' sums sent a row ahead"):
        nm.rms_norm_kernel.factory(h=n, dtype=dtype, threads=32, cluster=4, shared=True, pipe=True)


@pytest.mark.parametrize(
    "h,cfg,m",
    [
        (8192, {"threads": 64, "cluster": 4, "shared": True, "per_cta": 3}, 7),
        (8192, {"threads": 128, "cluster": 2, "shared": True}, 3),
        (4096, {"threads": 64, "stream": True}, 3),
        (8192, {"threads": 512, "cluster": 2, "shared": True}, 3),
        (8192, {"threads": 1024, "cluster": 2, "shared": True}, 2),
    ],
    ids=["several-rows", "cluster", "streamed", "16-warps-over-lanes", "32-warps-over-lanes"],
)
def test_layer_norm_statistics_merged_over_warps(h, cfg, m):
    """LayerNorm's designs that merge each thread's mean and squared deviations (Chan et al.)
    over several warps in one barrier (`_common.cta_moments`: each warp's pair by butterflies,
    then the warps', in order or, over more than 8 warps, across a warp's lanes), on rows far from zero (mean 1,000, deviation 1): the statistics and the
    output against float64; the race check holds the barrier's slots (alternating per row) to it."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(h + m)
    x = (rng.standard_normal((m, h)) + 1000).astype(np.float32)
    w, b = (rng.random(h) + 0.5).astype(np.float32), rng.standard_normal(h).astype(np.float32)
    y, mean, rstd = np.zeros_like(x), np.zeros(m, np.float32), np.zeros(m, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype="float32", stats=True, **cfg))(x, w, b, y, mean, rstd, m, 1e-5)
    xd = x.astype(F64)
    np.testing.assert_allclose(mean, xd.mean(-1), rtol=1e-7)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(xd.var(-1) + 1e-5), rtol=5e-5)
    np.testing.assert_allclose(y, _layer_norm_ref(x, w, b, 1e-5), rtol=1e-4, atol=1e-4)


def _check_add_layer_norm(design, x, r, w, b, *extra):
    """A design's fused residual add + LayerNorm (``design``: `layer_norm_kernel`'s arguments,
    ``residual=True``; ``extra``: its arguments after ``eps``) against float64: the new residual
    exactly (the rounded sum), the output and, with ``stats``, the statistics of it, nothing
    written past the rows; the kernel without ``stats`` writes the same output and residual bit
    for bit."""
    nm = sys.modules["tirx.ops.norm"]
    m, h = x.shape
    y, summed = np.full((m + 1, h), 7, x.dtype), np.zeros_like(x)
    mean, rstd = np.zeros(m, np.float32), np.zeros(m, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(**design, stats=True))(x, r, w, b, y[:m], summed, mean, rstd, m, 1e-5, *extra)
    assert (y[m] == 7).all()
    want_h = (x.astype(np.float32) + r.astype(np.float32)).astype(x.dtype)
    np.testing.assert_array_equal(summed, want_h)
    hd = want_h.astype(F64)
    np.testing.assert_allclose(mean, hd.mean(-1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(hd.var(-1) + 1e-5), rtol=1e-4)
    f32 = x.dtype == np.float32
    np.testing.assert_allclose(
        y[:m].astype(F64), _layer_norm_ref(want_h, w, b, 1e-5), rtol=1e-5 if f32 else 2.0**-7, atol=1e-5 if f32 else 2.0**-6
    )
    y2, summed2 = np.full((m + 1, h), 7, x.dtype), np.zeros_like(x)
    tirx.compile(nm.layer_norm_kernel.factory(**design))(x, r, w, b, y2[:m], summed2, m, 1e-5, *extra)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(summed2, summed)


def test_norms_eager_calls_go_through_a_plan_per_signature():
    """The norms' eager calls on tensors (not recorded by autograd, not traced) go through a plan
    per call signature (`norm._eager`): each call's own values through one plan (its operands not
    captured), the four norms with and without their parameters (absent ones as the constants;
    float32 parameters beside bfloat16 rows), against PyTorch; a bad call raises the same error
    every time (no plan kept for it); non-contiguous inputs and empty batches take the general
    path, with its results."""
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    cm = sys.modules["tirx.ops._common"]
    cm.PLANS.clear()
    h = 300
    w, b = torch.rand(h, dtype=torch.bfloat16) + 0.5, torch.randn(h, dtype=torch.bfloat16)
    w32, b32 = w.float(), b.float()

    def close(got, want):
        torch.testing.assert_close(got.float(), want.float(), rtol=2.0**-7, atol=2.0**-6)

    for seed in range(2):  # (the second call of each signature: its plan)
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(2, 3, h, generator=g).bfloat16()
        r = torch.randn(2, 3, h, generator=g).bfloat16()
        close(ops.layer_norm(x, [h], w, b), F.layer_norm(x.float(), [h], w.float(), b.float()))
        close(ops.layer_norm(x, h), F.layer_norm(x.float(), [h]))
        close(ops.layer_norm(x, [h], None, b32), F.layer_norm(x.float(), [h], None, b32).bfloat16())
        close(ops.rms_norm(x, [h], w, 1e-6), F.rms_norm(x.float(), [h], w.float(), 1e-6))
        close(ops.rms_norm(x, [h]), F.rms_norm(x.float(), [h], None, 2.0**-7))
        close(ops.rms_norm(x, [h], w32, 1e-6), F.rms_norm(x.float(), [h], w32, 1e-6).bfloat16())
        y, s = ops.add_layer_norm(x, r, [h], w, b)
        assert torch.equal(s, x + r)
        close(y, F.layer_norm(s.float(), [h], w.float(), b.float()))
        y, s = ops.add_rms_norm(x, r, [h], None, 1e-6)
        assert torch.equal(s, x + r)
        close(y, F.rms_norm(s.float(), [h], None, 1e-6))
    planned = len(cm.PLANS)
    assert planned >= 8
    for _ in range(2):
        with pytest.raises(TypeError, match="weight is float16, the input bfloat16"):
            ops.rms_norm(x, [h], w.half())
        with pytest.raises(ValueError, match="normalized_shape \\[7\\] is not the last dims"):
            ops.layer_norm(x, [7])
        with pytest.raises(ValueError, match="residual \\[3, 2, 300\\] bfloat16 and input \\[2, 3, 300\\] bfloat16 differ"):
            ops.add_rms_norm(x, r.reshape(3, 2, h), [h])
    assert len(cm.PLANS) == planned
    xt = torch.randn(h, 4).bfloat16().T  # (not contiguous)
    close(ops.layer_norm(xt, [h], w, b), F.layer_norm(xt.float(), [h], w.float(), b.float()))
    close(ops.layer_norm(xt, [h], w, b), F.layer_norm(xt.float(), [h], w.float(), b.float()))
    assert ops.rms_norm(torch.empty(0, h).bfloat16(), [h], w).shape == (0, h)


def test_layer_norms_with_and_without_the_rows_stats_share_one_tuned_choice():
    """The registered op (under torch.compile and autograd) writes each row's mean and rstd, the
    eager inference call does not: their kernels share the autotuner's choice (one cache key), so
    both reduce a row in the same order and give the same values bit for bit."""
    nm = sys.modules["tirx.ops.norm"]
    for h in (4096, 65536):
        with_stats, without = nm.layer_norm_kernel(h=h, dtype="bfloat16", stats=True), nm.layer_norm_kernel(h=h, dtype="bfloat16", stats=False)
        assert with_stats is not without and with_stats.cache_key == without.cache_key


def test_a_cluster_is_tuned_only_for_wide_rows(monkeypatch):
    """The cluster configurations apply from `CLUSTER_MIN` columns, where a slice fits the
    CTA's registers: none at 4,096; at 262,144 bfloat16 only eight CTAs of 512 threads; slices
    in shared memory where they tile the row and fit `SLICE_SHARED_MAX` (clusters of 8 or 16 at
    262,144); none on a target without clusters (an Ampere GPU: the row kernels
    still tune there)."""
    sm = sys.modules["tirx.ops.softmax"]
    c = sys.modules["tirx.ops._common"]

    def clusters(n, shared=False, tuner=sm.softmax_kernel):
        kept = tuner.prune([dict(cfg) for cfg in tuner.configs], dtype="bfloat16", n=n, log=False)
        return [(cfg["threads"], cfg["cluster"]) for cfg in kept if cfg.get("cluster") and cfg.get("shared", False) == shared]

    assert clusters(4096) == [] and clusters(c.CLUSTER_MIN - 8) == [] and clusters(4096, True) == []
    assert clusters(262144) == [(512, 8)] and clusters(262144, True) == [(256, 8), (256, 16), (512, 8), (512, 16)]
    assert (1024, 2) not in clusters(65536) and (512, 2) in clusters(65536)
    assert clusters(65536 + 4096, True) == [(256, 2)]  # 69,632 = 4,096 * 17: no other split tiles it
    assert clusters(262144, True, sm.softmax_backward_kernel) == [(256, 8), (256, 16), (512, 8), (512, 16)]
    assert (256, 16) in clusters(32768, True) and (512, 16) not in clusters(32768, True)  # 16 * 512 * 8 does not divide it
    with pytest.raises(ValueError, match="a slice of 32768 does not fit the registers"):
        sm.softmax_kernel.factory(n=65536, dtype="bfloat16", threads=1024, cluster=2)
    with pytest.raises(ValueError, match=r"the slices must be whole 16-byte vectors of every thread \(8192 divides the row\)"):
        sm.softmax_kernel.factory(n=65536 + 4096, dtype="bfloat16", threads=256, cluster=4, shared=True)
    monkeypatch.setenv("TIRX_TARGET", "sm_80")
    assert clusters(65536) == [] and clusters(262144) == [] and clusters(262144, True) == []
    nb = sys.modules["tirx.ops.norm_backward"].norm_backward_kernel
    kept = nb.prune([dict(cfg) for cfg in nb.configs], dtype="bfloat16", h=65536, centered=False)
    assert kept and not any(cfg.get("cluster") for cfg in kept)


def test_the_norms_wide_ctas_are_tuned_only_where_a_thread_holds_32_columns():
    """The norms' several-rows designs with CTAs of 1,024 threads apply where each thread holds
    `WIDE_CTA_COLUMNS` of a row's columns (262,144 over 8 CTAs), not fewer (over 16 CTAs, or any
    at 65,536: slower than 256 threads on an H200)."""
    nm = sys.modules["tirx.ops.norm"]

    def wide(tuner, h, **key):
        kept = tuner.prune([dict(cfg) for cfg in tuner.configs], dtype="bfloat16", h=h, w_dtype="", residual=True, **key)
        return sorted({cfg["cluster"] for cfg in kept if cfg["threads"] == 1024 and (cfg.get("per_cta", 1) > 1 or cfg.get("persist"))})

    assert wide(nm.layer_norm_kernel, 262144) == [8] and wide(nm.rms_norm_kernel, 262144) == [8]
    assert wide(nm.layer_norm_kernel, 65536) == [] and wide(nm.rms_norm_kernel, 65536) == []


def test_a_stride_one_dim_other_than_the_last():
    """Issue 33 item 1: softmax over any dim of stride 1 (a channels-last tensor's channels, a
    transposed array's rows): read as rows with that dim moved last, the result contiguous as
    PyTorch's; the gradient likewise (its saved output contiguous: a transposing copy)."""
    rng = np.random.default_rng(8)
    base = (rng.standard_normal((2, 4, 5, 6)) * 2).astype(np.float32)
    x = np.moveaxis(np.ascontiguousarray(np.moveaxis(base, 1, -1)), -1, 1)  # dim 1 of stride 1
    assert x.strides[1] == 4
    for log in (False, True):
        y = (ops.log_softmax if log else ops.softmax)(x, 1)
        want = _softmax_ref(x, 1)
        np.testing.assert_allclose(y, np.log(want) if log else want, rtol=1e-5, atol=1e-6)
        assert y.flags["C_CONTIGUOUS"]
    dy = rng.standard_normal(x.shape).astype(np.float32)
    y = ops.softmax(x, 1)
    dyt = np.moveaxis(np.ascontiguousarray(np.moveaxis(dy, 1, -1)), -1, 1)
    got = ops.softmax_backward(dyt, np.moveaxis(np.ascontiguousarray(np.moveaxis(y, 1, -1)), -1, 1), 1)
    want = y * (dy - (dy * y).sum(1, keepdims=True))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    torch = pytest.importorskip("torch")
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        xt = torch.randn(2, 4, 5, 6, device=dev).to(memory_format=torch.channels_last).requires_grad_()
        y = ops.softmax(xt, 1)
        assert y.is_contiguous()
        torch.testing.assert_close(y, torch.softmax(xt.detach(), 1))
        (y * y).sum().backward()
        want = xt.detach().clone().requires_grad_()
        (torch.softmax(want, 1) ** 2).sum().backward()
        torch.testing.assert_close(xt.grad, want.grad, rtol=1e-5, atol=1e-6)


def test_every_shared_slice_configuration_builds():
    """Every shared-memory slice configuration the tuner keeps builds for sm_90a (the pruning
    and the designs agree on which rows split into whole slices) and fits a CTA's 227 KB of
    shared memory: the row ops and the norms' backward over wide rows, every dtype."""
    sm, nm = sys.modules["tirx.ops.softmax"], sys.modules["tirx.ops.norm"]
    nb = sys.modules["tirx.ops.norm_backward"]
    cases = [
        (sm.softmax_kernel, "n", {"log": True}),
        (sm.softmax_backward_kernel, "n", {"log": False}),
        (nm.rms_norm_kernel, "h", {"residual": True}),
        (nm.layer_norm_kernel, "h", {}),
        (nb.norm_backward_kernel, "h", {"centered": True}),
        (nb.norm_backward_kernel, "h", {"centered": True, "saved": True}),
        (nb.norm_backward_kernel, "h", {"centered": False}),
    ]
    built = 0
    for tuner, length, extra in cases:
        for n in (16384, 24576, 65536, 262144):
            for dtype in ("float32", "bfloat16", "float16"):
                key = {length: n, "dtype": dtype, **extra}
                for cfg in tuner.prune([dict(cfg) for cfg in tuner.configs], **key):
                    if cfg.get("shared"):
                        k = tirx.compile(tuner.factory(**key, **cfg), "sm_90a")
                        assert k.meta["dynamic_smem_bytes"] <= 227 * 1024, (key, cfg)
                        built += 1
    assert built > 100
