//! Injectivity: does every element have a home of its own (docs/layout-model.md §1.8)?
//!
//! A buffer's layout must never send two logical elements to the same point:
//! for storage that point is an address (a store to one element would
//! overwrite the other), for a register layout it is (thread, register). The
//! map compared is the full one — every axis, thread and memory — so fused
//! or split thread axes are fine as long as (thread coordinates, memory offset)
//! differ for every pair of elements. Replica iters are included: the homes of
//! two *different* elements must be disjoint, while the several homes of one
//! element (its replicas, also a stride-0 replica) are deliberate. A swizzle is
//! a bijection on `m`, so a [`ComposeLayout`] is injective iff its tile is.
//!
//! **Algorithm.** Every iter adds to one axis only, so the map is injective
//! iff, on each axis, the iters of that axis alone are: two points that agree
//! on every axis agree on each. Per axis, after dropping unit iters:
//! 1. a shard iter of stride 0 collides at once (digits 0 and 1);
//! 2. *separated* iters are peeled off from the top: when the iter of largest
//!    `|stride|` exceeds the reach `Σ (e−1)·|s|` of all the others, two points
//!    can only meet with equal digits on it;
//! 3. the sorted-stride condition: walking the rest by ascending `|stride|`,
//!    each stride exceeding the reach of those before it proves injectivity
//!    (signs do not matter: `c ↦ e−1−c` turns a negative stride positive);
//! 4. otherwise the remaining (entangled) iters are enumerated, at most
//!    [`MAX_ENUMERATED`] points, sorted by value; equal values whose shard
//!    digits differ are a collision. Larger cores are reported as
//!    [`Injectivity::Unknown`], never guessed.
//!
//! Real layouts (row-major, padded, thread-partitioned fragments) pass step 3
//! in `O(n log n)` for `n` iters, whatever the element count.

use crate::apply::Coord;
use crate::axis::Axis;
use crate::error::{self, Result};
use crate::tile::{ComposeLayout, Layout, TileLayout};

/// Most points the enumeration of step 4 visits on one axis.
pub const MAX_ENUMERATED: i64 = 1 << 20;

/// Two different elements that share a home.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Collision {
    /// Flat logical indices of the two elements (row-major over the shard
    /// extents, as [`TileLayout::apply_linear`] takes them), `first < second`.
    pub first: i64,
    pub second: i64,
    /// The point both reach, on every axis the layout uses (offsets included;
    /// a replica home when a replica iter is involved).
    pub at: Coord,
    /// The axis whose iters overlap.
    pub axis: Axis,
    /// The iters whose digits differ between the two homes: shard iters first,
    /// then replica iters, each in order.
    pub iters: Vec<IterRef>,
    /// A fix: iter `.0` (of `axis`) needs a stride of at least `.1` in magnitude
    /// to clear every other iter of that axis with a smaller stride.
    pub fix: Option<(IterRef, i64)>,
}

/// An iter of a [`TileLayout`]: `shard[index]`, or `replica[index]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IterRef {
    pub replica: bool,
    pub index: usize,
}

impl TileLayout {
    /// The iter `r` names.
    pub fn iter_at(&self, r: IterRef) -> Option<&crate::tile::Iter> {
        if r.replica {
            self.replica.get(r.index)
        } else {
            self.shard.get(r.index)
        }
    }
}

/// The verdict of [`TileLayout::injectivity`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Injectivity {
    /// Every element has its own home(s).
    Injective,
    /// Two elements share a home.
    Collides(Collision),
    /// Not decided: the entangled iters of `axis` span `points` > [`MAX_ENUMERATED`] points.
    Unknown { axis: Axis, points: i64 },
}

impl Injectivity {
    pub fn collision(&self) -> Option<&Collision> {
        match self {
            Injectivity::Collides(c) => Some(c),
            _ => None,
        }
    }
}

/// One iter of the axis under test.
#[derive(Clone, Copy, Debug)]
struct Item {
    /// Index into `shard` or `replica`.
    index: usize,
    replica: bool,
    extent: i64,
    stride: i64,
}

/// A digit per iter (the iters not listed are at 0).
type Assignment = Vec<(Item, i64)>;

impl Item {
    fn reach(&self) -> i128 {
        (self.extent as i128 - 1) * (self.stride as i128).abs()
    }
}

impl TileLayout {
    /// Whether distinct elements always have distinct homes (module docs).
    pub fn injectivity(&self) -> Result<Injectivity> {
        self.validate()?;
        let mut axes: Vec<Axis> = self.shard.iter().chain(&self.replica).map(|it| it.axis).collect();
        axes.sort();
        axes.dedup();
        let mut unknown = None;
        for axis in axes {
            let items: Vec<Item> = self
                .shard
                .iter()
                .enumerate()
                .map(|(i, it)| (i, false, it))
                .chain(self.replica.iter().enumerate().map(|(i, it)| (i, true, it)))
                .filter(|(_, _, it)| it.axis == axis && it.extent > 1)
                .map(|(index, replica, it)| Item { index, replica, extent: it.extent, stride: it.stride })
                .collect();
            match self.axis_verdict(axis, items)? {
                Injectivity::Injective => {}
                Injectivity::Unknown { axis, points } => {
                    unknown.get_or_insert(Injectivity::Unknown { axis, points });
                }
                collides => return Ok(collides),
            }
        }
        Ok(unknown.unwrap_or(Injectivity::Injective))
    }

    fn axis_verdict(&self, axis: Axis, mut items: Vec<Item>) -> Result<Injectivity> {
        // 1. A stride-0 shard iter: its digits 0 and 1 meet. (A stride-0 replica is
        //    the same home twice, which is allowed.)
        if let Some(z) = items.iter().find(|it| it.stride == 0 && !it.replica) {
            return self.collision(axis, &items, &[], &[(*z, 1)]).map(Injectivity::Collides);
        }
        items.retain(|it| it.stride != 0);
        let full = items.clone();
        // 2. Peel separated iters off the top.
        items.sort_by_key(|it| std::cmp::Reverse((it.stride as i128).abs()));
        let mut rest: i128 = items.iter().map(Item::reach).sum();
        let mut top = 0;
        while let Some(it) = items.get(top) {
            let below = rest - it.reach();
            if (it.stride as i128).abs() <= below {
                break;
            }
            rest = below;
            top += 1;
        }
        let mut core: Vec<Item> = items[top..].to_vec();
        // 3. Sorted-stride sufficient condition.
        core.sort_by_key(|it| ((it.stride as i128).abs(), it.replica, it.index));
        let mut reach: i128 = 0;
        if core.iter().all(|it| {
            let ok = (it.stride as i128).abs() > reach;
            reach += it.reach();
            ok
        }) {
            return Ok(Injectivity::Injective);
        }
        // 4. Enumerate the entangled core; above the bound, a sub-box of it (a
        //    collision found there is real; finding none proves nothing).
        let points = error::product(core.iter().map(|it| it.extent), "entangled points").unwrap_or(i64::MAX);
        let mut box_core = core.clone();
        while box_core.iter().map(|it| it.extent as i128).product::<i128>() > MAX_ENUMERATED as i128 {
            if let Some(widest) = box_core.iter_mut().max_by_key(|it| it.extent) {
                widest.extent = (widest.extent + 1) / 2;
            }
        }
        if let Some((a, b)) = first_collision(&box_core) {
            return self.collision(axis, &full, &a, &b).map(Injectivity::Collides);
        }
        if points > MAX_ENUMERATED {
            return Ok(Injectivity::Unknown { axis, points });
        }
        Ok(Injectivity::Injective)
    }

    /// The collision of the two digit assignments `a` and `b` (every other digit 0).
    fn collision(&self, axis: Axis, axis_items: &[Item], a: &[(Item, i64)], b: &[(Item, i64)]) -> Result<Collision> {
        let digits = |set: &[(Item, i64)], replica: bool| {
            let mut v = vec![0i64; if replica { self.replica.len() } else { self.shard.len() }];
            for (it, d) in set.iter().filter(|(it, _)| it.replica == replica) {
                v[it.index] = *d;
            }
            v
        };
        let (sa, sb) = (digits(a, false), digits(b, false));
        let (ra, rb) = (digits(a, true), digits(b, true));
        let flat = |d: &[i64]| -> Result<i64> {
            let mut x = 0i64;
            for (it, &c) in self.shard.iter().zip(d) {
                x = error::add(error::mul(x, it.extent, "flat index")?, c, "flat index")?;
            }
            Ok(x)
        };
        let (fa, fb) = (flat(&sa)?, flat(&sb)?);
        let mut at = self.apply_shard(&sa)?;
        for (it, d) in self.replica.iter().zip(&ra) {
            let slot = at.entry(it.axis).or_insert(0);
            *slot = error::add(*slot, error::mul(*d, it.stride, "replica address")?, "replica address")?;
        }
        let differ = |x: &[i64], y: &[i64], replica: bool| {
            (0..x.len()).filter(|&i| x[i] != y[i]).map(move |index| IterRef { replica, index }).collect::<Vec<_>>()
        };
        let mut iters = differ(&sa, &sb, false);
        iters.extend(differ(&ra, &rb, true));
        // The fix: the involved iter of largest |stride| (shard before replica, outermost
        // on a tie) must clear the reach of the other iters of its axis below it.
        let abs = |r: IterRef| self.iter_at(r).map_or(0, |it| (it.stride as i128).abs());
        let fix = iters.iter().copied().max_by_key(|&r| (abs(r), std::cmp::Reverse(r))).and_then(|r| {
            let s = abs(r);
            let below: i128 = axis_items
                .iter()
                .filter(|it| IterRef { replica: it.replica, index: it.index } != r && (it.stride as i128).abs() <= s)
                .map(Item::reach)
                .sum();
            i64::try_from(below + 1).ok().map(|need| (r, need))
        });
        let (first, second) = if fa <= fb { (fa, fb) } else { (fb, fa) };
        Ok(Collision { first, second, at, axis, iters, fix })
    }
}

/// Enumerates every digit assignment of `items` (at most [`MAX_ENUMERATED`]):
/// two with the same value and different shard digits, if any.
fn first_collision(items: &[Item]) -> Option<(Assignment, Assignment)> {
    let points: u64 = items.iter().map(|it| it.extent as u64).product();
    let shard_items: Vec<usize> = (0..items.len()).filter(|&k| !items[k].replica).collect();
    // (value, shard digits as one mixed-radix number, point index)
    let mut seen: Vec<(i128, u64, u64)> = Vec::with_capacity(points as usize);
    for p in 0..points {
        let digits = split(p, items);
        let value: i128 = items.iter().zip(&digits).map(|(it, &d)| d as i128 * it.stride as i128).sum();
        let key = shard_items.iter().fold(0u64, |acc, &k| acc * items[k].extent as u64 + digits[k] as u64);
        seen.push((value, key, p));
    }
    seen.sort_unstable();
    let group = seen.chunk_by(|a, b| a.0 == b.0).find(|g| g[0].1 != g[g.len() - 1].1)?;
    let with = |p: u64| items.iter().copied().zip(split(p, items)).collect();
    Some((with(group[0].2), with(group[group.len() - 1].2)))
}

/// Mixed-radix digits of point `p` over the items' extents (first item slowest).
fn split(mut p: u64, items: &[Item]) -> Vec<i64> {
    let mut d = vec![0i64; items.len()];
    for (k, it) in items.iter().enumerate().rev() {
        d[k] = (p % it.extent as u64) as i64;
        p /= it.extent as u64;
    }
    d
}

impl ComposeLayout {
    /// A swizzle is a bijection on `m`: the tile decides.
    pub fn injectivity(&self) -> Result<Injectivity> {
        self.swizzle.validate()?;
        self.tile.injectivity()
    }
}

impl Layout {
    pub fn injectivity(&self) -> Result<Injectivity> {
        match self {
            Layout::Tile(t) => t.injectivity(),
            Layout::Compose(c) => c.injectivity(),
        }
    }
}
