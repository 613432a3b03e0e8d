//! Tiling (`TileLayout::tile`, §2.7): the layout of an outer grid of inner tiles.
//!
//! Per dimension `d`, logical index `x_d = o_d·inner_shape[d] + i_d` maps to
//! `outer(o)·span + inner(i)`, where every outer coordinate on an axis the
//! inner tile occupies is scaled by the inner tile's span on that axis. The
//! reference scales only the outer shard iters (pitfall 8); we scale the outer
//! replicas and offsets too, so the law above holds for the whole layout.

use crate::canon::Fusion;
use crate::error::{self, LayoutError, Result};
use crate::tile::{Iter, TileLayout};
use std::collections::BTreeMap;

impl TileLayout {
    /// `self` (inner, over `inner_shape`) tiled by `outer` (over `outer_shape`);
    /// the result is over `outer_shape[d]·inner_shape[d]` per dimension, canonicalized with `fusion`.
    pub fn tile(
        &self,
        outer: &TileLayout,
        outer_shape: &[i64],
        inner_shape: &[i64],
        fusion: Fusion,
    ) -> Result<TileLayout> {
        if outer_shape.len() != inner_shape.len() {
            return Err(LayoutError::TileRank { outer: outer_shape.len(), inner: inner_shape.len() });
        }
        let (inner, iseps) = self.canonicalize(fusion)?.group(inner_shape)?;
        let (outer, oseps) = outer.canonicalize(fusion)?.group(outer_shape)?;

        // Span of the inner tile on each axis its shard occupies.
        let mut span: BTreeMap<crate::axis::Axis, i64> = BTreeMap::new();
        for it in &inner.shard {
            if let std::collections::btree_map::Entry::Vacant(slot) = span.entry(it.axis) {
                slot.insert(inner.span(Some(it.axis))?);
            }
        }
        let scale = |it: &Iter| -> Result<Iter> {
            let f = span.get(&it.axis).copied().unwrap_or(1);
            Ok(Iter::new(it.extent, error::mul(it.stride, f, "tiled stride")?, it.axis))
        };

        let mut shard = Vec::with_capacity(inner.shard.len() + outer.shard.len());
        for d in 0..inner_shape.len() {
            for it in &outer.shard[oseps[d]..oseps[d + 1]] {
                shard.push(scale(it)?);
            }
            shard.extend_from_slice(&inner.shard[iseps[d]..iseps[d + 1]]);
        }
        let mut replica = inner.replica.clone();
        for it in &outer.replica {
            replica.push(scale(it)?);
        }
        let mut offset = inner.offset.clone();
        for (&axis, &v) in &outer.offset {
            let scaled = error::mul(v, span.get(&axis).copied().unwrap_or(1), "tiled offset")?;
            let slot = offset.entry(axis).or_insert(0);
            *slot = error::add(*slot, scaled, "tiled offset")?;
        }
        TileLayout { shard, replica, offset }.canonicalize(fusion)
    }
}
