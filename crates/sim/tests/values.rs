//! Values computed by simulated kernels match CUDA's scalar semantics.
mod common;
use common::*;
use half::{bf16, f16};
use tirx_ir::hir::{MathFn, UnOp};
use tirx_ir::lir::{LBinOp, LKernel, LStmtKind, PackedOp, PairOp, PairSrc};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimOptions};

fn run(k: &LKernel, params: &mut [Vec<u8>]) {
    let rep = simulate(k, params, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
}

/// One thread computes `out[i] = op(a[i], b[i])` for every input pair, in dtype `t`.
fn binop(t: DType, op: LBinOp, a: &[f64], b: &[f64]) -> Vec<f64> {
    let n = a.len() as i64;
    let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
    let (pa, pb, out) = (kb.param("a", t, n), kb.param("b", t, n), kb.param("out", t, n));
    let i = kb.var("i", DType::I32);
    let k = kb.finish(vec![at(0, for_(i, n, vec![at(1, store(out, v(i), bin(op, load(pa, v(i)), load(pb, v(i)))))]))]);
    let mut p = vec![to_bytes(t, a), to_bytes(t, b), vec![0; (n as usize) * t.bytes() as usize]];
    run(&k, &mut p);
    from_bytes(t, &p[2])
}

#[test]
fn f32_math_is_done_in_f32() {
    // (1e8 + 1) - 1e8 is 0 in f32 (and 1 in f64).
    let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
    let out = kb.param("out", DType::F32, 2);
    let big = flt(1e8, DType::F32);
    let sum = add(big.clone(), flt(1.0, DType::F32));
    let k = kb.finish(vec![
        at(0, store(out, int(0), bin(LBinOp::Sub, sum, big))),
        at(1, store(out, int(1), div(flt(1.0, DType::F32), flt(3.0, DType::F32)))),
    ]);
    let mut p = vec![vec![0; 8]];
    run(&k, &mut p);
    assert_eq!(from_bytes::<f32>(DType::F32, &p[0]), vec![0.0, 1.0f32 / 3.0]);
}

#[test]
fn f16_and_bf16_round_on_every_op() {
    let a = [1.0, 0.1, 1000.0, 3.0];
    let b = [0.0009765625 / 2.0, 0.2, 70.0, 7.0];
    let got = binop(DType::F16, LBinOp::Mul, &a, &b);
    for i in 0..4 {
        let (x, y) = (f16::from_f64(a[i]).to_f32(), f16::from_f64(b[i]).to_f32());
        assert_eq!(got[i], f16::from_f32(x * y).to_f64(), "f16 {x} * {y}");
    }
    let got = binop(DType::F16, LBinOp::Add, &[2048.0], &[1.0]);
    assert_eq!(got, vec![2048.0], "2049 rounds to even in f16");
    let got = binop(DType::BF16, LBinOp::Add, &[256.0, 1.0], &[1.0, 1.0 / 256.0]);
    assert_eq!(got, vec![256.0, 1.0], "bf16 keeps 8 significant bits");
    assert_eq!(bf16::from_f64(got[0]).to_f64(), 256.0);
}

#[test]
fn integers_wrap_and_divide_like_c() {
    assert_eq!(binop(DType::I8, LBinOp::Add, &[100.0], &[100.0]), vec![-56.0]);
    assert_eq!(binop(DType::U8, LBinOp::Sub, &[0.0], &[1.0]), vec![255.0]);
    assert_eq!(binop(DType::I32, LBinOp::Mul, &[65536.0], &[65536.0]), vec![0.0]);
    assert_eq!(binop(DType::U16, LBinOp::Mul, &[300.0], &[300.0]), vec![(90000 % 65536) as f64]);
    assert_eq!(binop(DType::I32, LBinOp::Div, &[-7.0, 7.0], &[2.0, -2.0]), vec![-3.0, -3.0]);
    assert_eq!(binop(DType::I32, LBinOp::Rem, &[-7.0, 7.0], &[2.0, -2.0]), vec![-1.0, 1.0]);
    assert_eq!(binop(DType::I32, LBinOp::FloorDiv, &[-7.0, 7.0], &[2.0, -2.0]), vec![-4.0, -4.0]);
    assert_eq!(binop(DType::I32, LBinOp::FloorMod, &[-7.0, 7.0], &[2.0, -2.0]), vec![1.0, -1.0]);
    assert_eq!(binop(DType::I64, LBinOp::Shl, &[1.0, 1.0], &[40.0, 64.0]), vec![(1i64 << 40) as f64, 0.0]);
    assert_eq!(binop(DType::I32, LBinOp::Shr, &[-16.0], &[2.0]), vec![-4.0]);
    assert_eq!(binop(DType::U32, LBinOp::Shr, &[4294967295.0], &[28.0]), vec![15.0]);
}

#[test]
fn casts_math_select_and_short_circuit() {
    let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
    let out = kb.param("out", DType::F32, 6);
    let oi = kb.param("oi", DType::I32, 3);
    let small = kb.param("small", DType::I32, 1);
    let k = kb.finish(vec![
        at(0, store(out, int(0), math(MathFn::Sqrt, flt(2.0, DType::F32)))),
        at(1, store(out, int(1), cast(DType::F32, cast(DType::F16, flt(0.1, DType::F32))))),
        at(2, store(out, int(2), math(MathFn::Exp, flt(1.0, DType::F32)))),
        at(3, store(out, int(3), un(UnOp::Neg, flt(2.5, DType::F32)))),
        // Only the taken arm is evaluated: the other would read out of bounds.
        at(
            4,
            store(out, int(4), select(lt(int(0), int(1)), flt(7.0, DType::F32), cast(DType::F32, load(small, int(5))))),
        ),
        at(5, store(out, int(5), cast(DType::F32, cast(DType::F8E4M3, flt(500.0, DType::F32))))),
        at(6, store(oi, int(0), cast(DType::I32, flt(-2.7, DType::F32)))),
        at(
            7,
            store(oi, int(1), cast(DType::I32, bin(LBinOp::And, lt(int(1), int(0)), lt(load(small, int(9)), int(0))))),
        ),
        at(8, store(oi, int(2), cast(DType::I32, cast(DType::I8, int(300))))),
    ]);
    let mut p = vec![vec![0; 24], vec![0; 12], vec![0; 4]];
    run(&k, &mut p);
    let f = from_bytes::<f32>(DType::F32, &p[0]);
    assert_eq!(f[0], 2f32.sqrt());
    assert_eq!(f[1], f16::from_f32(0.1).to_f32());
    assert_eq!(f[2], 1f32.exp());
    assert_eq!(f[3], -2.5);
    assert_eq!(f[4], 7.0);
    assert_eq!(f[5], 448.0, "fp8 e4m3 saturates");
    assert_eq!(from_bytes::<i64>(DType::I32, &p[1]), vec![-2, 0, 44]);
}

/// Every thread copies its `lanes`-wide chunk global → shared → global.
fn vec_roundtrip(t: DType, lanes: u32) {
    let n = 32 * lanes as i64;
    let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
    let (a, b) = (kb.param("A", t, n), kb.param("B", t, n));
    let s = kb.shared("S", t, n);
    let l = int(lanes as i64);
    let k = kb.finish(vec![
        at(0, vcopy(s, mul(tid(), l.clone()), a, mul(tid(), l.clone()), lanes)),
        at(1, cta_sync()),
        // Read the neighbour's chunk, so the barrier matters.
        at(2, vcopy(b, mul(tid(), l.clone()), s, mul(rem(add(tid(), int(1)), int(32)), l), lanes)),
    ]);
    let src: Vec<i64> = (0..n).map(|i| i % 100).collect();
    let mut p = vec![to_bytes(t, &src), vec![0; (n as usize) * t.bytes() as usize]];
    run(&k, &mut p);
    let got: Vec<i64> = from_bytes(t, &p[1]);
    let want: Vec<i64> = (0..n).map(|i| src[((i + lanes as i64) % n) as usize]).collect();
    assert_eq!(got, want, "{t} × {lanes}");
}

#[test]
fn vec_copies_of_every_width() {
    vec_roundtrip(DType::U8, 1);
    vec_roundtrip(DType::F16, 1);
    vec_roundtrip(DType::F16, 2);
    vec_roundtrip(DType::F16, 4);
    vec_roundtrip(DType::F16, 8);
    vec_roundtrip(DType::F32, 4);
    vec_roundtrip(DType::I8, 16);
    vec_roundtrip(DType::F64, 2);
}

#[test]
fn packed_pairs_and_pair_casts() {
    let mut kb = Kb::new([1, 1, 1], [1, 1, 1]);
    let a = kb.param("a", DType::F16, 2);
    let b = kb.param("b", DType::F16, 2);
    let out = kb.param("out", DType::F16, 8);
    let f = kb.param("f", DType::F32, 2);
    let k = kb.finish(vec![
        at(
            0,
            LStmtKind::Pair(PairOp::Packed2 {
                op: PackedOp::Add,
                dtype: DType::F16,
                dst: out,
                dst_index: int(0),
                srcs: vec![PairSrc::Buf(a, int(0)), PairSrc::Buf(b, int(0))],
            }),
        ),
        at(
            1,
            LStmtKind::Pair(PairOp::Packed2 {
                op: PackedOp::Fma,
                dtype: DType::F16,
                dst: out,
                dst_index: int(2),
                srcs: vec![PairSrc::Buf(a, int(0)), PairSrc::Scalar(flt(2.0, DType::F16)), PairSrc::Buf(b, int(0))],
            }),
        ),
        at(
            2,
            LStmtKind::Pair(PairOp::Packed2 {
                op: PackedOp::Max,
                dtype: DType::F16,
                dst: out,
                dst_index: int(4),
                srcs: vec![PairSrc::Buf(a, int(0)), PairSrc::Buf(b, int(0))],
            }),
        ),
        at(3, LStmtKind::Pair(PairOp::Cast2 { dst: out, dst_index: int(6), src: f, src_index: int(0) })),
    ]);
    let mut p = vec![
        to_bytes(DType::F16, &[1.0f32, -3.0]),
        to_bytes(DType::F16, &[0.001f32, 2.0]),
        vec![0; 16],
        to_bytes(DType::F32, &[0.1f32, 70000.0]),
    ];
    run(&k, &mut p);
    let got: Vec<f32> = from_bytes(DType::F16, &p[2]);
    let h = |x: f32| f16::from_f32(x).to_f32();
    let b0 = h(0.001);
    assert_eq!(got[0..2], [h(1.0 + b0), -1.0]);
    assert_eq!(got[2..4], [h(2.0 + b0), -4.0]);
    assert_eq!(got[4..6], [1.0, 2.0]);
    assert_eq!(got[6], h(0.1));
    assert_eq!(got[7], f32::INFINITY, "70000 overflows f16");
}

#[test]
fn grid_limit_runs_only_the_first_ctas() {
    let mut kb = Kb::new([4, 1, 1], [2, 1, 1]);
    let out = kb.param("out", DType::I32, 8);
    let k = kb.finish(vec![at(0, store(out, add(mul(bid(), int(2)), tid()), add(bid(), int(1))))]);
    let mut p = vec![vec![0; 32]];
    let rep = simulate(&k, &mut p, &SimOptions { grid_limit: Some(3), ..Default::default() }).unwrap();
    assert_eq!(rep.ctas_run, 3);
    assert_eq!(from_bytes::<i64>(DType::I32, &p[0]), vec![1, 1, 2, 2, 3, 3, 0, 0]);
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn arith_kernel(t: DType, op: LBinOp, n: i64) -> LKernel {
        let mut kb = Kb::new([1, 1, 1], [32, 1, 1]);
        let (pa, pb, out) = (kb.param("a", t, n), kb.param("b", t, n), kb.param("out", t, n));
        let i = kb.var("i", DType::I32);
        let idx = add(mul(v(i), int(32)), tid());
        kb.finish(vec![at(
            0,
            for_(i, n / 32, vec![at(1, store(out, idx.clone(), bin(op, load(pa, idx.clone()), load(pb, idx))))]),
        )])
    }

    fn run_bits(t: DType, op: LBinOp, a: &[u16], b: &[u16]) -> Vec<u16> {
        let k = arith_kernel(t, op, a.len() as i64);
        let le = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut p = vec![le(a), le(b), vec![0; 2 * a.len()]];
        simulate(&k, &mut p, &SimOptions::default()).unwrap();
        p[2].chunks(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect()
    }

    /// The correctly rounded result: exact in f64 for + − × of 16-bit floats, then one rounding.
    fn exact16(t: DType, op: LBinOp, x: u16, y: u16) -> u16 {
        let (a, b) = if t == DType::F16 {
            (f16::from_bits(x).to_f64(), f16::from_bits(y).to_f64())
        } else {
            (bf16::from_bits(x).to_f64(), bf16::from_bits(y).to_f64())
        };
        let r = match op {
            LBinOp::Add => a + b,
            LBinOp::Sub => a - b,
            _ => a * b,
        };
        if t == DType::F16 {
            f16::from_f64(r).to_bits()
        } else {
            bf16::from_f64(r).to_bits()
        }
    }

    fn same(t: DType, x: u16, y: u16) -> bool {
        let nan = |v: u16| if t == DType::F16 { f16::from_bits(v).is_nan() } else { bf16::from_bits(v).is_nan() };
        x == y || (nan(x) && nan(y))
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, failure_persistence: None, ..ProptestConfig::default() })]
        #[test]
        fn sixteen_bit_float_ops_are_correctly_rounded(
            a in prop::collection::vec(any::<u16>(), 64),
            b in prop::collection::vec(any::<u16>(), 64),
            t in prop::sample::select(vec![DType::F16, DType::BF16]),
            op in prop::sample::select(vec![LBinOp::Add, LBinOp::Sub, LBinOp::Mul]),
        ) {
            let got = run_bits(t, op, &a, &b);
            for i in 0..64 {
                let want = exact16(t, op, a[i], b[i]);
                prop_assert!(same(t, got[i], want), "{t} {op:?} {:#06x} {:#06x}: got {:#06x} want {want:#06x}", a[i], b[i], got[i]);
            }
        }

        #[test]
        fn i16_ops_wrap_like_a_16_bit_register(
            a in prop::collection::vec(any::<i16>(), 32),
            b in prop::collection::vec(any::<i16>(), 32),
            op in prop::sample::select(vec![LBinOp::Add, LBinOp::Sub, LBinOp::Mul, LBinOp::BitXor, LBinOp::Min]),
        ) {
            let bits = |v: &[i16]| v.iter().map(|x| *x as u16).collect::<Vec<_>>();
            let got = run_bits(DType::I16, op, &bits(&a), &bits(&b));
            for i in 0..32 {
                let (x, y) = (a[i] as i128, b[i] as i128);
                let r = match op { LBinOp::Add => x + y, LBinOp::Sub => x - y, LBinOp::Mul => x * y, LBinOp::BitXor => x ^ y, _ => x.min(y) };
                prop_assert_eq!(got[i], r as u16);
            }
        }
    }
}

#[test]
fn vec_copies_between_local_and_global() {
    // Each thread: R[0..4] <- A[4t..], R[4..8] <- R[0..4] (local to local), B[4t..] <- R[4..8].
    let mut kb = Kb::new([1, 1, 1], [48, 1, 1]);
    let (a, b) = (kb.param("A", DType::F32, 192), kb.param("B", DType::F32, 192));
    let r = kb.local("R", DType::F32, 8);
    let k = kb.finish(vec![
        at(0, vcopy(r, int(0), a, mul(tid(), int(4)), 4)),
        at(1, vcopy(r, int(4), r, int(0), 4)),
        // A warp barrier in a CTA whose last warp has only 16 lanes.
        at(2, warp_sync()),
        at(3, vcopy(b, mul(tid(), int(4)), r, int(4), 4)),
    ]);
    let src: Vec<f32> = (0..192).map(|i| i as f32 - 7.5).collect();
    let mut p = vec![to_bytes(DType::F32, &src), vec![0; 768]];
    run(&k, &mut p);
    assert_eq!(from_bytes::<f32>(DType::F32, &p[1]), src);
}
