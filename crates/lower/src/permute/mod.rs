//! Layout permutation (`Tx.warp.permute_layout(dst, src)`, the reference's
//! `permute_layout`; docs/tile-primitives.md §3.22): the same logical elements,
//! rearranged from the source's memory layout into the destination's.
//!
//! | variant | prio | accepts |
//! |---|---|---|
//! | [`warp_xor_swizzle`] | 20 | warp scope, global or shared operands of one dtype (1, 2, 4 or 8 bytes), 32·P elements with P a power of two ≤ 32, plain (unswizzled) layouts |
//!
//! [`call`] holds the family's decline rules ([`PermuteRule`]) and the
//! operands. `mod.rs` only registers the variants.

pub(crate) mod call;
pub mod warp_xor_swizzle;

use crate::variant::Registry;
pub use call::PermuteRule;

pub fn register(r: &mut Registry) {
    r.register(Box::new(warp_xor_swizzle::WarpXorSwizzle));
}
