//! The forward map: logical index → coordinates on named axes (§1.4, §2.2).
//!
//! `apply_shard` takes one digit per shard iter, `apply_linear` a flat index,
//! `apply` a multi-dimensional coordinate in a shape; all three return the
//! `r = 0` representative (replicas not applied). `apply_set` returns every
//! coordinate an element lives at. Unlike the reference, every input is
//! bounds-checked (pitfall 14): an out-of-range index is an error, not an
//! extrapolation along the outermost iter.

use crate::error::{self, check_shape, LayoutError, Result, MAX_REPLICAS};
use crate::tile::TileLayout;
use std::collections::BTreeMap;

/// A point in the layout's codomain: a value per named axis.
pub type Coord = std::collections::BTreeMap<crate::axis::Axis, i64>;

/// Splits `x` into mixed-radix digits over `extents` (outermost first).
pub fn split_coord(mut x: i64, extents: &[i64]) -> Vec<i64> {
    let mut out = vec![0; extents.len()];
    for (d, &e) in extents.iter().enumerate().rev() {
        if d == 0 {
            out[0] = x;
        } else {
            out[d] = x.rem_euclid(e);
            x = x.div_euclid(e);
        }
    }
    out
}

/// Row-major flat index of `coord` in `shape` (bounds-checked).
pub fn flatten_coord(coord: &[i64], shape: &[i64]) -> Result<i64> {
    if coord.len() != shape.len() {
        return Err(LayoutError::RankMismatch {
            what: "coordinate rank vs shape rank",
            expected: shape.len(),
            got: coord.len(),
        });
    }
    check_shape(shape)?;
    let mut acc = 0i64;
    for (dim, (&c, &e)) in coord.iter().zip(shape).enumerate() {
        if !(0..e).contains(&c) {
            return Err(LayoutError::CoordOutOfRange { dim, value: c, extent: e });
        }
        acc = error::add(error::mul(acc, e, "flat index")?, c, "flat index")?;
    }
    Ok(acc)
}

impl TileLayout {
    /// `Σ c_k·s_k` per axis plus the offsets; one digit per shard iter, each in `[0, e_k)`.
    pub fn apply_shard(&self, c: &[i64]) -> Result<Coord> {
        self.validate()?;
        if c.len() != self.shard.len() {
            return Err(LayoutError::RankMismatch {
                what: "shard coordinate",
                expected: self.shard.len(),
                got: c.len(),
            });
        }
        for (dim, (it, &digit)) in self.shard.iter().zip(c).enumerate() {
            if !(0..it.extent).contains(&digit) {
                return Err(LayoutError::CoordOutOfRange { dim, value: digit, extent: it.extent });
            }
        }
        self.point(c)
    }

    /// The map at flat logical index `x ∈ [0, size)`.
    pub fn apply_linear(&self, x: i64) -> Result<Coord> {
        let size = self.size(None)?;
        if !(0..size).contains(&x) {
            return Err(LayoutError::CoordOutOfRange { dim: 0, value: x, extent: size });
        }
        self.linear_point(x)
    }

    /// The map at `coord` of a logical `shape` whose element count equals the
    /// layout size. (Equal to the reference's group-first apply for in-range coordinates.)
    pub fn apply(&self, coord: &[i64], shape: &[i64]) -> Result<Coord> {
        let x = flatten_coord(coord, shape)?;
        self.check_admits(shape)?;
        self.linear_point(x)
    }

    /// [`TileLayout::apply_linear`] for a validated layout and an in-range `x`.
    fn linear_point(&self, mut x: i64) -> Result<Coord> {
        let mut digits = [0i64; 16];
        if self.shard.len() > digits.len() {
            return self.point(&split_coord(x, &self.extents()));
        }
        for (d, it) in self.shard.iter().enumerate().rev() {
            if d == 0 {
                digits[0] = x;
            } else {
                digits[d] = x % it.extent;
                x /= it.extent;
            }
        }
        self.point(&digits[..self.shard.len()])
    }

    /// `Σ c_k·s_k + offset` for in-range digits of a validated layout.
    fn point(&self, c: &[i64]) -> Result<Coord> {
        let mut out = Coord::new();
        for (it, &digit) in self.shard.iter().zip(c) {
            let slot = out.entry(it.axis).or_insert(0);
            *slot = error::add(*slot, error::mul(digit, it.stride, "address")?, "address")?;
        }
        for (&axis, &v) in &self.offset {
            let slot = out.entry(axis).or_insert(0);
            *slot = error::add(*slot, v, "address")?;
        }
        Ok(out)
    }

    /// Every coordinate the element at `coord` lives at: the base point plus
    /// each replica combination (first replica iter slowest). Replica axes appear
    /// in every entry (0 in the representative).
    pub fn apply_set(&self, coord: &[i64], shape: &[i64]) -> Result<Vec<Coord>> {
        let base = self.apply(coord, shape)?;
        self.replicate(base)
    }

    /// The first `limit` coordinates of [`TileLayout::apply_set`], in the same
    /// order, and how many it has in all. Works for any replica count: only
    /// the returned coordinates are built (a table that shows a few replicas
    /// per cell must not enumerate 4096 of them).
    pub fn apply_first(&self, coord: &[i64], shape: &[i64], limit: usize) -> Result<(Vec<Coord>, i64)> {
        let base = self.apply(coord, shape)?;
        self.replicate_first(base, limit)
    }

    pub(crate) fn replicate_first(&self, base: Coord, limit: usize) -> Result<(Vec<Coord>, i64)> {
        let count = error::product(self.replica.iter().map(|r| r.extent), "replica count")?;
        let extents: Vec<i64> = self.replica.iter().map(|r| r.extent).collect();
        let n = count.min(i64::try_from(limit).unwrap_or(i64::MAX));
        let mut out = Vec::with_capacity(usize::try_from(n).unwrap_or(0));
        for i in 0..n {
            let mut p = base.clone();
            for (r, k) in self.replica.iter().zip(split_coord(i, &extents)) {
                let slot = p.entry(r.axis).or_insert(0);
                *slot = error::add(*slot, error::mul(k, r.stride, "replica address")?, "replica address")?;
            }
            out.push(p);
        }
        Ok((out, count))
    }

    /// Expands `base` by every replica combination.
    pub(crate) fn replicate(&self, base: Coord) -> Result<Vec<Coord>> {
        let count = error::product(self.replica.iter().map(|r| r.extent), "replica count")?;
        if count > MAX_REPLICAS {
            return Err(LayoutError::TooManyReplicas { count });
        }
        let mut out = vec![base];
        for r in &self.replica {
            let mut next = Vec::with_capacity(out.len() * r.extent as usize);
            for point in &out {
                for k in 0..r.extent {
                    let mut p: Coord = point.clone();
                    let slot = p.entry(r.axis).or_insert(0);
                    *slot = error::add(*slot, error::mul(k, r.stride, "replica address")?, "replica address")?;
                    next.push(p);
                }
            }
            out = next;
        }
        Ok(out)
    }

    /// The layout can be indexed by `shape`: its element count equals the layout size.
    pub fn check_admits(&self, shape: &[i64]) -> Result<()> {
        let total = check_shape(shape)?;
        let size = self.size(None)?;
        if size != total {
            return Err(LayoutError::ShapeMismatch {
                shape: shape.to_vec(),
                extents: self.extents(),
                detail: format!("the layout holds {size} elements but the shape {total}"),
            });
        }
        Ok(())
    }
}

/// Drops zero entries: two coordinates that differ only by explicit zeros are the same point.
pub fn normalize(coord: &Coord) -> Coord {
    coord.iter().filter(|(_, v)| **v != 0).map(|(a, v)| (*a, *v)).collect::<BTreeMap<_, _>>()
}
