//! reduce → local_thread (priority 10, docs/tile-primitives.md §3.11).
//!
//! **Accepts** `sum`, `max`, `min` at thread scope when both operands are
//! registers (`local`) without thread axes — a thread's own buffers or its
//! `.local()` views — of float32, float16, bfloat16, float64, int32, uint32 or
//! int64, reduced over any axes (negative, non-contiguous, e.g. `(0, 2)`).
//! `thread_reduce=True` declines (`config`): one thread has no other to combine with.
//!
//! **Algorithm**: the register analysis of §3.10 with one thread: each
//! destination register is a sequential fold of the source registers with its
//! kept coordinates, in row-major order of the reduced coordinates, starting
//! from the first element (`max` and `min` over 8 or more in interleaved
//! chains, `regs::chains`), in the compute type (f32 for 16-bit sums,
//! `docs/numerics.md` §9); `accum` combines the old destination last; the
//! result is converted once to the destination type.
//!
//! **Generated code** (`Tx.sum(B[0:3], A[0:2, 0:3, 0:4], axes=(0, 2))`):
//! ```text
//! unroll for k in 0..3 {
//!   acc[k] = A[k * 4]
//!   unroll for q in 1..8 { acc[k] = acc[k] + A[k * 4 + (q / 4) * 12 + q % 4] }
//! }
//! unroll for k in 0..3 { B[k] = acc[k] }
//! ```

use super::call::{accum_text, thread_reduce};
use super::regs;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::op::{ConfigKey, Family};
use tirx_layout::ExecScope;

pub struct LocalThread;

impl Variant for LocalThread {
    fn name(&self) -> &'static str {
        "local_thread"
    }
    fn priority(&self) -> u8 {
        10
    }
    fn family(&self) -> Family {
        Family::Reduce
    }
    fn honours(&self) -> &'static [ConfigKey] {
        &[ConfigKey::ThreadReduce]
    }

    fn plan(&self, cx: &CallCx) -> Result<Plan, Decline> {
        if cx.scope.kind != ExecScope::Thread {
            return Err(Decline::new(
                CommonRule::ExecScope,
                format!("local_thread runs at thread scope; this call is {} scope", cx.scope.kind),
            ));
        }
        let regs::Checked { call, ct, names } = regs::check(cx, self.name())?;
        if thread_reduce(cx) == Some(true) {
            return Err(Decline::new(
                CommonRule::Config,
                "thread_reduce=True combines across threads, but a thread-scope call has one thread",
            ));
        }
        let a = regs::analyze(cx, &call, ExecScope::Thread, 1)?;
        let p = regs::plan(&a, &call, &[], names)?;
        let summary = format!(
            "sequential: {}, in row-major order of the reduced coordinates{}, computed in {ct}{}",
            p.describe(),
            if p.chains > 1 { " (each chain's)" } else { "" },
            accum_text(&call)
        );
        let rounds = p.regs * p.fold;
        Ok(regs::to_plan(summary, p, ct, u32::MAX, rounds))
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        regs::emit_plan(plan, cx, em, "local_thread")
    }
}
