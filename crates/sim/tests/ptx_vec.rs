//! PTX vector loads and stores (`PtxVec`, docs/lir.md §2.9) in the simulator: the bytes of
//! every width land where a byte-by-byte reference puts them, the cache hints change
//! nothing, and the misuse the hardware leaves undefined is caught (misaligned, out of
//! bounds, a `.nc` read racing with a write, malformed operands).

mod common;

use common::*;
use tirx_ir::lir::{LBufId, LExpr, LStmtKind, LoadHints, MemOp, PtxDir, PtxVec};
use tirx_ir::op::Evict;
use tirx_ir::DType;
use tirx_sim::{simulate, SimErrorKind, SimOptions};

fn ld(reg: LBufId, reg_index: LExpr, mem: LBufId, mem_index: LExpr, bytes: u32, hints: LoadHints) -> LStmtKind {
    LStmtKind::Memory(MemOp::PtxVec(PtxVec { dir: PtxDir::Ld(hints), mem, mem_index, reg, reg_index, bytes }))
}

fn st(mem: LBufId, mem_index: LExpr, reg: LBufId, reg_index: LExpr, bytes: u32) -> LStmtKind {
    LStmtKind::Memory(MemOp::PtxVec(PtxVec { dir: PtxDir::St, mem, mem_index, reg, reg_index, bytes }))
}

/// 32 threads, `bytes` per thread of `dt`: A (global) → registers → S (shared) → registers (a
/// neighbour's chunk, after the barrier) → B, so B = A moved by other threads; 32-byte accesses
/// (global only) go A → registers → B.
fn rotate(dt: DType, bytes: u32, hints: LoadHints) -> (tirx_ir::lir::LKernel, i64) {
    let n = i64::from(bytes / dt.bytes());
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, b) = (kb.param("A", dt, 32 * n), kb.param("B", dt, 32 * n));
    let s = kb.shared("S", dt, 32 * n);
    let r = kb.local("R", dt, 2 * n);
    let next = mul(rem(add(tid(), int(1)), int(32)), int(n));
    if bytes == 32 {
        let k = kb.finish(vec![
            at(1, ld(r, int(n), a, mul(tid(), int(n)), bytes, hints)),
            at(2, st(b, mul(tid(), int(n)), r, int(n), bytes)),
        ]);
        return (k, n);
    }
    let k = kb.finish(vec![
        at(1, ld(r, int(n), a, mul(tid(), int(n)), bytes, hints)),
        at(2, st(s, mul(tid(), int(n)), r, int(n), bytes)),
        at(3, cta_sync()),
        at(4, ld(r, int(0), s, next.clone(), bytes, LoadHints::default())),
        at(5, st(b, next, r, int(0), bytes)),
    ]);
    (k, n)
}

#[test]
fn every_width_moves_its_bytes_and_hints_change_nothing() {
    let all = LoadHints { nc: true, l1: Some(Evict::NoAllocate), l2: None, prefetch: Some(256) };
    let all_256 = LoadHints { l2: Some(Evict::First), ..all };
    for (dt, bytes) in [
        (DType::U16, 2),
        (DType::U8, 2),
        (DType::F32, 4),
        (DType::F16, 4),
        (DType::F32, 8),
        (DType::F64, 8),
        (DType::I8, 16),
        (DType::BF16, 16),
        (DType::I32, 32),
    ] {
        for hints in [LoadHints::default(), if bytes == 32 { all_256 } else { all }] {
            let (k, n) = rotate(dt, bytes, hints);
            let len = (32 * n) as usize * dt.bytes() as usize;
            let a: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
            let mut params = vec![a.clone(), vec![0; len]];
            let report =
                simulate(&k, &mut params, &SimOptions::default()).unwrap_or_else(|e| panic!("{dt} {bytes}: {e}"));
            assert!(report.warnings.is_empty(), "{:?}", report.warnings);
            // The byte-by-byte reference: B is A, each thread's chunk moved by the rotation.
            let chunk = bytes as usize;
            for t in 0..32 {
                let from = ((t + 1) % 32) * chunk;
                assert_eq!(params[1][from..from + chunk], a[from..from + chunk], "{dt} {bytes} B, thread {t}");
            }
        }
    }
}

#[test]
fn a_misaligned_or_outside_access_is_caught() {
    // A run-time index that is not a multiple of the vector: thread 1 reads A[1..5].
    let mut kb = Kb::new([1, 1, 1], [2, 1, 1]);
    let a = kb.param("A", DType::F32, 16);
    let r = kb.local("R", DType::F32, 4);
    let k = kb.finish(vec![at(7, ld(r, int(0), a, tid(), 16, LoadHints::default()))]);
    let e = simulate(&k, &mut [vec![0; 64]], &SimOptions::default()).unwrap_err();
    assert_eq!((e.kind, e.span), (SimErrorKind::Misaligned, span(7)), "{e}");
    // Past the end of the shared array.
    let mut kb = Kb::new([1, 1, 1], [4, 1, 1]);
    let s = kb.shared("S", DType::F32, 8);
    let r = kb.local("R", DType::F32, 4);
    let k = kb.finish(vec![at(8, st(s, mul(tid(), int(4)), r, int(0), 16))]);
    let e = simulate(&k, &mut [], &SimOptions::default()).unwrap_err();
    assert_eq!((e.kind, e.span), (SimErrorKind::OutOfBounds, span(8)), "{e}");
}

#[test]
fn a_non_coherent_load_of_memory_written_in_the_launch_is_a_race() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::F32, 128);
    let r = kb.local("R", DType::F32, 4);
    let nc = LoadHints { nc: true, ..Default::default() };
    let k = kb.finish(vec![
        at(1, st(a, mul(tid(), int(4)), r, int(0), 16)),
        at(2, ld(r, int(0), a, mul(rem(add(tid(), int(1)), int(32)), int(4)), 16, nc)),
    ]);
    let e = simulate(&k, &mut [vec![0; 512]], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::DataRace, "{e}");
}

#[test]
fn malformed_accesses_are_invalid_kernels() {
    let bad = |body: LStmtKind, mem_space_shared: bool| {
        let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
        let a = if mem_space_shared { kb.shared("S", DType::F32, 16) } else { kb.param("A", DType::F32, 16) };
        let r = kb.local("R", DType::F32, 8);
        let _ = (a, r);
        let k = kb.finish(vec![at(1, body)]);
        let mut params = if mem_space_shared { vec![] } else { vec![vec![0u8; 64]] };
        let e = simulate(&k, &mut params, &SimOptions::default()).unwrap_err();
        assert_eq!(e.kind, SimErrorKind::InvalidKernel, "{e}");
        e.to_string()
    };
    let (m, r) = (LBufId(0), LBufId(1));
    let l2 = LoadHints { l2: Some(Evict::First), ..Default::default() };
    let nc = LoadHints { nc: true, ..Default::default() };
    assert!(bad(ld(r, int(0), m, int(0), 16, l2), false).contains("256-bit loads"));
    assert!(bad(ld(r, int(0), m, int(0), 16, nc), true).contains("not global memory"));
    assert!(bad(st(m, int(0), r, int(0), 32), true).contains("only global memory"));
    assert!(bad(ld(r, int(0), m, int(2), 16, LoadHints::default()), false).contains("not a multiple of 4"));
    assert!(bad(ld(r, int(0), m, int(0), 2, LoadHints::default()), false).contains("whole number"));
    assert!(bad(ld(r, int(0), m, int(0), 12, LoadHints::default()), false).contains("need 2, 4, 8, 16 or 32"));
    assert!(bad(ld(m, int(0), r, int(0), 16, LoadHints::default()), false).contains("one side must be local"));
}
