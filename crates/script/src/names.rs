//! The language's builtin names, in one table: every name of `T`, `T.cuda`, `T.ptx`, `Tx` and
//! of the modules a script imports from (`tvm.tirx.layout`, the reference's `tma_utils` and
//! `pipeline`), each with what it means to the script front end ([`Meaning`]) and what the
//! Python front end builds for it ([`Kind`], docs/python.md §2.3).
//!
//! The script's lookups ([`t_attr`], [`cuda_attr`], [`tx_attr`], [`PtxOp::from_path`],
//! [`layout_import`], ...) and its "did you mean" lists ([`script_names`]) read this table; the
//! Python package builds its `T` and `Tx` from it (`tirx._native.builtins()`). Names an enum
//! already spells — dtypes, math functions, scope ids, collectives, tile ops, axes — are taken
//! from that enum, not listed again.

use crate::value::{AllocKind, Builtin, CollKind, PtxOp, Val};
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;
use tirx_ir::hir::{AtomicOp, MathFn, TileOp};
use tirx_ir::scope_ids::KINDS;
use tirx_ir::DType;
use tirx_layout::{Axis, ExecScope, Fragment};

/// Where a name lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Namespace {
    /// `from tvm.script import tirx as T`
    T,
    /// `T.cuda`
    Cuda,
    /// `T.ptx`: the kernel's own PTX instructions, in every spelling the reference uses.
    Ptx,
    /// `from tvm.script.tirx import tile as Tx`
    Tx,
    /// `tvm.tirx.layout` (the Python package's `tirx.layout`).
    Layout,
    /// The reference's `...tile_primitive.tma_utils` modules ([`TMA_UTILS_MODULES`]).
    TmaUtils,
    /// The reference's `...lang.pipeline` modules ([`PIPELINE_MODULES`]).
    Pipeline,
}

/// Modules that hold the reference's `mma_*` helpers and `SwizzleMode`.
pub const TMA_UTILS_MODULES: [&str; 2] =
    ["tvm.tirx.cuda.tile_primitive.tma_utils", "tvm.backend.cuda.tile_primitive.tma_utils"];

/// Modules that hold the reference's `MBarrier` class.
pub const PIPELINE_MODULES: [&str; 2] = ["tvm.tirx.lang.pipeline", "tvm.backend.cuda.lang.pipeline"];

impl Namespace {
    pub const ALL: [Namespace; 7] = [
        Namespace::T,
        Namespace::Cuda,
        Namespace::Ptx,
        Namespace::Tx,
        Namespace::Layout,
        Namespace::TmaUtils,
        Namespace::Pipeline,
    ];

    /// How a kernel spells the namespace (`T.cuda`); a module by its last word (`layout`).
    pub fn path(self) -> &'static str {
        match self {
            Namespace::T => "T",
            Namespace::Cuda => "T.cuda",
            Namespace::Ptx => "T.ptx",
            Namespace::Tx => "Tx",
            Namespace::Layout => "layout",
            Namespace::TmaUtils => "tma_utils",
            Namespace::Pipeline => "pipeline",
        }
    }

    /// What a name the table does not hold is, where a kernel may write one: it passes
    /// through to the script front end, which reports it with a "did you mean". Every
    /// `T.ptx.*` path is an instruction (a statement); imports of unknown names fail at once.
    pub fn unknown_members(self) -> Option<Kind> {
        match self {
            Namespace::T | Namespace::Cuda => Some(Kind::Expression),
            Namespace::Ptx => Some(Kind::Statement),
            Namespace::Tx => Some(Kind::TileOp),
            Namespace::Layout | Namespace::TmaUtils | Namespace::Pipeline => None,
        }
    }
}

/// What the Python front end builds for a name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Holds more names (`T.cuda`, `Tx.warp`).
    Namespace,
    /// A call written where it is made, also inside a helper (`T.device_entry()`, `T.ptx.*`).
    Statement,
    /// A call that is a value (`T.cast(x, "float16")`, `s = T.cuda.warp_sum(x)`).
    Expression,
    /// Declares scope ids where it is assigned (`tid = T.thread_id([128])`).
    ScopeId,
    /// Declares a buffer where it is assigned (`A = T.match_buffer(...)`).
    Buffer,
    /// The iterator of a kernel loop (`for i in T.serial(n):`).
    Loop,
    /// A dtype: a constructor and an annotation (`T.float32(1.5)`, `x: T.float32`).
    DType,
    /// An object of the script language, declared where it is assigned (`pool = T.SMEMPool()`).
    KernelObject,
    /// A parameter or binding annotation (`T.handle`, `T.let`).
    Annotation,
    /// `@T.prim_func`.
    Decorator,
    /// A compile-time value the Python front end computes (`T.meta_var(v)`, `T.FloatImm`).
    Value,
    /// A layout builder or helper (`S`, `TileLayout`, `mma_shared_layout`).
    Layout,
    /// A thread axis of layouts (`laneid`).
    ThreadAxis,
    /// A memory axis of layouts (`m`, `TLane`).
    MemoryAxis,
    /// A tile primitive: `Tx.<op>` at thread scope, `Tx.<scope>.<op>` for every scope.
    TileOp,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Namespace => "namespace",
            Kind::Statement => "statement",
            Kind::Expression => "expression",
            Kind::ScopeId => "scope_id",
            Kind::Buffer => "buffer",
            Kind::Loop => "loop",
            Kind::DType => "dtype",
            Kind::KernelObject => "kernel_object",
            Kind::Annotation => "annotation",
            Kind::Decorator => "decorator",
            Kind::Value => "value",
            Kind::Layout => "layout",
            Kind::ThreadAxis => "thread_axis",
            Kind::MemoryAxis => "memory_axis",
            Kind::TileOp => "tile_op",
        }
    }
}

/// What a name means to the script front end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Meaning {
    /// The script resolves the name to this.
    Script(Builtin),
    /// A layout axis (imported from `tvm.tirx.layout`).
    Axis(Axis),
    /// Only the Python front end has it: it writes something else into the script
    /// (`T.meta_var(v)` is `v`, `T.vectorized` is `T.unroll`, `T.f16` is `"float16"`).
    FrontEnd,
    /// A name of the reference tirx does not support: the Python front end writes it as
    /// spelled, and the script check rejects it where it is used.
    Unsupported,
}

impl Meaning {
    /// Whether a script may use the name.
    pub fn in_script(self) -> bool {
        matches!(self, Meaning::Script(_) | Meaning::Axis(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            Meaning::Script(_) | Meaning::Axis(_) => "script",
            Meaning::FrontEnd => "front_end",
            Meaning::Unsupported => "unsupported",
        }
    }
}

/// One row of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Name {
    pub ns: Namespace,
    pub name: Cow<'static, str>,
    pub kind: Kind,
    pub meaning: Meaning,
    /// The name an alias stands for, which the Python front end writes (`f16` → `float16`,
    /// `Tx.warpgroup` → `wg`).
    pub alias_of: Option<&'static str>,
}

impl Name {
    fn new(ns: Namespace, name: impl Into<Cow<'static, str>>, kind: Kind, meaning: Meaning) -> Name {
        Name { ns, name: name.into(), kind, meaning, alias_of: None }
    }

    fn alias(mut self, of: &'static str) -> Name {
        self.alias_of = Some(of);
        self
    }

    /// `T.cuda.cta_sync`; a module's name as imported (`laneid`).
    pub fn path(&self) -> String {
        match self.ns {
            Namespace::T | Namespace::Cuda | Namespace::Ptx | Namespace::Tx => {
                format!("{}.{}", self.ns.path(), self.name)
            }
            Namespace::Layout | Namespace::TmaUtils | Namespace::Pipeline => self.name.to_string(),
        }
    }
}

use Builtin as B;
use Kind as K;
use Meaning::{FrontEnd, Script, Unsupported};

/// The names of `T` no enum spells.
const T_NAMES: &[(&str, Kind, Meaning)] = &[
    ("prim_func", K::Decorator, Script(B::PrimFunc)),
    // A helper inlined at its calls by the Python front end; a script has no helpers.
    ("macro", K::Decorator, FrontEnd),
    ("handle", K::Annotation, Script(B::Handle)),
    ("let", K::Annotation, Script(B::Let)),
    ("Buffer", K::Buffer, Script(B::Buffer)),
    ("match_buffer", K::Buffer, Script(B::MatchBuffer)),
    ("alloc_buffer", K::Buffer, Script(B::Alloc(AllocKind::Buffer))),
    ("alloc_shared", K::Buffer, Script(B::Alloc(AllocKind::Shared))),
    ("alloc_local", K::Buffer, Script(B::Alloc(AllocKind::Local))),
    // `T.decl_buffer(shape, dtype, X.data, ...)` is written as the view `X.view(shape, ...)`.
    ("decl_buffer", K::Buffer, FrontEnd),
    ("device_entry", K::Statement, Script(B::DeviceEntry)),
    ("assume", K::Statement, Script(B::Assume)),
    ("evaluate", K::Statement, Script(B::Evaluate)),
    ("attr", K::Statement, Unsupported),
    ("serial", K::Loop, Script(B::Serial)),
    ("unroll", K::Loop, Script(B::Unroll)),
    ("grid", K::Loop, Script(B::Grid)),
    // A vectorized loop is written as `T.unroll`: its body is left to the compiler.
    ("vectorized", K::Loop, FrontEnd),
    ("cast", K::Expression, Script(B::Cast)),
    ("if_then_else", K::Expression, Script(B::IfThenElse)),
    ("min", K::Expression, Script(B::TMin)),
    ("max", K::Expression, Script(B::TMax)),
    ("cuda", K::Namespace, Script(B::TCuda)),
    ("ptx", K::Namespace, Script(B::TPtx)),
    // `T.tile` is `Tx` (the reference's `tvm.script.tirx.tile`).
    ("tile", K::Namespace, FrontEnd),
    ("SMEMPool", K::KernelObject, Script(B::SmemPool)),
    ("S", K::Layout, Script(B::S)),
    ("R", K::Layout, Script(B::R)),
    ("TileLayout", K::Layout, Script(B::TileLayout)),
    ("ComposeLayout", K::Layout, Script(B::ComposeLayout)),
    // Python layout values: the script gets them as module constants, never as `T.<name>`.
    ("Axis", K::Layout, FrontEnd),
    ("Iter", K::Layout, FrontEnd),
    ("wg_local_layout", K::Layout, FrontEnd),
    ("tcgen05_atom_layout", K::Layout, FrontEnd),
    ("mma_shared_layout", K::Layout, FrontEnd),
    ("meta_var", K::Value, FrontEnd),
    ("FloatImm", K::Value, FrontEnd),
    ("IntImm", K::Value, FrontEnd),
    // Dtypes of the reference tirx does not have.
    ("float4_e2m1fn", K::DType, Unsupported),
];

/// Short dtype names the Python front end writes as the dtype they stand for.
const T_DTYPE_SHORTHANDS: &[(&str, &str)] = &[
    ("f16", "float16"),
    ("f32", "float32"),
    ("f64", "float64"),
    ("bf16", "bfloat16"),
    ("i8", "int8"),
    ("i16", "int16"),
    ("i32", "int32"),
    ("i64", "int64"),
    ("u8", "uint8"),
    ("u16", "uint16"),
    ("u32", "uint32"),
    ("u64", "uint64"),
];

/// The names of `T.cuda` that are not collectives.
const CUDA_NAMES: &[(&str, Kind, Meaning)] = &[
    ("cta_sync", K::Statement, Script(B::CtaSync)),
    ("warp_sync", K::Statement, Script(B::WarpSync)),
    ("thread_fence", K::Statement, Script(B::ThreadFence)),
    ("printf", K::Statement, Script(B::Printf)),
    ("cluster_sync", K::Statement, Script(B::Ptx(PtxOp::ClusterSync))),
    ("grid_group_sync", K::Statement, Script(B::Ptx(PtxOp::GridGroupSync))),
    ("mbarrier_wait", K::Statement, Script(B::Ptx(PtxOp::MbarWait))),
    ("warpgroup_sync", K::Statement, Unsupported),
];

/// Every spelling of a [`PtxOp`] after `T.ptx.`: the reference's older names
/// (`cp_async.commit_group`, `mbarrier.init`), its table-driven PTX dialect
/// (`cp.async_.commit_group`, `mbarrier.init.shared.b64`), the canonical name first.
const PTX_SPELLINGS: &[(&str, PtxOp)] = &[
    ("cp_async.commit_group", PtxOp::CommitGroup),
    ("cp.async_.commit_group", PtxOp::CommitGroup),
    ("cp_async.wait_group", PtxOp::WaitGroup),
    ("cp.async_.wait_group", PtxOp::WaitGroup),
    ("mbarrier.init", PtxOp::MbarInit),
    ("mbarrier.init.shared.b64", PtxOp::MbarInit),
    ("mbarrier.init.shared__cta.b64", PtxOp::MbarInit),
    ("mbarrier.arrive", PtxOp::MbarArrive),
    ("mbarrier.arrive.shared.b64", PtxOp::MbarArrive),
    ("mbarrier.arrive.shared__cta.b64", PtxOp::MbarArrive),
    ("mbarrier.arrive.expect_tx", PtxOp::MbarArriveExpectTx),
    ("mbarrier.arrive.expect_tx.shared.b64", PtxOp::MbarArriveExpectTx),
    ("mbarrier.arrive.expect_tx.shared__cta.b64", PtxOp::MbarArriveExpectTx),
    ("mbarrier.try_wait", PtxOp::MbarWait),
    ("mbarrier.try_wait.parity", PtxOp::MbarWait),
    ("mbarrier.try_wait.parity.shared.b64", PtxOp::MbarWait),
    ("mbarrier.try_wait.parity.shared__cta.b64", PtxOp::MbarWait),
    ("fence.proxy_async", PtxOp::FenceProxyAsync),
    ("fence.proxy.async_.shared__cta", PtxOp::FenceProxyAsync),
    ("fence.mbarrier_init", PtxOp::FenceMbarrierInit),
    ("fence.mbarrier_init.release.cluster", PtxOp::FenceMbarrierInit),
    ("cp_async.bulk.commit_group", PtxOp::BulkCommitGroup),
    ("cp.async_.bulk.commit_group", PtxOp::BulkCommitGroup),
    ("cp_async.bulk.wait_group", PtxOp::BulkWaitGroup),
    ("cp.async_.bulk.wait_group", PtxOp::BulkWaitGroup),
    ("cp_async.bulk.wait_group_read", PtxOp::BulkWaitGroupRead),
    ("cp.async_.bulk.wait_group.read", PtxOp::BulkWaitGroupRead),
    ("barrier.cluster.arrive", PtxOp::ClusterArrive),
    ("barrier.cluster.arrive.aligned", PtxOp::ClusterArrive),
    ("barrier.cluster.arrive.relaxed", PtxOp::ClusterArriveRelaxed),
    ("barrier.cluster.arrive.relaxed.aligned", PtxOp::ClusterArriveRelaxed),
    ("barrier.cluster.wait", PtxOp::ClusterWait),
    ("barrier.cluster.wait.aligned", PtxOp::ClusterWait),
    ("wgmma.fence", PtxOp::WgmmaFence),
    ("wgmma.fence.sync.aligned", PtxOp::WgmmaFence),
    ("wgmma.commit_group", PtxOp::WgmmaCommit),
    ("wgmma.commit_group.sync.aligned", PtxOp::WgmmaCommit),
    ("wgmma.wait_group", PtxOp::WgmmaWait),
    ("wgmma.wait_group.sync.aligned", PtxOp::WgmmaWait),
    ("setmaxnreg.inc", PtxOp::SetMaxNReg(true)),
    ("setmaxnreg.inc.sync.aligned.u32", PtxOp::SetMaxNReg(true)),
    ("setmaxnreg.dec", PtxOp::SetMaxNReg(false)),
    ("setmaxnreg.dec.sync.aligned.u32", PtxOp::SetMaxNReg(false)),
    ("bar.sync", PtxOp::BarSync),
    ("bar.arrive", PtxOp::BarArrive),
    ("griddepcontrol.wait", PtxOp::GridDepWait),
    ("griddepcontrol.launch_dependents", PtxOp::GridDepLaunch),
];

/// The scopes of `Tx.<scope>.<op>`; a scope's first spelling is the one written (`wg`, as the
/// printer does), a later one an alias of it.
const TX_SCOPES: &[(&str, ExecScope)] = &[
    ("thread", ExecScope::Thread),
    ("warp", ExecScope::Warp),
    ("wg", ExecScope::Warpgroup),
    ("warpgroup", ExecScope::Warpgroup),
    ("cta", ExecScope::Cta),
    ("cluster", ExecScope::Cluster),
];

/// `tvm.tirx.layout`'s names other than the axes.
const LAYOUT_NAMES: &[(&str, Meaning)] = &[
    ("S", Script(B::S)),
    ("R", Script(B::R)),
    ("TileLayout", Script(B::TileLayout)),
    ("ComposeLayout", Script(B::ComposeLayout)),
    ("wg_local_layout", Script(B::WgLocalLayout)),
    ("Axis", Script(B::AxisNs)),
    ("Iter", Script(B::Iter)),
    ("tcgen05_atom_layout", Script(B::Tcgen05AtomLayout)),
    ("mma_shared_layout", Script(B::MmaSharedLayout)),
    ("mma_atom_layout", Script(B::MmaAtomLayout)),
    ("mma_atom_shape", Script(B::MmaAtomShape)),
    ("mma_acc_layout", Script(B::FragmentLayout(Fragment::MmaAcc))),
    ("mma_a_layout", Script(B::FragmentLayout(Fragment::MmaA))),
    ("mma_b_layout", Script(B::FragmentLayout(Fragment::MmaB))),
    ("mma_row_layout", Script(B::FragmentLayout(Fragment::MmaRow))),
    ("wgmma_acc_layout", Script(B::FragmentLayout(Fragment::WgmmaAcc))),
    ("wgmma_row_layout", Script(B::FragmentLayout(Fragment::WgmmaRow))),
    ("SwizzleMode", Script(B::SwizzleModeNs)),
    // The Python package's layout classes (for `isinstance`); a script never names them.
    ("Layout", FrontEnd),
    ("Spec", FrontEnd),
    ("AxisStride", FrontEnd),
];

/// The shared-memory atom helpers the `tma_utils` modules hold (also in `tvm.tirx.layout`).
const TMA_UTILS_NAMES: &[(&str, Meaning)] = &[
    ("mma_shared_layout", Script(B::MmaSharedLayout)),
    ("mma_atom_layout", Script(B::MmaAtomLayout)),
    ("mma_atom_shape", Script(B::MmaAtomShape)),
    ("SwizzleMode", Script(B::SwizzleModeNs)),
];

fn t_names() -> impl Iterator<Item = Name> {
    let t = Namespace::T;
    let listed = T_NAMES.iter().map(move |&(n, k, m)| Name::new(t, n, k, m));
    let scope_ids = KINDS.map(|s| Name::new(t, s.script_name(), K::ScopeId, Script(B::ScopeId(s))));
    let math = MathFn::ALL.map(|f| Name::new(t, f.name(), K::Expression, Script(B::Math(f))));
    let dtypes = DType::ALL.map(|d| Name::new(t, d.name(), K::DType, Script(B::DTypeFn(d))));
    let aliases = DType::ALIASES.map(|(n, d)| Name::new(t, n, K::DType, Script(B::DTypeFn(d))).alias(d.name()));
    let shorthands = T_DTYPE_SHORTHANDS.iter().map(move |&(n, of)| Name::new(t, n, K::DType, FrontEnd).alias(of));
    listed.chain(scope_ids).chain(math).chain(dtypes).chain(aliases).chain(shorthands)
}

fn cuda_names() -> impl Iterator<Item = Name> {
    let c = Namespace::Cuda;
    let listed = CUDA_NAMES.iter().map(move |&(n, k, m)| Name::new(c, n, k, m));
    let atomics = [AtomicOp::Add].map(|op| Name::new(c, atomic_name(op), K::Expression, Script(B::Atomic(op))));
    listed
        .chain(CollKind::all().map(move |k| Name::new(c, k.name(), K::Expression, Script(B::Collective(k)))))
        .chain(atomics)
}

/// `atomic_add`: an atomic's name in `T.cuda`.
pub(crate) fn atomic_name(op: AtomicOp) -> &'static str {
    match op {
        AtomicOp::Add => "atomic_add",
    }
}

fn ptx_names() -> impl Iterator<Item = Name> {
    PTX_SPELLINGS.iter().map(|&(p, op)| Name::new(Namespace::Ptx, p, K::Statement, Script(B::Ptx(op))))
}

fn tx_names() -> impl Iterator<Item = Name> {
    let tx = Namespace::Tx;
    let scopes = TX_SCOPES.iter().map(move |&(n, s)| {
        let name = Name::new(tx, n, K::Namespace, Script(B::TxScope(s)));
        match TX_SCOPES.iter().find(|(_, first)| *first == s) {
            Some(&(canonical, _)) if canonical != n => name.alias(canonical),
            _ => name,
        }
    });
    let ops = TileOp::all().map(move |op| Name::new(tx, op.name(), K::TileOp, Script(B::Tile(ExecScope::Thread, op))));
    scopes.chain(ops)
}

fn module_names() -> impl Iterator<Item = Name> {
    let layout = LAYOUT_NAMES.iter().map(|&(n, m)| Name::new(Namespace::Layout, n, K::Layout, m));
    let axes = Axis::ALL.map(|a| {
        let kind = if a.is_memory() { K::MemoryAxis } else { K::ThreadAxis };
        Name::new(Namespace::Layout, a.name(), kind, Meaning::Axis(a))
    });
    let tma = TMA_UTILS_NAMES.iter().map(|&(n, m)| Name::new(Namespace::TmaUtils, n, K::Layout, m));
    let mbarrier = Name::new(Namespace::Pipeline, "MBarrier", K::KernelObject, Script(B::MBarrier));
    layout.chain(axes).chain(tma).chain(std::iter::once(mbarrier))
}

struct Table {
    names: Vec<Name>,
    /// Per namespace: name → position in `names`.
    index: HashMap<Namespace, HashMap<Cow<'static, str>, usize>>,
}

static TABLE: LazyLock<Table> = LazyLock::new(|| {
    let names: Vec<Name> =
        t_names().chain(cuda_names()).chain(ptx_names()).chain(tx_names()).chain(module_names()).collect();
    let mut index: HashMap<Namespace, HashMap<Cow<'static, str>, usize>> = HashMap::new();
    for (i, n) in names.iter().enumerate() {
        // A repeated name keeps its first row; the tests reject repeats.
        index.entry(n.ns).or_default().entry(n.name.clone()).or_insert(i);
    }
    Table { names, index }
});

/// Every builtin name, namespace by namespace.
pub fn table() -> &'static [Name] {
    &TABLE.names
}

/// The row of `name` in `ns`.
pub fn lookup(ns: Namespace, name: &str) -> Option<&'static Name> {
    let i = *TABLE.index.get(&ns)?.get(name)?;
    TABLE.names.get(i)
}

/// What the script resolves `name` in `ns` to (`None` for names only the Python front end
/// has, for unsupported ones and for unknown ones).
fn script_meaning(ns: Namespace, name: &str) -> Option<Meaning> {
    lookup(ns, name).map(|n| n.meaning).filter(|m| m.in_script())
}

fn script_builtin(ns: Namespace, name: &str) -> Option<Builtin> {
    match script_meaning(ns, name)? {
        Script(b) => Some(b),
        _ => None,
    }
}

/// The names of `ns` a script may use, in table order: the candidates of "did you mean".
pub fn script_names(ns: Namespace) -> impl Iterator<Item = &'static str> {
    table().iter().filter(move |n| n.ns == ns && n.meaning.in_script()).map(|n| n.name.as_ref())
}

/// `T.<name>`.
pub fn t_attr(name: &str) -> Option<Builtin> {
    script_builtin(Namespace::T, name)
}

/// `T.cuda.<name>`.
pub fn cuda_attr(name: &str) -> Option<Builtin> {
    script_builtin(Namespace::Cuda, name)
}

/// `Tx.<name>`: a scope namespace or a thread-scope op.
pub fn tx_attr(name: &str) -> Option<Builtin> {
    script_builtin(Namespace::Tx, name)
}

/// A value `ns` holds under `name`: an import from one of its modules.
fn module_import(ns: Namespace, name: &str) -> Option<Val> {
    match script_meaning(ns, name)? {
        Script(b) => Some(Val::Builtin(b)),
        Meaning::Axis(a) => Some(Val::Axis(a)),
        FrontEnd | Unsupported => None,
    }
}

/// Names importable from `tvm.tirx.layout`.
pub fn layout_import(name: &str) -> Option<Val> {
    module_import(Namespace::Layout, name)
}

/// The shared-memory atom helpers, importable from [`TMA_UTILS_MODULES`].
pub fn tma_utils_import(name: &str) -> Option<Val> {
    module_import(Namespace::TmaUtils, name)
}

/// `MBarrier`, importable from [`PIPELINE_MODULES`].
pub fn pipeline_import(name: &str) -> Option<Val> {
    module_import(Namespace::Pipeline, name)
}

impl PtxOp {
    /// The op a `T.ptx.` path names (`"cp.async_.commit_group"`).
    pub fn from_path(path: &str) -> Option<PtxOp> {
        match script_builtin(Namespace::Ptx, path)? {
            B::Ptx(op) => Some(op),
            _ => None,
        }
    }

    /// The canonical script spelling (`T.ptx.cp_async.commit_group`): the op's first row, in
    /// `T.ptx` (`T.cuda.cluster_sync` has none there).
    pub fn script_name(self) -> String {
        let row = |ns| table().iter().find(|n| n.ns == ns && n.meaning == Script(B::Ptx(self)));
        row(Namespace::Ptx).or_else(|| row(Namespace::Cuda)).map_or_else(|| "?".into(), Name::path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::is_statement_builtin;
    use std::collections::HashSet;

    #[test]
    fn no_name_is_declared_twice() {
        let mut seen = HashSet::new();
        for n in table() {
            assert!(seen.insert((n.ns, n.name.as_ref())), "{} is declared twice", n.path());
        }
    }

    /// What the lookup of `n`'s namespace gives for it.
    fn resolve(n: &Name) -> Option<Meaning> {
        let builtin = |b: Option<Builtin>| b.map(Script);
        let import = |v: Option<Val>| match v? {
            Val::Builtin(b) => Some(Script(b)),
            Val::Axis(a) => Some(Meaning::Axis(a)),
            other => panic!("{} imports as {other:?}", n.path()),
        };
        match n.ns {
            Namespace::T => builtin(t_attr(&n.name)),
            Namespace::Cuda => builtin(cuda_attr(&n.name)),
            Namespace::Ptx => builtin(PtxOp::from_path(&n.name).map(B::Ptx)),
            Namespace::Tx => builtin(tx_attr(&n.name)),
            Namespace::Layout => import(layout_import(&n.name)),
            Namespace::TmaUtils => import(tma_utils_import(&n.name)),
            Namespace::Pipeline => import(pipeline_import(&n.name)),
        }
    }

    #[test]
    fn every_name_resolves_through_its_namespace_lookup() {
        for n in table() {
            match n.meaning {
                Script(_) | Meaning::Axis(_) => assert_eq!(resolve(n), Some(n.meaning), "{}", n.path()),
                // The script does not have them: they must not resolve there by accident.
                FrontEnd | Unsupported => assert_eq!(resolve(n), None, "{}", n.path()),
            }
        }
    }

    #[test]
    fn kinds_agree_with_what_the_script_does() {
        for n in table() {
            let Script(b) = n.meaning else { continue };
            let fits = match n.kind {
                K::Statement => is_statement_builtin(b),
                K::Expression => {
                    matches!(
                        b,
                        B::Cast | B::IfThenElse | B::TMin | B::TMax | B::Math(_) | B::Collective(_) | B::Atomic(_)
                    )
                }
                K::ScopeId => matches!(b, B::ScopeId(_)),
                K::Buffer => matches!(b, B::Buffer | B::MatchBuffer | B::Alloc(_)),
                K::Loop => matches!(b, B::Serial | B::Unroll | B::Grid),
                K::DType => matches!(b, B::DTypeFn(_)),
                K::TileOp => matches!(b, B::Tile(..)),
                K::Namespace => matches!(b, B::TCuda | B::TPtx | B::TxScope(_)),
                _ => true,
            };
            assert!(fits, "{} is a {} but the script reads it as {b:?}", n.path(), n.kind.name());
        }
    }

    #[test]
    fn every_ptx_op_has_a_spelling_and_every_alias_a_target() {
        for &(_, op) in PTX_SPELLINGS {
            assert!(op.script_name().starts_with("T.ptx."), "{op:?}");
            assert_eq!(PtxOp::from_path(op.script_name().trim_start_matches("T.ptx.")), Some(op));
        }
        assert_eq!(PtxOp::ClusterSync.script_name(), "T.cuda.cluster_sync");
        for n in table() {
            if let Some(of) = n.alias_of {
                let target = lookup(n.ns, of).unwrap_or_else(|| panic!("{} stands for unknown `{of}`", n.path()));
                assert_eq!((target.kind, target.alias_of), (n.kind, None), "{}", n.path());
            }
        }
    }

    #[test]
    fn unknown_names_do_not_resolve() {
        assert_eq!(t_attr("cta_syncc"), None);
        assert_eq!(cuda_attr("warp_prod"), None);
        assert_eq!(PtxOp::from_path("cp_async"), None);
        assert_eq!(layout_import("mma_layout"), None);
        assert!(script_names(Namespace::T).any(|n| n == "float32"));
        assert!(!script_names(Namespace::T).any(|n| n == "meta_var"));
    }
}
