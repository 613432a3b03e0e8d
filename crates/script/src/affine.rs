//! Affine forms of index expressions, so that a slice `(t + 1) * 8 : ...`
//! or `t * 8 : t * 8 + 8` has a provably constant extent: `end - begin` is
//! computed on `Σ coeff·term + const` where terms are variables or any other
//! (non-affine) subexpression compared up to spans.

use tirx_ir::hir::{BinOp, Expr, ExprKind, UnOp};

/// `Σ coeff·term + constant`.
#[derive(Debug, Default)]
struct Affine {
    terms: Vec<(Expr, i64)>,
    constant: i64,
}

impl Affine {
    fn add_term(&mut self, e: &Expr, c: i64) -> Option<()> {
        let key = crate::spans::strip(e);
        match self.terms.iter_mut().find(|(t, _)| *t == key) {
            Some((_, k)) => *k = k.checked_add(c)?,
            None => self.terms.push((key, c)),
        }
        Some(())
    }

    /// Adds `scale · e`.
    fn add(&mut self, e: &Expr, scale: i64) -> Option<()> {
        match &e.kind {
            ExprKind::Int(v) => self.constant = self.constant.checked_add(v.checked_mul(scale)?)?,
            ExprKind::Binary(BinOp::Add, a, b) => {
                self.add(a, scale)?;
                self.add(b, scale)?;
            }
            ExprKind::Binary(BinOp::Sub, a, b) => {
                self.add(a, scale)?;
                self.add(b, scale.checked_neg()?)?;
            }
            ExprKind::Binary(BinOp::Mul, a, b) => match (&a.kind, &b.kind) {
                (ExprKind::Int(k), _) => self.add(b, scale.checked_mul(*k)?)?,
                (_, ExprKind::Int(k)) => self.add(a, scale.checked_mul(*k)?)?,
                _ => self.add_term(e, scale)?,
            },
            ExprKind::Unary(UnOp::Neg, a) => self.add(a, scale.checked_neg()?)?,
            _ => self.add_term(e, scale)?,
        }
        Some(())
    }
}

/// `end - begin` when it is a constant for every value of the variables.
pub(crate) fn constant_difference(begin: &Expr, end: &Expr) -> Option<i64> {
    if !(begin.dtype.is_int() && end.dtype.is_int()) {
        return None;
    }
    let mut f = Affine::default();
    f.add(end, 1)?;
    f.add(begin, -1)?;
    f.terms.iter().all(|(_, c)| *c == 0).then_some(f.constant)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::hir::VarId;
    use tirx_ir::{DType, Span};

    fn e(kind: ExprKind) -> Expr {
        Expr { kind, dtype: DType::I32, span: Span::new(1, 2) }
    }
    fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        e(ExprKind::Binary(op, Box::new(a), Box::new(b)))
    }

    #[test]
    fn differences() {
        let t = e(ExprKind::Var(VarId(0)));
        let u = e(ExprKind::Var(VarId(1)));
        let i = |v| e(ExprKind::Int(v));
        let begin = bin(BinOp::Mul, t.clone(), i(8));
        let end = bin(BinOp::Mul, bin(BinOp::Add, t.clone(), i(1)), i(8));
        assert_eq!(constant_difference(&begin, &end), Some(8));
        let q = bin(BinOp::FloorDiv, t.clone(), i(4));
        assert_eq!(constant_difference(&q, &bin(BinOp::Add, q.clone(), i(2))), Some(2));
        assert_eq!(constant_difference(&t, &u), None);
        assert_eq!(constant_difference(&t, &bin(BinOp::Mul, t.clone(), i(2))), None);
    }
}
