//! Affine index forms: constant + Σ coefficient·term, where a term is a
//! variable or the floor quotient/remainder of an affine form by a constant;
//! their ranges by interval arithmetic, divisors and substitution. Pure: the
//! lowering's alignment, bounds and partition proofs are built on it.

use crate::build::Builder;
use tirx_ir::hir::VarId;
use tirx_ir::lir::LExpr;
use tirx_ir::DType;

/// An opaque term of an affine index: a variable, or the floor quotient or
/// floor remainder of an affine expression by a positive constant
/// (`(k + 1) % 2`, `tid // 4`). An atom's value is an integer like a
/// variable's; what the copy variants need of it is its LIR value
/// ([`Affine::add_to`]) and its range ([`Affine::range`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Term {
    Var(VarId),
    /// `⌊a / c⌋`, `c > 1`; `a` is not a multiple of `c` and has terms.
    FloorDiv(Box<Affine>, i64),
    /// `a mod c` in `[0, c)`, `c > 1`; `a` has terms.
    FloorMod(Box<Affine>, i64),
}

/// `constant + Σ coefficient · term`: distinct terms with nonzero
/// coefficients, in order of first appearance (an atom's own expression has
/// its terms sorted, so equal atoms compare equal).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Affine {
    pub constant: i64,
    pub terms: Vec<(Term, i64)>,
}

// The arithmetic returns `None` on i64 overflow (a user-written index), which makes the index non-affine.
impl Affine {
    pub fn constant(c: i64) -> Affine {
        Affine { constant: c, terms: vec![] }
    }

    pub fn var(v: VarId) -> Affine {
        Affine { constant: 0, terms: vec![(Term::Var(v), 1)] }
    }

    /// No terms: the value is [`Affine::constant`].
    pub fn is_constant(&self) -> bool {
        self.terms.is_empty()
    }

    pub fn is_zero(&self) -> bool {
        self.is_constant() && self.constant == 0
    }

    pub fn scale(mut self, c: i64) -> Option<Affine> {
        self.constant = self.constant.checked_mul(c)?;
        for t in &mut self.terms {
            t.1 = t.1.checked_mul(c)?;
        }
        self.terms.retain(|t| t.1 != 0);
        Some(self)
    }

    pub fn plus(mut self, o: Affine) -> Option<Affine> {
        self.constant = self.constant.checked_add(o.constant)?;
        for (v, c) in o.terms {
            match self.terms.iter_mut().find(|t| t.0 == v) {
                Some(t) => t.1 = t.1.checked_add(c)?,
                None => self.terms.push((v, c)),
            }
        }
        self.terms.retain(|t| t.1 != 0);
        Some(self)
    }

    pub fn minus(self, o: Affine) -> Option<Affine> {
        self.plus(o.scale(-1)?)
    }

    /// The terms whose coefficient is a multiple of `c`, divided by `c`, and
    /// the rest with the constant reduced to `[0, c)`: `self = c·(q + k) + r`.
    fn split(self, c: i64) -> (Affine, i64, Affine) {
        let (mut q, mut r) = (Affine::default(), Affine::default());
        for (t, k) in self.terms {
            if k % c == 0 {
                q.terms.push((t, k / c));
            } else {
                r.terms.push((t, k));
            }
        }
        r.constant = self.constant.rem_euclid(c);
        r.terms.sort();
        (q, self.constant.div_euclid(c), r)
    }

    /// `⌊self / c⌋` for `c > 0`: multiples of `c` come out of the floor
    /// (`(32·w + lane) // 32` = `w + lane // 32`), the rest is an atom.
    pub fn floor_div(self, c: i64) -> Option<Affine> {
        if c <= 0 {
            return None;
        }
        if c == 1 {
            return Some(self);
        }
        let (mut q, k, r) = self.split(c);
        q.constant = k;
        if r.is_constant() {
            // 0 ≤ r.constant < c
            return Some(q);
        }
        q.plus(Affine { constant: 0, terms: vec![(Term::FloorDiv(Box::new(r), c), 1)] })
    }

    /// `self mod c` (in `[0, c)`) for `c > 0`: multiples of `c` drop out, the rest is an atom.
    pub fn floor_mod(self, c: i64) -> Option<Affine> {
        if c <= 0 {
            return None;
        }
        let (_, _, r) = self.split(c);
        if r.is_constant() {
            return Some(r);
        }
        Some(Affine { constant: 0, terms: vec![(Term::FloorMod(Box::new(r), c), 1)] })
    }

    /// The largest constant every value is a multiple of (0 when the value is
    /// always 0): the gcd of the constant and of each coefficient times what its
    /// term is a multiple of — 1 for a variable or a quotient, `gcd(divisor(a), c)`
    /// for `a mod c` (`(4·q) % 32` moves in steps of 4). It serves alignment
    /// proofs, so an `i64::MIN` (no positive `i64`) counts as the odd
    /// `i64::MAX`, and an overflowing product as the coefficient alone: conservative.
    pub fn divisor(&self) -> i64 {
        self.divisor_with(&|_| 1)
    }

    /// [`Affine::divisor`] where variable `v` is known to be a multiple of `unit(v)`
    /// (a scalar parameter with `T.assume(v % unit == 0)`).
    pub fn divisor_with(&self, unit: &dyn Fn(VarId) -> i64) -> i64 {
        let abs = |x: i64| x.checked_abs().unwrap_or(i64::MAX);
        let term = |t: &Term| match t {
            Term::Var(v) => unit(*v).max(1),
            Term::FloorDiv(..) => 1,
            Term::FloorMod(a, c) => gcd(a.divisor_with(unit), *c),
        };
        self.terms.iter().fold(abs(self.constant), |g, (t, k)| {
            let step = abs(*k).checked_mul(term(t)).unwrap_or(abs(*k));
            gcd(g, step)
        })
    }

    /// `self` with the variables `value` knows replaced by their value (atoms
    /// re-simplified: `(w - 1) % 4` with `w = 2` is `1`); `None` on overflow.
    pub fn substitute(&self, value: &dyn Fn(VarId) -> Option<i64>) -> Option<Affine> {
        let mut out = Affine::constant(self.constant);
        for (t, c) in &self.terms {
            let t = match t {
                Term::Var(v) => value(*v).map_or_else(|| Affine::var(*v), Affine::constant),
                Term::FloorDiv(x, k) => x.substitute(value)?.floor_div(*k)?,
                Term::FloorMod(x, k) => x.substitute(value)?.floor_mod(*k)?,
            };
            out = out.plus(t.scale(*c)?)?;
        }
        Some(out)
    }

    /// Every variable the value depends on (atoms included), each once, in order of appearance.
    pub fn vars(&self) -> Vec<VarId> {
        fn walk(a: &Affine, out: &mut Vec<VarId>) {
            for (t, _) in &a.terms {
                match t {
                    Term::Var(v) if !out.contains(v) => out.push(*v),
                    Term::Var(_) => {}
                    Term::FloorDiv(x, _) | Term::FloorMod(x, _) => walk(x, out),
                }
            }
        }
        let mut out = Vec::new();
        walk(self, &mut out);
        out
    }

    /// The values the expression takes when every variable ranges over
    /// `var(v)`; `None` when a variable has no known range or on overflow.
    /// Interval arithmetic: sound always; `exact` (both ends are taken by some
    /// assignment) when every variable's range is exact, the terms depend on
    /// disjoint [`Source`]s and no remainder wraps around.
    pub fn range(&self, var: &dyn Fn(VarId) -> Option<VarBounds>) -> Option<Interval> {
        self.range_from(var).map(|(i, _)| i)
    }

    fn range_from(&self, var: &dyn Fn(VarId) -> Option<VarBounds>) -> Option<(Interval, Vec<Source>)> {
        let mut acc = Interval { lo: self.constant, hi: self.constant, exact: true };
        let mut sources: Vec<Source> = Vec::new();
        for (t, c) in &self.terms {
            let (ti, ts) = match t {
                Term::Var(v) => {
                    let b = var(*v)?;
                    (Interval { lo: b.lo, hi: b.hi, exact: b.exact }, vec![b.source])
                }
                Term::FloorDiv(x, k) => {
                    let (i, s) = x.range_from(var)?;
                    (Interval { lo: i.lo.div_euclid(*k), hi: i.hi.div_euclid(*k), exact: i.exact }, s)
                }
                // `x mod k` is in [0, k) whatever `x` is (an enclosure unless x's range
                // stays within one period).
                Term::FloorMod(x, k) => match x.range_from(var) {
                    Some((i, s)) if i.lo.div_euclid(*k) == i.hi.div_euclid(*k) => {
                        (Interval { lo: i.lo.rem_euclid(*k), hi: i.hi.rem_euclid(*k), exact: i.exact }, s)
                    }
                    Some((_, s)) => (Interval { lo: 0, hi: k - 1, exact: false }, s),
                    None => (Interval { lo: 0, hi: k - 1, exact: false }, vec![]),
                },
            };
            let (l, h) = (ti.lo.checked_mul(*c)?, ti.hi.checked_mul(*c)?);
            let (l, h) = if *c > 0 { (l, h) } else { (h, l) };
            acc.lo = acc.lo.checked_add(l)?;
            acc.hi = acc.hi.checked_add(h)?;
            acc.exact &= ti.exact && !ts.iter().any(|s| sources.contains(s));
            sources.extend(ts);
        }
        Some((acc, sources))
    }

    /// `acc + self` in LIR, in index type `ity`: each term times its
    /// coefficient in order, then the constant; `value` gives a variable's LIR
    /// value. `None` when a variable has no value here.
    pub fn add_to(&self, acc: LExpr, value: &dyn Fn(VarId) -> Option<LExpr>, b: &Builder, ity: DType) -> Option<LExpr> {
        let mut acc = acc;
        for (t, c) in &self.terms {
            let v = match t {
                Term::Var(v) => b.to_int(value(*v)?, ity),
                Term::FloorDiv(x, k) => b.div_c(x.add_to(LExpr::Int(0, ity), value, b, ity)?, *k),
                Term::FloorMod(x, k) => b.rem_c(x.add_to(LExpr::Int(0, ity), value, b, ity)?, *k),
            };
            acc = b.add(acc, b.mul(v, LExpr::Int(*c, ity)));
        }
        Some(match self.constant.checked_neg() {
            Some(m) if m > 0 => b.sub(acc, LExpr::Int(m, ity)),
            _ => b.add(acc, LExpr::Int(self.constant, ity)),
        })
    }
}

/// What a variable's values are independent of: two terms of one source are
/// correlated (every thread-level id is a function of the thread), terms of
/// different sources vary independently.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// A function of the thread within its CTA (lane, warp, thread ids).
    Thread,
    /// CTA index dim `d`.
    Cta(u8),
    /// A loop variable.
    Loop(VarId),
}

/// The inclusive range `[lo, hi]` of a variable at a program point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VarBounds {
    pub lo: i64,
    pub hi: i64,
    /// Every value in the range reaches here (`lo` and `hi` at least); false
    /// when an enclosing condition restricted it in a way not tracked.
    pub exact: bool,
    pub source: Source,
}

/// Inclusive `[lo, hi]`; `exact`: some assignment of the variables takes `lo`
/// and some takes `hi` (else only a sound enclosure).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    pub lo: i64,
    pub hi: i64,
    pub exact: bool,
}

pub fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(i: u32) -> Affine {
        Affine::var(VarId(i))
    }

    fn lin(terms: &[(u32, i64)], c: i64) -> Affine {
        let mut a = Affine::constant(c);
        for &(i, k) in terms {
            a = a.plus(v(i).scale(k).unwrap()).unwrap();
        }
        a
    }

    /// Var 0 in [0, 7] (a loop), var 1 in [1, 3] and var 2 in [0, 127] (thread ids).
    fn bounds(x: VarId) -> Option<VarBounds> {
        match x.0 {
            0 => Some(VarBounds { lo: 0, hi: 7, exact: true, source: Source::Loop(x) }),
            1 => Some(VarBounds { lo: 1, hi: 3, exact: true, source: Source::Thread }),
            2 => Some(VarBounds { lo: 0, hi: 127, exact: true, source: Source::Thread }),
            _ => None,
        }
    }

    fn range(a: &Affine) -> Option<Interval> {
        a.range(&bounds)
    }

    #[test]
    fn floor_div_and_mod_normalize() {
        // Multiples of the divisor leave the floor: (32·w + 4) // 32 = w, (32·w + t) // 32 = w + t // 32.
        assert_eq!(lin(&[(1, 32)], 4).floor_div(32), Some(v(1)));
        let d = lin(&[(1, 32), (2, 1)], 0).floor_div(32).unwrap();
        assert_eq!(d.terms[0], (Term::Var(VarId(1)), 1));
        assert_eq!(d.terms[1], (Term::FloorDiv(Box::new(v(2)), 32), 1));
        // Floor semantics for negative constants: (k - 1) // 2 = -1 + (k + 1) // 2.
        let n = lin(&[(0, 1)], -1).floor_div(2).unwrap();
        assert_eq!(n.constant, -1);
        assert_eq!(n.terms, vec![(Term::FloorDiv(Box::new(lin(&[(0, 1)], 1)), 2), 1)]);
        // (k + 3) % 2 = (k + 1) % 2; (4·k + 6) % 2 = 0; x % 1 = 0.
        assert_eq!(lin(&[(0, 1)], 3).floor_mod(2), lin(&[(0, 1)], 1).floor_mod(2));
        assert_eq!(lin(&[(0, 4)], 6).floor_mod(2), Some(Affine::constant(0)));
        assert_eq!(v(0).floor_mod(1), Some(Affine::constant(0)));
        // Equal atoms merge: (k + 1) % 2 + (1 + k) % 2 = 2·((k + 1) % 2).
        let a = lin(&[(0, 1)], 1).floor_mod(2).unwrap();
        let b = Affine::constant(1).plus(v(0)).unwrap().floor_mod(2).unwrap();
        assert_eq!(a.clone().plus(b).unwrap(), a.scale(2).unwrap());
        assert_eq!(v(0).floor_div(0), None);
    }

    #[test]
    fn ranges_by_interval_arithmetic() {
        // (w - 1) * 32, w in [1, 3]: [0, 64], exact.
        assert_eq!(range(&lin(&[(1, 32)], -32)), Some(Interval { lo: 0, hi: 64, exact: true }));
        // A negative coefficient swaps the ends.
        assert_eq!(range(&lin(&[(0, -2)], 20)), Some(Interval { lo: 6, hi: 20, exact: true }));
        // k + w: independent sources, exact.
        assert_eq!(range(&lin(&[(0, 1), (1, 1)], 0)), Some(Interval { lo: 1, hi: 10, exact: true }));
        // w + tid: both functions of the thread, correlated: a sound enclosure only.
        assert_eq!(range(&lin(&[(1, 1), (2, 1)], 0)), Some(Interval { lo: 1, hi: 130, exact: false }));
        // tid // 4 in [0, 31] (exact); (k + 1) % 2 in [0, 1] (wraps: not exact); (w - 1) % 4 in [0, 2] (no wrap: exact).
        assert_eq!(range(&v(2).floor_div(4).unwrap()), Some(Interval { lo: 0, hi: 31, exact: true }));
        assert_eq!(range(&lin(&[(0, 1)], 1).floor_mod(2).unwrap()), Some(Interval { lo: 0, hi: 1, exact: false }));
        let m = lin(&[(1, 1)], -1).floor_mod(4).unwrap();
        assert_eq!(range(&m), Some(Interval { lo: 0, hi: 2, exact: true }));
        // k + k % 2: one source twice, not exact.
        let kk = v(0).plus(v(0).floor_mod(2).unwrap()).unwrap();
        assert_eq!(range(&kk), Some(Interval { lo: 0, hi: 8, exact: false }));
        // A variable without a range, or an overflow: unknown.
        assert_eq!(range(&lin(&[(9, 1)], 0)), None);
        assert_eq!(range(&lin(&[(2, i64::MAX)], 0)), None);
        // An inexact variable makes the result inexact.
        let inexact = |x: VarId| bounds(x).map(|b| VarBounds { exact: false, ..b });
        assert!(!v(0).range(&inexact).unwrap().exact);
    }

    #[test]
    fn divisor_and_substitution() {
        assert_eq!(lin(&[(0, 1024), (1, 64)], 0).divisor(), 64);
        assert_eq!(lin(&[(0, 1024)], -32).divisor(), 32);
        // An atom counts as an integer: (k % 2) · 1024 moves in steps of 1024.
        assert_eq!(v(0).floor_mod(2).unwrap().scale(1024).unwrap().divisor(), 1024);
        assert_eq!(Affine::default().divisor(), 0);
        assert_eq!(lin(&[(0, i64::MIN)], 0).divisor(), i64::MAX);
        // A remainder keeps what both its argument and modulus are multiples of.
        assert_eq!(lin(&[(0, 4)], 0).floor_mod(32).unwrap().divisor(), 4);
        assert_eq!(lin(&[(0, 4)], 0).floor_mod(32).unwrap().scale(2).unwrap().divisor(), 8);
        assert_eq!(lin(&[(0, 4)], 2).floor_mod(32).unwrap().divisor(), 2);
        assert_eq!(lin(&[(0, 4)], 0).floor_div(32).unwrap().divisor(), 1);
        // Pinning w = 2 in (w - 1) * 32 + (k + w) % 2 gives 32 + k % 2 (the atom re-simplified).
        let a = lin(&[(1, 32)], -32).plus(lin(&[(0, 1), (1, 1)], 0).floor_mod(2).unwrap()).unwrap();
        let pinned = a.substitute(&|x| (x.0 == 1).then_some(2)).unwrap();
        assert_eq!(pinned, Affine::constant(32).plus(v(0).floor_mod(2).unwrap()).unwrap());
        assert_eq!(pinned.vars(), vec![VarId(0)]);
        assert_eq!(a.vars(), vec![VarId(1), VarId(0)]);
    }

    /// The value of `a` with var 0 = x and var 1 = y (floor semantics).
    fn eval(a: &Affine, x: i64, y: i64) -> i64 {
        let mut v = a.constant;
        for (t, c) in &a.terms {
            v += c * match t {
                Term::Var(VarId(0)) => x,
                Term::Var(_) => y,
                Term::FloorDiv(e, k) => eval(e, x, y).div_euclid(*k),
                Term::FloorMod(e, k) => eval(e, x, y).rem_euclid(*k),
            };
        }
        v
    }

    /// Against enumeration: the normal forms keep the value, the range encloses
    /// every value, and an exact range's ends are taken.
    #[test]
    fn ranges_against_enumeration() {
        let xs = (0..=5, 1..=3);
        let bounds = |x: VarId| {
            let (lo, hi) = if x.0 == 0 { (0, 5) } else { (1, 3) };
            Some(VarBounds { lo, hi, exact: true, source: Source::Loop(x) })
        };
        for c1 in -3..=3 {
            for c2 in -3..=3 {
                for k in -5..=5 {
                    for d in 2..=4 {
                        let a = lin(&[(0, c1), (1, c2)], k);
                        let forms = [
                            (a.clone(), Box::new(|x: i64, y: i64| c1 * x + c2 * y + k) as Box<dyn Fn(i64, i64) -> i64>),
                            (
                                a.clone().floor_div(d).unwrap(),
                                Box::new(move |x, y| (c1 * x + c2 * y + k).div_euclid(d)),
                            ),
                            (
                                a.clone().floor_mod(d).unwrap(),
                                Box::new(move |x, y| (c1 * x + c2 * y + k).rem_euclid(d)),
                            ),
                            (
                                a.clone().plus(a.clone().floor_mod(d).unwrap()).unwrap(),
                                Box::new(move |x, y| c1 * x + c2 * y + k + (c1 * x + c2 * y + k).rem_euclid(d)),
                            ),
                        ];
                        for (f, want) in &forms {
                            let values: Vec<i64> =
                                xs.0.clone()
                                    .flat_map(|x| xs.1.clone().map(move |y| (x, y)))
                                    .map(|(x, y)| {
                                        assert_eq!(eval(f, x, y), want(x, y), "{f:?} at ({x}, {y})");
                                        want(x, y)
                                    })
                                    .collect();
                            let r = f.range(&bounds).unwrap();
                            let (lo, hi) = (*values.iter().min().unwrap(), *values.iter().max().unwrap());
                            assert!(r.lo <= lo && hi <= r.hi, "{f:?}: {r:?} misses [{lo}, {hi}]");
                            if r.exact {
                                assert_eq!((r.lo, r.hi), (lo, hi), "{f:?}");
                            }
                        }
                    }
                }
            }
        }
    }
}
