//! What an instruction family plugs into the simulator.
//!
//! *Compiling*: every LIR family type implements [`Compile`](crate::compile::Compile)
//! in its own module; `compile` reaches it through a dispatch generated from
//! `tirx_ir::for_each_family!`, so a family without one is a compile error.
//!
//! *Executing*: the bytecode a family compiles to is either scalar core bytecode
//! (stores, vector copies: `compile::Ins`) or its own instructions,
//! `Ins::Family(Box<dyn FamilyIns>)`. The scheduler and the diagnostics know
//! nothing of them beyond [`FamilyIns`]: who executes one together ([`Group`]),
//! what a thread does on reaching it ([`FamilyIns::step`]), what its group does
//! once every member waits at it ([`FamilyIns::execute`]), and how to name it
//! and report members that never arrive.
//!
//! *State*: the families that keep state per CTA keep it in their own module;
//! [`FamilyState`] holds one of each (fresh for every CTA, parked with its CTA
//! while the other CTAs of a cluster run), and the hooks below are where the
//! scheduler wakes threads blocked on that state, explains a hang, checks an
//! exiting thread and a finished CTA.

use crate::asynch::AsyncState;
use crate::barrier::NamedState;
use crate::cluster::ClusterThreads;
use crate::compile::Reg;
use crate::error::{SimError, SimErrorKind};
use crate::exec::Machine;
use crate::fence::FenceThreads;
use crate::grid_group::GroupThreads;
use crate::griddep::GridDepThreads;
use crate::wgmma::WgState;
use std::any::Any;
use std::fmt::Debug;
use tirx_ir::lir::LKernel;

/// Who executes a family instruction together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Group {
    /// Each thread on its own, in [`FamilyIns::step`].
    Thread,
    /// The lanes of one warp whose bit is set in the member mask (all 32:
    /// `u32::MAX`), once every one of them waits at it.
    Warp(u32),
    /// The 128 threads of a warpgroup, once every one of them waits at it.
    Warpgroup,
}

/// Every lane of a warp, as a member mask.
pub(crate) const WHOLE_WARP: Group = Group::Warp(u32::MAX);

/// What the thread does after a family instruction.
pub(crate) enum Flow {
    Next,
    /// Wait here: for its group, a barrier, or a phase that has not completed.
    Block,
}

/// How a group instruction some members never reach is reported.
pub(crate) struct Divergence {
    pub kind: SimErrorKind,
    /// Who must reach it, as the message says (`every lane of its mask`).
    pub scope: &'static str,
    pub help: &'static str,
}

/// `Any` for every type, so that a family's module can recognise its own
/// instructions behind `dyn FamilyIns` ([`crate::compile::Ins::family`]).
pub(crate) trait AsAny {
    fn as_any(&self) -> &dyn Any;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A family's bytecode instruction, as the scheduler and the diagnostics see it.
pub(crate) trait FamilyIns: AsAny + Debug + 'static {
    /// The instruction as messages name it (`` `ldmatrix.x4` ``, `a named barrier (…)`).
    fn name(&self) -> String;

    /// Its site (an index into `Program::sites`); `None` when it never reports
    /// an error nor waits.
    fn site(&self) -> Option<u32>;

    /// Who executes it together.
    fn group(&self) -> Group {
        Group::Thread
    }

    /// Thread `t` (registers from `base`) reaches it: a per-thread instruction
    /// executes, a group instruction checks what this thread brings and waits.
    fn step(&self, m: &mut Machine, t: u32, base: usize) -> Result<Flow, SimError> {
        let _ = (m, t, base);
        Ok(Flow::Block)
    }

    /// Every member of its group around warp `w` waits at it: the group executes it.
    fn execute(&self, m: &mut Machine, w: usize) -> Result<(), SimError> {
        let _ = (m, w);
        Ok(())
    }

    /// How members that exit or wait elsewhere while others wait here are reported.
    fn divergence(&self) -> Divergence {
        Divergence {
            kind: SimErrorKind::PartialWarp,
            scope: "every lane",
            help: "a warp-collective instruction: all lanes must execute the same instruction; do not guard it with a lane-dependent condition",
        }
    }

    /// Calls `f` on every register it names (temporaries are renumbered after compiling).
    fn for_each_reg(&mut self, f: &mut dyn FnMut(&mut Reg));
}

/// The per-CTA state of the families that keep one.
pub(crate) struct FamilyState {
    /// cp.async groups, mbarriers, TMA bulk groups and the ordering they create (`asynch`, `tma`).
    pub asy: AsyncState,
    /// Named barriers: who waits on which id, and the ordering they create (`barrier`).
    pub named: NamedState,
    /// wgmma groups, pending registers and shared reads, register budgets (`wgmma`).
    pub wg: WgState,
    /// Cluster barrier arrivals and waits per thread (`cluster`).
    pub cluster: ClusterThreads,
    /// Grid group barriers: the CTA's wait, what it knows of the grid's CTAs (`grid_group`).
    pub group: GroupThreads,
    /// GPU-scope fences: each thread's release, the releases the CTA acquired (`fence`).
    pub fence: FenceThreads,
    /// Programmatic dependent launch: which threads passed their `griddepcontrol.wait` (`griddep`).
    pub griddep: GridDepThreads,
}

impl FamilyState {
    /// The state of a CTA of `n` threads running `k`.
    pub(crate) fn new(k: &LKernel, n: usize) -> FamilyState {
        FamilyState {
            asy: AsyncState::new(n, k.uses_mbarriers(), k.uses_tma_loads()),
            named: NamedState::new(n),
            wg: WgState::new(k, n),
            cluster: ClusterThreads::new(n),
            group: GroupThreads::new(n),
            fence: FenceThreads::new(n),
            griddep: GridDepThreads::new(k.dependent(), n),
        }
    }

    /// Fresh state for the next CTA.
    pub(crate) fn reset(&mut self) {
        self.asy.reset();
        self.named.reset();
        self.wg.reset();
        self.cluster.reset();
        self.group.reset();
        self.fence.reset();
        self.griddep.reset();
    }
}

impl Machine<'_> {
    /// Wakes the threads blocked on family state that may pass now (named
    /// barriers first, then mbarrier waits, then cluster barrier waits: each
    /// kind passes, and its threads run, before the next is looked at).
    pub(crate) fn release_family_waits(&mut self) -> Result<bool, SimError> {
        Ok(self.release_named()?
            || self.release_mbar_waits()?
            || self.release_cluster_waits()
            || self.release_group_sync()?)
    }

    /// Explains threads blocked on family state when nothing can run: an
    /// mbarrier deadlock, then a named barrier that never fills.
    pub(crate) fn diagnose_family_hang(&self) -> Option<SimError> {
        self.diagnose_mbar_deadlock().or_else(|| self.diagnose_named()).or_else(|| self.diagnose_group_hang())
    }

    /// Thread `t` exits: its asynchronous copies, bulk stores and wgmmas must be complete.
    pub(crate) fn family_exit(&mut self, t: u32) -> Result<(), SimError> {
        self.async_exit(t).and_then(|()| self.bulk_exit(t)).and_then(|()| self.wgmma_exit(t))
    }

    /// Every thread of the CTA exited: TMA loads that never landed, register budgets.
    pub(crate) fn family_end_cta(&mut self) -> Result<(), SimError> {
        if let Some(e) = self.tma_unlanded() {
            return Err(e);
        }
        self.setmaxnreg_check()
    }
}
