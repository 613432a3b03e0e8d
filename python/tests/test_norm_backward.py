"""The norms' backward (issue 33 item 4): `rms_norm_backward` and `layer_norm_backward` (dx,
dweight, dbias; the weight's and bias's sums over rows by per-CTA partial rows and a column-sum
kernel, no atomics) against NumPy in float64 in the simulator, rows in registers and streamed,
fewer rows than CTAs; autograd through the registered ops (rms_norm, layer_norm, add_rms_norm, add_layer_norm),
eager and under torch.compile, against PyTorch's; on the GPU too."""

import sys

import numpy as np
import pytest

import tirx
import tirx.ops as ops
from tirx.runtime import numpy_dtype

F64 = np.float64
nb = sys.modules["tirx.ops.norm_backward"]


def _stats(x, eps):
    """LayerNorm's forward's statistics of rows ``x`` as it saves them: float32 (mean, rstd)."""
    x = x.astype(F64)
    mean = x.mean(-1)
    rstd = 1 / np.sqrt(((x - mean[:, None]) ** 2).mean(-1) + eps)
    return mean.astype(np.float32), rstd.astype(np.float32)


def _ref(x, w, dy, eps, centered):
    x, w, dy = x.astype(F64), w.astype(F64), dy.astype(F64)
    xc = x - (x.mean(-1, keepdims=True) if centered else 0.0)
    rstd = 1 / np.sqrt((xc * xc).mean(-1, keepdims=True) + eps)
    xh, g = xc * rstd, w * dy
    dx = rstd * (g - (g.mean(-1, keepdims=True) if centered else 0.0) - xh * (g * xh).mean(-1, keepdims=True))
    return dx, (dy * xh).reshape(-1, x.shape[-1]).sum(0), dy.reshape(-1, x.shape[-1]).sum(0)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,h", [(7, 1000), (3, 4096), (5, 20000), (9, 5), (1, 300)])
def test_backward_matches_float64(dtype, m, h):
    rng = np.random.default_rng(h)
    x = (rng.standard_normal((m, h)) * 2 + 1).astype(numpy_dtype(dtype))
    w = (rng.random(h) + 0.5).astype(x.dtype)
    b = rng.standard_normal(h).astype(x.dtype)
    dy = rng.standard_normal((m, h)).astype(x.dtype)
    # float32 throughout: to float32's rounding; 16-bit: one rounding of dx, dw, db.
    rtol = 1e-5 if dtype == "float32" else 2.0**-7
    for centered in (False, True):
        rdx, rdw, rdb = _ref(x, w, dy, 1e-5, centered)
        if centered:
            dx, dw, db = ops.layer_norm_backward(dy, x, [h], w, b, 1e-5)
            np.testing.assert_allclose(db.astype(F64), rdb, rtol=rtol, atol=rtol * np.abs(rdb).max())
        else:
            dx, dw = ops.rms_norm_backward(dy, x, [h], w, 1e-5)
        assert dx.dtype == x.dtype and dw.shape == (h,)
        np.testing.assert_allclose(dx.astype(F64), rdx, rtol=rtol, atol=rtol * np.abs(rdx).max())
        np.testing.assert_allclose(dw.astype(F64), rdw, rtol=rtol, atol=rtol * np.abs(rdw).max())


@pytest.mark.parametrize("centered", [False, True])
def test_streamed_and_more_ctas_than_rows(centered):
    """The streamed design forced at a row of three tiles, the partial sums in shared memory and
    in global memory (the first row of a CTA starting them), and a grid with more CTAs than rows
    (zero partials); LayerNorm's also from saved statistics."""
    h, m = 2 * 256 * 32 + 100, 6
    rng = np.random.default_rng(1)
    x = rng.standard_normal((m, h)).astype(np.float32)
    w = (rng.random(h) + 0.5).astype(np.float32)
    dy = rng.standard_normal((m, h)).astype(np.float32)
    rdx, rdw, rdb = _ref(x, w, dy, 1e-6, centered)
    runs = [(4, True, 0), (8, True, 0), (4, True, 1 << 20), (8, True, 1 << 20), (8, False, 0)]
    for (ctas, stream, limit), saved in [(r, False) for r in runs] + ([(r, True) for r in runs[1:3]] if centered else []):
        k = tirx.compile(
            nb.norm_backward_kernel.factory(h=h, dtype="float32", threads=256, centered=centered, saved=saved, stream=stream, shared_limit=limit)
        )
        hp = nb._padded(h)
        dx = np.zeros_like(x)
        dwp, dbp = np.full((ctas, hp), np.nan, np.float32), np.full((ctas, hp), np.nan, np.float32)
        k(x, w, dy, dx, dwp, dbp, m, ctas, *(_stats(x, 1e-6) if saved else (1e-6,)))
        np.testing.assert_allclose(dx, rdx, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(dwp.sum(0)[:h], rdw, rtol=1e-5, atol=1e-4)
        if centered:
            np.testing.assert_allclose(dbp.sum(0)[:h], rdb, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_streamed_layer_norm_statistics_in_one_pass(dtype):
    """LayerNorm's streamed backward over whole tiles takes its statistics in one pass: each
    thread's mean, squared deviations, sum(g) and sum(g (x - mean)) combined tile by tile about
    its running mean, then over the threads about the row's (Chan et al.): a row shifted far
    from 0 (mean 300, deviation 1) loses nothing to cancellation (against float64)."""
    h, m, ctas = 4 * 64 * 32, 5, 4  # four tiles of 64 threads x 32
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((m, h)) + 300).astype(numpy_dtype(dtype))
    w = (rng.random(h) + 0.5).astype(x.dtype)
    dy = rng.standard_normal((m, h)).astype(x.dtype)
    k = tirx.compile(nb.norm_backward_kernel.factory(h=h, dtype=dtype, threads=64, centered=True, stream=True))
    dx = np.zeros_like(x)
    dwp, dbp = np.full((ctas, h), np.nan, np.float32), np.full((ctas, h), np.nan, np.float32)
    k(x, w, dy, dx, dwp, dbp, m, ctas, 1e-5)
    rdx, rdw, rdb = _ref(x, w, dy, 1e-5, True)
    rtol = 1e-4 if dtype == "float32" else 2.0**-7
    np.testing.assert_allclose(dx.astype(F64), rdx, rtol=rtol, atol=rtol * np.abs(rdx).max())
    np.testing.assert_allclose(dwp.sum(0), rdw, rtol=1e-4, atol=1e-4 * np.abs(rdw).max())
    np.testing.assert_allclose(dbp.sum(0), rdb, rtol=1e-5, atol=1e-5 * np.abs(rdb).max())


# (design, h, m, ctas): the streamed design; the prefetching design with CTAs of several rows, one, and none; the
# cluster design (16 CTAs: four clusters of 4, two of 8) over slices that tile the row (the next
# row prefetched) and ragged ones (9,000; 4,100 over eight slices of 1,024+, the last ones empty);
# the slices in shared memory in rings of 1-4 rows, re-read in each pass or held in registers
# (`hold`), or streamed through register tiles twice (partial sums in shared or global memory). No
# barrier guards the rings: the race check proves each thread reads only its copies.
DESIGNS = [
    ({"stream": True, "threads": 64}, 4096, 5, 4),  # a CTA per row of two tiles: LayerNorm's dB in registers
    ({"stream": True, "threads": 64}, 4096, 2, 4),  # (CTAs with no row)
    ({"prefetch": True}, 2048, 7, 3),
    ({"prefetch": True}, 2048, 2, 4),
    ({"prefetch": True}, 2048, 9, 4),
    ({"cluster": 4}, 8192, 7, 16),
    ({"cluster": 4}, 9000, 5, 16),
    ({"cluster": 2}, 8192, 3, 16),
    ({"cluster": 8}, 4100, 6, 16),
    ({"cluster": 4, "shared": True, "threads": 32}, 4096, 7, 16),
    ({"cluster": 2, "shared": True, "threads": 64}, 8192, 5, 16),
    ({"cluster": 8, "shared": True, "threads": 32}, 2048, 3, 16),
    ({"cluster": 4, "shared": True, "threads": 32, "ring": 3}, 4096, 11, 16),
    ({"cluster": 4, "shared": True, "threads": 32, "ring": 1}, 4096, 9, 16),
    ({"cluster": 8, "shared": True, "threads": 32, "ring": 1}, 2048, 1, 16),  # (clusters with no row)
    ({"cluster": 2, "shared": True, "threads": 64, "ring": 4}, 8192, 21, 8),
    ({"cluster": 4, "shared": True, "threads": 32, "hold": True}, 4096, 9, 16),
    ({"cluster": 8, "shared": True, "threads": 32, "hold": True, "ring": 3}, 2048, 20, 16),
    ({"cluster": 16, "shared": True, "threads": 32, "ring": 1}, 8192, 3, 32),  # (Hopper's non-portable cluster)
    ({"cluster": 16, "shared": True, "threads": 32}, 4096, 5, 32),
    ({"cluster": 2, "stream": True, "threads": 32}, 4096, 7, 8),
    ({"cluster": 4, "stream": True, "threads": 32, "shared_limit": 0}, 12288, 6, 16),
    ({"cluster": 2, "stream": True, "threads": 32, "shared_limit": 8192}, 4096, 5, 8),  # LayerNorm's dB in registers
    ({"cluster": 8, "stream": True, "threads": 32, "shared_limit": 0}, 16384, 1, 16),  # a cluster with no row
    ({"cluster": 16, "stream": True, "threads": 32}, 32768, 3, 32),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("design,h,m,ctas", DESIGNS, ids=lambda v: str(v).replace(" ", ""))
def test_prefetching_and_cluster_designs(dtype, design, h, m, ctas):
    """The prefetching design (row i + 1's x and dy copied into a two-row ring in shared memory by
    `cp.async` while row i is computed) and the cluster design for wide rows (a cluster of CTAs
    per row walking the rows, each CTA a slice of x, dy and w and its partial sums in registers,
    one DSMEM exchange of four statistics per row, LayerNorm's combined about the row's mean: a
    shifted row; a partial row per cluster, nothing past them) against float64; LayerNorm also
    from the forward's saved mean and rstd (its two sums in one pass)."""
    for centered, saved in ((False, False), (True, False), (True, True)):
        _check_design(dtype, design, h, m, ctas, centered, saved)


def _check_design(dtype, design, h, m, ctas, centered, saved, w_dtype=""):
    """One design of the backward on ``m`` random rows of ``h`` over ``ctas`` CTAs against
    float64: dx, and dW (dB) summed over its partial rows, nothing written past them (``w_dtype``:
    the weight's, where not the rows')."""
    rng = np.random.default_rng(h + m)
    x = (rng.standard_normal((m, h)) * 2 + 3).astype(numpy_dtype(dtype))
    w = (rng.random(h) + 0.5).astype(numpy_dtype(w_dtype) if w_dtype else x.dtype)
    dy = rng.standard_normal((m, h)).astype(x.dtype)
    rtol = 1e-5 if dtype == "float32" else 2.0**-7
    wd = {"w_dtype": w_dtype} if w_dtype else {}
    k = tirx.compile(nb.norm_backward_kernel.factory(h=h, dtype=dtype, centered=centered, saved=saved, **{"threads": 256, **design}, **wd))
    hp = nb._padded(h)
    dx = np.zeros_like(x)
    dwp, dbp = np.full((ctas, hp), np.nan, np.float32), np.full((ctas, hp), np.nan, np.float32)
    k(x, w, dy, dx, dwp, dbp, m, ctas, *(_stats(x, 1e-5) if saved else (1e-5,)))
    rdx, rdw, rdb = _ref(x, w, dy, 1e-5, centered)
    np.testing.assert_allclose(dx.astype(F64), rdx, rtol=rtol, atol=rtol * np.abs(rdx).max())
    used = nb.partial_rows(design, ctas)  # a cluster's CTAs write one partial row together
    assert np.isnan(dwp[used:]).all() and not np.isnan(dwp[:used]).any()
    np.testing.assert_allclose(dwp[:used].sum(0)[:h], rdw, rtol=1e-5, atol=1e-5 * np.abs(rdw).max())
    if centered:
        np.testing.assert_allclose(dbp[:used].sum(0)[:h], rdb, rtol=1e-5, atol=1e-5 * np.abs(rdb).max())


@pytest.mark.parametrize(
    "design,h,m,ctas",
    [({"threads": 256}, 1000, 3, 4), ({"threads": 128, "tpr": 8}, 256, 37, 4)] + [d for d in DESIGNS if not d[0].get("shared")],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_float32_weights_beside_16_bit_rows(design, h, m, ctas):
    """PyTorch's mixed-precision norms (float32 weight, bfloat16 rows): every design whose weight
    is not a shared-memory slice reads it as float32, against float64; those that keep its slices
    in shared memory (of the rows' dtype) refuse it."""
    for centered, saved in ((False, False), (True, False), (True, True)):
        _check_design("bfloat16", design, h, m, ctas, centered, saved, "float32")


def test_weights_in_shared_memory_are_of_the_rows_dtype():
    with pytest.raises(ValueError, match="not where the weight's slices are in shared memory"):
        nb.norm_backward_kernel.factory(h=4096, dtype="bfloat16", threads=32, cluster=4, shared=True, w_dtype="float32")
    with pytest.raises(ValueError, match=r"w_dtype='float16': the rows' dtype \(bfloat16\) or float32"):
        nb.norm_backward_kernel.factory(h=4096, dtype="bfloat16", threads=256, w_dtype="float16")
    assert all(not cfg.get("shared") for cfg in nb.norm_backward_kernel.prune(nb.norm_backward_kernel.configs, h=65536, dtype="bfloat16", centered=True, w_dtype="float32"))


CHAINED = [
    ({"cluster": 4, "chain": True}, 8192, 7, 16),
    ({"cluster": 4, "shared": True, "threads": 32, "chain": True}, 4096, 9, 16),
    ({"cluster": 4, "shared": True, "threads": 32, "ring": 1, "chain": True}, 4096, 6, 16),
    ({"cluster": 8, "shared": True, "threads": 32, "hold": True, "ring": 3, "chain": True}, 2048, 20, 16),
    ({"cluster": 2, "stream": True, "threads": 32, "chain": True}, 4096, 7, 8),
    ({"cluster": 16, "shared": True, "threads": 32, "ring": 1, "chain": True}, 8192, 1, 32),  # (clusters with no row)
    ({"cluster": 4, "shared": True, "threads": 32, "hold": True, "chain": True}, 4096, 9, 16),
    ({"cluster": 8, "shared": True, "threads": 32, "hold": True, "chain": True}, 4096, 1, 16),  # (clusters with no row)
    # The partial sums in registers (`regs`): slices of one tile, of several, in rings of 1-3 rows.
    ({"cluster": 4, "shared": True, "threads": 32, "regs": True, "chain": True}, 1024, 9, 16),
    ({"cluster": 4, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 3}, 4096, 11, 16),
    ({"cluster": 16, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 1}, 8192, 3, 32),
    ({"cluster": 8, "shared": True, "threads": 32, "regs": True, "chain": True}, 4096, 1, 16),  # (clusters with no row)
    # The weight's slice widened once into shared memory (`w32`): with the partial sums in
    # registers, or in shared memory; a slice of several tiles.
    ({"cluster": 4, "shared": True, "threads": 32, "regs": True, "chain": True, "w32": True}, 4096, 9, 16),
    ({"cluster": 2, "shared": True, "threads": 32, "chain": True, "w32": True}, 2048, 5, 8),
    ({"cluster": 2, "shared": True, "threads": 64, "regs": True, "chain": True, "w32": True}, 2048, 5, 8),
    # The next row's sums sent before this row's dx pass (`pipe`, four slots): rows per cluster
    # 1 to 7, clusters with no row, a slice of several tiles.
    ({"cluster": 4, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 3, "pipe": True}, 4096, 11, 16),
    ({"cluster": 2, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 3, "pipe": True}, 1024, 13, 4),
    ({"cluster": 4, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 3, "pipe": True}, 1024, 4, 16),
    ({"cluster": 8, "shared": True, "threads": 32, "regs": True, "chain": True, "ring": 3, "pipe": True}, 4096, 1, 16),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("design,h,m,ctas", CHAINED, ids=lambda v: str(v).replace(" ", ""))
def test_cluster_designs_exchanging_without_a_cluster_barrier_per_row(dtype, design, h, m, ctas):
    """The cluster designs with the row statistics exchanged over two slots (`chain`,
    `_common.chained_exchange`): no cluster barrier per row, the peers' copies ordered by the
    chain of exchanges (the simulator's race check follows it), against float64: RMSNorm, and
    LayerNorm from the forward's saved statistics; recomputed LayerNorm statistics (four
    values) are refused."""
    for centered in (False, True):
        _check_design(dtype, design, h, m, ctas, centered, centered)
    with pytest.raises(ValueError, match="chain: the exchange of two sums"):
        nb.norm_backward_kernel.factory(h=h, dtype=dtype, centered=True, **{"threads": 256, **design})


def test_partial_sums_in_registers_need_the_shared_slices_and_not_hold():
    """``regs`` keeps the shared-slice design's partial sums in registers: refused without the
    slices in shared memory, and beside ``hold`` (which keeps the slice's one tile there)."""
    with pytest.raises(ValueError, match="regs: the partial sums of the cluster design's slices in shared memory"):
        nb.norm_backward_kernel.factory(h=4096, dtype="bfloat16", threads=32, cluster=4, regs=True)
    with pytest.raises(ValueError, match="regs: the partial sums of every tile in registers"):
        nb.norm_backward_kernel.factory(h=4096, dtype="bfloat16", threads=32, cluster=4, shared=True, hold=True, regs=True)


def test_partial_sums_in_registers_are_candidates_where_they_fit():
    """The ``regs`` designs: tuned where their partial sums fit `PARTIAL_REGISTERS` of a thread's
    registers and their ring of slices and the weight's fit `CLUSTER_SLICES`: at 262,144 columns
    (LayerNorm) over 16 CTAs only, in rings of two or three rows, or of two with the weight's
    slice in float32 (``w32``: 192 KB); not over float32 rows (their weight is float32 already)."""
    kept = nb.norm_backward_kernel.prune(nb.norm_backward_kernel.configs, h=262144, dtype="bfloat16", centered=True, saved=True, w_dtype="")
    regs = sorted((cfg["threads"], cfg["cluster"], cfg.get("ring", 2), cfg.get("w32", False)) for cfg in kept if cfg.get("regs") and not cfg.get("pipe"))
    assert regs == [(256, 16, 2, False), (256, 16, 2, True), (256, 16, 3, False), (512, 16, 2, False), (512, 16, 2, True), (512, 16, 3, False)]
    assert sorted((cfg["threads"], cfg["cluster"]) for cfg in kept if cfg.get("pipe")) == [(256, 16), (512, 16)]
    for t, n, r, w32 in regs:
        assert nb.cluster_slice_bytes(262144, "bfloat16", n, True, r, regs=True, w32=w32) <= nb.CLUSTER_SLICES
        assert nb.partial_registers(262144, t, n, True) <= nb.PARTIAL_REGISTERS * min(255, 65536 // t)
    assert nb.cluster_slice_bytes(262144, "bfloat16", 16, True, 2, regs=True, w32=True) == 192 * 1024
    kept32 = nb.norm_backward_kernel.prune(nb.norm_backward_kernel.configs, h=65536, dtype="float32", centered=True, saved=True, w_dtype="")
    assert not any(cfg.get("w32") for cfg in kept32)


def test_the_op_sums_the_partial_rows_its_design_wrote(monkeypatch, tmp_path):
    """The ops through the cluster design (the tuner made to choose it): its partial rows are
    one per cluster, and the op sums those only (the buffer's other rows are never written)."""
    at = sys.modules["tirx.autotune"]
    tuner = nb.norm_backward_kernel
    monkeypatch.setenv("TIRX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(at, "_memory", {})
    monkeypatch.setattr(tuner, "_tuned", {})
    monkeypatch.setattr(tuner, "_by_call", {})
    monkeypatch.setattr(tuner, "timer", lambda k, args: 0.0 if "__cluster_dims__" in k.cuda_source else 1.0)
    h, m = 16384, 3
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((m, h)) * 2 + 3).astype(np.float32)
    w = (rng.random(h) + 0.5).astype(np.float32)
    dy = rng.standard_normal((m, h)).astype(np.float32)
    dx, dw = ops.rms_norm_backward(dy, x, h, w, 1e-5)
    tuned = tuner(h=h, dtype="float32", centered=False)
    assert tuned.configs[tuned.choice].get("cluster")
    rdx, rdw, _ = _ref(x, w, dy, 1e-5, False)
    np.testing.assert_allclose(dx, rdx, rtol=1e-5, atol=1e-5 * np.abs(rdx).max())
    np.testing.assert_allclose(dw, rdw, rtol=1e-5, atol=1e-5 * np.abs(rdw).max())
    dx, dw, db = ops.layer_norm_backward(dy, x, h, w, w, 1e-5)
    rdx, rdw, rdb = _ref(x, w, dy, 1e-5, True)
    np.testing.assert_allclose(dx, rdx, rtol=1e-5, atol=1e-5 * np.abs(rdx).max())
    np.testing.assert_allclose(dw, rdw, rtol=1e-5, atol=1e-5 * np.abs(rdw).max())
    np.testing.assert_allclose(db, rdb, rtol=1e-5, atol=1e-5 * np.abs(rdb).max())


@pytest.mark.parametrize("span,warps,rows", [(1, 32, 40), (4, 8, 7), (4, 1, 3), (1, 2, 2), (4, 4, 1), (1, 8, 37)])
def test_column_sums_of_every_shape(span, warps, rows):
    """The dW/dB reduction's second pass (`column_sums_kernel`) at each of its shapes against
    NumPy: lanes of one or `SPAN` columns, one to 32 warps, rows not a multiple of the warps (nor
    of their `COLUMN_UNROLL` rows an iteration), columns past h padding (read, then dropped),
    rounded once to the output's dtype; one array, and two in one launch (dW's and dB's), each
    sum the same bits either way."""
    h = 300  # (padded to 512: two CTAs of 256 columns, four of 128)
    rng = np.random.default_rng(rows)
    p = rng.standard_normal((rows, nb._padded(h))).astype(np.float32)
    q = rng.standard_normal((rows, nb._padded(h))).astype(np.float32)
    for dtype in ("float32", "bfloat16"):
        rtol = 1e-6 if dtype == "float32" else 2.0**-8
        o = np.zeros(nb._padded(h), dtype=numpy_dtype(dtype))
        tirx.compile(nb.column_sums_kernel(h, dtype, span, warps))(p, o, rows)
        pair = [np.zeros_like(o), np.zeros_like(o)]
        tirx.compile(nb.column_sums_kernel(h, dtype, span, warps, parts=2))(p, q, *pair, rows)
        np.testing.assert_array_equal(pair[0], o)
        for got, src in ((o, p), (pair[1], q)):
            want = src.astype(F64).sum(0)
            np.testing.assert_allclose(got.astype(F64), want, rtol=rtol, atol=rtol * np.abs(want).max())


def test_column_sums_shape_follows_the_rows_and_the_grid():
    """`column_shape`: warps the partial rows' power of two up to 32; four columns a lane where
    the grid keeps 512 CTAs (262,144 columns: 2,048 CTAs, not 8,192 CTAs of 32 warps over 7 rows)."""
    assert nb.column_shape(262144, 7) == (4, 8)
    assert nb.column_shape(65536, 264) == (4, 32)
    assert nb.column_shape(4096, 1056) == (1, 32)
    assert nb.column_shape(16384, 1) == (1, 1)
    assert nb.column_shape(300, 33) == (1, 32)


def test_ctas_per_sm_falls_with_the_row():
    """Eight CTAs per SM up to 4,096 columns, fewer (their partial rows are traffic) above."""
    assert [nb.ctas_per_sm(h) for h in (256, 4096, 8192, 16384, 65536, 262144)] == [8, 8, 4, 2, 2, 2]


def test_each_design_gets_a_grid_the_gpu_holds_at_once(monkeypatch):
    """The persistent grid per design (`_grid`): at most the partial rows allocated, `ctas_per_sm`
    of its rows or slices per SM, and what the GPU keeps resident (a second wave would double
    the time of its rows), in whole clusters, at least one. A GPU of 132 SMs, faked."""

    class Design:
        def __init__(self, cluster_size, resident):
            self.cluster_size, self._resident = cluster_size, resident

        def resident_ctas(self, device):
            return self._resident

    class X:  # rows of h columns on GPU 0
        def __init__(self, h):
            self.shape = (10**6, h)

        def get_device(self):
            return 0

    monkeypatch.setattr(nb, "_on_gpu", lambda x: True)
    monkeypatch.setattr(sys.modules["tirx.ops._common"], "sm_count", lambda x: 132)
    most = nb._most_ctas(X(65536), 10**6, 65536)
    assert most == 4 * 132  # slices of 8,192 (clusters of 8): 4 per SM
    assert nb._grid(Design(8, 240), X(65536), most) == 240  # resident: 30 clusters of 8
    assert nb._grid(Design(8, 1056), X(65536), most) == 528  # slices of 8,192: 4 per SM
    assert nb._grid(Design(1, 1056), X(65536), most) == 264  # whole rows: 2 per SM
    assert nb._grid(Design(4, 130), X(65536), most) == 128  # whole clusters
    assert nb._grid(Design(8, 5), X(65536), most) == 8  # one cluster at least
    assert nb._grid(Design(16, 396), X(65536), most) == 384  # clusters of 16 (slices of 4,096: 8 per SM)
    assert nb._most_ctas(X(65536), 3, 65536) == 16  # a row or few: one cluster of the largest size
    assert nb._grid(Design(2, 1000), X(256), 40) == 40  # no more than the rows allocated


def test_design_errors():
    with pytest.raises(ValueError, match="hold: a ring of 2-4 rows"):
        nb.norm_backward_kernel.factory(h=16384, dtype="bfloat16", threads=256, cluster=4, shared=True, ring=1, hold=True)
    with pytest.raises(ValueError, match="ring: 5 rows; the cluster design's rings hold 1, 2, 3 or 4"):
        nb.norm_backward_kernel.factory(h=16384, dtype="bfloat16", threads=256, cluster=4, shared=True, ring=5)
    with pytest.raises(ValueError, match="hold: a slice of 16384 is 2 register tiles of 8192; only a slice of one"):
        nb.norm_backward_kernel.factory(h=32768, dtype="bfloat16", threads=256, cluster=2, shared=True, hold=True)
    with pytest.raises(ValueError, match="prefetch: a row of 2000 must be whole 16-byte vectors"):
        nb.norm_backward_kernel.factory(h=2000, dtype="bfloat16", threads=256, prefetch=True)
    with pytest.raises(ValueError, match="a slice of 5000 does not fit the registers"):
        nb.norm_backward_kernel.factory(h=20000, dtype="bfloat16", threads=512, centered=True, cluster=4)
    with pytest.raises(ValueError, match="pipe: the cluster design's regs, chain and a ring of 3 rows"):
        nb.norm_backward_kernel.factory(h=16384, dtype="bfloat16", threads=256, cluster=4, shared=True, regs=True, chain=True, pipe=True)
    for design in ({"cluster": 4}, {"cluster": 4, "shared": True, "hold": True}):
        with pytest.raises(ValueError, match="w32: the weight's slice of the cluster design in shared memory"):
            nb.norm_backward_kernel.factory(h=16384, dtype="bfloat16", threads=256, w32=True, **design)


def test_without_weight_and_errors():
    x = np.random.default_rng(2).standard_normal((3, 64)).astype(np.float32)
    dy = np.ones_like(x)
    dx, dw = ops.rms_norm_backward(dy, x, 64)
    assert dw is None
    np.testing.assert_allclose(dx, _ref(x, np.ones(64), dy, 2.0**-23, False)[0], rtol=1e-5, atol=1e-6)
    dx, dw, db = ops.layer_norm_backward(dy, x, [64])
    assert dw is None and db is None
    with pytest.raises(ValueError, match=r"grad \[3, 32\] float32 and input \[3, 64\] float32 differ"):
        ops.rms_norm_backward(dy[:, :32], x, 64)
    with pytest.raises(ValueError, match=r"normalized_shape \[32\] is not the last dims"):
        ops.layer_norm_backward(dy, x, [32])


# (design, h, m): a CTA per row in registers, streamed over whole tiles (one statistics pass) and
# over a ragged last tile, lane groups (the last group past m), a cluster's slices in registers and
# in shared memory.
FORWARD_DESIGNS = [
    ({"threads": 256}, 1000, 3),
    ({"threads": 64, "stream": True}, 4096, 3),
    ({"threads": 64, "stream": True}, 4196, 2),
    ({"threads": 128, "tpr": 8}, 256, 37),
    ({"threads": 256, "cluster": 4}, 9000, 3),
    ({"threads": 32, "cluster": 4, "shared": True}, 4096, 3),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("design,h,m", FORWARD_DESIGNS, ids=lambda v: str(v).replace(" ", ""))
def test_layer_norm_forward_saves_mean_and_rstd(dtype, design, h, m):
    _forward_design(dtype, design, h, m, "")


@pytest.mark.parametrize("design,h,m", FORWARD_DESIGNS, ids=lambda v: str(v).replace(" ", ""))
def test_forward_designs_read_float32_weights_beside_16_bit_rows(design, h, m):
    """Every LayerNorm and RMSNorm forward design but the several-rows ones reads a float32 weight
    and bias beside bfloat16 rows (PyTorch's mixed-precision norms), against float64."""
    _forward_design("bfloat16", design, h, m, "float32")
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(h)
    x = rng.standard_normal((m, h)).astype(numpy_dtype("bfloat16"))
    w = (rng.random(h) + 0.5).astype(np.float32)
    y = np.zeros_like(x)
    tirx.compile(nm.rms_norm_kernel.factory(h=h, dtype="bfloat16", w_dtype="float32", **design))(x, w, y, m, 1e-6)
    xd = x.astype(F64)
    want = xd / np.sqrt((xd * xd).mean(-1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max())


def _forward_design(dtype, design, h, m, w_dtype):
    """Every LayerNorm forward design with ``stats`` writes each row's float32 mean and rstd (as
    PyTorch's forward saves them for the backward) beside the same output, against float64."""
    nm = sys.modules["tirx.ops.norm"]
    rng = np.random.default_rng(h + m)
    x = (rng.standard_normal((m, h)) * 2 + 30).astype(numpy_dtype(dtype))
    w = (rng.random(h) + 0.5).astype(numpy_dtype(w_dtype) if w_dtype else x.dtype)
    b = rng.standard_normal(h).astype(w.dtype)
    wd = {"w_dtype": w_dtype} if w_dtype else {}
    y, y2 = np.zeros_like(x), np.zeros_like(x)
    mean, rstd = np.full(m, np.nan, np.float32), np.full(m, np.nan, np.float32)
    tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype=dtype, stats=True, **design, **wd))(x, w, b, y, mean, rstd, m, 1e-5)
    tirx.compile(nm.layer_norm_kernel.factory(h=h, dtype=dtype, **design, **wd))(x, w, b, y2, m, 1e-5)
    want_mean, want_rstd = _stats(x, 1e-5)
    np.testing.assert_allclose(mean, want_mean, rtol=1e-6)
    np.testing.assert_allclose(rstd, want_rstd, rtol=1e-5)
    np.testing.assert_array_equal(y, y2)
    if w_dtype:  # (the output against float64: the float32 parameters as they are)
        want = (x.astype(F64) - want_mean[:, None]) * want_rstd[:, None] * w + b
        np.testing.assert_allclose(y.astype(F64), want, rtol=2.0**-7, atol=2.0**-7 * np.abs(want).max())


def test_layer_norm_backward_from_saved_statistics():
    """`layer_norm_backward` takes the forward's mean and rstd (both or neither, float32, one per
    row, any shape of that many: native_layer_norm's (..., 1)) and gives what recomputing them gives."""
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 300)) + 5).astype(np.float32)
    w, b = (rng.random(300) + 0.5).astype(np.float32), rng.standard_normal(300).astype(np.float32)
    dy = rng.standard_normal(x.shape).astype(np.float32)
    mean, rstd = (s.reshape(2, 3, 1) for s in _stats(x.reshape(6, 300), 1e-5))
    got = ops.layer_norm_backward(dy, x, [300], w, b, mean=mean, rstd=rstd)
    want = ops.layer_norm_backward(dy, x, [300], w, b, 1e-5)
    for g, t in zip(got, want):
        np.testing.assert_allclose(g, t, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="give both mean and rstd"):
        ops.layer_norm_backward(dy, x, [300], w, b, mean=mean)
    with pytest.raises(ValueError, match=r"rstd is \[6\] float64; expected float32 with one value per row \(6\)"):
        ops.layer_norm_backward(dy, x, [300], w, b, mean=mean, rstd=rstd.reshape(6).astype(np.float64))
    with pytest.raises(ValueError, match="saved: the forward's statistics are LayerNorm's"):
        nb.norm_backward_kernel.factory(h=300, dtype="float32", threads=64, saved=True)


def test_layer_norm_op_saves_its_statistics_for_the_backward(monkeypatch):
    """The registered layer_norm returns (y, mean, rstd) as native_layer_norm does (the statistics
    not differentiable), and autograd's backward reads them: no second statistics pass."""
    torch = pytest.importorskip("torch")
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    x = (torch.randn(2, 5, 256, device=dev) + 3).requires_grad_()
    w = (torch.rand(256, device=dev) + 0.5).requires_grad_()
    op = sys.modules["tirx.ops.norm"].register_layer_norm_torch_op()  # torch.ops.tirx.layer_norm
    y, mean, rstd = op(x, [256], w, None, 1e-5)
    _, want_mean, want_rstd = torch.ops.aten.native_layer_norm(x.detach(), [256], None, None, 1e-5)
    assert mean.shape == (2, 5, 1) and mean.dtype == torch.float32 and not mean.requires_grad
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(rstd, want_rstd, rtol=1e-5, atol=0)
    seen = []
    run = nb.run
    monkeypatch.setattr(nb, "run", lambda *a: seen.append(a[-1]) or run(*a))
    y.sum().backward()
    assert len(seen) == 1 and seen[0] is not None
    xr, wr = (t.detach().clone().requires_grad_() for t in (x, w))
    torch.nn.functional.layer_norm(xr, [256], wr, None, 1e-5).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(w.grad, wr.grad, rtol=1e-4, atol=1e-4)


def test_autograd_and_compile_against_pytorch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for dev in devices:
        for shape, ns in (((6, 1000), [1000]), ((2, 3, 8, 16), [8, 16])):
            x0 = torch.randn(shape, device=dev) * 2 + 1
            w0 = torch.rand(ns, device=dev) + 0.5
            b0 = torch.randn(ns, device=dev)
            gy = torch.randn(shape, device=dev)

            def grads(f, dtype, bias):
                x, w, b = (t.detach().to(dtype).clone().requires_grad_() for t in (x0, w0, b0))
                b = b if bias else None
                (f(x, w, b).double() * gy.double()).sum().backward()
                return [t.grad.double() for t in (x, w, b) if t is not None]

            cases = (
                (lambda x, w, b: ops.rms_norm(x, ns, w, 1e-6), lambda x, w, b: F.rms_norm(x, ns, w, 1e-6), False),
                (lambda x, w, b: ops.layer_norm(x, ns, w, b, 1e-5), lambda x, w, b: F.layer_norm(x, ns, w, b, 1e-5), True),
            )
            for mine, theirs, bias in cases:
                truth = grads(theirs, torch.float64, bias)
                for g, t in zip(grads(mine, torch.float32, bias), truth):
                    torch.testing.assert_close(g, t, rtol=1e-4, atol=1e-5)
                # bf16: no less accurate than PyTorch's own bf16 backward (1.25x and a floor).
                ours, torchs = grads(mine, torch.bfloat16, bias), grads(theirs, torch.bfloat16, bias)
                for o, p, t in zip(ours, torchs, truth):
                    assert float((o - t).norm() / t.norm()) <= 1.25 * float((p - t).norm() / t.norm()) + 1e-3
        # The fused residual add: both inputs get the norm's gradient plus the residual's.
        x = torch.randn(4, 300, device=dev).requires_grad_()
        r = torch.randn(4, 300, device=dev).requires_grad_()
        w = (torch.rand(300, device=dev) + 0.5).requires_grad_()
        y, h = ops.add_rms_norm(x, r, [300], w, 1e-6)
        (y.sum() * 2 + (h * h).sum()).backward()
        want = [t.detach().clone().requires_grad_() for t in (x, r, w)]
        hh = want[0] + want[1]
        (F.rms_norm(hh, [300], want[2], 1e-6).sum() * 2 + (hh * hh).sum()).backward()
        for got, t in zip((x, r, w), want):
            torch.testing.assert_close(got.grad, t.grad, rtol=1e-5, atol=1e-5)
        # ... and into LayerNorm: dW and dB too, from the forward's saved statistics.
        b = torch.randn(300, device=dev).requires_grad_()
        for t in (x, r, w):
            t.grad = None
        y, h = ops.add_layer_norm(x, r, [300], w, b, 1e-5)
        (y.sum() * 2 + (y * y).sum() + (h * h).sum()).backward()
        want = [t.detach().clone().requires_grad_() for t in (x, r, w, b)]
        hh = want[0] + want[1]
        yy = F.layer_norm(hh, [300], want[2], want[3], 1e-5)
        (yy.sum() * 2 + (yy * yy).sum() + (hh * hh).sum()).backward()
        for got, t in zip((x, r, w, b), want):
            torch.testing.assert_close(got.grad, t.grad, rtol=1e-4, atol=1e-4)
        # torch.compile traces the forward and the registered backward.
        x = (torch.randn(8, 512, device=dev)).requires_grad_()
        w = (torch.rand(512, device=dev) + 0.5).requires_grad_()
        f = torch.compile(lambda x, w: (ops.layer_norm(x, [512], w) ** 2).sum(), fullgraph=True)
        f(x, w).backward()
        xw = [t.detach().clone().requires_grad_() for t in (x, w)]
        (F.layer_norm(xw[0], [512], xw[1]) ** 2).sum().backward()
        torch.testing.assert_close(x.grad, xw[0].grad, rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(w.grad, xw[1].grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("m,h,threads,tpr", [(37, 256, 128, 8), (5, 100, 128, 4), (70, 1000, 256, 32), (3, 16, 128, 2)])
def test_short_rows_in_lane_groups(dtype, m, h, threads, tpr):
    """Short rows in lane groups (the last group past `m`, CTAs without a group): dx, and the
    CTA's row slots summed through shared memory into its partial row, against float64."""
    rng = np.random.default_rng(h)
    x = (rng.standard_normal((m, h)) * 2 + 1).astype(numpy_dtype(dtype))
    w = (rng.random(h) + 0.5).astype(x.dtype)
    dy = rng.standard_normal((m, h)).astype(x.dtype)
    rtol = 1e-5 if dtype == "float32" else 2.0**-7
    for centered, saved in ((False, False), (True, False), (True, True)):
        k = tirx.compile(nb.norm_backward_kernel.factory(h=h, dtype=dtype, threads=threads, tpr=tpr, centered=centered, saved=saved))
        hp = nb._padded(h)
        dx = np.zeros_like(x)
        dwp, dbp = np.zeros((4, hp), np.float32), np.zeros((4, hp), np.float32)
        k(x, w, dy, dx, dwp, dbp, m, 4, *(_stats(x, 1e-5) if saved else (1e-5,)))
        rdx, rdw, rdb = _ref(x, w, dy, 1e-5, centered)
        np.testing.assert_allclose(dx.astype(F64), rdx, rtol=rtol, atol=rtol * np.abs(rdx).max())
        np.testing.assert_allclose(dwp.sum(0)[:h], rdw, rtol=1e-5, atol=1e-5 * np.abs(rdw).max())
        if centered:
            np.testing.assert_allclose(dbp.sum(0)[:h], rdb, rtol=1e-5, atol=1e-5 * np.abs(rdb).max())
