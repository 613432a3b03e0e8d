"""Kernels on CUDA tensors (docs/python.md §5.2): the same kernels on PyTorch (and CuPy)
tensors give the simulator's results. Skipped without a GPU and PyTorch, except under
TIRX_REQUIRE_GPU=1 (scripts/gpu-test.sh), where a missing GPU is a failure."""

import os

import numpy as np
import pytest

import tirx
from tirx import T, Tx
from tirx.layout import R, S, TileLayout, laneid


def _gpu():
    if os.environ.get("TIRX_DEVICE") == "sim":
        return None
    try:
        import torch
    except ImportError:
        return None
    import tirx.device

    return torch if torch.cuda.is_available() and tirx.device.compute_capability() else None


torch = _gpu()
if torch is None:
    if os.environ.get("TIRX_REQUIRE_GPU") == "1":
        pytest.fail("TIRX_REQUIRE_GPU=1 but no GPU with PyTorch", pytrace=False)
    pytest.skip("needs a GPU and PyTorch", allow_module_level=True)


def make_scale(rows, cols, dtype, factor):
    lay = TileLayout(S[(32, cols) : (1 @ laneid, 1)])

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, cols), dtype)
        B = T.match_buffer(B_ptr, (rows, cols), dtype)
        T.device_entry()
        bx = T.cta_id([rows // 32])
        T.lane_id([32])
        T.thread_id([32])
        R = T.alloc_local((32, cols), dtype, layout=lay)
        Tx.warp.copy(R[:, :], A[bx * 32 : bx * 32 + 32, :])
        Tx.warp.mul(R[:, :], R[:, :], T.float32(factor) if dtype == "float32" else T.float16(factor))
        Tx.warp.copy(B[bx * 32 : bx * 32 + 32, :], R[:, :])

    return kernel


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_torch_tensors_match_the_simulator(dtype):
    k = tirx.compile(make_scale(256, 8, dtype, 1.5))
    a = torch.randn(256, 8, device="cuda").to(getattr(torch, dtype))
    b = torch.zeros_like(a)
    k(a, b)
    a_np, b_np = a.cpu().numpy(), np.zeros((256, 8), dtype)
    k(a_np, b_np)
    np.testing.assert_array_equal(b.cpu().numpy(), b_np)


def test_launches_follow_the_current_stream():
    k = tirx.compile(make_scale(256, 8, "float32", 2.0))
    s = torch.cuda.Stream()
    a = torch.randn(256, 8, device="cuda")
    b = torch.zeros_like(a)
    s.wait_stream(torch.cuda.current_stream())  # (a and b are filled on the default stream)
    with torch.cuda.stream(s):
        k(a, b)  # queued on s
        c = b * 1  # ordered after the launch on the same stream
    s.synchronize()
    torch.testing.assert_close(c, a * 2)


def test_launches_from_a_thread_without_a_current_context():
    """On a thread with no CUDA context current (PyTorch's autograd runs backward ops on threads of
    its own, which may have none), a launch binds the device's context before it encodes its TMA
    descriptors and launches: the same values as on the thread that loaded the kernel."""
    import ctypes
    import threading

    import tirx.ops

    a, b = (torch.randn(*shape, device="cuda", dtype=torch.bfloat16) for shape in ((300, 200), (200, 136)))
    want = tirx.ops.matmul(a, b)  # tuned and loaded here
    a2 = a.clone()  # a new pointer: its tensor maps are encoded on the other thread
    torch.empty_like(want)  # (a cached block for the output there: no allocation binds a context)
    torch.cuda.synchronize()
    cuda = ctypes.CDLL("libcuda.so.1")
    result = {}

    def launch():
        try:
            assert cuda.cuCtxSetCurrent(None) == 0
            result["out"] = tirx.ops.matmul(a2, b)
            torch.cuda.synchronize()
        except Exception as e:  # raised on the test's thread below
            result["error"] = e

    t = threading.Thread(target=launch)
    t.start()
    t.join()
    if "error" in result:
        raise result["error"]
    assert torch.equal(result["out"], want)


def test_argument_checks_are_python_exceptions():
    k = tirx.compile(make_scale(256, 8, "float32", 2.0))
    a = torch.randn(256, 8, device="cuda")
    with pytest.raises(TypeError, match="float32"):
        k(a.half(), a)
    with pytest.raises(ValueError, match="shape"):
        k(a[:128], a)
    with pytest.raises(ValueError, match="contiguous"):
        k(a.t().contiguous().t(), a)
    with pytest.raises(ValueError, match="on the CPU"):
        k(a, a.cpu())
    flat = torch.randn(256 * 8 + 1, device="cuda")
    with pytest.raises(ValueError, match="not on 16 bytes"):  # (a view of a flat buffer: its vectors would fault)
        k(flat[1:].view(256, 8), a)


def test_ops_take_views_that_start_off_16_bytes():
    """A view of a flat buffer at an offset (a flat parameter's slice) as an op's input: copied
    to an aligned array, not launched to fault."""
    import tirx.ops as ops

    F = torch.nn.functional
    flat = torch.randn(64 * 1000 + 3, device="cuda", dtype=torch.bfloat16)
    x, w = flat[1 : 1 + 64 * 1000].view(64, 1000), flat[2 : 2 + 1000]
    assert x.data_ptr() % 16 and w.data_ptr() % 16
    torch.testing.assert_close(ops.softmax(x, -1), F.softmax(x.float(), -1).bfloat16(), rtol=2**-7, atol=1e-5)
    torch.testing.assert_close(ops.rms_norm(x, [1000], w, 1e-6).float(), F.rms_norm(x.float(), [1000], w.float(), 1e-6), rtol=2**-7, atol=2**-7)
    # (a shifted label vector, int64 at 8 bytes past 16)
    labels = torch.randint(0, 1000, (65,), device="cuda")
    torch.testing.assert_close(ops.cross_entropy(x, labels[1:]).float(), F.cross_entropy(x.float(), labels[1:]), rtol=2**-7, atol=2**-7)
    # The plans (per call signature, launched unchecked) of matmul and attention: an aligned call
    # of the same shapes first, then the offset views (the signature tells them apart).
    a, b = flat[1 : 1 + 64 * 256].view(64, 256), flat[5000 : 5000 + 256 * 128].view(256, 128)
    ref = (a.float() @ b.float()).bfloat16()
    torch.testing.assert_close(ops.matmul(a.clone(), b.clone()), ref, rtol=2**-7, atol=2**-6)
    torch.testing.assert_close(ops.matmul(a, b), ref, rtol=2**-7, atol=2**-6)
    q = flat[3 : 3 + 2 * 4 * 100 * 64].view(2, 4, 100, 64)
    want = F.scaled_dot_product_attention(q.float(), q.float(), q.float(), is_causal=True)
    torch.testing.assert_close(ops.scaled_dot_product_attention(q.clone(), q.clone(), q.clone(), is_causal=True).float(), want, rtol=2**-6, atol=2**-6)
    torch.testing.assert_close(ops.scaled_dot_product_attention(q, q, q, is_causal=True).float(), want, rtol=2**-6, atol=2**-6)


def test_matmul_times_split_k_beside_one_kernel_where_tiles_leave_sms_idle(tmp_path, monkeypatch):
    """A shape whose 128 x 128 tiles leave the last round part idle (97 tiles) on the GPU: the
    first call times split-K (`matmul.split_ways`) beside the one-kernel choice and keeps one
    (`autotune.choose`, kept per shape); matmul and addmm with an activation against PyTorch."""
    import sys

    import tirx.ops as ops

    at = sys.modules["tirx.autotune"]
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_memory", {})
    monkeypatch.setattr(sys.modules["tirx.ops.matmul"], "_SPLIT_CHOICES", {})
    m, n, k = 100, 12344, 2048
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if not sys.modules["tirx.ops.matmul"].split_ways(m, n, k, "bfloat16", sms):
        pytest.skip(f"no split-K among the choices on {sms} SMs")
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / 32
    bias = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    want = a.float() @ b.float()
    torch.testing.assert_close(ops.matmul(a, b).float(), want, rtol=2**-7, atol=2**-6)
    assert [key for key in at._memory if "|choice|" in key], "the split-K choice was not made"
    got = ops.addmm(bias, a, b, activation="relu")
    torch.testing.assert_close(got.float(), torch.relu(want + bias.float()), rtol=2**-7, atol=2**-6)


def test_cupy_arrays():
    cupy = pytest.importorskip("cupy")
    k = tirx.compile(make_scale(256, 8, "float32", 3.0))
    a = cupy.random.rand(256, 8, dtype=cupy.float32)
    b = cupy.zeros_like(a)
    k(a, b)
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_allclose(cupy.asnumpy(b), cupy.asnumpy(a) * 3, rtol=1e-6)


def test_dlpack_capsule_producers():
    k = tirx.compile(make_scale(256, 8, "float32", 0.5))

    class OnlyDlpack:  # an array library known to tirx only through DLPack
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    a = torch.randn(256, 8, device="cuda")
    b = torch.zeros_like(a)
    k(OnlyDlpack(a), OnlyDlpack(b))
    torch.cuda.synchronize()
    torch.testing.assert_close(b, a * 0.5)


@T.prim_func
def scale_n(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, alpha: T.float32):
    A = T.match_buffer(A_ptr, (n, 8), "float32")
    B = T.match_buffer(B_ptr, (n, 8), "float32")
    T.assume(n % 32 == 0)
    T.device_entry()
    bx = T.cta_id([n // 32])
    T.lane_id([32])
    T.thread_id([32])
    R = T.alloc_local((32, 8), "float32", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
    Tx.warp.copy(R[0:32, 0:8], A[bx * 32 : bx * 32 + 32, 0:8])
    Tx.warp.mul(R[0:32, 0:8], R[0:32, 0:8], alpha)
    Tx.warp.copy(B[bx * 32 : bx * 32 + 32, 0:8], R[0:32, 0:8])


def test_scalar_arguments_and_a_run_time_grid_on_the_gpu():
    k = tirx.compile(scale_n)
    for n, alpha in ((64, 0.5), (320, -1.25)):
        a = torch.randn(n, 8, device="cuda")
        b = torch.zeros_like(a)
        k(a, b, n, alpha)
        torch.cuda.synchronize()
        assert torch.equal(b, a * alpha), n
    with pytest.raises(tirx.TirxError, match="launch check `n % 32 == 0` fails with n = 40"):
        a = torch.zeros(40, 8, device="cuda")
        k(a, torch.zeros_like(a), 40, 1.0)


def test_resident_ctas_come_from_the_driver_occupancy():
    """A persistent grid's size: the CTAs the GPU holds at once, whole clusters where the GPCs
    fit them (a CTA of 140+ KB: one per SM at most, fewer where a GPC's SMs are not whole
    clusters of 8)."""
    import sys

    import tirx.ops  # noqa: F401

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    k = tirx.compile(scale_n)
    n = k.resident_ctas()
    assert k.cluster_size == 1 and n % sms == 0 and 1 <= n // sms <= 32, n  # as many on every SM, 32 at most
    nb = sys.modules["tirx.ops.norm_backward"]
    big = tirx.compile(nb.norm_backward_kernel.factory(h=65536, dtype="bfloat16", centered=True, threads=256, cluster=8, shared=True))
    n = big.resident_ctas()
    assert big.cluster_size == 8 and n % 8 == 0 and 0 < n <= sms, n


def test_clusters_of_16_ctas_launch_and_match_pytorch():
    """Hopper's non-portable cluster size: the runtime opts a kernel of 16-CTA clusters in when
    it loads it (a launch fails without), the occupancy counts whole clusters of 16, and the
    designs' values match PyTorch (softmax, its backward, RMSNorm and the norms' backward)."""
    import sys

    import tirx.ops  # noqa: F401

    sm, nm, nb = (sys.modules[f"tirx.ops.{m}"] for m in ("softmax", "norm", "norm_backward"))
    n, m = 65536, 37
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    dy = torch.randn_like(x)
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    design = dict(threads=256, cluster=16, shared=True)
    k = tirx.compile(sm.softmax_kernel.factory(n=n, dtype="bfloat16", **design))
    assert k.cluster_size == 16 and k.resident_ctas() % 16 == 0 and k.resident_ctas() > 0
    y = torch.empty_like(x)
    k(x, y, m)
    torch.testing.assert_close(y, torch.softmax(x.float(), -1).bfloat16())
    dx = torch.empty_like(x)
    tirx.compile(sm.softmax_backward_kernel.factory(n=n, dtype="bfloat16", **design))(y, dy, dx, m)
    yf = y.float()
    torch.testing.assert_close(dx, (yf * (dy.float() - (dy.float() * yf).sum(-1, keepdim=True))).bfloat16(), rtol=2**-7, atol=1e-6)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", **design))(x, w, y, m, 1e-6)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x.float(), [n], w.float(), 1e-6).bfloat16())
    kb = tirx.compile(nb.norm_backward_kernel.factory(h=n, dtype="bfloat16", ring=1, **design))
    ctas = kb.resident_ctas() // 16 * 16
    dwp = torch.zeros(ctas, nb._padded(n), device="cuda")
    kb(x, w, dy, dx, dwp, dwp, m, ctas, 1e-6)
    xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
    torch.nn.functional.rms_norm(xr, [n], wr, 1e-6).backward(dy.float())
    torch.testing.assert_close(dx.float(), xr.grad, rtol=2**-7, atol=2**-7 * xr.grad.abs().max().item())
    torch.testing.assert_close(dwp.sum(0)[:n], wr.grad, rtol=1e-4, atol=1e-3 * wr.grad.abs().max().item())


@pytest.mark.parametrize("n,threads,group,prefetch", [(262144, 512, 32, False), (262144, 512, 32, True), (65536, 256, 8, False), (33001, 512, 8, True)])
def test_layer_norm_over_a_group_of_a_cooperative_grid_matches_pytorch(n, threads, group, prefetch):
    """Issue 33's design under measurement on the GPU (`layer_norm_grid_kernel`): a cooperative
    launch of as many groups as the device holds, rows through global memory's exchange at the
    grid group barrier, against PyTorch, twice (the barrier words are left as the next launch
    needs them); a grid larger than the device holds at once is refused at the launch, naming
    the fix."""
    import sys

    import tirx.ops  # noqa: F401

    nm = sys.modules["tirx.ops.norm"]
    # (the kernel's registers, so the CTAs resident, may change with its number of groups)
    groups, k = 1 << 30, tirx.compile(nm.layer_norm_grid_kernel(n, "bfloat16", threads, group, 1, prefetch))
    while k.resident_ctas() // group < groups:
        groups = k.resident_ctas() // group
        k = tirx.compile(nm.layer_norm_grid_kernel(n, "bfloat16", threads, group, groups, prefetch))
    assert k.meta["cooperative"]
    m = 3 * groups + 1
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    part = torch.zeros(2 * groups * group, 2, device="cuda")
    words = torch.zeros(groups, device="cuda", dtype=torch.int32)
    want = torch.nn.functional.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5).bfloat16()
    for _ in range(2):
        y = torch.empty_like(x)
        k(x, w, b, y, part, words, m, 1e-5)
        torch.testing.assert_close(y, want)
    too_many = groups + k.resident_ctas() // group + 1
    big = tirx.compile(nm.layer_norm_grid_kernel(n, "bfloat16", threads, group, too_many, prefetch))
    with pytest.raises(tirx.TirxError, match="must be resident at once"):
        big(x, w, b, y, torch.zeros(2 * too_many * group, 2, device="cuda"), torch.zeros(too_many, device="cuda", dtype=torch.int32), m, 1e-5)
        torch.cuda.synchronize()


@pytest.mark.parametrize("n,cluster,per_cta,threads", [(65536, 8, 2, 256), (262144, 16, 4, 256), (262144, 16, 8, 1024)])
def test_norms_over_several_rows_per_cluster_match_pytorch(n, cluster, per_cta, threads):
    """The norms' cluster designs over several rows per cluster (the weight's and bias's slices
    copied once, a ring of two rows, the statistics exchanged over slots used in turn), on the
    GPU: rms_norm and layer_norm (with its statistics) against PyTorch, the last cluster's rows
    fewer than ``per_cta``."""
    import sys

    import tirx.ops  # noqa: F401

    nm = sys.modules["tirx.ops.norm"]
    m = 4 * per_cta + 1
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    design = dict(threads=threads, cluster=cluster, shared=True, per_cta=per_cta)
    y = torch.empty_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", **design))(x, w, y, m, 1e-6)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x.float(), [n], w.float(), 1e-6).bfloat16())
    mean, rstd = torch.empty(m, device="cuda"), torch.empty(m, device="cuda")
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype="bfloat16", stats=True, **design))(x, w, b, y, mean, rstd, m, 1e-5)
    want, want_mean, want_rstd = torch.ops.aten.native_layer_norm(x.float(), [n], w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y, want.bfloat16())
    torch.testing.assert_close(mean, want_mean[:, 0])
    torch.testing.assert_close(rstd, want_rstd[:, 0])


@pytest.mark.parametrize("n,cluster", [(65536, 4), (262144, 16)])
def test_rms_norm_one_row_weight_in_registers_matches_pytorch(n, cluster):
    """RMSNorm's one-row cluster design with its weight's slice read into registers with the
    row's (``weight_regs``), on the GPU: rms_norm and add_rms_norm against PyTorch."""
    import sys

    import tirx.ops  # noqa: F401

    nm = sys.modules["tirx.ops.norm"]
    m = 5
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    r = torch.randn_like(x)
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    design = dict(threads=256, cluster=cluster, shared=True, weight_regs=True)
    y, summed = torch.empty_like(x), torch.empty_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", **design))(x, w, y, m, 1e-6)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(x.float(), [n], w.float(), 1e-6).bfloat16())
    tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", residual=True, **design))(x, r, w, y, summed, m, 1e-6)
    want_h = (x.float() + r.float()).bfloat16()
    torch.testing.assert_close(summed, want_h, rtol=0, atol=0)
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(want_h.float(), [n], w.float(), 1e-6).bfloat16())


@pytest.mark.parametrize(
    "n,cluster,per_cta,affine_regs", [(262144, 16, 4, 1), (262144, 16, 8, 2), (65536, 4, 3, 2), (65536, 4, 1, 2), (262144, 16, 1, 2)]
)
def test_layer_norm_several_rows_affine_in_registers_matches_pytorch(n, cluster, per_cta, affine_regs):
    """LayerNorm's several-rows cluster design with its bias (1), or bias and weight (2), read into
    registers while each row's moments travel, on the GPU: the output, mean and rstd against
    PyTorch, and add_layer_norm's, the last cluster's rows fewer than ``per_cta``; ``per_cta`` 1:
    the one-row design, its bias and weight read with the row's slice."""
    import sys

    import tirx.ops  # noqa: F401

    nm = sys.modules["tirx.ops.norm"]
    m = 3 * per_cta + 2
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    r = torch.randn_like(x)
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    design = dict(threads=256, cluster=cluster, shared=True, per_cta=per_cta, affine_regs=affine_regs)
    y, mean, rstd = torch.empty_like(x), torch.empty(m, device="cuda"), torch.empty(m, device="cuda")
    tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype="bfloat16", stats=True, **design))(x, w, b, y, mean, rstd, m, 1e-5)
    want, want_mean, want_rstd = torch.ops.aten.native_layer_norm(x.float(), [n], w.float(), b.float(), 1e-5)
    torch.testing.assert_close(y, want.bfloat16())
    torch.testing.assert_close(mean, want_mean[:, 0])
    torch.testing.assert_close(rstd, want_rstd[:, 0])
    summed = torch.empty_like(x)
    k = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype="bfloat16", residual=True, stats=True, **design))
    k(x, r, w, b, y, summed, mean, rstd, m, 1e-5)
    want_h = (x.float() + r.float()).bfloat16()
    torch.testing.assert_close(summed, want_h, rtol=0, atol=0)
    torch.testing.assert_close(y, torch.nn.functional.layer_norm(want_h.float(), [n], w.float(), b.float(), 1e-5).bfloat16())


@pytest.mark.parametrize(
    "n,cluster,threads,once,pipe",
    [
        (262144, 8, 512, True, False),
        (262144, 16, 256, False, False),
        (65536, 8, 512, True, False),
        (262144, 16, 512, True, True),
        (262144, 8, 512, True, True),
        (65536, 8, 512, True, True),
        (262144, 8, 1024, True, False),  # (32 warps: `cta_moments` over lanes)
        (262144, 8, 1024, True, True),
        (262144, 16, 1024, True, True),
    ],
)
def test_layer_norm_persistent_rows_per_cluster_matches_pytorch(n, cluster, threads, once, pipe):
    """LayerNorm's several-rows cluster design over the rows per cluster that spread them over
    the clusters the GPU holds at once (``persist``: the tuner's launch arguments,
    `_common.persist_args`), the bias and weight read into registers once or each row, the next
    row's moments sent before a row's output (``pipe``) or not, on the GPU: the output, mean and
    rstd against PyTorch, and add_layer_norm's, for a row count that leaves the last cluster
    fewer rows, and one of fewer rows than clusters."""
    import sys

    import tirx.ops  # noqa: F401

    nm, cm = sys.modules["tirx.ops.norm"], sys.modules["tirx.ops._common"]
    design = dict(threads=threads, cluster=cluster, shared=True, persist=True, affine_regs=2, affine_once=once, pipe=pipe)
    stats = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype="bfloat16", stats=True, **design))
    add = tirx.compile(nm.layer_norm_kernel.factory(h=n, dtype="bfloat16", residual=True, stats=True, **design))
    clusters = stats.resident_ctas() // cluster
    for m in (3 * clusters + 2, clusters - 1):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
        r = torch.randn_like(x)
        w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
        b = torch.randn(n, device="cuda", dtype=torch.bfloat16)
        y, mean, rstd = torch.empty_like(x), torch.empty(m, device="cuda"), torch.empty(m, device="cuda")
        args = cm.persist_args(stats, (x, w, b, y, mean, rstd, m, 1e-5))
        assert args[-1] == -(-m // clusters)
        stats(*args)
        want, want_mean, want_rstd = torch.ops.aten.native_layer_norm(x.float(), [n], w.float(), b.float(), 1e-5)
        torch.testing.assert_close(y, want.bfloat16())
        torch.testing.assert_close(mean, want_mean[:, 0])
        torch.testing.assert_close(rstd, want_rstd[:, 0])
        summed = torch.empty_like(x)
        add(*cm.persist_args(add, (x, r, w, b, y, summed, mean, rstd, m, 1e-5)))
        want_h = (x.float() + r.float()).bfloat16()
        torch.testing.assert_close(summed, want_h, rtol=0, atol=0)
        torch.testing.assert_close(y, torch.nn.functional.layer_norm(want_h.float(), [n], w.float(), b.float(), 1e-5).bfloat16())
    if n == 262144 and once and not pipe:  # the op where the tuner takes this design (H200), eager and compiled
        compiled = torch.compile(lambda x: tirx.ops.layer_norm(x, [n], w, b, 1e-5), fullgraph=True)
        want = torch.nn.functional.layer_norm(x.float(), [n], w.float(), b.float(), 1e-5).bfloat16()
        for f in (lambda x: tirx.ops.layer_norm(x, [n], w, b, 1e-5), compiled):
            torch.testing.assert_close(f(x), want)


@pytest.mark.parametrize(
    "n,cluster,threads,pipe",
    [(262144, 16, 1024, False), (262144, 8, 256, False), (65536, 8, 256, False), (262144, 16, 1024, True), (65536, 8, 256, True)],
)
def test_rms_norm_persistent_rows_per_cluster_matches_pytorch(n, cluster, threads, pipe):
    """RMSNorm's several-rows cluster design over the rows per cluster that spread them over the
    clusters the GPU holds at once (``persist``, `_common.persist_args`), the next row's sum sent
    before a row's output (``pipe``) or not, on the GPU: rms_norm and add_rms_norm against
    PyTorch, for a row count that leaves the last cluster fewer rows, and one of fewer rows than
    clusters."""
    import sys

    import tirx.ops  # noqa: F401

    nm, cm = sys.modules["tirx.ops.norm"], sys.modules["tirx.ops._common"]
    design = dict(threads=threads, cluster=cluster, shared=True, persist=True, pipe=pipe)
    plain = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", **design))
    add = tirx.compile(nm.rms_norm_kernel.factory(h=n, dtype="bfloat16", residual=True, **design))
    clusters = plain.resident_ctas() // cluster
    for m in (3 * clusters + 2, clusters - 1):
        x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
        r = torch.randn_like(x)
        w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
        y, summed = torch.empty_like(x), torch.empty_like(x)
        args = cm.persist_args(plain, (x, w, y, m, 1e-6))
        assert args[-1] == -(-m // clusters)
        plain(*args)
        torch.testing.assert_close(y, torch.nn.functional.rms_norm(x.float(), [n], w.float(), 1e-6).bfloat16())
        add(*cm.persist_args(add, (x, r, w, y, summed, m, 1e-6)))
        want_h = (x.float() + r.float()).bfloat16()
        torch.testing.assert_close(summed, want_h, rtol=0, atol=0)
        torch.testing.assert_close(y, torch.nn.functional.rms_norm(want_h.float(), [n], w.float(), 1e-6).bfloat16())


@pytest.mark.parametrize(
    "design",
    [
        {"threads": 256, "cluster": 8, "chain": True},
        {"threads": 256, "cluster": 16, "shared": True, "ring": 1, "chain": True},
        {"threads": 256, "cluster": 8, "shared": True, "hold": True, "chain": True},
        {"threads": 256, "cluster": 8, "stream": True, "chain": True},
        {"threads": 256, "cluster": 16, "shared": True, "regs": True, "ring": 3, "chain": True},
        {"threads": 512, "cluster": 8, "shared": True, "regs": True, "chain": True},
        {"threads": 256, "cluster": 16, "shared": True, "regs": True, "ring": 3, "chain": True, "pipe": True},
        {"threads": 256, "cluster": 4, "shared": True, "regs": True, "chain": True, "w32": True},
    ],
    ids=["registers", "shared", "held", "streamed", "partials-in-registers", "partials-in-registers-512", "pipelined", "weight-float32"],
)
def test_exchanges_without_a_cluster_barrier_per_row_match_pytorch(design):
    """The norms' backward with its row statistics exchanged over slots used in turn, no cluster
    barrier per row (`chain`), on the GPU: RMSNorm's and LayerNorm's (from
    the forward's saved statistics) dx and dW (dB) against PyTorch, on a persistent grid whose
    clusters take several rows each."""
    import sys

    import tirx.ops  # noqa: F401

    nb = sys.modules["tirx.ops.norm_backward"]
    n = 262144 if design.get("stream") or design.get("ring") == 3 else 65536 if design.get("shared") else 16384
    m = 61
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16) * 2 + 1
    dy = torch.randn_like(x)
    w = torch.rand(n, device="cuda", dtype=torch.bfloat16) + 0.5
    for centered in (False, True):
        k = tirx.compile(nb.norm_backward_kernel.factory(h=n, dtype="bfloat16", centered=centered, saved=centered, **design))
        ctas = min(k.resident_ctas(), 2 * k.cluster_size * 4) // k.cluster_size * k.cluster_size
        dwp = torch.zeros(ctas, nb._padded(n), device="cuda")
        dbp = torch.zeros_like(dwp)
        dx = torch.empty_like(x)
        xr, wr = x.float().requires_grad_(), w.float().requires_grad_()
        if centered:
            var, mean = torch.var_mean(x.float(), -1, correction=0)
            k(x, w, dy, dx, dwp, dbp, m, ctas, mean, torch.rsqrt(var + 1e-5))
            torch.nn.functional.layer_norm(xr, [n], wr, None, 1e-5).backward(dy.float())
        else:
            k(x, w, dy, dx, dwp, dbp, m, ctas, 1e-5)
            torch.nn.functional.rms_norm(xr, [n], wr, 1e-5).backward(dy.float())
        torch.testing.assert_close(dx.float(), xr.grad, rtol=2**-7, atol=2**-7 * xr.grad.abs().max().item())
        used = ctas // k.cluster_size
        torch.testing.assert_close(dwp[:used].sum(0)[:n], wr.grad, rtol=1e-4, atol=1e-3 * wr.grad.abs().max().item())
        if centered:
            torch.testing.assert_close(dbp[:used].sum(0)[:n], dy.float().sum(0), rtol=1e-4, atol=1e-3)


def make_activation(op, rows, cols, dtype, **params):
    lay = TileLayout(S[(32, cols) : (1 @ laneid, 1)])
    call = getattr(Tx.warp, op)

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle):
        A = T.match_buffer(A_ptr, (rows, cols), dtype)
        B = T.match_buffer(B_ptr, (rows, cols), dtype)
        T.device_entry()
        bx = T.cta_id([rows // 32])
        T.lane_id([32])
        T.thread_id([32])
        R = T.alloc_local((32, cols), dtype, layout=lay)
        Tx.warp.copy(R[:, :], A[bx * 32 : bx * 32 + 32, :])
        call(R[:, :], R[:, :], **params)
        Tx.warp.copy(B[bx * 32 : bx * 32 + 32, :], R[:, :])

    return kernel


ACTIVATIONS = [
    ("tanh", {}, lambda x: torch.tanh(x)),
    ("sigmoid", {}, lambda x: torch.sigmoid(x)),
    ("softplus", {}, lambda x: torch.nn.functional.softplus(x)),
    ("softplus", {"beta": 2.0, "threshold": 10.0}, lambda x: torch.nn.functional.softplus(x, 2.0, 10.0)),
    ("erf", {}, lambda x: torch.erf(x)),
    ("gelu", {}, lambda x: torch.nn.functional.gelu(x)),
    ("gelu", {"approximate": "tanh"}, lambda x: torch.nn.functional.gelu(x, approximate="tanh")),
]


@pytest.mark.parametrize("op,params,ref", ACTIVATIONS)
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_activations_match_pytorch_and_the_simulator(op, params, ref, dtype):
    """On [-6, 6]: f32 results within docs/numerics.md §2's bounds of the f64 function
    (4 ulps, plus up to 50 for the gelu forms at x = -6), and every type within two
    of its own ulps of PyTorch's same-typed result."""
    k = tirx.compile(make_activation(op, 256, 8, dtype, **params))
    tdt = getattr(torch, dtype)
    a = (torch.linspace(-6, 6, 256 * 8, device="cuda").reshape(256, 8)).to(tdt)
    b = torch.zeros_like(a)
    k(a, b)
    want64 = ref(a.double())
    if dtype == "float32":
        rel = 2.0**-23 * (4 + (50 if op == "gelu" else 0))
        torch.testing.assert_close(b.double(), want64, rtol=rel, atol=1e-30)
    eps = torch.finfo(tdt).eps
    torch.testing.assert_close(b.double(), ref(a).double(), rtol=2 * eps, atol=2 * eps)


def test_exp2_on_the_fma_pipe_is_the_simulators_bit_for_bit():
    """`exp2(..., ftz=True, pipe="fma")` (docs/numerics.md: FlashAttention-4's cubic, each step
    one IEEE-rounded instruction) gives the simulator's bits on the GPU, over [-140, 140], the
    clamp's and the flush's edges, infinities and NaN."""
    k = tirx.compile(make_activation("exp2", 512, 8, "float32", ftz=True, pipe="fma"))
    edges = [float("-inf"), float("inf"), float("nan"), 0.0, -0.0, -126.0, -126.5, -127.0, -127.5, -149.0, 127.0, 127.49, 127.5, 128.0, 1e-30, -1e-30, 0.5, -0.5]
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(512 * 8, generator=gen, dtype=torch.float32) * 280 - 140
    x[: len(edges)] = torch.tensor(edges)
    a = x.reshape(512, 8).cuda()
    b = torch.zeros_like(a)
    k(a, b)
    want = np.zeros((512, 8), np.float32)
    k(a.cpu().numpy(), want)
    got = b.cpu().numpy()
    nan = np.isnan(want)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(got.view(np.uint32)[~nan], want.view(np.uint32)[~nan])


def make_nan_reductions(dtype):
    """Row max through shared memory, row min through registers and shuffles, and an
    elementwise maximum, of a (4, 32) tile."""
    rows = TileLayout(S[(4, 32) : (1, 1 @ laneid)])

    @T.prim_func
    def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, D_ptr: T.handle):
        A = T.match_buffer(A_ptr, (4, 32), dtype)
        B = T.match_buffer(B_ptr, (4,), dtype)
        C = T.match_buffer(C_ptr, (4,), dtype)
        D = T.match_buffer(D_ptr, (4, 32), dtype)
        T.device_entry()
        T.cta_id([1])
        T.warp_id([1])
        T.lane_id([32])
        T.thread_id([32])
        A_s = T.alloc_shared((4, 32), dtype)
        B_s = T.alloc_shared((4,), dtype)
        Tx.cta.copy(A_s[0:4, 0:32], A[0:4, 0:32])
        T.cuda.cta_sync()
        Tx.cta.max(B_s[0:4], A_s[0:4, 0:32])
        T.cuda.cta_sync()
        Tx.cta.copy(B[0:4], B_s[0:4])
        X = T.alloc_local((4, 32), dtype, layout=rows)
        M = T.alloc_local((4,), dtype, layout=TileLayout(S[4:1] + R[32 : 1 @ laneid]))
        Tx.warp.copy(X[0:4, 0:32], A[0:4, 0:32])
        Tx.warp.min(M[0:4], X[0:4, 0:32])
        Tx.warp.copy(C[0:4], M[0:4])
        Tx.warp.maximum(X[0:4, 0:32], X[0:4, 0:32], 0.5)
        Tx.warp.copy(D[0:4, 0:32], X[0:4, 0:32])

    return kernel


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_max_and_min_propagate_nan_as_pytorch_does(dtype):
    """docs/numerics.md §6: rows holding a NaN reduce to NaN on the shared and the
    register path, and the elementwise maximum propagates it, as torch.amax,
    torch.amin and torch.maximum do."""
    k = tirx.compile(make_nan_reductions(dtype))
    tdt = getattr(torch, dtype)
    a = torch.randn(4, 32, device="cuda").to(tdt)
    a[0, :] = float("nan")
    a[1, 17] = float("nan")
    a[3, :] = float("-inf")
    a[3, 3] = float("nan")
    b, c, d = torch.zeros(4, device="cuda", dtype=tdt), torch.zeros(4, device="cuda", dtype=tdt), torch.zeros_like(a)
    k(a, b, c, d)
    exact = {"equal_nan": True, "rtol": 0, "atol": 0}
    torch.testing.assert_close(b, a.amax(dim=1), **exact)
    torch.testing.assert_close(c, a.amin(dim=1), **exact)
    torch.testing.assert_close(d, torch.maximum(a, torch.tensor(0.5, dtype=tdt, device="cuda")), **exact)


def test_work_buffers_per_stream_and_in_cuda_graphs():
    """Split-KV's partial outputs and split-K's cluster parts live in work buffers per stream
    (`_common.scratch`): calls in turn on one stream reuse them, a second stream has its own,
    and a CUDA graph captures buffers of its own; every result is the reference's."""
    import tirx.ops as ops

    torch.manual_seed(0)
    F = torch.nn.functional
    b, h, hk, d, cache = 1, 32, 8, 128, 8192  # (8 K/V heads of one sequence: split over the keys)
    kc, vc = (torch.randn(b, cache, hk, d, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    lens = torch.full((b,), cache, dtype=torch.int32, device="cuda")
    m, n, k = 128, 4096, 4096  # (32 tiles of 128 x 128: the tuner takes K over a cluster's CTAs on an H100 or H200)
    w = torch.randn(k, n, device="cuda", dtype=torch.bfloat16) / 64

    def both(q, x):
        return ops.kvcache_attention(q, kc, vc, lens), ops.matmul(x, w)

    def check(q, x, got):
        want = F.scaled_dot_product_attention(q.transpose(1, 2), kc.transpose(1, 2), vc.transpose(1, 2), enable_gqa=True).transpose(1, 2)
        torch.testing.assert_close(got[0], want, atol=2e-3, rtol=2e-2)
        torch.testing.assert_close(got[1].float(), (x.double() @ w.double()).float(), atol=2e-2, rtol=2e-2)

    inputs = [(torch.randn(b, 1, h, d, device="cuda", dtype=torch.bfloat16), torch.randn(m, k, device="cuda", dtype=torch.bfloat16)) for _ in range(4)]
    for q, x in inputs[:2]:  # one stream, in turn
        check(q, x, both(q, x))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # another stream, its own buffers
        got = both(*inputs[2])
    torch.cuda.current_stream().wait_stream(side)
    check(*inputs[2], got)
    q_in, x_in = (t.clone() for t in inputs[0])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = both(q_in, x_in)
    for q, x in inputs[1:]:
        q_in.copy_(q)
        x_in.copy_(x)
        g.replay()
        check(q, x, got)
        check(q, x, both(q, x))  # (eager calls between replays)


def test_norms_without_parameters_per_stream_and_in_cuda_graphs():
    """An absent weight's ones and bias's zeros are kept filled vectors per stream
    (`_common.constant_vector`): calls in turn, on a second stream, inside a captured CUDA graph
    (its own, not kept) and the backward all match PyTorch's norms without parameters."""
    import tirx.ops as ops

    F = torch.nn.functional
    xs = [torch.randn(64, 3000, device="cuda", dtype=torch.bfloat16) for _ in range(3)]

    def check(x, got):
        torch.testing.assert_close(got[0].float(), F.layer_norm(x.float(), [3000]), rtol=2**-7, atol=2**-6)
        torch.testing.assert_close(got[1].float(), F.rms_norm(x.float(), [3000], eps=1e-6), rtol=2**-7, atol=2**-6)

    def both(x):
        return ops.layer_norm(x, [3000]), ops.rms_norm(x, [3000], None, 1e-6)

    for x in xs:
        check(x, both(x))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        got = both(xs[1])
    torch.cuda.current_stream().wait_stream(side)
    check(xs[1], got)
    x_in = xs[0].clone()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        got = both(x_in)
    for x in xs[1:]:
        x_in.copy_(x)
        g.replay()
        check(x, got)
        check(x, both(x))
    # (a random upstream gradient: the sum of a normalised row's squares is constant, its
    # gradient zero up to rounding, which no tolerance relative to it could check)
    dy = torch.randn(64, 3000, device="cuda")
    xr = xs[2].clone().requires_grad_()
    (ops.layer_norm(xr, [3000]).float() * dy).sum().backward()
    xf = xs[2].float().requires_grad_()
    (F.layer_norm(xf, [3000]) * dy).sum().backward()
    torch.testing.assert_close(xr.grad.float(), xf.grad, rtol=2**-6, atol=2**-6)


def test_norm_plans_on_cuda_tensors_match_pytorch():
    """The norms' and cross_entropy's eager plans (one per call signature) on CUDA tensors: each
    call of one signature with new operands gets its own result, on another stream and replayed
    from a CUDA graph, against PyTorch; absent parameters as the per-stream constants."""
    import tirx.ops as ops

    F = torch.nn.functional
    h = 4096
    w, b = torch.rand(h, device="cuda", dtype=torch.bfloat16) + 0.5, torch.randn(h, device="cuda", dtype=torch.bfloat16)
    calls = {
        "rms_norm": (lambda x, r: ops.rms_norm(x, [h], w, 1e-6), lambda x, r: F.rms_norm(x.float(), [h], w.float(), 1e-6)),
        "rms_norm without a weight": (lambda x, r: ops.rms_norm(x, [h]), lambda x, r: F.rms_norm(x.float(), [h], None, 2.0**-7)),
        "layer_norm": (lambda x, r: ops.layer_norm(x, [h], w, b), lambda x, r: F.layer_norm(x.float(), [h], w.float(), b.float())),
        "add_rms_norm": (lambda x, r: ops.add_rms_norm(x, r, [h], w, 1e-6)[0], lambda x, r: F.rms_norm((x + r).float(), [h], w.float(), 1e-6)),
        "add_layer_norm": (lambda x, r: ops.add_layer_norm(x, r, [h], None, b)[0], lambda x, r: F.layer_norm((x + r).float(), [h], None, b.float())),
    }
    inputs = [(torch.randn(3, 5, h, device="cuda", dtype=torch.bfloat16), torch.randn(3, 5, h, device="cuda", dtype=torch.bfloat16)) for _ in range(3)]
    for name, (mine, want) in calls.items():
        for x, r in inputs + inputs[::-1]:
            torch.testing.assert_close(mine(x, r).float(), want(x, r), rtol=2.0**-7, atol=2.0**-6, msg=name)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            on_side = mine(*inputs[1])
        torch.cuda.current_stream().wait_stream(side)
        torch.testing.assert_close(on_side.float(), want(*inputs[1]), rtol=2.0**-7, atol=2.0**-6, msg=name)
        static = tuple(t.clone() for t in inputs[0])
        mine(*static)  # (warm: the tuner's choice made outside the capture)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = mine(*static)
        for x, r in inputs:
            static[0].copy_(x)
            static[1].copy_(r)
            g.replay()
            torch.testing.assert_close(out.float(), want(x, r), rtol=2.0**-7, atol=2.0**-6, msg=name)
    logits, t = torch.randn(300, 32000, device="cuda", dtype=torch.bfloat16) * 3, torch.randint(0, 32000, (300,), device="cuda")
    for _ in range(2):
        logits.normal_()
        t[::5] = -100
        torch.testing.assert_close(ops.cross_entropy(logits, t).double(), F.cross_entropy(logits.double(), t), rtol=2**-7, atol=1e-5)


def _producer_and_dependent(n: int):
    """A producer that lets the next kernel in at its start, spins, then writes X = S + 1; and a
    dependent (`T.ptx.griddepcontrol.wait()`: launched to start early) that reads X after its
    wait into Y = 2 X."""

    @T.prim_func
    def producer(S_ptr: T.handle, X_ptr: T.handle):
        S = T.match_buffer(S_ptr, (n,), "float32")
        X = T.match_buffer(X_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([n // 128])
        tid = T.thread_id([128])
        acc = T.alloc_buffer((1,), "float32", scope="local")
        T.ptx.griddepcontrol.launch_dependents()
        acc[0] = 0.0
        for i in T.serial(20000):  # (about 0.1 ms: the dependent's CTAs start meanwhile)
            acc[0] = acc[0] * 0.5 + 1.0
        X[bx * 128 + tid] = S[bx * 128 + tid] + 1.0 + T.min(acc[0], 0.0)

    @T.prim_func
    def dependent(X_ptr: T.handle, Y_ptr: T.handle):
        X = T.match_buffer(X_ptr, (n,), "float32")
        Y = T.match_buffer(Y_ptr, (n,), "float32")
        T.device_entry()
        bx = T.cta_id([n // 128])
        tid = T.thread_id([128])
        T.ptx.griddepcontrol.wait()
        Y[bx * 128 + tid] = X[bx * 128 + tid] * 2.0

    return tirx.compile(producer), tirx.compile(dependent)


def test_a_dependent_kernel_waits_for_the_kernel_before_it():
    """Programmatic dependent launch on PyTorch's stream: the dependent starts while the producer
    spins, and its wait still gives it the producer's X — eagerly and replayed from a CUDA graph."""
    n = 132 * 128
    producer, dependent = _producer_and_dependent(n)
    s, x, y = (torch.zeros(n, device="cuda") for _ in range(3))
    for r in range(4):
        s.fill_(float(r))
        producer(s, x)
        dependent(x, y)
        torch.testing.assert_close(y, torch.full_like(y, 2.0 * (r + 1)), rtol=0, atol=0)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        producer(s, x)
        dependent(x, y)
    for r in range(4, 8):
        s.fill_(float(r))
        y.zero_()
        g.replay()
        torch.testing.assert_close(y, torch.full_like(y, 2.0 * (r + 1)), rtol=0, atol=0)
