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
use tirx_ir::lir::{LKernel, ParamRef, SymExpr, SymOp};

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
    /// The grid; a dimension given in `grid_dims` holds CUDA's limit (evaluate the
    /// expression at launch: `LKernel::specialize`).
    pub grid: [u32; 3],
    /// Grid dimensions that are expressions of the scalar parameters (`(n + 127) // 128`).
    #[serde(skip_serializing_if = "no_dims")]
    pub grid_dims: [Option<String>; 3],
    pub block: [u32; 3],
    pub dynamic_smem_bytes: u32,
    /// Every parameter in signature order: buffers and scalars.
    pub params: Vec<ParamMeta>,
    /// Conditions on the scalar arguments every launch checks first (`docs/lir.md` §6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub checks: Vec<String>,
}

fn no_dims(d: &[Option<String>; 3]) -> bool {
    d.iter().all(Option::is_none)
}

/// What a parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ParamKind {
    /// A global buffer, passed as a device pointer.
    Buffer,
    /// A scalar value (`n: T.int32`), passed by value.
    Scalar,
}

/// A size that is a number, or an expression of the scalar parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum MetaDim {
    Int(i64),
    Sym(String),
}

/// One kernel parameter, in launch order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ParamMeta {
    /// The source name of the buffer or scalar.
    pub name: String,
    pub kind: ParamKind,
    /// The TVMScript dtype name (`float16`).
    pub dtype: String,
    /// A buffer's shape (a run-time dim 0 as its expression); `[]` for a scalar.
    pub shape: Vec<MetaDim>,
    pub elems: MetaDim,
    pub bytes: MetaDim,
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
    let params = k.signature().into_iter().map(|p| param_meta(k, p)).collect();
    let meta = LaunchMeta {
        kernel: out.kernel,
        grid: k.grid,
        grid_dims: k.grid_dims.clone().map(|d| d.map(|e| k.sym_text(&e))),
        block: k.block,
        dynamic_smem_bytes: out.dynamic_smem_bytes,
        params,
        checks: k.checks.iter().map(|c| k.sym_text(&c.cond)).collect(),
    };
    Ok(CudaModule { source: out.source, meta })
}

fn param_meta(k: &LKernel, p: ParamRef) -> ParamMeta {
    match p {
        ParamRef::Scalar(v) => {
            let t = k.var(v).dtype;
            ParamMeta {
                name: k.var(v).name.clone(),
                kind: ParamKind::Scalar,
                dtype: t.name().to_string(),
                shape: vec![],
                elems: MetaDim::Int(1),
                bytes: MetaDim::Int(i64::from(t.bytes())),
            }
        }
        ParamRef::Buffer(p) => {
            let b = k.buf(p);
            let bytes = i64::from(b.dtype.bytes());
            let mut shape: Vec<MetaDim> = b.shape.iter().map(|&d| MetaDim::Int(d)).collect();
            let (elems, total) = match &b.dyn_rows {
                Some(r) => {
                    let scaled = |m: i64| {
                        let e = if m == 1 { r.clone() } else { SymExpr::bin(SymOp::Mul, r.clone(), SymExpr::Int(m)) };
                        MetaDim::Sym(k.sym_text(&e))
                    };
                    shape[0] = MetaDim::Sym(k.sym_text(r));
                    (scaled(b.row_elems()), scaled(b.row_elems().saturating_mul(bytes)))
                }
                None => (MetaDim::Int(b.elems), MetaDim::Int(b.elems.saturating_mul(bytes))),
            };
            ParamMeta {
                name: b.name.clone(),
                kind: ParamKind::Buffer,
                dtype: b.dtype.name().to_string(),
                shape,
                elems,
                bytes: total,
            }
        }
    }
}
