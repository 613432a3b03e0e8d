//! CUDA for the **synchronisation** family: `__syncthreads()`, `__syncwarp()`,
//! named barriers as inline `bar.sync` / `bar.arrive` (the id inline when
//! constant, else in a register; the thread count always an immediate), and
//! `setmaxnreg` (`docs/lir.md` §2.1, §2.12).

use crate::emit::{Ctx, Emit};
use crate::CodegenError;
use tirx_ir::hir::BarrierKind;
use tirx_ir::lir::{LExpr, SyncOp};

impl Emit for SyncOp {
    fn emit(&self, cx: &mut Ctx) -> Result<bool, CodegenError> {
        match self {
            SyncOp::Barrier(BarrierKind::Cta) => cx.line("__syncthreads();"),
            SyncOp::Barrier(BarrierKind::Warp) => cx.line("__syncwarp();"),
            SyncOp::Barrier(BarrierKind::Fence) => cx.line("__threadfence();"),
            SyncOp::GridDepWait => cx.line("asm volatile(\"griddepcontrol.wait;\" ::: \"memory\");"),
            SyncOp::GridDepLaunch => cx.line("asm volatile(\"griddepcontrol.launch_dependents;\" ::: \"memory\");"),
            SyncOp::NamedBarrier { id, threads } => cx.named_barrier("bar.sync", id, *threads)?,
            SyncOp::NamedBarrierArrive { id, threads } => cx.named_barrier("bar.arrive", id, *threads)?,
            SyncOp::SetMaxNReg { inc, regs } => {
                let dir = if *inc { "inc" } else { "dec" };
                cx.line(&format!("asm volatile(\"setmaxnreg.{dir}.sync.aligned.u32 {regs};\" ::: \"memory\");"));
            }
        }
        Ok(true)
    }
}

impl Ctx<'_> {
    /// `bar.sync id, threads` or `bar.arrive id, threads`.
    fn named_barrier(&mut self, verb: &str, id: &LExpr, threads: u32) -> Result<(), CodegenError> {
        let text = match id {
            LExpr::Int(v, _) => format!("asm volatile(\"{verb} {v}, {threads};\" ::: \"memory\");"),
            _ => {
                let id = self.e(id)?;
                format!("asm volatile(\"{verb} %0, {threads};\" :: \"r\"({id}) : \"memory\");")
            }
        };
        self.line(&text);
        Ok(())
    }
}
