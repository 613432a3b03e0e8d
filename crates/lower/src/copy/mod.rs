//! Copy variants (`Tx.<scope>.copy(dst, src)`), one module each:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`gmem_smem`] | 10 | global ↔ shared, all threads of the scope active, region divisible by the threads |
//! | [`gmem_smem_predicated`] | 5 | global ↔ shared when the region does not divide over the threads: all threads, widest aligned vector, guarded last round |
//! | [`gmem_smem_peel`] | 12 | global ↔ shared rows whose misalignment keeps the plain splits below 16 B: 16-byte global vectors, narrower shared accesses, heads and tails peeled (per misalignment, chosen at run time) |
//! | [`ldstmatrix`] | 10 | shared ↔ 16-bit register fragments, warp-collective `ldmatrix`/`stmatrix` |
//! | [`reg`] | 10 | registers ↔ shared or global (one side local) |
//! | [`fallback`] | 0 | any valid copy without thread-distributed operands; one elected thread copies element by element (warns) |
//! | [`vec_forced`] `vec_16b` … `vec_256b` | forced only | one thread copies exactly one aligned vector per side with one PTX `ld`/`st` (cache hints honoured) |
//!
//! `dispatch="vec_auto"` is the group of the automatic vectorized copies
//! (`gmem_smem`, `gmem_smem_predicated`, `reg`), the reference's name for them.
//!
//! Shared helpers: [`partition`] (the `[outer, threads, vec]` split of
//! global ↔ shared copies) and [`swizzle_iter`] (the swizzle fast path).
//!
//! [`call`] holds what they share: the family's decline rules ([`CopyRule`]),
//! the copy's two regions ([`call::operands`], `validate_copy_op`; region bounds
//! are checked once per call, before dispatch, by the bounds pass), the
//! memory-pair predicate and the global ↔ shared pair ([`call::GsOperands`])
//! with its emission helpers. Each region is resolved by the one operand model
//! (the crate's `operand` module). `mod.rs` only registers the variants.

pub(crate) mod call;
pub mod fallback;
pub mod gmem_smem;
pub mod gmem_smem_peel;
pub mod gmem_smem_predicated;
pub(crate) mod guard;
pub mod ldstmatrix;
pub mod partition;
pub mod reg;
pub mod swizzle_iter;
pub mod vec_forced;

use crate::variant::{Group, Registry};
pub use call::CopyRule;
use tirx_ir::op::Family;

pub fn register(r: &mut Registry) {
    r.register(Box::new(gmem_smem::GmemSmem));
    r.register(Box::new(gmem_smem_predicated::GmemSmemPredicated));
    r.register(Box::new(gmem_smem_peel::GmemSmemPeel));
    r.register(Box::new(ldstmatrix::LdStMatrix));
    r.register(Box::new(fallback::Fallback));
    r.register(Box::new(reg::RegCopy));
    for bytes in vec_forced::WIDTHS {
        r.register(Box::new(vec_forced::VecForced::new(bytes)));
    }
    r.register_group(Group { name: "vec_auto", family: Family::Copy, members: VEC_AUTO });
}

/// The automatic vectorized copies (`dispatch="vec_auto"`): the reference's gmem_smem ∪ reg, and
/// our ragged-tile parts of it.
pub const VEC_AUTO: &[&str] = &["gmem_smem_peel", "gmem_smem", "gmem_smem_predicated", "reg"];
