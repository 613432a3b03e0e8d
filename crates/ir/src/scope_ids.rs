//! Scope-id extents (docs/tile-primitives.md §1.2), the one closure that both the
//! script checks and the launch computation use.
//!
//! Every `T.cta_id / lane_id / ...` declares a (parent → child) binding with a
//! fused extent (the product of its extents). Known extents are closed under
//! composition (cta→warp × warp→thread = cta→thread) and complement
//! (cta→thread / warp→thread = cta→warp) to a fixpoint. Declarations must
//! agree with each other and with what they imply, deferred declarations
//! (`T.lane_id()`) must end up known, hardware-fixed extents (32 lanes a warp)
//! must match, and a CTA has at most [`MAX_CTA_THREADS`] threads. Whether a
//! kernel *needs* a thread count is the caller's call
//! ([`ScopeExtents::require_threads`]).

use crate::hir::{ScopeIdDef, ScopeIdKind, Stmt, StmtKind};
use crate::{Diagnostic, Span};
use std::collections::BTreeMap;
use std::fmt;
use tirx_layout::ExecScope;

/// CUDA's limit on threads per block.
pub const MAX_CTA_THREADS: i64 = 1024;

/// `(parent, child)` scope pair of a binding.
pub type Binding = (ExecScope, ExecScope);

/// Every scope-id declarator, in binding-number order.
pub const KINDS: [ScopeIdKind; 9] = [
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

/// The declarator of a binding; `None` when no declarator has it (kernel→warp).
pub fn kind_of(b: Binding) -> Option<ScopeIdKind> {
    KINDS.iter().copied().find(|k| k.binding() == b)
}

/// Extents fixed by the hardware (a warp has 32 lanes, a warpgroup 4 warps).
pub fn hardware_extent(kind: ScopeIdKind) -> Option<i64> {
    match kind {
        ScopeIdKind::LaneId => Some(32),
        ScopeIdKind::WarpIdInWg => Some(4),
        ScopeIdKind::ThreadIdInWg => Some(128),
        _ => None,
    }
}

/// Launch bindings map to CUDA's 3-D grid/block; the others are 1-D.
fn max_dims(kind: ScopeIdKind) -> usize {
    match kind {
        ScopeIdKind::CtaId | ScopeIdKind::ThreadId | ScopeIdKind::ClusterId | ScopeIdKind::CtaIdInCluster => 3,
        _ => 1,
    }
}

/// `cta→thread`.
pub fn show(b: Binding) -> String {
    format!("{}→{}", b.0.name(), b.1.name())
}

/// Why the scope ids of a kernel do not determine its extents. Each error
/// carries the span of the declaration at fault; [`Diagnostic::from`] adds the
/// labels and the fix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScopeIdError {
    /// Extents that are not 1 (or, for launch bindings, 1 to 3) positive numbers.
    Shape { span: Span, kind: ScopeIdKind, extents: Vec<i64> },
    /// A declared or composed extent does not fit in 64 bits; `why` names it.
    Overflow { span: Span, why: String },
    /// `T.lane_id([16])`: an extent the hardware fixes otherwise.
    Hardware { span: Span, kind: ScopeIdKind, want: i64, found: i64 },
    /// Two declarations of one binding with different extents.
    Redeclared { span: Span, binding: Binding, extent: i64, first: Span, first_extent: i64 },
    /// A known extent (declared at `span`) contradicts one derived by `why`
    /// from the declarations at `other`.
    Inconsistent { span: Span, binding: Binding, extent: i64, derived: i64, why: String, other: Span },
    /// A complement that does not divide: `why` at `span`, combined with `other`.
    NonDivisible { span: Span, other: Span, binding: Binding, why: String },
    /// A deferred declaration (`T.warp_id()`) the closure does not pin down.
    Deferred { span: Span, kind: ScopeIdKind },
    /// Device code but no cta→thread extent.
    NoThreadExtent { span: Span },
    /// More threads per CTA than CUDA allows.
    TooManyThreads { span: Span, threads: i64 },
}

impl ScopeIdError {
    /// The declaration at fault.
    pub fn span(&self) -> Span {
        match self {
            ScopeIdError::Shape { span, .. }
            | ScopeIdError::Overflow { span, .. }
            | ScopeIdError::Hardware { span, .. }
            | ScopeIdError::Redeclared { span, .. }
            | ScopeIdError::Inconsistent { span, .. }
            | ScopeIdError::NonDivisible { span, .. }
            | ScopeIdError::Deferred { span, .. }
            | ScopeIdError::NoThreadExtent { span }
            | ScopeIdError::TooManyThreads { span, .. } => *span,
        }
    }

    /// How to fix it.
    fn help(&self) -> String {
        match self {
            ScopeIdError::Shape { kind, .. } => {
                format!("for example `T.{}([{}])`", kind.script_name(), hardware_extent(*kind).unwrap_or(1))
            }
            ScopeIdError::Overflow { .. } => {
                format!("declare realistic extents (a CTA has at most {MAX_CTA_THREADS} threads)")
            }
            ScopeIdError::Hardware { kind, want, .. } => format!("write `T.{}([{want}])`", kind.script_name()),
            ScopeIdError::Redeclared { .. } => "declare each scope id with one extent".into(),
            ScopeIdError::Inconsistent { .. } => {
                "make the declared extents agree (e.g. thread_id = warp_id × 32)".into()
            }
            ScopeIdError::NonDivisible { .. } => "make the thread counts multiples of each other".into(),
            ScopeIdError::Deferred { kind, .. } => {
                let name = kind.script_name();
                format!(
                    "declare it (`T.{name}([{}])`) or declare sibling scope ids that pin it down, e.g. `T.cta_id([1]); T.lane_id([32]); T.thread_id([32])`",
                    hardware_extent(*kind).unwrap_or(1)
                )
            }
            ScopeIdError::NoThreadExtent { .. } => {
                "declare it, e.g. `tid = T.thread_id([128])`, or `T.warp_id([4]); T.lane_id([32])`".into()
            }
            ScopeIdError::TooManyThreads { .. } => "use fewer threads per CTA and more CTAs (`T.cta_id([n])`)".into(),
        }
    }
}

impl fmt::Display for ScopeIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScopeIdError::Shape { kind, extents, .. } => {
                let name = kind.script_name();
                if extents.iter().any(|&e| e <= 0) {
                    write!(f, "`T.{name}` extents must be positive, found {extents:?}")
                } else if max_dims(*kind) == 1 {
                    write!(f, "`T.{name}` takes exactly one extent, found {}", extents.len())
                } else {
                    write!(f, "`T.{name}` takes 1 to 3 extents, found {}", extents.len())
                }
            }
            ScopeIdError::Overflow { why, .. } => write!(f, "scope-id extents overflow: {why}"),
            ScopeIdError::Hardware { kind, want, found, .. } if *found < *want && partial_wg_kind(*kind) => write!(
                f,
                "`T.{}` extent must be {want}, found {found}: a smaller extent needs a CTA of one warpgroup (`T.warpgroup_id([1])`)",
                kind.script_name()
            ),
            ScopeIdError::Hardware { kind, want, found, .. } => {
                write!(f, "`T.{}` extent must be {want}, found {found}", kind.script_name())
            }
            ScopeIdError::Redeclared { binding, .. } => {
                write!(f, "inconsistent scope-id extents for {}", show(*binding))
            }
            ScopeIdError::Inconsistent { binding, extent, derived, why, .. } => write!(
                f,
                "inconsistent scope-id extents: {} is {extent} here, but {why} gives {derived}",
                show(*binding)
            ),
            ScopeIdError::NonDivisible { binding, why, .. } => {
                write!(f, "scope ids have non-divisible extents for {}: {why}", show(*binding))
            }
            ScopeIdError::Deferred { kind, .. } => write!(f, "cannot infer the extent of `T.{}()`", kind.script_name()),
            ScopeIdError::NoThreadExtent { .. } => {
                write!(f, "missing thread extent: the kernel never says how many threads a CTA has")
            }
            ScopeIdError::TooManyThreads { threads, .. } => {
                write!(f, "a CTA has at most {MAX_CTA_THREADS} threads, this kernel declares {threads}")
            }
        }
    }
}

impl From<ScopeIdError> for Diagnostic {
    fn from(e: ScopeIdError) -> Diagnostic {
        let d = Diagnostic::error(e.span(), e.to_string());
        let d = match &e {
            ScopeIdError::Shape { .. } => d.with_label("extents"),
            ScopeIdError::Overflow { .. } => d,
            ScopeIdError::Hardware { kind, .. } => {
                d.with_label(format!("{} is fixed by the hardware", show(kind.binding())))
            }
            ScopeIdError::Redeclared { extent, first, first_extent, .. } => d
                .with_label(format!("declares {extent}"))
                .with_secondary(*first, format!("declared {first_extent} here")),
            ScopeIdError::Inconsistent { binding, extent, other, .. } => d
                .with_label(format!("{} is {extent}", show(*binding)))
                .with_secondary(*other, "these declarations disagree"),
            ScopeIdError::NonDivisible { other, .. } => d.with_secondary(*other, "combined with this"),
            ScopeIdError::Deferred { .. } => d.with_label("deferred extent"),
            ScopeIdError::NoThreadExtent { .. } => d.with_label("no cta→thread extent can be derived"),
            ScopeIdError::TooManyThreads { threads, .. } => d.with_label(format!("{threads} threads per CTA")),
        };
        d.with_help(e.help())
    }
}

/// A known extent and where it came from.
#[derive(Clone, Debug)]
struct Known {
    extent: i64,
    /// First and last declaration it rests on (the same one when declared).
    first: Span,
    last: Span,
    /// Human-readable derivation ("`T.warp_id` (4) × `T.lane_id` (32)").
    why: String,
}

/// The fused extent of every binding the declarations fix, declared or inferred.
#[derive(Clone, Debug)]
pub struct ScopeExtents {
    known: BTreeMap<Binding, Known>,
    /// Where a missing thread count is reported.
    first_def: Option<Span>,
}

impl ScopeExtents {
    pub fn get(&self, b: Binding) -> Option<i64> {
        self.known.get(&b).map(|k| k.extent)
    }

    pub fn of(&self, kind: ScopeIdKind) -> Option<i64> {
        self.get(kind.binding())
    }

    /// Every known binding with its extent, in binding order.
    pub fn iter(&self) -> impl Iterator<Item = (Binding, i64)> + '_ {
        self.known.iter().map(|(b, k)| (*b, k.extent))
    }

    /// Threads per CTA, for kernels that must have one: reported at the first
    /// declaration, or at `fallback` when there is none.
    pub fn require_threads(&self, fallback: Span) -> Result<i64, ScopeIdError> {
        self.of(ScopeIdKind::ThreadId).ok_or(ScopeIdError::NoThreadExtent { span: self.first_def.unwrap_or(fallback) })
    }
}

/// The scope-id declarations of a body, nested ones included, in source order.
pub fn collect_defs(body: &[Stmt]) -> Vec<&ScopeIdDef> {
    fn walk<'a>(body: &'a [Stmt], out: &mut Vec<&'a ScopeIdDef>) {
        for s in body {
            match &s.kind {
                StmtKind::ScopeId(d) => out.push(d),
                StmtKind::For { body, .. } | StmtKind::While { body, .. } => walk(body, out),
                StmtKind::If { then_body, else_body, .. } => {
                    walk(then_body, out);
                    walk(else_body, out);
                }
                _ => {}
            }
        }
    }
    let mut out = vec![];
    walk(body, &mut out);
    out
}

/// Resolves every binding's fused extent from the declarations, or says all
/// that is inconsistent or missing.
pub fn infer_extents(defs: &[&ScopeIdDef]) -> Result<ScopeExtents, Vec<ScopeIdError>> {
    let mut errs = vec![];
    let mut known: BTreeMap<Binding, Known> = BTreeMap::new();
    let cluster = defs.iter().filter(|d| d.kind == ScopeIdKind::CtaIdInCluster).find_map(|d| d.extents.clone());
    for d in defs {
        errs.extend(hardware_mismatch(d));
        match declared(&whole_clusters(d, cluster.as_deref())) {
            Ok(None) => {}
            Ok(Some(k)) => record(d, k, &mut known, &mut errs),
            Err(e) => errs.push(e),
        }
    }
    if let Err(e) = close(&mut known) {
        errs.push(e);
    }
    if errs.is_empty() {
        errs.extend(defs.iter().filter_map(|d| partial_wg_mismatch(d, &known)));
    }
    errs.extend(
        defs.iter()
            .filter(|d| d.extents.is_none() && !known.contains_key(&d.kind.binding()))
            .map(|d| ScopeIdError::Deferred { span: d.span, kind: d.kind }),
    );
    if let Some(t) = known.get(&ScopeIdKind::ThreadId.binding()) {
        if t.extent > MAX_CTA_THREADS && errs.is_empty() {
            errs.push(ScopeIdError::TooManyThreads { span: t.first, threads: t.extent });
        }
    }
    if errs.is_empty() {
        Ok(ScopeExtents { known, first_def: defs.first().map(|d| d.span) })
    } else {
        Err(errs)
    }
}

/// A run-time `T.cta_id` extent stands for its largest value, CUDA's limit; in a
/// cluster launch the largest whole number of clusters below it (the launch checks
/// that the grid is one, docs/tile-primitives.md §7.3).
fn whole_clusters<'a>(d: &'a ScopeIdDef, cluster: Option<&[i64]>) -> std::borrow::Cow<'a, ScopeIdDef> {
    let (Some(ext), Some(c)) = (&d.extents, cluster) else { return std::borrow::Cow::Borrowed(d) };
    if d.kind != ScopeIdKind::CtaId || d.dyn_extents.iter().all(Option::is_none) {
        return std::borrow::Cow::Borrowed(d);
    }
    let mut out = d.clone();
    let rounded = ext.iter().enumerate().map(|(i, &e)| {
        let n = c.get(i).copied().unwrap_or(1).max(1);
        if d.dyn_extents.get(i).is_some_and(Option::is_some) && e >= n {
            e / n * n
        } else {
            e
        }
    });
    out.extents = Some(rounded.collect());
    std::borrow::Cow::Owned(out)
}

/// The declaration's fused extent (`None` when deferred).
fn declared(d: &ScopeIdDef) -> Result<Option<Known>, ScopeIdError> {
    let Some(ext) = &d.extents else { return Ok(None) };
    if ext.is_empty() || ext.len() > max_dims(d.kind) || ext.iter().any(|&e| e <= 0) {
        return Err(ScopeIdError::Shape { span: d.span, kind: d.kind, extents: ext.clone() });
    }
    let name = d.kind.script_name();
    let Some(extent) = ext.iter().try_fold(1i64, |a, &e| a.checked_mul(e)) else {
        return Err(ScopeIdError::Overflow { span: d.span, why: format!("`T.{name}({ext:?})`") });
    };
    Ok(Some(Known { extent, first: d.span, last: d.span, why: format!("`T.{name}` ({extent})") }))
}

/// Keeps the first declaration of a binding; a later one must agree.
fn record(d: &ScopeIdDef, k: Known, known: &mut BTreeMap<Binding, Known>, errs: &mut Vec<ScopeIdError>) {
    let binding = d.kind.binding();
    if let Err((prev, k)) = add(known, binding, k) {
        errs.push(ScopeIdError::Redeclared {
            span: d.span,
            binding,
            extent: k.extent,
            first: prev.first,
            first_extent: prev.extent,
        });
    }
}

/// Adds `k` as the extent of `b`: `Ok(true)` when new, `Ok(false)` when it
/// agrees with the known one, else `(known, k)`.
fn add(known: &mut BTreeMap<Binding, Known>, b: Binding, k: Known) -> Result<bool, (Known, Known)> {
    match known.get(&b) {
        Some(prev) if prev.extent != k.extent => Err((prev.clone(), k)),
        Some(_) => Ok(false),
        None => {
            known.insert(b, k);
            Ok(true)
        }
    }
}

fn hardware_mismatch(d: &ScopeIdDef) -> Option<ScopeIdError> {
    let want = hardware_extent(d.kind)?;
    match d.extents.as_deref() {
        // A CTA of fewer than 128 threads has one partial warpgroup (checked after the closure).
        Some(&[found]) if found < want && partial_wg_kind(d.kind) => None,
        Some(&[found]) if found != want => Some(ScopeIdError::Hardware { span: d.span, kind: d.kind, want, found }),
        _ => None,
    }
}

/// The in-warpgroup ids, whose extent is smaller in a CTA with a single, partial warpgroup
/// (`T.warp_id_in_wg([1])` in a 32-thread CTA), as the reference allows.
fn partial_wg_kind(kind: ScopeIdKind) -> bool {
    matches!(kind, ScopeIdKind::WarpIdInWg | ScopeIdKind::ThreadIdInWg)
}

/// A partial warpgroup extent is only right when the CTA is that one warpgroup.
fn partial_wg_mismatch(d: &ScopeIdDef, known: &BTreeMap<Binding, Known>) -> Option<ScopeIdError> {
    let want = hardware_extent(d.kind)?;
    let &[found] = d.extents.as_deref()? else { return None };
    if found >= want || !partial_wg_kind(d.kind) {
        return None;
    }
    let one_wg = known.get(&ScopeIdKind::WarpgroupId.binding()).is_some_and(|k| k.extent == 1);
    (!one_wg).then_some(ScopeIdError::Hardware { span: d.span, kind: d.kind, want, found })
}

/// How a binding follows from two known ones.
#[derive(Clone, Copy)]
enum Rule {
    /// (p→m) ∘ (m→c) = p→c, extents multiply.
    Compose,
    /// Same parent or same child: the extents divide.
    Complement,
}

/// The bindings `l` and `r` imply (§1.2 Compose, Compliment (a) and (b)).
fn derivations(l: Binding, r: Binding) -> impl Iterator<Item = (Binding, Rule)> {
    let distinct = l != r;
    [
        (l.1 == r.0).then_some(((l.0, r.1), Rule::Compose)),
        (distinct && l.0 == r.0 && r.1.wider_than(l.1)).then_some(((r.1, l.1), Rule::Complement)),
        (distinct && l.1 == r.1 && l.0.wider_than(r.0)).then_some(((l.0, r.0), Rule::Complement)),
    ]
    .into_iter()
    .flatten()
    .filter(|(b, _)| kind_of(*b).is_some())
}

fn derive(rule: Rule, binding: Binding, l: &Known, r: &Known) -> Result<Known, ScopeIdError> {
    let (extent, why) = match rule {
        Rule::Compose => (l.extent.checked_mul(r.extent), format!("{} × {}", l.why, r.why)),
        Rule::Complement => (exact_div(l.extent, r.extent), format!("{} / {}", l.why, r.why)),
    };
    match (extent, rule) {
        (Some(extent), _) => Ok(Known { extent, first: l.first, last: r.last, why }),
        (None, Rule::Compose) => Err(ScopeIdError::Overflow { span: l.first, why }),
        (None, Rule::Complement) => Err(ScopeIdError::NonDivisible { span: l.first, other: r.last, binding, why }),
    }
}

/// Compose / complement to a fixpoint. Stops at the first derived extent that
/// overflows, does not divide, or disagrees with a known one.
fn close(known: &mut BTreeMap<Binding, Known>) -> Result<(), ScopeIdError> {
    loop {
        let snapshot: Vec<(Binding, Known)> = known.iter().map(|(b, k)| (*b, k.clone())).collect();
        let mut added = false;
        for (lb, l) in &snapshot {
            for (rb, r) in &snapshot {
                for (b, rule) in derivations(*lb, *rb) {
                    let d = derive(rule, b, l, r)?;
                    match add(known, b, d) {
                        Ok(new) => added |= new,
                        Err((k, d)) => {
                            return Err(ScopeIdError::Inconsistent {
                                span: k.first,
                                binding: b,
                                extent: k.extent,
                                derived: d.extent,
                                why: d.why,
                                other: d.first,
                            })
                        }
                    }
                }
            }
        }
        if !added {
            return Ok(());
        }
    }
}

fn exact_div(a: i64, b: i64) -> Option<i64> {
    (b != 0 && a % b == 0).then(|| a / b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScopeIdKind::*;

    /// A declaration whose span is its position in the list (to check anchors).
    fn defs(list: &[(ScopeIdKind, Option<&[i64]>)]) -> Vec<ScopeIdDef> {
        list.iter()
            .enumerate()
            .map(|(i, (kind, ext))| ScopeIdDef {
                kind: *kind,
                vars: vec![],
                extents: ext.map(<[i64]>::to_vec),
                span: Span::new(10 * i, 10 * i + 5),
                dyn_extents: vec![],
            })
            .collect()
    }

    fn infer(list: &[(ScopeIdKind, Option<&[i64]>)]) -> Result<ScopeExtents, Vec<ScopeIdError>> {
        let d = defs(list);
        infer_extents(&d.iter().collect::<Vec<_>>())
    }

    fn at(i: usize) -> Span {
        Span::new(10 * i, 10 * i + 5)
    }

    #[test]
    fn defs_are_collected_from_nested_blocks() {
        use crate::hir::{Expr, ExprKind, ForKind, Stmt, StmtKind, VarId};
        use crate::DType;
        let d = defs(&[(CtaId, Some(&[1])), (WarpId, None), (LaneId, Some(&[32]))]);
        let stmt = |kind| Stmt { kind, span: Span::default() };
        let yes = Expr { kind: ExprKind::Bool(true), dtype: DType::Bool, span: Span::default() };
        let body = vec![
            stmt(StmtKind::ScopeId(d[0].clone())),
            stmt(StmtKind::For {
                var: VarId(0),
                begin: yes.clone(),
                extent: yes.clone(),
                kind: ForKind::Serial,
                body: vec![stmt(StmtKind::If {
                    cond: yes.clone(),
                    then_body: vec![stmt(StmtKind::DeviceEntry)],
                    else_body: vec![stmt(StmtKind::ScopeId(d[1].clone()))],
                })],
            }),
            stmt(StmtKind::ScopeId(d[2].clone())),
        ];
        let found: Vec<ScopeIdKind> = collect_defs(&body).iter().map(|d| d.kind).collect();
        assert_eq!(found, vec![CtaId, WarpId, LaneId]);
    }

    #[test]
    fn compose_gives_the_thread_count() {
        let e = infer(&[(WarpId, Some(&[4])), (LaneId, Some(&[32]))]).unwrap();
        assert_eq!(e.of(ThreadId), Some(128));
        assert_eq!(e.require_threads(Span::default()), Ok(128));
        let wg = infer(&[(WarpgroupId, Some(&[2])), (WarpIdInWg, Some(&[4])), (LaneId, Some(&[32]))]).unwrap();
        assert_eq!((wg.of(WarpId), wg.of(ThreadIdInWg), wg.of(ThreadId)), (Some(8), Some(128), Some(256)));
    }

    #[test]
    fn complement_pins_deferred_declarations() {
        let e =
            infer(&[(CtaId, Some(&[2, 3])), (ThreadId, Some(&[256])), (LaneId, Some(&[32])), (WarpId, None)]).unwrap();
        assert_eq!(e.of(WarpId), Some(8), "cta→thread / warp→thread");
        assert_eq!(e.of(CtaId), Some(6), "fused extent");
        let same_child = infer(&[(ThreadId, Some(&[32])), (LaneId, None)]);
        assert!(same_child.is_err(), "lane_id needs a sibling besides thread_id");
        let pinned = infer(&[(ThreadId, Some(&[32])), (WarpId, Some(&[1])), (LaneId, None)]).unwrap();
        assert_eq!(pinned.of(LaneId), Some(32));
        let all: Vec<Binding> = pinned.iter().map(|(b, _)| b).collect();
        assert!(all.iter().all(|b| kind_of(*b).is_some()), "only declarable bindings: {all:?}");
    }

    #[test]
    fn redeclared_binding_must_agree() {
        let errs = infer(&[(ThreadId, Some(&[32])), (ThreadId, Some(&[64]))]).unwrap_err();
        assert_eq!(
            errs,
            vec![ScopeIdError::Redeclared {
                span: at(1),
                binding: (ExecScope::Cta, ExecScope::Thread),
                extent: 64,
                first: at(0),
                first_extent: 32
            }]
        );
        assert!(infer(&[(ThreadId, Some(&[2, 16])), (ThreadId, Some(&[32]))]).is_ok(), "fused extents agree");
    }

    #[test]
    fn derived_extent_must_agree_with_the_declared_one() {
        let errs = infer(&[(WarpId, Some(&[4])), (LaneId, Some(&[32])), (ThreadId, Some(&[64]))]).unwrap_err();
        assert_eq!(errs.len(), 1, "{errs:?}");
        assert_eq!(errs[0].span(), at(2), "reported at the declaration the closure contradicts");
        let d = Diagnostic::from(errs[0].clone());
        assert_eq!(
            d.message,
            "inconsistent scope-id extents: cta→thread is 64 here, but `T.warp_id` (4) × `T.lane_id` (32) gives 128"
        );
        assert_eq!(d.labels[1].span, at(0));
        assert!(d.help.unwrap().contains("agree"));
    }

    #[test]
    fn non_divisible_complement() {
        let errs = infer(&[(ThreadId, Some(&[100])), (WarpId, Some(&[3]))]).unwrap_err();
        let ScopeIdError::NonDivisible { span, other, binding, why } = &errs[0] else { panic!("{errs:?}") };
        assert_eq!((*span, *other, *binding), (at(0), at(1), (ExecScope::Warp, ExecScope::Thread)));
        assert_eq!(why, "`T.thread_id` (100) / `T.warp_id` (3)");
    }

    #[test]
    fn unresolved_deferred_declaration() {
        let errs = infer(&[(ThreadId, Some(&[32])), (WarpgroupId, None)]).unwrap_err();
        assert_eq!(errs, vec![ScopeIdError::Deferred { span: at(1), kind: WarpgroupId }]);
        let d = Diagnostic::from(errs[0].clone());
        assert_eq!(d.message, "cannot infer the extent of `T.warpgroup_id()`");
        assert!(d.help.unwrap().starts_with("declare it (`T.warpgroup_id([1])`)"));
    }

    #[test]
    fn no_thread_extent() {
        let e = infer(&[(CtaId, Some(&[4]))]).unwrap();
        assert_eq!(e.require_threads(Span::new(99, 100)), Err(ScopeIdError::NoThreadExtent { span: at(0) }));
        let none = infer(&[]).unwrap();
        assert_eq!(
            none.require_threads(Span::new(99, 100)),
            Err(ScopeIdError::NoThreadExtent { span: Span::new(99, 100) })
        );
        let d = Diagnostic::from(ScopeIdError::NoThreadExtent { span: at(0) });
        assert!(d.message.starts_with("missing thread extent"));
        assert!(d.help.unwrap().contains("T.thread_id([128])"));
    }

    #[test]
    fn hardware_extents_and_thread_limit() {
        let errs = infer(&[(LaneId, Some(&[16])), (ThreadId, Some(&[16]))]).unwrap_err();
        assert_eq!(errs, vec![ScopeIdError::Hardware { span: at(0), kind: LaneId, want: 32, found: 16 }]);
        let errs = infer(&[(WarpId, Some(&[64])), (LaneId, Some(&[32]))]).unwrap_err();
        assert_eq!(errs, vec![ScopeIdError::TooManyThreads { span: at(0), threads: 2048 }]);
    }

    #[test]
    fn a_single_partial_warpgroup_has_fewer_warps() {
        // 32 threads: one warpgroup of one warp, as the reference allows.
        let ok = infer(&[(WarpgroupId, Some(&[1])), (WarpIdInWg, Some(&[1])), (LaneId, Some(&[32]))]).unwrap();
        assert_eq!(ok.known[&ThreadId.binding()].extent, 32);
        // Two warpgroups cannot be partial.
        let errs = infer(&[(WarpgroupId, Some(&[2])), (WarpIdInWg, Some(&[2])), (LaneId, Some(&[32]))]).unwrap_err();
        assert_eq!(errs, vec![ScopeIdError::Hardware { span: at(1), kind: WarpIdInWg, want: 4, found: 2 }]);
        assert!(errs[0].to_string().contains("a CTA of one warpgroup"));
    }

    #[test]
    fn malformed_and_overflowing_extents() {
        let errs = infer(&[(WarpId, Some(&[2, 2])), (ThreadId, Some(&[0]))]).unwrap_err();
        assert_eq!(errs.iter().map(ScopeIdError::span).collect::<Vec<_>>(), vec![at(0), at(1)]);
        assert_eq!(errs[0].to_string(), "`T.warp_id` takes exactly one extent, found 2");
        assert_eq!(errs[1].to_string(), "`T.thread_id` extents must be positive, found [0]");
        let big = i64::MAX / 2;
        let errs = infer(&[(CtaId, Some(&[big, 4]))]).unwrap_err();
        assert!(matches!(errs[0], ScopeIdError::Overflow { span, .. } if span == at(0)));
        let errs = infer(&[(WarpId, Some(&[big])), (LaneId, Some(&[32]))]).unwrap_err();
        assert_eq!(errs[0].to_string(), format!("scope-id extents overflow: `T.warp_id` ({big}) × `T.lane_id` (32)"));
    }
}
