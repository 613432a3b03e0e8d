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

/// 48 floats live at once where `__launch_bounds__(1024, 2)` allows 32 registers a thread.
const SPILLS: &str = r#"
extern "C" __global__ void __launch_bounds__(1024, 2) spills(const float* __restrict__ a, float* __restrict__ b) {
    float v[48];
#pragma unroll
    for (int i = 0; i < 48; ++i) v[i] = a[threadIdx.x + i * 1024];
#pragma unroll
    for (int j = 1; j < 4; ++j) {
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < 48; ++i) s += v[i] * v[(i * j + 7) % 48];
        b[threadIdx.x + j * 1024] = s;
    }
}
"#;

#[test]
fn ptxas_spills_are_reported_by_the_compile_and_by_a_cache_hit() {
    if !nvrtc_or_skip() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("tirx-cache-warn-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let first = compile_cached(SPILLS, tirx_ir::Arch::SM_90A, Some(&dir)).expect("compiles");
    assert!(!first.cached && first.cache_note.is_none(), "{:?}", first.cache_note);
    assert_eq!(first.warnings.len(), 1, "{:?}", first.warnings);
    assert!(
        first.warnings[0].starts_with("ptxas: Registers are spilled to local memory in function 'spills'"),
        "{:?}",
        first.warnings
    );
    let second = compile_cached(SPILLS, tirx_ir::Arch::SM_90A, Some(&dir)).expect("cached");
    assert!(second.cached);
    assert_eq!(second.warnings, first.warnings);
    let clean = compile_cached(KERNEL, tirx_ir::Arch::SM_90A, Some(&dir)).expect("compiles");
    assert!(clean.warnings.is_empty(), "{:?}", clean.warnings);
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
