//! Scalar parameters, a run-time outer dimension, symbolic grids and `T.assume`
//! (docs/tile-primitives.md §7.1): what they parse to, their canonical print, and
//! the errors at the operand at fault.

use tirx_ir::diag::line_col;
use tirx_ir::hir::{dyn_outer_bound, ExprKind, StmtKind};
use tirx_ir::DType;
use tirx_script::{parse_kernel, print_kernel, same_kernel};

const HEAD: &str = "\
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

fn kernel(sig: &str, body: &str) -> String {
    format!("{HEAD}def k({sig}):\n{body}")
}

const ROWS: &str = "    A = T.match_buffer(A_ptr, (n, 128), \"float32\")
    T.device_entry()
    bx = T.cta_id([(n + 63) // 64])
    tx = T.thread_id([128])
    S = T.alloc_buffer((64, 128), \"float32\", scope=\"shared\")
    Tx.cta.copy(S[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128])
";

#[test]
fn scalar_parameters_are_kernel_values_in_signature_order() {
    let src = kernel("A_ptr: T.handle, n: T.int32, eps: T.float32, m: T.uint32, w: T.int64, d: T.float64", ROWS);
    let k = parse_kernel("k.py", &src).unwrap();
    let names: Vec<&str> = k.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["A_ptr", "n", "eps", "m", "w", "d"]);
    let dtypes: Vec<DType> = k.params.iter().filter_map(|p| p.scalar).map(|v| k.var(v).dtype).collect();
    assert_eq!(dtypes, [DType::I32, DType::F32, DType::U32, DType::I64, DType::F64]);
    assert!(k.params[0].scalar.is_none() && k.params[0].buffer.is_some());
}

#[test]
fn a_symbolic_outer_dimension_keeps_its_expression_and_a_bound() {
    let src = kernel("A_ptr: T.handle, n: T.int32", ROWS);
    let k = parse_kernel("k.py", &src).unwrap();
    let a = &k.buffers[0];
    let e = a.dyn_outer.as_ref().expect("dim 0 is symbolic");
    assert!(matches!(e.kind, ExprKind::Var(v) if k.var(v).name == "n"));
    // The bound: at least 2^31 elements, so indexing is 64-bit.
    assert_eq!(a.shape, vec![dyn_outer_bound(128), 128]);
    assert_eq!(a.shape[0] * 128, 1 << 31);
    // The grid extent is the parameter expression; its bound is CUDA's x limit.
    let def = k
        .body
        .iter()
        .find_map(|s| match &s.kind {
            StmtKind::ScopeId(d) if d.dyn_extents.iter().any(Option::is_some) => Some(d),
            _ => None,
        })
        .expect("a symbolic cta_id");
    assert_eq!(def.extents, Some(vec![i64::from(i32::MAX)]));
    // `T.Buffer` parameters may use a scalar declared after them; `A.shape[0]` is `n`.
    let src = kernel(
        "A: T.Buffer((2 * n, 64), \"float16\"), n: T.int32",
        "    T.device_entry()\n    T.thread_id([1])\n    B = T.alloc_buffer((4,), \"int32\", scope=\"local\")\n    B[0] = A.shape[0]\n",
    );
    let k = parse_kernel("k.py", &src).unwrap();
    assert_eq!(k.params[0].name, "A");
    assert!(k.buffers[0].dyn_outer.is_some());
    let printed = print_kernel(&k);
    assert!(printed.contains("def k(A: T.Buffer((2 * n, 64), \"float16\"), n: T.int32):"), "{printed}");
    assert!(same_kernel(&k, &parse_kernel("k.py", &printed).unwrap()), "{printed}");
}

#[test]
fn canonical_print_round_trips() {
    let body = format!("    T.assume(n % 64 == 0 and n >= 128)\n{ROWS}    T.assume(off >= 0)\n");
    let src = kernel("A_ptr: T.handle, n: T.int32, off: T.int64, eps: T.float32", &body);
    let k = parse_kernel("k.py", &src).unwrap();
    assert_eq!(k.assumes.len(), 2);
    let printed = print_kernel(&k);
    assert!(printed.contains("def k(A_ptr: T.handle, n: T.int32, off: T.int64, eps: T.float32):"), "{printed}");
    assert!(printed.contains("A = T.match_buffer(A_ptr, (n, 128), \"float32\")"), "{printed}");
    assert!(printed.contains("T.assume(n % 64 == 0 and n >= 128)"), "{printed}");
    assert!(printed.contains("bx = T.cta_id([(n + 63) // 64])"), "{printed}");
    let again = parse_kernel("k.py", &printed).unwrap_or_else(|d| panic!("{d:?}\n{printed}"));
    assert!(same_kernel(&k, &again), "{printed}");
    // A 2-D grid with one symbolic dim.
    let src = kernel(
        "A_ptr: T.handle, n: T.int32",
        "    A = T.match_buffer(A_ptr, (n, 128), \"float32\")\n    T.device_entry()\n    bx, by = T.cta_id([4, n // 32])\n    T.thread_id([32])\n",
    );
    let k = parse_kernel("k.py", &src).unwrap();
    let printed = print_kernel(&k);
    assert!(printed.contains("T.cta_id([4, n // 32])"), "{printed}");
    assert!(same_kernel(&k, &parse_kernel("k.py", &printed).unwrap()));
}

/// The first error of `src`: its message, line and column (line 1 = the `def`).
fn first_error(src: &str) -> (String, usize, usize, Option<String>) {
    let d = parse_kernel("k.py", src).expect_err("must fail");
    let e = d.iter().find(|d| d.is_error()).expect("an error");
    let (line, col) = line_col(src, e.span().lo as usize);
    (e.message.clone(), line - HEAD.lines().count(), col, e.help.clone())
}

#[test]
fn errors_are_at_the_operand_at_fault() {
    let dev = "    T.device_entry()\n    T.thread_id([32])\n";
    let cases: Vec<(String, &str, (usize, &str))> = vec![
        (
            kernel("A_ptr: T.handle, n: T.int32", "    A = T.match_buffer(A_ptr, (128, n), \"float32\")\n"),
            "only dim 0 of `A` may be a run-time value",
            (2, "n)"),
        ),
        (
            kernel(
                "A_ptr: T.handle, n: T.int32",
                &format!("{dev}    S = T.alloc_buffer((n, 4), \"float32\", scope=\"shared\")\n"),
            ),
            "the shape of `S` must be compile-time constants",
            (4, "n, 4"),
        ),
        (
            kernel("A_ptr: T.handle, n: T.int32", "    A = T.match_buffer(A_ptr, (n, 4), \"float32\", scope=\"shared\")\n"),
            "`A` has a run-time dim 0, so it must be a global buffer",
            (2, "\"shared\""),
        ),
        (
            kernel(
                "A_ptr: T.handle, n: T.int32",
                "    A = T.match_buffer(A_ptr, (n, 4), \"float32\", layout=T.TileLayout(T.S[(8, 4):(4, 1)]))\n",
            ),
            "`A` has a run-time dim 0, so its layout is row-major",
            (2, "T.TileLayout"),
        ),
        (
            kernel("A_ptr: T.handle, x: T.float32", "    A = T.match_buffer(A_ptr, (x, 4), \"float32\")\n"),
            "dim 0 of `A` must be an integer expression of scalar parameters",
            (2, "x, 4"),
        ),
        (
            kernel("A_ptr: T.handle, n: T.int32", &format!("{dev}    T.thread_id([n])\n")),
            "only `T.cta_id` extents may be run-time values",
            (4, "n]"),
        ),
        (
            kernel("A_ptr: T.handle, n: T.int32", &format!("{dev}    tid = T.lane_id([32])\n    T.assume(tid < n)\n")),
            "`T.assume` takes a condition on integer scalar parameters",
            (5, "tid <"),
        ),
        (
            kernel("A_ptr: T.handle, e: T.float32", "    T.assume(e > 0)\n"),
            "`T.assume` takes a condition on integer scalar parameters",
            (2, "e >"),
        ),
        (kernel("A_ptr: T.handle, h: T.float16", "    pass\n"), "scalar parameters of type float16 are not supported", (1, "T.float16")),
        (
            kernel("A_ptr: T.handle, n: T.int32", &format!("{dev}    for i in range(4):\n        T.assume(n > 0)\n")),
            "`T.assume` inside a loop or an `if`",
            (5, "T.assume"),
        ),
        (kernel("A_ptr: T.handle, n: T.int32", &format!("{dev}    n = n + 1\n")), "`n` is a scalar kernel parameter, which is immutable", (4, "n =")),
        (
            kernel(
                "A_ptr: T.handle, n: T.int32",
                &format!("    A = T.match_buffer(A_ptr, (n, 32), \"float32\")\n{dev}    S = T.alloc_buffer((64, 32), \"float32\", scope=\"shared\")\n    Tx.cta.copy(S[0:64, 0:32], A[:, 0:32])\n"),
            ),
            "dim 0 of `A` is a run-time value: the region needs a constant extent there",
            (6, ":, 0:32"),
        ),
        (
            kernel(
                "A_ptr: T.handle, n: T.int32",
                &format!("    A = T.match_buffer(A_ptr, (n, 32), \"float32\")\n{dev}    S = T.alloc_buffer((64, 32), \"float32\", scope=\"shared\")\n    Tx.cta.copy(S, A)\n"),
            ),
            "`A` has a run-time dim 0: a region of it needs constant extents",
            (6, "A)"),
        ),
        (
            kernel(
                "A_ptr: T.handle, n: T.int32",
                &format!("    A = T.match_buffer(A_ptr, (n, 32), \"float32\")\n{dev}    V = A.view(16, 64)\n"),
            ),
            "`A` has a run-time dim 0 and has no views",
            (5, "A.view"),
        ),
    ];
    for (src, msg, (line, token)) in cases {
        let (m, l, col, _) = first_error(&src);
        assert!(m.contains(msg), "want `{msg}`, got `{m}`\n{src}");
        // The error's column is where `token` starts on its line.
        let text = src.lines().nth(HEAD.lines().count() + line - 1).unwrap_or_default();
        let want = text.find(token).map(|c| c + 1);
        assert_eq!((l, Some(col)), (line, want), "`{msg}` at `{token}`\n{src}");
    }
}

#[test]
fn constant_indices_of_a_run_time_dim_are_checked_below_only() {
    // Row 1000 of `n` rows: not decidable here (lowering checks it at launch); row -1 is an error.
    let ok = kernel(
        "A_ptr: T.handle, n: T.int32",
        "    A = T.match_buffer(A_ptr, (n, 32), \"float32\")\n    T.device_entry()\n    T.thread_id([1])\n    A[1000, 0] = 1.0\n",
    );
    parse_kernel("k.py", &ok).unwrap();
    let bad = ok.replace("A[1000, 0]", "A[-1, 0]");
    let (m, _, _, help) = first_error(&bad);
    assert!(m.contains("index -1 is out of bounds for dimension 0 of `A`"), "{m}");
    assert_eq!(help.as_deref(), Some("`A` has shape (n, 32)"));
}
