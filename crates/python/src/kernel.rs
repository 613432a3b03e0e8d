//! Scripts from the Python front end → HIR ([`Parsed`]) → LIR and CUDA for one
//! target ([`Lowered`]), with every diagnostic rendered in the user's file.
//!
//! This is the same pipeline as the `tirx` CLI (`docs/python.md` §3): the script
//! crate parses and checks, `tirx_lower` lowers, `tirx_cuda` prints, `tirx_sim`
//! simulates. Nothing here decides anything about a kernel.

use crate::scalar::PyScalar;
use crate::srcmap::{Entry, SourceMap};
use crate::{internal_error, user_error};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;
use tirx_ir::hir::Kernel;
use tirx_ir::lir::{LKernel, ParamRef, ScalarValue};
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
        tmap_cache: Default::default(),
        spec_cache: Default::default(),
        torch: Default::default(),
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

/// One kernel argument's value, kept alive while the launch reads it through a pointer.
enum RawArg {
    Ptr(u64),
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
    TensorMap(tirx_runtime::TensorMapArg),
}

impl RawArg {
    fn as_ptr(&mut self) -> *mut std::ffi::c_void {
        match self {
            RawArg::Ptr(v) => v as *mut u64 as *mut std::ffi::c_void,
            RawArg::I32(v) => v as *mut i32 as *mut std::ffi::c_void,
            RawArg::U32(v) => v as *mut u32 as *mut std::ffi::c_void,
            RawArg::I64(v) => v as *mut i64 as *mut std::ffi::c_void,
            RawArg::F32(v) => v as *mut f32 as *mut std::ffi::c_void,
            RawArg::F64(v) => v as *mut f64 as *mut std::ffi::c_void,
            RawArg::TensorMap(v) => v as *mut tirx_runtime::TensorMapArg as *mut std::ffi::c_void,
        }
    }
}

/// The encoded tensor maps of `k` (this launch's dims and strides) over the buffer `pointers` of
/// `gpu`, each from `cache` when the same map was encoded over the same pointer, dims and strides
/// before (docs/lir.md §6.1): a map per buffer, so a call whose activations are new tensors
/// re-encodes theirs alone, not the weights' or a KV cache's.
fn tensor_maps(
    gpu: &tirx_runtime::Gpu,
    k: &LKernel,
    pointers: &[u64],
    cache: &std::sync::Mutex<TmapCache>,
) -> PyResult<Vec<tirx_runtime::TensorMapArg>> {
    let base = |b| k.params.iter().position(|p| *p == b).and_then(|i| pointers.get(i).copied());
    let mut c = cache.lock().unwrap_or_else(|e| e.into_inner());
    k.tmaps
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let ptr =
                base(m.buf).ok_or_else(|| internal_error(format!("no pointer for the buffer of `{}`", m.name)))?;
            // (Strides too: views of one pointer and shape may lie in memory differently.)
            let key = (i, ptr, m.const_dims().unwrap_or_default(), m.const_strides().unwrap_or_default());
            if let Some(map) = c.get(&key) {
                return Ok(*map);
            }
            let map = gpu.encode_tensor_map(m, ptr).map_err(crate::gpu::runtime_error)?;
            // A bounded cache: launches over a few tensors reuse their maps; churn starts over.
            if c.len() >= TMAP_CACHE_ENTRIES {
                c.clear();
            }
            c.insert(key, map);
            Ok(map)
        })
        .collect()
}

/// Encoded tensor maps by (the map's index in the kernel, its buffer's pointer, the launch's dims
/// and strides).
type TmapCache = std::collections::HashMap<(usize, u64, Vec<i64>, Vec<i64>), tirx_runtime::TensorMapArg>;

/// The kernel specialised to scalar arguments (`tirx_sim::launch`: its grid, sizes, checks
/// passed) and their typed values, per argument bits: a call with arguments seen before
/// skips the specialisation (`bind` and `launch` of one call share it).
type Specialized = Arc<(LKernel, Vec<ScalarValue>)>;
type SpecCache = std::collections::HashMap<Vec<(bool, u64)>, Specialized>;

/// Distinct argument sets kept per kernel (a cache, cleared when full).
const SPEC_CACHE_ENTRIES: usize = 64;

/// Each argument as (is a float, its bits): `2` and `2.0` bind differently.
fn spec_key(scalars: &[PyScalar]) -> Vec<(bool, u64)> {
    scalars
        .iter()
        .map(|s| match *s {
            PyScalar::Int(v) => (false, v as u64),
            PyScalar::Float(v) => (true, v.to_bits()),
        })
        .collect()
}
/// Encoded maps kept per kernel (a cache, cleared when full).
const TMAP_CACHE_ENTRIES: usize = 256;

/// The arguments of one launch of `k` in signature order: `pointers` for the buffers
/// (in buffer order), the typed `values` for the scalars, the encoded `maps`.
fn launch_values(
    k: &LKernel,
    values: &[ScalarValue],
    pointers: Vec<u64>,
    maps: &[tirx_runtime::TensorMapArg],
) -> PyResult<Vec<RawArg>> {
    use tirx_runtime::ScalarArg;
    let mut ptrs = pointers.into_iter();
    let mut out = Vec::new();
    for p in k.signature() {
        out.push(match p {
            ParamRef::Buffer(_) => RawArg::Ptr(ptrs.next().ok_or_else(|| internal_error("too few pointers"))?),
            ParamRef::TensorMap(m) => RawArg::TensorMap(
                *maps.get(m.0 as usize).ok_or_else(|| internal_error("a tensor map was not encoded"))?,
            ),
            ParamRef::Scalar(v) => {
                let i = k.scalars.iter().position(|s| s.var == v);
                let arg = i.and_then(|i| values.get(i)).and_then(|x| ScalarArg::of(k.var(v).dtype, *x));
                match arg.ok_or_else(|| internal_error(format!("scalar `{}` has no value", k.var(v).name)))? {
                    ScalarArg::I32(x) => RawArg::I32(x),
                    ScalarArg::U32(x) => RawArg::U32(x),
                    ScalarArg::I64(x) => RawArg::I64(x),
                    ScalarArg::F32(x) => RawArg::F32(x),
                    ScalarArg::F64(x) => RawArg::F64(x),
                }
            }
        });
    }
    Ok(out)
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
    /// TMA descriptors encoded for the pointer sets launches used.
    tmap_cache: std::sync::Mutex<TmapCache>,
    spec_cache: std::sync::Mutex<SpecCache>,
    /// What calls on PyTorch tensors check their arguments against (`call_torch`).
    torch: std::sync::OnceLock<crate::torch_call::TorchSig>,
}

impl Lowered {
    /// The kernel at the launch with `scalars` and their typed values (`tirx_sim::launch`).
    fn launch_of(&self, scalars: &[PyScalar]) -> PyResult<(LKernel, Vec<ScalarValue>)> {
        let values: Vec<ScalarValue> = scalars.iter().map(|s| s.value()).collect();
        tirx_sim::launch(&self.lir, &values).map_err(|e| self.src.fail(&[e.to_diagnostic()]))
    }

    /// [`Self::launch_of`] through the per-arguments cache (a failed check is not cached).
    fn specialized(&self, scalars: &[PyScalar]) -> PyResult<Specialized> {
        let key = spec_key(scalars);
        let mut cache = self.spec_cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = cache.get(&key) {
            return Ok(s.clone());
        }
        let s = Arc::new(self.launch_of(scalars)?);
        if cache.len() >= SPEC_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(key, s.clone());
        Ok(s)
    }

    /// Simulates the kernel at `scalars` on `bufs` (parameters aliased per `same`); what it
    /// printed goes to `sys.stdout`, also before an error, which is raised in the user's file.
    fn run_sim(
        &self,
        py: Python<'_>,
        bufs: &mut [Vec<u8>],
        same: &[usize],
        scalars: &[PyScalar],
        opts: &tirx_sim::SimOptions,
    ) -> PyResult<tirx_sim::SimReport> {
        let s = self.specialized(scalars)?;
        let (lir, values) = (&s.0, &s.1);
        let result = py.detach(|| {
            tirx_sim::check_memory(lir, opts)?;
            tirx_sim::simulate_aliased(lir, bufs, same, values, opts)
        });
        let printed = match &result {
            Ok(r) => &r.printed,
            Err(e) => e.printed(),
        };
        write_stdout(py, printed)?;
        result.map_err(|e| self.src.fail(&[e.to_diagnostic()]))
    }

    /// `explain`'s text: each call's record followed by `below(call)`.
    fn explain_text(&self, below: impl Fn(&CallExplain) -> String) -> String {
        if self.explain.is_empty() {
            return "no tile calls\n".into();
        }
        let blocks: Vec<String> = self.explain.iter().map(|c| c.render() + &below(c)).collect();
        format!("target: {}\n\n{}", self.arch, blocks.join("\n"))
    }

    /// Queues the launch with these arguments (checked by the caller).
    fn launch_on(
        &self,
        py: Python<'_>,
        device: usize,
        stream: usize,
        pointers: Vec<u64>,
        scalars: &[PyScalar],
        spec: Option<Specialized>,
    ) -> PyResult<()> {
        // Without scalars or tensor maps the compiled grid and signature are the launch's (no
        // specialised copy: this is the per-call path).
        let l = self.on_device(py, device)?;
        let (grid, mut args) = if self.lir.scalars.is_empty() && self.lir.tmaps.is_empty() {
            (self.lir.grid, pointers.into_iter().map(RawArg::Ptr).collect())
        } else {
            let s = match spec {
                Some(s) => s,
                None => self.specialized(scalars)?,
            };
            let (k, values) = (&s.0, &s.1);
            let maps = tensor_maps(&l.gpu, k, &pointers, &self.tmap_cache)?;
            (k.grid, launch_values(k, values, pointers, &maps)?)
        };
        let mut params: Vec<*mut std::ffi::c_void> = args.iter_mut().map(RawArg::as_ptr).collect();
        // SAFETY: one argument per parameter in signature order: each device pointer checked by
        // the caller to be memory of this device of the parameter's size at this launch, each
        // scalar in its declared type; the grid is this launch's; the stream belongs to the
        // device's primary context (PyTorch's and CuPy's streams do).
        unsafe { l.gpu.launch_raw_grid(&l.kernel, grid, &mut params, stream as tirx_runtime::CUstream) }
            .map_err(crate::gpu::runtime_error)
    }

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
            cooperative: m.cooperative,
            dependent: m.dependent,
        };
        let l = py
            .detach(|| crate::gpu::load(device, &self.source, self.arch, &spec))
            .map_err(crate::gpu::runtime_error)?;
        let l = Arc::new(l);
        map.insert(device, l.clone());
        drop(map);
        // Serialized wgmmas only: a spill is often a few bytes in an epilogue (`tirx run` prints it).
        let serialized: Vec<String> =
            l.warnings.iter().filter(|w| tirx_runtime::nvrtc::is_serialization(w)).cloned().collect();
        warn_all(py, &serialized)?;
        Ok(l)
    }
}

/// Each of `messages` as a `tirx.TirxWarning` (ptxas's, when a kernel is loaded: its wgmmas
/// serialized cost it speed, not correctness).
fn warn_all(py: Python<'_>, messages: &[String]) -> PyResult<()> {
    if messages.is_empty() {
        return Ok(());
    }
    let category = py.import("tirx")?.getattr("TirxWarning")?;
    for m in messages {
        let text = std::ffi::CString::new(m.replace('\0', " "))
            .map_err(|e| pyo3::exceptions::PyValueError::new_err(e.to_string()))?;
        PyErr::warn(py, &category, &text, 1)?;
    }
    Ok(())
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
        Ok(self.explain_text(|_| String::new()))
    }

    /// `explain` with the simulator's bank-conflict statistics under each call (`tirx explain
    /// --sim`): the first `ctas` CTAs run with zeroed buffers and `scalars` (one per scalar
    /// parameter, in order). A kernel the simulator rejects raises its error.
    #[pyo3(signature = (scalars, ctas, json = false))]
    fn explain_sim(&self, py: Python<'_>, scalars: Vec<PyScalar>, ctas: u64, json: bool) -> PyResult<String> {
        let opts = tirx_sim::SimOptions {
            grid_limit: Some(ctas.max(1)),
            check_races: true,
            stats: true,
            memory_limit: tirx_sim::DEFAULT_MEMORY_LIMIT,
            warp_order_seed: None,
        };
        // Zeroed buffers of the sizes at these arguments.
        let bytes = |k: &LKernel| -> Vec<Vec<u8>> {
            k.params
                .iter()
                .map(|p| vec![0u8; k.buf(*p).elems.max(0) as usize * k.buf(*p).dtype.bytes() as usize])
                .collect()
        };
        let mut params = bytes(&self.specialized(&scalars)?.0);
        let same: Vec<usize> = (0..params.len()).collect();
        let mut bank = self.run_sim(py, &mut params, &same, &scalars, &opts)?.bank;
        // Into the user's file, where the calls' spans are.
        for s in &mut bank {
            let m = self.src.map.map(s.span);
            (s.span.lo, s.span.hi) = (m.lo, m.hi);
        }
        let of_call =
            |c: &CallExplain| -> Vec<&tirx_sim::BankStat> { bank.iter().filter(|s| s.within(c.span())).collect() };
        if json {
            let mut j = serde_json::to_value(&self.explain).map_err(|e| internal_error(e.to_string()))?;
            for (c, v) in self.explain.iter().zip(j.as_array_mut().into_iter().flatten()) {
                v["bank"] = serde_json::to_value(of_call(c)).map_err(|e| internal_error(e.to_string()))?;
            }
            return serde_json::to_string_pretty(&j).map_err(|e| internal_error(e.to_string()));
        }
        Ok(self.explain_text(|c| tirx_sim::BankStat::lines(&of_call(c))))
    }

    /// Compiles and loads the kernel on `device` now (the first launch does it otherwise).
    fn load(&self, py: Python<'_>, device: usize) -> PyResult<()> {
        self.on_device(py, device).map(|_| ())
    }

    /// The CTAs of this kernel that GPU `device` holds at once (whole clusters; loads the kernel
    /// there first): the largest grid of a persistent kernel that runs in one wave.
    fn resident_ctas(&self, py: Python<'_>, device: usize) -> PyResult<u32> {
        let l = self.on_device(py, device)?;
        if let Some(&n) = l.resident.get() {
            return Ok(n);
        }
        let cluster = self.meta.cluster;
        let n = py.detach(|| l.gpu.resident_ctas(&l.kernel, cluster)).map_err(crate::gpu::runtime_error)?;
        Ok(*l.resident.get_or_init(|| n))
    }

    /// Binds one launch to its scalar arguments (one per scalar parameter, in order):
    /// `(grid, the shape of every buffer parameter, its element strides)` at that launch. A mistyped
    /// argument or a failed launch check is raised, rendered in the user's file.
    fn bind(&self, scalars: Vec<PyScalar>) -> PyResult<LaunchShape> {
        let s = self.specialized(&scalars)?;
        let k = &s.0;
        let shapes = k.params.iter().map(|p| k.buf(*p).shape.clone()).collect();
        Ok((k.grid, shapes, k.params.iter().map(|p| elem_strides(k.buf(*p))).collect()))
    }

    /// Queues a launch on `device` and `stream` (a `CUstream` of the device's primary context,
    /// 0 for the legacy default stream) with one device pointer per buffer parameter and one
    /// value per scalar parameter (each in signature order). The caller (`tirx.device`) has
    /// checked every pointer's dtype, shape (`bind`), contiguity and device.
    #[pyo3(signature = (device, stream, pointers, scalars = vec![]))]
    fn launch(
        &self,
        py: Python<'_>,
        device: usize,
        stream: usize,
        pointers: Vec<u64>,
        scalars: Vec<PyScalar>,
    ) -> PyResult<()> {
        if pointers.len() != self.lir.params.len() {
            return Err(user_error(format!(
                "`{}` takes {} buffers, {} given",
                self.meta.kernel,
                self.lir.params.len(),
                pointers.len()
            )));
        }
        self.launch_on(py, device, stream, pointers, &scalars, None)
    }

    /// Gives what calls on PyTorch tensors are checked against (once; `tirx.device`):
    /// `torch.Tensor` and `torch.nn.Parameter`, each buffer parameter's `torch.dtype` (None
    /// where PyTorch has none) and `torch._C._cuda_getCurrentRawStream`.
    fn set_torch(&self, tensor: [Py<pyo3::types::PyType>; 2], dtypes: Vec<Option<Py<PyAny>>>, stream: Py<PyAny>) {
        let _ = self.torch.set(crate::torch_call::TorchSig::new(&self.lir, tensor, dtypes, stream));
    }

    /// Launches the call `args` (the kernel's arguments in signature order) when they are
    /// contiguous CUDA tensors of the right dtypes and shapes on one device and valid scalars,
    /// on PyTorch's current stream, and says whether it did; any other call is left to the
    /// general path, which checks each argument and names what is wrong. A failed launch
    /// check is raised here, as there.
    fn call_torch(&self, py: Python<'_>, args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        use crate::torch_call as tc;
        let Some(sig) = self.torch.get() else { return Ok(false) };
        let Some(call) = tc::split(sig, args) else { return Ok(false) };
        let specialize = self.lir.is_symbolic() || !self.lir.tmaps.is_empty();
        let spec = if specialize { Some(self.specialized(&call.scalars)?) } else { None };
        let k = spec.as_ref().map_or(&self.lir, |s| &s.0);
        let layout = |i: usize| (k.buf(k.params[i]).shape.clone(), elem_strides(k.buf(k.params[i])));
        let Some((device, pointers)) = tc::pointers(sig, &call.tensors, layout)? else { return Ok(false) };
        let stream = tc::stream(sig, py, device)?;
        self.launch_on(py, device, stream, pointers, &call.scalars, spec)?;
        Ok(true)
    }

    /// Runs the kernel in the simulator on `params` (each buffer parameter's bytes, in
    /// order) with `scalars` (one value per scalar parameter) and returns the buffers'
    /// contents afterwards. Errors (races, out-of-bounds accesses, a failed launch
    /// check, ...) are raised with the user's source lines. `same[i]`, when given, is the
    /// first buffer parameter passed buffer parameter `i`'s array (`i` itself if none):
    /// those share one memory, as on the GPU.
    #[pyo3(signature = (params, scalars = vec![], check_races = true, grid_limit = None, same = None))]
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        params: Vec<Vec<u8>>,
        scalars: Vec<PyScalar>,
        check_races: bool,
        grid_limit: Option<u64>,
        same: Option<Vec<usize>>,
    ) -> PyResult<(Vec<Bound<'py, PyBytes>>, Vec<String>)> {
        let opts = tirx_sim::SimOptions {
            grid_limit,
            check_races,
            stats: false,
            memory_limit: tirx_sim::DEFAULT_MEMORY_LIMIT,
            warp_order_seed: None,
        };
        let same = same.unwrap_or_else(|| (0..params.len()).collect());
        let mut bufs = params;
        let report = self.run_sim(py, &mut bufs, &same, &scalars, &opts)?;
        let warnings: Vec<Diagnostic> = report.warnings.iter().map(|w| w.to_diagnostic()).collect();
        let out = bufs.iter().map(|b| PyBytes::new(py, b)).collect();
        Ok((out, self.src.warnings(&warnings)))
    }
}

/// A launch's grid, and per buffer parameter its shape and element strides (`None`: row-major).
type LaunchShape = ([u32; 3], Vec<Vec<i64>>, Vec<Option<Vec<i64>>>);

/// The element strides of a buffer of a launch whose storage is not row-major (`None`:
/// row-major; the launch has evaluated run-time strides).
fn elem_strides(b: &tirx_ir::lir::LBuf) -> Option<Vec<i64>> {
    b.strides.as_ref().map(|xs| xs.iter().map(|s| s.as_int().unwrap_or(-1)).collect())
}

/// Writes `lines` to Python's `sys.stdout` (so that pytest's capture and redirection see them).
fn write_stdout(py: Python<'_>, lines: &[String]) -> PyResult<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let out = py.import("sys")?.getattr("stdout")?;
    for l in lines {
        out.call_method1("write", (l.as_str(),))?;
    }
    Ok(())
}
