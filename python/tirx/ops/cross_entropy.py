"""`tirx.ops.cross_entropy(logits, target, weight=None, ignore_index=-100, label_smoothing=0.0,
reduction="mean")`: PyTorch's `torch.nn.functional.cross_entropy` with class indices, in TIRx,
a CTA (or, for short rows, a group of lanes) per row, vocabularies of any size (256k included).

The forward reads each row of logits once and writes two floats per row, never the softmax:
``lse = log(sum(exp(x)))`` (an online max and sum per thread over the row's tiles, rescaled by
exp2 of the max's change, then CTA reductions; the padding past the row reads -inf) and the
row's loss ``lse - (1 - s) * x[t] - s / C * sum(x)`` (``s`` the label smoothing, the sum of the
row taken with its padding masked to 0), 0 where the target is ``ignore_index``. The backward
reads the row again and writes ``dx = g * (exp(x - lse) - s / C - (1 - s) * [j == t])`` (``g``
the row's loss gradient, 0 on ignored rows): one pass each way, no reduction. The reduction over
rows ("mean": divided by the number of rows not ignored, NaN when all are, as PyTorch's; "sum";
"none") is a PyTorch (or NumPy) sum of one float per row, through which autograd reaches the
per-row gradient; outside autograd (and without class weights) the forward's ``sums`` form
writes each CTA's sum of its rows' losses and count of rows kept instead, and those are summed:
no row's float written, the targets not read again. A target outside ``[0, C)`` that is not
``ignore_index`` gives a NaN loss and gradient for its row (PyTorch stops the device with an assertion; the simulator path raises).
Class weights ``w`` (PyTorch's): a row's loss ``(1 - s) * w[t] * (lse - x[t]) + s / C *
(lse * sum(w) - sum(w * x))``; without smoothing that is the unweighted row's loss times
``w[t]`` (the rows scaled outside the kernels, forward and backward); with it the weighted
kernels read the weights beside each row. "mean" divides by the sum of the targets' weights.
Logits compute in float32 whatever their dtype; the loss is returned in the logits' dtype."""

from typing import Optional

import numpy as np

from .. import T, Tx
from ..autotune import autotune
from . import _common as c

LOG2E, NEG_INF = c.LOG2E, c.NEG_INF
NAN = float("nan")
_REDUCTIONS = ("mean", "sum", "none")


def _tiles(dtype, key) -> int:
    """Float32 tiles held: label smoothing sums the row beside its exponentials; with class
    weights, their tile too."""
    return 1 + bool(key.get("smoothing")) + bool(key.get("weighted"))


def _as_target_allows(value, t, ok, ignore_index):
    """A row's ``value`` as its target ``t`` allows: 0 where ``t`` is ``ignore_index``, NaN where
    it is out of range (``ok`` false)."""
    return T.if_then_else(t == ignore_index, 0.0, T.if_then_else(ok, value, NAN))


def _row_loss(lse, x_t, ls, v: int, total=None, w_t=None, w_total=None):
    """A row's loss (PyTorch's) from its log-sum-exp and target logit ``x_t``: with label
    smoothing ``ls`` also the sum ``total`` of its logits, with class weights of ``w * x``
    (then ``w_t`` its target's weight and ``w_total`` the weights' sum)."""
    if w_t is not None:
        return (1.0 - ls) * w_t * (lse - x_t) + ls / float(v) * (lse * w_total - total)
    if total is not None:
        return lse - (1.0 - ls) * x_t - ls / float(v) * total
    return lse - x_t


def _target_grad(x_t, lse, gr, floor, ls, gp=None, w_t=None):
    """The gradient at a row's target logit: its softmax times the row's scale ``gr`` less the
    floor ``ls / v`` and ``1 - ls`` of it; with class weights the softmax times ``gp`` and the
    rest times the target's weight ``w_t``."""
    if w_t is not None:
        return gp * T.exp2((x_t - lse) * LOG2E) - (floor + gr * (1.0 - ls)) * w_t
    return gr * T.exp2((x_t - lse) * LOG2E) - floor - gr * (1.0 - ls)


def _weighted_needs_smoothing(weighted: bool, smoothing: bool) -> None:
    # (class weights without label smoothing scale each row's loss and gradient by its target's
    # weight: the unweighted kernels' work, scaled on the rows outside them)
    if weighted and not smoothing:
        raise ValueError("weighted=True is the label-smoothing kernel's (smoothing=True)")


@autotune(configs=c.ROW_CONFIGS, key=["v", "dtype", "smoothing", "weighted"], prune=c.prune_rows("v", tiles=_tiles), size=c.rows_class)
def cross_entropy_kernel(
    v: int, dtype: str, threads: int, smoothing: bool = False, tpr: int = 0, stream: bool = False, weighted: bool = False, sums: bool = False
):
    """``LOSS[r]`` and ``LSE[r]`` (float32) of ``m`` rows of ``v`` logits of ``dtype`` and their
    int64 targets ``TGT[r]``; ``smoothing``: the label-smoothing term is computed (``ls > 0``);
    ``weighted``: with class weights ``W`` (float32, ``v``; label smoothing only), the loss
    ``(1 - ls) W[t] (lse - x[t]) + ls / v * (lse * sum(W) - sum(W * x))``, PyTorch's;
    ``tpr``: a group of that many lanes per row; ``stream``: the row read in register tiles.
    ``sums`` (unweighted): no row's loss or lse written, but each CTA's sum of its rows' losses
    and count of rows not ignored, ``PART[b, 0]`` and ``PART[b, 1]`` (float32, ``PART`` (m, 2),
    its first `sum_parts` rows written): what "mean" and "sum" reduce, without the rows' floats
    and the targets read again. The same tuned choice as without it (the same key)."""
    _weighted_needs_smoothing(weighted, smoothing)
    if sums and weighted:
        raise ValueError("sums: the unweighted kernel's (class weights scale each row's loss: weighted=False)")
    if tpr:
        rows = _forward_in_groups(v, dtype, threads, c.RowGroupTile(v, dtype, threads, tpr), smoothing, weighted)
    else:
        g = c.RowTile(v, dtype, threads, _tiles(dtype, {"smoothing": smoothing, "weighted": weighted}), stream)
        rows = _forward_rows(v, dtype, threads, g, smoothing, weighted)

    if sums:

        @T.prim_func
        def cross_entropy_sums(X_ptr: T.handle, TGT_ptr: T.handle, PART_ptr: T.handle, m: T.int32, ignore_index: T.int64, ls: T.float32):
            X = T.match_buffer(X_ptr, (m, v), dtype)
            TGT = T.match_buffer(TGT_ptr, (m,), "int64")
            PART = T.match_buffer(PART_ptr, (m, 2), "float32")
            rows(X, TGT, None, None, m, ignore_index, ls, None, PART)

        return cross_entropy_sums

    if weighted:

        @T.prim_func
        def cross_entropy_weighted_rows(
            X_ptr: T.handle,
            TGT_ptr: T.handle,
            W_ptr: T.handle,
            LOSS_ptr: T.handle,
            LSE_ptr: T.handle,
            m: T.int32,
            ignore_index: T.int64,
            ls: T.float32,
        ):
            X = T.match_buffer(X_ptr, (m, v), dtype)
            TGT = T.match_buffer(TGT_ptr, (m,), "int64")
            W = T.match_buffer(W_ptr, (v,), "float32")
            LOSS = T.match_buffer(LOSS_ptr, (m,), "float32")
            LSE = T.match_buffer(LSE_ptr, (m,), "float32")
            rows(X, TGT, LOSS, LSE, m, ignore_index, ls, W)

        return cross_entropy_weighted_rows

    @T.prim_func
    def cross_entropy_rows(
        X_ptr: T.handle,
        TGT_ptr: T.handle,
        LOSS_ptr: T.handle,
        LSE_ptr: T.handle,
        m: T.int32,
        ignore_index: T.int64,
        ls: T.float32,
    ):
        X = T.match_buffer(X_ptr, (m, v), dtype)
        TGT = T.match_buffer(TGT_ptr, (m,), "int64")
        LOSS = T.match_buffer(LOSS_ptr, (m,), "float32")
        LSE = T.match_buffer(LSE_ptr, (m,), "float32")
        rows(X, TGT, LOSS, LSE, m, ignore_index, ls)

    return cross_entropy_rows


def _forward_rows(v: int, dtype: str, threads: int, g: c.RowTile, smoothing: bool, weighted: bool = False):
    """A CTA per row: the row in registers, or streamed through them (an online max and sum)."""
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"
    padded = chunks * width > v
    load, _ = c.row_io(g, dtype, fill=NEG_INF)  # exp2 makes the padding 0
    load_w, _ = c.row_io(g, "float32")  # (the weights' padding 0)
    online_step = c.online_softmax_step()

    @T.macro
    def rows(X, TGT, LOSS, LSE, m, ignore_index, ls, W=None, PART=None):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        if smoothing and padded:
            kept = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if weighted:
            w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
            wl = w.local()
        part = T.alloc_buffer((1,), "float32", scope="local")
        # this thread's max, sum of exp, sum of x (of w * x, weighted), and sum of w
        run = T.alloc_buffer((4 if weighted else 3,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        xl = x.local()
        run[0] = NEG_INF
        run[1] = 0.0
        run[2] = 0.0
        if weighted:
            run[3] = 0.0
        for k in T.serial(chunks):
            load(x, X[r, k * width : k * width + width], stage)
            if smoothing:
                if padded:  # the padding (-inf) adds nothing to the row's sum
                    Tx.cta.masked_fill(kept[0:width], x[0:width], lambda j: k * width + j >= v, 0.0)
                    seen = kept.local()
                else:
                    seen = xl
                if weighted:
                    load_w(w, W[k * width : k * width + width], w)
                    Tx.sum(part[0:1], wl[0:per])
                    run[3] = run[3] + part[0]
                    Tx.mul(wl[0:per], wl[0:per], seen[0:per])
                    Tx.sum(part[0:1], wl[0:per])
                else:
                    Tx.sum(part[0:1], seen[0:per])
                run[2] = run[2] + part[0]
            online_step(run, part, xl, per)
        mx = T.cuda.cta_max(run[0], warps, scratch.ptr_to([0]))
        row_base = T.if_then_else(mx == NEG_INF, 0.0, mx)
        s = T.cuda.cta_sum(run[1] * T.exp2((run[0] - row_base) * LOG2E), warps, scratch.ptr_to([0]))
        lse = row_base + T.log(s)
        if smoothing:
            total = T.cuda.cta_sum(run[2], warps, scratch.ptr_to([0]))
        if weighted:
            w_total = T.cuda.cta_sum(run[3], warps, scratch.ptr_to([0]))
        t = TGT[r]
        ok = t >= 0 and t < v
        # A gather guarded by its target's range (a lazily evaluated load).
        x_t = T.if_then_else(ok, T.cast(X[r, T.cast(t, "int32")], "float32"), 0.0)
        if weighted:
            w_t = T.if_then_else(ok, W[T.cast(t, "int32")], 0.0)
            loss = _row_loss(lse, x_t, ls, v, total, w_t, w_total)
        elif smoothing:
            loss = _row_loss(lse, x_t, ls, v, total)
        else:
            loss = _row_loss(lse, x_t, ls, v)
        if tid == 0:
            if PART is None:
                LSE[r] = lse
                LOSS[r] = _as_target_allows(loss, t, ok, ignore_index)
            else:  # (a CTA's one row)
                PART[r, 0] = _as_target_allows(loss, t, ok, ignore_index)
                PART[r, 1] = T.if_then_else(t == ignore_index, 0.0, 1.0)

    return rows


@autotune(configs=c.ROW_CONFIGS, key=["v", "dtype", "weighted"], prune=c.prune_rows("v", tiles=lambda dtype, key: 1 + bool(key.get("weighted"))), size=c.rows_class)
def cross_entropy_backward_kernel(v: int, dtype: str, threads: int, tpr: int = 0, stream: bool = False, weighted: bool = False):
    """``DX[r] = G[r] * (softmax(X[r]) - ls / v - (1 - ls) * onehot(TGT[r]))`` for ``m`` rows of
    ``v`` logits, from the forward's ``LSE[r]``; rows whose target is ``ignore_index`` get 0;
    ``weighted``: with class weights ``W`` (float32, ``v``; label smoothing's), ``DX[r] = GP[r] *
    softmax(X[r]) - G[r] * (ls / v * W + (1 - ls) * W[t] * onehot(TGT[r]))``, ``GP[r] = G[r] *
    ((1 - ls) * W[t] + ls / v * sum(W))`` given; ``tpr``: a group of that many lanes per row;
    ``stream``: the row in register tiles."""
    if tpr:
        rows = _backward_in_groups(v, dtype, threads, c.RowGroupTile(v, dtype, threads, tpr), weighted)
    else:
        rows = _backward_rows(v, dtype, threads, c.RowTile(v, dtype, threads, 1 + weighted, stream), weighted)

    if weighted:

        @T.prim_func
        def cross_entropy_weighted_backward_rows(
            X_ptr: T.handle,
            TGT_ptr: T.handle,
            LSE_ptr: T.handle,
            G_ptr: T.handle,
            GP_ptr: T.handle,
            W_ptr: T.handle,
            DX_ptr: T.handle,
            m: T.int32,
            ignore_index: T.int64,
            ls: T.float32,
        ):
            X = T.match_buffer(X_ptr, (m, v), dtype)
            TGT = T.match_buffer(TGT_ptr, (m,), "int64")
            LSE = T.match_buffer(LSE_ptr, (m,), "float32")
            G = T.match_buffer(G_ptr, (m,), "float32")
            GP = T.match_buffer(GP_ptr, (m,), "float32")
            W = T.match_buffer(W_ptr, (v,), "float32")
            DX = T.match_buffer(DX_ptr, (m, v), dtype)
            rows(X, TGT, LSE, G, DX, m, ignore_index, ls, GP, W)

        return cross_entropy_weighted_backward_rows

    @T.prim_func
    def cross_entropy_backward_rows(
        X_ptr: T.handle,
        TGT_ptr: T.handle,
        LSE_ptr: T.handle,
        G_ptr: T.handle,
        DX_ptr: T.handle,
        m: T.int32,
        ignore_index: T.int64,
        ls: T.float32,
    ):
        X = T.match_buffer(X_ptr, (m, v), dtype)
        TGT = T.match_buffer(TGT_ptr, (m,), "int64")
        LSE = T.match_buffer(LSE_ptr, (m,), "float32")
        G = T.match_buffer(G_ptr, (m,), "float32")
        DX = T.match_buffer(DX_ptr, (m, v), dtype)
        rows(X, TGT, LSE, G, DX, m, ignore_index, ls)

    return cross_entropy_backward_rows


def _backward_rows(v: int, dtype: str, threads: int, g: c.RowTile, weighted: bool = False):
    """A CTA per row, in registers or streamed."""
    width, per, chunks, widen = g.width, g.per, g.chunks, dtype != "float32"
    load, store = c.row_io(g, dtype)
    load_w, _ = c.row_io(g, "float32")
    exp_exact = c.exp2_of()

    @T.macro
    def rows(X, TGT, LSE, G, DX, m, ignore_index, ls, GP=None, W=None):
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([g.warps])
        T.lane_id([32])
        T.thread_id([threads])
        x = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        xl = x.local()
        if weighted:
            w = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
            wl = w.local()
        t = TGT[r]
        ok = t >= 0 and t < v
        # The row's scale: 0 where ignored, NaN where the target is out of range.
        gr = _as_target_allows(G[r], t, ok, ignore_index)
        lse = LSE[r]
        floor = gr * (ls / float(v))
        # The target's element, computed once (index -1 where there is none: the mask below then
        # matches no element).
        tc = T.if_then_else(ok, T.cast(t, "int32"), -1)
        x_t = T.if_then_else(ok, T.cast(X[r, tc], "float32"), 0.0)
        if weighted:  # the softmax's scale GP, the floor ls / v * W per class
            gp = _as_target_allows(GP[r], t, ok, ignore_index)
            w_t = T.if_then_else(ok, W[tc], 0.0)
            d_t = _target_grad(x_t, lse, gr, floor, ls, gp, w_t)
        else:
            d_t = _target_grad(x_t, lse, gr, floor, ls)
        for k in T.serial(chunks):
            load(x, X[r, k * width : k * width + width], stage)
            exp_exact(xl[0:per], xl[0:per], lse * LOG2E)
            if weighted:
                Tx.mul(xl[0:per], xl[0:per], gp)
                load_w(w, W[k * width : k * width + width], w)
                Tx.mul(wl[0:per], wl[0:per], -floor)
                Tx.add(xl[0:per], xl[0:per], wl[0:per])
            else:
                Tx.mul(xl[0:per], xl[0:per], gr)
                Tx.add(xl[0:per], xl[0:per], -floor)
            Tx.cta.masked_fill(x[0:width], x[0:width], lambda j: k * width + j == tc, d_t)
            store(DX[r, k * width : k * width + width], x, stage)

    return rows


def _forward_in_groups(v: int, dtype: str, threads: int, g: c.RowGroupTile, smoothing: bool, weighted: bool = False):
    rows, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    padded = width > v
    load, _ = c.group_io(g, dtype, fill=NEG_INF)
    weights = c.group_vector(g, v)
    exp_sum = c.exp2_of(ftz=True)

    @T.macro
    def row_groups(X, TGT, LOSS, LSE, m, ignore_index, ls, W=None, PART=None):
        T.device_entry()
        b = T.cta_id([(m + rows - 1) // rows])
        T.warp_id([g.warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((rows, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows, width), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        if smoothing and padded:
            kept = T.alloc_buffer((rows, width), "float32", scope="local", layout=g.layout)
        if weighted:
            w = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        if PART is not None:
            scratch = T.alloc_buffer((g.warps,), "float32", scope="shared")
        load(x, X[b * rows : b * rows + rows, 0:width], stage)
        xl = x.local()
        if smoothing:
            if padded:  # the padding (-inf) adds nothing to the row's sum
                Tx.cta.masked_fill(kept[0:rows, 0:width], x[0:rows, 0:width], lambda i, j: j >= v, 0.0)
                seen = kept.local()
            else:
                seen = xl
            if weighted:  # (the lane's weights, 0 past the row)
                weights(w, W, tid % tpr)
                Tx.sum(part[0:1], w[0:per])
                w_total = T.cuda.warp_sum(part[0], width=tpr)
                Tx.mul(w[0:per], w[0:per], seen[0:per])
                Tx.sum(part[0:1], w[0:per])
            else:
                Tx.sum(part[0:1], seen[0:per])
            total = T.cuda.warp_sum(part[0], width=tpr)
        Tx.max(part[0:1], xl[0:per])
        mx = T.cuda.warp_max(part[0], width=tpr)
        exp_sum(xl[0:per], xl[0:per], mx * LOG2E)  # (summed only: `_common.online_softmax_step`)
        Tx.sum(part[0:1], xl[0:per])
        s = T.cuda.warp_sum(part[0], width=tpr)
        lse = mx + T.log(s)
        r = b * rows + tid // tpr  # this lane's row; past the last row in the last CTA
        live = r < m
        t = T.if_then_else(live, TGT[r], ignore_index)
        ok = live and t >= 0 and t < v
        x_t = T.if_then_else(ok, T.cast(X[r, T.cast(t, "int32")], "float32"), 0.0)
        if weighted:
            w_t = T.if_then_else(ok, W[T.cast(t, "int32")], 0.0)
            loss = _row_loss(lse, x_t, ls, v, total, w_t, w_total)
        elif smoothing:
            loss = _row_loss(lse, x_t, ls, v, total)
        else:
            loss = _row_loss(lse, x_t, ls, v)
        if PART is None:
            if r < m:
                if tid % tpr == 0:
                    LSE[r] = lse
                    LOSS[r] = _as_target_allows(loss, t, ok, ignore_index)
        else:  # the CTA's rows summed (each group's first lane's; none past the last row)
            first = (tid % tpr == 0) & (r < m)
            total_loss = T.cuda.cta_sum(T.if_then_else(first, _as_target_allows(loss, t, ok, ignore_index), 0.0), g.warps, scratch.ptr_to([0]))
            kept = T.cuda.cta_sum(T.if_then_else(first & (t != ignore_index), 1.0, 0.0), g.warps, scratch.ptr_to([0]))
            if tid == 0:
                PART[b, 0] = total_loss
                PART[b, 1] = kept

    return row_groups


def _backward_in_groups(v: int, dtype: str, threads: int, g: c.RowGroupTile, weighted: bool = False):
    rows, width, per, tpr, widen = g.rows, g.width, g.per, g.tpr, dtype != "float32"
    load, store = c.group_io(g, dtype)
    weights = c.group_vector(g, v)
    exp_exact = c.exp2_of()

    @T.macro
    def row_groups(X, TGT, LSE, G, DX, m, ignore_index, ls, GP=None, W=None):
        T.device_entry()
        b = T.cta_id([(m + rows - 1) // rows])
        T.warp_id([g.warps])
        T.lane_id([32])
        tid = T.thread_id([threads])
        x = T.alloc_buffer((rows, width), "float32", scope="local", layout=g.layout)
        if widen:
            stage = T.alloc_buffer((rows, width), dtype, scope="local", layout=g.layout)
        else:
            stage = x
        xl = x.local()
        r = b * rows + tid // tpr  # this lane's row; past the last row in the last CTA
        live = r < m
        t = T.if_then_else(live, TGT[r], ignore_index)
        ok = live and t >= 0 and t < v
        # The row's scale: 0 where ignored (or past the last row), NaN where the target is out of range.
        gr = _as_target_allows(G[r], t, ok, ignore_index)
        lse = T.if_then_else(live, LSE[r], 0.0)
        floor = gr * (ls / float(v))
        tc = T.if_then_else(ok, T.cast(t, "int32"), -1)
        x_t = T.if_then_else(ok, T.cast(X[r, tc], "float32"), 0.0)
        if weighted:  # the softmax's scale GP, the floor ls / v * W per class
            w = T.alloc_buffer((per,), "float32", scope="local")
            gp = _as_target_allows(GP[r], t, ok, ignore_index)
            w_t = T.if_then_else(ok, W[tc], 0.0)
            d_t = _target_grad(x_t, lse, gr, floor, ls, gp, w_t)
        else:
            d_t = _target_grad(x_t, lse, gr, floor, ls)
        load(x, X[b * rows : b * rows + rows, 0:width], stage)
        exp_exact(xl[0:per], xl[0:per], lse * LOG2E)
        if weighted:
            Tx.mul(xl[0:per], xl[0:per], gp)
            weights(w, W, tid % tpr)
            Tx.mul(w[0:per], w[0:per], -floor)
            Tx.add(xl[0:per], xl[0:per], w[0:per])
        else:
            Tx.mul(xl[0:per], xl[0:per], gr)
            Tx.add(xl[0:per], xl[0:per], -floor)
        Tx.cta.masked_fill(x[0:rows, 0:width], x[0:rows, 0:width], lambda i, j: j == tc, d_t)
        store(DX[b * rows : b * rows + rows, 0:width], x, stage)

    return row_groups


def _check(logits, target, ignore_index, label_smoothing, reduction, weight=None):
    """The logits as (rows, classes) with the class dim last, the targets as int64 rows."""
    dtype = c.check_dtype("cross_entropy", logits)
    if reduction not in _REDUCTIONS:
        raise ValueError(f"tirx.ops.cross_entropy: reduction={reduction!r}; expected one of {', '.join(_REDUCTIONS)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"tirx.ops.cross_entropy: label_smoothing={label_smoothing}; expected a value in [0, 1]")
    if c.dtype_name(target) not in ("int64", "int32"):
        raise TypeError(
            f"tirx.ops.cross_entropy: target is {c.dtype_name(target)}; this op takes class indices (int64); "
            "class probabilities are not supported: use torch.nn.functional.cross_entropy"
        )
    nd = len(logits.shape)
    if nd == 0:
        raise ValueError("tirx.ops.cross_entropy: 0-d logits; expected (C,), (N, C) or (N, C, d1, ...)")
    # PyTorch's shapes: (C,) with a 0-d target, (N, C) with (N,), (N, C, d1, ...) with (N, d1, ...).
    want = () if nd == 1 else (logits.shape[0],) + tuple(logits.shape[2:])
    if tuple(target.shape) != want:
        raise ValueError(
            f"tirx.ops.cross_entropy: target of shape {list(target.shape)} for logits {list(logits.shape)}; expected {list(want)}"
        )
    if not -(2**63) <= ignore_index < 2**63:
        raise ValueError(f"tirx.ops.cross_entropy: ignore_index={ignore_index} is not an int64")
    if weight is not None:
        classes = logits.shape[0] if nd == 1 else logits.shape[1]
        if tuple(weight.shape) != (classes,):
            raise ValueError(
                f"tirx.ops.cross_entropy: weight of shape {list(weight.shape)} for logits {list(logits.shape)}; expected one weight per class, [{classes}]"
            )
        if c.dtype_name(weight) not in (dtype, "float32"):
            raise TypeError(f"tirx.ops.cross_entropy: weight is {c.dtype_name(weight)}; expected the logits' dtype ({dtype}) or float32")
    return dtype


def _rows(logits, target):
    """``(x, t)``: the logits as (rows, C), class dim last and contiguous (a copy where the class
    dim is not last: PyTorch's (N, C, d1, ...) form), the targets as a contiguous int64 vector."""
    nd = len(logits.shape)
    v = logits.shape[0] if nd == 1 else logits.shape[1]
    if nd > 2:
        logits = logits.movedim(1, -1) if c.is_torch(logits) else np.moveaxis(logits, 1, -1)
    x = c.rows_of(c.contiguous(logits), v)
    if c.is_torch(target):
        t = c.contiguous(target.reshape(-1).long())
    else:
        t = np.ascontiguousarray(np.asarray(target).reshape(-1), dtype=np.int64)
    return x, t, v


def _forward(x, t, v: int, ignore_index: int, label_smoothing: float, w=None):
    """Per-row ``(loss, lse)`` in float32; with class weights ``w`` (float32, contiguous), each
    row's loss weighed as PyTorch's: by its target's weight alone without label smoothing (the
    unweighted kernel's loss scaled), by the weighted smoothing term's kernel with it."""
    rows = x.shape[0]
    loss, lse = c.new_array(x, rows, "float32"), c.new_array(x, rows, "float32")
    if rows == 0:
        return loss, lse
    if v == 0:
        raise ValueError("tirx.ops.cross_entropy: logits with 0 classes")
    if not c.is_torch(x):
        _check_targets(t, v, ignore_index)
    smoothing = label_smoothing > 0.0
    args = (rows, int(ignore_index), float(label_smoothing))
    if w is not None and smoothing:
        cross_entropy_kernel(v=v, dtype=c.dtype_name(x), smoothing=True, weighted=True)(x, t, w, loss, lse, *args)
        return loss, lse
    cross_entropy_kernel(v=v, dtype=c.dtype_name(x), smoothing=smoothing)(x, t, loss, lse, *args)
    if w is not None:
        loss = loss * _target_weights(w, t, v)
    return loss, lse


def sum_parts(config: dict, m: int) -> int:
    """The rows of ``PART`` that `cross_entropy_kernel`'s ``sums`` form wrote for ``m`` rows in the
    design ``config``: its CTAs (a row each, or a lane group's many)."""
    return -(-m // (config["threads"] // config["tpr"])) if config.get("tpr") else m


def _forward_sums(x, t, v: int, ignore_index: int, label_smoothing: float):
    """The rows' summed loss and the count of rows not ignored (float32 scalars): the kernel's
    per-CTA sums (`cross_entropy_kernel`'s ``sums``), then one sum over them."""
    rows = x.shape[0]
    if v == 0:
        raise ValueError("tirx.ops.cross_entropy: logits with 0 classes")
    if not c.is_torch(x):
        _check_targets(t, v, ignore_index)
    part = c.new_array(x, (rows, 2), "float32")
    kernel = cross_entropy_kernel(v=v, dtype=c.dtype_name(x), smoothing=label_smoothing > 0.0, sums=True)
    kernel(x, t, part, rows, int(ignore_index), float(label_smoothing))
    totals = part[: sum_parts(kernel.config, rows)].sum(0)
    return totals[0], totals[1]


def _eager(logits, target, ignore_index: int, label_smoothing: float, reduction: str):
    """"mean" or "sum" of tensors without class weights, outside autograd: through a plan per call
    signature (`_common.signature_plan`: the checks and the kernel's lookup once), the kernel's
    per-CTA sums (`_forward_sums`) reduced; (N, C) int64-targeted contiguous logits launch from
    the plan, other forms take the general path."""
    tensors = c.aligned((logits, target))
    key = ("cross_entropy", ignore_index, label_smoothing, reduction)

    def general(logits, target):
        x, t, v = _rows(logits, target)
        if x.shape[0] == 0:
            return _reduce(c.new_array(x, 0, "float32"), t, ignore_index, reduction, x.dtype, tuple(target.shape), v)
        loss, kept = _forward_sums(x, t, v, ignore_index, label_smoothing)
        return (loss / kept if reduction == "mean" else loss).to(x.dtype)

    def new():
        import torch

        _check(*tensors, ignore_index, label_smoothing, reduction)
        x, t = tensors
        if not (len(x.shape) == 2 and x.shape[0] and x.shape[1] and x.is_contiguous() and t.dtype == torch.int64 and t.is_contiguous()):
            return general
        rows, v, dtype = x.shape[0], x.shape[1], x.dtype
        kernel = cross_entropy_kernel(v=v, dtype=c.dtype_name(x), smoothing=label_smoothing > 0.0, sums=True)
        launch, ii, ls = kernel.launcher(fixed_signature=True), int(ignore_index), float(label_smoothing)
        parts = []  # (`sum_parts` of the choice for these rows: read after the first launch made it)

        def run(x, t):
            part = x.new_empty((rows, 2), dtype=torch.float32)
            launch(x, t, part, rows, ii, ls)
            if not parts:
                parts.append(sum_parts(kernel.config, rows))
            totals = part[: parts[0]].sum(0)
            return (totals[0] / totals[1] if reduction == "mean" else totals[0]).to(dtype)

        return run

    return c.signature_plan(tensors, key, new)(*tensors)


def _target_weights(w, t, v: int):
    """Each row's target's weight (float32; an ignored or out-of-range target's is a weight of
    its clamped index, never read back to the host: its row's loss is 0 or NaN already)."""
    if c.is_torch(t):
        return w[t.clamp(0, v - 1)]
    return w[np.clip(t, 0, v - 1)]


def _backward(x, t, lse, grad_rows, v: int, ignore_index: int, label_smoothing: float, w=None):
    """The logits' gradient for the rows' loss gradients ``grad_rows``; with class weights ``w``,
    the unweighted kernel's of the rows' gradients scaled by their targets' weights without label
    smoothing, the weighted kernel's with it."""
    dx = c.empty_like(x)
    rows = x.shape[0]
    if rows == 0:
        return dx
    g = c.contiguous(grad_rows)
    args = (rows, int(ignore_index), float(label_smoothing))
    if w is not None and label_smoothing > 0.0:
        w_t, ls = _target_weights(w, t, v), float(label_smoothing)
        gp = c.contiguous(g * ((1.0 - ls) * w_t + ls / v * w.sum()))
        cross_entropy_backward_kernel(v=v, dtype=c.dtype_name(x), weighted=True)(x, t, lse, g, gp, w, dx, *args)
        return dx
    if w is not None:
        g = c.contiguous(g * _target_weights(w, t, v))
    cross_entropy_backward_kernel(v=v, dtype=c.dtype_name(x))(x, t, lse, g, dx, *args)
    return dx


def _check_targets(t, v: int, ignore_index: int) -> None:
    bad = (t != ignore_index) & ((t < 0) | (t >= v))
    if bad.any():
        i = int(np.argmax(bad))
        raise IndexError(f"tirx.ops.cross_entropy: target {int(t[i])} of row {i} is out of range for {v} classes")


def _mean_divisor(t, ignore_index: int, v: int, w=None):
    """What "mean" divides by: the rows not ignored, or with class weights the sum of their
    targets' weights (PyTorch's)."""
    kept = t != ignore_index
    if w is None:
        return kept.sum()
    return (_target_weights(w, t, v) * kept).sum()


def _reduce(loss_rows, t, ignore_index: int, reduction: str, dtype, shape, v: int = 0, w=None):
    """The rows' losses reduced as PyTorch's (in float32, then the logits' dtype)."""
    if reduction == "none":
        out = loss_rows.reshape(shape)
    elif reduction == "sum":
        out = loss_rows.sum()
    elif c.is_torch(loss_rows):
        out = loss_rows.sum() / _mean_divisor(t, ignore_index, v, w)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):  # all rows ignored: NaN, as PyTorch's
            out = loss_rows.sum() / _mean_divisor(t, ignore_index, v, w)
    if c.is_torch(loss_rows):
        return out.to(dtype)
    return np.asarray(out, dtype=np.float32).astype(dtype)


def register_torch_op():
    """`torch.ops.tirx.cross_entropy_rows(x, target, ignore_index, label_smoothing) -> (loss,
    lse)` (registered on the first call): the per-row losses of (rows, C) logits, with their
    backward; `cross_entropy` reduces them."""
    return c.torch_op("cross_entropy_rows", _rows_parts, _autograd)


def _rows_parts():
    import torch
    from typing import Tuple

    def schema(
        x: torch.Tensor, target: torch.Tensor, weight: Optional[torch.Tensor], ignore_index: int, label_smoothing: float
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        return _forward(x, target, x.shape[1], ignore_index, label_smoothing, weight)

    def fake(x, target, weight, ignore_index, label_smoothing):
        rows = x.shape[0]
        return x.new_empty(rows, dtype=torch.float32), x.new_empty(rows, dtype=torch.float32)

    return schema, fake


def register_backward_op():
    """`torch.ops.tirx.cross_entropy_backward(x, target, lse, grad_rows, ignore_index,
    label_smoothing)`: the logits' gradient, an op so that `torch.compile` traces it too."""

    def parts():
        import torch

        def schema(
            x: torch.Tensor,
            target: torch.Tensor,
            lse: torch.Tensor,
            grad_rows: torch.Tensor,
            weight: Optional[torch.Tensor],
            ignore_index: int,
            label_smoothing: float,
        ) -> torch.Tensor:
            return _backward(x, target, lse, grad_rows, x.shape[1], ignore_index, label_smoothing, weight)

        def fake(x, target, lse, grad_rows, weight, ignore_index, label_smoothing):
            return torch.empty_like(x, memory_format=torch.contiguous_format)

        return schema, fake

    return c.torch_op("cross_entropy_backward", parts)


def _autograd(op):
    backward_op = register_backward_op()

    def setup_context(ctx, inputs, output):
        x, target, weight, ignore_index, label_smoothing = inputs
        ctx.ignore_index, ctx.label_smoothing = ignore_index, label_smoothing
        ctx.mark_non_differentiable(output[1])  # lse: what the backward needs, not a result
        ctx.save_for_backward(x, target, output[1], weight)

    def backward(ctx, grad_loss, grad_lse):
        x, target, lse, weight = ctx.saved_tensors
        dx = backward_op(x, target, lse, grad_loss.float().contiguous(), weight, ctx.ignore_index, ctx.label_smoothing)
        return dx, None, None, None, None

    op.register_autograd(backward, setup_context=setup_context)


def _weights(weight):
    """The class weights as the kernels read them: float32, contiguous (None: none)."""
    if weight is None:
        return None
    if c.is_torch(weight):
        if c.wants_grad(weight):  # (an error, not a weight's gradient silently dropped)
            raise NotImplementedError("tirx.ops.cross_entropy: weight requires grad; its gradient is not computed: pass weight.detach()")
        return c.contiguous(weight.float())
    return np.ascontiguousarray(weight, dtype=np.float32)


def cross_entropy(logits, target, weight=None, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"):
    """PyTorch's `torch.nn.functional.cross_entropy(logits, target, weight=weight,
    ignore_index=ignore_index, label_smoothing=label_smoothing, reduction=reduction)` with
    class-index targets: logits (C,), (N, C) or (N, C, d1, ...), targets of the shape without C;
    ``weight``: a weight per class (C,), of the logits' dtype or float32, as PyTorch's (a row's
    loss weighed by its target's weight, the smoothing term by each class's; "mean" divides by
    the sum of the targets' weights); differentiable in the logits."""
    if weight is None and reduction != "none" and c.is_torch(logits) and not (c.compiling() or c.wants_grad(logits)):
        return _eager(logits, target, ignore_index, label_smoothing, reduction)
    _check(logits, target, ignore_index, label_smoothing, reduction, weight)
    out_shape = tuple(target.shape)
    x, t, v = _rows(logits, target)
    w = _weights(weight)
    if c.is_torch(x) and (c.compiling() or c.wants_grad(x)):  # (with its backward)
        fn = c.differentiable("cross_entropy_rows", _rows_parts, _autograd)
        loss_rows, _ = fn(x, t, w, int(ignore_index), float(label_smoothing))
        return _reduce(loss_rows, t, ignore_index, reduction, x.dtype, out_shape, v, w)
    if reduction != "none" and w is None and x.shape[0]:  # (arrays) the kernel's per-CTA sums; tensors: `_eager`
        loss, kept = _forward_sums(x, t, v, ignore_index, label_smoothing)
        if reduction == "mean":
            with np.errstate(invalid="ignore", divide="ignore"):  # all rows ignored: NaN, as PyTorch's
                loss = loss / kept
        return np.asarray(loss, dtype=np.float32).astype(x.dtype)
    loss_rows, _ = _forward(x, t, v, ignore_index, label_smoothing, w)
    return _reduce(loss_rows, t, ignore_index, reduction, x.dtype, out_shape, v, w)


def cross_entropy_backward(
    logits, target, grad, weight=None, ignore_index: int = -100, label_smoothing: float = 0.0, reduction: str = "mean"
):
    """The gradient of `cross_entropy` in the logits for the loss gradient ``grad`` (a scalar for
    "mean" and "sum", the per-target losses' shape for "none"): a new array or tensor of the
    logits' shape. Recomputes the row's log-sum-exp (one more read of the logits)."""
    _check(logits, target, ignore_index, label_smoothing, reduction, weight)
    nd = len(logits.shape)
    x, t, v = _rows(logits, target)
    w = _weights(weight)
    _, lse = _forward(x, t, v, ignore_index, label_smoothing)
    rows = t.shape[0]
    if c.is_torch(x):
        g = grad.float().reshape(-1).expand(rows) if reduction != "none" else grad.float().reshape(-1)
        if reduction == "mean":
            g = g / _mean_divisor(t, ignore_index, v, w)
        g = c.contiguous(g)
    else:
        g = np.broadcast_to(np.asarray(grad, dtype=np.float32).reshape(-1), (rows,)).astype(np.float32)
        if reduction == "mean":
            g = g / np.float32(_mean_divisor(t, ignore_index, v, w))
        g = np.ascontiguousarray(g, dtype=np.float32)
    dx = _backward(x, t, lse, g, v, ignore_index, label_smoothing, w)
    if nd > 2:
        moved = tuple(logits.shape[:1]) + tuple(logits.shape[2:]) + (v,)
        dx = dx.reshape(moved)
        dx = dx.movedim(-1, 1) if c.is_torch(dx) else np.moveaxis(dx, -1, 1)
        return c.contiguous(dx)
    return dx.reshape(logits.shape)
