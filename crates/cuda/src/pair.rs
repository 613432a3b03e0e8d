//! CUDA for the **pair** family: packed 16-bit pair arithmetic through the
//! `__half2` / `__nv_bfloat162` intrinsics, pair conversions through
//! `__float22half2_rn` and friends.

use crate::ctype::pair_type;
use crate::emit::{Ctx, Emit};
use crate::helpers::Helper;
use crate::CodegenError;
use tirx_ir::lir::{LBufId, LExpr, PackedOp, PairOp, PairSrc};
use tirx_ir::DType;

impl Emit for PairOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        match self {
            PairOp::Packed2 { op, dtype, dst, dst_index, srcs } => cx.packed2(*op, *dtype, *dst, dst_index, srcs)?,
            PairOp::Cast2 { dst, dst_index, src, src_index } => cx.cast2(*dst, dst_index, *src, src_index)?,
        }
        Ok(true)
    }
}

impl Ctx<'_> {
    fn packed2(
        &mut self,
        op: PackedOp,
        t: DType,
        dst: LBufId,
        dst_index: &LExpr,
        srcs: &[PairSrc],
    ) -> Result<(), CodegenError> {
        let pt = pair_type(t)
            .filter(|_| matches!(t, DType::F16 | DType::BF16))
            .ok_or_else(|| CodegenError::InvalidLir(format!("packed op on {t}")))?;
        self.note_type(t);
        let f = match op {
            PackedOp::Add => "__hadd2",
            PackedOp::Sub => "__hsub2",
            PackedOp::Mul => "__hmul2",
            PackedOp::Fma => "__hfma2",
            PackedOp::Max => "__hmax2_nan",
            PackedOp::Min => "__hmin2_nan",
        };
        let splat = if t == DType::F16 { "__half2half2" } else { "__bfloat162bfloat162" };
        let mut args = Vec::new();
        for p in srcs {
            args.push(match p {
                PairSrc::Buf(b, i) => self.view(pt, true, *b, i)?,
                PairSrc::Scalar(x) => format!("{splat}({})", self.e(x)?),
            });
        }
        let lhs = self.view(pt, false, dst, dst_index)?;
        self.line(&format!("{lhs} = {f}({});", args.join(", ")));
        Ok(())
    }

    fn cast2(&mut self, dst: LBufId, dst_index: &LExpr, src: LBufId, src_index: &LExpr) -> Result<(), CodegenError> {
        let (from, to) = (self.k.buf(src).dtype, self.k.buf(dst).dtype);
        let f = match (from, to) {
            (DType::F32, DType::F16) => "__float22half2_rn".to_string(),
            (DType::F16, DType::F32) => "__half22float2".to_string(),
            (DType::F32, DType::BF16) => "__float22bfloat162_rn".to_string(),
            // (the constructors round to nearest even and saturate: `__nv_cvt_float2_to_fp8x2`
            // with `__NV_SATFINITE`, one `F2FP.SATFINITE` a pair)
            (DType::F32, DType::F8E4M3) => "__nv_fp8x2_e4m3".to_string(),
            (DType::F32, DType::F8E5M2) => "__nv_fp8x2_e5m2".to_string(),
            (DType::BF16, DType::F32) => {
                self.helpers.insert(Helper::Bf16x2ToFloat2);
                Helper::Bf16x2ToFloat2.name()
            }
            _ => return Err(CodegenError::InvalidLir(format!("no pair conversion {from} -> {to}"))),
        };
        self.note_type(from);
        self.note_type(to);
        let (st, dt) = (pair_type(from).unwrap_or("float2"), pair_type(to).unwrap_or("float2"));
        let rhs = self.view(st, true, src, src_index)?;
        let lhs = self.view(dt, false, dst, dst_index)?;
        self.line(&format!("{lhs} = {f}({rhs});"));
        Ok(())
    }
}
