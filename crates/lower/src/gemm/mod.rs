//! Gemm variants (`Tx.<scope>.gemm(D, A, B, C=D, transpose_A=False,
//! transpose_B=False, alpha=None, beta=None)`: `D = alpha·A·B + beta·C`,
//! docs/tile-primitives.md §3.9) and its asynchronous form `gemm_async(D, A, B,
//! transA=False, transB=False, accum=False)` (`D = A·Bᵀ (+ D)`, issued and waited
//! for with `T.ptx.wgmma.wait_group`, §3.19). Each variant lowers one of them:
//!
//! | op | variant | prio | accepts |
//! |---|---|---|---|
//! | gemm | [`mma`] (`mma.m16n8k*`) | 10 | every operand in registers as `mma.sync` fragments, `alpha = 1`, `beta ∈ {0, 1}` |
//! | gemm_async | [`wgmma`] (`wgmma`) | 10 | D the wgmma accumulator in registers, B (and A) canonical shared tiles (A may be register fragments), sm_90a |
//!
//! [`call`] reads the call ([`call::GemmCall`]: the four regions, the transposes,
//! `alpha` and `beta` as constants) and declares the family's rules
//! ([`GemmRule`]); [`fragment`] matches register operands to the fragments of an
//! instruction. `mod.rs` only registers the variants.

mod call;
pub mod fragment;
pub mod mma;
pub mod wgmma;

use crate::variant::Registry;
pub use call::GemmRule;

pub fn register(r: &mut Registry) {
    r.register(Box::new(mma::MmaSync));
    r.register(Box::new(wgmma::WgmmaAsync));
}
