//! Simulator of the **synchronisation** family (`SyncOp`, `docs/lir.md` §2.1,
//! §2.12): what each instruction compiles to, and `__syncwarp`.
//!
//! * `__syncthreads()` is the scalar core's `CtaBarrier`: the scheduler passes
//!   it once every thread of the CTA waits there (`exec`);
//! * `__syncwarp()` is a warp instruction ([`WarpSync`]): when every lane waits
//!   at it, the warp's accesses before it are ordered before those after it;
//! * named barriers (`bar.sync`, `bar.arrive`) execute in `barrier`;
//! * `setmaxnreg` is a warpgroup instruction beside wgmma's own (`wgmma`).

use crate::barrier::{NamedArriveIns, NamedBarrierIns};
use crate::compile::{Compile, Compiler, Ins, Reg};
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::family::{Divergence, FamilyIns, Group, WHOLE_WARP};
use crate::fence::FenceIns;
use crate::griddep::GridDepIns;
use crate::wgmma::{WgOp, WgOpIns};
use tirx_ir::hir::BarrierKind;
use tirx_ir::lir::SyncOp;
use tirx_ir::DType;

impl Compile for SyncOp {
    fn compile(&self, c: &mut Compiler<'_>) -> Result<(), SimError> {
        match self {
            SyncOp::Barrier(BarrierKind::Cta) => {
                let site = c.site();
                c.emit(Ins::CtaBarrier { site });
            }
            SyncOp::Barrier(BarrierKind::Warp) => {
                let site = c.site();
                c.emit_family(WarpSync { site });
            }
            SyncOp::Barrier(BarrierKind::Fence) => {
                let site = c.site();
                c.emit_family(FenceIns { site });
            }
            SyncOp::NamedBarrier { id, threads } => {
                let id = c.expr_as(id, DType::I32)?;
                let site = c.site();
                c.emit_family(NamedBarrierIns { site, id, threads: *threads });
            }
            SyncOp::NamedBarrierArrive { id, threads } => {
                let id = c.expr_as(id, DType::I32)?;
                let site = c.site();
                c.emit_family(NamedArriveIns { site, id, threads: *threads });
            }
            SyncOp::SetMaxNReg { inc, regs } => {
                let site = c.site();
                c.emit_family(WgOpIns { site, op: WgOp::SetMaxNReg { inc: *inc, regs: *regs } });
            }
            SyncOp::GridDepWait | SyncOp::GridDepLaunch => {
                let site = c.site();
                c.emit_family(GridDepIns { site, wait: *self == SyncOp::GridDepWait });
            }
        }
        Ok(())
    }
}

/// `__syncwarp()`.
#[derive(Debug)]
pub(crate) struct WarpSync {
    site: u32,
}

impl FamilyIns for WarpSync {
    fn name(&self) -> String {
        "`__syncwarp()` (warp_sync)".into()
    }

    fn site(&self) -> Option<u32> {
        Some(self.site)
    }

    fn group(&self) -> Group {
        WHOLE_WARP
    }

    /// The warp's epoch restarts, and its lanes share what any of them acquired.
    fn execute(&self, m: &mut Machine<'_>, w: usize) -> Result<(), SimError> {
        m.wsync[w] = m.tick()?;
        let lanes = m.lanes(w);
        m.fam.asy.warp_sync(lanes);
        Ok(())
    }

    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::BarrierDivergence,
            scope: "every lane",
            help: "`__syncwarp()` waits for all lanes of the warp; do not place it under a lane-dependent condition",
        }
    }

    fn for_each_reg(&mut self, _: &mut dyn FnMut(&mut Reg)) {}
}
