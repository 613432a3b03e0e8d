"""`tirx.ops.rms_norm(x, normalized_shape, weight=None, eps=None)`: RMSNorm in TIRx, one CTA
per row, as PyTorch's `torch.nn.functional.rms_norm`: y = x / sqrt(mean(x^2) + eps) * weight
over the last ``len(normalized_shape)`` dims, computed in float32 and rounded once.

Each thread holds 16-byte vectors of the row and of the weight in registers; the sum of squares
is a thread-local fold then a CTA reduction (`T.cuda.cta_sum`); rstd = 1 / sqrt(sum / H + eps)
once per row. Rows and eps are run-time scalars; the row length and dtype key the kernel, whose thread
count is autotuned."""

from typing import List, Optional

import math

import numpy as np

from .. import T, Tx
from ..autotune import autotune
from ..layout import S, TileLayout, tx
from . import _common as c


@autotune(configs=c.THREAD_CONFIGS, key=["h", "dtype"], prune=c.prune_threads("rms_norm", "h"))
def rms_norm_kernel(h: int, dtype: str, threads: int):
    """``Y[r] = X[r] * rsqrt(mean(X[r]^2) + eps) * W`` for ``m`` rows of ``h`` elements."""
    vec = 16 // c.elem_bytes(dtype)
    per = h // threads
    warps = threads // 32
    row = TileLayout(S[(h // (threads * vec), threads, vec) : (vec, 1 @ tx, 1)])
    widen = dtype != "float32"

    @T.prim_func
    def rms_norm_rows(X_ptr: T.handle, W_ptr: T.handle, Y_ptr: T.handle, m: T.int32, eps: T.float32):
        X = T.match_buffer(X_ptr, (m, h), dtype)
        W = T.match_buffer(W_ptr, (h,), dtype)
        Y = T.match_buffer(Y_ptr, (m, h), dtype)
        T.device_entry()
        r = T.cta_id([m])
        T.warp_id([warps])
        T.lane_id([32])
        T.thread_id([threads])
        x = T.alloc_buffer((h,), "float32", scope="local", layout=row)
        w = T.alloc_buffer((h,), "float32", scope="local", layout=row)
        sq = T.alloc_buffer((per,), "float32", scope="local")
        part = T.alloc_buffer((1,), "float32", scope="local")
        scratch = T.alloc_buffer((warps,), "float32", scope="shared")
        if widen:
            x16 = T.alloc_buffer((h,), dtype, scope="local", layout=row)
            w16 = T.alloc_buffer((h,), dtype, scope="local", layout=row)
            Tx.cta.copy(x16[0:h], X[r, 0:h])
            Tx.cta.copy(w16[0:h], W[0:h])
            Tx.cta.cast(x[0:h], x16[0:h])
            Tx.cta.cast(w[0:h], w16[0:h])
        else:
            Tx.cta.copy(x[0:h], X[r, 0:h])
            Tx.cta.copy(w[0:h], W[0:h])
        xl = x.local()
        Tx.mul(sq[0:per], xl[0:per], xl[0:per])
        Tx.sum(part[0:1], sq[0:per])
        s = T.cuda.cta_sum(part[0], warps, scratch.ptr_to([0]))
        rstd = 1.0 / T.sqrt(s / float(h) + eps)
        Tx.mul(xl[0:per], xl[0:per], rstd)
        Tx.cta.mul(x[0:h], x[0:h], w[0:h])
        if widen:
            Tx.cta.cast(x16[0:h], x[0:h])
            Tx.cta.copy(Y[r, 0:h], x16[0:h])
        else:
            Tx.cta.copy(Y[r, 0:h], x[0:h])

    return rms_norm_rows


def _ones(x, h: int):
    if c.is_torch(x):
        import torch

        return torch.ones(h, dtype=x.dtype, device=x.device)
    return np.ones(h, dtype=x.dtype)


def _run(x, normalized_shape, weight, eps):
    dtype = c.check_dtype("rms_norm", x)
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    k_dims = len(shape)
    if k_dims == 0 or tuple(x.shape[len(x.shape) - k_dims :]) != shape or k_dims > len(x.shape):
        raise ValueError(f"tirx.ops.rms_norm: normalized_shape {list(shape)} is not the last dims of an input of shape {list(x.shape)}")
    h = math.prod(shape)
    if weight is None:
        weight = _ones(x, h)
    elif tuple(weight.shape) != shape:
        raise ValueError(f"tirx.ops.rms_norm: weight of shape {list(weight.shape)}; expected {list(shape)}")
    elif c.dtype_name(weight) != dtype:
        raise TypeError(f"tirx.ops.rms_norm: weight is {c.dtype_name(weight)}, the input {dtype}: give both one dtype")
    if eps is None:  # PyTorch's default: the machine epsilon of the input's dtype
        eps = {"float32": 2.0**-23, "float16": 2.0**-10, "bfloat16": 2.0**-7}[dtype]
    x = c.contiguous(x)
    out = c.empty_like(x)
    rows = math.prod(x.shape[: len(x.shape) - k_dims])
    if rows == 0 or h == 0:
        return out
    w = c.contiguous(weight)
    w = w if len(w.shape) == 1 else w.reshape(h)
    rms_norm_kernel(h=h, dtype=dtype)(c.rows_of(x, h), w, c.rows_of(out, h), rows, float(eps))
    return out


def register_torch_op():
    """`torch.ops.tirx.rms_norm` (registered on the first call)."""
    return c.torch_op("rms_norm", _torch_op_parts)


def _torch_op_parts():
    """The op's function and fake implementation."""
    import torch

    def schema(x: torch.Tensor, normalized_shape: List[int], weight: Optional[torch.Tensor], eps: Optional[float]) -> torch.Tensor:
        return _run(x, normalized_shape, weight, eps)

    return schema, lambda x, normalized_shape, weight, eps: torch.empty_like(x)


def rms_norm(x, normalized_shape, weight=None, eps=None):
    """PyTorch's `torch.nn.functional.rms_norm(x, normalized_shape, weight, eps)` (eps default:
    the machine epsilon of the input's dtype, as PyTorch's): a new array or tensor."""
    if c.is_torch(x):
        op = register_torch_op()
        if c.compiling():
            shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
            return op(x, shape, weight, eps)
        return _run(x, normalized_shape, weight, eps)
    return _run(np.asarray(x), normalized_shape, None if weight is None else np.asarray(weight), eps)
