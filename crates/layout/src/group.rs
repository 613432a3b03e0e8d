//! Regrouping the shard by a logical shape (`TileLayout::group`).
//!
//! The shard iters are refined (iters split, never merged or reordered) so that
//! logical dimension `d` owns `shard[seps[d]..seps[d+1]]`. This succeeds iff the
//! extent products match and every cumulative shape boundary falls on a point
//! where the iter being cut divides evenly (§2.4). Replica and offset are kept.

use crate::error::{self, check_shape, LayoutError, Result};
use crate::tile::{Iter, TileLayout};

impl TileLayout {
    /// Splits the shard into one group per dimension of `shape`. Returns the
    /// refined layout and `seps` (`shape.len() + 1` entries, `0` first). Unit
    /// dimensions get a synthesized unit iter. The input is not canonicalized.
    pub fn group(&self, shape: &[i64]) -> Result<(TileLayout, Vec<usize>)> {
        self.validate()?;
        let total = check_shape(shape)?;
        let mismatch =
            |detail: String| LayoutError::ShapeMismatch { shape: shape.to_vec(), extents: self.extents(), detail };
        let size = self.size(None)?;
        if size != total {
            return Err(mismatch(format!("the layout holds {size} elements but the shape {total}")));
        }
        // An empty shard is one element; give it a unit iter so unit dims can be cut from it.
        let unit = [Iter::m(1, 1)];
        let source: &[Iter] = if self.shard.is_empty() { &unit } else { &self.shard };

        let mut out: Vec<Iter> = Vec::with_capacity(source.len() + shape.len());
        let mut seps = vec![0usize];
        let mut dim = 0usize;
        let mut prod = 1i64; // elements of the current dim covered so far, times the open iter
        for it in source {
            let mut ext = it.extent;
            prod = error::mul(prod, ext, "group product")?;
            while dim < shape.len() && prod % shape[dim] == 0 {
                let later = prod / shape[dim]; // part of this iter that belongs to later dims
                if ext % later != 0 {
                    return Err(mismatch(format!(
                        "the boundary of dimension {dim} falls inside iter ({}, {}) which does not split evenly",
                        it.extent, it.stride
                    )));
                }
                out.push(Iter::new(ext / later, error::mul(it.stride, later, "group stride")?, it.axis));
                ext = later;
                prod = later;
                dim += 1;
                seps.push(out.len());
            }
            if ext != 1 {
                if dim >= shape.len() {
                    return Err(mismatch("the layout has iters left after the last dimension".into()));
                }
                out.push(Iter::new(ext, it.stride, it.axis));
            }
        }
        if dim != shape.len() {
            return Err(mismatch(format!("dimension {dim} cannot be cut out of the shard iters")));
        }
        let grouped = TileLayout { shard: out, replica: self.replica.clone(), offset: self.offset.clone() };
        Ok((grouped, seps))
    }
}
