//! On-disk CUBIN cache: `<dir>/<blake3>.cubin`, keyed by the CUDA source, the exact
//! NVRTC options (arch and include paths included) and the NVRTC version, so a
//! different compiler, target or header set never reuses a stale binary. ptxas's
//! [`performance_warnings`] of a kernel are kept beside it (`<blake3>.warnings`, written
//! first), so a cache hit reports them as the compile did.
//!
//! Directory: `$TIRX_CACHE_DIR`, else `$XDG_CACHE_HOME/tirx`, else `~/.cache/tirx`.
//! The cache is an optimisation: a read or write failure only costs a recompile
//! (reported as a note), never the run. Entries are written to a temp file and renamed,
//! so a concurrent reader never sees half a file; a file that is not an ELF image is ignored.

use crate::libs::ensure_nvrtc_loaded;
use crate::nvrtc::{compile_with_options, nvrtc_version, options, performance_warnings};
use crate::RuntimeError;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Bumped when the key's meaning changes.
const KEY_FORMAT: &str = "tirx-cubin-v1";

/// The cache key: blake3 of the format tag, NVRTC version, options and source, each length-prefixed.
pub fn cache_key(source: &str, options: &[String], nvrtc: (i32, i32)) -> String {
    let mut h = blake3::Hasher::new();
    let mut field = |bytes: &[u8]| {
        h.update(&(bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(KEY_FORMAT.as_bytes());
    field(format!("{}.{}", nvrtc.0, nvrtc.1).as_bytes());
    for o in options {
        field(o.as_bytes());
    }
    field(source.as_bytes());
    h.finalize().to_hex().to_string()
}

/// The cache directory from the environment (`None` when no home is known).
pub fn default_dir() -> Option<PathBuf> {
    let var = |n: &str| std::env::var_os(n).filter(|v| !v.is_empty()).map(PathBuf::from);
    cache_dir_from(var("TIRX_CACHE_DIR"), var("XDG_CACHE_HOME"), var("HOME"))
}

fn cache_dir_from(tirx: Option<PathBuf>, xdg: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    tirx.or_else(|| xdg.map(|x| x.join("tirx"))).or_else(|| home.map(|h| h.join(".cache").join("tirx")))
}

/// A compiled kernel and how it was obtained.
#[derive(Clone, Debug)]
pub struct Compiled {
    pub cubin: Vec<u8>,
    /// Found in the cache (no NVRTC run).
    pub cached: bool,
    /// NVRTC time, or the cache lookup time on a hit.
    pub elapsed: Duration,
    /// Set when the cache could not be read or written (the compile itself succeeded).
    pub cache_note: Option<String>,
    /// ptxas's [`performance_warnings`]: wgmmas serialized, registers spilled.
    pub warnings: Vec<String>,
}

/// Compiles `source` for `arch`, through the cache in `dir` (`None`: no cache).
pub fn compile_cached(source: &str, arch: tirx_ir::Arch, dir: Option<&Path>) -> Result<Compiled, RuntimeError> {
    let t0 = Instant::now();
    let opts = options(arch, &ensure_nvrtc_loaded()?.include_dirs);
    let key = cache_key(source, &opts, nvrtc_version()?);
    let entry = dir.map(|d| d.join(format!("{key}.cubin")));
    if let Some(cubin) = entry.as_deref().and_then(read_entry) {
        let warnings = entry.as_deref().map(read_warnings).unwrap_or_default();
        return Ok(Compiled { cubin, cached: true, elapsed: t0.elapsed(), cache_note: None, warnings });
    }
    let t0 = Instant::now();
    let (cubin, log) = compile_with_options(source, &opts)?;
    let elapsed = t0.elapsed();
    let warnings = performance_warnings(&log);
    let cache_note = entry.and_then(|e| {
        let text = warnings.iter().map(|w| format!("{w}\n")).collect::<String>();
        let kept =
            if warnings.is_empty() { Ok(()) } else { write_entry(&e.with_extension("warnings"), text.as_bytes()) };
        kept.and_then(|()| write_entry(&e, &cubin)).err()
    });
    Ok(Compiled { cubin, cached: false, elapsed, cache_note, warnings })
}

/// The warnings kept beside a cached CUBIN (none when there is no file: the compile had none).
fn read_warnings(cubin: &Path) -> Vec<String> {
    std::fs::read_to_string(cubin.with_extension("warnings"))
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}

fn read_entry(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok().filter(|b| b.starts_with(b"\x7fELF"))
}

fn write_entry(path: &Path, cubin: &[u8]) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("CUBIN cache {} not written: {e}", path.display());
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(fail)?;
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    std::fs::write(&tmp, cubin).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        fail(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    fn opts(arch: &str) -> Vec<String> {
        vec![format!("--gpu-architecture={arch}"), "-std=c++17".into()]
    }

    #[test]
    fn key_changes_with_source_options_and_nvrtc_version() {
        let base = cache_key("k", &opts("sm_90a"), (13, 0));
        assert_eq!(base, cache_key("k", &opts("sm_90a"), (13, 0)));
        assert_eq!(base.len(), 64);
        assert_ne!(base, cache_key("k2", &opts("sm_90a"), (13, 0)));
        assert_ne!(base, cache_key("k", &opts("sm_100a"), (13, 0)));
        assert_ne!(base, cache_key("k", &opts("sm_90a"), (13, 5)));
        let mut more = opts("sm_90a");
        more.push("--include-path=/x".into());
        assert_ne!(base, cache_key("k", &more, (13, 0)));
    }

    #[test]
    fn key_fields_cannot_run_into_each_other() {
        // Same concatenated bytes, different split between option and source.
        let a = cache_key("bc", &["a".into()], (13, 0));
        let b = cache_key("c", &["ab".into()], (13, 0));
        assert_ne!(a, b);
    }

    #[test]
    fn directory_precedence() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(cache_dir_from(p("/t"), p("/x"), p("/h")), p("/t"));
        assert_eq!(cache_dir_from(None, p("/x"), p("/h")), p("/x/tirx"));
        assert_eq!(cache_dir_from(None, None, p("/h")), p("/h/.cache/tirx"));
        assert_eq!(cache_dir_from(None, None, None), None);
    }

    #[test]
    fn warnings_are_read_from_beside_the_entry() {
        let t = TempDir::new("cache-warnings");
        let e = t.path().join("abc.cubin");
        assert!(read_warnings(&e).is_empty());
        write_entry(&e.with_extension("warnings"), b"ptxas: one\nptxas: two\n").unwrap();
        assert_eq!(read_warnings(&e), ["ptxas: one", "ptxas: two"]);
    }

    #[test]
    fn entries_round_trip_and_non_elf_files_are_ignored() {
        let t = TempDir::new("cache");
        let e = t.path().join("sub/abc.cubin");
        write_entry(&e, b"\x7fELF rest").unwrap();
        assert_eq!(read_entry(&e).as_deref(), Some(&b"\x7fELF rest"[..]));
        std::fs::write(&e, b"garbage").unwrap();
        assert_eq!(read_entry(&e), None);
        // No temp file left behind.
        let names: Vec<_> = std::fs::read_dir(t.path().join("sub")).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "{names:?}");
    }
}
