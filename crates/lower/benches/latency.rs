//! Compile-latency budget (`cargo bench -p tirx-lower --bench latency`):
//! parse → lower → CUDA text in-process for every `examples/*.py` and
//! `examples/bench/*.py`, and for a generated kernel of 200 tile calls.
//! Budget: ≤ 1 ms per example, ≤ 20 ms for the 200-call kernel.

use std::path::PathBuf;

fn main() {
    divan::main();
}

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// Every example script, relative to `examples/`, sorted.
fn examples() -> Vec<String> {
    let mut out = Vec::new();
    for sub in ["", "bench"] {
        let dir = examples_dir().join(sub);
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".py") {
                out.push(if sub.is_empty() { name } else { format!("{sub}/{name}") });
            }
        }
    }
    out.sort();
    out
}

fn pipeline(name: &str, src: &str) -> usize {
    let k = tirx_script::parse_kernel(name, src).unwrap_or_else(|d| panic!("{name}: parse failed: {d:?}"));
    let l =
        tirx_lower::lower_kernel(&k, &Default::default()).unwrap_or_else(|d| panic!("{name}: lowering failed: {d:?}"));
    tirx_cuda::generate(&l.lir).unwrap_or_else(|e| panic!("{name}: CUDA generation failed: {e:?}")).source.len()
}

#[divan::bench(args = examples())]
fn example(bencher: divan::Bencher, rel: &str) {
    let src = std::fs::read_to_string(examples_dir().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    bencher.bench(|| pipeline(rel, divan::black_box(&src)));
}

/// A kernel of `calls` tile calls: global ↔ shared copies of divisible,
/// ragged (predicated) and swizzled tiles at cta and warp scope, symbolic
/// begins in cta ids, a barrier between load and store.
fn many_calls(calls: usize) -> String {
    let mut s = String::from(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout

@T.prim_func
def many_calls(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4096, 4096), "float16")
    B = T.match_buffer(B_ptr, (4096, 4096), "float16")
    T.device_entry()
    bx, by = T.cta_id([16, 16])
    tx = T.thread_id([128])
    S0 = T.alloc_buffer((64, 128), "float16", scope="shared")
    S1 = T.alloc_buffer((60, 100), "float16", scope="shared")
    S2 = T.alloc_buffer((64, 64), "float16", scope="shared", layout=ComposeLayout(3, 3, 3, TileLayout(S[(64, 64)])))
"#,
    );
    let tiles = [("S0", 64, 128, "cta"), ("S1", 60, 100, "cta"), ("S2", 64, 64, "cta"), ("S0", 64, 128, "wg")];
    for i in 0..calls / 2 {
        let (buf, h, w, scope) = tiles[i % tiles.len()];
        let row = (i % 3) as i64 * h;
        let g = format!("by * 256 + {row} : by * 256 + {}, bx * 256 : bx * 256 + {w}", row + h);
        let sreg = format!("0:{h}, 0:{w}");
        s.push_str(&format!("    Tx.{scope}.copy({buf}[{sreg}], A[{g}])\n    T.cuda.cta_sync()\n    Tx.{scope}.copy(B[{g}], {buf}[{sreg}])\n"));
    }
    s
}

#[divan::bench]
fn two_hundred_calls(bencher: divan::Bencher) {
    let src = many_calls(200);
    bencher.bench(|| pipeline("many_calls.py", divan::black_box(&src)));
}
