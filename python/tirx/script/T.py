"""The ``T`` namespace of kernels written in Python (``from tirx import T``): the reference's
``tvm.script.tirx`` (docs/python.md §2.3)."""

from .namespace import (  # noqa: F401
    HANDLE as handle,
    LAYOUT_NAMES as _LAYOUT_NAMES,
    LET as let,
    SCOPE_IDS as _SCOPE_IDS,
    ALIASES as _ALIASES,
    DTYPES as _DTYPES,
    DType as _DType,
    TPath as _TPath,
    Buffer,
    FloatImm,
    IntImm,
    SMEMPool,
    alloc_buffer,
    alloc_local,
    alloc_shared,
    decl_buffer,
    grid,
    match_buffer,
    meta_var,
    serial,
    unroll,
    vectorized,
    _scope_id,
)
from .frontend import prim_func  # noqa: F401
from . import Tx as tile  # noqa: F401

for _n in _SCOPE_IDS:
    globals()[_n] = _scope_id(_n)
for _n in _DTYPES:
    globals()[_n] = _DType(_n)
for _a, _n in _ALIASES.items():
    globals()[_a] = _DType(_n)
globals().update(_LAYOUT_NAMES)

cuda = _TPath("T.cuda")
ptx = _TPath("T.ptx")


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _TPath(f"T.{name}")
