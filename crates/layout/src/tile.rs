//! The data model: [`Iter`], [`TileLayout`], [`Swizzle`], [`ComposeLayout`], [`Layout`].

use crate::axis::Axis;
use serde::Serialize;
use std::collections::BTreeMap;

/// `(extent, stride, axis)`: `extent` steps of `stride` on `axis`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Iter {
    pub extent: i64,
    pub stride: i64,
    pub axis: Axis,
}

impl Iter {
    pub fn new(extent: i64, stride: i64, axis: Axis) -> Iter {
        Iter { extent, stride, axis }
    }
    /// An iter on the default memory axis `m`.
    pub fn m(extent: i64, stride: i64) -> Iter {
        Iter::new(extent, stride, Axis::M)
    }
}

/// Shard iters (outermost first) + replica iters + a per-axis base offset.
///
/// A logical index is flattened row-major, split over the shard extents, and
/// each digit contributes `digit * stride` to its axis; replicas say the same
/// element also lives at `+ r * stride` for every `r < extent`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct TileLayout {
    pub shard: Vec<Iter>,
    pub replica: Vec<Iter>,
    pub offset: BTreeMap<Axis, i64>,
}

impl TileLayout {
    pub fn new(shard: Vec<Iter>, replica: Vec<Iter>, offset: BTreeMap<Axis, i64>) -> TileLayout {
        TileLayout { shard, replica, offset }
    }
    pub fn from_shard(shard: Vec<Iter>) -> TileLayout {
        TileLayout { shard, ..Default::default() }
    }
    /// Row-major layout on `m` over `shape` (`S[shape]`).
    pub fn row_major(shape: &[i64]) -> TileLayout {
        let mut stride = 1i64;
        let mut shard = vec![Iter::m(1, 1); shape.len()];
        for (d, &e) in shape.iter().enumerate().rev() {
            shard[d] = Iter::m(e, stride);
            stride = stride.saturating_mul(e);
        }
        TileLayout::from_shard(shard)
    }
}

/// XOR swizzle parameters: chunks of `2^per_element` elements are permuted by
/// XOR-ing `swizzle_len` bits at position `atom_len` into bits `[0, swizzle_len)`
/// (`inner = true`) or the other way round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct Swizzle {
    pub per_element: u32,
    pub swizzle_len: u32,
    pub atom_len: u32,
    pub inner: bool,
}

/// A swizzle applied to the `m` address of a tile layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ComposeLayout {
    pub swizzle: Swizzle,
    pub tile: TileLayout,
}

/// Any buffer layout.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Layout {
    Tile(TileLayout),
    Compose(ComposeLayout),
}

impl From<TileLayout> for Layout {
    fn from(t: TileLayout) -> Layout {
        Layout::Tile(t)
    }
}
impl From<ComposeLayout> for Layout {
    fn from(c: ComposeLayout) -> Layout {
        Layout::Compose(c)
    }
}
