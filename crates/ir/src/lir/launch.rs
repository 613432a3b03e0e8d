//! Scalar parameters and what a launch decides (`docs/lir.md` §6): the kernel's
//! scalar arguments ([`ScalarParam`], [`ScalarValue`]), integer expressions of them
//! ([`SymExpr`]: a symbolic grid dimension, the outer dimension of a buffer, a launch
//! condition) and the one evaluator of those expressions, shared by the simulator,
//! the runtime, the CLI and the Python package.
//!
//! [`LKernel::specialize`] binds the scalar arguments of one launch: it checks their
//! number and types, evaluates the grid and the symbolic buffer sizes, checks every
//! [`LaunchCheck`] (the facts lowering assumed: `T.assume` conditions and region
//! bounds it could only decide with the arguments), and returns the kernel with all
//! of that made concrete. Nothing runs when any of it fails: the error names the
//! expression or condition, what it protects and the argument values.

use super::{LBuf, LBufId, LKernel, LStmt, LStmtKind, LVarId, TmapId};
use crate::dtype::DType;
use crate::span::Span;
use serde::Serialize;
use std::fmt;

/// The element types a scalar parameter may have (`n: T.int32`, `eps: T.float32`).
pub const SCALAR_DTYPES: [DType; 5] = [DType::I32, DType::I64, DType::U32, DType::F32, DType::F64];

/// CUDA's grid limits per dimension (x < 2^31, y and z ≤ 65535): a symbolic grid
/// dimension is at most this at launch, and lowering reasons with it as the bound.
pub const GRID_LIMITS: [i64; 3] = [i32::MAX as i64, 65535, 65535];

/// A scalar kernel parameter: the variable the body reads (in scope everywhere) and
/// its position in the full signature (buffers and scalars in source order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScalarParam {
    pub var: LVarId,
    pub index: usize,
}

/// One parameter of the signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum ParamRef {
    Buffer(LBufId),
    Scalar(LVarId),
    /// A TMA tensor map (`const __grid_constant__ CUtensorMap`), after every buffer and scalar.
    TensorMap(TmapId),
}

/// The value of a scalar argument.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub enum ScalarValue {
    Int(i64),
    Float(f64),
}

impl fmt::Display for ScalarValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScalarValue::Int(v) => write!(f, "{v}"),
            ScalarValue::Float(v) => write!(f, "{v:?}"),
        }
    }
}

impl ScalarValue {
    /// The value as a parameter of type `t` holds it: integers in `t`'s range, floats
    /// (or integers) rounded to `t`. A float for an integer parameter, or an integer
    /// out of range, is an error saying which.
    pub fn typed(self, t: DType) -> Result<ScalarValue, String> {
        match (self, t) {
            (ScalarValue::Int(v), _) if t.is_int() => match t.int_range() {
                Some((lo, hi)) if v < lo || v > hi => Err(format!("{v} is outside the range of {t} [{lo}, {hi}]")),
                _ => Ok(self),
            },
            (ScalarValue::Float(v), _) if t.is_int() => {
                Err(format!("{v:?} is a float; a {t} parameter takes an integer"))
            }
            (ScalarValue::Int(v), DType::F32) => Ok(ScalarValue::Float(v as f32 as f64)),
            (ScalarValue::Float(v), DType::F32) => Ok(ScalarValue::Float(v as f32 as f64)),
            (ScalarValue::Int(v), _) => Ok(ScalarValue::Float(v as f64)),
            (ScalarValue::Float(_), _) => Ok(self),
        }
    }

    /// The argument's bytes as the kernel receives them (little-endian, `t.bytes()` long).
    pub fn le_bytes(self, t: DType) -> Vec<u8> {
        match (self, t) {
            (ScalarValue::Float(v), DType::F32) => (v as f32).to_le_bytes().to_vec(),
            (ScalarValue::Float(v), _) => v.to_le_bytes().to_vec(),
            (ScalarValue::Int(v), _) => v.to_le_bytes()[..t.bytes() as usize].to_vec(),
        }
    }

    /// The integer value, when it is one.
    pub fn int(self) -> Option<i64> {
        match self {
            ScalarValue::Int(v) => Some(v),
            ScalarValue::Float(_) => None,
        }
    }
}

/// Operators of [`SymExpr`]: integer arithmetic with Python floor semantics,
/// comparisons and logic (1 is true, 0 false).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SymOp {
    Add,
    Sub,
    Mul,
    FloorDiv,
    FloorMod,
    Min,
    Max,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl SymOp {
    /// Python spelling and precedence (higher binds tighter); `None` for `min`/`max` (calls).
    fn infix(self) -> Option<(&'static str, u8)> {
        use SymOp::*;
        Some(match self {
            Mul => ("*", 6),
            FloorDiv => ("//", 6),
            FloorMod => ("%", 6),
            Add => ("+", 5),
            Sub => ("-", 5),
            Eq => ("==", 4),
            Ne => ("!=", 4),
            Lt => ("<", 4),
            Le => ("<=", 4),
            Gt => (">", 4),
            Ge => (">=", 4),
            And => ("and", 3),
            Or => ("or", 2),
            Min | Max => return None,
        })
    }

    pub fn is_compare(self) -> bool {
        matches!(self, SymOp::Eq | SymOp::Ne | SymOp::Lt | SymOp::Le | SymOp::Gt | SymOp::Ge)
    }
}

/// An integer expression of the kernel's integer scalar parameters, evaluated
/// exactly (no wrap-around) at launch.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum SymExpr {
    Int(i64),
    Param(LVarId),
    Bin(SymOp, Box<SymExpr>, Box<SymExpr>),
}

impl SymExpr {
    pub fn bin(op: SymOp, a: SymExpr, b: SymExpr) -> SymExpr {
        SymExpr::Bin(op, Box::new(a), Box::new(b))
    }

    /// The value with parameter `v` = `arg(v)`. Errors: a parameter without a value,
    /// division by zero, a result beyond 128 bits.
    pub fn eval(&self, arg: &dyn Fn(LVarId) -> Option<i128>) -> Result<i128, String> {
        Ok(match self {
            SymExpr::Int(v) => i128::from(*v),
            SymExpr::Param(p) => arg(*p).ok_or_else(|| format!("parameter #{} has no integer value", p.0))?,
            SymExpr::Bin(op, a, b) => {
                let (x, y) = (a.eval(arg)?, b.eval(arg)?);
                let overflow = || format!("{x} {} {y} overflows", op.infix().map_or("min/max", |s| s.0));
                let zero = || "division by zero".to_string();
                match op {
                    SymOp::Add => x.checked_add(y).ok_or_else(overflow)?,
                    SymOp::Sub => x.checked_sub(y).ok_or_else(overflow)?,
                    SymOp::Mul => x.checked_mul(y).ok_or_else(overflow)?,
                    SymOp::FloorDiv if y == 0 => return Err(zero()),
                    SymOp::FloorMod if y == 0 => return Err(zero()),
                    SymOp::FloorDiv => floor_div(x, y).ok_or_else(overflow)?,
                    SymOp::FloorMod => x - y * floor_div(x, y).ok_or_else(overflow)?,
                    SymOp::Min => x.min(y),
                    SymOp::Max => x.max(y),
                    SymOp::Eq => i128::from(x == y),
                    SymOp::Ne => i128::from(x != y),
                    SymOp::Lt => i128::from(x < y),
                    SymOp::Le => i128::from(x <= y),
                    SymOp::Gt => i128::from(x > y),
                    SymOp::Ge => i128::from(x >= y),
                    SymOp::And => i128::from(x != 0 && y != 0),
                    SymOp::Or => i128::from(x != 0 || y != 0),
                }
            }
        })
    }

    /// `self · k`, folded where both are constants (or `k` is 1).
    pub fn mul_int(&self, k: i64) -> SymExpr {
        match self {
            SymExpr::Int(v) if v.checked_mul(k).is_some() => SymExpr::Int(v * k),
            _ if k == 1 => self.clone(),
            _ => SymExpr::bin(SymOp::Mul, self.clone(), SymExpr::Int(k)),
        }
    }

    /// The value, when it is a constant.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            SymExpr::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// Calls `f` on every parameter the expression reads.
    pub fn params(&self, f: &mut dyn FnMut(LVarId)) {
        match self {
            SymExpr::Int(_) => {}
            SymExpr::Param(p) => f(*p),
            SymExpr::Bin(_, a, b) => {
                a.params(f);
                b.params(f);
            }
        }
    }

    /// Python syntax with the parameters named by `name`: `(n + 63) // 64 * 64 <= n`.
    pub fn text(&self, name: &dyn Fn(LVarId) -> String) -> String {
        self.text_prec(name, 0)
    }

    fn text_prec(&self, name: &dyn Fn(LVarId) -> String, min: u8) -> String {
        let (s, p) = match self {
            SymExpr::Int(v) if *v < 0 => (v.to_string(), 7),
            SymExpr::Int(v) => (v.to_string(), 9),
            SymExpr::Param(p) => (name(*p), 9),
            SymExpr::Bin(SymOp::Sub, a, b) if **a == SymExpr::Int(0) => (format!("-{}", b.text_prec(name, 8)), 7),
            SymExpr::Bin(op, a, b) => match op.infix() {
                None => {
                    let f = if *op == SymOp::Min { "min" } else { "max" };
                    (format!("{f}({}, {})", a.text_prec(name, 0), b.text_prec(name, 0)), 9)
                }
                Some((sym, p)) => {
                    // Comparisons do not chain: both sides bind tighter.
                    let lmin = if op.is_compare() { p + 1 } else { p };
                    (format!("{} {sym} {}", a.text_prec(name, lmin), b.text_prec(name, p + 1)), p)
                }
            },
        };
        if p < min {
            format!("({s})")
        } else {
            s
        }
    }
}

fn floor_div(x: i128, y: i128) -> Option<i128> {
    let q = x.checked_div(y)?;
    Some(if x % y != 0 && ((x < 0) != (y < 0)) { q - 1 } else { q })
}

/// A condition on the scalar arguments every launch checks before anything runs:
/// a `T.assume` fact, or a region bound lowering could decide only with the arguments.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchCheck {
    pub cond: SymExpr,
    /// What relies on it: `rows of `A[bx * 64:bx * 64 + 64, 0:128]``, `T.assume(n % 64 == 0)`.
    pub what: String,
    /// The region or `T.assume` it comes from.
    pub span: Span,
}

/// Why a launch cannot go ahead: bad scalar arguments, a grid or buffer size out
/// of range, a failed [`LaunchCheck`]. `span` is the construct at fault (default
/// when it is the call itself).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchError {
    pub message: String,
    pub span: Span,
    pub help: Option<String>,
}

impl fmt::Display for LaunchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(h) = &self.help {
            write!(f, " (help: {h})")?;
        }
        Ok(())
    }
}

impl LaunchError {
    fn new(message: impl Into<String>, span: Span, help: Option<String>) -> LaunchError {
        LaunchError { message: message.into(), span, help }
    }
}

impl LBuf {
    /// Elements of one index of dim 0 (the product of the other dims): a
    /// symbolic buffer is row-major, so its size is `rows × row_elems`.
    pub fn row_elems(&self) -> i64 {
        self.shape.iter().skip(1).product()
    }

    /// The elements a buffer with run-time strides spans, `1 + Σ (shape[d] - 1) ·
    /// stride[d]` (dim 0's size its run-time rows where it has them); `None` for a
    /// row-major buffer.
    pub fn span(&self) -> Option<SymExpr> {
        let strides = self.strides.as_ref()?;
        let mut constant = 1i64;
        let mut terms: Option<SymExpr> = None;
        for (d, s) in strides.iter().enumerate() {
            let last = match (&self.dyn_rows, d) {
                (Some(r), 0) => SymExpr::bin(SymOp::Sub, r.clone(), SymExpr::Int(1)),
                _ => SymExpr::Int(self.shape[d] - 1),
            };
            let term = match last.as_int() {
                Some(n) => s.mul_int(n),
                None => SymExpr::bin(SymOp::Mul, last, s.clone()),
            };
            match term.as_int().and_then(|t| constant.checked_add(t)) {
                Some(c) => constant = c,
                None => terms = Some(terms.map_or(term.clone(), |e| SymExpr::bin(SymOp::Add, e, term))),
            }
        }
        Some(match terms {
            None => SymExpr::Int(constant),
            Some(e) => SymExpr::bin(SymOp::Add, e, SymExpr::Int(constant)),
        })
    }
}

impl LKernel {
    /// The parameters in signature order: buffers and scalars as the source declares them.
    pub fn signature(&self) -> Vec<ParamRef> {
        let mut out: Vec<ParamRef> = self.params.iter().map(|&b| ParamRef::Buffer(b)).collect();
        let mut scalars = self.scalars.clone();
        scalars.sort_by_key(|s| s.index);
        for s in scalars {
            out.insert(s.index.min(out.len()), ParamRef::Scalar(s.var));
        }
        out.extend((0..self.tmaps.len()).map(|i| ParamRef::TensorMap(TmapId(i as u32))));
        out
    }

    /// Whether launches need more than the buffers: scalar arguments, a symbolic
    /// grid or buffer size, launch checks.
    pub fn is_symbolic(&self) -> bool {
        !self.scalars.is_empty()
            || self.grid_dims.iter().any(Option::is_some)
            || self.bufs.iter().any(|b| b.dyn_rows.is_some())
            || !self.checks.is_empty()
    }

    /// The name of a scalar parameter (for expression text).
    pub fn param_name(&self, v: LVarId) -> String {
        self.vars.get(v.0 as usize).map_or_else(|| format!("var#{}", v.0), |x| x.name.clone())
    }

    /// `e` in Python syntax with this kernel's parameter names.
    pub fn sym_text(&self, e: &SymExpr) -> String {
        e.text(&|v| self.param_name(v))
    }

    /// The grid as text: `((n + 127) // 128, 4, 1)`.
    pub fn grid_text(&self) -> String {
        let dims: Vec<String> = (0..3)
            .map(|d| match &self.grid_dims[d] {
                Some(e) => self.sym_text(e),
                None => self.grid[d].to_string(),
            })
            .collect();
        format!("({})", dims.join(", "))
    }

    /// Checks one value per scalar parameter (in `scalars` order) against its type.
    pub fn bind_scalars(&self, values: &[ScalarValue]) -> Result<Vec<ScalarValue>, LaunchError> {
        if values.len() != self.scalars.len() {
            let names: Vec<String> = self.scalars.iter().map(|s| format!("`{}`", self.param_name(s.var))).collect();
            let which = if names.is_empty() { "none".to_string() } else { names.join(", ") };
            return Err(LaunchError::new(
                format!(
                    "kernel `{}` takes {} scalar argument(s) ({which}), {} given",
                    self.name,
                    self.scalars.len(),
                    values.len()
                ),
                Span::default(),
                None,
            ));
        }
        self.scalars
            .iter()
            .zip(values)
            .map(|(s, v)| {
                let t = self.vars.get(s.var.0 as usize).map_or(DType::I32, |x| x.dtype);
                v.typed(t).map_err(|m| {
                    LaunchError::new(
                        format!("scalar argument `{}`: {m}", self.param_name(s.var)),
                        Span::default(),
                        None,
                    )
                })
            })
            .collect()
    }

    /// `n = 100, m = 3`: the integer arguments an expression reads.
    fn values_text(&self, es: &[&SymExpr], value: &dyn Fn(LVarId) -> Option<i128>) -> String {
        let mut seen = Vec::new();
        for e in es {
            e.params(&mut |p| {
                if !seen.contains(&p) {
                    seen.push(p)
                }
            });
        }
        let parts: Vec<String> = seen
            .iter()
            .map(|&p| format!("{} = {}", self.param_name(p), value(p).map_or("?".into(), |v| v.to_string())))
            .collect();
        parts.join(", ")
    }

    /// The kernel as one launch with `values` (one per scalar parameter) runs it:
    /// the grid and every symbolic buffer size evaluated, every launch check passed.
    /// The result has no symbolic grid, sizes or checks (the scalars stay parameters).
    pub fn specialize(&self, values: &[ScalarValue]) -> Result<LKernel, LaunchError> {
        let typed = self.bind_scalars(values)?;
        let ints: Vec<(LVarId, Option<i64>)> = self.scalars.iter().zip(&typed).map(|(s, v)| (s.var, v.int())).collect();
        let value = |p: LVarId| ints.iter().find(|(v, _)| *v == p).and_then(|(_, x)| x.map(i128::from));
        let mut k = self.clone();
        for c in &self.checks {
            let holds = c.cond.eval(&value).map_err(|m| {
                LaunchError::new(
                    format!("cannot evaluate `{}` ({}): {m}", self.sym_text(&c.cond), c.what),
                    c.span,
                    None,
                )
            })?;
            if holds == 0 {
                return Err(LaunchError::new(
                    format!(
                        "launch check `{}` fails with {} ({})",
                        self.sym_text(&c.cond),
                        self.values_text(&[&c.cond], &value),
                        c.what
                    ),
                    c.span,
                    Some("pass arguments for which the condition holds; nothing was run".into()),
                ));
            }
        }
        for d in 0..3 {
            let Some(e) = &self.grid_dims[d] else { continue };
            let axis = ["x", "y", "z"][d];
            let v = e.eval(&value).map_err(|m| {
                LaunchError::new(format!("grid dimension {axis} `{}`: {m}", self.sym_text(e)), self.grid_span, None)
            })?;
            if v < 1 || v > i128::from(GRID_LIMITS[d]) {
                return Err(LaunchError::new(
                    format!(
                        "grid dimension {axis} `{}` is {v} with {}; CUDA launches 1 to {} CTAs in {axis}",
                        self.sym_text(e),
                        self.values_text(&[e], &value),
                        GRID_LIMITS[d]
                    ),
                    self.grid_span,
                    Some("pass arguments that give a grid of at least one CTA per dimension".into()),
                ));
            }
            k.grid[d] = v as u32;
            let c = self.cluster[d].max(1);
            if v % i128::from(c) != 0 {
                return Err(LaunchError::new(
                    format!(
                        "grid dimension {axis} `{}` is {v} with {}, not a whole number of clusters of {c} CTAs (`__cluster_dims__({}, {}, {})`)",
                        self.sym_text(e),
                        self.values_text(&[e], &value),
                        self.cluster[0],
                        self.cluster[1],
                        self.cluster[2]
                    ),
                    self.grid_span,
                    Some(format!("pass arguments that give a multiple of {c} CTAs in {axis}; nothing was run")),
                ));
            }
        }
        k.grid_dims = [None, None, None];
        for (i, b) in self.bufs.iter().enumerate() {
            let Some(rows) = &b.dyn_rows else { continue };
            let r = rows.eval(&value).map_err(|m| {
                LaunchError::new(format!("dim 0 of `{}` `{}`: {m}", b.name, self.sym_text(rows)), Span::default(), None)
            })?;
            let elems = r.checked_mul(i128::from(b.row_elems())).filter(|&e| e <= i128::from(i64::MAX));
            let Some(elems) = elems.filter(|_| r >= 1) else {
                return Err(LaunchError::new(
                    format!(
                        "dim 0 of `{}` is `{}` = {r} with {}; a buffer needs 1 to {} rows",
                        b.name,
                        self.sym_text(rows),
                        self.values_text(&[rows], &value),
                        i64::MAX / b.row_elems().max(1)
                    ),
                    Span::default(),
                    None,
                ));
            };
            let kb = &mut k.bufs[i];
            kb.shape[0] = r as i64;
            kb.elems = elems as i64;
            kb.dyn_rows = None;
        }
        for (i, b) in self.bufs.iter().enumerate() {
            let (Some(strides), Some(span)) = (&b.strides, b.span()) else { continue };
            let mut vals = Vec::with_capacity(strides.len());
            for (d, s) in strides.iter().enumerate() {
                let v = s.eval(&value).map_err(|m| {
                    LaunchError::new(
                        format!("stride {d} of `{}` `{}`: {m}", b.name, self.sym_text(s)),
                        Span::default(),
                        None,
                    )
                })?;
                if !(0..=i128::from(i64::MAX)).contains(&v) {
                    return Err(LaunchError::new(
                        format!(
                            "stride {d} of `{}` is `{}` = {v} with {}; a stride is 0 to 2^63 - 1 elements",
                            b.name,
                            self.sym_text(s),
                            self.values_text(&[s], &value)
                        ),
                        Span::default(),
                        Some("pass non-negative strides; nothing was run".into()),
                    ));
                }
                vals.push(SymExpr::Int(v as i64));
            }
            let elems =
                span.eval(&value).ok().filter(|&e| (1..=i128::from(i64::MAX)).contains(&e)).ok_or_else(|| {
                    LaunchError::new(
                        format!(
                            "`{}` spans `{}` elements with {}: more than 2^63",
                            b.name,
                            self.sym_text(&span),
                            self.values_text(&[&span], &value)
                        ),
                        Span::default(),
                        None,
                    )
                })?;
            let kb = &mut k.bufs[i];
            kb.strides = Some(vals);
            kb.elems = elems as i64;
        }
        let rows: Vec<Option<i64>> =
            k.bufs.iter().zip(&self.bufs).map(|(kb, b)| b.dyn_rows.as_ref().map(|_| kb.shape[0])).collect();
        concrete_bounds(&mut k.body, &rows);
        for m in &mut k.tmaps {
            for (i, d) in m.dims.iter_mut().enumerate() {
                let v = d.eval(&value).map_err(|e| {
                    LaunchError::new(format!("globalDim[{i}] of `{}`: {e}", m.name), Span::default(), None)
                })?;
                if !(1..=i128::from(super::tmap::TMAP_MAX_DIM)).contains(&v) {
                    return Err(LaunchError::new(
                        format!(
                            "globalDim[{i}] of tensor map `{}` is `{}` = {v} with {}; TMA takes 1 to 2^32",
                            m.name,
                            self.sym_text(d),
                            self.values_text(&[d], &value)
                        ),
                        Span::default(),
                        None,
                    ));
                }
                *d = SymExpr::Int(v as i64);
            }
            for (i, s) in m.strides.iter_mut().enumerate() {
                let text = self.sym_text(s);
                let v = s.eval(&value).map_err(|e| {
                    LaunchError::new(format!("globalStrides[{}] of `{}`: {e}", i + 1, m.name), Span::default(), None)
                })?;
                if v % 16 != 0 || !(0..i128::from(super::tmap::TMAP_MAX_STRIDE)).contains(&v) {
                    return Err(LaunchError::new(
                        format!(
                            "globalStrides[{}] of tensor map `{}` is `{text}` = {v} bytes with {}; TMA takes multiples of 16 below 2^40",
                            i + 1,
                            m.name,
                            self.values_text(&[&*s], &value)
                        ),
                        Span::default(),
                        Some("pass strides whose bytes are multiples of 16 (e.g. rows of a multiple of 8 bf16 elements)".into()),
                    ));
                }
                *s = SymExpr::Int(v as i64);
            }
        }
        k.checks.clear();
        Ok(k)
    }
}

/// Bounds checks of a symbolic buffer check against its rows at this launch.
fn concrete_bounds(body: &mut [LStmt], rows: &[Option<i64>]) {
    for s in body {
        match &mut s.kind {
            LStmtKind::Bounds(c) => {
                if let (Some(Some(r)), Some(d0)) = (rows.get(c.buf.0 as usize), c.shape.first_mut()) {
                    *d0 = *r;
                }
            }
            LStmtKind::For { body, .. } | LStmtKind::While { body, .. } => concrete_bounds(body, rows),
            LStmtKind::If { then_body, else_body, .. } => {
                concrete_bounds(then_body, rows);
                concrete_bounds(else_body, rows);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n() -> SymExpr {
        SymExpr::Param(LVarId(0))
    }
    fn int(v: i64) -> SymExpr {
        SymExpr::Int(v)
    }

    #[test]
    fn evaluates_with_floor_semantics_and_prints_python() {
        let grid = SymExpr::bin(SymOp::FloorDiv, SymExpr::bin(SymOp::Add, n(), int(63)), int(64));
        let cond = SymExpr::bin(SymOp::Le, SymExpr::bin(SymOp::Mul, grid.clone(), int(64)), n());
        let name = |_: LVarId| "n".to_string();
        assert_eq!(cond.text(&name), "(n + 63) // 64 * 64 <= n");
        let at = |v: i128| move |_: LVarId| Some(v);
        assert_eq!(grid.eval(&at(100)), Ok(2));
        assert_eq!(cond.eval(&at(100)), Ok(0));
        assert_eq!(cond.eval(&at(128)), Ok(1));
        // Python floor semantics for negative operands.
        let q = SymExpr::bin(SymOp::FloorDiv, n(), int(4));
        let r = SymExpr::bin(SymOp::FloorMod, n(), int(4));
        assert_eq!((q.eval(&at(-7)), r.eval(&at(-7))), (Ok(-2), Ok(1)));
        let qn = SymExpr::bin(SymOp::FloorDiv, int(7), n());
        let rn = SymExpr::bin(SymOp::FloorMod, int(7), n());
        assert_eq!((qn.eval(&at(-2)), rn.eval(&at(-2))), (Ok(-4), Ok(-1)));
        assert!(qn.eval(&at(0)).unwrap_err().contains("division by zero"));
        assert_eq!(n().eval(&|_| None).unwrap_err(), "parameter #0 has no integer value");
        let neg = SymExpr::bin(SymOp::Sub, int(0), SymExpr::bin(SymOp::Add, n(), int(1)));
        assert_eq!(neg.text(&name), "-(n + 1)");
        let sub = SymExpr::bin(SymOp::Sub, n(), SymExpr::bin(SymOp::Sub, n(), int(1)));
        assert_eq!(sub.text(&name), "n - (n - 1)");
        assert_eq!(sub.eval(&at(i128::from(i64::MAX))), Ok(1));
    }

    #[test]
    fn scalar_values_are_typed() {
        assert_eq!(ScalarValue::Int(5).typed(DType::I32), Ok(ScalarValue::Int(5)));
        assert!(ScalarValue::Int(1 << 31).typed(DType::I32).unwrap_err().contains("outside the range of int32"));
        assert!(ScalarValue::Int(-1).typed(DType::U32).is_err());
        assert!(ScalarValue::Float(1.5).typed(DType::I64).unwrap_err().contains("takes an integer"));
        assert_eq!(ScalarValue::Int(3).typed(DType::F32), Ok(ScalarValue::Float(3.0)));
        assert_eq!(ScalarValue::Float(0.1).typed(DType::F32), Ok(ScalarValue::Float(0.1f32 as f64)));
        assert_eq!(ScalarValue::Int(-2).le_bytes(DType::I32), (-2i32).to_le_bytes().to_vec());
        assert_eq!(ScalarValue::Float(0.5).le_bytes(DType::F32), 0.5f32.to_le_bytes().to_vec());
        assert_eq!(ScalarValue::Float(0.5).le_bytes(DType::F64), 0.5f64.to_le_bytes().to_vec());
    }
}
