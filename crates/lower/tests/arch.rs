//! The target is a parameter of lowering: for every example and every older
//! target, lowering either succeeds (and then CUDA generation does too: `check`
//! ok ⇒ `lower` ok) with no instruction the target lacks, or
//! fails with user errors (a forced variant the target cannot run), never an
//! internal error; the variants that need a newer target say so in explain.

mod common;

use std::path::PathBuf;
use tirx_ir::Arch;
use tirx_lower::{explain_kernel, lower_kernel, LowerOptions};

const TARGETS: [Arch; 5] = [Arch::SM_100A, Arch::SM_90A, Arch::SM_90, Arch::SM_80, Arch::SM_75];

fn examples() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut files = vec![];
    for dir in [root.clone(), root.join("bench")] {
        for e in std::fs::read_dir(&dir).expect("examples dir") {
            let p = e.expect("dir entry").path();
            if p.extension().is_some_and(|x| x == "py") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() >= 20, "examples not found");
    files
}

/// ldmatrix into a fragment, stmatrix back to shared memory, then to global.
const STORE_KERNEL: &str = r#"
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

r_layout = TileLayout(S[(8, 4, 2, 2) : (4 @ laneid, 1 @ laneid, 2, 1)])
s_layout = TileLayout(S[(8, 4, 2, 2) : (16, 2, 8, 1)])
full = (slice(0, 8), slice(0, 4), slice(0, 2), slice(0, 2))


@T.prim_func
def store(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (8, 4, 2, 2), "float16", layout=s_layout)
    B = T.match_buffer(B_ptr, (8, 4, 2, 2), "float16", layout=s_layout)
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); tid = T.thread_id([32])
    A_smem = T.alloc_buffer((8, 4, 2, 2), "float16", scope="shared", layout=s_layout)
    B_smem = T.alloc_buffer((8, 4, 2, 2), "float16", scope="shared", layout=s_layout)
    Tx.warp.copy(A_smem[full], A[full])
    T.cuda.cta_sync()
    R = T.alloc_buffer((8, 4, 2, 2), "float16", scope="local", layout=r_layout)
    Tx.warp.copy(R[full], A_smem[full])
    Tx.warp.copy(B_smem[full], R[full])
    T.cuda.cta_sync()
    Tx.warp.copy(B[full], B_smem[full])
"#;

#[test]
fn no_example_emits_an_instruction_its_target_lacks() {
    for path in examples() {
        let src = std::fs::read_to_string(&path).expect("read example");
        let k = common::parse(&src);
        for arch in TARGETS {
            match lower_kernel(&k, &LowerOptions::for_arch(arch)) {
                Ok(l) => {
                    common::generates_cuda(&l, &src);
                    if let Some(s) = l.lir.first_unsupported(arch) {
                        panic!(
                            "{}: {arch} got an instruction needing {}: {:?}",
                            path.display(),
                            l.lir.min_arch(s),
                            s.kind
                        );
                    }
                }
                Err(d) => {
                    assert!(
                        arch != Arch::SM_90A,
                        "{} does not lower for sm_90a:\n{}",
                        path.display(),
                        common::render(&d, &src)
                    );
                    assert!(
                        !d.iter().any(|d| d.internal),
                        "{} on {arch}:\n{}",
                        path.display(),
                        common::render(&d, &src)
                    );
                }
            }
        }
    }
}

#[test]
fn stmatrix_declines_below_sm_90_and_another_variant_stores() {
    let src = STORE_KERNEL.to_string();
    let k = common::parse(&src);
    let (calls, lowered) = explain_kernel(&k, &LowerOptions::for_arch(Arch::SM_80));
    let lowered = lowered.unwrap_or_else(|d| panic!("{}", common::render(&d, &src)));
    assert!(lowered.lir.first_unsupported(Arch::SM_80).is_none());
    let store = &calls[2]; // B_smem <- R
    let t = store.tried.iter().find(|t| t.variant == "ldstmatrix").expect("ldstmatrix tried");
    assert_eq!(t.predicate.as_deref(), Some("arch"));
    assert_eq!(t.reason, "stmatrix needs sm_90; target is sm_80");
    assert_ne!(store.chosen.as_deref(), Some("ldstmatrix"));

    // On sm_90a the same kernel stores with stmatrix.
    let (calls, _) = explain_kernel(&k, &LowerOptions::for_arch(Arch::SM_90A));
    assert_eq!(calls[2].chosen.as_deref(), Some("ldstmatrix"), "{}", calls[2].render());
}

/// One `copy_async` of a 64×64 float16 tile into shared memory, by a CTA of 128 threads.
const ASYNC_KERNEL: &str = r#"
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), "float16")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.warp_id([4]); T.thread_id([128])
    S_ = T.alloc_buffer((64, 64), "float16", scope="shared")
    Tx.cta.copy_async(S_[0:64, 0:64], A[0:64, 0:64])
"#;

#[test]
fn every_variant_declines_below_its_minimum() {
    let k = common::parse(ASYNC_KERNEL);
    let (calls, _) = explain_kernel(&k, &LowerOptions::for_arch(Arch::MIN));
    for (variant, min) in [("ldgsts", "sm_80"), ("tma_auto", "sm_90"), ("tma_explicit", "sm_90"), ("dsmem", "sm_90")] {
        let t = calls[0].tried.iter().find(|t| t.variant == variant).expect("tried");
        assert_eq!(t.predicate.as_deref(), Some("arch"), "{variant}");
        assert_eq!(t.reason, format!("{variant} needs {min}; target is sm_75"));
    }
}

/// A TMA load by one thread, `cta_group=2`: a Blackwell (sm_100 family) form.
const TMA_PAIR_KERNEL: &str = r#"
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 64), "float16")
    T.device_entry()
    T.cta_id([1]); tid = T.thread_id([128])
    pool = T.SMEMPool()
    S_ = pool.alloc((64, 64), "float16")
    bar = MBarrier(pool, 1)
    pool.commit()
    bar.init(1)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    if tid == 0:
        Tx.copy_async(S_[0:64, 0:64], A[0:64, 0:64], dispatch="tma_auto", mbar=bar.ptr_to([0]), cta_group=2)
        T.ptx.mbarrier.arrive.expect_tx(bar.ptr_to([0]), 8192)
    bar.wait(0, 0)
"#;

/// `cta_group=2` declines by target before the sm_100 family, and on sm_100a with
/// a reason that says it is not implemented — never an arch decline there.
#[test]
fn cta_group_2_declines_by_target() {
    let k = common::parse(TMA_PAIR_KERNEL);
    let reason = |arch: Arch| {
        let (calls, _) = explain_kernel(&k, &LowerOptions::for_arch(arch));
        let t = calls[0].tried.iter().find(|t| t.variant == "tma_auto").expect("tried").clone();
        (t.predicate.unwrap_or_default(), t.reason)
    };
    assert_eq!(reason(Arch::SM_90A), ("arch".into(), "cta_group=2 needs sm_100f; target is sm_90a".into()));
    let (rule, why) = reason(Arch::SM_100A);
    assert_eq!(rule, "config", "{why}");
    assert!(why.contains("cta_group=2 (one TMA copy for a CTA pair of tcgen05 MMAs) is not implemented yet"), "{why}");
}
