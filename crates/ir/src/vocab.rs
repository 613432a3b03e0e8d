//! The hardware's names that both levels of the IR carry: a script names a
//! rounding direction (a tile call's `rounding_mode="rz"` config) or a shuffle
//! mode (`T.cuda.shfl_xor(v, 1)`) in HIR, and the LIR instruction states the
//! same one. Defined here, below `hir`, `op` and `lir`, so that HIR and the
//! tile-op table never import the LIR (ARCHITECTURE.md; `tests/architecture.rs`).

use serde::Serialize;
use std::fmt;

/// An IEEE 754 rounding direction, by its PTX name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum RoundMode {
    /// To nearest, ties to even.
    Rn,
    /// Toward zero.
    Rz,
    /// Toward −∞.
    Rm,
    /// Toward +∞.
    Rp,
}

impl RoundMode {
    pub const ALL: [RoundMode; 4] = [RoundMode::Rn, RoundMode::Rz, RoundMode::Rm, RoundMode::Rp];

    /// The PTX modifier (`rn`, `rz`, `rm`, `rp`).
    pub fn name(self) -> &'static str {
        match self {
            RoundMode::Rn => "rn",
            RoundMode::Rz => "rz",
            RoundMode::Rm => "rm",
            RoundMode::Rp => "rp",
        }
    }

    pub fn from_name(s: &str) -> Option<RoundMode> {
        RoundMode::ALL.into_iter().find(|m| m.name() == s)
    }
}

impl fmt::Display for RoundMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a lane picks its source lane (`shfl.sync.{bfly,down,up,idx}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum ShuffleMode {
    /// `lane ^ delta` (`__shfl_xor_sync`): the butterfly of tree reductions.
    Bfly,
    /// `lane + delta` (`__shfl_down_sync`).
    Down,
    /// `lane - delta` (`__shfl_up_sync`).
    Up,
    /// lane `src` of the segment (`__shfl_sync`).
    Idx,
}

impl ShuffleMode {
    /// The PTX mode name.
    pub fn name(self) -> &'static str {
        match self {
            ShuffleMode::Bfly => "bfly",
            ShuffleMode::Down => "down",
            ShuffleMode::Up => "up",
            ShuffleMode::Idx => "idx",
        }
    }

    /// The lane `lane` reads (PTX `shfl.sync`, `docs/lir.md` §2.5): `b` is the
    /// operand's low 5 bits; lanes form aligned segments of `width`; a source
    /// past the end of the segment (down, bfly) or before its start (up) reads
    /// the lane's own value; `idx` wraps inside the segment; bfly may reach an
    /// *earlier* segment.
    pub fn source_lane(self, width: u32, lane: u32, operand: i64) -> u32 {
        let b = (operand & 31) as u32;
        let seg = 32 - width; // the segment-number bits of a lane id
        let (min, max) = (lane & seg, (lane & seg) | (31 & !seg));
        let (j, ok) = match self {
            ShuffleMode::Up => (lane.wrapping_sub(b), lane >= min + b),
            ShuffleMode::Down => (lane + b, lane + b <= max),
            ShuffleMode::Bfly => (lane ^ b, (lane ^ b) <= max),
            ShuffleMode::Idx => (min | (b & !seg), true),
        };
        if ok {
            j
        } else {
            lane
        }
    }
}
