//! Simulator of the **matrix** family (`ldmatrix` / `stmatrix`): compiled to one
//! warp-level bytecode instruction; when all 32 lanes of a warp wait at it, the
//! warp executes it with the PTX fragment semantics (see [`Machine::matrix`]).

use crate::bank::PointKey;
use crate::compile::{Compiler, Ins, Reg};
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use tirx_ir::lir::{MatrixDir, MatrixOp, Space};

#[derive(Clone, Debug)]
pub(crate) struct MatrixIns {
    pub site: u32,
    pub store: bool,
    pub num: u8,
    pub trans: bool,
    pub smem: u32,
    pub smem_idx: Reg,
    pub regs: u32,
    pub reg_idx: Vec<Reg>,
}

impl Compiler<'_> {
    pub(crate) fn matrix(&mut self, m: &MatrixOp) -> Result<(), SimError> {
        let MatrixOp { num, trans, smem, ref smem_index, regs, ref reg_index, .. } = *m;
        let store = m.dir == MatrixDir::Store;
        let name = m.name();
        let (s, r) = (self.buf(smem)?, self.buf(regs)?);
        if ![1, 2, 4].contains(&num) || reg_index.len() != num as usize {
            return Err(self.invalid(format!(
                "{name}.x{num} with {} register operands (need x1, x2 or x4 and one register per matrix)",
                reg_index.len()
            )));
        }
        let (sb, rb) = (&self.k.bufs[s as usize], &self.k.bufs[r as usize]);
        if sb.space != Space::Shared || sb.dtype.bits() != 16 {
            return Err(self.invalid(format!(
                "{name} needs a 16-bit shared buffer; `{}` is {} {:?}",
                sb.name, sb.dtype, sb.space
            )));
        }
        if rb.space != Space::Local || rb.dtype.bits() != 16 {
            return Err(self.invalid(format!(
                "{name} needs a 16-bit local register buffer; `{}` is {} {:?}",
                rb.name, rb.dtype, rb.space
            )));
        }
        let smem_idx = self.index(smem_index)?;
        let reg_idx = reg_index.iter().map(|e| self.index(e)).collect::<Result<Vec<_>, _>>()?;
        let site = self.site();
        self.emit(Ins::Matrix(Box::new(MatrixIns { site, store, num, trans, smem: s, smem_idx, regs: r, reg_idx })));
        Ok(())
    }
}

impl Machine<'_> {
    pub(crate) fn partial_block_warp(&self, w: usize, m: &MatrixIns) -> SimError {
        SimError::new(
            SimErrorKind::PartialWarp,
            self.prog.sites[m.site as usize],
            format!(
                "{} executed by warp {w}, which has only {} of 32 lanes (the CTA has {} threads)",
                if m.store { "stmatrix" } else { "ldmatrix" },
                self.lanes(w).len(),
                self.n
            ),
        )
        .help("ldmatrix/stmatrix need full warps: make the CTA size a multiple of 32")
    }

    /// ldmatrix / stmatrix for warp `w`. Matrix i's row r lives at the address lane 8i+r supplies
    /// (lanes ≥ 8·num supply none, and their addresses are not checked, as on the GPU); lane l's
    /// register i holds row l/4, columns 2(l%4), 2(l%4)+1 (transposed with `.trans`). For race
    /// tracking, a row's shared-memory access belongs to the lane that supplied its address; the
    /// collective itself does not order memory (a preceding write by another lane needs a barrier).
    pub(crate) fn matrix(&mut self, w: usize, m: &MatrixIns) -> Result<(), SimError> {
        let nr = self.prog.nregs;
        let name = if m.store { "stmatrix row store" } else { "ldmatrix row load" };
        let num = m.num as usize;
        // Row element offsets, checked: only lanes 0..8·num supply addresses.
        let mut rows = vec![0usize; 8 * num];
        for (i, row) in rows.iter_mut().enumerate() {
            let t = (w * 32 + i) as u32;
            let idx = self.regs[t as usize * nr + m.smem_idx as usize] as i64;
            let e = self.bounds(m.smem, t, idx, 8, m.site, name)?;
            self.aligned(m.smem, t, e, 16, m.site, name)?;
            *row = e;
        }
        // Register element offsets per lane and matrix (a 32-bit register = two 16-bit elements).
        let mut regs = vec![[0usize; 4]; 32];
        for (l, lane_regs) in regs.iter_mut().enumerate() {
            let t = (w * 32 + l) as u32;
            for (slot, r) in lane_regs.iter_mut().zip(&m.reg_idx) {
                let idx = self.regs[t as usize * nr + *r as usize] as i64;
                let e = self.bounds(m.regs, t, idx, 2, m.site, "matrix register access")?;
                self.aligned(m.regs, t, e, 4, m.site, "matrix register access")?;
                *slot = e;
            }
        }
        let kind = if m.store { "stmatrix" } else { "ldmatrix" };
        if let Some(bank) = &mut self.bank {
            let base = self.bufs[m.smem as usize].smem_base;
            let addrs: Vec<u32> = rows.iter().map(|e| base + (*e as u32) * 2).collect();
            bank.record_rows(PointKey { span: self.prog.sites[m.site as usize], buf: m.smem, kind }, w as u32, &addrs);
        }
        // tile[i][r][c]: 16-bit patterns of the 8×8 matrices.
        let mut tile = vec![[[0u8; 16]; 8]; num];
        let wt = |l: usize| (w * 32 + l) as u32;
        if !m.store {
            for i in 0..num {
                for r in 0..8 {
                    self.read_raw(m.smem, wt(8 * i + r), rows[8 * i + r], 8, m.site, &mut tile[i][r])?;
                }
            }
        }
        for (l, lane_regs) in regs.iter().enumerate() {
            let ((r0, c0), (r1, c1)) = fragment(l, m.trans);
            for (i, &reg) in lane_regs.iter().enumerate().take(num) {
                let mut pair = [0u8; 4];
                if m.store {
                    self.read_raw(m.regs, wt(l), reg, 2, m.site, &mut pair)?;
                    tile[i][r0][2 * c0..2 * c0 + 2].copy_from_slice(&pair[..2]);
                    tile[i][r1][2 * c1..2 * c1 + 2].copy_from_slice(&pair[2..]);
                } else {
                    pair[..2].copy_from_slice(&tile[i][r0][2 * c0..2 * c0 + 2]);
                    pair[2..].copy_from_slice(&tile[i][r1][2 * c1..2 * c1 + 2]);
                    self.write_raw(m.regs, wt(l), reg, 2, m.site, &pair)?;
                }
            }
        }
        if m.store {
            for i in 0..num {
                for r in 0..8 {
                    let row = tile[i][r];
                    self.write_raw(m.smem, wt(8 * i + r), rows[8 * i + r], 8, m.site, &row)?;
                }
            }
        }
        Ok(())
    }
}

/// The (row, column) of the two 16-bit elements lane `l` holds of an 8×8 matrix.
pub(crate) fn fragment(l: usize, trans: bool) -> ((usize, usize), (usize, usize)) {
    let (r, c) = (l / 4, 2 * (l % 4));
    if trans {
        ((c, r), (c + 1, r))
    } else {
        ((r, c), (r, c + 1))
    }
}
