//! Regrouping the shard by a logical shape (`TileLayout::group`).
//!
//! The shard iters are refined (iters split, never merged or reordered) so that
//! logical dimension `d` owns `shard[seps[d]..seps[d+1]]`. This succeeds iff the
//! extent products match and every cumulative shape boundary falls on a point
//! where the iter being cut divides evenly (§2.4). Replica and offset are kept.
//!
//! `group_many` (§2.5) refines the shard by several shapes at once: the
//! minimal common refinement of their cumulative boundaries, with a repeated
//! boundary (a unit dimension) kept as a unit iter, so every shape gets its
//! own separators into one layout.

use crate::error::{self, check_shape, LayoutError, Result};
use crate::tile::{Iter, TileLayout};
use std::collections::BTreeMap;

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

impl TileLayout {
    /// Refines the shard by every shape in `shapes` at once: the result's shard
    /// splits iters (never merges or reorders; existing unit iters keep their
    /// stride) and `seps[i]` cuts it into the dimensions of `shapes[i]`.
    /// Every shape must hold as many elements as the layout, and the cumulative
    /// products of all shapes and of the shard extents must divide each other
    /// where they interleave (`[3, 4]` and `[2, 6]` cannot both cut `12`).
    pub fn group_many(&self, shapes: &[Vec<i64>]) -> Result<(TileLayout, Vec<Vec<usize>>)> {
        self.validate()?;
        let size = self.size(None)?;
        if shapes.is_empty() {
            return Err(bad_shapes("needs at least one shape".into()));
        }
        // Cumulative boundaries `[1, S0, S0·S1, ...]` of each shape, then of the shard.
        let mut sequences = Vec::with_capacity(shapes.len() + 1);
        for (i, shape) in shapes.iter().enumerate() {
            if shape.is_empty() {
                return Err(bad_shapes(format!("shape {i} is empty; give at least one dimension")));
            }
            let total = check_shape(shape)?;
            if total != size {
                return Err(LayoutError::ShapeMismatch {
                    shape: shape.clone(),
                    extents: self.extents(),
                    detail: format!("the layout holds {size} elements but shape {i} holds {total}"),
                });
            }
            sequences.push(boundaries(shape));
        }
        // An empty shard is one element: a unit iter, as in `group`.
        let unit = [Iter::m(1, 1)];
        let source: &[Iter] = if self.shard.is_empty() { &unit } else { &self.shard };
        sequences.push(boundaries(&source.iter().map(|it| it.extent).collect::<Vec<_>>()));

        // Each distinct boundary value, ascending, repeated as often as any sequence repeats it.
        let mut mult: BTreeMap<i64, usize> = BTreeMap::new();
        for seq in &sequences {
            let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
            for &b in seq {
                *counts.entry(b).or_insert(0) += 1;
            }
            for (b, n) in counts {
                let m = mult.entry(b).or_insert(0);
                *m = (*m).max(n);
            }
        }
        let mut start: BTreeMap<i64, usize> = BTreeMap::new();
        let mut common: Vec<i64> = Vec::new();
        for (&b, &n) in &mult {
            start.insert(b, common.len());
            common.extend(std::iter::repeat_n(b, n));
        }
        for w in common.windows(2) {
            if w[1] % w[0] != 0 {
                return Err(bad_shapes(format!(
                    "incompatible cumulative boundaries: {} does not divide {} (one shape cuts where another \
                     cannot; e.g. [3, 4] and [2, 6] of 12)",
                    w[0], w[1]
                )));
            }
        }
        let positions = |seq: &[i64]| -> Result<Vec<usize>> {
            let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
            let mut out: Vec<usize> = Vec::with_capacity(seq.len());
            for (j, &b) in seq.iter().enumerate() {
                let k = seen.entry(b).or_insert(0);
                let mut pos = start[&b] + *k;
                *k += 1;
                if j == 0 {
                    pos = start[&b];
                }
                if j + 1 == seq.len() {
                    pos = start[&b] + mult[&b] - 1;
                }
                if out.last().is_some_and(|&prev| pos <= prev) {
                    return Err(bad_shapes(format!("the repeated boundary {b} cannot be kept in order")));
                }
                out.push(pos);
            }
            Ok(out)
        };

        let layout_pos = positions(&sequences[shapes.len()])?;
        let mut shard = Vec::with_capacity(common.len());
        for (i, it) in source.iter().enumerate() {
            let (p0, p1) = (layout_pos[i], layout_pos[i + 1]);
            for p in p0..p1 {
                let inner = common[p1] / common[p + 1];
                shard.push(Iter::new(
                    common[p + 1] / common[p],
                    error::mul(it.stride, inner, "group stride")?,
                    it.axis,
                ));
            }
        }
        let seps = sequences[..shapes.len()].iter().map(|s| positions(s)).collect::<Result<Vec<_>>>()?;
        Ok((TileLayout { shard, replica: self.replica.clone(), offset: self.offset.clone() }, seps))
    }
}

/// `[1, e0, e0·e1, ...]` (the caller has bounded the product).
fn boundaries(extents: &[i64]) -> Vec<i64> {
    let mut out = Vec::with_capacity(extents.len() + 1);
    let mut p = 1i64;
    out.push(p);
    for &e in extents {
        p = p.saturating_mul(e);
        out.push(p);
    }
    out
}

fn bad_shapes(reason: String) -> LayoutError {
    LayoutError::BadArgument { op: "group_many", arg: "shapes", reason }
}
