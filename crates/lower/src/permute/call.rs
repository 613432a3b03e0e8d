//! What every permute variant shares: the family's decline rules and the two
//! memory operands of the call, resolved by the one operand model.

use crate::operand::{self, MemOperand};
use crate::variant::{decline_rules, CallCx, CommonRule, Decline};
use tirx_ir::hir::{Buffer, MemScope};
use tirx_ir::op;

decline_rules! {
    /// The permute family's decline predicates.
    pub enum PermuteRule {
        /// Both phases of the exchange hit a shared-memory bank twice for every xor factor.
        BankConflict = "bank_conflict",
        /// The element type is not 1, 2, 4 or 8 bytes wide.
        Width = "width",
        /// The region is not 32·P elements with P a power of two ≤ 32.
        Volume = "volume",
    }
}

/// The destination and source regions, each in global or shared memory under a plain layout.
pub struct PermuteOps<'a> {
    pub dst: MemOperand,
    pub src: MemOperand,
    pub dst_buf: &'a Buffer,
    pub src_buf: &'a Buffer,
    /// Elements of the region.
    pub volume: i64,
}

pub fn operands<'a>(cx: &CallCx<'a>) -> Result<PermuteOps<'a>, Decline> {
    let (Some(d), Some(s)) = (cx.region(&op::DST), cx.region(&op::SRC_REGION)) else {
        return Err(Decline::new(CommonRule::Parse, "permute_layout needs two buffer regions (dst, src)"));
    };
    let (dst_buf, src_buf) = (cx.buf(d.buf), cx.buf(s.buf));
    for b in [dst_buf, src_buf] {
        if b.scope == MemScope::Local {
            return Err(Decline::new(
                CommonRule::OperandScope,
                format!("`{}` is in registers; permute_layout moves global or shared memory", b.name),
            ));
        }
    }
    let (dst, src) = (operand::memory(cx, d)?, operand::memory(cx, s)?);
    for (m, b) in [(&dst, dst_buf), (&src, src_buf)] {
        if m.swizzle.is_some() {
            return Err(Decline::new(
                CommonRule::Layout,
                format!("`{}`'s layout is swizzled; permute_layout takes a plain TileLayout", b.name),
            ));
        }
    }
    let volume = d.ranges.iter().map(|r| r.extent).product();
    Ok(PermuteOps { dst, src, dst_buf, src_buf, volume })
}
