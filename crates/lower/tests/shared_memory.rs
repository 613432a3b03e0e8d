//! The shared-memory budget (docs/tile-primitives.md §2.7): static `scope="shared"`
//! arrays over 48 KiB and static + dynamic over the target's per-CTA limit are
//! user errors at the allocation that crosses the limit (never the CUDA
//! generator's internal error); `scope="shared.dyn"` lowers to dynamic shared
//! memory, launches with its byte count, and simulates to the right values.

use tirx_ir::diag::line_col;
use tirx_ir::{Arch, Diagnostic};
use tirx_lower::{lower_kernel, LowerOptions};

/// A 128-thread CTA copies an `n`×128 f32 tile A → `S` → B; `extra` adds statements.
fn kernel(n: usize, scope: &str, extra: &str) -> String {
    format!(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def k(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({n}, 128), "float32")
    B = T.match_buffer(B_ptr, ({n}, 128), "float32")
    T.device_entry(); T.cta_id([1]); T.warp_id([4]); T.lane_id([32]); T.thread_id([128])
    S = T.alloc_buffer(({n}, 128), "float32", scope="{scope}")
{extra}    Tx.cta.copy(S[0:{n}, 0:128], A[0:{n}, 0:128])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:{n}, 0:128], S[0:{n}, 0:128])
"#
    )
}

fn errors(src: &str, arch: Arch) -> Vec<Diagnostic> {
    let k = tirx_script::parse_kernel("k.py", src).expect("parses");
    match lower_kernel(&k, &LowerOptions::for_arch(arch)) {
        Ok(_) => vec![],
        Err(d) => d,
    }
}

#[test]
fn static_shared_memory_over_48_kib_is_a_user_error_at_the_allocation() {
    let src = kernel(128, "shared", ""); // 64 KiB
    let d = errors(&src, Arch::SM_90A);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(!d[0].internal, "a user error, not `cannot generate CUDA`");
    assert_eq!(line_col(&src, d[0].span().lo as usize), (9, 9), "at `S = T.alloc_buffer(...)`");
    assert!(d[0].message.contains("65536 bytes"), "{}", d[0].message);
    assert!(d[0].help.as_deref().is_some_and(|h| h.contains("scope=\"shared.dyn\"")), "{:?}", d[0].help);
    // The allocation that crosses the limit is at fault, not the first one.
    let two = kernel(64, "shared", "    S2 = T.alloc_buffer((64, 128), \"float32\", scope=\"shared\")\n");
    let d = errors(&two, Arch::SM_90A);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert_eq!(line_col(&two, d[0].span().lo as usize).0, 10, "at S2");
    assert!(errors(&kernel(96, "shared", ""), Arch::SM_90A).is_empty(), "48 KiB exactly fits");
}

#[test]
fn shared_dyn_lowers_to_dynamic_shared_memory_and_simulates() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/copy_shared_dyn.py");
    let src = std::fs::read_to_string(&path).expect("example");
    let k = tirx_script::parse_kernel("copy_shared_dyn.py", &src).expect("parses");
    let l = lower_kernel(&k, &LowerOptions::default()).expect("lowers");
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA");
    assert_eq!(cuda.meta.dynamic_smem_bytes, 64 * 1024);
    assert!(cuda.source.contains("extern __shared__"), "{}", cuda.source);
    assert!(!cuda.source.contains("__shared__ alignas"), "no static array: {}", cuda.source);
    // B == A through the 64 KiB dynamic tile.
    let a: Vec<u8> = (0..128 * 128).flat_map(|i| (i as f32 * 0.5 - 7.0).to_le_bytes()).collect();
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    let report = tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    assert_eq!(params[1], a);
}

#[test]
fn static_plus_dynamic_is_checked_against_the_target() {
    // 48 KiB static + 128 KiB dynamic = 176 KiB: fits sm_90 (227 KiB), not sm_80 (163 KiB).
    let src = kernel(256, "shared.dyn", "    T0 = T.alloc_buffer((96, 128), \"float32\", scope=\"shared\")\n");
    assert!(errors(&src, Arch::SM_90A).is_empty());
    let d = errors(&src, Arch::SM_80);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(!d[0].internal);
    assert_eq!(line_col(&src, d[0].span().lo as usize).0, 10, "at T0, which crosses 163 KiB");
    assert!(d[0].message.contains("sm_80") && d[0].message.contains("180224 bytes"), "{}", d[0].message);
}
