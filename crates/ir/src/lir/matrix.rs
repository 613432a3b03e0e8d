//! The **matrix** family: warp-collective moves of 8×8 tiles of 16-bit elements
//! between shared memory and per-thread fragments (`ldmatrix` / `stmatrix`), one
//! instruction with a direction. Tensor-core `mma` belongs here later. The rules
//! and how to add an instruction are in `docs/lir.md`.
//!
//! Operands: each lane supplies the row address `smem[smem_index]` (lanes
//! `0..8·num`), and holds `num` 32-bit registers, register i at
//! `regs[reg_index[i] .. +2]` (two 16-bit elements). Typing: `num` ∈ {1, 2, 4}, one
//! register index per matrix, `smem` a shared and `regs` a local 16-bit buffer,
//! rows 16-byte aligned, registers 4-byte aligned.

use super::check::{Check, Checker};
use super::print::Printer;
use super::{LBufId, LExpr, Space};
use crate::target::Arch;
use serde::Serialize;

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
pub struct MatrixOp {
    pub dir: MatrixDir,
    pub num: u8,
    pub trans: bool,
    pub smem: LBufId,
    pub smem_index: LExpr,
    pub regs: LBufId,
    pub reg_index: Vec<LExpr>,
}

impl MatrixOp {
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

    pub fn operands(&self) -> Vec<&LExpr> {
        std::iter::once(&self.smem_index).chain(&self.reg_index).collect()
    }

    /// `(read, written)` buffers.
    pub fn accesses(&self) -> (Vec<LBufId>, Vec<LBufId>) {
        match self.dir {
            MatrixDir::Load => (vec![self.smem], vec![self.regs]),
            MatrixDir::Store => (vec![self.regs], vec![self.smem]),
        }
    }
}

impl Checker<'_> {
    pub(super) fn matrix(&mut self, m: &MatrixOp) -> Check {
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
            if b.dtype.bits() != 16 {
                return Err(format!("ldmatrix/stmatrix move 16-bit elements; `{}` is {}", b.name, b.dtype));
            }
        }
        self.index(m.smem, &m.smem_index)?;
        // Each lane's row is 8 x 16 bits = 16 bytes, 16-byte aligned.
        self.aligned(m.smem, &m.smem_index, 8, "ldmatrix/stmatrix row")?;
        for i in &m.reg_index {
            self.index(m.regs, i)?;
            self.aligned(m.regs, i, 2, "ldmatrix/stmatrix register")?;
        }
        Ok(())
    }
}

impl Printer<'_> {
    /// `ldmatrix.x2.trans {R[0], R[2]} <- S[i]` / `stmatrix.x4 {..} -> S[i]`.
    pub(super) fn matrix(&mut self, m: &MatrixOp, d: usize) {
        let t = if m.trans { ".trans" } else { "" };
        let rs: Vec<String> = m.reg_index.iter().map(|i| self.at(m.regs, i)).collect();
        let arrow = match m.dir {
            MatrixDir::Load => "<-",
            MatrixDir::Store => "->",
        };
        let text =
            format!("{}.x{}{t} {{{}}} {arrow} {}", m.name(), m.num, rs.join(", "), self.at(m.smem, &m.smem_index));
        self.line(d, &text);
    }
}
