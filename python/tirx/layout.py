"""Layouts as Python values (docs/layout-model.md, docs/python.md §4).

``S[(32, 8):(1 @ laneid, 1)]`` builds a shard spec, ``R[...]`` a replica spec, ``k @ axis`` an
axis stride or offset; ``TileLayout(spec)`` and ``ComposeLayout(p, sw, at, tile)`` are layouts.
Every operation (``canonicalize``, ``group``, ``slice``, ``tile``, ...) is computed by the Rust
layout crate, the one the script front end and the lowering use, so a layout built here is the
layout a kernel gets.
"""

from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple, Union

from . import _native

__all__ = [
    "Axis",
    "AxisStride",
    "ComposeLayout",
    "Iter",
    "Layout",
    "R",
    "S",
    "Spec",
    "TileLayout",
    "SwizzleMode",
    "mma_a_layout",
    "mma_acc_layout",
    "mma_atom_layout",
    "mma_atom_shape",
    "mma_b_layout",
    "mma_row_layout",
    "mma_shared_layout",
    "tcgen05_atom_layout",
    "wg_local_layout",
    "wgmma_acc_layout",
    "wgmma_row_layout",
]

# The axes, from the native table of the language's names (``crates/script/src/names.rs``).
_AXES = [
    n for n in _native.builtins()["names"] if n["namespace"] == "layout" and n["kind"] in ("thread_axis", "memory_axis")
]
AXIS_NAMES = tuple(n["name"] for n in _AXES)
MEMORY_AXES = frozenset(n["name"] for n in _AXES if n["kind"] == "memory_axis")


class Axis:
    """A hardware or memory axis; ``4 @ laneid`` is a stride (or offset) on it."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        if name not in AXIS_NAMES:
            raise ValueError(f"unknown axis {name!r}; axes: {', '.join(AXIS_NAMES)}")
        object.__setattr__(self, "name", name)

    @staticmethod
    def get(name: str) -> "Axis":
        return Axis(name)

    def is_memory(self) -> bool:
        """A memory axis (``m``, ``P``, ``F``, ``Bank``, ``TLane``, ``TCol``), as ``Axis::is_memory``."""
        return self.name in MEMORY_AXES

    def is_thread(self) -> bool:
        """A thread (or CTA) axis: every axis that is not a memory axis."""
        return not self.is_memory()

    def __rmatmul__(self, k):
        if not isinstance(k, int) or isinstance(k, bool):
            raise TypeError(f"`k @ {self.name}` needs an int k, not {type(k).__name__}")
        return AxisStride(k, self)

    def __eq__(self, other):
        return isinstance(other, Axis) and other.name == self.name

    def __hash__(self):
        return hash(("axis", self.name))

    def __repr__(self):
        return self.name

    def __setattr__(self, *_):
        raise AttributeError("axes are immutable")


for _name in AXIS_NAMES:
    setattr(Axis, _name, Axis(_name))


class AxisStride:
    """``k @ axis``: a stride inside ``S[...]``/``R[...]``, or an offset added to a spec."""

    __slots__ = ("k", "axis")

    def __init__(self, k: int, axis: Axis):
        self.k, self.axis = k, axis

    def __neg__(self):
        return AxisStride(-self.k, self.axis)

    def __add__(self, other):
        return Spec()._plus(self)._plus(other)

    __radd__ = __add__

    def __repr__(self):
        return f"{self.k}@{self.axis.name}"


def _stride(v, n_extents: int) -> Tuple[int, str]:
    if isinstance(v, AxisStride):
        return v.k, v.axis.name
    if isinstance(v, Axis):
        return 1, v.name
    if isinstance(v, str):
        return 1, Axis(v).name
    if isinstance(v, tuple) and len(v) == 2 and isinstance(v[1], (str, Axis)):
        return int(v[0]), Axis(v[1]).name if isinstance(v[1], str) else v[1].name
    if isinstance(v, int) and not isinstance(v, bool):
        return v, "m"
    raise TypeError(f"a layout stride is an int, `k @ axis` or an axis, not {v!r}")


def _as_list(v) -> list:
    return list(v) if isinstance(v, (tuple, list)) else [v]


class Spec:
    """A layout spec under construction: shard and replica iters, offsets per axis."""

    __slots__ = ("shard", "replica", "offset")

    def __init__(self, shard=None, replica=None, offset=None):
        self.shard: Optional[List[Tuple[int, int, str]]] = shard
        self.replica: Optional[List[Tuple[int, int, str]]] = replica
        self.offset: Dict[str, int] = dict(offset or {})

    def _plus(self, other) -> "Spec":
        out = Spec(self.shard, self.replica, self.offset)
        if isinstance(other, Spec):
            if other.shard is not None:
                if out.shard is not None:
                    raise ValueError("a layout has one `S[...]`")
                out.shard = other.shard
            if other.replica is not None:
                if out.replica is not None:
                    raise ValueError("a layout has one `R[...]`")
                out.replica = other.replica
            for a, v in other.offset.items():
                out.offset[a] = out.offset.get(a, 0) + v
        elif isinstance(other, AxisStride):
            out.offset[other.axis.name] = out.offset.get(other.axis.name, 0) + other.k
        elif isinstance(other, int) and not isinstance(other, bool):
            out.offset["m"] = out.offset.get("m", 0) + other
        else:
            raise TypeError(f"cannot add {other!r} to a layout spec")
        return out

    def __add__(self, other):
        return self._plus(other)

    def __radd__(self, other):
        return Spec()._plus(other)._plus(self)

    def __sub__(self, other):
        if isinstance(other, AxisStride):
            return self._plus(-other)
        if isinstance(other, int):
            return self._plus(-other)
        raise TypeError(f"cannot subtract {other!r} from a layout spec")

    def __repr__(self):
        return repr(TileLayout(self))

    def __getattr__(self, name):
        # A spec is also its layout: `S[...].tile_to(...)`, `S[...].size()`.
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(TileLayout(self), name)


class _SpecBuilder:
    __slots__ = ("_shard",)

    def __init__(self, shard: bool):
        self._shard = shard

    def __getitem__(self, key) -> Spec:
        if isinstance(key, slice):
            if key.step is not None:
                raise ValueError("a layout spec is `S[extents]` or `S[extents : strides]`")
            extents = [int(e) for e in _as_list(key.start)]
            strides = _as_list(key.stop)
            if len(extents) == 1 and isinstance(key.stop, tuple) and len(key.stop) == 2 and isinstance(key.stop[1], str):
                strides = [key.stop]
            if len(strides) != len(extents):
                raise ValueError(f"layout has {len(extents)} extents but {len(strides)} strides")
            iters = [(e, *_stride(s, len(extents))) for e, s in zip(extents, strides)]
        else:
            extents = [int(e) for e in _as_list(key)]
            iters, stride = [], 1
            for e in reversed(extents):
                iters.append((e, stride, "m"))
                stride *= e
            iters.reverse()
        return Spec(shard=iters) if self._shard else Spec(replica=iters)


S = _SpecBuilder(True)
R = _SpecBuilder(False)


class Iter:
    """One iter ``(extent, stride, axis)`` of a TileLayout."""

    __slots__ = ("extent", "stride", "axis")

    def __init__(self, extent: int, stride: int, axis: Union[Axis, str] = "m"):
        self.extent, self.stride = int(extent), int(stride)
        self.axis = axis if isinstance(axis, Axis) else Axis(axis)

    def _t(self):
        return (self.extent, self.stride, self.axis.name)

    def __eq__(self, other):
        return isinstance(other, Iter) and self._t() == other._t()

    def __hash__(self):
        return hash(self._t())

    def __repr__(self):
        return f"Iter({self.extent}, {self.stride}, {self.axis.name})"


def _wrap(n: "_native.Layout") -> "Layout":
    cls = TileLayout if n.is_tile() else ComposeLayout
    obj = object.__new__(cls)
    obj._n = n
    return obj


def _unwrap(v) -> "_native.Layout":
    if isinstance(v, Layout):
        return v._n
    if isinstance(v, Spec):
        return TileLayout(v)._n
    raise TypeError(f"expected a layout, got {v!r}")


def _region(region) -> List[Tuple[int, int]]:
    out = []
    for r in region:
        if isinstance(r, slice):
            out.append((int(r.start or 0), int(r.stop)))
        else:
            lo, hi = r
            out.append((int(lo), int(hi)))
    return out


class Layout:
    """Base of TileLayout and ComposeLayout (backed by the Rust layout crate)."""

    __slots__ = ("_n",)

    def __eq__(self, other):
        return isinstance(other, Layout) and self._n == other._n

    def __hash__(self):
        return hash(self._n)

    def __str__(self):
        return str(self._n)

    def __repr__(self):
        return repr(self._n)

    def script(self) -> str:
        """The layout in script syntax (`TileLayout(S[...])`, `ComposeLayout(...)`)."""
        return repr(self._n)

    def canonicalize(self, fusion: Optional[str] = None) -> "Layout":
        return _wrap(self._n.canonicalize(fusion))

    def slice(self, shape: Sequence[int], region) -> "Layout":
        return _wrap(self._n.slice([int(s) for s in shape], _region(region)))

    def storage(self) -> "Layout":
        return _wrap(self._n.storage())

    def size(self, axis=None) -> int:
        return self._n.size(_axis_name(axis))

    def span(self, axis=None) -> int:
        return self._n.span(_axis_name(axis))

    def apply(self, *coord, shape: Sequence[int]) -> Dict[str, int]:
        if len(coord) == 1 and isinstance(coord[0], (list, tuple)):
            coord = tuple(coord[0])
        return self._n.apply([int(c) for c in coord], [int(s) for s in shape])

    def tile_to(self, to_shape: Sequence[int] = None, current_shape: Sequence[int] = None, **kw) -> "Layout":
        """This layout (an atom over ``current_shape``) repeated row-major to ``to_shape``."""
        to_shape = kw.pop("shape", to_shape)
        current_shape = kw.pop("atom_shape", current_shape)
        if kw:
            raise TypeError(f"tile_to() got unexpected keywords {sorted(kw)}")
        return _wrap(self._n.tile_to([int(x) for x in to_shape], [int(x) for x in current_shape]))

    def is_swizzle(self) -> bool:
        return not self._n.is_tile()

    def injective(self) -> bool:
        return self._n.injectivity() is None


def _axis_name(a) -> Optional[str]:
    if a is None:
        return None
    return a.name if isinstance(a, Axis) else Axis(a).name


class TileLayout(Layout):
    """``TileLayout(S[...] + R[...] + k@axis)``: shard, replica and offsets."""

    __slots__ = ()

    def __init__(self, spec: Union[Spec, "TileLayout", AxisStride, int] = None):
        if isinstance(spec, TileLayout):
            self._n = spec._n
            return
        if spec is None:
            spec = Spec(shard=[])
        if not isinstance(spec, Spec):
            spec = Spec()._plus(spec)
        self._n = _native.Layout.from_iters(spec.shard or [], spec.replica or [], spec.offset)

    @staticmethod
    def from_iters(shard: Sequence[Iter], replica: Sequence[Iter] = (), offset=None) -> "TileLayout":
        off = {(_axis_name(a) if not isinstance(a, str) else a): int(v) for a, v in (offset or {}).items()}
        return _wrap(_native.Layout.from_iters([i._t() for i in shard], [i._t() for i in replica], off))

    @property
    def shard(self) -> List[Iter]:
        return [Iter(*t) for t in self._n.shard()]

    @property
    def replica(self) -> List[Iter]:
        return [Iter(*t) for t in self._n.replica()]

    @property
    def offset(self) -> Dict[Axis, int]:
        return {Axis(a): v for a, v in self._n.offset().items()}

    def group(self, shape: Sequence[int]) -> Tuple["TileLayout", List[int]]:
        n, seps = self._n.group([int(s) for s in shape])
        return _wrap(n), list(seps)

    def group_many(self, shapes: Sequence[Sequence[int]]) -> Tuple["TileLayout", List[List[int]]]:
        n, seps = self._n.group_many([[int(x) for x in sh] for sh in shapes])
        return _wrap(n), [list(x) for x in seps]

    def permute_by_groups(self, seps: Sequence[int], perm: Sequence[int]) -> "TileLayout":
        return _wrap(self._n.permute_by_groups(list(seps), list(perm)))

    def tile(self, outer: "TileLayout", outer_shape: Sequence[int], inner_shape: Sequence[int]) -> "TileLayout":
        return _wrap(self._n.tile(_unwrap(outer), list(outer_shape), list(inner_shape)))


class ComposeLayout(Layout):
    """``ComposeLayout(per_element, swizzle_len, atom_len, tile, swizzle_inner=True)``: an XOR
    swizzle of the tile's memory address (shared-memory bank-conflict avoidance)."""

    __slots__ = ()

    def __init__(self, per_element: int, swizzle_len: int, atom_len: int, tile, swizzle_inner: bool = True):
        self._n = _native.Layout.compose(per_element, swizzle_len, atom_len, _unwrap(tile), swizzle_inner)

    @property
    def tile_layout(self) -> TileLayout:
        return _wrap(self._n.base())

    # The reference's field names.
    @property
    def layout(self) -> TileLayout:
        return self.tile_layout

    @property
    def swizzle(self) -> Tuple[int, int, int, bool]:
        return self._n.swizzle()

    @property
    def per_element(self) -> int:
        return self.swizzle[0]

    @property
    def swizzle_len(self) -> int:
        return self.swizzle[1]

    @property
    def atom_len(self) -> int:
        return self.swizzle[2]

    @property
    def swizzle_inner(self) -> bool:
        return self.swizzle[3]


class SwizzleMode(int):
    """The canonical shared tiles' swizzle: 0 none, 1 32B, 2 64B, 3 128B (the reference's enum)."""

    @property
    def value(self) -> int:
        return int(self)


SwizzleMode.SWIZZLE_NONE = SwizzleMode(0)
SwizzleMode.SWIZZLE_32B_ATOM = SwizzleMode(1)
SwizzleMode.SWIZZLE_64B_ATOM = SwizzleMode(2)
SwizzleMode.SWIZZLE_128B_ATOM = SwizzleMode(3)


def _bits(dtype) -> int:
    name = getattr(dtype, "name", None) or str(dtype)
    from .script.namespace import ALIASES

    name = ALIASES.get(name, name)
    table = {"bool": 8, "float4_e2m1fn": 4}
    if name in table:
        return table[name]
    digits = "".join(c for c in name.split("_")[0] if c.isdigit())
    if not digits:
        raise ValueError(f"unknown dtype {dtype!r}")
    return int(digits)


def mma_atom_shape(dtype, swizzle_mode, shape: Optional[Sequence[int]] = None) -> List[int]:
    """One canonical shared atom's shape ``[8, row_bytes * 8 / bits]`` (padded to ``len(shape)``)."""
    return list(_native.mma_atom_shape_of(_bits(dtype), int(swizzle_mode), len(shape) if shape else 2))


def mma_atom_layout(dtype, swizzle_mode) -> "ComposeLayout":
    """One canonical shared atom: a bare swizzle over one period."""
    return _wrap(_native.mma_atom_layout_of(_bits(dtype), int(swizzle_mode)))


def mma_shared_layout(dtype, swizzle_mode, shape: Sequence[int]) -> Layout:
    """The canonical (swizzled) shared-memory tile of ``shape`` for ldmatrix, wgmma and TMA."""
    return _wrap(_native.mma_shared_layout_of(_bits(dtype), int(swizzle_mode), [int(x) for x in shape]))


def tcgen05_atom_layout(instr_shape: str, tensor_shape: Sequence[int], dtype) -> TileLayout:
    """The register layout of a tcgen05 ld/st atom (``"16x256b"``, ...) over ``tensor_shape``."""
    rows, cols = (int(x) for x in tensor_shape)
    return _wrap(_native.tcgen05_atom_layout_of(instr_shape, rows, cols, _bits(dtype)))


def mma_acc_layout(m: int, n: int) -> TileLayout:
    """The `mma.sync.m16n8k*` accumulator (32-bit C, D) of an m x n warp tile: lane 4g + t holds
    rows g, g + 8 and columns 2t, 2t + 1 of each 16 x 8 atom."""
    return _wrap(_native.fragment_layout_of("mma_acc_layout", [int(m), int(n)]))


def mma_a_layout(m: int, k: int) -> TileLayout:
    """The `m16n8k16` A operand (16-bit, row-major) of an m x k warp tile."""
    return _wrap(_native.fragment_layout_of("mma_a_layout", [int(m), int(k)]))


def mma_b_layout(k: int, n: int) -> TileLayout:
    """The `m16n8k16` B operand (16-bit) of a k x n warp tile."""
    return _wrap(_native.fragment_layout_of("mma_b_layout", [int(k), int(n)]))


def mma_row_layout(m: int) -> TileLayout:
    """A row statistic (m x 1) of `mma_acc_layout(m, n)`, replicated over each quad's lanes:
    what a row reduction of the accumulator leaves, broadcast by elementwise ops."""
    return _wrap(_native.fragment_layout_of("mma_row_layout", [int(m)]))


def wgmma_acc_layout(n: int) -> TileLayout:
    """The `wgmma.m64nNk*` accumulator (64 x n) of a warpgroup: warp w holds rows 16w..16w + 15."""
    return _wrap(_native.fragment_layout_of("wgmma_acc_layout", [int(n)]))


def wgmma_row_layout() -> TileLayout:
    """A row statistic (64 x 1) of `wgmma_acc_layout(n)`, replicated over each quad's lanes."""
    return _wrap(_native.fragment_layout_of("wgmma_row_layout", []))


def wg_local_layout(cols: int, rows: int = 128) -> TileLayout:
    """Each of a warpgroup's 128 threads owns one row of ``cols`` registers."""
    return TileLayout(S[(rows, cols) : (1 @ Axis.tid_in_wg, 1)])


for _name in AXIS_NAMES:
    globals()[_name] = getattr(Axis, _name)
__all__ += list(AXIS_NAMES)
