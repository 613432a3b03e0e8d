//! Elementwise tile ops (`Tx.<scope>.sqrt(dst, src)`, `add`, `fma`, `cast`, ...;
//! docs/tile-primitives.md §4). Two variants:
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`reg`] | 10 | every operand in registers, the destination's thread axes tile the scope |
//! | [`smem`] | 10 | every operand in shared memory, the scope's threads share the elements, vectorized where aligned |
//!
//! [`call`] holds what the variants share: the family's decline rules
//! ([`EwiseRule`]); [`call::parse`] turns a call into an [`call::OpCall`]
//! (destination, sources in op order, unary `scale`, each read by its slot in
//! the tile-op table); [`call::f32_compute`] and [`call::rounding`] decide how an
//! op is computed and rounded ([`call::rounding_mode`] reads the call's
//! `rounding_mode=`; `docs/numerics.md` §1, §4), and [`call::scalar`] is the
//! per-element value `op(x·scale + bias)` in LIR. `mod.rs` only registers the variants.

mod call;
pub mod reg;
pub mod smem;

use crate::variant::Registry;
pub use call::EwiseRule;

pub fn register(r: &mut Registry) {
    r.register(Box::new(reg::EwiseReg));
    r.register(Box::new(smem::EwiseSmem));
}
