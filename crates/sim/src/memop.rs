//! Simulator of the **memory** family (`MemOp`, `docs/lir.md` §2.2, §2.9):
//! stores, vector copies, PTX vector loads and stores and atomics, compiled to the
//! scalar core's `Store`, `VecCopy` and `Atomic` (executed inline by `exec`, checked by
//! the memory model in `memory`).

use crate::compile::{Compile, Compiler, Ins};
use crate::error::SimError;
use tirx_ir::lir::{AtomicOp, CacheHint, MemOp, PtxDir, PtxVec, Space, ATOMIC_TYPES};

impl Compile for MemOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        match self {
            MemOp::Store { buf, index, value } => {
                let b = c.buf(*buf)?;
                let idx = c.index(index)?;
                let ty = c.k.bufs[b as usize].dtype;
                let val = c.expr_as(value, ty)?;
                let site = c.site();
                c.emit(Ins::Store { site, buf: b, idx, val });
            }
            MemOp::VecCopy { dst, dst_index, src, src_index, lanes, cache } => {
                let (d, s) = (c.buf(*dst)?, c.buf(*src)?);
                check_vec(c, d, s, *lanes)?;
                let dst_idx = c.index(dst_index)?;
                let src_idx = c.index(src_index)?;
                let site = c.site();
                let nc = *cache == CacheHint::NonCoherent;
                c.emit(Ins::VecCopy { site, dst: d, dst_idx, src: s, src_idx, lanes: *lanes, nc });
            }
            MemOp::PtxVec(p) => ptx_vec(c, p)?,
            MemOp::Atomic { op: AtomicOp::Add, buf, index, value, old } => {
                let b = c.buf(*buf)?;
                let ty = c.k.bufs[b as usize].dtype;
                if c.k.bufs[b as usize].space == Space::Local || !ATOMIC_TYPES.contains(&ty) {
                    return Err(c.invalid(format!("an atomic on `{}` ({ty})", c.k.bufs[b as usize].name)));
                }
                let idx = c.index(index)?;
                let val = c.expr_as(value, ty)?;
                let old = old.map(|v| c.var_reg(v)).transpose()?;
                let site = c.site();
                c.emit(Ins::Atomic { site, buf: b, idx, val, old });
            }
        }
        Ok(())
    }
}

/// A PTX vector `ld`/`st` is a vector copy between the register array and
/// memory; its cache hints are no-ops here, `.nc` keeps its read-only check.
fn ptx_vec(c: &mut Compiler<'_>, p: &PtxVec) -> Result<(), SimError> {
    let (m, r) = (c.buf(p.mem)?, c.buf(p.reg)?);
    let Some(lanes) = p.elems(c.k.bufs[m as usize].dtype) else {
        return Err(c.invalid(format!("a PTX access of {} bytes is not whole elements", p.bytes)));
    };
    let mem_idx = c.index(&p.mem_index)?;
    let reg_idx = c.index(&p.reg_index)?;
    let site = c.site();
    let ins = match p.dir {
        PtxDir::Ld(h) => Ins::VecCopy { site, dst: r, dst_idx: reg_idx, src: m, src_idx: mem_idx, lanes, nc: h.nc },
        PtxDir::St => Ins::VecCopy { site, dst: m, dst_idx: mem_idx, src: r, src_idx: reg_idx, lanes, nc: false },
    };
    c.emit(ins);
    Ok(())
}

fn check_vec(c: &Compiler<'_>, d: u32, s: u32, lanes: u32) -> Result<(), SimError> {
    let (db, sb) = (&c.k.bufs[d as usize], &c.k.bufs[s as usize]);
    if db.dtype != sb.dtype {
        return Err(c.invalid(format!(
            "vector copy between `{}` ({}) and `{}` ({}) of different dtypes",
            db.name, db.dtype, sb.name, sb.dtype
        )));
    }
    let bits = lanes * db.dtype.bits();
    if ![8, 16, 32, 64, 128].contains(&bits) {
        return Err(c.invalid(format!(
            "vector copy of {lanes} × {} is {bits} bits; the width must be 8, 16, 32, 64 or 128",
            db.dtype
        )));
    }
    Ok(())
}
