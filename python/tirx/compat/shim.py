"""The modules of the reference (``tvm``) that TIRx programs use, backed by tirx
(docs/python.md §6). Installed by :func:`tirx.compat.install` only when the real TVM is not
importable.

What a program gets: ``tvm.script.tirx`` (``T``) and ``tvm.script.tirx.tile`` (``Tx``),
``tvm.tirx.layout``, ``tvm.target.Target``, ``tvm.IRModule``, ``tvm.compile(...,
tir_pipeline="tirx")`` → an executable (``ex(...)``, ``ex["main"](...)``,
``ex.mod.imports[0].inspect_source()``), ``tvm.cuda(0)``, ``tvm.runtime.tensor``,
``.numpy()``, and ``tvm.testing`` (``env.has_cuda_compute``, ``run_with_gpu_lock``,
``np_dtype_from_str``, ``generate_random_array``, ``assert_allclose``, ``main``).

Without a GPU, or with ``TIRX_DEVICE=sim``, ``tvm.cuda(0)`` is the CPU simulator and reports
compute capability 9.0. Any other ``tvm.*`` module imports as a stub whose attributes raise
when used, so files that import reference internals still load (their tests fail at the use).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import re
import sys
import types
from typing import Any, Dict, Optional

import numpy as np

import tirx
from tirx import layout as _layout
from tirx.runtime import numpy_dtype
from tirx.script import T as _T, Tx as _Tx
from tirx.script.namespace import names_in

# ----------------------------------------------------------------------------- devices


def _gpu_cc() -> Optional[tuple]:
    from tirx import device

    return device.compute_capability()


def simulated() -> bool:
    """Whether ``tvm.cuda(0)`` is the CPU simulator (no GPU, or ``TIRX_DEVICE=sim``)."""
    return _gpu_cc() is None


def _cc() -> tuple:
    return _gpu_cc() or (9, 0)


class Device:
    """``tvm.cuda(i)``: a GPU, or the simulator standing in for one."""

    def __init__(self, index: int = 0):
        self.device_type, self.index = 2, index

    @property
    def device_id(self) -> int:
        return self.index

    @property
    def exist(self) -> bool:
        return True

    @property
    def compute_version(self) -> str:
        return "%d.%d" % _cc()

    def sync(self) -> None:
        if not simulated():
            import torch

            torch.cuda.synchronize(self.index)

    def __repr__(self):
        return f"cuda({self.index})" + (" [simulator]" if simulated() else "")


def cuda(index: int = 0) -> Device:
    return Device(index)


gpu = cuda


class Tensor:
    """``tvm.runtime.tensor``: a torch CUDA tensor on a GPU, a NumPy array in the simulator."""

    def __init__(self, data, device: Device, dtype: np.dtype):
        self.data, self.device, self._dtype = data, device, dtype

    @property
    def shape(self):
        return tuple(self.data.shape)

    @property
    def dtype(self) -> str:
        return str(self._dtype)

    def numpy(self) -> np.ndarray:
        if isinstance(self.data, np.ndarray):
            return self.data.copy()
        return _from_torch(self.data, self._dtype)

    def copyfrom(self, arr) -> "Tensor":
        arr = np.asarray(arr, dtype=self._dtype)
        if isinstance(self.data, np.ndarray):
            np.copyto(self.data, arr)
        else:
            self.data.copy_(_to_torch(arr, self.device.index))
        return self

    def __repr__(self):
        return f"tvm.runtime.Tensor(shape={self.shape}, dtype={self.dtype}, device={self.device})"


_VIEW_INT = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


def _to_torch(arr: np.ndarray, index: int):
    import torch

    arr = np.ascontiguousarray(arr)
    try:
        t = torch.from_numpy(arr)
    except TypeError:  # ml_dtypes (bf16, fp8): move the bits, then reinterpret
        t = torch.from_numpy(arr.view(_VIEW_INT[arr.dtype.itemsize]))
        t = t.view(getattr(torch, arr.dtype.name))
    return t.to(f"cuda:{index}")


def _from_torch(t, dtype: np.dtype) -> np.ndarray:
    import torch

    c = t.detach().cpu()
    if c.dtype in (torch.bfloat16, getattr(torch, "float8_e4m3fn", None), getattr(torch, "float8_e5m2", None)):
        c = c.view(getattr(torch, _VIEW_INT[c.element_size()]))
        return c.numpy().view(dtype)
    return c.numpy()


def tensor(arr, device: Optional[Device] = None, *, dtype=None) -> Tensor:
    arr = np.asarray(arr) if dtype is None else np.asarray(arr, dtype=dtype)
    device = device or cuda(0)
    if simulated():
        return Tensor(np.ascontiguousarray(arr).copy(), device, arr.dtype)
    return Tensor(_to_torch(arr, device.index), device, arr.dtype)


def empty(shape, dtype="float32", device: Optional[Device] = None) -> Tensor:
    return tensor(np.zeros(shape, dtype=numpy_dtype(str(dtype))), device)


# ----------------------------------------------------------------------------- targets and modules

_current_target: list = []


class Target:
    """``tvm.target.Target("cuda")`` (the GPU's arch, sm_90a in the simulator) or
    ``Target({"kind": "cuda", "arch": "sm_80"})``; usable as ``with target:``."""

    def __init__(self, spec: Any = "cuda", host: Any = None):
        if isinstance(spec, Target):
            self.kind_name, self.arch = spec.kind_name, spec.arch
            return
        if isinstance(spec, dict):
            self.kind_name = spec.get("kind", "cuda")
            arch = spec.get("arch")
        else:
            parts = str(spec).split()
            self.kind_name = parts[0]
            arch = next((p.split("=", 1)[1] for p in parts[1:] if p.startswith("-arch=")), None)
        if self.kind_name not in ("cuda", "nvptx"):
            raise ValueError(f"tirx.compat targets CUDA only, not {self.kind_name!r}")
        self.arch = arch or _auto_arch()

    @property
    def kind(self):
        return types.SimpleNamespace(name=self.kind_name)

    @staticmethod
    def current(allow_none: bool = True) -> Optional["Target"]:
        return _current_target[-1] if _current_target else None

    def __enter__(self):
        _current_target.append(self)
        return self

    def __exit__(self, *exc):
        _current_target.pop()

    def __str__(self):
        return f"{self.kind_name} -arch={self.arch}"

    __repr__ = __str__


def _auto_arch() -> str:
    major, minor = _cc()
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


class IRModule(dict):
    """``tvm.IRModule({"main": kernel})``."""

    def __init__(self, funcs: Optional[Dict[str, Any]] = None):
        super().__init__(funcs or {})

    def script(self) -> str:
        return "\n".join(f.script() for f in self.values())

    def with_attr(self, *_):
        return self


class _SourceModule:
    def __init__(self, source: str):
        self._source = source

    def inspect_source(self, fmt: str = "") -> str:
        return self._source

    get_source = inspect_source


class _Runtime:
    def __init__(self, ex: "Executable"):
        self._ex = ex
        self.imports = [_SourceModule("\n".join(k.cuda_source for k in ex.kernels.values()))]

    def __getitem__(self, name: str):
        return self._ex[name]

    def get_function(self, name: str):
        return self._ex[name]


class Executable:
    """What ``tvm.compile`` returns: call it (the ``main`` kernel) or index it by name."""

    def __init__(self, kernels: Dict[str, "tirx.Kernel"]):
        self.kernels = kernels
        self.mod = _Runtime(self)

    def __getitem__(self, name: str):
        k = self.kernels.get(name)
        if k is None:
            raise KeyError(f"no kernel {name!r}; kernels: {', '.join(self.kernels)}")
        return lambda *args: _call(k, args)

    def __call__(self, *args):
        name = "main" if "main" in self.kernels else next(iter(self.kernels))
        return self[name](*args)

    def inspect_source(self) -> str:
        return self.mod.imports[0].inspect_source()


def _call(kernel, args):
    unwrapped = [a.data if isinstance(a, Tensor) else a for a in args]
    kernel(*unwrapped)


_DISPATCH_FAILED = re.compile(
    r"error: (?:no lowering variant applies to this `(\w+)`|the forced variant '[^']+' does not apply to this `(\w+)`"
    r"|no variant of the dispatch group '[^']+' \([^)]*\) applies to this `(\w+)`)"
)


def _compile(prim, arch):
    """``tirx.compile``; a call no variant lowers raises with the reference's header first
    (``TIRx schedule dispatch failed: op=... target=cuda``), then tirx's diagnostic."""
    try:
        return tirx.compile(prim, target=arch)
    except tirx.TirxError as e:
        m = _DISPATCH_FAILED.match(str(e))
        if m is None:
            raise
        op = next(g for g in m.groups() if g)
        raise tirx.TirxError(f"TIRx schedule dispatch failed: op=tirx.tile.{op} target=cuda\n{e}") from None


def compile(mod, target=None, tir_pipeline: str = "tirx", **_) -> Executable:
    """``tvm.compile(mod, target, tir_pipeline="tirx")``: every kernel of ``mod`` through tirx."""
    t = Target(target) if target is not None and not isinstance(target, Target) else target
    t = t or Target.current() or Target("cuda")
    funcs = mod.items() if isinstance(mod, dict) else [("main", mod)]
    kernels = {}
    for name, f in funcs:
        if isinstance(f, _Lowered):
            f = f.prim
        kernels[name] = _compile(f, t.arch)
    return Executable(kernels)


build = compile


class _Lowered:
    """``LowerTIRx()(mod)["main"]``: the kernel, whose ``script()`` is its lowered IR."""

    def __init__(self, prim):
        self.prim = prim

    def script(self, **_) -> str:
        arch = (Target.current() or Target("cuda")).arch
        return _compile(self.prim, arch).lir()

    def __getattr__(self, name):
        return getattr(self.prim, name)


def LowerTIRx():
    """Lowers every kernel for the current target (raising as compilation would); the result's
    functions print their lowered IR with ``script()``."""

    def run(mod):
        arch = (Target.current() or Target("cuda")).arch
        out = {}
        for k, v in mod.items():
            prim = v.prim if isinstance(v, _Lowered) else v
            _compile(prim, arch)
            out[k] = _Lowered(prim)
        return IRModule(out)

    return run


def list_registered_schedules():
    """``{"tirx.tile.<op>": {"cuda": [variant names]}}``, from the dispatcher's registry."""
    return {f"tirx.tile.{op}": {"cuda": list(names)} for op, names in tirx._native.registered_variants().items()}


# ----------------------------------------------------------------------------- tvm.testing


def np_dtype_from_str(dtype: str) -> np.dtype:
    return numpy_dtype(str(dtype))


def generate_random_array(dtype: str, shape) -> np.ndarray:
    """Random bit patterns of ``dtype`` with every non-finite value drawn again."""
    dt = np_dtype_from_str(dtype)
    container = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[dt.itemsize]
    bits = np.random.randint(0, 2 ** (8 * dt.itemsize), size=shape, dtype=container)
    arr = bits.view(dt)
    if dt.kind in "iub":
        return arr
    with np.errstate(invalid="ignore"):
        bad = ~np.isfinite(arr.astype(np.float64))
    while bad.any():
        bits[bad] = np.random.randint(0, 2 ** (8 * dt.itemsize), size=int(bad.sum()), dtype=container)
        arr = bits.view(dt)
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(arr.astype(np.float64))
    return arr


def assert_allclose(actual, desired, rtol=1e-7, atol=1e-7, **kw):
    a = actual.numpy() if isinstance(actual, Tensor) else np.asarray(actual)
    d = desired.numpy() if isinstance(desired, Tensor) else np.asarray(desired)
    np.testing.assert_allclose(a.astype(np.float64), d.astype(np.float64), rtol=rtol, atol=atol, **kw)


def run_with_gpu_lock(fn, *args, **kwargs):
    return fn(*args, **kwargs)


def _from_source(text: str, *_, **__):
    """`tvm.script.from_source(text)`: the kernel in ``text`` (`T` and `Tx` need no imports)."""
    from tirx.script.frontend import PrimFunc

    return PrimFunc.from_script(text, "<from_source>")


def _testing_main():
    import pytest

    sys.exit(pytest.main([sys.argv[0]] + sys.argv[1:]))


class _Env:
    @staticmethod
    def has_cuda() -> bool:
        return True

    @staticmethod
    def has_cuda_compute(major: int, minor: int = 0, exact: bool = False) -> bool:
        cc = _cc()
        return cc == (major, minor) if exact else cc >= (major, minor)


# ----------------------------------------------------------------------------- module tree


class _Stub(types.ModuleType):
    """A ``tvm.*`` module tirx does not provide: importable; its attributes fail when used."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self.__name__}.{name}")


class _Missing:
    def __init__(self, path: str):
        self._path = path

    def _fail(self, *a, **k):
        raise NotImplementedError(f"`{self._path}` is a reference (TVM) internal that tirx.compat does not provide")

    __call__ = _fail

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self._path}.{name}")

    def __mro_entries__(self, bases):
        return (object,)


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "tvm" or name.startswith("tvm."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Stub(spec.name)
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


_FINDER = _StubFinder()


def _module(name: str, **attrs) -> types.ModuleType:
    m = sys.modules.get(name)
    if m is None:
        m = _Stub(name)
        m.__path__ = []
        # A module spec, as an imported module has: tools that look modules up by name
        # (`importlib.util.find_spec`, which torch.compile's Dynamo calls) fail on `None`.
        m.__spec__ = importlib.machinery.ModuleSpec(name, _FINDER, is_package=True)
        sys.modules[name] = m
    for k, v in attrs.items():
        setattr(m, k, v)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(_module(parent), child, m)
    return m


def _layout_module() -> dict:
    names = {n: getattr(_layout, n) for n in _layout.__all__}
    for extra in ("tcgen05_atom_layout", "mma_shared_layout", "mma_atom_layout", "mma_atom_shape"):
        if hasattr(_layout, extra):
            names[extra] = getattr(_layout, extra)
    return names


def _install_dispatch(tvm) -> None:
    """The reference's IR values and dispatcher entry points (``dispatch.py``)."""
    from . import dispatch as d

    tvm.DataType = d.DataType
    _module("tvm.ir", Range=d.Range, PrimType=d.PrimType, PointerType=d.PointerType, Call=d.Call, Op=d.Op)
    _module("tvm.tirx", decl_buffer=d.decl_buffer, Var=d.Var, IntImm=d.IntImm, StringImm=d.StringImm,
            For=d.For, Evaluate=d.Evaluate, SeqStmt=d.SeqStmt)
    _module("tvm.tirx.stmt", BufferRegion=d.BufferRegion, For=d.For, Evaluate=d.Evaluate, SeqStmt=d.SeqStmt)
    _module("tvm.tirx.stmt_functor", StmtExprVisitor=d.StmtExprVisitor)
    _module("tvm.tirx.exec_scope", ExecScope=d.ExecScope)
    _module("tvm.tirx.tile_primitive", DispatchContext=d.DispatchContext)
    _module("tvm.tirx.operator.tile_primitive.ops", CopyAsync=d.CopyAsync)
    _module("tvm.tirx.operator.tile_primitive.dispatcher", DispatchFail=d.DispatchFail)
    for root in ("tvm.tirx.cuda.tile_primitive.copy_async", "tvm.backend.cuda.tile_primitive.copy_async"):
        _module(f"{root}.dsmem", copy_dsmem_impl=d.impl_of("dsmem"))
        _module(f"{root}.ldgsts", copy_ldgsts_impl=d.impl_of("ldgsts"))
        _module(f"{root}.tma", copy_tma_auto_impl=d.impl_of("tma_auto"), copy_tma_explicit_impl=d.impl_of("tma_explicit"))


def install() -> None:
    """Puts the shim into ``sys.modules`` (idempotent)."""
    if getattr(sys.modules.get("tvm"), "__tirx_compat__", False):
        return
    try:
        # As the reference's `tvm.testing` does: registers "bfloat16" and the fp8 names with
        # NumPy, so that `a.astype("bfloat16")` in its tests works in a fresh process.
        import ml_dtypes  # noqa: F401
    except ImportError:
        pass
    from tirx.script import frontend

    frontend.DEFER_ERRORS = True
    sys.meta_path.append(_FINDER)
    tvm = _module(
        "tvm",
        __tirx_compat__=True,
        compile=compile,
        build=compile,
        IRModule=IRModule,
        cuda=cuda,
        gpu=cuda,
        device=lambda kind="cuda", index=0: cuda(index),
    )
    _module("tvm.target", Target=Target)
    _module("tvm.runtime", tensor=tensor, empty=empty, Tensor=Tensor, Device=Device, cuda=cuda)
    env = _Env()
    _module("tvm.testing.env", has_cuda=env.has_cuda, has_cuda_compute=env.has_cuda_compute)
    _module(
        "tvm.testing",
        env=sys.modules["tvm.testing.env"],
        np_dtype_from_str=np_dtype_from_str,
        generate_random_array=generate_random_array,
        assert_allclose=assert_allclose,
        run_with_gpu_lock=run_with_gpu_lock,
        main=_testing_main,
    )
    sys.modules["tvm.script.tirx"] = _T
    sys.modules["tvm.script.tirx.tile"] = _Tx
    _module("tvm.script", tirx=_T, from_source=_from_source)
    _module("tvm.tirx.layout", **_layout_module())
    helpers = {n["name"]: getattr(_layout, n["name"]) for n in names_in("tma_utils")}
    for path in ("tvm.tirx.cuda.tile_primitive.tma_utils", "tvm.backend.cuda.tile_primitive.tma_utils"):
        _module(path, **helpers)
    from ..script.namespace import MBarrier

    for path in ("tvm.tirx.lang.pipeline", "tvm.backend.cuda.lang.pipeline"):
        _module(path, MBarrier=MBarrier)
    _module("tvm.tirx.transform", LowerTIRx=LowerTIRx)
    _module("tvm.tirx.operator.tile_primitive", list_registered_schedules=list_registered_schedules)
    _install_dispatch(tvm)
    _module("tvm.tirx", layout=sys.modules["tvm.tirx.layout"], transform=sys.modules["tvm.tirx.transform"])
    tvm.target = sys.modules["tvm.target"]
    tvm.runtime = sys.modules["tvm.runtime"]
    tvm.testing = sys.modules["tvm.testing"]
    tvm.script = sys.modules["tvm.script"]
    tvm.tirx = sys.modules["tvm.tirx"]
