//! What every elementwise variant shares: the call ([`OpCall`], [`parse`]),
//! compute types and rounding, the scalar formula of each op, broadcasting and
//! scalar operands.

use crate::build::Builder;
use crate::variant::decline_rules;
use crate::variant::{CallCx, CommonRule, Decline, Emitter};
use tirx_ir::hir::{BufferRegion, ConfigKey, ConfigValue, Expr, MaskFn, MathFn, TileArg, TileOp, UnOp};
use tirx_ir::lir::round::rounded_min_arch;
use tirx_ir::lir::{LBinOp, LExpr, LStmtKind, RoundMode, RoundOp};
use tirx_ir::op::{self, AttrValue, EwiseOp, Slot};
use tirx_ir::DType;

decline_rules! {
    /// The elementwise family's decline predicates.
    pub enum EwiseRule {
        /// One operand does not split along the iters of the other.
        Align = "align",
        /// The destination of an elementwise op has no usable register layout.
        AnchorLayout = "anchor_layout",
        /// A source does not broadcast to the destination's shape.
        Broadcast = "broadcast",
        /// A source of an elementwise op has no usable register layout.
        OperandLayout = "operand_layout",
        /// The destination's thread axes do not tile the call's scope.
        ScopeLevel = "scope_level",
        /// Operands are owned by different threads.
        ThreadPart = "thread_part",
    }
}

/// A source operand: a region (broadcast to the destination) or a scalar.
#[derive(Clone, Copy, Debug)]
pub enum Operand<'a> {
    Region(&'a BufferRegion),
    Scalar(&'a Expr),
}

/// A parsed elementwise call.
#[derive(Clone, Debug)]
pub struct OpCall<'a> {
    pub op: EwiseOp,
    pub dst: &'a BufferRegion,
    /// Sources in op order: unary `[x, bias?]`, binary `[a, b]`, fma `[a, b, c]`, fill `[value]`.
    pub srcs: Vec<Operand<'a>>,
    /// Unary `scale=` (sqrt, exp, exp2, log2).
    pub scale: Option<&'a Expr>,
    /// The op's compile-time parameters beyond its operands.
    pub params: Params,
    /// `masked_fill`'s condition on the element's coordinates.
    pub mask: Option<&'a MaskFn>,
}

/// Compile-time parameters of an op, as PyTorch's keyword arguments name them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Params {
    None,
    /// `softplus(x, beta, threshold)`: linear where `beta·x > threshold`.
    Softplus {
        beta: f64,
        threshold: f64,
    },
    /// `gelu(x, approximate)`: the tanh approximation when `tanh`.
    Gelu {
        tanh: bool,
    },
    /// `exp2(x, ftz, pipe)`: subnormal results flushed to zero when `ftz`; on the FMA pipe
    /// (`MathFn::Exp2Fma`, which flushes) when `fma`.
    Exp2 {
        ftz: bool,
        fma: bool,
    },
}

impl OpCall<'_> {
    pub fn regions(&self) -> impl Iterator<Item = &BufferRegion> {
        std::iter::once(self.dst).chain(self.srcs.iter().filter_map(|s| match s {
            Operand::Region(r) => Some(*r),
            Operand::Scalar(_) => None,
        }))
    }
}

pub(super) fn operand<'a>(cx: &CallCx<'a>, slot: &Slot) -> Option<Operand<'a>> {
    match cx.arg(slot) {
        Some(TileArg::Region(r)) => Some(Operand::Region(r)),
        Some(TileArg::Scalar(e)) => Some(Operand::Scalar(e)),
        _ => None,
    }
}

pub(super) fn commutative(op: EwiseOp) -> bool {
    matches!(op, EwiseOp::Add | EwiseOp::Mul | EwiseOp::Maximum | EwiseOp::Minimum)
}

/// The call's operands by the op's signature (`spec.parse`, §4).
pub fn parse<'a>(cx: &CallCx<'a>) -> Result<OpCall<'a>, Decline> {
    let TileOp::Ewise(op) = cx.call.op else {
        return Err(Decline::new(CommonRule::Parse, format!("`{}` is not an elementwise op", cx.call.op.name())));
    };
    let dst = cx.region(&op::DST).ok_or_else(|| {
        Decline::new(CommonRule::Parse, format!("the destination of `{}` must be a buffer region", op.name()))
    })?;
    let need = |slot: &Slot, what: &str| {
        operand(cx, slot)
            .ok_or_else(|| Decline::new(CommonRule::Parse, format!("`{}` is missing its {what}", op.name())))
    };
    let mut scale = None;
    let mut params = Params::None;
    let mut mask = None;
    let srcs = match op {
        EwiseOp::Zero => vec![],
        EwiseOp::Fill => vec![need(&op::VALUE, "value")?],
        EwiseOp::Reciprocal | EwiseOp::Silu | EwiseOp::Tanh | EwiseOp::Sigmoid | EwiseOp::Erf => {
            vec![need(&op::SRC_INPLACE, "source")?]
        }
        EwiseOp::Softplus => {
            params = softplus_params(cx)?;
            vec![need(&op::SRC_INPLACE, "source")?]
        }
        EwiseOp::Gelu => {
            params = Params::Gelu {
                tanh: matches!(cx.arg(&op::APPROXIMATE), Some(TileArg::Attr(AttrValue::Choice("tanh")))),
            };
            vec![need(&op::SRC_INPLACE, "source")?]
        }
        EwiseOp::Cast => match need(&op::SRC_REGION, "source")? {
            r @ Operand::Region(_) => vec![r],
            Operand::Scalar(_) => {
                return Err(Decline::new(
                    CommonRule::Parse,
                    "cast src must be a buffer region; use `fill` for a constant",
                ))
            }
        },
        EwiseOp::Sqrt | EwiseOp::Exp | EwiseOp::Exp2 | EwiseOp::Log2 => {
            if op == EwiseOp::Exp2 {
                params = exp2_params(cx)?;
            }
            scale = cx.scalar(&op::SCALE);
            let mut v = vec![need(&op::SRC_INPLACE, "source")?];
            v.extend(operand(cx, &op::BIAS));
            v
        }
        EwiseOp::Add | EwiseOp::Sub | EwiseOp::Mul | EwiseOp::Fdiv | EwiseOp::Maximum | EwiseOp::Minimum => {
            let (a, b) = (need(&op::LHS, "lhs")?, need(&op::RHS, "rhs")?);
            match (a, b) {
                (Operand::Scalar(_), Operand::Scalar(_)) => {
                    return Err(Decline::new(
                        CommonRule::Parse,
                        "both inputs are constants; use `fill` with the computed value",
                    ))
                }
                (Operand::Scalar(_), _) if commutative(op) => vec![b, a],
                (Operand::Scalar(_), _) => {
                    return Err(Decline::new(
                        CommonRule::Parse,
                        format!("non-commutative op {} cannot have a constant lhs", op.name()),
                    ))
                }
                _ => vec![a, b],
            }
        }
        EwiseOp::Fma => vec![need(&op::FMA_A, "a")?, need(&op::FMA_B, "scale (b)")?, need(&op::FMA_C, "bias (c)")?],
        EwiseOp::MaskedFill => {
            let Some(TileArg::Mask(m)) = cx.arg(&op::MASK) else {
                return Err(Decline::new(CommonRule::Parse, "masked_fill needs `mask=lambda i, j: ...`"));
            };
            if m.params.len() != dst.ranges.len() {
                return Err(Decline::new(
                    CommonRule::Parse,
                    format!(
                        "the mask takes {} coordinate(s) but the region has {} dim(s): one parameter per dim",
                        m.params.len(),
                        dst.ranges.len()
                    ),
                ));
            }
            mask = Some(m);
            vec![need(&op::SRC_REGION, "source")?, need(&op::VALUE, "value")?]
        }
    };
    Ok(OpCall { op, dst, srcs, scale, params, mask })
}

/// `ftz=` and `pipe=`: the FMA pipe's exp2 flushes its subnormal results, so it is asked for
/// with `ftz=True` (a call that reads as exact-to-the-subnormals is not silently flushed).
fn exp2_params(cx: &CallCx) -> Result<Params, Decline> {
    let ftz = matches!(cx.arg(&op::FTZ), Some(TileArg::Attr(AttrValue::Bool(true))));
    let fma = matches!(cx.arg(&op::PIPE), Some(TileArg::Attr(AttrValue::Choice("fma"))));
    if fma && !ftz {
        return Err(Decline::new(
            CommonRule::Parse,
            "exp2 `pipe=\"fma\"` flushes results below 2^-126 to zero: pass `ftz=True` with it",
        ));
    }
    Ok(Params::Exp2 { ftz, fma })
}

/// `beta=` (1 when absent) and `threshold=` (20 when absent), PyTorch's
/// defaults: compile-time constants, `beta` non-zero.
fn softplus_params(cx: &CallCx) -> Result<Params, Decline> {
    let constant = |slot: &Slot, absent: f64| match cx.scalar(slot) {
        None => Ok(absent),
        Some(e) => crate::expr::constant(e).ok_or_else(|| {
            Decline::new(CommonRule::Parse, format!("softplus `{}=` must be a compile-time number", slot.name()))
        }),
    };
    let (beta, threshold) = (constant(&op::BETA, 1.0)?, constant(&op::THRESHOLD, 20.0)?);
    if beta == 0.0 || !beta.is_finite() {
        return Err(Decline::new(
            CommonRule::Parse,
            format!("softplus `beta={beta}`: beta is a finite non-zero number"),
        ));
    }
    Ok(Params::Softplus { beta, threshold })
}

/// Ops computed in f32 whatever their operand types, rounded once to the
/// destination (`docs/numerics.md` §1): the 16-bit types have no correctly
/// rounded division, and their `hexp`/`hsqrt`/... round in every step.
pub fn f32_compute(op: EwiseOp) -> bool {
    matches!(
        op,
        EwiseOp::Reciprocal
            | EwiseOp::Sqrt
            | EwiseOp::Exp
            | EwiseOp::Exp2
            | EwiseOp::Log2
            | EwiseOp::Silu
            | EwiseOp::Fdiv
            | EwiseOp::Tanh
            | EwiseOp::Sigmoid
            | EwiseOp::Softplus
            | EwiseOp::Erf
            | EwiseOp::Gelu
    )
}

/// The ops `rounding_mode=` applies to: one IEEE-rounded operation each.
pub(super) const ROUNDED_OPS: &[EwiseOp] =
    &[EwiseOp::Add, EwiseOp::Sub, EwiseOp::Mul, EwiseOp::Fdiv, EwiseOp::Reciprocal, EwiseOp::Fma, EwiseOp::Cast];

pub(super) const ROUNDING_SUPPORT: &str =
    "rounding_mode is supported on add, sub, mul, fdiv, reciprocal and fma (rn on every \
     type; rz, rm, rp when computed in float32) and on cast (every mode)";

/// The call's `rounding_mode=` (PTX names), if given: the one reader of the key.
pub fn rounding_mode(cx: &CallCx) -> Option<RoundMode> {
    match cx.call.config(ConfigKey::RoundingMode)?.value {
        ConfigValue::Rounding(m) => Some(m),
        _ => None,
    }
}

/// How `op` computed in `compute` rounds (`docs/numerics.md` §4): to nearest
/// unless `requested`; every mode on f32 arithmetic and on casts, `rn` on
/// 16-bit arithmetic, none on the other ops.
pub fn rounding(op: EwiseOp, compute: DType, requested: Option<RoundMode>) -> Result<RoundMode, Decline> {
    let Some(mode) = requested else { return Ok(RoundMode::Rn) };
    let name = op.name();
    if !ROUNDED_OPS.contains(&op) {
        return Err(Decline::new(CommonRule::Config, format!("rounding_mode='{mode}' on {name}: {ROUNDING_SUPPORT}")));
    }
    if mode != RoundMode::Rn && op != EwiseOp::Cast && compute != DType::F32 {
        return Err(Decline::new(
            CommonRule::Config,
            format!(
                "rounding_mode='{mode}' on {compute} {name}: the GPU has no {compute} {name} with directed rounding; {ROUNDING_SUPPORT}"
            ),
        ));
    }
    Ok(mode)
}

pub(super) fn fbin(op: LBinOp, a: LExpr, b: LExpr) -> LExpr {
    LExpr::bin(op, a, b)
}

/// `a op b` rounded in `mode`: the plain operator to nearest, the rounded
/// instruction in a directed mode (only f32 arithmetic gets one).
pub(super) fn arith(op: RoundOp, mode: RoundMode, a: LExpr, b: LExpr) -> LExpr {
    let bin = match op {
        RoundOp::Add => LBinOp::Add,
        RoundOp::Sub => LBinOp::Sub,
        RoundOp::Mul => LBinOp::Mul,
        _ => LBinOp::Div,
    };
    if mode == RoundMode::Rn {
        fbin(bin, a, b)
    } else {
        LExpr::Rounded(op, mode, vec![a, b])
    }
}

/// `value` converted to the destination type `to`; an f32 narrowed in a
/// directed mode converts in that mode (directed roundings compose: the
/// result is the exact value rounded once that way).
pub(crate) fn convert(b: &Builder, value: LExpr, to: DType, mode: RoundMode) -> LExpr {
    if mode != RoundMode::Rn && b.dtype_of(&value) == DType::F32 && matches!(to, DType::F16 | DType::BF16) {
        LExpr::Rounded(RoundOp::Cvt(to), mode, vec![value])
    } else {
        b.convert(value, to)
    }
}

/// The value of one destination element in the compute type `ct`: `x` are the
/// sources (already in `ct`), `scale` the unary scale (in `ct`); arithmetic
/// rounds in `mode` ([`rounding`]), `fma` always once.
pub fn scalar(op: EwiseOp, params: Params, x: &[LExpr], scale: Option<LExpr>, ct: DType, mode: RoundMode) -> LExpr {
    let one = LExpr::Float(1.0, ct);
    let c = |v: f64| LExpr::Float(v, ct);
    let f = |g: MathFn, a: LExpr| LExpr::Math(g, vec![a]);
    let math = |f: MathFn| {
        let mut arg = x[0].clone();
        if let Some(s) = scale.clone() {
            arg = fbin(LBinOp::Mul, arg, s);
        }
        if let Some(bias) = x.get(1) {
            arg = fbin(LBinOp::Add, arg, bias.clone());
        }
        LExpr::Math(f, vec![arg])
    };
    match op {
        EwiseOp::Zero => LExpr::Float(0.0, ct),
        EwiseOp::Fill | EwiseOp::Cast => x[0].clone(),
        EwiseOp::Reciprocal => arith(RoundOp::Div, mode, one, x[0].clone()),
        EwiseOp::Sqrt => math(MathFn::Sqrt),
        EwiseOp::Exp => math(MathFn::Exp),
        EwiseOp::Exp2 if params == (Params::Exp2 { ftz: true, fma: true }) => math(MathFn::Exp2Fma),
        EwiseOp::Exp2 if params == (Params::Exp2 { ftz: true, fma: false }) => math(MathFn::Exp2Ftz),
        EwiseOp::Exp2 => math(MathFn::Exp2),
        EwiseOp::Log2 => math(MathFn::Log2),
        // x / (1 + exp(-x))
        EwiseOp::Silu => {
            let e = LExpr::Math(MathFn::Exp, vec![LExpr::Un(UnOp::Neg, Box::new(x[0].clone()))]);
            fbin(LBinOp::Div, x[0].clone(), fbin(LBinOp::Add, one, e))
        }
        EwiseOp::Add => arith(RoundOp::Add, mode, x[0].clone(), x[1].clone()),
        EwiseOp::Sub => arith(RoundOp::Sub, mode, x[0].clone(), x[1].clone()),
        EwiseOp::Mul => arith(RoundOp::Mul, mode, x[0].clone(), x[1].clone()),
        EwiseOp::Fdiv => arith(RoundOp::Div, mode, x[0].clone(), x[1].clone()),
        EwiseOp::Maximum => fbin(LBinOp::Max, x[0].clone(), x[1].clone()),
        EwiseOp::Minimum => fbin(LBinOp::Min, x[0].clone(), x[1].clone()),
        EwiseOp::Fma => LExpr::Rounded(RoundOp::Fma, mode, x[..3].to_vec()),
        // x[2]: the mask's condition at the element (`reg` appends it).
        EwiseOp::MaskedFill => LExpr::Select(Box::new(x[2].clone()), Box::new(x[1].clone()), Box::new(x[0].clone())),
        EwiseOp::Tanh => f(MathFn::Tanh, x[0].clone()),
        EwiseOp::Erf => f(MathFn::Erf, x[0].clone()),
        EwiseOp::Sigmoid => sigmoid(x[0].clone(), ct),
        // beta·x > threshold ? x : log1p(exp(beta·x)) / beta (PyTorch's formula)
        EwiseOp::Softplus => {
            let (beta, threshold) = match params {
                Params::Softplus { beta, threshold } => (beta, threshold),
                _ => (1.0, 20.0),
            };
            let bx = if beta == 1.0 { x[0].clone() } else { fbin(LBinOp::Mul, x[0].clone(), c(beta)) };
            let soft = f(MathFn::Log1p, f(MathFn::Exp, bx.clone()));
            let soft = if beta == 1.0 { soft } else { fbin(LBinOp::Div, soft, c(beta)) };
            LExpr::Select(Box::new(fbin(LBinOp::Gt, bx, c(threshold))), Box::new(x[0].clone()), Box::new(soft))
        }
        // Written so that nothing cancels where the result is tiny (x very negative):
        // x·Φ(x) = 0.5·x·erfc(-x/√2), and PyTorch's tanh form 0.5·x·(1 + tanh(u)),
        // u = √(2/π)·(x + 0.044715·x³), as x / (1 + exp(-2u)).
        EwiseOp::Gelu if params == (Params::Gelu { tanh: true }) => {
            let x0 = x[0].clone();
            let cube = fbin(LBinOp::Mul, fbin(LBinOp::Mul, x0.clone(), x0.clone()), x0.clone());
            let arg = fbin(LBinOp::Add, x0.clone(), fbin(LBinOp::Mul, c(0.044715), cube));
            let two_u = fbin(LBinOp::Mul, c(std::f64::consts::FRAC_2_SQRT_PI * std::f64::consts::SQRT_2), arg);
            fbin(LBinOp::Mul, x0, sigmoid(two_u, ct))
        }
        EwiseOp::Gelu => {
            let x0 = x[0].clone();
            let tail = f(MathFn::Erfc, fbin(LBinOp::Mul, x0.clone(), c(-std::f64::consts::FRAC_1_SQRT_2)));
            fbin(LBinOp::Mul, fbin(LBinOp::Mul, x0, c(0.5)), tail)
        }
    }
}

/// `1 / (1 + exp(-t))` without overflow: `exp(-|t|)` never exceeds 1, and for
/// negative `t` the result is `e / (1 + e)` (tiny results underflow gradually instead
/// of flushing to 0 through an infinite `exp`).
fn sigmoid(t: LExpr, ct: DType) -> LExpr {
    let one = LExpr::Float(1.0, ct);
    let e = LExpr::Math(MathFn::Exp, vec![LExpr::Un(UnOp::Neg, Box::new(LExpr::Math(MathFn::Abs, vec![t.clone()])))]);
    let denom = fbin(LBinOp::Add, one.clone(), e.clone());
    let nonneg = fbin(LBinOp::Ge, t, LExpr::Float(0.0, ct));
    LExpr::Select(
        Box::new(nonneg),
        Box::new(fbin(LBinOp::Div, one, denom.clone())),
        Box::new(fbin(LBinOp::Div, e, denom)),
    )
}

/// f32 for the ops [`f32_compute`] names; else the widest region dtype, f32
/// when 16-bit types of different formats meet.
pub(crate) fn compute_type(cx: &CallCx, call: &OpCall) -> DType {
    // (A float8 operand, `fill`'s: the value in float32, rounded once as it is stored.)
    if f32_compute(call.op) || call.regions().any(|r| matches!(cx.buf(r.buf).dtype, DType::F8E4M3 | DType::F8E5M2)) {
        return DType::F32;
    }
    let mut types = call.regions().map(|r| cx.buf(r.buf).dtype);
    let first = types.next().unwrap_or(DType::F32);
    if types.all(|t| t == first) {
        first
    } else {
        DType::F32
    }
}

/// A 16-bit fma rounds once only with the `fma.rn` instruction of its type
/// (bf16: sm_80); older targets decline rather than round twice.
pub(crate) fn fma_arch(cx: &CallCx, op: EwiseOp, compute: DType) -> Result<(), Decline> {
    let need = rounded_min_arch(RoundOp::Fma, compute);
    if op == EwiseOp::Fma && !cx.opts.arch.supports(need) {
        return Err(Decline::new(
            CommonRule::Arch,
            format!(
                "{compute} fma needs {need} (one rounding: fma.rn; older targets would round twice); target is {}",
                cx.opts.arch
            ),
        ));
    }
    Ok(())
}

/// NumPy right-aligned broadcast of the region shape to the destination's:
/// the operand's extents padded with leading 1s (extra leading unit dims dropped).
pub(crate) fn broadcast_shape(r: &BufferRegion, dst_ext: &[i64], name: &str) -> Result<Vec<i64>, String> {
    let mut ext: Vec<i64> = r.ranges.iter().map(|g| g.extent).collect();
    while ext.len() > dst_ext.len() && ext[0] == 1 {
        ext.remove(0);
    }
    if ext.len() > dst_ext.len() {
        return Err(format!("`{name}` region rank {} > anchor rank {}", ext.len(), dst_ext.len()));
    }
    let mut shape = vec![1; dst_ext.len() - ext.len()];
    shape.extend(ext);
    for (d, (&o, &e)) in shape.iter().zip(dst_ext).enumerate() {
        if o != e && o != 1 {
            return Err(format!("shape incompat: dim {d}: `{name}` extent {o} vs anchor {e} (need equal or 1)"));
        }
    }
    Ok(shape)
}

/// How a call computes: its compute type and rounding, checked against the
/// target. Both variants decide these the same way, after their operand checks.
pub(crate) fn numerics(cx: &CallCx, call: &OpCall) -> Result<(DType, RoundMode), Decline> {
    let compute = compute_type(cx, call);
    let rounding = rounding(call.op, compute, rounding_mode(cx))?;
    fma_arch(cx, call.op, compute)?;
    Ok((compute, rounding))
}

/// The call's scalar operands (`None` for regions) in type `t`, then its
/// `scale=` in `compute`: evaluated once, before a variant's loops.
pub(crate) fn scalar_values(
    em: &mut Emitter,
    call: &OpCall,
    t: DType,
    compute: DType,
) -> Result<(Vec<Option<LExpr>>, Option<LExpr>), Decline> {
    let mut scalars = Vec::with_capacity(call.srcs.len());
    for s in &call.srcs {
        scalars.push(match s {
            Operand::Scalar(e) => Some(scalar_value(em, e, t)?),
            Operand::Region(_) => None,
        });
    }
    let scale = match call.scale {
        Some(e) => Some(scalar_value(em, e, compute)?),
        None => None,
    };
    Ok((scalars, scale))
}

/// A scalar operand in type `t`, bound to a `let` unless it is a constant.
pub(crate) fn scalar_value(em: &mut Emitter, e: &tirx_ir::hir::Expr, t: DType) -> Result<LExpr, Decline> {
    let v = em.expr(e)?;
    let v = em.builder().convert(v, t);
    if matches!(v, LExpr::Float(..) | LExpr::Int(..) | LExpr::Var(_)) {
        return Ok(v);
    }
    let var = em.var("x", t, None);
    em.push(LStmtKind::Let { var, value: v });
    Ok(LExpr::Var(var))
}
