//! Making `libcuda` and `libnvrtc` loadable before cudarc touches them.
//!
//! cudarc dlopens libraries by bare name (`libnvrtc.so.13`, `libcuda.so.1`) on the
//! first call and *panics* when none loads. So every CUDA path first goes through
//! [`ensure_loaded`]: it checks `is_culib_present()` and, when the loader path does
//! not have the library, preloads it by absolute path with `libloading` and keeps it
//! loaded. glibc then resolves cudarc's later dlopen of the same soname to the loaded
//! copy (`LD_LIBRARY_PATH` set inside a running process would not work: glibc reads it at
//! start). `libnvrtc-builtins.so.N.M` is preloaded too: the 13.0 wheel's libnvrtc has
//! no RPATH and fails at compile time without it.
//!
//! Policy: `TIRX_CUDA_LIB_DIR`, when set, is authoritative for NVRTC (it must be there);
//! otherwise the loader path is used when it has NVRTC, else the discovered directories.

use crate::discover::{discover, CudaPaths, SearchEnv};
use crate::RuntimeError;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where NVRTC was loaded from, and the headers to compile with.
#[derive(Clone, Debug)]
pub struct Loaded {
    pub nvrtc: NvrtcOrigin,
    pub include_dirs: Vec<PathBuf>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NvrtcOrigin {
    /// Found by cudarc on the loader path (`LD_LIBRARY_PATH`, ldconfig).
    LoaderPath,
    /// Preloaded by absolute path.
    Preloaded(PathBuf),
}

/// Driver library locations tried when `libcuda.so.1` is not on the loader path.
/// (Never the toolkit's `lib64/stubs`: its libcuda only returns errors.)
const DRIVER_DIRS: [&str; 3] = ["/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib/wsl/lib"];

/// Loads (once per process) the driver and NVRTC, or explains everything that is missing.
pub fn ensure_loaded() -> Result<&'static Loaded, RuntimeError> {
    match (ensure_nvrtc_loaded(), ensure_driver_loaded()) {
        (Ok(l), Ok(())) => Ok(l),
        (Ok(_), Err(e)) | (Err(e), Ok(())) => Err(e),
        (Err(RuntimeError::Unavailable(n)), Err(RuntimeError::Unavailable(d))) => {
            Err(RuntimeError::Unavailable(merge_messages(&d, &n)))
        }
        (Err(e), Err(_)) => Err(e),
    }
}

/// NVRTC alone: enough to compile (on a machine without a GPU, too).
pub fn ensure_nvrtc_loaded() -> Result<&'static Loaded, RuntimeError> {
    static NVRTC: OnceLock<Result<Loaded, RuntimeError>> = OnceLock::new();
    NVRTC.get_or_init(|| load_nvrtc(&SearchEnv::from_process())).as_ref().map_err(Clone::clone)
}

/// The driver library alone.
pub fn ensure_driver_loaded() -> Result<(), RuntimeError> {
    static DRIVER: OnceLock<Result<(), RuntimeError>> = OnceLock::new();
    DRIVER
        .get_or_init(|| {
            let env = SearchEnv::from_process();
            ensure_driver(&env)
                .map_err(|e| RuntimeError::Unavailable(unavailable_message(&[format!("driver: {e}")], None)))
        })
        .clone()
}

fn load_nvrtc(env: &SearchEnv) -> Result<Loaded, RuntimeError> {
    let paths = discover(env);
    match ensure_nvrtc(env, &paths) {
        Ok(nvrtc) => Ok(Loaded { nvrtc, include_dirs: paths.include_dirs }),
        Err(e) => Err(RuntimeError::Unavailable(unavailable_message(&[format!("NVRTC: {e}")], Some(&paths)))),
    }
}

/// One message from the driver's and NVRTC's: the header once, both problem lines, NVRTC's search list and help.
fn merge_messages(driver: &str, nvrtc: &str) -> String {
    let driver_problem = driver.lines().nth(1).unwrap_or_default();
    let mut lines: Vec<&str> = nvrtc.lines().collect();
    lines.insert(1, driver_problem);
    lines.join("\n")
}

fn unavailable_message(problems: &[String], paths: Option<&CudaPaths>) -> String {
    let mut m = String::from("no CUDA driver/NVRTC found; `tirx run` and `tirx bench` need an NVIDIA GPU\n");
    for p in problems {
        m += &format!("  {p}\n");
    }
    match paths {
        Some(p) if p.searched.is_empty() => {
            m += "  searched for NVRTC: TIRX_CUDA_LIB_DIR, CUDA_HOME/CUDA_PATH, /usr/local/cuda, pip `nvidia/*` \
                  packages in $VIRTUAL_ENV and /opt/torch/.venv (none of them exists)\n"
        }
        Some(p) => {
            m += "  searched for NVRTC in:\n";
            for r in &p.searched {
                m += &format!("    {} ({})\n", r.dir.display(), r.origin);
            }
        }
        None => {}
    }
    m += match paths {
        // NVRTC missing (a driver problem, if any, is listed above too).
        Some(_) => {
            "help: on a GPU machine, point TIRX_CUDA_LIB_DIR at the directory holding libnvrtc.so.13 \
             (or set CUDA_HOME to the toolkit), or `pip install nvidia-cuda-nvrtc==13.0.88 \"nvidia-cuda-runtime==13.0.*\"` \
             into the active virtualenv; without a GPU, `tirx sim` runs the same kernel on the CPU"
        }
        None => {
            "help: run on a machine with an NVIDIA GPU and its driver (`nvidia-smi` works there); if libcuda.so.1 \
             is installed elsewhere, set TIRX_CUDA_LIB_DIR to its directory; without a GPU, `tirx sim` runs the \
             same kernel on the CPU"
        }
    };
    m
}

fn ensure_nvrtc(env: &SearchEnv, paths: &CudaPaths) -> Result<NvrtcOrigin, String> {
    if let Some(dir) = &env.lib_dir {
        let lib = paths.nvrtc.as_ref().filter(|p| p.parent() == Some(dir.as_path()));
        let Some(lib) = lib else {
            let why = if dir.is_dir() { "has no libnvrtc.so.N" } else { "is not a directory" };
            return Err(format!("TIRX_CUDA_LIB_DIR={} {why}", dir.display()));
        };
        preload_nvrtc(lib, paths.nvrtc_builtins.as_deref())?;
        return Ok(NvrtcOrigin::Preloaded(lib.clone()));
    }
    // SAFETY: `is_culib_present` only tries dlopen on library names; it calls nothing in them.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Ok(NvrtcOrigin::LoaderPath);
    }
    match &paths.nvrtc {
        Some(lib) => {
            preload_nvrtc(lib, paths.nvrtc_builtins.as_deref())?;
            Ok(NvrtcOrigin::Preloaded(lib.clone()))
        }
        None => Err("libnvrtc.so.N is not on the loader path nor in any CUDA directory searched".into()),
    }
}

fn preload_nvrtc(lib: &Path, builtins: Option<&Path>) -> Result<(), String> {
    if let Some(b) = builtins {
        preload(b)?;
    }
    preload(lib)?;
    // SAFETY: as above; now it must find the preloaded soname.
    if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        Ok(())
    } else {
        Err(format!("{} loaded, but not under a name cudarc looks for (libnvrtc.so.N)", lib.display()))
    }
}

fn ensure_driver(env: &SearchEnv) -> Result<(), String> {
    // SAFETY: dlopen of library names only.
    if unsafe { cudarc::driver::sys::is_culib_present() } {
        return Ok(());
    }
    let dirs = env.lib_dir.iter().cloned().chain(DRIVER_DIRS.iter().map(PathBuf::from));
    for dir in dirs {
        let lib = dir.join("libcuda.so.1");
        if lib.is_file() && preload(&lib).is_ok() && unsafe { cudarc::driver::sys::is_culib_present() } {
            return Ok(());
        }
    }
    Err("libcuda.so.1 (the NVIDIA driver) is not installed or not on the loader path".into())
}

/// dlopen by absolute path and keep the library loaded for the life of the process.
fn preload(path: &Path) -> Result<(), String> {
    // SAFETY: loading a CUDA library runs only its (trusted, vendor) initialisers.
    match unsafe { libloading::Library::new(path) } {
        Ok(lib) => {
            std::mem::forget(lib);
            Ok(())
        }
        Err(e) => Err(format!("cannot load {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn explicit_empty_lib_dir_is_a_clear_error_not_a_panic() {
        let t = TempDir::new("nolib");
        let env = SearchEnv { lib_dir: Some(t.path().to_path_buf()), ..Default::default() };
        let err = load_nvrtc(&env).unwrap_err().to_string();
        assert!(err.starts_with("no CUDA driver/NVRTC found"), "{err}");
        assert!(err.contains("has no libnvrtc.so.N"), "{err}");
        assert!(err.contains("TIRX_CUDA_LIB_DIR"), "{err}");
        assert!(err.contains("nvidia-cuda-nvrtc==13.0.88"), "{err}");
    }

    #[test]
    fn a_library_that_is_not_a_library_is_reported() {
        let t = TempDir::new("badlib");
        let fake = t.path().join("libnvrtc.so.13");
        std::fs::write(&fake, b"not an ELF file").unwrap();
        let err = preload_nvrtc(&fake, None).unwrap_err();
        assert!(err.contains("cannot load"), "{err}");
    }
}
