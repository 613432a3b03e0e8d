//! Named barriers (`bar.sync id, threads`, `docs/lir.md` §2.1): they order the
//! accesses of the warps that pass them together (transitively), not those of
//! other warps; two groups on one id at once, a group that never fills, and a
//! partial warp are errors naming who waits where.
mod common;
use common::*;
use tirx_ir::lir::{LBinOp, LExpr, LKernel, LStmtKind};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimErrorKind, SimOptions};

/// The warpgroup of a thread: `tid / 128`.
fn wg() -> LExpr {
    div(tid(), int(128))
}

/// `threads` threads: S[tid] = A[tid]; `barrier`; B[tid] = S[g·128 + 127 - tid % 128] (g: the warpgroup).
fn exchange(threads: u32, barrier: LStmtKind) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [threads, 1, 1]);
    let n = threads as i64;
    let (a, b) = (kb.param("A", DType::F32, n), kb.param("B", DType::F32, n));
    let s = kb.shared("S", DType::F32, n);
    let mirror = add(mul(wg(), int(128)), bin(LBinOp::Sub, int(127), rem(tid(), int(128))));
    kb.finish(vec![at(1, store(s, tid(), load(a, tid()))), at(2, barrier), at(3, store(b, tid(), load(s, mirror)))])
}

fn run(k: &LKernel, n: usize) -> Result<Vec<f32>, tirx_sim::SimError> {
    let a: Vec<f32> = (0..n).map(|x| x as f32).collect();
    let mut p = vec![to_bytes(DType::F32, &a), vec![0; 4 * n]];
    simulate(k, &mut p, &SimOptions::default())?;
    Ok(from_bytes(DType::F32, &p[1]))
}

#[test]
fn a_warpgroup_barrier_orders_its_warps() {
    // Each warpgroup on its own barrier (1 + wg): race-free, values mirrored inside the warpgroup.
    let k = exchange(256, bar_sync(add(wg(), int(1)), 128));
    let out = run(&k, 256).unwrap();
    assert_eq!(out[0], 127.0);
    assert_eq!(out[128], 255.0);
    assert_eq!(out[255], 128.0);
}

#[test]
fn a_barrier_of_other_warps_does_not_order() {
    // Warps 0..3 synchronise on barrier 1, warps 4..7 never do: warp 4 reads what warp 7 wrote unordered.
    let body = |kb: &mut Kb| {
        let (a, b) = (kb.param("A", DType::F32, 256), kb.param("B", DType::F32, 256));
        let s = kb.shared("S", DType::F32, 256);
        let mirror = add(mul(wg(), int(128)), bin(LBinOp::Sub, int(127), rem(tid(), int(128))));
        vec![
            at(1, store(s, tid(), load(a, tid()))),
            at(2, if_(lt(tid(), int(128)), vec![at(2, bar_sync(int(1), 128))])),
            at(3, store(b, tid(), load(s, mirror))),
        ]
    };
    let mut kb = Kb::new([1, 1, 1], [256, 1, 1]);
    let stmts = body(&mut kb);
    let e = run(&kb.finish(stmts), 256).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::DataRace, "{e}");
    assert!(e.to_string().contains("`S`"), "{e}");
}

#[test]
fn two_warpgroups_on_one_id_collide() {
    let e = run(&exchange(256, bar_sync(int(1), 128)), 256).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
    let m = e.to_string();
    assert!(m.contains("named barrier 1 expects 128 threads, but 256 threads (warps 0-7)"), "{m}");
    assert!(e.help.as_deref().unwrap_or("").contains("barrier id of its own"), "{e:?}");
}

#[test]
fn a_group_that_never_fills_hangs() {
    assert!(run(&exchange(128, bar_sync(int(2), 128)), 128).is_ok(), "a full group passes");
    // Half the threads wait for 128 that never come.
    let mut kb = Kb::new([1, 1, 1], [128, 1, 1]);
    let b = kb.param("B", DType::F32, 128);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(64)), vec![at(2, bar_sync(int(3), 128))])),
        at(3, store(b, tid(), flt(1.0, DType::F32))),
    ]);
    let e = simulate(&k, &mut [vec![0; 512]], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
    let m = e.to_string();
    assert!(
        m.contains("named barrier 3 (128 threads)") && m.contains("reached by 64 threads (threads 0-63, warps 0-1)"),
        "{m}"
    );
    assert!(m.contains("threads 64-127 exited without reaching it"), "{m}");
}

#[test]
fn a_partial_warp_does_not_pass() {
    let mut kb = Kb::new([1, 1, 1], [64, 1, 1]);
    let b = kb.param("B", DType::F32, 64);
    let k = kb.finish(vec![
        at(1, if_(lt(tid(), int(48)), vec![at(2, bar_sync(int(1), 64))])),
        at(3, store(b, tid(), flt(1.0, DType::F32))),
    ]);
    let e = simulate(&k, &mut [vec![0; 256]], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
    assert!(e.to_string().contains("warps 1 arrive only in part"), "{e}");
}

#[test]
fn named_barriers_order_transitively() {
    // Warp 0 writes S[0]; warps 0+1 sync on barrier 1; warps 1+2 sync on barrier 2; warp 2 reads S[0].
    let mut kb = Kb::new([1, 1, 1], [96, 1, 1]);
    let b = kb.param("B", DType::F32, 96);
    let s = kb.shared("S", DType::F32, 1);
    let warp = || div(tid(), int(32));
    let k = kb.finish(vec![
        at(1, if_(bin(LBinOp::Eq, tid(), int(0)), vec![at(1, store(s, int(0), flt(7.0, DType::F32)))])),
        at(2, if_(lt(warp(), int(2)), vec![at(2, bar_sync(int(1), 64))])),
        at(3, if_(bin(LBinOp::Ge, warp(), int(1)), vec![at(3, bar_sync(int(2), 64))])),
        at(4, if_(bin(LBinOp::Eq, warp(), int(2)), vec![at(4, store(b, tid(), load(s, int(0))))])),
    ]);
    let mut p = vec![vec![0; 96 * 4]];
    simulate(&k, &mut p, &SimOptions::default()).unwrap();
    assert_eq!(from_bytes::<f32>(DType::F32, &p[0])[64], 7.0);
}

#[test]
fn an_id_out_of_range_at_run_time() {
    let kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let k = kb.finish(vec![at(1, bar_sync(add(tid(), int(16)), 32))]);
    let e = simulate(&k, &mut [], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
    assert!(e.to_string().contains("reaches named barrier 16, outside 1..16"), "{e}");
}

/// Producer warpgroup 0 writes `S` and arrives (`bar.arrive 9, 256`); consumer warpgroup 1
/// waits (`bar.sync 9, 256`) and reads it: ordered. `late` moves the producer's write after
/// its arrival (a race); `twice` arrives twice while the consumers never come (the second
/// arrival falls in the same phase).
fn hand_over(late: bool, twice: bool) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [256, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 128), kb.param("B", DType::F32, 128));
    let s = kb.shared("S", DType::F32, 128);
    let write = at(1, store(s, tid(), load(a, tid())));
    let mut producer = vec![at(2, bar_arrive(int(9), 256))];
    producer.insert(if late { 1 } else { 0 }, write);
    if twice {
        producer.push(at(4, bar_arrive(int(9), 256)));
    }
    let consumer = if twice {
        vec![]
    } else {
        vec![
            at(3, bar_sync(int(9), 256)),
            at(5, store(b, bin(LBinOp::Sub, tid(), int(128)), load(s, bin(LBinOp::Sub, int(255), tid())))),
        ]
    };
    kb.finish(vec![at(0, LStmtKind::If { cond: lt(tid(), int(128)), then_body: producer, else_body: consumer })])
}

#[test]
fn an_arrival_releases_what_came_before_it() {
    let out = run2(&hand_over(false, false)).unwrap();
    assert_eq!(out[0], 127.0);
    assert_eq!(out[127], 0.0);
    // A write after the arrival is not ordered before the waiters' reads.
    let e = run2(&hand_over(true, false)).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::DataRace, "{e}");
    // Arriving again before the barrier passed is a second phase's arrival: an error.
    let e = run2(&hand_over(false, true)).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
    assert!(e.to_string().contains("arrives twice at named barrier 9"), "{e}");
}

/// Arrivals and waiters of one id must name one count, and an arrival alone (nobody waits) passes.
#[test]
fn arrivals_count_towards_the_barrier() {
    let kb = Kb::new([1, 1, 1], [256, 1, 1]);
    let k = kb.finish(vec![at(1, bar_arrive(int(10), 256))]);
    assert!(run2(&k).is_ok(), "256 arrivals complete the barrier");
    let kb = Kb::new([1, 1, 1], [256, 1, 1]);
    let k = kb.finish(vec![at(
        1,
        LStmtKind::If {
            cond: lt(tid(), int(128)),
            then_body: vec![at(2, bar_arrive(int(10), 256))],
            else_body: vec![at(3, bar_sync(int(10), 128))],
        },
    )]);
    let e = run2(&k).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::BarrierDivergence, "{e}");
}

/// `setmaxnreg`: the budgets of all warpgroups must fit the CTA's register file
/// (384 threads: 3 × 168), `.inc` may not lower and `.dec` may not raise a budget.
#[test]
fn setmaxnreg_budgets_balance() {
    let kernel = |dec: u32, inc: u32| {
        let kb = Kb::new([1, 1, 1], [384, 1, 1]);
        kb.finish(vec![at(
            1,
            LStmtKind::If {
                cond: lt(tid(), int(128)),
                then_body: vec![at(2, setmaxnreg(false, dec))],
                else_body: vec![at(3, setmaxnreg(true, inc))],
            },
        )])
    };
    assert!(run2(&kernel(40, 232)).is_ok());
    let e = run2(&kernel(72, 232)).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.to_string().contains("536 registers per thread (72 + 232 + 232), more than the 504"), "{e}");
    let e = run2(&kernel(200, 232)).unwrap_err();
    assert!(e.to_string().contains("setmaxnreg.dec 200 by warpgroup 0, above its current 168"), "{e}");
    // Under a thread-dependent condition the warpgroup is not whole: a partial-warpgroup error.
    let kb = Kb::new([1, 1, 1], [128, 1, 1]);
    let k = kb.finish(vec![at(1, if_(lt(tid(), int(64)), vec![at(2, setmaxnreg(false, 40))]))]);
    assert_eq!(run2(&k).unwrap_err().kind, SimErrorKind::PartialWarp);
}

/// Runs a kernel whose parameters (if any) are `A` (0..) and `B` (zeros), 128 floats each.
fn run2(k: &LKernel) -> Result<Vec<f32>, tirx_sim::SimError> {
    let a: Vec<f32> = (0..128).map(|x| x as f32).collect();
    let mut p: Vec<Vec<u8>> = k
        .params
        .iter()
        .enumerate()
        .map(|(i, _)| if i == 0 { to_bytes(DType::F32, &a) } else { vec![0; 512] })
        .collect();
    simulate(k, &mut p, &SimOptions::default())?;
    Ok(p.get(1).map_or(vec![], |b| from_bytes(DType::F32, b)))
}

/// 96 threads: thread 32 (warp 1) writes `S[0]` and arrives at mbarrier `M` (count 1);
/// warp 0 waits for that phase (when `wait`) and then `bar.arrive 9, 64`s (or, with
/// `sync`, `bar.sync 9, 64`s); warp 2 `bar.sync 9, 64`s and thread 64 reads `S[0]` into B.
/// The chain write → mbarrier arrive → wait → named barrier → read orders the read.
fn mbarrier_then_named(wait: bool, sync: bool) -> LKernel {
    use tirx_ir::lir::{AsyncOp, Mbar};
    let mut kb = Kb::new([1, 1, 1], [96, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 128), kb.param("B", DType::F32, 128));
    let s = kb.shared("S", DType::F32, 1);
    let m = kb.shared("M", DType::I64, 1);
    let mbar = || Mbar { buf: m, index: int(0) };
    let is = |e: LExpr, k: i64| bin(LBinOp::Eq, e, int(k));
    let warp = || div(tid(), int(32));
    let mut warp0 = vec![];
    if wait {
        warp0.push(at(4, LStmtKind::Async(AsyncOp::MbarWait { bar: mbar(), parity: int(0) })));
    }
    warp0.push(at(5, if sync { bar_sync(int(9), 64) } else { bar_arrive(int(9), 64) }));
    kb.finish(vec![
        at(1, if_(is(tid(), 0), vec![at(1, LStmtKind::Async(AsyncOp::MbarInit { bar: mbar(), count: int(1) }))])),
        at(2, cta_sync()),
        at(
            3,
            if_(
                is(tid(), 32),
                vec![
                    at(3, store(s, int(0), load(a, int(7)))),
                    at(3, LStmtKind::Async(AsyncOp::MbarArrive { bar: mbar(), cta: None, cta_scope: false })),
                ],
            ),
        ),
        at(4, if_(is(warp(), 0), warp0)),
        at(6, if_(is(warp(), 2), vec![at(6, bar_sync(int(9), 64))])),
        at(7, if_(is(tid(), 64), vec![at(7, store(b, int(0), load(s, int(0))))])),
    ])
}

#[test]
fn an_arrival_releases_what_the_arriving_warp_acquired_through_an_mbarrier() {
    // bar.arrive and bar.sync on the producer side both pass on the mbarrier's release.
    for sync in [false, true] {
        let out = run2(&mbarrier_then_named(true, sync)).unwrap_or_else(|e| panic!("sync {sync}: {e}"));
        assert_eq!(out[0], 7.0, "sync {sync}");
        // Without warp 0's wait nothing orders thread 32's write before thread 64's read.
        let e = run2(&mbarrier_then_named(false, sync)).unwrap_err();
        assert_eq!(e.kind, SimErrorKind::DataRace, "sync {sync}: {e}");
        assert_eq!(e.span, span(7), "sync {sync}: {e}");
        assert!(e.to_string().contains("`S`"), "{e}");
    }
}
