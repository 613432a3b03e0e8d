//! Python values the evaluator computes at parse time: constants, tuples,
//! slices, axes and layout builders (`S[...]`, `R[...]`, `TileLayout`,
//! `ComposeLayout`), the script namespaces (`T`, `Tx`, ...), and — inside a
//! kernel — runtime scalars, buffers and buffer subscripts.

use std::collections::BTreeMap;
use tirx_ir::hir::{BufId, Expr, ExprKind, MathFn, ReduceOp, ScopeIdKind, ShuffleMode, TileOp};
use tirx_ir::{DType, Diagnostic, Span};
use tirx_layout::{Axis, ExecScope, Iter, Layout, TileLayout};

/// Largest tuple / range the evaluator materializes (fuzz guard).
pub const MAX_SEQ: usize = 1 << 16;

/// Deepest nesting of compile-time tuples / lists.
pub const MAX_VAL_DEPTH: usize = 32;

/// Compile-time work one script may do, in items built or copied (fuzz guard:
/// `[len(x) for i in range(60000)]` with a large `x` builds little but copies a lot).
pub const MAX_WORK: usize = 1 << 22;

/// The size of `v` as [`MAX_SEQ`] counts it: one per value, tuple/list item and
/// slice bound, nested items included, one per 16 bytes of a string. Stops
/// counting past `cap` (the result is then `cap + 1`), so the cost is O(min(size, cap)).
pub fn weight(v: &Val, cap: usize) -> usize {
    fn walk(v: &Val, left: &mut usize) -> bool {
        if *left == 0 {
            return false;
        }
        *left -= 1;
        match v {
            Val::Tuple(xs) | Val::List(xs) => xs.iter().all(|x| walk(x, left)),
            Val::Dict(kv) => kv.iter().all(|(k, v)| walk(k, left) && walk(v, left)),
            Val::Slice(a, b) => a.iter().chain(b.iter()).all(|x| walk(x, left)),
            Val::Str(s) => match left.checked_sub(s.len() / 16) {
                Some(l) => {
                    *left = l;
                    true
                }
                None => false,
            },
            _ => true,
        }
    }
    let mut left = cap.saturating_add(1);
    walk(v, &mut left);
    cap.saturating_add(1) - left
}

/// A partially built layout: `S[...]` gives a shard, `R[...]` a replica,
/// `+ k@axis` offsets.
#[derive(Clone, Debug, PartialEq)]
pub struct Spec {
    pub shard: Option<Vec<Iter>>,
    pub replica: Option<Vec<Iter>>,
    pub offset: BTreeMap<Axis, i64>,
}

impl Spec {
    pub fn into_tile(self) -> TileLayout {
        TileLayout::new(self.shard.unwrap_or_default(), self.replica.unwrap_or_default(), self.offset)
    }
}

/// A method of a layout value (docs/layout-model.md §2.14).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayoutMethod {
    TileTo,
    Tile,
    Group,
    GroupMany,
    PermuteByGroups,
    PermuteDims,
    Canonicalize,
    Slice,
    Storage,
    Size,
    Span,
    Apply,
}

impl LayoutMethod {
    pub const ALL: [LayoutMethod; 12] = [
        LayoutMethod::TileTo,
        LayoutMethod::Tile,
        LayoutMethod::Group,
        LayoutMethod::GroupMany,
        LayoutMethod::PermuteByGroups,
        LayoutMethod::PermuteDims,
        LayoutMethod::Canonicalize,
        LayoutMethod::Slice,
        LayoutMethod::Storage,
        LayoutMethod::Size,
        LayoutMethod::Span,
        LayoutMethod::Apply,
    ];

    pub fn name(self) -> &'static str {
        match self {
            LayoutMethod::TileTo => "tile_to",
            LayoutMethod::Tile => "tile",
            LayoutMethod::Group => "group",
            LayoutMethod::GroupMany => "group_many",
            LayoutMethod::PermuteByGroups => "permute_by_groups",
            LayoutMethod::PermuteDims => "permute_dims",
            LayoutMethod::Canonicalize => "canonicalize",
            LayoutMethod::Slice => "slice",
            LayoutMethod::Storage => "storage",
            LayoutMethod::Size => "size",
            LayoutMethod::Span => "span",
            LayoutMethod::Apply => "apply",
        }
    }

    pub fn from_name(s: &str) -> Option<LayoutMethod> {
        LayoutMethod::ALL.into_iter().find(|m| m.name() == s)
    }
}

/// `buf.local` / `buf.view` / `buf.ptr_to` before the call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Local,
    View,
    PtrTo,
    /// `X.sub[i, :, j, 0:4]`: a view of a sub-region (an index drops its dim).
    Sub,
}

/// The collectives of `T.cuda` that produce a value (`hir::Collective`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CollKind {
    /// `warp_reduce` (op given as a string) or `warp_sum` / `warp_max` / `warp_min`.
    WarpReduce(Option<ReduceOp>),
    /// `cta_reduce` or `cta_sum` / `cta_max` / `cta_min`.
    CtaReduce(Option<ReduceOp>),
    /// `shfl_xor`, `shfl_down`, `shfl_up`, `shfl`.
    Shfl(ShuffleMode),
}

impl CollKind {
    /// Every collective: the reductions (generic, then one per op), then the shuffles.
    pub fn all() -> impl Iterator<Item = CollKind> {
        let reductions =
            |kind: fn(Option<ReduceOp>) -> CollKind| std::iter::once(None).chain(ReduceOp::ALL.map(Some)).map(kind);
        let shuffles = [ShuffleMode::Bfly, ShuffleMode::Down, ShuffleMode::Up, ShuffleMode::Idx].map(CollKind::Shfl);
        reductions(CollKind::WarpReduce).chain(reductions(CollKind::CtaReduce)).chain(shuffles)
    }

    /// `warp_sum`, `cta_reduce`, `shfl_xor`, ...
    pub fn name(self) -> String {
        match self {
            CollKind::WarpReduce(None) => "warp_reduce".into(),
            CollKind::WarpReduce(Some(op)) => format!("warp_{}", op.name()),
            CollKind::CtaReduce(None) => "cta_reduce".into(),
            CollKind::CtaReduce(Some(op)) => format!("cta_{}", op.name()),
            CollKind::Shfl(ShuffleMode::Bfly) => "shfl_xor".into(),
            CollKind::Shfl(ShuffleMode::Down) => "shfl_down".into(),
            CollKind::Shfl(ShuffleMode::Up) => "shfl_up".into(),
            CollKind::Shfl(ShuffleMode::Idx) => "shfl".into(),
        }
    }
}

/// One index of a buffer subscript.
#[derive(Clone, Debug, PartialEq)]
pub enum Index {
    Point(Val),
    /// `lo:hi` (either may be missing); `span` covers the slice text.
    Slice(Option<Box<Val>>, Option<Box<Val>>, Span),
}

/// `B[i, 0:8]` before it is known whether it is a load or a region.
#[derive(Clone, Debug, PartialEq)]
pub struct Sub {
    pub buf: BufId,
    pub indices: Vec<(Index, Span)>,
    pub span: Span,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    /// `T.alloc_buffer` (scope kwarg, default global)
    Buffer,
    Shared,
    Local,
}

/// Everything callable or namespace-like a script can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin {
    // namespaces
    T,
    TCuda,
    Tx,
    TxScope(ExecScope),
    AxisNs,
    /// An imported module we do not model (`import numpy as np`).
    Opaque,
    // Python builtins
    Slice,
    Tuple,
    List,
    Range,
    Len,
    Min,
    Max,
    Int,
    Float,
    Abs,
    // layout builders and helpers
    S,
    R,
    TileLayout,
    ComposeLayout,
    WgLocalLayout,
    /// `TileLayout.from_iters(shard, replica, offset)`
    FromIters,
    /// `Iter(extent, stride, axis)`
    Iter,
    /// `Axis.get(name)`
    AxisGet,
    /// `SwizzleMode.SWIZZLE_*` (the modes are ints 0..=3)
    SwizzleModeNs,
    MmaSharedLayout,
    MmaAtomLayout,
    MmaAtomShape,
    Tcgen05AtomLayout,
    /// `mma_acc_layout(m, n)`, `wgmma_row_layout()`, ...: tensor-core fragments.
    FragmentLayout(tirx_layout::Fragment),
    // T.*
    PrimFunc,
    Handle,
    Buffer,
    MatchBuffer,
    DeviceEntry,
    ScopeId(ScopeIdKind),
    Alloc(AllocKind),
    Serial,
    Unroll,
    Grid,
    Cast,
    IfThenElse,
    Math(MathFn),
    TMin,
    TMax,
    DTypeFn(DType),
    Let,
    /// `T.assume(cond)`: a fact about the scalar parameters.
    Assume,
    CtaSync,
    WarpSync,
    /// `T.cuda.thread_fence()`.
    ThreadFence,
    /// `T.cuda.printf(format, *args)`.
    Printf,
    Collective(CollKind),
    /// `T.cuda.atomic_add(p, v)`: an atomic read-modify-write of one element (`hir::Atomic`).
    Atomic(tirx_ir::hir::AtomicOp),
    Evaluate,
    /// `T.ptx`: the namespace of the kernel's own PTX instructions.
    TPtx,
    /// One of the kernel's own PTX instructions (`T.ptx.cp_async.commit_group`, `T.ptx.wgmma.fence`, ...).
    Ptx(PtxOp),
    /// `T.SMEMPool()`: dynamic shared memory carved in allocation order.
    SmemPool,
    /// `MBarrier(pool, depth)`: `depth` mbarriers (one per pipeline stage).
    MBarrier,
    // Tx.*
    Tile(ExecScope, TileOp),
}

/// The kernel's own PTX instructions (docs/tile-primitives.md §8, §9): asynchronous
/// copies and mbarriers (built by the `asynch` module), the ordering of wgmma, register
/// reallocation and named barriers (the `ptx` module).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxOp {
    CommitGroup,
    WaitGroup,
    MbarInit,
    MbarArrive,
    MbarArriveExpectTx,
    MbarWait,
    FenceProxyAsync,
    FenceMbarrierInit,
    BulkCommitGroup,
    BulkWaitGroup,
    BulkWaitGroupRead,
    ClusterArrive,
    /// `barrier.cluster.arrive.relaxed`: an arrive that releases nothing.
    ClusterArriveRelaxed,
    ClusterWait,
    /// `T.cuda.cluster_sync()`: an arrive and a wait of the cluster barrier.
    ClusterSync,
    /// `T.cuda.grid_group_sync(word, size)`: the CTA meets the grid's CTAs syncing on `word`.
    GridGroupSync,
    WgmmaFence,
    WgmmaCommit,
    WgmmaWait,
    /// `setmaxnreg.inc` (true) or `.dec`.
    SetMaxNReg(bool),
    BarSync,
    BarArrive,
    GridDepWait,
    GridDepLaunch,
}

/// What an `MBarrier(pool, depth, phase_offset=0, leader=None)` object is.
#[derive(Clone, Debug, PartialEq)]
pub struct MbarObj {
    /// The `(depth,)` shared `int64` buffer of barrier words.
    pub buf: BufId,
    pub depth: i64,
    /// XORed into the parity of every `wait`.
    pub phase_offset: i64,
    /// Who runs `init`: this condition, else thread 0 of the CTA.
    pub leader: Option<Expr>,
}

/// The methods of an `MBarrier` object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarMethod {
    Init,
    Wait,
    Arrive,
    PtrTo,
}

/// The methods of a `T.SMEMPool()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolMethod {
    Alloc,
    Commit,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Val {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    None,
    Tuple(Vec<Val>),
    List(Vec<Val>),
    Slice(Option<Box<Val>>, Option<Box<Val>>),
    Axis(Axis),
    AxisStride(i64, Axis),
    Spec(Spec),
    Layout(Layout),
    /// `Iter(extent, stride, axis)`: one iter of a layout.
    Iter(Iter),
    /// `{key: value}`, in insertion order (keys are compile-time values).
    Dict(Vec<(Val, Val)>),
    /// `layout.tile_to` before the call.
    LayoutMethod(Box<Layout>, LayoutMethod),
    Builtin(Builtin),
    /// A runtime scalar (kernel only).
    Expr(Expr),
    /// `lambda i, j: body`, evaluated where it is used (a tile op's `mask=`).
    Lambda(Box<(Vec<(String, Span)>, crate::ast::Expr)>),
    Buffer(BufId),
    Sub(Sub),
    Method(BufId, Method),
    /// A `T.handle` kernel parameter (by name), for `T.match_buffer`.
    Handle(String),
    /// A mutable scalar: a name assigned more than once (`x = 0.0` ... `x = x + v`), kept in a
    /// one-element local buffer as the reference does. Reading the name loads the element.
    Scalar(BufId),
    /// `buf.ptr_to([i, ..])`: the address of an element (the scratch of `T.cuda.cta_reduce`).
    Ptr(BufId, Vec<Expr>),
    /// `T.ptx.<a>.<b>...` before the call.
    PtxPath(String),
    /// `T.SMEMPool()` (its number in the kernel).
    Pool(u32),
    PoolMethod(u32, PoolMethod),
    /// An `MBarrier(pool, depth)` object.
    MBarrier(Box<MbarObj>),
    MbarMethod(Box<MbarObj>, MbarMethod),
    /// The name of a definition that failed (already reported): uses of it
    /// fail silently instead of cascading into "unknown name" errors.
    Poison,
}

impl Val {
    /// What the value is, for messages ("expected an int, found a tuple").
    pub fn kind_name(&self) -> &'static str {
        match self {
            Val::Int(_) => "an int",
            Val::Float(_) => "a float",
            Val::Bool(_) => "a bool",
            Val::Str(_) => "a string",
            Val::None => "None",
            Val::Lambda(_) => "a lambda",
            Val::Tuple(_) => "a tuple",
            Val::List(_) => "a list",
            Val::Slice(..) => "a slice",
            Val::Axis(_) => "an axis",
            Val::AxisStride(..) => "an axis stride (`k @ axis`)",
            Val::Spec(_) => "a layout spec",
            Val::Layout(_) => "a layout",
            Val::Iter(_) => "an iter",
            Val::Dict(_) => "a dict",
            Val::LayoutMethod(..) => "a layout method",
            Val::Builtin(_) => "a function or module",
            Val::Expr(_) => "a runtime value",
            Val::Buffer(_) => "a buffer",
            Val::Sub(_) => "a buffer element/region",
            Val::Method(..) => "a buffer method",
            Val::Handle(_) => "a handle parameter",
            Val::Scalar(_) => "a mutable scalar",
            Val::Ptr(..) => "a pointer",
            Val::PtxPath(_) => "a PTX instruction",
            Val::Pool(_) => "a shared memory pool",
            Val::PoolMethod(..) => "a shared memory pool method",
            Val::MBarrier(_) => "an MBarrier",
            Val::MbarMethod(..) => "an MBarrier method",
            Val::Poison => "an invalid value",
        }
    }

    /// Tuple and list items.
    pub fn items(&self) -> Option<&[Val]> {
        match self {
            Val::Tuple(v) | Val::List(v) => Some(v),
            _ => None,
        }
    }
}

/// Python builtins visible everywhere (also the candidates of "did you mean").
pub const PY_BUILTINS: [(&str, Builtin); 10] = [
    ("slice", Builtin::Slice),
    ("tuple", Builtin::Tuple),
    ("list", Builtin::List),
    ("range", Builtin::Range),
    ("len", Builtin::Len),
    ("min", Builtin::Min),
    ("max", Builtin::Max),
    ("int", Builtin::Int),
    ("float", Builtin::Float),
    ("abs", Builtin::Abs),
];

pub fn python_builtin(name: &str) -> Option<Builtin> {
    PY_BUILTINS.iter().find(|(n, _)| *n == name).map(|(_, b)| *b)
}

/// Python floor division / modulo on ints (`None` on division by zero or overflow).
pub fn py_floordiv(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let q = a.checked_div(b)?;
    if (a % b != 0) && ((a < 0) != (b < 0)) {
        q.checked_sub(1)
    } else {
        Some(q)
    }
}

pub fn py_mod(a: i64, b: i64) -> Option<i64> {
    if b == 0 {
        return None;
    }
    let r = a.checked_rem(b)?;
    Some(if r != 0 && ((r < 0) != (b < 0)) { r + b } else { r })
}

pub fn py_float_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
        r + b
    } else {
        r
    }
}

/// Edit distance for "did you mean" suggestions.
pub fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// "Did you mean" is computed for the unknown names among a file's first this
/// many diagnostics only (no one reads further; see the CLI's error cap).
pub const MAX_SUGGESTED_ERRORS: usize = 100;

/// Most candidates one "did you mean" looks at (after the length filter), so
/// that a file with thousands of names and thousands of typos stays linear.
pub const MAX_SUGGEST_CANDIDATES: usize = 1000;

/// `d` with a `did you mean ...?` help naming the closest of `names`, or, when
/// none is close, a note listing them all (`kind: a, b, c`). `quoted`: the
/// names are written as strings in a script (`"float32"`).
pub fn did_you_mean(d: Diagnostic, name: &str, names: &[&str], kind: &str, quoted: bool) -> Diagnostic {
    match closest(name, names.iter().copied()) {
        Some(c) if quoted => d.with_help(format!("did you mean `\"{c}\"`?")),
        Some(c) => d.with_help(format!("did you mean `{c}`?")),
        None => d.with_note(format!("{kind}: {}", names.join(", "))),
    }
}

/// The closest candidate within a small edit distance. Bounded work: names
/// over 64 bytes get no suggestion, candidates whose length differs by more
/// than the distance limit are skipped unmeasured, and at most
/// [`MAX_SUGGEST_CANDIDATES`] of the rest are measured.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    if name.len() > 64 {
        return None;
    }
    let chars = name.chars().count();
    let limit = (chars / 3).clamp(1, 3);
    candidates
        .into_iter()
        .filter(|c| *c != name && c.chars().count().abs_diff(chars) <= limit)
        .take(MAX_SUGGEST_CANDIDATES)
        .map(|c| (levenshtein(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Python truthiness of a compile-time value (`None` for runtime values).
pub(crate) fn truthy(v: &Val) -> Option<bool> {
    match v {
        Val::Bool(b) => Some(*b),
        Val::Int(i) => Some(*i != 0),
        Val::Float(f) => Some(*f != 0.0),
        Val::None => Some(false),
        Val::Str(s) => Some(!s.is_empty()),
        Val::Tuple(x) | Val::List(x) => Some(!x.is_empty()),
        Val::Expr(e) => match e.kind {
            ExprKind::Bool(b) => Some(b),
            _ => None,
        },
        _ => None,
    }
}

/// Whether `b` makes a statement (`T.device_entry()`, an allocation, a tile call, a loop header,
/// ...), not a value an expression may use.
pub(crate) fn is_statement_builtin(b: Builtin) -> bool {
    matches!(
        b,
        Builtin::MatchBuffer
            | Builtin::DeviceEntry
            | Builtin::Assume
            | Builtin::ScopeId(_)
            | Builtin::Alloc(_)
            | Builtin::Tile(..)
            | Builtin::CtaSync
            | Builtin::WarpSync
            | Builtin::ThreadFence
            | Builtin::Printf
            | Builtin::Collective(_)
            | Builtin::Atomic(_)
            | Builtin::Evaluate
            | Builtin::Ptx(_)
            | Builtin::SmemPool
            | Builtin::MBarrier
            | Builtin::Serial
            | Builtin::Unroll
            | Builtin::Grid
    )
}

/// The script's name of an mbarrier array's method (`bar.init(...)`).
pub(crate) fn mbar_method_name(m: MbarMethod) -> &'static str {
    match m {
        MbarMethod::Init => "init",
        MbarMethod::Wait => "wait",
        MbarMethod::Arrive => "arrive",
        MbarMethod::PtrTo => "ptr_to",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_division_semantics() {
        assert_eq!(py_floordiv(-7, 2), Some(-4));
        assert_eq!(py_mod(-7, 2), Some(1));
        assert_eq!(py_mod(7, -2), Some(-1));
        assert_eq!(py_floordiv(7, 0), None);
        assert_eq!(py_floordiv(i64::MIN, -1), None);
        assert_eq!(py_float_mod(-1.0, 3.0), 2.0);
    }

    #[test]
    fn suggestions() {
        assert_eq!(closest("lane_idd", ["lane_id", "warp_id"]), Some("lane_id"));
        assert_eq!(closest("xyz", ["lane_id"]), None);
    }

    #[test]
    fn weight_counts_nested_items_and_stops_at_the_cap() {
        let row = Val::List(vec![Val::Int(0); 10]);
        assert_eq!(weight(&row, 100), 11);
        let grid = Val::List(vec![row.clone(); 10]);
        assert_eq!(weight(&grid, 1000), 111);
        assert_eq!(weight(&grid, 50), 51, "stops one past the cap");
        assert_eq!(weight(&Val::Str("x".repeat(64)), 100), 5);
    }
}
