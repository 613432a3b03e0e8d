//! Simulator of the **collective** family (warp shuffles): each lane evaluates
//! its operands and waits at the shuffle; when every lane of the member mask
//! waits at it, the warp executes it at once with PTX `shfl.sync` semantics
//! (`ShuffleMode::source_lane`). A lane outside the mask that executes it, a mask naming
//! lanes the CTA does not have, and a source lane outside the mask are errors;
//! mask lanes that exit or wait elsewhere leave the others waiting, which the
//! scheduler reports as a partial-warp collective naming them. Shuffles move
//! registers only and do not order memory.

use crate::compile::{Compile, Compiler, Reg};
use crate::error::{ranges, SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{Divergence, FamilyIns, Flow, Group};
use tirx_ir::lir::{CollectiveOp, ShuffleMode};
use tirx_ir::DType;

#[derive(Clone, Debug)]
pub(crate) struct ShuffleIns {
    pub site: u32,
    pub mode: ShuffleMode,
    pub width: u32,
    pub mask: u32,
    /// Registers: the value this lane offers, its lane / delta operand, the variable it defines.
    pub val: Reg,
    pub lane: Reg,
    pub dst: Reg,
}

impl FamilyIns for ShuffleIns {
    fn name(&self) -> String {
        format!("`shfl.sync.{}` (width {}, mask {:#010x})", self.mode.name(), self.width, self.mask)
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        Group::Warp(self.mask)
    }

    fn step(&self, m: &mut Machine<'_>, t: u32, _: usize) -> Result<Flow, SimError> {
        m.shuffle_arrive(t, self)?;
        Ok(Flow::Block)
    }

    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        m.shuffle(w, self)
    }

    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::PartialWarp,
            scope: "every lane of its mask",
            help: "a shuffle waits for every lane of its member mask at the same instruction; guard it only with a condition the whole mask agrees on, or narrow the mask",
        }
    }

    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg)) {
        f(&mut self.val);
        f(&mut self.lane);
        f(&mut self.dst)
    }
}

impl Compile for CollectiveOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        let CollectiveOp::Shuffle { var, value, mode, lane_or_delta, width, mask } = self;
        let dst = c.var_reg(*var)?;
        let ty = c.k.var(*var).dtype;
        if !width.is_power_of_two() || *width > 32 || *mask == 0 {
            return Err(c.invalid(format!("shuffle of width {width} with mask {mask:#x}")));
        }
        if c.ty(value)? != ty {
            return Err(c.invalid(format!("shuffle of a {} value into `{}`: {ty}", c.ty(value)?, c.k.var(*var).name)));
        }
        let val = c.expr(value)?;
        let lane = c.expr_as(lane_or_delta, DType::I32)?;
        let site = c.site();
        c.emit_family(ShuffleIns { site, mode: *mode, width: *width, mask: *mask, val, lane, dst });
        Ok(())
    }
}

impl Machine<'_> {
    /// Checks a lane arriving at a shuffle: it must be in the mask, and the mask
    /// must name lanes that exist.
    fn shuffle_arrive(&self, t: u32, s: &ShuffleIns) -> Result<(), SimError> {
        let w = t as usize / 32;
        let have = self.lanes(w).len() as u32;
        let existing = if have == 32 { u32::MAX } else { (1u32 << have) - 1 };
        let site = self.prog.sites[s.site as usize];
        if s.mask & !existing != 0 {
            let missing: Vec<u32> = (have..32).filter(|l| s.mask >> l & 1 == 1).collect();
            return Err(SimError::new(
                SimErrorKind::PartialWarp,
                site,
                format!(
                    "{} in warp {w}, which has only {have} lanes (the CTA has {} threads): lanes {} of the mask do not exist",
                    s.name(),
                    self.n,
                    ranges(&missing)
                ),
            )
            .help("make the CTA size a multiple of 32, or leave the missing lanes out of the mask"));
        }
        if s.mask >> (t % 32) & 1 == 0 {
            return Err(SimError::new(
                SimErrorKind::PartialWarp,
                site,
                format!("{} executes {}, whose member mask does not include its lane", self.who(t), s.name()),
            )
            .help("every lane that executes a shuffle must be in its mask; guard the shuffle or widen the mask"));
        }
        Ok(())
    }

    /// Executes a shuffle for the mask lanes of warp `w` (all waiting at it).
    fn shuffle(&mut self, w: usize, s: &ShuffleIns) -> Result<(), SimError> {
        let nr = self.prog.nregs;
        let reg = |l: u32, r: Reg| (w * 32 + l as usize) * nr + r as usize;
        let members: Vec<u32> = (0..32).filter(|l| s.mask >> l & 1 == 1).collect();
        let mut out = Vec::with_capacity(members.len());
        for &l in &members {
            let j = s.mode.source_lane(s.width, l, self.regs[reg(l, s.lane)] as i64);
            if s.mask >> j & 1 == 0 {
                return Err(self.foreign_source(w, l, j, s));
            }
            out.push(self.regs[reg(j, s.val)]);
        }
        for (&l, v) in members.iter().zip(out) {
            self.regs[reg(l, s.dst)] = v;
        }
        Ok(())
    }

    fn foreign_source(&self, w: usize, l: u32, j: u32, s: &ShuffleIns) -> SimError {
        SimError::new(
            SimErrorKind::PartialWarp,
            self.prog.sites[s.site as usize],
            format!(
                "{} by lane {l} of warp {w} in CTA ({}, {}, {}) reads lane {j}, which is not in the mask; the value is undefined on a GPU",
                s.name(),
                self.cta[0],
                self.cta[1],
                self.cta[2]
            ),
        )
        .help("put every source lane in the mask, or keep the exchange inside the masked lanes")
    }
}
