//! copy → gmem_smem_peel (docs/tile-primitives.md §3.18): ragged and misaligned
//! rows keep 16-byte global vectors — narrower shared accesses, heads and
//! tails peeled, one plan per misalignment chosen at run time — value-checked
//! in both directions over CTAs of every misalignment; and each decline.

mod common;
use common::*;
use tirx_lower::CopyRule;

const VARIANT: &str = "gmem_smem_peel";

/// A bench tile shrunk to a 2×4 grid of CTAs (odd and even CTA columns: both misalignments).
fn bench(file: &str, from: &str, to: &str) -> String {
    let src = std::fs::read_to_string(format!("{}/../../examples/bench/{file}", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert!(src.contains(from), "{file}");
    src.replace(from, to)
}

fn check_roundtrip(src: &str, dt: tirx_ir::DType, n: usize) -> tirx_lower::Lowered {
    let l = lower(src);
    let a = pattern(dt, n);
    let mut params = vec![a.clone(), vec![0u8; a.len()]];
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &Default::default()) {
        panic!("{}\n{}", render(&[e.to_diagnostic()], src), l.lir);
    }
    assert_eq!(params[1], a, "B != A\n{}", l.lir);
    l
}

#[test]
fn ragged_f16_tiles_at_odd_columns() {
    let src = bench("ragged_copy_f16.py", "M, N = 15360, 4000", "M, N = 120, 400");
    let l = check_roundtrip(&src, tirx_ir::DType::F16, 120 * 400);
    for i in 0..2 {
        let c = call(&l, i);
        assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some(VARIANT), Some(8), Some(6)), "{}", c.render());
        let t = tried(c, VARIANT);
        assert!(t.reason.contains("16 B global × 128 threads (was 8 B), 60 rows of 200 B"), "{}", t.reason);
        assert!(t.reason.contains("at 0 B off: 12 × 16 B (shared 2 × 8 B), 8 B tails per row"), "{}", t.reason);
        assert!(t.reason.contains("at 8 B off: 8 B heads, 12 × 16 B (shared 2 × 8 B) per row"), "{}", t.reason);
    }
    // The store names the partial 32-byte sectors it cannot avoid; the load has none to name.
    let sectors = |i: usize| call(&l, i).limits.iter().any(|m| m.contains("do not cover whole 32-byte sectors"));
    assert!(!sectors(0) && sectors(1), "{}\n{}", call(&l, 0).render(), call(&l, 1).render());
    let text = l.lir.to_string();
    assert!(text.contains("let mis: int32 = ((by * 24000 + bx * 100) * 2) % 16"), "{text}");
    assert!(text.contains("if mis == 0 {"), "{text}");
    // A 16-byte global vector, two 8-byte shared stores through the register stage.
    assert!(text.contains("vcopy<8> stage[0] <- A[g_off]"), "{text}");
    assert!(text.contains("vcopy<4> A_smem[s_off + 4] <- stage[4]"), "{text}");
}

#[test]
fn ragged_f32_tiles_on_96_threads() {
    let src = bench("ragged_copy_f32_96t.py", "M, N = 10000, 9000", "M, N = 100, 360");
    let l = check_roundtrip(&src, tirx_ir::DType::F32, 100 * 360);
    let c = call(&l, 0);
    assert_eq!((c.chosen.as_deref(), c.vec, c.rounds), (Some(VARIANT), Some(4), Some(12)), "{}", c.render());
    assert!(tried(c, VARIANT).reason.contains("(was 8 B), 50 rows of 360 B"), "{}", c.render());
    // The plain splits are still planned and shown.
    assert!(tried(c, "gmem_smem_predicated").accepted);
}

/// Whole tensors that no 16-byte split covers: a tail per row (or for the one run).
#[test]
fn tails_of_contiguous_runs() {
    for (g, region, dt) in [
        (vec![30, 30], vec![(0, 30), (0, 30)], "float16"),
        (vec![30, 32], vec![(0, 30), (0, 30)], "float16"),
        (vec![9, 40], vec![(0, 9), (2, 36)], "float32"),
    ] {
        let rt = RoundTrip {
            scope: "warp",
            threads: 32,
            ctas: 1,
            dtype: dt,
            g_shape: g.clone(),
            s_shape: region.iter().map(|r| r.1).collect(),
            g_region: region,
            s_layout: None,
            dispatch: None,
        };
        let l = rt.check();
        for i in 0..2 {
            assert_eq!(call(&l, i).chosen.as_deref(), Some(VARIANT), "{rt:?}\n{}", call(&l, i).render());
        }
    }
}

#[test]
fn declines_name_their_rule() {
    let rt = |g: Vec<i64>, region: Vec<(i64, i64)>, dt: &'static str, t: i64, layout: Option<&str>| RoundTrip {
        scope: "cta",
        threads: t,
        ctas: 1,
        dtype: dt,
        g_shape: g,
        s_shape: region.iter().map(|r| r.1).collect(),
        g_region: region,
        s_layout: layout.map(str::to_string),
        dispatch: None,
    };
    let swz = "ComposeLayout(2, 3, 3, TileLayout(S[(30, 32)]))";
    let cases: Vec<(RoundTrip, Rule, &str)> = vec![
        // Aligned tiles: the plain split moves 16 bytes already.
        (
            rt(vec![64, 128], vec![(0, 64), (0, 128)], "float32", 128, None),
            CopyRule::NotWider.into(),
            "already moves 16-byte",
        ),
        // 8×8 f16 of a 16×16 tensor on 32 threads: one round either way.
        (rt(vec![16, 16], vec![(0, 8), (0, 8)], "float16", 32, None), CopyRule::NotWider.into(), "not a quarter fewer"),
        // Column 3 of f16: 2-byte shared boundaries.
        (
            rt(vec![4, 32], vec![(0, 4), (3, 16)], "float16", 4, None),
            CopyRule::Alignment.into(),
            "2-byte shared boundary",
        ),
        // Rows 101 floats apart start at different alignments.
        (
            rt(vec![8, 101], vec![(0, 8), (0, 100)], "float32", 32, None),
            CopyRule::Alignment.into(),
            "start at different alignments",
        ),
        // A swizzled shared side.
        (rt(vec![30, 33], vec![(0, 30), (1, 32)], "float32", 32, Some(swz)), CopyRule::Swizzle.into(), "swizzled"),
    ];
    for (t, want, words) in cases {
        let l = t.check();
        let c = call(&l, 0);
        assert_eq!(rule(c, VARIANT), want, "{t:?}\n{}", c.render());
        assert!(tried(c, VARIANT).reason.contains(words), "`{words}`:\n{}", c.render());
    }
}
