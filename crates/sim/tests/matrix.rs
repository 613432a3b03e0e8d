//! ldmatrix / stmatrix against an independent reference of the m8n8 fragment mapping.
//!
//! Reference (PTX ISA, "warp-level matrix load/store"): matrix i's row r is at the
//! address lane 8i+r supplies. Without `.trans`, element (r, c) lands in lane
//! 4r + c/2, register i, half c%2; with `.trans`, element (r, c) lands in lane
//! 4c + r/2, half r%2.
mod common;
use common::*;
use tirx_ir::lir::{LKernel, LStmtKind, MatrixDir, MatrixMove, MatrixOp};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimOptions};

/// Row start (element) of matrix i, row r: rows scattered over the buffer (a bijection, as 5 ⊥ 8·num).
fn row_addr(num: i64, i: i64, r: i64) -> i64 {
    ((i * 8 + r) * 5 % (8 * num)) * 8
}

/// Where element (r, c) of a matrix goes: (lane, half).
fn dest(r: usize, c: usize, trans: bool) -> (usize, usize) {
    if trans {
        (4 * c + r / 2, r % 2)
    } else {
        (4 * r + c / 2, c % 2)
    }
}

/// The row address lane `lane()` supplies; lanes that supply none point far out of bounds
/// (the hardware ignores them, so must the simulator).
fn smem_index(num: i64) -> tirx_ir::lir::LExpr {
    let addr = mul(rem(mul(lane(), int(5)), int(8 * num)), int(8));
    select(lt(lane(), int(8 * num)), addr, int(1 << 20))
}

fn matrix_kernel(num: u8, trans: bool, store_dir: bool) -> LKernel {
    let n = num as i64;
    let elems = 64 * n;
    let per = elems / 32; // elements per thread when filling / draining the shared tile
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (inp, out) = (kb.param("in", DType::I16, elems), kb.param("out", DType::I16, elems));
    let s = kb.shared("S", DType::I16, elems);
    let r = kb.local("R", DType::I16, 2 * n);
    let j = kb.var("j", DType::I32);
    let reg_index = (0..n).map(|i| int(2 * i)).collect();
    let mut body = vec![];
    if store_dir {
        body.push(at(0, for_(j, 2 * n, vec![at(1, store(r, v(j), load(inp, add(mul(tid(), int(2 * n)), v(j)))))])));
        body.push(at(
            2,
            LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
                dir: MatrixDir::Store,
                num,
                trans,
                smem: s,
                smem_index: smem_index(n),
                regs: r,
                reg_index,
            })),
        ));
        body.push(at(3, cta_sync()));
        body.push(at(
            4,
            for_(
                j,
                per,
                vec![at(5, store(out, add(mul(tid(), int(per)), v(j)), load(s, add(mul(tid(), int(per)), v(j)))))],
            ),
        ));
    } else {
        body.push(at(
            0,
            for_(
                j,
                per,
                vec![at(1, store(s, add(mul(tid(), int(per)), v(j)), load(inp, add(mul(tid(), int(per)), v(j)))))],
            ),
        ));
        body.push(at(2, cta_sync()));
        body.push(at(
            3,
            LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
                dir: MatrixDir::Load,
                num,
                trans,
                smem: s,
                smem_index: smem_index(n),
                regs: r,
                reg_index,
            })),
        ));
        body.push(at(4, for_(j, 2 * n, vec![at(5, store(out, add(mul(tid(), int(2 * n)), v(j)), load(r, v(j))))])));
    }
    kb.finish(body)
}

fn run(k: &LKernel, input: Vec<i64>) -> Vec<i64> {
    let n = input.len();
    let mut p = vec![to_bytes(DType::I16, &input), vec![0; 2 * n]];
    let rep = simulate(k, &mut p, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    from_bytes(DType::I16, &p[1])
}

#[test]
fn ldmatrix_all_widths_and_trans() {
    for num in [1u8, 2, 4] {
        for trans in [false, true] {
            let n = num as i64;
            let input: Vec<i64> = (0..64 * n).map(|x| x * 7 % 1000 + 1).collect();
            let got = run(&matrix_kernel(num, trans, false), input.clone());
            let mut want = vec![0i64; 64 * n as usize];
            for i in 0..n {
                for r in 0..8 {
                    for c in 0..8 {
                        let (lane, half) = dest(r, c, trans);
                        want[lane * 2 * n as usize + 2 * i as usize + half] =
                            input[(row_addr(n, i, r as i64) + c as i64) as usize];
                    }
                }
            }
            assert_eq!(got, want, "ldmatrix.x{num} trans={trans}");
        }
    }
}

#[test]
fn stmatrix_all_widths_and_trans() {
    for num in [1u8, 2, 4] {
        for trans in [false, true] {
            let n = num as i64;
            let input: Vec<i64> = (0..64 * n).map(|x| x * 3 + 11).collect();
            let got = run(&matrix_kernel(num, trans, true), input.clone());
            let mut want = vec![0i64; 64 * n as usize];
            for i in 0..n {
                for r in 0..8 {
                    for c in 0..8 {
                        let (lane, half) = dest(r, c, trans);
                        want[(row_addr(n, i, r as i64) + c as i64) as usize] =
                            input[lane * 2 * n as usize + 2 * i as usize + half];
                    }
                }
            }
            assert_eq!(got, want, "stmatrix.x{num} trans={trans}");
        }
    }
}

#[test]
fn ldmatrix_row_address_must_be_16_byte_aligned() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let s = kb.shared("S", DType::F16, 128);
    let r = kb.local("R", DType::F16, 2);
    let k = kb.finish(vec![at(
        7,
        LStmtKind::Matrix(MatrixOp::Move(MatrixMove {
            dir: MatrixDir::Load,
            num: 1,
            trans: false,
            smem: s,
            smem_index: add(mul(rem(lane(), int(8)), int(8)), int(4)),
            regs: r,
            reg_index: vec![int(0)],
        })),
    )]);
    let e = simulate(&k, &mut [], &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, tirx_sim::SimErrorKind::Misaligned, "{e}");
    assert_eq!(e.span, span(7));
    assert!(
        e.to_string().contains("`S`") && e.to_string().contains("element 4") && e.to_string().contains("16-byte"),
        "{e}"
    );
}
