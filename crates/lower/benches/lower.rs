//! Parse → lower → CUDA text per example, in-process (`cargo bench -p tirx-lower`).
//! Target: under 1 ms per seed example.

use std::path::PathBuf;

fn main() {
    divan::main();
}

const EXAMPLES: &[&str] = &[
    "copy_gmem_smem.py",
    "copy_fallback.py",
    "constructs_swizzle.py",
    "constructs_loops.py",
    "bench/tiled_copy_f16.py",
    "bench/ragged_copy_f32.py",
];

fn source(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The whole pipeline a `tirx lower --emit cuda` run does in-process.
#[divan::bench(args = EXAMPLES)]
fn parse_lower_cuda(bencher: divan::Bencher, rel: &str) {
    let src = source(rel);
    bencher.bench(|| {
        let k = tirx_script::parse_kernel(rel, divan::black_box(&src)).expect("parses");
        let l = tirx_lower::lower_kernel(&k, &Default::default()).expect("lowers");
        tirx_cuda::generate(&l.lir).expect("generates").source.len()
    });
}

/// Lowering alone (HIR → LIR, dispatch included).
#[divan::bench(args = EXAMPLES)]
fn lower_only(bencher: divan::Bencher, rel: &str) {
    let src = source(rel);
    let k = tirx_script::parse_kernel(rel, &src).expect("parses");
    bencher
        .bench(|| tirx_lower::lower_kernel(divan::black_box(&k), &Default::default()).expect("lowers").lir.body.len());
}
