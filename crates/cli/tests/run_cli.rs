//! `tirx run` / `tirx bench` on a machine without CUDA: a clear user error (exit 1),
//! never a panic or an internal error. `TIRX_CUDA_LIB_DIR` points at an empty
//! directory, which the runtime treats as authoritative for NVRTC, so the result is
//! the same on machines that do have CUDA somewhere.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn empty_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tirx-run-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn tirx_without_cuda(tag: &str, args: &[&str]) -> Output {
    let lib = empty_dir(tag);
    let out = Command::new(env!("CARGO_BIN_EXE_tirx"))
        .args(args)
        .current_dir(repo())
        .env("TIRX_CUDA_LIB_DIR", &lib)
        .env("TIRX_CACHE_DIR", &lib)
        .output()
        .expect("tirx starts");
    let _ = std::fs::remove_dir_all(&lib);
    out
}

fn assert_clear_no_cuda_error(out: &Output) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr:\n{err}");
    assert!(err.starts_with("no CUDA driver/NVRTC found"), "stderr:\n{err}");
    assert!(err.contains("TIRX_CUDA_LIB_DIR="), "names the setting that was tried:\n{err}");
    assert!(err.contains("help:"), "says how to fix it:\n{err}");
    assert!(err.contains("tirx sim"), "points at the CPU alternative:\n{err}");
    assert!(!err.contains("panicked") && !err.contains("internal error"), "stderr:\n{err}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
}

#[test]
fn run_without_cuda_exits_1_with_the_clear_message() {
    let out = tirx_without_cuda(
        "run",
        &["run", "examples/bench/tiled_copy_f32.py", "--check-sim", "--timing", "--out", "B=/tmp/never.npy"],
    );
    assert_clear_no_cuda_error(&out);
}

#[test]
fn bench_without_cuda_exits_1_with_the_clear_message() {
    let out = tirx_without_cuda("bench", &["bench", "examples/bench/ragged_copy_f32.py", "--iters", "5", "--json"]);
    assert_clear_no_cuda_error(&out);
}

#[test]
fn bench_rejects_zero_iterations_before_touching_the_gpu() {
    let out = tirx_without_cuda("iters", &["bench", "examples/bench/tiled_copy_f16.py", "--iters", "0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("--iters"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
