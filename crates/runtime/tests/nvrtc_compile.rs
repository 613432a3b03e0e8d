//! NVRTC end to end (no GPU needed): runs when NVRTC can be found (e.g.
//! `VIRTUAL_ENV=/path/to/venv-with-nvidia-cuda-nvrtc cargo test -p tirx-runtime`),
//! and says it skipped otherwise.

use tirx_runtime::libs::ensure_nvrtc_loaded;
use tirx_runtime::{compile_cached, compile_cubin, RuntimeError};

const KERNEL: &str = r#"
#include <cuda_fp16.h>
extern "C" __global__ void __launch_bounds__(128) copy_h(const __half* __restrict__ a, __half* __restrict__ b) {
    int i = blockIdx.x * 128 + threadIdx.x;
    b[i] = __hadd(a[i], __float2half(0.0f));
}
"#;

fn nvrtc_or_skip() -> bool {
    match ensure_nvrtc_loaded() {
        Ok(_) => true,
        Err(e) => {
            let why = e.to_string().lines().next().unwrap_or_default().to_string();
            assert!(!tirx_runtime::gpu_required(), "TIRX_REQUIRE_GPU=1 but NVRTC is missing: {why}");
            eprintln!("skipped (no NVRTC; TIRX_REQUIRE_GPU=1 makes this a failure): {why}");
            false
        }
    }
}

#[test]
fn compiles_to_an_sm90a_cubin_and_reports_errors_with_the_log() {
    if !nvrtc_or_skip() {
        return;
    }
    let cubin = compile_cubin(KERNEL, tirx_ir::Arch::SM_90A).expect("compiles");
    assert!(cubin.starts_with(b"\x7fELF"), "not an ELF image");

    let err = compile_cubin("extern \"C\" __global__ void k() { int x = ; }", tirx_ir::Arch::SM_90A).unwrap_err();
    let RuntimeError::Compile { log, .. } = &err else { panic!("expected a compile error, got {err:?}") };
    assert!(log.contains("expected an expression"), "{log}");
    assert!(!err.is_user_error(), "bad generated code is a tirx bug");
}

#[test]
fn second_compile_of_the_same_source_is_a_cache_hit() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tirx-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = compile_cached(KERNEL, tirx_ir::Arch::SM_90A, Some(&dir)).expect("compiles");
    assert!(!first.cached && first.cache_note.is_none(), "{:?}", first.cache_note);
    let second = compile_cached(KERNEL, tirx_ir::Arch::SM_90A, Some(&dir)).expect("cached");
    assert!(second.cached);
    assert_eq!(first.cubin, second.cubin);
    let other_arch = compile_cached(KERNEL, tirx_ir::Arch::SM_80, Some(&dir)).expect("compiles");
    assert!(!other_arch.cached, "another arch must not hit the sm_90a entry");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn more_shared_memory_than_a_cta_may_have_is_a_user_error_with_a_fix() {
    if !nvrtc_or_skip() {
        return;
    }
    let src = r#"extern "C" __global__ void big(float* a) {
        __shared__ float s[76800];
        s[threadIdx.x] = a[threadIdx.x];
        __syncthreads();
        a[threadIdx.x] = s[76799 - threadIdx.x];
    }"#;
    let err = match compile_cubin(src, tirx_ir::Arch::SM_90A) {
        Ok(_) => panic!("300 KB of static shared memory compiled"),
        Err(e) => e,
    };
    assert!(err.is_user_error(), "{err}");
    assert!(err.to_string().contains("smaller tiles"), "{err}");
}
