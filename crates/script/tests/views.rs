//! `X.sub[...]` views and `T.evaluate` (docs/tile-primitives.md §1.8, §1.9): the HIR they
//! produce, the printer round trip, and the errors at the operand at fault.

use std::collections::BTreeMap;
use tirx_ir::hir::*;
use tirx_layout::{Axis, ComposeLayout, Iter, Layout, Swizzle, TileLayout};

const HEAD: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid
";

fn source(body: &str) -> String {
    format!(
        "{HEAD}\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (1024,), \"int32\")\n    \
         T.device_entry(); T.cta_id([1]); tid = T.thread_id([32])\n{body}"
    )
}

/// Parses (panicking with the rendered diagnostics) and checks `parse(print(k)) == k`.
fn parse(body: &str) -> Kernel {
    let src = source(body);
    let k = tirx_script::parse_kernel("t.py", &src)
        .unwrap_or_else(|d| panic!("{}", tirx_ir::diag::render(&d, "t.py", &src, false)));
    let printed = tirx_script::print_kernel(&k);
    let again = tirx_script::parse_kernel("printed.py", &printed)
        .unwrap_or_else(|d| panic!("{}\n{printed}", tirx_ir::diag::render(&d, "printed.py", &printed, false)));
    assert!(tirx_script::same_kernel(&k, &again), "round trip differs:\n{printed}");
    k
}

/// The rendered error of a kernel that must not parse.
fn error(body: &str) -> String {
    let src = source(body);
    match tirx_script::parse_kernel("t.py", &src) {
        Ok(_) => panic!("parsed:\n{src}"),
        Err(d) => tirx_ir::diag::render(&d, "t.py", &src, false),
    }
}

fn buf<'k>(k: &'k Kernel, name: &str) -> &'k Buffer {
    k.buffers.iter().find(|b| b.name == name).expect("buffer")
}

fn tile(shard: Vec<Iter>, offset: i64) -> Layout {
    let off: BTreeMap<Axis, i64> = if offset == 0 { BTreeMap::new() } else { [(Axis::M, offset)].into() };
    Layout::Tile(TileLayout::new(shard, vec![], off))
}

#[test]
fn sub_drops_indexed_dims_and_slices_the_layout() {
    // The reference's test: a (16, 4, 4, 4) view of 1024 elements, warp 1 of block 0.
    let k = parse("    V = A.view(16, 4, 4, 4)\n    blk = V.sub[0, :, 1, :]\n");
    let b = buf(&k, "blk");
    assert_eq!(b.shape, vec![4, 4]);
    assert_eq!(b.layout, tile(vec![Iter::m(4, 16), Iter::m(4, 1)], 4));
    let BufferOrigin::View { base } = b.origin else { panic!("{:?}", b.origin) };
    assert_eq!(k.buf(base).shape, vec![16, 4, 4, 4]);
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("blk = V.view((4, 4), layout="), "{printed}");
    // Slices narrow, trailing dims stay whole, a view of a view composes.
    let k = parse("    V = A.view(32, 32)\n    W = V.sub[2:6]\n    X = W.sub[:, 8:12]\n    Y = X.sub[3]\n");
    assert_eq!(buf(&k, "W").shape, vec![4, 32]);
    assert_eq!(buf(&k, "W").layout, tile(vec![Iter::m(4, 32), Iter::m(32, 1)], 64));
    assert_eq!(buf(&k, "X").layout, tile(vec![Iter::m(4, 32), Iter::m(4, 1)], 72));
    assert_eq!((buf(&k, "Y").shape.clone(), buf(&k, "Y").layout.clone()), (vec![4], tile(vec![Iter::m(4, 1)], 168)));
}

#[test]
fn sub_of_a_swizzled_and_of_a_register_buffer() {
    let k = parse(
        "    Sm = T.alloc_buffer((64, 256), \"float32\", scope=\"shared\", \
         layout=ComposeLayout(2, 3, 3, TileLayout(S[(64, 8, 32) : (32, 2048, 1)])))\n    \
         row = Sm.sub[5]\n    \
         R = T.alloc_buffer((32, 8), \"float32\", scope=\"local\", layout=TileLayout(S[(32, 8) : (1 @ laneid, 1)]))\n    \
         half = R.sub[:, 4:8]\n",
    );
    let sw = Swizzle { per_element: 2, swizzle_len: 3, atom_len: 3, inner: true };
    let want = TileLayout::new(vec![Iter::m(8, 2048), Iter::m(32, 1)], vec![], [(Axis::M, 160)].into());
    assert_eq!(buf(&k, "row").layout, Layout::Compose(ComposeLayout { swizzle: sw, tile: want }));
    assert_eq!(buf(&k, "row").scope, MemScope::Shared);
    let half = buf(&k, "half");
    assert_eq!((half.shape.clone(), half.scope), (vec![32, 4], MemScope::Local));
    assert_eq!(
        half.layout,
        Layout::Tile(TileLayout::new(
            vec![Iter::new(32, 1, Axis::LaneId), Iter::m(4, 1)],
            vec![],
            [(Axis::M, 4)].into()
        ))
    );
}

#[test]
fn sub_errors_are_at_the_operand() {
    let cases = [
        (
            "    i = tid\n    V = A.view(32, 32)\n    W = V.sub[i]\n",
            "`.sub` indices must be compile-time integers",
            "t.py:11:15",
        ),
        (
            "    V = A.view(32, 32)\n    W = V.sub[0, 0, 0]\n",
            "`V` has 2 dimension(s) but `.sub` got 3 indices",
            "t.py:10:15",
        ),
        (
            "    V = A.view(32, 32)\n    W = V.sub[32]\n",
            "region 32:33 is out of bounds for dimension 0 of `V`",
            "t.py:10:15",
        ),
        ("    V = A.view(32, 32)\n    W = V.sub[4:2]\n", "empty view: extent -2 in dimension 0 of `V`", "t.py:10:15"),
        (
            "    V = A.view(32, 32)\n    W = V.sub[1, 2]\n",
            "`.sub` with an index for every dim of `V` is one element",
            "t.py:10:15",
        ),
        ("    V = A.sub(0)\n", "`A.sub` is indexed, not called", "t.py:9:9"),
        ("    Tx.copy(A.sub[0:4], A[4:8])\n", "a `A.sub[...]` view must be bound to a name", "t.py:9:13"),
    ];
    for (body, msg, at) in cases {
        let err = error(body);
        assert!(err.contains(msg), "want `{msg}`:\n{err}");
        assert!(err.contains(at), "want `{at}`:\n{err}");
    }
}

#[test]
fn evaluate_is_a_checked_statement_without_effect() {
    let k = parse(
        "    R = T.alloc_local((4, 4), \"int32\")\n    \
         for i in T.unroll(4):\n        for j in T.unroll(4):\n            T.evaluate(R[i, j])\n    \
         T.evaluate(tid + 1)\n    T.evaluate(0)\n",
    );
    let evals: Vec<&Expr> = fn_evals(&k.body);
    assert_eq!(evals.len(), 3);
    assert!(matches!(evals[0].kind, ExprKind::Load(..)));
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("T.evaluate(R[i, j])") && printed.contains("T.evaluate(tid + 1)"), "{printed}");
    for (body, msg) in [
        (
            "    R = T.alloc_local((4,), \"int32\")\n    T.evaluate(R[4])\n",
            "index 4 is out of bounds for dimension 0 of `R`",
        ),
        ("    x = T.evaluate(1)\n", "`T.evaluate` does not produce a value"),
        ("    T.evaluate()\n", "T.evaluate"),
        ("    T.evaluate(A)\n", "buffer `A` used as a scalar"),
    ] {
        let err = error(body);
        assert!(err.contains(msg), "want `{msg}`:\n{err}");
    }
}

fn fn_evals(body: &[Stmt]) -> Vec<&Expr> {
    let mut out = vec![];
    for s in body {
        match &s.kind {
            StmtKind::Evaluate(e) => out.push(e),
            StmtKind::For { body, .. } => out.extend(fn_evals(body)),
            StmtKind::If { then_body, else_body, .. } => {
                out.extend(fn_evals(then_body));
                out.extend(fn_evals(else_body));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn a_value_assigned_to_a_buffers_name_is_an_error() {
    // (found by the fuzzer: `R = R.local()` then `R = R[j] * 3.0` made `R` a mutable scalar whose
    // one-element buffer shadowed the view its own value read, and printed as such the kernel
    // read the new buffer instead)
    let body = "    V = A.view(32, 32)\n    for j in range(4):\n        V = V[j, 0] * 3\n";
    let err = error(body);
    assert!(err.contains("`V` names a buffer; assigning it a value makes it a mutable scalar"), "{err}");
    assert!(err.contains("t.py:11:9"), "{err}");
    assert!(err.contains("help: store into the buffer"), "{err}");
    // a name assigned only scalars stays a mutable scalar
    parse("    x = 0\n    for j in range(4):\n        x = x + A[j]\n    A[0] = x\n");
}
