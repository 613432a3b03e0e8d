//! `tirx run FILE [--arg A=a.npy …] [--out B=b.npy …] [--check-sim] [--timing]`:
//! lower a kernel script, compile it with NVRTC (CUBIN, cached on disk), run it once
//! on GPU 0, and write the requested outputs.
//!
//! Parameters without `--arg` get a deterministic pattern ([`fill_pattern`]); outputs
//! too, so an element the kernel forgets to write shows up as a pattern value, not as a
//! plausible zero. `--check-sim` runs the CPU simulator on the same inputs and compares
//! every parameter under the rule of `tirx_runtime::compare` (bit-exact for data-only
//! kernels and integers; ≤ 2 ulp f32/f64 (8 where an inexact function's results are reduced
//! across threads), ≤ 1 ulp f16/bf16/fp8 for float math; kernels
//! with `mma.sync` also pass within 2^-10 of the buffer's largest magnitude).
//!
//! The GPU is probed first, so a machine without CUDA gets the "no CUDA driver/NVRTC
//! found" message (exit 1) before anything else happens.

use crate::exit::{runtime_failure, CmdResult, Failure};
use crate::frontend::{eprint_diags, Source};
use crate::out::outln;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tirx_cuda::CudaModule;
use tirx_ir::lir::{LKernel, ScalarValue};
use tirx_ir::DType;
use tirx_runtime::compare::{compare, tolerance_for};
use tirx_runtime::{Compiled, Gpu, GpuInfo, Kernel, LaunchSpec};

#[derive(clap::Args)]
pub struct Args {
    /// Kernel script (TVMScript TIRx).
    pub file: PathBuf,
    /// Input for a parameter, `NAME=file.npy` (repeatable; others get a deterministic pattern),
    /// or `NAME=VALUE` for a scalar parameter (`--arg n=1024`; every scalar needs one).
    #[arg(long = "arg", value_name = "NAME=FILE|VALUE")]
    pub args: Vec<String>,
    /// Write a parameter after the run, `NAME=file.npy` (repeatable).
    #[arg(long = "out", value_name = "NAME=FILE")]
    pub outs: Vec<String>,
    /// Also run the CPU simulator on the same inputs and compare every parameter.
    #[arg(long)]
    pub check_sim: bool,
    /// Print the wall-time split: lowering, NVRTC (or cache hit), module load, launch.
    #[arg(long)]
    pub timing: bool,
    /// Compile with NVRTC even when the CUBIN cache has this kernel (and do not store it).
    #[arg(long)]
    pub no_cache: bool,
}

pub fn run(a: Args) -> CmdResult {
    crate::args::check_unique("--arg", &a.args)?;
    crate::args::check_unique("--out", &a.outs)?;
    let gpu = open_gpu()?;
    let t0 = Instant::now();
    let built = build(&a.file, gpu.info().arch)?;
    let lowering = t0.elapsed();
    let bound = crate::scalars::bind(&a.args, &built.lir, &built.src)?;
    let inputs = param_buffers(&bound.files, &bound.lir)?;
    let (kernel, compiled, load) = compile_and_load(&gpu, &built.cuda, a.no_cache)?;

    let dev = gpu.upload(&inputs).map_err(runtime_failure)?;
    let args = bound.launch_args(&|i| gpu.device_ptr(&dev, i))?;
    let t_launch = Instant::now();
    gpu.launch_args(&kernel, &dev, &args).map_err(runtime_failure)?;
    gpu.sync(&format!("running `{}`", kernel.spec.kernel)).map_err(runtime_failure)?;
    let launch = t_launch.elapsed();
    // The simulator needs the inputs afterwards; otherwise their host memory is reused.
    let (mut bufs, sim_inputs) = if a.check_sim { (inputs.clone(), Some(inputs)) } else { (inputs, None) };
    gpu.download(&dev, &mut bufs).map_err(runtime_failure)?;

    let info = gpu.info();
    outln!(
        "ran `{}` on {} ({}, {}): grid {:?}, block {:?}, {} B dynamic shared memory",
        kernel.spec.kernel,
        info.name,
        info.arch,
        versions(info),
        args.grid,
        kernel.spec.block,
        kernel.spec.dynamic_smem_bytes
    )?;
    if a.timing {
        print_timing(lowering, &compiled, load, launch)?;
    }
    let checked = match sim_inputs {
        Some(inputs) => check_against_sim(&bound.lir, &bound.values, &built.src, inputs, &bufs),
        None => Ok(()),
    };
    crate::npy::save_outs(&a.outs, &bound.lir, &bufs)?;
    checked
}

/// A kernel script lowered and translated to CUDA.
pub(crate) struct Built {
    pub lir: LKernel,
    pub cuda: CudaModule,
    pub src: Source,
}

/// Probes the GPU; no driver/NVRTC/GPU is a user error with the runtime's explanation.
pub(crate) fn open_gpu() -> Result<Gpu, Failure> {
    Gpu::open().map_err(runtime_failure)
}

/// File → HIR → LIR → CUDA, rendering diagnostics (warnings too) on stderr.
pub(crate) fn build(file: &std::path::Path, arch: tirx_ir::Arch) -> Result<Built, Failure> {
    let (kernel, src) = crate::frontend::load_kernel(file)?;
    let lir = crate::frontend::lower(&kernel, &src, arch)?;
    let cuda = tirx_cuda::generate(&lir).map_err(|e| Failure::Internal(e.to_string()))?;
    Ok(Built { lir, cuda, src })
}

/// One byte buffer per parameter: the `--arg` arrays, the pattern for the others but the
/// words of grid group barriers, zeros (their low 31 bits count the CTAs arrived: a pattern
/// there would hang the launch).
pub(crate) fn param_buffers(specs: &[String], k: &LKernel) -> Result<Vec<Vec<u8>>, Failure> {
    let words: Vec<&str> =
        k.grid_group_words().iter().filter_map(|w| k.bufs.get(w.0 as usize)).map(|b| b.name.as_str()).collect();
    crate::npy::load_args_or(specs, k, |b| {
        let elems = usize::try_from(b.elems.max(0)).ok()?;
        if words.contains(&b.name.as_str()) {
            return tirx_sim::try_zeroed_bytes(elems.checked_mul(b.dtype.bytes() as usize)?);
        }
        fill_pattern(b.dtype, elems)
    })
}

/// The deterministic contents of a parameter not given with `--arg`: element `i` is
/// `0.25 + ((7·i) mod 31) / 4` for float16/bfloat16/float32/float64 (0.25 … 7.75:
/// positive, so sqrt/log stay finite, and exact in all four), the byte `0x30 + (7·i mod 48)`
/// for fp8 (positive, finite in e4m3fn and e5m2), `(7·i + 3) mod 97` for integers and
/// `i mod 2` for bool.
/// `None` when the host cannot allocate the bytes.
pub(crate) fn fill_pattern(dtype: DType, elems: usize) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    out.try_reserve_exact(elems.checked_mul(dtype.bytes() as usize)?).ok()?;
    for i in 0..elems {
        let f = 0.25 + ((7 * i) % 31) as f64 / 4.0;
        let n = ((7 * i + 3) % 97) as u64;
        match dtype {
            DType::F64 => out.extend(f.to_le_bytes()),
            DType::F32 => out.extend((f as f32).to_le_bytes()),
            DType::F16 => out.extend(half::f16::from_f64(f).to_le_bytes()),
            DType::BF16 => out.extend(half::bf16::from_f64(f).to_le_bytes()),
            DType::F8E4M3 | DType::F8E5M2 => out.push(0x30 + ((7 * i) % 48) as u8),
            DType::Bool => out.push((i % 2) as u8),
            _ => out.extend(&n.to_le_bytes()[..dtype.bytes() as usize]),
        }
    }
    Some(out)
}

/// NVRTC (through the cache unless `no_cache`) and module load, timed.
pub(crate) fn compile_and_load(
    gpu: &Gpu,
    cuda: &CudaModule,
    no_cache: bool,
) -> Result<(Kernel, Compiled, Duration), Failure> {
    let cache = if no_cache { None } else { tirx_runtime::cache::default_dir() };
    let compiled =
        tirx_runtime::compile_cached(&cuda.source, gpu.info().arch, cache.as_deref()).map_err(runtime_failure)?;
    report_compile(&compiled);
    let t0 = Instant::now();
    let kernel = gpu.load(compiled.cubin.clone(), &launch_spec(cuda)).map_err(runtime_failure)?;
    Ok((kernel, compiled, t0.elapsed()))
}

/// What compiling said besides the CUBIN, to stderr: the cache's note, ptxas's performance warnings.
pub(crate) fn report_compile(compiled: &Compiled) {
    if let Some(note) = &compiled.cache_note {
        crate::out::errln!("note: {note}");
    }
    for w in &compiled.warnings {
        crate::out::errln!("warning: {w}");
    }
}

fn launch_spec(cuda: &CudaModule) -> LaunchSpec {
    let m = &cuda.meta;
    LaunchSpec {
        kernel: m.kernel.clone(),
        grid: m.grid,
        block: m.block,
        dynamic_smem_bytes: m.dynamic_smem_bytes,
        cooperative: m.cooperative,
        dependent: m.dependent,
    }
}

/// `driver 13.0, NVRTC 13.0`.
pub(crate) fn versions(info: &GpuInfo) -> String {
    let d = info.driver_version;
    format!("driver {}.{}, NVRTC {}.{}", d / 1000, d % 1000 / 10, info.nvrtc_version.0, info.nvrtc_version.1)
}

fn print_timing(lowering: Duration, compiled: &Compiled, load: Duration, launch: Duration) -> CmdResult {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let nvrtc = if compiled.cached { "cache hit" } else { "NVRTC" };
    outln!(
        "timing: lowering {:.2} ms | {nvrtc} {:.2} ms | load {:.2} ms | launch+sync {:.3} ms",
        ms(lowering),
        ms(compiled.elapsed),
        ms(load),
        ms(launch)
    )
}

/// How many mismatching elements are printed per buffer.
const SHOW_MISMATCHES: usize = 8;

/// Simulates `k` on `inputs` and compares each parameter with the GPU's `gpu` buffers.
fn check_against_sim(
    k: &LKernel,
    scalars: &[ScalarValue],
    src: &Source,
    inputs: Vec<Vec<u8>>,
    gpu: &[Vec<u8>],
) -> CmdResult {
    let mut sim = inputs;
    simulate(k, scalars, src, &mut sim)?;
    let data_only = tirx_ir::traffic::analyze(k).data_only;
    let tensor_sums = k.uses_mma();
    let inexact = k.inexact_math();
    let mut failed = false;
    for ((id, g), s) in k.params.iter().zip(gpu).zip(&sim) {
        let b = k.buf(*id);
        let tol = tolerance_for(b.dtype, data_only, tensor_sums, inexact);
        let d = compare(b.dtype, g, s, tol, SHOW_MISMATCHES);
        if d.ok() {
            let within = if d.max_ulps_ok > 0 { format!(", max {} ulp", d.max_ulps_ok) } else { String::new() };
            outln!("check-sim: {} ok ({tol}{within}, {} elements)", b.name, d.elems)?;
            continue;
        }
        failed = true;
        outln!("check-sim: {} MISMATCH ({tol}): {} of {} elements differ", b.name, d.mismatches, d.elems)?;
        for m in &d.first {
            let ulps = m.ulps.map(|u| format!(" ({u} ulp)")).unwrap_or_default();
            outln!("  {}[{}]: gpu {} vs sim {}{ulps}", b.name, unravel(m.index, &b.shape), m.gpu, m.sim)?;
        }
    }
    if failed {
        Err(Failure::User("the GPU result differs from the simulator's (see above)".into()))
    } else {
        Ok(())
    }
}

/// The CPU simulator with its default checks; its errors render at the statement at fault.
fn simulate(k: &LKernel, scalars: &[ScalarValue], src: &Source, bufs: &mut [Vec<u8>]) -> Result<(), Failure> {
    match tirx_sim::simulate_args(k, bufs, scalars, &tirx_sim::SimOptions::default()) {
        Ok(_) => Ok(()),
        Err(e) => {
            eprint_diags(&[e.to_diagnostic()], src);
            crate::out::errln!("check-sim: the simulator stopped, so the GPU result was not compared");
            Err(Failure::Reported)
        }
    }
}

/// Row-major multi-index of a flat element index, `i, j` (flat when the shape does not fit).
fn unravel(index: usize, shape: &[i64]) -> String {
    let total: i64 = shape.iter().product();
    if shape.is_empty() || shape.iter().any(|&d| d <= 0) || index as i64 >= total {
        return index.to_string();
    }
    let idx = crate::cmd::layout::unflatten(index as i64, shape);
    idx.iter().map(|i| i.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_is_deterministic_positive_and_exact() {
        let f32s: Vec<f32> = fill_pattern(DType::F32, 40)
            .unwrap()
            .chunks(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(&f32s[..4], &[0.25, 2.0, 3.75, 5.5]);
        assert!(f32s.iter().all(|&v| (0.25..=7.75).contains(&v)));
        assert_eq!(fill_pattern(DType::F32, 40).unwrap(), fill_pattern(DType::F32, 40).unwrap());
        // f16/bf16 hold the same values exactly.
        let h: Vec<f32> = fill_pattern(DType::F16, 40)
            .unwrap()
            .chunks(2)
            .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        assert_eq!(h, f32s);
        let b: Vec<f32> = fill_pattern(DType::BF16, 40)
            .unwrap()
            .chunks(2)
            .map(|c| half::bf16::from_le_bytes([c[0], c[1]]).to_f32())
            .collect();
        assert_eq!(b, f32s);
    }

    #[test]
    fn pattern_sizes_and_integer_values() {
        for d in DType::ALL {
            assert_eq!(fill_pattern(d, 5).unwrap().len(), 5 * d.bytes() as usize, "{d}");
        }
        assert_eq!(fill_pattern(DType::I16, 2).unwrap(), [3, 0, 10, 0]);
        assert!(fill_pattern(DType::F8E4M3, 100).unwrap().iter().all(|&b| (0x30..0x60).contains(&b)));
    }

    /// `B[tid] = A[tid]` over 4 float32 elements, one CTA of 4 threads.
    fn copy_kernel() -> LKernel {
        use tirx_ir::lir::{LBuf, LBufId, LExpr, LStmt, LStmtKind, LVar, LVarId, MemOp, Space, Special};
        let buf = |name: &str| LBuf {
            name: name.into(),
            dtype: DType::F32,
            space: Space::Global,
            elems: 4,
            shape: vec![2, 2],
            dynamic: false,
            dyn_rows: None,
            strides: None,
            align: 0,
        };
        let tid = || LExpr::Var(LVarId(0));
        let stmt = |k| LStmt::new(k, tirx_ir::Span::default());
        LKernel {
            params: vec![LBufId(0), LBufId(1)],
            bufs: vec![buf("A"), buf("B")],
            vars: vec![LVar { name: "tid".into(), dtype: DType::I32 }],
            body: vec![
                stmt(LStmtKind::Let { var: LVarId(0), value: LExpr::Special(Special::ThreadIdx(0)) }),
                stmt(LStmtKind::Memory(MemOp::Store {
                    buf: LBufId(1),
                    index: tid(),
                    value: LExpr::Load(LBufId(0), Box::new(tid())),
                })),
            ],
            ..LKernel::new("copy4", [1, 1, 1], [4, 1, 1])
        }
    }

    #[test]
    fn check_sim_accepts_the_same_result_and_rejects_a_flipped_bit() {
        let k = copy_kernel();
        let src = Source { name: "copy4.py".into(), text: String::new() };
        let inputs = vec![fill_pattern(DType::F32, 4).unwrap(), fill_pattern(DType::F32, 4).unwrap()];
        let mut gpu = inputs.clone();
        gpu[1] = gpu[0].clone();
        assert!(check_against_sim(&k, &[], &src, inputs.clone(), &gpu).is_ok());
        // A copy must be bit-exact: one ulp off in B[1, 0] fails.
        gpu[1][8] ^= 1;
        let err = check_against_sim(&k, &[], &src, inputs, &gpu).unwrap_err();
        assert!(matches!(err, Failure::User(ref m) if m.contains("differs from the simulator")), "{err:?}");
    }

    #[test]
    fn parameters_without_an_arg_get_the_pattern() {
        let k = copy_kernel();
        let dir = std::env::temp_dir().join(format!("tirx-param-buffers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let spec = format!("A={}", dir.join("a.npy").display());
        let ones: Vec<u8> = [1.0f32; 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        crate::npy::save_outs(std::slice::from_ref(&spec), &k, &[ones.clone(), vec![]]).unwrap();
        let bufs = param_buffers(&[spec], &k).unwrap();
        std::fs::remove_dir_all(&dir).ok();
        assert_eq!(bufs, vec![ones, fill_pattern(DType::F32, 4).unwrap()]);
    }

    #[test]
    fn unravel_row_major() {
        assert_eq!(unravel(5, &[2, 3]), "1, 2");
        assert_eq!(unravel(7, &[4, 6]), "1, 1");
        assert_eq!(unravel(9, &[2, 3]), "9");
    }
}
