//! Canonical form (`TileLayout::canonicalize`), and the thread-axis fusion it may apply.
//!
//! Steps, in order: drop unit shard iters (keep one `(1,1,axis0)` if all were
//! unit), drop unit replica iters, [`Fusion::Cuda`] only: rewrite every thread
//! axis to the widest axis of the layout's scope pair (`laneid`+`warpid` →
//! `tx`), then fuse adjacent shard iters on one axis whose strides chain
//! (`e_{k+1}·s_{k+1} == s_k`), drop zero offsets (except on a thread axis that
//! no iter mentions: it pins the owning threads and keeps the scope), and sort
//! replicas by (axis, stride, extent). Differences from the reference: offsets fusing to the
//! same axis are summed (pitfall 4), `wgid` at (warp, cta) becomes `warpid`
//! ×4 (pitfall 5), the replica order is deterministic and unit replicas are
//! dropped (pitfall 8), and fusion is a parameter, never ambient (pitfall 7).

use crate::apply::Coord;
use crate::axis::{Axis, ExecScope};
use crate::error::{self, Result};
use crate::tile::{Iter, TileLayout};

/// Whether canonicalization rewrites thread axes into one fused axis.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fusion {
    /// Thread axes stay as written.
    None,
    /// CUDA thread numbering: `laneid`, `warpid`, `wgid`, `wid_in_wg`,
    /// `tid_in_wg` fuse into `tid_in_wg` / `tx` / `warpid` by the layout's scope.
    #[default]
    Cuda,
}

impl Fusion {
    pub fn name(self) -> &'static str {
        match self {
            Fusion::None => "none",
            Fusion::Cuda => "cuda",
        }
    }
    pub fn from_name(s: &str) -> Option<Fusion> {
        match s {
            "none" => Some(Fusion::None),
            "cuda" => Some(Fusion::Cuda),
            _ => None,
        }
    }
}

/// The CUDA fuser: for scope pair `(inner, outer)`, `axis` with stride `s`
/// becomes `target` with stride `s * factor`. `None` = left unchanged.
fn cuda_fuser(pair: (ExecScope, ExecScope), axis: Axis) -> Option<(Axis, i64)> {
    use Axis::*;
    use ExecScope::*;
    match (pair, axis) {
        ((Thread, Warpgroup), LaneId) => Some((TidInWg, 1)),
        ((Thread, Warpgroup), WidInWg) => Some((TidInWg, 32)),
        ((Thread, Cta), LaneId | TidInWg) => Some((Tx, 1)),
        ((Thread, Cta), WidInWg | WarpId) => Some((Tx, 32)),
        ((Thread, Cta), WgId) => Some((Tx, 128)),
        ((Warp, Cta), WidInWg) => Some((WarpId, 1)),
        ((Warp, Cta), WgId) => Some((WarpId, 4)),
        _ => None,
    }
}

/// Maps `(axis, value)` through the fuser for `pair`.
fn fuse_value(pair: Option<(ExecScope, ExecScope)>, axis: Axis, value: i64) -> Result<(Axis, i64)> {
    match pair.and_then(|p| cuda_fuser(p, axis)) {
        Some((target, factor)) => Ok((target, error::mul(value, factor, "fused thread stride")?)),
        None => Ok((axis, value)),
    }
}

impl TileLayout {
    /// The canonical form: same coordinate map (up to the fusion, see
    /// [`TileLayout::fuse_coord`]), fewest iters, deterministic structure.
    pub fn canonicalize(&self, fusion: Fusion) -> Result<TileLayout> {
        self.validate()?;
        // The scope is checked in every mode so invalid layouts fail the same way.
        let scope = self.scope()?;
        let pair = if fusion == Fusion::Cuda { scope } else { None };

        let mut shard: Vec<Iter> = self.shard.iter().filter(|it| it.extent != 1).copied().collect();
        let mut replica: Vec<Iter> = self.replica.iter().filter(|it| it.extent != 1).copied().collect();
        for it in shard.iter_mut().chain(replica.iter_mut()) {
            let (axis, stride) = fuse_value(pair, it.axis, it.stride)?;
            *it = Iter::new(it.extent, stride, axis);
        }
        if let (true, Some(first)) = (shard.is_empty(), self.shard.first()) {
            // All iters were unit: keep one so the layout still has a shard (stride
            // reset to 1 after fusion, which keeps canonicalize idempotent).
            shard.push(Iter::new(1, 1, fuse_value(pair, first.axis, 1)?.0));
        }
        let mut offset = Coord::new();
        for (&axis, &v) in &self.offset {
            let (axis, v) = fuse_value(pair, axis, v)?;
            let slot = offset.entry(axis).or_insert(0);
            *slot = error::add(*slot, v, "fused offset")?;
        }
        // A thread axis pinned by a dropped unit iter or a zero offset still says
        // which threads own the data (`+ 0@warpid`: warp 0 only), and removing it
        // would change the scope; it stays as a zero offset.
        drop_zero_offsets(&shard, &replica, &mut offset);
        for axis in self.thread_axes() {
            let fused = fuse_value(pair, axis, 1)?.0;
            if !shard.iter().chain(&replica).any(|it| it.axis == fused) {
                offset.entry(fused).or_insert(0);
            }
        }
        replica.sort_by_key(|it| (it.axis, it.stride, it.extent));
        Ok(TileLayout { shard: fuse_adjacent(&shard)?, replica, offset })
    }

    /// Maps a coordinate of `self` into the coordinate space of
    /// `self.canonicalize(fusion)`: thread axes are fused as canonicalize fuses
    /// them (values scaled and summed; zero entries kept). The law, up to zero
    /// entries ([`crate::normalize`]), is
    /// `L.canonicalize(f).apply_set(x) == L.apply_set(x).map(|c| L.fuse_coord(c, f))`.
    pub fn fuse_coord(&self, coord: &Coord, fusion: Fusion) -> Result<Coord> {
        let pair = if fusion == Fusion::Cuda { self.scope()? } else { None };
        let mut out = Coord::new();
        for (&axis, &v) in coord {
            let (axis, v) = fuse_value(pair, axis, v)?;
            let slot = out.entry(axis).or_insert(0);
            *slot = error::add(*slot, v, "fused coordinate")?;
        }
        Ok(out)
    }

    /// The canonical form is the identity on `m`: at most one shard iter, on
    /// `m` with stride 1, no replica, no offset.
    pub fn is_trivial(&self, fusion: Fusion) -> Result<bool> {
        let c = self.canonicalize(fusion)?;
        let shard_ok = match c.shard.as_slice() {
            [] => true,
            [it] => it.axis == Axis::M && it.stride == 1,
            _ => false,
        };
        Ok(shard_ok && c.replica.is_empty() && c.offset.is_empty())
    }
}

/// Drops zero offsets, except on a thread axis no iter mentions (it pins the owning threads).
pub(crate) fn drop_zero_offsets(shard: &[Iter], replica: &[Iter], offset: &mut Coord) {
    let in_iters = |a: &Axis| shard.iter().chain(replica).any(|it| it.axis == *a);
    offset.retain(|a, v| *v != 0 || (a.is_thread() && !in_iters(a)));
}

/// One greedy left-to-right pass merging runs of adjacent iters on one axis
/// whose strides chain; maximal for adjacent chains, never reorders.
pub(crate) fn fuse_adjacent(shard: &[Iter]) -> Result<Vec<Iter>> {
    let mut out: Vec<Iter> = Vec::with_capacity(shard.len());
    for &it in shard {
        match out.last_mut() {
            Some(last) if last.axis == it.axis && it.extent.checked_mul(it.stride) == Some(last.stride) => {
                last.extent = error::mul(last.extent, it.extent, "fused extent")?;
                last.stride = it.stride;
            }
            _ => out.push(it),
        }
    }
    Ok(out)
}
