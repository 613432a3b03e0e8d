//! # tirx-cuda
//!
//! Prints a lowered per-thread kernel ([`LKernel`]) as one self-contained CUDA C++
//! translation unit, plus the launch metadata the runtime needs.
//!
//! [`generate`] validates the LIR ([`LKernel::validate`]) and then prints, in order:
//! a banner, the CUDA headers its types need (`cuda_fp16.h`, `cuda_bf16.h`,
//! `cuda_fp8.h`; nothing else), the `__device__ __forceinline__` helpers its body
//! calls (Python floor division, inline PTX for `ldmatrix`/`stmatrix`, `cp.async`
//! and mbarriers), and the `extern "C" __global__` kernel. Names come from the
//! source, made valid and unique; vector copies are plain `uint4`/`uint2`/...
//! accesses so that ptxas emits 128-bit loads and stores; packed pairs use the
//! `__half2` / `__nv_bfloat162` intrinsics; shuffles the `__shfl_*_sync`
//! overloads. Nothing is printed for statements without effect.
//!
//! Each LIR instruction family prints in its own module (`memory`, `pair`,
//! `matrix`, `round`, `collective`, `asynch`; see `docs/lir.md`), core statements and
//! declarations in `emit`, expressions in `expr`.
//!
//! The output compiles with nvcc and NVRTC 13.0 for sm_90a; `scripts/ci-cuda.sh`
//! checks that and the SASS each kernel must (not) contain, and
//! `crates/cuda/gpu/check.cu` runs the test kernels on a GPU against references.

mod asynch;
mod collective;
mod ctype;
mod emit;
mod expr;
mod helpers;
mod matrix;
mod memory;
mod names;
mod pair;
mod round;
mod wgmma;

use serde::Serialize;
use std::fmt;
use tirx_ir::lir::LKernel;

/// A generated kernel: CUDA C++ source and how to launch it.
#[derive(Clone, Debug)]
pub struct CudaModule {
    pub source: String,
    pub meta: LaunchMeta,
}

/// Launch metadata of one kernel (serialised next to the `.cu`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchMeta {
    /// The C identifier of the `extern "C"` entry point.
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem_bytes: u32,
    pub params: Vec<ParamMeta>,
}

/// One kernel parameter (a global buffer), in launch order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParamMeta {
    /// The source name of the buffer.
    pub name: String,
    /// The TVMScript dtype name (`float16`).
    pub dtype: String,
    pub shape: Vec<i64>,
    pub elems: i64,
    pub bytes: i64,
}

impl LaunchMeta {
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("LaunchMeta is plain data")
    }
}

/// Why a kernel cannot be printed as CUDA.
#[derive(Clone, Debug, PartialEq)]
pub enum CodegenError {
    /// The LIR breaks its own typing rules (a lowering bug).
    InvalidLir(String),
    /// Well-formed LIR that has no CUDA spelling.
    Unsupported(String),
}

impl fmt::Display for CodegenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CodegenError::InvalidLir(m) => write!(f, "invalid lowered IR: {m}"),
            CodegenError::Unsupported(m) => write!(f, "cannot generate CUDA: {m}"),
        }
    }
}

impl std::error::Error for CodegenError {}

/// Generates the CUDA C++ of `k` (validated first) and its launch metadata.
pub fn generate(k: &LKernel) -> Result<CudaModule, CodegenError> {
    k.validate().map_err(CodegenError::InvalidLir)?;
    let out = emit::translation_unit(k)?;
    let params = k
        .params
        .iter()
        .map(|&p| {
            let b = k.buf(p);
            ParamMeta {
                name: b.name.clone(),
                dtype: b.dtype.name().to_string(),
                shape: b.shape.clone(),
                elems: b.elems,
                bytes: b.elems.saturating_mul(i64::from(b.dtype.bytes())),
            }
        })
        .collect();
    let meta = LaunchMeta {
        kernel: out.kernel,
        grid: k.grid,
        block: k.block,
        dynamic_smem_bytes: out.dynamic_smem_bytes,
        params,
    };
    Ok(CudaModule { source: out.source, meta })
}
