//! Hand-derived unit tests of the core operations.

use std::collections::BTreeMap;
use tirx_layout::{Axis, Coord, ExecScope, Fusion, Iter, LayoutError, TileLayout};

fn it(e: i64, s: i64, a: Axis) -> Iter {
    Iter::new(e, s, a)
}
fn coord(pairs: &[(Axis, i64)]) -> Coord {
    pairs.iter().copied().collect()
}
fn offsets(pairs: &[(Axis, i64)]) -> BTreeMap<Axis, i64> {
    pairs.iter().copied().collect()
}

/// `S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid`.
fn tensor_core() -> TileLayout {
    use Axis::*;
    TileLayout::new(
        vec![it(8, 4, LaneId), it(2, 1, WarpId), it(4, 1, LaneId), it(2, 1, M)],
        vec![it(2, 4, WarpId)],
        offsets(&[(WarpId, 5)]),
    )
}

#[test]
fn tensor_core_case_study_element_7_15() {
    use Axis::*;
    let l = tensor_core();
    assert_eq!(l.apply(&[7, 15], &[8, 16]).unwrap(), coord(&[(LaneId, 31), (WarpId, 6), (M, 1)]));
    let set = l.apply_set(&[7, 15], &[8, 16]).unwrap();
    assert_eq!(set, vec![coord(&[(LaneId, 31), (WarpId, 6), (M, 1)]), coord(&[(LaneId, 31), (WarpId, 10), (M, 1)])]);
    assert_eq!(l.scope().unwrap(), Some((ExecScope::Thread, ExecScope::Cta)));
}

#[test]
fn offset_fusion_sums() {
    use Axis::*;
    let l = TileLayout::new(vec![it(32, 1, LaneId), it(4, 1, M)], vec![], offsets(&[(LaneId, 1), (WarpId, 2)]));
    let c = l.canonicalize(Fusion::Cuda).unwrap();
    assert_eq!(c.offset, offsets(&[(Tx, 65)]));
    assert_eq!(c.shard, vec![it(32, 1, Tx), it(4, 1, M)]);
    // Without fusion the axes stay.
    assert_eq!(l.canonicalize(Fusion::None).unwrap().offset, l.offset);
}

#[test]
fn wgid_at_warp_cta_fuses_to_warpid() {
    use Axis::*;
    let l = TileLayout::from_shard(vec![it(2, 1, WgId), it(4, 1, WidInWg), it(8, 1, M)]);
    assert_eq!(l.scope().unwrap(), Some((ExecScope::Warp, ExecScope::Cta)));
    let c = l.canonicalize(Fusion::Cuda).unwrap();
    // (2,4@warpid),(4,1@warpid) chain into one iter.
    assert_eq!(c.shard, vec![it(8, 1, WarpId), it(8, 1, M)]);
}

#[test]
fn grid_axis_with_thread_axis_is_an_error() {
    use Axis::*;
    let l = TileLayout::from_shard(vec![it(2, 1, Bx), it(128, 1, Tx)]);
    assert!(matches!(l.scope(), Err(LayoutError::GridMixedWithThreads { grid: Bx, inner: Tx })));
    assert!(l.canonicalize(Fusion::Cuda).is_err());
    let grid_only = TileLayout::from_shard(vec![it(2, 1, Bx), it(4, 1, M)]);
    assert_eq!(grid_only.scope().unwrap(), Some((ExecScope::Cta, ExecScope::Kernel)));
}

#[test]
fn scope_conflict_and_broken_chain() {
    use Axis::*;
    let conflict = TileLayout::from_shard(vec![it(32, 1, LaneId), it(4, 32, Tx)]);
    assert!(matches!(conflict.scope(), Err(LayoutError::ScopeConflict { .. })));
    let broken = TileLayout::from_shard(vec![it(2, 1, WgId), it(32, 1, LaneId)]);
    assert!(matches!(broken.scope(), Err(LayoutError::ScopeChainBroken { .. })));
    let wg = TileLayout::from_shard(vec![it(4, 1, WidInWg), it(32, 1, LaneId)]);
    assert_eq!(wg.scope().unwrap(), Some((ExecScope::Thread, ExecScope::Warpgroup)));
    assert_eq!(wg.canonicalize(Fusion::Cuda).unwrap().shard, vec![it(128, 1, TidInWg)]);
    assert_eq!(TileLayout::row_major(&[4, 4]).scope().unwrap(), None);
}

#[test]
fn slice_crossing_two_digits_is_correct() {
    // S[(3,2,4):(100,10,1)] on (24,), region [6,10): addresses 12, 13, 100, 101.
    let l = TileLayout::from_shard(vec![Iter::m(3, 100), Iter::m(2, 10), Iter::m(4, 1)]);
    let s = l.slice(&[24], &[(6, 4)], Fusion::Cuda).unwrap();
    for x in 0..4 {
        assert_eq!(s.apply(&[x], &[4]).unwrap(), l.apply(&[6 + x], &[24]).unwrap(), "x = {x}");
    }
    assert_eq!(s.shard, vec![Iter::m(2, 88), Iter::m(2, 1)]);
    assert_eq!(s.offset, offsets(&[(Axis::M, 12)]));
}

#[test]
fn slice_rejects_out_of_range_and_inexpressible_regions() {
    let l = TileLayout::row_major(&[4, 4]);
    assert!(matches!(
        l.slice(&[4, 4], &[(3, 2), (0, 4)], Fusion::Cuda),
        Err(LayoutError::RegionOutOfRange { dim: 0, .. })
    ));
    assert!(matches!(l.slice(&[4, 4], &[(0, 0), (0, 4)], Fusion::Cuda), Err(LayoutError::RegionOutOfRange { .. })));
    // Single iter (m == 1 case) is bounds-checked too.
    let one = TileLayout::from_shard(vec![Iter::m(16, 1)]);
    assert!(one.slice(&[16], &[(10, 8)], Fusion::Cuda).is_err());
    // One iter: any in-range run is one strided box.
    assert!(one.slice(&[16], &[(0, 6)], Fusion::Cuda).is_ok());
    // Two iters (4,4): 6 elements from the start are 4 + 2, ragged.
    let two = TileLayout::from_shard(vec![Iter::m(4, 10), Iter::m(4, 1)]);
    assert!(matches!(two.slice(&[16], &[(0, 6)], Fusion::Cuda), Err(LayoutError::SliceInexpressible { .. })));
}

#[test]
fn slicing_thread_rows_gives_thread_offset() {
    use Axis::*;
    let l = TileLayout::from_shard(vec![it(128, 1, TidInWg), it(16, 1, M)]);
    let s = l.slice(&[128, 16], &[(64, 64), (0, 16)], Fusion::Cuda).unwrap();
    assert_eq!(s.offset, offsets(&[(TidInWg, 64)]));
    assert_eq!(s.shard, vec![it(64, 1, TidInWg), it(16, 1, M)]);
}

#[test]
fn group_refines_and_reports_failures() {
    let l = TileLayout::from_shard(vec![Iter::m(4, 6), Iter::m(6, 1)]);
    let (g, seps) = l.group(&[8, 3]).unwrap();
    assert_eq!(g.shard, vec![Iter::m(4, 6), Iter::m(2, 3), Iter::m(3, 1)]);
    assert_eq!(seps, vec![0, 2, 3]);
    assert!(matches!(l.group(&[6, 4]), Err(LayoutError::ShapeMismatch { .. })));
    assert!(matches!(l.group(&[5, 5]), Err(LayoutError::ShapeMismatch { .. })));
    let (g, seps) = TileLayout::default().group(&[1, 1]).unwrap();
    assert_eq!((g.shard.len(), seps), (2, vec![0, 1, 2]));
}

#[test]
fn size_span_storage() {
    use Axis::*;
    let l = tensor_core();
    assert_eq!(l.size(None).unwrap(), 128);
    assert_eq!(l.size(Some(LaneId)).unwrap(), 32);
    assert_eq!(l.span(None).unwrap(), 2);
    assert_eq!(l.span(Some(WarpId)).unwrap(), 1 + 1 + 4 + 5);
    let st = l.storage();
    assert_eq!(st.shard, vec![it(2, 1, M)]);
    assert!(st.replica.is_empty() && st.offset.is_empty());
}

#[test]
fn permutations() {
    let l = TileLayout::row_major(&[2, 3, 4]);
    let p = l.permute_dims(&[2, 0, 1]).unwrap();
    assert_eq!(p.extents(), vec![4, 2, 3]);
    assert!(l.permute_dims(&[0, 0, 1]).is_err());
    let (g, seps) = l.group(&[6, 4]).unwrap();
    let q = g.permute_by_groups(&seps, &[1, 0]).unwrap();
    assert_eq!(q.extents(), vec![4, 2, 3]);
    assert!(g.permute_by_groups(&[0, 5], &[0]).is_err());
}

#[test]
fn tensor_memory_layouts() {
    use Axis::*;
    // B/E datapath: S[(rows,2,cols/2):(1@TLane,64@TLane,1@TCol)], rows 64, cols 32.
    let l = TileLayout::from_shard(vec![it(64, 1, TLane), it(2, 64, TLane), it(16, 1, TCol)]);
    assert_eq!(l.apply(&[5, 17], &[64, 32]).unwrap(), coord(&[(TLane, 69), (TCol, 1)]));
    assert_eq!(l.scope().unwrap(), None);
    // Memory axes never fuse across each other; TLane iters do not chain (2·64 != 1).
    assert_eq!(l.canonicalize(Fusion::Cuda).unwrap(), l);
    // Column slice of the C/F layout (+16@TLane sub-slab) keeps the lane offset.
    let c = TileLayout::new(vec![it(4, 32, TLane), it(16, 1, TLane), it(8, 1, TCol)], vec![], offsets(&[(TLane, 16)]));
    let s = c.slice(&[64, 8], &[(16, 16), (4, 4)], Fusion::Cuda).unwrap();
    assert_eq!(s.offset, offsets(&[(TLane, 48), (TCol, 4)]));
    assert_eq!(s.apply(&[3, 2], &[16, 4]).unwrap(), c.apply(&[19, 6], &[64, 8]).unwrap());
}

#[test]
fn absurd_inputs_are_errors() {
    let huge = TileLayout::from_shard(vec![Iter::m(1 << 30, 1), Iter::m(1 << 30, 1)]);
    assert!(matches!(huge.size(None), Err(LayoutError::TooLarge { .. })));
    let zero = TileLayout::from_shard(vec![Iter::m(0, 1)]);
    assert!(matches!(zero.canonicalize(Fusion::None), Err(LayoutError::BadExtent { .. })));
    let l = TileLayout::row_major(&[4]);
    assert!(matches!(l.apply_linear(4), Err(LayoutError::CoordOutOfRange { .. })));
    assert!(matches!(l.apply(&[1, 1], &[2, 3]), Err(LayoutError::ShapeMismatch { .. })));
    assert!(matches!(l.apply(&[1], &[2, 2]), Err(LayoutError::RankMismatch { .. })));
    assert!(matches!(l.apply(&[0, 2], &[2, 2]), Err(LayoutError::CoordOutOfRange { dim: 1, .. })));
}

#[test]
fn tile_scales_outer_by_inner_span() {
    let inner = TileLayout::row_major(&[8, 8]);
    let outer = TileLayout::row_major(&[2, 4]);
    let t = inner.tile(&outer, &[2, 4], &[8, 8], Fusion::None).unwrap();
    // (9, 17) = outer (1, 2) × inner (1, 1): 6·64 + 9.
    assert_eq!(t.apply(&[9, 17], &[16, 32]).unwrap(), coord(&[(Axis::M, 393)]));
    assert_eq!(t.shard, vec![Iter::m(2, 256), Iter::m(8, 8), Iter::m(4, 64), Iter::m(8, 1)]);
    assert!(matches!(inner.tile(&outer, &[8], &[8, 8], Fusion::None), Err(LayoutError::TileRank { .. })));
}

#[test]
fn swizzle_128b_fp16_permutes_chunks_by_row() {
    use tirx_layout::{ComposeLayout, Layout, Swizzle};
    // p=3 (8 fp16 = 16 B chunks), sw=3, at=3: chunk c/8 of row r moves to (c/8) ^ r.
    let sw = Swizzle::new(3, 3, 3, true).unwrap();
    assert_eq!((sw.chunk(), sw.period()), (8, 512));
    for (r, c) in [(5, 19), (0, 63), (7, 0), (3, 40)] {
        assert_eq!(sw.apply(r * 64 + c), r * 64 + ((c / 8) ^ r) * 8 + c % 8, "row {r} col {c}");
    }
    assert_eq!(sw.apply(512 + 5 * 64 + 19), 512 + 379, "periodic");
    let outer = Swizzle::new(3, 3, 3, false).unwrap();
    // inner=False XORs the low chunk bits into the row bits instead.
    assert_eq!(outer.apply(2 * 8), (2 ^ (2 << 3)) * 8);
    assert!(Swizzle::new(3, 4, 3, true).is_err());

    // A bare swizzle over a bigger buffer slices as the identity tile; the swizzle applies to the full address.
    let c = ComposeLayout::new(sw, TileLayout::row_major(&[8, 64])).unwrap();
    assert!(c.is_swizzle().unwrap());
    let l = Layout::Compose(c);
    let s = l.slice(&[64, 64], &[(8, 8), (16, 32)], Fusion::Cuda).unwrap();
    assert_eq!(s.tile().offset, offsets(&[(Axis::M, 8 * 64 + 16)]));
    for (r, col) in [(0, 0), (5, 3), (7, 31)] {
        assert_eq!(s.apply(&[r, col], &[8, 32]).unwrap(), l.apply(&[8 + r, 16 + col], &[64, 64]).unwrap());
    }
    assert_eq!(l.apply(&[13, 19], &[64, 64]).unwrap(), coord(&[(Axis::M, 13 * 64 + ((2 ^ 5) * 8) + 3)]));
    assert_eq!(l.swizzle(), Some(sw));
    assert!(!l.is_trivial(Fusion::Cuda).unwrap());
}

/// `apply_first` is a prefix of `apply_set` with the full count, and needs no
/// enumeration: 10,000 replicas (and more than `MAX_REPLICAS`) are fine.
#[test]
fn apply_first_lists_a_prefix_and_counts_all() {
    let l = tensor_core();
    let all = l.apply_set(&[7, 15], &[8, 16]).unwrap();
    assert_eq!(l.apply_first(&[7, 15], &[8, 16], 1).unwrap(), (all[..1].to_vec(), 2));
    assert_eq!(l.apply_first(&[7, 15], &[8, 16], 5).unwrap(), (all.clone(), 2));
    let many = TileLayout::new(vec![it(1, 1, Axis::M)], vec![it(10_000, 1, Axis::LaneId)], offsets(&[]));
    let (set, count) = many.apply_first(&[0], &[1], 3).unwrap();
    assert_eq!(count, 10_000);
    assert_eq!(
        set,
        vec![
            coord(&[(Axis::LaneId, 0), (Axis::M, 0)]),
            coord(&[(Axis::LaneId, 1), (Axis::M, 0)]),
            coord(&[(Axis::LaneId, 2), (Axis::M, 0)])
        ]
    );
    let huge = TileLayout::new(vec![it(1, 1, Axis::M)], vec![it(1 << 20, 1, Axis::Tx)], offsets(&[]));
    assert!(matches!(huge.apply_set(&[0], &[1]), Err(LayoutError::TooManyReplicas { .. })));
    assert_eq!(huge.apply_first(&[0], &[1], 2).unwrap().1, 1 << 20);
    // Two replica iters: the first is the slowest, as in `apply_set`.
    let two =
        TileLayout::new(vec![it(1, 1, Axis::M)], vec![it(3, 1, Axis::LaneId), it(2, 1, Axis::WarpId)], offsets(&[]));
    assert_eq!(two.apply_first(&[0], &[1], 6).unwrap().0, two.apply_set(&[0], &[1]).unwrap());
}
