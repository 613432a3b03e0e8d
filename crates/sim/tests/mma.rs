//! `mma.sync` alone, per shape and type, against an independent reference: the
//! fragment tables of the PTX ISA ("Matrix fragments for mma.m16n8k*"), written
//! here element by element as the ISA lists them (`g = lane >> 2`,
//! `t = lane % 4`, element `i` of a lane's operand), and an f64 reference sum.
//!
//! Inputs are small multiples of powers of two, so the f64 sum is exact and the
//! simulator must return it rounded once to f32 (bit for bit); a random test
//! checks the rounding against the exact sum, and the misuse tests check that a
//! partial warp is an error.

mod common;
use common::*;
use tirx_ir::lir::{LKernel, LStmtKind, MatrixOp, Mma, MmaShape};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimErrorKind, SimOptions};

/// One form under test.
#[derive(Clone, Copy, Debug)]
struct Form {
    shape: MmaShape,
    a: DType,
    b: DType,
    acc: DType,
}

impl Form {
    fn k(self) -> usize {
        self.shape.k() as usize
    }
    /// Elements per lane of A, B and C/D.
    fn elems(self) -> [usize; 3] {
        [16 * self.k() / 32, self.k() * 8 / 32, 4]
    }
    fn per_reg(t: DType) -> usize {
        32 / t.bits() as usize
    }
}

/// (row, col) of element `i` of lane `lane`'s A fragment, as the PTX ISA tables give it.
fn a_ref(f: Form, lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    match (f.shape, f.a.bits()) {
        (MmaShape::M16N8K16, 16) => {
            let row = if i < 2 || (4..6).contains(&i) { g } else { g + 8 };
            let col = if i < 4 { t * 2 + (i & 1) } else { t * 2 + (i & 1) + 8 };
            (row, col)
        }
        (MmaShape::M16N8K8, 16) => (if i < 2 { g } else { g + 8 }, t * 2 + (i & 1)),
        (MmaShape::M16N8K8, 32) => (if i == 0 || i == 2 { g } else { g + 8 }, if i < 2 { t } else { t + 4 }),
        (MmaShape::M16N8K32, 8) => {
            let row = if i < 4 || (8..12).contains(&i) { g } else { g + 8 };
            let col = if i < 8 { t * 4 + (i & 3) } else { t * 4 + (i & 3) + 16 };
            (row, col)
        }
        _ => unreachable!("{f:?}"),
    }
}

/// (row, col) of element `i` of lane `lane`'s B fragment.
fn b_ref(f: Form, lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    let row = match (f.shape, f.b.bits()) {
        (MmaShape::M16N8K16, 16) => {
            if i < 2 {
                t * 2 + (i & 1)
            } else {
                t * 2 + (i & 1) + 8
            }
        }
        (MmaShape::M16N8K8, 16) => t * 2 + i,
        (MmaShape::M16N8K8, 32) => {
            if i == 0 {
                t
            } else {
                t + 4
            }
        }
        (MmaShape::M16N8K32, 8) => {
            if i < 4 {
                t * 4 + (i & 3)
            } else {
                t * 4 + (i & 3) + 16
            }
        }
        _ => unreachable!("{f:?}"),
    };
    (row, g)
}

/// (row, col) of element `i` of lane `lane`'s C/D fragment.
fn c_ref(lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = (lane >> 2, lane % 4);
    (if i < 2 { g } else { g + 8 }, t * 2 + (i & 1))
}

/// Each lane loads its A, B, C registers from `A`, `B`, `C` (lane-major, `elems` per
/// lane), runs one mma (in place on C when `in_place`), and stores D to `D`.
fn kernel(f: Form, in_place: bool, threads: u32, guard: bool) -> LKernel {
    let [na, nb, _] = f.elems();
    let mut kb = Kb::new([1, 1, 1], [threads, 1, 1]);
    let (ga, gb) = (kb.param("A", f.a, 32 * na as i64), kb.param("B", f.b, 32 * nb as i64));
    let (gc, gd) = (kb.param("C", f.acc, 128), kb.param("D", f.acc, 128));
    let (ra, rb, rc) = (kb.local("a", f.a, na as i64), kb.local("b", f.b, nb as i64), kb.local("c", f.acc, 4));
    let rd = if in_place { rc } else { kb.local("d", f.acc, 4) };
    let j = kb.var("j", DType::I32);
    let fill =
        |r, g, n: usize| for_(j, n as i64, vec![at(1, store(r, v(j), load(g, add(mul(tid(), int(n as i64)), v(j)))))]);
    let idx = |n: usize, per: usize| (0..n / per).map(|r| int((r * per) as i64)).collect::<Vec<_>>();
    let mma = LStmtKind::Matrix(MatrixOp::Mma(Mma {
        shape: f.shape,
        d: rd,
        d_index: idx(4, 1),
        a: ra,
        a_index: idx(na, Form::per_reg(f.a)),
        b: rb,
        b_index: idx(nb, Form::per_reg(f.b)),
        c: rc,
        c_index: idx(4, 1),
    }));
    let mma = if guard { if_(lt(tid(), int(16)), vec![at(3, mma)]) } else { mma };
    kb.finish(vec![
        at(0, fill(ra, ga, na)),
        at(0, fill(rb, gb, nb)),
        at(0, fill(rc, gc, 4)),
        at(2, mma),
        at(4, for_(j, 4, vec![at(5, store(gd, add(mul(tid(), int(4)), v(j)), load(rd, v(j))))])),
    ])
}

/// The logical matrices `a` (16×k), `b` (k×8), `c` (16×8) scattered into lane-major
/// register dumps by the reference tables.
fn scatter(f: Form, a: &[Vec<f64>], b: &[Vec<f64>], c: &[Vec<f64>]) -> [Vec<f64>; 3] {
    let [na, nb, _] = f.elems();
    let mut out = [vec![0.0; 32 * na], vec![0.0; 32 * nb], vec![0.0; 128]];
    for lane in 0..32 {
        for i in 0..na {
            let (r, col) = a_ref(f, lane, i);
            out[0][lane * na + i] = a[r][col];
        }
        for i in 0..nb {
            let (r, col) = b_ref(f, lane, i);
            out[1][lane * nb + i] = b[r][col];
        }
        for i in 0..4 {
            let (r, col) = c_ref(lane, i);
            out[2][lane * 4 + i] = c[r][col];
        }
    }
    out
}

fn run(k: &LKernel, f: Form, inputs: &[Vec<f64>; 3]) -> Vec<f64> {
    let mut p = vec![
        to_bytes(f.a, &inputs[0]),
        to_bytes(f.b, &inputs[1]),
        to_bytes(f.acc, &inputs[2]),
        to_bytes(f.acc, &[0.0f64; 128]),
    ];
    let rep = simulate(k, &mut p, &SimOptions::default()).unwrap_or_else(|e| panic!("{f:?}: {e}"));
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    from_bytes(f.acc, &p[3])
}

/// A deterministic value generator (xorshift).
struct Gen(u64);
impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    /// A value exact in `t`: a small integer, scaled by a power of two for floats.
    fn val(&mut self, t: DType) -> f64 {
        let x = self.next();
        match t {
            DType::I8 => (x % 256) as f64 - 128.0,
            DType::U8 => (x % 256) as f64,
            DType::I32 => (x % 20001) as f64 - 10000.0,
            _ => ((x % 129) as f64 - 64.0) * 2f64.powi((x >> 32) as i32 % 5 - 6),
        }
    }
    fn mat(&mut self, rows: usize, cols: usize, t: DType) -> Vec<Vec<f64>> {
        (0..rows).map(|_| (0..cols).map(|_| self.val(t)).collect()).collect()
    }
}

const FORMS: [Form; 7] = [
    Form { shape: MmaShape::M16N8K16, a: DType::F16, b: DType::F16, acc: DType::F32 },
    Form { shape: MmaShape::M16N8K16, a: DType::BF16, b: DType::BF16, acc: DType::F32 },
    Form { shape: MmaShape::M16N8K8, a: DType::F16, b: DType::F16, acc: DType::F32 },
    Form { shape: MmaShape::M16N8K8, a: DType::BF16, b: DType::BF16, acc: DType::F32 },
    Form { shape: MmaShape::M16N8K8, a: DType::F32, b: DType::F32, acc: DType::F32 },
    Form { shape: MmaShape::M16N8K32, a: DType::I8, b: DType::I8, acc: DType::I32 },
    Form { shape: MmaShape::M16N8K32, a: DType::U8, b: DType::I8, acc: DType::I32 },
];

#[test]
fn every_form_matches_the_ptx_fragment_tables() {
    let mut g = Gen(0x2545f4914f6cdd1d);
    for f in FORMS {
        for in_place in [false, true] {
            let (a, b, c) = (g.mat(16, f.k(), f.a), g.mat(f.k(), 8, f.b), g.mat(16, 8, f.acc));
            let got = run(&kernel(f, in_place, 32, false), f, &scatter(f, &a, &b, &c));
            for lane in 0..32 {
                for i in 0..4 {
                    let (r, col) = c_ref(lane, i);
                    let exact: f64 = c[r][col] + (0..f.k()).map(|j| a[r][j] * b[j][col]).sum::<f64>();
                    let want = if f.acc == DType::F32 { exact as f32 as f64 } else { exact };
                    assert_eq!(
                        got[lane * 4 + i],
                        want,
                        "{f:?} in_place={in_place} D[{r}][{col}] (lane {lane}, reg {i})"
                    );
                }
            }
        }
    }
}

#[test]
fn float_sums_are_exact_then_rounded_once() {
    // Terms that sequential f32 accumulation would round: c = 1, products 2^-24 each.
    let f = FORMS[0];
    let tiny = 2f64.powi(-12);
    let a = vec![vec![tiny; 16]; 16];
    let b = vec![vec![tiny; 8]; 16];
    let c = vec![vec![1.0; 8]; 16];
    let got = run(&kernel(f, false, 32, false), f, &scatter(f, &a, &b, &c));
    // 1 + 16·2^-24 = 1 + 2^-20 exactly (an f32); one-at-a-time f32 adds would give 1.
    assert!(got.iter().all(|&x| x == 1.0 + 2f64.powi(-20)), "{got:?}");
    // bf16 values far apart in magnitude: the exact sum cancels the large ones.
    let f = FORMS[1];
    let mut a = vec![vec![0.0; 16]; 16];
    let mut b = vec![vec![0.0; 8]; 16];
    for row in a.iter_mut() {
        row[..3].copy_from_slice(&[2f64.powi(60), -(2f64.powi(60)), 2f64.powi(-60)]);
    }
    b[0] = vec![2f64.powi(60); 8];
    b[1] = vec![2f64.powi(60); 8];
    b[2] = vec![3.0; 8];
    let c = vec![vec![0.0; 8]; 16];
    let got = run(&kernel(f, false, 32, false), f, &scatter(f, &a, &b, &c));
    assert!(got.iter().all(|&x| x == 3.0 * 2f64.powi(-60)), "{got:?}");
}

#[test]
fn int8_accumulates_exactly_and_wraps() {
    let f = FORMS[5];
    let a = vec![vec![-128.0; 32]; 16];
    let b = vec![vec![-128.0; 8]; 32];
    let c = vec![vec![i32::MAX as f64; 8]; 16];
    let got = run(&kernel(f, false, 32, false), f, &scatter(f, &a, &b, &c));
    let want = (i32::MAX as i64 + 32 * 128 * 128) as i32 as f64;
    assert!(got.iter().all(|&x| x == want), "{got:?}");
}

#[test]
fn tf32_inputs_are_rounded_to_tf32() {
    let f = FORMS[4];
    let ulp = 2f64.powi(-10);
    // 1 + ulp/2 rounds (ties away) to 1 + ulp; 1 + ulp/4 rounds to 1.
    let mut a = vec![vec![0.0; 8]; 16];
    let mut b = vec![vec![0.0; 8]; 8];
    for row in a.iter_mut() {
        row[..2].copy_from_slice(&[1.0 + ulp / 2.0, 1.0 + ulp / 4.0]);
    }
    b[0] = vec![1.0; 8];
    b[1] = vec![1.0; 8];
    let c = vec![vec![0.0; 8]; 16];
    let got = run(&kernel(f, false, 32, false), f, &scatter(f, &a, &b, &c));
    assert!(got.iter().all(|&x| x == 2.0 + ulp), "{got:?}");
}

#[test]
fn a_partial_warp_is_an_error() {
    let f = FORMS[0];
    let err = simulate(&kernel(f, false, 16, false), &mut params(f), &SimOptions::default()).unwrap_err();
    assert_eq!(err.kind, SimErrorKind::PartialWarp, "{err}");
    assert!(err.message.contains("mma.sync executed by warp 0, which has only 16 of 32 lanes"), "{err}");
    let err = simulate(&kernel(f, false, 32, true), &mut params(f), &SimOptions::default()).unwrap_err();
    assert_eq!(err.kind, SimErrorKind::PartialWarp, "{err}");
    assert!(err.message.contains("is not reached by every lane in warp 0"), "{err}");
    assert!(err.message.contains("m16n8k16.row.col.f32.f16.f16.f32"), "{err}");
}

fn params(f: Form) -> Vec<Vec<u8>> {
    let [na, nb, _] = f.elems();
    let b = |t: DType, n: usize| vec![0u8; n * t.bytes() as usize];
    vec![b(f.a, 32 * na), b(f.b, 32 * nb), b(f.acc, 128), b(f.acc, 128)]
}
