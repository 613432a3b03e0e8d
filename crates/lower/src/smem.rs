//! Shared-memory budget of a kernel's allocations (docs/tile-primitives.md §2.7).
//!
//! Walks the `T.alloc_buffer(..., scope="shared" | "shared.dyn")` allocations
//! in program order, each sized as the CUDA generator lays it out
//! ([`smem_array_bytes`]: storage span × element size, 16-byte aligned;
//! [`dyn_smem_array_bytes`]: 128-byte aligned in dynamic shared memory):
//! * static (`scope="shared"`) buffers over [`STATIC_SMEM_LIMIT`] (48 KiB),
//!   which CUDA refuses as `__shared__` arrays, are all placed in dynamic
//!   shared memory instead, as the reference does with every shared buffer; a
//!   note at the allocation that crosses 48 KiB says so;
//! * a buffer whose layout is a TMA swizzle starts on the swizzle's repeat (256,
//!   512 or 1024 bytes): its size counts the padding that may take;
//! * static + dynamic over what the target allows one CTA
//!   ([`Arch::max_smem_per_cta`]: 227 KiB on sm_90, 163 KiB on sm_80) is an
//!   error at the allocation that crosses it.
//!
//! Views alias their base and are not counted; a buffer whose storage cannot
//! be sized is reported where lowering declares it.

use crate::lay;
use std::collections::HashSet;
use tirx_ir::hir::{BufId, BufferOrigin, Kernel, MemScope};
use tirx_ir::target::{dyn_smem_array_bytes, smem_array_bytes, DYN_SMEM_ALIGN, STATIC_SMEM_LIMIT};
use tirx_ir::{Arch, Diagnostic};

/// Where the kernel's shared buffers go, and what lowering reports about it.
#[derive(Debug, Default)]
pub struct Budget {
    /// `scope="shared"` buffers placed in dynamic shared memory (all of them, or none).
    pub made_dynamic: HashSet<BufId>,
    pub errors: Vec<Diagnostic>,
    pub notes: Vec<Diagnostic>,
}

/// The shared-memory budget of `k` on `arch`.
pub fn check(k: &Kernel, arch: Arch) -> Budget {
    let limit = arch.max_smem_per_cta();
    let mut out = Budget::default();
    // Sizes as laid out, and where each starts: `dynamic` buffers one after another in
    // allocation order, each on 128 bytes or its swizzle's repeat (as the CUDA generator places
    // them, so their padding is counted exactly); a static swizzled array counts the most
    // padding its alignment may take.
    let sizes = |moved: bool| -> Vec<(BufId, u64, u64)> {
        k.buffers
            .iter()
            .enumerate()
            .filter(|(_, b)| b.origin == BufferOrigin::Alloc && b.scope.is_shared())
            .filter_map(|(i, b)| {
                let elems = lay::memory_span(&b.layout, &b.shape).ok()?;
                let swizzle = u64::from(lay::smem_align(&b.layout, b.dtype));
                let id = BufId(i as u32);
                if moved || b.scope == MemScope::SharedDyn {
                    return Some((id, dyn_smem_array_bytes(elems, b.dtype.bytes()), swizzle.max(DYN_SMEM_ALIGN)));
                }
                Some((id, smem_array_bytes(elems, b.dtype.bytes()).saturating_add(swizzle.saturating_sub(16)), 16))
            })
            .collect()
    };
    let is_static = |id: BufId| k.buf(id).scope == MemScope::Shared;
    let static_bytes =
        |v: &[(BufId, u64, u64)]| v.iter().filter(|x| is_static(x.0)).map(|x| x.1).fold(0, u64::saturating_add);
    // The 48 KiB rule is about `__shared__` arrays (16-byte aligned); the per-CTA limit about
    // the layout the kernel gets.
    let as_static = sizes(false);
    let moved = static_bytes(&as_static) > STATIC_SMEM_LIMIT;
    let shared = sizes(moved);
    let all_static = static_bytes(&shared);
    let (mut fixed, mut dynamic, mut arrays) = (0u64, 0u64, 0u64);
    // The dynamic region's start: after the static arrays, on its largest buffer alignment.
    let mut base_align = 1u64;
    let mut crossed = false;
    for (&(id, bytes, align), &(_, array_bytes, _)) in shared.iter().zip(&as_static) {
        let b = k.buf(id);
        let what = |bytes| format!("`{}` ({} {}, {bytes} bytes)", b.name, fmt_dims(&b.shape), b.dtype);
        if is_static(id) {
            arrays = arrays.saturating_add(array_bytes);
            if arrays > STATIC_SMEM_LIMIT && !crossed {
                crossed = true;
                out.notes.push(
                    Diagnostic::note(
                        b.span,
                        format!(
                            "static shared memory over 48 KiB: {} brings the kernel's `scope=\"shared\"` \
                             buffers to {arrays} bytes; they are placed in dynamic shared memory (`extern \
                             __shared__`, {all_static} bytes, launched with the opt-in above 48 KiB)",
                            what(array_bytes)
                        ),
                    )
                    .with_label("crosses the 48 KiB of static `__shared__` arrays CUDA allows"),
                );
            }
        }
        if is_static(id) && !moved {
            fixed = fixed.saturating_add(bytes);
        } else {
            dynamic = dynamic.checked_next_multiple_of(align).unwrap_or(u64::MAX).saturating_add(bytes);
            base_align = base_align.max(align);
        }
        let total = fixed.checked_next_multiple_of(base_align).unwrap_or(u64::MAX).saturating_add(dynamic);
        if total > limit && out.errors.is_empty() {
            out.errors.push(
                Diagnostic::error(
                    b.span,
                    format!(
                        "shared memory over the {arch} limit: {} brings the kernel to {total} bytes \
                         ({fixed} `shared`, then {dynamic} `shared.dyn` from a {base_align}-byte boundary); \
                         a CTA may use at most {limit} ({})",
                        what(bytes),
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
    if moved {
        out.made_dynamic = shared.iter().map(|x| x.0).filter(|&id| is_static(id)).collect();
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
            dyn_outer: None,
            dyn_strides: None,
        }
    }

    fn kernel(bufs: Vec<Buffer>) -> Kernel {
        Kernel {
            name: "k".into(),
            params: vec![],
            buffers: bufs,
            vars: vec![],
            body: vec![],
            span: Span::default(),
            assumes: vec![],
        }
    }

    #[test]
    fn static_shared_memory_over_48_kib_becomes_dynamic_with_a_note_at_the_crossing() {
        let k = kernel(vec![
            alloc("A", &[64, 128], MemScope::Shared, 10),  // 32 KiB
            alloc("R", &[64, 128], MemScope::Local, 20),   // registers: not counted
            alloc("B", &[32, 128], MemScope::Shared, 30),  // 48 KiB: still fits
            alloc("C", &[1], MemScope::Shared, 40),        // 48 KiB + 16
            alloc("D", &[128, 128], MemScope::Shared, 50), // noted once
        ]);
        let b = check(&k, Arch::SM_90A);
        assert!(b.errors.is_empty(), "{:#?}", b.errors);
        assert_eq!(b.notes.len(), 1, "{:#?}", b.notes);
        assert_eq!(b.notes[0].span(), Span::new(40, 41));
        let m = &b.notes[0].message;
        assert!(m.contains("`C` (1 float32, 16 bytes)") && m.contains("49168 bytes"), "{m}");
        assert!(m.contains("`extern __shared__`, 114816 bytes") && m.contains("dynamic shared memory"), "{m}");
        let moved: Vec<u32> = {
            let mut v: Vec<u32> = b.made_dynamic.iter().map(|id| id.0).collect();
            v.sort_unstable();
            v
        };
        assert_eq!(moved, vec![0, 2, 3, 4], "every `shared` buffer, no register one");
        // At most 48 KiB stays static; shared.dyn alone needs nothing.
        let fits = kernel(vec![alloc("A", &[96, 128], MemScope::Shared, 10)]);
        let b = check(&fits, Arch::SM_90A);
        assert!(b.made_dynamic.is_empty() && b.notes.is_empty() && b.errors.is_empty());
        let dynamic = kernel(vec![alloc("A", &[128, 128], MemScope::SharedDyn, 10)]);
        let b = check(&dynamic, Arch::SM_90A);
        assert!(
            b.made_dynamic.is_empty() && b.notes.is_empty() && b.errors.is_empty(),
            "64 KiB of shared.dyn fits sm_90"
        );
    }

    #[test]
    fn static_plus_dynamic_is_checked_against_the_target() {
        // 163 KiB + 48 KiB: fits sm_90 (227 KiB), not sm_80 (163 KiB).
        let k = kernel(vec![
            alloc("S", &[96, 128], MemScope::Shared, 10),
            alloc("D", &[163, 256], MemScope::SharedDyn, 20),
        ]);
        assert!(check(&k, Arch::SM_90A).errors.is_empty());
        let d = check(&k, Arch::SM_80).errors;
        assert_eq!(d.len(), 1, "{d:#?}");
        assert_eq!(d[0].span(), Span::new(20, 21));
        assert!(d[0].message.contains("sm_80") && d[0].message.contains("166912"), "{}", d[0].message);
        // Static buffers moved to dynamic memory still count against the target.
        let big =
            kernel(vec![alloc("S", &[128, 256], MemScope::Shared, 10), alloc("T", &[128, 256], MemScope::Shared, 20)]);
        let b = check(&big, Arch::SM_80);
        assert_eq!(b.errors.len(), 1, "{:#?}", b.errors);
        assert_eq!(b.errors[0].span(), Span::new(20, 21), "256 KiB crosses 163 KiB at T");
        assert_eq!(b.notes.len(), 1);
    }
}
