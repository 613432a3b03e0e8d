//! Bounds as facts over ranges (tile-primitives.md §1.3, §3.1): every region
//! of a tile call, and every scalar load and store, is checked dim by dim
//! against its buffer's shape over the full range of the scope ids and loop
//! variables its indices use, before any variant sees the call.
//!
//! Per dim `[b, b + e)` of a buffer dim of size `n`, with `b` affine
//! ([`crate::affine::Affine`]) and its range `[lo, hi]` from [`Env::var_bounds`]:
//!
//! * **inside** when `lo ≥ 0` and `hi + e ≤ n` (an enclosure is enough);
//! * **outside** when the range is *exact* (its ends are taken: every
//!   variable's range is exact and the terms are independent) and an end
//!   leaves the buffer. The witness is a corner of the variables' box: the
//!   extremes of an exact range are taken at one (every term is monotone in
//!   its variables and no two terms share a source), and the corner is
//!   evaluated to make sure. Lowering reports it as a user error at the region
//!   naming the values (`bx = 1 reads columns [16, 48) of 32`); no variant
//!   lowers the call (with [`crate::options::LowerOptions::defer_bounds`] it is a
//!   warning and the simulator reports the access instead);
//! * **unproven** otherwise (a begin that is not affine, a variable without a
//!   range, an enclosure that reaches out): a warning once at the region, and a
//!   [`BoundsCheck`] before the call's code so that the simulator checks the
//!   region dim by dim at every execution (the GPU does not).
//!
//! Scalar accesses get the same three verdicts with extents of 1, except loads
//! in lazily evaluated positions (the branches of `T.if_then_else`, the right
//! side of `and`/`or`), which their guard may keep in bounds and which are not
//! checked here.

use crate::affine::{Affine, Interval};
use crate::build::Builder;
use crate::env::Env;
use crate::expr;
use crate::launch::{self, Le};
use crate::scope::Facts;
use std::collections::BTreeMap;
use tirx_ir::hir::{BinOp, BufId, Buffer, BufferRegion, Expr, ExprKind, Kernel, TileArg, TileCall, VarId};
use tirx_ir::lir::{BoundsCheck, LStmt, LStmtKind, SymExpr};
use tirx_ir::op::Role;
use tirx_ir::{DType, Diagnostic, Span};

/// The most corners of the variables' box searched for a witness.
const MAX_CORNERS: usize = 1 << 12;

/// What is known of one region (or scalar access) against its buffer's shape.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Verdict {
    /// Inside for every value of its variables here.
    Inside,
    /// Leaves the buffer for the values in the witness.
    Outside(Escape),
    /// Neither provable: the first such dim, and why.
    Unproven { dim: usize, why: String },
    /// Inside for every launch whose arguments satisfy these conditions (sizes or
    /// grid dims that are run-time values, exact ranges): launch checks.
    AtLaunch(Vec<LaunchCond>),
    /// Outside for every launch (a run-time size that the region always passes).
    Never { dim: usize, why: String },
}

/// A bound of one dim that only the launch's arguments decide.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct LaunchCond {
    pub dim: usize,
    pub cond: SymExpr,
    /// The condition as text: `(n + 63) // 64 * 64 <= n`.
    pub text: String,
}

/// Where a region provably leaves its buffer.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Escape {
    pub dim: usize,
    /// The values of the begin's variables at the witness, in order of appearance.
    pub at: Vec<(String, i64)>,
    /// The begin's value there, the region's extent and the dim's size.
    pub begin: i64,
    pub extent: i64,
    pub size: i64,
    /// `begins at `bx * 16`, in [0, 16] here (bx in [0, 1])`.
    pub detail: String,
    /// The buffer's rank (for naming dims).
    pub rank: usize,
}

impl Escape {
    /// `bx = 1, k = 7`.
    pub fn values(&self) -> String {
        self.at.iter().map(|(v, x)| format!("{v} = {x}")).collect::<Vec<_>>().join(", ")
    }

    /// `bx = 1 reads columns [16, 48) of 32` (`write`: `writes`); the dims
    /// before the last two of a rank-3+ buffer: `k = 7 reads index 8 of dim 0 (size 8)`.
    pub fn what(&self, write: bool) -> String {
        let verb = if write { "writes" } else { "reads" };
        let (one, many) = dim_nouns(self.rank, self.dim);
        let (b, n) = (self.begin, self.size);
        let span = match (self.extent, self.rank >= 3 && self.dim + 2 < self.rank) {
            (1, false) => format!("{one} {b} of {n}"),
            (e, false) => format!("{many} [{b}, {}) of {n}", b.saturating_add(e)),
            (1, true) => format!("index {b} of dim {} (size {n})", self.dim),
            (e, true) => format!("indices [{b}, {}) of dim {} (size {n})", b.saturating_add(e), self.dim),
        };
        let who = if self.at.is_empty() { String::new() } else { format!("{} ", self.values()) };
        format!("{who}{verb} {span}")
    }

    /// `dim 1 of `A` begins at `bx * 16`, in [0, 16] here (bx in [0, 1])`.
    pub fn location(&self, buf: &str) -> String {
        format!("dim {} of `{buf}` {}", self.dim, self.detail)
    }

    /// The reason explain and a declining variant show: where, and what leaves.
    pub fn reason(&self, buf: &str, write: bool) -> String {
        format!("{}: {}", self.location(buf), self.what(write))
    }
}

/// How dim `d` of a rank-`rank` buffer is named: rows and columns for the last two.
pub(crate) fn dim_nouns(rank: usize, d: usize) -> (String, String) {
    if rank >= 2 && d == rank - 1 {
        ("column".into(), "columns".into())
    } else if rank >= 2 && d == rank - 2 {
        ("row".into(), "rows".into())
    } else if rank == 1 {
        ("element".into(), "elements".into())
    } else {
        (format!("index of dim {d}"), format!("indices of dim {d}"))
    }
}

/// The verdict of a region of `b`.
pub(crate) fn region(k: &Kernel, env: &Env, at: &Facts, r: &BufferRegion) -> Verdict {
    let dims: Vec<(&Expr, i64)> = r.ranges.iter().map(|rg| (&rg.begin, rg.extent)).collect();
    dims_verdict(k, env, at, k.buf(r.buf), &dims)
}

/// The verdict of a scalar access `b[indices]`.
pub(crate) fn element(k: &Kernel, env: &Env, at: &Facts, b: BufId, indices: &[Expr]) -> Verdict {
    let dims: Vec<(&Expr, i64)> = indices.iter().map(|i| (i, 1)).collect();
    dims_verdict(k, env, at, k.buf(b), &dims)
}

/// The first dim that provably leaves the buffer, else the first that is not
/// proven inside, else inside (also where no thread gets: a dead branch).
fn dims_verdict(k: &Kernel, env: &Env, at: &Facts, b: &Buffer, dims: &[(&Expr, i64)]) -> Verdict {
    if at.unreachable() {
        return Verdict::Inside;
    }
    if dims.len() != b.shape.len() {
        let why = format!("`{}` has {} dims, the access {}", b.name, b.shape.len(), dims.len());
        return Verdict::Unproven { dim: 0, why };
    }
    let mut unproven = None;
    let mut conds = Vec::new();
    for (d, (&(begin, extent), &size)) in dims.iter().zip(&b.shape).enumerate() {
        let v = if symbolic(env, b, d, begin) {
            sym_dim(k, env, at, b, d, begin, extent)
        } else {
            dim(k, env, at, d, b.shape.len(), begin, extent, size)
        };
        match v {
            Verdict::Inside => {}
            out @ (Verdict::Outside(_) | Verdict::Never { .. }) => return out,
            u @ Verdict::Unproven { .. } => {
                unproven.get_or_insert(u);
            }
            Verdict::AtLaunch(mut c) => conds.append(&mut c),
        }
    }
    match (unproven, conds.is_empty()) {
        (Some(u), _) => u,
        (None, false) => Verdict::AtLaunch(conds),
        (None, true) => Verdict::Inside,
    }
}

/// Whether dim `d` of `b` at `begin` depends on the launch: a run-time size, a
/// scalar parameter in the begin, or a CTA id of a symbolic grid dim.
fn symbolic(env: &Env, b: &Buffer, d: usize, begin: &Expr) -> bool {
    (d == 0 && b.is_symbolic())
        || expr::affine(env, begin)
            .is_some_and(|a| a.vars().iter().any(|&v| env.sym.is_param(v) || launch::sym_grid_dim(env, v).is_some()))
}

/// The verdict of a dim that depends on the launch (module `launch`): each end
/// compared as affine forms in the scalar parameters — proven, never, or a launch
/// check when the range is exact; unproven otherwise.
fn sym_dim(k: &Kernel, env: &Env, at: &Facts, b: &Buffer, d: usize, begin: &Expr, extent: i64) -> Verdict {
    let text = crate::text::top_text(k, begin);
    let unproven = |why: String| Verdict::Unproven { dim: d, why };
    let Some(a0) = expr::affine(env, begin) else {
        return unproven(format!(
            "dim {d} begins at `{text}`, which is not affine in loop variables, scope ids and parameters"
        ));
    };
    let size = match (&b.dyn_outer, d) {
        (Some(e), 0) => match expr::affine(env, e) {
            Some(a) => a,
            None => {
                let n = crate::text::top_text(k, e);
                return unproven(format!("dim 0 of `{}` is `{n}`, not affine in the parameters", b.name));
            }
        },
        _ => Affine::constant(b.shape[d]),
    };
    // First the begin itself against what the enclosing `if`s and loops guarantee
    // (`if row < n:` keeps `A[row]` inside `n` rows; so does `for row in range(n)`).
    let own_end = a0.clone().plus(Affine::constant(extent));
    let lo_guarded = launch::guarded_le(env, &at.guards, &Affine::constant(0), &a0);
    let hi_guarded = own_end.is_some_and(|e| launch::guarded_le(env, &at.guards, &e, &size));
    if lo_guarded && hi_guarded {
        return Verdict::Inside;
    }
    let pinned = |v: VarId| env.var_bounds(at, v).filter(|b| b.lo == b.hi && !env.sym.is_param(v)).map(|b| b.lo);
    let Some(iv) = a0.substitute(&pinned).and_then(|a| launch::sym_range(env, at, &a)) else {
        return unproven(format!("dim {d} begins at `{text}`, which has no known range here"));
    };
    let (one, many) = dim_nouns(b.shape.len(), d);
    let noun = if extent == 1 { one } else { many };
    let Some(end) = iv.hi.clone().plus(Affine::constant(extent)) else {
        return unproven(format!("dim {d} begins at `{text}`, whose range overflows i64"));
    };
    let mut conds = Vec::new();
    // Then each end not guarded, by its range.
    for (lhs, rhs, guarded) in [(Affine::constant(0), iv.lo.clone(), lo_guarded), (end, size.clone(), hi_guarded)] {
        if guarded {
            continue;
        }
        match launch::le(env, &lhs, &rhs) {
            Le::Proven => {}
            Le::Never if iv.exact => {
                let why = format!(
                    "dim {d} begins at `{text}`, so its {noun} end at {} of {}",
                    sym_text(env, &iv.hi, extent),
                    sym_text(env, &size, 0)
                );
                return Verdict::Never { dim: d, why };
            }
            Le::AtLaunch(cond) if iv.exact => {
                let text = env.sym.text(&cond);
                conds.push(LaunchCond { dim: d, cond, text });
            }
            _ => {
                return unproven(format!(
                    "dim {d} begins at `{text}`, whose {noun} depend on the launch through a range that is only an enclosure (not every value is known to be reached)"
                ))
            }
        }
    }
    if conds.is_empty() {
        Verdict::Inside
    } else {
        Verdict::AtLaunch(conds)
    }
}

/// `(n - 1) * 64 + 64`: `a + extra` in the parameters' names.
fn sym_text(env: &Env, a: &Affine, extra: i64) -> String {
    let a = a.clone().plus(Affine::constant(extra)).unwrap_or_else(|| a.clone());
    launch::affine_sym(env, &a).map_or_else(|| "?".into(), |e| env.sym.text(&e))
}

#[allow(clippy::too_many_arguments)]
fn dim(k: &Kernel, env: &Env, at: &Facts, d: usize, rank: usize, begin: &Expr, extent: i64, size: i64) -> Verdict {
    let text = crate::text::top_text(k, begin);
    let Some(a0) = expr::affine(env, begin) else {
        if let (Some(lo), Some(hi)) = clamped(env, at, begin) {
            if extent >= 1 && lo >= 0 && hi.saturating_add(extent) <= size {
                return Verdict::Inside;
            }
        }
        let why = format!(
            "dim {d} begins at `{text}`, which is not affine in loop variables and scope ids (data, a product of variables, ...)"
        );
        return Verdict::Unproven { dim: d, why };
    };
    let bounds = |v: VarId| env.var_bounds(at, v);
    // A variable with one value here is that constant (as at a call, `CallCx::affine`).
    let pinned = |v: VarId| bounds(v).filter(|b| b.lo == b.hi).map(|b| b.lo);
    let range = a0.substitute(&pinned).and_then(|a| a.range(&bounds));
    let Some(iv) = range else {
        let why = match a0.vars().into_iter().find(|&v| bounds(v).is_none()) {
            Some(v) => format!("dim {d} begins at `{text}`, and `{}` has no known range here", k.var(v).name),
            None => format!("dim {d} begins at `{text}`, whose range overflows i64"),
        };
        return Verdict::Unproven { dim: d, why };
    };
    let ranges = a0.vars().into_iter().map(|v| var_text(k, env, at, v)).collect::<Vec<_>>().join(", ");
    let detail = if a0.is_constant() {
        format!("begins at {}", a0.constant)
    } else {
        format!("begins at `{text}`, in [{}, {}] here ({ranges})", iv.lo, iv.hi)
    };
    if extent >= 1 && extent <= size && iv.lo >= 0 && iv.hi.saturating_add(extent) <= size {
        return Verdict::Inside;
    }
    let leaves = |v: i64| v < 0 || v.saturating_add(extent) > size || extent < 1;
    if iv.exact || extent > size || extent < 1 {
        if let Some((at_vals, v)) = witness(k, env, at, &a0, &iv, &leaves) {
            return Verdict::Outside(Escape { dim: d, at: at_vals, begin: v, extent, size, detail, rank });
        }
    }
    let (one, many) = dim_nouns(rank, d);
    let noun = if extent == 1 { one } else { many };
    let why = format!(
        "dim {d} {detail}, which is only an enclosure (not every value is known to be reached), and its end reaches {noun} outside [0, {size})"
    );
    Verdict::Unproven { dim: d, why }
}

/// The ends of `e`'s range that `T.min` / `T.max` clamps or a remainder by a positive
/// constant fix, whatever their other operand (data, a product of variables):
/// `T.min(T.max(I[0], 0), 7)` and `I[0] % 8` are in [0, 7]. An affine operand contributes
/// its own range.
pub(crate) fn clamped(env: &Env, at: &Facts, e: &Expr) -> (Option<i64>, Option<i64>) {
    let both = |a: Option<i64>, b: Option<i64>, f: fn(i64, i64) -> i64| a.zip(b).map(|(x, y)| f(x, y));
    let either = |a: Option<i64>, b: Option<i64>, f: fn(i64, i64) -> i64| match (a, b) {
        (Some(x), Some(y)) => Some(f(x, y)),
        (x, None) | (None, x) => x,
    };
    match &e.kind {
        ExprKind::Binary(op @ (BinOp::Min | BinOp::Max), a, b) => {
            let ((alo, ahi), (blo, bhi)) = (clamped(env, at, a), clamped(env, at, b));
            if *op == BinOp::Min {
                (both(alo, blo, i64::min), either(ahi, bhi, i64::min))
            } else {
                (either(alo, blo, i64::max), both(ahi, bhi, i64::max))
            }
        }
        // `x % c` (a floor remainder) by a positive constant is in [0, c) whatever `x` is: a
        // loaded value's (a tile index taken from a counter) is bounded so.
        ExprKind::Binary(BinOp::FloorMod, _, c) if e.dtype.is_int() => match expr::affine(env, c) {
            Some(c) if c.is_constant() && c.constant > 0 => (Some(0), Some(c.constant - 1)),
            _ => (None, None),
        },
        _ => {
            let bounds = |v: VarId| env.var_bounds(at, v);
            let range = expr::affine(env, e).and_then(|a| a.range(&bounds));
            (range.map(|r| r.lo), range.map(|r| r.hi))
        }
    }
}

/// A corner of the variables' box where the begin leaves the buffer: the
/// values there (by name) and the begin's value; the extreme on the side the
/// range leaves.
fn witness(
    k: &Kernel,
    env: &Env,
    at: &Facts,
    a: &Affine,
    iv: &Interval,
    leaves: &dyn Fn(i64) -> bool,
) -> Option<(Vec<(String, i64)>, i64)> {
    let vars = a.vars();
    let ends: Vec<(VarId, i64, i64)> =
        vars.iter().map(|&v| env.var_bounds(at, v).map(|b| (v, b.lo, b.hi))).collect::<Option<Vec<_>>>()?;
    let free = ends.iter().filter(|(_, lo, hi)| lo != hi).count();
    if free > MAX_CORNERS.trailing_zeros() as usize {
        return None;
    }
    let low_side = iv.lo < 0;
    let mut best: Option<(BTreeMap<VarId, i64>, i64)> = None;
    for mask in 0..(1usize << free) {
        let mut bit = 0;
        let mut values = BTreeMap::new();
        for &(v, lo, hi) in &ends {
            let x = if lo == hi {
                lo
            } else {
                bit += 1;
                if mask >> (bit - 1) & 1 == 1 {
                    hi
                } else {
                    lo
                }
            };
            values.insert(v, x);
        }
        let c = a.substitute(&|v| values.get(&v).copied())?;
        if !c.is_constant() {
            return None;
        }
        let x = c.constant;
        let better = best.as_ref().is_none_or(|(_, b)| if low_side { x < *b } else { x > *b });
        if leaves(x) && better {
            best = Some((values, x));
        }
    }
    let (values, x) = best?;
    Some((vars.iter().map(|v| (k.var(*v).name.clone(), values[v])).collect(), x))
}

/// `w in [1, 3]`.
fn var_text(k: &Kernel, env: &Env, at: &Facts, v: VarId) -> String {
    let name = &k.var(v).name;
    match env.var_bounds(at, v) {
        Some(r) => format!("{name} in [{}, {}]", r.lo, r.hi),
        None => format!("{name} (range unknown)"),
    }
}

/// The global region of a `copy_async` forced to TMA (`tma_explicit` or `tma_auto`): the
/// TMA unit bounds it itself (a load fills what lies outside the tensor, a store clips it;
/// docs/tile-primitives.md §3.20), so it is not checked here.
pub(crate) fn hardware_bounded(call: &TileCall, b: &Buffer) -> bool {
    call.op == tirx_ir::hir::TileOp::CopyAsync
        && matches!(call.dispatch.as_deref(), Some("tma_explicit" | "tma_auto"))
        && b.scope == tirx_ir::hir::MemScope::Global
}

/// A copy with `clip=True` (module `copy::guard`) tests each element's memory coordinate
/// itself, so its memory regions are not checked here.
pub(crate) fn clipped(call: &TileCall, b: &Buffer) -> bool {
    call.op == tirx_ir::hir::TileOp::Copy && call.flag(&tirx_ir::op::CLIP) && b.scope != tirx_ir::hir::MemScope::Local
}

/// Which ends of each dim of a clipped region its elements must test: `(below 0, past
/// the end)`, false where every element is proven inside.
pub(crate) fn clip_guards(k: &Kernel, env: &Env, at: &Facts, r: &BufferRegion) -> Vec<(bool, bool)> {
    let b = k.buf(r.buf);
    r.ranges
        .iter()
        .enumerate()
        .map(|(d, g)| {
            let inside = if symbolic(env, b, d, &g.begin) {
                sym_dim(k, env, at, b, d, &g.begin, g.extent) == Verdict::Inside
            } else {
                dim(k, env, at, d, b.shape.len(), &g.begin, g.extent, b.shape[d]) == Verdict::Inside
            };
            if inside {
                return (false, false);
            }
            let bounds = |v: VarId| env.var_bounds(at, v);
            let lo_ok = expr::affine(env, &g.begin).and_then(|a| a.range(&bounds)).is_some_and(|iv| iv.lo >= 0);
            (!lo_ok, true)
        })
        .collect()
}

/// The regions of a call with whether the op writes them, in argument order.
pub(crate) fn call_regions(call: &TileCall) -> impl Iterator<Item = (&BufferRegion, bool)> {
    let slots = call.op.operands();
    call.args.iter().enumerate().filter_map(move |(i, a)| match a {
        TileArg::Region(r) => Some((r, slots.get(i).is_some_and(|s| s.role == Role::Dst))),
        _ => None,
    })
}

/// `(16, 32)`, `(n, 128)`: the shape as the source declares it.
pub(crate) fn shape_text(k: &Kernel, b: &Buffer) -> String {
    let mut dims: Vec<String> = b.shape.iter().map(i64::to_string).collect();
    if let (Some(e), Some(d0)) = (&b.dyn_outer, dims.first_mut()) {
        *d0 = crate::text::top_text(k, e);
    }
    if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    }
}

/// The user error of a region (or scalar access, `what` its text) that leaves its buffer.
pub(crate) fn outside_error(k: &Kernel, b: &Buffer, what: &str, span: Span, e: &Escape, write: bool) -> Diagnostic {
    let (_, many) = dim_nouns(e.rank, e.dim);
    let guard = if e.at.is_empty() {
        format!("change `{what}` so that its {many} stay inside [0, {})", e.size)
    } else {
        let names: Vec<&str> = e.at.iter().map(|(n, _)| n.as_str()).collect();
        format!(
            "every value of {} must keep the {many} inside [0, {}): change the region or the launch, or guard the access with an `if` on {}",
            names.join(", "),
            e.size,
            names.join(" and ")
        )
    };
    Diagnostic::error(
        span,
        format!("`{what}` is out of bounds of `{}` (shape {}): {}", b.name, shape_text(k, b), e.what(write)),
    )
    .with_label(e.what(write))
    .with_note(e.location(&b.name))
    .with_help(guard)
}

/// The user error of a region (or scalar access) outside its buffer for every launch.
pub(crate) fn never_error(k: &Kernel, b: &Buffer, what: &str, span: Span, why: &str) -> Diagnostic {
    Diagnostic::error(
        span,
        format!("`{what}` is out of bounds of `{}` (shape {}) for every launch", b.name, shape_text(k, b)),
    )
    .with_label("always out of bounds")
    .with_note(why.to_string())
    .with_help("change the region so that it ends inside the run-time size")
}

/// [`never_error`] as a warning, lowered anyway (`defer_bounds`).
pub(crate) fn never_deferred_warning(k: &Kernel, b: &Buffer, what: &str, span: Span, why: &str) -> Diagnostic {
    Diagnostic::warning(
        span,
        format!(
            "`{what}` is out of bounds of `{}` (shape {}) for every launch; lowered anyway (bounds deferred to the simulator)",
            b.name,
            shape_text(k, b)
        ),
    )
    .with_label("always out of bounds")
    .with_note(why.to_string())
    .with_help("this kernel is for `tirx sim` only: the simulator reports the first out-of-bounds access")
}

/// The warning of a region (or scalar access) not proven in bounds.
pub(crate) fn unproven_warning(k: &Kernel, b: &Buffer, what: &str, span: Span, why: &str) -> Diagnostic {
    Diagnostic::warning(span, format!("cannot prove `{what}` inside `{}` (shape {}): {why}", b.name, shape_text(k, b)))
        .with_label("not proven in bounds")
        .with_note("`tirx sim` checks it dim by dim at every execution; the GPU does not")
        .with_help(
            "give its indices known ranges (loops with constant bounds, scope ids, `if` on them) or guard the access with such an `if`",
        )
}

/// The warning of a region that leaves its buffer, lowered anyway (`defer_bounds`).
pub(crate) fn deferred_warning(k: &Kernel, b: &Buffer, what: &str, span: Span, e: &Escape, write: bool) -> Diagnostic {
    Diagnostic::warning(
        span,
        format!(
            "`{what}` is out of bounds of `{}` (shape {}): {}; lowered anyway (bounds deferred to the simulator)",
            b.name,
            shape_text(k, b),
            e.what(write)
        ),
    )
    .with_label(e.what(write))
    .with_note(e.location(&b.name))
    .with_help("this kernel is for `tirx sim` only: the simulator reports the first out-of-bounds access")
}

/// The [`BoundsCheck`] of `b[begins : +extents]` at `span`; `None` when the
/// buffer has no flat array here or a begin cannot be lowered (both reported elsewhere).
pub(crate) fn check_stmt(
    k: &Kernel,
    env: &Env,
    bld: &Builder,
    buf: BufId,
    dims: &[(&Expr, i64)],
    write: bool,
    span: Span,
) -> Option<LStmt> {
    let hb = k.buf(buf);
    let (lb, _) = env.lbuf(buf)?;
    let mut begins = Vec::with_capacity(dims.len());
    for (e, _) in dims {
        let v = expr::lower(k, env, bld, e).ok()?;
        let t = bld.dtype_of(&v);
        begins.push(if matches!(t, DType::I32 | DType::I64) { v } else { bld.convert(v, DType::I64) });
    }
    let check = BoundsCheck {
        buf: lb,
        name: hb.name.clone(),
        shape: hb.shape.clone(),
        begins,
        extents: dims.iter().map(|(_, e)| *e).collect(),
        write,
    };
    Some(LStmt::new(LStmtKind::Bounds(check), span))
}

/// The loads of `e` that are always evaluated when `e` is (not in the branches
/// of a select or on the right of `and`/`or`): buffer, indices and the load's span.
pub(crate) fn strict_loads<'e>(e: &'e Expr, out: &mut Vec<(BufId, &'e [Expr], Span)>) {
    match &e.kind {
        ExprKind::Load(b, idx) => {
            idx.iter().for_each(|i| strict_loads(i, out));
            out.push((*b, idx, e.span));
        }
        ExprKind::Binary(BinOp::And | BinOp::Or, a, _) => strict_loads(a, out),
        ExprKind::Binary(_, a, b) => {
            strict_loads(a, out);
            strict_loads(b, out);
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => strict_loads(a, out),
        ExprKind::Select(c, _, _) => strict_loads(c, out),
        ExprKind::Call(_, args) => args.iter().for_each(|a| strict_loads(a, out)),
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {}
    }
}

/// `B[i, j + 1]`.
pub(crate) fn element_text(k: &Kernel, b: BufId, indices: &[Expr]) -> String {
    let idx: Vec<String> = indices.iter().map(|i| crate::text::top_text(k, i)).collect();
    format!("{}[{}]", k.buf(b).name, idx.join(", "))
}
