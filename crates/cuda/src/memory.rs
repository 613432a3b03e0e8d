//! CUDA for the **memory** family: `buf[i] = v;` and vector copies as one
//! `uint4`/`uint2`/`unsigned`/... access per side, so that ptxas emits 128-bit
//! loads and stores (`__ldg` for the non-coherent path).

use crate::ctype::vector_type;
use crate::emit::Ctx;
use crate::CodegenError;
use tirx_ir::lir::{CacheHint, LBufId, LExpr};

impl Ctx<'_> {
    pub(crate) fn store(&mut self, buf: LBufId, index: &LExpr, value: &LExpr) -> Result<(), CodegenError> {
        let (i, v) = (self.e(index)?, self.e(value)?);
        self.line(&format!("{}[{i}] = {v};", self.names.buf(buf)));
        Ok(())
    }

    pub(crate) fn vec_copy(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
    ) -> Result<(), CodegenError> {
        let t = self.k.buf(dst).dtype;
        if lanes == 1 && cache == CacheHint::Default {
            let (d, s) = (self.e(dst_index)?, self.e(src_index)?);
            self.line(&format!("{}[{d}] = {}[{s}];", self.names.buf(dst), self.names.buf(src)));
            return Ok(());
        }
        let bits = lanes * t.bits();
        let vt = vector_type(bits)
            .ok_or_else(|| CodegenError::InvalidLir(format!("vector copy of {lanes} x {t} ({bits} bits)")))?;
        let lhs = self.view(vt, false, dst, dst_index)?;
        let rhs = match cache {
            CacheHint::Default => self.view(vt, true, src, src_index)?,
            CacheHint::NonCoherent => {
                format!("__ldg(reinterpret_cast<const {vt}*>({}))", self.addr(src, src_index)?)
            }
        };
        self.line(&format!("{lhs} = {rhs};"));
        Ok(())
    }
}
