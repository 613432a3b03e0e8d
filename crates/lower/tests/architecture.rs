//! The layering of `crates/lower/src` (ARCHITECTURE.md), checked on the source:
//! no module imports one that imports it back (no cycle of any size), the
//! variant API imports no family, and no family imports what sits above the
//! families (the registry, the selection loop, the explain report, the
//! statement lowerer). Imports are read as text: every `crate::a::b` path,
//! `use crate::{..}` groups, `super::` paths and a parent's `child::` paths.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The families: one folder each, one module per variant.
const FAMILIES: [&str; 6] = ["copy", "copy_async", "elementwise", "gemm", "permute", "reduce"];
/// What sits above the families and must never be imported by one.
const ABOVE_FAMILIES: [&str; 7] = ["registry", "select", "explain", "stmt", "asynch", "collective", "ptx"];

type Graph = BTreeMap<String, BTreeSet<String>>;

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("src dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// `copy/gmem_smem.rs` → `copy::gmem_smem`, `copy/mod.rs` → `copy`, `lib.rs` → ``.
fn module_name(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src").with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|c| c.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts.join("::")
}

/// The longest module that `path` (`a::b::Item`) names, if any.
fn resolve(modules: &BTreeSet<String>, path: &[&str]) -> Option<String> {
    (1..=path.len()).rev().map(|n| path[..n].join("::")).find(|m| modules.contains(m))
}

fn identifiers(s: &str) -> Vec<&str> {
    s.split("::").map(|p| p.trim_matches(|c: char| !(c.is_alphanumeric() || c == '_'))).collect()
}

fn imports(module: &str, text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |path: Vec<&str>| {
        if let Some(m) = resolve(modules, &path).filter(|m| m != module && !m.is_empty()) {
            out.insert(m);
        }
    };
    let here: Vec<&str> = if module.is_empty() { vec![] } else { module.split("::").collect() };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            for item in group.split('}').next().unwrap_or("").split(',') {
                add(identifiers(item.trim().split(" as ").next().unwrap_or("")));
            }
            continue;
        }
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        let path = &rest[..end];
        if let Some((prefix, group)) = path.strip_suffix("::").zip(rest[end..].strip_prefix('{')) {
            for item in group.split('}').next().unwrap_or("").split(',') {
                let item = item.trim().split(" as ").next().unwrap_or("");
                let mut p = identifiers(prefix);
                if item != "self" {
                    p.extend(identifiers(item));
                }
                add(p);
            }
        } else {
            add(identifiers(path));
        }
    }
    // `super::x` from module `a::b` (file or folder) is `a::x`.
    for (i, _) in text.match_indices("super::") {
        if text[..i].ends_with("super::") {
            continue;
        }
        let mut rest = &text[i..];
        let mut up = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            up += 1;
            rest = r;
        }
        let base = &here[..here.len().saturating_sub(up)];
        let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(rest.len());
        let mut p: Vec<&str> = base.to_vec();
        p.extend(identifiers(&rest[..end]).into_iter().filter(|s| !s.is_empty()));
        if rest[end..].starts_with('{') {
            for item in rest[end + 1..].split('}').next().unwrap_or("").split(',') {
                let mut q = p.clone();
                q.extend(identifiers(item.trim()));
                add(q);
            }
        } else {
            add(p);
        }
    }
    out
}

fn graph() -> Graph {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    sources(&src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_name(&src, f)).collect();
    let mut g = Graph::new();
    for f in &files {
        let m = module_name(&src, f);
        let text = std::fs::read_to_string(f).expect("source");
        // Comments say `crate::x` in prose; only code imports.
        let code: String = text.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
        let mut deps = imports(&m, &code, &modules);
        // A folder module names its children by their bare name (`mod x;` is not an import).
        for child in modules.iter().filter(|c| c.rsplit_once("::").map(|(p, _)| p) == Some(m.as_str())) {
            let name = child.rsplit("::").next().unwrap_or("");
            if code.contains(&format!("{name}::")) && !code.contains(&format!("mod {name};")) {
                deps.insert(child.clone());
            }
        }
        g.insert(m, deps);
    }
    g
}

/// Modules reachable from `from` (itself excluded unless on a cycle).
fn reachable(g: &Graph, from: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = g.get(from).into_iter().flatten().cloned().collect();
    while let Some(m) = stack.pop() {
        if seen.insert(m.clone()) {
            stack.extend(g.get(&m).into_iter().flatten().cloned());
        }
    }
    seen
}

fn family_of(m: &str) -> Option<&'static str> {
    FAMILIES.iter().copied().find(|f| m == *f || m.starts_with(&format!("{f}::")))
}

#[test]
fn the_import_graph_has_no_cycle() {
    let g = graph();
    assert!(g.len() > 40, "modules not found: {:?}", g.keys());
    let cycles: Vec<&String> = g.keys().filter(|m| reachable(&g, m).contains(*m)).collect();
    assert!(cycles.is_empty(), "modules on an import cycle: {cycles:?}");
}

#[test]
fn the_variant_api_imports_no_family_and_nothing_above_it() {
    let g = graph();
    let below = reachable(&g, "variant");
    let wrong: Vec<&String> = below
        .iter()
        .filter(|m| family_of(m).is_some() || ABOVE_FAMILIES.contains(&m.as_str()) || m.is_empty())
        .collect();
    assert!(wrong.is_empty(), "the variant API reaches {wrong:?}");
}

#[test]
fn families_import_nothing_above_them() {
    let g = graph();
    for (m, deps) in &g {
        if family_of(m).is_none() {
            continue;
        }
        let wrong: Vec<&String> = deps.iter().filter(|d| ABOVE_FAMILIES.contains(&d.as_str())).collect();
        assert!(wrong.is_empty(), "{m} imports {wrong:?}");
    }
}

#[test]
fn the_import_reader_sees_imports() {
    let g = graph();
    let has = |m: &str, d: &str| g.get(m).is_some_and(|s| s.contains(d));
    assert!(has("copy::gmem_smem", "variant"), "{:?}", g.get("copy::gmem_smem"));
    assert!(has("copy::gmem_smem", "copy::call"), "{:?}", g.get("copy::gmem_smem"));
    assert!(has("registry", "copy"), "{:?}", g.get("registry"));
    assert!(has("stmt", "select"), "{:?}", g.get("stmt"));
}
