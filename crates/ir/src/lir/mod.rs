//! The lowered per-thread IR (LIR): what every thread of every CTA executes.
//!
//! `lower` produces it; `cuda` prints it as CUDA C++ and `sim` executes it on
//! the CPU, so the simulator checks exactly the code the GPU runs. It is
//! deliberately small and explicit: flat element-indexed buffers, scalar and
//! vector memory operations, structured control flow, barriers, and the
//! warp-collective and asynchronous instructions tile ops need. There are no
//! layouts, no tile calls, no exec scopes left.
//!
//! Instructions come in families, each in its own module with its types and
//! one [`Instr`] implementation — its name, target, operands, buffers, typing
//! rules and pseudo-code — from which the checker ([`LKernel::validate`]), the
//! printer ([`print`](mod@print)), the traffic count and every generic walk derive; the
//! families are listed once ([`for_each_family!`](crate::for_each_family)), and
//! `docs/lir.md` §4 has the recipe for a new one:
//! * structured statements (this module, [`check`], [`print`](mod@print)): `let`, `for`, `if`, comments;
//! * [`memory`] ([`MemOp`]): scalar `Store` (loads are expressions), `VecCopy`, and PTX
//!   vector loads/stores between registers and memory with cache qualifiers ([`PtxVec`]);
//! * [`pair`] ([`PairOp`]): packed 16-bit pair arithmetic (`Packed2`) and pair conversions (`Cast2`);
//! * [`sync`] ([`SyncOp`]): `__syncthreads`, `__syncwarp`, named `bar.sync` / `bar.arrive`, `setmaxnreg`;
//! * [`matrix`]: warp-collective fragment instructions ([`MatrixOp`]): `ldmatrix`/`stmatrix`
//!   ([`MatrixMove`], one instruction with a direction) and tensor-core `mma.sync` ([`Mma`]);
//!   with [`wgmma`], Hopper's warpgroup `wgmma.mma_async` ([`Wgmma`]) and its `fence` /
//!   `commit_group` / `wait_group` ([`WgmmaSync`]);
//! * [`collective`]: warp shuffles with a member mask and width ([`CollectiveOp`]);
//! * [`asynch`]: `cp.async`, commit/wait groups, mbarriers, proxy fences, TMA, bulk copies ([`AsyncOp`]);
//! * [`bounds`]: per-dimension bounds assertions on a region of a logical shape
//!   ([`BoundsCheck`]), which the simulator checks and the GPU does not;
//! * [`debug`]: `printf` from a kernel ([`DebugOp`]).
//!
//! Arithmetic with a stated rounding is an expression ([`round`]: `LExpr::Rounded`,
//! fused `fma`, directed `add.rz`, `cvt.rp<bfloat16>`; `docs/numerics.md`).
//!
//! Typing rules (checked by [`LKernel::validate`]):
//! * every expression has a [`DType`] ([`LKernel::dtype_of`]); binary arithmetic
//!   needs equal operand types, comparisons give `Bool`;
//! * indices are `I32` or `I64` (`I64` whenever a buffer has ≥ 2^31 elements);
//! * `VecCopy` moves `lanes` consecutive elements of the same dtype; `lanes ×
//!   bits ∈ {8, 16, 32, 64, 128}` and both element indices are multiples of `lanes`
//!   (the byte address is then naturally aligned, since every array is 16-B aligned).

pub mod asynch;
pub mod bounds;
pub mod check;
pub mod collective;
pub mod debug;
pub mod instr;
pub mod launch;
pub mod matrix;
pub mod memory;
pub mod pair;
pub mod print;
pub mod round;
pub mod shared;
pub mod sync;
pub mod tmap;
pub mod wgmma;
pub mod wgmma_fences;

pub use asynch::{cache_policy, AsyncOp, Mbar, TmaCopy, GROUP_SYNC_MAX, MBAR_MAX_COUNT};
pub use bounds::BoundsCheck;
pub use collective::{CollectiveOp, ShuffleMode};
pub use debug::DebugOp;
pub use instr::{Accesses, Instr};
pub use launch::{LaunchCheck, LaunchError, ParamRef, ScalarParam, ScalarValue, SymExpr, SymOp};
pub use matrix::{MatrixDir, MatrixMove, MatrixOp, Mma, MmaIn, MmaKind, MmaOperand, MmaShape};
pub use memory::{ptx_form, ptx_instruction, AtomicOp, CacheHint, LoadHints, MemOp, PtxDir, PtxVec, ATOMIC_TYPES};
pub use pair::{PackedOp, PairOp, PairSrc};
pub use round::{RoundMode, RoundOp};
pub use shared::SharedLayout;
pub use sync::SyncOp;
pub use tmap::{TensorMap, TmapDtype, TmapId};
pub use wgmma::{Major, SmemDesc, Wgmma, WgmmaA, WgmmaIn, WgmmaKind, WgmmaSwizzle, WgmmaSync};
pub use wgmma_fences::WgmmaFences;

use crate::dtype::DType;
use crate::hir::{MathFn, UnOp};
use crate::span::Span;
use crate::target::Arch;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LBufId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LVarId(pub u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Space {
    Global,
    Shared,
    Local,
}

/// A flat array.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LBuf {
    /// The source name (`A`, `A_smem`, `R`).
    pub name: String,
    pub dtype: DType,
    pub space: Space,
    /// Number of elements.
    pub elems: i64,
    /// The logical shape in the source, for launch metadata and comments.
    pub shape: Vec<i64>,
    /// Shared memory declared `extern __shared__` (from `shared.dyn`).
    pub dynamic: bool,
    /// A global buffer whose dim 0 is a run-time value ([`launch`]): its rows as an
    /// expression of the scalar parameters. `shape[0]` and `elems` are then the bound
    /// lowering reasoned with (≥ 2^31 elements, so indices are 64-bit), not a size.
    pub dyn_rows: Option<SymExpr>,
    /// A global buffer with run-time strides (`strides=` of expressions): the element
    /// stride of each dim, expressions of the scalar parameters, constants once a
    /// launch specialized the kernel ([`launch`]), when `elems` becomes the span
    /// `1 + Σ (shape[d] - 1) · stride[d]`. `None`: row-major, `elems` elements.
    pub strides: Option<Vec<SymExpr>>,
    /// A shared array's start is a multiple of this many bytes beyond its space's
    /// default ([`LBuf::align_bytes`]): the repeat of a swizzle a TMA copy applies
    /// to it (0: the default).
    pub align: u32,
}

impl LBuf {
    /// `elems` elements of `dtype` in `space`, one-dimensional and of static
    /// size: what lowering's temporaries and most hand-built kernels need.
    pub fn flat(name: &str, dtype: DType, space: Space, elems: i64) -> LBuf {
        LBuf {
            name: name.into(),
            dtype,
            space,
            elems,
            shape: vec![elems],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        }
    }

    /// The bytes the array's start is a multiple of: 16 for every array, 128 in
    /// dynamic shared memory (`docs/tile-primitives.md` §2.7), more when `align` asks.
    pub fn align_bytes(&self) -> u32 {
        let base =
            if self.dynamic { crate::target::DYN_SMEM_ALIGN as u32 } else { crate::target::SMEM_ARRAY_ALIGN as u32 };
        base.max(self.align)
    }
    /// A thread's register array of `elems` elements (a variant's temporary).
    pub fn local(name: &str, dtype: DType, elems: i64) -> LBuf {
        LBuf::flat(name, dtype, Space::Local, elems)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LVar {
    pub name: String,
    pub dtype: DType,
}

/// Hardware index registers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Special {
    ThreadIdx(u8),
    BlockIdx(u8),
}

/// Binary operators. `Div`/`Rem` have C semantics (truncation for integers);
/// `FloorDiv`/`FloorMod` have Python semantics and appear only where an operand
/// may be negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum LBinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    FloorDiv,
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

impl LBinOp {
    pub fn is_compare(self) -> bool {
        matches!(self, LBinOp::Eq | LBinOp::Ne | LBinOp::Lt | LBinOp::Le | LBinOp::Gt | LBinOp::Ge)
    }
    pub fn is_logic(self) -> bool {
        matches!(self, LBinOp::And | LBinOp::Or)
    }

    /// C's infix spelling and precedence level (higher binds tighter: `||` 2 to `*` 11, leaving
    /// 1 for the conditional operator and 12+ for unary and postfix forms, as the printers of
    /// the LIR and of CUDA rank them); `None` where the operator is printed as a call.
    pub fn c_infix(self) -> Option<(&'static str, u8)> {
        use LBinOp::*;
        Some(match self {
            Mul => ("*", 11),
            Div => ("/", 11),
            Rem => ("%", 11),
            Add => ("+", 10),
            Sub => ("-", 10),
            Shl => ("<<", 9),
            Shr => (">>", 9),
            Lt => ("<", 8),
            Le => ("<=", 8),
            Gt => (">", 8),
            Ge => (">=", 8),
            Eq => ("==", 7),
            Ne => ("!=", 7),
            BitAnd => ("&", 6),
            BitXor => ("^", 5),
            BitOr => ("|", 4),
            And => ("&&", 3),
            Or => ("||", 2),
            FloorDiv | FloorMod | Min | Max => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum LExpr {
    Int(i64, DType),
    Float(f64, DType),
    Bool(bool),
    Var(LVarId),
    Special(Special),
    Bin(LBinOp, Box<LExpr>, Box<LExpr>),
    Un(UnOp, Box<LExpr>),
    Cast(DType, Box<LExpr>),
    Select(Box<LExpr>, Box<LExpr>, Box<LExpr>),
    Math(MathFn, Vec<LExpr>),
    /// `op` on the operands, rounded once in the given mode ([`round`]).
    Rounded(RoundOp, RoundMode, Vec<LExpr>),
    /// Scalar element load `buf[index]`.
    Load(LBufId, Box<LExpr>),
}

impl LExpr {
    pub fn i32(v: i64) -> LExpr {
        LExpr::Int(v, DType::I32)
    }
    pub fn bin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
        LExpr::Bin(op, Box::new(a), Box::new(b))
    }

    /// Calls `f` on this expression and every subexpression, parents first.
    pub fn walk(&self, f: &mut dyn FnMut(&LExpr)) {
        f(self);
        match self {
            LExpr::Int(..) | LExpr::Float(..) | LExpr::Bool(_) | LExpr::Var(_) | LExpr::Special(_) => {}
            LExpr::Bin(_, a, b) => {
                a.walk(f);
                b.walk(f);
            }
            LExpr::Un(_, a) | LExpr::Cast(_, a) | LExpr::Load(_, a) => a.walk(f),
            LExpr::Select(c, a, b) => {
                c.walk(f);
                a.walk(f);
                b.walk(f);
            }
            LExpr::Math(_, args) | LExpr::Rounded(_, _, args) => args.iter().for_each(|a| a.walk(f)),
        }
    }
}

/// Generates [`LStmtKind`]: the structured statements, then one variant per
/// instruction family of [`for_each_family!`](crate::for_each_family), and its
/// [`LStmtKind::instr`].
macro_rules! statement_kinds {
    ($($(#[$doc:meta])* $family:ident($ty:ty),)*) => {
        #[derive(Clone, Debug, PartialEq, Serialize)]
        pub enum LStmtKind {
            /// Declares `var` and initialises it (immutable afterwards).
            Let { var: LVarId, value: LExpr },
            For { var: LVarId, begin: LExpr, extent: LExpr, unroll: bool, body: Vec<LStmt> },
            If { cond: LExpr, then_body: Vec<LStmt>, else_body: Vec<LStmt> },
            /// `while (cond) { body }`: `cond` evaluated before every trip.
            While { cond: LExpr, body: Vec<LStmt> },
            /// A human-readable note carried into the CUDA (e.g. which variant lowered a tile call).
            Comment(String),
            $($(#[$doc])* $family($ty),)*
        }

        impl LStmtKind {
            /// The instruction, described by its family ([`Instr`]); `None` for the
            /// structured statements (`let`, `for`, `if`, comments).
            pub fn instr(&self) -> Option<&dyn Instr> {
                match self {
                    $(LStmtKind::$family(i) => Some(i),)*
                    LStmtKind::Let { .. }
                    | LStmtKind::For { .. }
                    | LStmtKind::If { .. }
                    | LStmtKind::While { .. }
                    | LStmtKind::Comment(_) => None,
                }
            }
        }
    };
}

crate::for_each_family!(statement_kinds);

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LStmt {
    pub kind: LStmtKind,
    /// The source construct this statement implements.
    pub span: Span,
}

impl LStmt {
    pub fn new(kind: LStmtKind, span: Span) -> LStmt {
        LStmt { kind, span }
    }
}

impl LStmtKind {
    /// The oldest target this instruction exists on (nested bodies not included);
    /// `buf` gives the element type of an array.
    pub fn min_arch(&self, buf: &dyn Fn(LBufId) -> DType) -> Arch {
        self.instr().map_or(Arch::MIN, |i| i.min_arch(buf))
    }

    /// The expressions this statement evaluates itself (nested bodies not included).
    pub fn operands(&self) -> Vec<&LExpr> {
        match self {
            LStmtKind::Let { value, .. } => vec![value],
            LStmtKind::For { begin, extent, .. } => vec![begin, extent],
            LStmtKind::If { cond, .. } | LStmtKind::While { cond, .. } => vec![cond],
            LStmtKind::Comment(_) => vec![],
            _ => self.instr().map_or_else(Vec::new, |i| i.operands()),
        }
    }

    /// `(read, written)`: the buffers this statement itself reads and writes as
    /// operands (loads inside its expressions and nested bodies not included).
    pub fn accesses(&self) -> Accesses {
        self.instr().map_or_else(|| (vec![], vec![]), |i| i.accesses())
    }

    /// The variable this statement declares (`let`, a shuffle), if any.
    pub fn defines(&self) -> Option<LVarId> {
        match self {
            LStmtKind::Let { var, .. } => Some(*var),
            _ => self.instr().and_then(|i| i.defines()),
        }
    }

    /// The nested statement lists (loop body, both branches).
    pub fn bodies(&self) -> Vec<&[LStmt]> {
        match self {
            LStmtKind::For { body, .. } | LStmtKind::While { body, .. } => vec![body],
            LStmtKind::If { then_body, else_body, .. } => vec![then_body, else_body],
            _ => vec![],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LKernel {
    pub name: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    /// Kernel parameters in order; each is a `Global` buffer.
    pub params: Vec<LBufId>,
    /// Scalar parameters ([`launch`]): variables in scope in the whole body, each with
    /// its position in the signature ([`LKernel::signature`]).
    pub scalars: Vec<ScalarParam>,
    /// Grid dimensions that are expressions of the scalar parameters (`grid` then holds
    /// CUDA's limit for that dimension, the bound lowering reasoned with).
    pub grid_dims: [Option<SymExpr>; 3],
    /// Where the grid is declared (`T.cta_id`), for a launch whose grid is invalid.
    pub grid_span: Span,
    /// Conditions on the scalar arguments every launch checks first ([`LaunchCheck`]).
    pub checks: Vec<LaunchCheck>,
    /// TMA tensor maps, passed after the other parameters ([`tmap`]).
    pub tmaps: Vec<TensorMap>,
    /// CTAs per cluster in each dimension (`__cluster_dims__`; `[1, 1, 1]`: no clusters).
    pub cluster: [u32; 3],
    pub bufs: Vec<LBuf>,
    pub vars: Vec<LVar>,
    pub body: Vec<LStmt>,
}

impl LKernel {
    /// How far a libm-style function (`exp`, `log2`, `tanh`, ..., whose CUDA and host results
    /// differ in the last bits, docs/numerics.md §7) spreads in this kernel: not at all (none,
    /// or each result stored as computed), through the arithmetic of the same expression
    /// (`1 / (1 + exp(-x))`: [`InexactMath::Composed`]), or through a reduction across
    /// threads (sums and the quotients by them, softmax: [`InexactMath::Reduced`]).
    pub fn inexact_math(&self) -> InexactMath {
        fn any(body: &[LStmt], f: &dyn Fn(&LStmt) -> bool) -> bool {
            body.iter().any(|s| f(s) || s.kind.bodies().into_iter().any(|b| any(b, f)))
        }
        let exprs = |s: &LStmt, f: &dyn Fn(&LExpr) -> bool| s.kind.operands().into_iter().any(f);
        let inexact = |s: &LStmt| {
            exprs(s, &|e| {
                let mut hit = false;
                e.walk(&mut |x| hit |= matches!(x, LExpr::Math(f, _) if f.is_inexact()));
                hit
            })
        };
        let reduces = |s: &LStmt| matches!(s.kind, LStmtKind::Collective(_));
        let wide = |s: &LStmt| {
            exprs(s, &|e| {
                let mut hit = false;
                e.walk(&mut |x| hit |= matches!(x, LExpr::Math(f, _) if f.differs_widely()));
                hit
            })
        };
        if any(&self.body, &inexact) && any(&self.body, &reduces) {
            InexactMath::Reduced
        } else if any(&self.body, &|s| exprs(s, &|e| composed(e, false))) || any(&self.body, &wide) {
            InexactMath::Composed
        } else {
            InexactMath::None
        }
    }

    /// A kernel with this launch shape and nothing else yet: the start of a
    /// kernel built by hand (tests, tools), which then adds buffers and statements.
    pub fn new(name: &str, grid: [u32; 3], block: [u32; 3]) -> LKernel {
        LKernel {
            name: name.into(),
            grid,
            block,
            params: vec![],
            scalars: vec![],
            grid_dims: [None, None, None],
            grid_span: Span::default(),
            checks: vec![],
            tmaps: vec![],
            cluster: [1, 1, 1],
            bufs: vec![],
            vars: vec![],
            body: vec![],
        }
    }

    /// CTAs per cluster.
    pub fn cluster_size(&self) -> u32 {
        self.cluster.iter().product()
    }
    pub fn buf(&self, id: LBufId) -> &LBuf {
        &self.bufs[id.0 as usize]
    }
    pub fn var(&self, id: LVarId) -> &LVar {
        &self.vars[id.0 as usize]
    }
    pub fn threads_per_cta(&self) -> u32 {
        self.block.iter().product()
    }

    /// The oldest target statement `s` runs on: its instruction's and that of the
    /// rounded arithmetic in its operands.
    pub fn min_arch(&self, s: &LStmt) -> Arch {
        let mut arch = s.kind.min_arch(&|b| self.buf(b).dtype);
        for e in s.kind.operands() {
            e.walk(&mut |x| {
                if let LExpr::Rounded(op, _, args) = x {
                    let need = round::rounded_min_arch(*op, args.first().map_or(DType::F32, |a| self.dtype_of(a)));
                    if !arch.supports(need) {
                        arch = need;
                    }
                }
            });
        }
        arch
    }

    /// The first statement (in program order) whose instruction `arch` lacks.
    pub fn first_unsupported(&self, arch: Arch) -> Option<&LStmt> {
        fn walk<'a>(k: &LKernel, b: &'a [LStmt], arch: Arch) -> Option<&'a LStmt> {
            b.iter().find_map(|s| {
                if !arch.supports(k.min_arch(s)) {
                    return Some(s);
                }
                s.kind.bodies().into_iter().find_map(|b| walk(k, b, arch))
            })
        }
        walk(self, &self.body, arch)
    }

    /// The type of an expression in this kernel.
    pub fn dtype_of(&self, e: &LExpr) -> DType {
        expr_dtype(e, &|v| self.var(v).dtype, &|b| self.buf(b).dtype)
    }
}

/// How an inexact function's last-bit differences spread through a kernel ([`LKernel::inexact_math`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InexactMath {
    None,
    /// An inexact function's result is an operand of more arithmetic in its expression, or
    /// the function is one whose CUDA and host results may lie 4 ulp apart ([`MathFn::differs_widely`]).
    Composed,
    /// The kernel also reduces across threads what such functions compute.
    Reduced,
}

/// Whether an inexact function in `e` is an operand of further arithmetic (`operand`: `e`
/// itself is one); negations and casts pass their operand's place through.
fn composed(e: &LExpr, operand: bool) -> bool {
    match e {
        LExpr::Math(f, args) => (f.is_inexact() && operand) || args.iter().any(|a| composed(a, true)),
        LExpr::Un(_, a) | LExpr::Cast(_, a) => composed(a, operand),
        LExpr::Bin(_, a, b) => composed(a, true) || composed(b, true),
        LExpr::Select(c, a, b) => composed(c, true) || composed(a, operand) || composed(b, operand),
        LExpr::Rounded(_, _, args) => args.iter().any(|a| composed(a, true)),
        LExpr::Load(_, i) => composed(i, true),
        LExpr::Int(..) | LExpr::Float(..) | LExpr::Bool(_) | LExpr::Var(_) | LExpr::Special(_) => false,
    }
}

/// The type of an expression by the LIR typing rules, given the types of its
/// variables and buffers (a kernel under construction has no `LKernel` yet).
pub fn expr_dtype(e: &LExpr, var: &dyn Fn(LVarId) -> DType, buf: &dyn Fn(LBufId) -> DType) -> DType {
    match e {
        LExpr::Int(_, t) | LExpr::Float(_, t) | LExpr::Cast(t, _) => *t,
        LExpr::Bool(_) => DType::Bool,
        LExpr::Var(v) => var(*v),
        LExpr::Special(_) => DType::I32,
        LExpr::Bin(op, a, _) => {
            if op.is_compare() || op.is_logic() {
                DType::Bool
            } else {
                expr_dtype(a, var, buf)
            }
        }
        LExpr::Un(UnOp::Not, _) => DType::Bool,
        LExpr::Un(_, a) | LExpr::Select(_, a, _) => expr_dtype(a, var, buf),
        LExpr::Math(_, args) => args.first().map_or(DType::F32, |a| expr_dtype(a, var, buf)),
        LExpr::Rounded(RoundOp::Cvt(t), ..) => *t,
        LExpr::Rounded(_, _, args) => args.first().map_or(DType::F32, |a| expr_dtype(a, var, buf)),
        LExpr::Load(b, _) => buf(*b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hir::MathFn;

    /// `B[tid] = value`, one f32 buffer pair.
    fn kernel(value: LExpr, reduce: bool) -> LKernel {
        let tid = LExpr::Special(Special::ThreadIdx(0));
        let mut body = vec![];
        if reduce {
            body.push(LStmt::new(
                LStmtKind::Collective(CollectiveOp::Shuffle {
                    var: LVarId(0),
                    value: LExpr::Float(1.0, DType::F32),
                    mode: ShuffleMode::Bfly,
                    lane_or_delta: LExpr::i32(1),
                    width: 32,
                    mask: u32::MAX,
                }),
                Span::default(),
            ));
        }
        body.push(LStmt::new(LStmtKind::Memory(MemOp::Store { buf: LBufId(1), index: tid, value }), Span::default()));
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![LBuf::flat("A", DType::F32, Space::Global, 32), LBuf::flat("B", DType::F32, Space::Global, 32)],
            vars: vec![LVar { name: "s".into(), dtype: DType::F32 }],
            body,
            ..LKernel::new("k", [1, 1, 1], [32, 1, 1])
        }
    }

    #[test]
    fn inexact_math_spreads_by_composition_and_reduction() {
        let x = || LExpr::Load(LBufId(0), Box::new(LExpr::Special(Special::ThreadIdx(0))));
        let exp = |a: LExpr| LExpr::Math(MathFn::Exp, vec![a]);
        let one = || LExpr::Float(1.0, DType::F32);
        let sigmoid = LExpr::bin(LBinOp::Div, one(), LExpr::bin(LBinOp::Add, one(), exp(x())));
        assert_eq!(kernel(exp(x()), false).inexact_math(), InexactMath::None);
        assert_eq!(kernel(LExpr::Cast(DType::F32, Box::new(exp(x()))), false).inexact_math(), InexactMath::None);
        assert_eq!(kernel(sigmoid.clone(), false).inexact_math(), InexactMath::Composed);
        // sqrt is exact, but its argument's difference passes through it.
        let sqrt = LExpr::Math(MathFn::Sqrt, vec![exp(x())]);
        assert_eq!(kernel(sqrt, false).inexact_math(), InexactMath::Composed);
        assert_eq!(kernel(LExpr::Math(MathFn::Sqrt, vec![x()]), false).inexact_math(), InexactMath::None);
        assert_eq!(kernel(sigmoid, true).inexact_math(), InexactMath::Reduced);
        // tanhf and erff are each within 2 ulp of the exact value on both sides: 4 apart.
        let tanh = LExpr::Math(MathFn::Tanh, vec![x()]);
        assert_eq!(kernel(tanh, false).inexact_math(), InexactMath::Composed);
    }
}
