//! The data model: [`Iter`], [`TileLayout`], [`Swizzle`], [`ComposeLayout`], [`Layout`].

use crate::axis::Axis;
use crate::error::{self, LayoutError, Result, LIMIT};
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
    /// The checked constructor (the reference's `TileLayout.from_iters`): extents
    /// positive, values within [`LIMIT`], thread axes forming one scope chain.
    pub fn from_iters(shard: Vec<Iter>, replica: Vec<Iter>, offset: BTreeMap<Axis, i64>) -> Result<TileLayout> {
        let l = TileLayout { shard, replica, offset };
        l.validate()?;
        l.scope()?;
        Ok(l)
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

    /// Rejects non-positive extents and values beyond [`LIMIT`]; every operation calls it first.
    pub fn validate(&self) -> Result<()> {
        for (part, iters) in [("shard", &self.shard), ("replica", &self.replica)] {
            for (index, it) in iters.iter().enumerate() {
                if it.extent <= 0 {
                    return Err(LayoutError::BadExtent { part, index, extent: it.extent });
                }
                if it.stride.unsigned_abs() > LIMIT as u64 {
                    return Err(LayoutError::TooLarge { what: format!("{part} iter {index} stride {}", it.stride) });
                }
            }
            let what = if part == "shard" { "shard extent product" } else { "replica extent product" };
            error::product(iters.iter().map(|it| it.extent), what)?;
        }
        for (axis, v) in &self.offset {
            if v.unsigned_abs() > LIMIT as u64 {
                return Err(LayoutError::TooLarge { what: format!("offset {v}@{axis}") });
            }
        }
        Ok(())
    }

    /// Shard extents, outermost first.
    pub fn extents(&self) -> Vec<i64> {
        self.shard.iter().map(|it| it.extent).collect()
    }

    /// Product of the shard extents on `axis` (all shard iters when `None`, thread
    /// iters included). Replicas and offsets never count.
    pub fn size(&self, axis: Option<Axis>) -> Result<i64> {
        self.validate()?;
        let iters = self.shard.iter().filter(|it| axis.is_none_or(|a| it.axis == a));
        error::product(iters.map(|it| it.extent), "layout size")
    }

    /// One past the highest coordinate the layout reaches on `axis`, or on the
    /// memory axes together when `None`: `1 + Σ max(0, (e−1)·s)` over shard and
    /// replica iters plus the offsets. This is the reference's span
    /// (`1 + Σ (e−1)·s + offsets`, pitfall 9: unlike `size` it skips thread
    /// axes and counts replicas and offsets) wherever strides are positive; a
    /// negative stride reaches down, not up (see [`TileLayout::reach`]).
    pub fn span(&self, axis: Option<Axis>) -> Result<i64> {
        let (_, hi) = self.reach(axis)?;
        error::add(hi, 1, "layout span")
    }

    /// The lowest and the highest coordinate any element (and replica) reaches
    /// on `axis`, or on the memory axes together when `None`, offsets included.
    /// A layout whose storage starts below 0 (`S[(4,):(-1,)]` reaches -3) or
    /// whose thread axis leaves the hardware's range is refused where a buffer
    /// is declared.
    pub fn reach(&self, axis: Option<Axis>) -> Result<(i64, i64)> {
        self.validate()?;
        let wanted = |a: Axis| axis.map_or(a.is_memory(), |x| x == a);
        let mut offsets = self.offset.iter().filter(|(a, _)| wanted(**a)).map(|(_, &v)| v);
        let base = offsets.try_fold(0i64, |acc, v| error::add(acc, v, "layout reach"))?;
        let (mut lo, mut hi) = (base, base);
        for it in self.shard.iter().chain(&self.replica).filter(|it| wanted(it.axis)) {
            let d = error::mul(it.extent - 1, it.stride, "layout reach")?;
            if d < 0 {
                lo = error::add(lo, d, "layout reach")?;
            } else {
                hi = error::add(hi, d, "layout reach")?;
            }
        }
        Ok((lo, hi))
    }

    /// Any shard iter on a thread axis.
    pub fn has_thread_axis(&self) -> bool {
        self.shard.iter().any(|it| it.axis.is_thread())
    }

    /// Every thread axis used anywhere (shard, replica, offset keys), each once, in first-seen order.
    pub fn thread_axes(&self) -> Vec<Axis> {
        let mut out: Vec<Axis> = Vec::new();
        let used = self.shard.iter().chain(&self.replica).map(|it| it.axis).chain(self.offset.keys().copied());
        for a in used.filter(|a| a.is_thread()) {
            if !out.contains(&a) {
                out.push(a);
            }
        }
        out
    }

    /// The per-thread storage view: every thread-axis iter and offset dropped.
    pub fn storage(&self) -> TileLayout {
        let keep = |it: &&Iter| it.axis.is_memory();
        TileLayout {
            shard: self.shard.iter().filter(keep).copied().collect(),
            replica: self.replica.iter().filter(keep).copied().collect(),
            offset: self.offset.iter().filter(|(a, _)| a.is_memory()).map(|(a, v)| (*a, *v)).collect(),
        }
    }

    /// Reorders the shard: result iter `i` is `shard[perm[i]]`. Replica and offset are kept.
    pub fn permute_dims(&self, perm: &[usize]) -> Result<TileLayout> {
        check_permutation(perm, self.shard.len())?;
        let shard = perm.iter().map(|&i| self.shard[i]).collect();
        Ok(TileLayout { shard, replica: self.replica.clone(), offset: self.offset.clone() })
    }

    /// Reorders whole groups (`seps` as returned by [`TileLayout::group`]): group `g`
    /// of the result is group `perm[g]` of `self`.
    pub fn permute_by_groups(&self, seps: &[usize], perm: &[usize]) -> Result<TileLayout> {
        let bad = || LayoutError::BadSeparators { seps: seps.to_vec(), len: self.shard.len() };
        if seps.first() != Some(&0) || seps.last() != Some(&self.shard.len()) || seps.windows(2).any(|w| w[0] > w[1]) {
            return Err(bad());
        }
        check_permutation(perm, seps.len() - 1)?;
        let order: Vec<usize> = perm.iter().flat_map(|&g| seps[g]..seps[g + 1]).collect();
        self.permute_dims(&order)
    }
}

fn check_permutation(perm: &[usize], len: usize) -> Result<()> {
    let mut seen = vec![false; len];
    let ok = perm.len() == len && perm.iter().all(|&i| i < len && !std::mem::replace(&mut seen[i], true));
    if ok {
        Ok(())
    } else {
        Err(LayoutError::BadPermutation { perm: perm.to_vec(), len })
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
