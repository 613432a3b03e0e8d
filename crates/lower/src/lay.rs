//! Adapters over `tirx_layout` for the shapes lowering works in: shard iter
//! lists (canonicalize, group), region slices, storage spans and the tile a
//! swizzled layout addresses through. Copy-specific partition steps live in
//! `copy/partition.rs`.
//!
//! Thread-axis fusion is off (`Fusion::None`): lowering addresses memory (`m`)
//! only, and global/shared layouts carry no thread axes.

use tirx_layout::{Axis, Fusion, Iter, Layout, TileLayout};

/// Unit iters dropped, adjacent chains fused (thread axes as written).
pub fn canon(shard: &[Iter]) -> Vec<Iter> {
    match TileLayout::from_shard(shard.to_vec()).canonicalize(Fusion::None) {
        Ok(t) => t.shard,
        Err(_) => shard.to_vec(),
    }
}

/// Refines `shard` so dim `d` of `shape` owns `iters[seps[d]..seps[d+1]]`.
pub fn group(shard: &[Iter], shape: &[i64]) -> Option<(Vec<Iter>, Vec<usize>)> {
    TileLayout::from_shard(shard.to_vec()).group(shape).ok().map(|(t, seps)| (t.shard, seps))
}

/// The layout of the region `begins[d] .. begins[d] + extents[d]` of a buffer of
/// `shape`, over the region's extents (tests build partition inputs with it;
/// lowering slices through the operand module).
#[cfg(test)]
pub fn slice(t: &TileLayout, shape: &[i64], begins: &[i64], extents: &[i64]) -> Result<TileLayout, String> {
    let region: Vec<(i64, i64)> = begins.iter().copied().zip(extents.iter().copied()).collect();
    t.slice(shape, &region, Fusion::None).map_err(|e| e.to_string())
}

/// Elements of storage the layout touches on memory axes (a swizzled layout
/// rounds up to whole swizzle periods, which it permutes within).
pub fn memory_span(l: &Layout, shape: &[i64]) -> Result<i64, String> {
    // A bare swizzle addresses through the row-major identity over the whole
    // buffer (see `compose_base`), so it must be sized from that, not its period tile.
    let span = try_compose_base(l, shape)?.span(None).map_err(|e| e.to_string())?.max(1);
    Ok(match l {
        Layout::Tile(_) => span,
        Layout::Compose(c) => {
            let period = c.swizzle.period();
            let whole = span
                .checked_add(period - 1)
                .ok_or_else(|| format!("{span} elements overflow i64 when rounded to swizzle periods"))?;
            whole / period * period
        }
    })
}

/// Why a tile has no single stride per buffer dim ([`dim_strides`]).
pub enum DimStridesError {
    /// Its iters do not group over the shape.
    NoSplit,
    /// Dim `d` is several iters (or a thread axis).
    Split(usize),
}

/// The memory stride of each dim of `shape` under `t` (0 for a dim of one element), where
/// every dim is one iter of the memory axis.
pub fn dim_strides(t: &TileLayout, shape: &[i64]) -> Result<Vec<i64>, DimStridesError> {
    let (g, seps) = group(&canon(&t.shard), shape).ok_or(DimStridesError::NoSplit)?;
    (0..shape.len())
        .map(|d| match g[seps[d]..seps[d + 1]].iter().filter(|i| i.extent != 1).collect::<Vec<_>>()[..] {
            [] => Ok(0),
            [it] if it.axis == Axis::M => Ok(it.stride),
            _ => Err(DimStridesError::Split(d)),
        })
        .collect()
}

/// The element stride of each dim of a buffer whose layout is a plain strided view
/// (one memory iter per dim, no offset, swizzle or thread axis); `None` otherwise.
pub fn plain_strides(l: &Layout, shape: &[i64]) -> Option<Vec<i64>> {
    let Layout::Tile(t) = l else { return None };
    if t.has_thread_axis() || !t.replica.is_empty() || m_offset(t) != 0 {
        return None;
    }
    dim_strides(t, shape).ok()
}

/// The constant element offset of `l` on the memory axis.
pub fn m_offset(l: &TileLayout) -> i64 {
    l.offset.get(&Axis::M).copied().unwrap_or(0)
}

pub fn tile_of(l: &Layout) -> &TileLayout {
    match l {
        Layout::Tile(t) => t,
        Layout::Compose(c) => &c.tile,
    }
}

/// The tile a layout addresses through over a buffer of `shape` (a bare
/// swizzle stands for the row-major identity); the layout error when the
/// swizzle's tile is invalid.
pub fn try_compose_base(l: &Layout, shape: &[i64]) -> Result<TileLayout, String> {
    match l {
        Layout::Tile(t) => Ok(t.clone()),
        Layout::Compose(c) => c.base_tile(shape).map_err(|e| e.to_string()),
    }
}

/// The TMA swizzle mode (1, 2, 3: 32, 64, 128 bytes) a swizzled layout of `dtype`
/// elements is, when it is one the TMA unit applies: 16-byte chunks, the chunk bits
/// XORed with the bits 3 above them (`ComposeLayout(p, s, 3, ..)` with `2^p`
/// elements = 16 bytes, inner). `None` for any other swizzle or none.
pub fn tma_swizzle(l: &Layout, dtype: tirx_ir::DType) -> Option<u8> {
    let sw = l.swizzle().filter(|s| s.swizzle_len > 0)?;
    let chunk_bytes = sw.chunk().checked_mul(i64::from(dtype.bytes()))?;
    (sw.inner && sw.atom_len == 3 && chunk_bytes == 16 && (1..=3).contains(&sw.swizzle_len))
        .then_some(sw.swizzle_len as u8)
}

/// The start alignment a shared buffer with layout `l` needs beyond the default: the
/// repeat of a TMA swizzle it has (256, 512, 1024 bytes), so the hardware's pattern,
/// computed from shared addresses, is the layout's (docs/tile-primitives.md §2.7).
pub fn smem_align(l: &Layout, dtype: tirx_ir::DType) -> u32 {
    tma_swizzle(l, dtype).map_or(0, tirx_ir::lir::tmap::swizzle_repeat)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_layout::Axis;

    #[test]
    fn group_splits_row_major() {
        let (g, seps) = group(&[Iter::m(4096, 1)], &[64, 64]).unwrap();
        assert_eq!(g, vec![Iter::m(64, 64), Iter::m(64, 1)]);
        assert_eq!(seps, vec![0, 1, 2]);
        assert!(group(&[Iter::m(6, 1)], &[4]).is_none());
    }

    #[test]
    fn slice_column_and_offsets() {
        let t = TileLayout::row_major(&[64, 64]);
        let s = slice(&t, &[64, 64], &[0, 3], &[64, 1]).unwrap();
        assert_eq!(s.shard.iter().map(|i| i.extent).product::<i64>(), 64);
        assert_eq!(s.offset.get(&Axis::M), Some(&3));
    }
}
