//! The **pair** family: arithmetic on two consecutive 16-bit floats at once
//! (`Packed2`: `__hadd2`, `__hfma2`, ...) and pair conversions (`Cast2`:
//! `__float22half2_rn` and friends). See `docs/lir.md`.
//!
//! Typing: a packed op is on F16 or BF16 pairs, all buffer operands of that dtype,
//! FMA takes three operands and the others two, scalars are broadcast; pair indices
//! are even. Conversions exist between f32 and f16/bf16 only ([`cast2_supported`]).

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr};
use crate::dtype::DType;
use serde::Serialize;

/// An element-pair operand of a packed op: two consecutive elements of a buffer, or a scalar broadcast to both.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum PairSrc {
    Buf(LBufId, LExpr),
    Scalar(LExpr),
}

/// Packed two-lane arithmetic (`__hadd2`, `__hfma2`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum PackedOp {
    Add,
    Sub,
    Mul,
    Fma,
    Max,
    Min,
}

impl PackedOp {
    /// The name in the pseudo-code (`add2<float16>(..)`).
    pub fn name(self) -> &'static str {
        match self {
            PackedOp::Add => "add",
            PackedOp::Sub => "sub",
            PackedOp::Mul => "mul",
            PackedOp::Fma => "fma",
            PackedOp::Max => "max",
            PackedOp::Min => "min",
        }
    }
}

/// The pair conversions with a CUDA intrinsic (`docs/tile-primitives.md` §4).
pub fn cast2_supported(src: DType, dst: DType) -> bool {
    matches!(
        (src, dst),
        (DType::F32, DType::F16) | (DType::F16, DType::F32) | (DType::F32, DType::BF16) | (DType::BF16, DType::F32)
    )
}

impl Checker<'_> {
    pub(super) fn packed2(
        &mut self,
        op: PackedOp,
        dtype: DType,
        dst: LBufId,
        dst_index: &LExpr,
        srcs: &[PairSrc],
    ) -> Check {
        if !matches!(dtype, DType::F16 | DType::BF16) {
            return Err(format!("packed op on {dtype}; only float16 and bfloat16 pairs exist"));
        }
        let arity = if op == PackedOp::Fma { 3 } else { 2 };
        if srcs.len() != arity {
            return Err(format!("packed {op:?} takes {arity} operands, got {}", srcs.len()));
        }
        let d = self.buf(dst)?;
        if d.dtype != dtype {
            return Err(format!("packed {dtype} op writes {} buffer `{}`", d.dtype, d.name));
        }
        self.index(dst, dst_index)?;
        self.aligned(dst, dst_index, 2, "packed op")?;
        for p in srcs {
            match p {
                PairSrc::Buf(b, i) => {
                    let sb = self.buf(*b)?;
                    if sb.dtype != dtype {
                        return Err(format!("packed {dtype} op reads {} buffer `{}`", sb.dtype, sb.name));
                    }
                    self.index(*b, i)?;
                    self.aligned(*b, i, 2, "packed op")?;
                }
                PairSrc::Scalar(e) => self.expect(e, dtype, "packed scalar operand")?,
            }
        }
        Ok(())
    }

    pub(super) fn cast2(&mut self, (dst, dst_index): (LBufId, &LExpr), (src, src_index): (LBufId, &LExpr)) -> Check {
        let (d, sb) = (self.buf(dst)?, self.buf(src)?);
        if !cast2_supported(sb.dtype, d.dtype) {
            return Err(format!(
                "no pair conversion {} -> {}; supported: float32<->float16, float32<->bfloat16",
                sb.dtype, d.dtype
            ));
        }
        self.index(dst, dst_index)?;
        self.index(src, src_index)?;
        self.aligned(dst, dst_index, 2, "pair conversion")?;
        self.aligned(src, src_index, 2, "pair conversion")?;
        Ok(())
    }
}

impl Printer<'_> {
    /// `D[i..+2] = fma2<float16>(A[j..+2], splat(x), C[k..+2])`.
    pub(super) fn packed2(
        &mut self,
        op: PackedOp,
        dtype: DType,
        dst: LBufId,
        dst_index: &LExpr,
        srcs: &[PairSrc],
        d: usize,
    ) {
        let args: Vec<String> = srcs
            .iter()
            .map(|p| match p {
                PairSrc::Buf(b, i) => format!("{}[{}..+2]", self.buf_name(*b), self.e(i)),
                PairSrc::Scalar(x) => format!("splat({})", self.e(x)),
            })
            .collect();
        let text =
            format!("{}[{}..+2] = {}2<{dtype}>({})", self.buf_name(dst), self.e(dst_index), op.name(), args.join(", "));
        self.line(d, &text);
    }

    /// `D[i..+2] = cast2<float32 -> float16>(S[j..+2])`.
    pub(super) fn cast2(&mut self, (dst, dst_index): (LBufId, &LExpr), (src, src_index): (LBufId, &LExpr), d: usize) {
        let dtype = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or("?", |b| b.dtype.name());
        let text = format!(
            "{}[{}..+2] = cast2<{} -> {}>({}[{}..+2])",
            self.buf_name(dst),
            self.e(dst_index),
            dtype(src),
            dtype(dst),
            self.buf_name(src),
            self.e(src_index)
        );
        self.line(d, &text);
    }
}
