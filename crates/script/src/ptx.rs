//! `T.ptx.*` instructions that order Hopper's asynchronous tensor cores, move
//! registers between warpgroups and synchronise on named barriers
//! (docs/tile-primitives.md §9), spelled as the reference spells them, with or
//! without the instruction's modifiers (`T.ptx` in the `names` module):
//!
//! | script | statement |
//! |---|---|
//! | `T.ptx.wgmma.fence[.sync.aligned]()` | [`PtxStmt::WgmmaFence`] |
//! | `T.ptx.wgmma.commit_group[.sync.aligned]()` | [`PtxStmt::WgmmaCommit`] |
//! | `T.ptx.wgmma.wait_group[.sync.aligned](n)` | [`PtxStmt::WgmmaWait`] |
//! | `T.ptx.setmaxnreg.inc[.sync.aligned.u32](n)`, `.dec` | [`PtxStmt::SetMaxNReg`] |
//! | `T.ptx.bar.sync(id, threads)`, `T.ptx.bar.arrive(id, threads)` | [`PtxStmt::BarSync`], [`PtxStmt::BarArrive`] |
//! | `T.ptx.griddepcontrol.wait()`, `.launch_dependents()` | [`PtxStmt::GridDepWait`], [`PtxStmt::GridDepLaunch`] |
//!
//! The async-proxy fence that wgmma's shared operands need is one of the
//! asynchronous-copy statements (the `asynch` module's). Counts are compile-time
//! integers (PTX takes them as immediates); a barrier id is any int32 value.
//! Lowering checks what depends on the kernel (whole warpgroups, the target,
//! barrier ids).

use crate::builder::{Builder, R};
use crate::eval::Args;
use crate::value::*;
use tirx_ir::hir::*;
use tirx_ir::Diagnostic;

impl Builder<'_> {
    /// The statement of `op`, one of the instructions this module spells, from its arguments.
    pub(crate) fn ptx_sync(&mut self, op: PtxOp, a: &mut Args) -> R<PtxStmt> {
        Ok(match op {
            PtxOp::WgmmaFence => PtxStmt::WgmmaFence,
            PtxOp::WgmmaCommit => PtxStmt::WgmmaCommit,
            PtxOp::WgmmaWait => PtxStmt::WgmmaWait(self.count(a, "n", 0, 1 << 16, op)?),
            PtxOp::SetMaxNReg(inc) => PtxStmt::SetMaxNReg { inc, regs: self.count(a, "regs", 0, 1 << 16, op)? },
            PtxOp::GridDepWait => PtxStmt::GridDepWait,
            PtxOp::GridDepLaunch => PtxStmt::GridDepLaunch,
            PtxOp::BarSync | PtxOp::BarArrive => {
                let (v, vs) = a.req(self, "id")?;
                let id = self.int_expr(v, vs)?;
                let threads = self.count(a, "threads", 1, 1 << 16, op)?;
                if op == PtxOp::BarSync {
                    PtxStmt::BarSync { id, threads }
                } else {
                    PtxStmt::BarArrive { id, threads }
                }
            }
            PtxOp::CommitGroup
            | PtxOp::WaitGroup
            | PtxOp::MbarInit
            | PtxOp::MbarArrive
            | PtxOp::MbarArriveExpectTx
            | PtxOp::MbarWait
            | PtxOp::FenceProxyAsync
            | PtxOp::FenceMbarrierInit
            | PtxOp::BulkCommitGroup
            | PtxOp::BulkWaitGroup
            | PtxOp::BulkWaitGroupRead
            | PtxOp::ClusterArrive
            | PtxOp::ClusterArriveRelaxed
            | PtxOp::ClusterWait
            | PtxOp::ClusterSync
            | PtxOp::GridGroupSync => {
                let d =
                    Diagnostic::internal(a.span, format!("`{}` reached the wgmma/barrier builder", op.script_name()))
                        .with_note("it is an asynchronous-copy statement (the asynchronous-copy builder builds it)");
                return self.fail(d);
            }
        })
    }

    /// A compile-time count argument in `lo..hi` (an immediate of the instruction).
    fn count(&mut self, a: &mut Args, name: &str, lo: i64, hi: i64, op: PtxOp) -> R<u32> {
        let (v, vs) = a.req(self, name)?;
        let n = self.const_int(v, vs)?;
        if !(lo..hi).contains(&n) {
            return self.fail(
                Diagnostic::error(vs, format!("`{name}` of `{}` is {n}, outside {lo}..{hi}", op.script_name()))
                    .with_label("out of range"),
            );
        }
        Ok(n as u32)
    }
}
