"""The reference's dispatcher entry points, backed by tirx's dispatcher (docs/python.md §6.2).

The reference's tests lower one tile call directly: they declare buffers
(``tvm.tirx.decl_buffer``), wrap regions of them in a ``CopyAsync`` op with its config, and call
a variant's ``copy_*_impl(op, DispatchContext(target, ExecScope("thread"), {}, {}))``, which
returns the call's lowered statements or raises ``DispatchFail``.

Here a ``copy_*_impl`` builds a kernel holding that one call (the buffers as parameters or
dynamic shared memory with their layouts, an mbarrier for ``mbar=``, a 2-CTA cluster for a
``remote_cta_id=``, the call issued by one thread for a thread-scope context) and lowers it
through tirx with the variant forced (``dispatch=``). A decline raises ``DispatchFail`` with
tirx's diagnostic; otherwise the result's ``body`` is the call's lowered statements (tirx's LIR,
under the call's ``// <scope>.copy_async -> <variant>`` marker) as a tree of ``For`` /
``Evaluate(Call)`` nodes that ``StmtExprVisitor`` walks. An LIR statement becomes a ``Call``
whose op is the reference's name for that instruction (``_OPS``); other statements keep their
LIR mnemonic. Nothing is computed here: the counts and loops are tirx's.

Not provided: the reference's host-side statements (``sctx.callbacks["host_init_stmt"]``: tirx
encodes tensor maps in its launcher, not as IR) and its planner's private helpers.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional

import numpy as np

import tirx
from tirx.runtime import numpy_dtype
from tirx.script import T, Tx
from tirx.script.namespace import MBarrier

# ----------------------------------------------------------------------------- IR values


class DataType:
    """``tvm.DataType("float16")``: ``bits``, ``lanes``, ``str()``."""

    def __init__(self, dtype):
        self._s = str(dtype)
        self.lanes = 1
        self.bits = 1 if self._s == "bool" else numpy_dtype(self._s).itemsize * 8

    def __str__(self):
        return self._s

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(self._s)


class PrimType:
    """``tvm.ir.PrimType(dtype)``."""

    def __init__(self, dtype):
        self.dtype = str(dtype)


class PointerType:
    """``tvm.ir.PointerType(element, storage_scope)``."""

    def __init__(self, element_type, storage_scope: str = ""):
        self.element_type, self.storage_scope = element_type, storage_scope


class Var:
    """``tvm.tirx.Var(name, dtype)``: a free variable (a handle passed as ``mbar=`` stands for
    an mbarrier of the lowered call's kernel)."""

    def __init__(self, name: str, dtype="int32"):
        self.name = name
        self.dtype = dtype if isinstance(dtype, (PointerType, PrimType)) else str(dtype)

    def __repr__(self):
        return self.name


class IntImm:
    """``tvm.tirx.IntImm(dtype, value)``."""

    def __init__(self, dtype: str, value: int):
        self.dtype, self.value = str(dtype), int(value)

    def __int__(self):
        return self.value

    __index__ = __int__

    def __eq__(self, other):
        return int(self) == int(other) if isinstance(other, (int, IntImm)) else NotImplemented

    def __hash__(self):
        return hash(self.value)


class StringImm:
    """``tvm.tirx.StringImm(value)``."""

    def __init__(self, value: str):
        self.value = value


class Range:
    """``tvm.ir.Range.from_min_extent(min, extent)``."""

    def __init__(self, begin, end=None):
        self.min, self.extent = (0, begin) if end is None else (begin, end - begin)

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        r = Range(0)
        r.min, r.extent = min_value, extent
        return r


class Buffer:
    """``tvm.tirx.decl_buffer(shape, dtype, name, scope=..., layout=...)``: what a lowered call
    needs to know of a buffer."""

    def __init__(self, shape, dtype, name, data, elem_offset, scope, layout):
        self.shape = tuple(int(s) for s in (shape if isinstance(shape, (list, tuple)) else (shape,)))
        self.dtype, self.name, self.data, self.scope = str(dtype), name, data, scope
        self.elem_offset, self.layout = elem_offset, layout

    def __repr__(self):
        return f"Buffer({self.name}, {self.shape}, {self.dtype}, {self.scope})"


def decl_buffer(shape, dtype="float32", name="buffer", data=None, strides=None, elem_offset=None,
                scope="global", align=-1, offset_factor=0, buffer_type="", axis_separators=None,
                layout=None, **_):
    if strides is not None:
        raise NotImplementedError("tirx.compat: decl_buffer(strides=...) — give the strides as a layout")
    if data is not None:
        raise NotImplementedError("tirx.compat: decl_buffer(data=...) — a lowered call's buffers own their storage")
    if elem_offset is not None and int(getattr(elem_offset, "value", elem_offset)) != 0:
        raise NotImplementedError(
            "tirx.compat: decl_buffer(elem_offset=...) — declare the buffer at its start and take a region of it"
        )
    return Buffer(shape, dtype, name, None, 0, scope, layout)


class BufferRegion:
    """``tvm.tirx.stmt.BufferRegion(buffer, [Range, ...])``."""

    def __init__(self, buffer: Buffer, region: List[Range]):
        self.buffer, self.region = buffer, list(region)

    def slices(self) -> tuple:
        return tuple(slice(int(r.min), int(r.min) + int(r.extent)) for r in self.region)


class CopyAsync:
    """``tvm.tirx.operator.tile_primitive.ops.CopyAsync(dst, src, config=...)``."""

    def __init__(self, dst: BufferRegion, src: BufferRegion, config: Optional[Dict[str, Any]] = None, **_):
        self.dst, self.src, self.config = dst, src, dict(config or {})


class ExecScope:
    """``tvm.tirx.exec_scope.ExecScope("thread" | "warp" | "warpgroup" | "cta")``."""

    def __init__(self, name: str):
        self.name = str(name)


class _HostInit(dict):
    def get(self, key, default=None):
        raise NotImplementedError(
            f"`sctx.callbacks[{key!r}]` is reference (TVM) IR: tirx encodes tensor maps in its launcher, not as host statements"
        )

    __getitem__ = get


class DispatchContext:
    """``tvm.tirx.tile_primitive.DispatchContext(target, exec_scope, ...)``."""

    def __init__(self, target, exec_scope: ExecScope, *_, **__):
        self.target, self.exec_scope = target, exec_scope
        self.callbacks = _HostInit()


class DispatchFail(Exception):
    """A forced variant declined: the message is tirx's diagnostic (the rule and its reason)."""


# ----------------------------------------------------------------------------- statement trees


class Op:
    def __init__(self, name: str):
        self.name = name


class Call:
    def __init__(self, name: str, text: str):
        self.op, self.args, self.text = Op(name), [], text

    def __repr__(self):
        return f"Call({self.op.name}: {self.text})"


class Evaluate:
    def __init__(self, value: Call):
        self.value = value


class For:
    def __init__(self, var: str, begin: int, extent: int, body):
        self.loop_var, self.min, self.extent, self.body = var, begin, extent, body


class SeqStmt:
    def __init__(self, seq: list):
        self.seq = seq


class StmtExprVisitor:
    """``tvm.tirx.stmt_functor.StmtExprVisitor`` over the trees above."""

    def visit_stmt(self, stmt):
        if isinstance(stmt, SeqStmt):
            for s in stmt.seq:
                self.visit_stmt(s)
        elif isinstance(stmt, For):
            self.visit_for_(stmt)
        elif isinstance(stmt, Evaluate):
            self.visit_evaluate_(stmt)

    def visit_for_(self, op: For):
        self.visit_stmt(op.body)

    def visit_evaluate_(self, op: Evaluate):
        self.visit_expr(op.value)

    def visit_expr(self, expr):
        if isinstance(expr, Call):
            self.visit_call_(expr)

    def visit_call_(self, op: Call):
        pass

    def visit_select_(self, op):
        pass


# The reference's op names of the LIR instructions a copy_async lowers to.
_OPS = {
    "cp.async.bulk.shared::cluster.shared::cta": "tirx.ptx.cp_async_bulk_s2c",
    "tma.load": "tirx.ptx.cp_async_bulk_tensor_g2s_cluster",
    "tma.store": "tirx.ptx.cp_async_bulk_tensor_s2g",
    "cp.async.ca": "tirx.ptx.cp_async",
    "cp.async.cg": "tirx.ptx.cp_async",
}


def _op_name(line: str) -> str:
    """The reference's op of an LIR instruction line (`tma.load.2d ...`, `cp.async.cg<16> ...`),
    else its LIR mnemonic."""
    mnemonic = line.split("<", 1)[0].split(" ", 1)[0]
    for prefix in sorted(_OPS, key=len, reverse=True):
        if mnemonic == prefix or re.fullmatch(re.escape(prefix) + r"\.\d+d", mnemonic):
            return _OPS[prefix]
    return mnemonic


# `for i in 0..E {`, `unroll for i in B..B + E {` (crates/ir/src/lir/print.rs).
_FOR = re.compile(r"(?:unroll )?for (\w+) in (.+?)\.\.(.+) \{$")


def _depth(line: str) -> int:
    """How a stripped LIR line changes the block depth: `{` opens, `}` closes, `} else {` both."""
    if line.startswith("//"):
        return 0
    return int(line.endswith("{")) - int(line == "}" or line.startswith("} else"))


def _int_or_text(e: str):
    return int(e) if re.fullmatch(r"-?\d+", e) else e


def _for(line: str, body) -> Optional[For]:
    """The ``For`` of a loop header line, else None."""
    m = _FOR.match(line)
    if m is None:
        return None
    var, begin, end = m.group(1), m.group(2), m.group(3)
    extent = end if begin == "0" else end[len(begin) + 3 :] if end.startswith(f"{begin} + ") else None
    if extent is None:
        raise tirx.TirxInternalError(f"tirx.compat: a loop range neither `0..E` nor `B..B + E`: {line!r}")
    return For(var, _int_or_text(begin), _int_or_text(extent), body)


def _tree(lines: List[str]):
    """The statements of ``lines`` (one block's LIR) as a SeqStmt; ``let`` and ``if`` lines are
    walked through (their statements count once)."""
    out, i = [], 0
    while i < len(lines):
        line = lines[i].strip()
        i += 1
        if not line or line.startswith("//") or line.startswith("let ") or line == "}" or line.startswith("} else"):
            continue
        if line.endswith("{"):
            depth, j = 1, i
            while j < len(lines) and depth:
                depth += _depth(lines[j].strip())
                j += 1
            body = _tree(lines[i : j - 1])
            loop = _for(line, body)
            if loop is None and not line.startswith("if "):
                raise tirx.TirxInternalError(f"tirx.compat: an LIR block neither `for` nor `if`: {line!r}")
            out.append(loop if loop is not None else body)
            i = j
        else:
            out.append(Evaluate(Call(_op_name(line), line)))
    return SeqStmt(out)


def _call_block(lir: str, variant: str) -> List[str]:
    """The LIR lines under the call's marker, up to the end of its block."""
    lines = lir.splitlines()
    start = next((i for i, l in enumerate(lines) if re.search(rf"// \w+\.copy_async -> {variant}$", l)), None)
    if start is None:
        raise tirx.TirxInternalError(f"tirx.compat: no `copy_async -> {variant}` marker in the lowered kernel")
    indent = len(lines[start]) - len(lines[start].lstrip())
    block, depth = [], 0
    for line in lines[start + 1 :]:
        s = line.strip()
        if depth == 0 and (s == "}" or (s.startswith("//") and len(line) - len(line.lstrip()) == indent)):
            break
        depth += _depth(s)
        block.append(line)
    return block


class Lowered:
    """What a ``copy_*_impl`` returns: ``body`` (the call's statements), ``kernel`` (the tirx
    kernel it was lowered in; ``kernel.lir()``, ``kernel.cuda_source``)."""

    def __init__(self, kernel, variant: str):
        self.kernel = kernel
        self.body = _tree(_call_block(kernel.lir(), variant))


# ----------------------------------------------------------------------------- one-call kernels


def _config(config: Dict[str, Any], mbar_ptr) -> Dict[str, Any]:
    out = {}
    for k, v in config.items():
        if isinstance(v, Var) and k == "mbar":
            v = mbar_ptr
        elif isinstance(v, Var):
            raise NotImplementedError(f"tirx.compat: a free variable as `{k}=` ({v.name}) in a directly lowered call")
        elif isinstance(v, IntImm):
            v = v.value
        elif isinstance(v, StringImm):
            v = v.value
        out[k] = v
    return out


_THREADS = {"thread": 1, "warp": 32, "warpgroup": 128, "cta": 128}


def _threads(sctx: DispatchContext) -> int:
    """The threads of the one-call kernel: those of the context's scope."""
    name = sctx.exec_scope.name
    if name not in _THREADS:
        raise NotImplementedError(f"tirx.compat: exec scope {name!r}; one of {', '.join(_THREADS)}")
    return _THREADS[name]


def _shared_shared(op: CopyAsync, sctx: DispatchContext, variant: str):
    """Both operands in shared memory (``dsmem``): a 2-CTA cluster."""
    d, s = op.dst.buffer, op.src.buffer
    dr, sr = op.dst.slices(), op.src.slices()
    cfg = op.config
    nthreads = _threads(sctx)
    one_thread = sctx.exec_scope.name == "thread"

    @T.prim_func
    def copy_async(A_ptr: T.handle):
        A = T.match_buffer(A_ptr, (1,), "float32")
        T.device_entry()
        T.cta_id_in_cluster([2])
        T.cta_id([2])
        tid = T.thread_id([nthreads])
        pool = T.SMEMPool()
        src = pool.alloc(s.shape, s.dtype, layout=s.layout, align=128)
        dst = pool.alloc(d.shape, d.dtype, layout=d.layout, align=128)
        bar = MBarrier(pool, 1)
        pool.commit()
        bar.init(1)
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if one_thread:
            if tid == 0:
                Tx.copy_async(dst[dr], src[sr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))
        else:
            Tx.copy_async(dst[dr], src[sr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))
        T.cuda.cluster_sync()

    return copy_async


def _global_shared(op: CopyAsync, sctx: DispatchContext, variant: str):
    """One operand in global memory (a parameter), the other in dynamic shared memory."""
    g2s = op.src.buffer.scope == "global"
    g_reg, s_reg = (op.src, op.dst) if g2s else (op.dst, op.src)
    g, sb = g_reg.buffer, s_reg.buffer
    gr, sr = g_reg.slices(), s_reg.slices()
    cfg = op.config
    nthreads = _threads(sctx)
    one_thread = sctx.exec_scope.name == "thread"

    @T.prim_func
    def copy_async(G_ptr: T.handle):
        G = T.match_buffer(G_ptr, g.shape, g.dtype, layout=g.layout)
        T.device_entry()
        T.cta_id([1])
        tid = T.thread_id([nthreads])
        pool = T.SMEMPool()
        S = pool.alloc(sb.shape, sb.dtype, layout=sb.layout, align=128)
        bar = MBarrier(pool, 1)
        pool.commit()
        bar.init(1)
        T.cuda.cta_sync()
        if g2s:
            if one_thread:
                if tid == 0:
                    Tx.copy_async(S[sr], G[gr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))
            else:
                Tx.copy_async(S[sr], G[gr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))
        else:
            if one_thread:
                if tid == 0:
                    Tx.copy_async(G[gr], S[sr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))
            else:
                Tx.copy_async(G[gr], S[sr], dispatch=variant, **_config(cfg, bar.ptr_to([0])))

    return copy_async


_DECLINE = re.compile(r"error: (?:the forced variant '[^']+' does not apply|no lowering variant applies)")


def _lower_one(op: CopyAsync, sctx: DispatchContext, variant: str) -> Lowered:
    shared = [b.buffer.scope.startswith("shared") for b in (op.dst, op.src)]
    if all(shared):
        prim = _shared_shared(op, sctx, variant)
    elif any(shared):
        prim = _global_shared(op, sctx, variant)
    else:
        raise DispatchFail(f"{variant}: one operand must be in shared memory")
    try:
        kernel = tirx.compile(prim, target=getattr(sctx.target, "arch", "sm_90a"))
    except tirx.TirxError as e:
        if _DECLINE.match(str(e)):
            raise DispatchFail(str(e)) from None
        raise
    return Lowered(kernel, variant)


def impl_of(variant: str):
    """``copy_<variant>_impl(op, sctx)``: the call lowered by ``variant`` (or ``DispatchFail``)."""

    def impl(op: CopyAsync, sctx: DispatchContext) -> Lowered:
        return _lower_one(op, sctx, variant)

    impl.__name__ = f"copy_{variant}_impl"
    return impl


__all__ = [
    "Buffer", "BufferRegion", "Call", "CopyAsync", "DataType", "DispatchContext", "DispatchFail",
    "Evaluate", "ExecScope", "For", "IntImm", "Lowered", "Op", "PointerType", "PrimType", "Range",
    "SeqStmt", "StmtExprVisitor", "StringImm", "Var", "decl_buffer", "impl_of", "np",
]
