"""`tirx.ops.softmax(x, dim=-1)` and `tirx.ops.log_softmax(x, dim=-1)`: row softmax in TIRx,
one CTA per row, rows of any length.

Each thread holds 16-byte vectors of the row in registers (one coalesced pass over global memory
each way); the row is padded to whole vectors of every thread, the padding read as -inf
(`clip=True, other=-inf`: exp2 makes it 0) and never stored. The row max and sum are
thread-local folds then CTA reductions (`T.cuda.cta_max`, `cta_sum`), the exponent one
`exp2((x - max) * log2 e)` per element, the normalisation one multiplication by 1 / sum. A row
wider than the registers (over 64 per thread at 1024 threads) is streamed in tiles: an online
max and sum per thread (rescaled by exp2 of the max's change), then a second pass that writes.
`log_softmax` writes `(x - max) - log(sum)`, its exponentials in a second register tile (so half
the row fits in registers before it streams). 16-bit inputs compute in float32 and round once.
The number of rows is a run-time scalar; the row length and dtype key the kernel, whose thread
count is autotuned."""

import math

import numpy as np

from .. import T, Tx
from ..autotune import autotune
from . import _common as c

LOG2E = 1.4426950408889634
NEG_INF = -float("inf")


def _limit(key) -> int:
    """Registers per thread: log_softmax holds the exponentials beside the row."""
    return c.REGISTER_LIMIT // 2 if key.get("log") else c.REGISTER_LIMIT


@autotune(configs=c.THREAD_CONFIGS, key=["n", "dtype", "log"], prune=c.prune_threads(limit=_limit))
def softmax_kernel(n: int, dtype: str, threads: int, log: bool = False):
    """Softmax (``log``: log-softmax) over rows of ``n`` elements of ``dtype``:
    ``B[r] = softmax(A[r])`` for ``m`` rows."""
    g = c.RowTile(n, dtype, threads, _limit({"log": log}))
    return (_streamed if g.streamed else _in_registers)(n, dtype, threads, g, log)


def _in_registers(n: int, dtype: str, threads: int, g: c.RowTile, log: bool):
    width, per, warps, widen = g.width, g.per, g.warps, dtype != "float32"

    @T.prim_func
    def softmax_rows(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
        A = T.match_buffer(A_ptr, (m, n), dtype)
        B = T.match_buffer(B_ptr, (m, n), dtype)
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if widen:
            Xin = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
            Tx.cta.copy(Xin[0:width], A[r, 0:width], clip=True, other=NEG_INF)
            Tx.cta.cast(X[0:width], Xin[0:width])
        else:
            Tx.cta.copy(X[0:width], A[r, 0:width], clip=True, other=NEG_INF)
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        mx = T.cuda.cta_max(part[0], warps, scratch.ptr_to([0]))
        if log:
            E = T.alloc_buffer((per,), "float32", scope="local")
            Tx.exp2(E[0:per], Xl[0:per], -mx * LOG2E, LOG2E)
            Tx.sum(part[0:1], E[0:per])
            s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
            Tx.add(Xl[0:per], Xl[0:per], -mx)
            Tx.add(Xl[0:per], Xl[0:per], -T.log(s))
        else:
            Tx.exp2(Xl[0:per], Xl[0:per], -mx * LOG2E, LOG2E)
            Tx.sum(part[0:1], Xl[0:per])
            s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
            Tx.mul(Xl[0:per], Xl[0:per], 1.0 / s)
        if widen:
            Tx.cta.cast(Xin[0:width], X[0:width])
            Tx.cta.copy(B[r, 0:width], Xin[0:width], clip=True)
        else:
            Tx.cta.copy(B[r, 0:width], X[0:width], clip=True)

    return softmax_rows


def _streamed(n: int, dtype: str, threads: int, g: c.RowTile, log: bool):
    width, per, warps, chunks, widen = g.width, g.per, g.warps, g.chunks, dtype != "float32"

    @T.prim_func
    def softmax_wide_rows(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
        A = T.match_buffer(A_ptr, (m, n), dtype)
        B = T.match_buffer(B_ptr, (m, n), dtype)
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((width,), "float32", scope="local", layout=g.layout)
        Xin = T.alloc_buffer((width,), dtype, scope="local", layout=g.layout)
        part = T.alloc_buffer((1,), "float32", scope="local")
        run = T.alloc_buffer((2,), "float32", scope="local")  # this thread's max and sum so far
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        Xl = X.local()
        run[0] = NEG_INF
        run[1] = 0.0
        for k in T.serial(chunks):
            if widen:
                Tx.cta.copy(Xin[0:width], A[r, k * width : k * width + width], clip=True, other=NEG_INF)
                Tx.cta.cast(X[0:width], Xin[0:width])
            else:
                Tx.cta.copy(X[0:width], A[r, k * width : k * width + width], clip=True, other=NEG_INF)
            Tx.max(part[0:1], Xl[0:per])
            new_max = T.max(run[0], part[0])
            # An all-padding tile keeps its max at -inf: exponents are then taken against 0.
            base = T.if_then_else(new_max == NEG_INF, 0.0, new_max)
            Tx.exp2(Xl[0:per], Xl[0:per], -base * LOG2E, LOG2E)
            Tx.sum(part[0:1], Xl[0:per])
            run[1] = run[1] * T.exp2((run[0] - base) * LOG2E) + part[0]
            run[0] = new_max
        mx = T.cuda.cta_max(run[0], warps, scratch.ptr_to([0]))
        row_base = T.if_then_else(mx == NEG_INF, 0.0, mx)
        s = T.cuda.cta_sum(run[1] * T.exp2((run[0] - row_base) * LOG2E), warps, scratch.ptr_to([0]))
        inv = 1.0 / s
        log_sum = T.log(s)
        for k in T.serial(chunks):
            if widen:
                Tx.cta.copy(Xin[0:width], A[r, k * width : k * width + width], clip=True, other=NEG_INF)
                Tx.cta.cast(X[0:width], Xin[0:width])
            else:
                Tx.cta.copy(X[0:width], A[r, k * width : k * width + width], clip=True, other=NEG_INF)
            if log:
                Tx.add(Xl[0:per], Xl[0:per], -mx)
                Tx.add(Xl[0:per], Xl[0:per], -log_sum)
            else:
                Tx.exp2(Xl[0:per], Xl[0:per], -row_base * LOG2E, LOG2E)
                Tx.mul(Xl[0:per], Xl[0:per], inv)
            if widen:
                Tx.cta.cast(Xin[0:width], X[0:width])
                Tx.cta.copy(B[r, k * width : k * width + width], Xin[0:width], clip=True)
            else:
                Tx.cta.copy(B[r, k * width : k * width + width], X[0:width], clip=True)

    return softmax_wide_rows


def _run(x, dim: int, log: bool = False):
    name = "log_softmax" if log else "softmax"
    dtype = c.check_dtype(name, x)
    nd = len(x.shape)
    if nd == 0:
        out = c.empty_like(x)
        out[...] = 0 if log else 1
        return out
    if not -nd <= dim < nd:
        raise IndexError(f"tirx.ops.{name}: dim {dim} out of range for a {nd}-d input")
    if dim % nd != nd - 1:
        raise ValueError(
            f"tirx.ops.{name}: dim={dim} of a {nd}-d input; this kernel reduces the last dim "
            "(contiguous rows): move it last, e.g. x.transpose(dim, -1)"
        )
    x = c.contiguous(x)
    out = c.empty_like(x)
    n = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    if rows == 0 or n == 0:
        return out
    softmax_kernel(n=n, dtype=dtype, log=log)(c.rows_of(x, n), c.rows_of(out, n), rows)
    return out


def register_torch_op():
    """`torch.ops.tirx.softmax` (registered on the first call)."""
    return c.torch_op("softmax", _torch_op_parts)


def _torch_op_parts():
    """The op's function and fake implementation."""
    import torch

    def schema(x: torch.Tensor, dim: int) -> torch.Tensor:
        return _run(x, dim)

    return schema, lambda x, dim: torch.empty_like(x)


def softmax(x, dim: int = -1):
    """Softmax of ``x`` along ``dim`` (PyTorch's `torch.softmax(x, dim)`): a new array or tensor."""
    if c.is_torch(x):
        op = register_torch_op()
        return op(x, dim) if c.compiling() else _run(x, dim)
    return _run(np.asarray(x), dim)


def register_log_torch_op():
    """`torch.ops.tirx.log_softmax` (registered on the first call)."""
    return c.torch_op("log_softmax", _log_torch_op_parts)


def _log_torch_op_parts():
    import torch

    def schema(x: torch.Tensor, dim: int) -> torch.Tensor:
        return _run(x, dim, log=True)

    return schema, lambda x, dim: torch.empty_like(x)


def log_softmax(x, dim: int = -1):
    """Log-softmax of ``x`` along ``dim`` (PyTorch's `torch.log_softmax(x, dim)`): a new array or
    tensor."""
    if c.is_torch(x):
        op = register_log_torch_op()
        return op(x, dim) if c.compiling() else _run(x, dim, log=True)
    return _run(np.asarray(x), dim, log=True)
