//! Shared-memory budget of a kernel's allocations (docs/tile-primitives.md §2.7).
//!
//! Walks the `T.alloc_buffer(..., scope="shared" | "shared.dyn")` allocations
//! in program order, each sized as the CUDA generator lays it out
//! ([`smem_array_bytes`]: storage span × element size, 16-byte aligned;
//! [`dyn_smem_array_bytes`]: 128-byte aligned for `shared.dyn`), and
//! reports at the allocation that crosses a limit:
//! * static (`scope="shared"`) over [`STATIC_SMEM_LIMIT`] (48 KiB), which CUDA
//!   refuses to compile: use `scope="shared.dyn"`;
//! * static + dynamic over what the target allows one CTA
//!   ([`Arch::max_smem_per_cta`]: 227 KiB on sm_90, 163 KiB on sm_80).
//!
//! Views alias their base and are not counted; a buffer whose storage cannot
//! be sized is reported where lowering declares it.

use crate::lay;
use tirx_ir::hir::{BufferOrigin, Kernel, MemScope};
use tirx_ir::target::{dyn_smem_array_bytes, smem_array_bytes, STATIC_SMEM_LIMIT};
use tirx_ir::{Arch, Diagnostic};

/// The diagnostics of the shared-memory budget of `k` on `arch` (none when it fits).
pub fn check(k: &Kernel, arch: Arch) -> Vec<Diagnostic> {
    let limit = arch.max_smem_per_cta();
    let (mut fixed, mut dynamic) = (0u64, 0u64);
    let mut out = Vec::new();
    let mut static_reported = false;
    let mut total_reported = false;
    for b in &k.buffers {
        if b.origin != BufferOrigin::Alloc || !b.scope.is_shared() {
            continue;
        }
        let Ok(elems) = lay::memory_span(&b.layout, &b.shape) else { continue };
        let bytes = match b.scope {
            MemScope::SharedDyn => dyn_smem_array_bytes(elems, b.dtype.bytes()),
            _ => smem_array_bytes(elems, b.dtype.bytes()),
        };
        let what = format!("`{}` ({} {}, {bytes} bytes)", b.name, fmt_dims(&b.shape), b.dtype);
        if b.scope == MemScope::Shared {
            fixed = fixed.saturating_add(bytes);
            if fixed > STATIC_SMEM_LIMIT && !static_reported {
                static_reported = true;
                out.push(
                    Diagnostic::error(
                        b.span,
                        format!(
                            "static shared memory over 48 KiB: {what} brings the kernel's `scope=\"shared\"` \
                             buffers to {fixed} bytes; CUDA allows {STATIC_SMEM_LIMIT}"
                        ),
                    )
                    .with_label("crosses the 48 KiB static shared-memory limit")
                    .with_help(format!(
                        "allocate it with `scope=\"shared.dyn\"`: dynamic shared memory, up to {} with the launch \
                         opt-in tirx sets ({arch} allows {limit} bytes per CTA in all)",
                        kib(limit)
                    )),
                );
            }
        } else {
            dynamic = dynamic.saturating_add(bytes);
        }
        let total = fixed.saturating_add(dynamic);
        if total > limit && !total_reported {
            total_reported = true;
            out.push(
                Diagnostic::error(
                    b.span,
                    format!(
                        "shared memory over the {arch} limit: {what} brings the kernel to {total} bytes \
                         ({fixed} static + {dynamic} dynamic); a CTA may use at most {limit} ({})",
                        kib(limit)
                    ),
                )
                .with_label(format!("crosses the {} per-CTA limit of {arch}", kib(limit)))
                .with_help(
                    "use smaller tiles (or fewer buffers), or target a GPU with more shared memory per CTA \
                     (`--arch sm_90a`: 227 KiB)",
                ),
            );
        }
    }
    out
}

fn kib(bytes: u64) -> String {
    format!("{} KiB", bytes / 1024)
}

fn fmt_dims(shape: &[i64]) -> String {
    shape.iter().map(i64::to_string).collect::<Vec<_>>().join(" × ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::hir::Buffer;
    use tirx_ir::{DType, Span};
    use tirx_layout::{Layout, TileLayout};

    fn alloc(name: &str, shape: &[i64], scope: MemScope, at: usize) -> Buffer {
        Buffer {
            name: name.into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
            scope,
            layout: Layout::Tile(TileLayout::row_major(shape)),
            origin: BufferOrigin::Alloc,
            span: Span::new(at, at + 1),
        }
    }

    fn kernel(bufs: Vec<Buffer>) -> Kernel {
        Kernel { name: "k".into(), params: vec![], buffers: bufs, vars: vec![], body: vec![], span: Span::default() }
    }

    #[test]
    fn the_allocation_crossing_48_kib_of_static_shared_memory_is_at_fault() {
        let k = kernel(vec![
            alloc("A", &[64, 128], MemScope::Shared, 10),  // 32 KiB
            alloc("R", &[64, 128], MemScope::Local, 20),   // registers: not counted
            alloc("B", &[32, 128], MemScope::Shared, 30),  // 48 KiB: still fits
            alloc("C", &[1], MemScope::Shared, 40),        // 48 KiB + 16
            alloc("D", &[128, 128], MemScope::Shared, 50), // reported once
        ]);
        let d = check(&k, Arch::SM_90A);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(d[0].span(), Span::new(40, 41));
        assert!(d[0].message.contains("`C` (1 float32, 16 bytes)") && d[0].message.contains("49168 bytes"));
        assert!(d[0].help.as_deref().is_some_and(|h| h.contains("scope=\"shared.dyn\"")));
        let dynamic = kernel(vec![alloc("A", &[128, 128], MemScope::SharedDyn, 10)]);
        assert!(check(&dynamic, Arch::SM_90A).is_empty(), "64 KiB of shared.dyn fits sm_90");
    }

    #[test]
    fn static_plus_dynamic_is_checked_against_the_target() {
        // 163 KiB + 48 KiB: fits sm_90 (227 KiB), not sm_80 (163 KiB).
        let k = kernel(vec![
            alloc("S", &[96, 128], MemScope::Shared, 10),
            alloc("D", &[163, 256], MemScope::SharedDyn, 20),
        ]);
        assert!(check(&k, Arch::SM_90A).is_empty());
        let d = check(&k, Arch::SM_80);
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(d[0].span(), Span::new(20, 21));
        assert!(d[0].message.contains("sm_80") && d[0].message.contains("166912"), "{}", d[0].message);
    }
}
