//! The kernel IR that scripts produce and `lower` consumes: kernels, buffers,
//! scope-id declarations, structured statements and tile-primitive calls.
//!
//! Tables (`Kernel::buffers`, `Kernel::vars`) own the entities; statements and
//! expressions refer to them by [`BufId`] / [`VarId`]. Every node carries the
//! [`Span`] of the source text it came from so later stages can point at it.

use crate::dtype::DType;
pub use crate::op::{AttrValue, ConfigKey, ConfigValue, ReduceOp, TileOp};
use crate::span::Span;
pub use crate::vocab::ShuffleMode;
use serde::Serialize;
use tirx_layout::{ExecScope, Layout};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct BufId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct VarId(pub u32);

/// A scalar variable: loop variable, `row = tid // 4` binding, or scope id.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Var {
    pub name: String,
    pub dtype: DType,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MemScope {
    Global,
    Shared,
    SharedDyn,
    Local,
}

impl MemScope {
    pub fn name(self) -> &'static str {
        match self {
            MemScope::Global => "global",
            MemScope::Shared => "shared",
            MemScope::SharedDyn => "shared.dyn",
            MemScope::Local => "local",
        }
    }
    pub fn from_name(s: &str) -> Option<MemScope> {
        Some(match s {
            "global" => MemScope::Global,
            "shared" => MemScope::Shared,
            "shared.dyn" => MemScope::SharedDyn,
            "local" => MemScope::Local,
            _ => return None,
        })
    }
    pub fn is_shared(self) -> bool {
        matches!(self, MemScope::Shared | MemScope::SharedDyn)
    }
}

/// How a buffer came to be.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum BufferOrigin {
    /// `A = T.match_buffer(A_ptr, ...)` or a `T.Buffer` parameter annotation.
    Param,
    /// `T.alloc_buffer / alloc_shared / alloc_local` at this statement position.
    Alloc,
    /// `base.local(*shape)`: the per-thread storage of `base` (layout = `storage()`).
    LocalView { base: BufId },
    /// `base.view(*shape, layout=..)`: same storage, another shape/layout.
    View { base: BufId },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Buffer {
    pub name: String,
    pub shape: Vec<i64>,
    pub dtype: DType,
    pub scope: MemScope,
    /// Always present: scripts default it to row-major `S[shape]`.
    pub layout: Layout,
    pub origin: BufferOrigin,
    pub span: Span,
    /// `T.match_buffer(A_ptr, (n, 128))`: dim 0 is this integer expression of scalar
    /// parameters, known at launch. `shape[0]` then holds [`dyn_outer_bound`], a bound
    /// for the layout algebra only (never a size); the layout is row-major.
    pub dyn_outer: Option<Expr>,
    /// `T.match_buffer(A_ptr, (n, 64), strides=(row_stride, 1))`: the element stride of
    /// each dim, at least one an integer expression of scalar parameters, known at
    /// launch. The layout is then row-major and addresses nothing: scalar accesses
    /// and the TMA variants address the buffer through these strides, every other
    /// variant declines (`docs/tile-primitives.md` §7.7).
    pub dyn_strides: Option<Vec<Expr>>,
}

/// The rows a buffer with a symbolic dim 0 is given in `shape[0]`: at least 2 and
/// at least 2^31 elements in all (so its indices are 64-bit), for rows of
/// `row_elems` elements. Lowering slices and addresses with it; no size is read from it.
pub fn dyn_outer_bound(row_elems: i64) -> i64 {
    let min_elems: i64 = 1 << 31;
    (min_elems + row_elems.max(1) - 1) / row_elems.max(1)
}

impl Buffer {
    /// Dim 0 is a run-time value ([`Buffer::dyn_outer`]).
    pub fn is_symbolic(&self) -> bool {
        self.dyn_outer.is_some()
    }

    /// Its strides are run-time values ([`Buffer::dyn_strides`]).
    pub fn has_dyn_strides(&self) -> bool {
        self.dyn_strides.is_some()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    /// `/`: true division for floats (an error on ints in scripts).
    Div,
    /// `//` with Python (floor) semantics.
    FloorDiv,
    /// `%` with Python (floor) semantics.
    FloorMod,
    Min,
    Max,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum UnOp {
    Neg,
    Not,
    BitNot,
}

/// Scalar math functions (`T.sqrt`, `T.exp`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MathFn {
    Sqrt,
    Rsqrt,
    Exp,
    Exp2,
    Log,
    Log2,
    Abs,
    Floor,
    Ceil,
    Tanh,
    Sin,
    Cos,
    Erf,
    /// `1 - erf(x)`, accurate where `erf(x)` is near 1.
    Erfc,
    /// `log(1 + x)`, accurate near 0.
    Log1p,
    /// `2^x` with subnormal results flushed to zero (PTX's `ex2.approx.ftz.f32`): the one
    /// MUFU.EX2 instruction, where `exp2f` spends three more on results below 2^-126. The
    /// softmax's weights, whose subnormal values change no sum. float32 and narrower only
    /// (computed in float32); float64 is `exp2`.
    Exp2Ftz,
    /// `2^x` on the FMA pipe, not MUFU (FlashAttention-4's emulation, [`EXP2_FMA`]): x clamped
    /// to [-127, 128], n = rint(x) by adding 1.5 * 2^23, f = x - n in [-0.5, 0.5], 2^f by a
    /// degree-3 polynomial (Horner, fused), times 2^n built in the exponent bits, the product
    /// flushed to zero below 2^-126. Within 7.5e-5 relative of 2^x where the result is normal
    /// (one within that of 2^-126 may flush); +inf from x = 127.5; NaN stays NaN. Ten
    /// instructions where MUFU.EX2 is one, on pipes a kernel whose exponentials outrun the MUFU
    /// may have to spare. Bit-exact in the simulator. float32 and narrower (computed in
    /// float32); float64 is `exp2`.
    Exp2Fma,
}

/// [`MathFn::Exp2Fma`]'s polynomial: 2^f ~ C0 + C1 f + C2 f^2 + C3 f^3 on [-0.5, 0.5], the
/// float32 coefficients of the minimax relative error (7.48e-5, Remez; evaluated in float32).
pub const EXP2_FMA: [f32; 4] = [0.999_928_06, 0.693_260_97, 0.242_611_13, 0.055_171_67];

impl MathFn {
    pub const ALL: [MathFn; 17] = [
        MathFn::Sqrt,
        MathFn::Rsqrt,
        MathFn::Exp,
        MathFn::Exp2,
        MathFn::Log,
        MathFn::Log2,
        MathFn::Abs,
        MathFn::Floor,
        MathFn::Ceil,
        MathFn::Tanh,
        MathFn::Sin,
        MathFn::Cos,
        MathFn::Erf,
        MathFn::Erfc,
        MathFn::Log1p,
        MathFn::Exp2Ftz,
        MathFn::Exp2Fma,
    ];

    /// Whether CUDA's function and the host's may differ in the last bits (`sqrtf` is
    /// correctly rounded on both; `abs`, `floor`, `ceil` are exact).
    pub fn is_inexact(self) -> bool {
        // (`exp2_fma`: the simulator takes the GPU's steps, each rounded as there)
        !matches!(self, MathFn::Sqrt | MathFn::Abs | MathFn::Floor | MathFn::Ceil | MathFn::Exp2Fma)
    }

    /// Whether CUDA's function and the host's may differ by more than 2 ulp: both are
    /// within 2 ulp of the exact value (CUDA Math API: `tanhf`, `erff`, `erfcf`, `sinf`,
    /// `cosf`), so they may lie 4 apart (`expf`, `exp2f`, `logf`, `log2f` are seen ≤ 2 apart).
    pub fn differs_widely(self) -> bool {
        matches!(self, MathFn::Tanh | MathFn::Erf | MathFn::Erfc | MathFn::Sin | MathFn::Cos | MathFn::Log1p)
    }

    pub fn name(self) -> &'static str {
        match self {
            MathFn::Sqrt => "sqrt",
            MathFn::Rsqrt => "rsqrt",
            MathFn::Exp => "exp",
            MathFn::Exp2 => "exp2",
            MathFn::Log => "log",
            MathFn::Log2 => "log2",
            MathFn::Abs => "abs",
            MathFn::Floor => "floor",
            MathFn::Ceil => "ceil",
            MathFn::Tanh => "tanh",
            MathFn::Sin => "sin",
            MathFn::Cos => "cos",
            MathFn::Erf => "erf",
            MathFn::Erfc => "erfc",
            MathFn::Log1p => "log1p",
            MathFn::Exp2Ftz => "exp2_ftz",
            MathFn::Exp2Fma => "exp2_fma",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum ExprKind {
    Int(i64),
    Float(f64),
    Bool(bool),
    Var(VarId),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    Unary(UnOp, Box<Expr>),
    /// `T.cast(v, dtype)`.
    Cast(Box<Expr>),
    /// `T.if_then_else(c, a, b)`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    Call(MathFn, Vec<Expr>),
    /// Scalar load `B[i, j]`.
    Load(BufId, Vec<Expr>),
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Expr {
    pub kind: ExprKind,
    pub dtype: DType,
    pub span: Span,
}

impl Expr {
    /// Whether `f` holds for this expression or one of its subexpressions (parents
    /// first; stops at the first that does).
    pub fn any(&self, f: &mut dyn FnMut(&Expr) -> bool) -> bool {
        if f(self) {
            return true;
        }
        match &self.kind {
            ExprKind::Binary(_, a, b) => a.any(f) || b.any(f),
            ExprKind::Unary(_, a) | ExprKind::Cast(a) => a.any(f),
            ExprKind::Select(c, a, b) => c.any(f) || a.any(f) || b.any(f),
            ExprKind::Call(_, args) | ExprKind::Load(_, args) => args.iter().any(|x| x.any(f)),
            ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => false,
        }
    }

    /// Whether variable `v` occurs in it.
    pub fn uses(&self, v: VarId) -> bool {
        self.any(&mut |e| matches!(e.kind, ExprKind::Var(x) if x == v))
    }
}

/// One dimension of a region: `begin : begin + extent`. Extents are constants;
/// begins may depend on loop variables and scope ids.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Range {
    pub begin: Expr,
    pub extent: i64,
}

/// `A[0:32, 4:8]`: a rectangular region of a buffer (an int index is extent 1).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BufferRegion {
    pub buf: BufId,
    pub ranges: Vec<Range>,
    pub span: Span,
}

/// A positional operand of a tile call. Named arguments (`bias=`, `scale=`) are
/// stored positionally per the op's row of [`crate::op`] (docs/tile-primitives.md §2.2), absent ones as `None`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum TileArg {
    Region(BufferRegion),
    Scalar(Expr),
    /// An mbarrier's address (`mbar.ptr_to([0])`).
    Barrier(MbarRef),
    /// A compile-time op parameter (`axes=(0, 2)`, `transpose_A=True`); absent ones hold the table's default.
    Attr(AttrValue),
    /// `lambda i, j: cond` (`masked_fill`'s `mask`).
    Mask(MaskFn),
    None,
}

/// A condition on an element's coordinates in a region: `params` (one int32 var per dim of
/// the region, 0-based within it) are bound per element; `cond` may also use the kernel's
/// values at the call (scalars, scope ids, loop variables).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MaskFn {
    pub params: Vec<VarId>,
    pub cond: Expr,
}

/// One `key=value` config keyword of a tile call, typed by [`crate::op::ConfigKey::parse`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigEntry {
    pub key: ConfigKey,
    pub value: ConfigValue,
    /// The keyword (`rounding_mode="rz"`), for diagnostics at it.
    pub span: Span,
}

/// `Tx.<scope>.<op>(args..., dispatch=.., **config)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileCall {
    pub op: TileOp,
    pub scope: ExecScope,
    pub args: Vec<TileArg>,
    pub config: Vec<ConfigEntry>,
    pub dispatch: Option<String>,
    pub span: Span,
}

impl TileCall {
    /// The call's value for `key`, if it gives one.
    pub fn config(&self, key: ConfigKey) -> Option<&ConfigEntry> {
        self.config.iter().find(|c| c.key == key)
    }

    /// The operand in `slot` of the tile-op table (`&op::PREDICATE`), when the
    /// op has that slot and the call gives it: operands are read by name, never
    /// by position.
    pub fn arg(&self, slot: &crate::op::Slot) -> Option<&TileArg> {
        let i = self.op.position(slot)?;
        self.args.get(i).filter(|a| !matches!(a, TileArg::None))
    }

    /// The operand in `slot`, if it is a region.
    pub fn region(&self, slot: &crate::op::Slot) -> Option<&BufferRegion> {
        match self.arg(slot) {
            Some(TileArg::Region(r)) => Some(r),
            _ => None,
        }
    }

    /// The operand in `slot`, if it is a scalar.
    pub fn scalar(&self, slot: &crate::op::Slot) -> Option<&Expr> {
        match self.arg(slot) {
            Some(TileArg::Scalar(e)) => Some(e),
            _ => None,
        }
    }

    /// The boolean attribute in `slot` (`transpose_A=True`); false when absent.
    pub fn flag(&self, slot: &crate::op::Slot) -> bool {
        matches!(self.arg(slot), Some(TileArg::Attr(crate::op::AttrValue::Bool(true))))
    }
}

/// Which scope-id declarator (docs/tile-primitives.md §1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ScopeIdKind {
    /// `T.cta_id` kernel→cta (blockIdx)
    CtaId,
    /// `T.cluster_id` kernel→cluster
    ClusterId,
    /// `T.cta_id_in_cluster` cluster→cta
    CtaIdInCluster,
    /// `T.warpgroup_id` cta→warpgroup
    WarpgroupId,
    /// `T.warp_id` cta→warp
    WarpId,
    /// `T.warp_id_in_wg` warpgroup→warp
    WarpIdInWg,
    /// `T.lane_id` warp→thread
    LaneId,
    /// `T.thread_id` cta→thread (threadIdx)
    ThreadId,
    /// `T.thread_id_in_wg` warpgroup→thread
    ThreadIdInWg,
}

impl ScopeIdKind {
    /// (parent, child) scopes of the binding.
    pub fn binding(self) -> (ExecScope, ExecScope) {
        use ExecScope::*;
        match self {
            ScopeIdKind::CtaId => (Kernel, Cta),
            ScopeIdKind::ClusterId => (Kernel, Cluster),
            ScopeIdKind::CtaIdInCluster => (Cluster, Cta),
            ScopeIdKind::WarpgroupId => (Cta, Warpgroup),
            ScopeIdKind::WarpId => (Cta, Warp),
            ScopeIdKind::WarpIdInWg => (Warpgroup, Warp),
            ScopeIdKind::LaneId => (Warp, Thread),
            ScopeIdKind::ThreadId => (Cta, Thread),
            ScopeIdKind::ThreadIdInWg => (Warpgroup, Thread),
        }
    }
    pub fn script_name(self) -> &'static str {
        match self {
            ScopeIdKind::CtaId => "cta_id",
            ScopeIdKind::ClusterId => "cluster_id",
            ScopeIdKind::CtaIdInCluster => "cta_id_in_cluster",
            ScopeIdKind::WarpgroupId => "warpgroup_id",
            ScopeIdKind::WarpId => "warp_id",
            ScopeIdKind::WarpIdInWg => "warp_id_in_wg",
            ScopeIdKind::LaneId => "lane_id",
            ScopeIdKind::ThreadId => "thread_id",
            ScopeIdKind::ThreadIdInWg => "thread_id_in_wg",
        }
    }
}

/// `tid = T.thread_id([32])`: declares `vars` (one per extent) for a binding.
/// `extents == None` is deferred (inferred by closure, §1.2).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScopeIdDef {
    pub kind: ScopeIdKind,
    pub vars: Vec<VarId>,
    pub extents: Option<Vec<i64>>,
    pub span: Span,
    /// `T.cta_id([(n + 127) // 128, 4])`: per extent, the expression of scalar
    /// parameters it is (empty when every extent is a constant). A symbolic extent's
    /// entry of `extents` holds CUDA's limit for its grid dimension, the bound the
    /// launch closure and lowering reason with.
    pub dyn_extents: Vec<Option<Expr>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ForKind {
    Serial,
    Unroll,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum BarrierKind {
    /// `T.cuda.cta_sync()` → `__syncthreads()`
    Cta,
    /// `T.cuda.warp_sync()` → `__syncwarp()`
    Warp,
    /// `T.cuda.thread_fence()` → `__threadfence()`: a memory barrier at the GPU's scope
    /// (this thread's accesses before it are seen before its accesses after it by every
    /// thread of the grid); with an atomic after it (release) and one before a fence in
    /// another CTA (acquire), it orders one CTA's writes before another's reads.
    Fence,
}

/// A collective a kernel author calls directly (`T.cuda.warp_sum`, `T.cuda.cta_sum`,
/// `T.cuda.shfl_xor`, ...): threads exchange values and each gets one back.
/// Bindings are immutable, so it is a statement that defines a new variable
/// ([`StmtKind::Collective`]), lowered to shuffles (and barriers), never a pure expression.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Collective {
    /// `T.cuda.warp_reduce(value, op, width)`: every lane of each aligned group of
    /// `width` lanes (a power of two in 2..=32) gets `op` over the group's values.
    WarpReduce { op: ReduceOp, value: Expr, width: u32 },
    /// `T.cuda.cta_reduce(value, op, num_warps, scratch.ptr_to([i..]))`: every thread
    /// of the CTA (`num_warps` whole warps) gets `op` over all threads' values;
    /// `scratch` (shared, `num_warps` elements from `index` on) holds the warps' partials.
    CtaReduce { op: ReduceOp, value: Expr, num_warps: u32, scratch: BufId, index: Vec<Expr> },
    /// `T.cuda.shfl_xor(value, lane_mask, width)` (and `shfl_down`, `shfl_up`, `shfl`):
    /// the value of the source lane `mode` picks from `lane` within `width`-lane segments.
    Shuffle { mode: ShuffleMode, value: Expr, lane: Expr, width: u32 },
}

impl Collective {
    /// The value a thread contributes.
    pub fn value(&self) -> &Expr {
        match self {
            Collective::WarpReduce { value, .. }
            | Collective::CtaReduce { value, .. }
            | Collective::Shuffle { value, .. } => value,
        }
    }

    /// Every expression it evaluates (value, lane operand, scratch indices).
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            Collective::WarpReduce { value, .. } => vec![value],
            Collective::CtaReduce { value, index, .. } => std::iter::once(value).chain(index).collect(),
            Collective::Shuffle { value, lane, .. } => vec![value, lane],
        }
    }
}

/// An atomic read-modify-write of one element a kernel issues itself:
/// `old = T.cuda.atomic_add(W.ptr_to([i]), v)` returns the element's value before the
/// addition; the bare call discards it (docs/tile-primitives.md §8.11). Relaxed, at the
/// GPU's scope: atomics of one element never race with each other, and order nothing else.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Atomic {
    pub op: AtomicOp,
    /// The element: `W.ptr_to([i])` of a global or shared integer buffer.
    pub elem: MbarRef,
    /// The operand, of the element's dtype.
    pub value: Expr,
}

/// What an [`Atomic`] does to its element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum AtomicOp {
    /// `element += value` (integers wrap).
    Add,
}

impl AtomicOp {
    /// Its name after `T.cuda.atomic_` (and in messages).
    pub fn name(self) -> &'static str {
        match self {
            AtomicOp::Add => "add",
        }
    }
}

impl Atomic {
    /// Every expression it evaluates (the element's indices, then the operand).
    pub fn exprs(&self) -> Vec<&Expr> {
        self.elem.index.iter().chain([&self.value]).collect()
    }

    /// Mutable access to every expression (span stripping).
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        self.elem.index.iter_mut().chain([&mut self.value]).collect()
    }
}

/// A PTX instruction a kernel issues itself (`T.ptx.*`, docs/tile-primitives.md §9):
/// the ordering of Hopper's asynchronous tensor cores, register reallocation
/// between warpgroups and named barriers. (The async-proxy fence is an
/// [`AsyncStmt`].)
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum PtxStmt {
    /// `T.ptx.wgmma.fence()`: orders the warpgroup's earlier register accesses before its next wgmmas.
    WgmmaFence,
    /// `T.ptx.wgmma.commit_group()`: closes the warpgroup's open group of wgmmas.
    WgmmaCommit,
    /// `T.ptx.wgmma.wait_group(n)`: waits until at most `n` of the warpgroup's groups are pending.
    WgmmaWait(u32),
    /// `T.ptx.setmaxnreg.inc(n)` / `.dec(n)`: the warpgroup's per-thread register budget.
    SetMaxNReg { inc: bool, regs: u32 },
    /// `T.ptx.bar.sync(id, threads)`: waits at named barrier `id` until `threads` threads arrived.
    BarSync { id: Expr, threads: u32 },
    /// `T.ptx.bar.arrive(id, threads)`: arrives at named barrier `id` without waiting.
    BarArrive { id: Expr, threads: u32 },
    /// `T.ptx.griddepcontrol.wait()`: waits until the grids this one depends on (the kernel
    /// before it on the stream, under programmatic dependent launch) have completed and their
    /// memory is visible; a kernel with it is launched as such a dependent.
    GridDepWait,
    /// `T.ptx.griddepcontrol.launch_dependents()`: the kernel after this one on the stream may
    /// start (its own `griddepcontrol.wait` still waits for this grid's end).
    GridDepLaunch,
}

impl PtxStmt {
    /// The script spelling (`T.ptx.wgmma.wait_group`).
    pub fn script_name(&self) -> &'static str {
        match self {
            PtxStmt::WgmmaFence => "T.ptx.wgmma.fence",
            PtxStmt::WgmmaCommit => "T.ptx.wgmma.commit_group",
            PtxStmt::WgmmaWait(_) => "T.ptx.wgmma.wait_group",
            PtxStmt::SetMaxNReg { inc: true, .. } => "T.ptx.setmaxnreg.inc",
            PtxStmt::SetMaxNReg { inc: false, .. } => "T.ptx.setmaxnreg.dec",
            PtxStmt::BarSync { .. } => "T.ptx.bar.sync",
            PtxStmt::BarArrive { .. } => "T.ptx.bar.arrive",
            PtxStmt::GridDepWait => "T.ptx.griddepcontrol.wait",
            PtxStmt::GridDepLaunch => "T.ptx.griddepcontrol.launch_dependents",
        }
    }

    /// The expressions it evaluates.
    pub fn exprs(&self) -> Vec<&Expr> {
        match self {
            PtxStmt::BarSync { id, .. } | PtxStmt::BarArrive { id, .. } => vec![id],
            _ => vec![],
        }
    }
}

/// An mbarrier operand: `bar.ptr_to([i])`, element `i` of a shared `int64`
/// buffer (the 64-bit barrier word).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MbarRef {
    pub buf: BufId,
    pub index: Vec<Expr>,
    /// The pointer expression (`bar.ptr_to([0])`), for diagnostics at it.
    pub span: Span,
}

/// The kernel's own asynchronous-copy and mbarrier instructions
/// (`T.ptx.cp_async.commit_group()`, `T.ptx.mbarrier.try_wait(p, 0)`, ...;
/// docs/tile-primitives.md §8), one LIR instruction each (docs/lir.md §2.6).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum AsyncStmt {
    /// `cp.async.commit_group`: closes the thread's open group of `cp.async` copies.
    CommitGroup,
    /// `cp.async.wait_group n`: waits until at most `n` of the thread's committed groups are pending.
    WaitGroup(u32),
    /// `mbarrier.init`: a barrier expecting `count` arrivals per phase.
    MbarInit {
        bar: MbarRef,
        count: Expr,
    },
    /// `mbarrier.arrive`: one arrival; with `cta`, on the barrier at the same offset in the
    /// cluster's CTA of that rank (`mapa` + `mbarrier.arrive.release.cluster.shared::cluster`;
    /// `cta_scope`: `mbarrier.arrive.shared::cluster`, ordering the reads before it only).
    MbarArrive {
        bar: MbarRef,
        cta: Option<Expr>,
        cta_scope: bool,
    },
    /// `mbarrier.arrive.expect_tx`: `bytes` more transaction bytes, then one arrival.
    MbarArriveExpectTx {
        bar: MbarRef,
        bytes: Expr,
    },
    /// `mbarrier.try_wait.parity` until the phase of parity `parity` has completed.
    MbarWait {
        bar: MbarRef,
        parity: Expr,
    },
    /// `fence.proxy.async.shared::cta`.
    FenceProxyAsync,
    /// `fence.mbarrier_init.release.cluster`: makes mbarrier inits visible to the cluster.
    FenceMbarrierInit,
    /// `cp.async.bulk.commit_group`: closes this thread's group of bulk (TMA) stores.
    BulkCommitGroup,
    /// `cp.async.bulk.wait_group[.read] n`.
    BulkWaitGroup {
        n: u32,
        read: bool,
    },
    /// `barrier.cluster.arrive` / `barrier.cluster.wait` (`T.cuda.cluster_sync()` is both);
    /// `relaxed`: `barrier.cluster.arrive.relaxed`, no release of the thread's accesses (no
    /// `MEMBAR.ALL.GPU` before it): for a phase that orders execution only, such as the last
    /// one before CTAs exit.
    ClusterArrive {
        relaxed: bool,
    },
    ClusterWait,
    /// `T.cuda.grid_group_sync(word, size)`: every thread of the CTA; the CTA meets the `size`
    /// CTAs of its (cooperative, co-resident) grid that sync on the same 32-bit global `word`.
    GridGroupSync {
        word: MbarRef,
        size: Expr,
    },
}

impl AsyncStmt {
    /// The barrier it uses, if any.
    pub fn mbar(&self) -> Option<&MbarRef> {
        match self {
            AsyncStmt::MbarInit { bar, .. }
            | AsyncStmt::MbarArrive { bar, .. }
            | AsyncStmt::MbarArriveExpectTx { bar, .. }
            | AsyncStmt::MbarWait { bar, .. } => Some(bar),
            AsyncStmt::CommitGroup
            | AsyncStmt::WaitGroup(_)
            | AsyncStmt::FenceProxyAsync
            | AsyncStmt::FenceMbarrierInit
            | AsyncStmt::BulkCommitGroup
            | AsyncStmt::BulkWaitGroup { .. }
            | AsyncStmt::ClusterArrive { .. }
            | AsyncStmt::ClusterWait
            | AsyncStmt::GridGroupSync { .. } => None,
        }
    }

    /// Every expression it evaluates (barrier indices first).
    pub fn exprs(&self) -> Vec<&Expr> {
        let mut v: Vec<&Expr> = self.mbar().map(|b| b.index.iter().collect()).unwrap_or_default();
        match self {
            AsyncStmt::MbarInit { count: e, .. }
            | AsyncStmt::MbarArriveExpectTx { bytes: e, .. }
            | AsyncStmt::MbarWait { parity: e, .. }
            | AsyncStmt::MbarArrive { cta: Some(e), .. } => v.push(e),
            AsyncStmt::GridGroupSync { word, size } => v.extend(word.index.iter().chain([size])),
            _ => {}
        }
        v
    }

    /// Mutable access to every expression (span stripping).
    pub fn exprs_mut(&mut self) -> Vec<&mut Expr> {
        match self {
            AsyncStmt::MbarInit { bar, count: e }
            | AsyncStmt::MbarArriveExpectTx { bar, bytes: e }
            | AsyncStmt::MbarWait { bar, parity: e } => bar.index.iter_mut().chain(std::iter::once(e)).collect(),
            AsyncStmt::MbarArrive { bar, cta, .. } => bar.index.iter_mut().chain(cta.iter_mut()).collect(),
            AsyncStmt::GridGroupSync { word, size } => word.index.iter_mut().chain(std::iter::once(size)).collect(),
            AsyncStmt::CommitGroup
            | AsyncStmt::WaitGroup(_)
            | AsyncStmt::FenceProxyAsync
            | AsyncStmt::FenceMbarrierInit
            | AsyncStmt::BulkCommitGroup
            | AsyncStmt::BulkWaitGroup { .. }
            | AsyncStmt::ClusterArrive { .. }
            | AsyncStmt::ClusterWait => vec![],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum StmtKind {
    For {
        var: VarId,
        begin: Expr,
        extent: Expr,
        kind: ForKind,
        body: Vec<Stmt>,
    },
    If {
        cond: Expr,
        then_body: Vec<Stmt>,
        else_body: Vec<Stmt>,
    },
    /// `while cond:`: `cond` is evaluated before every trip (a mutable scalar's or a buffer
    /// element's value changes it); the body's bindings are its own.
    While {
        cond: Expr,
        body: Vec<Stmt>,
    },
    /// `row = tid // 4` (immutable binding for the rest of the block).
    Let {
        var: VarId,
        value: Expr,
    },
    Store {
        buf: BufId,
        indices: Vec<Expr>,
        value: Expr,
    },
    /// The allocation point of an `Alloc`/view buffer.
    Alloc(BufId),
    ScopeId(ScopeIdDef),
    Barrier(BarrierKind),
    /// `var = T.cuda.warp_sum(v, width=8)` and the other collectives: declares `var`.
    Collective {
        var: VarId,
        op: Collective,
    },
    /// `old = T.cuda.atomic_add(p, v)` (declares `old`), or the bare call (`var` None).
    Atomic {
        var: Option<VarId>,
        atomic: Atomic,
    },
    Tile(TileCall),
    /// `T.ptx.wgmma.fence()` and the other PTX statements.
    Ptx(PtxStmt),
    /// `T.evaluate(e)`: `e` is checked (types, bounds of its loads) and nothing
    /// runs; the reference's way to mention a value.
    Evaluate(Expr),
    /// `T.ptx.cp_async.commit_group()`, `T.ptx.mbarrier.init(p, 1)`, ... (one instruction).
    Async(AsyncStmt),
    /// `T.device_entry()`: everything after it is device code.
    DeviceEntry,
    /// `T.cuda.printf(format, *args)`: every executing thread prints a line (`lir::debug`).
    Printf {
        format: String,
        args: Vec<Expr>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

/// `A_ptr: T.handle` (bound by a match_buffer) or `A: T.Buffer(...)`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Param {
    pub name: String,
    /// The buffer this parameter carries.
    pub buffer: Option<BufId>,
    /// `n: T.int32`: the variable of a scalar parameter (its dtype is the parameter's).
    pub scalar: Option<VarId>,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Kernel {
    pub name: String,
    pub params: Vec<Param>,
    pub buffers: Vec<Buffer>,
    pub vars: Vec<Var>,
    pub body: Vec<Stmt>,
    pub span: Span,
    /// `T.assume(cond)`: facts about the scalar parameters the kernel states, in
    /// source order; lowering uses them and every launch checks them.
    pub assumes: Vec<Expr>,
}

impl Kernel {
    pub fn buf(&self, id: BufId) -> &Buffer {
        &self.buffers[id.0 as usize]
    }
    pub fn var(&self, id: VarId) -> &Var {
        &self.vars[id.0 as usize]
    }
}
