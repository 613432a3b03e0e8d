"""Compiled kernels and their calls (docs/python.md §5).

``tirx.compile(kernel, target="sm_90a")`` lowers a kernel for one target (cached per
target). Calling the result runs it:

* on NumPy arrays: the CPU simulator (every CTA and thread, with race, bounds and alignment
  checks); the arrays are updated in place;
* on CUDA tensors (PyTorch, CuPy, anything with ``__cuda_array_interface__`` or DLPack): a
  launch on the tensors' device and the current stream, without copies or synchronisation.

Arguments are checked against the kernel's signature (dtype, shape, contiguity, device) with
clear exceptions before anything runs. Scalar parameters (``n: T.int32``) take Python ints or
floats in the same call; shapes and the grid that depend on them, and the kernel's launch checks,
are evaluated from them first (docs/python.md §5.3).
"""

from __future__ import annotations

import json
import math
import os
from typing import Any, Callable, List, Optional, Sequence

import numpy as np

from . import _native
from . import device as _device
from . import torch_op as _torch_op

# Kernel dtypes NumPy has under the same name; the others come from ml_dtypes.
_NUMPY_DTYPES = frozenset(
    ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64")
)
_ML_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1fn")


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a kernel dtype (bfloat16 and fp8 through ml_dtypes)."""
    if name in _NUMPY_DTYPES:
        return np.dtype(name)
    if name in _ML_DTYPES:
        try:
            import ml_dtypes
        except ImportError:
            raise TypeError(f"{name} arrays need the `ml_dtypes` package (pip install ml_dtypes)") from None
        return np.dtype(getattr(ml_dtypes, name))
    raise TypeError(f"no NumPy dtype for {name}")


class Param:
    """One kernel parameter: a buffer (``shape``: ints, a run-time dim 0 as its expression,
    e.g. ``("n", 128)``; ``strides``: its element strides where they are not row-major,
    run-time ones as expressions, e.g. ``("lda", 1)``, else None) or a scalar
    (``kind == "scalar"``, ``n: int32``)."""

    __slots__ = ("name", "kind", "dtype", "shape", "bytes", "written", "strides")

    def __init__(self, m: dict):
        self.name, self.dtype, self.shape, self.bytes = m["name"], m["dtype"], tuple(m["shape"]), m["bytes"]
        self.strides = tuple(m["strides"]) if m.get("strides") is not None else None
        self.kind = m.get("kind", "buffer")
        # Whether the kernel writes the buffer: its array must take the result back.
        self.written = bool(m.get("written", True))

    @property
    def is_scalar(self) -> bool:
        return self.kind == "scalar"

    @property
    def symbolic(self) -> bool:
        return any(isinstance(d, str) for d in self.shape + (self.strides or ()))

    def __repr__(self):
        if self.is_scalar:
            return f"{self.name}: {self.dtype}"
        strides = "" if self.strides is None else f" strides ({', '.join(map(str, self.strides))})"
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]{strides}"


# Where each float scalar dtype's round-to-nearest reaches inf: max + half an ulp.
_FLOAT_INF_AT = {"float16": 65520.0, "bfloat16": (2 - 2**-8) * 2.0**127, "float32": (2 - 2**-24) * 2.0**127}

_INT_SCALARS = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1), "uint32": (0, 2**32 - 1)}


def default_target() -> str:
    """The target a kernel is compiled for when none is named: `$TIRX_TARGET`, else the GPU's
    (sm_90a on Hopper), else sm_90a."""
    t = os.environ.get("TIRX_TARGET")
    if t:
        return t
    from . import device

    cc = device.compute_capability()
    if cc is None:
        return "sm_90a"
    major, minor = cc
    return f"sm_{major}{minor}a" if major >= 9 else f"sm_{major}{minor}"


class Kernel:
    """A kernel lowered for one target: ``cuda_source``, ``explain()``, ``lir()``, and calls."""

    def __init__(self, prim, lowered):
        self.prim = prim
        self._l = lowered
        meta = json.loads(lowered.meta_json())
        self.meta = meta
        # A TMA tensor map is a parameter of the CUDA kernel that the launcher encodes from its
        # buffer's pointer: not an argument of the call.
        self.params: List[Param] = [Param(p) for p in meta["params"] if p.get("kind") != "tensormap"]
        self._device = None
        self._resident: dict = {}

    @property
    def name(self) -> str:
        return self.prim.name

    @property
    def cuda_source(self) -> str:
        return self._l.cuda_source

    @property
    def target(self) -> str:
        return self._l.arch

    @property
    def warnings(self) -> List[str]:
        return list(self._l.warnings)

    @property
    def notes(self) -> List[str]:
        """Decisions lowering made for the kernel (static shared memory over 48 KiB placed in
        dynamic shared memory), rendered; not warnings."""
        return list(self._l.notes)

    def explain(self, json: bool = False, sim: bool = False, sim_ctas: int = 4, scalars: Optional[dict] = None) -> str:
        """Every tile call: operands, each variant tried and why, the choice (`tirx explain`).
        With ``sim=True``, also the shared-memory bank conflicts of each call's accesses,
        measured by simulating the first ``sim_ctas`` CTAs on zeroed buffers (`tirx explain
        --sim`); ``scalars`` gives every scalar parameter's value by name (``{"n": 4096}``)."""
        _check_type("explain", "json", json, bool)
        _check_type("explain", "sim", sim, bool)
        if not sim:
            if scalars is not None:
                raise TypeError("explain(): scalars= are the values the simulation runs with; pass sim=True")
            return self._l.explain(json)
        _check_type("explain", "sim_ctas", sim_ctas, int, example="4")
        if sim_ctas < 1:
            raise ValueError(f"explain(): sim_ctas must be at least 1 (CTAs to simulate), got {sim_ctas}")
        given = dict(scalars or {})
        names = [p.name for p in self.params if p.is_scalar]
        extra = sorted(set(given) - set(names))
        if extra:
            raise TypeError(f"explain(): {self.name}() has no scalar parameter `{extra[0]}` (scalars: {names or 'none'})")
        missing = [n for n in names if n not in given]
        if missing:
            raise TypeError(f"explain(sim=True) needs the value of every scalar parameter: scalars={{'{missing[0]}': ...}}")
        args = [given[p.name] if p.is_scalar else None for p in self.params]
        return self._l.explain_sim(self.scalar_args(args), sim_ctas, json)

    def lir(self) -> str:
        """The lowered per-thread IR (`tirx lower --emit tir`)."""
        return self._l.lir()

    @property
    def cluster_size(self) -> int:
        """CTAs per cluster (1 without a cluster)."""
        return math.prod(self.meta.get("cluster", [1, 1, 1]))

    def resident_ctas(self, device: int = 0) -> int:
        """The CTAs of this kernel that GPU ``device`` holds at once, in whole clusters: the
        driver's occupancy for its threads, registers, shared memory and cluster size (where on
        the GPCs its clusters fit). The largest grid of a persistent kernel that runs in one
        wave. Loads the kernel on the device (once)."""
        n = self._resident.get(device)
        if n is None:
            n = self._resident[device] = self._l.resident_ctas(device)
        return n

    def __repr__(self):
        return f"<tirx.Kernel {self.name} for {self.target}: {', '.join(map(repr, self.params))}>"

    # ------------------------------------------------------------------ calls

    def __call__(self, *args):
        # Traced by torch.compile: through the kernel's custom op, which the graph keeps.
        if _torch_op.compiling():
            return self.torch_op()(*args)
        return self._run(args)

    def launcher(self, fixed_signature: bool = False) -> Callable:
        """``launch(*args)``: this kernel's call without the torch.compile check, for an op's
        repeated eager calls (valid CUDA tensors and scalars launch natively; anything else
        takes `__call__`'s general path with its checks and errors).

        ``fixed_signature``: for a caller whose every call passes tensors of the first call's
        shapes, strides, dtypes, device and 16-byte alignment (an op's plan, made per such signature by
        `tirx.ops._common.signature_plan`, its kernels' tensors derived from those alone): the
        first call checked as above, each later one launched from the tensors' data pointers on
        the current stream without the checks, which depend on nothing else and passed (an
        H200's host: 8.3 against 12.6 µs for a GEMM's four tensors). A kernel with scalar
        parameters checks them per call: the checked launch throughout."""
        native, general = self._l.call_torch, self._run

        def launch(*args):
            if not native(args):
                general(args)

        if not fixed_signature or any(p.is_scalar for p in self.params):
            return launch
        raw, device = self._l.launch, []

        def fixed(*tensors):
            # Unchecked only for the types the native path checked and launched (a subclass
            # of the same signature, whose data_ptr may mean another thing, is checked).
            if device and tuple(map(type, tensors)) == device[1]:
                d, stream = device[0]
                return raw(d, stream(d), [t.data_ptr() for t in tensors])
            if not native(tensors):
                return general(tensors)  # (arrays for the simulator, other libraries: each call)
            if not device:
                stream = _torch_op.loaded_torch()._C._cuda_getCurrentRawStream
                device.extend([(tensors[0].get_device(), stream), tuple(map(type, tensors))])

        return fixed

    def _run(self, args: tuple) -> None:
        # The common call — valid CUDA tensors and scalars — is checked and launched natively.
        if self._l.call_torch(args):
            return None
        self._check_count(args)
        if all(isinstance(a, np.ndarray) for p, a in zip(self.params, args) if not p.is_scalar):
            return self.simulate(*args)
        return _device.launch(self, args)

    def torch_op(self, name: Optional[str] = None):
        """This kernel as a PyTorch custom op (`torch.library.custom_op`): its signature, the
        buffers it writes declared mutated, a fake implementation for tracing; registered once
        (``name``: ``"lib::op"``, default ``tirx::<kernel name>``). `torch.compile(fullgraph=True)`
        traces through it; the op launches the kernel (or simulates it on CPU tensors)."""
        return _torch_op.register(self, name)

    def _check_count(self, args) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}() takes {len(self.params)} arguments ({self._sig()}), {len(args)} given")

    def _sig(self) -> str:
        return ", ".join(map(repr, self.params))

    def scalar_args(self, args) -> List[Any]:
        """The values of the scalar parameters among ``args`` (one per parameter), checked:
        a Python (or NumPy) int for an integer parameter, an int or float for a float one."""
        out = []
        for i, (p, a) in enumerate(zip(self.params, args)):
            if not p.is_scalar:
                continue
            if isinstance(a, (bool, np.bool_)):
                raise TypeError(f"{self.name}(): argument {i} (`{p}`) must be a number, got a bool")
            if p.dtype in _INT_SCALARS:
                if not isinstance(a, (int, np.integer)):
                    raise TypeError(f"{self.name}(): argument {i} (`{p}`) must be an int, got {type(a).__name__}")
                lo, hi = _INT_SCALARS[p.dtype]
                if not lo <= int(a) <= hi:
                    from . import TirxError

                    raise TirxError(f"{self.name}(): argument {i} (`{p}`): {int(a)} is outside the range of {p.dtype} [{lo}, {hi}]")
                out.append(int(a))
            else:
                if not isinstance(a, (int, float, np.integer, np.floating)):
                    raise TypeError(f"{self.name}(): argument {i} (`{p}`) must be a float, got {type(a).__name__}")
                out.append(self._float_arg(i, p, a))
        return out

    def _float_arg(self, i: int, p: Param, a) -> float:
        """``a`` as a float of ``p``'s dtype: a finite value that would round to inf there is an
        error (inf and nan pass as given)."""
        try:
            v = float(a)
        except OverflowError:  # an int beyond float64
            v = math.inf
        edge = _FLOAT_INF_AT.get(p.dtype)
        finite = math.isfinite(v) or not isinstance(a, (float, np.floating))
        if edge is not None and finite and not abs(v) < edge:
            from . import TirxError

            raise TirxError(
                f"{self.name}(): argument {i} (`{p}`): {a!r} overflows {p.dtype} (it would become inf); "
                "pass a value in range, or inf itself"
            )
        return v

    def shapes(self, scalars: Sequence[Any]) -> dict:
        """The shape of every buffer parameter (by parameter index) at the launch with these
        scalar arguments; a failed launch check is raised here, before anything runs."""
        return self.layouts(scalars)[0]

    def layouts(self, scalars: Sequence[Any]) -> tuple:
        """``(shapes, strides)`` of the buffer parameters (by parameter index) at the launch with
        these scalar arguments: strides in elements where the storage is not row-major (run-time
        strides evaluated), else None."""
        key = tuple((type(v) is float, v) for v in scalars)
        cache = self.__dict__.setdefault("_shapes", {})
        hit = cache.get(key)
        if hit is not None:
            return hit
        bufs = [i for i, p in enumerate(self.params) if not p.is_scalar]
        if not any(self.params[i].symbolic for i in bufs) and not scalars:
            out = ({i: self.params[i].shape for i in bufs}, {i: self.params[i].strides for i in bufs})
        else:
            _, shapes, strides = self._l.bind(list(scalars))
            out = (
                {i: tuple(s) for i, s in zip(bufs, shapes)},
                {i: None if st is None else tuple(st) for i, st in zip(bufs, strides)},
            )
        if len(cache) >= 64:  # a cache of recent argument sets, as the native one
            cache.clear()
        cache[key] = out
        return out

    def check_array(self, i: int, a: np.ndarray, shape: Optional[tuple] = None) -> None:
        p = self.params[i]
        want = numpy_dtype(p.dtype)
        shape = p.shape if shape is None else shape
        if not isinstance(a, np.ndarray):
            raise TypeError(f"{self.name}(): argument {i} (`{p}`) must be an array, got {type(a).__name__}")
        if a.dtype != want:
            raise TypeError(f"{self.name}(): argument {i} (`{p.name}`) must be {p.dtype}, got an array of {a.dtype}")
        if tuple(a.shape) != shape:
            of = f" ({p})" if p.symbolic else ""
            raise ValueError(f"{self.name}(): argument {i} (`{p.name}`) must have shape {shape}{of}, got {tuple(a.shape)}")

    def check_writable(self, i: int, a: np.ndarray) -> None:
        """A buffer the kernel writes needs an array that can take the result: not read-only,
        not a broadcast view (stride 0, where elements share memory)."""
        p = self.params[i]
        if not p.written:
            return
        if not a.flags.writeable:
            raise ValueError(
                f"{self.name}(): argument {i} (`{p.name}`) is written by the kernel but the array is read-only; "
                "pass a writable array (`a.copy()`)"
            )
        if a.size > 1 and 0 in a.strides:
            raise ValueError(
                f"{self.name}(): argument {i} (`{p.name}`) is written by the kernel but the array is a broadcast view "
                f"(strides {a.strides}: several elements share memory); pass `np.ascontiguousarray(a)`"
            )

    def same_arrays(self, idx: List[int], arrays: List[np.ndarray]) -> List[int]:
        """For each buffer argument, the first argument passed the same memory (itself if none),
        so that ``k(x, x)`` runs in place as on the GPU. Arrays that overlap without being the
        same view are refused: the kernel's two names for the memory would disagree."""
        same = list(range(len(arrays)))
        for j, b in enumerate(arrays):
            for i in range(j):
                a = arrays[i]
                if not np.may_share_memory(a, b):
                    continue
                if _view(a) == _view(b):
                    same[j] = same[i]
                    break
                if np.shares_memory(a, b):
                    pi, pj = self.params[idx[i]], self.params[idx[j]]
                    raise ValueError(
                        f"{self.name}(): arguments {idx[i]} (`{pi.name}`) and {idx[j]} (`{pj.name}`) overlap in memory "
                        "without being the same array; pass the same array for both, or separate arrays"
                    )
        return same

    def simulate(self, *args, check_races: bool = True, grid_limit: Optional[int] = None):
        """Runs the kernel in the CPU simulator on NumPy arrays (and the scalar arguments, in
        signature order), writing results in place."""
        self._check_count(args)
        _check_type("simulate", "check_races", check_races, bool)
        if grid_limit is not None:
            _check_type("simulate", "grid_limit", grid_limit, int)
            if grid_limit < 1:
                raise ValueError(f"simulate(): grid_limit must be at least 1 (CTAs to run), got {grid_limit}")
        scalars = self.scalar_args(args)
        shapes, strides = self.layouts(scalars)
        arrays = [a for p, a in zip(self.params, args) if not p.is_scalar]
        for i, a in zip(shapes, arrays):
            self.check_array(i, a, shapes[i])
        idx = list(shapes)
        for i, a in zip(idx, arrays):
            self.check_writable(i, a)
        same = self.same_arrays(idx, arrays)
        data = [_storage(a, strides[i]).tobytes() for i, a in zip(idx, arrays)]
        out, warnings = self._l.simulate(data, scalars, check_races, grid_limit, same)
        for i, a, b in zip(idx, arrays, out):
            if self.params[i].written:
                np.copyto(a, _elements(np.frombuffer(b, dtype=a.dtype), a.shape, strides[i]))
        if warnings:
            import warnings as _w

            from . import TirxWarning

            for w in warnings:
                _w.warn(w, TirxWarning, stacklevel=3)
        return None


def _storage(a: np.ndarray, strides: Optional[tuple]) -> np.ndarray:
    """The kernel's storage of the logical array ``a``: ``a`` itself, row-major, or, for a
    buffer with element ``strides``, ``a``'s elements at those strides (zeros in between)."""
    if strides is None:
        return np.ascontiguousarray(a)
    span = 1 + sum((n - 1) * s for n, s in zip(a.shape, strides)) if a.size else 0
    flat = np.zeros(span, dtype=a.dtype)
    _elements(flat, a.shape, strides)[...] = a
    return flat


def _elements(flat: np.ndarray, shape: tuple, strides: Optional[tuple]) -> np.ndarray:
    """The logical array of ``shape`` in the storage ``flat`` (a view where it can be)."""
    if strides is None:
        return flat.reshape(shape)
    item = flat.dtype.itemsize
    return np.lib.stride_tricks.as_strided(flat, shape, tuple(s * item for s in strides))


def _view(a: np.ndarray) -> tuple:
    """What makes two arrays the same view of memory: address, shape, strides, dtype."""
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype)


def _check_type(fn: str, name: str, v, want: type, example: str = "") -> None:
    """A keyword argument of the API must have its type (a bool is not an int here)."""
    ok = (int, np.integer) if want is int else want
    if isinstance(v, ok) and not (want is int and isinstance(v, (bool, np.bool_))):
        return
    eg = f" such as {example}" if example else ""
    what = {int: "an int", bool: "a bool", str: "a string"}[want]
    raise TypeError(f"{fn}(): `{name}` must be {what}{eg}, got {type(v).__name__} {v!r}")


def compile(kernel, target: Optional[str] = None) -> Kernel:
    """Lowers ``kernel`` (a ``@T.prim_func``) for ``target`` (default: the GPU's, or
    ``$TIRX_TARGET``); the result is cached on the kernel per target."""
    from .script.frontend import FailedPrimFunc, PrimFunc

    if isinstance(kernel, FailedPrimFunc):  # tirx.compat: its build error, raised where it is used
        raise kernel.error
    if not isinstance(kernel, PrimFunc):
        raise TypeError(f"tirx.compile takes a @T.prim_func kernel, not {type(kernel).__name__}")
    if target is not None:
        _check_type("tirx.compile", "target", target, str, example='"sm_90a"')
    t = target or default_target()
    k = kernel._compiled.get(t)
    if k is None:
        lowered = kernel._parsed.lower(t)
        k = Kernel(kernel, lowered)
        if k.warnings:
            import warnings

            from . import TirxWarning

            for w in k.warnings:
                warnings.warn(w, TirxWarning, stacklevel=2)
        kernel._compiled[t] = k
    return k
