//! The **matrix** family: warp-collective instructions on per-lane matrix
//! fragments. Two instructions ([`MatrixOp`]), both executed by all 32 lanes of
//! a warp together (`docs/lir.md` §2.4, §2.8):
//!
//! * [`MatrixMove`]: `ldmatrix` / `stmatrix`, 8×8 tiles of 16-bit elements
//!   between shared memory and fragments. Each lane supplies the row address
//!   `smem[smem_index]` (lanes `0..8·num`), and holds `num` 32-bit registers,
//!   register i at `regs[reg_index[i] ..]`. Typing: `num` ∈ {1, 2, 4}, one
//!   register index per matrix, `smem` a shared and `regs` a local buffer of
//!   16-bit elements, or both of 8-bit ones moved as adjacent pairs (each 16-bit
//!   element two bytes: FP8's transposition), rows 16-byte aligned, registers
//!   4-byte aligned.
//! * [`Wgmma`], [`WgmmaSync`]: Hopper's asynchronous warpgroup MMA and its
//!   ordering instructions, in [`super::wgmma`] (`docs/lir.md` §2.11).
//! * [`Mma`]: `mma.sync.aligned.m16n8k{8,16,32}.row.col` — `D = A·B + C` on one
//!   16×8 tile, every operand a list of registers of local buffers at constant
//!   indices. The element types are the buffers' ([`MmaKind`]: f16/bf16 → f32,
//!   f32 read as tf32 → f32, s8/u8 → s32); a 32-bit register of A or B packs
//!   `32 / bits` consecutive elements, so its index is aligned to that count.

use super::check::{Check, Checker};
use super::instr::{Accesses, Instr};
use super::print::Printer;
use super::wgmma::{Wgmma, WgmmaSync};
use super::{LBufId, LExpr, LKernel, Space};
use crate::dtype::DType;
use crate::target::Arch;
use serde::Serialize;

/// A matrix-family instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum MatrixOp {
    /// `ldmatrix` / `stmatrix`.
    Move(MatrixMove),
    /// `mma.sync` (tensor cores).
    Mma(Mma),
    /// `wgmma.mma_async` (Hopper warpgroup tensor cores, [`super::wgmma`]).
    Wgmma(Wgmma),
    /// `wgmma.fence` / `commit_group` / `wait_group` ([`super::wgmma`]).
    WgmmaSync(WgmmaSync),
}

impl MatrixOp {
    /// The PTX instruction name (`ldmatrix`, `mma.sync`).
    pub fn name(&self) -> &'static str {
        match self {
            MatrixOp::Move(m) => m.name(),
            MatrixOp::Mma(_) => "mma.sync",
            MatrixOp::Wgmma(_) => "wgmma.mma_async",
            MatrixOp::WgmmaSync(s) => s.name(),
        }
    }
}

impl Instr for MatrixOp {
    fn name(&self) -> String {
        MatrixOp::name(self).into()
    }

    /// `ldmatrix` sm_75, `stmatrix` sm_90, mma per shape and type, wgmma sm_90a.
    fn min_arch(&self, dtype: &dyn Fn(LBufId) -> DType) -> Arch {
        match self {
            MatrixOp::Move(m) => m.min_arch(),
            MatrixOp::Mma(m) => m.kind(dtype).map_or(Arch::SM_80, |k| k.min_arch()),
            MatrixOp::Wgmma(_) | MatrixOp::WgmmaSync(_) => super::wgmma::WGMMA_ARCH,
        }
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            MatrixOp::Move(m) => std::iter::once(&m.smem_index).chain(&m.reg_index).collect(),
            MatrixOp::Mma(m) => m.d_index.iter().chain(&m.a_index).chain(&m.b_index).chain(&m.c_index).collect(),
            MatrixOp::Wgmma(w) => w.operands(),
            MatrixOp::WgmmaSync(_) => vec![],
        }
    }

    fn accesses(&self) -> Accesses {
        match self {
            MatrixOp::Move(m) => match m.dir {
                MatrixDir::Load => (vec![m.smem], vec![m.regs]),
                MatrixDir::Store => (vec![m.regs], vec![m.smem]),
            },
            MatrixOp::Mma(m) => (vec![m.a, m.b, m.c], vec![m.d]),
            MatrixOp::Wgmma(w) => (vec![w.a_buf(), w.b.buf, w.d], vec![w.d]),
            MatrixOp::WgmmaSync(_) => (vec![], vec![]),
        }
    }

    /// An mma sums products; a move copies.
    fn computes(&self, k: &LKernel) -> Option<String> {
        match self {
            MatrixOp::Mma(m) => Some(format!("an mma.sync into `{}`", k.buf(m.d).name)),
            MatrixOp::Wgmma(w) => Some(format!("a wgmma into `{}`", k.buf(w.d).name)),
            MatrixOp::Move(_) | MatrixOp::WgmmaSync(_) => None,
        }
    }

    fn check(&self, c: &mut Checker) -> Check {
        c.matrix(self)
    }

    fn print(&self, p: &Printer) -> String {
        p.matrix(self)
    }
}

impl super::LKernel {
    /// Whether any statement is a tensor-core sum, `mma.sync` or `wgmma.mma_async` (its
    /// float sums round differently on the GPU, `docs/numerics.md` §8, §10).
    pub fn uses_mma(&self) -> bool {
        fn any(body: &[super::LStmt]) -> bool {
            body.iter().any(|s| {
                matches!(s.kind, super::LStmtKind::Matrix(MatrixOp::Mma(_) | MatrixOp::Wgmma(_)))
                    || s.kind.bodies().into_iter().any(any)
            })
        }
        any(&self.body)
    }
}

// ------------------------------------------------------------ ldmatrix / stmatrix

/// Which way the tile moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MatrixDir {
    /// `ldmatrix`: shared memory → registers.
    Load,
    /// `stmatrix`: registers → shared memory.
    Store,
}

/// `{ld,st}matrix.sync.aligned.m8n8.x{num}[.trans].shared.b16`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MatrixMove {
    pub dir: MatrixDir,
    pub num: u8,
    pub trans: bool,
    pub smem: LBufId,
    pub smem_index: LExpr,
    pub regs: LBufId,
    pub reg_index: Vec<LExpr>,
}

impl MatrixMove {
    /// The PTX instruction name.
    pub fn name(&self) -> &'static str {
        match self.dir {
            MatrixDir::Load => "ldmatrix",
            MatrixDir::Store => "stmatrix",
        }
    }

    pub fn min_arch(&self) -> Arch {
        match self.dir {
            MatrixDir::Load => Arch::SM_75,
            MatrixDir::Store => Arch::SM_90,
        }
    }
}

// ------------------------------------------------------------ mma.sync

/// The instruction shapes of the m16n8 family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MmaShape {
    M16N8K8,
    M16N8K16,
    M16N8K32,
}

impl MmaShape {
    pub const M: i64 = 16;
    pub const N: i64 = 8;

    pub fn k(self) -> i64 {
        match self {
            MmaShape::M16N8K8 => 8,
            MmaShape::M16N8K16 => 16,
            MmaShape::M16N8K32 => 32,
        }
    }

    /// `m16n8k16`.
    pub fn name(self) -> &'static str {
        match self {
            MmaShape::M16N8K8 => "m16n8k8",
            MmaShape::M16N8K16 => "m16n8k16",
            MmaShape::M16N8K32 => "m16n8k32",
        }
    }
}

/// The element type of a multiplicand, as PTX names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum MmaIn {
    F16,
    BF16,
    /// `float32` registers read as tf32 (rounded to it first, see `docs/lir.md` §2.8).
    TF32,
    S8,
    U8,
}

impl MmaIn {
    /// The multiplicand type of a buffer dtype (`float32` → tf32).
    pub fn of(dt: DType) -> Option<MmaIn> {
        Some(match dt {
            DType::F16 => MmaIn::F16,
            DType::BF16 => MmaIn::BF16,
            DType::F32 => MmaIn::TF32,
            DType::I8 => MmaIn::S8,
            DType::U8 => MmaIn::U8,
            _ => return None,
        })
    }

    /// `bf16`, `tf32`, `s8`.
    pub fn ptx(self) -> &'static str {
        match self {
            MmaIn::F16 => "f16",
            MmaIn::BF16 => "bf16",
            MmaIn::TF32 => "tf32",
            MmaIn::S8 => "s8",
            MmaIn::U8 => "u8",
        }
    }

    /// Elements per 32-bit register.
    pub fn per_reg(self) -> usize {
        match self {
            MmaIn::F16 | MmaIn::BF16 => 2,
            MmaIn::TF32 => 1,
            MmaIn::S8 | MmaIn::U8 => 4,
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, MmaIn::S8 | MmaIn::U8)
    }
}

/// A supported `mma.sync` form: shape, multiplicand types, accumulator type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct MmaKind {
    pub shape: MmaShape,
    pub a: MmaIn,
    pub b: MmaIn,
    /// `float32` or `int32` (`.s32`), for C and D alike.
    pub acc: DType,
}

impl MmaKind {
    /// The form of `shape` with these buffer types, or why there is none.
    pub fn new(shape: MmaShape, a: DType, b: DType, c: DType, d: DType) -> Result<MmaKind, String> {
        let sig = || format!("{} with A {a}, B {b}, C {c}, D {d}", shape.name());
        let (ai, bi) = match (MmaIn::of(a), MmaIn::of(b)) {
            (Some(x), Some(y)) => (x, y),
            _ => {
                return Err(format!(
                    "no mma.sync {}: multiplicands are float16, bfloat16, float32 (tf32), int8 or uint8",
                    sig()
                ))
            }
        };
        let acc = if ai.is_int() { DType::I32 } else { DType::F32 };
        let ok_inputs = match shape {
            MmaShape::M16N8K16 => ai == bi && matches!(ai, MmaIn::F16 | MmaIn::BF16),
            MmaShape::M16N8K8 => ai == bi && matches!(ai, MmaIn::F16 | MmaIn::BF16 | MmaIn::TF32),
            MmaShape::M16N8K32 => ai.is_int() && bi.is_int(),
        };
        if !ok_inputs || c != acc || d != acc {
            return Err(format!(
                "no mma.sync {}: m16n8k16 takes f16/bf16 pairs, m16n8k8 f16/bf16/tf32 pairs (float32 accumulators), m16n8k32 s8/u8 (int32 accumulators)",
                sig()
            ));
        }
        Ok(MmaKind { shape, a: ai, b: bi, acc })
    }

    /// `m16n8k8` on f16 exists from sm_75 (PTX ISA 6.5); every other form from sm_80.
    pub fn min_arch(self) -> Arch {
        match (self.shape, self.a) {
            (MmaShape::M16N8K8, MmaIn::F16) => Arch::SM_75,
            _ => Arch::SM_80,
        }
    }

    /// The accumulator type as PTX names it (`f32`, `s32`).
    pub fn acc_ptx(self) -> &'static str {
        if self.acc == DType::I32 {
            "s32"
        } else {
            "f32"
        }
    }

    /// `m16n8k16.row.col.f32.bf16.bf16.f32`.
    pub fn ptx(self) -> String {
        let c = self.acc_ptx();
        format!("{}.row.col.{c}.{}.{}.{c}", self.shape.name(), self.a.ptx(), self.b.ptx())
    }

    /// The (row, column) of element `e` of register `r` of `lane`'s fragment of
    /// `op`, per the PTX ISA fragment tables of the m16n8 shapes (`g = lane / 4`,
    /// `t = lane % 4`, `p` elements per register): accumulator register `r`
    /// holds `(g + 8·(r / 2), 2t + r % 2)`; A register `r` element `e` holds row
    /// `g + 8·(r % 2)`, column `p·t + e + 4p·(r / 2)`; B register `r` element `e`
    /// holds row `p·t + e + 4p·r`, column `g`.
    pub fn coord(self, op: MmaOperand, lane: usize, r: usize, e: usize) -> (usize, usize) {
        let (g, t) = (lane / 4, lane % 4);
        match op {
            MmaOperand::A => {
                let p = self.a.per_reg();
                (g + 8 * (r % 2), p * t + e + 4 * p * (r / 2))
            }
            MmaOperand::B => {
                let p = self.b.per_reg();
                (p * t + e + 4 * p * r, g)
            }
            MmaOperand::Acc => (g + 8 * (r / 2), 2 * t + r % 2),
        }
    }

    /// 32-bit registers per lane of A (16×k), B (k×8) and C/D (16×8).
    pub fn regs(self) -> [usize; 3] {
        let k = self.shape.k() as usize;
        [16 * k / 32 / self.a.per_reg(), k * 8 / 32 / self.b.per_reg(), 4]
    }
}

/// The operands whose fragments [`MmaKind::coord`] maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum MmaOperand {
    A,
    B,
    /// C and D.
    Acc,
}

/// `mma.sync.aligned.{shape}.row.col.{acc}.{a}.{b}.{acc} {d}, {a}, {b}, {c}`: one warp
/// computes `D = A·B + C` on a 16×8 tile. Each index is the first element of one
/// 32-bit register (a constant): `d_index`/`c_index` four accumulators, `a_index`
/// and `b_index` the multiplicand registers in PTX order ([`MmaKind::regs`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mma {
    pub shape: MmaShape,
    pub d: LBufId,
    pub d_index: Vec<LExpr>,
    pub a: LBufId,
    pub a_index: Vec<LExpr>,
    pub b: LBufId,
    pub b_index: Vec<LExpr>,
    pub c: LBufId,
    pub c_index: Vec<LExpr>,
}

impl Mma {
    /// The form the operand buffers' types select.
    pub fn kind(&self, dtype: &dyn Fn(LBufId) -> DType) -> Result<MmaKind, String> {
        MmaKind::new(self.shape, dtype(self.a), dtype(self.b), dtype(self.c), dtype(self.d))
    }

    /// `(operand, buffer, indices, elements per register)` of D, A, B, C.
    pub fn parts(&self, kind: MmaKind) -> [(&'static str, LBufId, &[LExpr], usize); 4] {
        [
            ("D", self.d, &self.d_index, 1),
            ("A", self.a, &self.a_index, kind.a.per_reg()),
            ("B", self.b, &self.b_index, kind.b.per_reg()),
            ("C", self.c, &self.c_index, 1),
        ]
    }
}

impl Checker<'_> {
    fn matrix(&mut self, m: &MatrixOp) -> Check {
        match m {
            MatrixOp::Move(m) => self.matrix_move(m),
            MatrixOp::Mma(m) => self.mma(m),
            MatrixOp::Wgmma(w) => self.wgmma(w),
            MatrixOp::WgmmaSync(_) => Ok(()),
        }
    }

    fn matrix_move(&mut self, m: &MatrixMove) -> Check {
        let num = m.num;
        if !matches!(num, 1 | 2 | 4) {
            return Err(format!("ldmatrix/stmatrix .x{num}: num must be 1, 2 or 4"));
        }
        if m.reg_index.len() != usize::from(num) {
            return Err(format!("ldmatrix/stmatrix .x{num} needs {num} register indices, got {}", m.reg_index.len()));
        }
        let (s, r) = (self.buf(m.smem)?, self.buf(m.regs)?);
        if s.space != Space::Shared {
            return Err(format!("ldmatrix/stmatrix address `{}` is not in shared memory", s.name));
        }
        if r.space != Space::Local {
            return Err(format!("ldmatrix/stmatrix registers `{}` are not a local buffer", r.name));
        }
        for b in [s, r] {
            if !matches!(b.dtype.bits(), 8 | 16) {
                return Err(format!(
                    "ldmatrix/stmatrix move 16-bit elements (8-bit ones in pairs); `{}` is {}",
                    b.name, b.dtype
                ));
            }
        }
        if s.dtype.bits() != r.dtype.bits() {
            return Err(format!("ldmatrix/stmatrix between `{}` ({}) and `{}` ({})", s.name, s.dtype, r.name, r.dtype));
        }
        let bytes = i64::from(s.dtype.bits() / 8);
        self.index(m.smem, &m.smem_index)?;
        // Each lane's row is 16 bytes, 16-byte aligned; each register 4 bytes.
        self.aligned(m.smem, &m.smem_index, 16 / bytes, "ldmatrix/stmatrix row")?;
        for i in &m.reg_index {
            self.index(m.regs, i)?;
            self.aligned(m.regs, i, 4 / bytes, "ldmatrix/stmatrix register")?;
        }
        Ok(())
    }

    /// Local buffers of a supported form; each register a constant, aligned index
    /// whose whole register lies inside its buffer; D's four registers distinct.
    fn mma(&mut self, m: &Mma) -> Check {
        let dt = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype);
        for b in [m.d, m.a, m.b, m.c] {
            let buf = self.buf(b)?;
            if buf.space != Space::Local {
                return Err(format!("mma.sync operand `{}` is not a local (register) buffer", buf.name));
            }
        }
        let kind = m.kind(&dt)?;
        let want = kind.regs();
        for ((name, b, idx, per), n) in m.parts(kind).into_iter().zip([4, want[0], want[1], 4]) {
            if idx.len() != n {
                return Err(format!("mma.sync {}: {name} takes {n} registers, got {}", kind.ptx(), idx.len()));
            }
            let buf = self.buf(b)?;
            for e in idx {
                let LExpr::Int(v, t) = e else {
                    return Err(format!(
                        "mma.sync {name} register `{}[…]` has a run-time index; register indices are constants",
                        buf.name
                    ));
                };
                self.index(b, e)?;
                if *t != DType::I32 || *v < 0 || v + per as i64 > buf.elems || v % per as i64 != 0 {
                    return Err(format!(
                        "mma.sync {name} register {}[{v}]: needs {per} element(s) starting at a multiple of {per} inside its {} elements",
                        buf.name, buf.elems
                    ));
                }
            }
        }
        let mut d: Vec<&LExpr> = m.d_index.iter().collect();
        d.sort_by_key(|e| if let LExpr::Int(v, _) = e { *v } else { 0 });
        if d.windows(2).any(|w| w[0] == w[1]) {
            return Err("mma.sync D names one register twice".into());
        }
        Ok(())
    }
}

impl Printer<'_> {
    fn matrix(&self, m: &MatrixOp) -> String {
        match m {
            MatrixOp::Move(m) => self.matrix_move(m),
            MatrixOp::Mma(m) => self.mma(m),
            MatrixOp::Wgmma(w) => self.wgmma(w),
            MatrixOp::WgmmaSync(WgmmaSync::Wait(n)) => format!("wgmma.wait_group {n}"),
            MatrixOp::WgmmaSync(s) => s.name().to_string(),
        }
    }

    /// `ldmatrix.x2.trans {R[0], R[2]} <- S[i]` / `stmatrix.x4 {..} -> S[i]`.
    fn matrix_move(&self, m: &MatrixMove) -> String {
        let t = if m.trans { ".trans" } else { "" };
        let rs: Vec<String> = m.reg_index.iter().map(|i| self.at(m.regs, i)).collect();
        let arrow = match m.dir {
            MatrixDir::Load => "<-",
            MatrixDir::Store => "->",
        };
        format!("{}.x{}{t} {{{}}} {arrow} {}", m.name(), m.num, rs.join(", "), self.at(m.smem, &m.smem_index))
    }

    /// `mma.m16n8k16.row.col.f32.f16.f16.f32 {D[0], ..} = {A[0], ..} * {B[0], B[2]} + {D[0], ..}`.
    fn mma(&self, m: &Mma) -> String {
        let regs = |b: LBufId, idx: &[LExpr]| {
            let r: Vec<String> = idx.iter().map(|i| self.at(b, i)).collect();
            format!("{{{}}}", r.join(", "))
        };
        let dt = |b: LBufId| self.k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype);
        let name = m.kind(&dt).map_or_else(|_| m.shape.name().to_string(), |k| k.ptx());
        format!(
            "mma.{name} {} = {} * {} + {}",
            regs(m.d, &m.d_index),
            regs(m.a, &m.a_index),
            regs(m.b, &m.b_index),
            regs(m.c, &m.c_index)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_registers_and_targets() {
        let k = MmaKind::new(MmaShape::M16N8K16, DType::BF16, DType::BF16, DType::F32, DType::F32).unwrap();
        assert_eq!(k.ptx(), "m16n8k16.row.col.f32.bf16.bf16.f32");
        assert_eq!(k.regs(), [4, 2, 4]);
        assert_eq!(k.min_arch(), Arch::SM_80);
        let k = MmaKind::new(MmaShape::M16N8K8, DType::F16, DType::F16, DType::F32, DType::F32).unwrap();
        assert_eq!((k.regs(), k.min_arch()), ([2, 1, 4], Arch::SM_75));
        let k = MmaKind::new(MmaShape::M16N8K8, DType::F32, DType::F32, DType::F32, DType::F32).unwrap();
        assert_eq!((k.ptx().as_str(), k.regs()), ("m16n8k8.row.col.f32.tf32.tf32.f32", [4, 2, 4]));
        let k = MmaKind::new(MmaShape::M16N8K32, DType::I8, DType::U8, DType::I32, DType::I32).unwrap();
        assert_eq!((k.ptx().as_str(), k.regs()), ("m16n8k32.row.col.s32.s8.u8.s32", [4, 2, 4]));
        for bad in [
            (MmaShape::M16N8K16, DType::F32, DType::F32, DType::F32),
            (MmaShape::M16N8K16, DType::F16, DType::BF16, DType::F32),
            (MmaShape::M16N8K16, DType::F16, DType::F16, DType::F16),
            (MmaShape::M16N8K32, DType::I8, DType::I8, DType::F32),
            (MmaShape::M16N8K8, DType::I8, DType::I8, DType::I32),
        ] {
            assert!(MmaKind::new(bad.0, bad.1, bad.2, bad.3, bad.3).is_err(), "{bad:?}");
        }
    }

    /// One warp, one m16n8k16 f16 mma on local buffers; `edit` breaks it.
    fn kernel(edit: impl FnOnce(&mut Mma, &mut Vec<crate::lir::LBuf>)) -> Result<(), String> {
        use crate::lir::{LBuf, LKernel, LStmt, LStmtKind};
        let buf = LBuf::local;
        let mut bufs = vec![buf("a", DType::F16, 8), buf("b", DType::F16, 4), buf("acc", DType::F32, 4)];
        let ix = |v: &[i64]| v.iter().map(|&x| LExpr::i32(x)).collect::<Vec<_>>();
        let mut m = Mma {
            shape: MmaShape::M16N8K16,
            d: LBufId(2),
            d_index: ix(&[0, 1, 2, 3]),
            a: LBufId(0),
            a_index: ix(&[0, 2, 4, 6]),
            b: LBufId(1),
            b_index: ix(&[0, 2]),
            c: LBufId(2),
            c_index: ix(&[0, 1, 2, 3]),
        };
        edit(&mut m, &mut bufs);
        let stmt = LStmt::new(LStmtKind::Matrix(MatrixOp::Mma(m)), Default::default());
        LKernel { bufs, body: vec![stmt], ..LKernel::new("k", [1; 3], [32, 1, 1]) }.validate()
    }

    #[test]
    fn checker_accepts_the_form_and_rejects_misuse() {
        assert_eq!(kernel(|_, _| {}), Ok(()));
        let err = |e: Result<(), String>| e.unwrap_err();
        assert!(err(kernel(|m, _| m.a_index[1] = LExpr::i32(3))).contains("multiple of 2"));
        assert!(err(kernel(|m, _| m.a_index[3] = LExpr::i32(8))).contains("inside its 8 elements"));
        assert!(err(kernel(|m, _| m.b_index.pop().map_or((), drop))).contains("B takes 2 registers, got 1"));
        assert!(err(kernel(|m, _| m.d_index[1] = LExpr::i32(0))).contains("D names one register twice"));
        assert!(err(kernel(|_, b| b[1].dtype = DType::BF16)).contains("no mma.sync m16n8k16"));
        assert!(err(kernel(|_, b| b[0].space = Space::Shared)).contains("not a local (register) buffer"));
        let var = LExpr::Special(crate::lir::Special::ThreadIdx(0));
        assert!(err(kernel(|m, _| m.c_index[0] = var)).contains("run-time index"));
    }
}
