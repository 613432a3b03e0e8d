"""tirx: TIRx tile primitives for NVIDIA GPUs, from Python.

Write a kernel with ``@T.prim_func`` (the reference's TVMScript, evaluated as the reference
does), then ``tirx.compile(kernel)`` and call it on CUDA tensors (a GPU launch) or NumPy
arrays (the CPU simulator). See docs/python.md.
"""

from . import _native
from ._native import TirxError, TirxInternalError
from . import layout
from .layout import S, R, TileLayout, ComposeLayout, Axis, Iter, wg_local_layout


class TirxWarning(UserWarning):
    """A lowering warning (a slow variant was picked, a region not proven in bounds, ...)."""


from .script import T, Tx  # noqa: E402
from .script.namespace import MBarrier  # noqa: E402
from .script.frontend import PrimFunc, prim_func  # noqa: E402

from_script = PrimFunc.from_script
from .runtime import Kernel, compile  # noqa: E402
from .autotune import autotune  # noqa: E402

__version__ = _native.version()

__all__ = [
    "Axis",
    "ComposeLayout",
    "Iter",
    "Kernel",
    "MBarrier",
    "PrimFunc",
    "R",
    "S",
    "T",
    "TileLayout",
    "TirxError",
    "TirxInternalError",
    "TirxWarning",
    "Tx",
    "autotune",
    "compile",
    "from_script",
    "layout",
    "prim_func",
    "wg_local_layout",
]
