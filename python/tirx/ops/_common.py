"""What the ops share: array kinds, row views, choosing threads, the registered torch ops."""

import sys
from typing import Callable, Dict, List

import numpy as np

from ..torch_op import compiling  # noqa: F401  (the ops' test: through the registered op or not)

_DTYPES = ("float32", "float16", "bfloat16")
_ops: Dict[str, object] = {}


def is_torch(x) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


# Names by dtype object, filled as dtypes are met (every op call asks).
_names: Dict[object, str] = {}


def dtype_name(x) -> str:
    """`float32`, `bfloat16`, ... of a NumPy array (ml_dtypes included) or a torch tensor."""
    name = _names.get(x.dtype)
    if name is None:
        name = _names[x.dtype] = str(x.dtype).replace("torch.", "")
    return name


def rows_of(x, n: int):
    """``x`` as a 2-D (rows, n) view (itself when it is one already: no reshape per call)."""
    return x if len(x.shape) == 2 else x.reshape(-1, n)


def check_dtype(op: str, x) -> str:
    name = dtype_name(x)
    if name not in _DTYPES:
        raise TypeError(f"tirx.ops.{op}: {name} input; the kernel takes float32, float16 or bfloat16")
    return name


# The thread counts the row kernels are tuned over.
THREAD_CONFIGS = [{"threads": t} for t in (32, 64, 128, 256, 512, 1024)]


def elem_bytes(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def threads_that_fit(op: str, n: int, dtype: str, limit: int = 64) -> List[int]:
    """The thread counts (32..1024) whose 16-byte vectors tile a row of ``n`` elements with at
    most ``limit`` elements per thread (registers), or a clear error when there are none."""
    vec = 16 // elem_bytes(dtype)
    fits = [t for t in (32, 64, 128, 256, 512, 1024) if n % (t * vec) == 0]
    if not fits:
        raise ValueError(
            f"tirx.ops.{op}: rows of {n} elements are not a multiple of {32 * vec} (32 threads x {vec}-element "
            "16-byte vectors), which this kernel needs; ragged rows come with masked tails (issue: the language for real shapes)"
        )
    within = [t for t in fits if n // t <= limit]
    if not within:
        raise ValueError(
            f"tirx.ops.{op}: rows of {n} elements need more than {limit} registers per thread at 1024 threads; "
            "rows this wide need a cluster of CTAs (issue: the memory-bound family)"
        )
    return within


def prune_threads(op: str, length: str = "n") -> Callable:
    """The autotuner's pruning of ``THREAD_CONFIGS`` for a row kernel keyed by its row length
    (the factory argument ``length``) and ``dtype``."""

    def prune(configs, dtype, **key):
        fit = threads_that_fit(op, key[length], dtype)
        return [cfg for cfg in configs if cfg["threads"] in fit]

    return prune


def empty_like(x):
    if is_torch(x):
        import torch

        return torch.empty_like(x, memory_format=torch.contiguous_format)
    return np.empty(x.shape, dtype=x.dtype)


def contiguous(x):
    if is_torch(x):
        return x.contiguous()
    return np.ascontiguousarray(x)


def torch_op(name: str, build: Callable):
    """`torch.ops.tirx.<name>`, registered on the first call: ``build()`` gives the op's
    function (its annotations are the schema) and its fake implementation."""
    op = _ops.get(name)
    if op is None:
        import torch

        if torch.compiler.is_compiling():
            # Dynamo cannot trace a registration; `tirx.ops` registers at import when torch is loaded.
            raise RuntimeError(
                f"tirx.ops.{name} inside torch.compile before its op exists: import torch before tirx.ops "
                "(the ops are registered then), or call it once outside the compiled function"
            )
        schema_fn, fake = build()
        op = _ops[name] = torch.library.custom_op(f"tirx::{name}", schema_fn, mutates_args=())
        op.register_fake(fake)
    return op
