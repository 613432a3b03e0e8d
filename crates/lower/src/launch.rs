//! What lowering knows of values the launch decides (docs/tile-primitives.md §7):
//! scalar parameters, a symbolic outer buffer dimension and symbolic grid dims.
//!
//! * `Symbols` (the `symbols` module): per scalar parameter its LIR variable and the facts about it —
//!   a range and a divisor from `T.assume` and its type, and the implicit facts
//!   every launch guarantees (a symbolic buffer dim and a grid dim are ≥ 1).
//! * [`sym_range`]: the range of an affine index whose ends are affine in the
//!   parameters (`bx ∈ [0, (n + 63) // 64 - 1]` gives `bx * 64 ∈ [0, …]`), by the
//!   interval arithmetic of [`Affine::range`] with symbolic ends.
//! * [`le`]: decides `lhs ≤ rhs` for affine forms in the parameters: proven (both
//!   sides normalize to linear forms over the parameters and opaque `//`/`%` atoms,
//!   a parameter with a divisibility fact `n % m == 0` is `m·(n // m)`, each atom is
//!   replaced by its bound — `64·((n + 63) // 64) ∈ [n, n + 63]` — and what is left
//!   is bounded by the parameters' ranges), never true, or a condition to check at
//!   launch.
//! * [`guarded_le`]: the same inequality from what an enclosing `if` or loop over a
//!   run-time size guarantees (`if row < n:` proves `row + 1 ≤ n`).
//!
//! Dispatch never assumes what it was not given: a fact enters only through
//! `T.assume` (checked at every launch) or the launch's own checks.

use crate::affine::{Affine, Source, Term};
use crate::cond::{conjuncts, linear, Cond};
use crate::env::Env;
use crate::expr;
use crate::scope::{Facts, IdRange};
use tirx_ir::hir::{BinOp, Expr, ExprKind, Kernel, UnOp, VarId};
use tirx_ir::lir::launch::GRID_LIMITS;
use tirx_ir::lir::{SymExpr, SymOp};

/// Atoms eliminated at most, proving one inequality (nesting is shallow in practice).
const MAX_STEPS: usize = 32;

/// An integer expression of scalar parameters (HIR) as the launch evaluates it.
pub fn to_sym(env: &Env, e: &Expr) -> Option<SymExpr> {
    let bin = |op, a: &Expr, b: &Expr| Some(SymExpr::bin(op, to_sym(env, a)?, to_sym(env, b)?));
    match &e.kind {
        ExprKind::Int(v) => Some(SymExpr::Int(*v)),
        ExprKind::Bool(b) => Some(SymExpr::Int(i64::from(*b))),
        ExprKind::Var(v) => Some(SymExpr::Param(env.sym.params.get(v)?.lv)),
        ExprKind::Cast(a) if e.dtype.is_int() => to_sym(env, a),
        ExprKind::Unary(UnOp::Neg, a) => Some(SymExpr::bin(SymOp::Sub, SymExpr::Int(0), to_sym(env, a)?)),
        ExprKind::Unary(UnOp::Not, a) => Some(SymExpr::bin(SymOp::Eq, to_sym(env, a)?, SymExpr::Int(0))),
        ExprKind::Binary(op, a, b) => {
            let op = match op {
                BinOp::Add => SymOp::Add,
                BinOp::Sub => SymOp::Sub,
                BinOp::Mul => SymOp::Mul,
                BinOp::FloorDiv => SymOp::FloorDiv,
                BinOp::FloorMod => SymOp::FloorMod,
                BinOp::Min => SymOp::Min,
                BinOp::Max => SymOp::Max,
                BinOp::Eq => SymOp::Eq,
                BinOp::Ne => SymOp::Ne,
                BinOp::Lt => SymOp::Lt,
                BinOp::Le => SymOp::Le,
                BinOp::Gt => SymOp::Gt,
                BinOp::Ge => SymOp::Ge,
                BinOp::And | BinOp::BitAnd => SymOp::And,
                BinOp::Or | BinOp::BitOr => SymOp::Or,
                _ => return None,
            };
            bin(op, a, b)
        }
        _ => None,
    }
}

/// An affine form over parameters (and `//`, `%` atoms of such) as a [`SymExpr`].
pub fn affine_sym(env: &Env, a: &Affine) -> Option<SymExpr> {
    let mut acc: Option<SymExpr> = None;
    for (t, c) in &a.terms {
        let x = term_sym(env, t)?;
        let x = if *c == 1 { x } else { SymExpr::bin(SymOp::Mul, x, SymExpr::Int(*c)) };
        acc = Some(match acc {
            None => x,
            Some(s) => SymExpr::bin(SymOp::Add, s, x),
        });
    }
    Some(match (acc, a.constant) {
        (None, c) => SymExpr::Int(c),
        (Some(s), 0) => s,
        (Some(s), c) if c < 0 => SymExpr::bin(SymOp::Sub, s, SymExpr::Int(c.checked_neg()?)),
        (Some(s), c) => SymExpr::bin(SymOp::Add, s, SymExpr::Int(c)),
    })
}

fn term_sym(env: &Env, t: &Term) -> Option<SymExpr> {
    Some(match t {
        Term::Var(v) => SymExpr::Param(env.sym.params.get(v)?.lv),
        Term::FloorDiv(x, k) => SymExpr::bin(SymOp::FloorDiv, affine_sym(env, x)?, SymExpr::Int(*k)),
        Term::FloorMod(x, k) => SymExpr::bin(SymOp::FloorMod, affine_sym(env, x)?, SymExpr::Int(*k)),
    })
}

/// The facts about every scalar parameter of `k`: type ranges, `T.assume`
/// conjuncts of the forms `a·n + c <op> 0` (ranges) and `n % m == 0` (units), and
/// `implied`: affine expressions every launch guarantees ≥ 1 (symbolic dims and grid dims).
pub fn collect_facts(k: &Kernel, env: &mut Env, implied: &[Affine]) {
    for a in &k.assumes {
        let text = assume_text(env, k, a);
        let mut parts = Vec::new();
        conjuncts(a, &mut parts);
        for c in parts {
            let Some((v, fact)) = one_fact(env, c) else { continue };
            if let Some(p) = env.sym.params.get_mut(&v) {
                match fact {
                    Fact::Unit(m) => p.unit = lcm(p.unit, m),
                    Fact::Range(lo, hi) => {
                        p.lo = Some(p.lo.map_or(lo, |x| x.max(lo)));
                        p.hi = Some(p.hi.map_or(hi, |x| x.min(hi)));
                    }
                }
            }
        }
        let mut vars = Vec::new();
        used(a, &mut vars);
        for v in vars {
            if let Some(p) = env.sym.params.get_mut(&v) {
                if !p.facts.contains(&text) {
                    p.facts.push(text.clone());
                }
            }
        }
    }
    for a in implied {
        // `c·n + k ≥ 1` with c > 0: n ≥ ⌈(1 - k) / c⌉.
        let [(Term::Var(v), c)] = a.terms.as_slice() else { continue };
        let Some(p) = env.sym.params.get_mut(v) else { continue };
        if *c > 0 {
            if let Some(lo) = 1i64.checked_sub(a.constant).map(|x| x.div_euclid(*c) + i64::from(x.rem_euclid(*c) != 0))
            {
                p.lo = Some(p.lo.map_or(lo, |x| x.max(lo)));
            }
        }
    }
}

/// A `T.assume` condition as text, with Python's precedence (`n % 64 == 0 and n >= 128`).
pub fn assume_text(env: &Env, k: &Kernel, a: &Expr) -> String {
    to_sym(env, a).map_or_else(|| crate::text::top_text(k, a), |e| env.sym.text(&e))
}

enum Fact {
    Unit(i64),
    Range(i64, i64),
}

/// One conjunct of a `T.assume` as a fact about one parameter, when it is one.
fn one_fact(env: &Env, c: &Expr) -> Option<(VarId, Fact)> {
    let ExprKind::Binary(op, l, r) = &c.kind else { return None };
    let d = expr::affine(env, l)?.minus(expr::affine(env, r)?)?;
    let [(t, a)] = d.terms.as_slice() else { return None };
    match (t, op) {
        // `n % m == 0` (either side): n is a multiple of m.
        (Term::FloorMod(x, m), BinOp::Eq) if d.constant == 0 => {
            let [(Term::Var(v), 1)] = x.terms.as_slice() else { return None };
            (x.constant % m == 0).then_some((*v, Fact::Unit(*m)))
        }
        (Term::Var(v), _) => match linear(*a, d.constant, *op)? {
            Cond::In(IdRange::Range(lo, hi)) => {
                let hi = if hi == i64::MAX { i64::MAX } else { hi - 1 };
                Some((*v, Fact::Range(lo, hi)))
            }
            _ => None,
        },
        _ => None,
    }
}

fn used(e: &Expr, out: &mut Vec<VarId>) {
    match &e.kind {
        ExprKind::Var(v) if !out.contains(v) => out.push(*v),
        ExprKind::Binary(_, a, b) => {
            used(a, out);
            used(b, out);
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => used(a, out),
        _ => {}
    }
}

fn lcm(a: i64, b: i64) -> i64 {
    let g = crate::affine::gcd(a.abs(), b.abs()).max(1);
    (a / g).checked_mul(b).map_or(a, i64::abs)
}

/// Inclusive range whose ends are affine in the parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct SymInterval {
    pub lo: Affine,
    pub hi: Affine,
    /// Both ends are taken by some values of the variables (for every launch).
    pub exact: bool,
}

/// Whether `v` is a CTA id of a symbolic grid dim.
pub fn sym_grid_dim(env: &Env, v: VarId) -> Option<u8> {
    let d = env.cta_dim(v)?;
    env.sym.grid[d as usize].is_some().then_some(d)
}

/// The range of variable `v` at `at` with symbolic ends: a parameter is itself; a
/// CTA id of a symbolic grid dim runs to the grid's expression minus one unless an
/// `if` cut it below the bound (then its constant end, not exact); anything else
/// its numeric range.
fn var_sym(env: &Env, at: &Facts, v: VarId) -> Option<(Affine, Affine, bool, Option<Source>)> {
    if env.sym.is_param(v) {
        return Some((Affine::var(v), Affine::var(v), true, None));
    }
    let b = env.var_bounds(at, v)?;
    if let Some(d) = sym_grid_dim(env, v) {
        let exact = at.active.untracked.is_none() && !at.uncaptured;
        let g = env.sym.grid[d as usize].as_ref()?;
        let cut = b.hi < GRID_LIMITS[d as usize] - 1;
        let hi = match (&g.affine, cut) {
            (Some(a), false) => a.clone().minus(Affine::constant(1))?,
            _ => Affine::constant(b.hi),
        };
        // A range starting above 0 may be empty for small grids: not every end is taken.
        let exact = exact && !cut && b.lo == 0 && g.affine.is_some();
        return Some((Affine::constant(b.lo), hi, exact, Some(b.source)));
    }
    Some((Affine::constant(b.lo), Affine::constant(b.hi), b.exact, Some(b.source)))
}

/// The range of `a` at `at` (interval arithmetic as [`Affine::range`], ends affine
/// in the parameters); `None` when a variable has no range or on overflow.
pub fn sym_range(env: &Env, at: &Facts, a: &Affine) -> Option<SymInterval> {
    sym_range_from(env, at, a).map(|(i, _)| i)
}

fn sym_range_from(env: &Env, at: &Facts, a: &Affine) -> Option<(SymInterval, Vec<Source>)> {
    let mut acc = SymInterval { lo: Affine::constant(a.constant), hi: Affine::constant(a.constant), exact: true };
    let mut sources: Vec<Source> = Vec::new();
    for (t, c) in &a.terms {
        let (lo, hi, exact, ts) = match t {
            Term::Var(v) => {
                let (lo, hi, exact, s) = var_sym(env, at, *v)?;
                (lo, hi, exact, s.into_iter().collect::<Vec<_>>())
            }
            Term::FloorDiv(x, k) => {
                let (i, s) = sym_range_from(env, at, x)?;
                (i.lo.floor_div(*k)?, i.hi.floor_div(*k)?, i.exact, s)
            }
            Term::FloorMod(x, k) => {
                let (i, s) = sym_range_from(env, at, x)?;
                let same_period = i.lo.is_constant()
                    && i.hi.is_constant()
                    && i.lo.constant.div_euclid(*k) == i.hi.constant.div_euclid(*k);
                if same_period {
                    (i.lo.floor_mod(*k)?, i.hi.floor_mod(*k)?, i.exact, s)
                } else if x.vars().iter().all(|v| env.sym.is_param(*v)) {
                    // A remainder of parameters only is one value per launch: itself.
                    let t = Affine { constant: 0, terms: vec![(t.clone(), 1)] };
                    (t.clone(), t, true, s)
                } else {
                    (Affine::constant(0), Affine::constant(k - 1), false, s)
                }
            }
        };
        let (l, h) = (lo.scale(*c)?, hi.scale(*c)?);
        let (l, h) = if *c > 0 { (l, h) } else { (h, l) };
        acc.lo = acc.lo.plus(l)?;
        acc.hi = acc.hi.plus(h)?;
        acc.exact &= exact && !ts.iter().any(|s| sources.contains(s));
        sources.extend(ts);
    }
    Some((acc, sources))
}

/// What is known of `lhs ≤ rhs` over every launch the facts allow.
#[derive(Clone, Debug, PartialEq)]
pub enum Le {
    /// Holds for every launch.
    Proven,
    /// Holds for no launch.
    Never,
    /// Depends on the arguments: this condition, to check at launch.
    AtLaunch(SymExpr),
    /// Cannot be decided or expressed.
    Unknown,
}

/// Decides `lhs ≤ rhs` (affine forms in the parameters).
pub fn le(env: &Env, lhs: &Affine, rhs: &Affine) -> Le {
    let Some(x) = rhs.clone().minus(lhs.clone()) else { return Le::Unknown };
    if nonneg(env, &x) {
        return Le::Proven;
    }
    if x.clone().scale(-1).and_then(|n| n.minus(Affine::constant(1))).is_some_and(|n| nonneg(env, &n)) {
        return Le::Never;
    }
    match condition(env, &x) {
        Some(c) => Le::AtLaunch(c),
        None => Le::Unknown,
    }
}

/// Whether `lhs ≤ rhs` follows from one of `guards` (forms ≥ 0 where the access is):
/// the variables that are not parameters must cancel against a positive multiple of
/// the guard (`n - row - 1 ≥ 0` proves `row + 1 ≤ n`), and what is left must be
/// ≥ 0 for every launch.
pub fn guarded_le(env: &Env, guards: &[Affine], lhs: &Affine, rhs: &Affine) -> bool {
    let Some(x) = rhs.clone().minus(lhs.clone()) else { return false };
    let free = |a: &Affine| a.terms.iter().find(|(t, _)| !term_of_params(env, t)).cloned();
    let Some((t, cx)) = free(&x) else { return false };
    guards.iter().any(|g| {
        let Some(cg) = g.terms.iter().find(|(u, _)| *u == t).map(|(_, c)| *c) else { return false };
        if cg.signum() != cx.signum() {
            return false;
        }
        let y = x.clone().scale(cg.abs()).and_then(|a| a.minus(g.clone().scale(cx.abs())?));
        y.is_some_and(|y| free(&y).is_none() && nonneg(env, &y))
    })
}

/// A term whose value depends on scalar parameters only.
fn term_of_params(env: &Env, t: &Term) -> bool {
    match t {
        Term::Var(v) => env.sym.is_param(*v),
        Term::FloorDiv(x, _) | Term::FloorMod(x, _) => x.vars().iter().all(|v| env.sym.is_param(*v)),
    }
}

/// `x ≥ 0` as a readable condition: terms of negative coefficient (and a negative
/// constant) on the left, the rest on the right: `(n + 63) // 64 * 64 <= n`.
fn condition(env: &Env, x: &Affine) -> Option<SymExpr> {
    let (mut left, mut right) = (Affine::default(), Affine::default());
    for (t, c) in &x.terms {
        let side = if *c < 0 { &mut left } else { &mut right };
        side.terms.push((t.clone(), c.checked_abs()?));
    }
    if x.constant < 0 {
        left.constant = x.constant.checked_neg()?;
    } else {
        right.constant = x.constant;
    }
    Some(SymExpr::bin(SymOp::Le, affine_sym(env, &left)?, affine_sym(env, &right)?))
}

/// Whether `x ≥ 0` for every launch the facts allow (sound, incomplete).
pub fn nonneg(env: &Env, x: &Affine) -> bool {
    let Some(mut x) = with_units(env, x) else { return false };
    for _ in 0..MAX_STEPS {
        let Some(i) = x.terms.iter().position(|(t, _)| !matches!(t, Term::Var(_))) else {
            return linear_nonneg(env, &x);
        };
        let (t, a) = x.terms.remove(i);
        let next = match &t {
            // k·⌊y/k⌋ ∈ [y - k + 1, y]: scale by k and replace the atom by its bound on the side that lowers x.
            Term::FloorDiv(y, k) => {
                // `n // k` of a parameter that is a multiple of k is exactly n / k.
                let exact =
                    matches!(y.terms.as_slice(), [(Term::Var(v), 1)] if y.constant == 0 && env.sym.unit(*v) % k == 0);
                let bound =
                    if a > 0 && !exact { (**y).clone().minus(Affine::constant(k - 1)) } else { Some((**y).clone()) };
                x.clone().scale(*k).and_then(|s| s.plus(bound?.scale(a)?))
            }
            // y mod k ∈ [0, k - 1].
            Term::FloorMod(_, k) => {
                if a > 0 {
                    Some(x.clone())
                } else {
                    (k - 1).checked_mul(a).and_then(|m| x.clone().plus(Affine::constant(m)))
                }
            }
            Term::Var(_) => None,
        };
        let Some(n) = next else { return false };
        x = n;
    }
    false
}

/// `x ≥ 0` for a linear form in parameters, from their ranges.
fn linear_nonneg(env: &Env, x: &Affine) -> bool {
    let mut low = i128::from(x.constant);
    for (t, c) in &x.terms {
        let Term::Var(v) = t else { return false };
        let Some(p) = env.sym.params.get(v) else { return false };
        let end = if *c > 0 { p.lo } else { p.hi };
        let Some(end) = end else { return false };
        low += i128::from(*c) * i128::from(end);
    }
    low >= 0
}

/// `x` with every parameter of known unit `m > 1` written `m·(n // m)`, so that
/// floor atoms simplify (`(n + 63) // 64` is `n // 64` for a multiple of 64).
fn with_units(env: &Env, x: &Affine) -> Option<Affine> {
    let mut out = Affine::constant(x.constant);
    for (t, c) in &x.terms {
        let t = match t {
            Term::Var(v) => match env.sym.unit(*v) {
                1 => Affine::var(*v),
                m => Affine { constant: 0, terms: vec![(Term::FloorDiv(Box::new(Affine::var(*v)), m), m)] },
            },
            Term::FloorDiv(y, k) => with_units(env, y)?.floor_div(*k)?,
            Term::FloorMod(y, k) => with_units(env, y)?.floor_mod(*k)?,
        };
        out = out.plus(t.scale(*c)?)?;
    }
    Some(out)
}
