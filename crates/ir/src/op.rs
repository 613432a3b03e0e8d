//! The tile-op table (`docs/tile-primitives.md` §2.2, §2.5): every tile
//! primitive with its family, its operands (names, roles, kinds, defaults) and
//! the config keys it takes, each key with its typed values.
//!
//! This is the one table the script front end (binding operands, checking
//! config), the dispatcher (which variants exist for an op, which keys a
//! variant honours) and `tirx explain` (operand roles) read. A new op is a new
//! [`TileOp`] and its [`OpSpec`] row; the matches below are exhaustive, so the
//! compiler lists every place that must say something about it.

pub use crate::vocab::RoundMode;
use serde::Serialize;

/// The families of tile ops. A variant lowers the ops of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Family {
    /// Moves a region (`copy`).
    Copy,
    /// Computes each destination element from the same-index source elements ([`EwiseOp`]).
    Elementwise,
    /// Combines the source elements along `axes` into the destination ([`ReduceOp`]).
    Reduce,
    /// Matrix multiply-accumulate on tensor cores: `D = alpha·A·B + beta·C`
    /// (`gemm`), and its asynchronous form `D = A·Bᵀ (+ D)` (`gemm_async`).
    Gemm,
    /// Moves a region asynchronously (`copy_async`): the data lands when the
    /// kernel's completion mechanism (`cp.async.wait_group`, an mbarrier) says so.
    CopyAsync,
    /// Rearranges a region from the source's layout into the destination's, the
    /// same logical elements (`permute_layout`).
    Permute,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Copy => "copy",
            Family::Elementwise => "elementwise",
            Family::Reduce => "reduce",
            Family::Gemm => "gemm",
            Family::CopyAsync => "copy_async",
            Family::Permute => "permute",
        }
    }
}

/// A tile op: the family, then the op within it. Each family's lowering
/// matches its own op enum exhaustively and never sees another family's ops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TileOp {
    Copy,
    Ewise(EwiseOp),
    Reduce(ReduceOp),
    Gemm,
    /// `gemm_async(D, A, B, SFA=None, SFB=None, transA=False, transB=False, accum=False)`:
    /// issued, completed later (`T.ptx.wgmma.wait_group`); A is M×K, B is N×K
    /// (K×M and K×N with the flags), as the reference's `gemm_async`.
    GemmAsync,
    CopyAsync,
    /// `permute_layout(dst, src)`: `dst[i] = src[i]` for every logical index of the
    /// region, both in memory under their own layouts (the reference's warp op).
    PermuteLayout,
}

/// The reduction ops (`Tx.<scope>.sum|max|min(dst, src, axes=-1, accum=False)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ReduceOp {
    Sum,
    Max,
    Min,
}

impl ReduceOp {
    pub const ALL: [ReduceOp; 3] = [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min];

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

/// The elementwise ops (`docs/tile-primitives.md` §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum EwiseOp {
    Zero,
    Fill,
    Reciprocal,
    Sqrt,
    Exp,
    Exp2,
    Log2,
    Silu,
    Add,
    Sub,
    Mul,
    Fdiv,
    Maximum,
    Minimum,
    Fma,
    Cast,
    Tanh,
    Sigmoid,
    /// `softplus(dst, src, beta=1, threshold=20)`: `x` where `beta·x > threshold`, else `log1p(exp(beta·x)) / beta`.
    Softplus,
    Erf,
    /// `gelu(dst, src, approximate="none")`: `x·Φ(x)` (erf form), or with `"tanh"` PyTorch's tanh approximation.
    Gelu,
    /// `masked_fill(dst, src, mask, value)`: `value` where `mask(i, j, ...)` holds of the
    /// element's coordinates in the region, else `src` (PyTorch's `masked_fill`).
    MaskedFill,
}

/// What an operand is to the op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Role {
    /// Written by the op.
    Dst,
    /// Read element by element (`src`, `lhs`, `a`, ...).
    Src,
    /// Added after scaling (`op(x * scale + bias)`).
    Bias,
    /// Multiplied before the op.
    Scale,
    /// The scalar a `fill` writes.
    Value,
    /// A compile-time parameter of the op (`axes=`, `transpose_A=`): not data.
    Attr,
    /// Accumulated into (`gemm`'s `C`): read, never written.
    Acc,
    /// A run-time condition: the op acts only where it holds (`copy_async`'s `predicate`).
    Predicate,
    /// The mbarrier an asynchronous copy completes its bytes on (`copy_async`'s `mbar`).
    Barrier,
    /// Which CTAs of the cluster an asynchronous copy writes: a multicast mask
    /// (`cta_mask`) or a peer's rank (`remote_cta_id`).
    Peer,
    /// A condition on each element's coordinates in the tile (`masked_fill`'s `mask`).
    Mask,
}

/// What an operand slot accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SlotKind {
    Region,
    RegionOrScalar,
    Scalar,
    /// A compile-time constant of the given kind ([`AttrValue`]), fixed per call.
    Attr(AttrKind),
    /// The address of an mbarrier (`mbar.ptr_to([i])`).
    Barrier,
    /// `lambda i, j: <bool>`: a condition on an element's coordinates in the region.
    Mask,
}

/// The kinds of compile-time op parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AttrKind {
    /// An int or a tuple/list of ints (`axes=-1`, `axes=(0, 2)`); negative ints count from the end.
    Axes,
    /// `True` / `False`.
    Bool,
    /// One of a fixed set of strings (`approximate="tanh"`).
    Choice(&'static [&'static str]),
}

impl AttrKind {
    /// What the kind accepts, as a user would write it.
    pub fn expects(self) -> String {
        match self {
            AttrKind::Axes => "an int or a tuple of ints (`axes=-1`, `axes=(0, 2)`)".into(),
            AttrKind::Bool => "`True` or `False`".into(),
            AttrKind::Choice(names) => {
                let quoted: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
                format!("one of {}", quoted.join(", "))
            }
        }
    }
}

/// A compile-time op parameter's value (`TileArg::Attr`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum AttrValue {
    Axes(Vec<i64>),
    Bool(bool),
    Choice(&'static str),
}

impl AttrValue {
    /// The value in script syntax (`(0, 2)`, `-1`, `True`).
    pub fn script(&self) -> String {
        match self {
            AttrValue::Axes(a) if a.len() == 1 => a[0].to_string(),
            AttrValue::Axes(a) => format!("({})", a.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
            AttrValue::Bool(true) => "True".into(),
            AttrValue::Bool(false) => "False".into(),
            AttrValue::Choice(s) => format!("\"{s}\""),
        }
    }
}

/// `axes` of a reduction over a source of `rank` dims: negatives count from the end; the
/// result is sorted. `Err` says what is wrong (out of range, repeated, empty).
pub fn normalize_axes(axes: &[i64], rank: usize) -> Result<Vec<usize>, String> {
    if axes.is_empty() {
        return Err("`axes` is empty: name at least one dim to reduce".into());
    }
    let r = rank as i64;
    let mut out = vec![];
    for &a in axes {
        if a < -r || a >= r {
            return Err(format!(
                "axis {a} is out of range for a source region of {rank} dims (valid: -{rank}..{rank})"
            ));
        }
        let n = if a < 0 { a + r } else { a } as usize;
        if out.contains(&n) {
            return Err(format!("axis {a} names dim {n} twice"));
        }
        out.push(n);
    }
    out.sort_unstable();
    Ok(out)
}

/// The default of an attribute slot, as a constant of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AttrDefault {
    Axes(&'static [i64]),
    Bool(bool),
    Choice(&'static str),
}

impl AttrDefault {
    pub fn value(self) -> AttrValue {
        match self {
            AttrDefault::Axes(a) => AttrValue::Axes(a.to_vec()),
            AttrDefault::Bool(b) => AttrValue::Bool(b),
            AttrDefault::Choice(s) => AttrValue::Choice(s),
        }
    }
}

/// What an absent operand becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum SlotDefault {
    Required,
    /// Defaults to the destination region (`Tx.sqrt(R)` is in place).
    Dst,
    /// Stored as `TileArg::None`.
    Absent,
    /// An attribute slot's default, stored as `TileArg::Attr`.
    Attr(AttrDefault),
}

/// One positional operand of an op.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Slot {
    /// Keyword names; the first is the canonical one (explain shows it).
    pub names: &'static [&'static str],
    pub role: Role,
    pub kind: SlotKind,
    pub default: SlotDefault,
}

impl Slot {
    pub fn name(&self) -> &'static str {
        self.names[0]
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct OpSpec {
    pub family: Family,
    pub operands: &'static [Slot],
    /// The config keys a call of this op may carry; a variant honours a subset.
    pub config: &'static [ConfigKey],
}

const fn slot(names: &'static [&'static str], role: Role, kind: SlotKind, default: SlotDefault) -> Slot {
    Slot { names, role, kind, default }
}

use SlotDefault::{Absent, Dst as DefDst, Required};
use SlotKind::{Region, RegionOrScalar, Scalar};

// The operand slots of the table. Public so that a lowering reads an operand by
// its slot (`cx.region(&op::DST)`, found by [`TileOp::position`]), never by a number.

pub const DST: Slot = slot(&["dst", "output", "out"], Role::Dst, Region, Required);
pub const SRC_REGION: Slot = slot(&["src", "input"], Role::Src, Region, Required);
pub const SRC_INPLACE: Slot = slot(&["src", "input"], Role::Src, RegionOrScalar, DefDst);
pub const BIAS: Slot = slot(&["bias"], Role::Bias, RegionOrScalar, Absent);
pub const SCALE: Slot = slot(&["scale"], Role::Scale, Scalar, Absent);
pub const VALUE: Slot = slot(&["value"], Role::Value, Scalar, Required);
pub const LHS: Slot = slot(&["lhs", "a"], Role::Src, RegionOrScalar, Required);
pub const RHS: Slot = slot(&["rhs", "b"], Role::Src, RegionOrScalar, Required);
pub const FMA_A: Slot = slot(&["a", "input", "src"], Role::Src, RegionOrScalar, Required);
pub const FMA_B: Slot = slot(&["scale", "b"], Role::Src, RegionOrScalar, Required);
pub const FMA_C: Slot = slot(&["bias", "c"], Role::Src, RegionOrScalar, Required);
pub const ZERO_SRC: Slot = slot(&["src"], Role::Src, Region, DefDst);
pub const AXES: Slot =
    slot(&["axes"], Role::Attr, SlotKind::Attr(AttrKind::Axes), SlotDefault::Attr(AttrDefault::Axes(&[-1])));
pub const ACCUM: Slot =
    slot(&["accum"], Role::Attr, SlotKind::Attr(AttrKind::Bool), SlotDefault::Attr(AttrDefault::Bool(false)));
pub const GEMM_D: Slot = slot(&["D", "dst", "output"], Role::Dst, Region, Required);
pub const GEMM_A: Slot = slot(&["A"], Role::Src, Region, Required);
pub const GEMM_B: Slot = slot(&["B"], Role::Src, Region, Required);
pub const GEMM_C: Slot = slot(&["C"], Role::Acc, Region, DefDst);
pub const TRANS_A: Slot =
    slot(&["transpose_A"], Role::Attr, SlotKind::Attr(AttrKind::Bool), SlotDefault::Attr(AttrDefault::Bool(false)));
pub const TRANS_B: Slot =
    slot(&["transpose_B"], Role::Attr, SlotKind::Attr(AttrKind::Bool), SlotDefault::Attr(AttrDefault::Bool(false)));
pub const ALPHA: Slot = slot(&["alpha"], Role::Scale, Scalar, Absent);
pub const BETA: Slot = slot(&["beta"], Role::Scale, Scalar, Absent);
pub const ASYNC_D: Slot = slot(&["D", "C", "dst", "output"], Role::Dst, Region, Required);
pub const SFA: Slot = slot(&["SFA"], Role::Scale, Region, Absent);
pub const SFB: Slot = slot(&["SFB"], Role::Scale, Region, Absent);
pub const ASYNC_TRANS_A: Slot = slot(
    &["transA", "transpose_A"],
    Role::Attr,
    SlotKind::Attr(AttrKind::Bool),
    SlotDefault::Attr(AttrDefault::Bool(false)),
);
pub const ASYNC_TRANS_B: Slot = slot(
    &["transB", "transpose_B"],
    Role::Attr,
    SlotKind::Attr(AttrKind::Bool),
    SlotDefault::Attr(AttrDefault::Bool(false)),
);
/// A run-time or compile-time bool: false overwrites D, true accumulates into it.
pub const ASYNC_ACCUM: Slot = slot(&["accum"], Role::Scale, Scalar, Absent);
pub const THRESHOLD: Slot = slot(&["threshold"], Role::Scale, Scalar, Absent);
pub const APPROXIMATE: Slot = slot(
    &["approximate"],
    Role::Attr,
    SlotKind::Attr(AttrKind::Choice(&["none", "tanh"])),
    SlotDefault::Attr(AttrDefault::Choice("none")),
);
/// `exp2(..., ftz=True)`: subnormal results flushed to zero ([`crate::MathFn::Exp2Ftz`]).
pub const FTZ: Slot =
    slot(&["ftz"], Role::Attr, SlotKind::Attr(AttrKind::Bool), SlotDefault::Attr(AttrDefault::Bool(false)));
/// `exp2(..., ftz=True, pipe="fma")`: computed on the FMA pipe, not MUFU ([`crate::MathFn::Exp2Fma`]).
pub const PIPE: Slot = slot(
    &["pipe"],
    Role::Attr,
    SlotKind::Attr(AttrKind::Choice(&["mufu", "fma"])),
    SlotDefault::Attr(AttrDefault::Choice("mufu")),
);
pub const PREDICATE: Slot = slot(&["predicate"], Role::Predicate, Scalar, Absent);
pub const MASK: Slot = slot(&["mask"], Role::Mask, SlotKind::Mask, Required);
/// A copy's optional guard: only elements where it holds are copied (`mask=lambda i, j: ...`).
pub const COPY_MASK: Slot = slot(&["mask"], Role::Mask, SlotKind::Mask, Absent);
/// What a guarded load writes where it does not copy (`other=-inf`); absent: the registers keep their values.
pub const OTHER: Slot = slot(&["other"], Role::Value, Scalar, Absent);
/// `clip=True`: a copy whose memory region may leave its buffer copies only the elements inside it.
pub const CLIP: Slot =
    slot(&["clip"], Role::Attr, SlotKind::Attr(AttrKind::Bool), SlotDefault::Attr(AttrDefault::Bool(false)));
pub const MBAR: Slot = slot(&["mbar"], Role::Barrier, SlotKind::Barrier, Absent);
pub const CTA_MASK: Slot = slot(&["cta_mask"], Role::Peer, Scalar, Absent);
pub const REMOTE_CTA: Slot = slot(&["remote_cta_id"], Role::Peer, Scalar, Absent);

const COPY_CONFIG: &[ConfigKey] = &[ConfigKey::Cache, ConfigKey::L1Evict, ConfigKey::L2Evict, ConfigKey::PrefetchSize];
const EWISE_CONFIG: &[ConfigKey] = &[ConfigKey::RoundingMode];
const REDUCE_CONFIG: &[ConfigKey] = &[ConfigKey::ThreadReduce];
const COPY_ASYNC_CONFIG: &[ConfigKey] = &[
    ConfigKey::FillMode,
    ConfigKey::PrefetchSize,
    ConfigKey::Direct,
    ConfigKey::CacheHint,
    ConfigKey::Oob,
    ConfigKey::TensormapL2Promotion,
    ConfigKey::CtaGroup,
    ConfigKey::UseTmaReduce,
];

impl EwiseOp {
    pub const ALL: [EwiseOp; 22] = [
        EwiseOp::Zero,
        EwiseOp::Fill,
        EwiseOp::Reciprocal,
        EwiseOp::Sqrt,
        EwiseOp::Exp,
        EwiseOp::Exp2,
        EwiseOp::Log2,
        EwiseOp::Silu,
        EwiseOp::Add,
        EwiseOp::Sub,
        EwiseOp::Mul,
        EwiseOp::Fdiv,
        EwiseOp::Maximum,
        EwiseOp::Minimum,
        EwiseOp::Fma,
        EwiseOp::Cast,
        EwiseOp::Tanh,
        EwiseOp::Sigmoid,
        EwiseOp::Softplus,
        EwiseOp::Erf,
        EwiseOp::Gelu,
        EwiseOp::MaskedFill,
    ];

    pub fn name(self) -> &'static str {
        match self {
            EwiseOp::Zero => "zero",
            EwiseOp::Fill => "fill",
            EwiseOp::Reciprocal => "reciprocal",
            EwiseOp::Sqrt => "sqrt",
            EwiseOp::Exp => "exp",
            EwiseOp::Exp2 => "exp2",
            EwiseOp::Log2 => "log2",
            EwiseOp::Silu => "silu",
            EwiseOp::Add => "add",
            EwiseOp::Sub => "sub",
            EwiseOp::Mul => "mul",
            EwiseOp::Fdiv => "fdiv",
            EwiseOp::Maximum => "maximum",
            EwiseOp::Minimum => "minimum",
            EwiseOp::Fma => "fma",
            EwiseOp::Cast => "cast",
            EwiseOp::Tanh => "tanh",
            EwiseOp::Sigmoid => "sigmoid",
            EwiseOp::Softplus => "softplus",
            EwiseOp::Erf => "erf",
            EwiseOp::Gelu => "gelu",
            EwiseOp::MaskedFill => "masked_fill",
        }
    }

    fn operands(self) -> &'static [Slot] {
        match self {
            EwiseOp::Cast => &[DST, SRC_REGION],
            EwiseOp::Zero => &[DST, ZERO_SRC],
            EwiseOp::Fill => &[DST, VALUE],
            EwiseOp::Reciprocal | EwiseOp::Silu | EwiseOp::Tanh | EwiseOp::Sigmoid | EwiseOp::Erf => {
                &[DST, SRC_INPLACE]
            }
            EwiseOp::Softplus => &[DST, SRC_INPLACE, BETA, THRESHOLD],
            EwiseOp::Gelu => &[DST, SRC_INPLACE, APPROXIMATE],
            EwiseOp::MaskedFill => &[DST, SRC_REGION, MASK, VALUE],
            EwiseOp::Sqrt | EwiseOp::Exp | EwiseOp::Log2 => &[DST, SRC_INPLACE, BIAS, SCALE],
            EwiseOp::Exp2 => &[DST, SRC_INPLACE, BIAS, SCALE, FTZ, PIPE],
            EwiseOp::Add | EwiseOp::Sub | EwiseOp::Mul | EwiseOp::Fdiv | EwiseOp::Maximum | EwiseOp::Minimum => {
                &[DST, LHS, RHS]
            }
            EwiseOp::Fma => &[DST, FMA_A, FMA_B, FMA_C],
        }
    }
}

impl TileOp {
    /// Every op, family by family.
    pub fn all() -> impl Iterator<Item = TileOp> {
        std::iter::once(TileOp::Copy)
            .chain(EwiseOp::ALL.into_iter().map(TileOp::Ewise))
            .chain(ReduceOp::ALL.into_iter().map(TileOp::Reduce))
            .chain([TileOp::Gemm, TileOp::GemmAsync, TileOp::CopyAsync, TileOp::PermuteLayout])
    }

    pub fn name(self) -> &'static str {
        match self {
            TileOp::Copy => "copy",
            TileOp::Ewise(e) => e.name(),
            TileOp::Reduce(r) => r.name(),
            TileOp::Gemm => "gemm",
            TileOp::GemmAsync => "gemm_async",
            TileOp::CopyAsync => "copy_async",
            TileOp::PermuteLayout => "permute_layout",
        }
    }

    pub fn from_name(s: &str) -> Option<TileOp> {
        TileOp::all().find(|o| o.name() == s)
    }

    /// The op's row of the table.
    pub fn spec(self) -> OpSpec {
        match self {
            TileOp::Copy => OpSpec {
                family: Family::Copy,
                operands: &[DST, SRC_REGION, COPY_MASK, OTHER, CLIP],
                config: COPY_CONFIG,
            },
            TileOp::Ewise(e) => OpSpec { family: Family::Elementwise, operands: e.operands(), config: EWISE_CONFIG },
            TileOp::Reduce(_) => {
                OpSpec { family: Family::Reduce, operands: &[DST, SRC_REGION, AXES, ACCUM], config: REDUCE_CONFIG }
            }
            TileOp::Gemm => OpSpec {
                family: Family::Gemm,
                operands: &[GEMM_D, GEMM_A, GEMM_B, GEMM_C, TRANS_A, TRANS_B, ALPHA, BETA],
                config: &[],
            },
            TileOp::GemmAsync => OpSpec {
                family: Family::Gemm,
                operands: &[ASYNC_D, GEMM_A, GEMM_B, SFA, SFB, ASYNC_TRANS_A, ASYNC_TRANS_B, ASYNC_ACCUM],
                config: &[],
            },
            TileOp::CopyAsync => OpSpec {
                family: Family::CopyAsync,
                operands: &[DST, SRC_REGION, PREDICATE, MBAR, CTA_MASK, REMOTE_CTA],
                config: COPY_ASYNC_CONFIG,
            },
            TileOp::PermuteLayout => OpSpec { family: Family::Permute, operands: &[DST, SRC_REGION], config: &[] },
        }
    }

    pub fn family(self) -> Family {
        self.spec().family
    }

    pub fn operands(self) -> &'static [Slot] {
        self.spec().operands
    }

    /// The position of `slot` (matched by its canonical name) in this op's row: how a
    /// lowering reads an operand by name (`PREDICATE`), never by a number.
    pub fn position(self, slot: &Slot) -> Option<usize> {
        self.operands().iter().position(|s| s.name() == slot.name())
    }

    /// `copy(dst, src)`, `sqrt(dst, src=dst, bias=None, scale=None)`, ...
    pub fn describe(self) -> String {
        let parts: Vec<String> = self
            .operands()
            .iter()
            .map(|s| match s.default {
                SlotDefault::Required => s.name().to_string(),
                SlotDefault::Dst => format!("{}=dst", s.name()),
                SlotDefault::Absent => format!("{}=None", s.name()),
                SlotDefault::Attr(d) => format!("{}={}", s.name(), d.value().script()),
            })
            .collect();
        format!("{}({})", self.name(), parts.join(", "))
    }
}

/// A config key of a tile call (`cache="nc"`). Its value is typed when the
/// script is read ([`ConfigKey::parse`]); which variants honour it is theirs to say.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum ConfigKey {
    /// `cache="nc"`: global loads through the non-coherent (read-only) path.
    Cache,
    /// `l1_evict=`: L1 eviction priority of global accesses.
    L1Evict,
    /// `l2_evict=`: L2 eviction priority of global accesses.
    L2Evict,
    /// `prefetch_size=`: L2 prefetch of global loads, in bytes.
    PrefetchSize,
    /// `rounding_mode=`: IEEE rounding of the op's result.
    RoundingMode,
    /// `thread_reduce=True`: a register reduction also combines across the threads that hold the reduced dims.
    ThreadReduce,
    /// `fill_mode="zero"`: where an async copy's `predicate` is false, the destination is zero-filled.
    FillMode,
    /// `direct=True`: an async copy of one 4/8/16-byte region by each thread, from the region starts.
    Direct,
    /// `cache_hint="evict_first"`: the L2 cache policy of a bulk (TMA) copy.
    CacheHint,
    /// `oob="zero"|"nan"`: what a TMA load reads outside its tensor.
    Oob,
    /// `tensormap_l2_promotion=`: the L2 promotion of a TMA descriptor.
    TensormapL2Promotion,
    /// `cta_group=1|2`: the CTA pair a TMA copy serves (2: sm_100).
    CtaGroup,
    /// `use_tma_reduce="add"`: a TMA store adds into global memory (`cp.reduce.async.bulk.tensor`).
    UseTmaReduce,
}

impl ConfigKey {
    pub const ALL: [ConfigKey; 13] = [
        ConfigKey::Cache,
        ConfigKey::L1Evict,
        ConfigKey::L2Evict,
        ConfigKey::PrefetchSize,
        ConfigKey::RoundingMode,
        ConfigKey::ThreadReduce,
        ConfigKey::FillMode,
        ConfigKey::Direct,
        ConfigKey::CacheHint,
        ConfigKey::Oob,
        ConfigKey::TensormapL2Promotion,
        ConfigKey::CtaGroup,
        ConfigKey::UseTmaReduce,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ConfigKey::Cache => "cache",
            ConfigKey::L1Evict => "l1_evict",
            ConfigKey::L2Evict => "l2_evict",
            ConfigKey::PrefetchSize => "prefetch_size",
            ConfigKey::RoundingMode => "rounding_mode",
            ConfigKey::ThreadReduce => "thread_reduce",
            ConfigKey::FillMode => "fill_mode",
            ConfigKey::Direct => "direct",
            ConfigKey::CacheHint => "cache_hint",
            ConfigKey::Oob => "oob",
            ConfigKey::TensormapL2Promotion => "tensormap_l2_promotion",
            ConfigKey::CtaGroup => "cta_group",
            ConfigKey::UseTmaReduce => "use_tma_reduce",
        }
    }

    pub fn from_name(s: &str) -> Option<ConfigKey> {
        ConfigKey::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The values the key takes, as a user would write them.
    pub fn expects(self) -> &'static str {
        match self {
            ConfigKey::Cache => "\"nc\"",
            ConfigKey::L1Evict => {
                "\"evict_normal\", \"evict_first\", \"evict_last\", \"evict_unchanged\" or \"no_allocate\" \
                 (also spelled \"L1::evict_first\", ...)"
            }
            ConfigKey::L2Evict => {
                "\"evict_normal\", \"evict_first\" or \"evict_last\" (also spelled \"L2::evict_first\", ...)"
            }
            ConfigKey::PrefetchSize => "64, 128 or 256 (also spelled \"L2::64B\", \"L2::128B\", \"L2::256B\")",
            ConfigKey::RoundingMode => "\"rn\", \"rz\", \"rm\" or \"rp\"",
            ConfigKey::ThreadReduce | ConfigKey::Direct => "`True` or `False`",
            ConfigKey::FillMode => "\"zero\"",
            ConfigKey::CacheHint => "\"evict_normal\", \"evict_first\" or \"evict_last\"",
            ConfigKey::Oob => "\"zero\" or \"nan\"",
            ConfigKey::TensormapL2Promotion => {
                "0 to 3, or \"none\", \"L2::64B\", \"L2::128B\", \"L2::256B\" (the default is \"L2::128B\")"
            }
            ConfigKey::CtaGroup => "1 or 2",
            ConfigKey::UseTmaReduce => {
                "\"add\" (the reference's \"min\", \"max\", \"inc\", \"dec\", \"and\", \"or\", \"xor\" are not implemented)"
            }
        }
    }

    /// Types a script value; `Err` says what the key expects.
    pub fn parse(self, v: &RawConfig) -> Result<ConfigValue, String> {
        let bad = || format!("`{}` expects {}", self.name(), self.expects());
        let s = match v {
            RawConfig::Str(s) => Some(s.as_str()),
            _ => None,
        };
        match self {
            ConfigKey::Cache => match s {
                Some("nc") => Ok(ConfigValue::Cache(CacheMode::NonCoherent)),
                _ => Err(bad()),
            },
            ConfigKey::L1Evict => s.and_then(|s| Evict::from_ptx(s, "L1::")).map(ConfigValue::Evict).ok_or_else(bad),
            ConfigKey::L2Evict => {
                s.and_then(|s| Evict::from_ptx(s, "L2::")).filter(|e| e.at_l2()).map(ConfigValue::Evict).ok_or_else(bad)
            }
            ConfigKey::PrefetchSize => {
                let n = match v {
                    RawConfig::Int(n) => Some(*n),
                    // The reference's spelling is the PTX qualifier.
                    RawConfig::Str(s) => {
                        s.strip_prefix("L2::").and_then(|b| b.strip_suffix('B')).and_then(|b| b.parse().ok())
                    }
                    _ => None,
                };
                match n {
                    Some(n @ (64 | 128 | 256)) => Ok(ConfigValue::PrefetchSize(n as u32)),
                    _ => Err(bad()),
                }
            }
            ConfigKey::RoundingMode => s.and_then(RoundMode::from_name).map(ConfigValue::Rounding).ok_or_else(bad),
            ConfigKey::ThreadReduce | ConfigKey::Direct => match v {
                RawConfig::Bool(b) => Ok(ConfigValue::Flag(*b)),
                _ => Err(bad()),
            },
            ConfigKey::FillMode => match s {
                Some("zero") => Ok(ConfigValue::FillMode(FillMode::Zero)),
                _ => Err(bad()),
            },
            ConfigKey::CacheHint => {
                s.and_then(|s| Evict::from_ptx(s, "L2::")).filter(|e| e.at_l2()).map(ConfigValue::Evict).ok_or_else(bad)
            }
            ConfigKey::Oob => match s {
                Some("zero") => Ok(ConfigValue::Oob(OobFill::Zero)),
                Some("nan") => Ok(ConfigValue::Oob(OobFill::Nan)),
                _ => Err(bad()),
            },
            ConfigKey::TensormapL2Promotion => {
                let n = match v {
                    RawConfig::Int(n) => Some(*n),
                    RawConfig::Str(s) => ["none", "L2::64B", "L2::128B", "L2::256B"]
                        .iter()
                        .position(|x| *x == s || (s == "L2::none" && *x == "none"))
                        .map(|i| i as i64),
                    _ => None,
                };
                match n {
                    Some(n @ 0..=3) => Ok(ConfigValue::L2Promotion(n as u8)),
                    _ => Err(bad()),
                }
            }
            ConfigKey::CtaGroup => match v {
                RawConfig::Int(n @ (1 | 2)) => Ok(ConfigValue::CtaGroup(*n as u8)),
                _ => Err(bad()),
            },
            ConfigKey::UseTmaReduce => match s {
                Some("add") => Ok(ConfigValue::TmaReduce(TmaReduce::Add)),
                _ => Err(bad()),
            },
        }
    }
}

/// `use_tma_reduce=` values: how a TMA store combines with what global memory holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TmaReduce {
    /// `.add`: element-wise sum (f32, f16, bf16, s32, u32, u64), atomic per element.
    Add,
}

/// `oob=` values: what a TMA load reads outside its tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum OobFill {
    Zero,
    /// NaN (float tensors only).
    Nan,
}

/// A config value as the script wrote it, before typing.
#[derive(Clone, Debug, PartialEq)]
pub enum RawConfig {
    Int(i64),
    Float(f64),
    Str(String),
    Bool(bool),
}

/// `cache=` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum CacheMode {
    /// `ld.global.nc`.
    NonCoherent,
}

/// `fill_mode=` values: what an async copy writes where its predicate is false.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum FillMode {
    /// Zeros (`cp.async` with a source size of 0).
    Zero,
}

/// PTX eviction priorities (`L1::evict_last`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Evict {
    Normal,
    First,
    Last,
    Unchanged,
    NoAllocate,
}

impl Evict {
    pub const ALL: [Evict; 5] = [Evict::Normal, Evict::First, Evict::Last, Evict::Unchanged, Evict::NoAllocate];
    pub fn name(self) -> &'static str {
        match self {
            Evict::Normal => "evict_normal",
            Evict::First => "evict_first",
            Evict::Last => "evict_last",
            Evict::Unchanged => "evict_unchanged",
            Evict::NoAllocate => "no_allocate",
        }
    }
    fn from_name(s: &str) -> Option<Evict> {
        Evict::ALL.into_iter().find(|e| e.name() == s)
    }
    /// `"evict_first"` or the PTX qualifier with its cache level (`"L1::evict_first"`).
    fn from_ptx(s: &str, level: &str) -> Option<Evict> {
        Evict::from_name(s.strip_prefix(level).unwrap_or(s))
    }
    /// A priority the L2 takes (`.L2::evict_normal/first/last`); the others are L1-only.
    pub fn at_l2(self) -> bool {
        matches!(self, Evict::Normal | Evict::First | Evict::Last)
    }
}

/// A typed config value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ConfigValue {
    Cache(CacheMode),
    Evict(Evict),
    PrefetchSize(u32),
    Rounding(RoundMode),
    /// A boolean key (`thread_reduce=True`).
    Flag(bool),
    FillMode(FillMode),
    Oob(OobFill),
    /// A TMA descriptor's L2 promotion, 0..=3 (none, 64 B, 128 B, 256 B).
    L2Promotion(u8),
    CtaGroup(u8),
    TmaReduce(TmaReduce),
}

impl ConfigValue {
    /// The value in script syntax (`"nc"`, `128`).
    pub fn script(&self) -> String {
        match self {
            ConfigValue::Cache(CacheMode::NonCoherent) => "\"nc\"".into(),
            ConfigValue::Evict(e) => format!("\"{}\"", e.name()),
            ConfigValue::PrefetchSize(n) => n.to_string(),
            ConfigValue::Rounding(m) => format!("\"{}\"", m.name()),
            ConfigValue::Flag(b) => if *b { "True" } else { "False" }.into(),
            ConfigValue::FillMode(FillMode::Zero) => "\"zero\"".into(),
            ConfigValue::Oob(OobFill::Zero) => "\"zero\"".into(),
            ConfigValue::Oob(OobFill::Nan) => "\"nan\"".into(),
            ConfigValue::L2Promotion(n) => ["\"none\"", "\"L2::64B\"", "\"L2::128B\"", "\"L2::256B\""]
                .get(usize::from(*n))
                .map_or_else(|| n.to_string(), |s| s.to_string()),
            ConfigValue::CtaGroup(n) => n.to_string(),
            ConfigValue::TmaReduce(TmaReduce::Add) => "\"add\"".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_has_a_destination_first_and_unique_name() {
        for op in TileOp::all() {
            assert_eq!(op.operands()[0].role, Role::Dst, "{op:?}");
            assert_eq!(TileOp::from_name(op.name()), Some(op));
        }
    }

    #[test]
    fn axes_normalize_from_the_end_and_reject_repeats() {
        assert_eq!(normalize_axes(&[-1], 3), Ok(vec![2]));
        assert_eq!(normalize_axes(&[2, 0], 3), Ok(vec![0, 2]));
        assert!(normalize_axes(&[3], 3).is_err());
        assert!(normalize_axes(&[-4], 3).is_err());
        assert!(normalize_axes(&[1, -2], 3).is_err());
        assert!(normalize_axes(&[], 3).is_err());
    }

    #[test]
    fn attribute_defaults_print_as_script() {
        let s = TileOp::Reduce(ReduceOp::Sum).describe();
        assert_eq!(s, "sum(dst, src, axes=-1, accum=False)");
        assert_eq!(AttrValue::Axes(vec![0, 2]).script(), "(0, 2)");
    }

    #[test]
    fn config_values_round_trip_through_script_text() {
        let cases = [
            (ConfigKey::Cache, RawConfig::Str("nc".into())),
            (ConfigKey::L2Evict, RawConfig::Str("evict_last".into())),
            (ConfigKey::PrefetchSize, RawConfig::Int(128)),
            (ConfigKey::RoundingMode, RawConfig::Str("rz".into())),
        ];
        for (k, raw) in cases {
            let v = k.parse(&raw).unwrap();
            let text = v.script();
            let back = match text.strip_prefix('"') {
                Some(s) => RawConfig::Str(s.trim_end_matches('"').into()),
                None => RawConfig::Int(text.parse().unwrap()),
            };
            assert_eq!(k.parse(&back), Ok(v));
        }
        assert!(ConfigKey::RoundingMode.parse(&RawConfig::Str("rq".into())).is_err());
        assert!(ConfigKey::PrefetchSize.parse(&RawConfig::Int(100)).is_err());
        assert!(ConfigKey::Cache.parse(&RawConfig::Bool(true)).is_err());
    }

    #[test]
    fn cache_hints_take_the_ptx_spellings_too() {
        let str = |s: &str| RawConfig::Str(s.into());
        let l1 = ConfigKey::L1Evict.parse(&str("L1::no_allocate"));
        assert_eq!(l1, Ok(ConfigValue::Evict(Evict::NoAllocate)));
        assert_eq!(l1, ConfigKey::L1Evict.parse(&str("no_allocate")));
        assert_eq!(ConfigKey::L2Evict.parse(&str("L2::evict_first")), Ok(ConfigValue::Evict(Evict::First)));
        assert_eq!(ConfigKey::PrefetchSize.parse(&str("L2::256B")), Ok(ConfigValue::PrefetchSize(256)));
        // The wrong level, and priorities the L2 does not have.
        assert!(ConfigKey::L1Evict.parse(&str("L2::evict_first")).is_err());
        assert!(ConfigKey::L2Evict.parse(&str("L2::no_allocate")).is_err());
        assert!(ConfigKey::L2Evict.parse(&str("evict_unchanged")).is_err());
        assert!(ConfigKey::PrefetchSize.parse(&str("L2::100B")).is_err());
        assert!(ConfigKey::PrefetchSize.parse(&str("256")).is_err());
    }
}
