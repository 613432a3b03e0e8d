"""`tirx.ops.softmax(x, dim=-1)` and `tirx.ops.log_softmax(x, dim=-1)`: row softmax in TIRx,
a CTA or a group of lanes per row, rows of any length.

Each thread holds 16-byte vectors of the row in registers (one coalesced pass over global memory
each way); the row is padded to whole vectors of every thread, the padding read as -inf
(`clip=True, other=-inf`: exp2 makes it 0) and never stored. The row max and sum are
thread-local folds then CTA reductions (`T.cuda.cta_max`, `cta_sum`), the exponent one
`exp2((x - max) * log2 e)` per element, the normalisation one multiplication by 1 / sum. A row
wider than the registers (`_common.row_capacity`) is streamed in tiles: an online max and sum
per thread (rescaled by exp2 of the max's change), then a second pass that writes, last tile
first (the likeliest in L2). Short rows are held by lane groups (`_common.RowGroupTile`), many
rows per CTA; rows of 16k+ may be split over a cluster of 2-8 CTAs, each a slice in registers
(`_in_cluster`) or in shared memory (`_in_cluster_shared`: several CTAs per SM), the slices' max
and sum exchanged through distributed shared memory.
The backward of each (`softmax_backward`, `log_softmax_backward`, and autograd through the
registered ops): dx = y * (dy - sum(dy * y)), dx = dy - exp(y) * sum(dy), one CTA per row in the
same design. `log_softmax` writes `(x - max) - log(sum)`, its exponentials in a second register tile (so half
the row fits in registers before it streams). 16-bit inputs compute in float32 and round once.
The number of rows is a run-time scalar; the row length and dtype key the kernel, whose thread
count is autotuned."""

import math

import numpy as np

from .. import MBarrier, T, Tx
from ..autotune import autotune
from . import _common as c

LOG2E, NEG_INF = c.LOG2E, c.NEG_INF


def _tiles(dtype, key) -> int:
    """Float32 tiles held: log_softmax holds the exponentials beside the row."""
    return 2 if key.get("log") else 1


@autotune(configs=c.WIDE_ROW_CONFIGS + c.SHARED_CLUSTER_CONFIGS, key=["n", "dtype", "log", "out_dtype"], prune=c.prune_rows(tiles=_tiles), size=c.rows_class)
def softmax_kernel(
    n: int,
    dtype: str,
    threads: int,
    log: bool = False,
    tpr: int = 0,
    stream: bool = False,
    cluster: int = 0,
    shared: bool = False,
    out_dtype: str = "",
):
    """Softmax (``log``: log-softmax) over rows of ``n`` elements of ``dtype``:
    ``B[r] = softmax(A[r])`` for ``m`` rows; ``tpr``: a group of that many lanes per row;
    ``stream``: the row streamed through register tiles however short; ``cluster``: a cluster of
    that many CTAs per row (``shared``: each CTA's slice in shared memory); ``out_dtype``: B's,
    float32 beside 16-bit rows (PyTorch's ``dtype=torch.float32``: the float32 results stored as
    they are), else the rows' ("")."""
    od = out_dtype or dtype
    if od not in (dtype, "float32"):
        raise ValueError(f"out_dtype={out_dtype!r}: the rows' dtype ({dtype}) or float32")
    if tpr:
        rows = _in_groups(n, dtype, threads, c.RowGroupTile(n, dtype, threads, tpr), log, od)
    elif cluster and shared:
        rows = _in_cluster_shared(n, dtype, threads, c.SharedSlice(n, dtype, threads, cluster), cluster, log, od)
    elif cluster:
        rows = _in_cluster(n, dtype, threads, cluster, log, od)
    else:
        g = c.RowTile(n, dtype, threads, _tiles(dtype, {"log": log}), stream)
        rows = (_streamed if g.streamed else _in_registers)(n, dtype, threads, g, log, od)

    @T.prim_func
    def softmax_rows(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
        A = T.match_buffer(A_ptr, (m, n), dtype)
        B = T.match_buffer(B_ptr, (m, n), od)
        rows(A, B, m)

    return softmax_rows


def _in_registers(n: int, dtype: str, threads: int, g: c.RowTile, log: bool, od: str):
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load = c.row_io(g, dtype, fill=NEG_INF)[0]  # exp2 makes the padding 0
    store = c.row_io(g, od)[1]  # (float32 results stored as they are)
    exp_sum, exp_exact = c.exp2_of(ftz=True), c.exp2_of()  # (a sum's exponentials, an output's)

    @T.macro
    def rows(A, B, m):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = X
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        load(X, A[r, 0:width], stage)
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        mx = T.cuda.cta_max(part[0], warps, scratch.ptr_to([0]))
        if log:
            E = T.alloc_buffer((per,), "float32", scope="local")
            exp_sum(E[0:per], Xl[0:per], mx * LOG2E)  # (summed only: `_common.online_softmax_step`)
            Tx.sum(part[0:1], E[0:per])
            s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
            Tx.add(Xl[0:per], Xl[0:per], -mx)
            Tx.add(Xl[0:per], Xl[0:per], -T.log(s))
        else:
            exp_exact(Xl[0:per], Xl[0:per], mx * LOG2E)
            Tx.sum(part[0:1], Xl[0:per])
            s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
            Tx.mul(Xl[0:per], Xl[0:per], 1.0 / s)
        store(B[r, 0:width], X, stage)

    return rows


def _slices_max_sum(cn: int):
    """A macro ``combine(stats, row, lane)``: the row's max ``row[0]`` and sum of ``exp(x - max)``
    ``row[1]`` from its ``cn`` slices' (``stats[p, 0:2]``: a slice's max and its sum about that
    max, rescaled here): lane p takes slice p's (one exponential a thread, not ``cn``), a warp's
    butterflies combine them (`_common.slot_sum`)."""
    c.check_lanes(cn)

    @T.macro
    def combine(stats, row, lane):
        lane_own = lane < cn
        lane_slot = T.min(lane, cn - 1)
        lane_max = T.if_then_else(lane_own, stats[lane_slot, 0], NEG_INF)
        slices_max = T.cuda.warp_max(lane_max)
        slices_sum = T.cuda.warp_sum(T.if_then_else(lane_own, stats[lane_slot, 1] * T.exp2((lane_max - slices_max) * LOG2E), 0.0))
        row[0] = slices_max
        row[1] = slices_sum

    @T.macro
    def grouped(stats, row, lane):  # (`_common.lane_groups`: lane l takes slice l % cn)
        lane_max = stats[lane % cn, 0]
        slices_max = T.cuda.warp_max(lane_max, width=cn)
        slices_sum = T.cuda.warp_sum(stats[lane % cn, 1] * T.exp2((lane_max - slices_max) * LOG2E), width=cn)
        row[0] = slices_max
        row[1] = slices_sum

    return grouped if c.lane_groups(cn) else combine


def _in_cluster(n: int, dtype: str, threads: int, cn: int, log: bool, od: str):
    """A cluster of ``cn`` CTAs per row, CTA ``rank`` holding the slice ``[rank * width, (rank + 1)
    * width)`` in registers (the last slices padded with -inf). Each CTA publishes its slice's max
    and sum of ``exp(x - max)`` to the cluster (`_common.cluster_exchange`); every CTA combines
    them into the row's (max M, sum S) and writes its slice: ``exp(x - M) / S`` (rescaled from its
    own max), or ``x - M - log S``."""
    g = c.cluster_tile(n, dtype, threads, cn, _tiles(dtype, {"log": log}))
    exp_exact = c.exp2_of()
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load = c.row_io(g, dtype, fill=NEG_INF)[0]
    store = c.row_io(g, od)[1]  # (float32 results stored as they are)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    combine = _slices_max_sum(cn)

    @T.macro
    def rows(A, B, m):
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
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = X
        row = T.alloc_buffer((2,), "float32", scope="local")  # the row's max and sum
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if log:  # the exponentials beside the row
            E = T.alloc_buffer((per,), "float32", scope="local")
        else:
            E = X.local()
        open_(bar)
        r = b // cn
        load(X, A[r, rank * width : rank * width + width], stage)
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        mx = T.cuda.cta_max(part[0], warps, scratch.ptr_to([0]))
        base = T.if_then_else(mx == NEG_INF, 0.0, mx)  # an all-padding slice: its exponents 0
        exp_exact(E[0:per], Xl[0:per], base * LOG2E)
        Tx.sum(part[0:1], E[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, mx, s, 0.0, 0.0)
        combine(stats, row, lane)
        row_max = row[0]
        row_sum = row[1]
        release()
        if log:
            Tx.add(Xl[0:per], Xl[0:per], -row_max - T.log(row_sum))
        else:
            Tx.mul(Xl[0:per], E[0:per], T.exp2((mx - row_max) * LOG2E) / row_sum)
        store(B[r, rank * width : rank * width + width], X, stage)
        close()

    return rows


def _in_cluster_shared(n: int, dtype: str, threads: int, sl: c.SharedSlice, cn: int, log: bool, od: str):
    """`_in_cluster` with each CTA's slice in shared memory (`SharedSlice`): copied in whole by
    `cp.async`, read twice in register tiles: an online max and sum, then the output."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    fetch, landed, chunk = sl.io(dtype)
    store = c.row_io(g, od)[1]  # (float32 results stored as they are)
    online_step = c.online_softmax_step()
    ftz, lift = c.exp2_output_form(od)
    exp_out = c.exp2_of(ftz, lift)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    combine = _slices_max_sum(cn)

    @T.macro
    def rows(A, B, m):
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
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = X
        row = T.alloc_buffer((2,), "float32", scope="local")  # the row's max and sum
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's max and sum so far
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        open_(bar)
        r = b // cn
        fetch(S, 0, A, r, rank * part)
        landed()
        Xl = X.local()
        run[0] = NEG_INF
        run[1] = 0.0
        for k in T.serial(chunks):
            chunk(X, S, 0, k, stage)
            online_step(run, part_, Xl, per)
        mx = T.cuda.cta_max(run[0], warps, scratch.ptr_to([0]))
        base = T.if_then_else(mx == NEG_INF, 0.0, mx)
        s = T.cuda.cta_sum(run[1] * T.exp2((run[0] - base) * LOG2E), warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, mx, s, 0.0, 0.0)
        combine(stats, row, lane)
        row_max = row[0]
        row_sum = row[1]
        release()
        row_base = T.if_then_else(row_max == NEG_INF, 0.0, row_max)
        shift = row_max + T.log(row_sum)
        shift2 = row_base * LOG2E + T.log2(row_sum)  # exp(x - M) / S as one exp2
        for k in T.serial(chunks):
            chunk(X, S, 0, k, stage)
            if log:
                Tx.add(Xl[0:per], Xl[0:per], -shift)
            else:
                exp_out(Xl[0:per], Xl[0:per], shift2)
                if lift:
                    Tx.mul(Xl[0:per], Xl[0:per], 2.0**-lift)
            c0 = rank * part + k * width
            store(B[r, c0 : c0 + width], X, stage)
        close()

    return rows


def _in_groups(n: int, dtype: str, threads: int, g: c.RowGroupTile, log: bool, od: str):
    rows_, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load = c.group_io(g, dtype, fill=NEG_INF)[0]
    store = c.group_io(g, od)[1]  # (float32 results stored as they are)
    exp_sum, exp_exact = c.exp2_of(ftz=True), c.exp2_of()  # (a sum's exponentials, an output's)

    @T.macro
    def rows(A, B, m):
        T.device_entry()
        b = T.cta_id([(m + rows_ - 1) // rows_])
        T.warp_id([g.warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows_, width), dtype, scope="local", layout=g.layout)
        else:
            stage = X
        part = T.alloc_buffer((1,), "float32", scope="local")
        load(X, A[b * rows_ : b * rows_ + rows_, 0:width], stage)
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        mx = T.cuda.warp_max(part[0], width=tpr)
        if log:
            E = T.alloc_buffer((per,), "float32", scope="local")
            exp_sum(E[0:per], Xl[0:per], mx * LOG2E)  # (summed only: `_common.online_softmax_step`)
            Tx.sum(part[0:1], E[0:per])
            s = T.cuda.warp_sum(part[0], width=tpr)
            Tx.add(Xl[0:per], Xl[0:per], -mx)
            Tx.add(Xl[0:per], Xl[0:per], -T.log(s))
        else:
            exp_exact(Xl[0:per], Xl[0:per], mx * LOG2E)
            Tx.sum(part[0:1], Xl[0:per])
            s = T.cuda.warp_sum(part[0], width=tpr)
            Tx.mul(Xl[0:per], Xl[0:per], 1.0 / s)
        store(B[b * rows_ : b * rows_ + rows_, 0:width], X, stage)

    return rows


def _streamed(n: int, dtype: str, threads: int, g: c.RowTile, log: bool, od: str):
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    load = c.row_io(g, dtype, fill=NEG_INF)[0]
    store = c.row_io(g, od)[1]  # (float32 results stored as they are)
    online_step = c.online_softmax_step()
    ftz, lift = c.exp2_output_form(od)
    exp_out = c.exp2_of(ftz, lift)

    @T.macro
    def rows(A, B, m):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = X
        part = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's max and sum so far
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        Xl = X.local()
        run[0] = NEG_INF
        run[1] = 0.0
        for k in T.serial(chunks):
            load(X, A[r, k * width : k * width + width], stage)
            online_step(run, part, Xl, per)
        mx = T.cuda.cta_max(run[0], warps, scratch.ptr_to([0]))
        row_base = T.if_then_else(mx == NEG_INF, 0.0, mx)
        s = T.cuda.cta_sum(run[1] * T.exp2((run[0] - row_base) * LOG2E), warps, scratch.ptr_to([0]))
        inv = 1.0 / s
        log_sum = T.log(s)
        for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
            k = chunks - 1 - j
            load(X, A[r, k * width : k * width + width], stage)
            if log:
                Tx.add(Xl[0:per], Xl[0:per], -mx)
                Tx.add(Xl[0:per], Xl[0:per], -log_sum)
            else:
                exp_out(Xl[0:per], Xl[0:per], row_base * LOG2E)
                Tx.mul(Xl[0:per], Xl[0:per], inv * 2.0**-lift if lift else inv)
            store(B[r, k * width : k * width + width], X, stage)

    return rows


@autotune(
    configs=c.WIDE_ROW_CONFIGS + c.SHARED_CLUSTER_CONFIGS, key=["n", "dtype", "log"], prune=c.prune_rows(tiles=lambda dtype, key: 3), size=c.rows_class
)
def softmax_backward_kernel(
    n: int,
    dtype: str,
    threads: int,
    log: bool = False,
    tpr: int = 0,
    stream: bool = False,
    cluster: int = 0,
    shared: bool = False,
    slice_limit: int = c.SLICE_SHARED_MAX,
):
    """The gradient of softmax (``log``: log-softmax) over rows of ``n`` elements: ``DX[r]`` from
    the forward's output ``Y[r]`` and its gradient ``DY[r]``, for ``m`` rows; ``tpr``: a group of
    that many lanes per row; ``stream``: the rows streamed through register tiles; ``cluster``: a
    cluster of that many CTAs per row (``shared``: each CTA's slices in shared memory, both of
    softmax's where they fit ``slice_limit`` bytes)."""
    if tpr:
        rows = _backward_in_groups(n, dtype, threads, c.RowGroupTile(n, dtype, threads, tpr), log)
    elif cluster and shared:
        rows = _backward_in_cluster_shared(n, dtype, threads, c.SharedSlice(n, dtype, threads, cluster), cluster, log, slice_limit)
    elif cluster:
        rows = _backward_in_cluster(n, dtype, threads, cluster, log)
    else:
        rows = _backward_rows(n, dtype, threads, c.RowTile(n, dtype, threads, 3, stream), log)

    @T.prim_func
    def softmax_backward_rows(Y_ptr: T.handle, DY_ptr: T.handle, DX_ptr: T.handle, m: T.int32):
        Y = T.match_buffer(Y_ptr, (m, n), dtype)
        DY = T.match_buffer(DY_ptr, (m, n), dtype)
        DX = T.match_buffer(DX_ptr, (m, n), dtype)
        rows(Y, DY, DX, m)

    return softmax_backward_rows


def _backward_rows(n: int, dtype: str, threads: int, g: c.RowTile, log: bool):
    """A CTA per row, in registers or streamed (a pass for the sum, one that writes)."""
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    load, store = c.row_io(g, dtype)

    @T.macro
    def rows(Y, DY, DX, m):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        y = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = dy
        part = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        yl = y.local()
        dyl = dy.local()
        acc[0] = 0.0
        for k in T.serial(chunks):  # sum(dy * y), or sum(dy)
            load(dy, DY[r, k * width : k * width + width], stage)
            if log:
                Tx.sum(part[0:1], dyl[0:per])
            else:
                load(y, Y[r, k * width : k * width + width], stage)
                Tx.mul(yl[0:per], yl[0:per], dyl[0:per])
                Tx.sum(part[0:1], yl[0:per])
            acc[0] = acc[0] + part[0]
        s = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        for j in T.serial(chunks):  # last tile first: the tiles read last are the likeliest in L2
            k = chunks - 1 - j
            if chunks > 1:
                load(dy, DY[r, k * width : k * width + width], stage)
            load(y, Y[r, k * width : k * width + width], stage)
            if log:  # dy - exp(y) * s
                Tx.exp(yl[0:per], yl[0:per])
                Tx.fma(dyl[0:per], yl[0:per], -s, dyl[0:per])
            else:  # y * (dy - s)
                Tx.add(dyl[0:per], dyl[0:per], -s)
                Tx.mul(dyl[0:per], dyl[0:per], yl[0:per])
            store(DX[r, k * width : k * width + width], dy, stage)

    return rows


def _backward_in_cluster(n: int, dtype: str, threads: int, cn: int, log: bool):
    """A cluster of ``cn`` CTAs per row, each holding a slice of ``y`` and ``dy`` in registers; the
    slices' sums (of ``dy * y``, or ``dy``) summed through the cluster (`_common.cluster_exchange`)."""
    g = c.cluster_tile(n, dtype, threads, cn, 3)
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"
    load, store = c.row_io(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    slot_sum = c.slot_sum(cn)

    @T.macro
    def rows(Y, DY, DX, m):
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
        y = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = dy
        prod = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        yl, dyl = y.local(), dy.local()
        open_(bar)
        r = b // cn
        c0 = rank * width
        load(dy, DY[r, c0 : c0 + width], stage)
        load(y, Y[r, c0 : c0 + width], stage)
        if log:
            Tx.sum(part[0:1], dyl[0:per])
        else:
            Tx.mul(prod[0:per], yl[0:per], dyl[0:per])
            Tx.sum(part[0:1], prod[0:per])
        mine_sum = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, mine_sum, 0.0, 0.0, 0.0)
        slot_sum(stats, 0, 0, part, 0, lane)
        s = part[0]
        release()
        if log:  # dy - exp(y) * s
            Tx.exp(yl[0:per], yl[0:per])
            Tx.fma(dyl[0:per], yl[0:per], -s, dyl[0:per])
        else:  # y * (dy - s)
            Tx.add(dyl[0:per], dyl[0:per], -s)
            Tx.mul(dyl[0:per], dyl[0:per], yl[0:per])
        store(DX[r, c0 : c0 + width], dy, stage)
        close()

    return rows


def _backward_in_cluster_shared(n: int, dtype: str, threads: int, sl: c.SharedSlice, cn: int, log: bool, slice_limit: int):
    """`_backward_in_cluster` with each CTA's slices in shared memory (`SharedSlice`), read in
    register tiles twice: the sum, then the output. log_softmax's sum needs only ``dy``: its
    slice is held, ``y`` read once, in the second pass. softmax's needs both: ``y`` is held, and
    ``dy`` too where both slices fit ``slice_limit`` bytes (else it is read twice, the second
    time from L2)."""
    g, part, chunks, widen = sl.tile, sl.part, sl.chunks, dtype != "float32"
    width, per, warps = g.width, g.per, g.warps
    held_y, held_dy = not log, log or 2 * sl.bytes <= slice_limit
    fetch, landed, chunk = sl.io(dtype)
    load_tile, store = c.row_io(g, dtype)
    open_, publish, release, close = c.cluster_exchange(cn, one_row=True)
    slot_sum = c.slot_sum(cn)

    @T.macro
    def rows(Y, DY, DX, m):
        T.device_entry()
        b = T.cta_id([m * cn])
        rank = T.cta_id_in_cluster([cn])
        T.warp_id([warps])
        lane = T.lane_id([32])
        tid = T.thread_id([threads])
        pool = T.SMEMPool()
        if held_y:
            Ys = pool.alloc((1, part), dtype)
        if held_dy:
            DYs = pool.alloc((1, part), dtype)
        stats = pool.alloc((cn, 4), "float32")
        mine = pool.alloc((4,), "float32")
        bar = MBarrier(pool, 1)
        pool.commit()
        y = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = dy
        part_ = T.alloc_buffer((1,), "float32", scope="local")
        acc = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        yl, dyl = y.local(), dy.local()
        open_(bar)
        r = b // cn
        if held_dy:
            fetch(DYs, 0, DY, r, rank * part)
        if held_y:
            fetch(Ys, 0, Y, r, rank * part)
        landed()
        acc[0] = 0.0
        for k in T.serial(chunks):
            if held_dy:
                chunk(dy, DYs, 0, k, stage)
            else:
                c0 = rank * part + k * width
                load_tile(dy, DY[r, c0 : c0 + width], stage)
            if not log:
                chunk(y, Ys, 0, k, stage)
                Tx.mul(dyl[0:per], yl[0:per], dyl[0:per])
            Tx.sum(part_[0:1], dyl[0:per])
            acc[0] = acc[0] + part_[0]
        mine_sum = T.cuda.cta_sum(acc[0], warps, scratch.ptr_to([0]))
        publish(stats, mine, bar, rank, tid, 0, mine_sum, 0.0, 0.0, 0.0)
        slot_sum(stats, 0, 0, part_, 0, lane)
        s = part_[0]
        release()
        for k in T.serial(chunks):
            c1 = rank * part + k * width
            if held_y:
                chunk(y, Ys, 0, k, stage)
            else:
                load_tile(y, Y[r, c1 : c1 + width], stage)
            if held_dy:
                chunk(dy, DYs, 0, k, stage)
            else:
                load_tile(dy, DY[r, c1 : c1 + width], stage)
            if log:  # dy - exp(y) * s
                Tx.exp(yl[0:per], yl[0:per])
                Tx.fma(dyl[0:per], yl[0:per], -s, dyl[0:per])
            else:  # y * (dy - s)
                Tx.add(dyl[0:per], dyl[0:per], -s)
                Tx.mul(dyl[0:per], dyl[0:per], yl[0:per])
            store(DX[r, c1 : c1 + width], dy, stage)
        close()

    return rows


def _backward_in_groups(n: int, dtype: str, threads: int, g: c.RowGroupTile, log: bool):
    rows_, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load, store = c.group_io(g, dtype)

    @T.macro
    def rows(Y, DY, DX, m):
        T.device_entry()
        b = T.cta_id([(m + rows_ - 1) // rows_])
        T.warp_id([g.warps])
        T.lane_id([32])
        T.thread_id([threads])
        y = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        dy = T.alloc_buffer((rows_, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows_, width), dtype, scope="local", layout=g.layout)
        else:
            stage = dy
        part = T.alloc_buffer((1,), "float32", scope="local")
        prod = T.alloc_buffer((per,), "float32", scope="local")
        yl = y.local()
        dyl = dy.local()
        load(dy, DY[b * rows_ : b * rows_ + rows_, 0:width], stage)
        load(y, Y[b * rows_ : b * rows_ + rows_, 0:width], stage)
        if log:  # dy - exp(y) * sum(dy)
            Tx.sum(part[0:1], dyl[0:per])
            s = T.cuda.warp_sum(part[0], width=tpr)
            Tx.exp(yl[0:per], yl[0:per])
            Tx.fma(dyl[0:per], yl[0:per], -s, dyl[0:per])
        else:  # y * (dy - sum(dy * y))
            Tx.mul(prod[0:per], yl[0:per], dyl[0:per])
            Tx.sum(part[0:1], prod[0:per])
            s = T.cuda.warp_sum(part[0], width=tpr)
            Tx.add(dyl[0:per], dyl[0:per], -s)
            Tx.mul(dyl[0:per], dyl[0:per], yl[0:per])
        store(DX[b * rows_ : b * rows_ + rows_, 0:width], dy, stage)

    return rows


def _rows_dim(name: str, x, dim: int) -> int:
    """``dim`` normalised (an `IndexError` out of range). The kernel reduces rows of contiguous
    elements: the last dim is read as is (a contiguous copy of a strided tensor), any other
    with that dim moved last — a view where its stride is 1 (a channels-last tensor's
    channels), else a transposing copy — and the result moved back, contiguous as PyTorch's."""
    nd = len(x.shape)
    if not -nd <= dim < nd:
        raise IndexError(f"tirx.ops.{name}: dim {dim} out of range for a {nd}-d input")
    return dim % nd


def _moved(x, dim: int):
    """``x`` with ``dim`` moved last (a view; the run's contiguous copy is free where that dim
    has stride 1)."""
    return x.movedim(dim, -1) if c.is_torch(x) else np.moveaxis(x, dim, -1)


def _back(out, dim: int):
    return out.movedim(-1, dim) if c.is_torch(out) else np.moveaxis(out, -1, dim)


def _backward_run(grad, y, dim: int, log: bool):
    name = "log_softmax_backward" if log else "softmax_backward"
    dtype = c.check_dtype(name, y)
    if tuple(grad.shape) != tuple(y.shape) or c.dtype_name(grad) != dtype:
        raise ValueError(
            f"tirx.ops.{name}: grad {list(grad.shape)} {c.dtype_name(grad)} and output {list(y.shape)} {dtype} differ"
        )
    nd = len(y.shape)
    if nd == 0:
        out = c.empty_like(y)
        out[...] = 0
        return out
    dim = _rows_dim(name, y, dim)
    if dim != nd - 1:
        return c.contiguous(_back(_backward_run(_moved(grad, dim), _moved(y, dim), -1, log), dim))
    grad, y = c.contiguous(grad), c.contiguous(y)
    out = c.empty_like(y)
    n = y.shape[-1]
    rows = math.prod(y.shape[:-1])
    if rows == 0 or n == 0:
        return out
    softmax_backward_kernel(n=n, dtype=dtype, log=log)(c.rows_of(y, n), c.rows_of(grad, n), c.rows_of(out, n), rows)
    return out


def _run(x, dim: int, log: bool = False, out_dtype: str = ""):
    name = "log_softmax" if log else "softmax"
    dtype = c.check_dtype(name, x)
    nd = len(x.shape)
    if nd == 0:
        out = c.new_array(x, (), out_dtype or None)
        out[...] = 0 if log else 1
        return out
    dim = _rows_dim(name, x, dim)
    if dim != nd - 1:  # a stride-1 dim: rows of the tensor with it moved last, and back
        return c.contiguous(_back(_run(_moved(x, dim), -1, log, out_dtype), dim))  # contiguous, as PyTorch's
    x = c.contiguous(x)
    out = c.new_array(x, tuple(x.shape), out_dtype or None)
    n = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    if rows == 0 or n == 0:
        return out
    softmax_kernel(n=n, dtype=dtype, log=log, **({"out_dtype": out_dtype} if out_dtype else {}))(c.rows_of(x, n), c.rows_of(out, n), rows)
    return out


def register_torch_op():
    """`torch.ops.tirx.softmax` (registered on the first call), with its backward."""
    return c.torch_op("softmax", _torch_op_parts, _autograd(log=False))


def register_backward_op():
    """`torch.ops.tirx.softmax_backward(grad, y, dim, log)`: the ops' gradient, an op itself so
    that `torch.compile` traces the backward too."""

    def parts():
        import torch

        def schema(grad: torch.Tensor, y: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
            return _backward_run(grad, y, dim, log)

        return schema, lambda grad, y, dim, log: torch.empty_like(y, memory_format=torch.contiguous_format)

    return c.torch_op("softmax_backward", parts)


def _autograd(log: bool):
    def attach(op):
        backward_op = register_backward_op()

        def setup_context(ctx, inputs, output):
            ctx.dim, ctx.in_dtype = inputs[1], inputs[0].dtype
            ctx.save_for_backward(output)

        def backward(ctx, grad):
            (y,) = ctx.saved_tensors
            dx = backward_op(grad.contiguous(), y, ctx.dim, log)  # (in the output's dtype: float32 for dtype=)
            return dx.to(ctx.in_dtype), None, None

        op.register_autograd(backward, setup_context=setup_context)

    return attach


def _fake(x, dim, out_dtype):
    import torch

    return torch.empty_like(x, memory_format=torch.contiguous_format, dtype=getattr(torch, out_dtype) if out_dtype else None)


def _torch_op_parts():
    """The op's function and fake implementation."""
    import torch

    def schema(x: torch.Tensor, dim: int, out_dtype: str) -> torch.Tensor:
        return _run(x, dim, False, out_dtype)

    return schema, _fake


def _cast(name: str, x, dtype):
    """``(x, out_dtype)`` for PyTorch's ``dtype=`` of softmax and log_softmax ("the input tensor
    is cast to dtype before the operation is performed"): float32 of 16-bit rows is the kernel's
    ``out_dtype`` (read as they are, computed in float32 as ever, the results stored as they
    are: the same as a cast first, a pass fewer); another dtype, ``x`` cast to it first (its
    own pass); None or ``x``'s own, as it is."""
    if dtype is None:
        return x, ""
    want = str(dtype).replace("torch.", "")
    if want not in ("float32", "float16", "bfloat16"):
        raise TypeError(f"tirx.ops.{name}: dtype={dtype}; float32, float16 or bfloat16")
    have = c.dtype_name(x)
    if have == want:
        return x, ""
    if want == "float32" and have in ("bfloat16", "float16"):
        return x, "float32"
    if c.is_torch(x):
        import torch

        return x.to(getattr(torch, want)), ""
    from ..runtime import numpy_dtype

    return np.asarray(x).astype(numpy_dtype(want)), ""


def softmax(x, dim: int = -1, dtype=None):
    """Softmax of ``x`` along ``dim`` (PyTorch's `torch.softmax(x, dim, dtype=None)`): a new array
    or tensor; ``dtype``: as if ``x`` were cast to it first (`_cast`)."""
    x, od = _cast("softmax", x, dtype)
    if c.is_torch(x):
        fn = c.differentiable("softmax", _torch_op_parts, _autograd(log=False))  # (also registers the op)
        return fn(x, dim, od) if c.compiling() or c.wants_grad(x) else _run(x, dim, False, od)
    return _run(np.asarray(x), dim, False, od)


def register_log_torch_op():
    """`torch.ops.tirx.log_softmax` (registered on the first call), with its backward."""
    return c.torch_op("log_softmax", _log_torch_op_parts, _autograd(log=True))


def _log_torch_op_parts():
    import torch

    def schema(x: torch.Tensor, dim: int, out_dtype: str) -> torch.Tensor:
        return _run(x, dim, True, out_dtype)

    return schema, _fake


def log_softmax(x, dim: int = -1, dtype=None):
    """Log-softmax of ``x`` along ``dim`` (PyTorch's `torch.log_softmax(x, dim, dtype=None)`): a
    new array or tensor; ``dtype``: as if ``x`` were cast to it first (`_cast`)."""
    x, od = _cast("log_softmax", x, dtype)
    if c.is_torch(x):
        fn = c.differentiable("log_softmax", _log_torch_op_parts, _autograd(log=True))  # (also registers the op)
        return fn(x, dim, od) if c.compiling() or c.wants_grad(x) else _run(x, dim, True, od)
    return _run(np.asarray(x), dim, True, od)


def softmax_backward(grad, y, dim: int = -1):
    """The gradient of `softmax` at its output ``y`` (PyTorch's `_softmax_backward_data`):
    ``y * (grad - sum(grad * y))`` along ``dim``, a new array or tensor."""
    return _backward_call(grad, y, dim, False)


def log_softmax_backward(grad, y, dim: int = -1):
    """The gradient of `log_softmax` at its output ``y``: ``grad - exp(y) * sum(grad)``."""
    return _backward_call(grad, y, dim, True)


def _backward_call(grad, y, dim, log):
    if c.is_torch(y):
        return register_backward_op()(grad, y, dim, log) if c.compiling() else _backward_run(grad, y, dim, log)
    return _backward_run(np.asarray(grad), np.asarray(y), dim, log)
