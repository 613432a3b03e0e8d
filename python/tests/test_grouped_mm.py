"""`tirx.ops.grouped_mm` (issue 32 item 4): torch._grouped_mm's mixture-of-experts form, the groups'
rows in one matrix and a matrix per group, against float64 in the simulator (empty groups, groups
smaller than a tile, ragged N and K, rows past the last group, race-checked), its errors, the
registered op under torch.compile on CPU tensors, and on the GPU against torch._grouped_mm."""

import importlib

import numpy as np
import pytest

import planting
import tirx
import tirx.ops
from tirx.runtime import numpy_dtype

F64 = np.float64


def reference(a, b, offs):
    want = np.zeros((a.shape[0], b.shape[2]))
    start = 0
    for g, end in enumerate(offs):
        want[start:end] = a[start:end].astype(F64) @ b[g].astype(F64)
        start = end
    return want


def torch_reference(a, b, offs):
    """`reference` on torch tensors, differentiable (rows outside every group 0)."""
    import torch

    parts, start = [], 0
    for g, end in enumerate(offs.tolist()):
        parts.append(a[start:end] @ b[g])
        start = end
    parts.append(a.new_zeros(a.shape[0] - start, b.shape[2]))
    return torch.cat(parts)


@pytest.mark.parametrize("column_major", [False, True])
@pytest.mark.parametrize(
    "sizes,spare,k,n,dtype",
    [
        ([70, 0, 5, 130, 64], 3, 200, 136, "bfloat16"),  # an empty group, a group of 5 rows, N past whole tiles, K ragged
        ([1, 1, 1], 0, 64, 128, "float16"),
        ([300], 10, 512, 256, "bfloat16"),  # one group (a plain GEMM), stages wrapping over K
        ([0, 0], 7, 64, 64, "bfloat16"),  # no rows at all: zeros
    ],
)
def test_matches_float64(sizes, spare, k, n, dtype, column_major):
    """b row-major, or column-major (torch._grouped_mm's layout: read K-major in place)."""
    nd = numpy_dtype(dtype)
    rng = np.random.default_rng(sum(sizes) + k)
    tm = sum(sizes) + spare
    a = rng.standard_normal((tm, k)).astype(nd)
    b = rng.standard_normal((len(sizes), k, n)).astype(nd)
    offs = np.cumsum(sizes).astype(np.int32)
    if column_major:
        b = np.swapaxes(np.ascontiguousarray(np.swapaxes(b, 1, 2)), 1, 2)
    out = tirx.ops.grouped_mm(a, b, offs)
    want = reference(a, b, offs)
    assert out.dtype == nd and out.shape == (tm, n)
    t = 2.0**-7 if dtype == "bfloat16" else 2.0**-10
    np.testing.assert_allclose(out.astype(F64), want, rtol=t, atol=t * max(1.0, np.abs(want).max()) / 8)
    assert not out[offs[-1] :].any()  # rows past the last group


GROUPED = importlib.import_module("tirx.ops.grouped_mm")


@pytest.mark.parametrize("cfg", GROUPED.CONFIGS, ids=lambda c: f"{c['consumers']}x{c['bn']}")
@pytest.mark.parametrize("fp8", [False, True], ids=["bf16", "fp8-promoted"])
def test_every_tile_configuration(cfg, fp8):
    """Each tile configuration the tuner may pick, two persistent CTAs walking several tiles each
    (the stage ring running on across tiles, each tile's group found by binary search, groups
    empty, smaller than a tile and spanning several), against float64; FP8 promoted in tiles of
    128 columns."""
    if fp8 and cfg["bn"] > 128:
        pytest.skip("promoted FP8: tiles of 128 columns")
    dtype = "float8_e4m3fn" if fp8 else "bfloat16"
    nd = numpy_dtype(dtype)
    rng = np.random.default_rng(cfg["bn"] + cfg["consumers"])
    sizes, k, n = [200, 0, 3, 0, 140, 70], 272 if fp8 else 200, 264
    tm = sum(sizes) + 5
    a = rng.standard_normal((tm, k)).astype(nd)
    b = rng.standard_normal((len(sizes), n, k)).astype(nd)  # (K-major: b column-major per group)
    offs = np.cumsum(sizes).astype(np.int32)
    kw = dict(groups=len(sizes), n=n, k=k, dtype=dtype, ctas=2, b_kmajor=True, **cfg)
    out = np.full((tm, n), np.nan, numpy_dtype("bfloat16"))  # (every row written: the last 5 zeros)
    want = reference(a, np.swapaxes(b, 1, 2), offs)
    if fp8:
        kern = tirx.compile(GROUPED.grouped_mm_kernel.factory(out_dtype="bfloat16", fast_accum=False, **kw))
        kern(a, b, np.ones((tm, 1), np.float32), np.ones((len(sizes), n), np.float32), offs, out, tm)
    else:
        tirx.compile(GROUPED.grouped_mm_kernel.factory(**kw))(a, b, offs, out, tm)
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)
    assert not out[-5:].any()


@pytest.mark.parametrize(
    "old,new,words",
    [
        ("group_of[cw, r % 2] = grp[0]", "group_of[cw, 0] = grp[0]", "race"),
        (
            "                            if r * kt_steps + kt >= stages:\n                                empty.wait(",
            "                            if r * kt_steps + kt >= stages + 1000000:\n                                empty.wait(",
            "race",
        ),
    ],
    ids=["one group slot for every round", "stages refilled without waiting for their release"],
)
def test_planted_grouped_mistakes_are_reported(old, new, words, tmp_path):
    """The persistent kernel's orderings, each broken, reported by the simulator: the tile's group
    in one shared slot (the next round's write races with this round's reads), a stage reloaded
    before the consumers release it."""
    planted = planting.planted(GROUPED, old, new, tmp_path)
    nd = numpy_dtype("bfloat16")
    sizes = [100, 30, 200]
    tm, k, n = sum(sizes), 256, 128
    a, b = np.ones((tm, k), nd), np.ones((len(sizes), k, n), nd)
    offs = np.cumsum(sizes).astype(np.int32)
    kern = tirx.compile(planted.grouped_mm_kernel.factory(groups=3, n=n, k=k, dtype="bfloat16", ctas=2, consumers=1, bn=128), "sm_90a")
    with pytest.raises(tirx.TirxError, match=words):
        kern(a, b, offs, np.zeros((tm, n), nd), tm)


@pytest.mark.parametrize("fast_accum", [False, True])
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_scaled_fp8_matches_float64(dtype, fast_accum):
    """FP8 (torch._scaled_grouped_mm's row-wise scales): b column-major per group, read in place;
    an empty group, a group smaller than a tile, N past whole tiles, K over several 128-steps
    (promoted to float32 one at a time unless fast_accum); bf16 out against the float64 product
    of the FP8 values and the scales."""
    nd = numpy_dtype(dtype)
    rng = np.random.default_rng(11)
    sizes, k, n = [70, 0, 5, 130], 384, 144
    tm = sum(sizes) + 3
    a = rng.standard_normal((tm, k)).astype(nd)
    b = np.swapaxes(rng.standard_normal((len(sizes), n, k)).astype(nd), 1, 2)  # (groups, k, n) column-major
    offs = np.cumsum(sizes).astype(np.int32)
    sa = (rng.random(tm) + 0.5).astype(np.float32)
    sb = (rng.random((len(sizes), n)) + 0.5).astype(np.float32)
    out = tirx.ops.scaled_grouped_mm(a, b, sa, sb, offs, use_fast_accum=fast_accum)
    want = reference(a, b, offs) * sa[:, None]
    start = 0
    for g, end in enumerate(offs):
        want[start:end] *= sb[g]
        start = end
    assert out.dtype == numpy_dtype("bfloat16") and out.shape == (tm, n)
    np.testing.assert_allclose(out.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max() / 8)
    assert not out[offs[-1] :].astype(F64).any()
    with pytest.raises(ValueError, match="b must be column-major per group"):
        tirx.ops.scaled_grouped_mm(a, np.ascontiguousarray(b), sa, sb, offs)
    with pytest.raises(ValueError, match=r"scale_b of shape \[4\] \(float32\); float32 of shape \[4, 144\]"):
        tirx.ops.scaled_grouped_mm(a, b, sa, sb[:, 0], offs)
    with pytest.raises(TypeError, match="FP8: scaled_grouped_mm"):
        tirx.ops.grouped_mm(a, b, offs)


def test_errors():
    nd = numpy_dtype("bfloat16")
    a, b = np.zeros((10, 64), nd), np.zeros((2, 64, 64), nd)
    with pytest.raises(ValueError, match=r"offs must be int32 of shape \[2\]"):
        tirx.ops.grouped_mm(a, b, np.array([3, 10], np.int64))
    with pytest.raises(ValueError, match=r"offs \[5, 3\] must be non-decreasing cumulative ends within a's 10 rows"):
        tirx.ops.grouped_mm(a, b, np.array([5, 3], np.int32))
    with pytest.raises(ValueError, match=r"offs \[5, 11\] must be"):
        tirx.ops.grouped_mm(a, b, np.array([5, 11], np.int32))
    with pytest.raises(NotImplementedError, match="2-D a .total_m, k. of the groups' rows and a 3-D b"):
        tirx.ops.grouped_mm(b, b, np.array([1, 2], np.int32))
    with pytest.raises(ValueError, match="k differs"):
        tirx.ops.grouped_mm(a, np.zeros((2, 32, 64), nd), np.array([5, 10], np.int32))
    with pytest.raises(TypeError, match="both bfloat16 or both float16"):
        tirx.ops.grouped_mm(a.astype(np.float32), b, np.array([5, 10], np.int32))


def test_torch_compile_on_cpu_tensors():
    """The registered ops `torch.ops.tirx.grouped_mm` and `scaled_grouped_mm` under
    torch.compile(fullgraph=True)."""
    torch = pytest.importorskip("torch")
    importlib.import_module("tirx.ops.grouped_mm").register_torch_op()  # (tirx.ops was imported before torch here)
    a = torch.randn(50, 64).bfloat16()
    b = torch.randn(3, 64, 128).bfloat16()
    offs = torch.tensor([20, 20, 45], dtype=torch.int32)
    eager = tirx.ops.grouped_mm(a, b, offs)
    f = torch.compile(lambda a, b: tirx.ops.grouped_mm(a, b, offs) * 2, fullgraph=True)
    torch.testing.assert_close(f(a, b), eager * 2)
    np.testing.assert_allclose(eager.float().numpy(), reference(a.float().numpy(), b.float().numpy(), offs.numpy()), rtol=2.0**-7, atol=0.1)
    # FP8 (`torch.ops.tirx.scaled_grouped_mm`)
    importlib.import_module("tirx.ops.grouped_mm").register_scaled_torch_op()
    a8, b8 = a.to(torch.float8_e4m3fn), torch.randn(3, 128, 64).to(torch.float8_e4m3fn).transpose(1, 2)
    sa, sb = torch.rand(50) + 0.5, torch.rand(3, 128) + 0.5
    eager = tirx.ops.scaled_grouped_mm(a8, b8, sa, sb, offs)
    f = torch.compile(lambda a8, b8: tirx.ops.scaled_grouped_mm(a8, b8, sa, sb, offs) * 2, fullgraph=True)
    torch.testing.assert_close(f(a8, b8), eager * 2)


def test_gradients_match_float64_on_cpu_tensors():
    """`loss.backward()` through grouped_mm (eager and under torch.compile): dA by the grouped
    kernel (B's transpose read in place), dB by `grouped_wgrad_kernel` summed over each group's
    rows (an empty group's 0, rows outside every group 0), b row- or column-major."""
    torch = pytest.importorskip("torch")
    importlib.import_module("tirx.ops.grouped_mm").register_torch_op()  # (tirx.ops was imported before torch here)
    torch.manual_seed(0)
    sizes, k, n = [70, 0, 5, 130], 200, 136
    offs = torch.tensor(np.cumsum(sizes), dtype=torch.int32)
    a0 = torch.randn(sum(sizes) + 3, k).bfloat16()
    b0 = torch.randn(len(sizes), k, n).bfloat16()
    dc = torch.randn(a0.shape[0], n).bfloat16()
    ra, rb = a0.double().requires_grad_(), b0.double().requires_grad_()
    torch_reference(ra, rb, offs).backward(dc.double())
    for column_major in (False, True):
        for fn in (tirx.ops.grouped_mm, torch.compile(tirx.ops.grouped_mm, fullgraph=True)):
            a = a0.clone().requires_grad_()
            b = (b0.transpose(1, 2).contiguous().transpose(1, 2) if column_major else b0.clone()).requires_grad_()
            fn(a, b, offs).backward(dc)
            torch.testing.assert_close(a.grad.double(), ra.grad, rtol=2.0**-6, atol=2.0**-6 * ra.grad.abs().max().item())
            torch.testing.assert_close(b.grad.double(), rb.grad, rtol=2.0**-6, atol=2.0**-6 * rb.grad.abs().max().item())
            assert not b.grad[1].any() and not a.grad[offs[-1] :].any()


@pytest.mark.parametrize(
    "old,new,words",
    [
        (
            "accum=True)\n            T.ptx.wgmma.wait_group(0)\n        Tx.warpgroup.cast(out",
            "accum=True)\n        T.ptx.wgmma.wait_group(0)\n        Tx.warpgroup.cast(out",
            "which a wgmma.mma_async of warpgroup 0 still reads (it has not been waited for)",
        ),
        ("            T.ptx.fence.proxy.async_.shared__cta()\n            T.cuda.cta_sync()\n            Tx.warpgroup.gemm_async(acc", "            T.cuda.cta_sync()\n            Tx.warpgroup.gemm_async(acc", "generic proxy"),
    ],
    ids=["tiles rewritten before the wgmma that reads them is waited for", "tiles written without the proxy fence"],
)
def test_planted_wgrad_mistakes_are_reported(old, new, words, tmp_path):
    """The weight-gradient kernel's wait and fence, each misplaced or removed, reported by the
    simulator (its tiles are rewritten after each thread's own wait_group: no barrier needed there)."""
    import re

    planted = planting.planted(importlib.import_module("tirx.ops.grouped_mm"), old, new, tmp_path)
    nd = numpy_dtype("bfloat16")
    a, d = np.ones((150, 64), nd), np.ones((150, 128), nd)
    offs = np.array([150], np.int32)
    with pytest.raises(tirx.TirxError, match=re.escape(words)):
        tirx.compile(planted.grouped_wgrad_kernel.factory(groups=1, k=64, n=128, dtype="bfloat16"), "sm_90a")(a, d, offs, np.zeros((1, 64, 128), nd), 150)


def test_on_the_gpu_against_torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a GPU")
    sizes = [0, 1, 100, 777, 64, 3000, 5, 0]
    a = torch.randn(sum(sizes) + 9, 2048, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(len(sizes), 2048, 1400, device="cuda", dtype=torch.bfloat16)
    offs = torch.tensor(np.cumsum(sizes), dtype=torch.int32, device="cuda")
    bt = b.transpose(-2, -1).contiguous().transpose(-2, -1)  # (torch._grouped_mm's b: column-major)
    want = torch._grouped_mm(a, bt, offs=offs)
    got, got_t = tirx.ops.grouped_mm(a, b, offs), tirx.ops.grouped_mm(a, bt, offs)
    n = int(offs[-1])
    torch.testing.assert_close(got[:n].float(), want[:n].float(), rtol=2.0**-7, atol=0.25)
    torch.testing.assert_close(got_t, got)
    assert (got[n:] == 0).all()
    # FP8 with row-wise scales, against torch._scaled_grouped_mm (where this PyTorch has it)
    if hasattr(torch, "_scaled_grouped_mm"):
        a8 = a.to(torch.float8_e4m3fn)
        b8 = torch.randn(len(sizes), 1408, 2048, device="cuda").to(torch.float8_e4m3fn).transpose(-2, -1)  # column-major
        sa = torch.rand(a8.shape[0], device="cuda") + 0.5
        sb = torch.rand(len(sizes), 1408, device="cuda") + 0.5
        exact = torch.zeros(a8.shape[0], 1408, device="cuda", dtype=torch.float64)
        start = 0
        for g, end in enumerate(offs.tolist()):
            exact[start:end] = (a8[start:end].double() @ b8[g].double()) * sa[start:end, None].double() * sb[g].double()
            start = end
        got = tirx.ops.scaled_grouped_mm(a8, b8, sa, sb, offs)
        theirs = torch._scaled_grouped_mm(a8[:n], b8, sa[:n], sb, offs=offs, out_dtype=torch.bfloat16)
        ours_err = (got[:n].double() - exact[:n]).abs().max().item()
        their_err = (theirs.double() - exact[:n]).abs().max().item()
        assert ours_err <= max(their_err, 2.0**-6 * exact.abs().max().item()), (ours_err, their_err)
    # the backward (dA by the grouped kernel, dB by the weight-gradient kernel) against float64
    ag, bg = a.clone().requires_grad_(), b.clone().requires_grad_()
    dc = torch.randn(a.shape[0], 1400, device="cuda", dtype=torch.bfloat16)
    tirx.ops.grouped_mm(ag, bg, offs).backward(dc)
    ra, rb = a.double().requires_grad_(), b.double().requires_grad_()
    torch_reference(ra, rb, offs).backward(dc.double())
    for mine, r in ((ag.grad, ra.grad), (bg.grad, rb.grad)):
        torch.testing.assert_close(mine.double(), r, rtol=2.0**-6, atol=2.0**-6 * r.abs().max().item())
