"""Symbolic kernel values of the Python front end (docs/python.md §2).

While a decorated function is evaluated, names bound to kernel-local IR values (scope ids,
loop variables, bindings, buffers) hold these objects. Python operators on them build
expression trees; every object renders itself as script text through a :class:`Writer`,
which records which byte range of the generated script stands for which node of the user's
source, so diagnostics point into the user's file.
"""

from __future__ import annotations

import inspect
import json
import math
import re
import threading
import types
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np

from .. import layout as _layout


class FrontendError(Exception):
    """A user error found by the front end itself, at ``node`` of the user's source."""

    def __init__(self, message: str, node=None, help: Optional[str] = None):
        super().__init__(message)
        self.message, self.node, self.help = message, node, help


# ----------------------------------------------------------------------------- writer


# Set by the front end while it builds a kernel, per thread (the autotuner builds
# configurations in parallel): `NAMING.view(buf)` names an unnamed view when it is rendered.
NAMING = threading.local()


class Writer:
    """Accumulates script text; ``marks`` are ``(gen_lo, gen_hi, span)`` in bytes."""

    __slots__ = ("parts", "pos", "marks", "hoisted", "first_use", "cur_span")

    def __init__(self):
        self.parts: List[str] = []
        self.pos = 0
        self.marks: List[Tuple[int, int, Any]] = []
        # Module-level constants the body refers to: layout text -> name, and the statement
        # that used each first (where a problem with the layout is reported).
        self.hoisted: dict = {}
        self.first_use: dict = {}
        self.cur_span = None

    def write(self, s: str) -> None:
        self.parts.append(s)
        self.pos += len(s) if s.isascii() else len(s.encode("utf-8"))

    def mark(self, lo: int, span) -> None:
        if span is not None and self.pos > lo:
            self.marks.append((lo, self.pos, span))

    def text(self) -> str:
        return "".join(self.parts)

    def layout_name(self, lay: "_layout.Layout") -> str:
        key = lay.script()
        name = self.hoisted.get(key)
        if name is None:
            name = f"__tirx_layout_{len(self.hoisted)}"
            self.hoisted[key] = name
        self.first_use.setdefault(name, self.cur_span)
        return name


def py_value(v: Any) -> Any:
    """A NumPy scalar as the Python scalar it holds (``np.int64`` → ``int``, ``np.bool_`` →
    ``bool``, ``np.float32`` and the ``ml_dtypes`` floats → ``float``); anything else as is."""
    if not isinstance(v, np.generic):
        return v
    kind = v.dtype.kind
    if kind == "b":
        return bool(v)
    if kind in "iu":
        return int(v)
    if kind == "f" or v.dtype.name.startswith(("float", "bfloat")):  # ml_dtypes' kind is "V"
        return float(v)
    return v


def render(w: Writer, v: Any, span=None) -> None:
    """Writes ``v`` (a symbolic value or a Python value) as script text."""
    lo = w.pos
    v = py_value(v)
    if isinstance(v, Renderable):
        v.render(w)
        span = span if span is not None else v.span
    elif isinstance(v, bool) or v is None:
        w.write(repr(v))
    elif isinstance(v, int):
        w.write(str(v))
    elif isinstance(v, float):
        w.write(_float(v))
    elif isinstance(v, str):
        w.write(json.dumps(v))
    elif isinstance(v, tuple):
        w.write("(")
        for i, x in enumerate(v):
            if i:
                w.write(", ")
            render(w, x)
        w.write(",)" if len(v) == 1 else ")")
    elif isinstance(v, list):
        w.write("[")
        for i, x in enumerate(v):
            if i:
                w.write(", ")
            render(w, x)
        w.write("]")
    elif isinstance(v, _layout.Layout):
        w.write(w.layout_name(v))
    elif isinstance(v, _layout.Spec):
        w.write(w.layout_name(_layout.TileLayout(v)))
    elif isinstance(v, slice):
        raise FrontendError("a slice is only valid as a buffer index (`A[0:32, 4:8]`)")
    elif isinstance(v, types.FunctionType):
        _render_lambda(w, v)
    else:
        raise FrontendError(
            f"a value of type `{type(v).__name__}` cannot be used in a kernel",
            help="kernels take numbers, strings, tuples, layouts, buffers and kernel expressions",
        )
    w.mark(lo, span)


def _render_lambda(w: Writer, f) -> None:
    """A Python function of coordinates (a tile op's ``mask=``) as a script lambda: called with a
    kernel variable per parameter without a default (``lambda i, j, o=off: ...`` keeps ``o``'s
    value), its result is the lambda's body. A parameter whose name a kernel value the body
    captures also has (``lambda i, j: k0 + j >= n`` with ``k0 = j * 64`` of a loop's ``j``) is
    renamed (``j_``), or the script's lambda would bind the captured name too."""
    empty = inspect.Parameter.empty
    params = [n for n, p in inspect.signature(f).parameters.items() if p.default is empty]
    if not params:
        raise FrontendError("a mask takes one parameter per dim of the region (`lambda i, j: j > i`)")
    probe = Writer()
    probe.hoisted, probe.first_use = w.hoisted, w.first_use
    render(probe, f(*[Var(f"__tirx_mask_{k}") for k in range(len(params))]))
    captured = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", probe.text()))
    names = []
    for n in params:
        while n in captured or n in names:
            n += "_"
        names.append(n)
    w.write(f"lambda {', '.join(names)}: ")
    render(w, f(*[Var(n) for n in names]))


def _float(x: float) -> str:
    if math.isnan(x):
        return 'float("nan")'
    if math.isinf(x):
        return 'float("inf")' if x > 0 else '-float("inf")'
    return repr(x)


class Renderable:
    __slots__ = ("span",)

    def render(self, w: Writer) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


# ----------------------------------------------------------------------------- expressions

_BINOPS = {
    "+": "__add__",
    "-": "__sub__",
    "*": "__mul__",
    "/": "__truediv__",
    "//": "__floordiv__",
    "%": "__mod__",
    "&": "__and__",
    "|": "__or__",
    "^": "__xor__",
    "<<": "__lshift__",
    ">>": "__rshift__",
}

_NO_BOOL = (
    "a kernel value has no truth value at compile time (it is known only when the kernel runs)"
)


class Expr(Renderable):
    """A runtime scalar of the kernel. Python operators build new expressions."""

    __slots__ = ()

    def __bool__(self):
        raise FrontendError(
            _NO_BOOL,
            help="use it in an `if` of the kernel body, or `T.if_then_else(c, a, b)`; "
            "`and`/`or`/`not` of kernel values are written `&`, `|`, `T.Not`",
        )

    def __index__(self):
        raise FrontendError(
            "a kernel value is not a compile-time integer",
            help="shapes, extents and Python indices must be known when the kernel is built",
        )

    __int__ = __index__

    def __float__(self):
        raise FrontendError("a kernel value is not a compile-time number")

    def __iter__(self):
        raise FrontendError("a kernel value cannot be iterated at compile time")

    # comparisons build expressions (like TVM's PrimExpr); identity hashing keeps them usable as dict keys
    __hash__ = object.__hash__

    def __eq__(self, o):
        return BinOp("==", self, o)

    def __ne__(self, o):
        return BinOp("!=", self, o)

    def __lt__(self, o):
        return BinOp("<", self, o)

    def __le__(self, o):
        return BinOp("<=", self, o)

    def __gt__(self, o):
        return BinOp(">", self, o)

    def __ge__(self, o):
        return BinOp(">=", self, o)

    def __neg__(self):
        return Unary("-", self)

    def __pos__(self):
        return self

    def __invert__(self):
        return Unary("~", self)


def _binop(op):
    def f(self, o):
        return BinOp(op, self, o) if _operand(o) else NotImplemented

    def r(self, o):
        return BinOp(op, o, self) if _operand(o) else NotImplemented

    return f, r


def _operand(o) -> bool:
    return isinstance(o, (Expr, int, float, bool))


for _op, _name in _BINOPS.items():
    _f, _r = _binop(_op)
    setattr(Expr, _name, _f)
    setattr(Expr, "__r" + _name[2:], _r)


class Var(Expr):
    """A named kernel value: scope id, loop variable, binding, scalar parameter."""

    __slots__ = ("name",)

    def __init__(self, name: str, span=None):
        self.name, self.span = name, span

    def render(self, w: Writer) -> None:
        w.write(self.name)

    def __repr__(self):
        return f"Var({self.name})"


class BinOp(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: str, a, b, span=None):
        self.op, self.a, self.b, self.span = op, a, b, span

    def render(self, w: Writer) -> None:
        _child(w, self.a)
        w.write(f" {self.op} ")
        _child(w, self.b)


class Unary(Expr):
    __slots__ = ("op", "a")

    def __init__(self, op: str, a, span=None):
        self.op, self.a, self.span = op, a, span

    def render(self, w: Writer) -> None:
        w.write(self.op)
        _child(w, self.a)


def _child(w: Writer, v) -> None:
    """Operands of operators are parenthesized unless atomic (the IR is the same either way)."""
    if isinstance(v, (BinOp, Unary)) or (isinstance(v, (int, float)) and not isinstance(v, bool) and v < 0):
        lo = w.pos
        w.write("(")
        render(w, v)
        w.write(")")
        w.mark(lo, getattr(v, "span", None))
    else:
        render(w, v)


class Call(Expr):
    """``T.<path>(args, k=v)`` or ``Tx.<scope>.<op>(...)``: an intrinsic, a statement or a value."""

    __slots__ = ("path", "args", "kwargs")

    def __init__(self, path: str, args: Sequence, kwargs: dict, span=None):
        self.path, self.args, self.kwargs, self.span = path, tuple(args), dict(kwargs), span

    def render(self, w: Writer) -> None:
        w.write(str(self.path))
        w.write("(")
        first = True
        for a in self.args:
            if not first:
                w.write(", ")
            render(w, a)
            first = False
        for k, v in self.kwargs.items():
            if not first:
                w.write(", ")
            w.write(f"{k}=")
            render(w, v)
            first = False
        w.write(")")

    def __repr__(self):
        return f"Call({self.path})"


class Const(Expr):
    """``T.float16(1.25)``, ``T.FloatImm("float32", 2.0)``: a typed constant (``.value``, ``.dtype``)."""

    __slots__ = ("value", "dtype")

    def __init__(self, value, dtype: str, span=None):
        self.value, self.dtype, self.span = value, dtype, span

    def render(self, w: Writer) -> None:
        w.write(f"T.{self.dtype}(")
        render(w, self.value)
        w.write(")")

    def __repr__(self):
        return f"T.{self.dtype}({self.value!r})"


class Load(Expr):
    """``buf[i, j]``: one element."""

    __slots__ = ("buf", "indices")

    def __init__(self, buf: "Buffer", indices: Sequence, span=None):
        self.buf, self.indices, self.span = buf, tuple(indices), span

    def render(self, w: Writer) -> None:
        render(w, self.buf)
        w.write("[")
        for i, x in enumerate(self.indices):
            if i:
                w.write(", ")
            render(w, x)
        w.write("]")


# ----------------------------------------------------------------------------- buffers and regions


class Handle(Renderable):
    """A ``T.handle`` kernel parameter."""

    __slots__ = ("name",)

    def __init__(self, name: str, span=None):
        self.name, self.span = name, span

    def render(self, w: Writer) -> None:
        w.write(self.name)


def _normalize_shape(shape) -> tuple:
    if isinstance(shape, (list, tuple)):
        return tuple(shape)
    return (shape,)


class Buffer(Renderable):
    """A kernel buffer (parameter, allocation or view). ``text`` renders an unnamed view."""

    __slots__ = ("name", "shape", "dtype", "_scope", "layout", "text", "base")

    def __init__(self, name, shape, dtype, scope, layout=None, text=None, base=None, span=None):
        self.name, self.shape, self.dtype = name, _normalize_shape(shape), dtype
        self._scope, self.layout, self.text, self.base, self.span = scope, layout, text, base, span

    def render(self, w: Writer) -> None:
        if self.name is None:
            name_view = getattr(NAMING, "view", None)
            if name_view is None:
                raise FrontendError("bind this view to a name: `V = A.view(...)`")
            name_view(self)
        w.write(self.name)

    # TVM spells it as a method
    def scope(self) -> str:
        return self._scope

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        # `A[(0, *idx)]` style: a single tuple/list index is the index tuple
        if len(items) == 1 and isinstance(items[0], list):
            items = tuple(items[0])
        if any(isinstance(i, slice) for i in items):
            return Region(self, items)
        return Load(self, items)

    def local(self, *shape, layout=None) -> "Buffer":
        """The thread's registers in physical order (element i is register i); `layout=` views
        them through another layout (docs/tile-primitives.md §1.8)."""
        text = Call(_Method(self, "local"), shape, {} if layout is None else {"layout": layout})
        return Buffer(None, shape if shape else (None,), self.dtype, "local", layout, text=text, base=self)

    def view(self, *shape, layout=None, dtype=None) -> "Buffer":
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        kw = {}
        if layout is not None:
            kw["layout"] = layout
        if dtype is not None:
            raise FrontendError("dtype views are not supported", help="allocate a buffer of the wanted dtype")
        text = Call(_Method(self, "view"), shape, kw)
        return Buffer(None, shape, self.dtype, self._scope, layout, text=text, base=self)

    @property
    def sub(self) -> "_SubIndexer":
        """``buf.sub[i, :, j, 0:4]``: the view of a sub-region (an index drops its dim, a slice
        narrows it, missing trailing dims stay whole), as the reference's indexer."""
        return _SubIndexer(self)

    def ptr_to(self, indices) -> "Call":
        return Call(_Method(self, "ptr_to"), (list(indices),), {})

    @property
    def data(self) -> "BufferData":
        """``buf.data``: the buffer's storage, for ``T.decl_buffer(shape, dtype, buf.data, ...)``."""
        return BufferData(self)

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self._scope})"


class BufferData:
    """The storage of a buffer (``buf.data``); ``T.decl_buffer`` views it."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: Buffer):
        self.buffer = buffer


class _Method:
    """``buf.<method>`` with the buffer's name as it is when rendered (a view is named by
    the assignment that binds it, after it is created)."""

    __slots__ = ("buf", "method")

    def __init__(self, buf: Buffer, method: str):
        self.buf, self.method = buf, method

    def __str__(self):
        if self.buf.name is None:
            raise FrontendError(f"`.{self.method}` of an unnamed view: bind the view to a name first")
        return f"{self.buf.name}.{self.method}"


class _SubIndexer:
    """``buf.sub``: indexing it gives the view (an unnamed :class:`Buffer` bound like any view)."""

    __slots__ = ("buf",)

    def __init__(self, buf: Buffer):
        self.buf = buf

    def __getitem__(self, key) -> Buffer:
        items = key if isinstance(key, tuple) else (key,)
        b = self.buf
        shape = []
        for d, dim in enumerate(b.shape):
            x = items[d] if d < len(items) else slice(None)
            if not isinstance(x, slice):
                continue
            lo = 0 if x.start is None else x.start
            hi = dim if x.stop is None else x.stop
            shape.append(hi - lo if isinstance(lo, int) and isinstance(hi, int) else None)
        return Buffer(None, tuple(shape), b.dtype, b._scope, None, text=_SubText(b, items), base=b)


class _SubText(Renderable):
    """``base.sub[...]`` (the base named first if it is an unnamed view)."""

    __slots__ = ("buf", "items")

    def __init__(self, buf: Buffer, items: Sequence, span=None):
        self.buf, self.items, self.span = buf, tuple(items), span

    def render(self, w: Writer) -> None:
        render(w, self.buf)
        w.write(".sub")
        _render_index(w, self.items)


def _render_index(w: Writer, items: Sequence) -> None:
    """``[0:32, i]``."""
    w.write("[")
    for i, x in enumerate(items):
        if i:
            w.write(", ")
        if isinstance(x, slice):
            if x.step not in (None, 1):
                raise FrontendError("slice steps are not supported in regions", help="use `a:b`")
            if x.start is not None:
                render(w, x.start)
            w.write(":")
            if x.stop is not None:
                render(w, x.stop)
        else:
            render(w, x)
    w.write("]")


class Region(Renderable):
    """``buf[0:32, i]``: a rectangular region (a tile-call operand)."""

    __slots__ = ("buf", "items")

    def __init__(self, buf: Buffer, items: Sequence, span=None):
        self.buf, self.items, self.span = buf, tuple(items), span

    def render(self, w: Writer) -> None:
        render(w, self.buf)
        _render_index(w, self.items)


class Raw(Renderable):
    """Text written as is (a dtype function such as ``T.float32`` used as a value)."""

    __slots__ = ("text",)

    def __init__(self, text: str, span=None):
        self.text, self.span = text, span

    def render(self, w: Writer) -> None:
        w.write(self.text)

    def __repr__(self):
        return self.text


def runtime(v) -> bool:
    """Whether ``v`` is a kernel value (known only when the kernel runs)."""
    return isinstance(v, Expr)


def set_span(v, span) -> None:
    """Gives a freshly built symbolic value the span of the node that built it."""
    if isinstance(v, Renderable) and getattr(v, "span", None) is None:
        try:
            v.span = span
        except AttributeError:
            pass
