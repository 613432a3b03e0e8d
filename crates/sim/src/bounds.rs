//! Simulator of the **bounds** family (`BoundsCheck`, `docs/lir.md` §2.7): the
//! per-dimension check of a region against its buffer's logical shape.
//!
//! Every other access is checked against its flat array only (`memory`), which
//! cannot see a column past the end of a row: that element is the next row's.
//! Lowering proves per-dimension bounds where it can and places this check
//! before the accesses of every region it cannot prove, so the first
//! out-of-bounds element of such a region is reported here — with its
//! coordinates, the buffer, the thread and the region's source span — before
//! the accesses that follow could report anything (a race, or nothing at all).

use crate::compile::{Compile, Compiler, Reg};
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{FamilyIns, Flow};
use tirx_ir::lir::{BoundsCheck, Space};

#[derive(Clone, Debug)]
pub(crate) struct BoundsIns {
    pub site: u32,
    pub buf: u32,
    pub begins: Vec<Reg>,
    pub check: Box<BoundsCheck>,
}

impl Compile for BoundsCheck {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        let buf = c.buf(self.buf)?;
        let dims = self.shape.len();
        if dims == 0 || self.begins.len() != dims || self.extents.len() != dims {
            return Err(c.invalid(format!(
                "bounds check of `{}` with {} begins and {} extents for {dims} dims",
                self.name,
                self.begins.len(),
                self.extents.len()
            )));
        }
        let begins = self.begins.iter().map(|e| c.index(e)).collect::<Result<Vec<_>, _>>()?;
        let site = c.site();
        // The begins are evaluated here; the instruction keeps the static part.
        let check = Box::new(BoundsCheck { begins: vec![], ..self.clone() });
        c.emit_family(BoundsIns { site, buf, begins, check });
        Ok(())
    }
}

impl FamilyIns for BoundsIns {
    fn name(&self) -> String {
        format!("`bounds.{}`", self.check.verb())
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    /// Each begin `b` of the thread's region, with extent `e` in a dim of size `n`: `0 <= b`, `b + e <= n`.
    fn step(&self, m: &mut Machine<'_>, t: u32, base: usize) -> Result<Flow, SimError> {
        let c = &self.check;
        let begin = |r: &Reg| m.regs[base + *r as usize] as i64;
        let inside = self.begins.iter().zip(c.extents.iter().zip(&c.shape)).all(|(r, (&e, &n))| {
            let v = begin(r);
            v >= 0 && v.saturating_add(e) <= n
        });
        if inside {
            return Ok(Flow::Next);
        }
        let values: Vec<i64> = self.begins.iter().map(begin).collect();
        Err(m.region_outside(t, self, &values))
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        self.begins.iter_mut().for_each(f)
    }
}

impl Machine<'_> {
    /// The error of a region whose begins, as thread `t` evaluated them
    /// (`values`), leave the shape.
    #[cold]
    #[inline(never)]
    fn region_outside(&self, t: u32, b: &BoundsIns, values: &[i64]) -> SimError {
        let c = &b.check;
        let (at, d) = BoundsCheck::first_outside(values, &c.extents, &c.shape).unwrap_or((values.to_vec(), 0));
        let space = match self.bufs[b.buf as usize].space {
            Space::Global => "global",
            Space::Shared => "shared",
            Space::Local => "local",
        };
        let region: Vec<String> =
            values.iter().zip(&c.extents).map(|(v, e)| format!("{v}:{}", v.saturating_add(*e))).collect();
        SimError::new(
            SimErrorKind::OutOfBounds,
            self.prog.sites[b.site as usize],
            format!(
                "{} of element {} of `{}` ({space}, shape {}) by {}: outside dim {d} (size {}) of the region {}[{}]",
                c.verb(),
                tuple(&at),
                c.name,
                tuple(&c.shape),
                self.who(t),
                c.shape[d],
                c.name,
                region.join(", ")
            ),
        )
        .help(format!(
            "keep every index of dim {d} of `{}` in 0..{} (past the end of a row, a flat index addresses the next row)",
            c.name, c.shape[d]
        ))
    }
}

/// `(0, 32)`; one dim: `(4,)`.
fn tuple(v: &[i64]) -> String {
    let items: Vec<String> = v.iter().map(i64::to_string).collect();
    if items.len() == 1 {
        format!("({},)", items[0])
    } else {
        format!("({})", items.join(", "))
    }
}
