//! TMA tensor maps (`docs/lir.md` §2.13, §6.1): the `CUtensorMap` descriptors a
//! kernel's `cp.async.bulk.tensor` copies read, one kernel parameter each.
//!
//! A [`TensorMap`] describes a view of one global buffer parameter in the CUDA
//! driver's order — dimension 0 innermost, `strides` in bytes for dimensions
//! 1.., `boxes` the tile one instruction moves — plus its swizzle, L2
//! promotion and out-of-bounds fill. Every launcher builds it on the host with
//! `cuTensorMapEncodeTiled` from the buffer's device pointer (plus
//! `base_offset`) and passes it by value as a `const __grid_constant__
//! CUtensorMap` after the other parameters ([`super::ParamRef::TensorMap`]).
//! A dimension may be an expression of the scalar parameters (a run-time row
//! count); [`LKernel::specialize`] evaluates it with the launch's values.
//!
//! Typing (`Checker::tmaps`): rank 1..=5; the buffer a global parameter; dims
//! in `(0, 2^32]` when constant; strides non-negative, below 2^40, multiples of
//! 16 bytes; boxes in `1..=256` with the innermost box a multiple of 16 bytes and
//! at most the swizzle span; element strides 1..=8 with the innermost 1; a base
//! offset that keeps the 16-byte alignment of the buffer (cudaMalloc gives 256).
//! These are the driver's own rules: a map the checker accepts encodes. One
//! more of ours: the map's element is a whole number of the buffer's elements
//! (the simulator moves buffer elements; lowering only ever widens the map).

use super::check::{Check, Checker};
use super::{LBufId, LKernel, Space, SymExpr};
use crate::dtype::DType;
use serde::Serialize;

/// A tensor map of the kernel (its index in [`LKernel::tmaps`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TmapId(pub u32);

/// The largest rank of a tensor map.
pub const TMAP_MAX_RANK: usize = 5;
/// The largest box extent in any dimension.
pub const TMAP_MAX_BOX: u32 = 256;
/// Global dimensions are at most 2^32 elements.
pub const TMAP_MAX_DIM: i64 = 1 << 32;
/// Global strides are below 2^40 bytes.
pub const TMAP_MAX_STRIDE: i64 = 1 << 40;

/// The element type of a tensor map (`CUtensorMapDataType`): what one element
/// of the box is to the TMA unit. Copies move bits, so any type of the same
/// size works; the type matters for a NaN out-of-bounds fill (floats only).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum TmapDtype {
    U8,
    U16,
    U32,
    I32,
    U64,
    I64,
    F16,
    F32,
    F64,
    BF16,
}

impl TmapDtype {
    /// The descriptor type of buffer elements of `t` (8-bit types move as bytes).
    pub fn of(t: DType) -> Option<TmapDtype> {
        Some(match t {
            DType::I8 | DType::U8 | DType::F8E4M3 | DType::F8E5M2 => TmapDtype::U8,
            DType::I16 | DType::U16 => TmapDtype::U16,
            DType::U32 => TmapDtype::U32,
            DType::I32 => TmapDtype::I32,
            DType::I64 => TmapDtype::I64,
            DType::U64 => TmapDtype::U64,
            DType::F16 => TmapDtype::F16,
            DType::BF16 => TmapDtype::BF16,
            DType::F32 => TmapDtype::F32,
            DType::F64 => TmapDtype::F64,
            DType::Bool => return None,
        })
    }

    pub fn bytes(self) -> u32 {
        match self {
            TmapDtype::U8 => 1,
            TmapDtype::U16 | TmapDtype::F16 | TmapDtype::BF16 => 2,
            TmapDtype::U32 | TmapDtype::I32 | TmapDtype::F32 => 4,
            TmapDtype::U64 | TmapDtype::I64 | TmapDtype::F64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, TmapDtype::F16 | TmapDtype::F32 | TmapDtype::F64 | TmapDtype::BF16)
    }

    /// The unsigned type of twice the width (a descriptor unit promotion), up to 8 bytes.
    pub fn widened(self) -> Option<TmapDtype> {
        match self.bytes() {
            1 => Some(TmapDtype::U16),
            2 => Some(TmapDtype::U32),
            4 => Some(TmapDtype::U64),
            _ => None,
        }
    }

    /// `CU_TENSOR_MAP_DATA_TYPE_*` of the CUDA driver.
    pub fn cu_enum(self) -> u32 {
        match self {
            TmapDtype::U8 => 0,
            TmapDtype::U16 => 1,
            TmapDtype::U32 => 2,
            TmapDtype::I32 => 3,
            TmapDtype::U64 => 4,
            TmapDtype::I64 => 5,
            TmapDtype::F16 => 6,
            TmapDtype::F32 => 7,
            TmapDtype::F64 => 8,
            TmapDtype::BF16 => 9,
        }
    }

    /// The TVMScript name of the type (`uint8`, `float16`).
    pub fn name(self) -> &'static str {
        match self {
            TmapDtype::U8 => "uint8",
            TmapDtype::U16 => "uint16",
            TmapDtype::U32 => "uint32",
            TmapDtype::I32 => "int32",
            TmapDtype::U64 => "uint64",
            TmapDtype::I64 => "int64",
            TmapDtype::F16 => "float16",
            TmapDtype::F32 => "float32",
            TmapDtype::F64 => "float64",
            TmapDtype::BF16 => "bfloat16",
        }
    }
}

/// One TMA descriptor: a view of global buffer `buf`, in the driver's order.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TensorMap {
    /// The kernel parameter's name (`A_tmap`).
    pub name: String,
    /// The global buffer parameter whose device pointer (plus `base_offset`) is the base.
    pub buf: LBufId,
    pub dtype: TmapDtype,
    /// Bytes from the buffer's first element to the view's (a multiple of 16).
    pub base_offset: i64,
    /// `globalDim`, innermost first: constants, or expressions of the scalar parameters.
    pub dims: Vec<SymExpr>,
    /// `globalStrides` in bytes of dims 1.. (`rank - 1` of them): constants, or
    /// expressions of the scalar parameters (a buffer's run-time strides).
    pub strides: Vec<SymExpr>,
    /// `boxDim`, innermost first.
    pub boxes: Vec<u32>,
    /// `elementStrides`, innermost first (all 1 here: dense boxes).
    pub elem_strides: Vec<u32>,
    /// `CU_TENSOR_MAP_SWIZZLE_*`: 0 none, 1 32 B, 2 64 B, 3 128 B.
    pub swizzle: u8,
    /// `CU_TENSOR_MAP_L2_PROMOTION_*`: 0 none, 1 64 B, 2 128 B, 3 256 B.
    pub l2_promotion: u8,
    /// Out-of-bounds elements of a load are NaN (`CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA`), else zero.
    pub oob_nan: bool,
}

impl TensorMap {
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Elements one instruction moves.
    pub fn box_elems(&self) -> u64 {
        self.boxes.iter().map(|&b| u64::from(b)).product()
    }

    /// Bytes one instruction moves (its transaction count).
    pub fn box_bytes(&self) -> u64 {
        self.box_elems() * u64::from(self.dtype.bytes())
    }

    /// The constant strides, once a launch has evaluated them ([`LKernel::specialize`]).
    pub fn const_strides(&self) -> Option<Vec<i64>> {
        self.strides.iter().map(SymExpr::as_int).collect()
    }

    /// Bytes of the swizzle atom row (32, 64, 128), 0 without a swizzle.
    pub fn swizzle_bytes(&self) -> u32 {
        swizzle_bytes(self.swizzle)
    }

    /// The constant dims, once a launch has evaluated them ([`LKernel::specialize`]).
    pub fn const_dims(&self) -> Option<Vec<i64>> {
        self.dims
            .iter()
            .map(|d| match d {
                SymExpr::Int(v) => Some(*v),
                _ => None,
            })
            .collect()
    }
}

/// Bytes of the swizzle atom row of swizzle mode `mode` (0 for none).
pub fn swizzle_bytes(mode: u8) -> u32 {
    match mode {
        1 => 32,
        2 => 64,
        3 => 128,
        _ => 0,
    }
}

/// Bytes after which the XOR pattern of swizzle mode `mode` repeats: 8 atom rows
/// (256, 512, 1024); 16 without a swizzle. A shared buffer a swizzled map writes
/// starts on a multiple of it, so the hardware's pattern, computed from shared
/// addresses, is the one its layout states on element offsets.
pub fn swizzle_repeat(mode: u8) -> u32 {
    match mode {
        0 => 16,
        m => 8 * swizzle_bytes(m),
    }
}

impl Checker<'_> {
    /// Every tensor map of the kernel follows the driver's rules (module docs).
    pub(super) fn tmaps(&self) -> Check {
        for m in &self.k.tmaps {
            self.tmap(m).map_err(|e| format!("tensor map `{}`: {e}", m.name))?;
        }
        Ok(())
    }

    fn tmap(&self, m: &TensorMap) -> Check {
        let b = self.buf(m.buf)?;
        if b.space != Space::Global || !self.k.params.contains(&m.buf) {
            return Err(format!("`{}` is not a global buffer parameter", b.name));
        }
        let r = m.rank();
        if !(1..=TMAP_MAX_RANK).contains(&r) {
            return Err(format!("rank {r}; a tensor map has 1 to {TMAP_MAX_RANK} dimensions"));
        }
        if m.strides.len() != r - 1 || m.boxes.len() != r || m.elem_strides.len() != r {
            return Err(format!(
                "{} strides, {} boxes and {} element strides for rank {r} (need {}, {r}, {r})",
                m.strides.len(),
                m.boxes.len(),
                m.elem_strides.len(),
                r - 1
            ));
        }
        if m.base_offset < 0 || m.base_offset % 16 != 0 {
            return Err(format!("base offset {} bytes is not a non-negative multiple of 16", m.base_offset));
        }
        for (i, d) in m.dims.iter().enumerate() {
            if let SymExpr::Int(v) = d {
                if !(1..=TMAP_MAX_DIM).contains(v) {
                    return Err(format!("globalDim[{i}] = {v} is outside (0, 2^32]"));
                }
            }
        }
        for (i, s) in m.strides.iter().enumerate().filter_map(|(i, s)| Some((i, s.as_int()?))) {
            if !(0..TMAP_MAX_STRIDE).contains(&s) || s % 16 != 0 {
                return Err(format!("globalStrides[{}] = {s} bytes is not a multiple of 16 below 2^40", i + 1));
            }
        }
        for (i, &x) in m.boxes.iter().enumerate() {
            if !(1..=TMAP_MAX_BOX).contains(&x) {
                return Err(format!("boxDim[{i}] = {x} is outside 1..=256"));
            }
        }
        if m.elem_strides.iter().any(|e| !(1..=8).contains(e)) || m.elem_strides[0] != 1 {
            return Err(format!("elementStrides {:?}: each 1..=8, the innermost 1", m.elem_strides));
        }
        if m.swizzle > 3 || m.l2_promotion > 3 {
            return Err(format!("swizzle {} / L2 promotion {} are not CUDA enums (0..=3)", m.swizzle, m.l2_promotion));
        }
        let inner = u64::from(m.boxes[0]) * u64::from(m.dtype.bytes());
        if inner % 16 != 0 {
            return Err(format!("the innermost box is {inner} bytes, not a multiple of 16"));
        }
        if m.swizzle > 0 && inner > u64::from(m.swizzle_bytes()) {
            return Err(format!(
                "the innermost box is {inner} bytes, more than the {}-byte swizzle",
                m.swizzle_bytes()
            ));
        }
        if m.oob_nan && !m.dtype.is_float() {
            return Err(format!("a NaN out-of-bounds fill needs a float type, not {}", m.dtype.name()));
        }
        // Whole buffer elements per map element: the simulator moves buffer elements.
        if !m.dtype.bytes().is_multiple_of(b.dtype.bytes()) {
            return Err(format!("element type {} is not a whole number of `{}`'s {}", m.dtype.name(), b.name, b.dtype));
        }
        Ok(())
    }

    /// `id` names a tensor map of the kernel.
    pub(crate) fn tmap_ref(&self, id: TmapId) -> Result<&TensorMap, String> {
        self.k.tmaps.get(id.0 as usize).ok_or_else(|| format!("tensor map #{} does not exist", id.0))
    }
}

impl LKernel {
    pub fn tmap(&self, id: TmapId) -> &TensorMap {
        &self.tmaps[id.0 as usize]
    }
}
