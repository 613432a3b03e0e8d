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
