//! Global buffers with run-time strides (`strides=(ld, 1)`, tile-primitives.md §7.7):
//! TMA copies encode the strides in their descriptors at launch, scalar accesses
//! multiply by them, every other variant declines with `runtime_stride`; the
//! launch checks them and sizes the buffer by the span they reach.

mod common;
use common::*;
use tirx_ir::lir::{LKernel, ScalarValue, SymExpr};
use tirx_sim::SimOptions;

const HEAD: &str = "from tvm.script import tirx as T\nfrom tvm.script.tirx import tile as Tx\n";

/// One 64 × 128 f16 tile of `A` (rows `lda` elements apart) through shared memory into `B`
/// (rows `ldb` apart) by TMA: a CTA per 64-row band of `n` rows.
fn tma_tile(a_strides: &str) -> String {
    tma_tile_assuming(a_strides, "    T.assume(lda % 8 == 0)\n    T.assume(ldb % 8 == 0)\n")
}

fn tma_tile_assuming(a_strides: &str, assume: &str) -> String {
    format!(
        r#"{HEAD}from tvm.tirx.lang.pipeline import MBarrier

@T.prim_func
def strided_tile(A_ptr: T.handle, B_ptr: T.handle, n: T.int32, lda: T.int32, ldb: T.int32):
    A = T.match_buffer(A_ptr, (n, 128), "float16", strides={a_strides})
    B = T.match_buffer(B_ptr, (n, 128), "float16", strides=(ldb, 1))
{assume}    T.device_entry()
    bx = T.cta_id([n // 64])
    tid = T.thread_id([32])
    pool = T.SMEMPool()
    S_ = pool.alloc((64, 128), "float16")
    full = MBarrier(pool, 1)
    pool.commit()
    full.init(1)
    T.ptx.fence.mbarrier_init()
    T.cuda.cta_sync()
    if tid == 0:
        Tx.copy_async(S_[0:64, 0:128], A[bx * 64 : bx * 64 + 64, 0:128], mbar=full.ptr_to([0]))
        T.ptx.mbarrier.arrive.expect_tx(full.ptr_to([0]), 64 * 128 * 2)
        full.wait(0, 0)
        Tx.copy_async(B[bx * 64 : bx * 64 + 64, 0:128], S_[0:64, 0:128])
        T.ptx.cp_async.bulk.commit_group()
        T.ptx.cp_async.bulk.wait_group(0)
"#
    )
}

fn f16s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|&x| half::f16::from_f32(x).to_le_bytes()).collect()
}

fn from_f16s(b: &[u8]) -> Vec<f32> {
    b.chunks(2).map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32()).collect()
}

/// Runs the tile copy with `n` rows, `lda`, `ldb`: `A[i, j] = i * 128 + j` (mod 2048, exact
/// in f16), everything else in the storages marked; returns B's storage.
fn run_tile(k: &LKernel, n: i64, lda: i64, ldb: i64) -> Result<Vec<f32>, String> {
    let span = |ld: i64| ((n - 1) * ld + 128).max(128) as usize;
    let mut a = vec![-1.0f32; span(lda)];
    for i in (0..n).filter(|_| lda > 0) {
        for j in 0..128 {
            a[(i * lda + j) as usize] = ((i * 128 + j) % 2048) as f32;
        }
    }
    let mut params = vec![f16s(&a), f16s(&vec![-7.0; span(ldb)])];
    let scalars = [ScalarValue::Int(n), ScalarValue::Int(lda), ScalarValue::Int(ldb)];
    tirx_sim::simulate_args(k, &mut params, &scalars, &SimOptions::default()).map_err(|e| e.to_string())?;
    Ok(from_f16s(&params[1]))
}

#[test]
fn tma_copies_take_run_time_row_strides() {
    let src = tma_tile("(lda, 1)");
    let l = lower(&src);
    let text = l.explain.iter().map(|c| c.render()).collect::<String>();
    assert!(text.contains("strides [lda * 2] B"), "the descriptor's stride is the expression:\n{text}");
    let (n, lda, ldb) = (128, 200, 136);
    let b = run_tile(&l.lir, n, lda, ldb).unwrap();
    for i in 0..n {
        for j in 0..128 {
            assert_eq!(b[(i * ldb + j) as usize], ((i * 128 + j) % 2048) as f32, "B[{i}, {j}]");
        }
        // The gap between B's rows is not written.
        if i + 1 < n {
            assert!(b[(i * ldb + 128) as usize..((i + 1) * ldb) as usize].iter().all(|&x| x == -7.0));
        }
    }
    // Contiguous rows are the same kernel with ld = 128.
    let b = run_tile(&l.lir, 64, 128, 128).unwrap();
    assert_eq!(b[64 * 128 - 1], ((64 * 128 - 1) % 2048) as f32);
}

#[test]
fn a_stride_the_descriptor_cannot_take_is_a_launch_error() {
    let l = lower(&tma_tile("(lda, 1)"));
    // 100 f16 elements = 200 bytes: not a multiple of 16, which the kernel assumes.
    let e = run_tile(&l.lir, 64, 100, 128).unwrap_err();
    assert!(e.contains("lda % 8 == 0") && e.contains("lda = 100"), "{e}");
    let e = run_tile(&l.lir, 64, -8, 128).unwrap_err();
    assert!(e.contains("lda >= 0") && e.contains("stride 0 of `A` is not negative") && e.contains("-8"), "{e}");
    let src = tma_tile("(lda, 1)");
    let check = l.lir.checks.iter().find(|c| c.what.contains("stride 0 of `A`")).unwrap();
    assert_eq!(&src[check.span.range()], "lda", "at the stride");
}

#[test]
fn tma_needs_the_strides_alignment_stated() {
    let src = tma_tile_assuming("(lda, 1)", "    T.assume(ldb % 8 == 0)\n");
    let text = render(&lower_errors(&src), &src);
    assert!(
        text.contains("stride 0 of `A` (`lda` elements of 2 B) is not provably a multiple of 16 bytes")
            && text.contains("`T.assume(lda % 8 == 0)`"),
        "{text}"
    );
}

#[test]
fn a_run_time_inner_stride_is_declined_by_tma() {
    // Also where the outer stride is a constant (a transposed view): the reason is the inner one.
    for strides in ["(lda, ldb)", "(1, lda)"] {
        let src = tma_tile(strides);
        let d = lower_errors(&src);
        let text = render(&d, &src);
        assert!(text.contains("innermost memory stride must be provably one"), "{strides}: {text}");
        assert!(!text.contains("not provably a multiple of 16 bytes"), "{strides}: {text}");
    }
}

#[test]
fn scalar_accesses_multiply_by_the_strides() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def transpose(A_ptr: T.handle, B_ptr: T.handle, lda: T.int32, ldb: T.int32):
    A = T.match_buffer(A_ptr, (8, 4), "float32", strides=(lda, 1))
    B = T.match_buffer(B_ptr, (4, 8), "float32", strides=(1, ldb))
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    B[tid % 4, tid // 4] = A[tid // 4, tid % 4] * 2.0
"#
    );
    let l = lower(&src);
    let (lda, ldb) = (6i64, 5i64);
    let a: Vec<f32> = (0..(7 * lda + 4)).map(|x| x as f32).collect();
    let mut params =
        vec![a.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>(), vec![0u8; ((7 * ldb + 4) * 4) as usize]];
    let scalars = [ScalarValue::Int(lda), ScalarValue::Int(ldb)];
    tirx_sim::simulate_args(&l.lir, &mut params, &scalars, &SimOptions::default()).unwrap();
    let b: Vec<f32> = params[1].chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
    for i in 0..8 {
        for j in 0..4 {
            // B[j, i] lives at j * 1 + i * ldb.
            assert_eq!(b[(j + i * ldb) as usize], a[(i * lda + j) as usize] * 2.0, "B[{j}, {i}]");
        }
    }
    let cuda = tirx_cuda::generate(&l.lir).unwrap().source;
    assert!(cuda.contains("lda") && cuda.contains("ldb"), "{cuda}");
}

#[test]
fn variants_that_address_through_layouts_decline() {
    let src = format!(
        r#"{HEAD}
@T.prim_func
def rows(A_ptr: T.handle, B_ptr: T.handle, lda: T.int32):
    A = T.match_buffer(A_ptr, (64, 128), "float32", strides=(lda, 1))
    B = T.match_buffer(B_ptr, (64, 128), "float32")
    T.device_entry()
    T.cta_id([1])
    T.thread_id([128])
    S_ = T.alloc_buffer((64, 128), "float32", scope="shared")
    Tx.cta.copy(S_[0:64, 0:128], A[0:64, 0:128])
    T.cuda.cta_sync()
    Tx.cta.copy(B[0:64, 0:128], S_[0:64, 0:128])
"#
    );
    let d = lower_errors(&src);
    let text = render(&d, &src);
    assert!(text.contains("[runtime_stride]"), "{text}");
    assert!(text.contains("`A` has run-time strides (lda, 1)"), "{text}");
    assert!(!d.iter().any(|d| d.internal), "{text}");
}

#[test]
fn strides_are_checked_where_they_are_written() {
    let kernel = |decl: &str| {
        format!(
            r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, lda: T.int32):
    {decl}
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    A[0, tid] = 1.0
"#
        )
    };
    let cases = [
        ("A = T.match_buffer(A_ptr, (4, 32), \"float32\", strides=(lda,))", "has 2 dims but 1 strides"),
        ("A = T.match_buffer(A_ptr, (4, 32), \"float32\", strides=(-32, 1))", "stride -32 of `A` is negative"),
        (
            "A = T.match_buffer(A_ptr, (4, 32), \"float32\", strides=(lda, 1), layout=T.TileLayout(T.S[(4, 32)]))",
            "both `strides=` and `layout=`",
        ),
        ("A = T.match_buffer(A_ptr, (4, 32), \"float32\", strides=(lda * 1.5, 1))", "expects int32"),
        (
            "A = T.match_buffer(A_ptr, (4, 32), \"float32\", strides=(T.float32(2), 1))",
            "must be an integer expression of scalar parameters",
        ),
    ];
    for (decl, want) in cases {
        let src = kernel(decl);
        let text = render(&parse_errors(&src), &src);
        assert!(text.contains(want), "{decl}: want {want:?}\n{text}");
    }
    let src = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle, lda: T.int32):
    A = T.match_buffer(A_ptr, (4, 32), "float32")
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    S_ = T.alloc_buffer((4, 32), "float32", scope="shared", strides=(lda, 1))
    A[0, tid] = 1.0
"#
    );
    let text = render(&parse_errors(&src), &src);
    assert!(text.contains("not a kernel parameter"), "{text}");
}

fn parse_errors(src: &str) -> Vec<tirx_ir::Diagnostic> {
    tirx_script::parse_kernel("k.py", src).expect_err("the script is refused")
}

#[test]
fn constant_strides_are_a_strided_layout() {
    // Constant strides need no launch: they are the layout `S[(4, 32):(40, 1)]`.
    let src = format!(
        r#"{HEAD}
@T.prim_func
def k(A_ptr: T.handle):
    A = T.match_buffer(A_ptr, (4, 32), "float32", strides=(40, 1))
    T.device_entry()
    T.cta_id([1])
    tid = T.thread_id([32])
    for i in range(4):
        A[i, tid] = T.float32(i)
"#
    );
    let l = lower(&src);
    let a = &l.lir.bufs[l.lir.params[0].0 as usize];
    assert_eq!(a.elems, 3 * 40 + 32);
    // What array libraries are told: the strides, constants.
    assert_eq!(a.strides, Some(vec![SymExpr::Int(40), SymExpr::Int(1)]));
    let meta = tirx_cuda::generate(&l.lir).unwrap().meta.to_json();
    assert!(
        meta.contains("\"elems\": 152") && meta.contains("\"strides\": [\n        40,\n        1\n      ]"),
        "{meta}"
    );
}
