"""`tirx.ops.rms_norm(x, normalized_shape, weight=None, eps=None)` and
`tirx.ops.layer_norm(x, normalized_shape, weight=None, bias=None, eps=1e-5)`: the norms in TIRx,
a CTA or a group of lanes per row, as PyTorch's `torch.nn.functional.rms_norm` (y = x / sqrt(mean(x^2) + eps) *
weight) and `layer_norm` (y = (x - mean) / sqrt(var + eps) * weight + bias, the biased
variance) over the last ``len(normalized_shape)`` dims, computed in float32 and rounded once;
rows of any length.

Each thread holds 16-byte vectors of the row and of the weight in registers, the row padded to
whole vectors of every thread (`clip=True, other=0`: the padding adds nothing to the sum and is
never stored); the sum of squares is a thread-local fold then a CTA reduction (`T.cuda.cta_sum`);
rstd = 1 / sqrt(sum / H + eps) once per row. LayerNorm takes the mean first, then the sum of
squared deviations from it (two passes over the registers, the padding masked out of the
second: no cancellation). A row wider than the registers is streamed in tiles: one pass per
statistic (over whole tiles, LayerNorm's two in one: Chan et al.'s combination, the threads'
merged in one barrier, `_common.cta_moments`), then one that
normalises and writes, last tile first. Short rows are held by lane
groups (`_common.RowGroupTile`; statistics by warp shuffles, the weight and bias by scalar
loads); rows of 16k+ may be split over a cluster of 2-16 CTAs, each a slice in registers
(`_rms_cluster`, `_layer_norm_cluster`) or in shared memory (`_rms_cluster_shared`,
`_layer_norm_cluster_shared`; over several rows per cluster, the weight's and bias's slices
copied once: `_rms_cluster_rows`, `_layer_norm_cluster_rows`), the slices' sums exchanged
through distributed shared memory.
Rows and eps are run-time scalars; the row length and dtype key the kernel, whose design and
thread count are autotuned. LayerNorm's registered op also writes each row's float32 mean and
rstd (``stats``), which its backward reads. The backward: `norm_backward.py`."""

from typing import Callable, List, Optional

import math

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from . import _common as c


# The cluster designs over several rows per cluster (`_rms_cluster_rows`, `_layer_norm_cluster_rows`):
# the weight's (and bias's) slices in shared memory beside a ring of two rows' slices, at most
# this much of it (one CTA per SM or more).
ROWS_SLICES = 200 * 1024
ROWS_CLUSTER_CONFIGS = [{"threads": 256, "cluster": n, "shared": True, "per_cta": r} for n in (4, 8, 16) for r in (2, 4, 8)] + [
    # 32 warps a CTA: add_rms_norm at 262k, 1.14 -> 1.10 ms (H200, two runs)
    {"threads": 1024, "cluster": n, "shared": True, "per_cta": 8}
    for n in (8, 16)
]
# (Two or three rows in flight while one is computed, ``ahead``, did not pay: LayerNorm at 65k,
# H200, 0.555 ms with two against 0.551 with one, the tuner's choice; nor did the persistent
# designs over clusters of 4: 0.562. Neither is a candidate.)
# ... and over as many rows per cluster as spread the rows over the clusters resident at once
# (``persist``, a run-time argument: no last wave of part-empty clusters, and each cluster's
# prologue, the weight slice's copy, once for all its rows).
PERSIST_CLUSTER_CONFIGS = [{"threads": t, "cluster": n, "shared": True, "persist": True} for t in (256, 1024) for n in (8, 16)] + [
    # the next row's sum sent before a row's output pass (``pipe``: a ring of three; add_rms_norm
    # at 262k, H200: 1.115-1.342 ms against 1.088 for the chosen 1,024 threads over 8 CTAs
    # without it; kept for the sizes not yet timed)
    {"threads": t, "cluster": n, "shared": True, "persist": True, "pipe": True}
    for t in (256, 1024)
    for n in (8, 16)
]


# RMSNorm's one-row design with the weight's slice read into registers with the row's slice
# (``weight_regs``; the output pass read it from L2, a tile at a time, after the exchange).
RMS_WEIGHT_CONFIGS = [{"threads": 256, "cluster": n, "shared": True, "weight_regs": True} for n in (4, 8, 16)]


# LayerNorm's designs with its bias (and weight) in registers (``affine_regs``; RMSNorm's weight,
# ``weight_regs``): at most this many registers a thread hold them (two CTAs of 256 threads per
# SM at 128 a thread).
AFFINE_REGISTERS = 64
LAYER_NORM_AFFINE_CONFIGS = [
    {"threads": 256, "cluster": n, "shared": True, "per_cta": 8, "affine_regs": a} for n in (4, 8, 16) for a in (1, 2)
] + [{"threads": 512, "cluster": n, "shared": True, "per_cta": 8, "affine_regs": 1} for n in (8, 16)] + [
    # ... and the one-row design with them read into registers with the row's slice (the output
    # pass read them from L2, a tile at a time, after the exchange)
    {"threads": 256, "cluster": n, "shared": True, "affine_regs": 2}
    for n in (4, 8, 16)
]
# ... and over as many rows per cluster as spread the rows over the clusters resident at once
# (``persist``), the weight's and bias's slices read into registers once: one CTA of 512 threads
# per SM at 262k over clusters of 8 (64 KB slices), 0.84 -> 0.91 of a copy (H200, 2048 rows).
LAYER_NORM_PERSIST_CONFIGS = (
    [{"threads": t, "cluster": n, "shared": True, "persist": True, "affine_regs": 2, "affine_once": True} for t in (512, 1024) for n in (8, 16)]
    + [{"threads": 256, "cluster": n, "shared": True, "persist": True, "affine_regs": 2} for n in (8, 16)]
    # ``pipe``, as RMSNorm's: add_layer_norm at 262k (H200) 1.087 ms with 1,024 threads over 8 CTAs,
    # the tuner's choice, against 1.115 for the best without (512 threads over 16 CTAs: 1.15 ms;
    # over 8 they spill; 256 threads over 16: 1.45). 1,024 threads fit 64 registers, no spills,
    # since `_common.cta_moments` merges 32 warps across lanes.
    + [
        {"threads": t, "cluster": n, "shared": True, "persist": True, "affine_regs": 2, "affine_once": True, "pipe": True}
        for t, n in ((512, 16), (1024, 8), (1024, 16))
    ]
)


# The several-rows designs' CTAs of 1,024 threads only where each thread holds this many of a
# row's columns: fewer, and a row's barriers and exchange outweigh its work (H200, 8 columns a
# thread at 65k: 0.85-1.46 ms where 256 threads took 0.54-1.07; 16 at 262k: LayerNorm 1.17-1.31
# against 1.09 at 32).
WIDE_CTA_COLUMNS = 32


# (Two designs measured and not kept, H200: the lane groups reading the weight and bias before
# the rows, their wait from L1 under the rows' — add_layer_norm at 256 columns 1.035 ms against
# 1.034; and the fused add's several-rows designs fetching the residual's slices into their ring
# beside the rows', where each row's first pass reads R from memory tile by tile — add_rms_norm at
# 262k 1.100-1.162 ms against 1.097, add_layer_norm 1.099-1.537 against 1.091.)


def _check_ahead(ahead: int, several: bool):
    if ahead not in (1, 2, 3):
        raise ValueError(f"ahead: {ahead} rows in flight; the several-rows cluster designs hold 1, 2 or 3")
    if ahead > 1 and not several:
        raise ValueError("ahead: rows in flight while one is computed, of the several-rows cluster design (give per_cta= or persist=True)")


def _prune_norm(tiles: int, vectors: int):
    """`_common.prune_rows` for a norm holding ``tiles`` float32 tiles, the several-rows cluster
    designs only where their slices (the row's ring, ``ahead`` + 1, + 1 with ``pipe``, ``vectors``
    of the weight and bias, less those in registers) fit `ROWS_SLICES`, and CTAs of 1,024 threads
    hold `WIDE_CTA_COLUMNS` a thread; any design's bias and weight in registers (``affine_regs``)
    only where they fit `AFFINE_REGISTERS` and have the rows' dtype."""
    rows = c.prune_rows("h", lambda dtype, key: tiles)

    def prune(configs, dtype, **key):
        def fits(cfg):
            several = cfg.get("per_cta", 1) > 1 or cfg.get("persist", False)
            held = cfg.get("affine_regs", 0) + cfg.get("weight_regs", False)
            if (several or held) and key.get("w_dtype", "") not in ("", dtype):
                return False  # (their weight slices, in shared memory or registers, are of the rows' dtype)
            part_bytes = key["h"] // cfg["cluster"] * c.elem_bytes(dtype) if held or several else 0
            if not several:
                return held * part_bytes // (4 * cfg["threads"]) <= AFFINE_REGISTERS
            if cfg["threads"] >= 1024 and key["h"] // (cfg["cluster"] * cfg["threads"]) < WIDE_CTA_COLUMNS:
                return False
            ring = cfg.get("ahead", 1) + (2 if cfg.get("pipe") else 1)
            return (ring + vectors - held) * part_bytes <= ROWS_SLICES and held * part_bytes // (4 * cfg["threads"]) <= AFFINE_REGISTERS

        return [cfg for cfg in rows(configs, dtype, **key) if fits(cfg)]

    return prune


@autotune(
    configs=c.WIDE_ROW_CONFIGS + c.SHARED_CLUSTER_CONFIGS + ROWS_CLUSTER_CONFIGS + PERSIST_CLUSTER_CONFIGS + RMS_WEIGHT_CONFIGS,
    key=["h", "dtype", "residual", "w_dtype"],
    prune=_prune_norm(3, 1),
    launch_args=c.persist_args,
    adapts=lambda config: config.get("persist", False),
    size=c.rows_class,
)
def rms_norm_kernel(
    h: int,
    dtype: str,
    threads: int,
    residual: bool = False,
    tpr: int = 0,
    stream: bool = False,
    cluster: int = 0,
    shared: bool = False,
    per_cta: int = 1,
    w_dtype: str = "",
    persist: bool = False,
    pipe: bool = False,
    ahead: int = 1,
    weight_regs: bool = False,
):
    """``Y[r] = X[r] * rsqrt(mean(X[r]^2) + eps) * W`` for ``m`` rows of ``h`` elements; with
    ``residual``, the row normalised is ``H[r] = X[r] + R[r]`` (rounded to ``dtype``), also
    written: a transformer block's residual add fused into its norm. ``tpr``: a group of that
    many lanes per row; ``stream``: the row in register tiles however short; ``cluster``: a
    cluster of that many CTAs per row (``shared``: each CTA's slice in shared memory; ``per_cta``:
    that many rows per cluster, `_rms_cluster_rows`; ``persist``: as many as spread the rows over
    the clusters resident at once, a run-time argument ``per_cluster`` after ``eps``,
    `_common.persist_args`; ``pipe``: the next row's sum sent before a row's output pass;
    ``ahead``: that many rows' slices in flight while one is computed; ``weight_regs``, of the
    one-row design: W's slice read into registers with the row's); ``w_dtype``: W's
    (`_common.weight_dtype`)."""
    several = per_cta > 1 or persist
    if several and not (cluster and shared):
        raise ValueError(
            "per_cta, persist: the cluster design with its slices in shared memory (give cluster= and shared=True)"
        )
    if pipe and not several:
        raise ValueError("pipe: the rows' sums sent a row ahead, of the several-rows cluster design (give per_cta= or persist=True)")
    _check_ahead(ahead, several)
    if weight_regs and (several or not (cluster and shared) or (w_dtype or dtype) != dtype):
        raise ValueError(
            "weight_regs: the weight's slice in registers of the rows' dtype, of the one-row cluster design with its slices in shared memory (give cluster= and shared=True, no per_cta or persist)"
        )
    wd = c.weight_dtype(dtype, w_dtype, several)
    if tpr:
        rows = _rms_groups(h, dtype, threads, c.RowGroupTile(h, dtype, threads, tpr), residual)
    elif cluster and shared and several:
        sl = c.SharedSlice(h, dtype, threads, cluster)
        rows = _rms_cluster_rows(h, dtype, threads, sl, cluster, residual, per_cta, persist, pipe, ahead)
    elif cluster and shared:
        rows = _rms_cluster_shared(h, dtype, threads, c.SharedSlice(h, dtype, threads, cluster), cluster, residual, wd, weight_regs)
    elif cluster:
        rows = _rms_cluster(h, dtype, threads, cluster, residual, wd)
    else:
        rows = _rms_rows(h, dtype, threads, c.RowTile(h, dtype, threads, 3, stream), residual, wd)

    if persist:
        return _rms_persistent(rows, h, dtype, wd, residual)
    if residual:

        @T.prim_func
        def add_rms_norm_rows(
            X_ptr: T.handle, R_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle, H_ptr: T.handle, m: T.int32, eps: T.float32
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            rows(X, R, W, Y, H, m, eps)

        return add_rms_norm_rows

    @T.prim_func
    def rms_norm_rows(X_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle, m: T.int32, eps: T.float32):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), wd)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        rows(X, X, W, Y, X, m, eps)

    return rms_norm_rows


def _rms_persistent(rows, h: int, dtype: str, wd: str, residual: bool):
    """`rms_norm_kernel`'s signatures for the ``persist`` design: ``per_cluster`` (rows per
    cluster) after ``eps``."""
    if residual:

        @T.prim_func
        def add_rms_norm_rows(
            X_ptr: T.handle,
            R_ptr: T.handle,
            W_ptr: T.handle,
            Y_ptr: T.handle,
            H_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
            per_cluster: T.int32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            rows(X, R, W, Y, H, m, eps, T.max(per_cluster, 1))

        return add_rms_norm_rows

    @T.prim_func
    def rms_norm_rows(X_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle, m: T.int32, eps: T.float32, per_cluster: T.int32):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), wd)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        rows(X, X, W, Y, X, m, eps, T.max(per_cluster, 1))

    return rms_norm_rows


def _group_residual_add(g: c.RowGroupTile, dtype: str):
    """`_common.residual_add` for a CTA's group of rows: ``add(x, src, dst, stage)``, the rows'
    sum with ``R``'s (read into a tile of its own: the groups hold no second tile) rounded to
    ``dtype`` and written to ``dst``."""
    rows_, width, widen = g.rows, g.width, dtype != "float32"
    load, store = c.group_io(g, dtype)

    @T.macro
    def add(x, src, dst, stage):
        r_ = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        load(r_, src, stage)
        Tx.cta.add(x[0:rows_, 0:width], x[0:rows_, 0:width], r_[0:rows_, 0:width])
        store(dst, x, stage)
        if widen:  # the rounded sum, as the next op would read it
            Tx.cta.cast(x[0:rows_, 0:width], stage[0:rows_, 0:width])

    return add


def _rms_groups(h: int, dtype: str, threads: int, g: c.RowGroupTile, residual: bool):
    rows_, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load, store = c.group_io(g, dtype)
    weights = c.group_vector(g, h)
    add_residual = _group_residual_add(g, dtype)

    @T.macro
    def rows(X, R, W, Y, H, m, eps):
        T.device_entry()
        b = T.cta_id([(m + rows_ - 1) // rows_])
        T.warp_id([g.warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows_, width), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        w = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        xl = x.local()
        load(x, X[b * rows_ : b * rows_ + rows_, 0:width], stage)
        if residual:  # h = x + r, written
            add_residual(x, R[b * rows_ : b * rows_ + rows_, 0:width], H[b * rows_ : b * rows_ + rows_, 0:width], stage)
        Tx.mul(w[0:per], xl[0:per], xl[0:per])
        Tx.sum(part[0:1], w[0:per])
        s = T.cuda.warp_sum(part[0], width=tpr)
        rstd = 1.0 / T.sqrt(s / float(h) + eps)
        weights(w, W, tid % tpr)
        Tx.mul(xl[0:per], xl[0:per], rstd)
        Tx.mul(xl[0:per], xl[0:per], w[0:per])
        store(Y[b * rows_ : b * rows_ + rows_, 0:width], x, stage)

    return rows


def _rms_cluster(h: int, dtype: str, threads: int, cn: int, residual: bool, wd: str):
    """A cluster of ``cn`` CTAs per row, CTA ``rank`` holding the slice ``[rank * width, (rank + 1)
    * width)`` in registers; the slices' sums of squares summed through the cluster
    (`_common.cluster_exchange`)."""
    g = c.cluster_tile(h, dtype, threads, cn, 3)
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load, store = c.row_io(g, dtype)  # the padding adds 0 to the sum
    load_w = c.weight_loader(g, dtype, wd, load)
    add_residual = c.residual_add(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    slot_sum = c.slot_sum(cn)

    @T.macro
    def rows(X, R, W, Y, H, m, eps):
        T.device_entry()
        b = T.cta_id([m * cn])
        rank = T.cta_id_in_cluster([cn])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        stats = pool.alloc((cn, 4), "float32")
        mine = pool.alloc((4,), "float32")
        bar = MBarrier(pool, 1)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        xl = x.local()
        open_(bar)
        r = b // cn
        c0 = rank * width
        load(x, X[r, c0 : c0 + width], stage)
        if residual:  # h = x + r, written
            add_residual(x, w, R[r, c0 : c0 + width], H[r, c0 : c0 + width], stage)
        Tx.mul(sq[0:per], xl[0:per], xl[0:per])
        Tx.sum(part[0:1], sq[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, s, 0.0, 0.0, 0.0)
        slot_sum(stats, 0, 0, part, 0, lane)
        rstd = 1.0 / T.sqrt(part[0] / float(h) + eps)
        release()
        load_w(w, W[c0 : c0 + width], stage)
        Tx.mul(xl[0:per], xl[0:per], rstd)
        Tx.cta.mul(x[0:width], x[0:width], w[0:width])
        store(Y[r, c0 : c0 + width], x, stage)
        close()

    return rows


def _rms_cluster_shared(
    h: int, dtype: str, threads: int, sl: c.SharedSlice, cn: int, residual: bool, wd: str, weight_regs: bool = False
):
    """`_rms_cluster` with each CTA's slice in shared memory (`SharedSlice`), read in register
    tiles: the sum of squares, then the output; with ``residual``, the first pass adds ``R``'s
    tile (from global memory), writes the rounded sum to ``H`` and back over the slice.
    ``weight_regs``: the weight's slice read into registers with the row's slice, so the output
    pass waits on no load (as LayerNorm's ``affine_regs``, `_layer_norm_cluster_shared`)."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    fetch, landed, chunk = sl.io(dtype)
    load_tile, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, wd, load_tile)
    add_residual = c.residual_add(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    slot_sum = c.slot_sum(cn)
    weight_load = _affine_loader(g, chunks)

    @T.macro
    def rows(X, R, W, Y, H, m, eps):
        T.device_entry()
        b = T.cta_id([m * cn])
        rank = T.cta_id_in_cluster([cn])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        S = pool.alloc((1, part), dtype)
        stats = pool.alloc((cn, 4), "float32")
        mine = pool.alloc((4,), "float32")
        bar = MBarrier(pool, 1)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        wr = None
        if weight_regs:  # (the rows' dtype: a tile's cast where the output pass takes it)
            wr = T.alloc_buffer((chunks, width), dtype, scope="local", layout=c.tiles_layout(g, chunks))
        xl, wl = x.local(), w.local()
        open_(bar)
        r = b // cn
        fetch(S, 0, X, r, rank * part)
        if weight_regs:  # (in flight with the row's slice)
            weight_load(wr, W, rank * part)
        landed()
        acc[0] = 0.0
        for k in T.serial(chunks):
            chunk(x, S, 0, k, stage)
            if residual:  # h = x + r, written, and back over the slice (the output pass reads it)
                c1 = rank * part + k * width
                add_residual(x, w, R[r, c1 : c1 + width], H[r, c1 : c1 + width], stage)
                Tx.cta.copy(S[0, k * width : k * width + width], stage[0:width])
            Tx.mul(sq[0:per], xl[0:per], xl[0:per])
            Tx.sum(part_[0:1], sq[0:per])
            acc[0] = acc[0] + part_[0]
        s = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, s, 0.0, 0.0, 0.0)
        slot_sum(stats, 0, 0, part_, 0, lane)
        rstd = 1.0 / T.sqrt(part_[0] / float(h) + eps)
        release()
        for k in (T.unroll if weight_regs else T.serial)(chunks):  # (registers take constant indices)
            c0 = rank * part + k * width
            chunk(x, S, 0, k, stage)
            if weight_regs:
                Tx.cast(wl[0:per], wr.local()[k * per : k * per + per])
            else:
                load_w(w, W[c0 : c0 + width], stage)
            Tx.mul(xl[0:per], xl[0:per], rstd)
            Tx.cta.mul(x[0:width], x[0:width], w[0:width])
            store(Y[r, c0 : c0 + width], x, stage)
        close()

    return rows


def _row_ring(part: int, ring: int, persist: bool):
    """The several-rows cluster designs' ring of ``ring`` row slices in shared memory, as macros
    (one `cp.async` group a row, `_common.slice_fetch`; nothing past the cluster's rows or ``m``):
    ``start(S, X, first, c0, m, per_cta)``, rows 0 .. ring - 2 of the cluster's (its first,
    ``first``) in flight before its loop; ``fetch_row(S, X, i, row, c0, m, per_cta)``, its row
    ``i`` (``row`` of X) into slot ``i % ring``. With ``persist`` the rows per cluster are a
    run-time product, guarded as such."""
    fetch = c.slice_fetch(part)

    @T.macro
    def fetch_row(S, X, i, row, c0, m, per_cta):
        if persist:
            fetch(S, i % ring, X, row, c0, (i < per_cta) & (0 <= row) & (row < m))
        else:
            fetch(S, i % ring, X, row, c0, (i < per_cta) & (row < m))

    @T.macro
    def start(S, X, first, c0, m, per_cta):
        if persist:
            fetch(S, 0, X, first, c0, (0 <= first) & (first < m))
        else:
            fetch(S, 0, X, first, c0, first < m)
        if ring >= 3:
            fetch_row(S, X, 1, first + 1, c0, m, per_cta)
        if ring >= 4:
            fetch_row(S, X, 2, first + 2, c0, m, per_cta)
        if ring >= 5:
            fetch_row(S, X, 3, first + 3, c0, m, per_cta)

    return start, fetch_row


def _rms_cluster_rows(
    h: int, dtype: str, threads: int, sl: c.SharedSlice, cn: int, residual: bool, per_cta: int, persist: bool = False, pipe: bool = False, ahead: int = 1
):
    """`_rms_cluster_shared` over ``per_cta`` rows per cluster: the weight's slice copied into
    shared memory once (read from L2 per row, it was a second stream beside x's), a row's slice
    in a ring of two (the next row's copied while this one is computed), the sums exchanged over
    slots used in turn, no cluster barrier per row (`_common.chained_exchange`: the CTA barrier
    of the next row's sum orders this row's reads of its slot before the next send).
    ``persist``: the rows per cluster a run-time argument (the macro's last), as
    `_layer_norm_cluster_rows`'s; ``pipe``: a ring of three rows and four slots, row j + 1's sum
    sent before row j's output pass reads row j's (as `_layer_norm_cluster_rows`'s); ``ahead``:
    the rows in flight while one is computed (`_row_ring`)."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    ring = ahead + (2 if pipe else 1)
    slots = c.chain_slots(1 if pipe else 0)
    chunk = sl.io(dtype)[2]
    store = c.row_io(g, dtype)[1]
    add_residual = c.residual_add(g, dtype)
    open_, send, receive, close = c.chained_exchange(cn, slots)
    slot_sum = c.slot_sum(cn)
    start, fetch_row = _row_ring(part, ring, persist)

    @T.macro
    def row_sum(ex, S, R, H, c0, rank, tid, j, r, regs):
        """Row j's (``r``) sum of squares from its slot (``h = x + r`` written and back over it), sent."""
        stats, mine, bar = ex
        x, w, stage, sq, part_, acc, scratch = regs
        xl = x.local()
        acc[0] = 0.0
        for k in T.serial(chunks):
            chunk(x, S, j % ring, k, stage)
            if residual:  # h = x + r, written, and back over the slice (the output pass reads it)
                c1 = c0 + k * width
                add_residual(x, w, R[r, c1 : c1 + width], H[r, c1 : c1 + width], stage)
                Tx.cta.copy(S[j % ring, k * width : k * width + width], stage[0:width])
            Tx.mul(sq[0:per], xl[0:per], xl[0:per])
            Tx.sum(part_[0:1], sq[0:per])
            acc[0] = acc[0] + part_[0]
        sum_sq = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        if warps == 1:  # (one warp's sum has no barrier; the chain needs one here)
            T.cuda.cta_sync()
        send(stats, mine, bar, rank, tid, j, sum_sq, 0.0, 0.0, 0.0)

    @T.macro
    def row_output(ex, S, WS, Y, c0, lane, j, r, eps, regs):
        """Row j's sum received, then its output pass over its slot."""
        stats, mine, bar = ex
        x, w, stage, sq, part_, acc, scratch = regs
        xl = x.local()
        receive(bar, j)
        slot_sum(stats, j % slots, 0, part_, 0, lane)
        rstd = 1.0 / T.sqrt(part_[0] / float(h) + eps)
        for k in T.serial(chunks):
            chunk(x, S, j % ring, k, stage)
            chunk(w, WS, 0, k, stage)
            Tx.mul(xl[0:per], xl[0:per], rstd)
            Tx.cta.mul(x[0:width], x[0:width], w[0:width])
            store(Y[r, c0 + k * width : c0 + k * width + width], x, stage)

    @T.macro
    def rows_of(X, R, W, Y, H, m, eps, per_cta):
        T.device_entry()
        b = T.cta_id([(m + per_cta - 1) // per_cta * cn])
        rank = T.cta_id_in_cluster([cn])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        S = pool.alloc((ring, part), dtype)
        WS = pool.alloc((1, part), dtype)
        stats = pool.alloc((slots * cn, 4), "float32")
        mine = pool.alloc((slots, 4), "float32")
        bar = MBarrier(pool, slots)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        ex = (stats, mine, bar)
        regs = (x, w, stage, sq, part_, acc, scratch)
        open_(bar)
        first = b // cn * per_cta
        c0 = rank * part
        Tx.cta.copy_async(WS[0, 0:part], W[c0 : c0 + part])  # with the first row's group
        start(S, X, first, c0, m, per_cta)
        if pipe:  # row 0's sum sent before the loop
            T.ptx.cp_async.wait_group(ring - 2)
            if (0 <= first) & (first < m) if persist else first < m:
                row_sum(ex, S, R, H, c0, rank, tid, 0, first, regs)
        for j in T.serial(per_cta):
            r = first + j
            fetch_row(S, X, j + (ring - 1), r + (ring - 1), c0, m, per_cta)
            # row j's slice landed (j + 1's with ``pipe``; the weight's with the first)
            T.ptx.cp_async.wait_group(ring - 2 if pipe else ring - 1)
            if pipe:  # row j + 1's sum sent before row j's is read
                if (j + 1 < per_cta) & (((0 <= r) & (r + 1 < m)) if persist else (r + 1 < m)):
                    row_sum(ex, S, R, H, c0, rank, tid, j + 1, r + 1, regs)
            if (0 <= r) & (r < m) if persist else r < m:  # (the cluster's CTAs agree: one row)
                if not pipe:
                    row_sum(ex, S, R, H, c0, rank, tid, j, r, regs)
                row_output(ex, S, WS, Y, c0, lane, j, r, eps, regs)
        T.ptx.cp_async.wait_group(0)  # (the last, empty, group)
        close()

    if persist:
        return rows_of

    @T.macro
    def rows(X, R, W, Y, H, m, eps):
        rows_of(X, R, W, Y, H, m, eps, per_cta)

    return rows


def _rms_rows(h: int, dtype: str, threads: int, g: c.RowTile, residual: bool, wd: str):
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    load, store = c.row_io(g, dtype)  # the padding adds 0 to the sum
    load_w = c.weight_loader(g, dtype, wd, load)
    add_residual = c.residual_add(g, dtype)

    @T.macro
    def rows(X, R, W, Y, H, m, eps):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        xl = x.local()
        acc[0] = 0.0
        for k in T.serial(chunks):
            load(x, X[r, k * width : k * width + width], stage)
            if residual:  # h = x + r, written
                add_residual(x, w, R[r, k * width : k * width + width], H[r, k * width : k * width + width], stage)
            Tx.mul(sq[0:per], xl[0:per], xl[0:per])
            Tx.sum(part[0:1], sq[0:per])
            acc[0] = acc[0] + part[0]
        s = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        rstd = 1.0 / T.sqrt(s / float(h) + eps)
        for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
            k = chunks - 1 - j
            if chunks > 1:  # a row in registers is still there; a streamed one is read again
                load(x, H[r, k * width : k * width + width], stage)
            load_w(w, W[k * width : k * width + width], stage)
            Tx.mul(xl[0:per], xl[0:per], rstd)
            Tx.cta.mul(x[0:width], x[0:width], w[0:width])
            store(Y[r, k * width : k * width + width], x, stage)

    return rows


# Not keyed by ``stats``: the kernels with and without the rows' mean and rstd share one choice,
# so the registered op (under torch.compile and autograd, which writes them) reduces each row in
# the order the eager call does and gives its values bit for bit.
@autotune(
    configs=c.WIDE_ROW_CONFIGS + c.SHARED_CLUSTER_CONFIGS + ROWS_CLUSTER_CONFIGS + LAYER_NORM_AFFINE_CONFIGS + LAYER_NORM_PERSIST_CONFIGS,
    key=["h", "dtype", "residual", "w_dtype"],
    prune=_prune_norm(4, 2),
    launch_args=c.persist_args,
    adapts=lambda config: config.get("persist", False),
    size=c.rows_class,
)
def layer_norm_kernel(
    h: int,
    dtype: str,
    threads: int,
    stats: bool = False,
    residual: bool = False,
    tpr: int = 0,
    stream: bool = False,
    cluster: int = 0,
    shared: bool = False,
    per_cta: int = 1,
    w_dtype: str = "",
    affine_regs: int = 0,
    affine_once: bool = False,
    persist: bool = False,
    pipe: bool = False,
    ahead: int = 1,
):
    """``Y[r] = (X[r] - mean) * rsqrt(var + eps) * W + B`` for ``m`` rows of ``h`` elements; with
    ``stats``, the row's ``mean`` and ``rstd`` also written (float32 ``MEAN[r]``, ``RSTD[r]``), as
    PyTorch's forward saves them for the backward; with ``residual``, the row normalised is ``H[r]
    = X[r] + R[r]`` (rounded to ``dtype``), also written (a transformer block's residual add fused
    into its norm), its statistics with ``stats``. ``tpr``: a group of that many lanes per row;
    ``stream``: the row in register tiles however short; ``cluster``: a cluster of that many CTAs
    per row (``shared``: each CTA's slice in shared memory; ``per_cta``: that many rows per
    cluster, `_layer_norm_cluster_rows`; ``affine_regs``: B's slice, or B's and W's, in registers
    there, ``affine_once``: read once for all its rows, not each row; ``persist``: the rows per
    cluster a run-time argument, ``per_cluster``, after ``eps``, that the tuner's launch sizes to
    the clusters the GPU holds at once, `_common.persist_args`; ``pipe``: with ``affine_once``, the
    next row's moments sent before a row's output pass; ``ahead``: that many rows' slices in
    flight while one is computed); ``w_dtype``: W's and B's (`_common.weight_dtype`)."""
    several = per_cta > 1 or persist
    if several and not (cluster and shared):
        raise ValueError(
            "per_cta, persist: the cluster design with its slices in shared memory (give cluster= and shared=True)"
        )
    if affine_regs not in (0, 1, 2) or (affine_regs and not (cluster and shared)):
        raise ValueError(
            "affine_regs: 1 (the bias) or 2 (the bias and the weight) in registers, of the cluster designs with their slices in shared memory (give cluster= and shared=True)"
        )
    if affine_regs and (w_dtype or dtype) != dtype:
        raise ValueError(f"affine_regs: the bias's (and weight's) registers of the rows' dtype ({dtype}), not w_dtype={w_dtype!r}")
    if affine_once and not affine_regs:
        raise ValueError("affine_once: the bias's (and weight's) registers read once, of the affine_regs design (give affine_regs=)")
    if pipe and not affine_once:
        raise ValueError("pipe: the rows' moments sent a row ahead, of the affine_once design (give affine_regs= and affine_once=True)")
    _check_ahead(ahead, several)
    wd = c.weight_dtype(dtype, w_dtype, several)
    if tpr:
        rows = _layer_norm_groups(h, dtype, threads, c.RowGroupTile(h, dtype, threads, tpr), residual)
    elif cluster and shared and several:
        sl = c.SharedSlice(h, dtype, threads, cluster)
        rows = _layer_norm_cluster_rows(h, dtype, threads, sl, cluster, residual, per_cta, affine_regs, affine_once, persist, pipe, ahead)
    elif cluster and shared:
        rows = _layer_norm_cluster_shared(h, dtype, threads, c.SharedSlice(h, dtype, threads, cluster), cluster, residual, wd, affine_regs)
    elif cluster:
        rows = _layer_norm_cluster(h, dtype, threads, cluster, residual, wd)
    else:
        rows = _layer_norm_rows(h, dtype, threads, c.RowTile(h, dtype, threads, 4, stream), residual, wd)

    if persist:
        return _layer_norm_persistent(rows, h, dtype, wd, stats, residual)
    if residual and stats:

        @T.prim_func
        def add_layer_norm_rows_stats(
            X_ptr: T.handle,
            R_ptr: T.handle,
            W_ptr: T.handle,
            B_ptr: T.handle,
            Y_ptr: T.handle,
            H_ptr: T.handle,
            MEAN_ptr: T.handle,
            RSTD_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            MEAN = T.match_buffer(MEAN_ptr, (m,), "float32")
            RSTD = T.match_buffer(RSTD_ptr, (m,), "float32")
            rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps)

        return add_layer_norm_rows_stats

    if residual:

        @T.prim_func
        def add_layer_norm_rows(
            X_ptr: T.handle, R_ptr: T.handle, W_ptr: T.handle, B_ptr: T.handle, Y_ptr: T.handle, H_ptr: T.handle, m: T.int32, eps: T.float32
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            rows(X, R, W, B, Y, H, None, None, m, eps)

        return add_layer_norm_rows

    if stats:

        @T.prim_func
        def layer_norm_rows_stats(
            X_ptr: T.handle,
            W_ptr: T.handle,
            B_ptr: T.handle,
            Y_ptr: T.handle,
            MEAN_ptr: T.handle,
            RSTD_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            MEAN = T.match_buffer(MEAN_ptr, (m,), "float32")
            RSTD = T.match_buffer(RSTD_ptr, (m,), "float32")
            rows(X, X, W, B, Y, X, MEAN, RSTD, m, eps)

        return layer_norm_rows_stats

    @T.prim_func
    def layer_norm_rows(
        X_ptr: T.handle, W_ptr: T.handle, B_ptr: T.handle, Y_ptr: T.handle, m: T.int32, eps: T.float32
    ):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), wd)
        B = T.match_buffer(B_ptr, (h,), wd)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        rows(X, X, W, B, Y, X, None, None, m, eps)

    return layer_norm_rows


def _layer_norm_persistent(rows, h: int, dtype: str, wd: str, stats: bool, residual: bool):
    """`layer_norm_kernel`'s signatures for the ``persist`` design: ``per_cluster`` (rows per
    cluster) after ``eps``."""
    if residual and stats:

        @T.prim_func
        def add_layer_norm_rows_stats(
            X_ptr: T.handle,
            R_ptr: T.handle,
            W_ptr: T.handle,
            B_ptr: T.handle,
            Y_ptr: T.handle,
            H_ptr: T.handle,
            MEAN_ptr: T.handle,
            RSTD_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
            per_cluster: T.int32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            MEAN = T.match_buffer(MEAN_ptr, (m,), "float32")
            RSTD = T.match_buffer(RSTD_ptr, (m,), "float32")
            rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps, T.max(per_cluster, 1))

        return add_layer_norm_rows_stats

    if residual:

        @T.prim_func
        def add_layer_norm_rows(
            X_ptr: T.handle,
            R_ptr: T.handle,
            W_ptr: T.handle,
            B_ptr: T.handle,
            Y_ptr: T.handle,
            H_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
            per_cluster: T.int32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            R = T.match_buffer(R_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            H = T.match_buffer(H_ptr, (m, h), dtype)
            rows(X, R, W, B, Y, H, None, None, m, eps, T.max(per_cluster, 1))

        return add_layer_norm_rows

    if stats:

        @T.prim_func
        def layer_norm_rows_stats(
            X_ptr: T.handle,
            W_ptr: T.handle,
            B_ptr: T.handle,
            Y_ptr: T.handle,
            MEAN_ptr: T.handle,
            RSTD_ptr: T.handle,
            m: T.int32,
            eps: T.float32,
            per_cluster: T.int32,
        ):
            X = T.match_buffer(X_ptr, (m, h), dtype)
            W = T.match_buffer(W_ptr, (h,), wd)
            B = T.match_buffer(B_ptr, (h,), wd)
            Y = T.match_buffer(Y_ptr, (m, h), dtype)
            MEAN = T.match_buffer(MEAN_ptr, (m,), "float32")
            RSTD = T.match_buffer(RSTD_ptr, (m,), "float32")
            rows(X, X, W, B, Y, X, MEAN, RSTD, m, eps, T.max(per_cluster, 1))

        return layer_norm_rows_stats

    @T.prim_func
    def layer_norm_rows(
        X_ptr: T.handle, W_ptr: T.handle, B_ptr: T.handle, Y_ptr: T.handle, m: T.int32, eps: T.float32, per_cluster: T.int32
    ):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), wd)
        B = T.match_buffer(B_ptr, (h,), wd)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        rows(X, X, W, B, Y, X, None, None, m, eps, T.max(per_cluster, 1))

    return layer_norm_rows


def _layer_norm_rows(h: int, dtype: str, threads: int, g: c.RowTile, residual: bool, wd: str):
    """A CTA per row: the mean, the deviations about it, then the output (streamed: a pass each;
    over whole tiles, the first two in one pass: each thread's mean and squared deviations
    combined tile by tile about its running mean, then over the threads, each warp's about its
    mean and the warps' about the row's, in one barrier (`_common.cta_moments`), as Chan et al.
    combine partial variances). With ``residual``, the first pass adds ``R``'s tile
    and writes the new residual ``H``, which the later passes of a streamed row read."""
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    padded = chunks * width > h
    chan = chunks > 1 and not padded
    load, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, wd, load)
    add_residual = c.residual_add(g, dtype)
    row_sum = c.row_sum_pass(g, load)
    moments_step = c.tile_moments(per)
    cta_moments = c.cta_moments(warps, h // threads)

    @T.macro
    def rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps):
        T.device_entry()
        r = T.cta_id([m])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        xl = x.local()
        if chan:
            run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's mean and squared deviations
            run[0] = 0.0
            run[1] = 0.0
            for k in T.serial(chunks):
                load(x, X[r, k * width : k * width + width], stage)
                if residual:  # h = x + r, written
                    add_residual(x, w, R[r, k * width : k * width + width], H[r, k * width : k * width + width], stage)
                moments_step(run, part, xl, xl, k)
            pairs = T.alloc_buffer((2, 2 * warps), "float32", scope="shared")
            cta_moments(run, pairs, wid, lane, 0)  # (every thread holds h / threads columns)
            mean = run[0]
            dev = run[1]
        else:
            if residual:  # h = x + r, written (the row's sum from it)
                acc[0] = 0.0
                for k in T.serial(chunks):
                    load(x, X[r, k * width : k * width + width], stage)
                    add_residual(x, w, R[r, k * width : k * width + width], H[r, k * width : k * width + width], stage)
                    Tx.sum(part[0:1], xl[0:per])
                    acc[0] = acc[0] + part[0]
            else:
                row_sum(acc, part, x, X, r, stage)
            total = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
            mean = total / float(h)
            acc[0] = 0.0
            for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
                k = chunks - 1 - j
                if chunks > 1:
                    load(x, H[r, k * width : k * width + width], stage)
                if padded:  # the padding reads as the mean: it adds nothing to the deviations
                    Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: k * width + j >= h, mean)
                Tx.add(sq[0:per], xl[0:per], -mean)
                Tx.mul(sq[0:per], sq[0:per], sq[0:per])
                Tx.sum(part[0:1], sq[0:per])
                acc[0] = acc[0] + part[0]
            dev = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        rstd = 1.0 / T.sqrt(dev / float(h) + eps)
        if MEAN is not None:
            if tid == 0:
                MEAN[r] = mean
                RSTD[r] = rstd
        for j in T.serial(chunks):  # (in two passes: last tile first, the likeliest in L2)
            if chan:
                t = chunks - 1 - j
            else:
                t = j
            if chunks > 1:
                load(x, H[r, t * width : t * width + width], stage)
            Tx.add(xl[0:per], xl[0:per], -mean)
            Tx.mul(xl[0:per], xl[0:per], rstd)
            load_w(w, W[t * width : t * width + width], stage)
            Tx.cta.mul(x[0:width], x[0:width], w[0:width])
            load_w(w, B[t * width : t * width + width], stage)
            Tx.cta.add(x[0:width], x[0:width], w[0:width])
            store(Y[r, t * width : t * width + width], x, stage)

    return rows


def _layer_norm_cluster(h: int, dtype: str, threads: int, cn: int, residual: bool, wd: str):
    """A cluster of ``cn`` CTAs per row, CTA ``rank`` holding the slice ``[rank * width, (rank + 1)
    * width)`` in registers: each CTA publishes its slice's sum and its sum of squared deviations
    about the slice's own mean (`_common.cluster_exchange`, one exchange), combined as Chan et al.
    combine partial variances (`_common.slice_moments`: no cancellation)."""
    g = c.cluster_tile(h, dtype, threads, cn, 4)
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, wd, load)
    add_residual = c.residual_add(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    moments = c.slice_moments(cn, width, h, full=False)
    slice_moments = _slice_moments(g, h, cn)

    @T.macro
    def rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps):
        T.device_entry()
        b = T.cta_id([m * cn])
        rank = T.cta_id_in_cluster([cn])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        stats = pool.alloc((cn, 4), "float32")
        mine = pool.alloc((4,), "float32")
        bar = MBarrier(pool, 1)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        sd = T.alloc_buffer((2,), "float32", scope="local")
        mom = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        xl = x.local()
        open_(bar)
        r = b // cn
        c0 = rank * width
        load(x, X[r, c0 : c0 + width], stage)
        if residual:  # h = x + r, written
            add_residual(x, w, R[r, c0 : c0 + width], H[r, c0 : c0 + width], stage)
        slice_moments(sd, x, sq, part, scratch, c0)
        publish(stats, mine, bar, rank, tid, 0, sd[0], sd[1], 0.0, 0.0)
        moments(stats, mom, 0, lane)
        mean = mom[0]
        rstd = 1.0 / T.sqrt(mom[1] / float(h) + eps)
        release()
        if MEAN is not None:
            if (rank == 0) & (tid == 0):
                MEAN[r] = mean
                RSTD[r] = rstd
        Tx.add(xl[0:per], xl[0:per], -mean)
        Tx.mul(xl[0:per], xl[0:per], rstd)
        load_w(w, W[c0 : c0 + width], stage)
        Tx.cta.mul(x[0:width], x[0:width], w[0:width])
        load_w(w, B[c0 : c0 + width], stage)
        Tx.cta.add(x[0:width], x[0:width], w[0:width])
        store(Y[r, c0 : c0 + width], x, stage)
        close()

    return rows


def _slice_moments(g: c.RowTile, h: int, n: int):
    """A macro ``slice_moments(sd, x, sq, part, scratch, c0)`` for a row of ``h`` split over ``n``
    CTAs, this one holding columns ``[c0, c0 + width)`` in registers (``g``): ``sd[0]`` the slice's
    sum, ``sd[1]`` its squared deviations about its own mean (the padding past the row set to that
    mean: no deviation)."""
    width, per, warps = g.width, g.per, g.warps

    @T.macro
    def slice_moments(sd, x, sq, part, scratch, c0):
        xl = x.local()
        Tx.sum(part[0:1], xl[0:per])
        total = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        sd[0] = total
        count = T.max(T.min(h - c0, width), 0)  # the slice's columns inside the row
        local_mean = total / T.cast(T.max(count, 1), "float32")
        if n * width > h:  # the padding reads as the slice's mean: no deviation
            Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: c0 + j >= h, local_mean)
        Tx.add(sq[0:per], xl[0:per], -local_mean)
        Tx.mul(sq[0:per], sq[0:per], sq[0:per])
        Tx.sum(part[0:1], sq[0:per])
        dev = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        sd[1] = dev

    return slice_moments


def layer_norm_grid_kernel(h: int, dtype: str, threads: int, group: int, groups: int, prefetch: bool = False):
    """A design measured for issue 33's widest rows and not among the op's candidates (H200,
    262k: 0.17-0.39 of a copy, where the ``persist`` cluster design reaches 0.91; the exchange
    through L2 costs microseconds a row, README): ``Y = (X - mean) * rstd * W + B`` with each row split over a
    group of ``group`` CTAs of a cooperative grid of ``groups`` such groups — every CTA resident at
    once, group ``grp`` taking rows ``grp, grp + groups, ...`` — CTA ``rank`` of a group holding
    columns ``[rank * width, (rank + 1) * width)`` of each in registers as `_layer_norm_cluster`
    does. The slices' sums and squared deviations go through global memory: ``P`` (2 groups group,
    2) float32, a slot per row parity, read after the group meets at the grid group barrier on
    ``WORDS[grp]`` (int32, zero before the first launch: `T.cuda.grid_group_sync`). Unlike a
    cluster's, a group's CTAs need not share a GPC: groups of 32 use 128 of an H200's 132 SMs at a
    262k row, where clusters of 16 get 112. A CTA keeps the same columns of every row it takes, so
    its slices of the weight and bias are read into registers once, before the rows. With
    ``prefetch``, the loads of a CTA's next row are issued into registers of the rows' dtype
    before this row's statistics, so they are in flight while the group meets (one CTA per SM has
    no other to overlap them with)."""
    g = c.cluster_tile(h, dtype, threads, group, 4)
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, dtype, load)
    moments = c.slice_moments(group, width, h, full=False)
    slice_moments = _slice_moments(g, h, group)

    @T.prim_func
    def layer_norm_grid_rows(
        X_ptr: T.handle,
        W_ptr: T.handle,
        B_ptr: T.handle,
        Y_ptr: T.handle,
        P_ptr: T.handle,
        WORDS_ptr: T.handle,
        m: T.int32,
        eps: T.float32,
    ):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), dtype)
        B = T.match_buffer(B_ptr, (h,), dtype)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        P = T.match_buffer(P_ptr, (2 * groups * group, 2), "float32")
        WORDS = T.match_buffer(WORDS_ptr, (groups,), "int32")
        T.device_entry()
        b = T.cta_id([groups * group])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        wv = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        bv = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        sd = T.alloc_buffer((2,), "float32", scope="local")
        mom = T.alloc_buffer((4,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if prefetch:
            nxt = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        xl = x.local()
        grp = b // group
        rank = b % group
        c0 = rank * width
        load_w(wv, W[c0 : c0 + width], stage)
        load_w(bv, B[c0 : c0 + width], stage)
        if prefetch:
            if grp < m:
                Tx.cta.copy(nxt[0:width], X[grp, c0 : c0 + width], clip=True, other=0.0)
        for i in T.serial((m + groups - 1) // groups):
            r = grp + i * groups
            if r < m:  # (the group's CTAs agree: one row)
                if prefetch:
                    Tx.cta.cast(x[0:width], nxt[0:width])  # (float32 rows: a register move)
                    if r + groups < m:
                        Tx.cta.copy(nxt[0:width], X[r + groups, c0 : c0 + width], clip=True, other=0.0)
                else:
                    load(x, X[r, c0 : c0 + width], stage)
                slice_moments(sd, x, sq, part, scratch, c0)
                slot = i % 2 * groups + grp
                if tid == 0:
                    P[slot * group + rank, 0] = sd[0]
                    P[slot * group + rank, 1] = sd[1]
                T.cuda.grid_group_sync(WORDS.ptr_to([grp]), group)
                moments(P, mom, slot, lane)
                rstd = 1.0 / T.sqrt(mom[1] / float(h) + eps)
                Tx.add(xl[0:per], xl[0:per], -mom[0])
                Tx.mul(xl[0:per], xl[0:per], rstd)
                Tx.cta.mul(x[0:width], x[0:width], wv[0:width])
                Tx.cta.add(x[0:width], x[0:width], bv[0:width])
                store(Y[r, c0 : c0 + width], x, stage)

    return layer_norm_grid_rows


def _affine_loader(g: c.RowTile, chunks: int):
    """A macro ``load(dst, V, c0)``: this thread's columns of ``V[c0 : c0 + chunks * width]`` (a
    CTA's slice of the bias or weight), tile by tile, into the register tiles ``dst`` (`_common.tiles_layout`)."""
    width = g.width

    @T.macro
    def load(dst, V, c0):
        for k in T.unroll(chunks):
            Tx.cta.copy(dst[k, 0:width], V[c0 + k * width : c0 + k * width + width])

    return load


def _affine_registers(g: c.RowTile, chunks: int, dtype: str, affine_regs: int):
    """LayerNorm's bias (``affine_regs`` 1), or bias and weight (2), in registers, as macros:
    ``tiles()`` declares and returns ``(br, bt, wr)`` (the slices' register tiles of the rows'
    dtype, a float32 tile for the bias's; None where not held); ``load(br, wr, B, W, c0)`` reads
    the CTA's slices into them (`_affine_loader`); ``fma(xl, wl, br, bt, wr, k)`` makes tile
    ``k``'s ``x w + b`` one rounding (``w`` taken from ``wr`` where held, else ``wl`` as given)."""
    width, per = g.width, g.per
    affine_load = _affine_loader(g, chunks)

    @T.macro
    def tiles():
        br = bt = wr = None
        if affine_regs:  # (the rows' dtype: a tile's cast where the output pass takes it)
            br = T.alloc_buffer((chunks, width), dtype, scope="local", layout=c.tiles_layout(g, chunks))
            bt = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if affine_regs > 1:
            wr = T.alloc_buffer((chunks, width), dtype, scope="local", layout=c.tiles_layout(g, chunks))
        return br, bt, wr

    @T.macro
    def load(br, wr, B, W, c0):
        affine_load(br, B, c0)
        if affine_regs > 1:
            affine_load(wr, W, c0)

    @T.macro
    def fma(xl, wl, br, bt, wr, k):
        if affine_regs > 1:
            Tx.cast(wl[0:per], wr.local()[k * per : k * per + per])
        Tx.cast(bt.local()[0:per], br.local()[k * per : k * per + per])
        Tx.fma(xl[0:per], xl[0:per], wl[0:per], bt.local()[0:per])

    return tiles, load, fma


def _layer_norm_cluster_shared(
    h: int, dtype: str, threads: int, sl: c.SharedSlice, cn: int, residual: bool, wd: str, affine_regs: int = 0
):
    """`_layer_norm_cluster` with each CTA's slice in shared memory (`SharedSlice`), read in
    register tiles twice: each thread's mean and squared deviations about it (a tile's about the
    tile's mean, combined tile by tile as Chan et al. do; then over the threads in one barrier,
    `_common.cta_moments`: no cancellation), then the output; with ``residual``, the first pass adds
    ``R``'s tile, writes the new residual ``H`` and puts it back over the slice. ``affine_regs``:
    the bias's slice (1), or the bias's and the weight's (2), read into registers with the row's
    slice, so the output pass waits on no load (it read them from L2 tile by tile, after the
    exchange)."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    fetch, landed, chunk = sl.io(dtype)
    load_tile, store = c.row_io(g, dtype)
    load_w = c.weight_loader(g, dtype, wd, load_tile)
    add_residual = c.residual_add(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    moments = c.slice_moments(cn, part, h, full=False)
    moments_step = c.tile_moments(per)
    cta_moments = c.cta_moments(warps, per * chunks)
    affine_tiles, affine_load, affine_fma = _affine_registers(g, chunks, dtype, affine_regs)

    @T.macro
    def rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps):
        T.device_entry()
        b = T.cta_id([m * cn])
        rank = T.cta_id_in_cluster([cn])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        S = pool.alloc((1, part), dtype)
        stats = pool.alloc((cn, 4), "float32")
        mine = pool.alloc((4,), "float32")
        bar = MBarrier(pool, 1)
        pool.commit()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's mean and squared deviations
        mom = T.alloc_buffer((4,), "float32", scope="local")
        pairs = T.alloc_buffer((2, 2 * warps), "float32", scope="shared")
        br, bt, wr = affine_tiles()
        xl, wl = x.local(), w.local()
        open_(bar)
        r = b // cn
        fetch(S, 0, X, r, rank * part)
        if affine_regs:  # (in flight with the row's slice)
            affine_load(br, wr, B, W, rank * part)
        landed()
        run[0] = 0.0
        run[1] = 0.0
        for k in T.serial(chunks):  # this thread's mean and squared deviations, tile by tile (Chan et al.)
            chunk(x, S, 0, k, stage)
            if residual:  # h = x + r, written, and back over the slice (the output pass reads it)
                c1 = rank * part + k * width
                add_residual(x, w, R[r, c1 : c1 + width], H[r, c1 : c1 + width], stage)
                Tx.cta.copy(S[0, k * width : k * width + width], stage[0:width])
            moments_step(run, part_, xl, xl, k)
        cta_moments(run, pairs, wid, lane, 0)  # (every thread holds per * chunks columns)
        publish(stats, mine, bar, rank, tid, 0, run[0] * float(part), run[1], 0.0, 0.0)
        moments(stats, mom, 0, lane)
        mean = mom[0]
        rstd = 1.0 / T.sqrt(mom[1] / float(h) + eps)
        release()
        if MEAN is not None:
            if (rank == 0) & (tid == 0):
                MEAN[r] = mean
                RSTD[r] = rstd
        for k in (T.unroll if affine_regs else T.serial)(chunks):  # (registers take constant indices)
            c0 = rank * part + k * width
            chunk(x, S, 0, k, stage)
            Tx.add(xl[0:per], xl[0:per], -mean)
            Tx.mul(xl[0:per], xl[0:per], rstd)
            if affine_regs < 2:
                load_w(w, W[c0 : c0 + width], stage)
            if affine_regs:  # x w + b, one rounding
                affine_fma(xl, wl, br, bt, wr, k)
            else:
                Tx.cta.mul(x[0:width], x[0:width], w[0:width])
                load_w(w, B[c0 : c0 + width], stage)
                Tx.cta.add(x[0:width], x[0:width], w[0:width])
            store(Y[r, c0 : c0 + width], x, stage)
        close()

    return rows


def _layer_norm_cluster_rows(
    h: int,
    dtype: str,
    threads: int,
    sl: c.SharedSlice,
    cn: int,
    residual: bool,
    per_cta: int,
    affine_regs: int = 0,
    affine_once: bool = False,
    persist: bool = False,
    pipe: bool = False,
    ahead: int = 1,
):
    """`_layer_norm_cluster_shared` over ``per_cta`` rows per cluster, as `_rms_cluster_rows`:
    the weight's and the bias's slices copied into shared memory once, a row's slice in a ring
    of two, the slices' moments exchanged over slots used in turn (`_common.chained_exchange`).
    ``affine_regs``: the bias's slice (1), or the bias's and the weight's (2), read into registers
    instead, each row, from global memory (L2) while the row's moments travel, so the output pass
    finds them there: the shared memory of two CTAs per SM at 262k (a slice of 32 KB each);
    ``affine_once``: read once, for all the cluster's rows (the registers of one CTA per SM).
    ``persist``: the rows per cluster a run-time argument (the macro's last, ``per_cta``), not
    ``per_cta``: a launch sizes it so that the grid is the clusters the GPU holds at once.
    ``pipe`` (with ``affine_once``): a ring of three rows and four slots (`_common.chain_slots`),
    row j + 1's moments taken and sent before row j's output pass reads row j's, so the exchange
    travels while the CTA computes (as the backward's ``pipe``). ``ahead``: the rows whose slices
    are in flight while one is computed (the ring one more, two with ``pipe``; `_row_ring`)."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    ring = ahead + (2 if pipe else 1)
    slots = c.chain_slots(1 if pipe else 0)
    chunk = sl.io(dtype)[2]
    store = c.row_io(g, dtype)[1]
    add_residual = c.residual_add(g, dtype)
    open_, send, receive, close = c.chained_exchange(cn, slots)
    moments = c.slice_moments(cn, part, h, full=False)
    moments_step = c.tile_moments(per)
    cta_moments = c.cta_moments(warps, per * chunks)
    start, fetch_row = _row_ring(part, ring, persist)
    affine_tiles, affine_load, affine_fma = _affine_registers(g, chunks, dtype, affine_regs)

    @T.macro
    def row_moments(ex, S, R, H, c0, rank, tid, wid, lane, j, r, regs):
        """Row j's (``r``) moments from its slot (``h = x + r`` written and back over it), sent
        (``ex``: the exchange's stats, mine and bar; ``regs``: the register and scratch buffers)."""
        stats, mine, bar = ex
        x, w, stage, run, part_, pairs = regs
        xl = x.local()
        run[0] = 0.0
        run[1] = 0.0
        for k in T.serial(chunks):  # this thread's mean and squared deviations, tile by tile (Chan et al.)
            chunk(x, S, j % ring, k, stage)
            if residual:  # h = x + r, written, and back over the slice (the output pass reads it)
                c1 = c0 + k * width
                add_residual(x, w, R[r, c1 : c1 + width], H[r, c1 : c1 + width], stage)
                Tx.cta.copy(S[j % ring, k * width : k * width + width], stage[0:width])
            moments_step(run, part_, xl, xl, k)
        cta_moments(run, pairs, wid, lane, j % 2)  # (every thread holds per * chunks columns)
        if warps == 1:  # (one warp's merge has no barrier; the chain needs one here)
            T.cuda.cta_sync()
        send(stats, mine, bar, rank, tid, j, run[0] * float(part), run[1], 0.0, 0.0)

    @T.macro
    def row_output(ex, S, WS, BS, B, W, Y, MEAN, RSTD, c0, rank, tid, lane, j, r, eps, regs, affine):
        """Row j's statistics received, then its output pass over its slot."""
        stats, mine, bar = ex
        x, w, stage, run, part_, pairs = regs
        mom, br, bt, wr = affine
        xl, wl = x.local(), w.local()
        if affine_regs and not affine_once:  # (their loads in flight while the peers' moments arrive)
            affine_load(br, wr, B, W, c0)
        receive(bar, j)
        moments(stats, mom, j % slots, lane)
        mean = mom[0]
        rstd = 1.0 / T.sqrt(mom[1] / float(h) + eps)
        if MEAN is not None:
            if (rank == 0) & (tid == 0):
                MEAN[r] = mean
                RSTD[r] = rstd
        for k in (T.unroll if affine_regs else T.serial)(chunks):  # (registers take constant indices)
            chunk(x, S, j % ring, k, stage)
            Tx.add(xl[0:per], xl[0:per], -mean)  # (x - mean) exactly, then the scale: no cancellation
            Tx.mul(xl[0:per], xl[0:per], rstd)
            if affine_regs < 2:
                chunk(w, WS, 0, k, stage)
            if affine_regs:  # x w + b, one rounding
                affine_fma(xl, wl, br, bt, wr, k)
            else:
                Tx.cta.mul(x[0:width], x[0:width], w[0:width])
                chunk(w, BS, 0, k, stage)
                Tx.cta.add(x[0:width], x[0:width], w[0:width])
            store(Y[r, c0 + k * width : c0 + k * width + width], x, stage)

    @T.macro
    def rows_of(X, R, W, B, Y, H, MEAN, RSTD, m, eps, per_cta):
        T.device_entry()
        b = T.cta_id([(m + per_cta - 1) // per_cta * cn])
        rank = T.cta_id_in_cluster([cn])
        wid = T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        S = pool.alloc((ring, part), dtype)
        WS = BS = None
        if affine_regs < 2:
            WS = pool.alloc((1, part), dtype)
        if affine_regs < 1:
            BS = pool.alloc((1, part), dtype)
        stats = pool.alloc((slots * cn, 4), "float32")
        mine = pool.alloc((slots, 4), "float32")
        bar = MBarrier(pool, slots)
        pool.commit()
        br, bt, wr = affine_tiles()
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's mean and squared deviations
        mom = T.alloc_buffer((4,), "float32", scope="local")
        pairs = T.alloc_buffer((2, 2 * warps), "float32", scope="shared")
        open_(bar)
        first = b // cn * per_cta
        c0 = rank * part
        ex = (stats, mine, bar)
        regs = (x, w, stage, run, part_, pairs)
        affine = (mom, br, bt, wr)
        if affine_regs < 2:
            Tx.cta.copy_async(WS[0, 0:part], W[c0 : c0 + part])  # with the first row's group
        if affine_regs < 1:
            Tx.cta.copy_async(BS[0, 0:part], B[c0 : c0 + part])
        start(S, X, first, c0, m, per_cta)
        if affine_once:  # (for all the cluster's rows)
            affine_load(br, wr, B, W, c0)
        if pipe:  # row 0's moments sent before the loop
            T.ptx.cp_async.wait_group(ring - 2)
            if (0 <= first) & (first < m) if persist else first < m:
                row_moments(ex, S, R, H, c0, rank, tid, wid, lane, 0, first, regs)
        for j in T.serial(per_cta):
            r = first + j
            fetch_row(S, X, j + (ring - 1), r + (ring - 1), c0, m, per_cta)
            # row j's slice landed (j + 1's with ``pipe``; the weight's and bias's with the first)
            T.ptx.cp_async.wait_group(ring - 2 if pipe else ring - 1)
            if pipe:  # row j + 1's moments sent before row j's are read
                if (j + 1 < per_cta) & (((0 <= r) & (r + 1 < m)) if persist else (r + 1 < m)):
                    row_moments(ex, S, R, H, c0, rank, tid, wid, lane, j + 1, r + 1, regs)
            if (0 <= r) & (r < m) if persist else r < m:  # (the cluster's CTAs agree: one row)
                if not pipe:
                    row_moments(ex, S, R, H, c0, rank, tid, wid, lane, j, r, regs)
                row_output(ex, S, WS, BS, B, W, Y, MEAN, RSTD, c0, rank, tid, lane, j, r, eps, regs, affine)
        T.ptx.cp_async.wait_group(0)  # (the last, empty, group)
        close()

    if persist:
        return rows_of

    @T.macro
    def rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps):
        rows_of(X, R, W, B, Y, H, MEAN, RSTD, m, eps, per_cta)

    return rows


def _layer_norm_groups(h: int, dtype: str, threads: int, g: c.RowGroupTile, residual: bool):
    rows_, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load, store = c.group_io(g, dtype)
    weights = c.group_vector(g, h)
    add_residual = _group_residual_add(g, dtype)

    @T.macro
    def rows(X, R, W, B, Y, H, MEAN, RSTD, m, eps):
        T.device_entry()
        b = T.cta_id([(m + rows_ - 1) // rows_])
        T.warp_id([g.warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows_, width), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        w = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        xl = x.local()
        load(x, X[b * rows_ : b * rows_ + rows_, 0:width], stage)
        if residual:  # h = x + r, written
            add_residual(x, R[b * rows_ : b * rows_ + rows_, 0:width], H[b * rows_ : b * rows_ + rows_, 0:width], stage)
        Tx.sum(part[0:1], xl[0:per])
        total = T.cuda.warp_sum(part[0], width=tpr)
        mean = total / float(h)
        if width > h:  # the padding reads as the mean: it adds nothing to the deviations
            Tx.cta.masked_fill(x[0:rows_, 0:width], x[0:rows_, 0:width], lambda i, j: j >= h, mean)
        Tx.add(xl[0:per], xl[0:per], -mean)
        Tx.mul(w[0:per], xl[0:per], xl[0:per])
        Tx.sum(part[0:1], w[0:per])
        dev = T.cuda.warp_sum(part[0], width=tpr)
        rstd = 1.0 / T.sqrt(dev / float(h) + eps)
        if MEAN is not None:  # the group's first lane, for its row (none past the last)
            mine = b * rows_ + tid // tpr
            if (tid % tpr == 0) & (mine < m):
                MEAN[mine] = mean
                RSTD[mine] = rstd
        Tx.mul(xl[0:per], xl[0:per], rstd)
        weights(w, W, tid % tpr)
        Tx.mul(xl[0:per], xl[0:per], w[0:per])
        weights(w, B, tid % tpr)
        Tx.add(xl[0:per], xl[0:per], w[0:per])
        store(Y[b * rows_ : b * rows_ + rows_, 0:width], x, stage)

    return rows


def _ones(x, h: int, dtype: str = ""):
    return c.constant_vector(x, h, dtype or c.dtype_name(x), 1.0)


def _norm_args(name: str, x, normalized_shape, params):
    """The checks the norms share: ``x``'s dtype, ``normalized_shape`` its last dims, each
    ``(label, tensor, default)`` of ``params`` of that shape and of ``x``'s dtype or (16-bit
    ``x``) all float32 (``default(x, h)`` where absent), made a contiguous vector. Returns the
    dtype, the row length, the number of rows and the vectors (`_common.weight_dtype_arg` gives the kernels theirs)."""
    dtype = c.check_dtype(name, x)
    given = {c.dtype_name(t) for _, t, _ in params if t is not None}
    wd = given.pop() if len(given) == 1 else dtype
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k_dims = len(shape)
    if k_dims == 0 or k_dims > len(x.shape) or tuple(x.shape[len(x.shape) - k_dims :]) != shape:
        raise ValueError(f"tirx.ops.{name}: normalized_shape {list(shape)} is not the last dims of an input of shape {list(x.shape)}")
    h = math.prod(shape)
    vectors = []
    for label, t, default in params:
        if t is None:  # (beside given float32 parameters: float32)
            t = default(x, h, wd)
        elif tuple(t.shape) != shape:
            raise ValueError(f"tirx.ops.{name}: {label} of shape {list(t.shape)}; expected {list(shape)}")
        elif c.dtype_name(t) != wd or wd not in (dtype, "float32"):
            raise TypeError(
                f"tirx.ops.{name}: {label} is {c.dtype_name(t)}, the input {dtype}: parameters of the input's dtype, or all float32 "
                f"(PyTorch's mixed precision){'' if len(params) < 2 else ', weight and bias of one dtype'}"
            )
        t = c.contiguous(t)
        vectors.append(t if len(t.shape) == 1 else t.reshape(h))
    return dtype, h, math.prod(x.shape[: len(x.shape) - k_dims]), vectors


def _eps(dtype: str, eps):
    """PyTorch's default for rms_norm: the machine epsilon of the input's dtype."""
    return {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype] if eps is None else eps


def _check_residual(name: str, x, residual, dtype: str):
    """A fused residual add's residual: ``x``'s shape and dtype."""
    if residual is not None and (tuple(residual.shape) != tuple(x.shape) or c.dtype_name(residual) != dtype):
        raise ValueError(
            f"tirx.ops.{name}: residual {list(residual.shape)} {c.dtype_name(residual)} and input {list(x.shape)} {dtype} differ"
        )


def _run(x, normalized_shape, weight, eps, residual=None):
    """rms_norm, or with ``residual`` the fused ``h = x + residual; (rms_norm(h), h)``."""
    name = "rms_norm" if residual is None else "add_rms_norm"
    dtype, h, rows, (w,) = _norm_args(name, x, normalized_shape, [("weight", weight, _ones)])
    _check_residual(name, x, residual, dtype)
    eps = _eps(dtype, eps)
    x = c.contiguous(x)
    out = c.empty_like(x)
    summed = None if residual is None else c.empty_like(x)
    if rows == 0 or h == 0:
        return out if residual is None else (out, summed)
    wd = c.weight_dtype_arg(dtype, w)
    if residual is None:
        rms_norm_kernel(h=h, dtype=dtype, **wd)(c.rows_of(x, h), w, c.rows_of(out, h), rows, float(eps))
        return out
    r = c.rows_of(c.contiguous(residual), h)
    rms_norm_kernel(h=h, dtype=dtype, residual=True, **wd)(
        c.rows_of(x, h), r, w, c.rows_of(out, h), c.rows_of(summed, h), rows, float(eps)
    )
    return out, summed


def _eager(name: str, x, normalized_shape, vectors: tuple, eps, residual, general: Callable, plan: Callable):
    """An eager call of a norm on torch tensors (not recorded, not traced) through a plan per call
    signature (`_common.signature_plan`): the checks, the parameters' defaults' dtype and the
    kernel's lookup made once for tensors of these shapes, strides, dtypes and devices (a decoding
    step's norms are host time). ``vectors``: the parameters (None where absent); ``general(x,
    *vectors, residual)``: the call without a plan, where one gains nothing (no rows, operands
    not contiguous); ``plan(dtype, h, rows, wd, w_arg)``: ``run(x, *vectors, residual)`` given the
    checked call's dtype, row length, rows, the parameters' dtype and the kernel's argument for it
    (`_common.weight_dtype_arg`)."""
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    tensors = c.aligned((x, *vectors, residual))
    given = tuple(t for t in tensors if t is not None)
    key = (name, shape, eps, tuple(t is None for t in tensors))

    def new():
        params = [(label, t, _ones if label == "weight" else _zeros) for label, t in zip(("weight", "bias"), tensors[1:-1])]
        dtype, h, rows, vecs = _norm_args(name, tensors[0], shape, params)
        _check_residual(name, tensors[0], tensors[-1], dtype)
        if rows == 0 or h == 0 or not all(t.is_contiguous() for t in given):
            return lambda *ts: general(*ts)
        return plan(dtype, h, rows, c.dtype_name(vecs[0]), c.weight_dtype_arg(dtype, vecs[0]))

    return c.signature_plan(given, key, new)(*tensors)


def _vector(v, x, h: int, wd: str, default: Callable):
    """A plan's parameter: ``v`` as a vector, or (absent) ``default``'s constant beside ``x``."""
    return default(x, h, wd) if v is None else v.view(h)


def _rms_eager(x, normalized_shape, weight, eps, residual=None):
    """`_run` on torch tensors, eagerly: `_eager`'s plan (its launcher's tensors are of the plan's
    signature: ``fixed_signature``, one size class)."""

    def plan(dtype, h, rows, wd, w_arg):
        import torch

        launch = rms_norm_kernel(h=h, dtype=dtype, residual=residual is not None, **w_arg).launcher(fixed_signature=True)
        e = float(_eps(dtype, eps))

        def run(x, weight, residual):
            out = torch.empty_like(x)
            w = _vector(weight, x, h, wd, _ones)
            if residual is None:
                launch(x.view(rows, h), w, out.view(rows, h), rows, e)
                return out
            summed = torch.empty_like(x)
            launch(x.view(rows, h), residual.view(rows, h), w, out.view(rows, h), summed.view(rows, h), rows, e)
            return out, summed

        return run

    general = lambda x, weight, residual: _run(x, normalized_shape, weight, eps, residual)  # noqa: E731
    return _eager("rms_norm" if residual is None else "add_rms_norm", x, normalized_shape, (weight,), eps, residual, general, plan)


def _layer_norm_eager(x, normalized_shape, weight, bias, eps, residual=None):
    """`_layer_norm_run` on torch tensors, eagerly and without the statistics: `_eager`'s plan."""

    def plan(dtype, h, rows, wd, w_arg):
        import torch

        launch = layer_norm_kernel(h=h, dtype=dtype, residual=residual is not None, **w_arg).launcher(fixed_signature=True)
        e = float(eps)

        def run(x, weight, bias, residual):
            out = torch.empty_like(x)
            w, b = _vector(weight, x, h, wd, _ones), _vector(bias, x, h, wd, _zeros)
            if residual is None:
                launch(x.view(rows, h), w, b, out.view(rows, h), rows, e)
                return out
            summed = torch.empty_like(x)
            launch(x.view(rows, h), residual.view(rows, h), w, b, out.view(rows, h), summed.view(rows, h), rows, e)
            return out, summed

        return run

    general = lambda x, weight, bias, residual: _layer_norm_run(x, normalized_shape, weight, bias, eps, residual=residual)  # noqa: E731
    name = "layer_norm" if residual is None else "add_layer_norm"
    return _eager(name, x, normalized_shape, (weight, bias), eps, residual, general, plan)


def _zeros(x, h: int, dtype: str = ""):
    return c.constant_vector(x, h, dtype or c.dtype_name(x), 0.0)


def _layer_norm_run(x, normalized_shape, weight, bias, eps, stats: bool = False, residual=None):
    """layer_norm; with ``stats``, ``(y, mean, rstd)`` as PyTorch's ``native_layer_norm``: the rows'
    float32 mean and rstd, of shape ``x.shape[:-k] + (1,) * k`` (NaN for rows of no element).
    With ``residual``, the fused ``h = x + residual``: ``(layer_norm(h), h)``, or with ``stats``
    ``(layer_norm(h), h, mean, rstd)``."""
    name = "layer_norm" if residual is None else "add_layer_norm"
    params = [("weight", weight, _ones), ("bias", bias, _zeros)]
    dtype, h, rows, (w, b) = _norm_args(name, x, normalized_shape, params)
    _check_residual(name, x, residual, dtype)
    x = c.contiguous(x)
    out = c.empty_like(x)
    if stats:
        k_dims = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
        stat_shape = tuple(x.shape[: len(x.shape) - k_dims]) + (1,) * k_dims
        mean = c.new_array(x, stat_shape, "float32", None if h else float("nan"))
        rstd = c.new_array(x, stat_shape, "float32", None if h else float("nan"))
    if residual is not None:
        summed = c.empty_like(x)
        if rows and h:
            r = c.rows_of(c.contiguous(residual), h)
            saved = (mean.reshape(rows), rstd.reshape(rows)) if stats else ()
            layer_norm_kernel(h=h, dtype=dtype, residual=True, stats=stats, **c.weight_dtype_arg(dtype, w))(
                c.rows_of(x, h), r, w, b, c.rows_of(out, h), c.rows_of(summed, h), *saved, rows, float(eps)
            )
        return (out, summed, mean, rstd) if stats else (out, summed)
    if rows == 0 or h == 0:
        return (out, mean, rstd) if stats else out
    kernel = layer_norm_kernel(h=h, dtype=dtype, stats=stats, **c.weight_dtype_arg(dtype, w))
    if stats:
        kernel(c.rows_of(x, h), w, b, c.rows_of(out, h), mean.reshape(rows), rstd.reshape(rows), rows, float(eps))
        return out, mean, rstd
    kernel(c.rows_of(x, h), w, b, c.rows_of(out, h), rows, float(eps))
    return out


def register_layer_norm_torch_op():
    """`torch.ops.tirx.layer_norm` (registered on the first call)."""
    return c.torch_op("layer_norm", _layer_norm_torch_op_parts, _autograd("layer_norm"))


def _layer_norm_torch_op_parts():
    """The op returns ``(y, mean, rstd)``, as ``torch.ops.aten.native_layer_norm``: the backward
    reads the saved statistics (`norm_backward`'s ``saved``), not a second pass over x."""
    import torch
    from typing import Tuple

    def schema(
        x: torch.Tensor,
        normalized_shape: List[int],
        weight: Optional[torch.Tensor],
        bias: Optional[torch.Tensor],
        eps: float,
    ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return _layer_norm_run(x, normalized_shape, weight, bias, eps, stats=True)

    def fake(x, normalized_shape, weight, bias, eps):
        k = len(normalized_shape)
        stat = x.new_empty(tuple(x.shape[: x.dim() - k]) + (1,) * k, dtype=torch.float32)
        return torch.empty_like(x, memory_format=torch.contiguous_format), stat, torch.empty_like(stat)

    return schema, fake


def layer_norm(x, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """PyTorch's `torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps)`: a new
    array or tensor."""
    if c.is_torch(x):
        op = c.differentiable("layer_norm", _layer_norm_torch_op_parts, _autograd("layer_norm"))  # (also registers the op)
        if c.compiling() or _records(x, weight, bias):
            shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
            return op(x, shape, weight, bias, float(eps))[0]
        return _layer_norm_eager(x, normalized_shape, weight, bias, eps)
    as_np = (lambda t: None if t is None else np.asarray(t))
    return _layer_norm_run(np.asarray(x), normalized_shape, as_np(weight), as_np(bias), eps)


def register_torch_op():
    """`torch.ops.tirx.rms_norm` (registered on the first call)."""
    return c.torch_op("rms_norm", _torch_op_parts, _autograd("rms_norm"))


def _torch_op_parts():
    """The op's function and fake implementation."""
    import torch

    def schema(x: torch.Tensor, normalized_shape: List[int], weight: Optional[torch.Tensor], eps: Optional[float]) -> torch.Tensor:
        return _run(x, normalized_shape, weight, eps)

    return schema, lambda x, normalized_shape, weight, eps: torch.empty_like(x, memory_format=torch.contiguous_format)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """PyTorch's `torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)` (eps default:
    the machine epsilon of the input's dtype, as PyTorch's): a new array or tensor."""
    if c.is_torch(x):
        op = c.differentiable("rms_norm", _torch_op_parts, _autograd("rms_norm"))  # (also registers the op)
        if c.compiling() or _records(x, weight):
            shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
            return op(x, shape, weight, eps)
        return _rms_eager(x, normalized_shape, weight, eps)
    return _run(np.asarray(x), normalized_shape, None if weight is None else np.asarray(weight), eps)


def register_add_rms_norm_torch_op():
    """`torch.ops.tirx.add_rms_norm` (registered on the first call)."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            x: torch.Tensor, residual: torch.Tensor, normalized_shape: List[int], weight: Optional[torch.Tensor], eps: Optional[float]
        ) -> Tuple[torch.Tensor, torch.Tensor]:
            return _run(x, normalized_shape, weight, eps, residual)

        return schema, lambda x, residual, normalized_shape, weight, eps: (torch.empty_like(x, memory_format=torch.contiguous_format), torch.empty_like(x, memory_format=torch.contiguous_format))

    return c.torch_op("add_rms_norm", parts, _autograd("add_rms_norm"))


def add_rms_norm(x, residual, normalized_shape, weight=None, eps=None):
    """A transformer block's residual add fused into its RMSNorm: ``h = x + residual`` (rounded
    to the input's dtype, as the unfused add), returns ``(rms_norm(h, normalized_shape, weight,
    eps), h)`` with `rms_norm`'s semantics; one pass over memory."""
    if c.is_torch(x):
        op = register_add_rms_norm_torch_op()
        if c.compiling() or _records(x, residual, weight):
            shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
            return op(x, residual, shape, weight, eps)
        return _rms_eager(x, normalized_shape, weight, eps, residual)
    w = None if weight is None else np.asarray(weight)
    return _run(np.asarray(x), normalized_shape, w, eps, np.asarray(residual))


def register_add_layer_norm_torch_op():
    """`torch.ops.tirx.add_layer_norm(x, residual, normalized_shape, weight, bias, eps) -> (y, h,
    mean, rstd)` (registered on the first call): the statistics as `layer_norm`'s op returns them,
    for the backward."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            x: torch.Tensor,
            residual: torch.Tensor,
            normalized_shape: List[int],
            weight: Optional[torch.Tensor],
            bias: Optional[torch.Tensor],
            eps: float,
        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
            return _layer_norm_run(x, normalized_shape, weight, bias, eps, stats=True, residual=residual)

        def fake(x, residual, normalized_shape, weight, bias, eps):
            y, mean, rstd = _layer_norm_torch_op_parts()[1](x, normalized_shape, weight, bias, eps)
            return y, torch.empty_like(y), mean, rstd

        return schema, fake

    return c.torch_op("add_layer_norm", parts, _autograd("add_layer_norm"))


def add_layer_norm(x, residual, normalized_shape, weight=None, bias=None, eps: float = 1e-5):
    """A transformer block's residual add fused into its LayerNorm: ``h = x + residual`` (rounded
    to the input's dtype, as the unfused add), returns ``(layer_norm(h, normalized_shape, weight,
    bias, eps), h)`` with `layer_norm`'s semantics; one pass over memory."""
    if c.is_torch(x):
        op = register_add_layer_norm_torch_op()
        if c.compiling() or _records(x, residual, weight, bias):
            shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
            return op(x, residual, shape, weight, bias, float(eps))[:2]
        return _layer_norm_eager(x, normalized_shape, weight, bias, eps, residual)
    as_np = (lambda t: None if t is None else np.asarray(t))
    return _layer_norm_run(np.asarray(x), normalized_shape, as_np(weight), as_np(bias), eps, residual=np.asarray(residual))


def _records(*tensors) -> bool:
    """Autograd records a call on these tensors (None skipped): it goes through the op."""
    return any(t is not None and c.wants_grad(t) for t in tensors)


def register_backward_op():
    """`torch.ops.tirx.norm_backward(grad, x, weight, mean, rstd, eps, centered, k_dims) -> (dx,
    dw, db)`: the norms' gradient (`norm_backward.py`), an op so that `torch.compile` traces it;
    ``mean`` and ``rstd`` LayerNorm's forward's (or None: recomputed); dw and db are empty where
    there is no weight or (RMSNorm) no bias."""

    def parts():
        import torch
        from typing import Tuple

        def schema(
            grad: torch.Tensor,
            x: torch.Tensor,
            weight: Optional[torch.Tensor],
            mean: Optional[torch.Tensor],
            rstd: Optional[torch.Tensor],
            eps: float,
            centered: bool,
            k_dims: int,
        ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            return backward(grad, x, weight, eps, centered, k_dims, None if mean is None else (mean, rstd))

        def fake(grad, x, weight, mean, rstd, eps, centered, k_dims):
            shape = x.shape[len(x.shape) - k_dims :]
            params = x if weight is None else weight  # (the gradients of the parameters' dtype)
            vec = params.new_empty(shape) if weight is not None else x.new_empty(0)
            return torch.empty_like(x, memory_format=torch.contiguous_format), vec, (params.new_empty(shape) if centered else x.new_empty(0))

        return schema, fake

    return c.torch_op("norm_backward", parts)


def backward(grad, x, weight, eps: float, centered: bool, k_dims: int, saved=None):
    """``(dx, dw, db)`` of `rms_norm` (``centered``: `layer_norm`) over the last ``k_dims`` dims
    of ``x`` for the output's gradient ``grad``; dw and db empty where absent. ``saved``: the
    LayerNorm forward's ``(mean, rstd)`` (float32, one per row), or None (recomputed from x)."""
    from . import norm_backward as nb

    if tuple(grad.shape) != tuple(x.shape) or c.dtype_name(grad) != c.dtype_name(x):
        raise ValueError(
            f"tirx.ops.norm backward: grad {list(grad.shape)} {c.dtype_name(grad)} and input {list(x.shape)} {c.dtype_name(x)} differ"
        )
    h = math.prod(x.shape[len(x.shape) - k_dims :])
    rows = c.rows_of(c.contiguous(x), h)
    if saved is not None:
        saved = tuple(_row_stat(t, label, rows.shape[0]) for t, label in zip(saved, ("mean", "rstd")))
    g = c.rows_of(c.contiguous(grad), h)
    w = None if weight is None else c.contiguous(weight).reshape(h)
    dx, dw, db = nb.run(g, rows, w, eps, centered, saved)
    shape = tuple(x.shape[len(x.shape) - k_dims :])
    empty = c.new_array(x, 0)
    dw = empty if dw is None else dw.reshape(shape)
    db = empty if db is None else db.reshape(shape)
    return dx.reshape(x.shape), dw, db


def _row_stat(t, label: str, rows: int):
    """A saved statistic as the backward takes it: float32, one per row, contiguous."""
    if t is None or c.dtype_name(t) != "float32" or math.prod(t.shape) != rows:
        got = "None" if t is None else f"{list(t.shape)} {c.dtype_name(t)}"
        raise ValueError(f"tirx.ops.layer_norm_backward: {label} is {got}; expected float32 with one value per row ({rows})")
    return c.contiguous(t).reshape(rows)


def rms_norm_backward(grad, x, normalized_shape, weight=None, eps=None):
    """The gradient of `rms_norm(x, normalized_shape, weight, eps)` for the output's gradient
    ``grad``: ``(dx, dweight)`` (``dweight`` None without a weight), new arrays or tensors."""
    dtype, _, _, _ = _norm_args("rms_norm_backward", x, normalized_shape, [])
    k_dims = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    dx, dw, _ = backward(grad, x, weight, _eps(dtype, eps), False, k_dims)
    return dx, (dw if weight is not None else None)


def layer_norm_backward(grad, x, normalized_shape, weight=None, bias=None, eps: float = 1e-5, mean=None, rstd=None):
    """The gradient of `layer_norm(x, normalized_shape, weight, bias, eps)` for the output's
    gradient ``grad``: ``(dx, dweight, dbias)`` (None where the parameter is absent). ``mean`` and
    ``rstd``: the forward's statistics, as ``native_layer_norm`` returns them (float32, a value per
    row): read, not recomputed (then ``eps`` is not used); give both or neither."""
    _norm_args("layer_norm_backward", x, normalized_shape, [])
    if (mean is None) != (rstd is None):
        raise ValueError("tirx.ops.layer_norm_backward: give both mean and rstd (the forward's statistics), or neither")
    k_dims = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    grad_weight = _grad_weight(x, shape, weight, bias)
    dx, dw, db = backward(grad, x, grad_weight, eps, True, k_dims, None if mean is None else (mean, rstd))
    return dx, (dw if weight is not None else None), (db if bias is not None else None)


def _grad_weight(x, shape, weight, bias):
    """The weight LayerNorm's backward reads: the given one, or without it ones of the bias's
    dtype where that is not ``x``'s (float32 parameters: dB in float32, as the bias)."""
    if weight is not None or bias is None or c.dtype_name(bias) == c.dtype_name(x):
        return weight
    return c.new_array(bias, math.prod(shape), c.dtype_name(bias), 1).reshape(tuple(bias.shape))


def _autograd(name: str):
    """The registered op's backward: the norm's input and weight saved (RMSNorm's statistic
    recomputed; LayerNorm's forward's mean and rstd saved too), the fused adds' (``add_rms_norm``,
    ``add_layer_norm``) new residual's gradient added to the norm's."""
    centered = name in ("layer_norm", "add_layer_norm")

    def attach(op):
        backward_op = register_backward_op()

        def setup_context(ctx, inputs, output):
            if name == "add_rms_norm":
                x, residual, shape, weight, eps = inputs
                ctx.save_for_backward(output[1], weight, None, None)  # the normalised row is h = x + residual
            elif name == "add_layer_norm":
                x, residual, shape, weight, bias, eps = inputs
                ctx.save_for_backward(output[1], _grad_weight(x, shape, weight, bias), output[2], output[3])
                ctx.mark_non_differentiable(output[2], output[3])
                ctx.has_bias = bias is not None
            elif name == "rms_norm":
                x, shape, weight, eps = inputs
                ctx.save_for_backward(x, weight, None, None)
            else:
                x, shape, weight, bias, eps = inputs
                ctx.save_for_backward(x, _grad_weight(x, shape, weight, bias), output[1], output[2])
                ctx.mark_non_differentiable(output[1], output[2])  # (as native_layer_norm's)
                ctx.has_bias = bias is not None
            ctx.k_dims, ctx.eps, ctx.has_weight = len(shape), eps, weight is not None

        def grads(ctx, grad):
            x, weight, mean, rstd = ctx.saved_tensors
            dtype = c.dtype_name(x)
            eps = ctx.eps if centered else _eps(dtype, ctx.eps)
            dx, dw, db = backward_op(grad.contiguous(), x, weight, mean, rstd, float(eps), centered, ctx.k_dims)
            return dx, (dw if ctx.has_weight else None), (db if centered and ctx.has_bias else None)

        def backward_fn(ctx, *out_grads):
            if name in ("add_rms_norm", "add_layer_norm"):
                gy, gh = out_grads[:2]
                dx, dw, db = grads(ctx, gy)
                if gh is not None:
                    dx = dx + gh
                return (dx, dx, None, dw, None) if name == "add_rms_norm" else (dx, dx, None, dw, db, None)
            dx, dw, db = grads(ctx, out_grads[0])
            if name == "rms_norm":
                return dx, None, dw, None
            return dx, None, dw, db, None

        op.register_autograd(backward_fn, setup_context=setup_context)

    return attach
