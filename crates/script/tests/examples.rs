//! Every example in `examples/` parses, checks, prints (snapshot) and
//! round-trips: `parse(print(k)) == k` up to spans, and printing is a fixpoint.
//! The five seed programs also get their HIR checked field by field.

use std::path::PathBuf;
use tirx_ir::hir::*;
use tirx_layout::{Axis, ExecScope, Iter, Layout, TileLayout};
use tirx_script::{parse_kernel, print_kernel, same_kernel};

fn examples_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

/// The examples this crate maintains (their printed forms are snapshotted);
/// other `.py` files in `examples/` and `examples/bench/` are still parsed
/// and round-tripped.
const OWN: [&str; 11] = [
    "constructs_dispatch",
    "constructs_elementwise",
    "constructs_loops",
    "constructs_scopes",
    "constructs_swizzle",
    "constructs_views",
    "copy_fallback",
    "copy_gmem_smem",
    "copy_ldstmatrix",
    "copy_reg",
    "elementwise_reg",
];

/// `(stem, text)` of every script in `examples/` and `examples/bench/`.
fn examples() -> Vec<(String, String)> {
    let mut v = vec![];
    for dir in [examples_dir(), examples_dir().join("bench")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for p in entries.map(|e| e.expect("dir entry").path()) {
            if p.extension().is_some_and(|x| x == "py") {
                let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default().to_string();
                v.push((stem, std::fs::read_to_string(&p).expect("readable example")));
            }
        }
    }
    v.sort();
    v
}

fn parse(name: &str, text: &str) -> Kernel {
    match parse_kernel(name, text) {
        Ok(k) => k,
        Err(d) => panic!("{}", tirx_ir::diag::render(&d, name, text, false)),
    }
}

fn load(stem: &str) -> Kernel {
    let text = std::fs::read_to_string(examples_dir().join(format!("{stem}.py"))).expect("example exists");
    parse(stem, &text)
}

#[test]
fn every_example_round_trips_through_the_printer() {
    let all = examples();
    for own in OWN {
        assert!(all.iter().any(|(s, _)| s == own), "missing example {own}.py");
    }
    for (stem, text) in all {
        let k = parse(&stem, &text);
        let printed = print_kernel(&k);
        if OWN.contains(&stem.as_str()) {
            insta::assert_snapshot!(format!("print_{stem}"), printed);
        }
        let again = parse(&format!("{stem} (printed)"), &printed);
        assert!(same_kernel(&k, &again), "{stem}: parse(print(k)) differs from k\n{printed}");
        assert_eq!(print_kernel(&again), printed, "{stem}: printing is not a fixpoint");
    }
}

fn find_tiles(body: &[Stmt], out: &mut Vec<TileCall>) {
    for s in body {
        match &s.kind {
            StmtKind::Tile(c) => out.push(c.clone()),
            StmtKind::For { body, .. } => find_tiles(body, out),
            StmtKind::If { then_body, else_body, .. } => {
                find_tiles(then_body, out);
                find_tiles(else_body, out);
            }
            _ => {}
        }
    }
}

fn tiles(k: &Kernel) -> Vec<TileCall> {
    let mut v = vec![];
    find_tiles(&k.body, &mut v);
    v
}

fn buf<'a>(k: &'a Kernel, name: &str) -> (BufId, &'a Buffer) {
    let i = k.buffers.iter().position(|b| b.name == name).unwrap_or_else(|| panic!("no buffer {name}"));
    (BufId(i as u32), &k.buffers[i])
}

fn region(a: &TileArg) -> (BufId, Vec<(i64, i64)>) {
    let TileArg::Region(r) = a else { panic!("not a region: {a:?}") };
    let ranges = r
        .ranges
        .iter()
        .map(|x| match x.begin.kind {
            ExprKind::Int(b) => (b, x.extent),
            _ => panic!("non-constant begin"),
        })
        .collect();
    (r.buf, ranges)
}

fn scope_ids(k: &Kernel) -> Vec<(ScopeIdKind, Option<Vec<i64>>)> {
    k.body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::ScopeId(d) => Some((d.kind, d.extents.clone())),
            _ => None,
        })
        .collect()
}

fn lane_rows(rows: i64, cols: i64) -> Layout {
    Layout::Tile(TileLayout::from_shard(vec![Iter::new(rows, 1, Axis::LaneId), Iter::m(cols, 1)]))
}

#[test]
fn seed_copy_reg_hir() {
    let k = load("copy_reg");
    assert_eq!(k.params.len(), 2);
    let (a, ab) = buf(&k, "A");
    assert_eq!((ab.shape.as_slice(), ab.dtype, ab.scope), (&[32, 8][..], tirx_ir::DType::F32, MemScope::Global));
    assert_eq!(k.params[0].buffer, Some(a));
    let (s, sb) = buf(&k, "A_smem");
    assert_eq!(sb.scope, MemScope::Shared);
    assert_eq!(sb.layout, Layout::Tile(TileLayout::row_major(&[32, 8])));
    let (r, rb) = buf(&k, "R");
    assert_eq!(rb.scope, MemScope::Local);
    assert_eq!(rb.layout, lane_rows(32, 8));
    assert_eq!(
        scope_ids(&k),
        vec![
            (ScopeIdKind::CtaId, Some(vec![1])),
            (ScopeIdKind::LaneId, Some(vec![32])),
            (ScopeIdKind::ThreadId, Some(vec![32]))
        ]
    );
    let t = tiles(&k);
    assert_eq!(t.len(), 2);
    assert!(t.iter().all(|c| c.op == TileOp::Copy && c.scope == ExecScope::Warp && c.dispatch.is_none()));
    assert_eq!(region(&t[0].args[0]), (r, vec![(0, 32), (0, 8)]));
    assert_eq!(region(&t[0].args[1]), (s, vec![(0, 32), (0, 8)]));
    assert_eq!(region(&t[1].args[0]).0, s);
    assert_eq!(region(&t[1].args[1]).0, r);
    let barriers = k.body.iter().filter(|s| matches!(s.kind, StmtKind::Barrier(BarrierKind::Cta))).count();
    assert_eq!(barriers, 3);
}

#[test]
fn seed_elementwise_reg_hir() {
    let k = load("elementwise_reg");
    let (r, rb) = buf(&k, "R");
    assert_eq!(rb.layout, lane_rows(32, 8));
    let t = tiles(&k);
    let ops: Vec<TileOp> = t.iter().map(|c| c.op).collect();
    assert_eq!(
        ops,
        vec![TileOp::Copy, TileOp::Copy, TileOp::Ewise(tirx_ir::op::EwiseOp::Sqrt), TileOp::Copy, TileOp::Copy]
    );
    let sqrt = &t[2];
    assert_eq!(sqrt.args.len(), 4, "sqrt carries dst, src, bias, scale");
    assert_eq!(region(&sqrt.args[0]), (r, vec![(0, 32), (0, 8)]));
    assert_eq!(region(&sqrt.args[1]), (r, vec![(0, 32), (0, 8)]));
    assert_eq!((&sqrt.args[2], &sqrt.args[3]), (&TileArg::None, &TileArg::None));
}

#[test]
fn seed_copy_gmem_smem_hir() {
    let k = load("copy_gmem_smem");
    let (a, _) = buf(&k, "A");
    let (b, _) = buf(&k, "B");
    let (s, _) = buf(&k, "A_smem");
    let t = tiles(&k);
    assert_eq!(t.len(), 2);
    assert_eq!((region(&t[0].args[0]).0, region(&t[0].args[1]).0), (s, a));
    assert_eq!((region(&t[1].args[0]).0, region(&t[1].args[1]).0), (b, s));
    assert_eq!(region(&t[1].args[1]).1, vec![(0, 32), (0, 32)]);
}

#[test]
fn seed_copy_fallback_hir() {
    let k = load("copy_fallback");
    let t = tiles(&k);
    assert_eq!(t.len(), 2);
    assert_eq!(region(&t[0].args[0]).1, vec![(0, 4), (0, 6)]);
    assert_eq!(buf(&k, "A").1.shape, vec![4, 6]);
}

#[test]
fn seed_copy_ldstmatrix_hir() {
    let k = load("copy_ldstmatrix");
    let (_, rb) = buf(&k, "R");
    let frag = TileLayout::from_shard(vec![
        Iter::new(8, 4, Axis::LaneId),
        Iter::new(4, 1, Axis::LaneId),
        Iter::m(2, 2),
        Iter::m(2, 1),
    ]);
    assert_eq!(rb.layout, Layout::Tile(frag));
    assert_eq!(rb.dtype, tirx_ir::DType::F16);
    let (_, sb) = buf(&k, "A_smem");
    let row_major = TileLayout::from_shard(vec![Iter::m(8, 16), Iter::m(4, 2), Iter::m(2, 8), Iter::m(2, 1)]);
    assert_eq!(sb.layout, Layout::Tile(row_major));
    let (_, lb) = buf(&k, "R_local");
    assert_eq!(lb.shape, vec![4]);
    // `.local()` is the thread's registers in physical order: element i is register i.
    assert_eq!(lb.layout, Layout::Tile(TileLayout::row_major(&[4])));
    assert!(matches!(lb.origin, BufferOrigin::LocalView { .. }));
    let t = tiles(&k);
    assert_eq!(t.len(), 1);
    assert_eq!(region(&t[0].args[0]).1, vec![(0, 8), (0, 4), (0, 2), (0, 2)]);
}

#[test]
fn scope_extents_are_inferred_for_every_example() {
    for (stem, text) in examples() {
        let k = parse(&stem, &text);
        let ext = tirx_script::infer_scope_extents(&k).expect("consistent scope ids");
        assert!(ext.contains_key(&(ExecScope::Cta, ExecScope::Thread)), "{stem}: no thread count");
    }
    let k = load("constructs_scopes");
    let ext = tirx_script::infer_scope_extents(&k).expect("consistent");
    assert_eq!(ext[&(ExecScope::Cta, ExecScope::Thread)], 256);
    assert_eq!(ext[&(ExecScope::Cta, ExecScope::Warpgroup)], 2);
    let k = load("copy_reg");
    let ext = tirx_script::infer_scope_extents(&k).expect("consistent");
    assert_eq!(ext[&(ExecScope::Cta, ExecScope::Warp)], 1, "cta→thread 32 / warp→thread 32");
}
