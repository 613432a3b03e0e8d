//! `tirx bench FILE [--arg A=a.npy …] [--iters N] [--warmup N] [--json]`: time a
//! kernel on GPU 0 and, when it only moves data, compare its bandwidth with
//! `cuMemcpyDtoD` of the same traffic measured in the same run.
//!
//! Method: `warmup` untimed launches, then `iters` launches queued back to back, each
//! bracketed by its own pair of timing-enabled CUDA events; median and spread (min,
//! p10, p90, max) of the per-launch times. Traffic (see `tirx_ir::traffic`): the
//! full size of every parameter the kernel reads plus every one it writes; the memcpy
//! copies half of that, so it also reads and writes that total — equal bytes each way
//! for a copy kernel. GB/s = traffic / median time (10^9 B/s); ratio = kernel GB/s over
//! memcpy GB/s. Tensors far larger than L2 (the bench examples use 256 MiB) keep both
//! measurements in DRAM.

use crate::cmd::run::{build, compile_and_load, open_gpu, param_buffers, versions};
use crate::exit::{runtime_failure, CmdResult, Failure};
use crate::out::outln;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tirx_ir::traffic::{analyze, Traffic};
use tirx_runtime::stats::{gbps, Summary};
use tirx_runtime::LaunchSpec;

#[derive(clap::Args)]
pub struct Args {
    /// Kernel script (TVMScript TIRx).
    pub file: PathBuf,
    /// Input for a parameter, `NAME=file.npy` (repeatable; others get the `tirx run` pattern),
    /// or `NAME=VALUE` for a scalar parameter (`--arg n=1024`).
    #[arg(long = "arg", value_name = "NAME=FILE|VALUE")]
    pub args: Vec<String>,
    /// Timed launches.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub iters: u32,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub warmup: u32,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Compile with NVRTC even when the CUBIN cache has this kernel.
    #[arg(long)]
    pub no_cache: bool,
}

/// Show the progress bar only once a measurement has run this long.
const PROGRESS_AFTER: Duration = Duration::from_millis(800);

pub fn run(a: Args) -> CmdResult {
    crate::args::check_unique("--arg", &a.args)?;
    let gpu = open_gpu()?;
    let built = build(&a.file, gpu.info().arch)?;
    let bound = crate::scalars::bind(&a.args, &built.lir, &built.src)?;
    let inputs = param_buffers(&bound.files, &bound.lir)?;
    let (kernel, compiled, _) = compile_and_load(&gpu, &built.cuda, a.no_cache)?;
    let dev = gpu.upload(&inputs).map_err(runtime_failure)?;
    let traffic = analyze(&bound.lir);
    let args = bound.launch_args(&|i| gpu.device_ptr(&dev, i))?;
    let spec = LaunchSpec { grid: args.grid, ..kernel.spec.clone() };

    let phases = if traffic.data_only { 2 } else { 1 };
    let progress = Progress::new(a.iters as u64 * phases);
    let k = gpu
        .time_kernel_args(&kernel, &dev, &args, a.warmup, a.iters, &mut |done| progress.set(done as u64))
        .map_err(runtime_failure)?
        .summary;
    let memcpy = if traffic.data_only {
        let bytes = traffic.memcpy_bytes();
        let base = a.iters as u64;
        let t = gpu
            .time_memcpy_dtod(bytes, a.warmup, a.iters, &mut |done| progress.set(base + done as u64))
            .map_err(runtime_failure)?;
        Some(t.summary)
    } else {
        None
    };
    progress.finish();

    let arch = gpu.info().arch.to_string();
    let report = Report {
        file: a.file.display().to_string(),
        spec: &spec,
        device: &gpu.info().name,
        arch: &arch,
        versions: versions(gpu.info()),
        iters: a.iters,
        warmup: a.warmup,
        traffic: &traffic,
        k,
        memcpy,
        cached: compiled.cached,
    };
    if a.json {
        let v = report.json();
        outln!("{}", serde_json::to_string_pretty(&v).map_err(|e| Failure::Internal(e.to_string()))?)?;
    } else {
        report.print()?;
    }
    Ok(())
}

struct Report<'a> {
    file: String,
    spec: &'a LaunchSpec,
    device: &'a str,
    arch: &'a str,
    /// `driver 13.0, NVRTC 13.0`.
    versions: String,
    iters: u32,
    warmup: u32,
    traffic: &'a Traffic,
    k: Summary,
    memcpy: Option<Summary>,
    cached: bool,
}

impl Report<'_> {
    fn ratio(&self) -> Option<f64> {
        self.memcpy.map(|m| m.median / self.k.median)
    }

    fn print(&self) -> CmdResult {
        let s = self.spec;
        outln!(
            "`{}` on {} ({}, {}): grid {:?}, block {:?}; {} timed launches after {} warm-up",
            s.kernel,
            self.device,
            self.arch,
            self.versions,
            s.grid,
            s.block,
            self.iters,
            self.warmup
        )?;
        let t = self.traffic;
        let line = |label: &str, s: &Summary, bytes: Option<u64>| {
            let bw = bytes.map(|b| format!("  {:>8.1} GB/s", gbps(b, s.median))).unwrap_or_default();
            outln!(
                "  {label:<7} median {:>9.4} ms  (min {:.4}, p10 {:.4}, p90 {:.4}, max {:.4}){bw}",
                s.median,
                s.min,
                s.p10,
                s.p90,
                s.max
            )
        };
        let bytes = t.data_only.then_some(t.total());
        line("kernel", &self.k, bytes)?;
        match (&self.memcpy, self.ratio()) {
            (Some(m), Some(r)) => {
                line("memcpy", m, bytes)?;
                outln!(
                    "  traffic {} B ({} read + {} written); memcpy: cuMemcpyDtoD of {} B (same traffic)",
                    t.total(),
                    t.bytes_read,
                    t.bytes_written,
                    t.memcpy_bytes()
                )?;
                outln!("  ratio   {r:.3} of memcpy bandwidth")?;
            }
            _ => outln!(
                "  bandwidth not compared: not a data-only kernel ({})",
                t.not_data_only_because.as_deref().unwrap_or("computes")
            )?,
        }
        Ok(())
    }

    fn json(&self) -> serde_json::Value {
        let ms = |s: &Summary| json!({"median": s.median, "min": s.min, "p10": s.p10, "p90": s.p90, "max": s.max});
        let t = self.traffic;
        json!({
            "file": self.file,
            "kernel": self.spec.kernel,
            "grid": self.spec.grid,
            "block": self.spec.block,
            "device": self.device,
            "arch": self.arch,
            "versions": self.versions,
            "iters": self.iters,
            "warmup": self.warmup,
            "cubin_cached": self.cached,
            "kernel_ms": ms(&self.k),
            "data_only": t.data_only,
            "not_data_only_because": t.not_data_only_because,
            "bytes_read": t.bytes_read,
            "bytes_written": t.bytes_written,
            "traffic_bytes": t.total(),
            "kernel_gbps": t.data_only.then(|| gbps(t.total(), self.k.median)),
            "memcpy": self.memcpy.map(|m| json!({
                "bytes": t.memcpy_bytes(),
                "ms": ms(&m),
                "gbps": gbps(t.total(), m.median),
            })),
            "ratio_to_memcpy": self.ratio(),
        })
    }
}

/// A progress bar on stderr that appears only after [`PROGRESS_AFTER`] and only on a terminal.
struct Progress {
    bar: ProgressBar,
    start: Instant,
    visible: std::cell::Cell<bool>,
}

impl Progress {
    fn new(total: u64) -> Progress {
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{bar:40} {pos}/{len} timed runs ({elapsed})") {
            bar.set_style(style);
        }
        Progress { bar, start: Instant::now(), visible: std::cell::Cell::new(false) }
    }

    fn set(&self, pos: u64) {
        if !self.visible.get() && self.start.elapsed() > PROGRESS_AFTER && std::io::stderr().is_terminal() {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.visible.set(true);
        }
        self.bar.set_position(pos);
    }

    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(median: f64) -> Summary {
        Summary { samples: 10, median, min: median * 0.9, p10: median * 0.95, p90: median * 1.05, max: median * 1.1 }
    }

    #[test]
    fn json_of_a_copy_has_bandwidth_and_ratio_of_equal_traffic() {
        let spec = LaunchSpec {
            kernel: "k".into(),
            grid: [32, 256, 1],
            block: [128, 1, 1],
            dynamic_smem_bytes: 0,
            cooperative: false,
            dependent: false,
        };
        let traffic =
            Traffic { data_only: true, not_data_only_because: None, bytes_read: 1 << 28, bytes_written: 1 << 28 };
        let r = Report {
            file: "x.py".into(),
            spec: &spec,
            device: "GPU",
            arch: "sm_90a",
            versions: "driver 13.0, NVRTC 13.0".into(),
            iters: 10,
            warmup: 2,
            traffic: &traffic,
            k: summary(0.2),
            memcpy: Some(summary(0.16)),
            cached: true,
        };
        let v = r.json();
        assert_eq!(v["traffic_bytes"], json!(1u64 << 29));
        assert_eq!(v["memcpy"]["bytes"], json!(1u64 << 28), "memcpy moves half: it reads and writes it");
        assert!((v["ratio_to_memcpy"].as_f64().unwrap() - 0.8).abs() < 1e-12);
        let k = v["kernel_gbps"].as_f64().unwrap();
        let m = v["memcpy"]["gbps"].as_f64().unwrap();
        assert!((k / m - 0.8).abs() < 1e-12, "ratio is the bandwidth ratio");
        assert_eq!(v["grid"], json!([32, 256, 1]));
    }

    #[test]
    fn json_of_a_computing_kernel_has_no_bandwidth() {
        let spec = LaunchSpec {
            kernel: "k".into(),
            grid: [1, 1, 1],
            block: [32, 1, 1],
            dynamic_smem_bytes: 0,
            cooperative: false,
            dependent: false,
        };
        let traffic = Traffic {
            data_only: false,
            not_data_only_because: Some("packed Add into `B`".into()),
            bytes_read: 64,
            bytes_written: 64,
        };
        let r = Report {
            file: "x.py".into(),
            spec: &spec,
            device: "GPU",
            arch: "sm_90a",
            versions: "driver 13.0, NVRTC 13.0".into(),
            iters: 10,
            warmup: 2,
            traffic: &traffic,
            k: summary(0.01),
            memcpy: None,
            cached: false,
        };
        let v = r.json();
        assert!(v["kernel_gbps"].is_null() && v["memcpy"].is_null() && v["ratio_to_memcpy"].is_null());
        assert_eq!(v["not_data_only_because"], json!("packed Add into `B`"));
    }
}
