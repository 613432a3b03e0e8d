//! Launches on memory and streams the caller owns (PyTorch, CuPy, DLPack tensors):
//! each device's primary context is opened once ([`device`]); a lowered kernel is
//! compiled (NVRTC, through the on-disk CUBIN cache) and loaded once per device
//! ([`Loaded`]); a call is one `cuLaunchKernel` on the caller's stream.

use crate::user_error;
use pyo3::prelude::*;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tirx_runtime::{Gpu, Kernel, LaunchSpec, RuntimeError};

/// A runtime error as a Python exception: the user's (environment, sizes) or a tirx bug.
pub fn runtime_error(e: RuntimeError) -> PyErr {
    if e.is_user_error() {
        user_error(e.to_string())
    } else {
        crate::internal_error(format!("internal error: {e}"))
    }
}

/// The device `ordinal`, opened once per process.
pub fn device(ordinal: usize) -> Result<Arc<Gpu>, RuntimeError> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, Arc<Gpu>>>> = OnceLock::new();
    let mut map = DEVICES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = map.get(&ordinal) {
        return Ok(g.clone());
    }
    let g = Arc::new(Gpu::open_device(ordinal)?);
    map.insert(ordinal, g.clone());
    Ok(g)
}

/// A kernel loaded on one device.
pub struct Loaded {
    pub gpu: Arc<Gpu>,
    pub kernel: Kernel,
    /// `Kernel.resident_ctas`, asked of the driver once: a persistent op sizes its grid by it on
    /// every call, and the occupancy of a loaded function on its device does not change.
    pub resident: std::sync::OnceLock<u32>,
    /// ptxas's performance warnings (`tirx_runtime::nvrtc::performance_warnings`); its
    /// serialized wgmmas are raised as `tirx.TirxWarning`s when the kernel is loaded.
    pub warnings: Vec<String>,
}

/// Compiles (cached on disk) and loads `source` on device `ordinal`.
pub fn load(ordinal: usize, source: &str, arch: tirx_ir::Arch, spec: &LaunchSpec) -> Result<Loaded, RuntimeError> {
    let gpu = device(ordinal)?;
    let want = gpu.info().arch;
    if want.major != arch.major || want.minor != arch.minor {
        return Err(RuntimeError::Invalid(format!(
            "the kernel was compiled for {arch} but GPU {ordinal} ({}) is {want}: compile it with target=\"{want}\"",
            gpu.info().name
        )));
    }
    let compiled = tirx_runtime::compile_cached(source, arch, tirx_runtime::cache::default_dir().as_deref())?;
    let kernel = gpu.load(compiled.cubin, spec)?;
    Ok(Loaded { gpu, kernel, resident: std::sync::OnceLock::new(), warnings: compiled.warnings })
}

/// `(name, compute capability, sm count, total memory)` of device `ordinal`, or None without a usable GPU.
#[pyfunction]
#[pyo3(signature = (ordinal = 0))]
pub fn device_info(py: Python<'_>, ordinal: usize) -> Option<(String, (i32, i32), i32, usize)> {
    py.detach(|| device(ordinal).ok())
        .map(|g| (g.info().name.clone(), g.info().cc, g.info().sm_count, g.info().total_mem_bytes))
}

/// The device that owns `ptr`.
#[pyfunction]
pub fn pointer_device(py: Python<'_>, ptr: u64) -> PyResult<usize> {
    py.detach(|| tirx_runtime::pointer_device(ptr)).map_err(runtime_error)
}
