//! gemm → mma.m16n8k*: the gemm matrix (shapes 16×8×16 … 64×32×64 × dtype ×
//! beta × transposes, the k8, tf32 and int8 forms, warpgroup and cta scopes),
//! value-checked in the simulator against an f64 reference, and the typed
//! declines. With `TIRX_DUMP_KERNELS=DIR` every kernel is written out for the
//! GPU matrix (`scripts/gpu-test.sh DIR`).
//!
//! Each kernel loads A, B (and C) from global memory into fragment registers
//! with `Tx.warp.copy` (copy → reg), runs the gemm, and stores D. Inputs are
//! small multiples of 1/8 (integers for int8), so every partial sum is exact in
//! f32 and D must equal the f64 reference exactly; `rounding_bound` checks the
//! documented tolerance (one rounding to f32 per instruction, docs/numerics.md
//! §8) on inputs whose sums do round.

mod common;
use common::*;
use tirx_ir::DType;
use tirx_lower::{CommonRule, GemmRule};
use tirx_sim::value::{from_bytes, to_bytes};

/// One gemm kernel of the matrix.
#[derive(Clone, Debug)]
struct Gemm {
    /// Per-warp M, N, K.
    m: i64,
    n: i64,
    k: i64,
    /// Instruction K the layouts are written for (16, 8 or 32).
    inst_k: i64,
    ab: &'static str,
    acc: &'static str,
    beta: Option<f64>,
    trans_a: bool,
    trans_b: bool,
}

/// One iter of a generated layout: extent, stride, axis ("" = registers).
type It = (i64, i64, &'static str);

fn text(dims: &[It]) -> String {
    let dims: Vec<&It> = dims.iter().filter(|d| d.0 != 1).collect();
    let e: Vec<String> = dims.iter().map(|d| d.0.to_string()).collect();
    let s: Vec<String> =
        dims.iter().map(|d| if d.2.is_empty() { d.1.to_string() } else { format!("{}@{}", d.1, d.2) }).collect();
    format!("TileLayout(S[({}):({})])", e.join(", "), s.join(", "))
}

impl Gemm {
    fn new(m: i64, n: i64, k: i64, ab: &'static str) -> Gemm {
        let (inst_k, acc) = match ab {
            "float32" => (8, "float32"),
            "int8" | "uint8" => (32, "int32"),
            _ => (16, "float32"),
        };
        Gemm { m, n, k, inst_k, ab, acc, beta: None, trans_a: false, trans_b: false }
    }
    fn per(&self) -> i64 {
        32 / DType::from_name(self.ab).unwrap().bits() as i64
    }
    fn tiles(&self) -> [i64; 3] {
        [self.m / 16, self.n / 8, self.k / self.inst_k]
    }

    /// D/C fragments: rows (mt, rM, g), columns (nt, t, rN).
    fn d_layout(&self) -> String {
        let [mt, nt, _] = self.tiles();
        text(&[(mt, 4 * nt, ""), (2, 2, ""), (8, 4, "laneid"), (nt, 4, ""), (4, 1, "laneid"), (2, 1, "")])
    }

    /// A fragments: rows (mt, rM, g), columns (kt, kHi, t, e); transposed: columns first.
    fn a_layout(&self) -> String {
        let ([mt, _, kt], p) = (self.tiles(), self.per());
        let na = 16 * self.inst_k / 32;
        let rows = [(mt, na * kt, ""), (2, p, ""), (8, 4, "laneid")];
        let cols = [(kt, na, ""), (self.inst_k / (4 * p), 2 * p, ""), (4, 1, "laneid"), (p, 1, "")];
        if self.trans_a {
            text(&[&cols[..], &rows[..]].concat())
        } else {
            text(&[&rows[..], &cols[..]].concat())
        }
    }

    /// B fragments: rows (kt, kHi, t, e), columns (nt, g); transposed: columns first.
    fn b_layout(&self) -> String {
        let ([_, nt, kt], p) = (self.tiles(), self.per());
        let nb = 8 * self.inst_k / 32;
        let rows = [(kt, nb * nt, ""), (self.inst_k / (4 * p), p, ""), (4, 1, "laneid"), (p, 1, "")];
        let cols = [(nt, nb, ""), (8, 4, "laneid")];
        if self.trans_b {
            text(&[&cols[..], &rows[..]].concat())
        } else {
            text(&[&rows[..], &cols[..]].concat())
        }
    }

    fn a_shape(&self) -> (i64, i64) {
        if self.trans_a {
            (self.k, self.m)
        } else {
            (self.m, self.k)
        }
    }
    fn b_shape(&self) -> (i64, i64) {
        if self.trans_b {
            (self.n, self.k)
        } else {
            (self.k, self.n)
        }
    }

    fn call(&self) -> String {
        let (am, ak) = self.a_shape();
        let (bk, bn) = self.b_shape();
        let (m, n) = (self.m, self.n);
        let beta = self.beta.map(|b| format!(", beta={b:?}")).unwrap_or_default();
        format!(
            "Tx.warp.gemm(D_f[0:{m}, 0:{n}], A_f[0:{am}, 0:{ak}], B_f[0:{bk}, 0:{bn}], C_f[0:{m}, 0:{n}], transpose_A={}, transpose_B={}{beta})",
            py(self.trans_a),
            py(self.trans_b)
        )
    }

    fn script(&self) -> String {
        self.script_with(&self.call())
    }

    /// The kernel with `gemm` as its gemm call.
    fn script_with(&self, gemm: &str) -> String {
        let (am, ak) = self.a_shape();
        let (bk, bn) = self.b_shape();
        let (m, n, ab, acc) = (self.m, self.n, self.ab, self.acc);
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, laneid

@T.prim_func
def gemm(A_ptr: T.handle, B_ptr: T.handle, C_ptr: T.handle, D_ptr: T.handle):
    A = T.match_buffer(A_ptr, ({am}, {ak}), "{ab}")
    B = T.match_buffer(B_ptr, ({bk}, {bn}), "{ab}")
    C = T.match_buffer(C_ptr, ({m}, {n}), "{acc}")
    D = T.match_buffer(D_ptr, ({m}, {n}), "{acc}")
    T.device_entry(); T.cta_id([1]); lane = T.lane_id([32]); T.thread_id([32])
    A_f = T.alloc_buffer(({am}, {ak}), "{ab}", scope="local", layout={al})
    B_f = T.alloc_buffer(({bk}, {bn}), "{ab}", scope="local", layout={bl})
    C_f = T.alloc_buffer(({m}, {n}), "{acc}", scope="local", layout={dl})
    D_f = T.alloc_buffer(({m}, {n}), "{acc}", scope="local", layout={dl})
    Tx.warp.copy(A_f[0:{am}, 0:{ak}], A[0:{am}, 0:{ak}])
    Tx.warp.copy(B_f[0:{bk}, 0:{bn}], B[0:{bk}, 0:{bn}])
    Tx.warp.copy(C_f[0:{m}, 0:{n}], C[0:{m}, 0:{n}])
    {gemm}
    Tx.warp.copy(D[0:{m}, 0:{n}], D_f[0:{m}, 0:{n}])
"#,
            al = self.a_layout(),
            bl = self.b_layout(),
            dl = self.d_layout(),
        )
    }

    /// Lowers (gemm is call 3), simulates with `vals` inputs and checks D against
    /// the f64 reference within `tol(exact, Σ|terms|)`.
    fn check_with(&self, vals: &mut dyn FnMut(DType) -> f64, tol: &dyn Fn(f64, f64) -> f64) -> tirx_lower::Lowered {
        let src = self.script();
        let l = lower(&src);
        let g = call(&l, 3);
        assert_eq!(g.chosen.as_deref(), Some("mma.m16n8k*"), "{}\n{src}", g.render());
        let (abt, acct) = (DType::from_name(self.ab).unwrap(), DType::from_name(self.acc).unwrap());
        let (m, n, k) = (self.m as usize, self.n as usize, self.k as usize);
        let a: Vec<f64> = (0..m * k).map(|_| vals(abt)).collect();
        let b: Vec<f64> = (0..k * n).map(|_| vals(abt)).collect();
        let c: Vec<f64> = (0..m * n).map(|_| vals(acct)).collect();
        // Stored in buffer order (transposed operands swapped).
        let a_buf: Vec<f64> =
            if self.trans_a { (0..k * m).map(|x| a[(x % m) * k + x / m]).collect() } else { a.clone() };
        let b_buf: Vec<f64> =
            if self.trans_b { (0..n * k).map(|x| b[(x % k) * n + x / k]).collect() } else { b.clone() };
        let mut params =
            vec![to_bytes(abt, &a_buf), to_bytes(abt, &b_buf), to_bytes(acct, &c), to_bytes(acct, &vec![0.0; m * n])];
        let rep = tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default())
            .unwrap_or_else(|e| panic!("{e}\n{src}"));
        assert!(rep.warnings.is_empty(), "{:?}\n{src}", rep.warnings);
        let got: Vec<f64> = from_bytes(acct, &params[3]);
        let beta = self.beta.unwrap_or(0.0);
        for i in 0..m {
            for j in 0..n {
                let terms: Vec<f64> = (0..k).map(|x| a[i * k + x] * b[x * n + j]).collect();
                let exact = beta * c[i * n + j] + terms.iter().sum::<f64>();
                let mag = beta * c[i * n + j].abs() + terms.iter().map(|t| t.abs()).sum::<f64>();
                let d = got[i * n + j];
                assert!(
                    (d - exact).abs() <= tol(exact, mag),
                    "{self:?}: D[{i}][{j}] = {d}, reference {exact}\n{}\n{src}",
                    g.render()
                );
            }
        }
        l
    }

    /// Exact inputs: D must equal the reference exactly.
    fn check(&self) -> tirx_lower::Lowered {
        let mut seed = 0x9e3779b97f4a7c15u64 ^ (self.m * 131 + self.n * 17 + self.k) as u64;
        self.check_with(&mut |t| small(&mut seed, t), &|_, _| 0.0)
    }
}

fn py(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

fn next(seed: &mut u64) -> u64 {
    *seed ^= *seed << 13;
    *seed ^= *seed >> 7;
    *seed ^= *seed << 17;
    *seed
}

/// A small value exact in `t`: k/8 for floats (|k| ≤ 8), integers for ints.
fn small(seed: &mut u64, t: DType) -> f64 {
    let x = next(seed);
    match t {
        DType::I8 => (x % 256) as f64 - 128.0,
        DType::U8 => (x % 256) as f64,
        DType::I32 => (x % 2001) as f64 - 1000.0,
        _ => ((x % 17) as f64 - 8.0) / 8.0,
    }
}

// ------------------------------------------------------------------ the matrix

const SHAPES: [(i64, i64, i64); 9] = [
    (16, 8, 16),
    (16, 8, 32),
    (32, 8, 16),
    (16, 16, 16),
    (16, 32, 16),
    (64, 8, 16),
    (32, 16, 32),
    (32, 32, 64),
    (64, 32, 64),
];

#[test]
fn gemm_matrix_shapes_dtypes_beta() {
    for (m, n, k) in SHAPES {
        for ab in ["float16", "bfloat16"] {
            for beta in [None, Some(0.0), Some(1.0)] {
                let mut g = Gemm::new(m, n, k, ab);
                g.beta = beta;
                let l = g.check();
                let c = call(&l, 3);
                let [mt, nt, kt] = g.tiles();
                let t = tried(c, "mma.m16n8k*");
                let t_ptx = if ab == "float16" { "f16" } else { "bf16" };
                let want = format!("m16n8k16.row.col.f32.{t_ptx}.{t_ptx}.f32");
                assert!(t.reason.starts_with(&want), "{}", t.reason);
                assert!(t.reason.contains(&format!("{mt}×{nt}×{kt} tiles, {} mma.sync", mt * nt * kt)), "{}", t.reason);
                // One instruction per tile, exactly (the reference's issue-count check).
                let text = l.lir.to_string();
                assert_eq!(text.matches("mma.m16n8k16").count() as i64, mt * nt * kt, "{text}");
                assert_eq!(text.contains("D_f[0] = 0.0"), beta != Some(1.0), "{text}");
            }
        }
    }
}

#[test]
fn gemm_matrix_transposes() {
    for (m, n, k) in [(16, 8, 16), (32, 16, 32), (64, 32, 64)] {
        for ab in ["float16", "bfloat16"] {
            for (ta, tb) in [(false, true), (true, false), (true, true)] {
                let mut g = Gemm::new(m, n, k, ab);
                (g.trans_a, g.trans_b, g.beta) = (ta, tb, Some(1.0));
                g.check();
            }
        }
    }
}

#[test]
fn k8_tf32_and_int8_forms() {
    // f16/bf16 with layouts written for m16n8k8: at K = 8 and 24 k16 does not fit and k8
    // does; at K = 16 two k8 fragments along K are exactly the k16 fragment, which wins.
    for (m, n, k) in [(16, 8, 8), (32, 16, 24), (16, 8, 16)] {
        for ab in ["float16", "bfloat16"] {
            let mut g = Gemm::new(m, n, k, ab);
            (g.inst_k, g.beta) = (8, Some(1.0));
            let l = g.check();
            let c = call(&l, 3);
            let (want, limit) = if k % 16 == 0 { ("m16n8k16.", false) } else { ("m16n8k8.", true) };
            assert!(tried(c, "mma.m16n8k*").reason.starts_with(want), "{}", c.render());
            assert_eq!(c.limits.iter().any(|x| x.starts_with("m16n8k16: K = ")), limit, "{}", c.render());
        }
    }
    for (m, n, k) in [(16, 8, 8), (32, 16, 32)] {
        let mut g = Gemm::new(m, n, k, "float32");
        g.beta = Some(1.0);
        let l = g.check();
        assert!(tried(call(&l, 3), "mma.m16n8k*").reason.starts_with("m16n8k8.row.col.f32.tf32.tf32.f32"));
    }
    for ab in ["int8", "uint8"] {
        for (m, n, k) in [(16, 8, 32), (32, 16, 64)] {
            for (ta, tb) in [(false, false), (true, true)] {
                let mut g = Gemm::new(m, n, k, ab);
                (g.trans_a, g.trans_b, g.beta) = (ta, tb, Some(1.0));
                let l = g.check();
                let want =
                    if ab == "int8" { "m16n8k32.row.col.s32.s8.s8.s32" } else { "m16n8k32.row.col.s32.u8.u8.s32" };
                assert!(tried(call(&l, 3), "mma.m16n8k*").reason.starts_with(want));
            }
        }
    }
}

/// Random f16 / bf16 inputs of full precision: the documented bound, one
/// rounding to f32 per instruction along K, holds (docs/numerics.md §8).
#[test]
fn rounding_bound() {
    for ab in ["float16", "bfloat16"] {
        let mut g = Gemm::new(32, 16, 64, ab);
        g.beta = Some(1.0);
        let kt = g.tiles()[2] as f64;
        let mut seed = 12345u64;
        let mut vals = |t: DType| {
            let x = next(&mut seed);
            let v = ((x >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 8.0;
            tirx_sim::value::round_to(t, v)
        };
        g.check_with(&mut vals, &|_, mag| kt * 2f64.powi(-24) * mag);
    }
}

// ------------------------------------------------------------------ explain

#[test]
fn explain_shows_instruction_tiles_and_fragments() {
    let mut g = Gemm::new(64, 32, 32, "float16");
    g.beta = Some(1.0);
    let l = lower(&g.script());
    let c = call(&l, 3);
    let text = c.render();
    for want in [
        "chosen   mma.m16n8k* (prio 10): m16n8k16.row.col.f32.f16.f16.f32: 64×32×32 per warp = 4×4×2 tiles, 32 mma.sync, D = A·B + C",
        "match: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+): M 4 × N 4 × K 2 tiles of 16×8×16 per warp",
        "match: D `D_f`: 4×4 accumulator fragments (mt, nt) at registers {0, 1, 2, 3} + 16·mt + 4·nt",
        "match: A `A_f`: 4×2 m16n8k16 A fragments (mt, kt) at registers {0, 2, 4, 6} + 16·mt + 8·kt",
        "match: B `B_f`: 2×4 m16n8k16 B fragments (kt, nt) at registers {0, 2} + 16·kt + 4·nt",
        "match: C `C_f`: 4×4 accumulator fragments (mt, nt) at registers {0, 1, 2, 3} + 16·mt + 4·nt",
    ] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
}

// ------------------------------------------------------------------ declines

fn declined(src: &str, call_index: usize) -> (Rule, String) {
    let k = parse(src);
    let (ex, res) = tirx_lower::explain_kernel(&k, &Default::default());
    assert!(res.is_err(), "expected the gemm to be declined:\n{src}");
    let c = &ex[call_index];
    let t = tried(c, "mma.m16n8k*");
    assert!(!t.accepted, "{}", c.render());
    (t.rule.unwrap(), t.reason.clone())
}

#[test]
fn declines_alpha_beta_and_dtypes() {
    let g = Gemm::new(16, 8, 16, "float16");
    let with = |extra: &str| g.script_with(&format!("{}{extra})", g.call().trim_end_matches(')')));
    let (r, why) = declined(&with(", alpha=2.0"), 3);
    assert_eq!(r, GemmRule::Scalar, "{why}");
    assert!(why.contains("alpha = 2"), "{why}");
    let (r, why) = declined(&with(", beta=0.5"), 3);
    assert_eq!(r, GemmRule::Scalar, "{why}");
    assert!(why.contains("beta = 0.5"), "{why}");
    // The reference's unsupported signatures: (f16, f16, f16, f16), (bf16, f16, f32, f32), f32 with int8 A/B.
    for (ab_a, ab_b, acc) in
        [("float16", "float16", "float16"), ("bfloat16", "float16", "float32"), ("int8", "int8", "float32")]
    {
        let src = g
            .script()
            .replace("(16, 16), \"float16\"", &format!("(16, 16), \"{ab_a}\""))
            .replace("(16, 8), \"float16\"", &format!("(16, 8), \"{ab_b}\""))
            .replace("\"float32\"", &format!("\"{acc}\""));
        let (r, why) = declined(&src, 3);
        assert_eq!(r, CommonRule::Dtype, "{ab_a} {ab_b} {acc}: {why}\n{src}");
        assert!(why.contains("no mma.sync takes"), "{why}");
    }
}

#[test]
fn declines_fragment_mismatch_and_names_the_element() {
    let g = Gemm::new(16, 8, 16, "float16");
    // A with g and t swapped between rows and columns' lane strides.
    let bad = g.script().replace(
        "TileLayout(S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)])",
        "TileLayout(S[(2, 8, 2, 4, 2):(2, 1@laneid, 4, 8@laneid, 1)])",
    );
    let (r, why) = declined(&bad, 3);
    assert_eq!(r, GemmRule::Fragment, "{why}");
    assert!(why.contains("A `A_f` is not the m16n8k16 A fragment: its element (0, 2)"), "{why}");
    assert!(why.contains("S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)]"), "{why}");
    // Pairs not adjacent in registers: the k pair at stride 2, rM at stride 1.
    let bad = g.script().replace(
        "TileLayout(S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)])",
        "TileLayout(S[(2, 8, 2, 4, 2):(1, 4@laneid, 4, 1@laneid, 2)])",
    );
    let (r, why) = declined(&bad, 3);
    assert_eq!(r, GemmRule::Fragment, "{why}");
    assert!(why.contains("element 1 of the 32-bit register packing 2"), "{why}");
}

#[test]
fn declines_inactive_lanes_shared_operands_and_old_targets() {
    let g = Gemm::new(16, 8, 16, "float16");
    let guarded = g.script().replace("    Tx.warp.gemm(", "    if lane < 16:\n        Tx.warp.gemm(");
    let (r, why) = declined(&guarded, 3);
    assert_eq!(r, CommonRule::AllThreadsActive, "{why}");
    let shared = g.script().replace(
        "A_f = T.alloc_buffer((16, 16), \"float16\", scope=\"local\", layout=TileLayout(S[(2, 8, 2, 4, 2):(2, 4@laneid, 4, 1@laneid, 1)]))",
        "A_f = T.alloc_buffer((16, 16), \"float16\", scope=\"shared\")",
    );
    let k = parse(&shared);
    let (ex, _) = tirx_lower::explain_kernel(&k, &Default::default());
    let t = tried(&ex[3], "mma.m16n8k*");
    assert_eq!(t.rule, Some(CommonRule::OperandScope.into()), "{}", ex[3].render());
    // bf16 mma needs sm_80.
    let g = Gemm::new(16, 8, 16, "bfloat16");
    let k = parse(&g.script());
    let (ex, _) = tirx_lower::explain_kernel(&k, &tirx_lower::LowerOptions::for_arch(tirx_ir::Arch::SM_75));
    let t = tried(&ex[3], "mma.m16n8k*");
    assert_eq!(t.rule, Some(CommonRule::Arch.into()), "{}", ex[3].render());
    assert!(t.reason.contains("needs sm_80; target is sm_75"), "{}", t.reason);
}

#[test]
fn shapes_that_do_not_multiply_are_script_errors() {
    let g = Gemm::new(16, 8, 16, "float16");
    let src = g.script_with("Tx.warp.gemm(D_f[0:16, 0:8], A_f[0:16, 0:16], B_f[0:8, 0:8], C_f[0:16, 0:8])");
    let err = tirx_script::parse_kernel("k.py", &src).unwrap_err();
    let text = render(&err, &src);
    assert!(text.contains("gemm operands do not multiply: A has K = 16 but B has K = 8"), "{text}");
}

// ------------------------------------------------------------------ wider scopes

/// A cta (4 warps) or warpgroup gemm: warp w computes rows 16w.. of D from its
/// rows of A; B is a warp-level buffer, each warp's own copy.
fn wide_script(scope: &str) -> String {
    let (ids, wax, call) = match scope {
        "cta" => ("T.warp_id([4]); T.lane_id([32]); T.thread_id([128])", "warpid", "Tx.cta"),
        _ => (
            "T.warpgroup_id([1]); T.warp_id_in_wg([4]); T.lane_id([32]); T.thread_id_in_wg([128]); T.thread_id([128])",
            "wid_in_wg",
            "Tx.wg",
        ),
    };
    format!(
        r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, R, TileLayout, laneid, warpid, wid_in_wg

@T.prim_func
def gemm(A_ptr: T.handle, B_ptr: T.handle, D_ptr: T.handle):
    A = T.match_buffer(A_ptr, (64, 16), "float16")
    B = T.match_buffer(B_ptr, (16, 8), "float16")
    D = T.match_buffer(D_ptr, (64, 8), "float32")
    T.device_entry(); T.cta_id([1]); {ids}
    A_f = T.alloc_buffer((64, 16), "float16", scope="local", layout=TileLayout(S[(4, 2, 8, 2, 4, 2):(1@{wax}, 2, 4@laneid, 4, 1@laneid, 1)]))
    B_f = T.alloc_buffer((16, 8), "float16", scope="local", layout=TileLayout(S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)]))
    D_f = T.alloc_buffer((64, 8), "float32", scope="local", layout=TileLayout(S[(4, 2, 8, 4, 2):(1@{wax}, 2, 4@laneid, 1@laneid, 1)]))
    {call}.copy(A_f[0:64, 0:16], A[0:64, 0:16])
    Tx.warp.copy(B_f[0:16, 0:8], B[0:16, 0:8])
    {call}.gemm(D_f[0:64, 0:8], A_f[0:64, 0:16], B_f[0:16, 0:8])
    {call}.copy(D[0:64, 0:8], D_f[0:64, 0:8])
"#
    )
}

#[test]
fn cta_and_warpgroup_scopes_where_each_warp_owns_its_tiles() {
    for scope in ["cta", "wg"] {
        let src = wide_script(scope);
        let l = lower(&src);
        let c = call(&l, 2);
        assert_eq!(c.chosen.as_deref(), Some("mma.m16n8k*"), "{}", c.render());
        assert!(
            c.render().contains("4 warps each compute a 16×8 tile of D; distributed over warps: D, A"),
            "{}",
            c.render()
        );
        let mut seed = 7u64;
        let a: Vec<f64> = (0..64 * 16).map(|_| small(&mut seed, DType::F16)).collect();
        let b: Vec<f64> = (0..16 * 8).map(|_| small(&mut seed, DType::F16)).collect();
        let mut p = vec![to_bytes(DType::F16, &a), to_bytes(DType::F16, &b), vec![0u8; 64 * 8 * 4]];
        tirx_sim::simulate(&l.lir, &mut p, &Default::default()).unwrap_or_else(|e| panic!("{e}"));
        let d: Vec<f64> = from_bytes(DType::F32, &p[2]);
        for i in 0..64 {
            for j in 0..8 {
                let want: f64 = (0..16).map(|x| a[i * 16 + x] * b[x * 8 + j]).sum();
                assert_eq!(d[i * 8 + j], want, "{scope}: D[{i}][{j}]");
            }
        }
    }
    // B replicated over the warps: a replica, declined.
    let src = wide_script("cta").replace(
        "TileLayout(S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)])",
        "TileLayout(S[(2, 4, 2, 8):(2, 1@laneid, 1, 4@laneid)] + R[4:1@warpid])",
    );
    let (r, why) = declined(&src, 2);
    assert_eq!(r, GemmRule::Replicated, "{why}");
    // A distributed over warps along K: warp w's D rows need A rows another warp holds.
    let src = wide_script("cta").replace(
        "TileLayout(S[(4, 2, 8, 2, 4, 2):(1@warpid, 2, 4@laneid, 4, 1@laneid, 1)])",
        "TileLayout(S[(4, 2, 8, 2, 4, 2):(8, 2, 4@laneid, 1@warpid, 1@laneid, 1)])",
    );
    let (r, why) = declined(&src, 2);
    assert_eq!(r, GemmRule::Fragment, "{why}");
    assert!(why.contains("but warp 0 computes with it"), "{why}");
}

// ------------------------------------------------------------------ the GEMM examples

/// `examples/gemm_mma*.py` at another size (M 128, N 256, K 64: 2 × 1 CTAs, 2 K steps),
/// with full-precision random inputs: C within the documented bound of the f64
/// product (K/16 roundings to f32 per element, then the output rounding).
#[test]
fn gemm_examples_at_another_size() {
    for (file, ab, out) in [("gemm_mma.py", DType::F16, DType::F32), ("gemm_mma_bf16.py", DType::BF16, DType::BF16)] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples").join(file);
        let src = std::fs::read_to_string(&path).unwrap().replace("M, N, K = 256, 256, 128", "M, N, K = 128, 256, 64");
        assert!(src.contains("M, N, K = 128, 256, 64"), "{file}: the size line moved");
        let l = lower(&src);
        let g = l.explain.iter().find(|c| c.op == "gemm").unwrap();
        assert_eq!(g.chosen.as_deref(), Some("mma.m16n8k*"), "{}", g.render());
        assert!(tried(g, "mma.m16n8k*").reason.contains("64×32×32 per warp = 4×4×2 tiles, 32 mma.sync"));
        let (m, n, k) = (128usize, 256usize, 64usize);
        let mut seed = 99u64;
        let mut val =
            || tirx_sim::value::round_to(ab, ((next(&mut seed) >> 11) as f64 / (1u64 << 53) as f64 - 0.5) * 4.0);
        let a: Vec<f64> = (0..m * k).map(|_| val()).collect();
        let b: Vec<f64> = (0..k * n).map(|_| val()).collect();
        let mut p = vec![to_bytes(ab, &a), to_bytes(ab, &b), to_bytes(out, &vec![0.0; m * n])];
        tirx_sim::simulate(&l.lir, &mut p, &Default::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        let c: Vec<f64> = from_bytes(out, &p[2]);
        let out_ulp = if out == DType::BF16 { 2f64.powi(-8) } else { 0.0 };
        for i in 0..m {
            for j in 0..n {
                let terms: Vec<f64> = (0..k).map(|x| a[i * k + x] * b[x * n + j]).collect();
                let exact: f64 = terms.iter().sum();
                let mag: f64 = terms.iter().map(|t| t.abs()).sum();
                let bound = (k / 16) as f64 * 2f64.powi(-24) * mag + out_ulp * exact.abs();
                assert!(
                    (c[i * n + j] - exact).abs() <= bound,
                    "{file}: C[{i}][{j}] = {}, reference {exact}",
                    c[i * n + j]
                );
            }
        }
    }
}

/// beta = 0 reads no C (any C is accepted); D may not overwrite C's registers before they are read.
#[test]
fn beta_zero_ignores_c_and_overlapping_c_is_declined() {
    let g = Gemm::new(16, 8, 16, "float16");
    let src = g.script_with("Tx.warp.gemm(D_f[0:16, 0:8], A_f[0:16, 0:16], B_f[0:16, 0:8], C_s[0:16, 0:8])").replace(
        "    Tx.warp.copy(C_f[0:16, 0:8], C[0:16, 0:8])\n",
        "    C_s = T.alloc_buffer((16, 8), \"float32\", scope=\"shared\")\n",
    );
    let l = lower(&src);
    let c = l.explain.iter().find(|c| c.op == "gemm").unwrap();
    assert!(c.render().contains("match: C `C_s`: not read (beta = 0)"), "{}", c.render());
    // acc holds three m-tiles; D = tiles 1, 2 and C = tiles 0, 1: D's tile 1 overwrites C's tile 1.
    let acc = "TileLayout(S[(3, 2, 8, 4, 2):(4, 2, 4@laneid, 1@laneid, 1)])";
    let g = Gemm::new(32, 8, 16, "float16");
    let src = g
        .script_with("Tx.warp.gemm(acc[16:48, 0:8], A_f[0:32, 0:16], B_f[0:16, 0:8], acc[0:32, 0:8], beta=1.0)")
        .replace(
            "    Tx.warp.gemm(",
            &format!(
                "    acc = T.alloc_buffer((48, 8), \"float32\", scope=\"local\", layout={acc})\n    Tx.warp.gemm("
            ),
        );
    let (r, why) = declined(&src, 3);
    assert_eq!(r, CommonRule::Operand, "{why}");
    assert!(why.contains("C and D are both `acc`"), "{why}");
}

/// The fragment a decline shows as a hint is the one-tile layout the value tests use, for
/// every form and operand; and register regions need constant begins.
#[test]
fn decline_hints_are_the_working_layouts() {
    for (ab, k, inst_k) in [("float16", 16, 16), ("float16", 8, 8), ("float32", 8, 8), ("int8", 32, 32)] {
        let mut g = Gemm::new(16, 8, k, ab);
        g.inst_k = inst_k;
        let strip = |l: String| l.trim_start_matches("TileLayout(").trim_end_matches(')').to_string();
        // Lane = g + 8t instead of 4g + t: never a fragment.
        let bad_a = g.a_layout().replace("1@laneid", "8@laneid").replace("4@laneid", "1@laneid");
        let src = g.script().replace(&g.a_layout(), &bad_a);
        let (r, why) = declined(&src, 3);
        assert_eq!(r, GemmRule::Fragment, "{why}");
        assert!(why.contains(&strip(g.a_layout())), "{ab} k{k}: hint is not {}: {why}", g.a_layout());
        let bad_b = g.b_layout().replace("1@laneid", "8@laneid").replace("4@laneid", "1@laneid");
        let (_, why) = declined(&g.script().replace(&g.b_layout(), &bad_b), 3);
        assert!(why.contains(&strip(g.b_layout())), "{ab} k{k}: hint is not {}: {why}", g.b_layout());
        let bad_d = g.d_layout().replace("1@laneid", "8@laneid").replace("4@laneid", "1@laneid");
        let (_, why) = declined(&g.script().replace(&g.d_layout(), &bad_d), 3);
        assert!(why.contains(&strip(g.d_layout())), "{ab} k{k}: hint is not {}: {why}", g.d_layout());
    }
    let g = Gemm::new(16, 8, 32, "float16");
    let src = g.script_with(
        "for i in range(2):\n        Tx.warp.gemm(D_f[0:16, 0:8], A_f[0:16, i * 16:i * 16 + 16], B_f[i * 16:i * 16 + 16, 0:8], D_f[0:16, 0:8], beta=1.0)",
    );
    let (r, why) = declined(&src, 3);
    assert_eq!(r, GemmRule::Fragment, "{why}");
    assert!(why.contains("register regions need constant begins"), "{why}");
}
