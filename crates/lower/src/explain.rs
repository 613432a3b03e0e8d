//! The dispatch record of one tile call (`tirx explain`): op, scope, location,
//! operands with their layouts, every variant tried with its verdict, the
//! chosen variant, vector width, rounds, how the chosen plan matched its operands
//! (`match:` lines) and what limited the vector width.

use crate::text::{layout_text, region_text, rounds, top_text};
use crate::variant::{CallCx, Decline, Plan, Rule, Variant};
use serde::Serialize;
use std::fmt::Write;
use tirx_ir::hir::{BufferRegion, Kernel, TileArg, VarId};
use tirx_ir::Span;

/// Where a call is: byte span, and file/line/col once [`CallExplain::locate`]d.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SpanInfo {
    pub lo: u32,
    pub hi: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub col: Option<usize>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OperandExplain {
    /// `dst`, `src`, ...
    pub role: String,
    /// `A[0:32, 0:32]`
    pub region: String,
    pub buffer: String,
    pub memory: String,
    pub dtype: String,
    /// Dims as numbers; a run-time dim 0 as its expression (`["n", 128]`).
    pub shape: Vec<Dim>,
    pub layout: String,
}

/// One dim of an operand's shape: a number, or the expression of a run-time dim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Dim {
    Int(i64),
    Sym(String),
}

impl std::fmt::Display for Dim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Dim::Int(v) => write!(f, "{v}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tried {
    pub variant: String,
    pub priority: u8,
    pub accepted: bool,
    /// Why it declined, or a summary of the accepted plan.
    pub reason: String,
    /// The predicate that failed ([`Rule::name`]: `all_threads_active`, `divides_thread_cnt`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicate: Option<String>,
    /// The same predicate, typed (what tests match on).
    #[serde(skip)]
    pub rule: Option<Rule>,
    /// Planned for the record only: `dispatch=` forced another variant.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub skipped: bool,
}

impl Tried {
    pub(crate) fn new(v: &dyn Variant, p: &Result<Plan, Decline>) -> Tried {
        let mut t = Tried { variant: v.name().into(), priority: v.priority(), ..Default::default() };
        match p {
            Ok(plan) => {
                t.accepted = true;
                t.reason = plan.summary.clone();
            }
            Err(d) => t.decline(d),
        }
        t
    }

    pub(crate) fn decline(&mut self, d: &Decline) {
        self.accepted = false;
        self.reason = d.reason.clone();
        self.predicate = Some(d.rule.name().to_string());
        self.rule = Some(d.rule);
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CallExplain {
    pub op: String,
    pub scope: String,
    pub span: SpanInfo,
    /// Cooperating threads (`intra`) and instances (`inter`) of the scope.
    pub threads: String,
    /// The range at the call of each variable the region begins use (scope
    /// ids narrowed by enclosing `if`s, loop variables): `w in [1, 3]`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranges: Vec<String>,
    /// Regions not proven inside their buffer: out of bounds (the call is an
    /// error and no variant is tried) or unproven (checked by the simulator).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bounds: Vec<String>,
    /// Region bounds that depend on the launch's scalar arguments: conditions every
    /// launch checks first, each with what it protects (`(n + 63) // 64 * 64 <= n (rows of `A[..]`)`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub launch: Vec<String>,
    /// `T.assume` facts about the parameters the call's regions use.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assumes: Vec<String>,
    pub operands: Vec<OperandExplain>,
    /// `dispatch="name"` of the call, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// When `forced` names a dispatch group (`vec_auto`): its member variants.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub group: Vec<String>,
    pub chosen: Option<String>,
    pub vec: Option<u32>,
    pub rounds: Option<u64>,
    pub tried: Vec<Tried>,
    pub limits: Vec<String>,
    /// How the chosen plan matched the operands (gemm: each operand's fragment).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl CallExplain {
    pub(crate) fn new(cx: &CallCx) -> CallExplain {
        let call = cx.call;
        let slots = call.op.operands();
        let operands = call
            .args
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                TileArg::Region(r) => Some(operand(cx.kernel, r, slots.get(i).map_or("arg", |s| s.name()))),
                _ => None,
            })
            .collect();
        let mut vars = Vec::new();
        for a in call.args.iter() {
            if let TileArg::Region(r) = a {
                // Before pinning single-valued variables: explain shows those too.
                let begins = r.ranges.iter().filter_map(|rg| crate::expr::affine(cx.env, &rg.begin));
                for v in begins.flat_map(|a| a.vars()) {
                    if !vars.contains(&v) {
                        vars.push(v);
                    }
                }
            }
        }
        let assumes = assumed_facts(cx, &vars);
        let ranges = vars.into_iter().map(|v| var_range(cx, v)).collect();
        CallExplain {
            assumes,
            op: call.op.name().into(),
            scope: call.scope.name().into(),
            span: SpanInfo { lo: call.span.lo, hi: call.span.hi, ..Default::default() },
            threads: threads_text(cx),
            ranges,
            operands,
            ..Default::default()
        }
    }

    /// Fills file/line/col from the source text.
    pub fn locate(&mut self, file: &str, source: &str) {
        let (line, col) = tirx_ir::diag::line_col(source, self.span.lo as usize);
        self.span.file = Some(file.to_string());
        self.span.line = Some(line);
        self.span.col = Some(col);
    }

    pub fn span(&self) -> Span {
        Span { lo: self.span.lo, hi: self.span.hi }
    }

    /// Why a planned variant was not eligible: `dispatch=` forced another one,
    /// or a group it is not in.
    pub fn skip_reason(&self) -> String {
        match &self.forced {
            Some(g) if !self.group.is_empty() => format!("not in the dispatch group \"{g}\""),
            _ => "dispatch= forces another variant".into(),
        }
    }

    /// Human-readable block for `tirx explain`.
    pub fn render(&self) -> String {
        let mut s = String::new();
        let loc = match (&self.span.file, self.span.line, self.span.col) {
            (Some(f), Some(l), Some(c)) => format!("{f}:{l}:{c}"),
            _ => format!("bytes {}..{}", self.span.lo, self.span.hi),
        };
        let _ = writeln!(s, "{loc}: {}.{}", self.scope, self.op);
        let _ = writeln!(s, "  threads: {}", self.threads);
        if !self.ranges.is_empty() {
            let _ = writeln!(s, "  ranges: {}", self.ranges.join(", "));
        }
        for o in &self.operands {
            let dims: Vec<String> = o.shape.iter().map(Dim::to_string).collect();
            let _ = writeln!(
                s,
                "  {:<4} {}  ({} {} [{}], layout {})",
                o.role,
                o.region,
                o.memory,
                o.dtype,
                dims.join(", "),
                o.layout
            );
        }
        for a in &self.assumes {
            let _ = writeln!(s, "  assumed: {a}");
        }
        for b in &self.bounds {
            let _ = writeln!(s, "  bounds: {b}");
        }
        for l in &self.launch {
            let _ = writeln!(s, "  assumed at launch: {l}");
        }
        match &self.forced {
            Some(f) if !self.group.is_empty() => {
                let _ = writeln!(s, "  forced: dispatch=\"{f}\" (group: {})", self.group.join(", "));
            }
            Some(f) => {
                let _ = writeln!(s, "  forced: dispatch=\"{f}\"");
            }
            None => {}
        }
        let w = self.tried.iter().map(|t| t.variant.len()).max().unwrap_or(0);
        for t in &self.tried {
            let mark = if Some(&t.variant) == self.chosen.as_ref() {
                "chosen  "
            } else if t.accepted {
                "accepts "
            } else {
                "declines"
            };
            let mut pred = t.predicate.as_ref().map(|p| format!(" [{p}]")).unwrap_or_default();
            if t.skipped {
                pred.push_str(&format!(" (not used: {})", self.skip_reason()));
            }
            let _ = writeln!(s, "  {mark} {:<w$} (prio {:>2}): {}{pred}", t.variant, t.priority, t.reason);
        }
        match &self.chosen {
            Some(c) => {
                let _ = write!(s, "  => {c}");
                if let Some(v) = self.vec {
                    let _ = write!(s, ", vec {v}");
                }
                if let Some(r) = self.rounds {
                    let _ = write!(s, ", {}", rounds(r));
                }
                s.push('\n');
            }
            None if self.tried.is_empty() && !self.bounds.is_empty() => {
                s.push_str("  => not lowered: a region is out of bounds\n")
            }
            None => s.push_str("  => no variant applies\n"),
        }
        for n in &self.notes {
            let _ = writeln!(s, "  match: {n}");
        }
        for l in &self.limits {
            let _ = writeln!(s, "  limit: {l}");
        }
        s
    }
}

/// The scope split (`ScopeView::describe`); with a symbolic grid, the full CTA
/// range is shown as the grid's expression (`cta_id [0, (n + 127) // 128 * 4)`).
fn threads_text(cx: &CallCx) -> String {
    use tirx_ir::lir::{SymExpr, SymOp};
    let text = cx.scope.describe();
    let sym = &cx.env.sym.grid;
    if sym.iter().all(Option::is_none) {
        return text;
    }
    let grid = cx.facts.active.grid;
    let full = grid.iter().fold(1i64, |a, &g| a.saturating_mul(i64::from(g)));
    let mut total: Option<SymExpr> = None;
    for d in 0..3 {
        let e = match &sym[d] {
            Some(g) => g.expr.clone(),
            None if grid[d] == 1 => continue,
            None => SymExpr::Int(i64::from(grid[d])),
        };
        total = Some(match total {
            None => e,
            Some(t) => SymExpr::bin(SymOp::Mul, t, e),
        });
    }
    match total {
        Some(t) => text.replace(&format!("cta_id [0, {full})"), &format!("cta_id [0, {})", cx.env.sym.text(&t))),
        None => text,
    }
}

/// `w in [1, 3]`: the range of `v` at the call (explain and declines show it); a
/// scalar parameter is known at launch, a CTA id of a symbolic grid dim runs to its
/// expression (`bx in [0, (n + 63) // 64 - 1]`).
pub(crate) fn var_range(cx: &CallCx, v: VarId) -> String {
    let name = &cx.kernel.var(v).name;
    if cx.env.sym.is_param(v) {
        return format!("{name} (scalar parameter, known at launch)");
    }
    match cx.var_bounds(v) {
        Some(r) => match crate::launch::sym_grid_dim(cx.env, v).and_then(|d| cx.env.sym.grid[d as usize].as_ref()) {
            Some(g) if r.hi == tirx_ir::lir::launch::GRID_LIMITS[cx.env.cta_dim(v).unwrap_or(0) as usize] - 1 => {
                format!("{name} in [{}, {} - 1]", r.lo, g.text)
            }
            _ => format!("{name} in [{}, {}]", r.lo, r.hi),
        },
        None => format!("{name} (range unknown)"),
    }
}

/// The `T.assume` facts about the scalar parameters among `vars`, and those the
/// call's operands' run-time sizes read.
fn assumed_facts(cx: &CallCx, vars: &[VarId]) -> Vec<String> {
    let mut params: Vec<VarId> = vars.iter().copied().filter(|v| cx.env.sym.is_param(*v)).collect();
    for a in cx.call.args.iter() {
        if let TileArg::Region(r) = a {
            if let Some(e) = &cx.buf(r.buf).dyn_outer {
                crate::expr::affine(cx.env, e).into_iter().flat_map(|a| a.vars()).for_each(|v| {
                    if !params.contains(&v) {
                        params.push(v)
                    }
                });
            }
        }
    }
    let mut out: Vec<String> = Vec::new();
    for p in params {
        for f in cx.env.sym.params.get(&p).map(|i| i.facts.as_slice()).unwrap_or_default() {
            let f = format!("T.assume({f})");
            if !out.contains(&f) {
                out.push(f);
            }
        }
    }
    out
}

fn operand(k: &Kernel, r: &BufferRegion, role: &str) -> OperandExplain {
    let b = k.buf(r.buf);
    OperandExplain {
        role: role.into(),
        region: region_text(k, r),
        buffer: b.name.clone(),
        memory: b.scope.name().into(),
        dtype: b.dtype.name().into(),
        shape: b
            .shape
            .iter()
            .enumerate()
            .map(|(d, &n)| match (&b.dyn_outer, d) {
                (Some(e), 0) => Dim::Sym(top_text(k, e)),
                _ => Dim::Int(n),
            })
            .collect(),
        layout: match &b.dyn_outer {
            // Row-major over the bound: show the run-time dim instead of the bound.
            Some(e) => layout_text(&b.layout).replacen(&b.shape[0].to_string(), &top_text(k, e), 1),
            None => layout_text(&b.layout),
        },
    }
}
