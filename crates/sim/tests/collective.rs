//! Warp shuffles against an independent reference of PTX `shfl.sync` (PTX ISA,
//! "shfl.sync"): lanes form aligned segments of `width`; bfly reads `lane ^ b`,
//! down `lane + b`, up `lane - b` (their own value when that leaves the segment
//! upwards / downwards), idx lane `b mod width` of the segment. Plus the misuse a
//! GPU would hang or return garbage on.
mod common;
use common::*;
use tirx_ir::lir::{CollectiveOp, LExpr, LKernel, LStmt, LStmtKind, LVarId, ShuffleMode};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimError, SimErrorKind, SimOptions};

const FULL: u32 = 0xffff_ffff;

fn shfl(var: LVarId, value: LExpr, mode: ShuffleMode, lane_or_delta: LExpr, width: u32, mask: u32) -> LStmtKind {
    LStmtKind::Collective(CollectiveOp::Shuffle { var, value, mode, lane_or_delta, width, mask })
}

/// Runs a kernel with one input `A` and one output `B` of `n` elements of `t`.
fn run(k: &LKernel, t: DType, input: &[f64]) -> Result<Vec<f64>, SimError> {
    let mut p = vec![to_bytes(t, input), vec![0; input.len() * t.bytes() as usize]];
    let rep = simulate(k, &mut p, &SimOptions::default())?;
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    Ok(from_bytes::<f64>(t, &p[1]))
}

/// `B[tid] = butterfly sum of A over width-`width` segments` (deltas width/2 .. 1).
fn butterfly_sum(t: DType, threads: u32, width: u32) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [threads, 1, 1]);
    let (a, b) = (kb.param("A", t, threads as i64), kb.param("B", t, threads as i64));
    let mut x = kb.var("x", t);
    let mut body = vec![at(0, let_(x, load(a, tid())))];
    let mut delta = width / 2;
    while delta > 0 {
        let (s, next) = (kb.var("s", t), kb.var("x", t));
        body.push(at(1, shfl(s, v(x), ShuffleMode::Bfly, int(delta as i64), width, FULL)));
        body.push(at(2, let_(next, add(v(x), v(s)))));
        x = next;
        delta /= 2;
    }
    body.push(at(3, store(b, tid(), v(x))));
    kb.finish(body)
}

#[test]
fn xor_butterfly_sum_over_a_warp_in_every_type() {
    for t in [DType::F32, DType::F64, DType::I32, DType::U32, DType::I64, DType::F16, DType::BF16] {
        // Small integers: every partial sum is exact even in bfloat16 (sums of 32 values ≤ 3 are ≤ 96).
        let input: Vec<f64> = (0..64).map(|i| ((i * 7 + 3) % 4) as f64).collect();
        let got = run(&butterfly_sum(t, 64, 32), t, &input).unwrap_or_else(|e| panic!("{t}: {e}"));
        for (i, g) in got.iter().enumerate() {
            let w = i / 32 * 32;
            let want: f64 = input[w..w + 32].iter().sum();
            assert_eq!(*g, want, "{t}: lane {i}");
        }
    }
}

#[test]
fn butterfly_sum_in_width_8_segments() {
    let input: Vec<f64> = (0..32).map(|i| (i * i) as f64).collect();
    let got = run(&butterfly_sum(DType::I32, 32, 8), DType::I32, &input).unwrap();
    for (i, g) in got.iter().enumerate() {
        let seg = i / 8 * 8;
        assert_eq!(*g, input[seg..seg + 8].iter().sum::<f64>(), "lane {i}");
    }
}

/// `B[tid] = shfl(A[tid], operand)` for one mode and width.
fn one_shuffle(t: DType, mode: ShuffleMode, operand: LExpr, width: u32) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, b) = (kb.param("A", t, 32), kb.param("B", t, 32));
    let y = kb.var("y", t);
    kb.finish(vec![at(1, shfl(y, load(a, tid()), mode, operand, width, FULL)), at(2, store(b, tid(), v(y)))])
}

/// The reference: the lane `l` reads, per PTX.
fn reference(mode: ShuffleMode, width: usize, l: usize, b: usize) -> usize {
    let seg = l / width * width;
    match mode {
        ShuffleMode::Bfly if l ^ b < seg + width => l ^ b,
        ShuffleMode::Down if l + b < seg + width => l + b,
        ShuffleMode::Up if l >= seg + b => l - b,
        ShuffleMode::Idx => seg + b % width,
        _ => l,
    }
}

#[test]
fn down_up_idx_and_bfly_against_the_reference() {
    let input: Vec<f64> = (0..32).map(|i| (100 + i) as f64).collect();
    for mode in [ShuffleMode::Bfly, ShuffleMode::Down, ShuffleMode::Up, ShuffleMode::Idx] {
        for width in [2u32, 4, 8, 16, 32] {
            for b in [0usize, 1, 3, 7, 12, 31] {
                let got = run(&one_shuffle(DType::I32, mode, int(b as i64), width), DType::I32, &input).unwrap();
                for (l, g) in got.iter().enumerate() {
                    let want = input[reference(mode, width as usize, l, b)];
                    assert_eq!(*g, want, "{mode:?} width {width} operand {b} lane {l}");
                }
            }
        }
    }
}

#[test]
fn per_lane_source_lanes() {
    // shfl.idx with a per-lane source: lane l reads lane 31 - l (a reversal).
    let k = one_shuffle(DType::F32, ShuffleMode::Idx, bin(tirx_ir::lir::LBinOp::Sub, int(31), tid()), 32);
    let input: Vec<f64> = (0..32).map(|i| i as f64 * 0.5).collect();
    let got = run(&k, DType::F32, &input).unwrap();
    assert_eq!(got, input.iter().rev().copied().collect::<Vec<_>>());
}

#[test]
fn bfloat16_values_move_bit_exactly() {
    let input: Vec<f64> = (0..32).map(|i| half::bf16::from_f32(i as f32 * 0.37 - 5.0).to_f64()).collect();
    let got = run(&one_shuffle(DType::BF16, ShuffleMode::Bfly, int(5), 32), DType::BF16, &input).unwrap();
    for (l, g) in got.iter().enumerate() {
        assert_eq!(*g, input[l ^ 5], "lane {l}");
    }
}

fn expect_err(k: &LKernel, n: usize, kind: SimErrorKind, at_span: usize, words: &[&str]) -> SimError {
    let mut p = vec![vec![0; 4 * n], vec![0; 4 * n]];
    let e = simulate(k, &mut p, &SimOptions::default()).expect_err("the misuse must be caught");
    assert_eq!(e.kind, kind, "{e}");
    assert_eq!(e.span, span(at_span), "{e}");
    for w in words {
        assert!(e.to_string().contains(w), "missing `{w}` in: {e}");
    }
    e
}

/// `if cond { y = shfl(A[tid]) ; B[tid] = y }` with the given mask.
fn guarded(cond: LExpr, mask: u32, mode: ShuffleMode, operand: i64, width: u32, threads: u32) -> LKernel {
    let mut kb = Kb::new([1, 1, 1], [threads, 1, 1]);
    let (a, b) = (kb.param("A", DType::I32, threads as i64), kb.param("B", DType::I32, threads as i64));
    let y = kb.var("y", DType::I32);
    let body: Vec<LStmt> =
        vec![at(2, shfl(y, load(a, tid()), mode, int(operand), width, mask)), at(3, store(b, tid(), v(y)))];
    kb.finish(vec![at(1, if_(cond, body))])
}

#[test]
fn a_mask_lane_that_never_arrives_is_named() {
    // Lanes 16-31 skip the shuffle and exit; lanes 0-15 wait for them forever on a GPU.
    let k = guarded(lt(lane(), int(16)), FULL, ShuffleMode::Bfly, 1, 32, 32);
    let e = expect_err(
        &k,
        32,
        SimErrorKind::PartialWarp,
        2,
        &["shfl.sync.bfly", "every lane of its mask", "lanes 0-15 wait here", "lanes 16-31 exited"],
    );
    assert!(e.help.unwrap().contains("member mask"));
    // The same shuffle with a mask of exactly the lanes that run it is fine.
    let ok = guarded(lt(lane(), int(16)), 0xffff, ShuffleMode::Bfly, 1, 16, 32);
    let got = run(&ok, DType::I32, &(0..32).map(f64::from).collect::<Vec<_>>()).unwrap();
    assert_eq!(&got[..4], &[1.0, 0.0, 3.0, 2.0]);
    assert_eq!(&got[16..], &[0.0; 16]);
}

#[test]
fn lanes_at_different_shuffles_are_divergent() {
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let a = kb.param("A", DType::I32, 32);
    kb.param("B", DType::I32, 32);
    let (y, z) = (kb.var("y", DType::I32), kb.var("z", DType::I32));
    let k = kb.finish(vec![at(
        1,
        LStmtKind::If {
            cond: lt(lane(), int(8)),
            then_body: vec![at(2, shfl(y, load(a, tid()), ShuffleMode::Bfly, int(1), 32, FULL))],
            else_body: vec![at(3, shfl(z, load(a, tid()), ShuffleMode::Bfly, int(1), 32, FULL))],
        },
    )]);
    let e = expect_err(&k, 32, SimErrorKind::PartialWarp, 2, &["lanes 0-7 wait here", "lanes 8-31 wait at"]);
    assert_eq!(e.labels[0].0, span(3), "the other shuffle is pointed at");
}

#[test]
fn a_lane_outside_its_mask_executes_it() {
    let k = guarded(lt(lane(), int(20)), 0xffff, ShuffleMode::Bfly, 1, 16, 32);
    expect_err(&k, 32, SimErrorKind::PartialWarp, 2, &["thread 16 (warp 0, lane 16)", "does not include its lane"]);
}

#[test]
fn a_source_lane_outside_the_mask() {
    // Lanes 0-15 run with mask 0xffff, but a butterfly by 16 reads lanes 16-31.
    let k = guarded(lt(lane(), int(16)), 0xffff, ShuffleMode::Bfly, 16, 32, 32);
    expect_err(&k, 32, SimErrorKind::PartialWarp, 2, &["lane 0 of warp 0", "reads lane 16", "not in the mask"]);
}

#[test]
fn a_mask_naming_lanes_the_cta_lacks() {
    let k = guarded(LExpr::Bool(true), FULL, ShuffleMode::Bfly, 1, 32, 16);
    expect_err(&k, 16, SimErrorKind::PartialWarp, 2, &["only 16 lanes", "lanes 16-31 of the mask do not exist"]);
}
