//! Shared helpers of the lowering tests: kernel scripts for copy round trips,
//! lowering with rendered diagnostics on failure, and simulation.
#![allow(dead_code)]

use tirx_ir::hir::Kernel;
use tirx_ir::{DType, Diagnostic};
pub use tirx_lower::Rule;
use tirx_lower::{CallExplain, Lowered};
use tirx_sim::value::{from_bytes, round_to, to_bytes};

pub fn parse(src: &str) -> Kernel {
    match tirx_script::parse_kernel("k.py", src) {
        Ok(k) => k,
        Err(d) => panic!("parse failed:\n{}\n{src}", tirx_ir::diag::render(&d, "k.py", src, false)),
    }
}

pub fn lower(src: &str) -> Lowered {
    let k = parse(src);
    // A kernel with scalar parameters needs their values, which a dumped file does not carry.
    if k.params.iter().all(|p| p.scalar.is_none()) {
        dump(src);
    }
    match tirx_lower::lower_kernel(&k, &Default::default()) {
        Ok(l) => {
            generates_cuda(&l, src);
            simulates_cleanly(&l, src);
            lowers_for_older_targets(&k, src);
            l
        }
        Err(d) => panic!("lowering failed:\n{}", tirx_ir::diag::render(&d, "k.py", src, false)),
    }
}

/// `check` ok ⇒ `lower` ok: a kernel that lowers also generates CUDA (every
/// check CUDA generation makes is a lowering check first).
pub fn generates_cuda(l: &Lowered, src: &str) {
    if let Err(e) = tirx_cuda::generate(&l.lir) {
        panic!("lowered, but CUDA generation failed: {e}\n{src}");
    }
}

/// Every kernel a test lowers, lowered for older targets: no instruction the target
/// lacks (e.g. no sm_90 `stmatrix` for sm_80), and never an internal error.
fn lowers_for_older_targets(k: &Kernel, src: &str) {
    use tirx_ir::Arch;
    for arch in [Arch::SM_80, Arch::SM_75] {
        match tirx_lower::lower_kernel(k, &tirx_lower::LowerOptions::for_arch(arch)) {
            Ok(l) => {
                assert!(l.lir.first_unsupported(arch).is_none(), "{arch}: an instruction it lacks\n{src}");
                generates_cuda(&l, src);
            }
            Err(d) => assert!(
                !d.iter().any(|d| d.internal),
                "{arch}: internal error\n{}",
                tirx_ir::diag::render(&d, "k.py", src, false)
            ),
        }
    }
}

/// Every kernel a test lowers must also be a valid program: no race, out-of-bounds
/// or misaligned access, divergent barrier or partial-warp collective in the
/// simulator (zeroed inputs; kernels with parameters over 64 MiB are skipped).
fn simulates_cleanly(l: &Lowered, src: &str) {
    // A kernel with scalar parameters needs its arguments: its tests simulate it with them.
    if l.lir.is_symbolic() {
        return;
    }
    let sizes: Vec<usize> = l
        .lir
        .params
        .iter()
        .map(|p| l.lir.buf(*p))
        .map(|b| b.elems.max(0) as usize * b.dtype.bytes() as usize)
        .collect();
    if sizes.iter().sum::<usize>() > 64 << 20 {
        return;
    }
    let mut params: Vec<Vec<u8>> = sizes.iter().map(|&n| vec![0u8; n]).collect();
    let opts = tirx_sim::SimOptions { grid_limit: Some(64), ..Default::default() };
    if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &opts) {
        panic!(
            "the lowered kernel is not a valid program:\n{}\n{src}",
            tirx_ir::diag::render(&[e.to_diagnostic()], "k.py", src, false)
        );
    }
}

/// With `TIRX_DUMP_KERNELS=DIR`, every kernel a test lowers is also written to
/// `DIR/<test>_<hash>.py`, so `scripts/gpu-test.sh DIR` can run the same matrix on a GPU.
fn dump(src: &str) {
    use std::hash::{Hash, Hasher};
    let Some(dir) = std::env::var_os("TIRX_DUMP_KERNELS") else { return };
    let mut h = std::collections::hash_map::DefaultHasher::new();
    src.hash(&mut h);
    let test = std::thread::current().name().unwrap_or("kernel").replace("::", "_");
    let path = std::path::Path::new(&dir).join(format!("{test}_{:016x}.py", h.finish()));
    std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, src)).expect("write TIRX_DUMP_KERNELS");
}

pub fn lower_errors(src: &str) -> Vec<Diagnostic> {
    match tirx_lower::lower_kernel(&parse(src), &Default::default()) {
        Ok(l) => panic!("expected lowering to fail, got:\n{}", l.lir),
        Err(d) => d,
    }
}

pub fn render(d: &[Diagnostic], src: &str) -> String {
    tirx_ir::diag::render(d, "k.py", src, false)
}

/// A dtype by its script name (`"float16"`).
pub fn dt(name: &str) -> DType {
    DType::from_name(name).unwrap()
}

/// Deterministic values in `[lo, hi)`, exact in `t` (distinct enough that max/min pick one).
pub fn values(t: DType, n: usize, seed: usize, lo: f64, hi: f64) -> Vec<f64> {
    (0..n).map(|i| round_to(t, lo + (hi - lo) * (((i * 7919 + seed * 104729 + 13) % 1009) as f64 / 1009.0))).collect()
}

/// Lowers (with the common checks) and simulates with `params`, which must
/// raise no simulator warning; returns the lowering and the parameters decoded.
pub fn run(src: &str, params: &[(DType, Vec<f64>)]) -> (Lowered, Vec<Vec<f64>>) {
    run_with(src, &[], params)
}

/// [`run`] for a kernel with integer scalar parameters (`scalars`, in order).
pub fn run_with(src: &str, scalars: &[i64], params: &[(DType, Vec<f64>)]) -> (Lowered, Vec<Vec<f64>>) {
    let l = lower(src);
    let scalars: Vec<tirx_ir::lir::ScalarValue> = scalars.iter().map(|&v| tirx_ir::lir::ScalarValue::Int(v)).collect();
    let mut bytes: Vec<Vec<u8>> = params.iter().map(|(t, v)| to_bytes(*t, v)).collect();
    match tirx_sim::simulate_args(&l.lir, &mut bytes, &scalars, &tirx_sim::SimOptions::default()) {
        Ok(rep) => assert!(rep.warnings.is_empty(), "simulator warnings: {:?}\n{src}", rep.warnings),
        Err(e) => panic!("simulation failed: {e}\n{}\n{src}", l.lir),
    }
    let out = params.iter().zip(&bytes).map(|((t, _), b)| from_bytes(*t, b)).collect();
    (l, out)
}

/// A script region: `b0:b0+e0, b1:b1+e1, ...`.
pub fn region(begin: &[i64], ext: &[i64]) -> String {
    begin.iter().zip(ext).map(|(b, e)| format!("{b}:{}", b + e)).collect::<Vec<_>>().join(", ")
}

/// One global → shared → global round trip.
#[derive(Clone, Debug)]
pub struct RoundTrip {
    /// `warp`, `wg`, `cta` or `thread`.
    pub scope: &'static str,
    pub threads: i64,
    pub ctas: i64,
    pub dtype: &'static str,
    pub g_shape: Vec<i64>,
    /// `(begin, extent)` per dim of the global region.
    pub g_region: Vec<(i64, i64)>,
    pub s_shape: Vec<i64>,
    /// Script layout expression of the shared buffer (default row-major).
    pub s_layout: Option<String>,
    /// `dispatch=` forced on both copies.
    pub dispatch: Option<&'static str>,
}

impl RoundTrip {
    pub fn full(scope: &'static str, threads: i64, shape: &[i64], dtype: &'static str) -> RoundTrip {
        RoundTrip {
            scope,
            threads,
            ctas: 1,
            dtype,
            g_shape: shape.to_vec(),
            g_region: shape.iter().map(|&e| (0, e)).collect(),
            s_shape: shape.to_vec(),
            s_layout: None,
            dispatch: None,
        }
    }

    /// The same round trip with `dispatch=variant` on both copies.
    pub fn forced(mut self, variant: &'static str) -> RoundTrip {
        self.dispatch = Some(variant);
        self
    }

    pub fn script(&self) -> String {
        let tup = |v: &[i64]| format!("({},)", v.iter().map(|e| e.to_string()).collect::<Vec<_>>().join(", "));
        let g_reg = self.g_region.iter().map(|(b, e)| format!("{b}:{}", b + e)).collect::<Vec<_>>().join(", ");
        let s_reg = self.s_shape.iter().map(|e| format!("0:{e}")).collect::<Vec<_>>().join(", ");
        let layout = self.s_layout.as_ref().map(|l| format!(", layout={l}")).unwrap_or_default();
        let forced = self.dispatch.map(|v| format!(", dispatch=\"{v}\"")).unwrap_or_default();
        let call = match self.scope {
            "thread" => "Tx.copy".to_string(),
            s => format!("Tx.{s}.copy"),
        };
        format!(
            r#"from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.layout import S, TileLayout, ComposeLayout

@T.prim_func
def kernel(A_ptr: T.handle, B_ptr: T.handle):
    A = T.match_buffer(A_ptr, {g}, "{dt}")
    B = T.match_buffer(B_ptr, {g}, "{dt}")
    T.device_entry()
    T.cta_id([{ctas}]); T.thread_id([{threads}])
    A_smem = T.alloc_buffer({s}, "{dt}", scope="shared"{layout})
    {call}(A_smem[{s_reg}], A[{g_reg}]{forced})
    T.cuda.cta_sync()
    {call}(B[{g_reg}], A_smem[{s_reg}]{forced})
"#,
            g = tup(&self.g_shape),
            s = tup(&self.s_shape),
            dt = self.dtype,
            ctas = self.ctas,
            threads = self.threads,
        )
    }

    /// Lowers, simulates with A = a distinct pattern and B = 0, and checks
    /// B[region] == A[region] with the rest of B untouched. Returns the lowering.
    pub fn check(&self) -> Lowered {
        let src = self.script();
        let l = lower(&src);
        let dt = DType::from_name(self.dtype).unwrap();
        let n: i64 = self.g_shape.iter().product();
        let a = pattern(dt, n as usize);
        let mut params = vec![a.clone(), vec![0u8; a.len()]];
        if let Err(e) = tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()) {
            panic!("simulation failed: {e:?}\n{}\n{src}", l.lir);
        }
        let bytes = dt.bytes() as usize;
        for i in 0..n as usize {
            let inside = in_region(i as i64, &self.g_shape, &self.g_region);
            let want = if inside { &a[i * bytes..(i + 1) * bytes] } else { &[0u8; 8][..bytes] };
            let got = &params[1][i * bytes..(i + 1) * bytes];
            assert_eq!(got, want, "B element {i} (inside region: {inside}) wrong\n{}\n{src}", l.lir);
        }
        l
    }
}

fn in_region(mut i: i64, shape: &[i64], region: &[(i64, i64)]) -> bool {
    let mut inside = true;
    for d in (0..shape.len()).rev() {
        let c = i % shape[d];
        i /= shape[d];
        inside &= c >= region[d].0 && c < region[d].0 + region[d].1;
    }
    inside
}

/// Distinct, finite element bit patterns (no NaNs, so any copy path preserves them).
pub fn pattern(dt: DType, n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * dt.bytes() as usize);
    for i in 0..n {
        match dt.bytes() {
            1 => out.push((i % 120) as u8 + 1),
            2 => out.extend_from_slice(&(0x3C00u16 + (i % 0x3000) as u16).to_le_bytes()),
            4 if dt.is_float() => out.extend_from_slice(&((i + 1) as f32).to_le_bytes()),
            4 => out.extend_from_slice(&((i + 1) as u32).to_le_bytes()),
            _ => out.extend_from_slice(&((i + 1) as f64).to_le_bytes()),
        }
    }
    out
}

/// The explain record of call `i`.
pub fn call(l: &Lowered, i: usize) -> &CallExplain {
    &l.explain[i]
}

pub fn tried<'a>(c: &'a CallExplain, variant: &str) -> &'a tirx_lower::Tried {
    c.tried.iter().find(|t| t.variant == variant).unwrap_or_else(|| panic!("{variant} not tried: {c:?}"))
}

/// The rule `variant` declined call `c` by (it must have declined).
pub fn rule(c: &CallExplain, variant: &str) -> Rule {
    let t = tried(c, variant);
    assert!(!t.accepted, "{variant} accepted:\n{}", c.render());
    t.rule.unwrap_or_else(|| panic!("{variant} declined without a rule: {t:?}"))
}

/// Simulates `src` on `params` (each buffer parameter's bytes): the buffers afterwards, or the
/// simulator's error with its rendering against the source.
pub fn simulate_on(src: &str, mut params: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, (tirx_sim::SimError, String)> {
    let l = tirx_lower::lower_kernel(&parse(src), &Default::default())
        .unwrap_or_else(|d| panic!("lowering failed:\n{}", render(&d, src)));
    match tirx_sim::simulate(&l.lir, &mut params, &tirx_sim::SimOptions::default()) {
        Ok(_) => Ok(params),
        Err(e) => {
            let text = render(&[e.to_diagnostic()], src);
            Err((e, text))
        }
    }
}
