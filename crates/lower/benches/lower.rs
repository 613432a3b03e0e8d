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

/// A kernel of `n` warp reductions (each declares a scratch buffer and five shuffle
/// results, the names generation must keep unique).
fn many_calls(n: usize) -> String {
    let mut s = String::from(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid


@T.prim_func
def many_calls(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32,), "float32")
    B = T.match_buffer(B_ptr, (1,), "float32")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([32])
    X = T.alloc_buffer((32,), "float32", scope="local", layout=TileLayout(S[32 : 1 @ laneid]))
    M = T.alloc_buffer((1,), "float32", scope="local", layout=TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    Tx.warp.copy(X[0:32], A[0:32])
"#,
    );
    for i in 0..n {
        s.push_str(if i % 2 == 0 {
            "    Tx.warp.max(M[0:1], X[0:32])\n"
        } else {
            "    Tx.warp.sum(M[0:1], X[0:32])\n"
        });
    }
    s.push_str("    B[0] = M[0]\n");
    s
}

/// CUDA generation alone over 1k, 4k and 16k tile calls: time per call must stay flat
/// (issue 27: generation was quadratic, 16k calls over 120 s).
#[divan::bench(args = [1000, 4000, 16000], sample_count = 3, sample_size = 1)]
fn cuda_of_many_calls(bencher: divan::Bencher, n: usize) {
    let src = many_calls(n);
    let k = tirx_script::parse_kernel("many_calls.py", &src).expect("parses");
    let l = tirx_lower::lower_kernel(&k, &Default::default()).expect("lowers");
    bencher
        .counter(divan::counter::ItemsCount::new(n))
        .bench(|| tirx_cuda::generate(divan::black_box(&l.lir)).expect("generates").source.len());
}

/// Lowering alone over the same kernels.
#[divan::bench(args = [1000, 4000, 16000], sample_count = 3, sample_size = 1)]
fn lower_many_calls(bencher: divan::Bencher, n: usize) {
    let src = many_calls(n);
    let k = tirx_script::parse_kernel("many_calls.py", &src).expect("parses");
    bencher
        .counter(divan::counter::ItemsCount::new(n))
        .bench(|| tirx_lower::lower_kernel(divan::black_box(&k), &Default::default()).expect("lowers").lir.body.len());
}
