"""Kernels as PyTorch operators (`torch.library`): `k.torch_op()` registers a compiled
kernel as a custom op whose schema is the kernel's signature (tensors, and `int`/`float`
scalars), whose mutated arguments are the buffers the kernel writes, and whose fake
implementation returns nothing, so `torch.compile(fullgraph=True)` traces through it. A call
inside a compiled function goes through the op by itself (`Kernel.__call__`)."""

import inspect
import itertools
import sys
from typing import Dict, Optional

_INT_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")
_registered: Dict[str, object] = {}
_suffix = itertools.count(2)


# `torch.compiler.is_compiling`, once torch is loaded (every kernel call asks it first).
_is_compiling = None
_torch = None


def loaded_torch():
    """The torch module once it is loaded (None before), kept: code that Dynamo traces must not
    look it up in `sys.modules`, which Dynamo would wrap by iterating it while other threads
    import modules ("dictionary changed size during iteration")."""
    global _torch
    if _torch is None:
        _torch = sys.modules.get("torch")
    return _torch


def compiling() -> bool:
    """Whether torch.compile is tracing this call (False without torch). Dynamo folds the
    call of `torch.compiler.is_compiling` to True, however it is reached."""
    f = _is_compiling
    if f is None:
        return _first_compiling()
    return f()


def _first_compiling() -> bool:
    global _is_compiling
    torch = loaded_torch()
    if torch is None:
        return False
    if torch.compiler.is_compiling():  # (not kept: the first call outside a trace runs the hooks)
        return True
    while _when_loaded:
        _when_loaded.pop(0)()
    _is_compiling = torch.compiler.is_compiling
    return False


# Run once torch is loaded, by the first `compiling()` outside a trace (`when_torch_loaded`).
_when_loaded: list = []


def when_torch_loaded(fn) -> None:
    """Runs ``fn()`` on the first call of `compiling` outside a torch.compile trace once torch is
    loaded (every kernel and op call with tensors asks it first): `tirx.ops` imported before
    torch registers its ops then, which Dynamo could not do while tracing."""
    _when_loaded.append(fn)


def register(kernel, name: Optional[str] = None):
    """The custom op of ``kernel`` (registered once per kernel): ``name`` as ``"lib::op"``,
    default ``tirx::<kernel name>`` (a numeric suffix when another kernel has that name)."""
    op = kernel.__dict__.get("_torch_op")
    if op is not None and (name is None or name == kernel._torch_op_name):
        return op
    import torch

    if torch.compiler.is_compiling():
        # torch.compile cannot trace a registration (Dynamo skips torch.library's internals).
        raise RuntimeError(
            f"tirx: `{kernel.name}` is called inside torch.compile before its op exists: call "
            f"`k.torch_op()` (or the kernel once) outside the compiled function first"
        )

    qualname = name or f"tirx::{kernel.name}"
    if "::" not in qualname:
        raise ValueError(f"torch_op(): name {qualname!r} must be 'namespace::op'")
    if name is None:
        while qualname in _registered:
            qualname = f"tirx::{kernel.name}_{next(_suffix)}"
    elif qualname in _registered:
        raise ValueError(f"torch_op(): {qualname!r} is already registered for another kernel")

    def annotation(p):
        if not p.is_scalar:
            return torch.Tensor
        return int if p.dtype in _INT_DTYPES else float

    sig = inspect.Signature(
        [inspect.Parameter(p.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=annotation(p)) for p in kernel.params],
        return_annotation=None,
    )

    def impl(*args, **kwargs) -> None:
        if kwargs:
            args = sig.bind(*args, **kwargs).args
        kernel._run(args)

    impl.__signature__ = sig
    impl.__name__ = qualname.split("::")[1]
    mutated = tuple(p.name for p in kernel.params if not p.is_scalar and p.written)
    op = torch.library.custom_op(qualname, impl, mutates_args=mutated)

    @op.register_fake
    def _fake(*args, **kwargs) -> None:
        return None

    _registered[qualname] = op
    kernel._torch_op = op
    kernel._torch_op_name = qualname
    return op
