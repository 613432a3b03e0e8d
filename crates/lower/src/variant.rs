//! The variant API: what a lowering variant is and what it may use. A
//! [`Variant`] plans (`plan`: accept with a [`Plan`] or decline with a typed
//! [`Decline`] naming the predicate that failed) and emits LIR (`emit`, into an
//! [`Emitter`]). Everything a variant decides is decided in `plan`: once a
//! plan is accepted, `emit` cannot decline — an emit failure is a [`Bug`],
//! reported as an internal error at the call (exit 2), never a fall-through to
//! the next, slower variant. A variant below its [`Variant::min_arch`]
//! declines without planning. A *forced-only* variant
//! ([`Variant::forced_only`]: the fixed-width `vec_16b` … `vec_256b`) is tried
//! only when `dispatch=` names it.
//!
//! This layer sits below every family and below the selection loop
//! (`select`), the CUDA registry (`registry`) and the statement lowerer: it
//! imports none of them. What it offers variants: the call context
//! ([`CallCx`]: the kernel, the call, its scope and the facts at the call), the
//! emitter (fresh variables, addresses through layouts, thread ids, scope
//! barriers) and the [`Registry`] container a family registers into.
//!
//! A new variant is a new module registered by its family's `register`;
//! nothing else changes.

use crate::affine::{Affine, Interval, VarBounds};
use crate::build::Builder;
use crate::env::Env;
use crate::options::LowerOptions;
use crate::scope::{Facts, ScopeView, TidKind};
use std::any::{Any, TypeId};
use tirx_ir::hir::BarrierKind;
use tirx_ir::hir::{BufId, BufferRegion, Expr, Kernel, TileArg, TileCall, TileOp, VarId};
use tirx_ir::lir::{LBufId, LExpr, LStmt, LStmtKind, LVarId, SyncOp};
use tirx_ir::op::{ConfigKey, Family, Slot};
use tirx_ir::{Arch, DType, Span};
use tirx_layout::{Axis, ExecScope};

/// A family's decline predicates: a fieldless enum, declared with
/// `decline_rules!` in the family's own module, whose variants name what
/// failed. The variant API's own are [`CommonRule`].
pub trait RuleKind: Copy + std::fmt::Debug + 'static {
    /// The snake_case name explain and its JSON show (`divides_thread_cnt`).
    fn name(self) -> &'static str;
}

/// The predicate a decline failed, of whichever family declared it: tests and
/// tools match on it (`rule == CopyRule::Partition`), `tirx explain` shows its
/// [`Rule::name`] (`[divides_thread_cnt]`).
#[derive(Clone, Copy)]
pub struct Rule {
    kind: TypeId,
    /// The declaring enum's name (`CopyRule`), for `Debug`.
    set: &'static str,
    name: &'static str,
}

impl Rule {
    /// The snake_case name explain and its JSON show.
    pub fn name(self) -> &'static str {
        self.name
    }
}

impl<R: RuleKind> From<R> for Rule {
    fn from(r: R) -> Rule {
        let set = std::any::type_name::<R>().rsplit("::").next().unwrap_or("Rule");
        Rule { kind: TypeId::of::<R>(), set, name: r.name() }
    }
}

impl PartialEq for Rule {
    fn eq(&self, o: &Rule) -> bool {
        (self.kind, self.name) == (o.kind, o.name)
    }
}

impl Eq for Rule {}

impl std::hash::Hash for Rule {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.kind, self.name).hash(h)
    }
}

impl<R: RuleKind> PartialEq<R> for Rule {
    fn eq(&self, r: &R) -> bool {
        *self == Rule::from(*r)
    }
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}({})", self.set, self.name)
    }
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Declares a family's decline predicates: `Name = "snake_name",` per rule,
/// each with its doc comment.
macro_rules! decline_rules {
    ($(#[$doc:meta])* $vis:vis enum $set:ident { $($(#[$vdoc:meta])* $rule:ident = $name:literal,)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        $vis enum $set {
            $($(#[$vdoc])* $rule,)*
        }

        impl $crate::variant::RuleKind for $set {
            fn name(self) -> &'static str {
                match self {
                    $($set::$rule => $name,)*
                }
            }
        }
    };
}
pub(crate) use decline_rules;

decline_rules! {
    /// The predicates the variant API and its services check, shared by every family: the target, the call's configuration, scope and operands.
    pub enum CommonRule {
        /// An element cannot be addressed through its buffer's layout.
        Address = "address",
        /// Some threads of the call's scope are inactive (an `if` on scope ids).
        AllThreadsActive = "all_threads_active",
        /// The target is older than the variant or instruction needs.
        Arch = "arch",
        /// A call config value the variant cannot honour.
        Config = "config",
        /// An element type the variant cannot move or compute on.
        Dtype = "dtype",
        /// The call's execution scope is not one the variant supports.
        ExecScope = "exec_scope",
        /// An operand's layout has a form the variant cannot address (thread axes, replicas, swizzled global).
        Layout = "layout",
        /// An operand is missing, not allocated here, or not lowerable.
        Operand = "operand",
        /// An operand is in a memory scope the variant does not accept.
        OperandScope = "operand_scope",
        /// The call's operands do not match the op's signature.
        Parse = "parse",
        /// The memory scopes of the operands are not a pair the variant moves.
        ScopeAllowed = "scope_allowed",
        /// The region cannot be sliced out of the layout.
        Slice = "slice",
        /// An operand has run-time strides, which only tensor-map variants address.
        RuntimeStride = "runtime_stride",
        /// A region begin that is not affine, or falls on a split dim.
        SymbolicBegin = "symbolic_begin",
        /// The threads of one instance disagree on the region.
        UniformRegion = "uniform_region",
    }
}

/// Why a variant does not apply: the rule that failed and a reason a user can act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decline {
    pub rule: Rule,
    pub reason: String,
}

impl Decline {
    pub fn new(rule: impl Into<Rule>, reason: impl Into<String>) -> Decline {
        Decline { rule: rule.into(), reason: reason.into() }
    }
    /// The target is older than what `what` needs.
    pub fn arch(what: &str, min: Arch, target: Arch) -> Decline {
        Decline::new(CommonRule::Arch, format!("{what} needs {min}; target is {target}"))
    }
}

/// An emit that failed after its plan was accepted: a bug in the variant
/// (its `plan` missed a check), reported as an internal error at the call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bug(pub String);

/// Helpers shared by `plan` and `emit` return [`Decline`]; inside `emit` the
/// same failure is a bug, so `?` converts.
impl From<Decline> for Bug {
    fn from(d: Decline) -> Bug {
        Bug(format!("{} [{}]", d.reason, d.rule))
    }
}

/// An accepted plan: what explain reports, and the variant's own data for `emit`.
pub struct Plan {
    /// One line for explain (`vec 4 × 32 threads, 8 rounds`).
    pub summary: String,
    pub vec: Option<u32>,
    pub rounds: Option<u64>,
    /// What limited the plan (e.g. why a wider vector was not possible).
    pub limits: Vec<String>,
    /// How the plan matched the operands (e.g. each gemm operand's fragment), one line each.
    pub notes: Vec<String>,
    pub data: Box<dyn Any>,
}

impl Plan {
    pub fn new(summary: impl Into<String>, data: impl Any) -> Plan {
        Plan { summary: summary.into(), vec: None, rounds: None, limits: vec![], notes: vec![], data: Box::new(data) }
    }
    /// The variant's data (a plan of another variant is a bug).
    pub fn data<T: 'static>(&self, who: &'static str) -> Result<&T, Bug> {
        self.data.downcast_ref::<T>().ok_or_else(|| Bug(format!("{who} got a plan it did not make")))
    }
}

pub trait Variant: Sync {
    fn name(&self) -> &'static str;
    fn priority(&self) -> u8;
    /// The family of ops it lowers (`tirx_ir::op`).
    fn family(&self) -> Family;
    /// Whether it lowers `op` of its family (all of them unless it says otherwise:
    /// `gemm` and `gemm_async` share the gemm family but not its variants).
    fn lowers(&self, _op: TileOp) -> bool {
        true
    }
    /// The config keys it reads; a call with any other key is declined
    /// (`CommonRule::Config`), so no key is silently ignored.
    fn honours(&self) -> &'static [ConfigKey] {
        &[]
    }
    /// The oldest target this variant can emit for (its newest instruction's minimum).
    fn min_arch(&self) -> Arch {
        Arch::MIN
    }
    /// Accepts with everything `emit` needs, or declines with the failed predicate.
    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline>;
    /// Emits the accepted `plan`; an error here is a bug, never a decline.
    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug>;
    /// Whether it addresses global operands with run-time strides (`strides=` of
    /// expressions), whose layouts are placeholders: only variants that address
    /// global memory through a tensor map built at launch do; every other variant
    /// declines such an operand before planning ([`CommonRule::RuntimeStride`]).
    fn runtime_strides(&self) -> bool {
        false
    }
    /// Picking this variant deserves a warning (slow catch-alls).
    fn warns(&self) -> bool {
        false
    }
    /// Tried only when `dispatch=` names it (a fixed choice the user makes, never
    /// an automatic one); otherwise not planned and not shown.
    fn forced_only(&self) -> bool {
        false
    }
}

/// A name `dispatch=` may give for several variants of one family, tried in
/// the usual order (`vec_auto`: the reference's automatic vectorized copies).
pub struct Group {
    pub name: &'static str,
    pub family: Family,
    pub members: &'static [&'static str],
}

/// What [`Emitter::scope_barrier`] emits for a call of scope `kind`, for explain.
pub fn barrier_text(kind: ExecScope) -> &'static str {
    match kind {
        ExecScope::Cta => "__syncthreads()",
        ExecScope::Warp => "__syncwarp()",
        ExecScope::Warpgroup => "bar.sync 1 + wg_id, 128 (the warpgroup's own named barrier)",
        _ => "none (one thread)",
    }
}

/// The scopes whose threads can cooperate on one call (clusters cannot, yet).
pub const COOPERATIVE_SCOPES: &[ExecScope] =
    &[ExecScope::Thread, ExecScope::Warp, ExecScope::Warpgroup, ExecScope::Cta];

/// What a variant sees of one tile call.
pub struct CallCx<'a> {
    pub kernel: &'a Kernel,
    pub call: &'a TileCall,
    pub scope: &'a ScopeView,
    pub opts: &'a LowerOptions,
    pub(crate) env: &'a Env,
    /// What is known at the call: active threads and loop-variable ranges (§1.3).
    pub(crate) facts: &'a Facts,
}

impl<'a> CallCx<'a> {
    /// The operand in `slot` of the tile-op table (`&op::PREDICATE`), when the
    /// op has that slot and the call gives it.
    pub fn arg(&self, slot: &Slot) -> Option<&'a TileArg> {
        self.call.arg(slot)
    }
    /// The operand in `slot`, if it is a region.
    pub fn region(&self, slot: &Slot) -> Option<&'a BufferRegion> {
        self.call.region(slot)
    }
    /// The operand in `slot`, if it is a scalar.
    pub fn scalar(&self, slot: &Slot) -> Option<&'a Expr> {
        self.call.scalar(slot)
    }
    /// The boolean attribute in `slot` (`transpose_A=True`); false when absent.
    pub fn flag(&self, slot: &Slot) -> bool {
        self.call.flag(slot)
    }
    pub fn buf(&self, id: BufId) -> &'a tirx_ir::hir::Buffer {
        self.kernel.buf(id)
    }
    /// The scope checks every cooperative variant starts with: the call's scope is
    /// one of `scopes` and all of its threads are active. Returns how many threads
    /// cooperate on one instance of the call.
    pub fn cooperating_threads(&self, scopes: &[ExecScope]) -> Result<i64, Decline> {
        let kind = self.scope.kind;
        let unsupported = || {
            let names: Vec<&str> = scopes.iter().map(|s| s.name()).collect();
            Decline::new(CommonRule::ExecScope, format!("unsupported exec_scope {kind} (need {})", names.join(", ")))
        };
        if !scopes.contains(&kind) {
            return Err(unsupported());
        }
        self.scope.all_threads_active().map_err(|m| Decline::new(CommonRule::AllThreadsActive, m))?;
        self.scope.thread_count().ok_or_else(unsupported)
    }

    /// Decomposes an index expression into constant + Σ coefficient·term
    /// (terms: variables, `affine // c`, `affine % c`); a variable with a
    /// single value at the call (`w` inside `if w == 1:`) is that constant.
    pub fn affine(&self, e: &Expr) -> Option<Affine> {
        let pinned = |v| self.var_bounds(v).filter(|b| b.lo == b.hi).map(|b| b.lo);
        crate::expr::affine(self.env, e)?.substitute(&pinned)
    }

    /// The range of variable `v` at the call (scope ids over the narrowed
    /// active set, loop variables over their narrowed extents).
    pub fn var_bounds(&self, v: VarId) -> Option<VarBounds> {
        self.env.var_bounds(self.facts, v)
    }

    /// The largest constant every value of `a` is a multiple of (alignment proofs):
    /// `Affine::divisor` with the divisibility `T.assume` states of scalar parameters.
    pub fn divisor(&self, a: &Affine) -> i64 {
        a.divisor_with(&|v| self.env.unit(v))
    }

    /// The values an affine index takes at the call, from [`Self::var_bounds`].
    pub fn range(&self, a: &Affine) -> Option<Interval> {
        a.range(&|v| self.var_bounds(v))
    }
}

/// Where a variant writes its LIR.
pub struct Emitter<'a> {
    pub(crate) b: &'a mut Builder,
    pub(crate) env: &'a Env,
    pub(crate) kernel: &'a Kernel,
    pub span: Span,
    pub stmts: Vec<LStmt>,
}

impl Emitter<'_> {
    pub fn push(&mut self, kind: LStmtKind) {
        self.stmts.push(LStmt::new(kind, self.span));
    }
    pub fn builder(&self) -> &Builder {
        self.b
    }
    pub fn var(&mut self, name: &str, dtype: DType, range: Option<(i64, i64)>) -> LVarId {
        self.b.var(name, dtype, range)
    }
    /// `e` as an `i32` `let` named `name` appended to `out` (a value used more than
    /// once is computed once), unless it is already a variable or a constant.
    pub fn bind_i32(&mut self, out: &mut Vec<LStmt>, name: &str, e: LExpr) -> LExpr {
        if matches!(e, LExpr::Var(_) | LExpr::Int(..)) {
            return e;
        }
        let range = self.b.bounds(&e);
        let v = self.var(name, DType::I32, range);
        out.push(LStmt::new(LStmtKind::Let { var: v, value: e }, self.span));
        LExpr::Var(v)
    }
    /// A register array of the variant's own (a temporary), `elems` elements of `dtype`.
    pub fn local_buf(&mut self, name: &str, dtype: DType, elems: i64) -> LBufId {
        self.b.add_buf(tirx_ir::lir::LBuf::local(name, dtype, elems))
    }
    /// The thread id of a scope (a kernel-level `let`, declared once).
    pub fn thread_id(&mut self, kind: TidKind) -> LExpr {
        crate::env::thread_id(self.b, kind)
    }
    /// The executing thread's coordinate on a thread axis (`laneid` → `lane`),
    /// `None` for axes outside a CTA.
    pub fn axis_id(&mut self, axis: Axis) -> Option<LExpr> {
        use crate::build::Hw;
        let (hw, name) = match axis {
            Axis::LaneId => (Hw::Lane, "lane"),
            Axis::WarpId => (Hw::WarpId, "warp_id"),
            Axis::Tx => (Hw::Tx, "tid"),
            Axis::TidInWg => (Hw::TidInWg, "tid_in_wg"),
            Axis::WidInWg => (Hw::WarpInWg, "warp_in_wg"),
            Axis::WgId => (Hw::WgId, "wg_id"),
            _ => return None,
        };
        Some(self.b.hw(hw, name))
    }
    /// Thread-axis coordinates of the owner of `buf[idx]`.
    pub fn owner(&mut self, buf: BufId, idx: &[LExpr]) -> Result<Vec<(Axis, LExpr)>, Decline> {
        crate::addr::owner(self.kernel, self.b, buf, idx).map_err(|m| Decline::new(CommonRule::Address, m))
    }
    pub fn expr(&mut self, e: &Expr) -> Result<LExpr, Decline> {
        crate::expr::lower(self.kernel, self.env, self.b, e).map_err(|d| Decline::new(CommonRule::Operand, d.message))
    }
    /// Element index of `buf[idx]` through the buffer's layout (memory axis only).
    pub fn address(&mut self, buf: BufId, idx: &[LExpr]) -> Result<(LBufId, LExpr), Decline> {
        crate::addr::element(self.kernel, self.env, self.b, buf, idx, true)
            .map_err(|m| Decline::new(CommonRule::Address, m))
    }

    /// The barrier that ends a cooperative call of scope `kind` whose threads
    /// wrote shared memory others may read next (`docs/tile-primitives.md`
    /// §2.1): `__syncthreads()`, the warpgroup's own named barrier
    /// `bar.sync 1 + wg_id, 128` (ids never shared between warpgroups),
    /// `__syncwarp()`; none for one thread.
    pub fn scope_barrier(&mut self, kind: ExecScope) -> Option<LStmtKind> {
        match kind {
            ExecScope::Cta => Some(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta))),
            ExecScope::Warp => Some(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Warp))),
            ExecScope::Warpgroup => {
                let wg = self.axis_id(Axis::WgId)?;
                let id = self.b.add(wg, LExpr::i32(1));
                Some(LStmtKind::Sync(SyncOp::NamedBarrier { id, threads: 128 }))
            }
            _ => None,
        }
    }

    pub fn lbuf(&self, buf: BufId) -> Result<(LBufId, DType), Decline> {
        self.env.lbuf(buf).ok_or_else(|| {
            Decline::new(CommonRule::Operand, format!("buffer `{}` is not allocated here", self.kernel.buf(buf).name))
        })
    }
}

/// All registered variants and dispatch groups.
#[derive(Default)]
pub struct Registry {
    variants: Vec<Box<dyn Variant>>,
    groups: Vec<Group>,
}

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    pub fn register(&mut self, v: Box<dyn Variant>) {
        self.variants.push(v);
    }

    pub fn register_group(&mut self, g: Group) {
        self.groups.push(g);
    }

    /// The dispatch groups of `op`'s family.
    pub fn groups_of(&self, op: TileOp) -> impl Iterator<Item = &Group> {
        self.groups.iter().filter(move |g| g.family == op.family())
    }

    /// The dispatch group `name` of `op`'s family.
    pub fn group(&self, op: TileOp, name: &str) -> Option<&Group> {
        self.groups.iter().find(|g| g.name == name && g.family == op.family())
    }

    /// The registered variants (to wrap or filter them in a new registry; groups are dropped).
    pub fn into_variants(self) -> Vec<Box<dyn Variant>> {
        self.variants
    }

    /// Variants of `op` (those of its family) in trial order: priority descending, then name.
    pub fn for_op(&self, op: TileOp) -> Vec<&dyn Variant> {
        let mut v: Vec<&dyn Variant> =
            self.variants.iter().map(|b| b.as_ref()).filter(|v| v.family() == op.family() && v.lowers(op)).collect();
        v.sort_by(|a, b| b.priority().cmp(&a.priority()).then(a.name().cmp(b.name())));
        v
    }
}
