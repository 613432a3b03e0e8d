//! The GPU side: context, CUBIN load, parameter buffers, launch, timing.
//!
//! One context on device 0 and its default stream; everything is ordered on that
//! stream. cudarc's per-buffer event tracking is turned off (one stream needs none,
//! and it would add work to every timed launch). Each launch is checked against
//! the device limits first, so an impossible configuration is a clear error rather
//! than `CUDA_ERROR_INVALID_VALUE`.
//!
//! Timing: every timed launch (or memcpy) gets its own pair of CUDA events created
//! with timing enabled (`CU_EVENT_DEFAULT`; cudarc's default disables timing). Launches
//! are queued back to back in chunks, and the host waits once per chunk, so the
//! caller can show progress without putting gaps between launches.

use crate::libs::ensure_loaded;
use crate::nvrtc::arch_for;
use crate::stats::{summarize, Summary};
use crate::RuntimeError;
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags, CUfunction_attribute};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, DriverError, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;
use std::sync::Arc;

/// The device, as `probe` reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuInfo {
    pub name: String,
    /// Compute capability.
    pub cc: (i32, i32),
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub driver_version: i32,
    pub nvrtc_version: (i32, i32),
    pub sm_count: i32,
    pub total_mem_bytes: usize,
    pub max_threads_per_block: i32,
    /// Opt-in maximum of shared memory per block (static + dynamic).
    pub max_smem_per_block_optin: i32,
    /// The target for this GPU (`sm_90a` on an H100): lowering and NVRTC both use it.
    pub arch: tirx_ir::Arch,
}

/// How to launch a kernel: the `LaunchMeta` fields the runtime needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchSpec {
    /// The `extern "C"` kernel name.
    pub kernel: String,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub dynamic_smem_bytes: u32,
    /// Launched cooperatively: every CTA of the grid resident at once (grid group barriers).
    pub cooperative: bool,
    /// Launched as a programmatic dependent of the kernel before it on the stream
    /// (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`): it may start while that one
    /// runs, and its `griddepcontrol.wait` waits for it.
    pub dependent: bool,
}

/// A scalar kernel argument, typed as the kernel's signature declares it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarArg {
    I32(i32),
    U32(u32),
    I64(i64),
    F32(f32),
    F64(f64),
}

impl ScalarArg {
    /// The argument of a scalar parameter of type `t` holding `v` (already typed by
    /// `LKernel::bind_scalars`); `None` for a type scalar parameters cannot have.
    pub fn of(t: tirx_ir::DType, v: tirx_ir::lir::ScalarValue) -> Option<ScalarArg> {
        use tirx_ir::lir::ScalarValue::{Float, Int};
        use tirx_ir::DType;
        Some(match (t, v) {
            (DType::I32, Int(i)) => ScalarArg::I32(i32::try_from(i).ok()?),
            (DType::U32, Int(i)) => ScalarArg::U32(u32::try_from(i).ok()?),
            (DType::I64, Int(i)) => ScalarArg::I64(i),
            (DType::F32, Float(f)) => ScalarArg::F32(f as f32),
            (DType::F64, Float(f)) => ScalarArg::F64(f),
            _ => return None,
        })
    }
}

/// One argument of a launch, in the kernel's signature order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// Parameter buffer `i` of the [`DeviceBuffers`].
    Buffer(usize),
    Scalar(ScalarArg),
    /// An encoded TMA descriptor ([`crate::encode_tensor_map`]), passed by value.
    TensorMap(crate::TensorMapArg),
}

/// What one launch of a kernel with scalar parameters or a symbolic grid passes: the
/// arguments in signature order and the grid of this launch (`LKernel::specialize`).
#[derive(Clone, Debug, PartialEq)]
pub struct LaunchArgs {
    pub args: Vec<Arg>,
    pub grid: [u32; 3],
}

/// Bytes above which dynamic shared memory needs the opt-in function attribute.
const DEFAULT_DYNAMIC_SMEM_LIMIT: u32 = 48 * 1024;

pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    info: GpuInfo,
}

/// A kernel loaded from a CUBIN, ready to launch.
pub struct Kernel {
    func: CudaFunction,
    cfg: LaunchConfig,
    pub spec: LaunchSpec,
}

/// Device copies of the kernel parameters, in parameter order.
pub struct DeviceBuffers {
    slices: Vec<CudaSlice<u8>>,
    lens: Vec<usize>,
}

/// Median and spread of timed launches, milliseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub summary: Summary,
}

fn driver(what: &str) -> impl Fn(DriverError) -> RuntimeError + '_ {
    move |e| RuntimeError::Driver { what: what.to_string(), error: format!("{e}"), code: e.0 }
}

/// A launch through cudarc's builder: cooperative where the kernel's CTAs meet at grid group
/// barriers (`LaunchSpec::cooperative`). A dependent kernel (`LaunchSpec::dependent`) launches
/// here in stream order (its `griddepcontrol.wait` passes at once): this crate's own stream runs
/// one kernel at a time; [`raw_launch`] on a caller's stream lets it start early.
///
/// # Safety
/// As for cudarc's `LaunchArgs::launch`: the arguments pushed follow the kernel's signature.
unsafe fn builder_launch(
    b: &mut cudarc::driver::LaunchArgs<'_>,
    k: &Kernel,
    cfg: LaunchConfig,
) -> Result<(), RuntimeError> {
    let r = if k.spec.cooperative { b.launch_cooperative(cfg) } else { b.launch(cfg) };
    r.map(|_| ()).map_err(launch_error(k, cfg.grid_dim))
}

/// A launch from argument pointers (`cuLaunchKernel`, or `cuLaunchCooperativeKernel` as above;
/// a programmatic dependent through `cuLaunchKernelEx`, [`launch_dependent`]).
///
/// # Safety
/// As for [`Gpu::launch_raw`].
unsafe fn raw_launch(
    k: &Kernel,
    grid: (u32, u32, u32),
    params: &mut [*mut std::ffi::c_void],
    stream: cudarc::driver::sys::CUstream,
) -> Result<(), RuntimeError> {
    let (f, c) = (k.func.cu_function(), &k.cfg);
    let r = if k.spec.dependent {
        launch_dependent(f, grid, c, stream, params, k.spec.cooperative)
    } else if k.spec.cooperative {
        cudarc::driver::result::launch_cooperative_kernel(f, grid, c.block_dim, c.shared_mem_bytes, stream, params)
    } else {
        cudarc::driver::result::launch_kernel(f, grid, c.block_dim, c.shared_mem_bytes, stream, params)
    };
    r.map_err(launch_error(k, grid))
}

/// `cuLaunchKernelEx` with programmatic stream serialization allowed (and cooperative where the
/// kernel is): the kernel may start while the one before it on `stream` runs; its
/// `griddepcontrol.wait` waits for that one's end and writes (`LaunchSpec::dependent`).
///
/// # Safety
/// As for [`Gpu::launch_raw`].
unsafe fn launch_dependent(
    f: cudarc::driver::sys::CUfunction,
    grid: (u32, u32, u32),
    c: &LaunchConfig,
    stream: cudarc::driver::sys::CUstream,
    params: &mut [*mut std::ffi::c_void],
    cooperative: bool,
) -> Result<(), DriverError> {
    use cudarc::driver::sys::{CUlaunchAttribute, CUlaunchAttributeID, CUlaunchAttributeValue, CUlaunchConfig};
    let attr = |id: CUlaunchAttributeID, value: CUlaunchAttributeValue| CUlaunchAttribute { id, pad: [0; 4], value };
    // SAFETY (of the unions): all-zero is a valid value of every member; each sets one flag.
    let mut serialized: CUlaunchAttributeValue = std::mem::zeroed();
    serialized.programmaticStreamSerializationAllowed = 1;
    let mut together: CUlaunchAttributeValue = std::mem::zeroed();
    together.cooperative = 1;
    let mut attrs = [
        attr(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, serialized),
        attr(CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_COOPERATIVE, together),
    ];
    let config = CUlaunchConfig {
        gridDimX: grid.0,
        gridDimY: grid.1,
        gridDimZ: grid.2,
        blockDimX: c.block_dim.0,
        blockDimY: c.block_dim.1,
        blockDimZ: c.block_dim.2,
        sharedMemBytes: c.shared_mem_bytes,
        hStream: stream,
        attrs: attrs.as_mut_ptr(),
        numAttrs: if cooperative { 2 } else { 1 },
    };
    cudarc::driver::sys::cuLaunchKernelEx(&config, f, params.as_mut_ptr(), std::ptr::null_mut()).result()
}

/// A failed launch of `k`; a cooperative grid larger than the device holds at once is the
/// caller's to fix.
fn launch_error(k: &Kernel, grid: (u32, u32, u32)) -> impl Fn(DriverError) -> RuntimeError + '_ {
    move |e| {
        if e.0 == cudarc::driver::sys::CUresult::CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE {
            let ctas = u64::from(grid.0) * u64::from(grid.1) * u64::from(grid.2);
            return RuntimeError::Invalid(format!(
                "kernel `{}`: its {ctas} CTAs meet at grid group barriers, so all must be resident at once, and the device holds fewer of them; launch a grid of at most its resident CTAs (`Kernel.resident_ctas()` in Python)",
                k.spec.kernel
            ));
        }
        driver(&format!("launching `{}`", k.spec.kernel))(e)
    }
}

/// Checks the libraries, initialises the driver and describes device 0.
pub fn probe() -> Result<GpuInfo, RuntimeError> {
    Ok(Gpu::open()?.info)
}

impl Gpu {
    /// Loads the libraries and creates the context on device 0.
    pub fn open() -> Result<Gpu, RuntimeError> {
        Gpu::open_device(0)
    }

    /// Loads the libraries and binds the primary context of device `ordinal` (the
    /// context PyTorch and CuPy use too, so their memory and streams are valid here).
    pub fn open_device(ordinal: usize) -> Result<Gpu, RuntimeError> {
        ensure_loaded()?;
        let count = CudaContext::device_count().map_err(no_device)?;
        if count < 1 {
            return Err(RuntimeError::Unavailable("no CUDA driver/NVRTC found: the driver reports no GPU".into()));
        }
        if ordinal >= count as usize {
            return Err(RuntimeError::Invalid(format!("no GPU {ordinal}: the driver reports {count}")));
        }
        let ctx = CudaContext::new(ordinal).map_err(no_device)?;
        // SAFETY: this crate uses one stream only, so cross-stream tracking is not needed.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.default_stream();
        let info = describe(&ctx)?;
        Ok(Gpu { ctx, stream, info })
    }

    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// Loads `cubin` and finds `spec.kernel` in it, after checking `spec` against the device.
    pub fn load(&self, cubin: Vec<u8>, spec: &LaunchSpec) -> Result<Kernel, RuntimeError> {
        self.check_spec(spec)?;
        if spec.kernel.contains('\0') {
            return Err(RuntimeError::Internal(format!("kernel name {:?} contains NUL", spec.kernel)));
        }
        // A caller's thread may have no current context (PyTorch's autograd threads): the
        // function attributes set below need one.
        self.ctx.bind_to_thread().map_err(driver("binding the context to this thread"))?;
        let module = self.ctx.load_module(Ptx::from_binary(cubin)).map_err(driver("loading the CUBIN"))?;
        let func = module
            .load_function(&spec.kernel)
            .map_err(driver(&format!("finding kernel `{}` in the CUBIN", spec.kernel)))?;
        // The opt-in maximum bounds static + dynamic shared memory together; the
        // static part is only known from the compiled function.
        let static_smem = func.shared_size_bytes().map_err(driver("reading the kernel's static shared memory"))?;
        let total = i64::from(static_smem) + i64::from(spec.dynamic_smem_bytes);
        if total > i64::from(self.info.max_smem_per_block_optin) {
            return Err(RuntimeError::Invalid(format!(
                "kernel `{}`: {static_smem} bytes of static + {} of dynamic shared memory exceed the device's {} per CTA",
                spec.kernel, spec.dynamic_smem_bytes, self.info.max_smem_per_block_optin
            )));
        }
        // Above 48 KiB, dynamic shared memory needs the function's opt-in (cudaFuncSetAttribute).
        if spec.dynamic_smem_bytes > DEFAULT_DYNAMIC_SMEM_LIMIT {
            func.set_attribute(
                CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                spec.dynamic_smem_bytes as i32,
            )
            .map_err(driver("allowing more than 48 KB of dynamic shared memory"))?;
        }
        self.allow_wide_clusters(&func, &spec.kernel)?;
        let cfg = LaunchConfig {
            grid_dim: (spec.grid[0], spec.grid[1], spec.grid[2]),
            block_dim: (spec.block[0], spec.block[1], spec.block[2]),
            shared_mem_bytes: spec.dynamic_smem_bytes,
        };
        Ok(Kernel { func, cfg, spec: spec.clone() })
    }

    /// A kernel compiled with a cluster of more than the portable 8 CTAs (`__cluster_dims__`, read
    /// back from the function) launches only once it opts into Hopper's non-portable sizes (up to
    /// 16); without the opt-in the launch fails with "invalid cluster size".
    fn allow_wide_clusters(&self, func: &CudaFunction, kernel: &str) -> Result<(), RuntimeError> {
        if self.info.cc.0 < 9 {
            return Ok(()); // no clusters before sm_90: nothing to opt into
        }
        use CUfunction_attribute::{
            CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED as NON_PORTABLE,
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH as DEPTH, CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT as HEIGHT,
            CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH as WIDTH,
        };
        let what = format!("reading kernel `{kernel}`'s cluster shape");
        let mut size = 1i64;
        for dim in [WIDTH, HEIGHT, DEPTH] {
            size *= i64::from(func.get_attribute(dim).map_err(driver(&what))?.max(1));
        }
        if size > i64::from(tirx_ir::lir::check::PORTABLE_CLUSTER_CTAS) {
            func.set_attribute(NON_PORTABLE, 1)
                .map_err(driver(&format!("allowing kernel `{kernel}` its cluster of {size} CTAs")))?;
        }
        Ok(())
    }

    /// The CTAs of `k` that the device holds at once, in whole clusters of `cluster` (the
    /// kernel's `__cluster_dims__`): the driver's occupancy for its block, shared memory and
    /// registers, and for clusters where on the GPCs they fit (`cuOccupancyMaxActiveClusters`).
    /// A persistent grid past it runs a second wave.
    pub fn resident_ctas(&self, k: &Kernel, cluster: [u32; 3]) -> Result<u32, RuntimeError> {
        self.ctx.bind_to_thread().map_err(driver("binding the context to this thread"))?;
        let size: u32 = cluster.iter().map(|&c| c.max(1)).product();
        if size > 1 {
            let cfg = LaunchConfig { grid_dim: (cluster[0].max(1), cluster[1].max(1), cluster[2].max(1)), ..k.cfg };
            let n = k
                .func
                .occupancy_max_active_clusters(cfg, &self.stream)
                .map_err(driver(&format!("the occupancy of `{}`'s clusters", k.spec.kernel)))?;
            return Ok(n.saturating_mul(size));
        }
        let threads = k.cfg.block_dim.0 * k.cfg.block_dim.1 * k.cfg.block_dim.2;
        let per_sm = k
            .func
            .occupancy_max_active_blocks_per_multiprocessor(threads, k.cfg.shared_mem_bytes as usize, None)
            .map_err(driver(&format!("the occupancy of `{}`", k.spec.kernel)))?;
        Ok(per_sm.saturating_mul(self.info.sm_count.max(0) as u32))
    }

    fn check_spec(&self, s: &LaunchSpec) -> Result<(), RuntimeError> {
        let threads = s.block.iter().fold(1u64, |a, &b| a.saturating_mul(b as u64));
        let bad = |m: String| Err(RuntimeError::Invalid(format!("kernel `{}`: {m}", s.kernel)));
        if s.grid.contains(&0) || s.block.contains(&0) {
            return bad(format!("grid {:?} / block {:?} has a zero extent", s.grid, s.block));
        }
        if threads > self.info.max_threads_per_block as u64 {
            return bad(format!(
                "{threads} threads per CTA (block {:?}) exceed the device limit {}",
                s.block, self.info.max_threads_per_block
            ));
        }
        check_grid(s.grid).map_err(|m| RuntimeError::Invalid(format!("kernel `{}`: {m}", s.kernel)))?;
        if s.dependent && self.info.cc.0 < 9 {
            return bad(format!(
                "it waits for the kernel before it (`griddepcontrol.wait`), which needs compute capability 9.0; the device has {}.{}",
                self.info.cc.0, self.info.cc.1
            ));
        }
        if s.dynamic_smem_bytes as i64 > self.info.max_smem_per_block_optin as i64 {
            return bad(format!(
                "{} bytes of dynamic shared memory exceed the device's {} per CTA",
                s.dynamic_smem_bytes, self.info.max_smem_per_block_optin
            ));
        }
        Ok(())
    }

    /// Copies the parameter buffers to the device.
    pub fn upload(&self, bufs: &[Vec<u8>]) -> Result<DeviceBuffers, RuntimeError> {
        let mut slices = Vec::with_capacity(bufs.len());
        for (i, b) in bufs.iter().enumerate() {
            // Never a zero-byte allocation: a parameter with no elements still gets a valid pointer.
            let mut s = self
                .stream
                .alloc_zeros::<u8>(b.len().max(16))
                .map_err(driver(&format!("allocating {} bytes for parameter {i}", b.len())))?;
            if !b.is_empty() {
                let mut view = s.slice_mut(..b.len());
                self.stream.memcpy_htod(b.as_slice(), &mut view).map_err(driver("copying a parameter to the GPU"))?;
            }
            slices.push(s);
        }
        Ok(DeviceBuffers { slices, lens: bufs.iter().map(Vec::len).collect() })
    }

    /// Queues one launch (asynchronous).
    pub fn launch(&self, k: &Kernel, bufs: &DeviceBuffers) -> Result<(), RuntimeError> {
        let mut b = self.stream.launch_builder(&k.func);
        for s in &bufs.slices {
            b.arg(s);
        }
        // SAFETY: the argument list matches the generated kernel's signature (one pointer
        // per parameter, in order, each buffer sized for its parameter) and the
        // configuration was checked against the device limits in `load`.
        unsafe { builder_launch(&mut b, k, k.cfg) }
    }

    /// Queues one launch with scalar arguments and this launch's grid (asynchronous).
    pub fn launch_args(&self, k: &Kernel, bufs: &DeviceBuffers, a: &LaunchArgs) -> Result<(), RuntimeError> {
        check_grid(a.grid).map_err(|m| RuntimeError::Invalid(format!("kernel `{}`: {m}", k.spec.kernel)))?;
        let mut b = self.stream.launch_builder(&k.func);
        for arg in &a.args {
            match arg {
                Arg::Buffer(i) => {
                    let s = bufs.slices.get(*i).ok_or_else(|| {
                        RuntimeError::Internal(format!("launch argument names buffer {i} of {}", bufs.slices.len()))
                    })?;
                    b.arg(s);
                }
                Arg::Scalar(ScalarArg::I32(v)) => {
                    b.arg(v);
                }
                Arg::Scalar(ScalarArg::U32(v)) => {
                    b.arg(v);
                }
                Arg::Scalar(ScalarArg::I64(v)) => {
                    b.arg(v);
                }
                Arg::Scalar(ScalarArg::F32(v)) => {
                    b.arg(v);
                }
                Arg::Scalar(ScalarArg::F64(v)) => {
                    b.arg(v);
                }
                Arg::TensorMap(m) => {
                    b.arg(m);
                }
            }
        }
        let cfg = LaunchConfig { grid_dim: (a.grid[0], a.grid[1], a.grid[2]), ..k.cfg };
        // SAFETY: the arguments follow the generated kernel's signature (a device pointer per
        // buffer, sized for it, and each scalar in its declared type), and the configuration
        // was checked against the device limits in `load` (the grid just above).
        unsafe { builder_launch(&mut b, k, cfg) }
    }

    /// [`Gpu::launch_raw`] with this launch's grid (a symbolic grid evaluated by the caller).
    ///
    /// # Safety
    /// As for [`Gpu::launch_raw`].
    pub unsafe fn launch_raw_grid(
        &self,
        k: &Kernel,
        grid: [u32; 3],
        params: &mut [*mut std::ffi::c_void],
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), RuntimeError> {
        check_grid(grid).map_err(|m| RuntimeError::Invalid(format!("kernel `{}`: {m}", k.spec.kernel)))?;
        self.ctx.bind_to_thread().map_err(driver("binding the context to this thread"))?;
        raw_launch(k, (grid[0], grid[1], grid[2]), params, stream)
    }

    /// Times `iters` launches with `a` after `warmup` untimed ones (as [`Gpu::time_kernel`]).
    pub fn time_kernel_args(
        &self,
        k: &Kernel,
        bufs: &DeviceBuffers,
        a: &LaunchArgs,
        warmup: u32,
        iters: u32,
        progress: &mut dyn FnMut(u32),
    ) -> Result<Timing, RuntimeError> {
        self.time(warmup, iters, progress, &mut || self.launch_args(k, bufs, a))
    }

    /// Encodes `m` over this device's buffer at `base` ([`crate::encode_tensor_map`]) with the
    /// context bound to the calling thread first: the driver refuses to encode without one, and
    /// a caller's thread may have none (PyTorch's autograd runs backward ops on threads of its own).
    pub fn encode_tensor_map(
        &self,
        m: &tirx_ir::lir::TensorMap,
        base: u64,
    ) -> Result<crate::TensorMapArg, RuntimeError> {
        self.ctx.bind_to_thread().map_err(driver("binding the context to this thread"))?;
        crate::encode_tensor_map(m, base)
    }

    /// Queues one launch of `k` on `stream`, a stream of this device's primary context that
    /// the caller owns (PyTorch's current stream), with `params` pointing at each argument's
    /// value in the kernel's parameter order (asynchronous; nothing is synchronised).
    ///
    /// # Safety
    /// `params` must match the kernel's signature, every pointer argument must point at
    /// device memory of this context large enough for its parameter, and `stream` must be a
    /// live stream of this context (or null for the legacy default stream).
    pub unsafe fn launch_raw(
        &self,
        k: &Kernel,
        params: &mut [*mut std::ffi::c_void],
        stream: cudarc::driver::sys::CUstream,
    ) -> Result<(), RuntimeError> {
        self.ctx.bind_to_thread().map_err(driver("binding the context to this thread"))?;
        raw_launch(k, k.cfg.grid_dim, params, stream)
    }

    /// Waits for all queued work; a kernel fault surfaces here.
    pub fn sync(&self, what: &str) -> Result<(), RuntimeError> {
        self.stream.synchronize().map_err(driver(what))
    }

    /// The device address of parameter buffer `i` (a TMA descriptor's base).
    pub fn device_ptr(&self, bufs: &DeviceBuffers, i: usize) -> Result<u64, RuntimeError> {
        use cudarc::driver::DevicePtr;
        let s = bufs
            .slices
            .get(i)
            .ok_or_else(|| RuntimeError::Internal(format!("no parameter buffer {i} of {}", bufs.slices.len())))?;
        let (ptr, _sync) = s.device_ptr(&self.stream);
        Ok(ptr)
    }

    /// Copies the parameters back into `bufs`.
    pub fn download(&self, dev: &DeviceBuffers, bufs: &mut [Vec<u8>]) -> Result<(), RuntimeError> {
        let sizes: Vec<usize> = bufs.iter().map(Vec::len).collect();
        if sizes != dev.lens {
            return Err(RuntimeError::Internal(format!(
                "downloading into buffers of {sizes:?} bytes; the device holds {:?}",
                dev.lens
            )));
        }
        for ((s, len), out) in dev.slices.iter().zip(&dev.lens).zip(bufs.iter_mut()) {
            if *len > 0 {
                let view = s.slice(..*len);
                self.stream.memcpy_dtoh(&view, out.as_mut_slice()).map_err(driver("copying a parameter back"))?;
            }
        }
        self.sync("copying the parameters back")
    }

    /// Times `iters` launches of `k` after `warmup` untimed ones; `progress(done)` after each chunk.
    pub fn time_kernel(
        &self,
        k: &Kernel,
        bufs: &DeviceBuffers,
        warmup: u32,
        iters: u32,
        progress: &mut dyn FnMut(u32),
    ) -> Result<Timing, RuntimeError> {
        self.time(warmup, iters, progress, &mut || self.launch(k, bufs))
    }

    /// Times a device-to-device memcpy of `bytes` (reads and writes `bytes` each) the same way.
    pub fn time_memcpy_dtod(
        &self,
        bytes: u64,
        warmup: u32,
        iters: u32,
        progress: &mut dyn FnMut(u32),
    ) -> Result<Timing, RuntimeError> {
        let n = bytes.max(1) as usize;
        let src = self.stream.alloc_zeros::<u8>(n).map_err(driver(&format!("allocating {n} bytes for memcpy")))?;
        let mut dst = self.stream.alloc_zeros::<u8>(n).map_err(driver(&format!("allocating {n} bytes for memcpy")))?;
        self.time(warmup, iters, progress, &mut || {
            self.stream.memcpy_dtod(&src, &mut dst).map_err(driver("cuMemcpyDtoD"))
        })
    }

    fn time(
        &self,
        warmup: u32,
        iters: u32,
        progress: &mut dyn FnMut(u32),
        op: &mut dyn FnMut() -> Result<(), RuntimeError>,
    ) -> Result<Timing, RuntimeError> {
        for _ in 0..warmup {
            op()?;
        }
        self.sync("warm-up")?;
        const CHUNK: u32 = 20;
        let mut samples = Vec::with_capacity(iters as usize);
        let mut done = 0;
        while done < iters {
            let n = CHUNK.min(iters - done);
            let mut pairs: Vec<(CudaEvent, CudaEvent)> = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let start = self.timing_event()?;
                let end = self.timing_event()?;
                start.record(&self.stream).map_err(driver("recording an event"))?;
                op()?;
                end.record(&self.stream).map_err(driver("recording an event"))?;
                pairs.push((start, end));
            }
            for (start, end) in &pairs {
                samples.push(start.elapsed_ms(end).map_err(driver("timed run"))? as f64);
            }
            done += n;
            progress(done);
        }
        let summary = summarize(&samples)
            .ok_or_else(|| RuntimeError::Internal(format!("no usable timing samples ({iters} iterations)")))?;
        Ok(Timing { summary })
    }

    fn timing_event(&self) -> Result<CudaEvent, RuntimeError> {
        self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(driver("creating a timing event"))
    }
}

/// CUDA's grid limits: every dim at least 1, x < 2^31, y and z ≤ 65535.
fn check_grid(g: [u32; 3]) -> Result<(), String> {
    if g.contains(&0) || g[1] > 65535 || g[2] > 65535 || g[0] > i32::MAX as u32 {
        return Err(format!("grid {g:?} is outside the CUDA limits (1 to 2^31-1, 65535, 65535)"));
    }
    Ok(())
}

fn no_device(e: DriverError) -> RuntimeError {
    RuntimeError::Unavailable(format!(
        "no CUDA driver/NVRTC found: the driver is installed but no usable GPU was found ({e})\n\
         help: check `nvidia-smi`; without a GPU, `tirx sim` runs the same kernel on the CPU"
    ))
}

fn describe(ctx: &Arc<CudaContext>) -> Result<GpuInfo, RuntimeError> {
    let attr = |a| ctx.attribute(a).map_err(driver("reading a device attribute"));
    let cc = ctx.compute_capability().map_err(driver("reading the compute capability"))?;
    let mut driver_version = 0;
    // SAFETY: the driver is loaded and initialised (a context exists); valid out-pointer.
    unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut driver_version) };
    Ok(GpuInfo {
        name: ctx.name().map_err(driver("reading the device name"))?,
        cc,
        driver_version,
        nvrtc_version: crate::nvrtc::nvrtc_version()?,
        sm_count: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        total_mem_bytes: ctx.total_mem().map_err(driver("reading the memory size"))?,
        max_threads_per_block: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_smem_per_block_optin: attr(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?,
        arch: arch_for(cc.0, cc.1),
    })
}

/// The device ordinal that owns device pointer `ptr` (a `__cuda_array_interface__` array
/// carries no device of its own).
pub fn pointer_device(ptr: u64) -> Result<usize, RuntimeError> {
    ensure_loaded()?;
    let mut ordinal: i32 = -1;
    // SAFETY: the driver is loaded; the out-pointer is valid for the attribute's i32.
    unsafe {
        cudarc::driver::sys::cuPointerGetAttribute(
            (&mut ordinal as *mut i32).cast(),
            cudarc::driver::sys::CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
            ptr as cudarc::driver::sys::CUdeviceptr,
        )
    }
    .result()
    .map_err(driver("finding the device of a pointer"))?;
    usize::try_from(ordinal).map_err(|_| RuntimeError::Invalid(format!("{ptr:#x} is not device memory")))
}
