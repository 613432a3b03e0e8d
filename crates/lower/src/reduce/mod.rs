//! Reductions (`Tx.<scope>.sum|max|min(dst, src, axes=-1, accum=False)`;
//! docs/tile-primitives.md §3.10–§3.14, docs/numerics.md §9). Four variants:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`local_thread`] | 10 | registers at thread scope: a sequential fold per destination element |
//! | [`warp_shuffle`] | 10 | registers split over lanes: a thread-local fold, then an xor butterfly; the destination replicated over the lanes it combines |
//! | [`local_view`] | 10 | registers with a per-thread destination (MMA accumulators): a thread-local fold, and with `thread_reduce=True` a butterfly over the lanes of the reduced dims |
//! | [`shared`] | 10 | shared memory at thread/warp/warpgroup/cta scope: groups of threads, butterfly, scope barrier |
//!
//! [`call`] holds what the variants share: the family's decline rules
//! ([`ReduceRule`]), [`call::parse`] (the call's operands, normalized axes,
//! `accum`), the compute type ([`call::compute_type`]: f32 for sums of 16-bit
//! floats), identities, the combine step, the xor butterfly ([`call::butterfly`])
//! and the accumulator registers; `regs` the register reductions' common plan.
//! `mod.rs` only registers the variants.

pub(crate) mod call;
pub mod local_thread;
pub mod local_view;
mod regs;
pub mod shared;
pub mod warp_shuffle;

use crate::variant::Registry;
pub use call::ReduceRule;

pub fn register(r: &mut Registry) {
    r.register(Box::new(local_thread::LocalThread));
    r.register(Box::new(warp_shuffle::WarpShuffle));
    r.register(Box::new(local_view::LocalView));
    r.register(Box::new(shared::Shared));
}
