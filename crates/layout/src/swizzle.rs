//! XOR swizzles, [`ComposeLayout`] (a swizzle over a tile's `m` address) and the
//! [`Layout`] forwards.
//!
//! `swz(m)`: with `x = m >> p`, XOR bits `[at, at+sw)` of `x` into bits
//! `[0, sw)` (`inner`) or the reverse, then `(x' << p) + m mod 2^p`. The low `p`
//! bits (a chunk) and bits from `p+at+sw` up are untouched, so the swizzle is a
//! bijection on every aligned period of `2^(p+sw+at)` elements.
//!
//! A *bare* swizzle is a ComposeLayout whose tile canonicalizes to the
//! identity on `m` (e.g. `S[(8, 64):(64, 1)]`); it stands for "this swizzle over
//! the whole buffer", so shape-taking operations use the identity tile over
//! the buffer shape. We test triviality on the canonical tile (Python's
//! `is_swizzle`), not the raw tile (the C++ `Slice`), per pitfall 19. Swizzles
//! pass other axes through untouched, generalizing pitfall 20.

use crate::apply::Coord;
use crate::axis::{Axis, ExecScope};
use crate::canon::Fusion;
use crate::error::{LayoutError, Result};
use crate::tile::{ComposeLayout, Layout, Swizzle, TileLayout};

/// Largest `p + sw + at`: keeps every shift and period inside `i64`.
const MAX_SWIZZLE_BITS: u32 = 40;

impl Swizzle {
    /// `per_element` = log2 of the chunk, `swizzle_len` bits XOR-ed, `atom_len` = their distance; requires `at >= sw`.
    pub fn new(per_element: u32, swizzle_len: u32, atom_len: u32, inner: bool) -> Result<Swizzle> {
        let s = Swizzle { per_element, swizzle_len, atom_len, inner };
        s.validate()?;
        Ok(s)
    }

    pub fn validate(&self) -> Result<()> {
        let (p, sw, at) = (self.per_element, self.swizzle_len, self.atom_len);
        if at < sw {
            return Err(LayoutError::BadSwizzle {
                reason: format!("atom_len {at} must be >= swizzle_len {sw} (the XOR-ed bit ranges would overlap)"),
            });
        }
        if p.saturating_add(sw).saturating_add(at) > MAX_SWIZZLE_BITS {
            return Err(LayoutError::BadSwizzle {
                reason: format!(
                    "per_element + swizzle_len + atom_len = {} exceeds {MAX_SWIZZLE_BITS}",
                    p as u64 + sw as u64 + at as u64
                ),
            });
        }
        Ok(())
    }

    /// Elements per untouched chunk, `2^p`.
    pub fn chunk(&self) -> i64 {
        pow2(self.per_element)
    }

    /// Elements per swizzle period, `2^(p+sw+at)`.
    pub fn period(&self) -> i64 {
        pow2(self.per_element.saturating_add(self.swizzle_len).saturating_add(self.atom_len))
    }

    /// `swz(addr)`; negative addresses use floor semantics (the period structure holds).
    /// Parameters that bypassed [`Swizzle::new`] never panic (shifts wrap).
    pub fn apply(&self, addr: i64) -> i64 {
        let p = self.per_element;
        let x = addr.wrapping_shr(p);
        let low = addr.wrapping_sub(x.wrapping_shl(p));
        let mask = pow2(self.swizzle_len).wrapping_sub(1);
        let swizzled = if self.inner {
            x ^ ((x.wrapping_shr(self.atom_len)) & mask)
        } else {
            x ^ ((x & mask).wrapping_shl(self.atom_len))
        };
        swizzled.wrapping_shl(p).wrapping_add(low)
    }

    fn on_coord(&self, mut c: Coord) -> Coord {
        if let Some(m) = c.get_mut(&Axis::M) {
            *m = self.apply(*m);
        }
        c
    }
}

fn pow2(k: u32) -> i64 {
    1i64.checked_shl(k).filter(|v| *v > 0).unwrap_or(i64::MAX)
}

impl ComposeLayout {
    pub fn new(swizzle: Swizzle, tile: TileLayout) -> Result<ComposeLayout> {
        swizzle.validate()?;
        tile.validate()?;
        Ok(ComposeLayout { swizzle, tile })
    }

    /// The tile is the identity on `m` once canonicalized (a bare swizzle).
    pub fn is_swizzle(&self) -> Result<bool> {
        self.tile.is_trivial(Fusion::None)
    }

    /// The tile to use over a buffer of `shape`: identity over the buffer for a bare swizzle.
    pub fn base_tile(&self, shape: &[i64]) -> Result<TileLayout> {
        if self.is_swizzle()? {
            crate::error::check_shape(shape)?;
            Ok(TileLayout::row_major(shape))
        } else {
            Ok(self.tile.clone())
        }
    }

    pub fn apply_linear(&self, x: i64) -> Result<Coord> {
        self.swizzle.validate()?;
        Ok(self.swizzle.on_coord(self.tile.apply_linear(x)?))
    }

    pub fn apply(&self, coord: &[i64], shape: &[i64]) -> Result<Coord> {
        self.swizzle.validate()?;
        Ok(self.swizzle.on_coord(self.base_tile(shape)?.apply(coord, shape)?))
    }

    pub fn apply_set(&self, coord: &[i64], shape: &[i64]) -> Result<Vec<Coord>> {
        self.swizzle.validate()?;
        let set = self.base_tile(shape)?.apply_set(coord, shape)?;
        Ok(set.into_iter().map(|c| self.swizzle.on_coord(c)).collect())
    }

    /// [`TileLayout::apply_first`] through the swizzle.
    pub fn apply_first(&self, coord: &[i64], shape: &[i64], limit: usize) -> Result<(Vec<Coord>, i64)> {
        self.swizzle.validate()?;
        let (set, count) = self.base_tile(shape)?.apply_first(coord, shape, limit)?;
        Ok((set.into_iter().map(|c| self.swizzle.on_coord(c)).collect(), count))
    }

    /// Canonicalizes the tile; the swizzle is kept.
    pub fn canonicalize(&self, fusion: Fusion) -> Result<ComposeLayout> {
        Ok(ComposeLayout { swizzle: self.swizzle, tile: self.tile.canonicalize(fusion)? })
    }

    /// The swizzle over the sliced tile: it applies to the sliced tile's full `m`
    /// (offset included), so the result addresses the same physical elements.
    pub fn slice(&self, shape: &[i64], region: &[(i64, i64)], fusion: Fusion) -> Result<ComposeLayout> {
        self.swizzle.validate()?;
        let tile = self.base_tile(shape)?.slice(shape, region, fusion)?;
        Ok(ComposeLayout { swizzle: self.swizzle, tile })
    }
}

impl Layout {
    pub fn tile(&self) -> &TileLayout {
        match self {
            Layout::Tile(t) => t,
            Layout::Compose(c) => &c.tile,
        }
    }

    pub fn swizzle(&self) -> Option<Swizzle> {
        match self {
            Layout::Tile(_) => None,
            Layout::Compose(c) => Some(c.swizzle),
        }
    }

    /// A ComposeLayout whose tile is trivial.
    pub fn is_swizzle(&self) -> Result<bool> {
        match self {
            Layout::Tile(_) => Ok(false),
            Layout::Compose(c) => c.is_swizzle(),
        }
    }

    /// A trivial TileLayout; a ComposeLayout is never trivial.
    pub fn is_trivial(&self, fusion: Fusion) -> Result<bool> {
        match self {
            Layout::Tile(t) => t.is_trivial(fusion),
            Layout::Compose(_) => Ok(false),
        }
    }

    pub fn validate(&self) -> Result<()> {
        match self {
            Layout::Tile(t) => t.validate(),
            Layout::Compose(c) => c.swizzle.validate().and_then(|_| c.tile.validate()),
        }
    }

    pub fn scope(&self) -> Result<Option<(ExecScope, ExecScope)>> {
        self.tile().scope()
    }

    pub fn size(&self, axis: Option<Axis>) -> Result<i64> {
        self.tile().size(axis)
    }

    pub fn span(&self, axis: Option<Axis>) -> Result<i64> {
        self.tile().span(axis)
    }

    pub fn has_thread_axis(&self) -> bool {
        self.tile().has_thread_axis()
    }

    pub fn canonicalize(&self, fusion: Fusion) -> Result<Layout> {
        Ok(match self {
            Layout::Tile(t) => Layout::Tile(t.canonicalize(fusion)?),
            Layout::Compose(c) => Layout::Compose(c.canonicalize(fusion)?),
        })
    }

    pub fn slice(&self, shape: &[i64], region: &[(i64, i64)], fusion: Fusion) -> Result<Layout> {
        Ok(match self {
            Layout::Tile(t) => Layout::Tile(t.slice(shape, region, fusion)?),
            Layout::Compose(c) => Layout::Compose(c.slice(shape, region, fusion)?),
        })
    }

    /// The layout can be indexed by `shape` (any shape of a bare swizzle).
    pub fn check_admits(&self, shape: &[i64]) -> Result<()> {
        match self {
            Layout::Tile(t) => t.check_admits(shape),
            Layout::Compose(c) => c.base_tile(shape)?.check_admits(shape),
        }
    }

    pub fn apply_linear(&self, x: i64) -> Result<Coord> {
        match self {
            Layout::Tile(t) => t.apply_linear(x),
            Layout::Compose(c) => c.apply_linear(x),
        }
    }

    pub fn apply(&self, coord: &[i64], shape: &[i64]) -> Result<Coord> {
        match self {
            Layout::Tile(t) => t.apply(coord, shape),
            Layout::Compose(c) => c.apply(coord, shape),
        }
    }

    pub fn apply_set(&self, coord: &[i64], shape: &[i64]) -> Result<Vec<Coord>> {
        match self {
            Layout::Tile(t) => t.apply_set(coord, shape),
            Layout::Compose(c) => c.apply_set(coord, shape),
        }
    }

    /// The first `limit` coordinates of [`Layout::apply_set`] and how many it has in all.
    pub fn apply_first(&self, coord: &[i64], shape: &[i64], limit: usize) -> Result<(Vec<Coord>, i64)> {
        match self {
            Layout::Tile(t) => t.apply_first(coord, shape, limit),
            Layout::Compose(c) => c.apply_first(coord, shape, limit),
        }
    }

    /// The per-thread storage view (thread axes dropped); a swizzle is kept.
    pub fn storage(&self) -> Layout {
        match self {
            Layout::Tile(t) => Layout::Tile(t.storage()),
            Layout::Compose(c) => Layout::Compose(ComposeLayout { swizzle: c.swizzle, tile: c.tile.storage() }),
        }
    }
}
