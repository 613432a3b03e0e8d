//! reduce → warp_shuffle (priority 10, docs/tile-primitives.md §3.12).
//!
//! **Accepts** `sum`, `max`, `min` at warp, warpgroup or cta scope with every
//! thread active when both operands are registers whose layouts number the
//! scope's threads (`laneid`, `tid_in_wg`, `tx`), the reduced dims of the
//! source are spread over lanes of one warp (thread iters of power-of-two
//! extent and stride below 32), and the destination holds whole reductions
//! (its extents are the kept extents), or one reduction over the lanes per
//! register position (the across-threads form: a flat `(128,)` view into
//! `(4,)`), replicated over exactly those lanes — the reference's shuffle
//! pattern `S[(32, 4):(1@laneid, 1)]` → `S[4:1] + R[32:1@laneid]`, and any
//! layout the register analysis (§3.10) proves equivalent. A destination that
//! is not replicated over the combined lanes declines (`dst_replica`);
//! `thread_reduce=False` declines (`config`).
//! `accum` is honoured (the reference ignores it on this path: a silent
//! miscompile): the old destination is combined after the butterfly.
//!
//! **Algorithm**: each thread folds its own source registers per destination
//! register (row-major order, compute type of `docs/numerics.md` §9; `max` and
//! `min` over 8 or more in interleaved chains, `regs::chains`), then an
//! xor butterfly over the lane bits of the reduced thread iters, widest mask
//! first (`v = op(v, shfl.bfly(v, m))`): every lane of a group ends with the
//! same value, which is converted once to the destination type. Several
//! independent destination registers shuffle in an unrolled loop.
//!
//! **Generated code** (4 independent sums over 32 lanes):
//! ```text
//! unroll for k in 0..4 { acc[k] = A[k] }
//! unroll for k in 0..4 { let s = shfl.sync.bfly(acc[k], 16; width=32, mask=0xffffffff); acc[k] = acc[k] + s }
//! … masks 8, 4, 2, 1 …
//! unroll for k in 0..4 { B[k] = acc[k] }
//! ```

use super::call::ReduceRule;
use super::call::{accum_text, masks_text, member_mask, thread_reduce};
use super::regs;
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Variant};
use tirx_ir::op::{ConfigKey, Family};
use tirx_layout::ExecScope;

pub struct WarpShuffle;

impl Variant for WarpShuffle {
    fn name(&self) -> &'static str {
        "warp_shuffle"
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
        if a.form == regs::Form::PerThread {
            return Err(Decline::new(
                ReduceRule::ReduceLayout,
                format!(
                    "`{}` keeps the reduced dims' thread extent (one value per thread): that is `local_view`'s form",
                    names.1
                ),
            ));
        }
        if a.reduced_threads.is_empty() {
            return Err(Decline::new(
                ReduceRule::ReduceLayout,
                format!("the reduced dims of `{}` lie in each thread's registers: nothing to combine across lanes (`local_view` reduces them)", names.0),
            ));
        }
        let masks = a.lane_masks().map_err(|m| Decline::new(ReduceRule::ReduceLayout, m))?;
        if thread_reduce(cx) == Some(false) {
            return Err(Decline::new(
                CommonRule::Config,
                format!(
                    "thread_reduce=False keeps reductions in each thread, but `{}` is spread over lanes (masks {}) and `{}` holds whole reductions",
                    names.0,
                    masks_text(&masks),
                    names.1
                ),
            ));
        }
        let member = member_mask(t)?;
        let p = regs::plan(&a, &call, &masks, names)?;
        let summary = format!(
            "{}; butterfly masks {} ({} shuffles per thread), the result in every lane of a group; computed in {ct}{}; no barrier",
            p.describe(),
            masks_text(&masks),
            masks.len() as i64 * p.regs,
            accum_text(&call)
        );
        let rounds = p.regs;
        Ok(regs::to_plan(summary, p, ct, member, rounds))
    }

    fn emit(&self, plan: &Plan, cx: &CallCx, em: &mut Emitter) -> Result<(), Bug> {
        regs::emit_plan(plan, cx, em, "warp_shuffle")
    }
}
