//! The **memory** family: scalar element stores (`buf[i] = v`; loads are the
//! expression `LExpr::Load`) and vector copies (`VecCopy`: `lanes` consecutive
//! elements as one access on each side). See `docs/lir.md`.
//!
//! Typing: a store's value has the buffer's dtype; a vector copy moves elements of
//! one dtype, `lanes × bits ∈ {8, 16, 32, 64, 128}`, and constant indices are
//! multiples of `lanes` (every array is 16-byte aligned, so the access is then
//! naturally aligned); `.nc` reads only global memory.

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr, Space};
use serde::Serialize;

/// Cache hint of a global load.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum CacheHint {
    #[default]
    Default,
    /// `ld.global.nc` (read-only path).
    NonCoherent,
}

impl Checker<'_> {
    pub(super) fn store(&mut self, buf: LBufId, index: &LExpr, value: &LExpr) -> Check {
        let b = self.buf(buf)?;
        self.index(buf, index)?;
        let t = self.expr(value)?;
        if t != b.dtype {
            return Err(format!("store of a {t} value into {} buffer `{}`", b.dtype, b.name));
        }
        Ok(())
    }

    pub(super) fn vec_copy(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
    ) -> Check {
        let (d, sb) = (self.buf(dst)?, self.buf(src)?);
        self.index(dst, dst_index)?;
        self.index(src, src_index)?;
        if d.dtype != sb.dtype {
            return Err(format!("vector copy `{}` <- `{}` mixes {} and {}", d.name, sb.name, d.dtype, sb.dtype));
        }
        let bits = lanes * d.dtype.bits();
        if !matches!(bits, 8 | 16 | 32 | 64 | 128) {
            return Err(format!("vector copy of {lanes} x {} is {bits} bits; need 8, 16, 32, 64 or 128", d.dtype));
        }
        let what = format!("vector copy of {lanes} lanes");
        self.aligned(dst, dst_index, i64::from(lanes), &what)?;
        self.aligned(src, src_index, i64::from(lanes), &what)?;
        if cache == CacheHint::NonCoherent && sb.space != Space::Global {
            return Err(format!("non-coherent load from `{}`, which is not global memory", sb.name));
        }
        Ok(())
    }
}

impl Printer<'_> {
    pub(super) fn store(&mut self, buf: LBufId, index: &LExpr, value: &LExpr, d: usize) {
        let text = format!("{} = {}", self.at(buf, index), self.e(value));
        self.line(d, &text);
    }

    /// `vcopy<4>.nc S[i] <- A[j]`.
    pub(super) fn vec_copy(
        &mut self,
        (dst, dst_index): (LBufId, &LExpr),
        (src, src_index): (LBufId, &LExpr),
        lanes: u32,
        cache: CacheHint,
        d: usize,
    ) {
        let nc = if cache == CacheHint::NonCoherent { ".nc" } else { "" };
        let text = format!("vcopy<{lanes}>{nc} {} <- {}", self.at(dst, dst_index), self.at(src, src_index));
        self.line(d, &text);
    }
}
