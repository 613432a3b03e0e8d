"""``@T.prim_func``: a decorated Python function → a kernel (docs/python.md §2).

At decoration time, as the reference does, the function's source (with its file and line
numbers) and the values it can see — module globals shadowed by closure cells — are captured,
and the body is evaluated:

* every expression that does not depend on kernel-local values is evaluated by Python
  (closures, helper functions, ``getattr(Tx, scope).copy``, dict-held ops, ``**config``,
  ``*shape``, slices, f-strings, comprehensions, ``T.meta_var``);
* kernel-local values (scope ids, loop variables, bindings, buffers) are symbolic
  (:mod:`tirx.script.ir`): helpers run on them and build expressions;
* an ``if`` on a Python value selects a branch now; on a kernel value it is a kernel ``if``;
  ``range`` and ``T.serial``/``T.unroll``/``T.grid`` are kernel loops; a ``for`` over a Python
  sequence is unrolled now.

The result is a closure-free kernel script and a map from its bytes to the user's source; the
native module parses and checks it with the same front end as kernel files, so a kernel gives
the same IR, CUDA and diagnostics either way.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import linecache
import os
import sys
import threading
import traceback
from typing import Any, Dict, List, Optional, Tuple

from .. import _native
from .. import layout as _layout
from . import ir, namespace as ns

# CPython before 3.11.8 / 3.12.1 keeps the AST converters' recursion depth in state shared by
# threads (gh-106905): two threads parsing or compiling an AST at once can fail with
# "SystemError: AST constructor recursion depth mismatch". The autotuner builds its candidates
# in threads, so every conversion takes this lock.
_AST_LOCK = threading.Lock()


def _parse(text: str, **kwargs) -> ast.AST:
    with _AST_LOCK:
        return ast.parse(text, **kwargs)


def _compile_ast(node: ast.AST, file: str, mode: str):
    with _AST_LOCK:
        return compile(node, file, mode)

_HEADER_IMPORTS = (
    "from tvm.script import tirx as T\n"
    "from tvm.script.tirx import tile as Tx\n"
    "from tvm.tirx.layout import S, R, TileLayout, ComposeLayout, " + ", ".join(_layout.AXIS_NAMES) + "\n"
)

_TIRX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_state = threading.local()


def current() -> "Frontend":
    stack = getattr(_state, "stack", None)
    if not stack:
        raise ir.FrontendError(
            "tile primitives and kernel statements can only be used inside a `@T.prim_func` kernel"
        )
    return stack[-1]


# ----------------------------------------------------------------------------- source


# The evaluator method of each AST node type (`ev_<Type>`, None: Python evaluates it).
_EVALUATORS: Dict[type, Any] = {}


class Source:
    """The user's file: its text, its syntax tree and line starts (byte offsets), read and
    parsed once per file version and shared by every kernel built from it."""

    _cache: Dict[Tuple[str, int, int], "Source"] = {}

    @classmethod
    def of(cls, func) -> "Source":
        try:
            file = inspect.getsourcefile(func) or inspect.getfile(func)
        except TypeError as e:
            raise _native.TirxError(f"cannot read the source of `{getattr(func, '__qualname__', func)}`: {e}") from None
        try:
            st = os.stat(file)
            key = (file, st.st_mtime_ns, st.st_size)
        except OSError:  # a notebook cell: only linecache has it
            key = (file, 0, 0)
        src = cls._cache.get(key)
        if src is None:
            if key[1]:
                linecache.checkcache(file)
            lines = linecache.getlines(file)
            if not lines:
                raise _native.TirxError(
                    f"cannot read the source of `{getattr(func, '__qualname__', func)}` ({file})\n"
                    "help: define kernels in a file (or a notebook cell), not in a string passed to exec"
                )
            src = cls._cache[key] = cls(file, lines)
        return src

    def __init__(self, file: str, lines: List[str]):
        self.file = file
        self.text = "".join(lines)
        self.line_start = [0]
        for ln in lines:
            self.line_start.append(self.line_start[-1] + len(ln.encode("utf-8")))
        self.tree = _parse(self.text, filename=file)
        self._defs: Optional[Dict[Tuple[str, int], ast.FunctionDef]] = None
        # Spans by node id; the nodes live as long as `tree`, so ids are not reused.
        self._spans: Dict[int, Optional[Tuple[int, int]]] = {}

    def function(self, func) -> ast.FunctionDef:
        """The definition of ``func``: the one of its name starting at its code's first line
        (a decorated function's first line is its first decorator's)."""
        defs = self._defs
        if defs is None:  # built whole, then published: the autotuner's builds share a Source
            defs = {}
            for n in ast.walk(self.tree):
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    first = min([n.lineno] + [d.lineno for d in n.decorator_list])
                    defs[(n.name, first)] = n
            self._defs = defs
        node = defs.get((func.__name__, func.__code__.co_firstlineno))
        if node is None:
            raise _native.TirxError(f"cannot find the definition of `{func.__name__}` in {self.file}")
        return node

    def offset(self, lineno: int, col: int) -> int:
        """Byte offset in the file of (1-based line, byte column)."""
        i = max(0, min(lineno - 1, len(self.line_start) - 2))
        return self.line_start[i] + col

    def span(self, node) -> Optional[Tuple[int, int]]:
        # Sources are cached, and so are their trees: a node's span is computed once. (Only
        # nodes with a position are cached: the tree's own, alive as long as it is.)
        if node is None or not hasattr(node, "lineno"):
            return None
        sp = self._spans.get(id(node), _MISSING)
        if sp is _MISSING:
            sp = self._spans[id(node)] = self._span(node)
        return sp

    def _span(self, node) -> Tuple[int, int]:
        lo = self.offset(node.lineno, node.col_offset)
        end_col = getattr(node, "end_col_offset", None)
        if end_col is None:
            return (lo, lo)
        return (lo, max(lo, self.offset(node.end_lineno or node.lineno, end_col)))

    def line_span(self, file_line: int) -> Tuple[int, int]:
        """The stripped text of one line of the file (a statement inside a helper)."""
        i = max(0, min(file_line - 1, len(self.line_start) - 2))
        raw = self.text.encode("utf-8")[self.line_start[i] : self.line_start[i + 1]]
        lead = len(raw) - len(raw.lstrip())
        return (self.line_start[i] + lead, self.line_start[i] + len(raw.rstrip()))


# ----------------------------------------------------------------------------- scopes


class _Scope:
    __slots__ = ("vars", "parent")

    def __init__(self, parent: Optional["_Scope"]):
        self.vars: Dict[str, Any] = {}
        self.parent = parent

    def lookup(self, name: str):
        s = self
        while s is not None:
            if name in s.vars:
                return True, s.vars[name]
            s = s.parent
        return False, None

    def owner(self, name: str) -> Optional["_Scope"]:
        s = self
        while s is not None:
            if name in s.vars:
                return s
            s = s.parent
        return None


_MISSING = object()


def _mutable_names(fn: ast.FunctionDef) -> set:
    """Names assigned at two or more places (or augmented): the reference's mutable scalars
    (docs/tile-primitives.md §1.7). The script front end counts the same way."""
    count: Dict[str, int] = {}

    def targets(t, n):
        if isinstance(t, ast.Name):
            count[t.id] = count.get(t.id, 0) + n
        elif isinstance(t, (ast.Tuple, ast.List)):
            for e in t.elts:
                targets(e, n)

    def walk(stmts):
        for s in stmts:
            if isinstance(s, ast.Assign):
                for t in s.targets:
                    targets(t, 1)
            elif isinstance(s, ast.AnnAssign):
                targets(s.target, 1)
            elif isinstance(s, ast.AugAssign):
                targets(s.target, 2)
            elif isinstance(s, (ast.For, ast.While)):
                walk(s.body)
                walk(s.orelse)
            elif isinstance(s, ast.If):
                walk(s.body)
                walk(s.orelse)

    walk(fn.body)
    return {n for n, c in count.items() if c >= 2}


_BINOP = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.Pow: lambda a, b: a**b,
    ast.LShift: lambda a, b: a << b,
    ast.RShift: lambda a, b: a >> b,
    ast.BitOr: lambda a, b: a | b,
    ast.BitXor: lambda a, b: a ^ b,
    ast.BitAnd: lambda a, b: a & b,
    ast.MatMult: lambda a, b: a @ b,
}
_AUG_TEXT = {
    ast.Add: "+=",
    ast.Sub: "-=",
    ast.Mult: "*=",
    ast.Div: "/=",
    ast.FloorDiv: "//=",
    ast.Mod: "%=",
    ast.LShift: "<<=",
    ast.RShift: ">>=",
    ast.BitOr: "|=",
    ast.BitXor: "^=",
    ast.BitAnd: "&=",
}
_CMP = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
}


# ----------------------------------------------------------------------------- the front end


class Frontend:
    """Evaluates one decorated function into script text and source marks."""

    def __init__(self, func, src: Source, fn: ast.FunctionDef, env: Dict[str, Any]):
        self.func, self.src, self.fn, self.env = func, src, fn, env
        self.w = ir.Writer()
        self.indent = 1
        self.scope = _Scope(None)
        self.mutable = _mutable_names(fn)
        # The names the script binds with `=` (`_let_name`): a name bound twice there is a
        # mutable scalar, so a let bound again (a macro expanded twice, the body of a loop over a
        # Python sequence) takes a fresh one.
        self.emitted: set = set()
        self.mutable_as: Dict[str, str] = {}  # the script's names of this function's mutable scalars
        self.scalars: set = set()  # the script's names of every mutable scalar
        self.node = fn  # the node being evaluated (statements emitted by helpers point here)
        self.temp = 0
        self._prelude: List[Tuple[ir.Buffer, Any]] = []
        # An `MBarrier` was built: the script imports it (docs/tile-primitives.md §8).
        self.uses_pipeline = False

    # ------------------------------------------------------------------ errors

    def error(self, message: str, node=None, help: Optional[str] = None) -> ir.FrontendError:
        return ir.FrontendError(message, node if node is not None else self.node, help)

    # ------------------------------------------------------------------ emission

    def _line(self, body, span) -> None:
        """Writes one statement line; ``body(writer)`` writes its text. Unnamed views it
        uses are bound to temporaries on lines before it."""
        scratch = ir.Writer()
        scratch.hoisted = self.w.hoisted
        scratch.first_use = self.w.first_use
        scratch.cur_span = span
        pre: List[Tuple[ir.Buffer, Any]] = []
        self._prelude = pre
        body(scratch)
        for buf, sp in pre:
            self._emit_binding(buf.name, buf.text, sp)
        self.w.write("    " * self.indent)
        base = self.w.pos
        # The line's text in one piece: `scratch.pos` already counts its bytes.
        self.w.parts.append("".join(scratch.parts))
        self.w.pos += scratch.pos
        for lo, hi, s in scratch.marks:
            self.w.marks.append((base + lo, base + hi, s))
        self.w.mark(base, span)
        self.w.write("\n")

    def _let_name(self, name: str) -> str:
        """The script's name for a binding of ``name`` in the function being evaluated (the
        script makes a name it binds twice a mutable scalar, the reference's rule): a name the
        function assigns twice is its mutable scalar, one script name for the whole expansion;
        any other binding is a let. Each takes ``name`` where the kernel has not bound it yet, else
        ``name_2``, ``name_3``, ...: a macro expanded twice, the copies of a loop over a Python
        sequence, and a macro binding a name its caller binds too each get their own, so a let
        stays a let (one value, uniform where its value is) and no scalar is another's. A name
        that resolves to a mutable scalar (a caller's, seen by a macro with ``hygienic=False``)
        is that scalar: the assignment updates it."""
        if name in self.mutable and name in self.mutable_as:
            return self.mutable_as[name]
        found, cur = self.scope.lookup(name)
        if found and isinstance(cur, ir.Var) and cur.name in self.scalars:
            return cur.name
        fresh, n = name, 1
        while fresh in self.emitted or (fresh != name and fresh in self.mutable):
            n += 1
            fresh = f"{name}_{n}"
        self.emitted.add(fresh)
        if name in self.mutable:
            self.mutable_as[name] = fresh
            self.scalars.add(fresh)
        return fresh

    def _emit_binding(self, name: str, value, span) -> None:
        self.emitted.add(name)  # (a let bound later takes another name)

        def body(w):
            w.write(f"{name} = ")
            ir.render(w, value)

        self._line(body, span)

    def emit_call(self, call: ir.Call) -> None:
        """A statement call (``Tx.*``, ``T.cuda.cta_sync``, ...), where it is made."""
        span = self._call_span()
        ir.set_span(call, span)
        self._line(lambda w: ir.render(w, call), span)

    def _call_span(self):
        """The span of the statement being built: the kernel's own node when the evaluator
        made the call, else the line of the helper function (in the user's file) that did."""
        f = sys._getframe(2)  # past emit_call
        while f is not None:
            fn = f.f_code.co_filename
            if fn == __file__:
                break
            if not os.path.abspath(fn).startswith(_TIRX_DIR):
                if fn == self.src.file:
                    return self.src.line_span(f.f_lineno)
                break
            f = f.f_back
        return self.src.span(self.node)

    def name_view(self, buf: ir.Buffer) -> None:
        """Gives an unnamed view a temporary name, bound before the current statement."""
        self.temp += 1
        buf.name = f"__tirx_view_{self.temp}"
        self._prelude.append((buf, buf.span))

    # ------------------------------------------------------------------ names

    def lookup(self, name: str, node):
        found, v = self.scope.lookup(name)
        if found:
            return v
        if name in self.env:
            return self.env[name]
        if hasattr(builtins, name):
            return getattr(builtins, name)
        import difflib

        cands = set(self.env) | set(self._visible())
        near = difflib.get_close_matches(name, cands, n=1)
        raise self.error(
            f"unknown name `{name}`", node, help=f"did you mean `{near[0]}`?" if near else "define it before the kernel"
        )

    def _visible(self):
        s, out = self.scope, {}
        while s is not None:
            for k, v in s.vars.items():
                out.setdefault(k, v)
            s = s.parent
        return out

    def bind(self, name: str, value) -> None:
        self.scope.vars[name] = value

    # ------------------------------------------------------------------ expressions

    def eval(self, node):
        prev, self.node = self.node, node
        try:
            m = _EVALUATORS.get(type(node), _MISSING)
            if m is _MISSING:
                m = _EVALUATORS[type(node)] = getattr(type(self), "ev_" + type(node).__name__, None)
            v = m(self, node) if m is not None else self.py_eval(node)
        except ir.FrontendError as e:
            if e.node is None:
                e.node = node
            raise
        except _native.TirxError:
            raise
        except Exception as e:  # a Python error in the user's code, at this node
            raise self.python_error(e, node) from None
        finally:
            self.node = prev
        if isinstance(v, ir.Renderable) and getattr(v, "span", 0) is None:
            ir.set_span(v, self.src.span(node))
        # A NumPy scalar computes as the Python number it holds (in shapes, layouts, constants).
        return ir.py_value(v)

    def python_error(self, e: Exception, node) -> ir.FrontendError:
        tb = traceback.extract_tb(e.__traceback__)
        where = [f for f in tb if not os.path.abspath(f.filename).startswith(_TIRX_DIR)]
        note = ""
        if where:
            f = where[-1]
            note = f" (raised at {f.filename}:{f.lineno}: `{(f.line or '').strip()}`)"
        return self.error(f"{type(e).__name__}: {e}{note}", node)

    def ev_Constant(self, node):
        return node.value

    def ev_Name(self, node):
        return self.lookup(node.id, node)

    def ev_Attribute(self, node):
        base = self.eval(node.value)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            what = base.__name__ if hasattr(base, "__name__") else type(base).__name__
            raise self.error(f"`{what}` has no attribute `{node.attr}`", node) from None

    def ev_Subscript(self, node):
        base = self.eval(node.value)
        key = self.eval(node.slice)
        return base[key]

    def ev_Slice(self, node):
        lo = self.eval(node.lower) if node.lower is not None else None
        hi = self.eval(node.upper) if node.upper is not None else None
        step = self.eval(node.step) if node.step is not None else None
        return slice(lo, hi, step)

    def _items(self, elts) -> list:
        out = []
        for e in elts:
            if isinstance(e, ast.Starred):
                v = self.eval(e.value)
                if ir.runtime(v):
                    raise self.error("a kernel value cannot be unpacked with `*`", e)
                out.extend(v)
            else:
                out.append(self.eval(e))
        return out

    def ev_Tuple(self, node):
        return tuple(self._items(node.elts))

    def ev_List(self, node):
        return self._items(node.elts)

    def ev_Set(self, node):
        return set(self._items(node.elts))

    def ev_Dict(self, node):
        out = {}
        for k, v in zip(node.keys, node.values):
            if k is None:
                out.update(self.eval(v))
            else:
                out[self.eval(k)] = self.eval(v)
        return out

    def ev_Call(self, node):
        f = self.eval(node.func)
        args = self._items(node.args)
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                splat = self.eval(kw.value)
                if not isinstance(splat, dict):
                    raise self.error("`**` needs a dict", kw.value)
                kwargs.update(splat)
            else:
                kwargs[kw.arg] = self.eval(kw.value)
        return f(*args, **kwargs)

    def ev_BinOp(self, node):
        a, b = self.eval(node.left), self.eval(node.right)
        return _BINOP[type(node.op)](a, b)

    def ev_UnaryOp(self, node):
        v = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return ir.Unary("not ", v) if ir.runtime(v) else (not v)
        if isinstance(node.op, ast.USub):
            return -v
        if isinstance(node.op, ast.UAdd):
            return +v
        return ~v

    def ev_Compare(self, node):
        left = self.eval(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            r = _CMP[type(op)](left, right)
            if result is None:
                result = r
            elif ir.runtime(result) or ir.runtime(r):
                result = ir.BinOp("and", result, r)
            elif not result:
                return False
            else:
                result = r
            left = right
        return result

    def ev_BoolOp(self, node):
        is_and = isinstance(node.op, ast.And)
        acc = self.eval(node.values[0])
        for n in node.values[1:]:
            if not ir.runtime(acc):
                if (not acc) if is_and else acc:
                    return acc
                acc = self.eval(n)
                continue
            v = self.eval(n)
            if not ir.runtime(v):
                if is_and and not v:
                    return False
                if not is_and and v:
                    return True
                continue
            acc = ir.BinOp("and" if is_and else "or", acc, v)
        return acc

    def ev_IfExp(self, node):
        c = self.eval(node.test)
        if ir.runtime(c):
            return ir.Call("T.if_then_else", (c, self.eval(node.body), self.eval(node.orelse)), {})
        return self.eval(node.body) if c else self.eval(node.orelse)

    def ev_Starred(self, node):
        raise self.error("`*` unpacking is only valid in calls, tuples and lists", node)

    def py_eval(self, node):
        """Anything else (comprehensions, lambdas, f-strings): Python evaluates it with the
        names it uses resolved as above."""
        names = {}
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in names:
                found, v = self.scope.lookup(n.id)
                if found:
                    names[n.id] = v
                elif n.id in self.env:
                    names[n.id] = self.env[n.id]
        code = _compile_ast(ast.Expression(body=node), self.src.file, "eval")
        glb = dict(self.env)
        glb.update(names)
        return eval(code, glb)

    # ------------------------------------------------------------------ statements

    def block(self, stmts) -> int:
        """Visits statements; returns how many bytes they wrote."""
        start = self.w.pos
        for s in stmts:
            prev, self.node = self.node, s
            try:
                m = getattr(self, "st_" + type(s).__name__, None)
                if m is None:
                    raise self.error(f"`{type(s).__name__}` statements are not supported in kernels", s)
                m(s)
            except ir.FrontendError as e:
                if e.node is None:
                    e.node = s
                raise
            finally:
                self.node = prev
        return self.w.pos - start

    def nested(self, stmts, new_scope: bool = True) -> None:
        """A kernel block (loop or branch body): one level deeper; `pass` if it wrote nothing."""
        self.indent += 1
        if new_scope:
            self.scope = _Scope(self.scope)
        try:
            if self.block(stmts) == 0:
                self._line(lambda w: w.write("pass"), None)
        finally:
            if new_scope:
                self.scope = self.scope.parent
            self.indent -= 1

    def st_Pass(self, s):
        pass

    def st_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # a docstring
        v = self.eval(s.value)
        if isinstance(v, ns.ScopeIdDecl):
            self._line(lambda w: ir.render(w, v), self.src.span(s))
        elif isinstance(v, ir.Call):
            self._line(lambda w: ir.render(w, v), self.src.span(s))
        elif isinstance(v, ir.Buffer) and v.name is None:
            raise self.error("bind a buffer to a name: `A = T.alloc_buffer(...)`", s)
        elif isinstance(v, ns.KernelObject) and v.name is None:
            raise self.error(f"bind `{v.text.path}(...)` to a name: `x = {v.text.path}(...)`", s)

    def st_Assign(self, s):
        v = self.eval(s.value)
        for t in s.targets:
            self.assign(t, v, s)

    def assign(self, t, v, s) -> None:
        span = self.src.span(s)
        if isinstance(t, ast.Subscript):
            base = self.eval(t.value)
            key = self.eval(t.slice)
            if isinstance(base, ir.Buffer):
                target = base[key]
                ir.set_span(target, self.src.span(t))
                self._line(lambda w: (ir.render(w, target), w.write(" = "), ir.render(w, v)), span)
            else:
                base[key] = v
            return
        if isinstance(t, ast.Attribute):
            setattr(self.eval(t.value), t.attr, v)
            return
        if isinstance(t, (ast.Tuple, ast.List)):
            if isinstance(v, ns.ScopeIdDecl):
                names = [e.id for e in t.elts if isinstance(e, ast.Name)]
                if len(names) != len(t.elts):
                    raise self.error("scope ids bind to plain names", t)
                self._line(lambda w: (w.write(", ".join(names) + " = "), ir.render(w, v)), span)
                self.emitted.update(names)
                for n, e in zip(names, t.elts):
                    self.bind(n, ir.Var(n, self.src.span(e)))
                return
            if ir.runtime(v) or isinstance(v, ir.Renderable):
                raise self.error("cannot unpack a kernel value", t)
            items = list(v)
            star = [i for i, e in enumerate(t.elts) if isinstance(e, ast.Starred)]
            if star:
                i = star[0]
                after = len(t.elts) - i - 1
                items = items[:i] + [items[i : len(items) - after]] + items[len(items) - after :]
            if len(items) != len(t.elts):
                raise self.error(f"cannot unpack {len(items)} values into {len(t.elts)} names", t)
            for e, x in zip(t.elts, items):
                self.assign(e.value if isinstance(e, ast.Starred) else e, x, s)
            return
        if not isinstance(t, ast.Name):
            raise self.error("cannot assign to this", t)
        name = t.id
        if isinstance(v, ns.MetaVar):
            self.bind(name, v.value)
        elif isinstance(v, ns.ScopeIdDecl):
            self._line(lambda w: (w.write(f"{name} = "), ir.render(w, v)), span)
            self.emitted.add(name)
            self.bind(name, ir.Var(name, self.src.span(t)))
        elif isinstance(v, ir.Buffer) and v.name is None:
            v.name = name
            self._emit_binding(name, v.text, span)
            self.bind(name, v)
        elif isinstance(v, ns.KernelObject) and v.name is None:
            v.name = name
            self._emit_binding(name, v.text, span)
            self.bind(name, v)
        elif ir.runtime(v) or (
            name in self.mutable and isinstance(v, (int, float, bool)) and not isinstance(v, ir.Renderable)
        ):
            let = self._let_name(name)
            self._emit_binding(let, v, span)
            self.bind(name, ir.Var(let, self.src.span(t)))
        else:
            self.bind(name, v)

    def st_AnnAssign(self, s):
        if not isinstance(s.target, ast.Name):
            raise self.error("annotated assignments bind a name", s.target)
        if s.value is None:
            raise self.error("a declaration needs a value", s, help="write `x: T.let = expr`")
        ann = self._annotation(s.annotation)
        v = self.eval(s.value)
        name = s.target.id
        if ann is ns.LET:
            if ir.runtime(v):
                let = self._let_name(name)
                self._line(lambda w: (w.write(f"{let}: T.let = "), ir.render(w, v)), self.src.span(s))
                self.bind(name, ir.Var(let, self.src.span(s.target)))
            else:
                self.bind(name, v.value if isinstance(v, ns.MetaVar) else v)
        elif isinstance(ann, ns.DType):
            let = self._let_name(name)
            self._line(lambda w: (w.write(f"{let}: T.{ann.name} = "), ir.render(w, v)), self.src.span(s))
            self.bind(name, ir.Var(let, self.src.span(s.target)))
        else:
            raise self.error(
                "binding annotations are `T.let` or a dtype like `T.int32`", s.annotation
            )

    def st_AugAssign(self, s):
        v = self.eval(s.value)
        op = _AUG_TEXT.get(type(s.op))
        if isinstance(s.target, ast.Name):
            cur = self.lookup(s.target.id, s.target)
            if ir.runtime(cur):
                name = cur.name if isinstance(cur, ir.Var) else s.target.id  # (its script name: `_let_name`)
                self._line(lambda w: (w.write(f"{name} {op} "), ir.render(w, v)), self.src.span(s))
            else:
                self.bind(s.target.id, _BINOP[type(s.op)](cur, v))
            return
        if isinstance(s.target, ast.Subscript):
            base = self.eval(s.target.value)
            key = self.eval(s.target.slice)
            if isinstance(base, ir.Buffer):
                target = base[key]
                self._line(lambda w: (ir.render(w, target), w.write(f" {op} "), ir.render(w, v)), self.src.span(s))
            else:
                base[key] = _BINOP[type(s.op)](base[key], v)
            return
        raise self.error("cannot assign to this", s.target)

    def st_For(self, s):
        if s.orelse:
            raise self.error("`for ... else` is not supported in kernels", s)
        it = self._loop_iter(s.iter)
        if isinstance(it, ns.ForFrame):
            self._kernel_loop(s, it)
            return
        if ir.runtime(it) or isinstance(it, ir.Renderable):
            raise self.error("kernel loops iterate `range(...)`, `T.serial`, `T.unroll` or `T.grid`", s.iter)
        # A Python sequence: unrolled now (the body sees each item as a compile-time value).
        for item in it:
            self.assign(s.target, item, s)
            self.block(s.body)

    def _loop_iter(self, node):
        """``range(...)`` in a ``for`` is a kernel loop (elsewhere it is Python's range)."""
        if isinstance(node, ast.Call) and not node.keywords:
            f = self.eval(node.func)
            if f is builtins.range:
                args = self._items(node.args)
                if not 1 <= len(args) <= 3:
                    raise self.error("`range` takes 1 to 3 arguments", node)
                if len(args) == 3 and args[2] != 1:
                    raise self.error("kernel loops have step 1", node.args[2], help="loop over `range(n)` and scale the variable")
                return ns.ForFrame("range", args[:2])
        return self.eval(node)

    def _kernel_loop(self, s, frame: ns.ForFrame) -> None:
        if isinstance(s.target, ast.Name):
            names = [s.target.id]
        elif isinstance(s.target, (ast.Tuple, ast.List)) and all(isinstance(e, ast.Name) for e in s.target.elts):
            names = [e.id for e in s.target.elts]
        else:
            raise self.error("a kernel loop binds names", s.target)
        if len(names) != frame.nvars:
            raise self.error(f"`{frame.path}` gives {frame.nvars} loop variable(s), not {len(names)}", s.target)
        call = frame.call()
        self._line(lambda w: (w.write(f"for {', '.join(names)} in "), ir.render(w, call), w.write(":")), self.src.span(s))
        self.indent += 1
        self.scope = _Scope(self.scope)
        try:
            for n, e in zip(names, s.target.elts if not isinstance(s.target, ast.Name) else [s.target]):
                self.bind(n, ir.Var(n, self.src.span(e)))
            if self.block(s.body) == 0:
                self._line(lambda w: w.write("pass"), None)
        finally:
            self.scope = self.scope.parent
            self.indent -= 1

    def st_If(self, s):
        c = self.eval(s.test)
        if not ir.runtime(c):
            # A compile-time condition selects its branch now; names it binds stay visible.
            self.block(s.body if c else s.orelse)
            return
        self._line(lambda w: (w.write("if "), ir.render(w, c), w.write(":")), self.src.span(s.test))
        self.nested(s.body)
        if s.orelse:
            self._line(lambda w: w.write("else:"), None)
            self.nested(s.orelse)

    def st_While(self, s):
        if s.orelse:
            raise self.error("`while ... else` is not supported in kernels", s)
        c = self.eval(s.test)
        if not ir.runtime(c):
            raise self.error("a `while` loop's condition is a compile-time value", s.test,
                             help="loop on a kernel value the body changes (a mutable scalar, a buffer element), or use `for i in range(n):`")
        self._line(lambda w: (w.write("while "), ir.render(w, c), w.write(":")), self.src.span(s.test))
        self.nested(s.body)

    def st_Assert(self, s):
        c = self.eval(s.test)
        if ir.runtime(c):
            raise self.error("`assert` on a kernel value is not supported", s.test,
                             help="assert compile-time facts only")
        if not c:
            msg = self.eval(s.msg) if s.msg is not None else "assertion failed"
            raise self.error(f"AssertionError: {msg}", s.test)

    def st_Raise(self, s):
        e = self.eval(s.exc) if s.exc is not None else RuntimeError("raise")
        raise self.error(f"{type(e).__name__ if isinstance(e, BaseException) else 'error'}: {e}", s)

    def st_Return(self, s):
        if s.value is not None and not (isinstance(s.value, ast.Constant) and s.value.value is None):
            raise self.error("a kernel returns nothing", s)

    def inline(self, m: "Macro", args, kwargs):
        """A ``@T.macro`` call: its body evaluated here, as if written at the call — its kernel
        loops, ``if``s on kernel values and declarations become the kernel's — with its
        parameters bound to the arguments and its own globals; a final ``return x`` is the
        call's value."""
        src = Source.of(m.func)
        fn = src.function(m.func)
        try:
            bound = inspect.signature(m.func).bind(*args, **kwargs)
        except TypeError as e:
            raise self.error(f"macro `{m.func.__name__}`: {e}") from None
        bound.apply_defaults()
        call = self.node
        body, ret = fn.body, None
        if body and isinstance(body[-1], ast.Return):
            body, ret = body[:-1], body[-1].value
        saved = (self.env, self.scope, self.mutable, self.mutable_as, self.src)
        self.env = _capture(m.func)
        self.scope = _Scope(self.scope if m.sees_caller else None)
        self.mutable, self.mutable_as = _mutable_names(fn), {}
        foreign = src is not saved[4]
        if foreign:  # a macro of another file: its statements are marked at the call
            self.src = _AtCall(saved[4], saved[4].span(call))
        try:
            for name, v in bound.arguments.items():
                self.bind(name, v)
            self.block(body)
            return None if ret is None else self.eval(ret)
        except ir.FrontendError as e:
            if foreign:
                where = f"{src.file}:{getattr(e.node, 'lineno', fn.lineno)}"
                raise ir.FrontendError(f"in macro `{m.func.__name__}` ({where}): {e.message}", call, e.help) from None
            raise
        finally:
            self.env, self.scope, self.mutable, self.mutable_as, self.src = saved

    def st_FunctionDef(self, s):
        # A helper defined inside the kernel: a Python function over the names visible here.
        glb = dict(self.env)
        glb.update(self._visible())
        code = _compile_ast(ast.Module(body=[s], type_ignores=[]), self.src.file, "exec")
        exec(code, glb)
        self.bind(s.name, glb[s.name])

    def st_Import(self, s):
        glb = dict(self.env)
        exec(_compile_ast(ast.Module(body=[s], type_ignores=[]), self.src.file, "exec"), glb)
        for a in s.names:
            n = a.asname or a.name.split(".")[0]
            self.bind(n, glb[n])

    st_ImportFrom = st_Import

    def st_Global(self, s):
        pass

    st_Nonlocal = st_Global

    def _annotation(self, node):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node = _parse(node.value, mode="eval").body
            node = ast.fix_missing_locations(node)
        return self.eval(node)

    # ------------------------------------------------------------------ the kernel

    def build(self) -> Tuple[str, List[Tuple[int, int, Tuple[int, int]]]]:
        fn = self.fn
        a = fn.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or getattr(a, "posonlyargs", []):
            raise self.error("kernel parameters are plain annotated names (no defaults, *args or **kwargs)", fn)
        params = []
        # Scalar parameters first, so that buffer annotations may use them in any order
        # (`A: T.Buffer((n, 128), "float32"), n: T.int32`), as in kernel files.
        scalars = {}
        for arg in a.args:
            node = arg.annotation
            if isinstance(node, ast.Constant) and isinstance(node.value, str):  # `from __future__ import annotations`
                try:
                    node = _parse(node.value, mode="eval").body
                except SyntaxError:
                    node = None
            if isinstance(node, (ast.Attribute, ast.Name)):
                ann = self._annotation(arg.annotation)
                if isinstance(ann, ns.DType):
                    scalars[arg.arg] = ann
                    self.bind(arg.arg, ir.Var(arg.arg, self.src.span(arg)))
        for arg in a.args:
            if arg.annotation is None:
                raise self.error(f"parameter `{arg.arg}` needs an annotation (`T.handle`, `T.int32`, `T.Buffer(...)`)", arg)
            ann = scalars.get(arg.arg) or self._annotation(arg.annotation)
            sp = self.src.span(arg)
            if ann is ns.HANDLE:
                params.append((f"{arg.arg}: T.handle", sp))
                self.bind(arg.arg, ir.Handle(arg.arg, sp))
            elif isinstance(ann, ns.DType):
                params.append((f"{arg.arg}: T.{ann.name}", sp))
                self.bind(arg.arg, ir.Var(arg.arg, sp))
            elif isinstance(ann, ir.Buffer) and ann.name is None:
                ann.name = arg.arg
                params.append((ann.text, sp, arg.arg))
                self.bind(arg.arg, ann)
            else:
                raise self.error(f"parameter `{arg.arg}`: `{ast.unparse(arg.annotation)}` is not a kernel parameter type", arg.annotation)
        body_start = self.w.pos
        self.block(fn.body)
        if self.w.pos == body_start:
            self._line(lambda w: w.write("pass"), None)
        body = self.w
        # The signature first: layouts in its annotations are hoisted with the body's.
        sig = ir.Writer()
        sig.hoisted, sig.first_use = body.hoisted, body.first_use
        for i, p in enumerate(params):
            if i:
                sig.write(", ")
            plo = sig.pos
            if len(p) == 3:
                sig.write(f"{p[2]}: ")
                ir.render(sig, p[0])
            else:
                sig.write(p[0])
            sig.mark(plo, p[1])
        # Header: imports, hoisted layouts, the signature.
        head = ir.Writer()
        head.write(_HEADER_IMPORTS)
        if self.uses_pipeline:
            head.write("from tvm.tirx.lang.pipeline import MBarrier\n")
        for text, name in body.hoisted.items():
            lo = head.pos
            head.write(f"{name} = {text}\n")
            head.mark(lo, body.first_use.get(name))
        lo = head.pos
        head.write("@T.prim_func\n")
        head.mark(lo, self.src.span(fn.decorator_list[0]) if fn.decorator_list else None)
        lo = head.pos
        head.write(f"def {fn.name}(")
        at = head.pos
        head.write(sig.text())
        head.marks += [(lo + at, hi + at, sp) for lo, hi, sp in sig.marks]
        head.write("):\n")
        head.mark(lo, self.src.span(fn))
        shift = head.pos
        text = head.text() + body.text()
        marks = head.marks + [(lo + shift, hi + shift, sp) for lo, hi, sp in body.marks]
        return text, marks


class _AtCall:
    """The caller's source, every node of a foreign macro placed at the call."""

    def __init__(self, src: Source, at):
        self.file, self.text, self._at = src.file, src.text, at

    def span(self, node):
        return self._at

    def line_span(self, file_line: int):
        return self._at


class Macro:
    """``@T.macro``: a helper whose body is kernel code, inlined at each call inside a kernel
    (the reference's macros): it may hold kernel loops, ``if``s on kernel values, buffers,
    pools and tile calls. Its names are its parameters and its module's globals (with
    ``hygienic=False``, also the caller's names at the call)."""

    def __init__(self, func, hygienic: bool = True):
        functools.update_wrapper(self, func)
        self.func, self.sees_caller = func, not hygienic

    def __call__(self, *args, **kwargs):
        return current().inline(self, args, kwargs)

    def __repr__(self):
        return f"<tirx macro {self.func.__qualname__}>"


def macro(func=None, *, hygienic: bool = True):
    """``@T.macro`` / ``@T.macro(hygienic=False)`` (see :class:`Macro`)."""
    if func is None:
        return lambda f: Macro(f, hygienic)
    return Macro(func, hygienic)


def _capture(func) -> Dict[str, Any]:
    """``{**func.__globals__, **closure cells}`` at decoration time (empty cells skipped)."""
    env = dict(func.__globals__)
    if func.__closure__:
        for name, cell in zip(func.__code__.co_freevars, func.__closure__):
            try:
                env[name] = cell.cell_contents
            except ValueError:
                pass
    return env


def _annotation_locals(func, fn: ast.FunctionDef, env: Dict[str, Any]) -> None:
    """Names the parameter annotations use that are neither globals nor closure cells — an
    annotation is evaluated where the function is defined, so its names need not be free
    variables of the body — from the locals of the enclosing functions' frames (the
    reference's ``resolve_closure_vars``). Called at decoration time, while they run."""
    args = fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs
    names = {
        n.id
        for a in args
        if a.annotation is not None
        for n in ast.walk(a.annotation)
        if isinstance(n, ast.Name) and n.id not in env and not hasattr(builtins, n.id)
    }
    if not names:
        return
    scopes = {p for p in func.__qualname__.split(".") if p != "<locals>"}
    f = sys._getframe(1)
    while f is not None and names:
        if f.f_code.co_name in scopes:
            for n in [n for n in names if n in f.f_locals]:
                env[n] = f.f_locals[n]
                names.discard(n)
        f = f.f_back


def build_script(func) -> Tuple[str, List[Tuple[int, int, int, int, bool]], Source]:
    """The kernel script of ``func`` and its source map entries."""
    src = Source.of(func)
    fn = src.function(func)
    env = _capture(func)
    _annotation_locals(func, fn, env)
    fe = Frontend(func, src, fn, env)
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = []
    stack.append(fe)
    prev_hook = getattr(ir.NAMING, "view", None)
    ir.NAMING.view = fe.name_view
    try:
        text, marks = fe.build()
    except ir.FrontendError as e:
        raise _native.TirxError(_render_error(src, e)) from None
    finally:
        ir.NAMING.view = prev_hook
        stack.pop()
    file_bytes = src.text.encode("utf-8")
    text_bytes = text.encode("utf-8")
    entries = []
    for lo, hi, sp in marks:
        if sp is None:
            continue
        olo, ohi = sp
        exact = text_bytes[lo:hi] == file_bytes[olo:ohi]
        entries.append((lo, hi, olo, ohi, exact))
    return text, entries, src


def _render_error(src: Source, e: ir.FrontendError) -> str:
    span = src.span(e.node) if hasattr(e.node, "lineno") else (e.node if isinstance(e.node, tuple) else None)
    return _native.render_error(src.file, src.text, e.message, span, e.help)


class PrimFunc:
    """A kernel built from a decorated Python function: its script (``.source``), the checked
    IR, and a cache of its compilations per target (``tirx.compile``)."""

    def __init__(self, func, text: str, entries, src: Source):
        self.__name__ = func.__name__
        self.__qualname__ = getattr(func, "__qualname__", func.__name__)
        self.__doc__ = func.__doc__
        self.__wrapped__ = func
        self._build(text, entries, src.file, src.text, stacklevel=4)

    def _build(self, text: str, entries, file: str, file_text: str, stacklevel: int) -> None:
        """Parses and checks ``text`` (mapped into ``file_text`` by ``entries``); its warnings
        are reported ``stacklevel`` frames up (where the kernel is defined)."""
        self.source = text
        self.file = file
        self._parsed = _native.parse(text, file, file_text, entries)
        for w in self._parsed.warnings:
            import warnings

            from .. import TirxWarning

            warnings.warn(w, TirxWarning, stacklevel=stacklevel)
        self._compiled: Dict[str, Any] = {}

    @classmethod
    def from_script(cls, text: str, file: str = "<script>") -> "PrimFunc":
        """A kernel from script text, what the CLI reads from a file (`@T.prim_func def ...`).
        The imports of `T` and `Tx` may be left out, as the reference's `from_source` allows;
        diagnostics point into ``text`` as given."""
        prelude = ""
        if "import tirx as T" not in text:
            prelude += "from tvm.script import tirx as T\n"
        if "import tile as Tx" not in text:
            prelude += "from tvm.script.tirx import tile as Tx\n"
        script = prelude + text
        # The prelude maps to the start of `text`; the rest to itself, shifted.
        n, m = len(prelude.encode()), len(text.encode())
        entries = [(0, n, 0, 0, False), (n, n + m, 0, m, True)] if n else [(0, m, 0, m, True)]
        self = cls.__new__(cls)
        self._build(script, entries, file, text, stacklevel=3)
        self.__name__ = self.__qualname__ = self._parsed.name
        self.__doc__ = None
        self.__wrapped__ = None
        return self

    @property
    def name(self) -> str:
        return self._parsed.name

    def script(self) -> str:
        """The kernel in canonical script form (what `tirx print` shows for a file)."""
        return self._parsed.canonical()

    def same_ir(self, other) -> bool:
        other = other._parsed if isinstance(other, PrimFunc) else other
        return self._parsed.same_ir(other)

    def __call__(self, *args, **kwargs):
        from ..runtime import compile as _compile

        return _compile(self)(*args, **kwargs)

    def __repr__(self):
        return f"<tirx.PrimFunc {self.name} from {self.file}>"


# tirx.compat sets this: a module-level kernel that fails to build must not stop the
# reference's test files from importing, and a kernel written against the reference's `tvm`
# (the shim's) reports its build error where it is used (`tvm.compile`), as the reference
# reports a tile op's checks when it lowers the function.
DEFER_ERRORS = False


def _decorated_at_module_level() -> bool:
    f = sys._getframe(1)
    while f is not None and f.f_code.co_filename == __file__:
        f = f.f_back
    return f is not None and f.f_code.co_name == "<module>"


class FailedPrimFunc:
    """A kernel whose build failed, with the error raised when it is used."""

    def __init__(self, func, error: Exception):
        self.__name__ = func.__name__
        self.__wrapped__ = func
        self.error = error

    def _raise(self, *a, **k):
        raise self.error

    __call__ = script = same_ir = _raise

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise self.error


def prim_func(func=None, *, private: bool = False, check_well_formed: bool = True, s_tir: bool = False, **_):
    """Decorator: builds the kernel now (the reference parses at decoration time too)."""

    def deco(f):
        try:
            text, entries, src = build_script(f)
            return PrimFunc(f, text, entries, src)
        except _native.TirxError as e:
            tvm = getattr(f, "__globals__", {}).get("tvm")
            if DEFER_ERRORS and (_decorated_at_module_level() or getattr(tvm, "__tirx_compat__", False)):
                return FailedPrimFunc(f, e)
            raise

    if func is None:
        return deco
    return deco(func)
