//! insta snapshots of the LIR and the CUDA of each example that lowers with
//! the variants registered here (examples/*.py, examples/bench/*.py).

mod common;

use std::path::PathBuf;

fn example(rel: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn snapshot(rel: &str) {
    let src = example(rel);
    let l = common::lower(&src);
    let cuda = tirx_cuda::generate(&l.lir).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let name = rel.trim_end_matches(".py").replace('/', "__");
    let warnings = common::render(&l.warnings, &src);
    insta::assert_snapshot!(format!("{name}.lir"), format!("{}\n{warnings}", l.lir));
    insta::assert_snapshot!(format!("{name}.cu"), cuda.source);
}

#[test]
fn copy_gmem_smem() {
    snapshot("copy_gmem_smem.py");
}

#[test]
fn copy_fallback() {
    snapshot("copy_fallback.py");
}

#[test]
fn constructs_loops() {
    snapshot("constructs_loops.py");
}

#[test]
fn constructs_swizzle() {
    snapshot("constructs_swizzle.py");
}

/// Fused fma and `rounding_mode=`: the LIR's rounded family and its intrinsics.
#[test]
fn ewise_rounding() {
    snapshot("ewise_rounding.py");
}

#[test]
fn bench_examples() {
    for rel in ["bench/tiled_copy_f16.py", "bench/tiled_copy_f32.py", "bench/ragged_copy_f32.py"] {
        snapshot(rel);
    }
}

/// Reductions (register butterfly, quad butterfly, shared groups with a named
/// barrier), raw collectives and elementwise on shared memory.
#[test]
fn reductions_and_collectives() {
    for rel in [
        "reduce_softmax_warp.py",
        "reduce_mma_rows.py",
        "reduce_warpgroup_shared.py",
        "collective_warp_cta.py",
        "ewise_smem_pipeline.py",
    ] {
        snapshot(rel);
    }
}

/// Scalar parameters, run-time rows and grid, a launch check (docs/tile-primitives.md §7).
#[test]
fn scalar_parameter_examples() {
    for rel in ["scale_rows.py", "copy_rows_checked.py"] {
        snapshot(rel);
    }
}

/// The Hopper GEMM: wgmma from descriptors, the full/empty mbarrier pipeline between the
/// producer and consumer warpgroups, register reallocation, the stmatrix epilogue.
#[test]
fn gemm_hopper() {
    snapshot("gemm_hopper.py");
}
