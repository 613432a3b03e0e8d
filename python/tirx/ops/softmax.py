"""`tirx.ops.softmax(x, dim=-1)`: row softmax in TIRx, one CTA per row.

Each thread holds 16-byte vectors of the row in registers (one coalesced pass over global memory
each way); the row max and sum are thread-local folds then CTA reductions (`T.cuda.cta_max`,
`cta_sum`), the exponent one `exp2((x - max) * log2 e)` per element, the normalisation one
multiplication by 1 / sum. 16-bit inputs compute in float32 and round once. The number of rows
is a run-time scalar; the row length and dtype key the kernel, whose thread count is autotuned."""

import math

import numpy as np

from .. import T, Tx
from ..autotune import autotune
from ..layout import S, TileLayout, tx
from . import _common as c

LOG2E = 1.4426950408889634


@autotune(configs=c.THREAD_CONFIGS, key=["n", "dtype"], prune=c.prune_threads("softmax"))
def softmax_kernel(n: int, dtype: str, threads: int):
    """Softmax over rows of ``n`` elements of ``dtype``: ``B[r] = softmax(A[r])`` for ``m`` rows."""
    vec = 16 // c.elem_bytes(dtype)
    per = n // threads
    warps = threads // 32
    row = TileLayout(S[(n // (threads * vec), threads, vec) : (vec, 1 @ tx, 1)])
    widen = dtype != "float32"

    @T.prim_func
    def softmax_rows(A_ptr: T.handle, B_ptr: T.handle, m: T.int32):
        A = T.match_buffer(A_ptr, (m, n), dtype)
        B = T.match_buffer(B_ptr, (m, n), dtype)
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        X = T.alloc_buffer((n,), "float32", scope="local", layout=row)
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if widen:
            Xin = T.alloc_buffer((n,), dtype, scope="local", layout=row)
            Tx.cta.copy(Xin[0:n], A[r, 0:n])
            Tx.cta.cast(X[0:n], Xin[0:n])
        else:
            Tx.cta.copy(X[0:n], A[r, 0:n])
        Xl = X.local()
        Tx.max(part[0:1], Xl[0:per])
        mx = T.cuda.cta_max(part[0], warps, scratch.ptr_to([0]))
        Tx.exp2(Xl[0:per], Xl[0:per], -mx * LOG2E, LOG2E)
        Tx.sum(part[0:1], Xl[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        Tx.mul(Xl[0:per], Xl[0:per], 1.0 / s)
        if widen:
            Tx.cta.cast(Xin[0:n], X[0:n])
            Tx.cta.copy(B[r, 0:n], Xin[0:n])
        else:
            Tx.cta.copy(B[r, 0:n], X[0:n])

    return softmax_rows


def _run(x, dim: int):
    dtype = c.check_dtype("softmax", x)
    nd = len(x.shape)
    if nd == 0:
        out = c.empty_like(x)
        out[...] = 1
        return out
    if not -nd <= dim < nd:
        raise IndexError(f"tirx.ops.softmax: dim {dim} out of range for a {nd}-d input")
    if dim % nd != nd - 1:
        raise ValueError(
            f"tirx.ops.softmax: dim={dim} of a {nd}-d input; this kernel reduces the last dim "
            "(contiguous rows): move it last, e.g. x.transpose(dim, -1)"
        )
    x = c.contiguous(x)
    out = c.empty_like(x)
    n = x.shape[-1]
    rows = math.prod(x.shape[:-1])
    if rows == 0 or n == 0:
        return out
    softmax_kernel(n=n, dtype=dtype)(c.rows_of(x, n), c.rows_of(out, n), rows)
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
