//! Source text for explain, declines and diagnostics: regions, index
//! expressions and layouts as scripts write them. Pure functions of the HIR,
//! so every layer (services, variants, the report) may use them.

use tirx_ir::hir::{BinOp, BufferRegion, Expr, ExprKind, Kernel, UnOp};
use tirx_layout::Layout;

/// `1 round`, `8 rounds`.
pub fn rounds(n: impl Into<i128> + Copy) -> String {
    let n: i128 = n.into();
    format!("{n} round{}", if n == 1 { "" } else { "s" })
}

pub fn region_text(k: &Kernel, r: &BufferRegion) -> String {
    let dims: Vec<String> = r
        .ranges
        .iter()
        .map(|rg| {
            let b = top_text(k, &rg.begin);
            if rg.extent == 1 {
                b
            } else if let ExprKind::Int(v) = rg.begin.kind {
                format!("{v}:{}", v.saturating_add(rg.extent))
            } else {
                format!("{b}:{b} + {}", rg.extent)
            }
        })
        .collect();
    format!("{}[{}]", k.buf(r.buf).name, dims.join(", "))
}

/// An expression without the parentheses of its outermost operator.
pub fn top_text(k: &Kernel, e: &Expr) -> String {
    let t = expr_text(k, e);
    match (&e.kind, t.strip_prefix('(').and_then(|t| t.strip_suffix(')'))) {
        (ExprKind::Binary(..), Some(inner)) => inner.to_string(),
        _ => t,
    }
}

/// A compact rendering of an index expression.
pub fn expr_text(k: &Kernel, e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v}"),
        ExprKind::Bool(b) => if *b { "True" } else { "False" }.into(),
        ExprKind::Var(v) => k.var(*v).name.clone(),
        ExprKind::Binary(op, a, b) => {
            let sym = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                BinOp::Mul => "*",
                BinOp::Div => "/",
                BinOp::FloorDiv => "//",
                BinOp::FloorMod => "%",
                BinOp::Eq => "==",
                BinOp::Ne => "!=",
                BinOp::Lt => "<",
                BinOp::Le => "<=",
                BinOp::Gt => ">",
                BinOp::Ge => ">=",
                BinOp::And => "and",
                BinOp::Or => "or",
                BinOp::BitAnd => "&",
                BinOp::BitOr => "|",
                BinOp::BitXor => "^",
                BinOp::Shl => "<<",
                BinOp::Shr => ">>",
                BinOp::Min => return format!("T.min({}, {})", expr_text(k, a), expr_text(k, b)),
                BinOp::Max => return format!("T.max({}, {})", expr_text(k, a), expr_text(k, b)),
            };
            format!("({} {sym} {})", expr_text(k, a), expr_text(k, b))
        }
        ExprKind::Unary(op, a) => {
            let sym = match op {
                UnOp::Neg => "-",
                UnOp::Not => "not ",
                UnOp::BitNot => "~",
            };
            format!("{sym}{}", expr_text(k, a))
        }
        ExprKind::Cast(a) => format!("T.cast({}, \"{}\")", expr_text(k, a), e.dtype),
        ExprKind::Select(c, a, b) => {
            format!("T.if_then_else({}, {}, {})", expr_text(k, c), expr_text(k, a), expr_text(k, b))
        }
        ExprKind::Call(f, args) => {
            format!("T.{}({})", f.name(), args.iter().map(|a| expr_text(k, a)).collect::<Vec<_>>().join(", "))
        }
        ExprKind::Load(b, idx) => {
            format!("{}[{}]", k.buf(*b).name, idx.iter().map(|a| expr_text(k, a)).collect::<Vec<_>>().join(", "))
        }
    }
}

/// The layout as scripts write it (`S[(32, 32):(32, 1)]`).
pub fn layout_text(l: &Layout) -> String {
    l.to_string()
}
