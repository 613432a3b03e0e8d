//! Simulator of the **pair** family: packed 16-bit pair arithmetic and pair
//! conversions, executed per thread, each pair one access of both elements.

use crate::arith;
use crate::compile::{Compile, Compiler, Reg};
use crate::error::SimError;
use crate::exec::Machine;
use crate::family::{FamilyIns, Flow};
use crate::value::{decode, encode};
use tirx_ir::lir::{LBufId, LExpr, PackedOp, PairOp, PairSrc};
use tirx_ir::DType;

/// A packed-pair source: a buffer pair or a scalar broadcast (already in the pair's dtype).
#[derive(Clone, Copy, Debug)]
pub(crate) enum PairOperand {
    Buf { buf: u32, idx: Reg },
    Scalar(Reg),
}

#[derive(Clone, Debug)]
pub(crate) struct Packed2Ins {
    pub site: u32,
    pub op: PackedOp,
    pub ty: DType,
    pub dst: u32,
    pub dst_idx: Reg,
    pub srcs: Vec<PairOperand>,
}

/// `cvt` of an element pair between f32 and f16/bf16.
#[derive(Clone, Debug)]
pub(crate) struct Cast2Ins {
    pub site: u32,
    pub dst: u32,
    pub dst_idx: Reg,
    pub src: u32,
    pub src_idx: Reg,
}

impl Compile for PairOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        match self {
            PairOp::Packed2 { op, dtype, dst, dst_index, srcs } => c.packed2(*op, *dtype, *dst, dst_index, srcs),
            PairOp::Cast2 { dst, dst_index, src, src_index } => {
                let (d, s) = (c.buf(*dst)?, c.buf(*src)?);
                let dst_idx = c.index(dst_index)?;
                let src_idx = c.index(src_index)?;
                let site = c.site();
                c.emit_family(Cast2Ins { site, dst: d, dst_idx, src: s, src_idx });
                Ok(())
            }
        }
    }
}

impl FamilyIns for Packed2Ins {
    fn name(&self) -> String {
        format!("`{}2`", self.op.name())
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        m.packed2(t, base, self)?;
        Ok(Flow::Next)
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.dst_idx);
        for s in &mut self.srcs {
            match s {
                PairOperand::Buf { idx, .. } => f(idx),
                PairOperand::Scalar(r) => f(r),
            }
        }
    }
}

impl FamilyIns for Cast2Ins {
    fn name(&self) -> String {
        "`cast2`".into()
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        let r = |reg: Reg| m.regs[base + reg as usize] as i64;
        let (di, si) = (r(self.dst_idx), r(self.src_idx));
        m.cast2(t, self.dst, di, self.src, si, self.site)?;
        Ok(Flow::Next)
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.dst_idx);
        f(&mut self.src_idx)
    }
}

impl Compiler<'_> {
    fn packed2(
        &mut self,
        op: PackedOp,
        ty: DType,
        dst: LBufId,
        dst_index: &LExpr,
        srcs: &[PairSrc],
    ) -> Result<(), SimError> {
        let d = self.buf(dst)?;
        if !matches!(ty, DType::F16 | DType::BF16) {
            return Err(self.invalid(format!("packed pair op on {ty}; only float16 and bfloat16 pairs exist")));
        }
        let want = if op == PackedOp::Fma { 3 } else { 2 };
        if srcs.len() != want {
            return Err(self.invalid(format!("packed {op:?} with {} operands (needs {want})", srcs.len())));
        }
        let mut bufs = vec![d];
        for s in srcs {
            if let PairSrc::Buf(b, _) = s {
                bufs.push(self.buf(*b)?);
            }
        }
        for b in bufs {
            let lb =
                self.k.bufs.get(b as usize).ok_or_else(|| self.invalid(format!("buffer id {b} is out of range")))?;
            if lb.dtype != ty {
                return Err(self.invalid(format!("packed {ty} op on `{}` of dtype {}", lb.name, lb.dtype)));
            }
        }
        let dst_idx = self.index(dst_index)?;
        let mut ops = vec![];
        for s in srcs {
            ops.push(match s {
                PairSrc::Buf(b, i) => PairOperand::Buf { buf: self.buf(*b)?, idx: self.index(i)? },
                PairSrc::Scalar(e) => PairOperand::Scalar(self.expr_as(e, ty)?),
            });
        }
        let site = self.site();
        self.emit_family(Packed2Ins { site, op, ty, dst: d, dst_idx, srcs: ops });
        Ok(())
    }
}

impl Machine<'_> {
    /// One element pair `[i, i+2)` as values (4-byte aligned for 16-bit pairs, 8-byte for 32-bit).
    fn read_pair(&mut self, b: u32, t: u32, idx: i64, site: u32) -> Result<[f64; 2], SimError> {
        let e = self.bounds(b, t, idx, 2, site, "pair load")?;
        let esize = self.bufs[b as usize].esize;
        self.aligned(b, t, e, 2 * esize, site, "pair load")?;
        let mut raw = [0u8; 16];
        self.read_raw(b, t, e, 2, site, &mut raw[..2 * esize])?;
        self.bank_record(b, "load", t, e, 2 * esize, site);
        let dt = self.bufs[b as usize].dtype;
        let v = |i: usize| f64::from_bits(decode(dt, &raw[i * esize..(i + 1) * esize]));
        Ok([v(0), v(1)])
    }

    fn write_pair(&mut self, b: u32, t: u32, idx: i64, vals: [u64; 2], site: u32) -> Result<(), SimError> {
        let e = self.bounds(b, t, idx, 2, site, "pair store")?;
        let (esize, dt) = (self.bufs[b as usize].esize, self.bufs[b as usize].dtype);
        self.aligned(b, t, e, 2 * esize, site, "pair store")?;
        let mut raw = [0u8; 16];
        encode(dt, vals[0], &mut raw[..esize]);
        encode(dt, vals[1], &mut raw[esize..2 * esize]);
        self.write_raw(b, t, e, 2, site, &raw[..2 * esize])?;
        self.bank_record(b, "store", t, e, 2 * esize, site);
        Ok(())
    }

    fn packed2(&mut self, t: u32, base: usize, p: &Packed2Ins) -> Result<(), SimError> {
        let mut args = [[0f64; 2]; 3];
        for (i, s) in p.srcs.iter().enumerate() {
            args[i] = match *s {
                PairOperand::Buf { buf, idx } => {
                    self.read_pair(buf, t, self.regs[base + idx as usize] as i64, p.site)?
                }
                PairOperand::Scalar(r) => [f64::from_bits(self.regs[base + r as usize]); 2],
            };
        }
        let out = [0, 1].map(|j| arith::packed(p.op, p.ty, args[0][j], args[1][j], args[2][j]).to_bits());
        self.write_pair(p.dst, t, self.regs[base + p.dst_idx as usize] as i64, out, p.site)
    }

    fn cast2(&mut self, t: u32, dst: u32, di: i64, src: u32, si: i64, site: u32) -> Result<(), SimError> {
        let (from, to) = (self.bufs[src as usize].dtype, self.bufs[dst as usize].dtype);
        let vals = self.read_pair(src, t, si, site)?;
        let out = vals.map(|v| {
            let slot = if from.is_float() { v.to_bits() } else { v as i64 as u64 };
            arith::cast(from, to, slot)
        });
        self.write_pair(dst, t, di, out, site)
    }
}
