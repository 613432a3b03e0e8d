//! The **collective** family: warp-level instructions that exchange registers
//! between the lanes of a warp without going through memory. Today: shuffles
//! (`shfl.sync` in its four modes), the building block of warp reductions; a
//! `redux.sync`/`warp_reduce` belongs here later.
//!
//! A shuffle defines a new immutable variable, like `let`: every lane in `mask`
//! supplies `value` and `lane_or_delta`, and receives the `value` of the source
//! lane its mode picks inside its `width`-lane segment (PTX `shfl.sync`
//! semantics, `docs/lir.md` §2.5). Typing: `width` a power of two in
//! 1..=32, `mask` non-zero, `value` one of [`SHUFFLE_TYPES`] and the variable's
//! type, `lane_or_delta` int32 (a constant one in 0..32, as the hardware reads
//! only its low five bits).

use super::check::{Check, Checker};
use super::instr::Instr;
use super::print::Printer;
use super::{LExpr, LVarId};
use crate::dtype::DType;
use serde::Serialize;

/// The element types `__shfl_*_sync` has an overload for (and that a shuffle may move).
pub const SHUFFLE_TYPES: [DType; 7] =
    [DType::I32, DType::U32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64];

pub use crate::vocab::ShuffleMode;

/// A warp-collective instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum CollectiveOp {
    /// `let var = shfl.sync.mode(value, lane_or_delta)` over the lanes of `mask`.
    Shuffle {
        /// Declared here, immutable afterwards (like `Let`).
        var: LVarId,
        value: LExpr,
        mode: ShuffleMode,
        /// The xor mask / delta / source lane, per lane.
        lane_or_delta: LExpr,
        /// Segment size: lanes exchange only within aligned groups of `width`.
        width: u32,
        /// The lanes that execute the instruction together (bit i = lane i).
        mask: u32,
    },
}

impl CollectiveOp {
    /// The PTX instruction name (`shfl.sync.bfly`).
    pub fn name(&self) -> String {
        match self {
            CollectiveOp::Shuffle { mode, .. } => format!("shfl.sync.{}", mode.name()),
        }
    }

    /// The lanes that must execute it together.
    pub fn mask(&self) -> u32 {
        match self {
            CollectiveOp::Shuffle { mask, .. } => *mask,
        }
    }
}

/// `shfl.sync` exists from sm_30 on, older than anything tirx-rs targets: the
/// default target.
impl Instr for CollectiveOp {
    fn name(&self) -> String {
        CollectiveOp::name(self)
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            CollectiveOp::Shuffle { value, lane_or_delta, .. } => vec![value, lane_or_delta],
        }
    }

    /// A shuffle declares its result, like `let`.
    fn defines(&self) -> Option<LVarId> {
        match self {
            CollectiveOp::Shuffle { var, .. } => Some(*var),
        }
    }

    fn check(&self, c: &mut Checker) -> Check {
        c.collective(self)
    }

    fn print(&self, p: &Printer) -> String {
        p.collective(self)
    }
}

impl Checker<'_> {
    /// The operands; the checker declares the result once they are accepted.
    fn collective(&mut self, c: &CollectiveOp) -> Check {
        let CollectiveOp::Shuffle { var, value, mode, lane_or_delta, width, mask } = c;
        let name = c.name();
        if !width.is_power_of_two() || *width > 32 {
            return Err(format!("{name}: width {width} is not a power of two in 1..=32"));
        }
        if *mask == 0 {
            return Err(format!("{name}: the member mask is empty"));
        }
        let t = self.expr(value)?;
        if !SHUFFLE_TYPES.contains(&t) {
            return Err(format!("{name} of a {t} value; __shfl_*_sync moves int32, uint32, int64, float16, bfloat16, float32 and float64"));
        }
        let v = self.var(*var)?;
        if v.dtype != t {
            return Err(format!("`{}: {}` is defined by {name} of a {t} value", v.name, v.dtype));
        }
        self.expect(lane_or_delta, DType::I32, &format!("{name} {}", operand_name(*mode)))?;
        if let LExpr::Int(d, _) = lane_or_delta {
            if !(0..32).contains(d) {
                return Err(format!(
                    "{name}: {} {d} is outside 0..32 (the hardware reads its low 5 bits)",
                    operand_name(*mode)
                ));
            }
        }
        Ok(())
    }
}

/// What `lane_or_delta` means in `mode`.
fn operand_name(mode: ShuffleMode) -> &'static str {
    match mode {
        ShuffleMode::Bfly => "xor mask",
        ShuffleMode::Down | ShuffleMode::Up => "delta",
        ShuffleMode::Idx => "source lane",
    }
}

impl Printer<'_> {
    /// `let y: float32 = shfl.sync.bfly(x, 16; width=32, mask=0xffffffff)`.
    fn collective(&self, c: &CollectiveOp) -> String {
        let CollectiveOp::Shuffle { var, value, lane_or_delta, width, mask, .. } = c;
        let ty = self.k.vars.get(var.0 as usize).map_or("?", |v| v.dtype.name());
        format!(
            "let {}: {ty} = {}({}, {}; width={width}, mask={mask:#010x})",
            self.var_name(*var),
            c.name(),
            self.e(value),
            self.e(lane_or_delta)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::{LBuf, LBufId, LKernel, LStmt, LStmtKind, LVar, MemOp, Space, Special};
    use crate::span::Span;
    use crate::target::Arch;

    /// `let y: yt = shuffle(A[tid], operand); B[tid] = y`, `A: t`, `B: yt`.
    fn kernel(t: DType, yt: DType, mode: ShuffleMode, operand: LExpr, width: u32, mask: u32) -> LKernel {
        let buf = |name, dtype| LBuf::flat(name, dtype, Space::Global, 32);
        let tid = || LExpr::Special(Special::ThreadIdx(0));
        let value = LExpr::Load(LBufId(0), Box::new(tid()));
        let op = CollectiveOp::Shuffle { var: LVarId(0), value, mode, lane_or_delta: operand, width, mask };
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![buf("A", t), buf("B", yt)],
            vars: vec![LVar { name: "y".into(), dtype: yt }],
            body: vec![
                LStmt::new(LStmtKind::Collective(op), Span::default()),
                LStmt::new(
                    LStmtKind::Memory(MemOp::Store { buf: LBufId(1), index: tid(), value: LExpr::Var(LVarId(0)) }),
                    Span::default(),
                ),
            ],
            ..LKernel::new("k", [1, 1, 1], [32, 1, 1])
        }
    }

    fn bfly(t: DType, delta: i64, width: u32, mask: u32) -> LKernel {
        kernel(t, t, ShuffleMode::Bfly, LExpr::i32(delta), width, mask)
    }

    #[test]
    fn accepts_every_shuffle_type_and_width() {
        for t in SHUFFLE_TYPES {
            for width in [1, 2, 4, 8, 16, 32] {
                assert_eq!(bfly(t, 0, width, u32::MAX).validate(), Ok(()), "{t} width {width}");
            }
        }
        for mode in [ShuffleMode::Down, ShuffleMode::Up, ShuffleMode::Idx] {
            let k = kernel(DType::F32, DType::F32, mode, LExpr::Special(Special::ThreadIdx(0)), 32, 0xff);
            assert_eq!(k.validate(), Ok(()));
        }
    }

    fn rejects(k: LKernel, words: &str) {
        let err = k.validate().expect_err("must be rejected");
        assert!(err.contains(words), "`{words}` not in: {err}");
    }

    #[test]
    fn rejects_bad_shuffles() {
        for width in [0, 3, 12, 64] {
            rejects(bfly(DType::F32, 1, width, u32::MAX), &format!("width {width} is not a power of two in 1..=32"));
        }
        rejects(bfly(DType::F32, 1, 32, 0), "the member mask is empty");
        for t in [DType::I8, DType::U16, DType::Bool, DType::F8E4M3] {
            rejects(bfly(t, 1, 32, u32::MAX), &format!("shfl.sync.bfly of a {t} value"));
        }
        rejects(
            kernel(DType::F32, DType::F16, ShuffleMode::Bfly, LExpr::i32(1), 32, 1),
            "is defined by shfl.sync.bfly of a float32 value",
        );
        rejects(bfly(DType::F32, 32, 32, u32::MAX), "xor mask 32 is outside 0..32");
        rejects(kernel(DType::I32, DType::I32, ShuffleMode::Down, LExpr::i32(-1), 32, 1), "delta -1 is outside 0..32");
        let k = kernel(DType::I32, DType::I32, ShuffleMode::Idx, LExpr::Float(1.0, DType::F32), 32, 1);
        rejects(k, "shfl.sync.idx source lane is float32, expected int32");
        // The variable is declared by the shuffle: a second definition is rejected.
        let mut k = bfly(DType::F32, 1, 32, u32::MAX);
        k.body.insert(1, k.body[0].clone());
        rejects(k, "declared again");
    }

    #[test]
    fn source_lanes_follow_ptx() {
        use ShuffleMode::*;
        // Butterfly inside width-8 segments; a mask reaching the next segment reads the own value,
        // one reaching the previous segment reads it.
        assert_eq!(Bfly.source_lane(8, 13, 4), 9);
        assert_eq!(Bfly.source_lane(8, 3, 8), 3);
        assert_eq!(Bfly.source_lane(8, 11, 8), 3);
        // Down / up clamp at the segment's end / start.
        assert_eq!(Down.source_lane(8, 5, 2), 7);
        assert_eq!(Down.source_lane(8, 6, 2), 6);
        assert_eq!(Up.source_lane(8, 9, 1), 8);
        assert_eq!(Up.source_lane(8, 8, 1), 8);
        assert_eq!(Up.source_lane(32, 0, 3), 0);
        // Idx wraps inside the segment; only the low five bits count.
        assert_eq!(Idx.source_lane(8, 13, 3), 11);
        assert_eq!(Idx.source_lane(8, 13, 11), 11);
        assert_eq!(Idx.source_lane(32, 4, 33), 1);
        assert_eq!(Idx.source_lane(32, 4, -1), 31);
    }

    #[test]
    fn prints_and_needs_no_newer_target() {
        let k = bfly(DType::BF16, 16, 8, 0xff);
        assert!(
            k.to_string().contains("let y: bfloat16 = shfl.sync.bfly(A[threadIdx.x], 16; width=8, mask=0x000000ff)"),
            "{k}"
        );
        assert_eq!(k.min_arch(&k.body[0]), Arch::MIN);
    }
}
