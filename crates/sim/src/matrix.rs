//! Simulator of the **matrix** family: `ldmatrix` / `stmatrix` and `mma.sync`,
//! each compiled to one warp-level bytecode instruction; when all 32 lanes of a
//! warp wait at it, the warp executes it with the PTX fragment semantics (see
//! [`Machine::matrix`] and [`Machine::mma`], `docs/lir.md` §2.4, §2.8).

use crate::bank::PointKey;
use crate::compile::{Compile, Compiler, Reg};
use crate::dot;
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{Divergence, FamilyIns, Group, WHOLE_WARP};
use crate::wgmma::{WgOp, WgOpIns};
use tirx_ir::lir::{LExpr, MatrixDir, MatrixMove, MatrixOp, Mma, MmaKind, MmaOperand, Space};
use tirx_ir::DType;

/// `ldmatrix` / `stmatrix`.
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

/// `mma.sync`: the form and, per operand (D, A, B, C), its buffer and the first
/// element of each 32-bit register (constants).
#[derive(Clone, Debug)]
pub(crate) struct MmaIns {
    pub site: u32,
    pub kind: MmaKind,
    pub bufs: [u32; 4],
    pub regs: [Vec<i64>; 4],
}

impl Compile for MatrixOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        match self {
            MatrixOp::Move(m) => c.matrix_move(m),
            MatrixOp::Mma(m) => c.mma(m),
            MatrixOp::Wgmma(w) => c.wgmma(w),
            MatrixOp::WgmmaSync(s) => {
                let site = c.site();
                c.emit_family(WgOpIns { site, op: WgOp::Sync(*s) });
                Ok(())
            }
        }
    }
}

/// Warp-collective (`.sync.aligned`): all 32 lanes execute it together.
impl FamilyIns for MatrixIns {
    fn name(&self) -> String {
        format!("`{}.x{}{}`", self.ptx(), self.num, if self.trans { ".trans" } else { "" })
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        WHOLE_WARP
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        if m.lanes(w).len() != 32 {
            return Err(m.partial_block_warp(w, self.ptx(), self.site));
        }
        m.matrix(w, self)
    }

    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::PartialWarp,
            scope: "every lane",
            help: "ldmatrix/stmatrix are warp-collective: all 32 lanes must execute the same instruction; do not guard them with a lane-dependent condition",
        }
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.smem_idx);
        self.reg_idx.iter_mut().for_each(f)
    }
}

impl MatrixIns {
    fn ptx(&self) -> &'static str {
        if self.store {
            "stmatrix"
        } else {
            "ldmatrix"
        }
    }
}

/// Warp-collective (`.sync.aligned`): all 32 lanes execute it together.
impl FamilyIns for MmaIns {
    fn name(&self) -> String {
        mma_name(self.kind)
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        WHOLE_WARP
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        if m.lanes(w).len() != 32 {
            return Err(m.partial_block_warp(w, "mma.sync", self.site));
        }
        m.mma(w, self)
    }

    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::PartialWarp,
            scope: "every lane",
            help: "mma.sync is warp-collective (`.aligned`): all 32 lanes must execute the same instruction; do not guard it with a lane-dependent condition",
        }
    }

    fn for_each_reg(&mut self, _: &mut dyn FnMut(&mut Reg)) {}
}

impl Compiler<'_> {
    fn mma(&mut self, m: &Mma) -> Result<(), SimError> {
        let k = self.k;
        let kind =
            m.kind(&|b| k.bufs.get(b.0 as usize).map_or(DType::Bool, |x| x.dtype)).map_err(|e| self.invalid(e))?;
        let mut bufs = [0u32; 4];
        let mut regs: [Vec<i64>; 4] = Default::default();
        for (i, (_, b, idx, _)) in m.parts(kind).into_iter().enumerate() {
            bufs[i] = self.buf(b)?;
            for e in idx {
                let LExpr::Int(v, _) = e else {
                    return Err(self.invalid("mma.sync register indices must be constants"));
                };
                regs[i].push(*v);
            }
        }
        if bufs.iter().any(|&b| self.k.bufs[b as usize].space != Space::Local) {
            return Err(self.invalid("mma.sync operands must be local (register) buffers"));
        }
        let site = self.site();
        self.emit_family(MmaIns { site, kind, bufs, regs });
        Ok(())
    }

    fn matrix_move(&mut self, m: &MatrixMove) -> Result<(), SimError> {
        let MatrixMove { num, trans, smem, ref smem_index, regs, ref reg_index, .. } = *m;
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
        if sb.space != Space::Shared || !matches!(sb.dtype.bits(), 8 | 16) {
            return Err(self.invalid(format!(
                "{name} needs a 16-bit (or 8-bit) shared buffer; `{}` is {} {:?}",
                sb.name, sb.dtype, sb.space
            )));
        }
        if rb.space != Space::Local || rb.dtype.bits() != sb.dtype.bits() {
            return Err(self.invalid(format!(
                "{name} needs a local register buffer of `{}`'s {}; `{}` is {} {:?}",
                sb.name, sb.dtype, rb.name, rb.dtype, rb.space
            )));
        }
        let smem_idx = self.index(smem_index)?;
        let reg_idx = reg_index.iter().map(|e| self.index(e)).collect::<Result<Vec<_>, _>>()?;
        let site = self.site();
        self.emit_family(MatrixIns { site, store, num, trans, smem: s, smem_idx, regs: r, reg_idx });
        Ok(())
    }
}

impl Machine<'_> {
    /// A warp-collective matrix instruction (`name`) reached by a warp of fewer than 32 lanes.
    fn partial_block_warp(&self, w: usize, name: &str, site: u32) -> SimError {
        SimError::new(
            SimErrorKind::PartialWarp,
            self.prog.sites[site as usize],
            format!(
                "{name} executed by warp {w}, which has only {} of 32 lanes (the CTA has {} threads)",
                self.lanes(w).len(),
                self.n
            ),
        )
        .help(format!("{name} needs full warps: make the CTA size a multiple of 32"))
    }

    /// ldmatrix / stmatrix for warp `w`. Matrix i's row r lives at the address lane 8i+r supplies
    /// (lanes ≥ 8·num supply none, and their addresses are not checked, as on the GPU); lane l's
    /// register i holds row l/4, columns 2(l%4), 2(l%4)+1 (transposed with `.trans`). For race
    /// tracking, a row's shared-memory access belongs to the lane that supplied its address; the
    /// collective itself does not order memory (a preceding write by another lane needs a barrier).
    fn matrix(&mut self, w: usize, m: &MatrixIns) -> Result<(), SimError> {
        let nr = self.prog.nregs;
        let name = if m.store { "stmatrix row store" } else { "ldmatrix row load" };
        let num = m.num as usize;
        // Elements per 16-bit unit: 1, or 2 bytes of an 8-bit buffer (a pair moves as one).
        let per = 2 / self.k.bufs[m.smem as usize].dtype.bytes().clamp(1, 2) as usize;
        // Row element offsets, checked: only lanes 0..8·num supply addresses.
        let mut rows = vec![0usize; 8 * num];
        for (i, row) in rows.iter_mut().enumerate() {
            let t = (w * 32 + i) as u32;
            let idx = self.regs[t as usize * nr + m.smem_idx as usize] as i64;
            let e = self.bounds(m.smem, t, idx, 8 * per, m.site, name)?;
            self.aligned(m.smem, t, e, 16, m.site, name)?;
            *row = e;
        }
        // Register element offsets per lane and matrix (a 32-bit register = two 16-bit elements).
        let mut regs = vec![[0usize; 4]; 32];
        for (l, lane_regs) in regs.iter_mut().enumerate() {
            let t = (w * 32 + l) as u32;
            for (slot, r) in lane_regs.iter_mut().zip(&m.reg_idx) {
                let idx = self.regs[t as usize * nr + *r as usize] as i64;
                let e = self.bounds(m.regs, t, idx, 2 * per, m.site, "matrix register access")?;
                self.aligned(m.regs, t, e, 4, m.site, "matrix register access")?;
                *slot = e;
            }
        }
        let kind = if m.store { "stmatrix" } else { "ldmatrix" };
        if let Some(bank) = &mut self.bank {
            let base = self.bufs[m.smem as usize].smem_base;
            let addrs: Vec<u32> = rows.iter().map(|e| base + (*e as u32) * (2 / per as u32)).collect();
            bank.record_rows(PointKey { span: self.prog.sites[m.site as usize], buf: m.smem, kind }, w as u32, &addrs);
        }
        // tile[i][r][c]: 16-bit patterns of the 8×8 matrices.
        let mut tile = vec![[[0u8; 16]; 8]; num];
        let wt = |l: usize| (w * 32 + l) as u32;
        if !m.store {
            for i in 0..num {
                for r in 0..8 {
                    self.read_raw(m.smem, wt(8 * i + r), rows[8 * i + r], 8 * per, m.site, &mut tile[i][r])?;
                }
            }
        }
        for (l, lane_regs) in regs.iter().enumerate() {
            let ((r0, c0), (r1, c1)) = fragment(l, m.trans);
            for (i, &reg) in lane_regs.iter().enumerate().take(num) {
                let mut pair = [0u8; 4];
                if m.store {
                    self.read_raw(m.regs, wt(l), reg, 2 * per, m.site, &mut pair)?;
                    tile[i][r0][2 * c0..2 * c0 + 2].copy_from_slice(&pair[..2]);
                    tile[i][r1][2 * c1..2 * c1 + 2].copy_from_slice(&pair[2..]);
                } else {
                    pair[..2].copy_from_slice(&tile[i][r0][2 * c0..2 * c0 + 2]);
                    pair[2..].copy_from_slice(&tile[i][r1][2 * c1..2 * c1 + 2]);
                    self.write_raw(m.regs, wt(l), reg, 2 * per, m.site, &pair)?;
                }
            }
        }
        if m.store {
            for i in 0..num {
                for r in 0..8 {
                    let row = tile[i][r];
                    self.write_raw(m.smem, wt(8 * i + r), rows[8 * i + r], 8 * per, m.site, &row)?;
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

// ------------------------------------------------------------------ mma.sync

/// The fragment of each operand slot (D, A, B, C).
const OPERANDS: [MmaOperand; 4] = [MmaOperand::Acc, MmaOperand::A, MmaOperand::B, MmaOperand::Acc];

impl Machine<'_> {
    /// `mma.sync` for warp `w`: every lane's A, B and C registers are read, the
    /// 16×8 tile `D = A·B + C` computed (`dot`: exact products, the exact sum
    /// rounded once to f32 per instruction; integers exact, wrapped to 32 bits),
    /// then every lane's D registers written. C may be D: all reads come first.
    fn mma(&mut self, w: usize, m: &MmaIns) -> Result<(), SimError> {
        let k = m.kind.shape.k() as usize;
        let per = [1, m.kind.a.per_reg(), m.kind.b.per_reg(), 1];
        // mats[o][row][col] of A (16×k), B (k×8), C (16×8).
        let mut mats = [vec![vec![0.0f64; k]; 16], vec![vec![0.0f64; 8]; k], vec![vec![0.0f64; 8]; 16]];
        let mut ints = [vec![vec![0i64; k]; 16], vec![vec![0i64; 8]; k], vec![vec![0i64; 8]; 16]];
        for (slot, o) in [(0usize, 1usize), (1, 2), (2, 3)] {
            let b = m.bufs[o];
            let dt = self.bufs[b as usize].dtype;
            let esize = dt.bytes() as usize;
            for lane in 0..32 {
                let t = (w * 32 + lane) as u32;
                for (r, &first) in m.regs[o].iter().enumerate() {
                    let e0 = self.bounds(b, t, first, per[o], m.site, "mma.sync register read")?;
                    let mut bytes = [0u8; 4];
                    self.read_raw(b, t, e0, per[o], m.site, &mut bytes[..per[o] * esize])?;
                    for e in 0..per[o] {
                        let v = crate::value::decode(dt, &bytes[e * esize..(e + 1) * esize]);
                        let (row, col) = m.kind.coord(OPERANDS[o], lane, r, e);
                        if dt.is_float() {
                            let x = f64::from_bits(v);
                            mats[slot][row][col] = if dt == DType::F32 && o != 3 { dot::to_tf32(x) } else { x };
                        } else {
                            ints[slot][row][col] = v as i64;
                        }
                    }
                }
            }
        }
        let [a, b, c] = &mats;
        let [ai, bi, ci] = &ints;
        let d = m.bufs[0];
        let out: Vec<[u8; 4]> = (0..32 * 4)
            .map(|i| {
                let (row, col) = m.kind.coord(MmaOperand::Acc, i / 4, i % 4, 0);
                if m.kind.a.is_int() {
                    let s = (0..k).fold(ci[row][col], |s, j| s.wrapping_add(ai[row][j] * bi[j][col]));
                    (s as i32).to_le_bytes()
                } else {
                    let terms: Vec<f64> = (0..k).map(|j| a[row][j] * b[j][col]).chain([c[row][col]]).collect();
                    (dot::sum_rn_f32(&terms) as f32).to_le_bytes()
                }
            })
            .collect();
        for lane in 0..32 {
            let t = (w * 32 + lane) as u32;
            for (r, &first) in m.regs[0].iter().enumerate() {
                let e = self.bounds(d, t, first, 1, m.site, "mma.sync register write")?;
                self.write_raw(d, t, e, 1, m.site, &out[lane * 4 + r])?;
            }
        }
        Ok(())
    }
}

/// `mma.sync.m16n8k16` for messages.
fn mma_name(kind: MmaKind) -> String {
    format!("`mma.sync.aligned.{}`", kind.ptx())
}
