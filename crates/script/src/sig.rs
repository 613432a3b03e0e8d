//! Operand signatures of the tile primitives (tile-primitives.md §2.2, §4):
//! which positions take regions, which take scalars, and their defaults.

use tirx_ir::hir::TileOp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotKind {
    Region,
    RegionOrScalar,
    Scalar,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotDefault {
    Required,
    /// Defaults to the destination region (`Tx.sqrt(R)` is in place).
    Dst,
    /// Stored as `TileArg::None`.
    Absent,
}

#[derive(Clone, Copy, Debug)]
pub struct Slot {
    /// Keyword names; the first is the canonical one.
    pub names: &'static [&'static str],
    pub kind: SlotKind,
    pub default: SlotDefault,
}

const DST: Slot = Slot { names: &["dst", "output", "out"], kind: SlotKind::Region, default: SlotDefault::Required };
const SRC_REGION: Slot = Slot { names: &["src", "input"], kind: SlotKind::Region, default: SlotDefault::Required };
const SRC_INPLACE: Slot = Slot { names: &["src", "input"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Dst };
const BIAS: Slot = Slot { names: &["bias"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Absent };
const SCALE: Slot = Slot { names: &["scale"], kind: SlotKind::Scalar, default: SlotDefault::Absent };
const VALUE: Slot = Slot { names: &["value"], kind: SlotKind::Scalar, default: SlotDefault::Required };
const LHS: Slot = Slot { names: &["lhs", "a"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Required };
const RHS: Slot = Slot { names: &["rhs", "b"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Required };
const FMA_A: Slot =
    Slot { names: &["a", "input", "src"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Required };
const FMA_SCALE: Slot = Slot { names: &["scale", "b"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Required };
const FMA_BIAS: Slot = Slot { names: &["bias", "c"], kind: SlotKind::RegionOrScalar, default: SlotDefault::Required };
const ZERO_SRC: Slot = Slot { names: &["src"], kind: SlotKind::Region, default: SlotDefault::Dst };

pub fn signature(op: TileOp) -> &'static [Slot] {
    match op {
        TileOp::Copy | TileOp::Cast => &[DST, SRC_REGION],
        TileOp::Zero => &[DST, ZERO_SRC],
        TileOp::Fill => &[DST, VALUE],
        TileOp::Reciprocal | TileOp::Silu => &[DST, SRC_INPLACE],
        TileOp::Sqrt | TileOp::Exp | TileOp::Exp2 | TileOp::Log2 => &[DST, SRC_INPLACE, BIAS, SCALE],
        TileOp::Add | TileOp::Sub | TileOp::Mul | TileOp::Fdiv | TileOp::Maximum | TileOp::Minimum => &[DST, LHS, RHS],
        TileOp::Fma => &[DST, FMA_A, FMA_SCALE, FMA_BIAS],
    }
}

/// `copy(dst, src)`, `sqrt(dst, src=dst, bias=None, scale=None)`, ...
pub fn describe(op: TileOp) -> String {
    let parts: Vec<String> = signature(op)
        .iter()
        .map(|s| match s.default {
            SlotDefault::Required => s.names[0].to_string(),
            SlotDefault::Dst => format!("{}=dst", s.names[0]),
            SlotDefault::Absent => format!("{}=None", s.names[0]),
        })
        .collect();
    format!("{}({})", op.name(), parts.join(", "))
}

/// Config keys some variant reads (tile-primitives.md §2.5).
pub const CONFIG_KEYS: [&str; 5] = ["cache", "l1_evict", "l2_evict", "prefetch_size", "rounding_mode"];
