//! Scope-id extents (tile-primitives.md §1.2): every `T.cta_id / lane_id / ...`
//! declares a (parent → child) binding with a fused extent. Known extents are
//! closed under composition (cta→warp × warp→thread = cta→thread) and
//! complement (cta→thread / warp→thread = cta→warp); deferred declarations
//! (`T.lane_id()`) must end up known, declarations must agree, and the kernel
//! needs a cta→thread extent (its thread count).

use std::collections::BTreeMap;
use tirx_ir::hir::{Kernel, ScopeIdDef, ScopeIdKind, Stmt, StmtKind};
use tirx_ir::{Diagnostic, Span};
use tirx_layout::ExecScope;

/// CUDA's limit on threads per block.
const MAX_CTA_THREADS: i64 = 1024;

/// `(parent, child)` scope pair of a binding.
pub type Binding = (ExecScope, ExecScope);

const KINDS: [ScopeIdKind; 9] = [
    ScopeIdKind::CtaId,
    ScopeIdKind::ClusterId,
    ScopeIdKind::CtaIdInCluster,
    ScopeIdKind::WarpgroupId,
    ScopeIdKind::WarpId,
    ScopeIdKind::WarpIdInWg,
    ScopeIdKind::LaneId,
    ScopeIdKind::ThreadId,
    ScopeIdKind::ThreadIdInWg,
];

/// Where a known extent came from: declared, or derived from two others.
#[derive(Clone, Debug)]
struct Known {
    extent: i64,
    /// Spans of the declarations it rests on.
    from: Vec<Span>,
    /// Human-readable derivation ("cta→warp (4) × warp→thread (32)").
    why: String,
}

/// Resolves every binding's fused extent, or explains what is inconsistent
/// or missing. The map holds declared and inferred bindings.
pub fn infer_scope_extents(k: &Kernel) -> Result<BTreeMap<Binding, i64>, Vec<Diagnostic>> {
    let mut defs = vec![];
    collect(&k.body, &mut defs);
    let mut diags = vec![];
    let mut known: BTreeMap<Binding, Known> = BTreeMap::new();
    for d in &defs {
        check_hardware_extent(d, &mut diags);
        let Some(ext) = &d.extents else { continue };
        let fe = ext.iter().fold(1i64, |a, &e| a.saturating_mul(e));
        let b = d.kind.binding();
        match known.get(&b) {
            Some(prev) if prev.extent != fe => diags.push(
                Diagnostic::error(d.span, format!("inconsistent scope-id extents for {}", show(b)))
                    .with_label(format!("declares {fe}"))
                    .with_secondary(prev.from[0], format!("declared {} here", prev.extent))
                    .with_help("declare each scope id with one extent"),
            ),
            Some(_) => {}
            None => {
                let why = format!("`T.{}` ({fe})", d.kind.script_name());
                known.insert(b, Known { extent: fe, from: vec![d.span], why });
            }
        }
    }
    close(&mut known, &mut diags);
    for d in &defs {
        if d.extents.is_none() && !known.contains_key(&d.kind.binding()) {
            let name = d.kind.script_name();
            diags.push(
                Diagnostic::error(d.span, format!("cannot infer the extent of `T.{name}()`"))
                    .with_label("deferred extent")
                    .with_help(format!(
                        "declare it (`T.{name}([{}])`) or declare sibling scope ids that pin it down, e.g. `T.cta_id([1]); T.lane_id([32]); T.thread_id([32])`",
                        hardware_extent(d.kind).unwrap_or(1)
                    )),
            );
        }
    }
    if let Some(t) = known.get(&(ExecScope::Cta, ExecScope::Thread)) {
        if t.extent > MAX_CTA_THREADS && diags.is_empty() {
            diags.push(
                Diagnostic::error(
                    t.from[0],
                    format!("a CTA has at most {MAX_CTA_THREADS} threads, this kernel declares {}", t.extent),
                )
                .with_label(format!("{} threads per CTA", t.extent))
                .with_help("use fewer threads per CTA and more CTAs (`T.cta_id([n])`)"),
            );
        }
    }
    let has_device = k.body.iter().any(|s| matches!(s.kind, StmtKind::DeviceEntry));
    if has_device && !known.contains_key(&(ExecScope::Cta, ExecScope::Thread)) && diags.is_empty() {
        let span = defs.first().map(|d| d.span).unwrap_or(k.span);
        diags.push(
            Diagnostic::error(span, "missing thread extent: the kernel never says how many threads a CTA has")
                .with_label("no cta→thread extent can be derived")
                .with_help("declare it, e.g. `tid = T.thread_id([128])`, or `T.warp_id([4]); T.lane_id([32])`"),
        );
    }
    if diags.is_empty() {
        Ok(known.into_iter().map(|(b, k)| (b, k.extent)).collect())
    } else {
        Err(diags)
    }
}

fn collect<'a>(body: &'a [Stmt], out: &mut Vec<&'a ScopeIdDef>) {
    for s in body {
        match &s.kind {
            StmtKind::ScopeId(d) => out.push(d),
            StmtKind::For { body, .. } => collect(body, out),
            StmtKind::If { then_body, else_body, .. } => {
                collect(then_body, out);
                collect(else_body, out);
            }
            _ => {}
        }
    }
}

/// Extents fixed by the hardware (a warp has 32 lanes, a warpgroup 4 warps).
fn hardware_extent(kind: ScopeIdKind) -> Option<i64> {
    match kind {
        ScopeIdKind::LaneId => Some(32),
        ScopeIdKind::WarpIdInWg => Some(4),
        ScopeIdKind::ThreadIdInWg => Some(128),
        _ => None,
    }
}

fn check_hardware_extent(d: &ScopeIdDef, diags: &mut Vec<Diagnostic>) {
    let (Some(want), Some(ext)) = (hardware_extent(d.kind), &d.extents) else { return };
    if ext.len() == 1 && ext[0] != want {
        let name = d.kind.script_name();
        diags.push(
            Diagnostic::error(d.span, format!("`T.{name}` extent must be {want}, found {}", ext[0]))
                .with_label(format!("{} is fixed by the hardware", show(d.kind.binding())))
                .with_help(format!("write `T.{name}([{want}])`")),
        );
    }
}

fn valid(b: Binding) -> bool {
    KINDS.iter().any(|k| k.binding() == b)
}

fn show(b: Binding) -> String {
    format!("{}→{}", b.0.name(), b.1.name())
}

/// Compose / complement to a fixpoint; a derived extent that disagrees with a
/// known one, or does not divide, is an error.
fn close(known: &mut BTreeMap<Binding, Known>, diags: &mut Vec<Diagnostic>) {
    // At most one new binding per round; there are 9 bindings.
    for _ in 0..KINDS.len() + 1 {
        let snapshot: Vec<(Binding, Known)> = known.iter().map(|(b, k)| (*b, k.clone())).collect();
        let mut added = false;
        for (lb, l) in &snapshot {
            for (rb, r) in &snapshot {
                if lb == rb {
                    continue;
                }
                let mut derived: Vec<(Binding, Option<i64>, String)> = vec![];
                if lb.1 == rb.0 {
                    let b = (lb.0, rb.1);
                    derived.push((b, l.extent.checked_mul(r.extent), format!("{} × {}", l.why, r.why)));
                }
                if lb.0 == rb.0 && rb.1.wider_than(lb.1) {
                    let b = (rb.1, lb.1);
                    derived.push((b, exact_div(l.extent, r.extent), format!("{} / {}", l.why, r.why)));
                }
                if lb.1 == rb.1 && lb.0.wider_than(rb.0) {
                    let b = (lb.0, rb.0);
                    derived.push((b, exact_div(l.extent, r.extent), format!("{} / {}", l.why, r.why)));
                }
                for (b, ext, why) in derived {
                    if !valid(b) {
                        continue;
                    }
                    let from: Vec<Span> = l.from.iter().chain(&r.from).copied().collect();
                    if ext.is_none() && lb.1 == rb.0 {
                        diags.push(
                            Diagnostic::error(from[0], format!("scope-id extents overflow: {why}"))
                                .with_help("declare realistic extents (a CTA has at most 1024 threads)"),
                        );
                        return;
                    }
                    let Some(ext) = ext else {
                        diags.push(
                            Diagnostic::error(
                                from[0],
                                format!("scope ids have non-divisible extents for {}: {why}", show(b)),
                            )
                            .with_secondary(*from.last().unwrap_or(&from[0]), "combined with this")
                            .with_help("make the thread counts multiples of each other"),
                        );
                        return;
                    };
                    match known.get(&b) {
                        Some(k) if k.extent != ext => {
                            diags.push(
                                Diagnostic::error(
                                    k.from[0],
                                    format!(
                                        "inconsistent scope-id extents: {} is {} here, but {why} gives {ext}",
                                        show(b),
                                        k.extent
                                    ),
                                )
                                .with_label(format!("{} is {}", show(b), k.extent))
                                .with_secondary(from[0], "these declarations disagree")
                                .with_help("make the declared extents agree (e.g. thread_id = warp_id × 32)"),
                            );
                            return;
                        }
                        Some(_) => {}
                        None => {
                            known.insert(b, Known { extent: ext, from, why });
                            added = true;
                        }
                    }
                }
            }
        }
        if !added {
            return;
        }
    }
}

fn exact_div(a: i64, b: i64) -> Option<i64> {
    if b != 0 && a % b == 0 {
        Some(a / b)
    } else {
        None
    }
}
