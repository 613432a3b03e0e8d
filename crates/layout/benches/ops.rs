//! Costs of the operations lowering calls per tile call: canonicalize, slice,
//! apply, on a 6-iter layout with thread axes, a replica and offsets.
//! Run: `cargo bench -p tirx-layout`.

use divan::black_box;
use tirx_layout::{parse_layout, Fusion, Layout, TileLayout};

fn main() {
    divan::main();
}

/// A 6-iter warpgroup layout of a 64×64 tile (4 warps × 32 lanes × 32 registers, replicated on 2 warpgroups) with a replica and offsets.
fn six_iter() -> TileLayout {
    let src = "S[(2, 4, 8, 4, 2, 8):(16, 1@wid_in_wg, 4@laneid, 1@laneid, 8, 1)] + R[2:1@wgid] + 1@wid_in_wg + 16";
    let l = match parse_layout(src) {
        Ok(Layout::Tile(t)) => t,
        other => panic!("benchmark layout does not parse: {other:?}"),
    };
    // Measure the success paths only.
    assert!(l.canonicalize(Fusion::Cuda).is_ok() && l.apply(&[45, 17], &SHAPE).is_ok() && l.group(&GROUP).is_ok());
    assert!(l.slice(&SHAPE, &REGION, Fusion::Cuda).is_ok());
    l
}

const SHAPE: [i64; 2] = [64, 64];
const REGION: [(i64, i64); 2] = [(32, 32), (16, 16)];
const GROUP: [i64; 3] = [8, 8, 64];

#[divan::bench]
fn canonicalize_cuda(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).canonicalize(Fusion::Cuda));
}

#[divan::bench]
fn canonicalize_none(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).canonicalize(Fusion::None));
}

#[divan::bench]
fn slice_quarter(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).slice(&SHAPE, &REGION, Fusion::Cuda));
}

#[divan::bench]
fn apply_one_element(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).apply(black_box(&[45, 17]), &SHAPE));
}

#[divan::bench]
fn apply_set_one_element(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).apply_set(black_box(&[45, 17]), &SHAPE));
}

#[divan::bench]
fn group_by_shape(b: divan::Bencher) {
    let l = six_iter();
    b.bench(|| black_box(&l).group(&GROUP));
}

#[divan::bench]
fn parse_and_print(b: divan::Bencher) {
    let text = six_iter().to_string();
    b.bench(|| parse_layout(black_box(&text)).map(|l| l.to_string()));
}
