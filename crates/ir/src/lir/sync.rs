//! The **synchronisation** family: the CTA barrier (`__syncthreads`), the warp
//! barrier (`__syncwarp`), named barriers that a subset of the CTA's warps
//! reaches together (`bar.sync id, threads`) or only arrives at (`bar.arrive`),
//! the warpgroup register budget (`setmaxnreg`), and programmatic dependent
//! launch's `griddepcontrol.wait` / `.launch_dependents` (sm_90). See
//! `docs/lir.md` §2.1, §2.12.
//!
//! Typing: a named barrier's id is int32, in 1..16 when constant (0 is
//! `__syncthreads`'), its thread count a non-zero multiple of 32 no larger
//! than the CTA; `setmaxnreg` takes 24..=256 registers in steps of 8, in a CTA
//! of whole warpgroups (sm_90a).

use super::check::{Check, Checker, NAMED_BARRIERS};
use super::instr::Instr;
use super::print::Printer;
use super::wgmma::WGMMA_ARCH;
use super::{LBufId, LExpr, LKernel, LStmtKind};
use crate::dtype::DType;
use crate::hir::BarrierKind;
use crate::target::Arch;
use serde::Serialize;

/// An instruction of the synchronisation family.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum SyncOp {
    /// `__syncthreads()` (every thread of the CTA) or `__syncwarp()` (every lane of the warp).
    Barrier(BarrierKind),
    /// `bar.sync id, threads`: a named barrier that `threads` threads (whole warps)
    /// of the CTA reach together; ids 1..16 (0 is `__syncthreads`').
    NamedBarrier { id: LExpr, threads: u32 },
    /// `bar.arrive id, threads`: counts this warp's threads towards named barrier
    /// `id` without waiting (a producer signalling `bar.sync` waiters).
    NamedBarrierArrive { id: LExpr, threads: u32 },
    /// `setmaxnreg.{inc,dec}.sync.aligned.u32 regs`: the executing warpgroup's
    /// per-thread register budget (sm_90a).
    SetMaxNReg { inc: bool, regs: u32 },
    /// `griddepcontrol.wait`: waits until the grids this one depends on have completed and
    /// their writes are visible (a kernel with it is launched as a programmatic dependent of
    /// the one before it on the stream: [`super::LKernel::dependent`]).
    GridDepWait,
    /// `griddepcontrol.launch_dependents`: the dependent grid after this one may be scheduled.
    GridDepLaunch,
}

impl Instr for SyncOp {
    fn name(&self) -> String {
        match self {
            SyncOp::Barrier(BarrierKind::Cta) => "cta_sync".into(),
            SyncOp::Barrier(BarrierKind::Warp) => "warp_sync".into(),
            SyncOp::Barrier(BarrierKind::Fence) => "thread_fence".into(),
            SyncOp::NamedBarrier { .. } => "bar.sync".into(),
            SyncOp::NamedBarrierArrive { .. } => "bar.arrive".into(),
            SyncOp::SetMaxNReg { inc, .. } => format!("setmaxnreg.{}", if *inc { "inc" } else { "dec" }),
            SyncOp::GridDepWait => "griddepcontrol.wait".into(),
            SyncOp::GridDepLaunch => "griddepcontrol.launch_dependents".into(),
        }
    }

    fn min_arch(&self, _: &dyn Fn(LBufId) -> DType) -> Arch {
        match self {
            SyncOp::SetMaxNReg { .. } => WGMMA_ARCH,
            SyncOp::GridDepWait | SyncOp::GridDepLaunch => Arch::SM_90,
            SyncOp::Barrier(_) | SyncOp::NamedBarrier { .. } | SyncOp::NamedBarrierArrive { .. } => Arch::MIN,
        }
    }

    fn operands(&self) -> Vec<&LExpr> {
        match self {
            SyncOp::NamedBarrier { id, .. } | SyncOp::NamedBarrierArrive { id, .. } => vec![id],
            SyncOp::Barrier(_) | SyncOp::SetMaxNReg { .. } | SyncOp::GridDepWait | SyncOp::GridDepLaunch => vec![],
        }
    }

    fn check(&self, c: &mut Checker) -> Check {
        match self {
            SyncOp::Barrier(_) | SyncOp::GridDepWait | SyncOp::GridDepLaunch => Ok(()),
            SyncOp::NamedBarrier { id, threads } | SyncOp::NamedBarrierArrive { id, threads } => {
                c.named_barrier(id, *threads)
            }
            SyncOp::SetMaxNReg { regs, .. } => c.setmaxnreg(*regs),
        }
    }

    fn print(&self, p: &Printer) -> String {
        match self {
            SyncOp::Barrier(_) | SyncOp::GridDepWait | SyncOp::GridDepLaunch => self.name(),
            SyncOp::SetMaxNReg { regs, .. } => format!("{} {regs}", self.name()),
            SyncOp::NamedBarrier { id, threads } | SyncOp::NamedBarrierArrive { id, threads } => {
                format!("{} {}, {threads}", self.name(), p.e(id))
            }
        }
    }
}

impl LKernel {
    /// Whether the kernel waits for the grids before it (`griddepcontrol.wait`): it is launched
    /// as a programmatic dependent of the kernel before it on the stream, and may start while
    /// that one still runs (`cudaLaunchAttributeProgrammaticStreamSerialization`).
    pub fn dependent(&self) -> bool {
        let mut any = false;
        super::asynch::walk(&self.body, &mut |s| any |= matches!(s.kind, LStmtKind::Sync(SyncOp::GridDepWait)));
        any
    }
}

impl Checker<'_> {
    /// `bar.sync id, threads`: an int32 id, 1..16 when constant (0 is the barrier of
    /// `__syncthreads`), and whole warps of the CTA.
    fn named_barrier(&self, id: &LExpr, threads: u32) -> Check {
        self.expect(id, DType::I32, "named barrier id")?;
        if let LExpr::Int(v, _) = id {
            if !(1..NAMED_BARRIERS).contains(v) {
                return Err(format!(
                    "named barrier id {v} is outside 1..{NAMED_BARRIERS} (barrier 0 is `__syncthreads`')"
                ));
            }
        }
        let cta = self.k.threads_per_cta();
        if threads == 0 || !threads.is_multiple_of(32) || threads > cta {
            return Err(format!(
                "named barrier of {threads} threads: needs a multiple of 32 threads, at most the CTA's {cta}"
            ));
        }
        Ok(())
    }
}
