//! Tiling (`TileLayout::tile`, §2.7; `tile_to`, §2.11): the layout of an outer grid of inner tiles.
//!
//! Per dimension `d`, logical index `x_d = o_d·inner_shape[d] + i_d` maps to
//! `outer(o)·span + inner(i)`, where every outer coordinate on an axis the
//! inner tile occupies is scaled by the inner tile's span on that axis. The
//! reference scales only the outer shard iters (pitfall 8); we scale the outer
//! replicas and offsets too, so the law above holds for the whole layout.
//!
//! `tile_to(shape, atom_shape)` repeats a layout over `atom_shape` row-major
//! until it covers `shape` (the outer grid is `S[shape / atom_shape]`). The
//! reference floors `shape / atom_shape` silently, yielding a layout of the
//! wrong size; here a dimension that is not a multiple is an error.
//! A [`ComposeLayout`] tiles its tile (the identity over `inner_shape` for a
//! bare swizzle) and keeps the swizzle.

use crate::canon::Fusion;
use crate::error::{self, check_shape, LayoutError, Result};
use crate::tile::{ComposeLayout, Iter, Layout, TileLayout};
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

impl TileLayout {
    /// `self` (over `atom_shape`) repeated row-major to cover `shape`:
    /// `self.tile(S[shape / atom_shape], shape / atom_shape, atom_shape, fusion)`.
    pub fn tile_to(&self, shape: &[i64], atom_shape: &[i64], fusion: Fusion) -> Result<TileLayout> {
        let grid = tile_grid(shape, atom_shape)?;
        self.tile(&TileLayout::row_major(&grid), &grid, atom_shape, fusion)
    }
}

/// `shape / atom_shape` per dimension; every dimension must be a whole multiple.
fn tile_grid(shape: &[i64], atom_shape: &[i64]) -> Result<Vec<i64>> {
    if shape.len() != atom_shape.len() {
        return Err(LayoutError::RankMismatch {
            what: "tile_to atom_shape rank vs shape rank",
            expected: shape.len(),
            got: atom_shape.len(),
        });
    }
    check_shape(shape)?;
    check_shape(atom_shape)?;
    let mut grid = Vec::with_capacity(shape.len());
    for (d, (&to, &atom)) in shape.iter().zip(atom_shape).enumerate() {
        if to % atom != 0 {
            return Err(LayoutError::BadArgument {
                op: "tile_to",
                arg: "shape",
                reason: format!(
                    "dimension {d} ({to}) is not a multiple of the atom extent {atom}; \
                     tile_to repeats the atom a whole number of times per dimension"
                ),
            });
        }
        grid.push(to / atom);
    }
    Ok(grid)
}

impl ComposeLayout {
    /// The tile (the identity over `inner_shape` for a bare swizzle) tiled by
    /// `outer`; the swizzle is kept and applies to the tiled `m` address.
    pub fn tile(
        &self,
        outer: &TileLayout,
        outer_shape: &[i64],
        inner_shape: &[i64],
        fusion: Fusion,
    ) -> Result<ComposeLayout> {
        self.swizzle.validate()?;
        let tile = self.base_tile(inner_shape)?.tile(outer, outer_shape, inner_shape, fusion)?;
        Ok(ComposeLayout { swizzle: self.swizzle, tile })
    }

    /// [`TileLayout::tile_to`] on the tile; the swizzle is kept.
    pub fn tile_to(&self, shape: &[i64], atom_shape: &[i64], fusion: Fusion) -> Result<ComposeLayout> {
        let grid = tile_grid(shape, atom_shape)?;
        self.tile(&TileLayout::row_major(&grid), &grid, atom_shape, fusion)
    }
}

impl Layout {
    /// [`TileLayout::tile`] / [`ComposeLayout::tile`].
    pub fn tile_by(
        &self,
        outer: &TileLayout,
        outer_shape: &[i64],
        inner_shape: &[i64],
        fusion: Fusion,
    ) -> Result<Layout> {
        Ok(match self {
            Layout::Tile(t) => Layout::Tile(t.tile(outer, outer_shape, inner_shape, fusion)?),
            Layout::Compose(c) => Layout::Compose(c.tile(outer, outer_shape, inner_shape, fusion)?),
        })
    }

    /// [`TileLayout::tile_to`] / [`ComposeLayout::tile_to`].
    pub fn tile_to(&self, shape: &[i64], atom_shape: &[i64], fusion: Fusion) -> Result<Layout> {
        Ok(match self {
            Layout::Tile(t) => Layout::Tile(t.tile_to(shape, atom_shape, fusion)?),
            Layout::Compose(c) => Layout::Compose(c.tile_to(shape, atom_shape, fusion)?),
        })
    }
}
