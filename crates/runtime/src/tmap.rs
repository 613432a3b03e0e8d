//! TMA descriptors on the host: `cuTensorMapEncodeTiled` through the driver cudarc
//! loads (docs/lir.md §6.1). A kernel's [`TensorMap`]s describe views of its buffer
//! parameters; a launch encodes each from its buffer's device pointer and passes
//! the 128 bytes by value ([`TensorMapArg`], after the other arguments).
//!
//! The encoder checks what only the launch knows — the global address's 16-byte
//! alignment and each `globalDim` (a run-time size) in `(0, 2^32]` — before the
//! driver call, so a bad launch is a clear error rather than
//! `CUDA_ERROR_INVALID_VALUE`; the static rules were checked by `LKernel::validate`.

use crate::libs::ensure_driver_loaded;
use crate::RuntimeError;
use cudarc::driver::sys::{
    self, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion,
    CUtensorMapSwizzle,
};
use tirx_ir::lir::{TensorMap, TmapDtype};

/// An encoded descriptor: the kernel parameter's 128 bytes (64-byte aligned, as CUDA's
/// `CUtensorMap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct TensorMapArg(pub [u64; 16]);

// SAFETY: plain bytes with the layout and alignment of CUDA's `CUtensorMap`, which
// the generated kernel takes by value (`const __grid_constant__ CUtensorMap`).
unsafe impl cudarc::driver::DeviceRepr for TensorMapArg {}

fn dtype(t: TmapDtype) -> CUtensorMapDataType {
    use CUtensorMapDataType as D;
    match t {
        TmapDtype::U8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        TmapDtype::U16 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        TmapDtype::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        TmapDtype::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
        TmapDtype::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        TmapDtype::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
        TmapDtype::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        TmapDtype::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        TmapDtype::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        TmapDtype::BF16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
    }
}

fn swizzle(mode: u8) -> CUtensorMapSwizzle {
    use CUtensorMapSwizzle as S;
    match mode {
        1 => S::CU_TENSOR_MAP_SWIZZLE_32B,
        2 => S::CU_TENSOR_MAP_SWIZZLE_64B,
        3 => S::CU_TENSOR_MAP_SWIZZLE_128B,
        _ => S::CU_TENSOR_MAP_SWIZZLE_NONE,
    }
}

fn l2(mode: u8) -> CUtensorMapL2promotion {
    use CUtensorMapL2promotion as L;
    match mode {
        0 => L::CU_TENSOR_MAP_L2_PROMOTION_NONE,
        1 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        3 => L::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        _ => L::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
    }
}

/// The launch-time checks of `m` with its buffer at device address `base`
/// (the map's dims already evaluated for this launch).
pub fn check_tensor_map(m: &TensorMap, base: u64) -> Result<Vec<u64>, RuntimeError> {
    let addr = base.wrapping_add(m.base_offset as u64);
    if !addr.is_multiple_of(16) {
        return Err(RuntimeError::Invalid(format!(
            "tensor map `{}`: the tensor starts at {addr:#x}, not on 16 bytes (TMA needs a 16-byte aligned global address)",
            m.name
        )));
    }
    let dims = m.const_dims().ok_or_else(|| {
        RuntimeError::Internal(format!("tensor map `{}` has dims not evaluated for this launch", m.name))
    })?;
    dims.iter()
        .enumerate()
        .map(|(i, &d)| match u64::try_from(d) {
            Ok(v) if (1..=1u64 << 32).contains(&v) => Ok(v),
            _ => Err(RuntimeError::Invalid(format!(
                "tensor map `{}`: globalDim[{i}] = {d} is outside (0, 2^32]",
                m.name
            ))),
        })
        .collect()
}

/// Encodes `m` over the buffer at device address `base` (`cuTensorMapEncodeTiled`), which
/// needs a context current on the calling thread ([`crate::Gpu::encode_tensor_map`] binds its own).
pub fn encode_tensor_map(m: &TensorMap, base: u64) -> Result<TensorMapArg, RuntimeError> {
    let dims = check_tensor_map(m, base)?;
    ensure_driver_loaded()?;
    let strides: Vec<u64> = m
        .const_strides()
        .ok_or_else(|| {
            RuntimeError::Internal(format!("tensor map `{}` has strides not evaluated for this launch", m.name))
        })?
        .into_iter()
        .map(|s| s as u64)
        .collect();
    let mut out = std::mem::MaybeUninit::<sys::CUtensorMap>::zeroed();
    let oob = if m.oob_nan {
        CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
    } else {
        CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE
    };
    // SAFETY: the driver is loaded; every array has `rank` entries (`rank - 1` strides),
    // as `LKernel::validate` checked, and lives across the call; `out` is a valid
    // CUtensorMap to write.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            out.as_mut_ptr(),
            dtype(m.dtype),
            m.rank() as u32,
            base.wrapping_add(m.base_offset as u64) as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            m.boxes.as_ptr(),
            m.elem_strides.as_ptr(),
            CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle(m.swizzle),
            l2(m.l2_promotion),
            oob,
        )
    };
    r.result().map_err(|e| RuntimeError::Driver {
        what: format!(
            "encoding tensor map `{}` (cuTensorMapEncodeTiled: {} dims {:?}, strides {:?}, box {:?}, swizzle {})",
            m.name,
            m.dtype.name(),
            dims,
            m.strides,
            m.boxes,
            m.swizzle
        ),
        error: format!("{e}"),
        code: e.0,
    })?;
    // SAFETY: the driver initialised it (and it was zeroed before).
    let map = unsafe { out.assume_init() };
    Ok(TensorMapArg(map.opaque))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tirx_ir::lir::{LBufId, SymExpr};

    fn map() -> TensorMap {
        TensorMap {
            name: "A_tmap".into(),
            buf: LBufId(0),
            dtype: TmapDtype::F16,
            base_offset: 0,
            dims: vec![SymExpr::Int(64), SymExpr::Int(8)],
            strides: vec![SymExpr::Int(128)],
            boxes: vec![64, 8],
            elem_strides: vec![1, 1],
            swizzle: 3,
            l2_promotion: 2,
            oob_nan: false,
        }
    }

    #[test]
    fn launch_checks_come_before_the_driver() {
        assert_eq!(check_tensor_map(&map(), 0x1000).unwrap(), vec![64, 8]);
        let e = check_tensor_map(&map(), 0x1008).unwrap_err().to_string();
        assert!(e.contains("not on 16 bytes"), "{e}");
        let mut m = map();
        m.dims[1] = SymExpr::Int(0);
        assert!(check_tensor_map(&m, 0x1000).unwrap_err().to_string().contains("globalDim[1] = 0"));
        m.dims[1] = SymExpr::Param(tirx_ir::lir::LVarId(0));
        assert!(matches!(check_tensor_map(&m, 0x1000), Err(RuntimeError::Internal(_))));
    }

    #[test]
    fn the_argument_is_laid_out_as_cuda_s() {
        assert_eq!(std::mem::size_of::<TensorMapArg>(), 128);
        assert_eq!(std::mem::align_of::<TensorMapArg>(), 64);
    }
}
