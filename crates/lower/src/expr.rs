//! HIR expressions → LIR expressions: types reconciled with explicit casts,
//! Python floor semantics kept only where an operand may be negative, integer
//! arithmetic folded; and the affine view of an index (`by*64 + 3`,
//! `(k + 1) % 2 * 1024`) that copy variants use for symbolic region begins,
//! with its range given the ranges of its variables (docs/tile-primitives.md §1.3, §3.1).

use crate::affine::Affine;
use crate::build::Builder;
use crate::env::Env;
use tirx_ir::hir::{BinOp, Expr, ExprKind, Kernel, UnOp};
use tirx_ir::lir::{LBinOp, LExpr};
use tirx_ir::{DType, Diagnostic};

pub fn lower(k: &Kernel, env: &Env, b: &Builder, e: &Expr) -> Result<LExpr, Diagnostic> {
    lower_with(k, env, b, e, &Default::default())
}

/// [`lower`] with some variables bound to values of this point of the LIR (a mask's
/// coordinates, per element).
pub fn lower_with(
    k: &Kernel,
    env: &Env,
    b: &Builder,
    e: &Expr,
    bound: &std::collections::HashMap<tirx_ir::hir::VarId, LExpr>,
) -> Result<LExpr, Diagnostic> {
    let lower = |k: &Kernel, env: &Env, b: &Builder, e: &Expr| lower_with(k, env, b, e, bound);
    let t = e.dtype;
    Ok(match &e.kind {
        ExprKind::Int(v) => LExpr::Int(*v, if t.is_int() { t } else { DType::I32 }),
        ExprKind::Float(v) => LExpr::Float(*v, t),
        ExprKind::Bool(v) => LExpr::Bool(*v),
        ExprKind::Var(v) if bound.contains_key(v) => b.convert(bound[v].clone(), t),
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
        ExprKind::Unary(op, x) => unary(*op, lower(k, env, b, x)?),
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

/// A mask's condition (`masked_fill`), its coordinates bound per element as
/// `whole = register + thread` (`split`: each coordinate's register-loop part, a constant
/// once the loops unroll, and its thread part). A comparison of a coordinate with an
/// integer expression free of it compares the register part with that expression less the
/// thread part (through `and`, `or` and `not`): one compare with a constant per element, the
/// expression computed once a row, where the whole coordinate would cost an add per element
/// and leave ptxas a compare per element to hoist (FlashAttention-3's causal mask). Exact in
/// integers; anything else lowers as [`lower_with`].
pub fn lower_split_cond(
    k: &Kernel,
    env: &Env,
    b: &Builder,
    e: &Expr,
    bound: &std::collections::HashMap<tirx_ir::hir::VarId, LExpr>,
    split: &std::collections::HashMap<tirx_ir::hir::VarId, (LExpr, LExpr)>,
) -> Result<LExpr, Diagnostic> {
    let coordinate = |x: &Expr| match x.kind {
        ExprKind::Var(v) => split.get(&v).map(|parts| (v, parts)),
        _ => None,
    };
    match &e.kind {
        ExprKind::Binary(op @ (BinOp::And | BinOp::Or), x, y) => {
            let (x, y) = (lower_split_cond(k, env, b, x, bound, split)?, lower_split_cond(k, env, b, y, bound, split)?);
            Ok(binary(b, *op, x, y, DType::Bool))
        }
        ExprKind::Unary(UnOp::Not, x) => Ok(unary(UnOp::Not, lower_split_cond(k, env, b, x, bound, split)?)),
        ExprKind::Binary(op, x, y) if is_comparison(*op) => {
            // (coordinate op rest) or (rest op coordinate), rest an integer free of it
            let side = |c: &Expr, rest: &Expr| coordinate(c).filter(|(v, _)| rest.dtype.is_int() && !rest.uses(*v));
            let moved = |rest: &Expr, thread: &LExpr| -> Result<LExpr, Diagnostic> {
                let r = lower_with(k, env, b, rest, bound)?;
                let t = common(b.dtype_of(&r), b.dtype_of(thread));
                Ok(b.sub(b.convert(r, t), b.convert(thread.clone(), t)))
            };
            if let Some((_, (reg, thread))) = side(x, y) {
                let r = moved(y, thread)?;
                return Ok(binary(b, *op, reg.clone(), r, DType::Bool));
            }
            if let Some((_, (reg, thread))) = side(y, x) {
                let l = moved(x, thread)?;
                return Ok(binary(b, *op, l, reg.clone(), DType::Bool));
            }
            lower_with(k, env, b, e, bound)
        }
        _ => lower_with(k, env, b, e, bound),
    }
}

/// `op x`, folded where `x` is a constant.
fn unary(op: UnOp, x: LExpr) -> LExpr {
    match (op, &x) {
        (UnOp::Neg, LExpr::Int(v, ty)) => LExpr::Int(-v, *ty),
        (UnOp::Neg, LExpr::Float(v, ty)) => LExpr::Float(-v, *ty),
        (UnOp::Not, LExpr::Bool(v)) => LExpr::Bool(!v),
        _ => LExpr::Un(op, Box::new(x)),
    }
}

fn is_comparison(op: BinOp) -> bool {
    matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
}

fn binary(b: &Builder, op: BinOp, x: LExpr, y: LExpr, t: DType) -> LExpr {
    let cmp = is_comparison(op);
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
    if let Some(v) = fold_logic(lop, &x, &y) {
        return v;
    }
    LExpr::bin(lop, x, y)
}

/// `true && y` is `y`, `false && y` is `false` (and `||` alike, either side): a condition a
/// script builds from a folded comparison (`r == 0` in a one-trip loop) leaves no `true &&` in
/// the CUDA. (An operand dropped is one C++ would not need: LIR expressions have no effects.)
fn fold_logic(op: LBinOp, x: &LExpr, y: &LExpr) -> Option<LExpr> {
    let (c, other) = match (x, y) {
        (LExpr::Bool(c), o) | (o, LExpr::Bool(c)) => (*c, o),
        _ => return None,
    };
    match (op, c) {
        (LBinOp::And, true) | (LBinOp::Or, false) => Some(other.clone()),
        (LBinOp::And, false) | (LBinOp::Or, true) => Some(LExpr::Bool(c)),
        _ => None,
    }
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

/// The affine form of an integer index, when it has one: sums, differences,
/// products by constants, and floor division and remainder by positive
/// constants (as atoms, [`Term`](crate::affine::Term)) of variables defined here.
/// The largest power of two (up to 2^30) that divides every value of integer `e`, also where
/// `e` has no affine form (a loaded tile index times 128): products multiply, sums and
/// differences take the smaller. Exact under wrap-around, which keeps factors of two.
pub fn pow2_multiple(env: &Env, e: &Expr) -> i64 {
    const MAX: i64 = 1 << 30;
    let p2 = |n: i64| if n == 0 { MAX } else { 1i64 << n.trailing_zeros().min(30) };
    if let Some(a) = affine(env, e) {
        return p2(a.divisor_with(&|v| env.unit(v)));
    }
    match &e.kind {
        ExprKind::Binary(BinOp::Mul, x, y) => (pow2_multiple(env, x) * pow2_multiple(env, y)).min(MAX),
        ExprKind::Binary(BinOp::Add | BinOp::Sub, x, y) => pow2_multiple(env, x).min(pow2_multiple(env, y)),
        ExprKind::Cast(x) if e.dtype.is_int() && x.dtype.is_int() => pow2_multiple(env, x),
        _ => 1,
    }
}

pub fn affine(env: &Env, e: &Expr) -> Option<Affine> {
    let positive = |y: &Expr| affine(env, y).filter(|c| c.is_constant() && c.constant > 0).map(|c| c.constant);
    match &e.kind {
        ExprKind::Int(v) => Some(Affine::constant(*v)),
        // A variable bound to a constant here (a one-trip loop, a constant `let`) is that
        // constant; a `let` of an affine value is that value.
        ExprKind::Var(v) => match env.var(*v)? {
            LExpr::Int(c, _) => Some(Affine::constant(c)),
            _ => Some(env.let_affine(*v).cloned().unwrap_or_else(|| Affine::var(*v))),
        },
        ExprKind::Cast(x) if e.dtype.is_int() => affine(env, x),
        ExprKind::Unary(UnOp::Neg, x) => affine(env, x)?.scale(-1),
        ExprKind::Binary(BinOp::Add, x, y) => affine(env, x)?.plus(affine(env, y)?),
        ExprKind::Binary(BinOp::Sub, x, y) => affine(env, x)?.minus(affine(env, y)?),
        ExprKind::Binary(BinOp::Mul, x, y) => {
            let (a, c) = (affine(env, x)?, affine(env, y)?);
            match (a.is_constant(), c.is_constant()) {
                (true, _) => c.scale(a.constant),
                (_, true) => a.scale(c.constant),
                _ => None,
            }
        }
        ExprKind::Binary(BinOp::FloorDiv, x, y) if e.dtype.is_int() => affine(env, x)?.floor_div(positive(y)?),
        ExprKind::Binary(BinOp::FloorMod, x, y) if e.dtype.is_int() => affine(env, x)?.floor_mod(positive(y)?),
        _ => None,
    }
}

/// The value of a compile-time constant scalar (`1.0`, `-1`, `T.float32(0)`).
pub fn constant(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Float(v) => Some(*v),
        ExprKind::Unary(UnOp::Neg, a) => constant(a).map(|v| -v),
        ExprKind::Cast(a) => constant(a),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::lir::Special;

    #[test]
    fn logic_with_a_constant_side_folds() {
        let cond = LExpr::bin(LBinOp::Lt, LExpr::Special(Special::ThreadIdx(0)), LExpr::i32(3));
        let t = LExpr::Bool(true);
        let f = LExpr::Bool(false);
        assert_eq!(fold_logic(LBinOp::And, &t, &cond), Some(cond.clone()));
        assert_eq!(fold_logic(LBinOp::And, &cond, &t), Some(cond.clone()));
        assert_eq!(fold_logic(LBinOp::Or, &f, &cond), Some(cond.clone()));
        assert_eq!(fold_logic(LBinOp::And, &f, &cond), Some(LExpr::Bool(false)));
        assert_eq!(fold_logic(LBinOp::Or, &cond, &t), Some(LExpr::Bool(true)));
        assert_eq!(fold_logic(LBinOp::And, &cond, &cond), None);
        assert_eq!(fold_logic(LBinOp::BitAnd, &t, &cond), None);
    }
}
