//! The **pair** family: arithmetic on two consecutive 16-bit floats at once
//! (`Packed2`: `__hadd2`, `__hfma2`, ...) and pair conversions (`Cast2`:
//! `__float22half2_rn` and friends). See `docs/lir.md`.
//!
//! Typing: a packed op is on F16 or BF16 pairs, all buffer operands of that dtype,
//! FMA takes three operands and the others two, scalars are broadcast; pair indices
//! are even. Conversions exist between f32 and f16/bf16, and from f32 to float8
//! (e4m3, e5m2: saturating) ([`cast2_supported`]).

use super::check::{Check, Checker};
use super::instr::{Accesses, Instr};
use super::print::Printer;
use super::{LBufId, LExpr, LKernel};
use crate::dtype::DType;
use crate::target::Arch;
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
        (DType::F32, DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2) | (DType::F16 | DType::BF16, DType::F32)
    )
}

/// An instruction of the pair family.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum PairOp {
    /// `dst[i..i+2] = op(srcs...)` on a 16-bit float pair (`dtype` is F16 or BF16).
    Packed2 { op: PackedOp, dtype: DType, dst: LBufId, dst_index: LExpr, srcs: Vec<PairSrc> },
    /// Pair conversion `dst[i..i+2] = cvt(src[j..j+2])` (`__float22half2_rn` and friends).
    Cast2 { dst: LBufId, dst_index: LExpr, src: LBufId, src_index: LExpr },
}

impl Instr for PairOp {
    fn name(&self) -> String {
        match self {
            PairOp::Packed2 { op, .. } => format!("{}2", op.name()),
            PairOp::Cast2 { .. } => "cast2".into(),
        }
    }

    /// bf16 pair arithmetic and conversions are sm_80 intrinsics; f16 ones exist on every target.
    fn min_arch(&self, dtype: &dyn Fn(LBufId) -> DType) -> Arch {
        let bf16 = match self {
            PairOp::Packed2 { dtype, .. } => *dtype == DType::BF16,
            PairOp::Cast2 { dst, src, .. } => dtype(*dst) == DType::BF16 || dtype(*src) == DType::BF16,
        };
        if bf16 {
            Arch::SM_80
        } else {
            Arch::MIN
        }
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            PairOp::Packed2 { dst_index, srcs, .. } => std::iter::once(dst_index)
                .chain(srcs.iter().map(|p| match p {
                    PairSrc::Buf(_, i) | PairSrc::Scalar(i) => i,
                }))
                .collect(),
            PairOp::Cast2 { dst_index, src_index, .. } => vec![dst_index, src_index],
        }
    }

    fn accesses(&self) -> Accesses {
        match self {
            PairOp::Packed2 { dst, srcs, .. } => (
                srcs.iter()
                    .filter_map(|p| match p {
                        PairSrc::Buf(b, _) => Some(*b),
                        PairSrc::Scalar(_) => None,
                    })
                    .collect(),
                vec![*dst],
            ),
            PairOp::Cast2 { dst, src, .. } => (vec![*src], vec![*dst]),
        }
    }

    fn computes(&self, k: &LKernel) -> Option<String> {
        Some(match self {
            PairOp::Packed2 { op, dst, .. } => format!("packed {op:?} into `{}`", k.buf(*dst).name),
            PairOp::Cast2 { dst, .. } => format!("a pair conversion into `{}`", k.buf(*dst).name),
        })
    }

    fn check(&self, c: &mut Checker) -> Check {
        match self {
            PairOp::Packed2 { op, dtype, dst, dst_index, srcs } => c.packed2(*op, *dtype, *dst, dst_index, srcs),
            PairOp::Cast2 { dst, dst_index, src, src_index } => c.cast2((*dst, dst_index), (*src, src_index)),
        }
    }

    fn print(&self, p: &Printer) -> String {
        match self {
            PairOp::Packed2 { op, dtype, dst, dst_index, srcs } => p.packed2(*op, *dtype, *dst, dst_index, srcs),
            PairOp::Cast2 { dst, dst_index, src, src_index } => p.cast2((*dst, dst_index), (*src, src_index)),
        }
    }
}

impl Checker<'_> {
    fn packed2(&mut self, op: PackedOp, dtype: DType, dst: LBufId, dst_index: &LExpr, srcs: &[PairSrc]) -> Check {
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

    fn cast2(&mut self, (dst, dst_index): (LBufId, &LExpr), (src, src_index): (LBufId, &LExpr)) -> Check {
        let (d, sb) = (self.buf(dst)?, self.buf(src)?);
        if !cast2_supported(sb.dtype, d.dtype) {
            return Err(format!(
                "no pair conversion {} -> {}; supported: float32<->float16, float32<->bfloat16, float32->float8",
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
    fn packed2(&self, op: PackedOp, dtype: DType, dst: LBufId, dst_index: &LExpr, srcs: &[PairSrc]) -> String {
        let args: Vec<String> = srcs
            .iter()
            .map(|p| match p {
                PairSrc::Buf(b, i) => format!("{}[{}..+2]", self.buf_name(*b), self.e(i)),
                PairSrc::Scalar(x) => format!("splat({})", self.e(x)),
            })
            .collect();
        format!("{}[{}..+2] = {}2<{dtype}>({})", self.buf_name(dst), self.e(dst_index), op.name(), args.join(", "))
    }

    /// `D[i..+2] = cast2<float32 -> float16>(S[j..+2])`.
    fn cast2(&self, (dst, dst_index): (LBufId, &LExpr), (src, src_index): (LBufId, &LExpr)) -> String {
        let dtype = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or("?", |b| b.dtype.name());
        format!(
            "{}[{}..+2] = cast2<{} -> {}>({}[{}..+2])",
            self.buf_name(dst),
            self.e(dst_index),
            dtype(src),
            dtype(dst),
            self.buf_name(src),
            self.e(src_index)
        )
    }
}
