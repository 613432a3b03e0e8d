//! The selection of one variant per tile call (docs/tile-primitives.md
//! §2.2–§2.6): every variant of the op's family is planned, the first
//! accepted plan is emitted, and the verdicts become the call's explain record
//! and, when nothing applies or a slow variant wins, its diagnostics.

use crate::build::Builder;
use crate::explain::{CallExplain, Tried};
use crate::variant::{Bug, CallCx, CommonRule, Decline, Emitter, Plan, Registry, Variant};
use tirx_ir::hir::{TileArg, TileOp};
use tirx_ir::lir::LStmt;
use tirx_ir::op;
use tirx_ir::{Arch, Diagnostic};

/// The result of dispatching one call.
pub struct Dispatched {
    pub stmts: Vec<LStmt>,
    pub explain: CallExplain,
    pub errors: Vec<Diagnostic>,
    pub warnings: Vec<Diagnostic>,
}

pub(crate) fn dispatch(reg: &Registry, cx: &CallCx, b: &mut Builder) -> Dispatched {
    let call = cx.call;
    let mut ex = CallExplain::new(cx);
    let mut out = Dispatched { stmts: vec![], explain: CallExplain::default(), errors: vec![], warnings: vec![] };
    let all = reg.for_op(call.op);
    if all.is_empty() {
        out.errors.push(
            Diagnostic::error(call.span, format!("no variant registered for op `{}` yet", call.op.name()))
                .with_label("this tile call cannot be lowered")
                .with_note(format!("ops with variants: {}", ops_with_variants(reg))),
        );
        out.explain = ex;
        return out;
    }
    let group = call.dispatch.as_deref().and_then(|name| reg.group(call.op, name));
    if let Some(name) = &call.dispatch {
        if group.is_none() && !all.iter().any(|v| v.name() == name) {
            out.errors.push(
                Diagnostic::error(
                    call.span,
                    format!("no variant named '{name}' is registered for `{}`", call.op.name()),
                )
                .with_label("unknown dispatch name")
                .with_help(registered_names(reg, &all, call.op)),
            );
            out.explain = ex;
            return out;
        }
        ex.forced = Some(name.clone());
        ex.group = group.map(|g| g.members.iter().map(|m| m.to_string()).collect()).unwrap_or_default();
    }
    // A forced-only variant is tried when `dispatch=` names it, and then shown.
    let forced = call.dispatch.as_deref();
    let every = all;
    let all: Vec<&dyn Variant> =
        every.iter().copied().filter(|v| !v.forced_only() || forced == Some(v.name())).collect();
    // Every variant is planned so explain can show each verdict; with `dispatch=`
    // only the forced one (or the group's members) may be chosen, the others are marked skipped.
    let allowed = |v: &dyn Variant| match (forced, group) {
        (None, _) => true,
        (Some(_), Some(g)) => g.members.contains(&v.name()),
        (Some(f), None) => f == v.name(),
    };
    let arch = cx.opts.arch;
    let plans: Vec<Result<Plan, Decline>> = all.iter().map(|v| plan_one(*v, cx, &every, arch)).collect();
    let mut chosen = None;
    for (i, (v, p)) in all.iter().zip(&plans).enumerate() {
        let mut tried = Tried::new(*v, p);
        tried.skipped = !allowed(*v);
        if let (Ok(plan), None, false) = (p, chosen, tried.skipped) {
            let mut em = Emitter { b: &mut *b, env: cx.env, kernel: cx.kernel, span: call.span, stmts: vec![] };
            // The first accepted plan is the choice; its emit failing is a bug, not a decline.
            chosen = Some(i);
            ex.chosen = Some(v.name().to_string());
            ex.vec = plan.vec;
            ex.rounds = plan.rounds;
            ex.limits = plan.limits.clone();
            ex.notes = plan.notes.clone();
            match v.emit(plan, cx, &mut em) {
                Ok(()) => out.stmts = em.stmts,
                Err(Bug(m)) => out.errors.push(
                    Diagnostic::internal(
                        call.span,
                        format!("variant `{}` accepted this `{}` but failed to emit it: {m}", v.name(), call.op.name()),
                    )
                    .with_label("while lowering this tile call"),
                ),
            }
        }
        ex.tried.push(tried);
    }
    match chosen {
        None => out.errors.push(no_variant_error(cx, &ex)),
        Some(i) if all[i].warns() => out.warnings.push(slow_pick_warning(cx, &ex, all[i])),
        Some(_) => {}
    }
    out.explain = ex;
    out
}

/// A variant's verdict: below its minimum target it declines without
/// planning; a plan that would accept a call with a config key the variant
/// does not read becomes a `config` decline (explain still shows the plan)
/// naming the variants of `all` (forced-only ones too) that read it.
fn plan_one(v: &dyn Variant, cx: &CallCx, all: &[&dyn Variant], arch: Arch) -> Result<Plan, Decline> {
    if !arch.supports(v.min_arch()) {
        return Err(Decline::arch(v.name(), v.min_arch(), arch));
    }
    if !v.runtime_strides() {
        runtime_stride_operand(cx)?;
    }
    let plan = v.plan(cx)?;
    match cx.call.config.iter().find(|e| !v.honours().contains(&e.key)) {
        None => Ok(plan),
        Some(e) => {
            let by = |forced: bool| -> Vec<&str> {
                let reads = all.iter().filter(|o| o.honours().contains(&e.key) && o.forced_only() == forced);
                reads.map(|o| o.name()).collect()
            };
            let by = match (by(false), by(true)) {
                (a, f) if a.is_empty() && f.is_empty() => "no variant yet".to_string(),
                (a, f) if f.is_empty() => a.join(", "),
                (a, f) if a.is_empty() => format!("only when forced: {}", f.join(", ")),
                (a, f) => format!("{}; only when forced: {}", a.join(", "), f.join(", ")),
            };
            Err(Decline::new(
                CommonRule::Config,
                format!(
                    "would accept ({}) but does not honour `{}={}` (honoured by: {by})",
                    plan.summary,
                    e.key.name(),
                    e.value.script()
                ),
            ))
        }
    }
}

/// The decline of a variant that addresses through layouts for a call with an operand
/// whose strides are run-time values.
fn runtime_stride_operand(cx: &CallCx) -> Result<(), Decline> {
    for a in &cx.call.args {
        let TileArg::Region(r) = a else { continue };
        let b = cx.buf(r.buf);
        if let Some(strides) = &b.dyn_strides {
            let text: Vec<String> = strides.iter().map(|e| crate::text::top_text(cx.kernel, e)).collect();
            return Err(Decline::new(
                CommonRule::RuntimeStride,
                format!(
                    "`{}` has run-time strides ({}); only TMA copies (`Tx.copy_async`, tma_auto and tma_explicit) address it in tile calls",
                    b.name,
                    text.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// `registered variants: a, b; only when forced: c; groups: d` (the parts that exist).
fn registered_names(reg: &Registry, all: &[&dyn Variant], op: TileOp) -> String {
    let auto: Vec<&str> = all.iter().filter(|v| !v.forced_only()).map(|v| v.name()).collect();
    let forced: Vec<&str> = all.iter().filter(|v| v.forced_only()).map(|v| v.name()).collect();
    let groups: Vec<&str> = reg.groups_of(op).map(|g| g.name).collect();
    let mut s = format!("registered variants: {}", auto.join(", "));
    if !forced.is_empty() {
        s.push_str(&format!("; only when forced: {}", forced.join(", ")));
    }
    if !groups.is_empty() {
        s.push_str(&format!("; groups: {}", groups.join(", ")));
    }
    s
}

fn ops_with_variants(reg: &Registry) -> String {
    let ops: Vec<&str> = TileOp::all().filter(|op| !reg.for_op(*op).is_empty()).map(|op| op.name()).collect();
    if ops.is_empty() {
        "none".into()
    } else {
        ops.join(", ")
    }
}

fn no_variant_error(cx: &CallCx, ex: &CallExplain) -> Diagnostic {
    let call = cx.call;
    let msg = match &ex.forced {
        Some(name) if !ex.group.is_empty() => format!(
            "no variant of the dispatch group '{name}' ({}) applies to this `{}`",
            ex.group.join(", "),
            call.op.name()
        ),
        Some(name) => format!("the forced variant '{name}' does not apply to this `{}`", call.op.name()),
        None => format!("no lowering variant applies to this `{}` at {} scope", call.op.name(), call.scope),
    };
    let mut d = Diagnostic::error(call.span, msg).with_label("cannot be lowered").with_note(decline_table(ex));
    // A config key some variant could not honour: point at the keyword too.
    if let Some(e) = call.config.first().filter(|_| ex.tried.iter().any(|t| t.rule == Some(CommonRule::Config.into())))
    {
        d = d.with_secondary(e.span, format!("`{}` is not honoured here", e.key.name())).with_help(format!(
            "remove `{}=` or change the operands so a variant that honours it applies",
            e.key.name()
        ));
    }
    if ex.forced.is_some() {
        d = d.with_help("remove `dispatch=` to let the dispatcher pick a variant");
    }
    d
}

/// `variant (prio) | reason` rows, one per variant tried.
pub fn decline_table(ex: &CallExplain) -> String {
    let label = |t: &Tried| format!("{} (prio={})", t.variant, t.priority);
    let w = ex.tried.iter().map(|t| label(t).len()).max().unwrap_or(0).max("variant".len());
    let mut s = format!("{:<w$} | reason", "variant");
    for t in &ex.tried {
        let label = label(t);
        let verdict = match (t.accepted, t.skipped) {
            (true, true) => format!("would accept (not used: {})", ex.skip_reason()),
            (true, false) => "accepted".to_string(),
            (false, _) => declined(t),
        };
        s.push_str(&format!("\n{label:<w$} | {verdict}"));
    }
    s
}

/// A decline's reason with the name of its rule (`... [divides_thread_cnt]`), as explain prints it.
fn declined(t: &Tried) -> String {
    match &t.predicate {
        Some(rule) => format!("{} [{rule}]", t.reason),
        None => t.reason.clone(),
    }
}

fn slow_pick_warning(cx: &CallCx, ex: &CallExplain, v: &dyn Variant) -> Diagnostic {
    let call = cx.call;
    let scopes: Vec<String> = [&op::SRC_REGION, &op::DST]
        .iter()
        .filter_map(|s| cx.region(s))
        .map(|r| cx.buf(r.buf).scope.name().to_string())
        .collect();
    let pair = if scopes.len() == 2 { format!(" for {} -> {}", scopes[0], scopes[1]) } else { String::new() };
    let how = ex.tried.iter().find(|t| t.variant == v.name()).map(|t| t.reason.clone()).unwrap_or_default();
    let why = match &ex.forced {
        Some(name) => format!("forced by dispatch=\"{name}\""),
        None => "all faster variants declined".to_string(),
    };
    let mut d = Diagnostic::warning(
        call.span,
        format!("{}/{} (scalar) picked{pair} at {} scope; {why}", call.op.name(), v.name(), call.scope),
    )
    .with_label(format!("lowered to a slow scalar loop: {how}"));
    for t in ex.tried.iter().filter(|t| t.priority > v.priority()) {
        let verdict =
            if t.accepted { format!("would accept: {}", t.reason) } else { format!("declined: {}", declined(t)) };
        d = d.with_note(format!("{} {verdict}", t.variant));
    }
    d
}
