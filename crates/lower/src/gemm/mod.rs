//! Gemm variants (`Tx.<scope>.gemm(D, A, B, C=D, transpose_A=False,
//! transpose_B=False, alpha=None, beta=None)`: `D = alpha·A·B + beta·C`,
//! docs/tile-primitives.md §3.9) and its asynchronous form `gemm_async(D, A, B,
//! transA=False, transB=False, accum=False)` (`D = A·Bᵀ (+ D)`, issued and waited
//! for with `T.ptx.wgmma.wait_group`, §3.19). Each variant lowers one of them:
//!
//! | op | variant | prio | accepts |
//! |---|---|---|---|
//! | gemm | [`mma`] (`mma.m16n8k*`) | 10 | every operand in registers as `mma.sync` fragments, `alpha = 1`, `beta ∈ {0, 1}` |
//! | gemm_async | [`wgmma`] (`wgmma`) | 10 | D the wgmma accumulator in registers, B (and A) canonical shared tiles (A may be register fragments), sm_90a |
//!
//! This module reads the call ([`GemmCall`]: the four regions, the transposes,
//! `alpha` and `beta` as constants); [`fragment`] matches register operands to
//! the fragments of an instruction.

pub mod fragment;
pub mod mma;
pub mod wgmma;

use crate::dispatch::{CallCx, Decline, Registry, Rule};
use tirx_ir::hir::{BufferRegion, Expr, ExprKind, TileArg, UnOp};
use tirx_ir::op::AttrValue;

pub fn register(r: &mut Registry) {
    r.register(Box::new(mma::MmaSync));
    r.register(Box::new(wgmma::WgmmaAsync));
}

/// A gemm call's operands.
pub struct GemmCall<'a> {
    pub d: &'a BufferRegion,
    pub a: &'a BufferRegion,
    pub b: &'a BufferRegion,
    pub c: &'a BufferRegion,
    /// A is stored K×M.
    pub transpose_a: bool,
    /// B is stored N×K.
    pub transpose_b: bool,
    /// `alpha` (1 when absent), `None` when not a compile-time constant.
    pub alpha: Option<f64>,
    /// `beta` (0 when absent), `None` when not a compile-time constant.
    pub beta: Option<f64>,
}

/// Reads the call by the op table's slots (D, A, B, C, transpose_A, transpose_B, alpha, beta).
pub fn parse<'a>(cx: &CallCx<'a>) -> Result<GemmCall<'a>, Decline> {
    let region = |i: usize, name: &str| {
        cx.region(i).ok_or_else(|| Decline::new(Rule::Parse, format!("gemm operand {name} is not a buffer region")))
    };
    let flag = |i: usize| matches!(cx.call.args.get(i), Some(TileArg::Attr(AttrValue::Bool(true))));
    let scalar = |i: usize, absent: f64| match cx.call.args.get(i) {
        Some(TileArg::Scalar(e)) => constant(e),
        _ => Some(absent),
    };
    Ok(GemmCall {
        d: region(0, "D")?,
        a: region(1, "A")?,
        b: region(2, "B")?,
        c: region(3, "C")?,
        transpose_a: flag(4),
        transpose_b: flag(5),
        alpha: scalar(6, 1.0),
        beta: scalar(7, 0.0),
    })
}

/// The value of a compile-time constant scalar (`1.0`, `-1`, `T.float32(0)`).
fn constant(e: &Expr) -> Option<f64> {
    match &e.kind {
        ExprKind::Int(v) => Some(*v as f64),
        ExprKind::Float(v) => Some(*v),
        ExprKind::Unary(UnOp::Neg, a) => constant(a).map(|v| -v),
        ExprKind::Cast(a) => constant(a),
        _ => None,
    }
}
