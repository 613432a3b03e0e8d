//! # tirx-runtime
//!
//! Runs generated CUDA C++ on the GPU: NVRTC → CUBIN (cached on disk), module load,
//! parameter buffers, launch, and event-based timing, through cudarc with dynamic
//! loading, so the binary builds and starts on machines without CUDA.
//!
//! * [`discover`]: where NVRTC and the CUDA headers are ([`discover::SearchEnv`]);
//! * [`libs`]: makes `libcuda`/`libnvrtc` loadable before any cudarc call (cudarc
//!   panics on a missing library; we return [`RuntimeError::Unavailable`] instead);
//! * [`nvrtc`]: [`compile_cubin`], the arch string ([`arch_for`]);
//! * [`cache`]: the on-disk CUBIN cache ([`compile_cached`]);
//! * [`device`]: [`probe`], [`Gpu`] (load, upload, launch, download, timing);
//! * [`compare`]: the GPU-vs-simulator comparison rule (bit-exact / ulp bounds);
//! * [`stats`]: median and spread;
//! * [`tmap`]: TMA descriptors encoded on the host ([`encode_tensor_map`]).

pub mod cache;
pub mod compare;
pub mod device;
pub mod discover;
pub mod libs;
pub mod nvrtc;
pub mod stats;
pub mod tmap;

pub use cache::{compile_cached, Compiled};
/// A raw CUDA stream handle (for launches on streams the caller owns, [`Gpu::launch_raw`]).
pub use cudarc::driver::sys::CUstream;
pub use device::{
    pointer_device, probe, Arg, DeviceBuffers, Gpu, GpuInfo, Kernel, LaunchArgs, LaunchSpec, ScalarArg, Timing,
};
pub use nvrtc::{arch_for, compile_cubin};
pub use tmap::{encode_tensor_map, TensorMapArg};

use cudarc::driver::sys::CUresult;

/// What can go wrong on the GPU path.
#[derive(Clone, Debug)]
pub enum RuntimeError {
    /// No usable driver, NVRTC or GPU: the message says what is missing and how to fix it.
    Unavailable(String),
    /// NVRTC rejected the source; `log` is its program log.
    Compile { status: String, log: String, options: Vec<String> },
    /// A driver call failed.
    Driver { what: String, error: String, code: CUresult },
    /// The launch asks for more than the device has (threads, shared memory, grid).
    Invalid(String),
    /// A bug in tirx (e.g. NVRTC produced no CUBIN).
    Internal(String),
}

/// NVRTC log text of a missing `#include`.
const MISSING_HEADER: &str = "cannot open source file";
/// ptxas log text when the `__shared__` arrays exceed the per-CTA maximum.
const TOO_MUCH_SMEM: &str = "too much shared data";

impl RuntimeError {
    /// Whether the user can fix it (environment, sizes) rather than it being a tirx bug.
    pub fn is_user_error(&self) -> bool {
        match self {
            RuntimeError::Unavailable(_) | RuntimeError::Invalid(_) => true,
            // A missing header is an installation problem, too much static shared memory
            // a kernel-size choice; anything else NVRTC rejects is bad generated code.
            RuntimeError::Compile { log, .. } => log.contains(MISSING_HEADER) || log.contains(TOO_MUCH_SMEM),
            RuntimeError::Driver { code, .. } => matches!(code, CUresult::CUDA_ERROR_OUT_OF_MEMORY),
            RuntimeError::Internal(_) => false,
        }
    }
}

impl std::fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RuntimeError::Unavailable(m) | RuntimeError::Invalid(m) | RuntimeError::Internal(m) => f.write_str(m),
            RuntimeError::Compile { status, log, options } => {
                write!(f, "NVRTC failed ({status}) with options {}:\n{}", options.join(" "), log.trim_end())?;
                if log.contains(TOO_MUCH_SMEM) {
                    write!(
                        f,
                        "\nhelp: the kernel's shared buffers exceed what one CTA may use (227 KB on sm_90); \
                         use smaller tiles or fewer stages"
                    )?;
                }
                if log.contains(MISSING_HEADER) {
                    write!(
                        f,
                        "\nhelp: NVRTC has no CUDA headers: set CUDA_HOME to a toolkit, or \
                         `pip install \"nvidia-cuda-runtime==13.0.*\" nvidia-cuda-cccl` next to the NVRTC wheel"
                    )?;
                }
                Ok(())
            }
            RuntimeError::Driver { what, error, code } => {
                write!(f, "CUDA error while {what}: {error}")?;
                if matches!(
                    code,
                    CUresult::CUDA_ERROR_ILLEGAL_ADDRESS
                        | CUresult::CUDA_ERROR_MISALIGNED_ADDRESS
                        | CUresult::CUDA_ERROR_ILLEGAL_INSTRUCTION
                        | CUresult::CUDA_ERROR_LAUNCH_FAILED
                ) {
                    write!(
                        f,
                        "\nhelp: the kernel faulted; `tirx sim` checks bounds, alignment and races on the CPU, \
                         and `compute-sanitizer --tool memcheck tirx run ...` pinpoints the access"
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for RuntimeError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile_error(log: &str) -> RuntimeError {
        RuntimeError::Compile { status: "NVRTC_ERROR_COMPILATION".into(), log: log.into(), options: vec![] }
    }

    #[test]
    fn compile_errors_split_into_environment_kernel_size_and_bugs() {
        let header = compile_error("k.cu(1): catastrophic error: cannot open source file \"cuda_fp16.h\"");
        assert!(header.is_user_error());
        assert!(header.to_string().contains("help: NVRTC has no CUDA headers"), "{header}");
        let smem =
            compile_error("ptxas error   : Entry function 'k' uses too much shared data (0x10000 bytes, 0xc000 max)");
        assert!(smem.is_user_error());
        assert!(smem.to_string().contains("smaller tiles"), "{smem}");
        let bug = compile_error("k.cu(3): error: expected an expression");
        assert!(!bug.is_user_error());
        assert!(bug.to_string().contains("expected an expression") && !bug.to_string().contains("help:"));
    }

    #[test]
    fn kernel_faults_point_at_sim_and_sanitizer() {
        let e = RuntimeError::Driver {
            what: "running `k`".into(),
            error: "CUDA_ERROR_ILLEGAL_ADDRESS".into(),
            code: CUresult::CUDA_ERROR_ILLEGAL_ADDRESS,
        };
        assert!(!e.is_user_error());
        assert!(e.to_string().contains("tirx sim") && e.to_string().contains("compute-sanitizer"), "{e}");
        let oom = RuntimeError::Driver {
            what: "allocating".into(),
            error: "out of memory".into(),
            code: CUresult::CUDA_ERROR_OUT_OF_MEMORY,
        };
        assert!(oom.is_user_error());
    }
}

#[cfg(test)]
pub(crate) mod testutil {
    use std::path::{Path, PathBuf};

    /// A fresh directory under the system temp dir, removed on drop.
    pub struct TempDir(PathBuf);

    impl TempDir {
        pub fn new(tag: &str) -> TempDir {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let n = N.fetch_add(1, Ordering::Relaxed);
            let dir = std::env::temp_dir().join(format!("tirx-runtime-{tag}-{}-{n}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// Tests that need a GPU (or NVRTC) skip without one and say so; with
/// `TIRX_REQUIRE_GPU=1` (set by `scripts/gpu-test.sh`) a missing GPU fails them instead.
pub fn gpu_required() -> bool {
    std::env::var_os("TIRX_REQUIRE_GPU").is_some_and(|v| v == "1")
}
