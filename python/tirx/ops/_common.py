"""What the ops share: array kinds, row views, choosing threads, the kernel cache, torch ops."""

import sys
from typing import Callable, Dict, Tuple

import numpy as np

_DTYPES = ("float32", "float16", "bfloat16")
_kernels: Dict[Tuple, object] = {}


def is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def dtype_name(x) -> str:
    """`float32`, `bfloat16`, ... of a NumPy array (ml_dtypes included) or a torch tensor."""
    return str(x.dtype).replace("torch.", "")


def check_dtype(op: str, x) -> str:
    name = dtype_name(x)
    if name not in _DTYPES:
        raise TypeError(f"tirx.ops.{op}: {name} input; the kernel takes float32, float16 or bfloat16")
    return name


def kernel(key: Tuple, build: Callable):
    """The compiled kernel for ``key`` (built once per process)."""
    k = _kernels.get(key)
    if k is None:
        import tirx

        k = _kernels[key] = tirx.compile(build())
    return k


def threads_for(op: str, n: int, elem_bytes: int, limit: int = 64) -> Tuple[int, int]:
    """(threads, vector elements) for rows of ``n``: a power of two of 32..1024 threads whose
    16-byte vectors tile the row, at most ``limit`` elements per thread (the fewest threads that
    keep it there), or a clear error."""
    vec = 16 // elem_bytes
    fits = [t for t in (32, 64, 128, 256, 512, 1024) if n % (t * vec) == 0]
    if not fits:
        raise ValueError(
            f"tirx.ops.{op}: rows of {n} elements are not a multiple of {32 * vec} (32 threads x {vec}-element "
            "16-byte vectors), which this kernel needs; ragged rows come with masked tails (issue: the language for real shapes)"
        )
    for t in fits:
        if n // t <= limit:
            return t, vec
    raise ValueError(
        f"tirx.ops.{op}: rows of {n} elements need more than {limit} registers per thread at 1024 threads; "
        "rows this wide need a cluster of CTAs (issue: the memory-bound family)"
    )


def empty_like(x):
    if is_torch(x):
        import torch

        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty(x.shape, dtype=x.dtype)


def contiguous(x):
    if is_torch(x):
        return x.contiguous()
    return np.ascontiguousarray(x)


def torch_op(name: str, schema_fn: Callable, fake: Callable):
    """Registers ``schema_fn`` as `torch.ops.tirx.<name>` once (its annotations are the schema)."""
    import torch

    key = ("op", name)
    op = _kernels.get(key)
    if op is None:
        if torch.compiler.is_compiling():
            # Dynamo cannot trace a registration; `tirx.ops` registers at import when torch is loaded.
            raise RuntimeError(
                f"tirx.ops.{name} inside torch.compile before its op exists: import torch before tirx.ops "
                "(the ops are registered then), or call it once outside the compiled function"
            )
        op = torch.library.custom_op(f"tirx::{name}", schema_fn, mutates_args=())
        op.register_fake(fake)
        _kernels[key] = op
    return op
