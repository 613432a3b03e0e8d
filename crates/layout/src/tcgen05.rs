//! Register layouts of warpgroup fragments (§2.13): `wg_local_layout` (one row
//! per thread) and `tcgen05_atom_layout`, the per-(lane, register) placement of a
//! `tcgen05.ld/st.<shape>.x<rep>` fragment, as plain layouts.
//!
//! `tcgen05_atom_layout(shape, (rows, cols), bits)` follows the reference
//! iter for iter (raw, not canonicalized). With `e = 32 / bits` elements per
//! 32-bit register and `N` = the repetition count (`.x<N>`, inferred from `cols`):
//!
//! | shape | rows 64: row iters | column iters |
//! |---|---|---|
//! | `32x32b` | (rows 128 only) `rows:1@tid_in_wg` | `cols:1` |
//! | `16x64b` | `4:1@wid_in_wg, 2:1@laneid, 8:4@laneid` | `N:e, 2:2@laneid` |
//! | `16x128b` | `4:1@wid_in_wg, 2:e, 8:4@laneid` | `N:2e, 4:1@laneid` |
//! | `16x256b` | `4:1@wid_in_wg, 2:2e, 8:4@laneid` | `N:4e, 4:1@laneid, 2:e` |
//!
//! plus a last `e:1` column iter for 16-bit types (two elements per register).
//! Rows 128 of a `16x*` shape insert `2:R` (R = the 64-row register count)
//! after the `wid_in_wg` iter: the second 16-lane half-slab. `32x32b` with 64
//! rows is the fp32 "datapath B" image `S[(64, 2, N/2):(1@tid_in_wg, 64@tid_in_wg, 1)]`.
//! `N` must be a power of two allowed by the PTX ISA for the shape (up to 128
//! for `32x32b`/`16x64b`, 64 for `16x128b`, 32 for `16x256b`).

use crate::axis::Axis;
use crate::error::{LayoutError, Result};
use crate::tile::{Iter, TileLayout};
use std::collections::BTreeMap;

/// `S[(rows, cols):(1@tid_in_wg, 1)]`: thread `t` of a warpgroup owns row `t`, its columns in registers.
pub fn wg_local_layout(cols: i64, rows: i64) -> Result<TileLayout> {
    TileLayout::from_iters(vec![Iter::new(rows, 1, Axis::TidInWg), Iter::m(cols, 1)], vec![], BTreeMap::new())
}

/// The `.shape` qualifier of a `tcgen05.ld/st` atom.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Tcgen05Shape {
    S32x32b,
    S16x64b,
    S16x128b,
    S16x256b,
}

impl Tcgen05Shape {
    pub const ALL: [Tcgen05Shape; 4] =
        [Tcgen05Shape::S32x32b, Tcgen05Shape::S16x64b, Tcgen05Shape::S16x128b, Tcgen05Shape::S16x256b];

    pub fn name(self) -> &'static str {
        match self {
            Tcgen05Shape::S32x32b => "32x32b",
            Tcgen05Shape::S16x64b => "16x64b",
            Tcgen05Shape::S16x128b => "16x128b",
            Tcgen05Shape::S16x256b => "16x256b",
        }
    }

    pub fn from_name(s: &str) -> Option<Tcgen05Shape> {
        Tcgen05Shape::ALL.into_iter().find(|x| x.name() == s)
    }

    /// Largest `.x<N>` the PTX ISA allows (every power of two up to it).
    fn max_rep(self) -> i64 {
        match self {
            Tcgen05Shape::S32x32b | Tcgen05Shape::S16x64b => 128,
            Tcgen05Shape::S16x128b => 64,
            Tcgen05Shape::S16x256b => 32,
        }
    }

    /// 32-bit columns one repetition covers per warp.
    fn col_factor(self) -> i64 {
        match self {
            Tcgen05Shape::S32x32b => 1,
            Tcgen05Shape::S16x64b => 2,
            Tcgen05Shape::S16x128b => 4,
            Tcgen05Shape::S16x256b => 8,
        }
    }
}

fn bad(arg: &'static str, reason: String) -> LayoutError {
    LayoutError::BadArgument { op: "tcgen05_atom_layout", arg, reason }
}

/// The register layout of a `tcgen05.ld/st.<shape>.x<N>` fragment of
/// `(rows, cols)` elements of `elem_bits` (16 or 32) bits, per warpgroup.
pub fn tcgen05_atom_layout(shape: Tcgen05Shape, rows: i64, cols: i64, elem_bits: u32) -> Result<TileLayout> {
    if elem_bits != 16 && elem_bits != 32 {
        return Err(bad("dtype", format!("has {elem_bits} bits; tcgen05 atoms hold 32-bit or 16-bit elements")));
    }
    if rows != 64 && rows != 128 {
        return Err(bad("tensor_shape", format!("has {rows} rows; {} fragments have 64 or 128 rows", shape.name())));
    }
    let rep_ok = |n: i64| n >= 1 && n <= shape.max_rep() && (n as u64).is_power_of_two();
    let allowed = format!("1, 2, 4, ..., {}", shape.max_rep());
    if shape == Tcgen05Shape::S32x32b && rows == 64 {
        // Datapath B: the logical (64, N) tile is the (128, N/2) register file.
        if elem_bits != 32 {
            return Err(bad("dtype", "must be 32-bit for 32x32b with 64 rows (the datapath B image)".into()));
        }
        let half = cols / 2;
        if cols % 2 != 0 || !rep_ok(half) {
            return Err(bad(
                "tensor_shape",
                format!("has {cols} columns; 32x32b with 64 rows needs 2·N for N in {allowed}"),
            ));
        }
        let shard = vec![Iter::new(64, 1, Axis::TidInWg), Iter::new(2, 64, Axis::TidInWg), Iter::m(half, 1)];
        return TileLayout::from_iters(shard, vec![], BTreeMap::new());
    }
    let e = i64::from(32 / elem_bits);
    let per_rep = shape.col_factor() * e;
    let n = cols / per_rep;
    if cols % per_rep != 0 || !rep_ok(n) {
        return Err(bad(
            "tensor_shape",
            format!("has {cols} columns; {} needs N·{per_rep} columns for N in {allowed}", shape.name()),
        ));
    }
    let (lane, wid) = (Axis::LaneId, Axis::WidInWg);
    // Strides on `m` in 32-bit registers (scaled by `e` below); rows then columns, outermost first.
    let (row, col, regs): (Vec<Iter>, Vec<Iter>, i64) = match shape {
        Tcgen05Shape::S32x32b => {
            let shard = vec![Iter::new(rows, 1, Axis::TidInWg), Iter::m(cols, 1)];
            return TileLayout::from_iters(shard, vec![], BTreeMap::new());
        }
        Tcgen05Shape::S16x64b => (
            vec![Iter::new(4, 1, wid), Iter::new(2, 1, lane), Iter::new(8, 4, lane)],
            vec![Iter::m(n, 1), Iter::new(2, 2, lane)],
            n,
        ),
        Tcgen05Shape::S16x128b => (
            vec![Iter::new(4, 1, wid), Iter::m(2, 1), Iter::new(8, 4, lane)],
            vec![Iter::m(n, 2), Iter::new(4, 1, lane)],
            2 * n,
        ),
        Tcgen05Shape::S16x256b => (
            vec![Iter::new(4, 1, wid), Iter::m(2, 2), Iter::new(8, 4, lane)],
            vec![Iter::m(n, 4), Iter::new(4, 1, lane), Iter::m(2, 1)],
            4 * n,
        ),
    };
    let mut shard: Vec<Iter> = Vec::with_capacity(row.len() + col.len() + 2);
    for it in row {
        shard.push(it);
        if it.axis == wid && rows == 128 {
            // The second 16-lane half-slab: registers [regs, 2·regs).
            shard.push(Iter::m(2, regs));
        }
    }
    shard.extend(col);
    for it in shard.iter_mut().filter(|it| it.axis == Axis::M) {
        it.stride *= e;
    }
    if e > 1 {
        shard.push(Iter::m(e, 1));
    }
    TileLayout::from_iters(shard, vec![], BTreeMap::new())
}
