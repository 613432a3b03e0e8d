//! Simulator throughput on hand-built LIR kernels.
//!
//! * `seed_warp_copy`: a seed-sized kernel — one warp copies a 32×32 f32 tile
//!   global → shared → global with 128-bit vectors (like seed 002), plus a
//!   256-thread variant over 8 CTAs.
//! * `tiled_copy_4096`: a 64×128 f32 tile per CTA over a 4096×4096 tensor —
//!   2048 CTAs × 128 threads, global → shared, `cta_sync`, shared → global,
//!   128-bit `VecCopy` (16 vectors per thread per direction), with and without
//!   race checking, and with bank-conflict statistics.
//!
//! Run: `cargo bench -p tirx-sim --bench sim`.
use tirx_ir::hir::BarrierKind;
use tirx_ir::lir::*;
use tirx_ir::{DType, Span};
use tirx_sim::{simulate, SimOptions};

fn main() {
    divan::main();
}

fn st(kind: LStmtKind) -> LStmt {
    LStmt::new(kind, Span::default())
}
fn i32c(v: i64) -> LExpr {
    LExpr::i32(v)
}
fn bin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::bin(op, a, b)
}

/// Each CTA copies a `rows × cols` f32 tile of an `n_rows × n_cols` tensor through shared memory.
fn tiled_copy(n_rows: i64, n_cols: i64, rows: i64, cols: i64, threads: i64) -> LKernel {
    let elems = n_rows * n_cols;
    let bufs = vec![
        LBuf {
            name: "A".into(),
            dtype: DType::F32,
            space: Space::Global,
            elems,
            shape: vec![n_rows, n_cols],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        },
        LBuf {
            name: "B".into(),
            dtype: DType::F32,
            space: Space::Global,
            elems,
            shape: vec![n_rows, n_cols],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        },
        LBuf {
            name: "A_smem".into(),
            dtype: DType::F32,
            space: Space::Shared,
            elems: rows * cols,
            shape: vec![rows, cols],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        },
    ];
    let (a, b, s) = (LBufId(0), LBufId(1), LBufId(2));
    let vars =
        ["i", "f", "row", "cv", "i2", "f2", "row2", "cv2"].map(|n| LVar { name: n.into(), dtype: DType::I32 }).to_vec();
    let v = |i: u32| LExpr::Var(LVarId(i));
    let vecs_per_row = cols / 4;
    let iters = rows * vecs_per_row / threads;
    let tid = LExpr::Special(Special::ThreadIdx(0));
    let (bx, by) = (LExpr::Special(Special::BlockIdx(0)), LExpr::Special(Special::BlockIdx(1)));
    // Global element of (row, cv) in this CTA's tile.
    let gidx = |row: LExpr, cv: LExpr| {
        let grow = bin(LBinOp::Add, bin(LBinOp::Mul, by.clone(), i32c(rows)), row);
        let gcol = bin(LBinOp::Add, bin(LBinOp::Mul, bx.clone(), i32c(cols)), bin(LBinOp::Mul, cv, i32c(4)));
        bin(LBinOp::Add, bin(LBinOp::Mul, grow, i32c(n_cols)), gcol)
    };
    let sidx =
        |row: LExpr, cv: LExpr| bin(LBinOp::Add, bin(LBinOp::Mul, row, i32c(cols)), bin(LBinOp::Mul, cv, i32c(4)));
    let phase = |iv: u32, to_smem: bool| {
        let (f, row, cv) = (iv + 1, iv + 2, iv + 3);
        let copy = if to_smem {
            LStmtKind::Memory(MemOp::VecCopy {
                dst: s,
                dst_index: sidx(v(row), v(cv)),
                src: a,
                src_index: gidx(v(row), v(cv)),
                lanes: 4,
                cache: CacheHint::Default,
            })
        } else {
            LStmtKind::Memory(MemOp::VecCopy {
                dst: b,
                dst_index: gidx(v(row), v(cv)),
                src: s,
                src_index: sidx(v(row), v(cv)),
                lanes: 4,
                cache: CacheHint::Default,
            })
        };
        st(LStmtKind::For {
            var: LVarId(iv),
            begin: i32c(0),
            extent: i32c(iters),
            unroll: false,
            body: vec![
                st(LStmtKind::Let {
                    var: LVarId(f),
                    value: bin(LBinOp::Add, bin(LBinOp::Mul, v(iv), i32c(threads)), tid.clone()),
                }),
                st(LStmtKind::Let { var: LVarId(row), value: bin(LBinOp::Div, v(f), i32c(vecs_per_row)) }),
                st(LStmtKind::Let { var: LVarId(cv), value: bin(LBinOp::Rem, v(f), i32c(vecs_per_row)) }),
                st(copy),
            ],
        })
    };
    LKernel {
        params: vec![a, b],
        bufs,
        vars,
        body: vec![phase(0, true), st(LStmtKind::Sync(SyncOp::Barrier(BarrierKind::Cta))), phase(4, false)],
        ..LKernel::new("tiled_copy", [(n_cols / cols) as u32, (n_rows / rows) as u32, 1], [threads as u32, 1, 1])
    }
}

fn run(k: &LKernel, check_races: bool) {
    run_with(k, SimOptions { check_races, ..Default::default() })
}

fn run_with(k: &LKernel, opts: SimOptions) {
    let bytes = k.bufs[0].elems as usize * 4;
    let mut params = vec![vec![1u8; bytes], vec![0u8; bytes]];
    let rep = simulate(k, &mut params, &opts).expect("simulates");
    assert_eq!(params[0], params[1]);
    divan::black_box(rep);
}

#[divan::bench]
fn seed_warp_copy_32x32() {
    run(&tiled_copy(32, 32, 32, 32, 32), true);
}

#[divan::bench]
fn seed_256_threads_8_ctas() {
    run(&tiled_copy(64, 128, 16, 64, 256), true);
}

#[divan::bench(sample_count = 2, sample_size = 1, args = [true, false])]
fn tiled_copy_4096(check_races: bool) {
    run(&tiled_copy(4096, 4096, 64, 128, 128), check_races);
}

/// The same with bank-conflict statistics collected.
#[divan::bench(sample_count = 2, sample_size = 1)]
fn tiled_copy_4096_stats() {
    run_with(&tiled_copy(4096, 4096, 64, 128, 128), SimOptions { stats: true, ..Default::default() });
}
