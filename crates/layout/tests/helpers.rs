//! Hand-derived cases of the layout operations and helpers the reference's users
//! call (`tile_to`, `group_many`, `permute_by_groups`, `storage`, `from_iters`,
//! `mma_*`, `tcgen05_atom_layout`, `wg_local_layout`). Each expected value was
//! worked out by hand from the reference algorithm (docs/layout-model.md §2.5,
//! §2.10–§2.13); the comments show the derivation.

use tirx_layout::{
    mma_atom_layout, mma_atom_shape, mma_shared_layout, parse_layout, tcgen05_atom_layout, wg_local_layout, Axis,
    ComposeLayout, Coord, Fusion, Injectivity, Iter, Layout, LayoutError, SwizzleMode, Tcgen05Shape, TileLayout,
};

fn layout(src: &str) -> Layout {
    parse_layout(src).unwrap_or_else(|e| panic!("{}", e.render(src)))
}

fn tile(src: &str) -> TileLayout {
    match layout(src) {
        Layout::Tile(t) => t,
        other => panic!("{src} is not a TileLayout: {other}"),
    }
}

fn coord(pairs: &[(Axis, i64)]) -> Coord {
    pairs.iter().copied().collect()
}

fn is_bad_argument(e: &LayoutError, op_: &str, arg_: &str) -> bool {
    matches!(e, LayoutError::BadArgument { op, arg, .. } if *op == op_ && *arg == arg_)
}

// ---------------------------------------------------------------- tile_to

#[test]
fn tile_to_is_tile_by_the_row_major_grid() {
    // Reference test_tile_to: S[(8,8):(8,1)].tile_to([64,64],[8,8]) == tile(self, [8,8], [8,8]).
    let l = tile("S[(8, 8):(8, 1)]");
    let t = l.tile_to(&[64, 64], &[8, 8], Fusion::None).unwrap();
    assert_eq!(t, l.tile(&l, &[8, 8], &[8, 8], Fusion::None).unwrap());
    // inner 64:1 grouped (8,8):(8,1), span 64; outer S[(8,8)] scaled (8,8):(512,64);
    // per dimension outer then inner: (8,512),(8,8),(8,64),(8,1); nothing chains.
    assert_eq!(t.to_string(), "S[(8, 8, 8, 8):(512, 8, 64, 1)]");
}

#[test]
fn tile_to_of_a_swizzled_tile_twice() {
    // The smem layout of the reference's test_copy_g2s_s2g last task.
    let c = layout("ComposeLayout(3, 3, 3, TileLayout(S[8, 64]))");
    // Tile (8,64):(64,1) canonical 512:1, grouped (8,64):(64,1), span 512; grid S[(2,2)] = 4:1 grouped
    // (2,2):(2,1), scaled (2,2):(1024,512): (2,1024),(8,64),(2,512),(64,1).
    let once = c.tile_to(&[16, 128], &[8, 64], Fusion::None).unwrap();
    assert_eq!(once.to_string(), "ComposeLayout(3, 3, 3, S[(2, 8, 2, 64):(1024, 64, 512, 1)])");
    // Grouped by [16,128]: (2,1024),(8,64) | (2,512),(64,1); span 1 + 1024 + 448 + 512 + 63 = 2048;
    // grid (2,2) scaled (4096, 2048).
    let twice = once.tile_to(&[32, 256], &[16, 128], Fusion::None).unwrap();
    assert_eq!(twice.to_string(), "ComposeLayout(3, 3, 3, S[(2, 2, 8, 2, 2, 64):(4096, 1024, 64, 2048, 512, 1)])");
    // The swizzle applies to the tiled address: element (17, 130) of 32×256.
    let m = twice.tile().apply(&[17, 130], &[32, 256]).unwrap()[&Axis::M];
    // (17,130): row digits (1, 0, 1), column digits (1, 0, 2) → 4096 + 0 + 64 + 2048 + 0 + 2 = 6210.
    assert_eq!(m, 6210);
    let sw = twice.swizzle().unwrap();
    assert_eq!(twice.apply(&[17, 130], &[32, 256]).unwrap(), coord(&[(Axis::M, sw.apply(6210))]));
}

#[test]
fn tile_to_builds_the_mma_fragments() {
    // A_FRAG = A_FRAG_K8.tile_to([16,16],[16,8]): canonical (2,32,2):(2,1@laneid,1), grouped [16,8]
    // → (2,2),(8,4@laneid) | (4,1@laneid),(2,1); span m = 4; grid S[(1,2)] → (1,8),(2,4).
    let a = tile("S[(2,8,4,2):(2, 4@laneid, 1@laneid, 1)]").tile_to(&[16, 16], &[16, 8], Fusion::None).unwrap();
    assert_eq!(a.to_string(), "S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)]");
    // B_FRAG = B_FRAG_K8.tile_to([16,8],[8,8]): grouped [8,8] → (4,1@laneid),(2,1) | (8,4@laneid);
    // span m = 2; grid S[(2,1)] → (2,2),(1,2).
    let b = tile("S[(4,2,8):(1@laneid, 1, 4@laneid)]").tile_to(&[16, 8], &[8, 8], Fusion::None).unwrap();
    assert_eq!(b.to_string(), "S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)]");
    // Element (9, 11): row digits (1, 1) → m 2, laneid 4; column digits (1, 1, 1) → m 4, laneid 1, m 1.
    assert_eq!(a.apply(&[9, 11], &[16, 16]).unwrap(), coord(&[(Axis::LaneId, 5), (Axis::M, 7)]));
    // Fusion at the warp scope leaves laneid as it is.
    assert_eq!(tile("S[(2,8,4,2):(2, 4@laneid, 1@laneid, 1)]").tile_to(&[16, 16], &[16, 8], Fusion::Cuda).unwrap(), a);
}

#[test]
fn tile_to_rejects_partial_tiles_and_rank_mismatches() {
    let l = tile("S[(8, 8):(8, 1)]");
    let e = l.tile_to(&[60, 64], &[8, 8], Fusion::None).unwrap_err();
    assert!(is_bad_argument(&e, "tile_to", "shape"), "{e}");
    assert!(e.to_string().contains("dimension 0 (60) is not a multiple of the atom extent 8"), "{e}");
    assert!(matches!(l.tile_to(&[64, 64], &[64], Fusion::None), Err(LayoutError::RankMismatch { .. })));
    // The atom shape must be one the layout admits.
    assert!(matches!(l.tile_to(&[64, 64], &[4, 4], Fusion::None), Err(LayoutError::ShapeMismatch { .. })));
}

#[test]
fn reference_shard_layout_case() {
    // test_shard_layout.case_mma_layout: S[(1,2):(2,1)] tiled by the 8×4 lane grid.
    let warp = tile("S[(8, 4):(4@laneid, 1@laneid)]");
    let res = tile("S[(1, 2):(2, 1)]").tile(&warp, &[8, 4], &[1, 2], Fusion::None).unwrap();
    assert_eq!(res, tile("S[(32, 2):(1@laneid, 1)]").canonicalize(Fusion::None).unwrap());
}

// ---------------------------------------------------------------- group_many

#[test]
fn group_many_minimal_common_refinement() {
    let (g, seps) = tile("S[30:1]").group_many(&[vec![6, 5], vec![2, 15]]).unwrap();
    assert_eq!(g, tile("S[(2, 3, 5):(15, 5, 1)]"));
    assert_eq!(seps, vec![vec![0, 2, 3], vec![0, 1, 3]]);
}

#[test]
fn group_many_keeps_repeated_boundaries_as_unit_iters() {
    // Boundaries 1,1,6,6,30,30 and 1,2,2,6,30: common 1,1,2,2,6,6,30,30.
    let (g, seps) = tile("S[30:1]").group_many(&[vec![1, 6, 1, 5, 1], vec![2, 1, 3, 5]]).unwrap();
    assert_eq!(g, tile("S[(1, 2, 1, 3, 1, 5, 1):(30, 15, 15, 5, 5, 1, 1)]"));
    assert_eq!(seps, vec![vec![0, 1, 4, 5, 6, 7], vec![0, 2, 3, 4, 7]]);
}

#[test]
fn group_many_keeps_existing_unit_iter_strides() {
    let l = tile("S[(6, 1, 5):(5, 97, 1)]");
    let (g, seps) = l.group_many(&[vec![6, 1, 5], vec![30]]).unwrap();
    assert_eq!(g, l);
    assert_eq!(seps, vec![vec![0, 1, 2, 3], vec![0, 3]]);
    // `group` synthesizes the unit iter from the cut instead (pitfall 10).
    assert_eq!(l.group(&[6, 1, 5]).unwrap().0, tile("S[(6, 1, 5):(5, 5, 1)]"));
}

#[test]
fn group_many_rejects_incompatible_and_mismatched_shapes() {
    let e = tile("S[12:1]").group_many(&[vec![3, 4], vec![2, 6]]).unwrap_err();
    assert!(is_bad_argument(&e, "group_many", "shapes") && e.to_string().contains("incompatible"), "{e}");
    assert!(matches!(tile("S[12:1]").group_many(&[vec![3, 5]]), Err(LayoutError::ShapeMismatch { .. })));
    assert!(is_bad_argument(&tile("S[12:1]").group_many(&[]).unwrap_err(), "group_many", "shapes"));
    assert!(is_bad_argument(&tile("S[12:1]").group_many(&[vec![]]).unwrap_err(), "group_many", "shapes"));
    // A boundary inside an iter that does not split evenly: 12 = (4, 3) cut at 6.
    let e = tile("S[(4, 3):(3, 1)]").group_many(&[vec![6, 2]]).unwrap_err();
    assert!(e.to_string().contains("incompatible"), "{e}");
}

#[test]
fn group_many_of_an_empty_shard() {
    let l = tile("S[()] + 5");
    let (g, seps) = l.group_many(&[vec![1, 1]]).unwrap();
    assert_eq!(g.to_string(), "S[(1, 1):(1, 1)] + 5");
    assert_eq!(seps, vec![vec![0, 1, 2]]);
}

// ---------------------------------------------------------------- permute_by_groups, storage, from_iters

#[test]
fn permute_by_groups_reference_cases() {
    let l = tile("S[(8, 8):(8, 1)]");
    let t = l.tile(&l, &[8, 8], &[8, 8], Fusion::None).unwrap();
    let (g, seps) = t.group(&[64, 64]).unwrap();
    assert_eq!(seps, vec![0, 2, 4]);
    assert_eq!(g.permute_by_groups(&seps, &[1, 0]).unwrap(), g.permute_dims(&[2, 3, 0, 1]).unwrap());
    assert_eq!(g.permute_by_groups(&seps, &[1, 0]).unwrap().to_string(), "S[(8, 8, 8, 8):(64, 1, 512, 8)]");
    assert_eq!(g.permute_by_groups(&seps, &[0, 1]).unwrap(), g);
    assert!(matches!(g.permute_by_groups(&seps, &[0, 0]), Err(LayoutError::BadPermutation { .. })));
    assert!(matches!(g.permute_by_groups(&[0, 3], &[0]), Err(LayoutError::BadSeparators { .. })));
}

#[test]
fn storage_reference_cases() {
    assert_eq!(tile("S[(8, 8):(8, 1)]").storage(), tile("S[(8, 8):(8, 1)]"));
    assert_eq!(tile("S[(8, 4, 2):(4@laneid, 1@laneid, 1)]").storage(), tile("S[2:1]"));
    let c = layout("ComposeLayout(3, 3, 3, S[512:1])");
    assert_eq!(c.storage(), c);
    let warp = tile("S[(8, 4):(4@laneid, 1@laneid)]");
    let (t1, t2) = (tile("S[(2, 1):(1, 2)]"), tile("S[(1, 8):(8, 1)]"));
    let two = tile("S[2:1]");
    let full = two
        .tile(&warp, &[8, 4], &[1, 2], Fusion::None)
        .and_then(|l| l.tile(&t1, &[2, 1], &[8, 8], Fusion::None))
        .and_then(|l| l.tile(&t2, &[1, 8], &[16, 8], Fusion::None))
        .unwrap();
    let local = two
        .tile(&t1, &[2, 1], &[1, 2], Fusion::None)
        .and_then(|l| l.tile(&t2, &[1, 8], &[2, 2], Fusion::None))
        .unwrap();
    assert_eq!(full.storage().canonicalize(Fusion::None).unwrap(), local.canonicalize(Fusion::None).unwrap());
    // Offsets on thread axes go too.
    assert_eq!(tile("S[(32, 4):(1@laneid, 1)] + 2@warpid + 8").storage(), tile("S[4:1] + 8"));
}

#[test]
fn from_iters_checks_what_it_builds() {
    use Axis::*;
    let l =
        TileLayout::from_iters(vec![Iter::new(128, 1, TidInWg), Iter::m(8, 1)], vec![], [(M, 0)].into_iter().collect())
            .unwrap();
    assert_eq!(l.shard, vec![Iter::new(128, 1, TidInWg), Iter::m(8, 1)]);
    assert_eq!(l.offset, [(M, 0)].into_iter().collect());
    assert!(matches!(
        TileLayout::from_iters(vec![Iter::m(0, 1)], vec![], Default::default()),
        Err(LayoutError::BadExtent { .. })
    ));
    assert!(matches!(
        TileLayout::from_iters(vec![Iter::new(32, 1, LaneId), Iter::new(4, 32, Tx)], vec![], Default::default()),
        Err(LayoutError::ScopeConflict { .. })
    ));
}

// ---------------------------------------------------------------- mma helpers

#[test]
fn mma_atom_shapes_and_layouts() {
    use SwizzleMode::*;
    assert_eq!(mma_atom_shape(16, B128, 2).unwrap(), vec![8, 64]);
    assert_eq!(mma_atom_shape(32, B64, 2).unwrap(), vec![8, 16]);
    assert_eq!(mma_atom_shape(8, B32, 2).unwrap(), vec![8, 32]);
    assert_eq!(mma_atom_shape(16, B128, 3).unwrap(), vec![1, 8, 64]);
    assert_eq!(mma_atom_shape(16, B128, 0).unwrap(), vec![8, 64]);
    // Mode 0: the 16-byte core matrix (the reference has no entry).
    assert_eq!(mma_atom_shape(16, None, 2).unwrap(), vec![8, 8]);
    // p = log2(128 / bits), sw = mode, at = 3, one period of 2^(p+sw+3) elements.
    assert_eq!(mma_atom_layout(16, B128).unwrap().to_string(), "ComposeLayout(3, 3, 3, S[512:1])");
    assert_eq!(mma_atom_layout(32, B32).unwrap().to_string(), "ComposeLayout(2, 1, 3, S[64:1])");
    assert_eq!(mma_atom_layout(8, B64).unwrap().to_string(), "ComposeLayout(4, 2, 3, S[512:1])");
    assert_eq!(mma_atom_layout(16, None).unwrap().to_string(), "ComposeLayout(3, 0, 3, S[64:1])");
    assert!(is_bad_argument(&mma_atom_layout(12, B128).unwrap_err(), "mma_atom_layout", "dtype"));
    assert!(is_bad_argument(&mma_atom_shape(256, B128, 2).unwrap_err(), "mma_atom_shape", "dtype"));
    assert_eq!(SwizzleMode::from_index(3).unwrap(), B128);
    assert!(is_bad_argument(&SwizzleMode::from_index(4).unwrap_err(), "swizzle mode", "swizzle_mode"));
}

#[test]
fn mma_shared_layout_reference_cases() {
    use SwizzleMode::*;
    // Reference test_mma_shared_layout, cases 1-3.
    let l = mma_shared_layout(16, B128, &[64, 256]).unwrap();
    assert_eq!(l.to_string(), "ComposeLayout(3, 3, 3, S[(64, 4, 64):(64, 4096, 1)])");
    let l = mma_shared_layout(16, B128, &[3, 64, 256]).unwrap();
    assert_eq!(l.to_string(), "ComposeLayout(3, 3, 3, S[(3, 64, 4, 64):(16384, 64, 4096, 1)])");
    let l = mma_shared_layout(16, B64, &[3, 64, 256]).unwrap();
    assert_eq!(l.to_string(), "ComposeLayout(3, 2, 3, S[(3, 64, 8, 32):(16384, 32, 2048, 1)])");
    // f32 64B: atom [1,8,16] over a period of 128; rows tile to 1024:1, then grid (3,1,16) scaled by 1024.
    let l = mma_shared_layout(32, B64, &[3, 64, 256]).unwrap();
    assert_eq!(l.to_string(), "ComposeLayout(2, 2, 3, S[(3, 64, 16, 16):(16384, 16, 1024, 1)])");
    // f16 (8, 256), 128B: the TMA golden example's four 64-column blocks of 8 rows.
    assert_eq!(
        mma_shared_layout(16, B128, &[8, 256]).unwrap().to_string(),
        "ComposeLayout(3, 3, 3, S[(8, 4, 64):(64, 512, 1)])"
    );
}

#[test]
fn mma_shared_layout_without_swizzle() {
    // [*lead, m, k/8, 8] : [*lead, 8, 8m, 1] for f16, canonicalized.
    let l = mma_shared_layout(16, SwizzleMode::None, &[3, 64, 256]).unwrap();
    assert_eq!(l.to_string(), "S[(3, 64, 32, 8):(16384, 8, 512, 1)]");
    // f32 (64, 64): 4 elements per 16 bytes.
    assert_eq!(mma_shared_layout(32, SwizzleMode::None, &[64, 64]).unwrap().to_string(), "S[(64, 16, 4):(4, 256, 1)]");
    // k not a multiple of 16 bytes: plain row-major (canonical: one contiguous iter).
    assert_eq!(mma_shared_layout(16, SwizzleMode::None, &[8, 12]).unwrap().to_string(), "S[96:1]");
    // One 16-byte column: nothing to reorder, the canonical form is contiguous.
    assert_eq!(mma_shared_layout(16, SwizzleMode::None, &[8, 8]).unwrap().to_string(), "S[64:1]");
}

#[test]
fn mma_shared_layout_rejects_what_does_not_tile() {
    use SwizzleMode::*;
    let e = mma_shared_layout(16, B128, &[60, 256]).unwrap_err();
    assert!(is_bad_argument(&e, "mma_shared_layout", "shape"), "{e}");
    assert!(e.to_string().contains("multiples of (8, 64)"), "{e}");
    assert!(is_bad_argument(&mma_shared_layout(16, B128, &[64, 96]).unwrap_err(), "mma_shared_layout", "shape"));
    assert!(is_bad_argument(&mma_shared_layout(16, B128, &[256]).unwrap_err(), "mma_shared_layout", "shape"));
    assert!(matches!(mma_shared_layout(16, B128, &[0, 64]), Err(LayoutError::BadShape { .. })));
    assert!(is_bad_argument(&mma_shared_layout(24, B32, &[8, 64]).unwrap_err(), "mma_shared_layout", "dtype"));
}

// ---------------------------------------------------------------- register atoms

#[test]
fn tcgen05_atom_layouts() {
    use Tcgen05Shape::*;
    let l = tcgen05_atom_layout(S16x256b, 64, 64, 32).unwrap();
    assert_eq!(l.to_string(), "S[(4, 2, 8, 8, 4, 2):(1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)]");
    // Element (19, 13): row = t1 + 8·va + 16·wid → (wid 1, va 0, t1 3); col = v0p + 2·t0 + 8·vb →
    // (vb 1, t0 2, v0p 1): laneid 4·3 + 2 = 14, register 2·0 + 4·1 + 1 = 5.
    assert_eq!(l.apply(&[19, 13], &[64, 64]).unwrap(), coord(&[(Axis::WidInWg, 1), (Axis::LaneId, 14), (Axis::M, 5)]));
    // 16-bit: two elements per register; strides on m double and a last 2:1 iter packs the pair.
    let h = tcgen05_atom_layout(S16x256b, 64, 64, 16).unwrap();
    assert_eq!(h.to_string(), "S[(4, 2, 8, 4, 4, 2, 2):(1@wid_in_wg, 4, 4@laneid, 8, 1@laneid, 2, 1)]");
    // 128 rows: the second half-slab 2:R after wid_in_wg, R = N = 32 registers for 16x64b.
    let r = tcgen05_atom_layout(S16x64b, 128, 64, 32).unwrap();
    assert_eq!(r.to_string(), "S[(4, 2, 2, 8, 32, 2):(1@wid_in_wg, 32, 1@laneid, 4@laneid, 1, 2@laneid)]");
    let r = tcgen05_atom_layout(S16x128b, 64, 32, 32).unwrap();
    assert_eq!(r.to_string(), "S[(4, 2, 8, 8, 4):(1@wid_in_wg, 1, 4@laneid, 2, 1@laneid)]");
    assert_eq!(tcgen05_atom_layout(S32x32b, 128, 64, 32).unwrap().to_string(), "S[(128, 64):(1@tid_in_wg, 1)]");
    assert_eq!(tcgen05_atom_layout(S32x32b, 128, 64, 16).unwrap().to_string(), "S[(128, 64):(1@tid_in_wg, 1)]");
    assert_eq!(
        tcgen05_atom_layout(S32x32b, 64, 64, 32).unwrap().to_string(),
        "S[(64, 2, 32):(1@tid_in_wg, 64@tid_in_wg, 1)]"
    );
    for (shape, rows, cols, bits) in [
        (S16x256b, 64, 64, 32),
        (S16x256b, 128, 256, 16),
        (S16x128b, 128, 64, 16),
        (S16x64b, 64, 256, 32),
        (S32x32b, 64, 8, 32),
    ] {
        let l = tcgen05_atom_layout(shape, rows, cols, bits).unwrap();
        assert_eq!(l.size(None).unwrap(), rows * cols);
        assert_eq!(l.injectivity().unwrap(), Injectivity::Injective, "{l}");
        assert_eq!(l.scope().unwrap().map(|s| s.1), Some(tirx_layout::ExecScope::Warpgroup), "{l}");
    }
}

#[test]
fn tcgen05_atom_layout_rejections() {
    use Tcgen05Shape::*;
    let is = |r: Result<TileLayout, LayoutError>, arg: &str| {
        let e = r.unwrap_err();
        assert!(is_bad_argument(&e, "tcgen05_atom_layout", arg), "{e}");
    };
    is(tcgen05_atom_layout(S16x256b, 96, 64, 32), "tensor_shape");
    is(tcgen05_atom_layout(S16x256b, 64, 512, 32), "tensor_shape"); // N = 64 > 32
    is(tcgen05_atom_layout(S16x256b, 64, 60, 32), "tensor_shape");
    is(tcgen05_atom_layout(S16x64b, 64, 6, 32), "tensor_shape"); // N = 3, not a power of two
    is(tcgen05_atom_layout(S16x64b, 64, 64, 8), "dtype");
    is(tcgen05_atom_layout(S32x32b, 64, 64, 16), "dtype");
    is(tcgen05_atom_layout(S32x32b, 64, 7, 32), "tensor_shape");
    assert_eq!(Tcgen05Shape::from_name("16x256b"), Some(S16x256b));
    assert_eq!(Tcgen05Shape::from_name("16x32b"), None);
}

#[test]
fn wg_local_layout_helper() {
    assert_eq!(wg_local_layout(16, 128).unwrap().to_string(), "S[(128, 16):(1@tid_in_wg, 1)]");
    assert_eq!(wg_local_layout(8, 64).unwrap().to_string(), "S[(64, 8):(1@tid_in_wg, 1)]");
    assert!(matches!(wg_local_layout(0, 128), Err(LayoutError::BadExtent { .. })));
}

#[test]
fn compose_tile_of_a_bare_swizzle_uses_the_identity_over_the_inner_shape() {
    // Reference case_tile_swizzle_layout5's first step: the atom tile S[256] is replaced by S[8·32].
    let sw = match layout("ComposeLayout(3, 2, 3, S[256:1])") {
        Layout::Compose(c) => c,
        _ => unreachable!(),
    };
    let t = sw.tile(&tile("S[(8, 8):(1, 8)]"), &[8, 8], &[8, 32], Fusion::None).unwrap();
    // inner (8,32):(32,1), span 256; outer (8,8):(1,8) scaled (256, 2048);
    // (8,256),(8,32) chain into (64,32).
    assert_eq!(t.to_string(), "ComposeLayout(3, 2, 3, S[(64, 8, 32):(32, 2048, 1)])");
    let again: ComposeLayout = t.tile(&tile("S[(2, 2):(1, 2)]"), &[2, 2], &[64, 256], Fusion::None).unwrap();
    assert_eq!(again.tile.size(None).unwrap(), 128 * 512);
}
