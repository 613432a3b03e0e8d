//! Elementwise tile ops (`Tx.<scope>.sqrt(dst, src)`, `add`, `fma`, `cast`, ...;
//! tile-primitives.md §4). One variant so far:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`reg`] | 10 | every operand in registers, the destination's thread axes tile the scope |
//!
//! This module holds the op registry shared by variants: [`parse`] turns a
//! call into an [`OpCall`] (destination, sources in op order, unary `scale`)
//! and [`scalar`] is the per-element value `op(x·scale + bias)` in LIR.

pub mod reg;

use crate::dispatch::{CallCx, Decline, Registry, Rule};
use tirx_ir::hir::{BufferRegion, Expr, MathFn, TileArg, TileOp, UnOp};
use tirx_ir::lir::{LBinOp, LExpr};
use tirx_ir::DType;

pub fn register(r: &mut Registry) {
    r.register(Box::new(reg::EwiseReg));
}

/// A source operand: a region (broadcast to the destination) or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Region(&'a BufferRegion),
    Scalar(&'a Expr),
}

/// A parsed elementwise call.
#[derive(Clone, Debug)]
pub struct OpCall<'a> {
    pub op: TileOp,
    pub dst: &'a BufferRegion,
    /// Sources in op order: unary `[x, bias?]`, binary `[a, b]`, fma `[a, b, c]`, fill `[value]`.
    pub srcs: Vec<Operand<'a>>,
    /// Unary `scale=` (sqrt, exp, exp2, log2).
    pub scale: Option<&'a Expr>,
}

impl OpCall<'_> {
    pub fn regions(&self) -> impl Iterator<Item = &BufferRegion> {
        std::iter::once(self.dst).chain(self.srcs.iter().filter_map(|s| match s {
            Operand::Region(r) => Some(*r),
            Operand::Scalar(_) => None,
        }))
    }
}

fn operand<'a>(cx: &CallCx<'a>, i: usize) -> Option<Operand<'a>> {
    match cx.call.args.get(i) {
        Some(TileArg::Region(r)) => Some(Operand::Region(r)),
        Some(TileArg::Scalar(e)) => Some(Operand::Scalar(e)),
        _ => None,
    }
}

fn commutative(op: TileOp) -> bool {
    matches!(op, TileOp::Add | TileOp::Mul | TileOp::Maximum | TileOp::Minimum)
}

/// The call's operands by the op's signature (`spec.parse`, §4).
pub fn parse<'a>(cx: &CallCx<'a>) -> Result<OpCall<'a>, Decline> {
    let op = cx.call.op;
    let dst = cx.region(0).ok_or_else(|| {
        Decline::new(Rule::Parse, format!("the destination of `{}` must be a buffer region", op.name()))
    })?;
    let need = |i: usize, what: &str| {
        operand(cx, i).ok_or_else(|| Decline::new(Rule::Parse, format!("`{}` is missing its {what}", op.name())))
    };
    let mut scale = None;
    let srcs = match op {
        TileOp::Zero => vec![],
        TileOp::Fill => vec![need(1, "value")?],
        TileOp::Reciprocal | TileOp::Silu => vec![need(1, "source")?],
        TileOp::Cast => match need(1, "source")? {
            r @ Operand::Region(_) => vec![r],
            Operand::Scalar(_) => {
                return Err(Decline::new(Rule::Parse, "cast src must be a buffer region; use `fill` for a constant"))
            }
        },
        TileOp::Sqrt | TileOp::Exp | TileOp::Exp2 | TileOp::Log2 => {
            if let Some(TileArg::Scalar(e)) = cx.call.args.get(3) {
                scale = Some(e);
            }
            let mut v = vec![need(1, "source")?];
            v.extend(operand(cx, 2));
            v
        }
        TileOp::Add | TileOp::Sub | TileOp::Mul | TileOp::Fdiv | TileOp::Maximum | TileOp::Minimum => {
            let (a, b) = (need(1, "lhs")?, need(2, "rhs")?);
            match (a, b) {
                (Operand::Scalar(_), Operand::Scalar(_)) => {
                    return Err(Decline::new(
                        Rule::Parse,
                        "both inputs are constants; use `fill` with the computed value",
                    ))
                }
                (Operand::Scalar(_), _) if commutative(op) => vec![b, a],
                (Operand::Scalar(_), _) => {
                    return Err(Decline::new(
                        Rule::Parse,
                        format!("non-commutative op {} cannot have a constant lhs", op.name()),
                    ))
                }
                _ => vec![a, b],
            }
        }
        TileOp::Fma => vec![need(1, "a")?, need(2, "scale (b)")?, need(3, "bias (c)")?],
        TileOp::Copy => return Err(Decline::new(Rule::Parse, "copy is not an elementwise op")),
    };
    Ok(OpCall { op, dst, srcs, scale })
}

fn fbin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::bin(op, a, b)
}

/// The value of one destination element in the compute type `ct`: `x` are the
/// sources (already in `ct`), `scale` the unary scale (in `ct`).
pub fn scalar(op: TileOp, x: &[LExpr], scale: Option<LExpr>, ct: DType) -> LExpr {
    let one = LExpr::Float(1.0, ct);
    let math = |f: MathFn| {
        let mut arg = x[0].clone();
        if let Some(s) = scale.clone() {
            arg = fbin(LBinOp::Mul, arg, s);
        }
        if let Some(bias) = x.get(1) {
            arg = fbin(LBinOp::Add, arg, bias.clone());
        }
        LExpr::Math(f, vec![arg])
    };
    match op {
        TileOp::Zero => LExpr::Float(0.0, ct),
        TileOp::Fill | TileOp::Cast | TileOp::Copy => x[0].clone(),
        TileOp::Reciprocal => fbin(LBinOp::Div, one, x[0].clone()),
        TileOp::Sqrt => math(MathFn::Sqrt),
        TileOp::Exp => math(MathFn::Exp),
        TileOp::Exp2 => math(MathFn::Exp2),
        TileOp::Log2 => math(MathFn::Log2),
        // x / (1 + exp(-x))
        TileOp::Silu => {
            let e = LExpr::Math(MathFn::Exp, vec![LExpr::Un(UnOp::Neg, Box::new(x[0].clone()))]);
            fbin(LBinOp::Div, x[0].clone(), fbin(LBinOp::Add, one, e))
        }
        TileOp::Add => fbin(LBinOp::Add, x[0].clone(), x[1].clone()),
        TileOp::Sub => fbin(LBinOp::Sub, x[0].clone(), x[1].clone()),
        TileOp::Mul => fbin(LBinOp::Mul, x[0].clone(), x[1].clone()),
        TileOp::Fdiv => fbin(LBinOp::Div, x[0].clone(), x[1].clone()),
        TileOp::Maximum => fbin(LBinOp::Max, x[0].clone(), x[1].clone()),
        TileOp::Minimum => fbin(LBinOp::Min, x[0].clone(), x[1].clone()),
        TileOp::Fma => fbin(LBinOp::Add, fbin(LBinOp::Mul, x[0].clone(), x[1].clone()), x[2].clone()),
    }
}
