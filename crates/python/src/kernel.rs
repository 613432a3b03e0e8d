//! Scripts from the Python front end → HIR ([`Parsed`]) → LIR and CUDA for one
//! target ([`Lowered`]), with every diagnostic rendered in the user's file.
//!
//! This is the same pipeline as the `tirx` CLI (`docs/python.md` §3): the script
//! crate parses and checks, `tirx_lower` lowers, `tirx_cuda` prints, `tirx_sim`
//! simulates. Nothing here decides anything about a kernel.

use crate::srcmap::{Entry, SourceMap};
use crate::{internal_error, user_error};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;
use tirx_ir::hir::Kernel;
use tirx_ir::lir::LKernel;
use tirx_ir::{Arch, Diagnostic, Span};
use tirx_lower::{CallExplain, LowerOptions};

/// The user's file and the map from the generated script into it.
pub struct Source {
    pub file: String,
    pub text: String,
    pub map: SourceMap,
}

impl Source {
    /// `diags` rendered in the user's file (`file:line:col`, the line, a caret).
    pub fn render(&self, diags: &[Diagnostic]) -> String {
        let mapped: Vec<Diagnostic> = diags.iter().map(|d| self.map.remap(d.clone())).collect();
        tirx_ir::diag::render(&mapped, &self.file, &self.text, false)
    }

    /// The error for `diags`: internal (a tirx bug) when any of them is.
    fn fail(&self, diags: &[Diagnostic]) -> PyErr {
        let text = self.render(diags);
        if diags.iter().any(|d| d.internal) {
            internal_error(text)
        } else {
            user_error(text)
        }
    }

    fn warnings(&self, diags: &[Diagnostic]) -> Vec<String> {
        diags.iter().map(|d| self.render(std::slice::from_ref(d))).collect()
    }
}

/// A checked kernel (HIR) and where its text came from.
#[pyclass(frozen, module = "tirx._native")]
pub struct Parsed {
    kernel: Kernel,
    src: Arc<Source>,
    warnings: Vec<String>,
}

/// Parses and checks a kernel file's text (no source map: diagnostics point into `text`).
#[pyfunction]
pub fn parse_file(text: String, file: String) -> PyResult<Parsed> {
    parse(&text.clone(), file, text, vec![(0, u32::MAX, 0, u32::MAX, true)])
}

/// Parses and checks `script`, the front end's text for one kernel.
/// `entries`: `(gen_lo, gen_hi, orig_lo, orig_hi, exact)` byte spans (see [`Entry`]).
#[pyfunction]
pub fn parse(
    script: &str,
    file: String,
    file_text: String,
    entries: Vec<(u32, u32, u32, u32, bool)>,
) -> PyResult<Parsed> {
    let map = SourceMap::new(
        entries
            .into_iter()
            .map(|(glo, ghi, olo, ohi, exact)| Entry {
                gen: Span { lo: glo, hi: ghi },
                orig: Span { lo: olo, hi: ohi },
                exact,
            })
            .collect(),
    );
    let src = Arc::new(Source { file, text: file_text, map });
    match tirx_script::parse_kernel_with_warnings(&src.file, script) {
        Ok((kernel, warnings)) => Ok(Parsed { kernel, warnings: src.warnings(&warnings), src }),
        Err(diags) => Err(src.fail(&diags)),
    }
}

#[pymethods]
impl Parsed {
    #[getter]
    fn name(&self) -> &str {
        &self.kernel.name
    }

    /// Warnings of the check, rendered.
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// The kernel in canonical script form (`tirx print`).
    fn canonical(&self) -> String {
        tirx_script::print_kernel(&self.kernel)
    }

    /// Whether both kernels are the same IR (spans aside).
    fn same_ir(&self, other: &Parsed) -> bool {
        tirx_script::same_kernel(&self.kernel, &other.kernel)
    }

    /// Lowers for `arch` (`"sm_90a"`, `"sm_80"`, ...) and generates CUDA.
    fn lower(&self, py: Python<'_>, arch: &str) -> PyResult<Lowered> {
        let arch: Arch = arch.parse().map_err(|e| user_error(format!("bad target `{arch}`: {e}")))?;
        let kernel = &self.kernel;
        let src = self.src.clone();
        py.detach(move || lower(kernel, src, arch))
    }
}

fn lower(kernel: &Kernel, src: Arc<Source>, arch: Arch) -> PyResult<Lowered> {
    let (mut explain, lowered) = tirx_lower::explain_kernel(kernel, &LowerOptions::for_arch(arch));
    let lowered = lowered.map_err(|d| src.fail(&d))?;
    for c in &mut explain {
        let s = src.map.map(c.span());
        c.span.lo = s.lo;
        c.span.hi = s.hi;
        c.locate(&src.file, &src.text);
    }
    let cuda = tirx_cuda::generate(&lowered.lir)
        .map_err(|e| internal_error(format!("internal error: generating CUDA for `{}`: {e}", kernel.name)))?;
    Ok(Lowered {
        loaded: Default::default(),
        warnings: src.warnings(&lowered.warnings),
        notes: src.warnings(&lowered.notes),
        lir: lowered.lir,
        source: cuda.source,
        meta: cuda.meta,
        explain,
        arch,
        src,
    })
}

/// A kernel lowered for one target: LIR, CUDA, launch metadata, the dispatch record.
#[pyclass(frozen, module = "tirx._native")]
pub struct Lowered {
    pub lir: LKernel,
    pub source: String,
    pub meta: tirx_cuda::LaunchMeta,
    explain: Vec<CallExplain>,
    warnings: Vec<String>,
    /// Decisions lowering made for the kernel (rendered notes).
    notes: Vec<String>,
    pub arch: Arch,
    src: Arc<Source>,
    /// The kernel loaded on each device it has run on.
    loaded: std::sync::Mutex<std::collections::HashMap<usize, Arc<crate::gpu::Loaded>>>,
}

impl Lowered {
    fn on_device(&self, py: Python<'_>, device: usize) -> PyResult<Arc<crate::gpu::Loaded>> {
        let mut map = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(l) = map.get(&device) {
            return Ok(l.clone());
        }
        let m = &self.meta;
        let spec = tirx_runtime::LaunchSpec {
            kernel: m.kernel.clone(),
            grid: m.grid,
            block: m.block,
            dynamic_smem_bytes: m.dynamic_smem_bytes,
        };
        let l = py
            .detach(|| crate::gpu::load(device, &self.source, self.arch, &spec))
            .map_err(crate::gpu::runtime_error)?;
        let l = Arc::new(l);
        map.insert(device, l.clone());
        Ok(l)
    }
}

#[pymethods]
impl Lowered {
    #[getter]
    fn cuda_source(&self) -> &str {
        &self.source
    }

    #[getter]
    fn arch(&self) -> String {
        self.arch.to_string()
    }

    /// The lowered per-thread IR as `tirx lower --emit tir` prints it.
    fn lir(&self) -> String {
        self.lir.to_string()
    }

    /// Launch metadata (`tirx lower --meta`), as JSON.
    fn meta_json(&self) -> String {
        self.meta.to_json()
    }

    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.warnings.clone()
    }

    /// Notes about decisions lowering made (static shared memory placed in dynamic shared memory).
    #[getter]
    fn notes(&self) -> Vec<String> {
        self.notes.clone()
    }

    /// Every tile call's dispatch record, as `tirx explain` prints it (or its JSON).
    #[pyo3(signature = (json = false))]
    fn explain(&self, json: bool) -> PyResult<String> {
        if json {
            return serde_json::to_string_pretty(&self.explain).map_err(|e| internal_error(e.to_string()));
        }
        if self.explain.is_empty() {
            return Ok("no tile calls\n".into());
        }
        let blocks: Vec<String> = self.explain.iter().map(CallExplain::render).collect();
        Ok(format!("target: {}\n\n{}", self.arch, blocks.join("\n")))
    }

    /// Compiles and loads the kernel on `device` now (the first launch does it otherwise).
    fn load(&self, py: Python<'_>, device: usize) -> PyResult<()> {
        self.on_device(py, device).map(|_| ())
    }

    /// Queues a launch on `device` and `stream` (a `CUstream` of the device's primary context,
    /// 0 for the legacy default stream) with one device pointer per parameter. The caller
    /// (`tirx.device`) has checked every pointer's dtype, shape, contiguity and device.
    fn launch(&self, py: Python<'_>, device: usize, stream: usize, pointers: Vec<u64>) -> PyResult<()> {
        if pointers.len() != self.meta.params.len() {
            return Err(user_error(format!(
                "`{}` takes {} buffers, {} given",
                self.meta.kernel,
                self.meta.params.len(),
                pointers.len()
            )));
        }
        let l = self.on_device(py, device)?;
        let mut values = pointers;
        let mut params: Vec<*mut std::ffi::c_void> =
            values.iter_mut().map(|v| v as *mut u64 as *mut std::ffi::c_void).collect();
        // SAFETY: one device pointer per parameter, in order, each checked by the caller to be
        // memory of this device of the parameter's size; the stream belongs to the device's
        // primary context (PyTorch's and CuPy's streams do).
        unsafe { l.gpu.launch_raw(&l.kernel, &mut params, stream as tirx_runtime::CUstream) }
            .map_err(crate::gpu::runtime_error)
    }

    /// Runs the kernel in the simulator on `params` (each parameter's bytes, in
    /// order) and returns their contents afterwards. Errors (races, out-of-bounds
    /// accesses, ...) are raised with the user's source lines.
    #[pyo3(signature = (params, check_races = true, grid_limit = None))]
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        params: Vec<Vec<u8>>,
        check_races: bool,
        grid_limit: Option<u64>,
    ) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<String>)> {
        let opts = tirx_sim::SimOptions {
            grid_limit,
            check_races,
            stats: false,
            memory_limit: tirx_sim::DEFAULT_MEMORY_LIMIT,
        };
        let mut bufs = params;
        let lir = &self.lir;
        let result = py.detach(|| {
            tirx_sim::check_memory(lir, &opts)?;
            tirx_sim::simulate(lir, &mut bufs, &opts)
        });
        let report = result.map_err(|e| self.src.fail(&[e.to_diagnostic()]))?;
        let warnings: Vec<Diagnostic> = report.warnings.iter().map(|w| w.to_diagnostic()).collect();
        let out = bufs.iter().map(|b| PyBytes::new(py, b)).collect();
        Ok((out, self.src.warnings(&warnings)))
    }
}
