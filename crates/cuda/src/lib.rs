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
//! Each LIR instruction family prints in its own module through its `Emit`
//! implementation (`memory`, `pair`, `sync`, `matrix` with `wgmma`,
//! `collective`, `asynch`, `bounds`; see `docs/lir.md` §4); `emit` prints the
//! structured statements and declarations and dispatches every instruction to
//! its family by a match generated from the one list of families
//! (`tirx_ir::for_each_family!`); `expr` prints expressions, `round` rounded
//! arithmetic.
//!
//! The output compiles with nvcc and NVRTC 13.0 for sm_90a; `scripts/ci-cuda.sh`
//! checks that and the SASS each kernel must (not) contain, and
//! `crates/cuda/gpu/check.cu` runs the test kernels on a GPU against references.

mod asynch;
mod bounds;
mod collective;
mod ctype;
mod debug;
mod doc;
mod emit;
mod expr;
mod helper_text;
mod helpers;
mod matrix;
mod memory;
mod names;
mod pair;
mod round;
mod sync;
mod wgmma;

use serde::Serialize;
use std::fmt;
use tirx_ir::lir::{LBufId, LKernel, ParamRef, SymExpr, SymOp, TmapId};

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
    /// CTAs per cluster (compiled into the kernel as `__cluster_dims__`; absent when 1, 1, 1).
    #[serde(skip_serializing_if = "no_cluster")]
    pub cluster: [u32; 3],
    /// Launched cooperatively (`cuLaunchCooperativeKernel`: every CTA resident at once, or the
    /// launch fails): its CTAs meet at grid group barriers.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub cooperative: bool,
    /// Launched as a programmatic dependent of the kernel before it on the stream (its
    /// `griddepcontrol.wait` waits for that one; `LKernel::dependent`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dependent: bool,
    /// The TMA descriptors every launch builds (`cuTensorMapEncodeTiled`) and passes
    /// after the other parameters, in this order (`docs/lir.md` §6).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tensormaps: Vec<TensorMapMeta>,
}

fn no_cluster(c: &[u32; 3]) -> bool {
    *c == [1, 1, 1]
}

/// One TMA descriptor: the arguments of `cuTensorMapEncodeTiled`, innermost dimension first.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorMapMeta {
    /// The kernel parameter (`A_tmap`).
    pub name: String,
    /// The buffer parameter whose device pointer (plus `base_offset`) is `globalAddress`,
    /// and its index in `params`.
    pub buffer: String,
    pub param: usize,
    /// The element type (`float16`) and its `CUtensorMapDataType`.
    pub dtype: String,
    pub cu_dtype: u32,
    /// Bytes from the buffer's pointer to the tensor's first element.
    pub base_offset: i64,
    /// `globalDim` (a run-time size as its expression of the scalar parameters).
    pub dims: Vec<MetaDim>,
    /// `globalStrides`, bytes, of dims 1 and up (run-time ones as expressions).
    pub strides: Vec<MetaDim>,
    pub box_dims: Vec<u32>,
    pub element_strides: Vec<u32>,
    /// `CUtensorMapInterleave`, `CUtensorMapSwizzle`, `CUtensorMapL2promotion`, `CUtensorMapFloatOOBfill`.
    pub interleave: u32,
    pub swizzle: u32,
    pub l2_promotion: u32,
    pub oob_fill: u32,
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
    /// A TMA descriptor (`CUtensorMap`, 128 bytes), passed by value; see `tensormaps`.
    #[serde(rename = "tensormap")]
    TensorMap,
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
    /// A buffer's element strides per dim where they are run-time values (`strides=`);
    /// absent for a row-major buffer. `elems` is then the span they reach.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strides: Option<Vec<MetaDim>>,
    /// A buffer the kernel writes (the caller must pass memory it can write back).
    pub written: bool,
    /// A buffer that must hold zeros before the first launch (the words of grid group
    /// barriers: their low 31 bits count the CTAs arrived; they are zero again after a launch).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub zeroed: bool,
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
    let out = emit::translation_unit(k, helper_text::source)?;
    let names = names::Names::new(k);
    let written = tirx_ir::traffic::written(k);
    let words = k.grid_group_words();
    let params =
        k.signature().into_iter().map(|p| param_meta(k, &names, (&written, &words), p)).collect::<Result<_, _>>()?;
    let meta = LaunchMeta {
        kernel: out.kernel,
        grid: k.grid,
        grid_dims: k.grid_dims.clone().map(|d| d.map(|e| k.sym_text(&e))),
        block: k.block,
        dynamic_smem_bytes: out.dynamic_smem_bytes,
        params,
        checks: k.checks.iter().map(|c| k.sym_text(&c.cond)).collect(),
        cluster: k.cluster,
        cooperative: k.cooperative(),
        dependent: k.dependent(),
        tensormaps: (0..k.tmaps.len()).map(|i| tmap_meta(k, &names, TmapId(i as u32))).collect::<Result<_, _>>()?,
    };
    Ok(CudaModule { source: out.source, meta })
}

/// The launcher's view of tensor map `id`; its buffer must be a parameter (the base it encodes).
fn tmap_meta(k: &LKernel, names: &names::Names, id: TmapId) -> Result<TensorMapMeta, CodegenError> {
    let m = k.tmap(id);
    let dim = |d: &SymExpr| match d {
        SymExpr::Int(v) => MetaDim::Int(*v),
        e => MetaDim::Sym(k.sym_text(e)),
    };
    let param = k.signature().iter().position(|p| *p == ParamRef::Buffer(m.buf)).ok_or_else(|| {
        CodegenError::InvalidLir(format!(
            "tensor map `{}` maps `{}`, which is not a parameter",
            m.name,
            k.buf(m.buf).name
        ))
    })?;
    Ok(TensorMapMeta {
        name: names.tmap(id)?.to_string(),
        buffer: k.buf(m.buf).name.clone(),
        param,
        dtype: m.dtype.name().to_string(),
        cu_dtype: m.dtype.cu_enum(),
        base_offset: m.base_offset,
        dims: m.dims.iter().map(dim).collect(),
        strides: m.strides.iter().map(dim).collect(),
        box_dims: m.boxes.clone(),
        element_strides: m.elem_strides.clone(),
        interleave: 0,
        swizzle: u32::from(m.swizzle),
        l2_promotion: u32::from(m.l2_promotion),
        oob_fill: u32::from(m.oob_nan),
    })
}

/// A number, or the expression's text.
fn meta_dim(k: &LKernel, e: &SymExpr) -> MetaDim {
    match e.as_int() {
        Some(v) => MetaDim::Int(v),
        None => MetaDim::Sym(k.sym_text(e)),
    }
}

/// `written`: per buffer, whether the kernel writes it; `words`: its grid group barriers' words.
fn param_meta(
    k: &LKernel,
    names: &names::Names,
    (written, words): (&[bool], &[LBufId]),
    p: ParamRef,
) -> Result<ParamMeta, CodegenError> {
    Ok(match p {
        ParamRef::TensorMap(m) => ParamMeta {
            name: names.tmap(m)?.to_string(),
            kind: ParamKind::TensorMap,
            dtype: k.tmap(m).dtype.name().to_string(),
            shape: vec![],
            elems: MetaDim::Int(1),
            bytes: MetaDim::Int(128),
            strides: None,
            written: false,
            zeroed: false,
        },
        ParamRef::Scalar(v) => {
            let t = k.var(v).dtype;
            ParamMeta {
                name: k.var(v).name.clone(),
                kind: ParamKind::Scalar,
                dtype: t.name().to_string(),
                shape: vec![],
                elems: MetaDim::Int(1),
                bytes: MetaDim::Int(i64::from(t.bytes())),
                strides: None,
                written: false,
                zeroed: false,
            }
        }
        ParamRef::Buffer(p) => {
            let b = k.buf(p);
            let bytes = i64::from(b.dtype.bytes());
            let mut shape: Vec<MetaDim> = b.shape.iter().map(|&d| MetaDim::Int(d)).collect();
            let (elems, total) = match (&b.dyn_rows, b.span()) {
                (rows, Some(span)) => {
                    if let Some(r) = rows {
                        shape[0] = MetaDim::Sym(k.sym_text(r));
                    }
                    (meta_dim(k, &span), meta_dim(k, &span.mul_int(bytes)))
                }
                (Some(r), None) => {
                    let scaled = |m: i64| {
                        let e = if m == 1 { r.clone() } else { SymExpr::bin(SymOp::Mul, r.clone(), SymExpr::Int(m)) };
                        MetaDim::Sym(k.sym_text(&e))
                    };
                    shape[0] = MetaDim::Sym(k.sym_text(r));
                    (scaled(b.row_elems()), scaled(b.row_elems().saturating_mul(bytes)))
                }
                (None, None) => (MetaDim::Int(b.elems), MetaDim::Int(b.elems.saturating_mul(bytes))),
            };
            ParamMeta {
                name: b.name.clone(),
                kind: ParamKind::Buffer,
                dtype: b.dtype.name().to_string(),
                shape,
                elems,
                bytes: total,
                strides: b.strides.as_ref().map(|xs| xs.iter().map(|e| meta_dim(k, e)).collect()),
                written: written.get(p.0 as usize).copied().unwrap_or(true),
                zeroed: words.contains(&p),
            }
        }
    })
}
