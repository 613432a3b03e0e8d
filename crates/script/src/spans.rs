//! Span-insensitive comparison of HIR: `normalize_spans` zeroes every span so
//! that `parse(print(k))` can be compared with `k` (spans differ by design).

use tirx_ir::hir::*;
use tirx_ir::Span;

/// A copy of `k` with every span set to the empty span.
pub fn normalize_spans(k: &Kernel) -> Kernel {
    let mut k = k.clone();
    let z = Span::default();
    k.span = z;
    for p in &mut k.params {
        p.span = z;
    }
    for b in &mut k.buffers {
        b.span = z;
        b.dyn_outer.iter_mut().for_each(expr);
    }
    k.assumes.iter_mut().for_each(expr);
    for v in &mut k.vars {
        v.span = z;
    }
    for s in &mut k.body {
        stmt(s);
    }
    k
}

/// Equal up to spans.
pub fn same_kernel(a: &Kernel, b: &Kernel) -> bool {
    normalize_spans(a) == normalize_spans(b)
}

/// A copy of `e` with every span emptied.
pub(crate) fn strip(e: &Expr) -> Expr {
    let mut e = e.clone();
    expr(&mut e);
    e
}

pub(crate) fn same_expr(a: &Expr, b: &Expr) -> bool {
    let (mut a, mut b) = (a.clone(), b.clone());
    expr(&mut a);
    expr(&mut b);
    a == b
}

fn stmt(s: &mut Stmt) {
    s.span = Span::default();
    match &mut s.kind {
        StmtKind::For { begin, extent, body, .. } => {
            expr(begin);
            expr(extent);
            body.iter_mut().for_each(stmt);
        }
        StmtKind::If { cond, then_body, else_body } => {
            expr(cond);
            then_body.iter_mut().for_each(stmt);
            else_body.iter_mut().for_each(stmt);
        }
        StmtKind::While { cond, body } => {
            expr(cond);
            body.iter_mut().for_each(stmt);
        }
        StmtKind::Atomic { atomic, .. } => {
            atomic.elem.span = Span::default();
            atomic.exprs_mut().into_iter().for_each(expr);
        }
        StmtKind::Let { value, .. } => expr(value),
        StmtKind::Store { indices, value, .. } => {
            indices.iter_mut().for_each(expr);
            expr(value);
        }
        StmtKind::Evaluate(e) => expr(e),
        StmtKind::Printf { args, .. } => args.iter_mut().for_each(expr),
        StmtKind::ScopeId(d) => {
            d.span = Span::default();
            d.dyn_extents.iter_mut().flatten().for_each(expr);
        }
        StmtKind::Tile(c) => {
            c.span = Span::default();
            c.config.iter_mut().for_each(|e| e.span = Span::default());
            for a in &mut c.args {
                match a {
                    TileArg::Region(r) => region(r),
                    TileArg::Scalar(e) => expr(e),
                    TileArg::Barrier(b) => {
                        b.span = Span::default();
                        b.index.iter_mut().for_each(expr);
                    }
                    TileArg::Mask(m) => expr(&mut m.cond),
                    TileArg::Attr(_) | TileArg::None => {}
                }
            }
        }
        StmtKind::Collective { op, .. } => match op {
            Collective::WarpReduce { value, .. } => expr(value),
            Collective::CtaReduce { value, index, .. } => {
                expr(value);
                index.iter_mut().for_each(expr);
            }
            Collective::Shuffle { value, lane, .. } => {
                expr(value);
                expr(lane);
            }
        },
        StmtKind::Ptx(p) => match p {
            PtxStmt::BarSync { id, .. } | PtxStmt::BarArrive { id, .. } => expr(id),
            _ => {}
        },
        StmtKind::Async(a) => {
            if let Some(b) = match a {
                AsyncStmt::MbarInit { bar, .. }
                | AsyncStmt::MbarArrive { bar, .. }
                | AsyncStmt::MbarArriveExpectTx { bar, .. }
                | AsyncStmt::MbarWait { bar, .. }
                | AsyncStmt::GridGroupSync { word: bar, .. } => Some(bar),
                _ => None,
            } {
                b.span = Span::default();
            }
            a.exprs_mut().into_iter().for_each(expr);
        }
        StmtKind::Alloc(_) | StmtKind::Barrier(_) | StmtKind::DeviceEntry => {}
    }
}

fn region(r: &mut BufferRegion) {
    r.span = Span::default();
    for x in &mut r.ranges {
        expr(&mut x.begin);
    }
}

fn expr(e: &mut Expr) {
    e.span = Span::default();
    match &mut e.kind {
        ExprKind::Binary(_, a, b) => {
            expr(a);
            expr(b);
        }
        ExprKind::Unary(_, a) | ExprKind::Cast(a) => expr(a),
        ExprKind::Select(c, a, b) => {
            expr(c);
            expr(a);
            expr(b);
        }
        ExprKind::Call(_, args) | ExprKind::Load(_, args) => args.iter_mut().for_each(expr),
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Var(_) => {}
    }
}
