"""The ``T`` namespace of kernels written in Python (``from tirx import T``): the reference's
``tvm.script.tirx`` (docs/python.md §2.3).

Its names are the native table's (``namespace.t_members``); the ones imported here are those
whose behaviour the table cannot say. A name the table does not hold passes through to the
script front end, which reports it with a "did you mean"."""

from .namespace import (  # noqa: F401
    HANDLE as handle,
    LET as let,
    TPath as _TPath,
    t_members as _t_members,
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
)
from .frontend import macro, prim_func  # noqa: F401
from . import Tx as tile  # noqa: F401

globals().update(_t_members(globals()))


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    return _TPath(f"T.{name}")
