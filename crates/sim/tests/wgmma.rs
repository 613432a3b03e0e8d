//! `wgmma.mma_async` alone (docs/lir.md §2.11), against an independent reference:
//! shared tiles laid out by the canonical layouts of the PTX ISA (rewritten here
//! as core matrices and 16-byte chunks XORed by address bits), register
//! fragments by the ISA's tables, exact small inputs (so the sum is exact and
//! must come back rounded once, bit for bit); and the asynchrony rules: the
//! accumulator is undefined until `wgmma.wait_group`, shared inputs may not be
//! overwritten before it, fences are required, warpgroups are whole; several
//! warpgroups' reads of one tile are ordered before a write by a barrier of theirs.

mod common;
use common::*;
use tirx_ir::lir::wgmma::{Major, SmemDesc, Wgmma, WgmmaA, WgmmaSwizzle, WgmmaSync};
use tirx_ir::lir::{AsyncOp, LBinOp, LKernel, LStmt, LStmtKind, MatrixOp};
use tirx_ir::DType;
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{simulate, SimError, SimErrorKind, SimOptions};

#[derive(Clone, Copy, Debug)]
struct Form {
    n: usize,
    a: DType,
    b: DType,
    acc: DType,
}

impl Form {
    fn k(self) -> usize {
        256 / self.a.bits() as usize
    }
    /// Accumulator elements per thread.
    fn nd(self) -> usize {
        self.n / 2
    }
}

/// A shared operand's layout: major-ness, swizzle, leading and stride byte offsets.
#[derive(Clone, Copy, Debug)]
struct Lay {
    major: Major,
    swizzle: WgmmaSwizzle,
    lbo: u32,
    sbo: u32,
}

/// The stored byte offset of element (mn, k): core matrices of 8 rows × 16 bytes
/// (no swizzle), or rows of `W` bytes in atoms of 8 rows whose 16-byte chunks are
/// XORed with address bits 7.. (swizzled).
fn place(l: Lay, esize: usize, mn: usize, k: usize) -> usize {
    let (lbo, sbo) = (l.lbo as usize, l.sbo as usize);
    let w = 16usize << l.swizzle.mode();
    let t = 16 / esize;
    let raw = match (l.major, l.swizzle) {
        // ((8, m), (T, 2)) : ((16 B, SBO), (e, LBO))
        (Major::K, WgmmaSwizzle::None) => (mn / 8) * sbo + (mn % 8) * 16 + (k / t) * lbo + (k % t) * esize,
        // ((8, m), (W/e)) : ((W, SBO), (e))
        (Major::K, _) => (mn / 8) * sbo + (mn % 8) * w + k * esize,
        // ((T, m), (8, k)) : ((e, SBO), (16 B, LBO))
        (Major::MN, WgmmaSwizzle::None) => (mn / t) * sbo + (mn % t) * esize + (k / 8) * lbo + (k % 8) * 16,
        // ((W/e, m), (8, k)) : ((e, LBO), (W, SBO))
        (Major::MN, _) => (mn / (w / esize)) * lbo + (mn % (w / esize)) * esize + (k / 8) * sbo + (k % 8) * w,
    };
    let bits = l.swizzle.mode();
    let row = (raw >> 7) & ((1 << bits) - 1);
    raw ^ (row << 4)
}

/// Buffer elements a `rows × k` operand spans in layout `l`.
fn image_len(l: Lay, esize: usize, rows: usize, k: usize) -> usize {
    let mut top = 0;
    for mn in 0..rows {
        for kk in 0..k {
            top = top.max(place(l, esize, mn, kk) + esize);
        }
    }
    top.next_multiple_of(128 * esize) / esize
}

/// (row, col) of accumulator element `i` of thread `tid`, as the ISA's table has it.
fn d_ref(tid: usize, i: usize) -> (usize, usize) {
    let (w, g, t) = (tid / 32, tid % 32 / 4, tid % 4);
    let row = 16 * w + g + if i % 4 >= 2 { 8 } else { 0 };
    (row, (i / 4) * 8 + t * 2 + i % 2)
}

/// (row, col) of A register-fragment element `j` (`p` per register) of thread `tid`.
fn a_ref(tid: usize, j: usize, p: usize) -> (usize, usize) {
    let (w, g, t) = (tid / 32, tid % 32 / 4, tid % 4);
    let (r, e) = (j / p, j % p);
    let row = 16 * w + g + if r % 2 == 1 { 8 } else { 0 };
    (row, t * p + e + if r >= 2 { 4 * p } else { 0 })
}

/// What a test kernel does besides the wgmma.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Twist {
    None,
    /// Loads C into the accumulator, then `D = A·B + C`.
    Accumulate,
    /// Two wgmmas into one accumulator before the wait: `D = 2·A·B`.
    Chain,
    ReadEarly,
    WriteEarly,
    OverwriteB,
    NoFence,
    NoProxyFence,
    NoWait,
    /// The wgmma under `if tid < 64`.
    Partial,
}

struct Case {
    f: Form,
    la: Option<Lay>,
    lb: Lay,
    twist: Twist,
}

/// Kernel: images → shared (or A registers), fences, the wgmma, the accumulator → `D`.
fn kernel(c: &Case) -> LKernel {
    let f = c.f;
    let (ea, eb) = (f.a.bytes() as usize, f.b.bytes() as usize);
    let a_elems = c.la.map_or(128 * 4 * (4 / ea), |l| image_len(l, ea, 64, f.k()));
    let b_elems = image_len(c.lb, eb, f.n, f.k());
    let mut kb = Kb::new([1, 1, 1], [128, 1, 1]);
    let ga = kb.param("A_img", f.a, a_elems as i64);
    let gb = kb.param("B_img", f.b, b_elems as i64);
    let gc = kb.param("C", f.acc, 128 * f.nd() as i64);
    let gd = kb.param("D", f.acc, 128 * f.nd() as i64);
    let sb = kb.shared("B_s", f.b, b_elems as i64);
    let acc = kb.local("acc", f.acc, f.nd() as i64);
    let i = kb.var("i", DType::I32);
    let copy_in = |dst, src, n: usize| {
        let idx = add(mul(v(i), int(128)), tid());
        at(1, for_(i, (n / 128) as i64, vec![at(1, store(dst, idx.clone(), load(src, idx)))]))
    };
    let mut body = vec![];
    let a = match c.la {
        Some(l) => {
            let sa = kb.shared("A_s", f.a, a_elems as i64);
            body.push(copy_in(sa, ga, a_elems));
            WgmmaA::Smem(SmemDesc {
                buf: sa,
                index: int(0),
                major: l.major,
                swizzle: l.swizzle,
                lbo: l.lbo,
                sbo: l.sbo,
            })
        }
        None => {
            let per = 4 / ea;
            let ra = kb.local("a", f.a, 4 * per as i64);
            let idx = add(mul(tid(), int(4 * per as i64)), v(i));
            body.push(at(1, for_(i, 4 * per as i64, vec![at(1, store(ra, v(i), load(ga, idx)))])));
            WgmmaA::Regs { buf: ra, index: (0..4).map(|r| int((r * per) as i64)).collect() }
        }
    };
    body.push(copy_in(sb, gb, b_elems));
    let per_d = if f.acc == DType::F16 { 2 } else { 1 };
    if c.twist == Twist::Accumulate {
        let idx = add(mul(tid(), int(f.nd() as i64)), v(i));
        body.push(at(1, for_(i, f.nd() as i64, vec![at(1, store(acc, v(i), load(gc, idx)))])));
    }
    if c.twist != Twist::NoProxyFence {
        body.push(at(2, LStmtKind::Async(AsyncOp::FenceProxyAsync)));
    }
    body.push(at(3, cta_sync()));
    if c.twist != Twist::NoFence {
        body.push(at(4, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Fence))));
    }
    let wgmma = |scale| {
        LStmtKind::Matrix(MatrixOp::Wgmma(Wgmma {
            n: f.n as u32,
            d: acc,
            d_index: (0..f.nd() / per_d).map(|r| int((r * per_d) as i64)).collect(),
            a: a.clone(),
            b: SmemDesc {
                buf: sb,
                index: int(0),
                major: c.lb.major,
                swizzle: c.lb.swizzle,
                lbo: c.lb.lbo,
                sbo: c.lb.sbo,
            },
            scale_d: LExpr::Bool(scale),
        }))
    };
    let first = wgmma(c.twist == Twist::Accumulate);
    body.push(if c.twist == Twist::Partial {
        at(5, if_(lt(tid(), int(64)), vec![at(5, first)]))
    } else {
        at(5, first)
    });
    if c.twist == Twist::Chain {
        body.push(at(5, wgmma(true)));
    }
    body.push(at(6, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Commit))));
    match c.twist {
        Twist::ReadEarly => body.push(at(7, store(gd, mul(tid(), int(f.nd() as i64)), load(acc, int(0))))),
        Twist::WriteEarly => body.push(at(7, store(acc, int(1), LExpr::Float(0.0, f.acc)))),
        Twist::OverwriteB => body.push(at(7, store(sb, tid(), LExpr::Float(0.0, f.b)))),
        _ => {}
    }
    if c.twist != Twist::NoWait {
        body.push(at(8, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Wait(0)))));
        let idx = add(mul(tid(), int(f.nd() as i64)), v(i));
        body.push(at(9, for_(i, f.nd() as i64, vec![at(9, store(gd, idx, load(acc, v(i))))])));
    }
    kb.finish(body)
}

use tirx_ir::lir::LExpr;

/// Deterministic small values exact in `t` (xorshift).
struct Gen(u64);
impl Gen {
    fn val(&mut self, t: DType) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        let r = |m: u64| (self.0 % (2 * m + 1)) as f64 - m as f64;
        match t {
            DType::F8E5M2 => r(6) * 0.5,
            DType::F8E4M3 => r(12) * 0.25,
            _ => r(12) * 0.25,
        }
    }
}

/// Inputs, the images the kernel copies, and the expected accumulator (thread-major).
fn run_case(c: &Case, seed: u64) -> Result<(Vec<f64>, Vec<f64>), SimError> {
    let f = c.f;
    let mut g = Gen(seed);
    let a: Vec<Vec<f64>> = (0..64).map(|_| (0..f.k()).map(|_| g.val(f.a)).collect()).collect();
    // B is K×N; row n of the N×K operand is column n.
    let b: Vec<Vec<f64>> = (0..f.n).map(|_| (0..f.k()).map(|_| g.val(f.b)).collect()).collect();
    let cm: Vec<Vec<f64>> = (0..64).map(|_| (0..f.n).map(|_| g.val(DType::F16)).collect()).collect();
    let (ea, eb) = (f.a.bytes() as usize, f.b.bytes() as usize);
    let k = kernel(c);
    let a_img = match c.la {
        Some(l) => {
            let mut img = vec![0.0; image_len(l, ea, 64, f.k())];
            for (mn, row) in a.iter().enumerate() {
                for (kk, x) in row.iter().enumerate() {
                    img[place(l, ea, mn, kk) / ea] = *x;
                }
            }
            img
        }
        None => {
            let p = 4 / ea;
            let mut img = vec![0.0; 128 * 4 * p];
            for tid in 0..128 {
                for j in 0..4 * p {
                    let (r, col) = a_ref(tid, j, p);
                    img[tid * 4 * p + j] = a[r][col];
                }
            }
            img
        }
    };
    let mut b_img = vec![0.0; image_len(c.lb, eb, f.n, f.k())];
    for (mn, row) in b.iter().enumerate() {
        for (kk, x) in row.iter().enumerate() {
            b_img[place(c.lb, eb, mn, kk) / eb] = *x;
        }
    }
    let mut c_in = vec![0.0; 128 * f.nd()];
    let mut want = vec![0.0; 128 * f.nd()];
    for tid in 0..128 {
        for i in 0..f.nd() {
            let (r, col) = d_ref(tid, i);
            let ab: f64 = (0..f.k()).map(|kk| a[r][kk] * b[col][kk]).sum();
            c_in[tid * f.nd() + i] = cm[r][col];
            want[tid * f.nd() + i] = match c.twist {
                Twist::Accumulate => ab + cm[r][col],
                Twist::Chain => 2.0 * ab,
                _ => ab,
            };
        }
    }
    let mut p = vec![
        to_bytes(f.a, &a_img),
        to_bytes(f.b, &b_img),
        to_bytes(f.acc, &c_in),
        to_bytes(f.acc, &vec![0.0f64; 128 * f.nd()]),
    ];
    let rep = simulate(&k, &mut p, &SimOptions::default())?;
    assert!(rep.warnings.is_empty(), "{:?}", rep.warnings);
    Ok((from_bytes(f.acc, &p[3]), want))
}

const K128: Lay = Lay { major: Major::K, swizzle: WgmmaSwizzle::B128, lbo: 16, sbo: 1024 };

fn forms() -> Vec<Form> {
    vec![
        Form { n: 64, a: DType::F16, b: DType::F16, acc: DType::F32 },
        Form { n: 8, a: DType::BF16, b: DType::BF16, acc: DType::F32 },
        Form { n: 24, a: DType::F32, b: DType::F32, acc: DType::F32 },
        Form { n: 16, a: DType::F8E4M3, b: DType::F8E5M2, acc: DType::F32 },
        Form { n: 32, a: DType::F16, b: DType::F16, acc: DType::F16 },
        Form { n: 256, a: DType::BF16, b: DType::BF16, acc: DType::F32 },
    ]
}

/// The layouts a form's operands may take: K-major in every swizzle, and for
/// 16-bit types MN-major too; strides are the canonical dense ones.
fn layouts(t: DType, rows: usize) -> Vec<Lay> {
    let e = t.bytes();
    let rows = rows as u32;
    let mut out = vec![Lay { major: Major::K, swizzle: WgmmaSwizzle::None, lbo: 8 * 16 * rows / 8, sbo: 128 }];
    for sw in [WgmmaSwizzle::B32, WgmmaSwizzle::B64, WgmmaSwizzle::B128] {
        out.push(Lay { major: Major::K, swizzle: sw, lbo: 16, sbo: 8 * sw.width() as u32 });
    }
    if t.bits() == 16 {
        let per_row = 16 / e;
        out.push(Lay { major: Major::MN, swizzle: WgmmaSwizzle::None, lbo: 128 * rows.div_ceil(per_row), sbo: 128 });
        for sw in [WgmmaSwizzle::B32, WgmmaSwizzle::B64, WgmmaSwizzle::B128] {
            let w = sw.width() as u32;
            let atoms_k = 2; // k16 = two groups of 8 rows
            out.push(Lay { major: Major::MN, swizzle: sw, lbo: 8 * w * atoms_k, sbo: 8 * w });
        }
    }
    out
}

#[test]
fn every_form_major_and_swizzle_reads_the_canonical_layouts() {
    let mut cases = 0;
    for f in forms() {
        for la in layouts(f.a, 64) {
            for lb in layouts(f.b, f.n) {
                // The 256-wide form only with the common layouts (it is slow to simulate).
                if f.n == 256 && (la.swizzle != WgmmaSwizzle::B128 || lb.swizzle != WgmmaSwizzle::B128) {
                    continue;
                }
                let c = Case { f, la: Some(la), lb, twist: Twist::None };
                let (got, want) = run_case(&c, 7 + cases).unwrap_or_else(|e| panic!("{f:?} {la:?} {lb:?}: {e}"));
                assert_eq!(got, want, "{f:?} A {la:?} B {lb:?}");
                cases += 1;
            }
        }
    }
    assert!(cases > 60, "{cases}");
}

#[test]
fn register_a_accumulate_and_chains() {
    for f in forms().into_iter().filter(|f| f.n <= 64) {
        for twist in [Twist::None, Twist::Accumulate, Twist::Chain] {
            for la in [None, Some(K128)] {
                let c = Case { f, la, lb: K128, twist };
                let (got, want) = run_case(&c, 99).unwrap_or_else(|e| panic!("{f:?} {twist:?} {la:?}: {e}"));
                assert_eq!(got, want, "{f:?} {twist:?} A {la:?}");
            }
        }
    }
}

#[test]
fn tf32_from_shared_memory_truncates() {
    // tf32 through a descriptor keeps the top 10 fraction bits: 1 + 2^-11 + 2^-12 reads as 1.
    let one = 1.0 + 2f64.powi(-11) + 2f64.powi(-12);
    let f = Form { n: 8, a: DType::F32, b: DType::F32, acc: DType::F32 };
    let k = kernel(&Case { f, la: Some(K128), lb: K128, twist: Twist::None });
    let (na, nb) = (image_len(K128, 4, 64, 8), image_len(K128, 4, 8, 8));
    let mut a_img = vec![0.0; na];
    a_img[0] = one; // A[0][0]
    let mut b_img = vec![0.0; nb];
    b_img[0] = 1.0; // B[k=0][n=0]
    let mut p = vec![to_bytes(f.a, &a_img), to_bytes(f.b, &b_img), vec![0; 128 * 4 * 4], vec![0; 128 * 4 * 4]];
    simulate(&k, &mut p, &SimOptions::default()).unwrap();
    let d: Vec<f64> = from_bytes(DType::F32, &p[3]);
    assert_eq!(d[0], 1.0, "thread 0 holds D[0][0]");
}

fn misuse(twist: Twist) -> SimError {
    let f = Form { n: 16, a: DType::F16, b: DType::F16, acc: DType::F32 };
    let c = Case { f, la: Some(K128), lb: K128, twist };
    match run_case(&c, 1) {
        Err(e) => e,
        Ok(_) => panic!("{twist:?} ran"),
    }
}

#[test]
fn the_accumulator_is_undefined_until_the_wait() {
    for twist in [Twist::ReadEarly, Twist::WriteEarly] {
        let e = misuse(twist);
        assert_eq!(e.kind, SimErrorKind::Wgmma, "{twist:?}: {e}");
        assert_eq!(e.span, span(7), "{twist:?}: the access is the error's site");
        assert!(e.labels.iter().any(|(s, _)| *s == span(5)), "{twist:?}: names the wgmma: {e:?}");
        assert!(e.message.contains("`acc[") && e.message.contains("wgmma.wait_group"), "{e}");
    }
}

#[test]
fn shared_inputs_are_not_overwritten_before_the_wait() {
    let e = misuse(Twist::OverwriteB);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert_eq!(e.span, span(7));
    assert!(e.labels.iter().any(|(s, _)| *s == span(5)), "{e:?}");
    assert!(e.message.contains("`B_s`") && e.message.contains("still reads"), "{e}");
}

#[test]
fn fences_waits_and_whole_warpgroups_are_required() {
    let e = misuse(Twist::NoFence);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("before any wgmma.fence"), "{e}");
    let e = misuse(Twist::NoProxyFence);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("async proxy") && e.labels.iter().any(|(s, _)| *s == span(1)), "{e:?}");
    let e = misuse(Twist::NoWait);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("exits with a wgmma.mma_async not waited for"), "{e}");
    let e = misuse(Twist::Partial);
    assert_eq!(e.kind, SimErrorKind::PartialWarp, "{e}");
    assert!(e.message.contains("warpgroup 0") && e.message.contains("threads 0-63"), "{e}");
}

/// A register written after the last fence may not be a wgmma operand.
#[test]
fn register_accesses_need_a_fence_before_the_wgmma() {
    let f = Form { n: 16, a: DType::F16, b: DType::F16, acc: DType::F32 };
    let mut k = kernel(&Case { f, la: Some(K128), lb: K128, twist: Twist::None });
    let acc = tirx_ir::lir::LBufId(k.bufs.iter().position(|b| b.name == "acc").unwrap() as u32);
    let pos =
        k.body.iter().position(|s| matches!(s.kind, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Fence)))).unwrap();
    k.body.insert(pos + 1, LStmt::new(store(acc, int(2), LExpr::Float(1.0, DType::F32)), span(10)));
    let (na, nb) = (span_of(&k, "A_img"), span_of(&k, "B_img"));
    let mut p = vec![vec![0; na * 2], vec![0; nb * 2], vec![0; 128 * 8 * 4], vec![0; 128 * 8 * 4]];
    let e = simulate(&k, &mut p, &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("after the warpgroup's last wgmma.fence"), "{e}");
    assert!(e.labels.iter().any(|(s, _)| *s == span(10)), "{e:?}");
}

fn span_of(k: &LKernel, name: &str) -> usize {
    k.bufs.iter().find(|b| b.name == name).map_or(0, |b| b.elems as usize)
}

/// A descriptor's start is one value for the warpgroup, as scale_d is: threads that
/// disagree are reported (the wgmma read the first thread's before).
#[test]
fn the_threads_of_a_warpgroup_agree_on_a_descriptors_start() {
    let f = Form { n: 16, a: DType::F16, b: DType::F16, acc: DType::F32 };
    let mut k = kernel(&Case { f, la: Some(K128), lb: K128, twist: Twist::None });
    let w = k
        .body
        .iter_mut()
        .find_map(|s| match &mut s.kind {
            LStmtKind::Matrix(MatrixOp::Wgmma(w)) => Some(w),
            _ => None,
        })
        .unwrap();
    // Threads 64.. start one 1024-byte swizzle atom further: aligned, only not uniform.
    w.b.index = mul(div(tid(), int(64)), int(512));
    let (na, nb) = (span_of(&k, "A_img"), span_of(&k, "B_img"));
    let mut p = vec![vec![0; na * 2], vec![0; nb * 2], vec![0; 128 * 8 * 4], vec![0; 128 * 8 * 4]];
    let e = simulate(&k, &mut p, &SimOptions::default()).unwrap_err();
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(
        e.message.contains("disagree on the start of the descriptor of `B_s`") && e.message.contains("thread 64"),
        "{e}"
    );
    assert_eq!(e.span, span(5), "{e}");
}

/// The consumer warpgroups 1 and 2 of three (0 loads the tile, as a producer, and takes no
/// part in the barrier) each read one shared tile by a wgmma and wait for it, then warpgroup 2
/// overwrites the tile, after a named barrier of the two (`barrier`) or not.
fn two_readers_then_a_write(barrier: bool) -> LKernel {
    let f = Form { n: 16, a: DType::F16, b: DType::F16, acc: DType::F32 };
    let b_elems = image_len(K128, 2, f.n, f.k());
    let mut kb = Kb::new([1, 1, 1], [384, 1, 1]);
    let gb = kb.param("B_img", f.b, b_elems as i64);
    let gd = kb.param("D", f.acc, 384 * f.nd() as i64);
    let sb = kb.shared("B_s", f.b, b_elems as i64);
    let ra = kb.local("a", f.a, 8);
    let acc = kb.local("acc", f.acc, f.nd() as i64);
    let i = kb.var("i", DType::I32);
    let row = |x: LExpr| add(mul(v(i), int(128)), x);
    let load_tile = for_(i, (b_elems / 128) as i64, vec![at(1, store(sb, row(tid()), load(gb, row(tid()))))]);
    let mut consume = vec![
        at(4, for_(i, 8, vec![at(4, store(ra, v(i), LExpr::Float(0.5, f.a)))])),
        at(4, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Fence))),
        at(
            5,
            LStmtKind::Matrix(MatrixOp::Wgmma(Wgmma {
                n: f.n as u32,
                d: acc,
                d_index: (0..f.nd()).map(|r| int(r as i64)).collect(),
                a: WgmmaA::Regs { buf: ra, index: (0..4).map(|r| int(2 * r)).collect() },
                b: SmemDesc {
                    buf: sb,
                    index: int(0),
                    major: K128.major,
                    swizzle: K128.swizzle,
                    lbo: K128.lbo,
                    sbo: K128.sbo,
                },
                scale_d: LExpr::Bool(false),
            })),
        ),
        at(6, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Commit))),
        at(7, LStmtKind::Matrix(MatrixOp::WgmmaSync(WgmmaSync::Wait(0)))),
    ];
    if barrier {
        consume.push(at(8, bar_sync(int(1), 256)));
    }
    let mine = bin(LBinOp::Sub, tid(), int(256)); // (warpgroup 2's threads: the tile's first 128 elements)
    consume.push(at(9, if_(lt(int(255), tid()), vec![at(9, store(sb, mine, LExpr::Float(0.0, f.b)))])));
    consume.push(at(
        10,
        for_(i, f.nd() as i64, vec![at(10, store(gd, add(mul(tid(), int(f.nd() as i64)), v(i)), load(acc, v(i))))]),
    ));
    kb.finish(vec![
        at(1, if_(lt(tid(), int(128)), vec![at(1, load_tile)])),
        at(2, LStmtKind::Async(AsyncOp::FenceProxyAsync)),
        at(3, cta_sync()),
        at(4, if_(lt(int(127), tid()), consume)),
    ])
}

#[test]
fn a_named_barrier_orders_both_warpgroups_wgmma_reads_before_a_write() {
    let run = |barrier| {
        let k = two_readers_then_a_write(barrier);
        let f = Form { n: 16, a: DType::F16, b: DType::F16, acc: DType::F32 };
        let b_elems = image_len(K128, 2, f.n, f.k());
        let mut p = vec![vec![0u8; 2 * b_elems], vec![0u8; 4 * 384 * f.nd()]];
        simulate(&k, &mut p, &SimOptions::default())
    };
    run(true).expect("the barrier orders both warpgroups' wgmma reads before the write");
    let e = run(false).expect_err("without it the other warpgroup's wgmma read is unordered");
    assert_eq!(e.kind, SimErrorKind::DataRace, "{e}");
    assert_eq!(e.span, span(9), "{e}");
}
