//! The epoch-stamp race detector against a brute-force happens-before model.
//!
//! Random programs: 2 CTAs × 64 threads (2 warps); a few threads access a small
//! shared and a small global buffer in segments separated by CTA or warp
//! barriers that every thread executes. The model checks every pair of
//! accesses: same element, one a write, different threads, and not ordered —
//! ordered means same thread, or a CTA barrier between their segments, or the
//! same warp with any barrier between; two different CTAs are never ordered
//! (global memory only; shared memory is per CTA).
mod common;
use common::*;
use proptest::prelude::*;
use tirx_ir::hir::BarrierKind;
use tirx_ir::lir::{LBinOp, LStmtKind, SyncOp};
use tirx_ir::DType;
use tirx_sim::{simulate, SimErrorKind, SimOptions};

#[derive(Clone, Debug)]
struct Access {
    cta: u32,
    thread: u32,
    seg: usize,
    write: bool,
    global: bool,
    idx: i64,
}

const THREADS: [u32; 3] = [0, 1, 33];

fn access(segs: usize) -> impl Strategy<Value = Access> {
    (0..2u32, prop::sample::select(THREADS.to_vec()), 0..segs, any::<bool>(), any::<bool>(), 0..2i64)
        .prop_map(|(cta, thread, seg, write, global, idx)| Access { cta, thread, seg, write, global, idx })
}

fn program() -> impl Strategy<Value = (Vec<bool>, Vec<Access>)> {
    (1..5usize).prop_flat_map(|segs| {
        (prop::collection::vec(any::<bool>(), segs - 1), prop::collection::vec(access(segs), 0..12))
    })
}

fn ordered(a: &Access, b: &Access, cta_barrier: &[bool]) -> bool {
    if a.thread == b.thread {
        return true;
    }
    let (lo, hi) = (a.seg.min(b.seg), a.seg.max(b.seg));
    if lo == hi {
        return false;
    }
    cta_barrier[lo..hi].iter().any(|c| *c) || a.thread / 32 == b.thread / 32
}

fn model_has_race(cta_barrier: &[bool], acc: &[Access]) -> bool {
    acc.iter().enumerate().any(|(i, a)| {
        acc[i + 1..].iter().any(|b| {
            a.global == b.global
                && a.idx == b.idx
                && (a.write || b.write)
                && if a.cta != b.cta { a.global } else { !ordered(a, b, cta_barrier) }
        })
    })
}

fn simulate_program(cta_barrier: &[bool], acc: &[Access]) -> Result<(), tirx_sim::SimError> {
    let mut kb = Kb::new([2, 1, 1], [64, 1, 1]);
    let g = kb.param("G", DType::I32, 4);
    let s = kb.shared("S", DType::I32, 4);
    let r = kb.local("R", DType::I32, 1);
    let mut body = vec![];
    for seg in 0..=cta_barrier.len() {
        if seg > 0 {
            let kind = if cta_barrier[seg - 1] { BarrierKind::Cta } else { BarrierKind::Warp };
            body.push(at(100 + seg, LStmtKind::Sync(SyncOp::Barrier(kind))));
        }
        for (i, a) in acc.iter().enumerate().filter(|(_, a)| a.seg == seg) {
            let buf = if a.global { g } else { s };
            let op =
                if a.write { store(buf, int(a.idx), int(i as i64)) } else { store(r, int(0), load(buf, int(a.idx))) };
            let me = bin(
                LBinOp::And,
                bin(LBinOp::Eq, bid(), int(a.cta as i64)),
                bin(LBinOp::Eq, tid(), int(a.thread as i64)),
            );
            body.push(at(i, if_(me, vec![at(i, op)])));
        }
    }
    let k = kb.finish(body);
    simulate(&k, &mut [vec![0; 16]], &SimOptions::default()).map(|_| ())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn detector_matches_the_happens_before_model((cta_barrier, acc) in program()) {
        let want = model_has_race(&cta_barrier, &acc);
        match simulate_program(&cta_barrier, &acc) {
            Ok(()) => prop_assert!(!want, "missed a race"),
            Err(e) => {
                prop_assert_eq!(e.kind, SimErrorKind::DataRace, "{}", e);
                prop_assert!(want, "false race: {}", e);
            }
        }
    }
}
