//! Run-time values the launch decides (docs/tile-primitives.md §7): the outer
//! dimension of a parameter buffer (`T.match_buffer(A_ptr, (n, 128))`), the
//! extents of `T.cta_id([(n + 127) // 128])`, and `T.assume(n % 64 == 0)` facts.
//! Each is an integer expression (a condition, for `T.assume`) of scalar
//! parameters only; anything else is an error at the part that is not.

use crate::ast;
use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::value::Val;
use tirx_ir::hir::{dyn_outer_bound, BinOp, Expr, ExprKind, UnOp, VarId};
use tirx_ir::lir::launch::GRID_LIMITS;
use tirx_ir::{DType, Diagnostic, Span};

/// Largest element count a buffer (or a symbolic one's bound) may have.
const MAX_ELEMS: i64 = 1 << 40;

impl Builder<'_> {
    /// Whether `v` is the variable of a scalar parameter.
    pub(crate) fn is_scalar_param(&self, v: VarId) -> bool {
        self.k.as_ref().is_some_and(|k| k.kernel.params.iter().any(|p| p.scalar == Some(v)))
    }

    /// The first part of `e` that is not an integer expression of integer scalar
    /// parameters (`cond`: a condition on them, as `T.assume` takes), with why.
    fn not_of_params(&self, e: &Expr, cond: bool) -> Option<(Span, String)> {
        let int_op = |op: BinOp| {
            matches!(
                op,
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::FloorDiv | BinOp::FloorMod | BinOp::Min | BinOp::Max
            )
        };
        let cmp = |op: BinOp| matches!(op, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge);
        let name = |v: VarId| self.k.as_ref().map_or(String::new(), |k| k.kernel.vars[v.0 as usize].name.clone());
        match &e.kind {
            ExprKind::Int(_) if !cond => None,
            ExprKind::Bool(_) if cond => None,
            ExprKind::Var(v) if !cond && self.is_scalar_param(*v) && e.dtype.is_int() => None,
            ExprKind::Var(v) if !cond && self.is_scalar_param(*v) => {
                Some((e.span, format!("`{}` is a {} parameter; sizes and grids are integers", name(*v), e.dtype)))
            }
            ExprKind::Var(v) if !cond => {
                Some((e.span, format!("`{}` is not a scalar parameter: only parameters are known at launch", name(*v))))
            }
            ExprKind::Binary(op, a, b) if !cond && int_op(*op) => {
                self.not_of_params(a, false).or_else(|| self.not_of_params(b, false))
            }
            ExprKind::Binary(op, a, b) if cond && cmp(*op) => {
                self.not_of_params(a, false).or_else(|| self.not_of_params(b, false))
            }
            ExprKind::Binary(BinOp::And | BinOp::Or, a, b) if cond => {
                self.not_of_params(a, true).or_else(|| self.not_of_params(b, true))
            }
            ExprKind::Binary(BinOp::BitAnd, a, b) if cond && e.dtype == DType::Bool => {
                self.not_of_params(a, true).or_else(|| self.not_of_params(b, true))
            }
            ExprKind::Unary(UnOp::Neg, a) if !cond => self.not_of_params(a, false),
            ExprKind::Unary(UnOp::Not, a) if cond => self.not_of_params(a, true),
            // Widening integer casts keep the value (`n + m` of an int32 and an int64).
            ExprKind::Cast(a) if !cond && e.dtype == DType::I64 && a.dtype.is_int() => self.not_of_params(a, false),
            _ if cond && e.dtype != DType::Bool => {
                Some((e.span, "expected a condition: comparisons of parameters joined by `and`/`or`".into()))
            }
            _ => Some((
                e.span,
                "only `+ - * // %`, `min`/`max`, integers and integer scalar parameters are known at launch".into(),
            )),
        }
    }

    /// `v` as an integer expression of scalar parameters; `what` names the place
    /// (`dim 0 of `A``) for the error.
    pub(crate) fn param_expr(&mut self, v: Val, span: Span, what: &str) -> R<Expr> {
        let e = self.scalar(v, span)?;
        if let Some((at, why)) = self.not_of_params(&e, false) {
            return self.fail(
                Diagnostic::error(at, format!("{what} must be an integer expression of scalar parameters"))
                    .with_label(why)
                    .with_help("declare the value as a parameter (`n: T.int32`) and use it here"),
            );
        }
        Ok(e)
    }

    /// The shape of a parameter buffer: constant extents, except dim 0, which may be
    /// an integer expression of scalar parameters. Returns the shape (dim 0 of a
    /// symbolic one is [`dyn_outer_bound`]) and the expression.
    pub(crate) fn param_shape(&mut self, v: Val, span: Span, name: &str) -> R<(Vec<i64>, Option<Expr>)> {
        let items = match v {
            Val::Tuple(xs) | Val::List(xs) => xs,
            other => vec![other],
        };
        let symbolic = |x: &Val| matches!(x, Val::Expr(e) if !matches!(e.kind, ExprKind::Int(_)));
        if let Some(Val::Expr(e)) = items.iter().skip(1).find(|x| symbolic(x)) {
            return self.fail(
                Diagnostic::error(e.span, format!("only dim 0 of `{name}` may be a run-time value"))
                    .with_label("a symbolic inner dimension")
                    .with_help("make the inner dimensions constants (their strides are compile-time), e.g. `(n, 128)`"),
            );
        }
        if !items.first().is_some_and(symbolic) {
            return Ok((self.shape_of(Val::Tuple(items), span)?, None));
        }
        let outer = self.param_expr(items[0].clone(), span, &format!("dim 0 of `{name}`"))?;
        let mut shape = if items.len() > 1 { self.shape_of(Val::Tuple(items[1..].to_vec()), span)? } else { vec![] };
        let row: i64 = shape.iter().product();
        let bound = dyn_outer_bound(row);
        if bound.checked_mul(row).is_none_or(|e| e > MAX_ELEMS) {
            return self.fail(
                Diagnostic::error(span, format!("rows of {row} elements are too large for a symbolic dim 0"))
                    .with_label("too many elements per row")
                    .with_help(format!("keep the inner dims under {} elements", MAX_ELEMS >> 31)),
            );
        }
        shape.insert(0, bound);
        Ok((shape, Some(outer)))
    }

    /// A shape item that depends on a run-time value where only constants are
    /// allowed (shared/local buffers, views): the error at it.
    pub(crate) fn constant_shape_only(&mut self, v: &Val, what: &str) -> R<()> {
        let items: Vec<&Val> = match v {
            Val::Tuple(xs) | Val::List(xs) => xs.iter().collect(),
            other => vec![other],
        };
        if let Some(Val::Expr(e)) =
            items.into_iter().find(|x| matches!(x, Val::Expr(e) if !matches!(e.kind, ExprKind::Int(_))))
        {
            let sp = e.span;
            return self.fail(
                Diagnostic::error(sp, format!("the shape of {what} must be compile-time constants"))
                    .with_label("a run-time value")
                    .with_help(
                        "only parameter buffers (`T.match_buffer`, `T.Buffer` parameters) may have a run-time dim 0",
                    ),
            );
        }
        Ok(())
    }

    /// One extent of `T.cta_id([..])` (dim `d`): a constant, or an integer expression
    /// of scalar parameters (its bound: CUDA's limit for the dimension).
    pub(crate) fn cta_extent(&mut self, x: Val, sp: Span, d: usize, cta: bool) -> R<(i64, Option<Expr>)> {
        let symbolic = matches!(&x, Val::Expr(e) if !matches!(e.kind, ExprKind::Int(_)));
        if !symbolic {
            return Ok((self.positive_int(x, sp)?, None));
        }
        if !cta {
            let at = if let Val::Expr(e) = &x { e.span } else { sp };
            return self.fail(
                Diagnostic::error(at, "only `T.cta_id` extents may be run-time values")
                    .with_label("a run-time extent")
                    .with_help("thread, warp and lane counts are compile-time constants; size the grid with the parameter instead"),
            );
        }
        let e = self.param_expr(x, sp, "a `T.cta_id` extent")?;
        Ok((GRID_LIMITS.get(d).copied().unwrap_or(1), Some(e)))
    }

    /// `T.assume(cond)`: a fact about scalar parameters, checked at every launch. It
    /// holds for the whole kernel, so it is a statement of the kernel body itself.
    pub(crate) fn assume(&mut self, args: &[ast::Arg], span: Span) -> R<()> {
        // The module's scope and the kernel's: deeper is inside a loop or an `if`.
        if self.scopes.len() > 2 {
            return self.fail(
                Diagnostic::error(span, "`T.assume` inside a loop or an `if`")
                    .with_label("a fact about parameters holds for the whole kernel")
                    .with_help("move it to the kernel body's top level (conditions on parameters: `T.assume(n < 64 or m % 8 == 0)`)"),
            );
        }
        let (pos, kw) = self.eval_args(args)?;
        let mut a = Args::new("T.assume".into(), pos, kw, span);
        let (v, vs) = a.req(self, "cond")?;
        a.finish(self)?;
        let e = self.bool_expr(v, vs)?;
        if let Some((at, why)) = self.not_of_params(&e, true) {
            return self.fail(
                Diagnostic::error(at, "`T.assume` takes a condition on integer scalar parameters")
                    .with_label(why)
                    .with_help("state facts about parameters, e.g. `T.assume(n % 64 == 0 and n >= 128)`"),
            );
        }
        self.ks().kernel.assumes.push(e);
        Ok(())
    }
}
