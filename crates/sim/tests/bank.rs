//! Shared-memory bank-conflict statistics per instruction.
mod common;
use common::*;
use tirx_ir::lir::{LStmtKind, MatrixDir, MatrixMove, MatrixOp};
use tirx_ir::DType;
use tirx_sim::{simulate, BankStat, SimOptions};

fn stats(body: impl FnOnce(&mut Kb) -> Vec<tirx_ir::lir::LStmt>, threads: u32) -> Vec<BankStat> {
    let mut kb = Kb::new([2, 1, 1], [threads, 1, 1]);
    let body = body(&mut kb);
    let k = kb.finish(body);
    let rep =
        simulate(&k, &mut [], &SimOptions { stats: true, ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
    rep.bank
}

fn find<'a>(s: &'a [BankStat], at_span: usize, kind: &str) -> &'a BankStat {
    s.iter()
        .find(|b| b.span == span(at_span) && b.kind == kind)
        .unwrap_or_else(|| panic!("no {kind} stat at {at_span}: {s:?}"))
}

#[test]
fn row_access_is_conflict_free_and_column_access_is_32_way() {
    let s = stats(
        |kb| {
            let s = kb.shared("S", DType::F32, 32 * 32);
            let c = kb.shared("C", DType::F32, 64 * 32);
            vec![
                at(1, store(s, tid(), flt(0.0, DType::F32))), // row: lane l → word l
                at(2, store(c, mul(tid(), int(32)), flt(0.0, DType::F32))), // column: every lane in bank 0
            ]
        },
        64,
    );
    let row = find(&s, 1, "store");
    assert_eq!((row.executions, row.worst_ways, row.avg_ways), (4, 1, 1.0), "2 CTAs × 2 warps");
    assert_eq!(row.buf, "S");
    let col = find(&s, 2, "store");
    assert_eq!((col.worst_ways, col.avg_ways), (32, 32.0));
}

#[test]
fn vector_and_matrix_phases() {
    let s = stats(
        |kb| {
            let s = kb.shared("S", DType::F16, 32 * 64);
            let r = kb.local("R", DType::F16, 8);
            let ri = (0..4).map(|i| int(2 * i)).collect();
            vec![
                // 128-bit per lane, consecutive: each quarter-warp covers all 32 banks once.
                at(1, vcopy(r, int(0), s, mul(tid(), int(8)), 8)),
                // 128-bit per lane with a 128-byte row stride: 8 lanes of a phase hit the same 4 banks.
                at(2, vcopy(r, int(0), s, mul(tid(), int(64)), 8)),
                // ldmatrix.x4 with rows 64 elements (128 B) apart: each matrix phase is 8-way.
                at(
                    3,
                    LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
                        dir: MatrixDir::Load,
                        num: 4,
                        trans: false,
                        smem: s,
                        smem_index: mul(tid(), int(64)),
                        regs: r,
                        reg_index: ri,
                    })),
                ),
            ]
        },
        32,
    );
    assert_eq!(find(&s, 1, "load").worst_ways, 1);
    assert!(!s.iter().any(|b| b.kind == "store"), "local stores are not shared accesses: {s:?}");
    assert_eq!(find(&s, 2, "load").worst_ways, 8);
    let ld = find(&s, 3, "ldmatrix");
    assert_eq!((ld.executions, ld.worst_ways, ld.avg_ways), (2, 8, 8.0));
}
