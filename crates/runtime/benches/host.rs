//! Host-side costs of the GPU path that run on every `tirx run` / `tirx bench`:
//! the CUBIN cache key (blake3 over the CUDA source), the GPU-vs-simulator
//! comparison of a 256 MiB buffer.
//! Run: `cargo bench -p tirx-runtime --bench host`.

use tirx_ir::DType;
use tirx_runtime::cache::cache_key;
use tirx_runtime::compare::{compare, Tolerance};

fn main() {
    divan::main();
}

/// A generated-CUDA-sized source (~20 KB).
fn source() -> String {
    "    *reinterpret_cast<uint4*>(&A_smem[s_off]) = *reinterpret_cast<const uint4*>(&A[g_off]);\n".repeat(220)
}

#[divan::bench]
fn cache_key_20kb_source(b: divan::Bencher) {
    let src = source();
    let opts = vec![
        "--gpu-architecture=sm_90a".to_string(),
        "-std=c++17".into(),
        "--include-path=/usr/local/cuda/include".into(),
    ];
    b.bench(|| cache_key(divan::black_box(&src), &opts, (13, 0)));
}

#[divan::bench(args = [DType::F32, DType::F16])]
fn compare_256mib_identical(b: divan::Bencher, dtype: DType) {
    let bytes: Vec<u8> = (0..256usize << 20).map(|i| (i * 7 % 251) as u8).collect();
    let other = bytes.clone();
    b.bench(|| compare(dtype, divan::black_box(&bytes), &other, Tolerance::BitExact, 8));
}

#[divan::bench]
fn compare_64m_f32_within_2_ulp(b: divan::Bencher) {
    let sim: Vec<u8> = (0..64u32 << 20).flat_map(|i| (1.0f32 + i as f32 * 1e-7).to_le_bytes()).collect();
    let gpu: Vec<u8> =
        sim.chunks(4).flat_map(|c| (u32::from_le_bytes(c.try_into().unwrap()) + 1).to_le_bytes()).collect();
    b.bench(|| compare(DType::F32, divan::black_box(&gpu), &sim, Tolerance::Ulps(2), 8));
}
