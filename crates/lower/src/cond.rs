//! Conditions on one variable (`if` guards, `T.assume` facts): what a
//! conjunct `a·v + k <op> 0` says of `v`, as a range, a residue or an exception.

use crate::scope::IdRange;
use tirx_ir::hir::{BinOp, Expr, ExprKind};
use tirx_ir::DType;

/// What one conjunct says of one variable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cond {
    In(IdRange),
    /// Every value but this one.
    Except(i64),
    Always,
}

impl Cond {
    /// No value.
    pub(crate) const NEVER: Cond = Cond::In(IdRange::Range(0, 0));

    /// The complement, when it is one condition.
    pub(crate) fn complement(self) -> Option<Cond> {
        Some(match self {
            Cond::In(IdRange::Range(lo, hi)) if lo == i64::MIN => Cond::In(IdRange::Range(hi, i64::MAX)),
            Cond::In(IdRange::Range(lo, hi)) if hi == i64::MAX => Cond::In(IdRange::Range(i64::MIN, lo)),
            Cond::In(IdRange::Range(lo, hi)) if hi.checked_sub(lo) == Some(1) => Cond::Except(lo),
            Cond::In(IdRange::Residue(2, r)) => Cond::In(IdRange::Residue(2, 1 - r)),
            Cond::Except(c) => Cond::In(IdRange::Range(c, c.saturating_add(1))),
            Cond::Always => Cond::NEVER,
            Cond::In(_) => return None,
        })
    }
}

/// `a·v + k <op> 0` as a condition on `v` (`a ≠ 0`); `None` on overflow.
pub(crate) fn linear(a: i64, k: i64, op: BinOp) -> Option<Cond> {
    let nk = k.checked_neg()?;
    // a·v ≤ x and a·v ≥ x, dividing by a (flipping for a < 0).
    let at_most = |x: i64| -> Option<Cond> {
        Some(Cond::In(if a > 0 {
            IdRange::Range(i64::MIN, floor_div(x, a)?.saturating_add(1))
        } else {
            IdRange::Range(ceil_div(x, a)?, i64::MAX)
        }))
    };
    let at_least = |x: i64| -> Option<Cond> {
        Some(Cond::In(if a > 0 {
            IdRange::Range(ceil_div(x, a)?, i64::MAX)
        } else {
            IdRange::Range(i64::MIN, floor_div(x, a)?.saturating_add(1))
        }))
    };
    let exact = (nk.checked_rem(a)? == 0).then(|| nk / a);
    match op {
        BinOp::Lt => at_most(nk.checked_sub(1)?),
        BinOp::Le => at_most(nk),
        BinOp::Gt => at_least(nk.checked_add(1)?),
        BinOp::Ge => at_least(nk),
        BinOp::Eq => Some(exact.map_or(Cond::NEVER, |x| Cond::In(IdRange::Range(x, x.saturating_add(1))))),
        BinOp::Ne => Some(exact.map_or(Cond::Always, Cond::Except)),
        _ => None,
    }
}

/// `⌊x / a⌋` for any nonzero `a`.
pub(crate) fn floor_div(x: i64, a: i64) -> Option<i64> {
    let q = x.checked_div(a)?;
    Some(if x.checked_rem(a)? != 0 && ((x < 0) != (a < 0)) { q - 1 } else { q })
}

/// `⌈x / a⌉` for any nonzero `a`.
fn ceil_div(x: i64, a: i64) -> Option<i64> {
    floor_div(x.checked_neg()?, a)?.checked_neg()
}

pub(crate) fn conjuncts<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match &e.kind {
        ExprKind::Binary(BinOp::And, a, b) => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        ExprKind::Binary(BinOp::BitAnd, a, b) if e.dtype == DType::Bool => {
            conjuncts(a, out);
            conjuncts(b, out);
        }
        _ => out.push(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scope::AxisRange;
    use tirx_ir::hir::BinOp;

    const MIN: i64 = i64::MIN;
    const MAX: i64 = i64::MAX;

    fn range(lo: i64, hi: i64) -> Option<Cond> {
        Some(Cond::In(IdRange::Range(lo, hi)))
    }

    #[test]
    fn linear_conditions_solve_for_the_variable() {
        // w - 1 >= 0, 1 <= w (as w·(-1) + 1 <= 0), w > 0, 2·w >= 2: all w >= 1.
        assert_eq!(linear(1, -1, BinOp::Ge), range(1, MAX));
        assert_eq!(linear(-1, 1, BinOp::Le), range(1, MAX));
        assert_eq!(linear(1, 0, BinOp::Gt), range(1, MAX));
        assert_eq!(linear(2, -2, BinOp::Ge), range(1, MAX));
        // 2·v < 7 ⇔ v <= 3; 2·v <= -7 ⇔ v <= -4; -3·v < 7 ⇔ v >= -2.
        assert_eq!(linear(2, -7, BinOp::Lt), range(MIN, 4));
        assert_eq!(linear(2, 7, BinOp::Le), range(MIN, -3));
        assert_eq!(linear(-3, -7, BinOp::Lt), range(-2, MAX));
        // Equalities: 2·v == 6 ⇔ v == 3; 2·v == 7 never; 2·v != 7 always; v != 4.
        assert_eq!(linear(2, -6, BinOp::Eq), range(3, 4));
        assert_eq!(linear(2, -7, BinOp::Eq), Some(Cond::NEVER));
        assert_eq!(linear(2, -7, BinOp::Ne), Some(Cond::Always));
        assert_eq!(linear(1, -4, BinOp::Ne), Some(Cond::Except(4)));
        assert_eq!(linear(1, MIN, BinOp::Lt), None);
        assert_eq!(linear(1, 0, BinOp::Add), None);
    }

    #[test]
    fn complements() {
        assert_eq!(Cond::In(IdRange::Range(MIN, 3)).complement(), range(3, MAX));
        assert_eq!(Cond::In(IdRange::Range(1, MAX)).complement(), range(MIN, 1));
        assert_eq!(Cond::In(IdRange::Range(2, 3)).complement(), Some(Cond::Except(2)));
        assert_eq!(Cond::Except(2).complement(), range(2, 3));
        assert_eq!(Cond::In(IdRange::Residue(2, 0)).complement(), Some(Cond::In(IdRange::Residue(2, 1))));
        assert_eq!(Cond::In(IdRange::Residue(4, 0)).complement(), None);
        assert_eq!(Cond::In(IdRange::Range(2, 5)).complement(), None);
        assert_eq!(Cond::Always.complement(), Some(Cond::NEVER));
    }

    #[test]
    fn floor_and_ceil_division() {
        assert_eq!(
            (floor_div(7, 2), floor_div(-7, 2), floor_div(7, -2), floor_div(-7, -2)),
            (Some(3), Some(-4), Some(-4), Some(3))
        );
        assert_eq!((ceil_div(7, 2), ceil_div(-7, 2), ceil_div(6, 3)), (Some(4), Some(-3), Some(2)));
        assert_eq!(floor_div(MIN, -1), None);
    }

    /// Against enumeration over `v` in [0, 8): every `a·v + k <op> 0` selects exactly
    /// the values its condition keeps (`Except` applied at an end, as `restrict` does).
    #[test]
    fn linear_against_enumeration() {
        let ops = [BinOp::Lt, BinOp::Le, BinOp::Gt, BinOp::Ge, BinOp::Eq, BinOp::Ne];
        for a in [-3i64, -2, -1, 1, 2, 3] {
            for k in -12..=12 {
                for op in ops {
                    let holds = |v: i64| {
                        let x = a * v + k;
                        match op {
                            BinOp::Lt => x < 0,
                            BinOp::Le => x <= 0,
                            BinOp::Gt => x > 0,
                            BinOp::Ge => x >= 0,
                            BinOp::Eq => x == 0,
                            _ => x != 0,
                        }
                    };
                    let want: Vec<i64> = (0..8).filter(|&v| holds(v)).collect();
                    let full = AxisRange::full(8);
                    let got = match linear(a, k, op).unwrap() {
                        Cond::Always => Some(full),
                        Cond::In(r) => full.narrow(r),
                        Cond::Except(0) => full.narrow(IdRange::Range(1, MAX)),
                        Cond::Except(7) => full.narrow(IdRange::Range(MIN, 7)),
                        Cond::Except(x) if !(0..8).contains(&x) => Some(full),
                        Cond::Except(_) => None,
                    };
                    let Some(got) = got else { continue };
                    let got: Vec<i64> = (0..got.extent).map(|i| got.offset + i * got.stride).collect();
                    assert_eq!(got, want, "{a}·v + {k} {op:?} 0");
                }
            }
        }
    }
}
