//! What every gemm variant shares: the call ([`GemmCall`], [`parse`]).

use crate::variant::decline_rules;
use crate::variant::{CallCx, CommonRule, Decline};
use tirx_ir::hir::BufferRegion;
use tirx_ir::op::{self, Slot};

decline_rules! {
    /// The gemm family's decline predicates.
    pub enum GemmRule {
        /// An access would not be aligned to its width.
        Alignment = "alignment",
        /// The register operand is not the instruction's fragment.
        Fragment = "fragment",
        /// A store from registers replicated over threads.
        Replicated = "replicated",
        /// A scalar operand (gemm's `alpha`, `beta`) with a value the variant cannot apply.
        Scalar = "scalar",
        /// A swizzle the instruction cannot keep together.
        Swizzle = "swizzle",
    }
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
    let region = |slot: &Slot, name: &str| {
        cx.region(slot)
            .ok_or_else(|| Decline::new(CommonRule::Parse, format!("gemm operand {name} is not a buffer region")))
    };
    let scalar = |slot: &Slot, absent: f64| cx.scalar(slot).map_or(Some(absent), crate::expr::constant);
    Ok(GemmCall {
        d: region(&op::GEMM_D, "D")?,
        a: region(&op::GEMM_A, "A")?,
        b: region(&op::GEMM_B, "B")?,
        c: region(&op::GEMM_C, "C")?,
        transpose_a: cx.flag(&op::TRANS_A),
        transpose_b: cx.flag(&op::TRANS_B),
        alpha: scalar(&op::ALPHA, 1.0),
        beta: scalar(&op::BETA, 0.0),
    })
}
