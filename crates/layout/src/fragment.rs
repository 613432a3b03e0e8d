//! Register layouts of tensor-core fragments, named (docs/tile-primitives.md §3.9, §9): the
//! layouts a kernel otherwise spells out from the PTX fragment figures.
//!
//! | helper | tile | what it is |
//! |---|---|---|
//! | `mma_acc_layout(m, n)` | m × n | `mma.sync.m16n8k*` accumulator (C, D: 32-bit) of a warp |
//! | `mma_a_layout(m, k)` | m × k | `m16n8k16` A operand, 16-bit, row-major |
//! | `mma_b_layout(k, n)` | k × n | `m16n8k16` B operand, 16-bit ("col" fragment) |
//! | `mma_row_layout(m)` | m × 1 | a row statistic of the accumulator, replicated over each quad |
//! | `wgmma_acc_layout(n)` | 64 × n | `wgmma.m64nNk*` accumulator of a warpgroup |
//! | `wgmma_row_layout()` | 64 × 1 | a row statistic of it, replicated over each quad |
//!
//! Lane `l = 4g + t` of an accumulator tile holds rows `g` and `g + 8`, columns `2t`, `2t + 1`
//! of each 16 × 8 atom; A holds the same rows and columns `2t, 2t + 1, 2t + 8, 2t + 9` of each
//! 16 × 16 atom; B columns `g` and rows `2t, 2t + 1, 2t + 8, 2t + 9` of each 16 × 8 atom. The
//! registers run atom by atom along the tile's rows, then its columns, each atom's in the PTX
//! order — any order is accepted by `gemm` (it reads homes element by element); this one keeps
//! every 32-bit pair in consecutive registers. A row statistic's registers follow the
//! accumulator's rows (`2·mi + h` for row `16·mi + 8·h + g`), the quad's four lanes holding
//! copies: what a row reduction of the accumulator leaves, and what elementwise ops broadcast.

use crate::axis::Axis;
use crate::error::{LayoutError, Result};
use crate::tile::{Iter, TileLayout};
use std::collections::BTreeMap;

/// Which fragment a helper names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fragment {
    MmaAcc,
    MmaA,
    MmaB,
    MmaRow,
    WgmmaAcc,
    WgmmaRow,
}

impl Fragment {
    pub const ALL: [Fragment; 6] =
        [Fragment::MmaAcc, Fragment::MmaA, Fragment::MmaB, Fragment::MmaRow, Fragment::WgmmaAcc, Fragment::WgmmaRow];

    /// The helper's name.
    pub fn name(self) -> &'static str {
        match self {
            Fragment::MmaAcc => "mma_acc_layout",
            Fragment::MmaA => "mma_a_layout",
            Fragment::MmaB => "mma_b_layout",
            Fragment::MmaRow => "mma_row_layout",
            Fragment::WgmmaAcc => "wgmma_acc_layout",
            Fragment::WgmmaRow => "wgmma_row_layout",
        }
    }

    pub fn from_name(s: &str) -> Option<Fragment> {
        Fragment::ALL.into_iter().find(|f| f.name() == s)
    }

    /// The helper's parameters, in order.
    pub fn params(self) -> &'static [&'static str] {
        match self {
            Fragment::MmaAcc => &["m", "n"],
            Fragment::MmaA => &["m", "k"],
            Fragment::MmaB => &["k", "n"],
            Fragment::MmaRow => &["m"],
            Fragment::WgmmaAcc => &["n"],
            Fragment::WgmmaRow => &[],
        }
    }
}

/// The layout of fragment `f` for `dims` (its parameters in order).
pub fn fragment_layout(f: Fragment, dims: &[i64]) -> Result<TileLayout> {
    if dims.len() != f.params().len() {
        return Err(LayoutError::RankMismatch { what: "fragment sizes", expected: f.params().len(), got: dims.len() });
    }
    let need = |arg: &'static str, v: i64, unit: i64| -> Result<i64> {
        if v <= 0 || v % unit != 0 {
            let reason = format!("is {v}, not a positive multiple of {unit} (the fragment's atom)");
            return Err(LayoutError::BadArgument { op: f.name(), arg, reason });
        }
        Ok(v / unit)
    };
    let lane = |stride| (Axis::LaneId, stride);
    // (extent, (axis, stride)) per shard iter, outermost first; the replica.
    type Iters = Vec<(i64, (Axis, i64))>;
    let (shard, replica): (Iters, Vec<Iter>) = match f {
        // rows (mi, h, g), columns (ni, t, pair); registers ((mi·N + ni)·2 + h)·2 + pair.
        Fragment::MmaAcc => {
            let (mi, ni) = (need("m", dims[0], 16)?, need("n", dims[1], 8)?);
            let m = |s| (Axis::M, s);
            (vec![(mi, m(ni * 4)), (2, m(2)), (8, lane(4)), (ni, m(4)), (4, lane(1)), (2, m(1))], vec![])
        }
        // rows (mi, h, g), columns (ki, kh, t, pair); registers (mi·K + ki)·8 + kh·4 + h·2 + pair.
        Fragment::MmaA => {
            let (mi, ki) = (need("m", dims[0], 16)?, need("k", dims[1], 16)?);
            let m = |s| (Axis::M, s);
            (vec![(mi, m(ki * 8)), (2, m(2)), (8, lane(4)), (ki, m(8)), (2, m(4)), (4, lane(1)), (2, m(1))], vec![])
        }
        // rows (ki, kh, t, pair), columns (ni, g); registers (ki·N + ni)·4 + kh·2 + pair.
        Fragment::MmaB => {
            let (ki, ni) = (need("k", dims[0], 16)?, need("n", dims[1], 8)?);
            let m = |s| (Axis::M, s);
            (vec![(ki, m(ni * 4)), (2, m(2)), (4, lane(1)), (2, m(1)), (ni, m(4)), (8, lane(4))], vec![])
        }
        Fragment::MmaRow => {
            let mi = need("m", dims[0], 16)?;
            let m = |s| (Axis::M, s);
            (vec![(mi, m(2)), (2, m(1)), (8, lane(4)), (1, m(1))], vec![Iter::new(4, 1, Axis::LaneId)])
        }
        // The warp of the warpgroup is the atom row.
        Fragment::WgmmaAcc => {
            let ni = need("n", dims[0], 8)?;
            let m = |s| (Axis::M, s);
            (vec![(4, (Axis::WidInWg, 1)), (2, m(2)), (8, lane(4)), (ni, m(4)), (4, lane(1)), (2, m(1))], vec![])
        }
        Fragment::WgmmaRow => {
            let m = |s| (Axis::M, s);
            (vec![(4, (Axis::WidInWg, 1)), (2, m(1)), (8, lane(4)), (1, m(1))], vec![Iter::new(4, 1, Axis::LaneId)])
        }
    };
    let shard = shard.into_iter().map(|(e, (axis, s))| Iter::new(e, s, axis)).collect();
    TileLayout::from_iters(shard, replica, BTreeMap::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element's (lane, register) against the PTX fragment figures.
    #[test]
    fn homes_are_the_ptx_fragments() {
        let acc = fragment_layout(Fragment::MmaAcc, &[32, 16]).unwrap();
        assert_eq!(acc.to_string(), "S[(2, 2, 8, 2, 4, 2):(8, 2, 4@laneid, 4, 1@laneid, 1)]");
        let a = fragment_layout(Fragment::MmaA, &[16, 32]).unwrap();
        assert_eq!(a.to_string(), "S[(1, 2, 8, 2, 2, 4, 2):(16, 2, 4@laneid, 8, 4, 1@laneid, 1)]");
        let b = fragment_layout(Fragment::MmaB, &[16, 8]).unwrap();
        assert_eq!(b.to_string(), "S[(1, 2, 4, 2, 1, 8):(4, 2, 1@laneid, 1, 4, 4@laneid)]");
        let row = fragment_layout(Fragment::MmaRow, &[16]).unwrap();
        assert_eq!(row.to_string(), "S[(1, 2, 8, 1):(2, 1, 4@laneid, 1)] + R[4:1@laneid]");
        let wg = fragment_layout(Fragment::WgmmaAcc, &[256]).unwrap();
        assert_eq!(wg.to_string(), "S[(4, 2, 8, 32, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]");
        assert!(fragment_layout(Fragment::MmaAcc, &[24, 8]).unwrap_err().to_string().contains("multiple of 16"));
        assert!(fragment_layout(Fragment::WgmmaRow, &[64]).is_err());
    }
}
