//! The canonical shared-memory tiles of ldmatrix / wgmma / TMA (§2.12): the
//! swizzle atom of each [`SwizzleMode`], its logical shape, and the layout of a
//! whole tile built from atoms.
//!
//! An atom is 8 rows of `16·2^mode` bytes (mode 0..3 = none / 32B / 64B /
//! 128B): `ComposeLayout(p, mode, 3, S[2^(p+mode+3)])` with `2^p` elements per
//! 16-byte chunk. `mma_shared_layout` tiles the atom down the rows first, then
//! across column blocks (the order TMA and the matrix descriptors walk), and
//! canonicalizes. Mode 0 is the no-swizzle form: 16-byte column chunks, each
//! `m` rows tall, stored one after the other.
//!
//! Element types are given by their width in bits (the crate knows no dtypes).
//! Differences from the reference: `mma_atom_shape` of mode 0 is the 16-byte
//! core matrix `[8, 128/bits]` (the reference has no entry and raises), and
//! shapes that are not whole multiples of the atom are errors (the reference's
//! `tile_to` floors them into a layout of the wrong size).

use crate::canon::Fusion;
use crate::error::{check_shape, LayoutError, Result};
use crate::tile::{ComposeLayout, Iter, Layout, Swizzle, TileLayout};

/// Rows of every atom (the 8 rows of one ldmatrix / core matrix).
const ATOM_ROWS: i64 = 8;

/// Distance of the XOR-ed bits: 8 rows of 16-byte chunks.
const ATOM_LEN: u32 = 3;

/// The shared-memory swizzle of TMA and the matrix descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SwizzleMode {
    /// No swizzle (16-byte rows of 8×16 B core matrices).
    None = 0,
    /// 32-byte swizzle.
    B32 = 1,
    /// 64-byte swizzle.
    B64 = 2,
    /// 128-byte swizzle.
    B128 = 3,
}

impl SwizzleMode {
    pub const ALL: [SwizzleMode; 4] = [SwizzleMode::None, SwizzleMode::B32, SwizzleMode::B64, SwizzleMode::B128];

    /// Mode `0..=3` (the reference's `SwizzleMode` values).
    pub fn from_index(i: i64) -> Result<SwizzleMode> {
        usize::try_from(i).ok().and_then(|i| SwizzleMode::ALL.get(i).copied()).ok_or_else(|| LayoutError::BadArgument {
            op: "swizzle mode",
            arg: "swizzle_mode",
            reason: format!("is {i}; use 0 (none), 1 (32B), 2 (64B) or 3 (128B)"),
        })
    }

    /// `swizzle_len` of the atom: 0..=3.
    pub fn index(self) -> u32 {
        self as u32
    }

    /// Bytes per atom row: 16, 32, 64, 128.
    pub fn row_bytes(self) -> i64 {
        16 << self.index()
    }
}

/// `log2(128 / bits)`: elements per 16-byte chunk, for a power-of-two width ≤ 128 bits.
fn per_element(op: &'static str, bits: u32) -> Result<u32> {
    if !(1..=128).contains(&bits) || !bits.is_power_of_two() {
        return Err(LayoutError::BadArgument {
            op,
            arg: "dtype",
            reason: format!("has {bits} bits; the atoms hold elements of 1, 2, 4, ..., 128 bits"),
        });
    }
    Ok((128 / bits).trailing_zeros())
}

/// The logical shape of one atom: `[8, row_bytes·8 / bits]`, padded with
/// leading 1s to `rank` dimensions (`rank < 2` gives the 2-D shape).
pub fn mma_atom_shape(elem_bits: u32, mode: SwizzleMode, rank: usize) -> Result<Vec<i64>> {
    let p = per_element("mma_atom_shape", elem_bits)?;
    let cols = (1i64 << p) << mode.index();
    let mut shape = vec![1; rank.saturating_sub(2)];
    shape.extend([ATOM_ROWS, cols]);
    Ok(shape)
}

/// One atom: `ComposeLayout(p, mode, 3, S[2^(p+mode+3)])`, a bare swizzle over one period.
pub fn mma_atom_layout(elem_bits: u32, mode: SwizzleMode) -> Result<ComposeLayout> {
    let p = per_element("mma_atom_layout", elem_bits)?;
    let swizzle = Swizzle::new(p, mode.index(), ATOM_LEN, true)?;
    let tile = TileLayout::from_shard(vec![Iter::m(swizzle.period(), 1)]);
    ComposeLayout::new(swizzle, tile)
}

/// The canonical shared layout of a tile of `shape` (rank ≥ 2; the last two
/// dimensions are rows and columns, leading ones stack whole tiles).
/// Swizzled modes: the atom tiled down the rows to `shape[-2]`, then across
/// the column blocks and leading dimensions, canonicalized (a ComposeLayout).
/// Mode 0: `S[(*lead, m, k/e, e):(*lead strides, e, m·e, 1)]` with `e` elements
/// per 16 bytes (a TileLayout; plain row-major when `k` is not a multiple of `e`).
pub fn mma_shared_layout(elem_bits: u32, mode: SwizzleMode, shape: &[i64]) -> Result<Layout> {
    let bad = |reason: String| LayoutError::BadArgument { op: "mma_shared_layout", arg: "shape", reason };
    let p = per_element("mma_shared_layout", elem_bits)?;
    let rank = shape.len();
    if rank < 2 {
        return Err(bad(format!("has {rank} dimension(s); give at least (rows, columns)")));
    }
    check_shape(shape)?;
    let (m, k) = (shape[rank - 2], shape[rank - 1]);
    if mode == SwizzleMode::None {
        return Ok(Layout::Tile(unswizzled(shape, 1 << p)?.canonicalize(Fusion::None)?));
    }
    let atom_shape = mma_atom_shape(elem_bits, mode, rank)?;
    let cols = atom_shape[rank - 1];
    if m % ATOM_ROWS != 0 || k % cols != 0 {
        return Err(bad(format!(
            "{shape:?} does not split into {}-byte swizzle atoms of {ATOM_ROWS} rows × {cols} elements; \
             the last two dimensions must be multiples of ({ATOM_ROWS}, {cols})",
            mode.row_bytes()
        )));
    }
    let mut column = atom_shape.clone();
    column[rank - 2] = m;
    let atom = Layout::Compose(mma_atom_layout(elem_bits, mode)?);
    let tiled = atom.tile_to(&column, &atom_shape, Fusion::None)?.tile_to(shape, &column, Fusion::None)?;
    tiled.canonicalize(Fusion::None)
}

/// Mode 0: each 16-byte column chunk (`e` elements) is `m` rows tall and the
/// chunks follow each other; leading dimensions stack whole `m × k` tiles.
fn unswizzled(shape: &[i64], e: i64) -> Result<TileLayout> {
    let rank = shape.len();
    let (m, k) = (shape[rank - 2], shape[rank - 1]);
    if k % e != 0 {
        return Ok(TileLayout::row_major(shape));
    }
    let mut stride = m * k;
    let mut shard = vec![Iter::m(1, 1); rank - 2];
    for d in (0..rank - 2).rev() {
        shard[d] = Iter::m(shape[d], stride);
        stride = stride.saturating_mul(shape[d]);
    }
    shard.extend([Iter::m(m, e), Iter::m(k / e, m * e), Iter::m(e, 1)]);
    let l = TileLayout::from_shard(shard);
    l.validate()?;
    Ok(l)
}
