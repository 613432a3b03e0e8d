//! Where the CUDA pieces live: NVRTC's shared library (and the `libnvrtc-builtins`
//! it opens itself) and the CUDA headers (`cuda_fp16.h`, CCCL) NVRTC needs.
//!
//! Pure directory search over a [`SearchEnv`], so tests can point it at temp dirs.
//! Roots are searched in this order, first hit wins:
//! 1. `$TIRX_CUDA_LIB_DIR` (a library directory; its `../include` is tried for headers);
//! 2. `$CUDA_HOME`, then `$CUDA_PATH` (a toolkit root: `include/`, `lib64/`, `lib/`, `targets/x86_64-linux/`);
//! 3. `/usr/local/cuda`;
//! 4. pip layouts inside `$VIRTUAL_ENV` and `/opt/torch/.venv`:
//!    `lib/python3*/site-packages/nvidia/cu13` first, then the other `nvidia/*` packages
//!    (`cuda_nvrtc`, `cuda_runtime`, ... of the CUDA 12 wheels).
//!
//! Headers come from a single root (the first that has `cuda_fp16.h`, plus its
//! `include/cccl`): mixing headers of two CUDA versions is never what a user wants.

use std::path::{Path, PathBuf};

/// The environment the search reads; [`SearchEnv::from_process`] fills it from env vars.
#[derive(Clone, Debug, Default)]
pub struct SearchEnv {
    /// `TIRX_CUDA_LIB_DIR`: the directory holding `libnvrtc.so.*` (and optionally `libcuda.so.1`).
    pub lib_dir: Option<PathBuf>,
    /// `CUDA_HOME` / `CUDA_PATH`: toolkit roots.
    pub cuda_homes: Vec<PathBuf>,
    /// `VIRTUAL_ENV` and the well-known venvs (`/opt/torch/.venv`).
    pub venvs: Vec<PathBuf>,
    /// Standard toolkit locations (`/usr/local/cuda`).
    pub toolkits: Vec<PathBuf>,
}

impl SearchEnv {
    pub fn from_process() -> SearchEnv {
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        let mut venvs: Vec<PathBuf> = var("VIRTUAL_ENV").into_iter().collect();
        venvs.push(PathBuf::from("/opt/torch/.venv"));
        SearchEnv {
            lib_dir: var("TIRX_CUDA_LIB_DIR"),
            cuda_homes: ["CUDA_HOME", "CUDA_PATH"].iter().filter_map(|n| var(n)).collect(),
            venvs,
            toolkits: vec![PathBuf::from("/usr/local/cuda")],
        }
    }
}

/// A directory that may hold `include/` and library dirs, with where it came from (for messages).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Root {
    pub dir: PathBuf,
    pub origin: String,
}

/// What the search found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CudaPaths {
    /// `--include-path` options for NVRTC, in order.
    pub include_dirs: Vec<PathBuf>,
    /// Absolute path of `libnvrtc.so.N`.
    pub nvrtc: Option<PathBuf>,
    /// Absolute path of `libnvrtc-builtins.so.N.M` next to it (same major).
    pub nvrtc_builtins: Option<PathBuf>,
    /// Every root looked at, for the "not found" message.
    pub searched: Vec<Root>,
}

/// Finds headers and NVRTC under the roots of `env`.
pub fn discover(env: &SearchEnv) -> CudaPaths {
    let roots = roots(env);
    let include_dirs = roots.iter().map(|r| include_dirs(&r.dir)).find(|d| !d.is_empty()).unwrap_or_default();
    let nvrtc = roots.iter().flat_map(|r| lib_dirs(&r.dir)).find_map(|d| find_nvrtc(&d));
    let nvrtc_builtins = nvrtc.as_deref().and_then(find_builtins);
    CudaPaths { include_dirs, nvrtc, nvrtc_builtins, searched: roots }
}

/// The candidate roots, in search order, existing directories only.
pub fn roots(env: &SearchEnv) -> Vec<Root> {
    let mut out: Vec<Root> = Vec::new();
    let mut push = |dir: PathBuf, origin: String| {
        if dir.is_dir() && !out.iter().any(|r| r.dir == dir) {
            out.push(Root { dir, origin });
        }
    };
    if let Some(lib) = &env.lib_dir {
        // The lib dir itself is a "root" whose library dir is `.`; its parent may have `include/`.
        push(lib.clone(), "TIRX_CUDA_LIB_DIR".into());
        if let Some(parent) = lib.parent() {
            push(parent.to_path_buf(), "parent of TIRX_CUDA_LIB_DIR".into());
        }
    }
    for home in &env.cuda_homes {
        push(home.clone(), "CUDA_HOME".into());
    }
    for tk in &env.toolkits {
        push(tk.clone(), "toolkit".into());
    }
    for venv in &env.venvs {
        for pkg in pip_nvidia_packages(venv) {
            push(pkg, format!("pip package in {}", venv.display()));
        }
    }
    out
}

/// `VENV/lib/python3*/site-packages/nvidia/{cu13, then the others sorted}`.
fn pip_nvidia_packages(venv: &Path) -> Vec<PathBuf> {
    let mut site_packages: Vec<PathBuf> = read_dir_sorted(&venv.join("lib"))
        .into_iter()
        .filter(|p| file_name(p).starts_with("python3"))
        .map(|p| p.join("site-packages").join("nvidia"))
        .filter(|p| p.is_dir())
        .collect();
    // Newest python first (`python3.12` before `python3.11`), as a venv normally has one.
    site_packages.reverse();
    let mut out = Vec::new();
    for nvidia in site_packages {
        let mut pkgs = read_dir_sorted(&nvidia);
        pkgs.retain(|p| p.is_dir());
        // The CUDA 13 wheels put everything under `cu13`: prefer it over CUDA 12 per-component dirs.
        pkgs.sort_by_key(|p| (file_name(p) != "cu13", file_name(p)));
        out.extend(pkgs);
    }
    out
}

/// `root/include` when it holds `cuda_fp16.h`, plus `root/include/cccl` when present.
pub fn include_dirs(root: &Path) -> Vec<PathBuf> {
    for inc in [root.join("include"), root.join("targets/x86_64-linux/include")] {
        if inc.join("cuda_fp16.h").is_file() {
            let mut dirs = vec![inc.clone()];
            if inc.join("cccl").is_dir() {
                dirs.push(inc.join("cccl"));
            }
            return dirs;
        }
    }
    Vec::new()
}

/// The library directories of a root (a lib dir given directly counts as its own).
fn lib_dirs(root: &Path) -> Vec<PathBuf> {
    [".", "lib64", "lib", "targets/x86_64-linux/lib"]
        .iter()
        .map(|d| if *d == "." { root.to_path_buf() } else { root.join(d) })
        .filter(|d| d.is_dir())
        .collect()
}

/// `libnvrtc.so.N` with the highest N in `dir` (the soname file, which cudarc's dlopen names match).
pub fn find_nvrtc(dir: &Path) -> Option<PathBuf> {
    read_dir_sorted(dir)
        .into_iter()
        .filter_map(|p| {
            let major: u32 = file_name(&p).strip_prefix("libnvrtc.so.")?.parse().ok()?;
            Some((major, p))
        })
        .max_by_key(|(major, _)| *major)
        .map(|(_, p)| p)
}

/// `libnvrtc-builtins.so.N.M` next to `nvrtc` with the same major N (highest M).
pub fn find_builtins(nvrtc: &Path) -> Option<PathBuf> {
    let major = file_name(nvrtc).strip_prefix("libnvrtc.so.")?.to_string();
    let prefix = format!("libnvrtc-builtins.so.{major}.");
    read_dir_sorted(nvrtc.parent()?)
        .into_iter()
        .filter_map(|p| {
            let minor: u32 = file_name(&p).strip_prefix(&prefix)?.parse().ok()?;
            Some((minor, p))
        })
        .max_by_key(|(minor, _)| *minor)
        .map(|(_, p)| p)
}

fn read_dir_sorted(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(_) => Vec::new(),
    };
    v.sort();
    v
}

fn file_name(p: &Path) -> String {
    p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    #[test]
    fn pip_cu13_layout_gives_include_cccl_and_nvrtc_with_builtins() {
        let t = TempDir::new("pip13");
        let cu13 = t.path().join("venv/lib/python3.12/site-packages/nvidia/cu13");
        touch(&cu13.join("include/cuda_fp16.h"));
        std::fs::create_dir_all(cu13.join("include/cccl/cuda")).unwrap();
        touch(&cu13.join("lib/libnvrtc.so.13"));
        touch(&cu13.join("lib/libnvrtc-builtins.so.13.0"));
        touch(&cu13.join("lib/libnvrtc-builtins.alt.so.13.0"));
        let env = SearchEnv { venvs: vec![t.path().join("venv")], ..Default::default() };
        let p = discover(&env);
        assert_eq!(p.include_dirs, vec![cu13.join("include"), cu13.join("include/cccl")]);
        assert_eq!(p.nvrtc, Some(cu13.join("lib/libnvrtc.so.13")));
        assert_eq!(p.nvrtc_builtins, Some(cu13.join("lib/libnvrtc-builtins.so.13.0")));
    }

    #[test]
    fn cuda12_pip_layout_takes_headers_and_library_from_different_packages() {
        let t = TempDir::new("pip12");
        let nv = t.path().join("venv/lib/python3.11/site-packages/nvidia");
        touch(&nv.join("cuda_runtime/include/cuda_fp16.h"));
        touch(&nv.join("cuda_nvrtc/lib/libnvrtc.so.12"));
        touch(&nv.join("cuda_nvrtc/lib/libnvrtc-builtins.so.12.8"));
        touch(&nv.join("cuda_nvrtc/lib/libnvrtc-builtins.so.12.4"));
        let env = SearchEnv { venvs: vec![t.path().join("venv")], ..Default::default() };
        let p = discover(&env);
        assert_eq!(p.include_dirs, vec![nv.join("cuda_runtime/include")]);
        assert_eq!(p.nvrtc, Some(nv.join("cuda_nvrtc/lib/libnvrtc.so.12")));
        assert_eq!(p.nvrtc_builtins, Some(nv.join("cuda_nvrtc/lib/libnvrtc-builtins.so.12.8")));
    }

    #[test]
    fn explicit_lib_dir_and_cuda_home_win_over_toolkit_and_venv() {
        let t = TempDir::new("order");
        let lib = t.path().join("mine/lib");
        touch(&lib.join("libnvrtc.so.13"));
        touch(&t.path().join("mine/include/cuda_fp16.h"));
        let home = t.path().join("home");
        touch(&home.join("include/cuda_fp16.h"));
        touch(&home.join("lib64/libnvrtc.so.13"));
        let tk = t.path().join("usr-local-cuda");
        touch(&tk.join("lib64/libnvrtc.so.13"));
        let env =
            SearchEnv { lib_dir: Some(lib.clone()), cuda_homes: vec![home.clone()], toolkits: vec![tk], venvs: vec![] };
        let p = discover(&env);
        assert_eq!(p.nvrtc, Some(lib.join("libnvrtc.so.13")));
        assert_eq!(p.include_dirs, vec![t.path().join("mine/include")]);
        // Without the explicit dir, CUDA_HOME comes before /usr/local/cuda.
        let p = discover(&SearchEnv { lib_dir: None, ..env });
        assert_eq!(p.nvrtc, Some(home.join("lib64/libnvrtc.so.13")));
        assert_eq!(p.include_dirs, vec![home.join("include")]);
    }

    #[test]
    fn highest_nvrtc_major_is_chosen_and_dev_symlink_ignored() {
        let t = TempDir::new("major");
        touch(&t.path().join("libnvrtc.so"));
        touch(&t.path().join("libnvrtc.so.12"));
        touch(&t.path().join("libnvrtc.so.13"));
        touch(&t.path().join("libnvrtc.so.13.0.88"));
        assert_eq!(find_nvrtc(t.path()), Some(t.path().join("libnvrtc.so.13")));
        // No builtins next to it: none reported (NVRTC then relies on its own RPATH).
        assert_eq!(find_builtins(&t.path().join("libnvrtc.so.13")), None);
    }

    #[test]
    fn nothing_found_lists_searched_roots() {
        let t = TempDir::new("empty");
        let env = SearchEnv { lib_dir: Some(t.path().to_path_buf()), ..Default::default() };
        let p = discover(&env);
        assert!(p.nvrtc.is_none() && p.include_dirs.is_empty());
        assert_eq!(p.searched[0].dir, t.path());
        assert_eq!(p.searched[0].origin, "TIRX_CUDA_LIB_DIR");
    }
}
