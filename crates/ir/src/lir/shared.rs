//! Where a kernel's shared arrays lie: the one placement the CUDA generator
//! declares, the simulator sizes and lowering's budget mirrors
//! (docs/tile-primitives.md §2.7).
//!
//! Static (`__shared__`) arrays are 16-byte aligned, more where a swizzle asks;
//! dynamic ones are carved from one `extern __shared__` array in buffer order,
//! each on 128 bytes, on its own `align`, and on the period of a swizzled wgmma
//! descriptor naming it. The dynamic region starts after the static arrays, on
//! its largest alignment: a CTA's footprint is the static bytes rounded up to it
//! plus the dynamic bytes.

use super::{LBufId, LKernel, Space};
use crate::target::{DYN_SMEM_ALIGN, SMEM_ARRAY_ALIGN};

/// The placement of a kernel's shared arrays.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SharedLayout {
    /// Static arrays in buffer order, each with its alignment.
    pub statics: Vec<(LBufId, u64)>,
    /// Their bytes, each padded to 16 and aligned.
    pub static_bytes: u64,
    /// Dynamic arrays in buffer order, each with its byte offset in the dynamic region.
    pub dynamic: Vec<(LBufId, u64)>,
    /// The dynamic region's bytes (the launch's dynamic shared memory).
    pub dynamic_bytes: u64,
    /// The dynamic region's alignment (the largest of its arrays').
    pub dynamic_align: u64,
}

impl SharedLayout {
    /// A CTA's shared memory: the static arrays, then the dynamic region on its alignment.
    pub fn total(&self) -> u64 {
        let statics = if self.dynamic.is_empty() {
            self.static_bytes
        } else {
            self.static_bytes.checked_next_multiple_of(self.dynamic_align).unwrap_or(u64::MAX)
        };
        statics.saturating_add(self.dynamic_bytes)
    }
}

impl LKernel {
    /// The placement of the shared arrays `used` says are declared.
    pub fn shared_layout(&self, used: impl Fn(LBufId) -> bool) -> SharedLayout {
        let wgmma = self.wgmma_smem_align();
        let mut out = SharedLayout { dynamic_align: DYN_SMEM_ALIGN, ..SharedLayout::default() };
        for (i, b) in self.bufs.iter().enumerate() {
            let id = LBufId(i as u32);
            if b.space != Space::Shared || !used(id) {
                continue;
            }
            let own = u64::from(b.align_bytes()).max(SMEM_ARRAY_ALIGN);
            let align = wgmma.iter().find(|(w, _)| *w == id).map_or(own, |(_, a)| (*a).max(own));
            let bytes = u64::try_from(b.elems).unwrap_or(0).saturating_mul(u64::from(b.dtype.bytes()));
            let (at, step) = if b.dynamic {
                (&mut out.dynamic_bytes, DYN_SMEM_ALIGN)
            } else {
                (&mut out.static_bytes, SMEM_ARRAY_ALIGN)
            };
            let offset = at.checked_next_multiple_of(align).unwrap_or(u64::MAX);
            *at = offset.saturating_add(bytes.checked_next_multiple_of(step).unwrap_or(u64::MAX));
            if b.dynamic {
                out.dynamic.push((id, offset));
                out.dynamic_align = out.dynamic_align.max(align);
            } else {
                out.statics.push((id, align));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lir::LBuf;
    use crate::DType;

    fn shared(name: &str, elems: i64, dynamic: bool, align: u32) -> LBuf {
        LBuf { dynamic, align, ..LBuf::flat(name, DType::F32, Space::Shared, elems) }
    }

    #[test]
    fn dynamic_buffers_follow_each_other_on_their_alignment() {
        let mut k = LKernel::new("k", [1; 3], [128, 1, 1]);
        k.bufs = vec![
            shared("a", 256, true, 1024),    // 1 KiB at 0
            shared("bar", 2, true, 0),       // 8 bytes at 1024, 128 taken
            shared("b", 512, true, 1024),    // 2 KiB: on the next 1 KiB, 896 bytes of padding
            shared("s", 5, false, 0),        // static: 20 bytes, 32 taken
            LBuf::local("r", DType::F32, 8), // registers: not placed
        ];
        let l = k.shared_layout(|_| true);
        assert_eq!(l.dynamic, vec![(LBufId(0), 0), (LBufId(1), 1024), (LBufId(2), 2048)]);
        assert_eq!((l.dynamic_bytes, l.dynamic_align), (4096, 1024));
        assert_eq!((l.statics.clone(), l.static_bytes), (vec![(LBufId(3), 16)], 32));
        assert_eq!(l.total(), 1024 + 4096, "the dynamic region after the static arrays, on 1 KiB");
        // Unused arrays are not declared, so not placed.
        let l = k.shared_layout(|id| id != LBufId(1));
        assert_eq!(l.dynamic, vec![(LBufId(0), 0), (LBufId(2), 1024)]);
        let only_static = k.shared_layout(|id| id == LBufId(3));
        assert_eq!(only_static.total(), 32);
    }
}
