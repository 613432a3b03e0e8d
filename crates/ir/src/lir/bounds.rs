//! The **bounds** family: per-dimension bounds assertions (`BoundsCheck`) on a
//! region of a buffer's *logical* shape. The LIR is flat (element-indexed
//! arrays), so a flat index cannot tell column 40 of a 32-column row from
//! column 8 of the next row; lowering proves the per-dimension bounds of every
//! region it can (`docs/tile-primitives.md` §1.3) and, where it cannot (a
//! data-dependent begin, a range known only as an enclosure), puts this
//! assertion before the accesses. See `docs/lir.md` §2.7.
//!
//! Semantics: every thread that executes it evaluates the begins and checks
//! `0 <= begin[d]` and `begin[d] + extent[d] <= shape[d]` for every dim; the
//! simulator reports the first element of the region outside the shape as an
//! out-of-bounds access. It accesses no memory itself (loads inside the begins
//! do) and costs nothing on the GPU: the CUDA generator prints nothing.
//!
//! Typing: one begin and one extent per dim of `shape` (at least one dim),
//! begins integers, extents ≥ 1, shape dims ≥ 1.

use super::check::{Check, Checker};
use super::instr::Instr;
use super::print::Printer;
use super::{LBufId, LExpr};
use crate::dtype::DType;
use serde::Serialize;

/// `bounds.read A[b0 : +e0, b1 : +e1] in (n0, n1)`: the region must lie inside `shape`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BoundsCheck {
    /// The flat array the region lives in (its space and dtype name the buffer in messages).
    pub buf: LBufId,
    /// The buffer as the source names it: a view has its own name and shape.
    pub name: String,
    /// The logical shape the region is checked against.
    pub shape: Vec<i64>,
    /// Per dim: the region's begin (an integer expression) and its constant extent.
    pub begins: Vec<LExpr>,
    pub extents: Vec<i64>,
    /// The statement after it writes the region (else reads it).
    pub write: bool,
}

/// It accesses no memory itself and exists on every target (the CUDA prints nothing).
impl Instr for BoundsCheck {
    fn name(&self) -> String {
        format!("bounds.{}", self.verb())
    }

    fn operands(&self) -> Vec<&LExpr> {
        self.begins.iter().collect()
    }

    fn check(&self, c: &mut Checker) -> Check {
        c.bounds(self)
    }

    fn print(&self, p: &Printer) -> String {
        p.bounds(self)
    }
}

impl BoundsCheck {
    /// `read` / `write`.
    pub fn verb(&self) -> &'static str {
        if self.write {
            "write"
        } else {
            "read"
        }
    }

    /// The first element of the region (row-major order) outside `shape`, given
    /// the begins' values; `None` when the region lies inside. With every begin
    /// inside, it is the begin with the innermost overflowing dim set to its size.
    pub fn first_outside(begins: &[i64], extents: &[i64], shape: &[i64]) -> Option<(Vec<i64>, usize)> {
        if let Some(d) = begins.iter().zip(shape).position(|(&b, &n)| b < 0 || b >= n) {
            return Some((begins.to_vec(), d));
        }
        let d = (0..begins.len()).rev().find(|&d| begins[d].saturating_add(extents[d]) > shape[d])?;
        let mut at = begins.to_vec();
        at[d] = shape[d];
        Some((at, d))
    }
}

impl Checker<'_> {
    fn bounds(&mut self, c: &BoundsCheck) -> Check {
        self.buf(c.buf)?;
        let dims = c.shape.len();
        if dims == 0 || c.begins.len() != dims || c.extents.len() != dims {
            return Err(format!(
                "bounds check of `{}`: {} begins and {} extents for a shape of {dims} dims",
                c.name,
                c.begins.len(),
                c.extents.len()
            ));
        }
        if let Some(n) = c.shape.iter().find(|&&n| n < 1) {
            return Err(format!("bounds check of `{}`: a shape dim of {n}", c.name));
        }
        if let Some(e) = c.extents.iter().find(|&&e| e < 1) {
            return Err(format!("bounds check of `{}`: an extent of {e}", c.name));
        }
        for b in &c.begins {
            let t = self.expr(b)?;
            if !matches!(t, DType::I32 | DType::I64) {
                return Err(format!("bounds check of `{}`: a begin is {t}, not int32/int64", c.name));
            }
        }
        Ok(())
    }
}

impl Printer<'_> {
    /// `bounds.read A[bx * 16 : +32, 0 : +8] in (16, 32)`.
    fn bounds(&self, c: &BoundsCheck) -> String {
        let dims: Vec<String> = c.begins.iter().zip(&c.extents).map(|(b, e)| format!("{} : +{e}", self.e(b))).collect();
        let mut shape: Vec<String> = c.shape.iter().map(i64::to_string).collect();
        // A symbolic buffer's rows are its expression (the shape holds the bound).
        if let (Some(r), Some(d0)) =
            (self.k.bufs.get(c.buf.0 as usize).and_then(|b| b.dyn_rows.as_ref()), shape.first_mut())
        {
            *d0 = self.k.sym_text(r);
        }
        format!("bounds.{} {}[{}] in ({})", c.verb(), c.name, dims.join(", "), shape.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_element_outside() {
        // Columns 16..48 of 32: the first outside is column 32 of the first row.
        assert_eq!(BoundsCheck::first_outside(&[0, 16], &[8, 32], &[16, 32]), Some((vec![0, 32], 1)));
        // Rows and columns both overflow: the innermost dim comes first in row-major order.
        assert_eq!(BoundsCheck::first_outside(&[12, 16], &[8, 32], &[16, 32]), Some((vec![12, 32], 1)));
        assert_eq!(BoundsCheck::first_outside(&[12, 0], &[8, 32], &[16, 32]), Some((vec![16, 0], 0)));
        // A begin outside is itself the first element.
        assert_eq!(BoundsCheck::first_outside(&[-1, 0], &[1, 4], &[16, 32]), Some((vec![-1, 0], 0)));
        assert_eq!(BoundsCheck::first_outside(&[3, 40], &[1, 1], &[16, 32]), Some((vec![3, 40], 1)));
        assert_eq!(BoundsCheck::first_outside(&[8, 0], &[8, 32], &[16, 32]), None);
    }
}
