//! HIR expressions → LIR expressions: types reconciled with explicit casts,
//! Python floor semantics kept only where an operand may be negative, integer
//! arithmetic folded; and the affine view of an index (`by*64 + 3`) that copy
//! variants use for symbolic region begins.

use crate::build::Builder;
use crate::stmt::Env;
use tirx_ir::hir::{BinOp, Expr, ExprKind, Kernel, UnOp, VarId};
use tirx_ir::lir::{LBinOp, LExpr};
use tirx_ir::{DType, Diagnostic};

pub fn lower(k: &Kernel, env: &Env, b: &Builder, e: &Expr) -> Result<LExpr, Diagnostic> {
    let t = e.dtype;
    Ok(match &e.kind {
        ExprKind::Int(v) => LExpr::Int(*v, if t.is_int() { t } else { DType::I32 }),
        ExprKind::Float(v) => LExpr::Float(*v, t),
        ExprKind::Bool(v) => LExpr::Bool(*v),
        ExprKind::Var(v) => {
            let val = env.var(*v).ok_or_else(|| {
                Diagnostic::error(e.span, format!("`{}` is not defined at this point of the kernel", k.var(*v).name))
            })?;
            b.convert(val, t)
        }
        ExprKind::Binary(op, x, y) => {
            let (x, y) = (lower(k, env, b, x)?, lower(k, env, b, y)?);
            binary(b, *op, x, y, t)
        }
        ExprKind::Unary(op, x) => {
            let x = lower(k, env, b, x)?;
            match (op, &x) {
                (UnOp::Neg, LExpr::Int(v, ty)) => LExpr::Int(-v, *ty),
                (UnOp::Neg, LExpr::Float(v, ty)) => LExpr::Float(-v, *ty),
                (UnOp::Not, LExpr::Bool(v)) => LExpr::Bool(!v),
                _ => LExpr::Un(*op, Box::new(x)),
            }
        }
        ExprKind::Cast(x) => {
            let x = lower(k, env, b, x)?;
            b.convert(x, t)
        }
        ExprKind::Select(c, x, y) => {
            let c = lower(k, env, b, c)?;
            let (x, y) = (b.convert(lower(k, env, b, x)?, t), b.convert(lower(k, env, b, y)?, t));
            match c {
                LExpr::Bool(true) => x,
                LExpr::Bool(false) => y,
                c => LExpr::Select(Box::new(c), Box::new(x), Box::new(y)),
            }
        }
        ExprKind::Call(f, args) => {
            let args = args.iter().map(|a| lower(k, env, b, a).map(|a| b.convert(a, t))).collect::<Result<_, _>>()?;
            LExpr::Math(*f, args)
        }
        ExprKind::Load(buf, idx) => {
            let idx = idx.iter().map(|i| lower(k, env, b, i)).collect::<Result<Vec<_>, _>>()?;
            let (lb, index) =
                crate::addr::element(k, env, b, *buf, &idx, false).map_err(|m| Diagnostic::error(e.span, m))?;
            b.convert(LExpr::Load(lb, Box::new(index)), t)
        }
    })
}

fn binary(b: &Builder, op: BinOp, x: LExpr, y: LExpr, t: DType) -> LExpr {
    let cmp = matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge);
    let logic = matches!(op, BinOp::And | BinOp::Or);
    let ty = if cmp {
        common(b.dtype_of(&x), b.dtype_of(&y))
    } else if logic {
        DType::Bool
    } else {
        t
    };
    let (x, y) = (b.convert(x, ty), b.convert(y, ty));
    let int = ty.is_int();
    let lop = match op {
        BinOp::Add if int => return b.add(x, y),
        BinOp::Sub if int => return b.sub(x, y),
        BinOp::Mul if int => return b.mul(x, y),
        BinOp::FloorDiv | BinOp::Div if int => {
            if let LExpr::Int(c, _) = y {
                if c > 0 {
                    return b.div_c(x, c);
                }
            }
            if b.non_negative(&x) && b.bounds(&y).is_some_and(|(lo, _)| lo > 0) {
                LBinOp::Div
            } else {
                LBinOp::FloorDiv
            }
        }
        BinOp::FloorMod if int => {
            if let LExpr::Int(c, _) = y {
                if c > 0 {
                    return b.rem_c(x, c);
                }
            }
            if b.non_negative(&x) && b.bounds(&y).is_some_and(|(lo, _)| lo > 0) {
                LBinOp::Rem
            } else {
                LBinOp::FloorMod
            }
        }
        BinOp::FloorDiv => return LExpr::Math(tirx_ir::hir::MathFn::Floor, vec![LExpr::bin(LBinOp::Div, x, y)]),
        BinOp::FloorMod => {
            let q = LExpr::Math(tirx_ir::hir::MathFn::Floor, vec![LExpr::bin(LBinOp::Div, x.clone(), y.clone())]);
            return LExpr::bin(LBinOp::Sub, x, LExpr::bin(LBinOp::Mul, q, y));
        }
        BinOp::Add => LBinOp::Add,
        BinOp::Sub => LBinOp::Sub,
        BinOp::Mul => LBinOp::Mul,
        BinOp::Div => LBinOp::Div,
        BinOp::Min => LBinOp::Min,
        BinOp::Max => LBinOp::Max,
        BinOp::Eq => LBinOp::Eq,
        BinOp::Ne => LBinOp::Ne,
        BinOp::Lt => LBinOp::Lt,
        BinOp::Le => LBinOp::Le,
        BinOp::Gt => LBinOp::Gt,
        BinOp::Ge => LBinOp::Ge,
        BinOp::And => LBinOp::And,
        BinOp::Or => LBinOp::Or,
        BinOp::BitAnd => LBinOp::BitAnd,
        BinOp::BitOr => LBinOp::BitOr,
        BinOp::BitXor => LBinOp::BitXor,
        BinOp::Shl => LBinOp::Shl,
        BinOp::Shr => LBinOp::Shr,
    };
    if let (LExpr::Int(a, _), LExpr::Int(c, _)) = (&x, &y) {
        if let Some(v) = fold_int(lop, *a, *c) {
            return v;
        }
    }
    LExpr::bin(lop, x, y)
}

fn fold_int(op: LBinOp, a: i64, c: i64) -> Option<LExpr> {
    let bool_ = |v: bool| Some(LExpr::Bool(v));
    match op {
        LBinOp::Eq => bool_(a == c),
        LBinOp::Ne => bool_(a != c),
        LBinOp::Lt => bool_(a < c),
        LBinOp::Le => bool_(a <= c),
        LBinOp::Gt => bool_(a > c),
        LBinOp::Ge => bool_(a >= c),
        _ => None,
    }
}

/// The comparison type of two operands: the float one, else the wider int.
fn common(a: DType, b: DType) -> DType {
    if a == b || a.is_float() {
        a
    } else if b.is_float() {
        b
    } else if a.bits() >= b.bits() {
        a
    } else {
        b
    }
}

/// `constant + Σ coefficient · var`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Affine {
    pub constant: i64,
    pub terms: Vec<(VarId, i64)>,
}

// Both return `None` on i64 overflow (a user-written index), which makes the index non-affine.
impl Affine {
    fn scale(mut self, c: i64) -> Option<Affine> {
        self.constant = self.constant.checked_mul(c)?;
        for t in &mut self.terms {
            t.1 = t.1.checked_mul(c)?;
        }
        self.terms.retain(|t| t.1 != 0);
        Some(self)
    }
    fn plus(mut self, o: Affine) -> Option<Affine> {
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
}

/// The largest constant every value of `Σ coefficient · var` is a multiple of
/// (0 when there are no terms). It serves alignment proofs, so a coefficient
/// of `i64::MIN` (no positive `i64`) counts as the odd `i64::MAX`: conservative.
pub fn divisor(terms: &[(VarId, i64)]) -> i64 {
    terms.iter().fold(0, |g, t| gcd(g, t.1.checked_abs().unwrap_or(i64::MAX)))
}

pub fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The affine form of an integer index, when it has one.
pub fn affine(env: &Env, e: &Expr) -> Option<Affine> {
    match &e.kind {
        ExprKind::Int(v) => Some(Affine { constant: *v, terms: vec![] }),
        ExprKind::Var(v) => env.var(*v).map(|_| Affine { constant: 0, terms: vec![(*v, 1)] }),
        ExprKind::Cast(x) if e.dtype.is_int() => affine(env, x),
        ExprKind::Unary(UnOp::Neg, x) => affine(env, x)?.scale(-1),
        ExprKind::Binary(BinOp::Add, x, y) => affine(env, x)?.plus(affine(env, y)?),
        ExprKind::Binary(BinOp::Sub, x, y) => affine(env, x)?.plus(affine(env, y)?.scale(-1)?),
        ExprKind::Binary(BinOp::Mul, x, y) => {
            let (a, c) = (affine(env, x)?, affine(env, y)?);
            match (a.terms.is_empty(), c.terms.is_empty()) {
                (true, _) => c.scale(a.constant),
                (_, true) => a.scale(c.constant),
                _ => None,
            }
        }
        _ => None,
    }
}
