//! Language features, each checked on the HIR it produces (and every kernel
//! here also round-trips through the printer).

use std::collections::BTreeMap;
use tirx_ir::hir::*;
use tirx_ir::op::{AttrValue, CacheMode};
use tirx_ir::DType;
use tirx_layout::{Axis, ExecScope, Iter, Layout, TileLayout};

fn parse(src: &str) -> Kernel {
    let k = match tirx_script::parse_kernel("t.py", src) {
        Ok(k) => k,
        Err(d) => panic!("{}", tirx_ir::diag::render(&d, "t.py", src, false)),
    };
    let printed = tirx_script::print_kernel(&k);
    let again = tirx_script::parse_kernel("printed.py", &printed)
        .unwrap_or_else(|d| panic!("{}\n{printed}", tirx_ir::diag::render(&d, "printed.py", &printed, false)));
    assert!(tirx_script::same_kernel(&k, &again), "round trip differs:\n{printed}");
    k
}

const HEAD: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, ComposeLayout, Axis, laneid, warpid, tx
";

fn kernel(consts: &str, body: &str) -> Kernel {
    parse(&format!(
        "{HEAD}{consts}\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (64, 8), \"float32\")\n    \
         T.device_entry(); T.cta_id([1]); T.warp_id([2]); T.lane_id([32]); tid = T.thread_id([64])\n{body}"
    ))
}

fn layout_of(k: &Kernel, name: &str) -> Layout {
    k.buffers.iter().find(|b| b.name == name).map(|b| b.layout.clone()).expect("buffer")
}

fn tile(shard: Vec<Iter>, replica: Vec<Iter>, offset: &[(Axis, i64)]) -> Layout {
    Layout::Tile(TileLayout::new(shard, replica, offset.iter().copied().collect::<BTreeMap<_, _>>()))
}

#[test]
fn layout_expressions() {
    let k = kernel(
        "L1 = TileLayout(S[8 : 4 @ laneid])\n\
         L2 = TileLayout(S[(8, 4):(\"laneid\", (2, \"warpid\"))] + R[2 : 8 @ warpid] + 2 @ warpid + 64)\n\
         L3 = T.TileLayout(T.S[(2, 32):(Axis.warpid, 1 @ laneid)])\n\
         L4 = ComposeLayout(3, 3, 3, S[(16, 64)], swizzle_inner=False)\n\
         L5 = TileLayout(S[4, 2])\n",
        "    a = T.alloc_local((8,), \"float32\", layout=L1)\n    \
         b = T.alloc_local((8, 4), \"float32\", layout=L2)\n    \
         c = T.alloc_local((2, 32), \"float32\", layout=L3)\n    \
         d = T.alloc_shared((16, 64), \"float16\", layout=L4)\n    \
         e = T.alloc_local((4, 2), \"float32\", layout=L5)\n",
    );
    assert_eq!(layout_of(&k, "a"), tile(vec![Iter::new(8, 4, Axis::LaneId)], vec![], &[]));
    assert_eq!(
        layout_of(&k, "b"),
        tile(
            vec![Iter::new(8, 1, Axis::LaneId), Iter::new(4, 2, Axis::WarpId)],
            vec![Iter::new(2, 8, Axis::WarpId)],
            &[(Axis::WarpId, 2), (Axis::M, 64)]
        )
    );
    assert_eq!(
        layout_of(&k, "c"),
        tile(vec![Iter::new(2, 1, Axis::WarpId), Iter::new(32, 1, Axis::LaneId)], vec![], &[])
    );
    let Layout::Compose(c) = layout_of(&k, "d") else { panic!("compose") };
    assert_eq!((c.swizzle.per_element, c.swizzle.swizzle_len, c.swizzle.atom_len, c.swizzle.inner), (3, 3, 3, false));
    assert_eq!(layout_of(&k, "e"), Layout::Tile(TileLayout::row_major(&[4, 2])));
}

#[test]
fn python_constants_fold_with_python_semantics() {
    let k = kernel(
        "shape, dtype = (4, 8), \"float32\"\nn = -7 // 2 + 8\nm = -7 % 3\nfs = tuple(slice(0, d) for d in shape)\n\
         sq = [d * d for d in range(4) if d % 2 == 1]\nwide = (*shape, len(sq), max(shape), min(3, 2))\n",
        "    for i in range(n):\n        A[tid, i] = T.float32(m)\n    \
         L = T.alloc_local(wide, dtype)\n    \
         Tx.fill(L[fs], T.float32(sq[1]))\n",
    );
    let stmt =
        |pred: &dyn Fn(&StmtKind) -> bool| k.body.iter().find(|s| pred(&s.kind)).expect("statement").kind.clone();
    let StmtKind::For { extent, body, .. } = stmt(&|s| matches!(s, StmtKind::For { .. })) else { panic!() };
    assert_eq!(extent.kind, ExprKind::Int(4));
    let StmtKind::Store { value, .. } = &body[0].kind else { panic!() };
    assert_eq!((value.kind.clone(), value.dtype), (ExprKind::Float(2.0), DType::F32));
    let l = k.buffers.iter().find(|b| b.name == "L").expect("L");
    assert_eq!(l.shape, vec![4, 8, 2, 8, 2]);
    let StmtKind::Tile(c) = stmt(&|s| matches!(s, StmtKind::Tile(_))) else { panic!() };
    let TileArg::Region(r) = &c.args[0] else { panic!() };
    assert_eq!(r.ranges.iter().map(|x| x.extent).collect::<Vec<_>>(), vec![4, 8, 2, 8, 2]);
    assert_eq!(
        c.args[1],
        TileArg::Scalar(Expr {
            kind: ExprKind::Float(9.0),
            dtype: DType::F32,
            span: match &c.args[1] {
                TileArg::Scalar(e) => e.span,
                _ => panic!(),
            }
        })
    );
}

#[test]
fn runtime_arithmetic_keeps_floor_semantics_and_dtypes() {
    let k = kernel("", "    row = tid // 4\n    col = tid % 4\n    x: T.let = 5\n    y = T.int64(3)\n    z = -y\n");
    let lets: Vec<(&str, &Expr)> = k
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Let { var, value } => Some((k.var(*var).name.as_str(), value)),
            _ => None,
        })
        .collect();
    assert!(matches!(lets[0].1.kind, ExprKind::Binary(BinOp::FloorDiv, ..)));
    assert!(matches!(lets[1].1.kind, ExprKind::Binary(BinOp::FloorMod, ..)));
    assert_eq!((lets[2].0, &lets[2].1.kind, lets[2].1.dtype), ("x", &ExprKind::Int(5), DType::I32));
    assert_eq!((&lets[3].1.kind, lets[3].1.dtype), (&ExprKind::Int(3), DType::I64));
    assert!(matches!(lets[4].1.kind, ExprKind::Unary(UnOp::Neg, _)));
    assert_eq!(lets[4].1.dtype, DType::I64);
}

#[test]
fn conditions_loops_and_scope_ids() {
    let k = parse(&format!(
        "{HEAD}\n@T.prim_func\ndef k(A: T.Buffer((2, 3, 64), \"float32\")):\n    T.device_entry()\n    \
         bx, by = T.cta_id([2, 3]); T.warp_id([2]); T.lane_id(); T.thread_id([64])\n    \
         for i, j in T.grid(2, 4):\n        if 0 <= j < 2 and not i == 1:\n            A[bx, by, j] = 1.0\n        \
         elif j == 2:\n            A[bx, by, j] = T.if_then_else(i > 0, 2.0, 3.0)\n        else:\n            pass\n    \
         for u in T.unroll(2, 6):\n        A[bx, by, u] = T.exp(A[bx, by, u])\n"
    ));
    assert_eq!(k.params[0].buffer, Some(BufId(0)));
    assert_eq!(k.buffers[0].origin, BufferOrigin::Param);
    let StmtKind::ScopeId(d) = &k.body[1].kind else { panic!() };
    assert_eq!((d.vars.len(), d.extents.clone()), (2, Some(vec![2, 3])));
    assert_eq!(k.var(d.vars[1]).name, "by");
    let StmtKind::ScopeId(lane) = &k.body[3].kind else { panic!() };
    assert_eq!((lane.kind, lane.extents.clone()), (ScopeIdKind::LaneId, None));
    let ext = tirx_script::infer_scope_extents(&k).expect("closure pins lane_id");
    assert_eq!(ext[&(ExecScope::Warp, ExecScope::Thread)], 32);
    assert_eq!(ext[&(ExecScope::Kernel, ExecScope::Cta)], 6);
    let StmtKind::For { body, .. } = &k.body[5].kind else { panic!() };
    let StmtKind::For { body, .. } = &body[0].kind else { panic!("grid nests loops") };
    let StmtKind::If { cond, else_body, .. } = &body[0].kind else { panic!() };
    assert!(matches!(cond.kind, ExprKind::Binary(BinOp::And, ..)));
    assert!(matches!(else_body[0].kind, StmtKind::If { .. }), "elif is a nested if");
    let StmtKind::For { begin, extent, kind, .. } = &k.body[6].kind else { panic!() };
    assert_eq!((begin.kind.clone(), extent.kind.clone(), *kind), (ExprKind::Int(2), ExprKind::Int(4), ForKind::Unroll));
}

#[test]
fn tile_calls_store_operands_by_signature() {
    let k = kernel(
        "",
        "    r = T.alloc_local((8,), \"float32\")\n    s = T.alloc_local((1,), \"float32\")\n    \
         Tx.exp2(r, scale=2.0)\n    Tx.fma(r, r, s[0], bias=r)\n    Tx.wg.zero(r[0:4])\n    \
         Tx.cta.copy(A[tid, 0:8], r, dispatch=\"vec_auto\", cache=\"nc\", prefetch_size=64)\n",
    );
    let calls: Vec<&TileCall> =
        k.body.iter().filter_map(|s| if let StmtKind::Tile(c) = &s.kind { Some(c) } else { None }).collect();
    let exp2 = calls[0];
    assert_eq!(exp2.args.len(), 6);
    assert_eq!(exp2.args[0], exp2.args[1], "src defaults to dst");
    assert_eq!(exp2.args[2], TileArg::None);
    assert!(matches!(&exp2.args[3], TileArg::Scalar(e) if e.kind == ExprKind::Float(2.0)));
    assert_eq!(exp2.args[4], TileArg::Attr(AttrValue::Bool(false)), "ftz defaults to False");
    assert_eq!(exp2.args[5], TileArg::Attr(AttrValue::Choice("mufu")), "pipe defaults to the MUFU");
    let fma = calls[1];
    assert!(matches!(&fma.args[2], TileArg::Scalar(Expr { kind: ExprKind::Load(..), .. })), "s[0] is a scalar load");
    assert!(matches!(&fma.args[3], TileArg::Region(_)));
    assert_eq!(calls[2].scope, ExecScope::Warpgroup);
    let copy = calls[3];
    assert_eq!(copy.dispatch.as_deref(), Some("vec_auto"));
    let config: Vec<(ConfigKey, ConfigValue)> = copy.config.iter().map(|c| (c.key, c.value)).collect();
    assert_eq!(
        config,
        vec![
            (ConfigKey::Cache, ConfigValue::Cache(CacheMode::NonCoherent)),
            (ConfigKey::PrefetchSize, ConfigValue::PrefetchSize(64))
        ]
    );
}

#[test]
fn test_harness_code_around_the_kernel_is_ignored() {
    let k = parse(&format!(
        "\"\"\"A module docstring.\"\"\"\nimport pytest\nimport tvm\n{HEAD}\n\
         @pytest.mark.gpu\ndef test_helper():\n    return 1\n\n\
         @T.prim_func(private=True)\ndef k(A_ptr: T.handle):\n    \"\"\"Kernel docstring.\"\"\"\n    \
         A = T.match_buffer(A_ptr, (32,), \"float32\")\n    T.device_entry(); T.thread_id([32])\n\n\
         if __name__ == \"__main__\":\n    tvm.testing.main()\n"
    ));
    assert_eq!(k.name, "k");
}

#[test]
fn a_compile_time_if_keeps_its_bindings() {
    let k = kernel("SWIZZLE = True\n", "    if SWIZZLE:\n        lay = ComposeLayout(2, 3, 3, S[(64, 8)])\n    else:\n        lay = TileLayout(S[(64, 8)])\n    X = T.alloc_shared((64, 8), \"float32\", layout=lay)\n");
    assert!(matches!(layout_of(&k, "X"), Layout::Compose(_)));
}

#[test]
fn unbound_scope_ids_do_not_take_their_names() {
    let k = kernel("", "    cta_id = tid + 1\n    A[tid, 0] = T.cast(cta_id, \"float32\")\n");
    let names: Vec<&str> = k.vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "cta_id").count(), 2, "{names:?}");
    assert!(tirx_script::print_kernel(&k).contains("    T.cta_id([1])\n"));
}

#[test]
fn printed_layouts_survive_shadowing_names() {
    // Buffers named like the layout builders, a variable named like an axis,
    // a buffer named like the printer's first layout constant.
    let k = kernel(
        "LR = TileLayout(S[(8, 4):(1@laneid, 1)] + R[2:4@warpid] + 3@warpid + 1)\n\
         LS = TileLayout(S[(2, 32):(32@tx, 1@tx)])\n\
         LC = ComposeLayout(2, 2, 3, TileLayout(S[(8, 8):(1, 8)]))\n",
        "    tx = tid + 0\n    \
         R = T.alloc_local((8, 4), \"float32\", layout=LR)\n    \
         S = T.alloc_local((2, 32), \"float32\", layout=LS)\n    \
         layout_0 = T.alloc_shared((8, 8), \"float16\", layout=LC)\n",
    );
    let printed = tirx_script::print_kernel(&k);
    assert!(
        printed.contains("layout_1 = TileLayout(S[(8, 4):(1@laneid, 1)] + R[2:4@warpid] + 1 + 3@warpid)"),
        "{printed}"
    );
    assert!(!printed.contains("\nlayout_0 ="), "the kernel owns `layout_0`:\n{printed}");
}

#[test]
fn region_extents_are_found_through_affine_arithmetic() {
    let k = kernel("", "    Tx.copy(A[tid, (tid // 8) * 2 : (tid // 8 + 1) * 2], A[0, 0:2])\n    for i in range(tid * 2, (tid + 2) * 2):\n        pass\n");
    let c =
        k.body.iter().find_map(|s| if let StmtKind::Tile(c) = &s.kind { Some(c) } else { None }).expect("tile call");
    let TileArg::Region(r) = &c.args[0] else { panic!() };
    assert_eq!(r.ranges[1].extent, 2);
    let ext = k.body.iter().find_map(|s| {
        if let StmtKind::For { extent, .. } = &s.kind {
            Some(extent.kind.clone())
        } else {
            None
        }
    });
    assert_eq!(ext, Some(ExprKind::Int(4)));
}

#[test]
fn elementwise_operands_may_broadcast() {
    kernel(
        "",
        "    d = T.alloc_local((5, 6, 7), \"float32\")\n    b = T.alloc_local((1, 6, 1), \"float32\")\n    \
         r = T.alloc_local((8,), \"float32\")\n    Tx.add(d, d, b)\n    Tx.add(d[0, 0, 0:7], d[1, 1, 0:7], 1.0)\n    \
         Tx.exp(r[0:8], A[tid, 0:8])\n",
    );
}

#[test]
fn views_may_cover_part_of_their_base() {
    let k = kernel("STRIDED = TileLayout(S[(4, 4):(16, 1)])\n", "    V = A.view(4, 4, layout=STRIDED)\n    L = T.alloc_local((4, 4), \"float32\")\n    Tx.copy(L, V, cache=\"nc\")\n");
    let v = k.buffers.iter().find(|b| b.name == "V").expect("view");
    assert_eq!(
        (v.shape.clone(), v.scope, v.origin.clone()),
        (vec![4, 4], MemScope::Global, BufferOrigin::View { base: BufId(0) })
    );
}

#[test]
fn int64_bounds_keep_their_dtype() {
    let k = kernel(
        "",
        "    for i in range(T.int64(2), 6):\n        A[tid, i] = 1.0\n    for j in range(T.int64(3)):\n        pass\n    \
         for a, b in T.grid(T.int64(2), 2):\n        pass\n    Tx.fill(A[tid, T.int64(1):5], 0.0)\n",
    );
    let StmtKind::For { var, begin, extent, .. } = &k.body[5].kind else { panic!("{:?}", k.body[5]) };
    assert_eq!((begin.dtype, extent.dtype, k.var(*var).dtype), (DType::I64, DType::I64, DType::I64));
    assert_eq!(extent.kind, ExprKind::Int(4));
}

#[test]
fn tricky_expressions_round_trip() {
    let k = kernel(
        "",
        "    x = -T.int32(4)\n    y = T.int32(1) + 3\n    z = not (tid > 3)\n    w = ~tid\n    \
         v = T.if_then_else(tid > 0, 1, 2)\n    u = (tid << 2) + 8 - (tid - 1)\n    q = T.float16(1.5) * T.float16(2.0)\n    \
         r = T.max(T.float32(1), 2.0)\n    s = T.min(1, tid)\n    t2 = A[tid, 0] if tid > 3 else A[0, 0]\n    \
         b2 = tid > 3 and tid < 9 or tid == 0\n    c2 = 0 < tid < 4\n    d2 = -(tid + 1) * (tid % 3) // 2\n    \
         e2 = T.cast(T.cast(tid, \"float16\"), \"float32\") / 3.0\n",
    );
    let printed = tirx_script::print_kernel(&k);
    for want in [
        "x: T.let = -4",
        "y = T.int32(1) + T.int32(3)",
        "z = not tid > 3",
        "u = (tid << 2) + 8 - (tid - 1)",
        "q = T.float16(1.5) * T.float16(2.0)",
        "r = T.max(T.float32(1.0), T.float32(2.0))",
        "b2 = tid > 3 and tid < 9 or tid == 0",
        "c2 = 0 < tid and tid < 4",
        "d2 = -(tid + 1) * (tid % 3) // 2",
    ] {
        assert!(printed.contains(want), "missing `{want}` in\n{printed}");
    }
}

/// Python ints that do not fit int32 are int64 (as in TVM); an int32 operand combined
/// with one is widened, never the literal squeezed.
#[test]
fn large_int_literals_are_int64() {
    let k = kernel("", "    x = tid + 3000000000\n    y = tid + 7\n");
    let lets: Vec<&Expr> = k
        .body
        .iter()
        .filter_map(|s| match &s.kind {
            StmtKind::Let { value, .. } => Some(value),
            _ => None,
        })
        .collect();
    assert_eq!(lets.len(), 2);
    assert_eq!(lets[0].dtype, DType::I64);
    let ExprKind::Binary(BinOp::Add, a, b) = &lets[0].kind else { panic!("{:?}", lets[0]) };
    assert!(matches!(a.kind, ExprKind::Cast(_)) && a.dtype == DType::I64, "{a:?}");
    assert_eq!((&b.kind, b.dtype), (&ExprKind::Int(3000000000), DType::I64));
    assert_eq!(lets[1].dtype, DType::I32);
}

/// The reference's assignment semantics: a name assigned at two places (or
/// augmented) holds a mutable scalar — a one-element local buffer, typed by its
/// first value or its annotation — while a single assignment stays a `Let`.
#[test]
fn reassigned_names_are_mutable_scalars() {
    let k = kernel(
        "",
        "    acc = 0.0\n    n: T.int32 = 0\n    once = tid * 2\n    for j in range(8):\n        \
         acc = acc + A[tid, j]\n        n += 1\n    A[tid, 0] = acc / T.cast(n + once, \"float32\")\n",
    );
    let scalar = |name: &str| k.buffers.iter().find(|b| b.name == name).map(|b| (b.shape.clone(), b.dtype, b.scope));
    assert_eq!(scalar("acc"), Some((vec![1], DType::F32, MemScope::Local)));
    assert_eq!(scalar("n"), Some((vec![1], DType::I32, MemScope::Local)));
    assert_eq!(scalar("once"), None, "a name assigned once is a Let");
    assert!(k.vars.iter().any(|v| v.name == "once"));
}

#[test]
fn a_let_binding_stays_immutable_and_compile_time_values_rebind() {
    // Python values may be rebound freely (they never reach the kernel as variables).
    let k = kernel(
        "",
        "    r = (0, 8)\n    r = (2, 4)\n    x: T.let = tid + 1\n    A[tid, r[0]] = T.cast(x, \"float32\")\n",
    );
    assert!(k.buffers.iter().all(|b| b.name != "r" && b.name != "x"));
}

/// `X.local()` is the thread's registers in physical order (element `i` is register `i`, gaps
/// counted), as the reference's views are since its #20076; `X.local(d0, d1)` reshapes that
/// span row-major; `X.local(layout=L)` is a view through `L` (storage coordinates, say).
#[test]
fn local_views_are_physical_register_order() {
    let k = kernel(
        "P = TileLayout(S[(32, 2, 4):(1 @ laneid, 1, 2)])\nG = TileLayout(S[(32, 2, 2):(1 @ laneid, 4, 1)])\n",
        "    R = T.alloc_local((32, 2, 4), \"float32\", layout=P)\n    \
         a = R.local()\n    b = R.local(4, 2)\n    c = R.local(layout=TileLayout(S[(2, 4):(1, 2)]))\n    \
         Q = T.alloc_local((32, 2, 2), \"float32\", layout=G)\n    d = Q.local()\n",
    );
    let view =
        |name: &str| k.buffers.iter().find(|b| b.name == name).map(|b| (b.shape.clone(), b.layout.clone())).unwrap();
    assert_eq!(view("a"), (vec![8], Layout::Tile(TileLayout::row_major(&[8]))));
    assert_eq!(view("b"), (vec![4, 2], Layout::Tile(TileLayout::row_major(&[4, 2]))));
    assert_eq!(view("c"), (vec![8], tile(vec![Iter::m(2, 1), Iter::m(4, 2)], vec![], &[])));
    // Registers 0, 1, 4, 5: the span is 6, gaps included.
    assert_eq!(view("d").0, vec![6]);
}
