"""The ``T`` and ``Tx`` namespaces seen by kernels written in Python (docs/python.md §2.3).

Calls of these build kernel values or emit statements into the kernel being built:

* statements (``T.device_entry()``, ``T.cuda.cta_sync()``, ``T.ptx.*``, every ``Tx.*`` tile
  call) are written where they are called — also inside a helper function the kernel calls;
* declarations (buffers, scope ids) wait for the assignment that names them;
* everything else (``T.cast``, ``T.max``, ``T.float16(1.5)``, ``T.cuda.warp_sum``, ...) is an
  expression.

Which names exist and what each builds come from the native table of the language's names
(``_native.builtins()``, ``crates/script/src/names.rs``); this module keeps only what the table
cannot say (``match_buffer``'s keyword defaults, ``decl_buffer`` as a view, ...). A name the
table does not hold passes through unchecked: the script front end below checks every call
(with a "did you mean"), so Python and file kernels get the same diagnostics.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from .. import _native
from .. import layout as _layout
from . import ir

# ----------------------------------------------------------------------------- the table

_BUILTINS = _native.builtins()

#: Every builtin name: dicts of ``namespace`` (``T``, ``T.cuda``, ``T.ptx``, ``Tx``, ``layout``,
#: ...), ``name``, ``kind`` (what it builds here), ``meaning`` (``script``: the script front end
#: resolves it; ``front_end``: only this front end has it; ``unsupported``: a name of the
#: reference the script check rejects where used) and ``alias_of``.
NAMES: List[Dict[str, Optional[str]]] = _BUILTINS["names"]

#: Per namespace, the kind of a name the table does not hold (``T.ptx.*``: statements), or None.
UNKNOWN_MEMBERS: Dict[str, Optional[str]] = _BUILTINS["namespaces"]

_KINDS = {f"{n['namespace']}.{n['name']}": n["kind"] for n in NAMES}


def names_in(namespace: str) -> List[Dict[str, Optional[str]]]:
    return [n for n in NAMES if n["namespace"] == namespace]


def kind_of(path: str) -> Optional[str]:
    """The kind of ``T.cuda.cta_sync``; of a path the table does not hold, what its innermost
    enclosing namespace passes through (``T.ptx.cp_async.comit_group``: a statement)."""
    kind = _KINDS.get(path)
    while kind is None and "." in path:
        path = path.rpartition(".")[0]
        kind = UNKNOWN_MEMBERS.get(path)
    return kind


# ----------------------------------------------------------------------------- dtypes

DTYPES = tuple(n["name"] for n in names_in("T") if n["kind"] == "dtype" and n["alias_of"] is None)

#: ``f16`` → ``float16``, ``e4m3_float8`` → ``float8_e4m3fn``: the dtype written for an alias.
ALIASES = {n["name"]: n["alias_of"] for n in names_in("T") if n["kind"] == "dtype" and n["alias_of"]}


class DType(ir.Renderable):
    """``T.float32``: a dtype (as a value it is the string ``"float32"``), a constructor
    (``T.float32(1.5)``) and an annotation (``x: T.float32 = 0``)."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name, self.span = name, None

    def __call__(self, value=None):
        if value is None:
            raise ir.FrontendError(
                f"`T.{self.name}()` without a value declares a scalar parameter; use it as an annotation",
                help=f"write `n: T.{self.name}` in the kernel's signature",
            )
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            v = float(value) if self.name.startswith(("float", "bfloat")) else int(value)
            return ir.Const(v, self.name)
        return ir.Call(f"T.{self.name}", (value,), {})

    def render(self, w: ir.Writer) -> None:
        w.write(f'"{self.name}"')

    def __eq__(self, other):
        return (isinstance(other, DType) and other.name == self.name) or other == self.name

    def __hash__(self):
        return hash(self.name)

    def __str__(self):
        return self.name

    def __repr__(self):
        return f"T.{self.name}"


def dtype_name(v: Any) -> str:
    if isinstance(v, DType):
        return v.name
    if isinstance(v, str):
        return ALIASES.get(v, v)
    name = getattr(v, "name", None) or str(v)
    return ALIASES.get(name, name)


# ----------------------------------------------------------------------------- markers


class _Marker:
    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __repr__(self):
        return self.text


HANDLE = _Marker("T.handle")
LET = _Marker("T.let")


class MetaVar:
    """``T.meta_var(v)``: binds the Python value ``v`` itself, never a kernel variable."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


class ForFrame:
    """The iterator of a kernel loop: ``range``, ``T.serial``, ``T.unroll``, ``T.grid``."""

    __slots__ = ("path", "args", "kwargs", "nvars")

    def __init__(self, path: str, args, kwargs=None, nvars: int = 1):
        self.path, self.args, self.kwargs, self.nvars = path, tuple(args), dict(kwargs or {}), nvars

    def call(self) -> ir.Call:
        return ir.Call(self.path, self.args, self.kwargs)

    def __iter__(self):
        raise ir.FrontendError(f"`{self.path}(...)` is a kernel loop: iterate it with `for` in the kernel body")


class ScopeIdDecl(ir.Renderable):
    """``T.thread_id([128])``: declared where it is assigned (one variable per extent)."""

    __slots__ = ("call", "nvars")

    def __init__(self, call: ir.Call, nvars: int):
        self.call, self.nvars, self.span = call, nvars, None

    def render(self, w: ir.Writer) -> None:
        self.call.render(w)

    def __iter__(self):
        raise ir.FrontendError("bind scope ids to names: `bx, by = T.cta_id([4, 2])`")


# ----------------------------------------------------------------------------- emission


def _emit(call: ir.Call) -> None:
    from .frontend import current

    current().emit_call(call)


class TPath:
    """``T.<a>.<b>...``: a namespace path; calling it is a statement or an expression."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __getattr__(self, name: str) -> "TPath":
        if name.startswith("__"):
            raise AttributeError(name)
        return TPath(f"{self.path}.{name}")

    def __call__(self, *args, **kwargs):
        call = ir.Call(self.path, args, kwargs)
        if kind_of(self.path) == "statement":
            _emit(call)
            return None
        return call

    def __repr__(self):
        return self.path


def _scope_id(name: str):
    def f(extents=None, *, parent=None):
        args = () if extents is None else (list(extents) if isinstance(extents, (list, tuple)) else [extents],)
        n = len(args[0]) if args else 1
        return ScopeIdDecl(ir.Call(f"T.{name}", args, {}), n)

    f.__name__ = name
    return f


# ----------------------------------------------------------------------------- buffers

_UNSUPPORTED_DEFAULTS = {"data": None, "strides": None, "elem_offset": None, "axis_separators": None}


def _buffer_call(path: str, shape, dtype, scope, layout, lead=(), extra=None, default_scope="global", strides=None):
    for k, v in (extra or {}).items():
        if k in _UNSUPPORTED_DEFAULTS and v is not _UNSUPPORTED_DEFAULTS[k] and v is not None:
            raise ir.FrontendError(f"`{path}(..., {k}=...)` is not supported", help=f"remove `{k}=`")
    shape = shape if isinstance(shape, (list, tuple)) else (shape,)
    dt = dtype_name(dtype)
    kwargs = {}
    if scope is not None and path not in ("T.alloc_shared", "T.alloc_local"):
        kwargs["scope"] = scope
    if layout is not None:
        kwargs["layout"] = layout
    if strides is not None:  # a parameter's element strides (run-time ones: scalar parameters)
        kwargs["strides"] = tuple(strides) if isinstance(strides, (list, tuple)) else (strides,)
    call = ir.Call(path, (*lead, tuple(shape), dt), kwargs)
    sc = scope or default_scope
    return ir.Buffer(None, tuple(shape), dt, sc, layout, text=call)


def match_buffer(param, shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global",
                 align=-1, offset_factor=0, buffer_type="default", axis_separators=None, layout=None):
    extra = dict(data=data, elem_offset=elem_offset, axis_separators=axis_separators)
    return _buffer_call("T.match_buffer", shape, dtype, None if scope == "global" else scope, layout,
                        lead=(param,), extra=extra, strides=strides)


def Buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=-1,
           offset_factor=0, buffer_type="", axis_separators=None, layout=None):
    extra = dict(data=data, elem_offset=elem_offset, axis_separators=axis_separators)
    return _buffer_call("T.Buffer", shape, dtype, None if scope == "global" else scope, layout, extra=extra,
                        strides=strides)


def decl_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope=None, align=-1,
                offset_factor=0, buffer_type="", axis_separators=None, layout=None):
    """``T.decl_buffer(shape, dtype, X.data, layout=L)``: the storage of ``X`` under another shape
    and layout, i.e. the view ``X.view(shape, layout=L)`` (docs/tile-primitives.md §1.8)."""
    if not isinstance(data, ir.BufferData):
        raise ir.FrontendError(
            "`T.decl_buffer` declares a view of a buffer's storage: pass `X.data` as `data`",
            help="allocate a new buffer with `T.alloc_buffer` or `pool.alloc`",
        )
    base = data.buffer
    if dtype_name(dtype) != base.dtype:
        raise ir.FrontendError(
            f"`T.decl_buffer` of {dtype_name(dtype)} over {base.dtype} storage: dtype views are not supported",
            help="allocate a buffer of the wanted dtype",
        )
    if elem_offset not in (None, 0):
        raise ir.FrontendError(
            "`T.decl_buffer(..., elem_offset=...)` is not supported",
            help="view the whole storage and index the region in the tile call, or use `X.sub[...]`",
        )
    for k, v in (("strides", strides), ("axis_separators", axis_separators)):
        if v is not None:
            raise ir.FrontendError(f"`T.decl_buffer(..., {k}=...)` is not supported", help=f"remove `{k}=`")
    if scope is not None and scope != base.scope():
        raise ir.FrontendError(
            f"`T.decl_buffer` in scope {scope!r} over {base.scope()!r} storage", help=f"use scope={base.scope()!r}"
        )
    return base.view(*(shape if isinstance(shape, (list, tuple)) else (shape,)), layout=layout)


def alloc_buffer(shape, dtype="float32", data=None, strides=None, elem_offset=None, scope="global", align=-1,
                 offset_factor=0, buffer_type="", axis_separators=None, layout=None):
    extra = dict(data=data, strides=strides, elem_offset=elem_offset, axis_separators=axis_separators)
    return _buffer_call("T.alloc_buffer", shape, dtype, scope, layout, extra=extra)


def alloc_shared(shape, dtype="float32", scope="shared", align=-1, layout=None):
    return _buffer_call("T.alloc_shared", shape, dtype, None, layout, default_scope="shared")


def alloc_local(shape, dtype="float32", scope="local", align=-1, layout=None):
    return _buffer_call("T.alloc_local", shape, dtype, None, layout, default_scope="local")


# ----------------------------------------------------------------------------- loops


def serial(start, stop=None, step=None, *, annotations=None):
    return ForFrame("T.serial", (start,) if stop is None else (start, stop))


def unroll(start, stop=None, step=None, *, annotations=None):
    return ForFrame("T.unroll", (start,) if stop is None else (start, stop))


def vectorized(start, stop=None, step=None, *, annotations=None):
    # A vectorized loop is a serial loop whose body the compiler vectorizes; unrolled here.
    return ForFrame("T.unroll", (start,) if stop is None else (start, stop))


def grid(*extents):
    return ForFrame("T.grid", extents, nvars=len(extents))


# ----------------------------------------------------------------------------- constants


def FloatImm(dtype, value):
    return ir.Const(float(value), dtype_name(dtype))


def IntImm(dtype, value):
    return ir.Const(int(value), dtype_name(dtype))


def meta_var(value):
    return MetaVar(value)


def _tx_path(scope: str, op: str) -> str:
    return f"Tx.{op}" if scope == "thread" else f"Tx.{scope}.{op}"


class TxOp:
    """``Tx.<scope>.<op>``: calling it emits the tile call."""

    __slots__ = ("scope", "op")

    def __init__(self, scope: str, op: str):
        self.scope, self.op = scope, op

    def __call__(self, *args, **kwargs):
        _emit(ir.Call(_tx_path(self.scope, self.op), args, kwargs))

    def __repr__(self):
        return _tx_path(self.scope, self.op)


class TxScope:
    __slots__ = ("scope",)

    def __init__(self, scope: str):
        self.scope = scope

    def __getattr__(self, op: str) -> TxOp:
        if op.startswith("__"):
            raise AttributeError(op)
        return TxOp(self.scope, op)

    def __repr__(self):
        return f"Tx.{self.scope}"


# ----------------------------------------------------------------------------- building the namespaces

def _path(n) -> TPath:
    return TPath(f"{n['namespace']}.{n['name']}")


# What a name of each kind is when nothing hand-written stands for it.
_BUILD = {
    "statement": _path,
    "expression": _path,
    "namespace": _path,
    "dtype": lambda n: DType(n["alias_of"] or n["name"]),
    "scope_id": lambda n: _scope_id(n["name"]),
    "layout": lambda n: getattr(_layout, n["name"]),
}


def t_members(hand_written: Dict[str, Any]) -> Dict[str, Any]:
    """The names of ``T``: ``hand_written``'s where it has one (a behaviour the table cannot
    say), else what the name's kind builds. Kinds that need Python code (buffers, loops, ...)
    get a name only from ``hand_written``; the tests check that every one has it."""
    out = {}
    for n in names_in("T"):
        name = n["name"]
        if name in hand_written:
            out[name] = hand_written[name]
        elif n["kind"] in _BUILD:
            out[name] = _BUILD[n["kind"]](n)
    return out


def tx_members() -> Dict[str, Any]:
    """The names of ``Tx``: its scopes (``Tx.warpgroup`` is written ``Tx.wg``) and its tile
    primitives at thread scope."""
    out: Dict[str, Any] = {}
    for n in names_in("Tx"):
        if n["kind"] == "namespace":
            out[n["name"]] = TxScope(n["alias_of"] or n["name"])
        elif n["kind"] == "tile_op":
            out[n["name"]] = TxOp("thread", n["name"])
    return out


# ----------------------------------------------------------------------------- pools and mbarriers


def _mark_pipeline() -> None:
    """The kernel uses `MBarrier`: its script imports it from the reference's module."""
    from .frontend import current

    current().uses_pipeline = True


class KernelObject(ir.Renderable):
    """An object of the script language (`T.SMEMPool()`, `MBarrier(pool, depth)`): declared
    under the name it is assigned to, its methods written as the script's own calls, so the
    script front end builds it exactly as in a kernel file (docs/tile-primitives.md §8)."""

    __slots__ = ("name", "text")

    def __init__(self, text: ir.Call):
        self.name, self.text, self.span = None, text, None

    def render(self, w: ir.Writer) -> None:
        if self.name is None:
            raise ir.FrontendError(f"bind `{self.text.path}(...)` to a name first: `x = {self.text.path}(...)`")
        w.write(self.name)

    def _call(self, method: str, *args, **kwargs) -> ir.Call:
        return ir.Call(ir._Method(self, method), args, kwargs)


class SMEMPool(KernelObject):
    """``pool = T.SMEMPool()``: dynamic shared memory carved in allocation order."""

    __slots__ = ()

    def __init__(self, ptr=None):
        if ptr is not None:
            raise ir.FrontendError("a pool over a caller-managed pointer is not supported", help="write `T.SMEMPool()`")
        super().__init__(ir.Call("T.SMEMPool", (), {}))

    def alloc(self, shape, dtype="float32", strides=None, scope="shared.dyn", align=0, layout="default"):
        shape = tuple(shape) if isinstance(shape, (list, tuple)) else (shape,)
        kwargs = {}
        for k, v, default in (("strides", strides, None), ("scope", scope, "shared.dyn"), ("align", align, 0)):
            if v != default:
                kwargs[k] = v
        lay = None if layout is None or (isinstance(layout, str) and layout == "default") else layout
        if lay is not None:
            kwargs["layout"] = lay
        dt = dtype_name(dtype)
        return ir.Buffer(None, shape, dt, "shared.dyn", lay, text=self._call("alloc", shape, dt, **kwargs))

    def commit(self, size=None) -> None:
        _emit(self._call("commit") if size is None else self._call("commit", size))


class MBarrier(KernelObject):
    """``mbar = MBarrier(pool, depth)``: one mbarrier per pipeline stage; ``init(count)`` (by
    thread 0 of the CTA), ``wait(stage, phase)``, ``arrive(stage[, cta_id=rank[, scope="cta"]])``, ``ptr_to([stage])``."""

    __slots__ = ("depth",)

    def __init__(self, pool, depth, phase_offset=0, leader=None):
        kwargs = {}
        if phase_offset:
            kwargs["phase_offset"] = phase_offset
        if leader is not None:
            kwargs["leader"] = leader
        super().__init__(ir.Call("MBarrier", (pool, depth), kwargs))
        self.depth = depth
        _mark_pipeline()

    def init(self, count) -> None:
        _emit(self._call("init", count))

    def wait(self, stage, phase) -> None:
        _emit(self._call("wait", stage, phase))

    def arrive(self, stage, cta_id=None, scope=None) -> None:
        """One arrival on stage ``stage``'s barrier; with ``cta_id``, on the barrier at the same
        offset in the cluster's CTA of that rank (a remote arrive: the peer's producer learns
        that this CTA freed the stage its multicast loads refill), releasing at cluster scope, or
        with ``scope="cta"`` (CUTLASS's remote arrive: no fence) only the reads before it."""
        kwargs = {k: v for k, v in (("cta_id", cta_id), ("scope", scope)) if v is not None}
        _emit(self._call("arrive", stage, **kwargs))

    def ptr_to(self, indices) -> ir.Call:
        return self._call("ptr_to", list(indices))
