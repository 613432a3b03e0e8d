//! The layout of a sub-region (`TileLayout::slice`, §2.6).
//!
//! Canonicalize, group by the buffer shape, then slice each dimension's group
//! on its own: the region's start digits become offsets (on thread axes too:
//! slicing rows of a `laneid` layout yields `+ k@laneid`), and the region's
//! extent is re-expressed as iters. Law, for every `x` in the region:
//! `L.slice(shape, region).apply(x, ext) == L.canonicalize(f).apply(begin + x, shape)`.
//!
//! Fixes over the reference: regions are bounds-checked (pitfall 3), an
//! inexpressible region is an error rather than a wrong layout, and a region
//! that crosses one digit boundary computes its jump from the full carry, so
//! the vacuous cap of pitfall 1 cannot produce a wrong layout.

use crate::apply::Coord;
use crate::canon::{drop_zero_offsets, fuse_adjacent, Fusion};
use crate::error::{self, check_shape, LayoutError, Result};
use crate::tile::{Iter, TileLayout};

impl TileLayout {
    /// The layout over the region's extents; `region[d] = (begin, extent)`.
    pub fn slice(&self, shape: &[i64], region: &[(i64, i64)], fusion: Fusion) -> Result<TileLayout> {
        check_region(shape, region)?;
        let canon = self.canonicalize(fusion)?;
        let (grouped, seps) = canon.group(shape)?;
        let mut offset = grouped.offset.clone();
        let mut shard = Vec::with_capacity(grouped.shard.len());
        for (dim, &(begin, extent)) in region.iter().enumerate() {
            let group = &grouped.shard[seps[dim]..seps[dim + 1]];
            let (iters, start) = slice_group(group, begin, extent)
                .map_err(|reason| LayoutError::SliceInexpressible { dim, begin, extent, reason })?;
            shard.extend(iters);
            for (axis, v) in start {
                let slot = offset.entry(axis).or_insert(0);
                *slot = error::add(*slot, v, "slice offset")?;
            }
        }
        drop_zero_offsets(&shard, &grouped.replica, &mut offset);
        Ok(TileLayout { shard, replica: grouped.replica, offset })
    }
}

/// Every region entry is a non-empty sub-range of its dimension.
pub(crate) fn check_region(shape: &[i64], region: &[(i64, i64)]) -> Result<()> {
    check_shape(shape)?;
    if region.len() != shape.len() {
        return Err(LayoutError::RankMismatch {
            what: "region rank vs shape rank",
            expected: shape.len(),
            got: region.len(),
        });
    }
    for (dim, (&(begin, extent), &size)) in region.iter().zip(shape).enumerate() {
        let end = begin.checked_add(extent);
        if begin < 0 || extent < 1 || end.is_none_or(|e| e > size) {
            return Err(LayoutError::RegionOutOfRange { dim, begin, extent, size });
        }
    }
    Ok(())
}

/// Address (per axis) of flat index `x` within one group.
fn group_address(iters: &[Iter], x: i64) -> Result<Coord, String> {
    let extents: Vec<i64> = iters.iter().map(|it| it.extent).collect();
    let digits = crate::apply::split_coord(x, &extents);
    let mut out = Coord::new();
    for (it, d) in iters.iter().zip(digits) {
        let v = d.checked_mul(it.stride).ok_or("address overflows")?;
        let slot = out.entry(it.axis).or_insert(0);
        *slot = slot.checked_add(v).ok_or("address overflows")?;
    }
    Ok(out)
}

/// Slices `[begin, begin + n)` of one group (flat, row-major over its iters).
/// Returns the region's iters and the start address (to add to the offset).
/// The caller guarantees `0 <= begin`, `begin + n <= ∏ extents`.
fn slice_group(group: &[Iter], begin: i64, n: i64) -> Result<(Vec<Iter>, Coord), String> {
    let unit: Vec<Iter> = group.iter().filter(|it| it.extent != 1).copied().collect();
    let iters = fuse_adjacent(&unit).map_err(|e| e.to_string())?;
    let Some(&last) = iters.last() else {
        // The group holds one element: keep a unit iter so the dimension survives.
        let axis = group.first().map_or(crate::axis::Axis::M, |it| it.axis);
        return Ok((vec![Iter::new(1, 1, axis)], Coord::new()));
    };
    let start = group_address(&iters, begin)?;
    if iters.len() == 1 {
        return Ok((vec![Iter::new(n, last.stride, last.axis)], start));
    }
    let extents: Vec<i64> = iters.iter().map(|it| it.extent).collect();
    let digits = crate::apply::split_coord(begin, &extents);

    // Peel inner iters the region covers completely from a zero digit.
    let mut rem = n;
    let mut p = iters.len();
    while p > 0 && digits[p - 1] == 0 && rem % extents[p - 1] == 0 {
        rem /= extents[p - 1];
        p -= 1;
    }
    let peeled = &iters[p..];
    if p == 0 {
        return if rem == 1 {
            Ok((peeled.to_vec(), start))
        } else {
            Err("the region is larger than the dimension".into())
        };
    }
    let pivot = iters[p - 1];
    let d = digits[p - 1];
    let mut out = Vec::with_capacity(peeled.len() + 2);
    if d + rem <= pivot.extent {
        out.push(Iter::new(rem, pivot.stride, pivot.axis));
    } else {
        // Two equal runs: [d, E) of this digit, then [0, E - d) after one carry.
        let run = pivot.extent - d;
        if rem != 2 * run {
            return Err(format!(
                "it covers {rem} steps of the iter ({}, {}) from step {d}, which is not one or two equal runs",
                pivot.extent, pivot.stride
            ));
        }
        let inner: i64 = peeled.iter().map(|it| it.extent).product();
        let second = group_address(&iters, begin + run * inner)?;
        let jump = jump_between(&start, &second, pivot.axis)?;
        out.push(Iter::new(2, jump.1, jump.0));
        out.push(Iter::new(run, pivot.stride, pivot.axis));
    }
    out.extend_from_slice(peeled);
    Ok((out, start))
}

/// The single-axis step from `from` to `to`; an error when the step moves two axes.
fn jump_between(from: &Coord, to: &Coord, default: crate::axis::Axis) -> Result<(crate::axis::Axis, i64), String> {
    let mut moved = Vec::new();
    for axis in from.keys().chain(to.keys()) {
        let delta = to.get(axis).unwrap_or(&0).checked_sub(*from.get(axis).unwrap_or(&0)).ok_or("address overflows")?;
        if delta != 0 && !moved.iter().any(|(a, _)| a == axis) {
            moved.push((*axis, delta));
        }
    }
    match moved.as_slice() {
        [] => Ok((default, 0)),
        [one] => Ok(*one),
        _ => Err(format!(
            "crossing the boundary moves several axes at once ({})",
            moved.iter().map(|(a, v)| format!("{v}@{a}")).collect::<Vec<_>>().join(", ")
        )),
    }
}
