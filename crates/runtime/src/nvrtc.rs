//! CUDA C++ → CUBIN with NVRTC (raw `cudarc::nvrtc::sys` calls: cudarc's safe API
//! returns PTX only, and PTX from a newer NVRTC than the driver cannot be JIT-loaded,
//! while a CUBIN loads as is).
//!
//! Options: `--gpu-architecture=sm_XY[a]` ([`arch_for`]), `-std=c++17`, `-lineinfo`
//! (so compute-sanitizer reports source lines), `--fmad=false`, `--ptxas-options=-warn-spills`
//! (ptxas then names spills in the program log, beside its serialized-wgmma note: both are
//! [`performance_warnings`]), one `--include-path` per header dir.
//!
//! `--fmad=false`: the LIR says `a*b + c` is a multiply and an add, each rounded, and the
//! simulator computes exactly that. NVRTC would otherwise contract them into one FMA (one
//! rounding), so GPU and simulator could differ by more than an ulp when the sum cancels.
//! Fused operations the LIR asks for (`fma`: `__fmaf_rn`, `__hfma`, `__hfma2`) are explicit
//! intrinsics and stay fused (`docs/numerics.md` §3).

use crate::libs::ensure_nvrtc_loaded;
use crate::RuntimeError;
use cudarc::nvrtc::sys;
use std::ffi::{c_char, CStr, CString};
use std::path::PathBuf;

/// The NVRTC target for a compute capability: `sm_90a` for 9.0 (the arch-specific
/// feature set — wgmma, setmaxnreg — exists only there and on later `a` targets),
/// `sm_86` below 9.0.
pub fn arch_for(major: i32, minor: i32) -> tirx_ir::Arch {
    let clamp = |v: i32| v.clamp(0, i32::from(u8::MAX)) as u8;
    tirx_ir::Arch::for_compute_capability(clamp(major), clamp(minor))
}

/// The NVRTC options for `arch` with `include_dirs`, in a stable order (they are part of the cache key).
pub fn options(arch: tirx_ir::Arch, include_dirs: &[PathBuf]) -> Vec<String> {
    let mut o = vec![
        format!("--gpu-architecture={arch}"),
        "-std=c++17".into(),
        "-lineinfo".into(),
        "--fmad=false".into(),
        "--ptxas-options=-warn-spills".into(),
    ];
    o.extend(include_dirs.iter().map(|d| format!("--include-path={}", d.display())));
    o
}

/// `(major, minor)` of the loaded NVRTC.
pub fn nvrtc_version() -> Result<(i32, i32), RuntimeError> {
    ensure_nvrtc_loaded()?;
    let (mut major, mut minor) = (0, 0);
    // SAFETY: NVRTC is loaded (checked above); out-pointers are valid.
    check(unsafe { sys::nvrtcVersion(&mut major, &mut minor) }, "nvrtcVersion")?;
    Ok((major, minor))
}

/// Compiles `source` for `arch` to a CUBIN, uncached (`compile_cached` wraps it in the on-disk cache).
pub fn compile_cubin(source: &str, arch: tirx_ir::Arch) -> Result<Vec<u8>, RuntimeError> {
    let loaded = ensure_nvrtc_loaded()?;
    compile_with_options(source, &options(arch, &loaded.include_dirs)).map(|(cubin, _log)| cubin)
}

/// What ptxas says when it serializes a kernel's wgmmas (C7512 and its kin).
const SERIALIZED: &str = "wgmma.mma_async instructions are serialized";

/// Whether a [`performance_warnings`] message is ptxas serializing wgmmas (each waiting for the
/// one before it: a tensor-core kernel at a fraction of its rate), not a spill (often a few
/// bytes in an epilogue, run once a tile).
pub fn is_serialization(warning: &str) -> bool {
    warning.contains(SERIALIZED)
}

/// What ptxas says in an NVRTC program log that costs a kernel speed without failing it, one
/// message each: wgmmas serialized (C7512 and its kin: each waits for the one before it) and
/// registers spilled to local memory (`-warn-spills`).
pub fn performance_warnings(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let said = line.split_once(':').map_or(line, |(_, rest)| rest).trim();
            if line.contains(SERIALIZED) {
                let fix = if line.contains("register") {
                    "fewer registers live across the wgmmas (fewer or smaller accumulators, one reused once read) lift it"
                } else {
                    "what ptxas names is the fix"
                };
                Some(format!(
                    "ptxas: {said} -- each wgmma then waits for the one before it, at a fraction of the tensor cores' \
                     rate; {fix}"
                ))
            } else if line.contains("Registers are spilled") {
                Some(format!("ptxas: {said} (each spilled value a round trip through L1)"))
            } else {
                None
            }
        })
        .collect()
}

/// Compiles with exactly `opts`: the CUBIN and the program log (ptxas's notes; on failure the
/// log is part of the error).
pub fn compile_with_options(source: &str, opts: &[String]) -> Result<(Vec<u8>, String), RuntimeError> {
    ensure_nvrtc_loaded()?;
    let src = CString::new(source).map_err(|_| RuntimeError::Internal("CUDA source contains a NUL byte".into()))?;
    let copts: Vec<CString> = opts
        .iter()
        .map(|o| CString::new(o.as_str()))
        .collect::<Result<_, _>>()
        .map_err(|_| RuntimeError::Internal("an NVRTC option contains a NUL byte".into()))?;
    let ptrs: Vec<*const c_char> = copts.iter().map(|c| c.as_ptr()).collect();
    let program = Program::create(&src)?;
    // SAFETY: `program` is live; `ptrs` points at `copts`, alive for the call.
    let status = unsafe { sys::nvrtcCompileProgram(program.0, ptrs.len() as i32, ptrs.as_ptr()) };
    if status != sys::nvrtcResult::NVRTC_SUCCESS {
        return Err(RuntimeError::Compile {
            status: format!("{status:?}"),
            log: program.log(),
            options: opts.to_vec(),
        });
    }
    Ok((program.cubin()?, program.log()))
}

/// An NVRTC program, destroyed on drop.
struct Program(sys::nvrtcProgram);

impl Program {
    fn create(src: &CStr) -> Result<Program, RuntimeError> {
        let mut prog: sys::nvrtcProgram = std::ptr::null_mut();
        // SAFETY: valid out-pointer, NUL-terminated source and name, no headers.
        let status = unsafe {
            sys::nvrtcCreateProgram(
                &mut prog,
                src.as_ptr(),
                c"tirx_kernel.cu".as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            )
        };
        check(status, "nvrtcCreateProgram")?;
        Ok(Program(prog))
    }

    fn log(&self) -> String {
        let mut size = 0usize;
        // SAFETY: live program; the buffer has `size` bytes as NVRTC asked.
        unsafe {
            if sys::nvrtcGetProgramLogSize(self.0, &mut size) != sys::nvrtcResult::NVRTC_SUCCESS || size == 0 {
                return String::new();
            }
            let mut buf = vec![0u8; size];
            if sys::nvrtcGetProgramLog(self.0, buf.as_mut_ptr() as *mut c_char) != sys::nvrtcResult::NVRTC_SUCCESS {
                return String::new();
            }
            String::from_utf8_lossy(buf.split(|b| *b == 0).next().unwrap_or(&[])).into_owned()
        }
    }

    fn cubin(&self) -> Result<Vec<u8>, RuntimeError> {
        let mut size = 0usize;
        // SAFETY: live, compiled program; the buffer has the size NVRTC reported.
        unsafe {
            check(sys::nvrtcGetCUBINSize(self.0, &mut size), "nvrtcGetCUBINSize")?;
            if size == 0 {
                return Err(RuntimeError::Internal(
                    "NVRTC produced no CUBIN (a `compute_XX` virtual arch gives PTX only; use `sm_XX`)".into(),
                ));
            }
            let mut buf = vec![0u8; size];
            check(sys::nvrtcGetCUBIN(self.0, buf.as_mut_ptr() as *mut c_char), "nvrtcGetCUBIN")?;
            Ok(buf)
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram and destroyed once.
        unsafe {
            sys::nvrtcDestroyProgram(&mut self.0);
        }
    }
}

fn check(status: sys::nvrtcResult, call: &str) -> Result<(), RuntimeError> {
    if status == sys::nvrtcResult::NVRTC_SUCCESS {
        Ok(())
    } else {
        Err(RuntimeError::Internal(format!("{call} failed: {status:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arch_string_uses_the_a_suffix_from_hopper_on() {
        assert_eq!(arch_for(9, 0).to_string(), "sm_90a");
        assert_eq!(arch_for(10, 0).to_string(), "sm_100a");
        assert_eq!(arch_for(12, 0).to_string(), "sm_120a");
        assert_eq!(arch_for(8, 6).to_string(), "sm_86");
        assert_eq!(arch_for(8, 0).to_string(), "sm_80");
    }

    #[test]
    fn options_are_stable_and_carry_every_include_dir() {
        let o = options(tirx_ir::Arch::SM_90A, &[PathBuf::from("/x/include"), PathBuf::from("/x/include/cccl")]);
        assert_eq!(
            o,
            [
                "--gpu-architecture=sm_90a",
                "-std=c++17",
                "-lineinfo",
                "--fmad=false",
                "--ptxas-options=-warn-spills",
                "--include-path=/x/include",
                "--include-path=/x/include/cccl"
            ]
        );
    }

    #[test]
    fn performance_warnings_name_serialized_wgmmas_and_spills_only() {
        let log = "ptxas info    : (C7512) Potential Performance Loss: wgmma.mma_async instructions are serialized \
                   due to insufficient register resources for the function 'attention_dkv_dq'\n\
                   ptxas warning : Registers are spilled to local memory in function 'matmul_gated', 32 bytes spill \
                   stores, 32 bytes spill loads\n\
                   ptxas info    : 0 bytes gmem\n";
        let w = performance_warnings(log);
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(is_serialization(&w[0]) && !is_serialization(&w[1]));
        assert!(w[0].starts_with("ptxas: (C7512) Potential Performance Loss: wgmma.mma_async"), "{}", w[0]);
        assert!(w[0].contains("'attention_dkv_dq'") && w[0].contains("fewer registers live"), "{}", w[0]);
        assert!(
            w[1].starts_with("ptxas: Registers are spilled to local memory in function 'matmul_gated', 32 bytes"),
            "{}",
            w[1]
        );
        assert!(performance_warnings("ptxas info    : 0 bytes gmem\n").is_empty());
        let other =
            performance_warnings("ptxas info : (C7515) wgmma.mma_async instructions are serialized due to a call");
        assert!(other[0].ends_with("what ptxas names is the fix"), "{other:?}");
    }
}
