//! Planted bugs are caught with a message naming the buffer, element, threads and statement.
mod common;
use common::*;
use tirx_ir::lir::{CacheHint, LKernel, LStmtKind, MatrixDir, MatrixMove, MatrixOp, MemOp, PairOp};
use tirx_ir::DType;
use tirx_sim::value::to_bytes;
use tirx_sim::{simulate, SimError, SimErrorKind, SimOptions, SimReport};

fn sim(k: &LKernel, params: &mut [Vec<u8>]) -> Result<SimReport, SimError> {
    simulate(k, params, &SimOptions::default())
}

fn expect_err(k: &LKernel, params: &mut [Vec<u8>], kind: SimErrorKind, at_span: usize, words: &[&str]) -> SimError {
    let e = sim(k, params).expect_err("the planted bug must be caught");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.span, span(at_span), "{e}");
    for w in words {
        assert!(e.to_string().contains(w), "missing `{w}` in: {e}");
    }
    e
}

/// 64 threads: S[tid] = A[tid]; (optional barrier); B[tid] = S[63 - tid].
fn exchange(barrier: Option<LStmtKind>) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 64), kb.param("B", DType::F32, 64));
    let s = kb.shared("A_smem", DType::F32, 64);
    let mut body = vec![at(1, store(s, tid(), load(a, tid())))];
    if let Some(bar) = barrier {
        body.push(at(2, bar));
    }
    body.push(at(3, store(b, tid(), load(s, bin(tirx_ir::lir::LBinOp::Sub, int(63), tid())))));
    kb.finish(body)
}

fn io(n: usize) -> Vec<Vec<u8>> {
    vec![to_bytes(DType::F32, &(0..n).map(|x| x as f32).collect::<Vec<_>>()), vec![0; 4 * n]]
}

#[test]
fn missing_cta_sync_is_a_race() {
    // Threads run in order, so the conflict surfaces when thread 32 writes what thread 31 read.
    let e = expect_err(
        &exchange(None),
        &mut io(64),
        SimErrorKind::DataRace,
        1,
        &[
            "`A_smem`",
            "element 32",
            "thread 32 (warp 1, lane 0)",
            "writes it",
            "thread 31 (warp 0, lane 31)",
            "read it",
            "same barrier interval",
        ],
    );
    assert_eq!(e.labels[0].0, span(3), "the other access is pointed at");
    assert!(e.help.as_deref().unwrap_or("").contains("cta_sync"));
    // With the barrier it is correct.
    let mut p = io(64);
    sim(&exchange(Some(cta_sync())), &mut p).unwrap();
    let out: Vec<f32> = tirx_sim::value::from_bytes(DType::F32, &p[1]);
    assert_eq!(out[0], 63.0);
    // A warp barrier does not order threads of different warps.
    expect_err(
        &exchange(Some(warp_sync())),
        &mut io(64),
        SimErrorKind::DataRace,
        3,
        &["element 63", "thread 0 ", "thread 63 "],
    );
}

#[test]
fn warp_sync_orders_lanes_of_one_warp() {
    // 32 threads: lane l writes S[l], __syncwarp, reads S[31 - l]: ordered.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::I32, 32);
    let s = kb.shared("S", DType::I32, 32);
    let k = kb.finish(vec![
        at(1, store(s, tid(), tid())),
        at(2, warp_sync()),
        at(3, store(b, tid(), load(s, bin(tirx_ir::lir::LBinOp::Sub, int(31), tid())))),
        // Write-after-read by another lane, ordered by the second warp barrier.
        at(4, warp_sync()),
        at(5, store(s, rem(add(tid(), int(1)), int(32)), int(0))),
    ]);
    let rep = sim(&k, &mut [vec![0; 128]]).unwrap();
    assert!(rep.warnings.is_empty());
}

#[test]
fn write_after_read_by_another_thread_is_a_race() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::I32, 32);
    let s = kb.shared("S", DType::I32, 32);
    let k = kb.finish(vec![
        at(1, store(s, tid(), tid())),
        at(2, cta_sync()),
        at(3, store(b, tid(), load(s, tid()))),
        at(4, store(s, rem(add(tid(), int(1)), int(32)), int(0))),
    ]);
    // Thread 0 runs first: its write of S[1] (stmt 4) conflicts with thread 1's read (stmt 3).
    expect_err(
        &k,
        &mut [vec![0; 128]],
        SimErrorKind::DataRace,
        3,
        &["`S`", "element 1", "thread 1 ", "reads it", "thread 0 ", "wrote it"],
    );
}

#[test]
fn two_ctas_writing_one_global_element_race() {
    let mut kb = Kb::new([2, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::I32, 32);
    let k = kb.finish(vec![at(1, store(b, tid(), bid()))]);
    expect_err(
        &k,
        &mut [vec![0; 128]],
        SimErrorKind::DataRace,
        1,
        &["`B`", "element 0", "CTA (1, 0, 0)", "CTA (0, 0, 0)", "not ordered"],
    );
}

#[test]
fn reading_what_another_cta_writes_races() {
    // CTA 0 reads A[0..32]; CTA 1 writes A[0..32].
    let mut kb = Kb::new([2, 1, 1], [32, 1, 1]);
    let (a, b) = (kb.param("A", DType::I32, 32), kb.param("B", DType::I32, 64));
    let k = kb.finish(vec![
        at(1, if_(bin(tirx_ir::lir::LBinOp::Eq, bid(), int(0)), vec![at(2, store(b, tid(), load(a, tid())))])),
        at(3, if_(bin(tirx_ir::lir::LBinOp::Eq, bid(), int(1)), vec![at(4, store(a, tid(), int(5)))])),
    ]);
    expect_err(&k, &mut [vec![0; 128], vec![0; 256]], SimErrorKind::DataRace, 4, &["`A`", "read it"]);
}

#[test]
fn out_of_bounds_store() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::F32, 32);
    let k = kb.finish(vec![at(9, store(b, add(tid(), int(1)), flt(1.0, DType::F32)))]);
    let e = expect_err(
        &k,
        &mut [vec![0; 128]],
        SimErrorKind::OutOfBounds,
        9,
        &["store", "`B` (global, 32 × float32)", "element 32", "thread 31 (warp 0, lane 31)"],
    );
    assert!(e.help.unwrap().contains("0..32"));
}

#[test]
fn misaligned_16_byte_access() {
    let mut kb = Kb::new([1, 1, 1], [8, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 64), kb.param("B", DType::F32, 64));
    let k = kb.finish(vec![at(5, vcopy(b, mul(tid(), int(4)), a, add(mul(tid(), int(4)), int(2)), 4))]);
    expect_err(
        &k,
        &mut io(64),
        SimErrorKind::Misaligned,
        5,
        &["16-byte", "`A`", "element 2", "byte offset 8", "thread 0"],
    );
}

#[test]
fn barrier_under_a_lane_condition() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::I32, 32);
    let k = kb.finish(vec![at(1, if_(lt(lane(), int(16)), vec![at(2, cta_sync())])), at(3, store(b, tid(), int(1)))]);
    let e = expect_err(
        &k,
        &mut [vec![0; 128]],
        SimErrorKind::BarrierDivergence,
        2,
        &["__syncthreads", "threads 0-15 wait here", "threads 16-31 exited"],
    );
    assert!(e.help.unwrap().contains("cta_sync"));
}

#[test]
fn threads_at_different_barriers() {
    let kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let k = kb.finish(
        vec![LStmtKind::If {
            cond: lt(tid(), int(32)),
            then_body: vec![at(2, cta_sync())],
            else_body: vec![at(3, cta_sync())],
        }]
        .into_iter()
        .map(|kind| at(1, kind))
        .collect(),
    );
    let e = expect_err(
        &k,
        &mut [],
        SimErrorKind::BarrierDivergence,
        2,
        &["threads 0-31 wait here", "threads 32-63 wait at"],
    );
    assert_eq!(e.labels[0].0, span(3));
}

#[test]
fn ldmatrix_by_a_partial_warp() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let s = kb.shared("S", DType::F16, 64);
    let r = kb.local("R", DType::F16, 2);
    let ld = LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
        dir: MatrixDir::Load,
        num: 1,
        trans: false,
        smem: s,
        smem_index: mul(rem(lane(), int(8)), int(8)),
        regs: r,
        reg_index: vec![int(0)],
    }));
    let k = kb.finish(vec![at(1, if_(lt(lane(), int(16)), vec![at(2, ld)]))]);
    let e = expect_err(
        &k,
        &mut [],
        SimErrorKind::PartialWarp,
        2,
        &["ldmatrix.x1", "lanes 0-15 wait here", "lanes 16-31 exited"],
    );
    assert!(e.help.unwrap().contains("warp-collective"));
}

#[test]
fn ldmatrix_in_a_cta_smaller_than_a_warp() {
    let mut kb = Kb::new([1, 1, 1], [16, 1, 1]);
    let s = kb.shared("S", DType::F16, 64);
    let r = kb.local("R", DType::F16, 2);
    let ld = LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
        dir: MatrixDir::Load,
        num: 1,
        trans: false,
        smem: s,
        smem_index: int(0),
        regs: r,
        reg_index: vec![int(0)],
    }));
    let k = kb.finish(vec![at(1, ld)]);
    expect_err(&k, &mut [], SimErrorKind::PartialWarp, 1, &["only 16 of 32 lanes"]);
}

#[test]
fn uninitialised_shared_and_local_reads_warn() {
    let mut kb = Kb::new([2, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::F32, 64);
    let s = kb.shared("S", DType::F32, 32);
    let r = kb.local("R", DType::F32, 4);
    let k = kb.finish(vec![
        at(1, store(b, add(mul(bid(), int(32)), tid()), load(s, tid()))),
        at(2, store(r, int(0), flt(1.0, DType::F32))),
        at(3, store(b, add(mul(bid(), int(32)), tid()), load(r, int(1)))),
    ]);
    let rep = sim(&k, &mut [vec![0; 256]]).unwrap();
    assert_eq!(rep.warnings.len(), 2, "{:?}", rep.warnings);
    assert_eq!(rep.warnings[0].span, span(1));
    assert_eq!(rep.warnings[0].count, 64, "every thread of both CTAs (shared memory is fresh per CTA)");
    assert!(rep.warnings[0].message.contains("`S`") && rep.warnings[0].message.contains("before any thread"));
    assert_eq!(rep.warnings[1].span, span(3));
    assert!(rep.warnings[1].message.contains("`R`") && rep.warnings[1].message.contains("element 1"));
}

#[test]
fn integer_division_by_zero() {
    let mut kb = Kb::new([1, 1, 1], [4, 1, 1]);
    let b = kb.param("B", DType::I32, 4);
    let k = kb.finish(vec![at(6, store(b, tid(), div(int(8), tid())))]);
    expect_err(&k, &mut [vec![0; 16]], SimErrorKind::DivisionByZero, 6, &["thread 0"]);
}

#[test]
fn non_coherent_read_of_written_memory() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 32);
    let k = kb.finish(vec![at(
        1,
        LStmtKind::Memory(MemOp::VecCopy {
            dst: a,
            dst_index: tid(),
            src: a,
            src_index: rem(add(tid(), int(1)), int(32)),
            lanes: 1,
            cache: CacheHint::NonCoherent,
        }),
    )]);
    expect_err(&k, &mut [vec![0; 128]], SimErrorKind::DataRace, 1, &["ld.global.nc"]);
}

#[test]
fn wrong_parameter_size_and_bad_launch() {
    let mut kb = Kb::new([1, 1, 1], [2048, 1, 1]);
    let _ = kb.param("A", DType::F32, 32);
    let k = kb.finish(vec![]);
    assert_eq!(sim(&k, &mut [vec![0; 128]]).unwrap_err().kind, SimErrorKind::ResourceLimit);
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let _ = kb.param("A", DType::F32, 32);
    let k = kb.finish(vec![]);
    let e = sim(&k, &mut [vec![0; 100]]).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BadArgument);
    assert!(e.to_string().contains("`A`") && e.to_string().contains("128"), "{e}");
}

#[test]
fn malformed_lir_is_an_invalid_kernel_not_a_panic() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 32);
    let s = kb.shared("S", DType::F16, 32);
    let k = kb.finish(vec![at(1, vcopy(s, int(0), a, int(0), 4))]);
    assert_eq!(sim(&k, &mut [vec![0; 128]]).unwrap_err().kind, SimErrorKind::InvalidKernel);
}

#[test]
fn a_write_after_reads_by_two_other_threads_names_the_race() {
    // Threads 0 and 1 read S[0]; then thread 1 writes it: a race with thread 0's read.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let s = kb.shared("S", DType::I32, 4);
    let r = kb.local("R", DType::I32, 1);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(2)), vec![at(2, store(r, int(0), load(s, int(0))))])),
        at(3, if_(bin(tirx_ir::lir::LBinOp::Eq, tid(), int(1)), vec![at(4, store(s, int(0), int(7)))])),
    ]);
    expect_err(&k, &mut [], SimErrorKind::DataRace, 4, &["thread 1 ", "writes it", "among other threads", "read it"]);
}

#[test]
fn warp_sync_under_a_lane_condition() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::I32, 32);
    let k = kb.finish(vec![at(1, if_(lt(lane(), int(16)), vec![at(2, warp_sync())])), at(3, store(b, tid(), int(1)))]);
    let e = expect_err(
        &k,
        &mut [vec![0; 128]],
        SimErrorKind::BarrierDivergence,
        2,
        &["__syncwarp", "warp 0", "lanes 0-15 wait here", "lanes 16-31 exited"],
    );
    assert!(e.help.unwrap().contains("lane-dependent"));
}

#[test]
fn misaligned_half2_pair() {
    let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
    let a = kb.param("A", DType::F16, 8);
    let k = kb.finish(vec![at(
        4,
        LStmtKind::Pair(PairOp::Packed2 {
            op: tirx_ir::lir::PackedOp::Add,
            dtype: DType::F16,
            dst: a,
            dst_index: int(0),
            srcs: vec![tirx_ir::lir::PairSrc::Buf(a, add(tid(), int(3))), tirx_ir::lir::PairSrc::Buf(a, int(4))],
        }),
    )]);
    expect_err(&k, &mut [vec![0; 16]], SimErrorKind::Misaligned, 4, &["4-byte", "`A`", "element 3"]);
}

#[test]
fn shared_memory_limits() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    kb.shared("Big", DType::F32, 16 * 1024);
    let k = kb.finish(vec![]);
    let e = sim(&k, &mut []).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::ResourceLimit);
    assert!(e.help.unwrap().contains("shared.dyn"), "static shared memory over 48 KiB");
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let s = kb.shared("Big", DType::F32, 16 * 1024);
    kb.k.bufs[s.0 as usize].dynamic = true;
    sim(&kb.finish(vec![]), &mut []).unwrap();
}

/// Memory is budgeted before anything is allocated: the buffers' contents, against
/// `SimOptions::memory_limit`; the race shadow (16 bytes per global/shared element,
/// mapped zeroed, paid for per touched page) is reported but not counted.
#[test]
fn a_simulation_over_the_memory_limit_is_refused_before_allocating() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 1024);
    kb.shared("S", DType::F32, 256);
    let k = kb.finish(vec![at(1, store(a, tid(), flt(0.0, DType::F32)))]);
    let used = tirx_sim::memory_use(&k, &SimOptions::default());
    assert_eq!(used.total, 1024 * 4 + 256 * 4);
    assert_eq!(used.bufs.iter().map(|b| b.shadow).sum::<u64>(), (1024 + 256) * 16);
    assert_eq!(used.largest().map(|b| b.buf), Some(a));
    let tight = SimOptions { memory_limit: 4 * 1024, ..Default::default() };
    let e = simulate(&k, &mut [vec![0; 4096]], &tight).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::ResourceLimit);
    for w in ["5120 bytes", "`A` (global, 1024 float32) takes 4096 bytes (4.0 KiB) of data", "4096 bytes (4.0 KiB)"] {
        assert!(e.message.contains(w), "missing `{w}` in: {e}");
    }
    assert!(e.help.as_deref().is_some_and(|h| h.contains("smaller shape")));
    // The contents fit a limit the shadow would not.
    let fits = SimOptions { memory_limit: 5120, ..Default::default() };
    simulate(&k, &mut [vec![0; 4096]], &fits).unwrap();
}

#[test]
fn a_cluster_counts_the_shared_memory_of_each_of_its_ctas() {
    let mut kb = Kb::new([4, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 1024);
    let s = kb.shared("S", DType::F32, 256);
    let mut k = kb.finish(vec![at(1, store(a, tid(), flt(0.0, DType::F32)))]);
    let one = tirx_sim::memory_use(&k, &SimOptions::default());
    k.cluster = [4, 1, 1];
    let four = tirx_sim::memory_use(&k, &SimOptions::default());
    let shared = |u: &tirx_sim::MemoryUse| u.bufs.iter().find(|b| b.buf == s).map(|b| (b.data, b.shadow));
    assert_eq!(shared(&one), Some((256 * 4, 256 * 16)));
    assert_eq!(shared(&four), Some((4 * 256 * 4, 4 * 256 * 16)));
    assert_eq!(four.total, 1024 * 4 + 4 * 256 * 4);
}

#[test]
fn race_check_can_be_turned_off() {
    let opts = SimOptions { check_races: false, ..Default::default() };
    let mut p = io(64);
    let rep = simulate(&exchange(None), &mut p, &opts).unwrap();
    assert!(!rep.warnings.is_empty(), "uninitialised reads are still reported");
}

#[test]
fn threads_of_2d_blocks_are_named_by_threadidx() {
    use tirx_ir::lir::{LExpr, Special};
    let mut kb = Kb::new([1, 1, 1], [8, 4, 1]);
    let b = kb.param("B", DType::I32, 16);
    let ty = LExpr::Special(Special::ThreadIdx(1));
    // Row-major over (y, x): thread (0, 2) is the first to index past 16 elements.
    let k = kb.finish(vec![at(1, store(b, add(mul(ty, int(8)), tid()), int(1)))]);
    expect_err(
        &k,
        &mut [vec![0; 64]],
        SimErrorKind::OutOfBounds,
        1,
        &["thread 16 = threadIdx (0, 2, 0) (warp 0, lane 16)"],
    );
}

#[test]
fn absurd_sizes_are_errors_not_overflows() {
    // 2^32 threads per CTA: the thread count saturates instead of overflowing.
    let k = Kb::new([1, 1, 1], [u32::MAX, u32::MAX, u32::MAX]).finish(vec![]);
    assert_eq!(sim(&k, &mut []).unwrap_err().kind, SimErrorKind::ResourceLimit);
    // i64::MAX elements of f32 in each of several memory spaces: byte sizes saturate.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let _ = kb.param("A", DType::F32, i64::MAX);
    assert_eq!(sim(&kb.finish(vec![]), &mut [vec![0; 4]]).unwrap_err().kind, SimErrorKind::BadArgument);
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    kb.local("R", DType::F32, i64::MAX);
    assert_eq!(sim(&kb.finish(vec![]), &mut []).unwrap_err().kind, SimErrorKind::ResourceLimit);
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    kb.shared("S", DType::F32, i64::MAX);
    kb.shared("T", DType::F32, i64::MAX);
    assert_eq!(sim(&kb.finish(vec![]), &mut []).unwrap_err().kind, SimErrorKind::ResourceLimit);
}

/// The copy at LIR level: 2 CTAs of 16 threads; thread t of CTA c copies
/// row t, columns `16c .. 16c + 32`, of a (16, 32) `A` into the same place of
/// `B`, element by element through the flat arrays. For c = 1 the columns run
/// past the row into the next one: flat indices stay in bounds, so without a
/// per-dimension check the only symptom is CTA 1 writing what CTA 0 wrote (a
/// race report), or nothing at all for the reads. With the region's
/// `BoundsCheck` before the copy, the first out-of-bounds element is reported
/// with its coordinates, buffer, thread and the region's span, before any race.
fn row_copy(checked: bool) -> LKernel {
    let mut kb = Kb::new([2, 1, 1], [16, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 512), kb.param("B", DType::F32, 512));
    let j = kb.var("j", DType::I32);
    let col = mul(bid(), int(16));
    let flat = add(add(mul(tid(), int(32)), col.clone()), v(j));
    let region = |buf, write| tirx_ir::lir::BoundsCheck {
        buf,
        name: if write { "B" } else { "A" }.into(),
        shape: vec![16, 32],
        begins: vec![tid(), col.clone()],
        extents: vec![1, 32],
        write,
    };
    let mut body = vec![];
    if checked {
        body.push(at(1, LStmtKind::Bounds(region(b, true))));
        body.push(at(2, LStmtKind::Bounds(region(a, false))));
    }
    body.push(at(3, for_(j, 32, vec![at(3, store(b, flat.clone(), load(a, flat)))])));
    kb.finish(body)
}

#[test]
fn regions_are_checked_per_dimension_before_races() {
    let io = || vec![to_bytes(DType::F32, &(0..512).map(|x| x as f32).collect::<Vec<_>>()), vec![0; 2048]];
    // Unchecked: the wrapped columns of CTA 1 overwrite row t + 1 of CTA 0 with the values CTA 0
    // wrote there (B[x] = A[x]): a same-value race, a warning; the run goes on to the flat
    // out-of-bounds load of the last row, the element after `A`.
    let e = expect_err(&row_copy(false), &mut io(), SimErrorKind::OutOfBounds, 3, &["element 512"]);
    assert!(e.message.contains("load of `A`"), "{e}");
    let mut p = io();
    let mut k = row_copy(false);
    k.grid = [2, 1, 1];
    let warned = tirx_sim::simulate(&k, &mut p, &tirx_sim::SimOptions { grid_limit: Some(1), ..Default::default() });
    assert!(warned.is_ok(), "one CTA alone stays in bounds");
    let e = expect_err(
        &row_copy(true),
        &mut io(),
        SimErrorKind::OutOfBounds,
        1,
        &[
            "write of element (0, 32) of `B` (global, shape (16, 32))",
            "thread 0 (warp 0, lane 0) of CTA (1, 0, 0)",
            "outside dim 1 (size 32) of the region B[0:1, 16:48]",
        ],
    );
    assert!(e.help.as_deref().unwrap_or("").contains("0..32"), "{e}");
    // In bounds (one CTA): the checks pass and the copy runs.
    let mut k = row_copy(true);
    k.grid = [1, 1, 1];
    let a: Vec<f32> = (0..512).map(|x| x as f32).collect();
    let mut p = vec![to_bytes(DType::F32, &a), vec![0; 2048]];
    sim(&k, &mut p).unwrap();
    assert_eq!(tirx_sim::value::from_bytes::<f32>(DType::F32, &p[1]), a);
    // A malformed check (a begin per dim missing) is an invalid kernel, not a panic.
    let mut k = row_copy(true);
    if let LStmtKind::Bounds(c) = &mut k.body[0].kind {
        c.begins.pop();
    }
    assert_eq!(sim(&k, &mut io()).unwrap_err().kind, SimErrorKind::InvalidKernel);
}

/// A begin before the buffer: the begin itself is the first element outside.
#[test]
fn negative_begins_are_out_of_bounds() {
    let mut kb = Kb::new([1, 1, 1], [4, 1, 1]);
    let a = kb.param("A", DType::I32, 64);
    let check = tirx_ir::lir::BoundsCheck {
        buf: a,
        name: "A_view".into(),
        shape: vec![4, 4, 4],
        begins: vec![int(0), add(tid(), int(-2)), int(1)],
        extents: vec![1, 2, 3],
        write: false,
    };
    expect_err(
        &kb.finish(vec![at(7, LStmtKind::Bounds(check))]),
        &mut [vec![0; 256]],
        SimErrorKind::OutOfBounds,
        7,
        &["read of element (0, -2, 1) of `A_view` (global, shape (4, 4, 4)) by thread 0 ", "outside dim 1 (size 4)"],
    );
}

/// Unordered writes of one value to one element cannot change the result: a warning, counted per
/// site; unordered writes of different values stay a data race.
#[test]
fn same_value_write_races_are_warnings_different_values_errors() {
    let kernel = |value: tirx_ir::lir::LExpr| {
        let mut kb = Kb::new([2, 1, 1], [32, 1, 1]);
        let b = kb.param("B", DType::I32, 4);
        kb.finish(vec![at(1, store(b, int(0), value))])
    };
    let mut p = vec![vec![0; 16]];
    let report = sim(&kernel(int(7)), &mut p).expect("same-value writes are deterministic");
    assert_eq!(report.warnings.len(), 1, "{:?}", report.warnings);
    let w = &report.warnings[0];
    assert!(
        w.message.contains("unordered writes of element 0") && w.message.contains("the same value"),
        "{}",
        w.message
    );
    assert_eq!(w.count, 63, "every write after the first races with the one before it");
    assert_eq!(i32::from_le_bytes(p[0][..4].try_into().unwrap()), 7);
    expect_err(&kernel(tid()), &mut [vec![0; 16]], SimErrorKind::DataRace, 1, &["in the same barrier interval"]);
}
