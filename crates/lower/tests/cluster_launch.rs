//! Cluster launches (docs/tile-primitives.md §3.21): the target and grid rules of
//! `T.cta_id_in_cluster`, reported at the declarations they concern.

mod common;
use common::*;
use tirx_ir::Arch;
use tirx_lower::{lower_kernel, LowerOptions};

/// Each CTA of a `grid`-CTA grid in clusters of `c` writes its rank.
fn ranks(grid: usize, c: usize) -> String {
    format!(
        r#"from tvm.script import tirx as T

@T.prim_func
def ranks(B_ptr: T.handle):
    B = T.match_buffer(B_ptr, ({grid},), "int32")
    T.device_entry()
    bx = T.cta_id([{grid}])
    rank = T.cta_id_in_cluster([{c}])
    tid = T.thread_id([1])
    B[bx] = rank
"#
    )
}

fn errors_for(src: &str, arch: Arch) -> Vec<tirx_ir::Diagnostic> {
    match lower_kernel(&parse(src), &LowerOptions::for_arch(arch)) {
        Ok(l) => panic!("expected lowering for {arch} to fail, got:\n{}", l.lir),
        Err(d) => d,
    }
}

/// The source text a diagnostic points at.
fn at<'a>(d: &tirx_ir::Diagnostic, src: &'a str) -> &'a str {
    let s = d.span();
    &src[s.lo as usize..s.hi as usize]
}

#[test]
fn a_cluster_below_sm_90_is_a_user_error_at_the_cluster_declaration() {
    let src = ranks(4, 2);
    let d = errors_for(&src, Arch::SM_80);
    let text = render(&d, &src);
    assert_eq!(d.len(), 1, "{text}");
    assert!(!d[0].internal, "{text}");
    assert!(d[0].message.contains("needs sm_90") && d[0].message.contains("sm_80"), "{text}");
    assert!(text.contains("--arch sm_90a"), "{text}");
    assert!(at(&d[0], &src).contains("T.cta_id_in_cluster([2])"), "{text}");
    // sm_90 and sm_90a lower it (with `__cluster_dims__`).
    for arch in [Arch::SM_90, Arch::SM_90A] {
        let l = lower_kernel(&parse(&src), &LowerOptions::for_arch(arch))
            .unwrap_or_else(|d| panic!("{arch}:\n{}", render(&d, &src)));
        assert_eq!(l.lir.cluster, [2, 1, 1]);
    }
    // A kernel without clusters still lowers for sm_80.
    assert!(lower_kernel(&parse(&ranks(4, 1)), &LowerOptions::for_arch(Arch::SM_80)).is_ok());
}

#[test]
fn a_grid_splitting_a_cluster_is_reported_at_the_cta_id_and_names_the_axis() {
    // 6 CTAs divide into clusters of 2, but grid x (3) does not.
    let src = ranks(6, 2)
        .replace("bx = T.cta_id([6])", "bx, by = T.cta_id([3, 2])")
        .replace("B[bx] = rank", "B[by * 3 + bx] = rank");
    let d = errors_for(&src, Arch::SM_90A);
    let text = render(&d, &src);
    assert_eq!(d.len(), 1, "{text}");
    assert!(
        d[0].message.contains("not a whole number of clusters") && d[0].message.contains("(dimension x)"),
        "{text}"
    );
    assert!(at(&d[0], &src).contains("T.cta_id([3, 2])"), "{text}");
}
