//! The dispatch record of one tile call (`tirx explain`): op, scope, location,
//! operands with their layouts, every variant tried with its verdict, the
//! chosen variant, vector width, rounds, how the chosen plan matched its operands
//! (`match:` lines) and what limited the vector width.

use crate::dispatch::{CallCx, Decline, Plan, Rule, Variant};
use serde::Serialize;
use std::fmt::Write;
use tirx_ir::hir::{BinOp, BufferRegion, Expr, ExprKind, Kernel, TileArg, UnOp, VarId};
use tirx_ir::Span;
use tirx_layout::Layout;

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
    pub shape: Vec<i64>,
    pub layout: String,
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
        let ranges = vars.into_iter().map(|v| var_range(cx, v)).collect();
        CallExplain {
            op: call.op.name().into(),
            scope: call.scope.name().into(),
            span: SpanInfo { lo: call.span.lo, hi: call.span.hi, ..Default::default() },
            threads: cx.scope.describe(),
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
            let _ = writeln!(
                s,
                "  {:<4} {}  ({} {} {:?}, layout {})",
                o.role, o.region, o.memory, o.dtype, o.shape, o.layout
            );
        }
        for b in &self.bounds {
            let _ = writeln!(s, "  bounds: {b}");
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

/// `w in [1, 3]`: the range of `v` at the call (explain and declines show it).
pub(crate) fn var_range(cx: &CallCx, v: VarId) -> String {
    let name = &cx.kernel.var(v).name;
    match cx.var_bounds(v) {
        Some(r) => format!("{name} in [{}, {}]", r.lo, r.hi),
        None => format!("{name} (range unknown)"),
    }
}

/// `1 round`, `8 rounds`.
pub fn rounds(n: impl Into<i128> + Copy) -> String {
    let n: i128 = n.into();
    format!("{n} round{}", if n == 1 { "" } else { "s" })
}

fn operand(k: &Kernel, r: &BufferRegion, role: &str) -> OperandExplain {
    let b = k.buf(r.buf);
    OperandExplain {
        role: role.into(),
        region: region_text(k, r),
        buffer: b.name.clone(),
        memory: b.scope.name().into(),
        dtype: b.dtype.name().into(),
        shape: b.shape.clone(),
        layout: layout_text(&b.layout),
    }
}

pub fn region_text(k: &Kernel, r: &BufferRegion) -> String {
    let dims: Vec<String> = r
        .ranges
        .iter()
        .map(|rg| {
            let b = top_text(k, &rg.begin);
            if rg.extent == 1 {
                b
            } else if let ExprKind::Int(v) = rg.begin.kind {
                format!("{v}:{}", v.saturating_add(rg.extent))
            } else {
                format!("{b}:{b} + {}", rg.extent)
            }
        })
        .collect();
    format!("{}[{}]", k.buf(r.buf).name, dims.join(", "))
}

/// An expression without the parentheses of its outermost operator.
pub fn top_text(k: &Kernel, e: &Expr) -> String {
    let t = expr_text(k, e);
    match (&e.kind, t.strip_prefix('(').and_then(|t| t.strip_suffix(')'))) {
        (ExprKind::Binary(..), Some(inner)) => inner.to_string(),
        _ => t,
    }
}

/// A compact rendering of an index expression.
pub fn expr_text(k: &Kernel, e: &Expr) -> String {
    match &e.kind {
        ExprKind::Int(v) => v.to_string(),
        ExprKind::Float(v) => format!("{v}"),
        ExprKind::Bool(b) => if *b { "True" } else { "False" }.into(),
        ExprKind::Var(v) => k.var(*v).name.clone(),
        ExprKind::Binary(op, a, b) => {
            let sym = match op {
                BinOp::Add => "+",
                BinOp::Sub => "-",
                BinOp::Mul => "*",
                BinOp::Div => "/",
                BinOp::FloorDiv => "//",
                BinOp::FloorMod => "%",
                BinOp::Eq => "==",
                BinOp::Ne => "!=",
                BinOp::Lt => "<",
                BinOp::Le => "<=",
                BinOp::Gt => ">",
                BinOp::Ge => ">=",
                BinOp::And => "and",
                BinOp::Or => "or",
                BinOp::BitAnd => "&",
                BinOp::BitOr => "|",
                BinOp::BitXor => "^",
                BinOp::Shl => "<<",
                BinOp::Shr => ">>",
                BinOp::Min => return format!("T.min({}, {})", expr_text(k, a), expr_text(k, b)),
                BinOp::Max => return format!("T.max({}, {})", expr_text(k, a), expr_text(k, b)),
            };
            format!("({} {sym} {})", expr_text(k, a), expr_text(k, b))
        }
        ExprKind::Unary(op, a) => {
            let sym = match op {
                UnOp::Neg => "-",
                UnOp::Not => "not ",
                UnOp::BitNot => "~",
            };
            format!("{sym}{}", expr_text(k, a))
        }
        ExprKind::Cast(a) => format!("T.cast({}, \"{}\")", expr_text(k, a), e.dtype),
        ExprKind::Select(c, a, b) => {
            format!("T.if_then_else({}, {}, {})", expr_text(k, c), expr_text(k, a), expr_text(k, b))
        }
        ExprKind::Call(f, args) => {
            format!("T.{}({})", f.name(), args.iter().map(|a| expr_text(k, a)).collect::<Vec<_>>().join(", "))
        }
        ExprKind::Load(b, idx) => {
            format!("{}[{}]", k.buf(*b).name, idx.iter().map(|a| expr_text(k, a)).collect::<Vec<_>>().join(", "))
        }
    }
}

/// The layout as scripts write it (`S[(32, 32):(32, 1)]`).
pub fn layout_text(l: &Layout) -> String {
    l.to_string()
}
