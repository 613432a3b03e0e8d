//! The asynchronous family: cp.async lands only when its group is waited for,
//! and mbarriers have real phases, block waiting threads, order memory from
//! arrivals to waiters, and turn a wait that can never complete into a deadlock
//! error instead of a hang.
mod common;
use common::*;
use tirx_ir::lir::{AsyncOp, LBinOp, LBufId, LExpr, LKernel, LStmtKind, Mbar};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimError, SimErrorKind, SimOptions};

fn cp_async(dst: LBufId, di: LExpr, src: LBufId, si: LExpr, bytes: u32, src_bytes: Option<LExpr>) -> LStmtKind {
    LStmtKind::Async(AsyncOp::CpAsync { dst, dst_index: di, src, src_index: si, bytes, src_bytes, prefetch: None })
}
fn commit() -> LStmtKind {
    LStmtKind::Async(AsyncOp::CommitGroup)
}
fn wait_group(n: u32) -> LStmtKind {
    LStmtKind::Async(AsyncOp::WaitGroup(n))
}
fn bar(buf: LBufId, i: i64) -> Mbar {
    Mbar { buf, index: int(i) }
}
fn init(b: Mbar, count: i64) -> LStmtKind {
    LStmtKind::Async(AsyncOp::MbarInit { bar: b, count: int(count) })
}
fn arrive(b: Mbar) -> LStmtKind {
    LStmtKind::Async(AsyncOp::MbarArrive { bar: b, cta: None, cta_scope: false })
}
fn arrive_tx(b: Mbar, bytes: i64) -> LStmtKind {
    LStmtKind::Async(AsyncOp::MbarArriveExpectTx { bar: b, bytes: int(bytes) })
}
fn wait(b: Mbar, parity: LExpr) -> LStmtKind {
    LStmtKind::Async(AsyncOp::MbarWait { bar: b, parity })
}

fn opts(races: bool) -> SimOptions {
    SimOptions { check_races: races, ..SimOptions::default() }
}

/// Runs with input `A` = 0.5, 1.5, ... (`n` float32; none when `n` is 0) and
/// zeroed float32 outputs of `outs` elements each; returns the outputs.
fn run(k: &LKernel, n: usize, outs: &[usize], o: &SimOptions) -> Result<Vec<Vec<f64>>, SimError> {
    let a: Vec<f64> = (0..n).map(|i| i as f64 + 0.5).collect();
    let mut p = if n > 0 { vec![to_bytes(DType::F32, &a)] } else { vec![] };
    p.extend(outs.iter().map(|m| vec![0; 4 * m]));
    let rep = simulate(k, &mut p, o)?;
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    Ok(p[usize::from(n > 0)..].iter().map(|b| from_bytes::<f64>(DType::F32, b)).collect())
}

fn expect_err(r: Result<Vec<Vec<f64>>, SimError>, kind: SimErrorKind, at_span: usize, words: &[&str]) -> SimError {
    let e = r.expect_err("the misuse must be caught");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.span, span(at_span), "{e}");
    for w in words {
        assert!(e.to_string().contains(w), "missing `{w}` in: {e}");
    }
    e
}

/// 32 threads: two groups of cp.async into `S` (16 B each; then 8 B with a source
/// size of `(tid % 2) * 8` bytes, i.e. even threads zero-fill); `waits`, then
/// (when `read_back`) a barrier and `B[tid*4 + j] = S[(31 - tid)*4 + j]` over all 256.
fn cp_async_kernel(waits: Vec<LStmtKind>, read_back: bool) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 256), kb.param("B", DType::F32, 256));
    let s = kb.shared("S", DType::F32, 256);
    let j = kb.var("j", DType::I32);
    let lo = || mul(tid(), int(4));
    let hi = |k| add(add(int(128), mul(tid(), int(4))), int(k));
    let mirror = |base: i64| add(add(int(base), mul(bin(LBinOp::Sub, int(31), tid()), int(4))), v(j));
    let mut body = vec![
        at(1, cp_async(s, lo(), a, lo(), 16, None)),
        at(2, commit()),
        at(3, cp_async(s, hi(0), a, hi(0), 8, Some(mul(rem(tid(), int(2)), int(8))))),
        at(4, cp_async(s, hi(2), a, hi(2), 8, None)),
        at(5, commit()),
    ];
    body.extend(waits.into_iter().map(|w| at(6, w)));
    if !read_back {
        return kb.finish(body);
    }
    body.push(at(7, cta_sync()));
    body.push(at(
        8,
        for_(
            j,
            4,
            vec![
                at(9, store(b, add(lo(), v(j)), load(s, mirror(0)))),
                at(10, store(b, add(hi(0), v(j)), load(s, mirror(128)))),
            ],
        ),
    ));
    kb.finish(body)
}

fn cp_async_want() -> Vec<f64> {
    let a = |i: usize| i as f64 + 0.5;
    let mut want = vec![0.0; 256];
    for t in 0..32 {
        for j in 0..4 {
            let m = (31 - t) * 4 + j;
            want[t * 4 + j] = a(m);
            // Thread 31 - t copied element 128 + m; its first 8 bytes only when it is odd.
            want[128 + t * 4 + j] = if j < 2 && (31 - t) % 2 == 0 { 0.0 } else { a(128 + m) };
        }
    }
    want
}

#[test]
fn cp_async_lands_after_wait_group() {
    let got = run(&cp_async_kernel(vec![wait_group(0)], true), 256, &[256], &opts(true)).unwrap();
    assert_eq!(got[0], cp_async_want());
    // Waiting group by group gives the same.
    let got = run(&cp_async_kernel(vec![wait_group(1), wait_group(0)], true), 256, &[256], &opts(true)).unwrap();
    assert_eq!(got[0], cp_async_want());
}

#[test]
fn missing_wait_or_commit_is_an_error() {
    let e = expect_err(
        run(&cp_async_kernel(vec![], false), 256, &[256], &opts(true)),
        SimErrorKind::AsyncCopy,
        1,
        &["thread 0", "exits with 3 cp.async in committed groups not waited for"],
    );
    assert!(e.help.unwrap().contains("cp.async.wait_group"));
    // wait_group 1 leaves the second group in flight; reading it is a race with the copy.
    expect_err(
        run(&cp_async_kernel(vec![wait_group(1)], true), 256, &[256], &opts(true)),
        SimErrorKind::DataRace,
        10,
        &["`S`", "element 252", "thread 0", "reads it while a cp.async into it by thread 31", "has not completed"],
    );
}

#[test]
fn values_are_not_visible_before_the_wait() {
    // Each thread reads its own destination before and after wait_group.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, b, c) = (kb.param("A", DType::F32, 128), kb.param("B", DType::F32, 32), kb.param("C", DType::F32, 32));
    let s = kb.shared("S", DType::F32, 128);
    let at4 = || mul(tid(), int(4));
    let k = kb.finish(vec![
        at(0, store(s, at4(), flt(-1.0, DType::F32))),
        at(1, cp_async(s, at4(), a, at4(), 16, None)),
        at(2, commit()),
        at(3, store(b, tid(), load(s, at4()))),
        at(4, wait_group(0)),
        at(5, store(c, tid(), load(s, at4()))),
    ]);
    // Without race checks the early read sees the old value, the late one the copy.
    let got = run(&k, 128, &[32, 32], &opts(false)).unwrap();
    assert_eq!(got[0], vec![-1.0; 32]);
    assert_eq!(got[1], (0..32).map(|t| (4 * t) as f64 + 0.5).collect::<Vec<_>>());
    // With them, the early read is the race it is on a GPU.
    expect_err(
        run(&k, 128, &[32, 32], &opts(true)),
        SimErrorKind::DataRace,
        3,
        &["`S`", "element 0", "thread 0 (warp 0, lane 0) of CTA (0, 0, 0) reads it while its own cp.async"],
    );
}

#[test]
fn overwriting_a_source_in_flight_is_a_race() {
    // Thread t copies A[4t..4t+4]; after a barrier, thread (t + 1) % 32 writes A[4t], before
    // or after its wait. The barrier orders the issue (where the simulator reads the source)
    // before the write, but the hardware may read the source any time until the copy completes.
    let kernel = |after_wait: bool| {
        let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
        let a = kb.param("A", DType::F32, 128);
        let s = kb.shared("S", DType::F32, 128);
        let at4 = || mul(tid(), int(4));
        let other = || mul(rem(add(tid(), int(31)), int(32)), int(4));
        let mut body = vec![at(1, cp_async(s, at4(), a, at4(), 16, None)), at(2, commit())];
        let clobber = at(3, store(a, other(), flt(0.0, DType::F32)));
        if after_wait {
            body.extend([at(4, wait_group(0)), at(5, cta_sync()), clobber]);
        } else {
            body.extend([at(5, cta_sync()), clobber, at(4, wait_group(0))]);
        }
        kb.finish(body)
    };
    let e = expect_err(
        run(&kernel(false), 128, &[], &opts(true)),
        SimErrorKind::DataRace,
        3,
        &[
            "`A`",
            "element 124",
            "thread 0",
            "writes it while a cp.async by thread 31",
            "that reads it has not completed",
        ],
    );
    assert_eq!(e.labels[0].0, span(1), "the copy's site is named: {e}");
    // Its own source, too: the copy may still be reading it.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 128);
    let s = kb.shared("S", DType::F32, 128);
    let k = kb.finish(vec![
        at(1, cp_async(s, mul(tid(), int(4)), a, mul(tid(), int(4)), 16, None)),
        at(2, commit()),
        at(3, store(a, add(mul(tid(), int(4)), int(2)), flt(0.0, DType::F32))),
        at(4, wait_group(0)),
    ]);
    expect_err(run(&k, 128, &[], &opts(true)), SimErrorKind::DataRace, 3, &["while its own cp.async that reads it"]);
    // After the wait (and a barrier for the other threads) the source is free again.
    run(&kernel(true), 128, &[], &opts(true)).unwrap();
}

#[test]
fn cp_async_bad_source_size() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, _b) = (kb.param("A", DType::F32, 128), kb.param("B", DType::F32, 1));
    let s = kb.shared("S", DType::F32, 128);
    let k = kb.finish(vec![
        at(1, cp_async(s, mul(tid(), int(4)), a, mul(tid(), int(4)), 16, Some(add(tid(), int(14))))),
        at(2, commit()),
        at(3, wait_group(0)),
    ]);
    // Thread 0 asks for 14 bytes (not whole elements), thread 3 would ask for 17.
    expect_err(run(&k, 128, &[1], &opts(true)), SimErrorKind::AsyncCopy, 1, &["source size 14", "0..=16"]);
}

/// Warp 0 produces `slot = 2 A[r]` for `rounds` rounds, warp 1 consumes
/// `B[r] = slot + slot[0]`; `full` and `empty` count 32 arrivals each.
fn pipeline(rounds: i64, consumer_waits: bool) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 32 * rounds), kb.param("B", DType::F32, 32 * rounds));
    let slot = kb.shared("slot", DType::F32, 32);
    let bars = kb.shared("bars", DType::I64, 2);
    let (r1, r2) = (kb.var("r", DType::I32), kb.var("r", DType::I32));
    let parity = |r| bin(LBinOp::BitAnd, v(r), int(1));
    let at_r = |r| add(mul(v(r), int(32)), lane());
    let produce = vec![
        at(10, wait(bar(bars, 1), bin(LBinOp::BitXor, parity(r1), int(1)))),
        at(11, store(slot, lane(), mul(load(a, at_r(r1)), flt(2.0, DType::F32)))),
        at(12, arrive(bar(bars, 0))),
    ];
    let mut consume = vec![];
    if consumer_waits {
        consume.push(at(20, wait(bar(bars, 0), parity(r2))));
    }
    consume.push(at(21, store(b, at_r(r2), add(load(slot, lane()), load(slot, int(0))))));
    consume.push(at(22, arrive(bar(bars, 1))));
    kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), 32)), at(3, init(bar(bars, 1), 32))])),
        at(4, cta_sync()),
        at(
            5,
            LStmtKind::If {
                cond: lt(tid(), int(32)),
                then_body: vec![at(6, for_(r1, rounds, produce))],
                else_body: vec![at(7, for_(r2, rounds, consume))],
            },
        ),
    ])
}

#[test]
fn mbarrier_producer_consumer() {
    let got = run(&pipeline(4, true), 128, &[128], &opts(true)).unwrap();
    let a = |i: usize| i as f64 + 0.5;
    let want: Vec<f64> = (0..128).map(|i| 2.0 * a(i) + 2.0 * a(i / 32 * 32)).collect();
    assert_eq!(got[0], want);
}

#[test]
fn reading_without_waiting_is_a_race() {
    // The consumer skips the full barrier: its read of the slot is unordered with the write.
    expect_err(
        run(&pipeline(1, false), 32, &[32], &opts(true)),
        SimErrorKind::DataRace,
        21,
        &[
            "`slot`",
            "thread 32 (warp 1, lane 0) of CTA (0, 0, 0) reads it",
            "thread 0 (warp 0, lane 0) of CTA (0, 0, 0) wrote it",
        ],
    );
}

/// Thread 0 initialises `bar` for `count` arrivals; after a barrier, threads
/// `0..arrivers` arrive (thread 0 with expect_tx of `tx` bytes when `tx > 0`)
/// and every thread waits for phase 0.
fn arrive_then_wait(count: i64, arrivers: i64, tx: i64) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let b = kb.param("B", DType::F32, 64);
    let bars = kb.shared("bar", DType::I64, 1);
    let first = if tx > 0 { arrive_tx(bar(bars, 0), tx) } else { arrive(bar(bars, 0)) };
    kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), count))])),
        at(3, cta_sync()),
        at(
            4,
            LStmtKind::If {
                cond: lt(tid(), int(1)),
                then_body: vec![at(5, first)],
                else_body: vec![at(6, if_(lt(tid(), int(arrivers)), vec![at(7, arrive(bar(bars, 0)))]))],
            },
        ),
        at(8, wait(bar(bars, 0), int(0))),
        at(9, store(b, tid(), flt(1.0, DType::F32))),
    ])
}

#[test]
fn phases_complete_with_the_full_count() {
    let got = run(&arrive_then_wait(64, 64, 0), 0, &[64], &opts(true)).unwrap();
    assert_eq!(got[0], vec![1.0; 64]);
}

#[test]
fn a_phase_that_never_completes_is_a_deadlock() {
    let e = expect_err(
        run(&arrive_then_wait(64, 48, 0), 0, &[64], &opts(true)),
        SimErrorKind::Deadlock,
        8,
        &["threads 0-63", "`bar[0]`", "parity 0", "phase 0 with 16 of 64 arrivals", "no thread can arrive"],
    );
    assert!(e.help.unwrap().contains("arrival count"));
    // All arrivals, but transaction bytes that no TMA copy completes.
    expect_err(
        run(&arrive_then_wait(64, 64, 1024), 0, &[64], &opts(true)),
        SimErrorKind::Deadlock,
        8,
        &["phase 0; 1024 transaction bytes are still missing", "no TMA copy completes on this barrier"],
    );
}

#[test]
fn a_deadlock_names_where_the_others_are() {
    // Warp 1 waits for warp 0's arrivals, but warp 0 waits at a CTA barrier warp 1 never reaches.
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let bars = kb.shared("bar", DType::I64, 1);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), 32))])),
        at(3, cta_sync()),
        at(
            4,
            LStmtKind::If {
                cond: lt(tid(), int(32)),
                then_body: vec![at(5, cta_sync()), at(6, arrive(bar(bars, 0)))],
                else_body: vec![at(7, wait(bar(bars, 0), int(0)))],
            },
        ),
    ]);
    let e = expect_err(
        run(&k, 0, &[], &opts(true)),
        SimErrorKind::Deadlock,
        7,
        &["threads 32-63", "threads 0-31 wait at `__syncthreads()`"],
    );
    assert_eq!(e.labels[0].0, span(5));
}

#[test]
fn mbarrier_misuse() {
    // Arriving on a barrier no thread initialised.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let bars = kb.shared("bar", DType::I64, 2);
    let k = kb.finish(vec![at(1, arrive(bar(bars, 1)))]);
    expect_err(
        run(&k, 0, &[], &opts(true)),
        SimErrorKind::Mbarrier,
        1,
        &["`bar[1]`", "no thread of this CTA initialised"],
    );
    // Using it unordered with its initialisation (no barrier in between) is a race.
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let bars = kb.shared("bar", DType::I64, 1);
    let k = kb
        .finish(vec![at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), 64))])), at(3, arrive(bar(bars, 0)))]);
    expect_err(
        run(&k, 0, &[], &opts(true)),
        SimErrorKind::DataRace,
        3,
        &["`bar`", "thread 1 (warp 0, lane 1)", "thread 0 (warp 0, lane 0)", "wrote it"],
    );
}

#[test]
fn waiting_on_the_previous_parity_passes_at_once() {
    // A fresh barrier is in phase 0, so the phase of parity 1 counts as completed.
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let b = kb.param("B", DType::F32, 32);
    let bars = kb.shared("bar", DType::I64, 1);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), 1))])),
        at(3, cta_sync()),
        at(4, wait(bar(bars, 0), int(1))),
        at(5, store(b, tid(), flt(2.0, DType::F32))),
    ]);
    assert_eq!(run(&k, 0, &[32], &opts(true)).unwrap()[0], vec![2.0; 32]);
}

#[test]
fn ordering_through_mbarriers_is_transitive() {
    // Thread 0 writes X and arrives on b0; thread 32 waits b0 and arrives on b1;
    // thread 64 waits b1 and reads X: ordered through thread 32, no race.
    let mut kb = Kb::new([1, 1, 1], [96, 1, 1]);
    let b = kb.param("B", DType::F32, 1);
    let x = kb.shared("X", DType::F32, 1);
    let bars = kb.shared("bars", DType::I64, 2);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(2, init(bar(bars, 0), 1)), at(3, init(bar(bars, 1), 1))])),
        at(4, cta_sync()),
        at(
            5,
            if_(
                bin(LBinOp::Eq, tid(), int(0)),
                vec![at(6, store(x, int(0), flt(7.0, DType::F32))), at(7, arrive(bar(bars, 0)))],
            ),
        ),
        at(
            8,
            if_(bin(LBinOp::Eq, tid(), int(32)), vec![at(9, wait(bar(bars, 0), int(0))), at(10, arrive(bar(bars, 1)))]),
        ),
        at(
            11,
            if_(
                bin(LBinOp::Eq, tid(), int(64)),
                vec![at(12, wait(bar(bars, 1), int(0))), at(13, store(b, int(0), load(x, int(0))))],
            ),
        ),
    ]);
    assert_eq!(run(&k, 0, &[1], &opts(true)).unwrap()[0], vec![7.0]);
}

#[test]
fn copies_never_committed() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, _b) = (kb.param("A", DType::F32, 128), kb.param("B", DType::F32, 1));
    let s = kb.shared("S", DType::F32, 128);
    let k = kb.finish(vec![
        at(1, cp_async(s, mul(tid(), int(4)), a, mul(tid(), int(4)), 16, None)),
        at(2, wait_group(0)), // waits for committed groups only
    ]);
    expect_err(
        run(&k, 128, &[1], &opts(true)),
        SimErrorKind::AsyncCopy,
        1,
        &["thread 0", "exits with 1 cp.async not committed (cp.async.commit_group)"],
    );
}

/// CUTLASS's producer hand-off: warp 1 writes `S`, warps 0 and 1 meet at a named barrier, and
/// thread 0 alone arrives on an mbarrier that warp 2 waits for: warp 1's writes are ordered
/// before warp 2's reads (the arrive releases what its warp's named barriers ordered before it).
/// Without the named barrier they race.
fn handoff(named: bool) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [96, 1, 1]);
    let b = kb.param("B", DType::F32, 32);
    let s = kb.shared("S", DType::F32, 32);
    let bars = kb.shared("bar", DType::I64, 1);
    let warp = || div(tid(), int(32));
    let meet = if named { vec![at(4, bar_sync(int(1), 64))] } else { vec![] };
    let mut producer =
        vec![at(3, if_(bin(LBinOp::Eq, warp(), int(1)), vec![at(3, store(s, lane(), flt(2.0, DType::F32)))]))];
    producer.extend(meet);
    producer.push(at(5, if_(bin(LBinOp::Eq, tid(), int(0)), vec![at(5, arrive(bar(bars, 0)))])));
    kb.finish(vec![
        at(1, if_(lt(tid(), int(1)), vec![at(1, init(bar(bars, 0), 1))])),
        at(2, cta_sync()),
        at(3, if_(lt(warp(), int(2)), producer)),
        at(
            6,
            if_(
                bin(LBinOp::Eq, warp(), int(2)),
                vec![at(6, wait(bar(bars, 0), int(0))), at(7, store(b, lane(), load(s, lane())))],
            ),
        ),
    ])
}

#[test]
fn a_named_barrier_then_one_arrival_hands_off_every_warps_writes() {
    let got = run(&handoff(true), 0, &[32], &opts(true)).unwrap();
    assert_eq!(got[0], vec![2.0; 32]);
    expect_err(run(&handoff(false), 0, &[32], &opts(true)), SimErrorKind::DataRace, 7, &["`S`", "warp 1"]);
}
