//! The shared-memory budget (docs/tile-primitives.md §2.7): static `scope="shared"`
//! arrays over 48 KiB in all are placed in dynamic shared memory with a note at the
//! allocation that crosses 48 KiB; static + dynamic over the target's per-CTA limit is
//! a user error at the allocation that crosses it (never the CUDA generator's internal
//! error); `scope="shared.dyn"` lowers to dynamic shared memory, launches with its byte
//! count, and simulates to the right values.

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

/// Lowers `src`, which must lower: its notes, its CUDA, and B after simulating A = a pattern.
fn lowers(src: &str, n: usize) -> (Vec<Diagnostic>, tirx_cuda::CudaModule, bool) {
    let k = tirx_script::parse_kernel("k.py", src).expect("parses");
    let l = lower_kernel(&k, &LowerOptions::default()).expect("lowers");
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA");
    let a: Vec<u8> = (0..n * 128).flat_map(|i| (i as f32 * 0.25 - 3.0).to_le_bytes()).collect();
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    let report = tirx_sim::simulate(&l.lir, &mut params, &Default::default()).expect("simulates");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    (l.notes, cuda, params[1] == a)
}

#[test]
fn static_shared_memory_over_48_kib_is_placed_in_dynamic_shared_memory_with_a_note() {
    let src = kernel(128, "shared", ""); // 64 KiB
    assert!(errors(&src, Arch::SM_90A).is_empty());
    let (notes, cuda, copied) = lowers(&src, 128);
    assert!(copied, "B == A through the 64 KiB tile");
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(notes[0].severity, tirx_ir::diag::Severity::Note);
    assert_eq!(line_col(&src, notes[0].span().lo as usize), (9, 9), "at `S = T.alloc_buffer(...)`");
    assert!(notes[0].message.contains("65536 bytes") && notes[0].message.contains("dynamic shared memory"));
    assert_eq!(cuda.meta.dynamic_smem_bytes, 64 * 1024);
    assert!(
        cuda.source.contains("extern __shared__") && !cuda.source.contains("__shared__ alignas"),
        "{}",
        cuda.source
    );
    // Every `shared` buffer moves, the note is at the allocation that crosses 48 KiB.
    let two = kernel(
        64,
        "shared",
        "    S2 = T.alloc_buffer((64, 128), \"float32\", scope=\"shared\")\n    Tx.cta.copy(S2[0:64, 0:128], A[0:64, 0:128])\n",
    );
    let (notes, cuda, copied) = lowers(&two, 64);
    assert!(copied);
    assert_eq!(notes.len(), 1, "{notes:#?}");
    assert_eq!(line_col(&two, notes[0].span().lo as usize).0, 10, "at S2");
    assert_eq!(cuda.meta.dynamic_smem_bytes, 64 * 1024, "S and S2, 32 KiB each");
    // 48 KiB exactly stays static, without a note.
    let (notes, cuda, copied) = lowers(&kernel(96, "shared", ""), 96);
    assert!(copied && notes.is_empty());
    assert_eq!(cuda.meta.dynamic_smem_bytes, 0);
    assert!(cuda.source.contains("__shared__ alignas(16) float S[12288]"), "{}", cuda.source);
}

/// `rows` of 64 bf16 in a 128-byte swizzle (1 KiB repeats) per dynamic buffer, after `S`.
fn swizzled(rows: &[usize]) -> String {
    let extra: String = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            format!(
                "    X{i} = T.alloc_buffer(({r}, 64), \"bfloat16\", scope=\"shared.dyn\", \
                 layout=mma_shared_layout(\"bfloat16\", 3, ({r}, 64)))\n    Tx.cta.fill(X{i}[0:8, 0:64], 1.0)\n"
            )
        })
        .collect();
    kernel(8, "shared", &extra).replace(
        "from tvm.script.tirx import tile as Tx\n",
        "from tvm.script.tirx import tile as Tx\nfrom tvm.tirx.layout import mma_shared_layout\n",
    )
}

#[test]
fn swizzled_dynamic_buffers_are_counted_where_they_are_placed() {
    // 4 KiB of static S, then 72 + 72 + 79 KiB of swizzled dynamic buffers, each a whole number
    // of 1 KiB repeats after the last: no padding between them, 227 KiB exactly (the budget had
    // counted 896 bytes of possible padding before each).
    let fits = swizzled(&[576, 576, 632]);
    assert!(errors(&fits, Arch::SM_90A).is_empty(), "{:#?}", errors(&fits, Arch::SM_90A));
    let (_, cuda, copied) = lowers(&fits, 8);
    assert!(copied);
    assert_eq!(cuda.meta.dynamic_smem_bytes, 223 * 1024);
    assert!(cuda.source.contains("reinterpret_cast<__nv_bfloat16*>(tirx_dyn_smem + 147456)"), "{}", cuda.source);
    // One more 8-row group crosses it, at the last buffer.
    let over = swizzled(&[576, 576, 640]);
    let d = errors(&over, Arch::SM_90A);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(d[0].message.contains("233472 bytes") && d[0].message.contains("`X2`"), "{}", d[0].message);
}

#[test]
fn static_shared_memory_over_the_target_limit_is_a_user_error_at_the_allocation() {
    // 2 × 128 KiB of `shared` (moved to dynamic memory) is over sm_90's 227 KiB.
    let src = kernel(256, "shared", "    S2 = T.alloc_buffer((256, 128), \"float32\", scope=\"shared\")\n");
    let d = errors(&src, Arch::SM_90A);
    assert_eq!(d.len(), 1, "{d:#?}");
    assert!(!d[0].internal);
    assert_eq!(line_col(&src, d[0].span().lo as usize).0, 10, "at S2, which crosses 227 KiB");
    assert!(d[0].message.contains("sm_90a") && d[0].message.contains("262144 bytes"), "{}", d[0].message);
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
