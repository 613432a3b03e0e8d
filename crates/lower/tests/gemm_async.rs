//! gemm_async → wgmma: the matrix (shapes × dtypes × transposes × swizzles,
//! A from shared memory or registers, accum constant or at run time),
//! value-checked in the simulator against an f64 reference, the typed declines
//! per rule, and the asynchrony errors a script can make (reading or writing the
//! accumulator, or overwriting the shared inputs, before the wait). With
//! `TIRX_DUMP_KERNELS=DIR` every kernel is written out for the GPU matrix.
//!
//! Each kernel is one warpgroup: A and B go global → shared (`mma_shared_layout`
//! of the given swizzle) or A global → registers, then `fence.proxy.async`, a
//! barrier, the gemm_async, `wait_group(0)`, D → global. Inputs are small
//! multiples of 1/8 (halves for a float16 accumulator), so every sum is exact
//! and D must equal the reference bit for bit.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::{CommonRule, GemmRule};
use tirx_sim::value::{from_bytes, to_bytes};
use tirx_sim::{SimErrorKind, SimOptions};

#[derive(Clone, Debug)]
struct Case {
    m: i64,
    n: i64,
    k: i64,
    a: &'static str,
    b: &'static str,
    acc: &'static str,
    trans_a: bool,
    trans_b: bool,
    /// Swizzle modes (0..3) of A and B in shared memory; `None` for A: registers.
    sw_a: Option<u32>,
    sw_b: u32,
    /// `accum=`: absent, a constant, or `"run"` (a run-time flag that is true).
    accum: Option<&'static str>,
}

fn bits(t: &str) -> i64 {
    DType::from_name(t).unwrap().bits() as i64
}

impl Case {
    /// K-major operands with the widest swizzle their rows admit.
    fn new(m: i64, n: i64, k: i64, ab: &'static str) -> Case {
        let sw = swizzles(ab, k).last().copied().unwrap_or(0);
        Case {
            m,
            n,
            k,
            a: ab,
            b: ab,
            acc: "float32",
            trans_a: false,
            trans_b: false,
            sw_a: Some(sw),
            sw_b: sw,
            accum: None,
        }
    }
    /// A and B as stored: A M×K (K×M transposed), B N×K (K×N transposed).
    fn a_shape(&self) -> (i64, i64) {
        if self.trans_a {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }
    fn b_shape(&self) -> (i64, i64) {
        if self.trans_b {
            (self.k, self.n)
        } else {
            (self.n, self.k)
        }
    }
    fn acc_layout(&self) -> String {
        let (mt, n) = (self.m / 64, self.n);
        format!("TileLayout(S[({mt}, 4, 2, 8, {}, 4, 2):({}, 1@wid_in_wg, 2, 4@laneid, 4, 1@laneid, 1)])", n / 8, n / 2)
    }
    /// The register form's A: per 64×k tile, rows (warp, half, g), columns (kHi, t, e).
    fn a_reg_layout(&self) -> String {
        let p = 32 / bits(self.a);
        let (mt, kt) = (self.m / 64, self.k / (8 * p));
        format!(
            "TileLayout(S[({mt}, 4, 2, 8, {kt}, 2, 4, {p}):({}, 1@wid_in_wg, {p}, 4@laneid, {}, {}, 1@laneid, 1)])",
            4 * p * kt,
            4 * p,
            2 * p
        )
    }

    fn script(&self) -> String {
        self.script_with(&self.call(), "")
    }

    fn call(&self) -> String {
        let (ar, ac) = self.a_shape();
        let (br, bc) = self.b_shape();
        let a = if self.sw_a.is_some() { "A_s" } else { "A_r" };
        let accum = match self.accum {
            None => String::new(),
            Some("run") => ", accum=flag[0] > 0".into(),
            Some(x) => format!(", accum={x}"),
        };
        format!(
            "Tx.warpgroup.gemm_async(acc[0:{m}, 0:{n}], {a}[0:{ar}, 0:{ac}], B_s[0:{br}, 0:{bc}], transA={}, transB={}{accum})",
            py(self.trans_a),
            py(self.trans_b),
            m = self.m,
            n = self.n
        )
    }

    /// The kernel with `gemm` as its gemm_async call and `before_wait` between it and the wait.
    fn script_with(&self, gemm: &str, before_wait: &str) -> String {
        let (ar, ac) = self.a_shape();
        let (br, bc) = self.b_shape();
        let (m, n, a, b, acc) = (self.m, self.n, self.a, self.b, self.acc);
        let a_decl = match self.sw_a {
            Some(s) => format!(
                "A_s = T.alloc_buffer(({ar}, {ac}), \"{a}\", scope=\"shared\", layout=mma_shared_layout(\"{a}\", {s}, ({ar}, {ac})))\n    Tx.warpgroup.copy(A_s[0:{ar}, 0:{ac}], A[0:{ar}, 0:{ac}])"
            ),
            None => format!(
                "A_r = T.alloc_buffer(({ar}, {ac}), \"{a}\", scope=\"local\", layout={})\n    Tx.warpgroup.copy(A_r[0:{ar}, 0:{ac}], A[0:{ar}, 0:{ac}])",
                self.a_reg_layout()
            ),
        };
        let load_c = if self.accum.is_some_and(|x| x != "False") {
            format!("Tx.warpgroup.copy(acc[0:{m}, 0:{n}], C[0:{m}, 0:{n}])")
        } else {
            "pass".into()
        };
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout, laneid, wid_in_wg, tid_in_wg, mma_shared_layout

@T.prim_func
def gemm_async(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, F_ptr: T.handle, D_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({ar}, {ac}), "{a}")
    B = T.match_buffer(B_ptr, ({br}, {bc}), "{b}")
    C = T.match_buffer(C_ptr, ({m}, {n}), "{acc}")
    flag = T.match_buffer(F_ptr, (1,), "int32")
    D = T.match_buffer(D_ptr, ({m}, {n}), "{acc}")
    T.device_entry(); T.cta_id([1]); wg = T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id([128])
    B_s = T.alloc_buffer(({br}, {bc}), "{b}", scope="shared", layout=mma_shared_layout("{b}", {sb}, ({br}, {bc})))
    acc = T.alloc_buffer(({m}, {n}), "{acc}", scope="local", layout={accl})
    {a_decl}
    Tx.warpgroup.copy(B_s[0:{br}, 0:{bc}], B[0:{br}, 0:{bc}])
    {load_c}
    T.ptx.fence.proxy.async_.shared__cta()
    T.cuda.cta_sync()
    {gemm}
    {before_wait}
    T.ptx.wgmma.wait_group(0)
    Tx.warpgroup.copy(D[0:{m}, 0:{n}], acc[0:{m}, 0:{n}])
"#,
            sb = self.sw_b,
            accl = self.acc_layout(),
        )
    }

    /// Lowers, simulates with exact inputs and compares D with the reference.
    fn check(&self) -> tirx_lower::Lowered {
        let src = self.script();
        let l = lower(&src);
        let g = l.explain.iter().find(|c| c.op == "gemm_async").expect("the gemm_async call");
        assert_eq!(g.chosen.as_deref(), Some("wgmma"), "{}\n{src}", g.render());
        let (at, bt, ct) =
            (DType::from_name(self.a).unwrap(), DType::from_name(self.b).unwrap(), DType::from_name(self.acc).unwrap());
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let mut seed = 0x9e3779b97f4a7c15u64 ^ (self.m * 131 + self.n * 17 + self.k) as u64;
        let half = ct == DType::F16;
        let a: Vec<f64> = (0..m * k).map(|_| small(&mut seed, half)).collect();
        let b: Vec<f64> = (0..n * k).map(|_| small(&mut seed, half)).collect();
        let c: Vec<f64> = (0..m * n).map(|_| small(&mut seed, half)).collect();
        // Stored in buffer order: A M×K (K×M), B N×K (K×N).
        let a_buf: Vec<f64> =
            if self.trans_a { (0..k * m).map(|x| a[(x % m) * k + x / m]).collect() } else { a.clone() };
        let b_buf: Vec<f64> =
            if self.trans_b { (0..k * n).map(|x| b[(x % n) * k + x / n]).collect() } else { b.clone() };
        let mut params = vec![
            to_bytes(at, &a_buf),
            to_bytes(bt, &b_buf),
            to_bytes(ct, &c),
            to_bytes(DType::I32, &[1.0]),
            to_bytes(ct, &vec![-1000.0; m * n]),
        ];
        let rep =
            tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert!(rep.warnings.is_empty(), "{:?}\n{src}", rep.warnings);
        let got: Vec<f64> = from_bytes(ct, &params[4]);
        let accumulate = self.accum.is_some_and(|x| x != "False");
        for i in 0..m {
            for j in 0..n {
                let ab: f64 = (0..k).map(|x| a[i * k + x] * b[j * k + x]).sum();
                let want = ab + if accumulate { c[i * n + j] } else { 0.0 };
                assert_eq!(got[i * n + j], want, "{self:?}: D[{i}][{j}]\n{}\n{src}", g.render());
            }
        }
        l
    }
}

fn py(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// A small exact value: k/8 (|k| ≤ 8), or k/2 (|k| ≤ 2) when sums must be exact in float16.
fn small(seed: &mut u64, half: bool) -> f64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    if half {
        ((*seed % 5) as f64 - 2.0) / 2.0
    } else {
        ((*seed % 17) as f64 - 8.0) / 8.0
    }
}

/// Swizzle modes a stored `cols`-wide operand of `t` admits (its rows hold whole atoms).
fn swizzles(t: &str, cols: i64) -> Vec<u32> {
    let e = 128 / bits(t);
    (0..4).filter(|&s| s == 0 || cols % (e << s) == 0).collect()
}

// ------------------------------------------------------------------ the matrix

#[test]
fn matrix_shapes_and_dtypes() {
    let shapes = [(64, 8, 16), (64, 24, 32), (64, 64, 64), (128, 128, 32), (64, 256, 16), (128, 40, 64)];
    for (m, n, k) in shapes {
        for ab in ["float16", "bfloat16"] {
            Case::new(m, n, k, ab).check();
        }
    }
    // tf32 (k8), fp8 (k32, mixed e4m3/e5m2), float16 accumulators.
    for (m, n, k, a, b, acc) in [
        (64, 16, 32, "float32", "float32", "float32"),
        (128, 64, 8, "float32", "float32", "float32"),
        (64, 32, 64, "float8_e4m3fn", "float8_e4m3fn", "float32"),
        (64, 16, 128, "float8_e5m2", "float8_e4m3fn", "float32"),
        (64, 32, 64, "float8_e4m3fn", "float8_e5m2", "float16"),
        (64, 64, 32, "float16", "float16", "float16"),
    ] {
        let mut c = Case::new(m, n, k, a);
        c.b = b;
        c.acc = acc;
        c.check();
    }
}

#[test]
fn matrix_transposes_and_swizzles() {
    for ab in ["float16", "bfloat16"] {
        for (m, n, k) in [(64, 64, 64), (128, 128, 32), (64, 16, 16)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let mut c = Case::new(m, n, k, ab);
                (c.trans_a, c.trans_b) = (ta, tb);
                let a_sw = swizzles(ab, c.a_shape().1);
                let b_sw = swizzles(ab, c.b_shape().1);
                for (i, &sa) in a_sw.iter().enumerate() {
                    c.sw_a = Some(sa);
                    c.sw_b = b_sw[(i + usize::from(tb)) % b_sw.len()];
                    let l = c.check();
                    let text = l.lir.to_string();
                    let major = |t: bool| if t { "MN-major" } else { "K-major" };
                    assert!(text.contains(&format!("desc(A_s[0]; {}", major(ta))), "{c:?}\n{text}");
                    assert!(text.contains(&format!("desc(B_s[0]; {}", major(tb))), "{c:?}\n{text}");
                }
            }
        }
    }
}

#[test]
fn register_a_accum_and_instruction_widths() {
    for (m, n, k, ab) in [(64, 32, 32, "float16"), (128, 64, 16, "bfloat16"), (64, 16, 64, "float8_e4m3fn")] {
        let mut c = Case::new(m, n, k, ab);
        c.sw_a = None;
        c.sw_b = swizzles(ab, k).last().copied().unwrap_or(0);
        for accum in [None, Some("True"), Some("False"), Some("run")] {
            c.accum = accum;
            let l = c.check();
            let g = l.explain.iter().find(|x| x.op == "gemm_async").unwrap();
            assert!(g.render().contains("(rs)"), "{}", g.render());
        }
    }
    // N = 384 and 320 tile into the widest instruction that divides them.
    for (n, want) in [(384, "m64n192k16"), (320, "m64n160k16"), (512, "m64n256k16")] {
        let l = Case::new(64, n, 16, "bfloat16").check();
        let g = l.explain.iter().find(|x| x.op == "gemm_async").unwrap();
        assert!(g.render().contains(want), "{n}: {}", g.render());
    }
}

/// A width the shared B cannot take is a limit, not a decline: MN-major B of 320 columns
/// in 128-byte swizzle atoms (64 bf16) fits neither m64n160 nor m64n80, and m64n64 ×5 runs.
#[test]
fn a_width_the_shared_operand_refuses_falls_back_to_a_narrower_one() {
    let mut c = Case::new(64, 320, 16, "bfloat16");
    c.trans_b = true;
    c.sw_b = 3;
    let l = c.check();
    let g = l.explain.iter().find(|x| x.op == "gemm_async").unwrap();
    let text = g.render();
    assert!(text.contains("m64n64k16"), "{text}");
    // Both widths fail on the same operand: one limit names both (in the widest's words).
    assert!(text.contains("limit: m64n160, m64n80: B `B_s` is not a canonical wgmma tile"), "{text}");
}

#[test]
fn explain_shows_instructions_registers_and_descriptors() {
    let mut c = Case::new(128, 256, 64, "bfloat16");
    c.trans_b = true;
    let l = lower(&c.script());
    let g = l.explain.iter().find(|x| x.op == "gemm_async").unwrap();
    let text = g.render();
    for want in [
        "chosen   wgmma (prio 10): wgmma.mma_async.m64n256k16.f32.bf16.bf16 (ss): 128×256×64 = 2×1×4 instructions; fence, 8 wgmma, commit_group",
        "match: D `acc`: 2×1 accumulator fragments (mt, nt) at registers [0, 128) + 128·mt",
        "match: A `A_s`: shared, K-major, 128B swizzle, LBO 16 B (unused), SBO 1024 B; 2×4 blocks (mt, kt) start at element 0 + 4096·mt + 16·kt",
        "match: B `B_s`: shared, MN-major, 128B swizzle, LBO 8192 B, SBO 1024 B; 1×4 blocks (nt, kt) start at element 0 + 1024·kt",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let lir = l.lir.to_string();
    assert_eq!(lir.matches("wgmma.m64n256k16").count(), 8, "{lir}");
    assert_eq!(lir.matches("wgmma.fence").count(), 1);
    assert_eq!(lir.matches("wgmma.commit_group").count(), 1);
}

// ------------------------------------------------------------------ declines

/// The wgmma variant's rule and reason for the gemm_async of `src`.
fn declined(src: &str) -> (Rule, String) {
    let k = parse(src);
    let (ex, res) = tirx_lower::explain_kernel(&k, &Default::default());
    assert!(res.is_err(), "expected the gemm_async to be declined:\n{src}");
    let c = ex.iter().find(|c| c.op == "gemm_async").expect("the call");
    let t = tried(c, "wgmma");
    assert!(!t.accepted, "{}", c.render());
    (t.rule.unwrap(), t.reason.clone())
}

#[test]
fn declines_per_rule() {
    let c = Case::new(64, 64, 64, "bfloat16");
    let src = c.script();
    // Not a canonical wgmma tile: B row-major without a swizzle (rows of 128 bytes, no core matrices).
    let bad = src.replace(
        "layout=mma_shared_layout(\"bfloat16\", 3, (64, 64)))\n    acc",
        "layout=TileLayout(S[64, 64]))\n    acc",
    );
    let (r, why) = declined(&bad);
    assert_eq!(r, CommonRule::Layout, "{why}");
    assert!(why.contains("B `B_s` is not a canonical wgmma tile") && why.contains("element (1, 0)"), "{why}");
    // Wrong swizzle: the 128-byte XOR at chunk granularity 16 rows (atom 4).
    let bad = src.replace(
        "layout=mma_shared_layout(\"bfloat16\", 3, (64, 64)))\n    acc",
        "layout=ComposeLayout(3, 3, 4, TileLayout(S[64, 64])))\n    acc",
    );
    let (r, why) = declined(&bad);
    assert_eq!(r, GemmRule::Swizzle, "{why}");
    assert!(why.contains("ComposeLayout(3, 3, 4)"), "{why}");
    // Misaligned base: a region one row into the swizzle pattern, and a symbolic begin of half a pattern.
    let mut big = Case::new(64, 64, 64, "bfloat16");
    big.trans_a = false;
    let shifted = big
        .script()
        .replace("A_s = T.alloc_buffer((64, 64)", "A_s = T.alloc_buffer((128, 64)")
        .replace(
            "mma_shared_layout(\"bfloat16\", 3, (64, 64)))\n    Tx.warpgroup.copy(A_s",
            "mma_shared_layout(\"bfloat16\", 3, (128, 64)))\n    Tx.warpgroup.copy(A_s",
        )
        .replace("A_s[0:64, 0:64], B_s", "A_s[1:65, 0:64], B_s");
    let (r, why) = declined(&shifted);
    assert_eq!(r, GemmRule::Alignment, "{why}");
    assert!(why.contains("misaligned base") && why.contains("block 0 starts at element 64"), "{why}");
    let symbolic = shifted
        .replace("A_s[1:65, 0:64], B_s", "A_s[i * 4:i * 4 + 64, 0:64], B_s")
        .replace("    Tx.warpgroup.gemm_async", "    for i in range(2):\n        Tx.warpgroup.gemm_async");
    let (r, why) = declined(&symbolic);
    assert_eq!(r, GemmRule::Alignment, "{why}");
    assert!(why.contains("steps of 256 elements (512 bytes), not whole 1024-byte swizzle periods"), "{why}");
    // Wrong register layout: the accumulator laid out row by row per thread.
    let bad = src.replace(&c.acc_layout(), "TileLayout(S[(64, 2, 32):(1@tid_in_wg, 64@tid_in_wg, 1)])");
    let (r, why) = declined(&bad);
    assert_eq!(r, GemmRule::Fragment, "{why}");
    assert!(why.contains("not the wgmma accumulator fragment") && why.contains("S[(4, 2, 8, 8, 4, 2)"), "{why}");
    // Said once for every width it holds at (issue 27 defect 15: it was repeated per width).
    let blocked = why.split("; ").filter(|w| w.contains("not the wgmma accumulator fragment")).collect::<Vec<_>>();
    assert_eq!(blocked.len(), 1, "{why}");
    assert!(blocked[0].starts_with("m64n64, m64n"), "{why}");
    // Types: bfloat16 has no float16 accumulator.
    let mut h = Case::new(64, 64, 64, "bfloat16");
    h.acc = "float16";
    let (r, why) = declined(&h.script());
    assert_eq!(r, CommonRule::Dtype, "{why}");
    // B in registers.
    let bad = src.replace(
        "B_s = T.alloc_buffer((64, 64), \"bfloat16\", scope=\"shared\"",
        "B_s = T.alloc_buffer((64, 64), \"bfloat16\", scope=\"local\"",
    );
    let (r, _) = declined(&bad.replace(
        "layout=mma_shared_layout(\"bfloat16\", 3, (64, 64)))\n    acc",
        "layout=TileLayout(S[(64, 64):(1@tid_in_wg, 1)]))\n    acc",
    ));
    assert_eq!(r, CommonRule::OperandScope);
    // Part of the warpgroup.
    let bad =
        src.replace("    Tx.warpgroup.gemm_async", "    if T.thread_id_in_wg() < 64:\n        Tx.warpgroup.gemm_async");
    let (r, why) = declined(
        &bad.replace("T.thread_id([128])", "tw = T.thread_id_in_wg([128]); T.thread_id([128])")
            .replace("T.thread_id_in_wg() < 64", "tw < 64"),
    );
    assert_eq!(r, CommonRule::AllThreadsActive, "{why}");
}

#[test]
fn declines_older_targets() {
    let src = Case::new(64, 64, 64, "bfloat16").script();
    let k = parse(&src);
    let (ex, _) = tirx_lower::explain_kernel(&k, &tirx_lower::LowerOptions::for_arch(tirx_ir::Arch::SM_90));
    let c = ex.iter().find(|c| c.op == "gemm_async").unwrap();
    assert_eq!(rule(c, "wgmma"), CommonRule::Arch);
    assert!(tried(c, "wgmma").reason.contains("needs sm_90a; target is sm_90"), "{}", c.render());
}

// ------------------------------------------------------------------ asynchrony

/// Lowers `src` and simulates it with zero inputs: the simulator's error.
fn sim_error(src: &str) -> tirx_sim::SimError {
    let k = parse(src);
    let l = tirx_lower::lower_kernel(&k, &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, src)));
    let mut params: Vec<Vec<u8>> = l
        .lir
        .params
        .iter()
        .map(|p| vec![0u8; (l.lir.buf(*p).elems * l.lir.buf(*p).dtype.bytes() as i64) as usize])
        .collect();
    match tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()) {
        Err(e) => e,
        Ok(_) => panic!("expected a simulator error:\n{src}"),
    }
}

#[test]
fn early_reads_writes_and_overwrites_are_errors() {
    let c = Case::new(64, 64, 64, "bfloat16");
    let gemm_line = |src: &str| src.lines().position(|l| l.contains("Tx.warpgroup.gemm_async(")).unwrap() + 1;
    for (before, what) in [
        ("Tx.warpgroup.copy(D[0:64, 0:64], acc[0:64, 0:64])", "reads register `acc["),
        ("Tx.warpgroup.fill(acc[0:64, 0:64], 0.0)", "writes register `acc["),
        ("Tx.warpgroup.copy(B_s[0:64, 0:64], B[0:64, 0:64])", "writes `B_s` (shared"),
    ] {
        let src = c.script_with(&c.call(), before);
        let e = sim_error(&src);
        assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}\n{src}");
        assert!(e.message.contains(what), "{what}: {e}");
        // The error is at the access and names the wgmma (the gemm_async call).
        let line = |sp: tirx_ir::Span| src[..sp.lo as usize].lines().count();
        assert_eq!(line(e.span), gemm_line(&src) + 1, "{e:?}");
        assert!(e.labels.iter().any(|(s, _)| line(*s) == gemm_line(&src)), "{e:?}");
    }
    // Forgetting the proxy fence: the wgmma reads what the generic proxy wrote.
    let src = c.script().replace("    T.ptx.fence.proxy.async_.shared__cta()\n", "");
    let e = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("through the async proxy"), "{e}");
    // Forgetting the wait: the warpgroup exits with the wgmma pending (after reading acc).
    let src = c.script().replace("    T.ptx.wgmma.wait_group(0)\n", "");
    let e = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
}

#[test]
fn operands_copied_with_cp_async_are_read_after_they_land() {
    let c = Case::new(64, 64, 64, "bfloat16");
    let copy = "    Tx.warpgroup.copy(B_s[0:64, 0:64], B[0:64, 0:64])\n";
    let issue = "    Tx.warpgroup.copy_async(B_s[0:64, 0:64], B[0:64, 0:64])\n    T.ptx.cp_async.commit_group()\n";
    assert!(c.script().contains(copy));
    // Waited for, then fenced: the wgmma reads the landed bytes.
    let src = c.script().replace(copy, &format!("{issue}    T.ptx.cp_async.wait_group(0)\n"));
    let l = lower(&src);
    let mut params: Vec<Vec<u8>> = l
        .lir
        .params
        .iter()
        .map(|p| vec![0u8; (l.lir.buf(*p).elems * l.lir.buf(*p).dtype.bytes() as i64) as usize])
        .collect();
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()) {
        panic!("{e}\n{src}");
    }
    // Not waited for: the wgmma reads a destination the copy has yet to write.
    let e = sim_error(&c.script().replace(copy, issue));
    assert!(e.message.contains("cp.async"), "{e}");
    // Waited for after the fence: the landing is a generic-proxy write no fence follows.
    let src = c.script().replace(copy, issue).replace(
        "    T.cuda.cta_sync()\n    Tx.warpgroup.gemm_async",
        "    T.ptx.cp_async.wait_group(0)\n    T.cuda.cta_sync()\n    Tx.warpgroup.gemm_async",
    );
    let e = sim_error(&src);
    assert_eq!(e.kind, SimErrorKind::Wgmma, "{e}");
    assert!(e.message.contains("no `fence.proxy.async` of that thread follows the write"), "{e}");
}

/// Simulates `src` with zeroed parameters: `Ok` or the simulator's error.
fn sim_run(src: &str) -> Result<(), tirx_sim::SimError> {
    let l =
        tirx_lower::lower_kernel(&parse(src), &Default::default()).unwrap_or_else(|d| panic!("{}", render(&d, src)));
    let mut params: Vec<Vec<u8>> = l
        .lir
        .params
        .iter()
        .map(|p| vec![0u8; (l.lir.buf(*p).elems * l.lir.buf(*p).dtype.bytes() as i64) as usize])
        .collect();
    tirx_sim::simulate(&l.lir, &mut params, &SimOptions::default()).map(|_| ())
}

/// Issue 27 defect 10: after its own `wait_group`, every thread of the waiting warpgroup
/// may overwrite the wgmma's shared operands (the wait is warpgroup-collective, and the
/// wgmma's reads are complete when it returns); another warpgroup needs a barrier with it.
#[test]
fn shared_operands_may_be_overwritten_after_the_warpgroups_own_wait() {
    let c = Case::new(64, 64, 64, "bfloat16");
    let wait = "    T.ptx.wgmma.wait_group(0)\n";
    let refill = "    Tx.warpgroup.copy(B_s[0:64, 0:64], B[0:64, 0:64])\n";
    assert!(c.script().contains(wait));
    // The same warpgroup, every thread right after its wait: not a race.
    let src = c.script().replace(wait, &format!("{wait}{refill}"));
    if let Err(e) = sim_run(&src) {
        panic!("{e}\n{src}");
    }
    // Two warpgroups: the second overwrites B_s with no barrier after the first's wait: reported;
    // with a CTA barrier after the wait: ordered.
    let two = c
        .script()
        .replace("T.warpgroup_id([1])", "T.warpgroup_id([2])")
        .replace("T.thread_id([128])", "T.thread_id([256])")
        .replace("    Tx.warpgroup.gemm_async(", "    if wg == 0:\n        Tx.warpgroup.gemm_async(")
        .replace(
            "    T.ptx.wgmma.wait_group(0)\n    Tx.warpgroup.copy(D[0:64, 0:64], acc[0:64, 0:64])\n",
            "        T.ptx.wgmma.wait_group(0)\n        Tx.warpgroup.copy(D[0:64, 0:64], acc[0:64, 0:64])\n",
        );
    for (sync, race) in [("", true), ("    T.cuda.cta_sync()\n", false)] {
        let src = format!("{two}{sync}    if wg == 1:\n        Tx.warpgroup.copy(B_s[0:64, 0:64], B[0:64, 0:64])\n");
        match sim_run(&src) {
            // Reported as a race, or as a write the wgmma still reads, whichever warp order shows it.
            Err(e) if race => assert!(matches!(e.kind, SimErrorKind::DataRace | SimErrorKind::Wgmma), "{e}\n{src}"),
            Err(e) => panic!("{e}\n{src}"),
            Ok(()) if race => panic!("expected a race:\n{src}"),
            Ok(()) => {}
        }
    }
}

#[test]
fn ptx_statements_check_warpgroups_counts_and_targets() {
    let c = Case::new(64, 64, 64, "bfloat16");
    let src = c.script();
    for (from, to, want) in [
        ("T.ptx.wgmma.wait_group(0)", "T.ptx.setmaxnreg.inc(250)", "multiple of 8 in 24..=256"),
        (
            "T.ptx.wgmma.wait_group(0)",
            "if T.warp_id_in_wg() == 0:\n        T.ptx.wgmma.wait_group(0)",
            "warpgroup instruction",
        ),
        ("T.ptx.wgmma.wait_group(0)", "T.ptx.bar.sync(3, 128)", "scripts use ids 9..=15"),
        ("T.ptx.wgmma.wait_group(0)", "T.ptx.bar.arrive(9, 100)", "multiple of 32"),
    ] {
        let bad = src
            .replace(from, to)
            .replace("T.warp_id_in_wg([4])", "wi = T.warp_id_in_wg([4])")
            .replace("T.warp_id_in_wg() == 0", "wi == 0");
        let d = lower_errors(&bad);
        let text = render(&d, &bad);
        assert!(text.contains(want), "{want}:\n{text}");
    }
    let k = parse(&src);
    let d = tirx_lower::lower_kernel(&k, &tirx_lower::LowerOptions::for_arch(tirx_ir::Arch::SM_90)).unwrap_err();
    assert!(
        render(&d, &src).contains("`T.ptx.wgmma.wait_group` needs sm_90a; the target is sm_90"),
        "{}",
        render(&d, &src)
    );
}
