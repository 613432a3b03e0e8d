//! How long CUDA generation takes (validation included) per kernel:
//! `cargo bench -p tirx-cuda --bench generate`.

#[path = "../tests/common/mod.rs"]
mod common;

use common::kernels::all_kernels;

fn main() {
    divan::main();
}

/// `generate` on each hand-built test kernel (seed copies, ldstmatrix, the dtype zoo, ...).
#[divan::bench(args = ["copy_f32_gmem_smem", "ldstmatrix", "swizzle_xor", "dtype_zoo"])]
fn generate(bencher: divan::Bencher, name: &str) {
    let (_, k) = all_kernels().into_iter().find(|(n, _)| *n == name).expect("a test kernel");
    bencher.bench(|| tirx_cuda::generate(divan::black_box(&k)).expect("generates"));
}

/// The LIR pseudo-code printer (`tirx lower --emit tir`).
#[divan::bench(args = ["copy_f32_gmem_smem", "dtype_zoo"])]
fn print_lir(bencher: divan::Bencher, name: &str) {
    let (_, k) = all_kernels().into_iter().find(|(n, _)| *n == name).expect("a test kernel");
    bencher.bench(|| divan::black_box(&k).to_string());
}
