//! [`LowerOptions`]: how to lower (the target, deferred bounds). A leaf:
//! every layer reads it, it reads nothing of the crate.

use tirx_ir::Arch;

/// How to lower.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LowerOptions {
    /// The target; every variant and LIR instruction states its minimum (default sm_90a).
    pub arch: Arch,
    /// Lower a region that provably leaves its buffer anyway (a warning, not an
    /// error), with a `BoundsCheck` before it, so that the simulator reports its
    /// first out-of-bounds access (`tirx sim --defer-bounds`). The kernel is for
    /// the simulator only: the GPU would read or write the wrong elements.
    pub defer_bounds: bool,
}

impl LowerOptions {
    pub fn for_arch(arch: Arch) -> LowerOptions {
        LowerOptions { arch, defer_bounds: false }
    }
}
