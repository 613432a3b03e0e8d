//! Issue 27 (hardening, round 3): each test is a defect's reproducer, lowered,
//! turned into CUDA and checked by value in the simulator.

mod common;
use common::*;
use tirx_ir::DType;

const HEAD: &str = "from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx

@T.prim_func
";

/// Defect 8: bools in arithmetic and ordering are the integers 0 and 1, and
/// `&`, `|`, `^` of two bools are the logical operators, as in Python (it was an
/// internal error: "Gt on bool operands").
#[test]
fn bools_compute_as_python_does() {
    let exprs = [
        ("T.if_then_else(F[t] > 0, 1, 0)", [1, 0]),
        ("T.if_then_else(F[t] >= F[1 - t], 1, 0)", [1, 0]),
        ("F[t] + 1", [2, 1]),
        ("F[t] * 5 - 1", [4, -1]),
        ("-F[t]", [-1, 0]),
        ("~F[t]", [-2, -1]),
        ("F[t] // 1", [1, 0]),
        ("T.if_then_else(F[t] & F[1 - t], 1, 0)", [0, 0]),
        ("T.if_then_else(F[t] | F[1 - t], 1, 0)", [1, 1]),
        ("T.if_then_else(F[t] ^ True, 1, 0)", [0, 1]),
        ("T.if_then_else(F[t] < 1, 1, 0)", [0, 1]),
    ];
    let body: String = exprs.iter().enumerate().map(|(i, (e, _))| format!("    O[{i}, t] = {e}\n")).collect();
    let n = exprs.len();
    let src = format!(
        r#"{HEAD}def kernel(F_ptr: T.handle, O_ptr: T.handle):
    F = T.match_buffer(F_ptr, (2,), "bool")
    O = T.match_buffer(O_ptr, ({n}, 2), "int32")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([2])
{body}"#
    );
    let (_, out) = run(&src, &[(DType::Bool, vec![1.0, 0.0]), (DType::I32, vec![0.0; 2 * n])]);
    for (i, (e, want)) in exprs.iter().enumerate() {
        assert_eq!(out[1][2 * i..2 * i + 2], want.map(f64::from), "{e}");
    }
}

/// Defect 19: `inf`, `-inf` and `nan` can be written (`float("inf")`, as the
/// Python front end prints them), fold as in Python, print back as they were
/// written and reach CUDA and the simulator (it was "expected a number, found a
/// string").
#[test]
fn infinities_and_nan_can_be_written() {
    let consts = [
        ("float(\"inf\")", f64::INFINITY),
        ("-float(\"inf\")", f64::NEG_INFINITY),
        ("float(\" -Infinity \")", f64::NEG_INFINITY),
        ("float(\"inf\") * 2", f64::INFINITY),
        ("float(\"1_000.5\")", 1000.5),
        ("float(True)", 1.0),
        ("T.float16(float(\"-inf\"))", f64::NEG_INFINITY),
        ("T.max(A[t], -float(\"inf\"))", 0.5),
    ];
    let body: String = consts.iter().enumerate().map(|(i, (e, _))| format!("    O[{i}, t] = {e}\n")).collect();
    let n = consts.len();
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2,), "float32")
    O = T.match_buffer(O_ptr, ({n}, 2), "float32")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([2])
{body}    O[{n} - 1, t] = float("nan")
"#
    );
    let k = parse(&src);
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("-float(\"inf\")") && printed.contains("float(\"nan\")"), "{printed}");
    let (l, out) = run(&src, &[(DType::F32, vec![0.5, 0.5]), (DType::F32, vec![0.0; 2 * n])]);
    for (i, (e, want)) in consts.iter().enumerate().take(n - 1) {
        assert_eq!(out[1][2 * i..2 * i + 2], [*want, *want], "{e}");
    }
    assert!(out[1][2 * n - 2..].iter().all(|v| v.is_nan()));
    let cuda = tirx_cuda::generate(&l.lir).expect("cuda").source;
    assert!(cuda.contains("INFINITY") || cuda.contains("__int_as_float"), "{cuda}");
}

#[test]
fn float_of_a_string_that_is_not_a_number_is_an_error() {
    for bad in ["abc", "--1", "1__0", "_1", "0x10", ""] {
        let src = format!(
            "{HEAD}def kernel(O_ptr: T.handle):\n    O = T.match_buffer(O_ptr, (1,), \"float32\")\n    \
             T.device_entry()\n    T.cta_id([1])\n    T.thread_id([1])\n    O[0] = float(\"{bad}\")\n"
        );
        let d = tirx_script::parse_kernel("k.py", &src).expect_err(bad);
        let text = render(&d, &src);
        assert!(text.contains("could not convert string to float") && text.contains("k.py:10:18"), "{text}");
    }
}

/// Defect 5: an mbarrier constant outside its instruction's range is an error at
/// the operand (it was an internal error from the LIR checker).
#[test]
fn mbarrier_constants_out_of_range_are_errors_at_the_operand() {
    let cases = [
        ("full.init(-1)", "arrival count -1 is outside 1..=1048575", "full.init(-1)\n   │               ^^"),
        ("full.init(1048576)", "arrival count 1048576 is outside", "^^^^^^^ the arrival count"),
        ("T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), -16)", "tx byte count -16 is outside 0..=1048575", "^^^"),
        ("T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 1 << 29)", "tx byte count 536870912", "^^^^^^^"),
        ("full.wait(0, 2)", "phase parity 2 is outside 0..=1", "write `phase % 2`"),
        ("full.wait(0, -1)", "phase parity -1 is outside 0..=1", "^^ the phase parity"),
    ];
    for (stmt, msg, caret) in cases {
        let src = format!(
            "{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32,), \"float32\")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    full = MBarrier(pool, 2)
    pool.commit()
    {}
    {stmt}
",
            if stmt.starts_with("full.init") { "T.ptx.fence.mbarrier_init()" } else { "full.init(1)" }
        )
        .replace(
            "from tvm.script.tirx import tile as Tx\n",
            "from tvm.script.tirx import tile as Tx\nfrom tvm.tirx.lang.pipeline import MBarrier\n",
        );
        let d = lower_errors(&src);
        let text = render(&d, &src);
        assert!(!d.iter().any(|d| d.internal), "{text}");
        assert!(text.contains(msg) && text.contains(caret), "{stmt}:\n{text}");
    }
}

/// Defect 6: a variable whose defining statement had an error (a wrong-dtype
/// scratch in `T.cuda.cta_max`) is not reported again as undefined where it is
/// used; independent errors after it still are.
#[test]
fn an_error_defining_a_variable_is_not_repeated_at_its_uses() {
    let src = format!(
        r#"{HEAD}def kernel(X_ptr: T.handle, Out_ptr: T.handle):
    X = T.match_buffer(X_ptr, (256,), "float32")
    Out = T.match_buffer(Out_ptr, (256,), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([256])
    scratch = T.alloc_buffer((8,), "float16", scope="shared")
    v = X[tid]
    m = T.cuda.cta_max(v, 8, scratch.ptr_to([0]))
    d = v - m
    Out[tid] = d + X[tid + 256]
"#
    );
    let d = lower_errors(&src);
    let text = render(&d, &src);
    assert!(!d.iter().any(|d| d.internal), "{text}");
    assert!(!text.contains("not defined"), "{text}");
    assert!(
        text.contains("the scratch `scratch` is float16; the partials are float32: allocate it as float32"),
        "{text}"
    );
    assert!(
        text.contains("X[tid + 256]") || text.contains("tid + 256"),
        "the independent error is still reported:\n{text}"
    );
}

/// Defects 2 and 4: a layout whose storage reaches below offset 0, or whose
/// thread axis leaves the hardware's range, is refused where the buffer is
/// declared (negative strides passed and indexed `X[-1]` in CUDA; huge lane
/// strides were internal errors); a register buffer over CUDA's 512 KiB of
/// local memory per thread is refused (a stride of 2^32 gave `float X[4294967297]`).
#[test]
fn layouts_whose_homes_cannot_exist_are_refused() {
    let cases = [
        ("(32, 2)", "local", "S[(32, 2):(1@laneid, -1)]", "reaches storage offset -1", "add `+ 1` to the layout"),
        (
            "(32, 2)",
            "local",
            "S[(32, 2):(1@laneid, -4294967296)]",
            "reaches storage offset -4294967296",
            "+ 4294967296",
        ),
        ("(32, 2)", "local", "S[(32, 2):(2147483648@laneid, 1)]", "at laneid 66571993088; laneid runs 0..32", "0..32"),
        ("(32, 2)", "local", "S[(32, 2):(-1@laneid, 1)]", "at laneid -31", "laneid strides"),
        ("(8,)", "shared", "S[(8,):(-1,)]", "reaches storage offset -7", "add `+ 7`"),
        ("(4, 8)", "shared", "S[(4, 8):(8, 1)] - 1", "reaches storage offset -1", "add `+ 1`"),
        (
            "(32, 2)",
            "local",
            "S[(32, 2):(1@laneid, 4294967296)]",
            "needs 4294967297 float32 registers per thread",
            "512 KiB",
        ),
        ("(32, 2)", "local", "S[(32, 2):(1@laneid, 2147483648)]", "needs 2147483649 float32 registers", "512 KiB"),
    ];
    for (shape, scope, layout, msg, fix) in cases {
        let src = format!(
            "{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), \"float32\")
    T.device_entry()
    T.cta_id([1])
    T.lane_id([32])
    T.thread_id([32])
    X = T.alloc_buffer({shape}, \"float32\", scope=\"{scope}\", layout=TileLayout({layout}))
"
        )
        .replace("@T.prim_func", "from tvm.tirx.layout import S, TileLayout, laneid\n\n@T.prim_func");
        let d = match tirx_script::parse_kernel("k.py", &src) {
            Err(d) => d,
            Ok(k) => tirx_lower::lower_kernel(&k, &Default::default()).err().unwrap_or_default(),
        };
        let text = render(&d, &src);
        assert!(!d.is_empty() && !d.iter().any(|d| d.internal), "{layout}:\n{text}");
        assert!(text.contains(msg) && text.contains(fix), "{layout}:\n{text}");
    }
}

/// A negative stride with an offset that lifts it is a real layout (storage
/// reversed) and gives the same values as the plain one.
#[test]
fn a_reversed_layout_is_sized_and_addressed_from_its_offset() {
    let src = format!(
        r#"from tvm.tirx.layout import S, TileLayout
{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64,), "float32")
    B = T.match_buffer(B_ptr, (64,), "float32")
    C = T.match_buffer(C_ptr, (64,), "float32")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([64])
    X = T.alloc_buffer((64,), "float32", scope="shared", layout=TileLayout(S[(64,):(-1,)] + 63))
    X[t] = A[t]
    T.cuda.cta_sync()
    B[t] = X[63 - t]
    T.cuda.cta_sync()
    Tx.cta.copy(X[0:64], A[0:64])
    T.cuda.cta_sync()
    Tx.cta.copy(C[0:64], X[0:64])
"#
    )
    .replacen(
        "from tvm.tirx.layout import S, TileLayout\nfrom tvm.script import tirx as T",
        "from tvm.script import tirx as T",
        1,
    )
    .replace("@T.prim_func", "from tvm.tirx.layout import S, TileLayout\n\n@T.prim_func");
    let a: Vec<f64> = (0..64).map(f64::from).collect();
    let (l, out) = run(&src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 64]), (DType::F32, vec![0.0; 64])]);
    let rev: Vec<f64> = a.iter().rev().copied().collect();
    assert_eq!(out[1], rev);
    assert_eq!(out[2], a);
    let x = l.lir.bufs.iter().find(|b| b.name == "X").expect("X");
    assert_eq!(x.elems, 64, "storage is offsets 0..=63");
}

/// Defect 3: `max` and `min` propagate NaN on every path, as PyTorch's `amax`,
/// `amin`, `maximum` and `minimum` do (an all-NaN row was ±inf on the shared
/// path and NaN on the register path; one NaN in a row was ignored).
#[test]
fn max_and_min_propagate_nan_on_every_path() {
    let nan = f64::NAN;
    // Rows: all NaN, one NaN, none, -inf and NaN.
    let mut a = vec![1.0; 4 * 32];
    a[..32].fill(nan);
    a[32 + 17] = nan;
    a[64..96].iter_mut().enumerate().for_each(|(i, v)| *v = i as f64 - 9.5);
    a[96..128].fill(f64::NEG_INFINITY);
    a[96 + 3] = nan;
    let want_max = [nan, nan, 21.5, nan];
    let want_min = [nan, nan, -9.5, nan];
    let same = |g: f64, w: f64| g == w || (g.is_nan() && w.is_nan());
    for op in ["max", "min"] {
        let want = if op == "max" { want_max } else { want_min };
        // shared: one thread per row reduces from the identity.
        let shared = format!(
            r#"from tvm.tirx.layout import S, R, TileLayout, laneid
{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, D_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32), "float32")
    B = T.match_buffer(B_ptr, (4,), "float32")
    C = T.match_buffer(C_ptr, (4,), "float32")
    D = T.match_buffer(D_ptr, (4, 32), "float32")
    T.device_entry()
    T.cta_id([1]); T.warp_id([1]); T.lane_id([32]); t = T.thread_id([32])
    A_s = T.alloc_buffer((4, 32), "float32", scope="shared")
    B_s = T.alloc_buffer((4,), "float32", scope="shared")
    Tx.cta.copy(A_s[0:4, 0:32], A[0:4, 0:32])
    T.cuda.cta_sync()
    Tx.cta.{op}(B_s[0:4], A_s[0:4, 0:32])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:4], B_s[0:4])
    X = T.alloc_buffer((32,), "float32", scope="local", layout=TileLayout(S[32:1@laneid]))
    Y = T.alloc_buffer((1,), "float32", scope="local", layout=TileLayout(S[1:1] + R[32:1@laneid]))
    Yl = Y.local()
    for r in range(4):
        Tx.warp.copy(X[0:32], A[r, 0:32])
        Tx.warp.{op}(Y[0:1], X[0:32])
        if t == 0:
            C[r] = Yl[0]
    D[0, t] = T.{op}(A[0, t], 1.0)
    D[1, t] = T.{op}(A[1, t], A[3, t])
"#
        )
        .replace(
            "from tvm.tirx.layout import S, R, TileLayout, laneid\nfrom tvm.script import tirx as T",
            "from tvm.script import tirx as T",
        )
        .replace("@T.prim_func", "from tvm.tirx.layout import S, R, TileLayout, laneid\n\n@T.prim_func");
        let (l, out) = run(
            &shared,
            &[
                (DType::F32, a.clone()),
                (DType::F32, vec![0.0; 4]),
                (DType::F32, vec![0.0; 4]),
                (DType::F32, vec![0.0; 128]),
            ],
        );
        assert!(l.explain.iter().any(|c| c.chosen.as_deref() == Some("shared")), "the shared path runs");
        assert!(l.explain.iter().any(|c| c.chosen.as_deref() == Some("warp_shuffle")), "the shuffle path runs");
        for r in 0..4 {
            assert!(same(out[1][r], want[r]), "{op} shared row {r}: {} vs {}", out[1][r], want[r]);
            assert!(same(out[2][r], want[r]), "{op} shuffle row {r}: {} vs {}", out[2][r], want[r]);
        }
        assert!(out[3][..32].iter().all(|v| v.is_nan()), "{op}(NaN, 1) is NaN");
        for t in 0..32 {
            let w = if t == 17 || t == 3 {
                nan
            } else if op == "max" {
                1.0
            } else {
                f64::NEG_INFINITY
            };
            assert!(same(out[3][32 + t], w), "{op} elementwise {t}");
        }
    }
}

/// Defect 20: a branch no thread reaches (`if i > 1 and j < 0`, nested or not) is not
/// an out-of-bounds error, and neither it nor a `buf[j % 2]` region in a loop of run-time
/// length draws a "cannot prove … inside" warning (a remainder by a constant is in
/// [0, k) whatever its operand). Reachable accesses are still checked.
#[test]
fn dead_branches_and_remainders_are_not_out_of_bounds() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, n: T.int32):
    A = T.match_buffer(A_ptr, (64, 32), "float32")
    B = T.match_buffer(B_ptr, (64, 32), "float32")
    T.device_entry()
    T.cta_id([1]); tx = T.thread_id([32]); T.lane_id([32])
    S = T.alloc_buffer((2, 32, 32), "float32", scope="shared")
    for j in range(n):
        Tx.warp.copy(S[j % 2, 0:32, 0:32], A[0:32, 0:32])
        T.cuda.cta_sync()
    for i in range(4):
        for j in range(2):
            if i > 1 and j < 0:
                B[i * 32, tx] = A[0, tx]
            if i > 1 and tx > 40:
                B[i * 32, tx] = A[0, tx]
            if i > 1:
                if tx > 40:
                    B[i * 32, tx] = A[0, tx]
            if j > 3 and i > 1:
                Tx.warp.copy(B[i * 32:i * 32 + 32, 0:32], S[0, 0:32, 0:32])
            if i < 2 and j > 0:
                B[i * 32 + j, tx] = S[1, 0, tx]
"#
    );
    let k = parse(&src);
    let l = tirx_lower::lower_kernel(&k, &Default::default())
        .unwrap_or_else(|d| panic!("{}", tirx_ir::diag::render(&d, "k.py", &src, false)));
    let bounds: Vec<_> = l.warnings.iter().filter(|w| w.message.contains("cannot prove")).collect();
    assert!(bounds.is_empty(), "{}", tirx_ir::diag::render(&l.warnings, "k.py", &src, false));
    // The same access where it runs is still an error.
    let live = src.replace("if i > 1 and j < 0:", "if i > 1 and j < 2:");
    let errs = lower_errors(&live);
    assert!(errs.iter().any(|e| e.message.contains("i = 3 writes row 96 of 64")), "{}", render(&errs, &live));
}

/// Defect 17: `uint64` is a dtype (the reference allocates its mbarriers as
/// `T.alloc_shared([1], "uint64")`): its arithmetic is 64-bit unsigned — values
/// of 2^63 and more divide, compare, shift and convert as unsigned — and a
/// `uint64` shared buffer holds mbarriers.
#[test]
fn uint64_is_unsigned_64_bit_and_holds_mbarriers() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle, O_ptr: T.handle, F_ptr: T.handle):
    A = T.match_buffer(A_ptr, (2,), "uint64")
    O = T.match_buffer(O_ptr, (9,), "uint64")
    F = T.match_buffer(F_ptr, (3,), "float64")
    T.device_entry()
    T.cta_id([1])
    t = T.thread_id([1])
    O[0] = A[0] + A[1]
    O[1] = A[0] // 7
    O[2] = A[0] % 7
    O[3] = A[0] >> 60
    O[4] = T.cast(T.if_then_else(A[0] > A[1], 1, 0), "uint64")
    O[5] = T.max(A[0], A[1])
    O[6] = T.cast(F[0], "uint64")
    O[7] = T.cast(F[1], "uint64")
    O[8] = A[1] - A[0]
    F[2] = T.cast(A[0], "float64")
"#
    );
    let (a0, a1) = (0xf000_0000_0000_0005u64, 7u64);
    let le = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let fl = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let l = lower(&src);
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    assert!(cuda.contains("unsigned long long* __restrict__ A"), "{cuda}");
    let mut params = vec![le(&[a0, a1]), le(&[0; 9]), fl(&[1.5e19, -3.0, 0.0])];
    tirx_sim::simulate(&l.lir, &mut params, &Default::default()).unwrap_or_else(|e| panic!("{e}\n{src}"));
    let o: Vec<u64> = params[1].chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    let want = [a0 + a1, a0 / 7, a0 % 7, a0 >> 60, 1, a0, 15_000_000_000_000_000_000, 0, a1.wrapping_sub(a0)];
    assert_eq!(o, want);
    let f2 = f64::from_le_bytes(params[2][16..24].try_into().unwrap());
    assert_eq!(f2, a0 as f64);

    // The reference's mbarrier allocation.
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32,), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    bar = T.alloc_shared([1], "uint64")
    if tid == 0:
        T.ptx.mbarrier.init(bar.ptr_to([0]), 32)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    A[tid] = A[tid] + 1.0
    T.ptx.mbarrier.arrive(bar.ptr_to([0]))
    T.ptx.mbarrier.try_wait.parity(bar.ptr_to([0]), 0)
"#
    );
    let (_, out) = run(&src, &[(DType::F32, vec![1.0; 32])]);
    assert_eq!(out[0], vec![2.0; 32]);
}

/// Reference suite, `test_reduction_local_view_basic`: a `(1, 64)` local buffer given the
/// warp tile's layout `S[(32, 64)]`. The reference applies the larger layout to the
/// buffer's corner silently; here a layout describes the whole buffer, and the error
/// says what to write (the buffer's own layout, then a `.view` as the warp's tile).
#[test]
fn a_larger_layout_on_a_local_buffer_says_to_view_it_instead() {
    let src = format!(
        r#"{HEAD}def kernel(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 64), "float32")
    T.device_entry()
    T.cta_id([1])
    lane = T.lane_id([32])
    acc = T.alloc_buffer((1, 64), "float32", scope="local", layout=T.TileLayout(T.S[(32, 64)]))
    acc[0, 0] = A[lane, 0]
"#
    );
    let Err(d) = tirx_script::parse_kernel("k.py", &src) else { panic!("expected an error:\n{src}") };
    let text = render(&d, &src);
    assert!(text.contains("layout covers 2048 elements but the buffer shape (1, 64) has 64"), "{text}");
    assert!(text.contains("give this buffer its own layout (`S[(1, 64)]`") && text.contains(".view(32, 64"), "{text}");
}

/// Reference suite, `test_reduction_op_warp_shuffle_multi_elem`: a flat `(128,)` view laid
/// out `S[(32, 4):(1@laneid, 1)]` reduced into `(4,)` replicated over the lanes: the
/// destination keeps the reduced dim's register extent, so element `j` is the reduction
/// over the 32 lanes of register `j` (`warp_shuffle`, four butterflies). Values checked
/// against the sums and maxima of `A` viewed as 32 × 4.
#[test]
fn a_lane_reduction_keeps_the_register_positions_the_destination_keeps() {
    for (op, dtype) in [("sum", "float32"), ("max", "float32"), ("sum", "float16"), ("min", "float16")] {
        let src = format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (128,), "{dtype}")
    B = T.match_buffer(B_ptr, (4,), "{dtype}")
    T.device_entry()
    T.cta_id([1])
    T.warp_id([1])
    lane = T.lane_id([32])
    src_local = T.alloc_buffer((4,), "{dtype}", scope="local")
    dst_local = T.alloc_buffer((4,), "{dtype}", scope="local")
    for i in T.serial(4):
        src_local[i] = A[lane * 4 + i]
    src_view = src_local.view(128, layout=TileLayout(S[(32, 4):(1@laneid, 1)]))
    dst_view = dst_local.view(4, layout=TileLayout(S[4:1] + R[32:1@laneid]))
    Tx.warp.{op}(dst_view, src_view)
    if lane == 0:
        for i in T.serial(4):
            B[i] = dst_local[i]
"#
        );
        let t = DType::from_name(dtype).unwrap();
        let a: Vec<f64> = (0..128).map(|x| ((x * 37 % 101) as f64 - 50.0) / 8.0).collect();
        let (l, out) = run(&src, &[(t, a.clone()), (t, vec![0.0; 4])]);
        let chosen = l.explain.iter().find(|c| c.op == op).and_then(|c| c.chosen.clone());
        assert_eq!(chosen.as_deref(), Some("warp_shuffle"), "{op} {dtype}");
        for j in 0..4 {
            let col = (0..32).map(|i| a[4 * i + j]);
            let want = match op {
                "sum" => col.sum(),
                "max" => col.fold(f64::MIN, f64::max),
                _ => col.fold(f64::MAX, f64::min),
            };
            assert_eq!(out[1][j], want, "{op} {dtype} B[{j}]");
        }
    }
}

/// Reference suite, `test_reduction_op_warp_shuffle_gapped_permuted_storage`: with no
/// `axes`, a `(32, 2, 2)` view whose dim 0 is the lanes (`S[(32, 2, 2):(1@laneid, 2, 4)]`,
/// registers 0, 4, 2, 6 of seven) reduced into `(2, 2)` replicated over the lanes: the
/// destination's extents say the lane dim is reduced (the last dim would keep `(32, 2)`).
#[test]
fn without_axes_a_lane_dim_the_destination_drops_is_reduced() {
    let src = r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, (32, 2, 2), "float32")
    B = T.match_buffer(B_ptr, (2, 2), "float32")
    T.device_entry()
    T.cta_id([1])
    T.warp_id([1])
    lane = T.lane_id([32])
    src_local = T.alloc_buffer((7,), "float32", scope="local")
    dst_local = T.alloc_buffer((7,), "float32", scope="local")
    src_view = src_local.view(32, 2, 2, layout=TileLayout(S[(32, 2, 2):(1@laneid, 2, 4)]))
    dst_view = dst_local.view(2, 2, layout=TileLayout(S[(2, 2):(2, 4)] + R[32:1@laneid]))
    for i, j in T.grid(2, 2):
        src_local[i * 2 + j * 4] = A[lane, i, j]
    Tx.warp.sum(dst_view, src_view)
    if lane == 0:
        for i, j in T.grid(2, 2):
            B[i, j] = dst_local[i * 2 + j * 4]
"#;
    let a: Vec<f64> = (0..128).map(|x| ((x * 37 % 101) as f64 - 50.0) / 8.0).collect();
    let (l, out) = run(src, &[(DType::F32, a.clone()), (DType::F32, vec![0.0; 4])]);
    let call = l.explain.iter().find(|c| c.op == "sum").expect("the sum");
    assert_eq!(call.chosen.as_deref(), Some("warp_shuffle"), "{}", call.render());
    for j in 0..4 {
        assert_eq!(out[1][j], (0..32).map(|i| a[4 * i + j]).sum::<f64>(), "B[{j}]");
    }
    // The axes the destination implied are printed back into the script.
    let k = parse(src);
    let printed = tirx_script::print_kernel(&k);
    assert!(printed.contains("Tx.warp.sum(dst_view[0:2, 0:2], src_view[0:32, 0:2, 0:2], axes=0"), "{printed}");
}

/// Reference suite, `test_ptx_st_from_src_f32_vector_preserves_values`: the raw vector
/// `T.ptx.st.shared.v4.f32(ptr, a, b, c, d)` and `T.ptx.ld.shared.v4.f32(a, b, c, d, ptr)`
/// are one PTX `st`/`ld` each (the forced 128-bit copy), value-checked; a type of the wrong
/// size, a wrong argument count and an address the vector cannot start at are errors.
#[test]
fn raw_ptx_vector_loads_and_stores() {
    let kernel = |st: &str, ld: &str| {
        format!(
            r#"{HEAD}def kernel(B_ptr: T.handle, G_ptr: T.handle):
    B = T.match_buffer(B_ptr, (4,), "float32")
    G = T.match_buffer(G_ptr, (2, 4), "float32")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([1])
    smem = T.alloc_buffer((8,), "float32", scope="shared")
    reg = T.alloc_local((4,), "float32")
    out = T.alloc_local((4,), "float32")
    for i in range(4):
        reg[i] = T.cast(i + 1, "float32")
    {st}
    {ld}
    for i in range(4):
        B[i] = out[i]
    T.ptx.st.global.v2.f32(G.ptr_to([1, 2]), out[3] * 2.0, out[0])
"#
        )
    };
    let src = kernel(
        "T.ptx.st.shared.v4.f32(smem.ptr_to([4]), reg[0], reg[1], reg[2], reg[3])",
        "T.ptx.ld.shared.v4.b32(out[3], out[2], out[1], out[0], smem.ptr_to([4]))",
    );
    let (l, out) = run(&src, &[(DType::F32, vec![0.0; 4]), (DType::F32, vec![0.0; 8])]);
    assert_eq!(out[0], vec![4.0, 3.0, 2.0, 1.0]);
    assert_eq!(out[1], vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 2.0, 4.0]);
    let cuda = tirx_cuda::generate(&l.lir).expect("CUDA").source;
    for ins in ["st.shared.v4.u32", "ld.shared.v4.u32", "st.global.v2.u32"] {
        assert!(cuda.contains(ins), "{ins}:\n{cuda}");
    }
    for (st, msg) in [
        ("T.ptx.st.shared.v4.f16(smem.ptr_to([0]), reg[0], reg[1], reg[2], reg[3])", "moves 2-byte elements"),
        ("T.ptx.st.shared.v4.f32(smem.ptr_to([0]), reg[0], reg[1])", "takes 5 positional arguments"),
        ("T.ptx.st.shared.v4.f32(smem.ptr_to([2]), reg[0], reg[1], reg[2], reg[3])", "starts at a multiple of 4"),
        ("T.ptx.st.local.v4.f32(smem.ptr_to([0]), reg[0], reg[1], reg[2], reg[3])", "`.local` is not a qualifier"),
    ] {
        let src = kernel(st, "pass");
        let text = match tirx_script::parse_kernel("k.py", &src) {
            Err(d) => render(&d, &src),
            Ok(_) => render(&lower_errors(&src), &src),
        };
        assert!(text.contains(msg), "{st}: {text}");
    }
}

/// Reference suite, `test_dispatch_propagates_flat_bind_to_auto_coordinate_proof`: a TMA
/// coordinate computed from a loaded value (`c0 = tile[0] * 128`, a persistent kernel's
/// tile index) is a multiple of 128 whatever the value, so `tma_auto` takes it with the
/// shared tile in 64-column chunks, which need coordinates in whole chunks (value-checked:
/// B = A[:, 256:384] for tile 2); `* 96` is only known a multiple of 32, and declines.
#[test]
fn a_coordinate_from_a_loaded_tile_index_is_proved_aligned() {
    let kernel = |mul: i64| {
        format!(
            r#"{HEAD}def kernel(A_ptr: T.handle, B_ptr: T.handle, I_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 512), "float16")
    B = T.match_buffer(B_ptr, (64, 128), "float16")
    I = T.match_buffer(I_ptr, (1,), "int32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    tile = T.alloc_local((1,), "int32")
    tile[0] = I[0]
    c0: T.let = tile[0] * {mul}
    pool = T.SMEMPool()
    S_ = pool.alloc((64, 128), "float16", layout=T.TileLayout(T.S[(64, 2, 64):(64, 4096, 1)]))
    full = MBarrier(pool, 1)
    pool.commit()
    full.init(1)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    if tid == 0:
        Tx.copy_async(S_[0:64, 0:128], A[0:64, c0:c0 + 128], dispatch="tma_auto", mbar=full.ptr_to([0]))
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 64 * 128 * 2)
    full.wait(0, 0)
    Tx.warp.copy(B[0:64, 0:128], S_[0:64, 0:128])
"#
        )
        .replace(
            "from tvm.script.tirx import tile as Tx\n",
            "from tvm.script.tirx import tile as Tx\nfrom tvm.tirx.lang.pipeline import MBarrier\n",
        )
    };
    let a: Vec<f64> = (0..64 * 512).map(|x| (x % 1000) as f64).collect();
    let (_, out) =
        run(&kernel(128), &[(DType::F16, a.clone()), (DType::F16, vec![0.0; 64 * 128]), (DType::I32, vec![2.0])]);
    for r in 0..64 {
        assert_eq!(out[1][r * 128..r * 128 + 128], a[r * 512 + 256..r * 512 + 384], "row {r}");
    }
    let text = render(&lower_errors(&kernel(96)), &kernel(96));
    assert!(text.contains("not provably a multiple of the box's"), "{text}");
}
