//! Asynchronous copy variants (`Tx.<scope>.copy_async(dst, src, dispatch=..., **config)`),
//! one module each:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`ldgsts`] | 20 | global → shared with `cp.async` (4/8/16 B), the partition of the synchronous `gmem_smem` |
//! | [`tma_auto`] | 10 | global ↔ shared by TMA (`cp.async.bulk.tensor`), the largest legal box from the shared layout, issue loops for the rest |
//! | [`tma_explicit`] | 10 | global ↔ shared by TMA, the tensor and region as the descriptor, one instruction |
//! | [`dsmem`] | 10 | shared → a peer CTA's shared memory in the cluster (`cp.async.bulk.shared::cluster`), one bulk copy per chunk contiguous on both sides |
//!
//! An async copy only issues: the data lands when the kernel's completion
//! mechanism says so (`cp.async.commit_group` + `cp.async.wait_group` for
//! ldgsts, an mbarrier phase for TMA loads, bulk groups for TMA stores), and the
//! kernel — not the variant — writes those (the reference's contract;
//! docs/tile-primitives.md §3.17, §3.20, §8). [`tma`] holds what the TMA variants
//! share; [`call`] the family's decline rules ([`CopyAsyncRule`]) and the
//! completion mbarrier. `mod.rs` only registers the variants.

mod call;
pub mod dsmem;
pub mod ldgsts;
pub mod tma;
pub mod tma_auto;
pub mod tma_explicit;

use crate::variant::Registry;
pub use call::CopyAsyncRule;

pub fn register(r: &mut Registry) {
    r.register(Box::new(ldgsts::Ldgsts));
    r.register(Box::new(tma_auto::TmaAuto));
    r.register(Box::new(tma_explicit::TmaExplicit));
    r.register(Box::new(dsmem::Dsmem));
}
