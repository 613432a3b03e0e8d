//! Hand-built LIR kernels for each shape the copy and elementwise variants
//! produce; each generated `.cu` is an insta snapshot. With `TIRX_CU_OUT=DIR`
//! the sources are also written to `DIR/<name>.cu` for `scripts/ci-cuda.sh`.

mod common;

use common::kernels::{all_kernels, reg_copy};

#[test]
fn generated_cuda_snapshots() {
    let out_dir = std::env::var_os("TIRX_CU_OUT").map(std::path::PathBuf::from);
    if let Some(d) = &out_dir {
        std::fs::create_dir_all(d).expect("create TIRX_CU_OUT");
    }
    for (name, k) in all_kernels() {
        let m = tirx_cuda::generate(&k).unwrap_or_else(|e| panic!("{name}: {e}"));
        if let Some(d) = &out_dir {
            std::fs::write(d.join(format!("{name}.cu")), &m.source).expect("write .cu");
        }
        insta::assert_snapshot!(name, m.source);
    }
}

/// `impl Display for LKernel` (the `--emit tir` pseudo-code) of the same kernels.
#[test]
fn lir_pseudo_code_snapshots() {
    for (name, k) in all_kernels() {
        if name == "dtype_zoo" || name.starts_with("copy_f16") || name.starts_with("copy_u8") {
            continue;
        }
        insta::assert_snapshot!(format!("{name}.tir"), k.to_string());
    }
}

/// Printing is for diagnostics too, so it must not panic on broken ids.
#[test]
fn lir_pseudo_code_of_invalid_kernels_does_not_panic() {
    let mut k = reg_copy();
    k.vars.clear();
    k.bufs.truncate(1);
    k.params.push(tirx_ir::lir::LBufId(9));
    let text = k.to_string();
    assert!(text.contains("buf#9: <missing>"), "{text}");
    assert!(text.contains("var#0"), "{text}");
    assert!(text.contains("buf#3["), "{text}");
}
