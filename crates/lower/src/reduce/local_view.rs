//! reduce → local_view (priority 10, docs/tile-primitives.md §3.13).
//!
//! **Accepts** `sum`, `max`, `min` at warp, warpgroup or cta scope with every
//! thread active when both operands are registers whose layouts number the
//! scope's threads, and the destination holds one value per thread:
//! * whole reductions of dims that lie in each thread's registers
//!   (`wg_local_layout(16)` → `wg_local_layout(1)` over `axes=-1`), or
//! * the reference's view form for MMA accumulators: the destination keeps
//!   each reduced dim with the extent of the threads it is spread over
//!   (`(16, 128)` → `(16, 4)`: a row's 128 columns over 4 lanes of a quad).
//!   Without `thread_reduce` each element is its thread's partial; with
//!   `thread_reduce=True` a butterfly over the reduced dims' lane bits (a quad:
//!   masks 2, 1) gives every lane the whole row. In place
//!   (`Tx.warp.sum(red, red, thread_reduce=True)`) only the butterfly remains.
//!
//! The register analysis of §3.10 proves each plan element by element. `accum`
//! is honoured with and without the butterfly: the old destination is
//! combined after it (the reference skips `accum` without `thread_reduce`).
//!
//! **Algorithm**: per destination register a thread-local fold (row-major,
//! compute type of `docs/numerics.md` §9; `max` and `min` over 8 or more in
//! interleaved chains, `regs::chains`), then the butterfly if asked, then
//! `accum`, converted once to the destination type.
//!
//! **Generated code** (row sums of a 16×128 accumulator, `thread_reduce=True`):
//! ```text
//! unroll for k in 0..2 {
//!   acc[k] = A[k * 2]
//!   unroll for q in 1..32 { acc[k] = acc[k] + A[k * 2 + (q / 2) * 4 + q % 2] }
//! }
//! unroll for k in 0..2 { let s = shfl.sync.bfly(acc[k], 2; …); acc[k] = acc[k] + s }
//! unroll for k in 0..2 { let s = shfl.sync.bfly(acc[k], 1; …); acc[k] = acc[k] + s }
//! unroll for k in 0..2 { B[k] = acc[k] }
//! ```

use super::call::ReduceRule;
use super::call::{accum_text, masks_text, member_mask, thread_reduce};
use super::regs;
use crate::variant::{Bug, CallCx, Decline, Emitter, Plan, Variant};
use tirx_ir::op::{ConfigKey, Family};
use tirx_layout::ExecScope;

pub struct LocalView;

impl Variant for LocalView {
    fn name(&self) -> &'static str {
        "local_view"
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
        let t = cx.cooperating_threads(&[ExecScope::Warp, ExecScope::Warpgroup, ExecScope::Cta])?;
        let regs::Checked { call, ct, names } = regs::check(cx, self.name())?;
        let a = regs::analyze(cx, &call, cx.scope.kind, t)?;
        let shuffle = thread_reduce(cx) == Some(true);
        let (masks, what) = match a.form {
            regs::Form::Whole if !a.reduced_threads.is_empty() => {
                return Err(Decline::new(
                    ReduceRule::ReduceLayout,
                    format!(
                        "`{}` holds whole reductions of dims spread over lanes: that is `warp_shuffle`'s form (or keep the reduced dims' thread extent in `{}` for per-thread values)",
                        names.1, names.1
                    ),
                ))
            }
            regs::Form::Whole => (vec![], "each thread reduces its own registers".to_string()),
            regs::Form::PerThread if shuffle => {
                let m = a.lane_masks().map_err(|m| Decline::new(ReduceRule::ReduceLayout, m))?;
                let text = format!("thread_reduce: butterfly masks {} across the reduced dims' lanes", masks_text(&m));
                (m, text)
            }
            regs::Form::PerThread => (vec![], "per-thread partials (no thread_reduce: no shuffle)".to_string()),
            regs::Form::AcrossThreads => {
                return Err(Decline::new(
                    ReduceRule::ReduceLayout,
                    format!(
                        "`{}` keeps the reduced dims' register extent (one reduction over the lanes per register position): that is `warp_shuffle`'s form",
                        names.1
                    ),
                ))
            }
        };
        let member = member_mask(t)?;
        let p = regs::plan(&a, &call, &masks, names)?;
        let summary = format!("{}; {what}; computed in {ct}{}; no barrier", p.describe(), accum_text(&call));
        let rounds = p.regs;
        Ok(regs::to_plan(summary, p, ct, member, rounds))
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        regs::emit_plan(plan, cx, em, "local_view")
    }
}
