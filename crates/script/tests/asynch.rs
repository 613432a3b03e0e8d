//! The kernel's own asynchronous instructions and the objects that make them
//! (docs/tile-primitives.md §8): every spelling of `T.ptx.*` the reference
//! uses gives the same statement, `T.SMEMPool()` allocations are `shared.dyn`
//! buffers in order, `MBarrier` methods are plain statements (init by thread 0
//! of the CTA), every kernel round-trips through the printer, and misuse is an
//! error at the operand at fault.

use tirx_ir::hir::*;
use tirx_ir::DType;

const HEAD: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout
from tvm.tirx.lang.pipeline import MBarrier
";

fn src(body: &str) -> String {
    format!(
        "{HEAD}\n@T.prim_func\ndef k(A_ptr: T.handle):\n    A = T.match_buffer(A_ptr, (64, 8), \"float32\")\n    \
         T.device_entry(); T.cta_id([1]); tid = T.thread_id([64])\n    bars = T.alloc_buffer((2,), \"int64\", scope=\"shared\")\n{body}"
    )
}

/// Parses, checks the printer round trip, and returns the kernel.
fn parse(body: &str) -> Kernel {
    let text = src(body);
    let k = match tirx_script::parse_kernel("t.py", &text) {
        Ok(k) => k,
        Err(d) => panic!("{}", tirx_ir::diag::render(&d, "t.py", &text, false)),
    };
    let printed = tirx_script::print_kernel(&k);
    let again = tirx_script::parse_kernel("printed.py", &printed)
        .unwrap_or_else(|d| panic!("{}\n{printed}", tirx_ir::diag::render(&d, "printed.py", &printed, false)));
    assert!(tirx_script::same_kernel(&k, &again), "round trip differs:\n{printed}");
    k
}

fn error(body: &str) -> String {
    let text = src(body);
    match tirx_script::parse_kernel("t.py", &text) {
        Ok(_) => panic!("expected an error:\n{text}"),
        Err(d) => tirx_ir::diag::render(&d, "t.py", &text, false),
    }
}

fn asyncs(body: &[Stmt]) -> Vec<&AsyncStmt> {
    let mut out = vec![];
    for s in body {
        match &s.kind {
            StmtKind::Async(a) => out.push(a),
            StmtKind::If { then_body, else_body, .. } => {
                out.extend(asyncs(then_body));
                out.extend(asyncs(else_body));
            }
            StmtKind::For { body, .. } => out.extend(asyncs(body)),
            _ => {}
        }
    }
    out
}

fn int(e: &Expr) -> Option<i64> {
    match e.kind {
        ExprKind::Int(v) => Some(v),
        _ => None,
    }
}

#[test]
fn every_spelling_is_one_statement() {
    let groups = [
        ("T.ptx.cp_async.commit_group()", "T.ptx.cp.async_.commit_group()"),
        ("T.ptx.cp_async.wait_group(2)", "T.ptx.cp.async_.wait_group(2)"),
        ("T.ptx.mbarrier.init(bars.ptr_to([1]), 4)", "T.ptx.mbarrier.init.shared.b64(bars.ptr_to([1]), T.uint32(4))"),
        ("T.ptx.mbarrier.arrive(bars.ptr_to([0]))", "T.ptx.mbarrier.arrive.shared.b64(bars.ptr_to([0]), T.uint32(1))"),
        (
            "T.ptx.mbarrier.arrive.expect_tx(bars.ptr_to([0]), 1024)",
            "T.ptx.mbarrier.arrive.expect_tx.shared.b64(bars.ptr_to([0]), T.uint32(1024))",
        ),
        ("T.ptx.mbarrier.try_wait(bars.ptr_to([0]), 1)", "T.cuda.mbarrier_wait(bars.ptr_to([0]), 1)"),
        ("T.ptx.fence.proxy_async(\"shared::cta\")", "T.ptx.fence.proxy.async_.shared__cta()"),
        ("T.ptx.fence.mbarrier_init()", "T.ptx.fence.mbarrier_init.release.cluster()"),
    ];
    for (a, b) in groups {
        let (ka, kb) = (parse(&format!("    {a}\n")), parse(&format!("    {b}\n")));
        assert!(tirx_script::same_kernel(&ka, &kb), "`{a}` and `{b}` differ");
        assert_eq!(asyncs(&ka.body).len(), 1, "{a}");
    }
    let k = parse("    T.ptx.cp_async.wait_group(2)\n    T.ptx.mbarrier.try_wait(bars.ptr_to([tid % 2]), tid // 32)\n");
    let a = asyncs(&k.body);
    assert_eq!(a[0], &AsyncStmt::WaitGroup(2));
    let AsyncStmt::MbarWait { bar, parity } = a[1] else { panic!("{a:?}") };
    assert_eq!((bar.buf.0, parity.dtype), (1, DType::I32));
    // The reference's `wait_group()` without a count waits for everything.
    assert_eq!(asyncs(&parse("    T.ptx.cp_async.wait_group()\n").body)[0], &AsyncStmt::WaitGroup(0));
}

#[test]
fn pools_carve_shared_dyn_buffers() {
    let k = parse(
        "    pool = T.SMEMPool()
    X = pool.alloc((2, 32), \"float16\", align=128, layout=TileLayout(S[(2, 32)]))
    Y = pool.alloc([16], \"float32\", layout=\"default\")
    mbar = MBarrier(pool, 3)
    pool.commit()
",
    );
    let names: Vec<(&str, MemScope, DType, &[i64])> =
        k.buffers.iter().skip(2).map(|b| (b.name.as_str(), b.scope, b.dtype, b.shape.as_slice())).collect();
    assert_eq!(
        names,
        [
            ("X", MemScope::SharedDyn, DType::F16, &[2, 32][..]),
            ("Y", MemScope::SharedDyn, DType::F32, &[16][..]),
            ("mbar", MemScope::SharedDyn, DType::I64, &[3][..]),
        ]
    );
}

#[test]
fn mbarrier_methods_are_statements() {
    let k = parse(
        "    pool = T.SMEMPool()
    full = MBarrier(pool, 2)
    empty = MBarrier(pool, 2, phase_offset=1)
    full.init(1)
    empty.init(64)
    T.cuda.cta_sync()
    for i in range(4):
        full.wait(i % 2, i // 2 % 2)
        empty.arrive(i % 2)
        empty.wait(i % 2, 0)
        T.ptx.mbarrier.arrive(full.ptr_to([i % 2]))
",
    );
    let a = asyncs(&k.body);
    // Two inits per barrier (one per stage), by thread 0 of the CTA.
    let inits: Vec<(u32, Option<i64>, Option<i64>)> = a
        .iter()
        .filter_map(|s| match s {
            AsyncStmt::MbarInit { bar, count } => Some((bar.buf.0, int(&bar.index[0]), int(count))),
            _ => None,
        })
        .collect();
    assert_eq!(inits, [(2, Some(0), Some(1)), (2, Some(1), Some(1)), (3, Some(0), Some(64)), (3, Some(1), Some(64))]);
    let StmtKind::If { cond, .. } = &k.body.iter().find(|s| matches!(s.kind, StmtKind::If { .. })).unwrap().kind else {
        unreachable!()
    };
    assert!(
        matches!(&cond.kind, ExprKind::Binary(BinOp::Eq, x, z) if matches!(x.kind, ExprKind::Var(_)) && int(z) == Some(0))
    );
    // `phase_offset=1` flips the parity of every wait on `empty`.
    let AsyncStmt::MbarWait { parity, .. } = a[6] else { panic!("{:?}", a[6]) };
    assert!(matches!(&parity.kind, ExprKind::Binary(BinOp::BitXor, _, one) if int(one) == Some(1)), "{parity:?}");
}

#[test]
fn mbarrier_init_elects_thread_zero_of_the_declared_ids() {
    let text = format!(
        "{HEAD}\n@T.prim_func\ndef k():\n    T.device_entry(); T.cta_id([1]); w = T.warp_id([2]); lane = T.lane_id([32])\n    \
         pool = T.SMEMPool()\n    bar = MBarrier(pool, 1)\n    bar.init(1)\n"
    );
    let k = tirx_script::parse_kernel("t.py", &text).unwrap();
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("if w == 0 and lane == 0:"), "{printed}");
    // A leader of the author's choice.
    let text = text.replace("MBarrier(pool, 1)", "MBarrier(pool, 1, leader=w == 1)");
    let printed = tirx_script::print_kernel(&tirx_script::parse_kernel("t.py", &text).unwrap());
    assert!(printed.contains("if w == 1:"), "{printed}");
    // Ids that do not single out one thread.
    let text = format!(
        "{HEAD}\n@T.prim_func\ndef k():\n    T.device_entry(); T.cta_id([1]); w = T.warp_id([2])\n    \
         pool = T.SMEMPool()\n    bar = MBarrier(pool, 1)\n    bar.init(1)\n"
    );
    let d = tirx_script::parse_kernel("t.py", &text).unwrap_err();
    let r = tirx_ir::diag::render(&d, "t.py", &text, false);
    assert!(r.contains("`bar.init` is run by thread 0 of the CTA, which the declared ids do not single out"), "{r}");
}

#[test]
fn misuse_is_an_error_at_the_operand() {
    let cases = [
        ("    T.ptx.cp_async.comit_group()\n", "did you mean `T.ptx.cp_async.commit_group`?"),
        ("    T.ptx.mbarrier.arrive(A.ptr_to([0, 0]))\n", "`A` (global float32) cannot hold mbarriers"),
        ("    T.ptx.mbarrier.init(bars.ptr_to([2]), 1)\n", "index 2 is outside dim 0 of `bars` (size 2)"),
        ("    T.ptx.cp_async.wait_group(-1)\n", "the count of groups left pending must be 0..=64"),
        ("    T.ptx.cp_async.wait_group(tid)\n", "expected a compile-time integer"),
        ("    T.ptx.mbarrier.arrive(bars.ptr_to([0]), 2)\n", "arrives once"),
        ("    T.ptx.fence.proxy_async(\"global\")\n", "orders the CTA's shared memory only"),
        ("    x = T.ptx.cp_async.commit_group()\n", "does not produce a value"),
        ("    y = tid + T.ptx.cp_async.commit_group()\n", "is an instruction, not a value"),
        ("    pool = T.SMEMPool()\n    X = pool.alloc((8,), \"float32\", align=256)\n", "`align=256`"),
        (
            "    pool = T.SMEMPool()\n    X = pool.alloc((8,), \"float32\", scope=\"shared\")\n",
            "its buffers are `shared.dyn`",
        ),
        ("    pool = T.SMEMPool()\n    pool.alloc((8,), \"float32\")\n", "bind it to a name"),
        ("    pool = T.SMEMPool()\n    b = MBarrier(pool, 2)\n    b.wait(2, 0)\n", "stage 2 of `b`, which has 2"),
        ("    b = MBarrier(3, 2)\n", "expected a shared memory pool"),
        ("    pool = T.SMEMPool()\n    b = MBarrier(pool, 2)\n    p = b.init(1)\n", "does not produce a value"),
    ];
    for (body, words) in cases {
        let r = error(body);
        assert!(r.contains(words), "`{words}` not in:\n{r}");
    }
}
