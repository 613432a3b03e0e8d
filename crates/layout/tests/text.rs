//! The text syntax: every accepted form, the printed form, and error positions.

use tirx_layout::{parse_layout, Axis, Iter, Layout, TileLayout};

fn tile(src: &str) -> TileLayout {
    match parse_layout(src) {
        Ok(Layout::Tile(t)) => t,
        other => panic!("{src}: {other:?}"),
    }
}

fn printed(src: &str) -> String {
    parse_layout(src).unwrap().to_string()
}

#[test]
fn accepted_forms() {
    use Axis::*;
    let l = tile("S[(32,8):(1@laneid,1)]");
    assert_eq!(l.shard, vec![Iter::new(32, 1, LaneId), Iter::m(8, 1)]);
    assert_eq!(tile("S[(32, 8)]").shard, vec![Iter::m(32, 8), Iter::m(8, 1)]);
    assert_eq!(tile("S[8, 4]").shard, vec![Iter::m(8, 4), Iter::m(4, 1)]);
    assert_eq!(tile("S[8:4]").shard, vec![Iter::m(8, 4)]);
    assert_eq!(tile("S[8]").shard, vec![Iter::m(8, 1)]);
    assert_eq!(tile("S[(8,2):(1 @ laneid, 1)]").shard, vec![Iter::new(8, 1, LaneId), Iter::m(2, 1)]);
    let full = tile("S[(8,2,4,2):(4@laneid,1@warpid,1@laneid,1)] + R[2:4@warpid] + 5@warpid + 64");
    assert_eq!(full.replica, vec![Iter::new(2, 4, WarpId)]);
    assert_eq!(full.offset, [(WarpId, 5), (M, 64)].into_iter().collect());
    assert_eq!(
        tile("TileLayout(S[8:1] + 1@laneid + 2@laneid - 1@warpid)").offset,
        [(LaneId, 3), (WarpId, -1)].into_iter().collect()
    );
    assert_eq!(tile("T.TileLayout(T.S[(4, 2):(1@Axis.laneid, 1)])").shard[0].axis, LaneId);
    assert_eq!(tile("S[(4,):(\"laneid\",)]").shard, vec![Iter::new(4, 1, LaneId)]);
    assert_eq!(tile("TileLayout(R[32:1@laneid])").shard, vec![]);
    let c = parse_layout("ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))").unwrap();
    let Layout::Compose(c) = c else { panic!() };
    assert_eq!((c.swizzle.per_element, c.swizzle.swizzle_len, c.swizzle.atom_len, c.swizzle.inner), (3, 3, 3, true));
    let c = parse_layout("ComposeLayout(2, 1, 3, S[64:1], swizzle_inner=False)").unwrap();
    assert_eq!(c.swizzle().map(|s| s.inner), Some(false));
}

#[test]
fn printed_form() {
    assert_eq!(printed("S[(32,8):(1@laneid,1)]"), "S[(32, 8):(1@laneid, 1)]");
    assert_eq!(printed("S[8:4]"), "S[8:4]");
    assert_eq!(printed("S[8]"), "S[8:1]");
    assert_eq!(printed("S[4:1] + 5@warpid + 1@laneid + 64"), "S[4:1] + 1@laneid + 64 + 5@warpid");
    assert_eq!(printed("S[4:1] - 5@warpid"), "S[4:1] - 5@warpid");
    assert_eq!(printed("ComposeLayout(3, 3, 3, TileLayout(S[(8, 64)]))"), "ComposeLayout(3, 3, 3, S[(8, 64):(64, 1)])");
    assert_eq!(
        printed("ComposeLayout(3,3,3,S[8:1],swizzle_inner=False)"),
        "ComposeLayout(3, 3, 3, S[8:1], swizzle_inner=False)"
    );
    assert_eq!(printed("R[32:1@laneid]"), "R[32:1@laneid]");
    assert_eq!(printed("-3@tx"), "-3@tx");
    assert_eq!(printed("S[()]"), "S[()]");
}

fn err(src: &str) -> (usize, String) {
    let e = parse_layout(src).unwrap_err();
    (e.offset, e.message)
}

#[test]
fn errors_point_at_the_offending_character() {
    let (at, msg) = err("S[(32,8):(1@pid,1)]");
    assert_eq!(at, 12);
    assert!(msg.contains("unknown axis `pid`") && msg.contains("laneid"), "{msg}");
    let (at, msg) = err("S[(32,8):(1,1,1)]");
    assert_eq!(at, 9);
    assert!(msg.contains("2 extent(s) but 3 stride(s)"), "{msg}");
    let (at, msg) = err("S[(32,8):(1@laneid,1)");
    assert_eq!(at, 21);
    assert!(msg.contains("expected `]`"), "{msg}");
    assert_eq!(err("S[0:1]").0, 2);
    assert_eq!(err("S[8:1] + S[4:1]").0, 9);
    assert_eq!(err("S[8, 4:1]").0, 2);
    assert_eq!(err("S[8:1] * 2").0, 7);
    assert_eq!(err("").0, 0);
    assert_eq!(err("S[99999999999999999999:1]").0, 2);
    let (at, msg) = err("ComposeLayout(3, 4, 3, S[8:1])");
    assert_eq!(at, 14);
    assert!(msg.contains("atom_len"), "{msg}");
    let rendered = parse_layout("S[4:1@foo]").unwrap_err().render("S[4:1@foo]");
    assert!(rendered.ends_with("\n  S[4:1@foo]\n        ^"), "{rendered}");
}
