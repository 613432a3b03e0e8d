//! Hand-derived cases of `TileLayout::injectivity` (docs/layout-model.md §1.8).

use tirx_layout::inject::MAX_ENUMERATED;
use tirx_layout::{parse_layout, Axis, Coord, Injectivity, IterRef, Layout};

fn verdict(text: &str) -> Injectivity {
    parse_layout(text).unwrap_or_else(|e| panic!("{}", e.render(text))).injectivity().unwrap()
}

fn shard(index: usize) -> IterRef {
    IterRef { replica: false, index }
}

fn coord(pairs: &[(Axis, i64)]) -> Coord {
    pairs.iter().copied().collect()
}

/// The case: `S[(8,4,4,8,8):(4,1@warpid,8@laneid,1@laneid,1)]`: the
/// outer `m` iter (stride 4) lands inside the inner one (extent 8, stride 1).
#[test]
fn overlapping_register_strides_collide_at_a_named_register() {
    let v = verdict("S[(8,4,4,8,8):(4,1@warpid,8@laneid,1@laneid,1)]");
    let c = v.collision().expect("collides");
    // (0,0,0,0,4) and (1,0,0,0,0) of the (8,4,4,8,8) shape.
    assert_eq!((c.first, c.second), (4, 1024));
    assert_eq!(c.axis, Axis::M);
    assert_eq!(c.at, coord(&[(Axis::M, 4), (Axis::WarpId, 0), (Axis::LaneId, 0)]));
    assert_eq!(c.iters, vec![shard(0), shard(4)]);
    assert_eq!(c.fix, Some((shard(0), 8)), "stride 8 clears the 8 registers below");
    assert_eq!(verdict("S[(8,4,4,8,8):(8,1@warpid,8@laneid,1@laneid,1)]"), Injectivity::Injective);
}

#[test]
fn usual_layouts_are_injective() {
    for text in [
        "S[(32, 8):(1@laneid, 1)]",
        "S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid",
        "S[(8,4):(4@laneid,1@laneid)] + 1@laneid + 2@warpid",
        "S[(64, 16):(20, 1)]",                      // padded rows
        "S[(16384, 4096):(4096, 1)]",               // 67M elements, decided by sorted strides
        "S[(128, 8, 8):(8, 1024, 1)]",              // K-tiled shared
        "S[(4, 8):(-8, 1)]",                        // negative strides
        "S[(2, 3):(3, 2)]",                         // injective, but only enumeration shows it
        "S[(32, 8):(1@laneid, 1)] + R[4:0@warpid]", // the same home twice is one element's business
        "ComposeLayout(3, 3, 3, S[(32, 64):(64, 1)])",
        "S[()]",
    ] {
        assert_eq!(verdict(text), Injectivity::Injective, "{text}");
    }
}

#[test]
fn duplicated_and_zero_strides_collide() {
    let c = verdict("S[(8, 8):(1, 1)]").collision().cloned().expect("collides");
    assert_eq!((c.first, c.second), (1, 8));
    assert_eq!(c.fix, Some((shard(0), 8)));
    let c = verdict("S[(32, 8):(1@laneid, 0)]").collision().cloned().expect("collides");
    assert_eq!((c.first, c.second, c.iters.clone(), c.fix), (0, 1, vec![shard(1)], Some((shard(1), 1))));
    assert_eq!(c.at, coord(&[(Axis::LaneId, 0), (Axis::M, 0)]));
    // A swizzle does not repair its tile.
    assert!(verdict("ComposeLayout(3, 3, 3, S[(8, 64):(1, 1)])").collision().is_some());
}

/// Replicas of two different elements must not meet; one element's replicas may.
#[test]
fn replica_homes_of_different_elements_collide() {
    let c = verdict("S[4:1] + R[2:2]").collision().cloned().expect("collides");
    assert_eq!((c.first, c.second), (0, 2));
    assert_eq!(c.at, coord(&[(Axis::M, 2)]));
    let replica = IterRef { replica: true, index: 0 };
    assert_eq!(c.iters, vec![shard(0), replica]);
    assert_eq!(c.fix, Some((replica, 4)), "the replica must clear the 4 elements");
    assert_eq!(verdict("S[4:1] + R[2:4]"), Injectivity::Injective);
}

#[test]
fn large_entangled_cores_are_unknown_or_a_real_collision() {
    // 2048 × 2048 points: too many to enumerate, but a sub-box finds (2, 0) ~ (0, 3).
    let l = parse_layout("S[(2048, 2048):(3, 2)]").unwrap();
    let c = l.injectivity().unwrap().collision().cloned().expect("a sub-box collision");
    let Layout::Tile(t) = &l else { unreachable!() };
    assert_eq!(t.apply_linear(c.first).unwrap(), t.apply_linear(c.second).unwrap());
    // Peeling decides large layouts whose top iter clears the rest (3·2047 < 8192)...
    assert_eq!(verdict("S[(2048, 2048):(8192, 3)]"), Injectivity::Injective);
    // ... but an injective entangled core above the bound stays unknown (4096·b = 3·a has
    // no solution with |a| < 2048, and no sub-box can show it).
    assert!(matches!(verdict("S[(2048, 2048):(4096, 3)]"), Injectivity::Unknown { .. }));
    let v = verdict("S[(1024, 2048):(2047, 1025)]");
    assert!(matches!(v, Injectivity::Unknown { points, .. } if points > MAX_ENUMERATED), "{v:?}");
}
