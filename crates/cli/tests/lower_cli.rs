//! `tirx lower` and `tirx explain` end to end on the examples.

use std::path::PathBuf;
use std::process::{Command, Output};

fn example(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(rel)
}

fn tirx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tirx")).args(args).output().expect("tirx runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn lower_emits_tir_and_cuda() {
    let f = example("copy_gmem_smem.py");
    let out = tirx(&["lower", f.to_str().unwrap(), "--emit", "tir"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let tir = text(&out.stdout);
    assert!(tir.contains("vcopy<4> A_smem[off] <- A[off]"), "{tir}");

    let dir = std::env::temp_dir().join(format!("tirx_lower_cli_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cu, meta) = (dir.join("k.cu"), dir.join("k.json"));
    let out = tirx(&[
        "lower",
        f.to_str().unwrap(),
        "--emit",
        "cuda",
        "-o",
        cu.to_str().unwrap(),
        "--meta",
        meta.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let src = std::fs::read_to_string(&cu).unwrap();
    assert!(src.contains("__global__") && src.contains("float4"), "{src}"); // (float32: float4 moves)
    let m: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&meta).unwrap()).unwrap();
    assert_eq!(m["block"], serde_json::json!([32, 1, 1]));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn lower_prints_fallback_warnings() {
    let out = tirx(&["lower", example("copy_fallback.py").to_str().unwrap()]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("warning: copy/fallback (scalar) picked"), "{err}");
    assert!(err.contains("copy_fallback.py:21:5"), "{err}");
}

#[test]
fn meta_needs_cuda() {
    let out = tirx(&["lower", example("copy_gmem_smem.py").to_str().unwrap(), "--meta", "x.json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--meta needs --emit cuda"));
}

#[test]
fn explain_text_and_json() {
    let f = example("copy_fallback.py");
    let out = tirx(&["explain", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("declines gmem_smem"), "{t}");
    assert!(t.contains("region size 24 not divisible by thread_cnt=32"), "{t}");
    assert!(t.contains("=> fallback"), "{t}");

    let out = tirx(&["explain", f.to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let calls = j.as_array().unwrap();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0]["op"], "copy");
    assert_eq!(calls[0]["scope"], "warp");
    assert_eq!(calls[0]["chosen"], "fallback");
    assert_eq!(calls[0]["span"]["line"], 21);
    let tried = calls[0]["tried"].as_array().unwrap();
    let verdict = |v: &str| tried.iter().find(|t| t["variant"] == v).map(|t| t["accepted"].clone());
    // Trial order: priority descending (gmem_smem_peel 12 first).
    assert_eq!(tried[0]["variant"], "gmem_smem_peel");
    assert_eq!(tried[1]["variant"], "gmem_smem");
    assert_eq!(verdict("gmem_smem"), Some(serde_json::json!(false)));
    assert_eq!(verdict("fallback"), Some(serde_json::json!(true)));
    // dispatch="fallback" in the example: the other variants are still planned and shown.
    assert_eq!(calls[0]["forced"], "fallback");
    assert_eq!(verdict("gmem_smem_predicated"), Some(serde_json::json!(true)));
    let skipped = |v: &str| tried.iter().find(|t| t["variant"] == v).and_then(|t| t.get("skipped").cloned());
    assert_eq!(skipped("gmem_smem_predicated"), Some(serde_json::json!(true)));
    assert_eq!(skipped("fallback"), None);
}

#[test]
fn explain_gmem_smem_reports_vec_and_limits() {
    let out = tirx(&["explain", example("bench/tiled_copy_f16.py").to_str().unwrap(), "--json"]);
    assert!(out.status.success());
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j[0]["chosen"], "gmem_smem");
    assert_eq!(j[0]["vec"], 8);
    assert_eq!(j[0]["rounds"], 8);
}

#[test]
fn unlowerable_call_is_a_user_error() {
    // Elementwise ops have register and shared-memory variants: on global memory nothing applies.
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def k(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 8), "float32")
    T.device_entry()
    T.cta_id([1]); T.lane_id([32]); T.thread_id([32])
    S = T.alloc_buffer((32, 8), "float32", scope="shared")
    Tx.warp.copy(S[0:32, 0:8], A[0:32, 0:8])
    Tx.warp.sqrt(A[0:32, 0:8], A[0:32, 0:8])
"#;
    let dir = std::env::temp_dir().join(format!("tirx-unlowerable-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("k.py");
    std::fs::write(&f, src).unwrap();
    let out = tirx(&["lower", f.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(err.contains("error: no lowering variant applies to this `sqrt` at warp scope"), "{err}");
    assert!(err.contains("k.py:11:5"), "{err}");
    assert!(err.contains("operand `A` is in global memory"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explain_sim_shows_bank_conflicts_per_call() {
    // Seed 000: lanes read 16-byte pieces of rows 32 bytes apart: lanes l and l+4 of a
    // quarter-warp hit the same banks (2-way).
    let out = tirx(&["explain", example("copy_reg.py").to_str().unwrap(), "--sim"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("bank: load from `A_smem`: 2-way conflicts at worst"), "{t}");
    // The 128B-swizzled ldmatrix/stmatrix example is conflict-free.
    let out = tirx(&["explain", example("ldstmatrix_swizzle_x4.py").to_str().unwrap(), "--sim", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let ld = j.as_array().unwrap().iter().find(|c| c["chosen"] == "ldstmatrix").expect("an ldstmatrix call");
    assert_eq!(ld["bank"][0]["kind"], "ldmatrix");
    assert_eq!(ld["bank"][0]["worst_ways"], 1);
}

/// The examples that need sm_90 or sm_90a (wgmma, setmaxnreg, TMA, clusters).
const HOPPER_ONLY: [&str; 8] = [
    "gemm_hopper.py",
    "gemm_mma_tma.py",
    "tma_copy.py",
    "tma_copy_f16.py",
    "tma_copy_f32.py",
    "tma_multicast.py",
    "multicast_pipeline.py",
    "dsmem_exchange.py",
];

/// `check` ok ⇔ `lower` ok, for every example and target; an unknown target is a user error.
#[test]
fn check_agrees_with_lower_on_every_example_and_target() {
    let mut files: Vec<PathBuf> = vec![];
    for dir in [example(""), example("bench")] {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "py") {
                files.push(p);
            }
        }
    }
    assert!(files.len() >= 20);
    for arch in ["sm_90a", "sm_80"] {
        for f in &files {
            let f = f.to_str().unwrap();
            let check = tirx(&["check", f, "--arch", arch]);
            let lower = tirx(&["lower", f, "--emit", "cuda", "--arch", arch]);
            assert_eq!(check.status.code(), lower.status.code(), "{f} on {arch}: {}", text(&lower.stderr));
            // Hopper-only examples (wgmma, setmaxnreg, TMA) are a user error elsewhere, naming the target.
            if arch != "sm_90a" && HOPPER_ONLY.iter().any(|h| f.ends_with(h)) {
                assert_eq!(check.status.code(), Some(1), "{f} on {arch}");
                assert!(text(&check.stderr).contains("needs sm_90"), "{f}: {}", text(&check.stderr));
                continue;
            }
            assert_eq!(check.status.code(), Some(0), "{f} on {arch}: {}", text(&check.stderr));
            let cuda = text(&lower.stdout);
            if arch == "sm_80" {
                assert!(!cuda.contains("stmatrix.sync"), "{f}: stmatrix emitted for sm_80");
            }
        }
    }
    let out = tirx(&["check", files[0].to_str().unwrap(), "--arch", "sm_9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("expected sm_<major><minor>[f|a]"), "{}", text(&out.stderr));
}

#[test]
fn explain_names_the_target_and_arch_declines() {
    let f = example("ldstmatrix_wg_trans.py");
    let out = tirx(&["explain", f.to_str().unwrap(), "--arch", "sm_80"]);
    let s = text(&out.stdout);
    assert!(s.contains("stmatrix needs sm_90; target is sm_80"), "{s}{}", text(&out.stderr));
    // CUDA 13 compiles for sm_75 and newer: an older target is a user error naming the ones it takes.
    let out = tirx(&["explain", f.to_str().unwrap(), "--arch", "sm_70"]);
    assert_eq!(out.status.code(), Some(1));
    let e = text(&out.stderr);
    assert!(e.contains("`sm_70` is older than sm_75, the oldest target CUDA 13 compiles for"), "{e}");
}

/// A warp copy under `if w >= 1` is cooperative (explain shows the narrowed range it used);
/// forced to the fallback, every command prints its warning exactly once.
#[test]
fn narrowed_copy_and_warnings_once() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
def w1(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (96, 32), "float32")
    B = T.match_buffer(B_ptr, (96, 32), "float32")
    T.device_entry(); T.cta_id([1]); T.lane_id([32]); w = T.warp_id([4]); T.thread_id([128])
    S1 = T.alloc_buffer((96, 32), "float32", scope="shared")
    if w >= 1:
        Tx.warp.copy(S1[(w - 1) * 32: (w - 1) * 32 + 32, 0:32], A[(w - 1) * 32: (w - 1) * 32 + 32, 0:32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:96, 0:32], S1[0:96, 0:32])
"#;
    let dir = std::env::temp_dir().join(format!("tirx-narrowed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("w1.py");
    std::fs::write(&f, src).unwrap();
    let out = tirx(&["explain", f.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let t = text(&out.stdout);
    assert!(t.contains("  ranges: w in [1, 3]\n"), "{t}");
    assert!(t.contains("=> gmem_smem, vec 4, 8 rounds"), "{t}");
    assert!(!text(&out.stderr).contains("warning"), "{}", text(&out.stderr));

    let forced = src.replace(", 0:32])\n    T.cuda", ", 0:32], dispatch=\"fallback\")\n    T.cuda");
    std::fs::write(&f, forced).unwrap();
    let p = f.to_str().unwrap();
    for args in [
        vec!["check", p],
        vec!["explain", p],
        vec!["explain", p, "--sim"],
        vec!["lower", p, "--emit", "cuda"],
        vec!["sim", p],
    ] {
        let out = tirx(&args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        let err = text(&out.stderr);
        assert_eq!(err.matches("warning: copy/fallback").count(), 1, "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn explain_shows_reduction_plans() {
    // Each reduction's variant, per-thread elements, butterfly masks or group size, and barrier.
    let out = tirx(&["explain", example("reduce_warpgroup_shared.py").to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("chosen   shared       (prio 10): groups of 32 threads (min(next_pow2(40) = 64, 32, 128 threads)), 4 reductions per step, 16 steps; each lane folds 2 elements strided by 32; butterfly masks 16, 8, 4, 2, 1 in float32; barrier: bar.sync 1 + wg_id, 128"), "{s}");
    let out = tirx(&["explain", example("reduce_softmax_warp.py").to_str().unwrap(), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let sum = j.as_array().unwrap().iter().find(|c| c["op"] == "sum").unwrap();
    assert_eq!(sum["chosen"], "warp_shuffle");
    let tried = sum["tried"].as_array().unwrap();
    let why = |v: &str| tried.iter().find(|t| t["variant"] == v).unwrap()["reason"].as_str().unwrap().to_string();
    assert!(why("warp_shuffle").contains("per thread 32 source elements into 1 destination register, each a fold of 32 registers; butterfly masks 16, 8, 4, 2, 1"), "{}", why("warp_shuffle"));
    assert_eq!(tried.iter().find(|t| t["variant"] == "local_view").unwrap()["predicate"], "reduce_layout");
}

#[test]
fn lower_ptxas_prints_what_ptxas_says_costs_speed() {
    let f = example("gemm_mma_tma.py");
    let out = tirx(&["lower", f.to_str().unwrap(), "--ptxas"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("--ptxas needs --emit cuda"), "{}", text(&out.stderr));
    if let Err(e) = tirx_runtime::libs::ensure_nvrtc_loaded() {
        assert!(!tirx_runtime::gpu_required(), "TIRX_REQUIRE_GPU=1 but NVRTC is missing: {e}");
        eprintln!("skipped the NVRTC part (no NVRTC)");
        return;
    }
    let cu = std::env::temp_dir().join(format!("tirx_lower_ptxas_{}.cu", std::process::id()));
    let out = tirx(&["lower", f.to_str().unwrap(), "--emit", "cuda", "--ptxas", "-o", cu.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    // The mma.sync GEMM example keeps a value on the stack under the runtime's --fmad=false.
    let err = text(&out.stderr);
    assert!(err.contains("warning: ptxas: Registers are spilled to local memory in function 'gemm_mma_tma'"), "{err}");
    let out = tirx(&[
        "lower",
        example("copy_gmem_smem.py").to_str().unwrap(),
        "--emit",
        "cuda",
        "--ptxas",
        "-o",
        cu.to_str().unwrap(),
    ]);
    assert!(out.status.success() && !text(&out.stderr).contains("ptxas"), "{}", text(&out.stderr));
    std::fs::remove_file(&cu).ok();
}
